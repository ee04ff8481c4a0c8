// ps: a shard's replication (ps/shard.h: set_replicator, ApplyReplicated, StartForward).
// --replicate_shards replicates after aggregation (Li et al., OSDI'14): the primary forwards
// each apply (an async push's gradient, or a sync step's summed gradients with their 1/n) to
// the backup ps under the chunk's lock, applies it itself meanwhile, and waits for the
// backup's answer before the chunk's new step shows; the backup applies it with the same
// optimizer code; so every step a worker could have seen is on the
// backup too, and a promoted replica goes on from exactly there (no rollback).
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ps/shard.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ps {

void Shard::set_replicator(std::unique_ptr<Replicator> replicator) {
  replicator_ = std::move(replicator);
  replicating_.store(replicator_ != nullptr, std::memory_order_release);
}

std::string Shard::replication_lost() const {
  MutexLock lock(&replica_mu_);
  return replication_lost_;
}

void Shard::LoseReplication(const std::string& why) {
  replicating_.store(false, std::memory_order_release);
  MutexLock lock(&replica_mu_);
  if (!replication_lost_.empty()) return;
  replication_lost_ = why;
  spdlog::error("{}: replication stopped: {}; the shard goes on without a replica", name_, why);
}

std::unique_ptr<Replicator::Pending> Shard::StartForward(const ChunkState& chunk,
                                                         std::span<const float> grad,
                                                         float lr_scale, float grad_scale) {
  pb::ReplicateRequest request;
  request.set_shard(task_index_);
  request.set_chunk(static_cast<int32_t>(chunk.index));
  request.set_step(chunk.step);
  request.set_gradient(reinterpret_cast<const char*>(grad.data()), grad.size_bytes());
  request.set_lr_scale(lr_scale);
  request.set_grad_scale(grad_scale);
  return replicator_->Start(std::move(request));
}

absl::Status Shard::FinishForward(Replicator::Pending& pending, int64_t started_ns) {
  const absl::Status s = pending.Wait();
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  replica_forward_ns_.fetch_add(now_ns - started_ns, std::memory_order_relaxed);
  if (s.ok()) {
    replica_forwards_.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  const std::string backup = absl::StrCat("ps:", replicator_->backup_task());
  if (absl::IsAborted(s)) {
    // The chief promoted the replica: this shard must not apply or answer any more.
    const std::string why = absl::StrCat("replaced by its replica on ", backup);
    {
      MutexLock lock(&leave_mu_);
      if (leaving_.empty()) leaving_ = why;
    }
    fenced_.store(true, std::memory_order_release);
    LoseReplication(why);
    return absl::UnavailableError(absl::StrCat(name_, ": ", why, ": ", s.message()));
  }
  LoseReplication(absl::StrCat("backup ", backup, " failed: ", s.message()));
  return absl::OkStatus();
}

absl::Status Shard::ApplyReplicated(const pb::ReplicateRequest& request) {
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetStore());
  const std::string what = absl::StrCat(name_, " (replica): Replicate");
  if (request.chunk() < 0 || static_cast<size_t>(request.chunk()) >= store->chunks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": chunk ", request.chunk(), " out of range [0, ", store->chunks.size(), ")"));
  }
  ChunkState& chunk = *store->chunks[static_cast<size_t>(request.chunk())];
  const size_t n = static_cast<size_t>(chunk.plan.num_elements);
  if (request.gradient().size() != n * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": chunk ", request.chunk(), " holds ", n,
                                                   " floats but the gradient has ",
                                                   request.gradient().size(), " bytes"));
  }
  // The payload is read in place when it is aligned for floats (a string's heap buffer is);
  // copied once otherwise.
  const char* bytes = request.gradient().data();
  std::vector<float> copy;
  std::span<const float> grad;
  if (reinterpret_cast<uintptr_t>(bytes) % alignof(float) == 0) {
    grad = {reinterpret_cast<const float*>(bytes), n};
  } else {
    copy.resize(n);
    std::memcpy(copy.data(), bytes, request.gradient().size());
    grad = copy;
  }
  MutexLock lock(&chunk.mu);
  if (chunk.step > request.step()) return absl::OkStatus();  // a retried forward
  if (chunk.step < request.step()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": chunk ", request.chunk(), " is at step ", chunk.step,
                     " but the primary applied step ", request.step(), " (a forward was lost)"));
  }
  FULCRUM_RETURN_IF_ERROR(
      ApplyToChunk(*store, chunk, grad, request.lr_scale(), request.grad_scale()));
  if (request.chunk() == 0) counters_.steps_applied.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace fulcrum::ps
