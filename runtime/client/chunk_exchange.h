// runtime: ChunkExchange, one training step's push-pull sent chunk by chunk as the gradients
// become final, so that communication overlaps the backward pass and the next forward pass
// (P3, Jayarajan et al. 2019; ByteScheduler, Peng et al. 2019). The caller says which model
// variables have final gradients (GradientsReady, last layer first during backward); a chunk
// goes out as soon as every variable it holds a part of is final, the chunks that became
// ready together in priority order (the chunk of the earliest model variable first, as the
// next forward pass needs them). Each chunk is one ShardedVariables push-pull (the same RPC,
// request ids, retry and step semantics as PushPullAll), so the PS sees nothing new: sync
// mode still aggregates per chunk and answers once the chunk reached min_step. The next
// forward pass asks for each layer's variables (WaitForValues) and waits only for the chunks
// that hold them. No credit window: every ready chunk is in flight at once, as PushPullAll
// has them (a held sync push-pull must not block another worker's chunk).
// With separate reads (async, --async_pull=at_step_start) a chunk's push-pull brings no
// values back: the chunk is pulled once the next step asks for values (StartReads, or its
// first WaitForValues), and not before its own push was applied, so a step reads what the ps
// holds when it begins, as TensorFlow's async workers do, not what it held mid-backward.
// Thread-safety: Begin, GradientsReady, AllGradientsReady and Finish from one thread (the
// training loop's); WaitForValues from any thread; replies arrive on the clients' threads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "ops/tensor.h"
#include "runtime/client/sharded_variables.h"

namespace fulcrum::runtime {

class ChunkExchange {
 public:
  // What one step's exchange did, once finished.
  struct Report {
    TransferResult transfer;  // as PushPullAll's
    absl::Time first_sent;    // the first chunk's push-pull started
    absl::Time last_done;     // the last chunk's reply was in (decoded) or failed
  };

  // `sharded` (not owned) must outlive this; `num_variables` is the model's variable count
  // (every chunk's sources lie below it).
  ChunkExchange(ShardedVariables* sharded, int num_variables);
  // Waits for any chunk still in flight (its reply writes into this object).
  ~ChunkExchange();
  ChunkExchange(const ChunkExchange&) = delete;
  ChunkExchange& operator=(const ChunkExchange&) = delete;

  // Begins a step's exchange: the gradients in `grads` (computed at `step`) go out as they
  // become final, the values (each chunk's once its step >= min_step) come back into
  // `values`. Both must stay alive until Finish returns. Precondition: !active().
  void Begin(int64_t step, int64_t min_step, std::span<const ops::Tensor> grads,
             std::span<ops::Tensor> values, absl::Duration timeout);
  // The gradients of variables [first, first + count) are final: every chunk whose variables
  // are now all final starts its push-pull (possibly finishing it, with a client that calls
  // back inline). A variable given twice counts once.
  void GradientsReady(int first, int count);
  // Every gradient is final: the chunks not yet sent go now.
  void AllGradientsReady();
  // Blocks until every chunk holding a part of variables [first, first + count) has its reply
  // decoded into `values`; at once when no exchange is active. The first failed chunk's
  // error once any chunk failed (then Finish says what to do).
  absl::Status WaitForValues(int first, int count);
  // Waits for every chunk sent and ends the exchange (active() is false afterwards). The
  // first failed chunk's error (its values are undefined, the other chunks' are in), or
  // FailedPrecondition when some chunk was never sent (AllGradientsReady was not called).
  absl::Status Finish(Report* report);

  bool active() const;
  // Before Begin: whether pushes come back without values and the values are pulled when the
  // next step begins (async only).
  void set_separate_reads(bool on) { separate_reads_ = on; }
  // Separate reads: the next step begins, so every chunk whose push was applied is pulled now
  // and the others as their replies come in. A no-op otherwise, when inactive, or repeated.
  void StartReads();

 private:
  // kPushed, kReading: separate reads only (the push was applied; the pull not yet started,
  // or in flight).
  enum class ChunkState { kWaiting, kInFlight, kPushed, kReading, kDone, kFailed };
  // Starts chunk c's push-pull (in_flight_ already counts it).
  void Send(int c);
  void OnReply(int c, absl::Status status);
  void Read(int c);
  void OnRead(int c, absl::Status status);
  // A chunk's call ended: its values are in (ok) or the exchange failed.
  void Ended(size_t c, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks variables final and collects the chunks that became ready, in priority order.
  std::vector<int> MarkReady(int first, int count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ShardedVariables* const sharded_;
  std::vector<std::vector<int>> chunk_sources_;    // per chunk: model variables it holds
  std::vector<std::vector<int>> variable_chunks_;  // per variable: chunks holding it
  std::vector<int> chunk_priority_;                // per chunk: its first variable

  // Set by Begin on the loop's thread and read by the replies while active.
  int64_t step_ = 0;
  int64_t min_step_ = 0;
  std::span<const ops::Tensor> grads_;
  std::span<ops::Tensor> values_;
  absl::Duration timeout_;
  bool separate_reads_ = false;

  mutable Mutex mu_;
  CondVar changed_;  // a chunk finished
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_started_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> variable_ready_ ABSL_GUARDED_BY(mu_);
  std::vector<int> missing_grads_ ABSL_GUARDED_BY(mu_);   // per chunk
  std::vector<int> missing_values_ ABSL_GUARDED_BY(mu_);  // per variable: chunks not yet in
  std::vector<ChunkState> state_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> resent_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // the first failed chunk's
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int retries_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time first_sent_ ABSL_GUARDED_BY(mu_);
  absl::Time last_done_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fulcrum::runtime
