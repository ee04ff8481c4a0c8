// profiler: the built-in profiler of one ps, worker or chief process. It owns the /proc
// sampler, the per-peer traffic counters and the in-memory records (worker steps, ps
// progress, chief evaluations), and at the end writes every sink from those same records
// into the task's folder of the run directory:
//   samples.csv   the sampler's time series (CPU, memory, per-interface network)
//   steps.csv     worker: one row per step (phases); ps: one row per sample (progress);
//                 chief: one row per evaluation
//   trace.json    Chrome trace: step phase spans, RPC spans, CPU/memory/network counters
//   events.out.tfevents.*  TensorBoard scalars (written while the run goes)
// and adds the profile's keys to the task's summary.json (docs/profiler.md lists them).
// With --profile=off nothing is sampled or written but the summary's run figures.
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"
#include "profiler/metrics_exporter.h"
#include "profiler/proc_stats.h"
#include "profiler/sampler.h"
#include "profiler/tfevents.h"
#include "profiler/traffic.h"

namespace fulcrum::profiler {

// One training step of a worker. The phases partition the step's wall time up to rounding:
// data (next batch), pull (an explicit pull; 0 when the values come back in the push's
// reply), forward, backward, push (the push RPCs, including the values coming back with
// them, less the PS's sync wait) and sync_wait (the longest time a PS held the request
// waiting for the step's aggregation, as the PS measured it).
struct StepRecord {
  int64_t step = 0;         // local step, from 1
  int64_t global_step = 0;  // after the step
  int64_t examples = 0;
  double loss = 0.0;
  int64_t begin_unix_us = 0;
  double wall_ms = 0.0;
  double data_ms = 0.0;
  double pull_ms = 0.0;
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double push_ms = 0.0;
  double sync_wait_ms = 0.0;
};

// Progress of a ps task so far (cumulative), taken once per sample.
struct PsRecord {
  int64_t unix_us = 0;
  int64_t global_step = 0;
  int64_t pushes_received = 0;
  int64_t pushes_applied = 0;
  int64_t pushes_dropped = 0;
  int64_t pulls = 0;
  int64_t bytes_pushed = 0;
  int64_t bytes_pulled = 0;
  double apply_ms = 0.0;  // time spent applying gradients (optimizer), all threads
  double wait_ms = 0.0;   // time requests waited for a sync step, all requests
};

// One evaluation by the chief.
struct EvalRecord {
  int64_t unix_us = 0;
  int64_t global_step = 0;
  double accuracy = -1.0;  // < 0: the model has no accuracy (autoencoder)
  double loss = 0.0;
};

// One RPC as the runtime saw it (client side: whole call; server side: the handler).
struct RpcEvent {
  const std::string* peer = nullptr;  // "ps-0", "worker-1"
  const char* method = "";
  int64_t begin_unix_us = 0;
  int64_t duration_us = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

// What the runtime's RPC paths report to (runtime::GrpcPsClient, ps::PsService, ...).
class RpcObserver {
 public:
  virtual ~RpcObserver() = default;
  virtual void OnRpc(const RpcEvent& event) = 0;
};

struct ProfilerOptions {
  bool enabled = true;                                // --profile
  absl::Duration interval = absl::Milliseconds(500);  // --profile_interval_ms
  int metrics_port = -1;                              // < 0: no Prometheus endpoint
  std::string job = "worker";                         // worker, ps, chief
  int task_index = 0;
  std::string task_dir;  // the task's folder of the run directory; "" = write no files
};

class Profiler final : public RpcObserver {
 public:
  // Starts the sampler (and the Prometheus endpoint, TensorBoard writer) when enabled.
  // `source` replaces the live /proc (tests). Unavailable when /proc cannot be read or the
  // metrics port cannot be bound.
  static absl::StatusOr<std::unique_ptr<Profiler>> Start(
      const ProfilerOptions& options, std::unique_ptr<ProcSource> source = nullptr);
  ~Profiler() override;

  // Sets the task's folder once it is known (a worker learns the run directory from the
  // chief): creates it and starts the TensorBoard file there. InvalidArgument/Unavailable
  // when it cannot be created; FailedPrecondition when a folder was set already.
  absl::Status SetTaskDir(const std::string& task_dir);

  bool enabled() const { return options_.enabled; }
  const ProfilerOptions& options() const { return options_; }
  // The bound Prometheus port, or -1.
  int metrics_port() const;

  void OnRpc(const RpcEvent& event) override;
  void RecordStep(const StepRecord& record);
  void RecordPs(const PsRecord& record);
  void RecordEval(const EvalRecord& record);

  // Per-peer traffic so far.
  std::vector<RpcTrafficPoint> Traffic() const { return traffic_.Snapshot(); }
  // The sampler's series so far (empty when disabled).
  std::vector<SystemSample> Samples() const;

  // Stops sampling, writes the sinks into options.task_dir and adds the profile keys to
  // *summary (run figures such as examples/sec stay the caller's). Call once, at the end.
  absl::Status Finish(nlohmann::json* summary);

 private:
  explicit Profiler(const ProfilerOptions& options);
  void OnSample(const SystemSample& sample);
  absl::Status WriteCsv() const;
  absl::Status WriteTrace() const;
  void AddSummaryKeys(nlohmann::json* summary) const;

  ProfilerOptions options_;  // task_dir is set once, before the first sink writes
  const absl::Time start_ = absl::Now();
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<MetricsExporter> exporter_;
  TrafficCounters traffic_;

  // std::mutex rather than absl::Mutex: ThreadSanitizer cannot see inside Debian's
  // uninstrumented Abseil (as in ps/shard.h).
  mutable std::mutex mu_;  // guards the records below
  std::vector<StepRecord> steps_;
  std::vector<PsRecord> ps_records_;
  std::vector<EvalRecord> evals_;
  struct RpcSpan {
    std::string peer;
    const char* method;
    int64_t begin_unix_us;
    int64_t duration_us;
  };
  std::vector<RpcSpan> rpc_spans_;
  int64_t rpc_spans_dropped_ = 0;
  bool finished_ = false;

  // TensorBoard: written from the sampler thread (and at Finish). Taken before mu_ when both
  // are held.
  std::mutex tb_mu_;  // guards the members below
  std::unique_ptr<EventFileWriter> tb_;
  size_t tb_steps_written_ = 0;
  size_t tb_ps_written_ = 0;
  size_t tb_evals_written_ = 0;
  int64_t tb_sample_step_ = 0;
};

// Reports a finished RPC of `method` with `peer` that began at `begin_unix_us` to `observer`
// (nothing when it is null): `sent` is the message this process sent (a client's request, a
// server's response), `received` the one it got; the bytes are their serialized sizes.
void ReportRpc(RpcObserver* observer, const std::string& peer, const char* method,
               int64_t begin_unix_us, const google::protobuf::Message& sent,
               const google::protobuf::Message& received);
// Microseconds since the epoch (the clock of every record and trace event).
int64_t NowUnixMicros();

// Task folder name of a request's task label: "worker:1" -> "worker-1".
std::string PeerName(const std::string& task_label);

// The host this process runs on: the name of its network namespace when that is a named one
// (an emulated host, scripts/netns_hosts.sh), else gethostname().
std::string HostName();

// uname(2) and /proc/cpuinfo's model name, as Touchstone's "System Information".
nlohmann::json SystemInformation();

}  // namespace fulcrum::profiler
