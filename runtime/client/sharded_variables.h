// runtime: a model's variables as the PS tasks hold them, seen from a worker or the chief.
// Knows the placement and each shard's chunk plan, and moves whole models: PullAll reads
// every chunk of every PS into the model's tensors, PushPullAll sends every chunk's
// gradients and reads the new values back, with one RPC per chunk, all in flight at once
// (big variables go out as pieces of at most chunk_bytes in parallel). Slices of a
// partitioned variable are read and written in place, so reassembly costs nothing. A
// schedule that sends chunks one at a time (runtime/client/chunk_exchange.h, the overlap of
// communication with backward) uses the per-chunk calls below, which PushPullAll is made of.
// Thread-safety: one whole-model call at a time per object (a worker's training loop); the
// per-chunk calls may run for different chunks at once, never for one chunk twice, and never
// beside a whole-model call. The clients may be shared.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ops/tensor.h"
#include "runtime/client/ps_client.h"
#include "runtime/cluster/chunk_plan.h"
#include "runtime/cluster/placement.h"

namespace fulcrum::runtime {

// What one PullAll / PushPullAll saw.
struct TransferResult {
  int64_t global_step = 0;  // min over every chunk's step in the replies
  bool stopped = false;     // a PS said training has ended
  int64_t applied = 0;      // chunks applied/accumulated by the PS
  int64_t dropped = 0;      // chunks dropped as stale (sync)
  int64_t duplicates = 0;   // chunks answered as duplicates of an earlier try
  int64_t bytes_sent = 0;   // tensor payload bytes
  int64_t bytes_received = 0;
  int retries = 0;  // RPCs re-sent after a transport failure
  // The longest time one PS held a request of this call waiting for min_step (the PS's own
  // measurement): the sync wait of a step. The calls run in parallel, so it is the longest,
  // not the sum.
  int64_t max_wait_us = 0;
  // async and ssp: the most updates by others any pushed chunk took between the read of its
  // values and its apply (the PS's count; PushResponse.staleness).
  int64_t staleness = 0;
};

class ShardedVariables {
 public:
  // `clients[p]` talks to ps p (not owned; must outlive this). `task` names the caller in
  // requests ("worker:1"); request ids are unique per (task, call).
  ShardedVariables(const Placement& placement, int64_t chunk_bytes, std::vector<PsClient*> clients,
                   std::string task);
  ~ShardedVariables();

  // How gradients and values travel (--wire_dtype; default float32, borrowed from the
  // tensors without a copy). Before the first call.
  void set_wire_dtype(pb::WireDtype dtype);
  pb::WireDtype wire_dtype() const { return wire_dtype_; }

  int num_ps() const { return static_cast<int>(shards_.size()); }
  int num_chunks() const;
  const std::vector<Chunk>& chunks(int ps) const { return shards_[static_cast<size_t>(ps)].chunks; }
  const std::vector<PlacedVariable>& variables(int ps) const {
    return shards_[static_cast<size_t>(ps)].variables;
  }

  // Reads every variable into `values` (model order and shapes), waiting on each chunk until
  // its step >= min_step (0 = no wait).
  absl::Status PullAll(int64_t min_step, absl::Duration timeout, std::span<ops::Tensor> values,
                       TransferResult* result);

  // Pushes `grads` (model order) computed at global step `step`, then reads the values back
  // once each chunk's step >= min_step (sync: step + 1; async: 0). A call that fails in
  // transport is re-sent once with the same request id, so the PS never applies it twice.
  absl::Status PushPullAll(int64_t step, int64_t min_step, std::span<const ops::Tensor> grads,
                           std::span<ops::Tensor> values, absl::Duration timeout,
                           TransferResult* result);

  // Chunk by chunk. A chunk is named by its index in [0, num_chunks()): ps-major, then the
  // chunk's id within its ps.
  int chunk_ps(int index) const;
  // The model variables (indices into the model's list) chunk `index` holds a part of, in
  // ascending order. A variable may be in many chunks (a big one spans several, a partitioned
  // one lives on several ps).
  std::vector<int> ChunkSources(int index) const;
  // Starts the push-pull of chunk `index`: its part of `grads` (computed at `step`) goes out
  // with a new request id, and once the chunk's step >= min_step its values come back into
  // its part of `values`. `done` runs once (on any thread, maybe before this returns) with
  // the outcome, the reply already decoded; `grads` and `values` must stay alive until then.
  // With with_values false (async only, min_step 0) the PS answers once the push is applied,
  // without values (PushRequest.no_values): the values come from a StartChunkPull.
  void StartChunkPushPull(int index, int64_t step, int64_t min_step,
                          std::span<const ops::Tensor> grads, std::span<ops::Tensor> values,
                          absl::Duration timeout, PsClient::Done done, bool with_values = true);
  // Starts a pull of chunk `index` (no wait for a step) into its part of `values`; `done` as
  // above. Never while the chunk's push-pull is in flight. The values' step becomes the step
  // its next gradient is computed at; after a push-pull without values, AddChunkResult takes
  // the chunk's step, the end of training and the bytes received from this pull.
  void StartChunkPull(int index, std::span<ops::Tensor> values, absl::Duration timeout,
                      PsClient::Done done);
  // Sends chunk `index`'s last push-pull again, with the same request id (the PS applies it
  // at most once): after a transport failure. As StartChunkPushPull otherwise.
  void ResendChunkPushPull(int index, std::span<ops::Tensor> values, absl::Duration timeout,
                           PsClient::Done done);
  // Adds what chunk `index`'s last push-pull reply says to *result (its step, stopped,
  // applied, dropped, duplicate, bytes, wait). Only after its `done` reported OK.
  void AddChunkResult(int index, TransferResult* result) const;
  // Whether a failed chunk call may be re-sent (a transport failure).
  static bool Retryable(const absl::Status& s);

 private:
  struct Slot;  // one chunk's reusable request and reply
  struct Shard {
    std::vector<PlacedVariable> variables;
    std::vector<Chunk> chunks;
  };
  // Spans of `tensors` that chunk c of ps p covers, in segment order.
  template <typename T, typename Tensors>
  std::vector<std::span<T>> Spans(int ps, int chunk, Tensors tensors) const;

  static absl::Status InChunk(const absl::Status& s, const Slot& slot);
  // The per-chunk helpers every push-pull goes through: fill the chunk's request frame (a
  // new request id, the steps, the gradients' payload borrowed or encoded), and send it with
  // its reply's payload going straight into `values`.
  void EncodePushPull(Slot& slot, int64_t step, int64_t min_step, absl::Duration timeout,
                      std::span<const ops::Tensor> grads, bool with_values = true);
  void SendPushPull(Slot* slot, std::span<ops::Tensor> values, absl::Duration timeout,
                    PsClient::Done done);

  std::vector<Shard> shards_;
  std::vector<PsClient*> clients_;
  std::string task_;
  uint64_t next_request_ = 0;
  pb::WireDtype wire_dtype_ = pb::WIRE_F32;
  std::vector<std::unique_ptr<Slot>> slots_;  // ps-major, then chunk
};

}  // namespace fulcrum::runtime
