#include "ps/request_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/malloc.h"
#include "runtime/cluster/chunk_plan.h"

namespace fulcrum::ps {

bool FiniteWithSumOfSquares(std::span<const float> values, float* sum_squares) {
  constexpr size_t kLanes = 16;
  uint32_t bad = 0;
  float lanes[kLanes] = {};
  size_t i = 0;
  const auto add = [&](size_t lane, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    lanes[lane] += v * v;
  };
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t k = 0; k < kLanes; ++k) add(k, values[i + k]);
  }
  for (size_t k = 0; i < values.size(); ++i, ++k) add(k, values[i]);
  float sum = 0;
  for (const float lane : lanes) sum += lane;
  *sum_squares = sum;
  return bad == 0;
}

absl::Status CheckDefinitionFits(double held, double largest_whole, size_t num_slots, bool sync,
                                 int64_t chunk_bytes) {
  const double per_chunk = static_cast<double>(std::max<int64_t>(1, chunk_bytes / 4));
  const double chunks = std::ceil(held / per_chunk);
  if (chunks > static_cast<double>(runtime::kMaxChunks)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_bytes=", chunk_bytes, " cuts the ", held, " elements this ps holds into ", chunks,
        " chunks; at most ", runtime::kMaxChunks, " are allowed (give a larger chunk_bytes)"));
  }
  const double copies = 1.0 + static_cast<double>(num_slots) + (sync ? 1.0 : 0.0);
  return CheckFitsInMemory((held * copies + largest_whole) * sizeof(float),
                           "the variables and their optimizer slots");
}

absl::Status CheckChunkIds(std::span<const int> ids, int num_chunks, std::vector<bool>* seen,
                           absl::string_view ps, const char* method, absl::string_view task) {
  seen->assign(static_cast<size_t>(num_chunks), false);
  for (const int id : ids) {
    if (id < 0 || id >= num_chunks) {
      return absl::InvalidArgumentError(absl::StrCat(ps, ": ", method, " from ", task, ": chunk ",
                                                     id, " does not exist (", num_chunks,
                                                     " chunks)"));
    }
    if ((*seen)[static_cast<size_t>(id)]) {
      return absl::InvalidArgumentError(absl::StrCat(ps, ": ", method, " from ", task, ": chunk ",
                                                     id, " is named more than once"));
    }
    (*seen)[static_cast<size_t>(id)] = true;
  }
  return absl::OkStatus();
}

absl::Status EmptyPushGuard::Admit(absl::string_view ps, const std::string& task, bool empty) {
  MutexLock lock(&mu_);
  if (!empty) {
    in_a_row_.erase(task);
    return absl::OkStatus();
  }
  const int n = ++in_a_row_[task];
  if (n < kMaxInARow) return absl::OkStatus();
  ++refused_;
  return absl::FailedPreconditionError(absl::StrCat(
      ps, ": Push from ", task, ": ", n,
      " pushes in a row with every gradient exactly zero; refused (the model cannot learn: "
      "every unit dead, or a pusher that only advances the step)"));
}

int64_t EmptyPushGuard::refused() const {
  MutexLock lock(&mu_);
  return refused_;
}

}  // namespace fulcrum::ps
