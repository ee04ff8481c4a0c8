// worker: the seam the training loop trains over. A VariableStore holds the values the model
// computes its gradients at and takes the gradients back: LocalVariableStore applies the
// optimizer in this process (single mode), ShardedVariableStore pushes to the PS tasks and
// reads the new values back (cluster); a store keeping replicas on a GPU fits the same
// shape, since the loop only sees spans of ops::Tensor.
// Thread-safety: a store belongs to one training loop; one call at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ops/tensor.h"

namespace fulcrum::worker {

// What one Apply cost beyond the loop's own clock.
struct ApplyResult {
  // The longest time the step's gradients waited for other replicas' (sync: the PS's own
  // measurement of its wait for the step's aggregation); zero when nothing waits.
  absl::Duration sync_wait = absl::ZeroDuration();
};

// What a StepExchange's finished push-pull did.
struct ExchangeResult {
  ApplyResult applied;
  absl::Time first_sent = absl::InfinitePast();  // the first chunk went out
  absl::Time last_done = absl::InfinitePast();   // the last chunk's values were in
  // The push-pull failed and the store went back to the ps tasks' values (recovery): the
  // step's gradients are lost, and values() hold what the ps tasks hold now.
  bool recovered = false;
};

// The overlapped schedule's side of a store that moves variables (--overlap): the loop hands
// over each layer's gradients as the backward pass makes them final, and waits for each
// layer's values of the next step just before the forward pass reads them, so that the
// transfers run while it computes.
class StepExchange {
 public:
  virtual ~StepExchange() = default;

  // The gradients of variables [first, first + count) (computed at values(), model order)
  // are final: what holds only final gradients goes out now. The first call of a step begins
  // its push-pull.
  virtual void GradientsReady(size_t first, size_t count) = 0;
  // Every gradient of the step is final: the rest goes out. Does not wait for replies.
  virtual void SendRest() = 0;
  // Blocks until variables [first, first + count) hold the next step's values (at once when
  // no push-pull is in flight). An error means the push-pull failed: FinishExchange says
  // whether the run goes on.
  virtual absl::Status WaitForValues(size_t first, size_t count) = 0;
  // Waits for the push-pull in flight, if any, and takes its result: global_step() and
  // StopReason() reflect it afterwards. A failure the store recovered from is OK with
  // `recovered`; any other is the run's error.
  virtual absl::StatusOr<ExchangeResult> FinishExchange() = 0;
};

class VariableStore {
 public:
  virtual ~VariableStore() = default;

  // Makes values() ready for the first step. Returns the time spent reading them from
  // elsewhere (the first step's pull, recorded as part of it); zero when they were at hand.
  virtual absl::StatusOr<absl::Duration> Start() = 0;

  // Before each step after the first: brings values() up to date where the store reads them
  // per step (ShardedVariableStore with --async_pull=before_step). Returns the time spent
  // reading them (recorded as the step's pull); zero when nothing was read.
  virtual absl::StatusOr<absl::Duration> Refresh() { return absl::ZeroDuration(); }

  // Applies grads() (computed at values()) as one step; afterwards values() hold the values
  // of the next step and global_step() the step reached. An error ends the run.
  virtual absl::StatusOr<ApplyResult> Apply() = 0;

  // The values the next step computes its gradients at, in the model's variable order.
  virtual std::span<const ops::Tensor> values() const = 0;
  // Where the loop writes the step's gradients, shaped like values().
  virtual std::span<ops::Tensor> grads() = 0;

  // Steps applied so far by everyone (single mode: by this store).
  virtual int64_t global_step() const = 0;
  // Why the store ended training (e.g. a PS said the run is over); "" while it goes on.
  virtual std::string StopReason() const = 0;

  // The store's overlapped schedule; null for a store that moves nothing (single mode).
  virtual StepExchange* exchange() { return nullptr; }
};

}  // namespace fulcrum::worker
