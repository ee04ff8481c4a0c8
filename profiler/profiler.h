// profiler: the built-in profiler of one ps, worker or chief process. It owns the /proc
// sampler, the per-peer traffic counters and the in-memory records (worker steps, ps
// progress, chief evaluations); this unit records and runs the lifecycle, the sinks live in
// their own units and read the same records at the end:
//   samples.csv, steps.csv   csv_sink.h
//   trace.json               trace_sink.h
//   events.out.tfevents.*    TensorBoard scalars and the model's graph, written here while
//                            the run goes
//   /metrics                 metrics_exporter.h (Prometheus), fed here while the run goes
//   summary.json keys        summary.h (pure functions; docs/profiler.md lists the keys)
// With --profile=off nothing is sampled or written but `profile` and `host`.
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "nlohmann/json.hpp"
#include "profiler/host_info.h"
#include "profiler/metrics_exporter.h"
#include "profiler/options.h"
#include "profiler/proc_stats.h"
#include "profiler/records.h"
#include "profiler/rpc_observer.h"
#include "profiler/sampler.h"
#include "profiler/tfevents.h"
#include "profiler/trace_sink.h"
#include "profiler/traffic.h"

namespace fulcrum::profiler {

// The periodic rewrite (--profile_flush_secs) costs more as the records grow (a worker's
// trace.json of 8000 mlp steps: 1.4 s; bench/profiler_bench.cc BM_RewriteRecords). So each part
// (the CSV files and summary; trace.json) is rewritten only once the time since its last
// rewrite is both the flush interval and kRewriteCostRatio times what that rewrite took: the
// rewrites then take at most 1 % of the sampler's thread however long the run.
inline constexpr double kRewriteCostRatio = 100;
// trace.json, whose writing costs ~6 µs per event (a logreg step makes ~10 events in ~0.5 ms),
// is rewritten at most every this many flush intervals (30 s at the default 5 s).
inline constexpr int kTraceFlushFactor = 6;

// True when a part last rewritten at `last`, which took `cost`, is due at `now`.
bool RewriteDue(absl::Time now, absl::Time last, absl::Duration cost, absl::Duration interval);

// A run with fewer system samples than this gets a warning (log and summary
// "sampling_warning"): its CPU, memory and network series have too few points to read.
inline constexpr size_t kFewSamples = 10;

// The warning for a run that took `samples` samples every `interval`; "" when there are
// kFewSamples or more.
std::string FewSamplesWarning(size_t samples, absl::Duration interval);

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
  absl::Status SetTaskDir(const std::string& task_dir) ABSL_LOCKS_EXCLUDED(tb_mu_);

  // The model's graph (a serialized tensorflow.GraphDef, models/graph_def.h) for TensorBoard's
  // graph tab: written once into the events file at step 0, now when the file is open, else
  // when SetTaskDir opens it, as TensorFlow 1.x's FileWriter(graph=...) does. Ignored when the
  // profiler is off and after the first call; a failed write is logged and ends the events
  // file, as a failed scalar write does.
  void SetGraph(std::string graph_def) ABSL_LOCKS_EXCLUDED(tb_mu_);

  bool enabled() const { return options_.enabled; }
  // The options given to Start (task_dir as given there; see task_dir()).
  const ProfilerOptions& options() const { return options_; }
  // The task's folder ("" until one is set).
  std::string task_dir() const ABSL_LOCKS_EXCLUDED(tb_mu_);
  // The bound Prometheus port, or -1.
  int metrics_port() const;

  void OnRpc(const RpcEvent& event) override ABSL_LOCKS_EXCLUDED(mu_);
  void RecordStep(const StepRecord& record) ABSL_LOCKS_EXCLUDED(mu_);
  void RecordPs(const PsRecord& record) ABSL_LOCKS_EXCLUDED(mu_);
  void RecordEval(const EvalRecord& record) ABSL_LOCKS_EXCLUDED(mu_);
  // The chief's watchdog: `task` stuck for `stuck_seconds` (0: it moves again); Prometheus only.
  void RecordWatchdog(const std::string& task, double stuck_seconds);

  // Per-peer traffic so far.
  std::vector<RpcTrafficPoint> Traffic() const { return traffic_.Snapshot(); }
  // The sampler's series so far (empty when disabled).
  std::vector<SystemSample> Samples() const;

  // Stops sampling, writes the sinks into the task's folder and adds the profile keys to
  // *summary (a JSON object). The caller's run figures (examples/sec, step-time percentiles,
  // ...) are its own: the profiler adds only keys the caller has not written, and logs an
  // error naming any key both wrote (each key has one writer). Call once, at the end;
  // FailedPrecondition on a second call.
  absl::Status Finish(nlohmann::json* summary) ABSL_LOCKS_EXCLUDED(mu_, tb_mu_);

 private:
  explicit Profiler(const ProfilerOptions& options);
  void OnSample(const SystemSample& sample) ABSL_LOCKS_EXCLUDED(mu_, tb_mu_);
  void WriteTensorBoard(const SystemSample& sample) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tb_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Rewrites the records so far into the task's folder: samples.csv, the job's records CSV
  // and a summary.json of the profile keys marked "partial": true (the task's final summary
  // replaces it), and trace.json when it is due (RewriteDue). Each file atomically; a failure
  // is logged once, not returned.
  void FlushRecords() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tb_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the graph SetGraph gave into the open TensorBoard file, once.
  void WritePendingGraph() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tb_mu_);
  // Closes the TensorBoard file; returns the task's folder.
  std::string CloseTensorBoard() ABSL_LOCKS_EXCLUDED(tb_mu_);
  // Moves the records out (Finish) so the sinks read them without holding mu_; sets
  // *rpc_spans_dropped. With `copy`, copies them instead (a flush while the run goes on);
  // nothing once finished (returns false then).
  // Without `rpc_spans` the RPC spans are left out (a flush that does not rewrite trace.json).
  bool TakeRecords(TraceInput* records, int64_t* rpc_spans_dropped, bool copy = false,
                   bool rpc_spans = true) ABSL_LOCKS_EXCLUDED(mu_);
  // The profile's summary keys from `records` (whose samples are filled in).
  nlohmann::json ProfileKeys(const TraceInput& records, int64_t rpc_spans_dropped) const;

  const ProfilerOptions options_;
  const absl::Time start_ = absl::Now();
  std::unique_ptr<Sampler> sampler_;           // set in Start, before any other thread runs
  std::unique_ptr<MetricsExporter> exporter_;  // set in Start, before any other thread runs
  TrafficCounters traffic_;

  // TensorBoard: written from the sampler thread (and closed at Finish). Taken before mu_
  // when both are held.
  mutable Mutex tb_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::string task_dir_ ABSL_GUARDED_BY(tb_mu_);
  std::unique_ptr<EventFileWriter> tb_ ABSL_GUARDED_BY(tb_mu_);
  bool tb_graph_set_ ABSL_GUARDED_BY(tb_mu_) = false;
  std::string tb_graph_ ABSL_GUARDED_BY(tb_mu_);  // until written; then empty
  size_t tb_steps_written_ ABSL_GUARDED_BY(tb_mu_) = 0;
  size_t tb_ps_written_ ABSL_GUARDED_BY(tb_mu_) = 0;
  size_t tb_evals_written_ ABSL_GUARDED_BY(tb_mu_) = 0;
  // The newest global step of the records written: the x of the system/ and network/ series.
  int64_t tb_global_step_ ABSL_GUARDED_BY(tb_mu_) = 0;
  absl::Time last_flush_ ABSL_GUARDED_BY(tb_mu_) = absl::Now();
  absl::Duration flush_cost_ ABSL_GUARDED_BY(tb_mu_);  // the last flush without the trace
  absl::Time last_trace_flush_ ABSL_GUARDED_BY(tb_mu_) = absl::Now();
  absl::Duration trace_flush_cost_ ABSL_GUARDED_BY(tb_mu_);  // the last trace.json rewrite
  bool flush_failed_ ABSL_GUARDED_BY(tb_mu_) = false;  // logged once

  // The records, appended from the training thread, RPC threads and the ps's progress loop.
  mutable Mutex mu_;
  std::vector<StepRecord> steps_ ABSL_GUARDED_BY(mu_);
  std::vector<PsRecord> ps_records_ ABSL_GUARDED_BY(mu_);
  std::vector<EvalRecord> evals_ ABSL_GUARDED_BY(mu_);
  std::vector<RpcSpan> rpc_spans_ ABSL_GUARDED_BY(mu_);
  int64_t rpc_spans_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fulcrum::profiler
