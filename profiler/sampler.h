// profiler: the background sampler of one process. Every interval it reads the process's
// CPU time, every core's CPU time, RSS and peak RSS, and the rx/tx bytes and packets of
// every network interface of the process's namespace, and appends one SystemSample to an
// in-memory series that the sinks (CSV, trace, TensorBoard, Prometheus, summary) read.
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
#include "profiler/proc_stats.h"

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
};

struct SystemSample {
  double seconds = 0.0;      // since the baseline sample (monotonic clock)
  int64_t unix_micros = 0;   // wall-clock time of the sample
  double cpu_percent = 0.0;  // process user+sys over the interval; 100 = one full core
  double cpu_seconds = 0.0;  // process user+sys since the process started
  // Per core, indexed by N of "cpuN": busy share of that core over the interval (0..100; an
  // offline core reads 0).
  std::vector<double> core_percent;
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;               // VmHWM
  std::vector<InterfaceSample> interfaces;  // in /proc/net/dev order
};

// Per-interface totals over the whole sampled run (including interfaces that vanished).
struct InterfaceTotals {
  std::string name;
  bool loopback = false;
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
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
  // Called after each sample is stored (e.g. Prometheus gauges, trace counters), on the thread
  // that took it: the sampling thread, or the caller of Start(), Stop() or SampleNow(). Calls
  // never overlap; the listener may read Samples()/Latest()/Totals() but must not call
  // SampleNow(), Start() or Stop(). Set before Start().
  void SetListener(std::function<void(const SystemSample&)> listener);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fulcrum::profiler
