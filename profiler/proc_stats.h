// profiler: readers of the kernel's per-process and per-namespace counters in /proc
// (/proc/self/stat, /proc/stat, /proc/self/status, /proc/net/dev), behind a small ProcSource
// interface so tests can feed recorded files, and the parsers that turn their text into
// numbers. Thread-safety: the parsers are pure functions; a ProcSource is used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fulcrum::profiler {

// Where /proc text comes from. `name` is a path relative to /proc: "self/stat", "stat",
// "self/status", "self/io", "self/task/TID/stat", "net/dev", "net/snmp", "meminfo",
// "loadavg", "diskstats".
class ProcSource {
 public:
  virtual ~ProcSource() = default;
  // The whole file's text; NotFound/Unavailable naming the file when it cannot be read.
  virtual absl::StatusOr<std::string> Read(absl::string_view name) = 0;
  // Clock ticks per second of the times in stat files (sysconf(_SC_CLK_TCK) live).
  virtual int64_t ClockTicksPerSecond() const = 0;
  // The names of the entries of directory `name` ("self/task"), unsorted, without "." and
  // "..". NotFound/Unavailable naming the directory when it cannot be listed.
  virtual absl::StatusOr<std::vector<std::string>> List(absl::string_view name) = 0;
};

// The running process's own /proc (its network namespace's /proc/net/dev).
std::unique_ptr<ProcSource> LiveProcSource();
// Another process's /proc as if it were "self": "self/..." reads /proc/PID/..., and "net/..."
// reads /proc/PID/net/... (the network namespace of that process); host-wide files ("stat",
// "meminfo", ...) are the machine's. For fulcrum_monitor --watch_pids.
std::unique_ptr<ProcSource> PidProcSource(int pid);
// Recorded files under `dir` (dir/self/stat, dir/stat, dir/self/status, dir/net/dev), for
// tests; `ticks_per_second` stands in for sysconf(_SC_CLK_TCK).
std::unique_ptr<ProcSource> DirProcSource(std::string dir, int64_t ticks_per_second = 100);

// /proc/self/stat: user and system CPU time of the process, in clock ticks (fields 14, 15).
struct ProcessTimes {
  uint64_t user_ticks = 0;
  uint64_t system_ticks = 0;
};
// InvalidArgument naming the field on malformed text (the comm field may hold spaces and ')').
absl::StatusOr<ProcessTimes> ParseSelfStat(absl::string_view text);

// /proc/stat "cpuN" lines (not the aggregate "cpu" line): jiffies per state of each core.
struct CoreTimes {
  int core = 0;        // N of "cpuN"
  uint64_t busy = 0;   // user + nice + system + irq + softirq + steal
  uint64_t total = 0;  // busy + idle + iowait
};
absl::StatusOr<std::vector<CoreTimes>> ParseCpuStat(absl::string_view text);

// /proc/self/status VmRSS and VmHWM, converted from kB to bytes.
struct MemoryStatus {
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;
};
absl::StatusOr<MemoryStatus> ParseSelfStatus(absl::string_view text);

// One /proc/net/dev row.
struct InterfaceCounters {
  std::string name;  // "lo", "eth0", "veth-h1", ...
  uint64_t rx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_errors = 0;  // "errs"
  uint64_t rx_drops = 0;   // "drop"
  uint64_t tx_errors = 0;
  uint64_t tx_drops = 0;
};
absl::StatusOr<std::vector<InterfaceCounters>> ParseNetDev(absl::string_view text);

// Increase of a monotonically increasing kernel counter from `before` to `after`. A counter
// that went backwards wrapped: at 2^32 when both values fit in 32 bits (older drivers), at
// 2^64 otherwise.
uint64_t CounterDelta(uint64_t before, uint64_t after);

}  // namespace fulcrum::profiler
