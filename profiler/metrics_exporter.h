// profiler: the Prometheus endpoint of one process (--metrics_port), served by Debian's
// prometheus-cpp (a Registry and its pull Exposer; no hand-written HTTP). Conventional names:
//   process_cpu_seconds_total, process_resident_memory_bytes,
//   process_resident_memory_max_bytes, fulcrum_cpu_core_utilization_ratio{core},
//   fulcrum_network_receive_bytes_total{device}, fulcrum_network_transmit_bytes_total{device},
//   fulcrum_network_receive_packets_total{device}, fulcrum_network_transmit_packets_total{device},
//   fulcrum_rpc_sent_bytes_total{peer,method}, fulcrum_rpc_received_bytes_total{peer,method},
//   fulcrum_rpcs_total{peer,method},
//   fulcrum_step_examples_per_second, fulcrum_steps_total, fulcrum_examples_total,
//   fulcrum_step_loss, fulcrum_global_step, fulcrum_ps_pushes_applied_total,
//   fulcrum_ps_pushes_dropped_total, fulcrum_test_accuracy, fulcrum_test_loss
// Every metric carries the constant labels task_type="worker|ps|chief" and
// task_index="<index>" (except prometheus-cpp's own exposer_* metrics about the scrapes,
// which it adds itself).
// Thread-safety: all methods are thread-safe (prometheus-cpp's metrics are).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "profiler/histogram.h"
#include "profiler/sampler.h"

namespace fulcrum::profiler {

// Per-peer, per-method application traffic as the exporter publishes it (totals so far).
struct RpcTrafficPoint {
  std::string peer;    // "ps-0", "worker-1", "chief-0"
  std::string method;  // "PushPull", "Pull", ...
  uint64_t rpcs = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  // Each RPC's payload in each direction, counted by size (profiler/histogram.h's buckets).
  std::array<int64_t, kPayloadBuckets> sent_sizes{};
  std::array<int64_t, kPayloadBuckets> received_sizes{};
};

class MetricsExporter {
 public:
  // Listens on `bind_address`:`port` (port 0 = any free port). Unavailable naming the
  // address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> Start(const std::string& job,
                                                                int task_index, int port,
                                                                const std::string& bind_address);
  ~MetricsExporter();

  int port() const;  // the port actually bound
  // Scrapes of /metrics served so far.
  int64_t scrapes() const;
  // Waits until /metrics is scraped once more (true) or `timeout` passes (false): a task
  // that ends keeps its final figures up for the scraper (--metrics_linger_secs).
  bool WaitForNextScrape(absl::Duration timeout);

  // Updates the process, core and network metrics from a sample (counters are set to the
  // sample's totals: they only ever grow).
  void OnSample(const SystemSample& sample);
  void OnTraffic(const std::vector<RpcTrafficPoint>& traffic);
  // Training progress (worker): one call per step. `examples` are this step's examples (added
  // to fulcrum_examples_total); fulcrum_steps_total counts the calls; the rest are gauges.
  void OnStep(int64_t local_step, int64_t global_step, int64_t examples, double loss,
              double examples_per_second);
  // PS progress: the totals so far.
  void OnPs(int64_t global_step, int64_t pushes_applied, int64_t pushes_dropped);
  // Chief evaluation.
  void OnEval(int64_t global_step, double accuracy, double loss);
  // Chief watchdog: how long `task` has been stuck (0 once it moves again).
  void OnWatchdog(const std::string& task, double stuck_seconds);
  // A ps's straggler verdict (sync): fulcrum_ps_straggler_worker (the index, -1 none) and
  // fulcrum_ps_straggler_held_back_ms (its median lead over the other workers' gradients).
  void OnStraggler(int worker, double held_back_ms);

 private:
  struct Impl;
  explicit MetricsExporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum::profiler
