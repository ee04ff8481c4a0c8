// worker: TrainLoop, the one training loop of single mode and cluster workers. It owns the
// batching (data::Batcher over this worker's shard), the gradients (Model::ComputeGradients
// at the store's values), the per-phase timing and the step records; the VariableStore
// decides where the gradients go (local optimizer, PS tasks). Each step:
//   next batch -> forward/backward at store.values() -> store.Apply() -> StepRecord
// until the store's global step reaches the target, the store says training ended, or the
// stop check (e.g. the chief's heartbeat) says stop. Progress is logged every log_every
// local steps and at the last one.
// Overlapped (options.overlap, with a store that has a StepExchange): each step is
//   next batch -> forward, each layer once its values are in -> the previous step's
//   push-pull ends -> backward, each layer's gradients handed over as they are final
// so the store's transfers run under the computation; a step's record is taken once its
// push-pull ended (during the next step), so the step sink hears of it one step late. The
// time a step is blocked on the previous push-pull (waiting for values, ending it) is its
// sync wait up to the ps's wait for the other workers' gradients (sync), its pull and push
// for the rest. A
// step begun when the previous step's push-pull turns out to end training (a ps stopped, or
// recovered from a failure) is dropped after its forward pass, nothing of it sent.
// Thread-safety: Run is called once, from one thread; the callbacks run on that thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "data/batcher.h"
#include "models/model.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"
#include "profiler/records.h"
#include "worker/batch_prefetcher.h"
#include "worker/divergence.h"
#include "worker/replicas.h"
#include "worker/variable_store.h"

namespace fulcrum::worker {

struct TrainLoopOptions {
  int64_t target_global_steps = 0;  // stop once the store's global step reaches this
  int64_t log_every = 100;          // local steps between progress lines; >= 1
  // Progress lines: "step 7 (global 13/100) loss ..." (cluster) rather than
  // "step 7/100 loss ..." (single mode, where local and global steps are the same).
  bool log_global_step = false;
  // --overlap: the overlapped schedule, when the store has one (else sequential).
  bool overlap = false;
  // Gather each next batch on a loader thread while the step computes (BatchPrefetcher);
  // off: on the training thread, over the pool, at the step's start.
  bool prefetch = true;
  // For tests (--test_backward_delay_ms): every step's backward pass sleeps this long before
  // its first gradients go out, making this worker a straggler.
  absl::Duration backward_delay = absl::ZeroDuration();
};

struct TrainLoopResult {
  std::vector<profiler::StepRecord> steps;  // one per local step, in order
  // From before the store's Start (the first step's pull) to after the last step.
  double wall_seconds = 0.0;
  int64_t global_step = 0;  // the store's, after the last step
  std::string stop_reason;  // "reached train_steps", the store's or the stop check's reason
};

class TrainLoop {
 public:
  // Called before every step with the local steps done so far: set *stop_reason to end the
  // loop cleanly, return an error to end the run with it.
  using StopCheck = std::function<absl::Status(int64_t local_steps, std::string* stop_reason)>;
  // Called with each step's record as soon as it is taken (the profiler, a heartbeat).
  using StepSink = std::function<void(const profiler::StepRecord&)>;

  // Not owned, must outlive the loop: model (its variables in the store's order), store,
  // pool (may be null: the batch is gathered on the calling thread).
  TrainLoop(const TrainLoopOptions& options, models::Model* model, data::Batcher batcher,
            VariableStore* store, ops::ThreadPool* pool);

  // In-graph replication: each step's gradients come from `replicas` (not owned; its
  // replica 0 is the model given above) instead of the model alone.
  void set_replicas(Replicas* replicas) { replicas_ = replicas; }
  // The compute devices' copies and allocations so far (the replicas', or the model's).
  ops::TransferCounters Copies() const;
  void set_stop_check(StopCheck check) { stop_check_ = std::move(check); }
  void set_step_sink(StepSink sink) { step_sink_ = std::move(sink); }

  // Trains until a stop condition. Errors: the store's, the model's, the stop check's, and
  // Internal for a loss that is not finite (naming the step).
  absl::StatusOr<TrainLoopResult> Run();

 private:
  // What became of a step.
  enum class Outcome { kTaken, kStop, kRetry };

  // Both schedules' loop, from the first step (`pull_ms`: the time Start read its values).
  absl::Status RunSteps(StepExchange* exchange, double pull_ms, TrainLoopResult* result);
  // Before each step: a signal or the stop check (the reason then goes to
  // result->stop_reason); true when the run ends here.
  absl::StatusOr<bool> StopRequested(int64_t local_steps, TrainLoopResult* result);
  // InternalError naming the step when its loss is not finite (the learning rate, probably).
  static absl::Status CheckFinite(float loss, int64_t step, int64_t global_before);
  // The one step function, local step `step`; `pull_ms` is time spent reading its values
  // before it began. Sequential (exchange null): every gradient goes in the store's Apply at
  // the end, and the step is recorded (kStop once training ends). Overlapped: the same step
  // with its values waited for layer by layer, its gradients sent as they are final and the
  // previous step's push-pull ended after the forward pass; kTaken: in flight as pending_.
  struct StepState;
  absl::StatusOr<Outcome> Step(StepExchange* exchange, int64_t step, double pull_ms,
                               TrainLoopResult* result);
  // The overlapped step's hooks, updating `s`.
  models::LayerHooks OverlapHooks(StepExchange* exchange, StepState* s, TrainLoopResult* result);
  // A step whose gradients failed with `error`: dropped (an outcome) or the run's error.
  absl::StatusOr<Outcome> Unfinished(StepExchange* exchange, const StepState& s, absl::Status error,
                                     TrainLoopResult* result);
  // Sleeps options_.backward_delay once per step (tests), before its first gradients go out.
  void DelayBackward(StepState* s) const;
  // The sequential step's Apply and its share of the record.
  absl::Status ApplySequential(StepState& s, std::chrono::steady_clock::time_point t_grad);
  // Ends the pending step's push-pull and records the step: kStop when training ends there,
  // kRetry when the store recovered (the step in progress must be dropped), else kTaken.
  // *sync_wait_ms (when given): the ps's wait for the other workers in that push-pull.
  absl::StatusOr<Outcome> FinishPending(StepExchange* exchange, TrainLoopResult* result,
                                        double* sync_wait_ms = nullptr);
  // Keeps a finished step's record (the result, the sink, the progress line); an error when
  // its loss shows the model diverged.
  absl::Status Record(profiler::StepRecord r, TrainLoopResult* result);
  bool Done() const;
  // The step's batch into inputs_ and batch_labels_.
  absl::Status NextBatch();
  void LogProgress(const profiler::StepRecord& r, double window_seconds, int64_t window_steps);

  TrainLoopOptions options_;
  models::Model* const model_;
  data::Batcher batcher_;
  VariableStore* const store_;
  ops::ThreadPool* const pool_;
  ops::Tensor inputs_;           // [batch, example size]
  std::vector<int32_t> labels_;  // [batch] (without the prefetcher)
  std::span<const int32_t> batch_labels_;      // the step's labels
  std::unique_ptr<BatchPrefetcher> prefetcher_;  // while Run runs, with options_.prefetch
  Replicas* replicas_ = nullptr;
  // The compute devices' copies and allocations when the last step was recorded.
  ops::TransferCounters copies_seen_;
  StopCheck stop_check_;
  StepSink step_sink_;
  // The progress line's window.
  std::chrono::steady_clock::time_point window_start_;
  int64_t window_steps_ = 0;
  // Overlapped: the step whose push-pull is in flight, its record still open.
  std::optional<profiler::StepRecord> pending_;
  DivergenceGuard divergence_;
};

}  // namespace fulcrum::worker
