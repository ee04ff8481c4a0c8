// profiler: the sampler's reading of the figures beyond process CPU, memory and interface
// bytes (sampler.h lists them): which /proc files, and how successive readings become a
// SystemSample's totals and rates. Internal to sampler.cc; kept apart so each stays short.
// Thread-safety: used by one thread at a time (under the sampler's sample lock).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "profiler/host_stats.h"
#include "profiler/nvml.h"
#include "profiler/proc_stats.h"
#include "profiler/sampler.h"

namespace fulcrum::profiler::internal {

// Reads /proc file `name` and parses it into *out. Unavailable when it cannot be read (gone,
// permission: the sampler cannot get the figure), the parser's error when it does not parse.
template <typename T>
absl::Status ReadPart(ProcSource& source, absl::string_view name,
                      absl::StatusOr<T> (*parse)(absl::string_view), std::optional<T>* out) {
  absl::StatusOr<std::string> text = source.Read(name);
  if (!text.ok()) return absl::UnavailableError(text.status().message());
  absl::StatusOr<T> parsed = parse(*text);
  if (!parsed.ok()) return parsed.status();
  *out = *std::move(parsed);
  return absl::OkStatus();
}

// One sample's view of a ProcSource: each file is read once, however many parsers read it
// (the sampler's and the breadth's both parse /proc/stat and /proc/self/status). Lives for
// one sample.
class OnceProcSource final : public ProcSource {
 public:
  explicit OnceProcSource(ProcSource* source) : source_(source) {}
  absl::StatusOr<std::string> Read(absl::string_view name) override;
  int64_t ClockTicksPerSecond() const override { return source_->ClockTicksPerSecond(); }
  absl::StatusOr<std::vector<std::string>> List(absl::string_view name) override {
    return source_->List(name);
  }

 private:
  ProcSource* source_;
  std::map<std::string, absl::StatusOr<std::string>, std::less<>> read_;
};

// One thread's reading: its id and /proc/self/task/TID/stat.
struct ThreadReading {
  std::string tid;
  ThreadTimes times;
};

// The extra files read at one moment; a part is empty when it could not be read or parsed.
struct BreadthReadings {
  std::optional<HostCpuTimes> host_cpu;
  std::optional<HostMemory> memory;
  std::optional<LoadAverage> load;
  std::optional<TcpCounters> tcp;
  std::optional<std::vector<DiskCounters>> disks;
  std::optional<ProcessIo> io;
  std::optional<ContextSwitches> switches;
  std::optional<std::vector<ThreadReading>> threads;
  std::optional<std::vector<GpuReading>> gpus;
};

// The parts of BreadthReadings in order, for the sampler's once-only failure logging.
inline constexpr int kBreadthParts = 9;

// Reads every part (GPUs only when `gpus` is set); the status of each part, in field order.
std::vector<absl::Status> ReadBreadth(ProcSource& source, NvmlGpus* gpus, BreadthReadings* out);

// A kernel counter followed from the baseline: totals survive wrap-around (CounterDelta).
class CounterTrack {
 public:
  // The increase since the last call (0 at the first).
  uint64_t Advance(uint64_t value);
  uint64_t total() const { return total_; }

 private:
  bool has_ = false;
  uint64_t last_ = 0;
  uint64_t total_ = 0;
};

// Turns successive BreadthReadings into the matching SystemSample fields; a part that could
// not be read keeps `last`'s figures.
class BreadthBuilder {
 public:
  explicit BreadthBuilder(double ticks_per_second) : ticks_per_second_(ticks_per_second) {}
  void Add(const BreadthReadings& r, absl::Time now, const SystemSample& last, SystemSample* out);

 private:
  // The seconds since part `part` was last read, and records `now` as its read time.
  double Elapsed(int part, absl::Time now);
  void AddHostCpu(const BreadthReadings& r, const SystemSample& last, SystemSample* out);
  // Context switches, TCP segments and disk bytes of the host (after AddHostCpu).
  void AddHostCounters(const BreadthReadings& r, absl::Time now, SystemSample* out);
  // The process's storage bytes and context switches.
  void AddProcessCounters(const BreadthReadings& r, absl::Time now, const SystemSample& last,
                          SystemSample* out);
  void AddThreads(const BreadthReadings& r, absl::Time now, const SystemSample& last,
                  SystemSample* out);

  const double ticks_per_second_;
  std::map<int, absl::Time> read_at_;
  std::optional<HostCpuTimes> host_cpu_;
  CounterTrack ctxt_, tcp_in_, tcp_out_, tcp_retrans_;
  CounterTrack io_read_, io_write_, voluntary_, nonvoluntary_;
  std::map<std::string, CounterTrack> disk_reads_, disk_writes_;  // per whole disk
  std::map<std::string, ThreadTimes> threads_;                    // by tid, at the last reading
  bool threads_baseline_ = true;
};

}  // namespace fulcrum::profiler::internal
