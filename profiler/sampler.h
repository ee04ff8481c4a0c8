// profiler: the background sampler of one process. Every interval it reads the process's
// CPU time (user/system, and per named thread), every core's CPU time, RSS and peak RSS,
// context switches and storage I/O, the rx/tx bytes, packets, errors and drops of every
// network interface of the process's namespace, and host-wide CPU split, memory, load,
// context switches, TCP segments and disk bytes (and GPUs through NVML when given one), and
// appends one SystemSample to an in-memory series that the sinks (CSV, trace, TensorBoard,
// Prometheus, summary) read. docs/profiler.md maps each figure to its /proc source.
// Thread-safety: all public methods are thread-safe; the sampling runs on its own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "profiler/nvml.h"
#include "profiler/proc_stats.h"
#include "profiler/socket_stats.h"

namespace fulcrum::profiler {

// One interface in one sample. Totals count from the sampler's first sample (the baseline),
// survive counter wrap-around, and stay with an interface that vanished (it is then no
// longer listed; its bytes remain in the sampler's totals). A new interface starts at 0.
struct InterfaceSample {
  std::string name;
  bool loopback = false;  // "lo"
  uint64_t rx_bytes = 0;  // since the baseline
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  double rx_bytes_per_sec = 0.0;  // over the interval ending at this sample
  double tx_bytes_per_sec = 0.0;
  double rx_packets_per_sec = 0.0;
  double tx_packets_per_sec = 0.0;
  uint64_t rx_errors = 0;  // since the baseline, like the byte totals
  uint64_t tx_errors = 0;
  uint64_t rx_drops = 0;
  uint64_t tx_drops = 0;
};

// The threads of the process that share one name (comm: "fulcrum-pool", "grpcpp_sync_ser"),
// over the interval ending at the sample. A thread born during the interval counts from 0;
// the last interval of a thread that ended is lost (as in pidstat -t).
struct ThreadSample {
  std::string name;
  int threads = 0;            // listed at this sample
  double user_percent = 0.0;  // 100 = one full core
  double system_percent = 0.0;
  double cpu_percent() const { return user_percent + system_percent; }
};

// Host-wide figures (the machine's, whatever process is sampled; TCP is the network
// namespace's). Percentages are of all cores together (100 = every core busy), like sar -u.
// Totals count from the baseline; rates are over the interval ending at the sample.
struct HostSample {
  double cpu_user_percent = 0.0;  // user + nice
  double cpu_system_percent = 0.0;
  double cpu_iowait_percent = 0.0;
  double cpu_idle_percent = 0.0;
  int64_t mem_total_bytes = 0;
  int64_t mem_used_bytes = 0;  // total - free - buffers - cached - slab (sar's kbmemused)
  int64_t mem_free_bytes = 0;
  int64_t mem_available_bytes = 0;
  int64_t mem_cached_bytes = 0;
  int64_t mem_buffers_bytes = 0;
  double load1 = 0.0;
  double load5 = 0.0;
  double load15 = 0.0;
  uint64_t context_switches = 0;
  double context_switches_per_sec = 0.0;
  uint64_t tcp_in_segs = 0;
  uint64_t tcp_out_segs = 0;
  uint64_t tcp_retrans_segs = 0;
  double tcp_in_segs_per_sec = 0.0;
  double tcp_out_segs_per_sec = 0.0;
  double tcp_retrans_segs_per_sec = 0.0;
  uint64_t disk_read_bytes = 0;  // whole disks (IsWholeDisk, host_stats.h)
  uint64_t disk_write_bytes = 0;
  double disk_read_bytes_per_sec = 0.0;
  double disk_write_bytes_per_sec = 0.0;
};

struct SystemSample {
  double seconds = 0.0;             // since the baseline sample (monotonic clock)
  int64_t unix_micros = 0;          // wall-clock time of the sample
  double cpu_percent = 0.0;         // process user+sys over the interval; 100 = one full core
  double cpu_seconds = 0.0;         // process user+sys since the process started
  double cpu_user_percent = 0.0;    // the user part of cpu_percent
  double cpu_system_percent = 0.0;  // the system part
  // Per core, indexed by N of "cpuN": busy share of that core over the interval (0..100; an
  // offline core reads 0).
  std::vector<double> core_percent;
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;               // VmHWM
  std::vector<InterfaceSample> interfaces;  // in /proc/net/dev order
  // Process context switches (/proc/self/status: the main thread's, as pidstat -w) and bytes
  // it read from / wrote to storage (/proc/self/io), since the baseline; rates per second.
  uint64_t voluntary_switches = 0;
  uint64_t nonvoluntary_switches = 0;
  double voluntary_switches_per_sec = 0.0;
  double nonvoluntary_switches_per_sec = 0.0;
  uint64_t io_read_bytes = 0;
  uint64_t io_write_bytes = 0;
  double io_read_bytes_per_sec = 0.0;
  double io_write_bytes_per_sec = 0.0;
  std::vector<ThreadSample> threads;  // by name
  HostSample host;
  std::vector<GpuReading> gpus;  // empty without NVML
  // The process's own TCP connections since the baseline (socket_stats.h), when the sampler
  // reads them (SetSocketReader); a failed reading keeps the previous figures.
  bool has_tcp = false;
  SocketTotals tcp_loopback;
  SocketTotals tcp_external;
};

// Per-interface totals over the whole sampled run (including interfaces that vanished).
struct InterfaceTotals {
  std::string name;
  bool loopback = false;
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_errors = 0;
  uint64_t tx_errors = 0;
  uint64_t rx_drops = 0;
  uint64_t tx_drops = 0;
};

class Sampler {
 public:
  // `source` is owned. `interval` > 0 (else Start() is InvalidArgument). `now` returns the
  // monotonic time (tests may step it; it then also gives unix_micros); null = the system's
  // steady clock for `seconds` and rates, absl::Now() for unix_micros.
  Sampler(std::unique_ptr<ProcSource> source, absl::Duration interval,
          std::function<absl::Time()> now = nullptr);
  ~Sampler();  // Stop()s

  // Takes the baseline sample (seconds = 0, rates 0) and starts the sampling thread.
  // An unreadable /proc file is an error here (Unavailable naming it), never later: a sample
  // whose file vanished later keeps the previous figures for that part. FailedPrecondition
  // while running; after Stop() it may start again (the series goes on).
  absl::Status Start();
  // Takes one final sample and joins the thread; waits at most one interval plus a read.
  // Idempotent.
  void Stop();

  // Takes one sample now, on the caller's thread (tests drive a Sampler without Start()'s
  // thread by calling SampleNow() after a manual baseline with SampleNow()). The baseline
  // fails as Start() does on an unreadable file; later samples keep the previous figures of
  // such a part and return OK.
  absl::Status SampleNow();

  std::vector<SystemSample> Samples() const;  // a copy of the series
  bool Latest(SystemSample* out) const;       // false before the first sample
  std::vector<InterfaceTotals> Totals() const;
  // The TCP connections as of the latest sample (SocketTrack::Connections); empty without a
  // socket reader.
  std::vector<ConnectionTotals> Connections() const;
  // Called after each sample is stored (e.g. Prometheus gauges, trace counters), on the thread
  // that took it: the sampling thread, or the caller of Start(), Stop() or SampleNow(). Calls
  // never overlap; the listener may read Samples()/Latest()/Totals() but must not call
  // SampleNow(), Start() or Stop(). Set before Start().
  void SetListener(std::function<void(const SystemSample&)> listener);
  // GPUs to read at every sample (owned); null = none. Set before Start().
  void SetGpus(std::unique_ptr<NvmlGpus> gpus);
  // Reads the process's TCP connections at every sample (ReadOwnTcpSockets for the running
  // process); null = none. Set before Start().
  using SocketReader = std::function<absl::StatusOr<std::vector<SocketReading>>()>;
  void SetSocketReader(SocketReader reader);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fulcrum::profiler
