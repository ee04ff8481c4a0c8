// worker: ShardedVariableStore, the variable store of a cluster worker. The variables live on
// the PS tasks (runtime::ShardedVariables over the PS clients): Start pulls every chunk once,
// then each Apply pushes the step's gradients and reads the new values back in the same
// calls; or, overlapped (StepExchange, runtime::ChunkExchange), each chunk goes as soon as
// its gradients are final and the next step waits for each layer's chunks only. Sync mode
// asks for the values of the next global step (the PS answers once the step's gradients
// were aggregated); async mode takes the values as they are, and so does ssp mode once
// the PS lets this worker go on (it holds the reply while this worker is more than
// --staleness steps ahead of the slowest; the hold is the step's sync wait), or, async with
// set_pull_before_step, reads them again in Refresh at the start of the next step. Remote
// errors come back
// already mapped by runtime::RemoteFailure, so a PS's answer never reads as this worker's
// bad input.
// Thread-safety: one call at a time (the training loop's thread); the PS clients may be
// shared.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ops/backend.h"
#include "ops/tensor.h"
#include "runtime/client/chunk_exchange.h"
#include "runtime/client/sharded_variables.h"
#include "runtime/config/flags.h"
#include "worker/variable_store.h"

namespace fulcrum::worker {

// What the store moved so far, for the worker's summary.
struct TransferTotals {
  int64_t pushes = 0;      // chunks the PS took (applied, accumulated or dropped as stale)
  int64_t dropped = 0;     // chunks dropped as stale (sync)
  int64_t duplicates = 0;  // chunks answered as duplicates of an earlier try
  int64_t retries = 0;     // RPCs re-sent after a transport failure
  int64_t bytes_sent = 0;  // tensor payload bytes
  int64_t bytes_received = 0;
  int64_t recoveries = 0;          // times the ps tasks went back to a checkpoint under this worker
  int64_t pushes_at_recovery = 0;  // `pushes` when the last recovery ended (0: none)
  // Async and ssp: over the steps the ps applied, the updates of others applied between the
  // read of the values a step's gradients were computed at and the step's own apply, as the
  // ps counted them (per chunk; a step counts its most stale chunk).
  int64_t staleness_sum = 0;
  int64_t staleness_steps = 0;
  // The same steps counted by staleness: [s] for s < kStalenessBuckets - 1, the last for the rest.
  static constexpr int kStalenessBuckets = 9;
  std::array<int64_t, kStalenessBuckets> staleness_histogram{};
};

class ShardedVariableStore final : public VariableStore, public StepExchange {
 public:
  // `sharded` (not owned) must outlive the store; `shapes` are the model's variables' shapes
  // in model order. Every call waits at most `step_timeout`. With `staging` (the model's
  // backend, not owned) the host values and gradients come from its AllocateHost: page-locked
  // on a GPU, so each layer's copies to and from the device run at the bus's speed, and the
  // data plane sends and receives them in place.
  ShardedVariableStore(runtime::ShardedVariables* sharded, std::span<const ops::Shape> shapes,
                       runtime::SyncMode mode, absl::Duration step_timeout,
                       ops::Backend* staging = nullptr);

  // Pulls every variable (no wait for a step). Returns the pull's time.
  absl::StatusOr<absl::Duration> Start() override;
  // Pushes grads() as computed at global_step() and reads the values back (sync: once the
  // PS reached global_step() + 1). A transport failure is retried once with the same request
  // id (ShardedVariables), so the PS never applies a step twice.
  absl::StatusOr<ApplyResult> Apply() override;
  // With set_pull_before_step(true), after an Apply: pulls every variable (no wait for a
  // step), so the next gradients are computed at values read now rather than at those the
  // Apply returned; a no-op otherwise.
  absl::StatusOr<absl::Duration> Refresh() override;
  // Async mode only (--async_pull=before_step); call before Start.
  void set_pull_before_step(bool on) { pull_before_step_ = on; }
  // --async_pull=at_step_start (async mode only; the overlapped exchange): pushes come back
  // without values and each chunk is read when the next step begins (ChunkExchange's
  // separate reads). Call before Start.
  void set_reads_at_step_start(bool on) {
    chunks_.set_separate_reads(on && mode_ == runtime::SyncMode::kAsync);
  }

  std::span<const ops::Tensor> values() const override { return values_; }
  std::span<ops::Tensor> grads() override { return grads_; }
  // The lowest step any chunk's reply carried.
  int64_t global_step() const override { return global_step_; }
  std::string StopReason() const override;
  StepExchange* exchange() override { return this; }

  // StepExchange: the step's push-pull chunk by chunk, pushed at global_step() and (sync)
  // answered once each chunk reached global_step() + 1, as Apply's; its failures are handled
  // as Apply's (retried once, recovered when enabled, else RemoteFailure).
  void GradientsReady(size_t first, size_t count) override;
  void SendRest() override;
  absl::Status WaitForValues(size_t first, size_t count) override;
  absl::StatusOr<ExchangeResult> FinishExchange() override;

  // Recovery (--recovery_timeout with --checkpoint_dir): an Apply whose ps is unreachable or
  // was restored (Unavailable, Aborted) discards the step's gradients, then pulls every
  // variable again until the ps tasks answer, for at most `timeout`, checking `check` every
  // try: an error from it ends the wait with that error, a stop reason ends the run cleanly.
  using RecoveryCheck = std::function<absl::Status(std::string* stop_reason)>;
  void EnableRecovery(absl::Duration timeout, RecoveryCheck check) {
    recovery_timeout_ = timeout;
    recovery_check_ = std::move(check);
  }

  const TransferTotals& totals() const { return totals_; }
  runtime::SyncMode mode() const { return mode_; }

 private:
  runtime::ShardedVariables* const sharded_;
  const runtime::SyncMode mode_;
  const absl::Duration step_timeout_;
  std::vector<ops::Tensor> values_;
  std::vector<ops::Tensor> grads_;
  // Waits for the ps tasks after `cause` (see EnableRecovery).
  absl::Status Recover(const absl::Status& cause);
  // Counts a finished push-pull's result into the totals and the store's step.
  void Took(const runtime::TransferResult& xfer);
  // Begins the step's chunk exchange unless it is under way.
  void BeginExchange();
  // Pulls every variable into values_ (no wait for a step).
  absl::Status PullValues();

  runtime::ChunkExchange chunks_;
  absl::Duration recovery_timeout_ = absl::ZeroDuration();
  RecoveryCheck recovery_check_;
  std::string stop_reason_;  // set when the chief asked to stop during a recovery
  int64_t global_step_ = 0;
  bool stopped_ = false;
  bool pull_before_step_ = false;
  bool values_fresh_ = false;  // values_ were read since the last Apply
  TransferTotals totals_;
};

}  // namespace fulcrum::worker
