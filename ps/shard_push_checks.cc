// ps::Shard's checks of a push before anything of it is applied: its gradients decoded (and
// their sizes checked), every value finite, the norms against the chunk's recent ones (an
// absurd gradient is refused whole), runs of empty pushes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ps/request_checks.h"
#include "ps/shard.h"
#include "runtime/frames/tensor_coding.h"
#include "runtime/frames/wire_frame.h"
#include "spdlog/spdlog.h"
#include "transport/limits.h"

namespace fulcrum::ps {

absl::Status Shard::ValidatePush(const Store& store, const pb::PushRequest& request,
                                 std::span<const std::span<const float>> grads, bool* nonfinite) {
  *nonfinite = false;
  const int num_chunks = static_cast<int>(store.chunks.size());
  if (grads.size() != static_cast<size_t>(request.gradients_size())) {
    return absl::InternalError(absl::StrCat(name_, ": Push from ", request.task(), ": ",
                                            grads.size(), " decoded gradients for ",
                                            request.gradients_size(), " chunks"));
  }
  {
    thread_local std::vector<int> ids;
    thread_local std::vector<bool> seen;
    ids.clear();
    for (const pb::ChunkData& g : request.gradients()) ids.push_back(g.chunk());
    FULCRUM_RETURN_IF_ERROR(CheckChunkIds(ids, num_chunks, &seen, name_, "Push", request.task()));
  }
  bool empty = request.gradients_size() > 0;
  for (int i = 0; i < request.gradients_size(); ++i) {
    const pb::ChunkData& g = request.gradients(i);
    const ChunkState& chunk = *store.chunks[static_cast<size_t>(g.chunk())];
    const std::span<const float> floats = grads[static_cast<size_t>(i)];
    if (static_cast<int64_t>(floats.size()) != chunk.plan.num_elements) {
      // The label is built only on this path: pushes are hot.
      const int esize = runtime::WireElementBytes(g.wire_dtype());
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": Push from ", request.task(), ": chunk ", g.chunk(), " gradient: payload has ",
          floats.size() * static_cast<size_t>(esize), " bytes, expected ",
          chunk.plan.num_elements * esize, " (", chunk.plan.num_elements, " ",
          runtime::WireDtypeName(g.wire_dtype()), "); nothing of the push is applied"));
    }
    float sum_squares = 0;
    if (!FiniteWithSumOfSquares(floats, &sum_squares)) {
      counters_.pushes_nonfinite.fetch_add(request.gradients_size(), std::memory_order_relaxed);
      if (nonfinite_policy_ == NonFinitePolicy::kSkip) {
        *nonfinite = true;
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": Push from ", request.task(), ": chunk ", g.chunk(),
          " holds a NaN or an Inf; nothing of the push is applied (--nonfinite=error)"));
    }
    FULCRUM_RETURN_IF_ERROR(AdmitNorm(*store.chunks[static_cast<size_t>(g.chunk())], g.chunk(),
                                      sum_squares, request.task()));
    empty &= sum_squares == 0;
  }
  FULCRUM_RETURN_IF_ERROR(empty_pushes_.Admit(name_, request.task(), empty));
  if (!store.sync) return absl::OkStatus();
  for (const pb::ChunkData& g : request.gradients()) {
    ChunkState& chunk = *store.chunks[static_cast<size_t>(g.chunk())];
    MutexLock lock(&chunk.mu);
    if (request.step() > chunk.step) {
      // Only after the ps went back to a checkpoint (restored or restarted): the pusher's
      // view is ahead of the variables and must be pulled again.
      return absl::AbortedError(absl::StrCat(name_, ": Push from ", request.task(),
                                             ": gradient for step ", request.step(), " but chunk ",
                                             g.chunk(), " is at step ", chunk.step,
                                             " (restored from a checkpoint?): pull again"));
    }
  }
  return absl::OkStatus();
}

absl::Status Shard::AdmitNorm(ChunkState& chunk, int chunk_id, float sum_squares,
                              const std::string& task) {
  const float norm = std::sqrt(sum_squares);
  MutexLock lock(&chunk.mu);
  float median = 0;
  if (chunk.norms_seen >= kNormHistory) {
    std::array<float, kNormHistory> sorted = chunk.recent_norms;
    std::nth_element(sorted.begin(), sorted.begin() + kNormHistory / 2, sorted.end());
    median = sorted[kNormHistory / 2];
  }
  // Squares past float's range mean elements beyond 1e19: no training gradient has them.
  if (!std::isfinite(norm) || (median > 0 && norm > std::max(kNormFactor * median, kNormFloor))) {
    counters_.pushes_absurd.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": Push from ", task, ": chunk ", chunk_id, "'s gradient norm ",
        std::isfinite(norm) ? absl::StrCat(norm) : std::string("is beyond float's range"),
        median > 0 ? absl::StrCat(" is ", norm / median, "x the median (", median, ") of its last ",
                                  kNormHistory, " pushes")
                   : std::string(),
        "; nothing of the push is applied (an absurd gradient: a diverging model, a bug or a "
        "hostile pusher)"));
  }
  chunk.recent_norms[static_cast<size_t>(chunk.norms_seen % kNormHistory)] = norm;
  ++chunk.norms_seen;
  return absl::OkStatus();
}

}  // namespace fulcrum::ps
