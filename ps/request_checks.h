// ps: checks of a request's size and content done before anything of it is allocated or
// applied: a definition's memory and chunk count, a request's chunk ids, a gradient's
// finiteness and size (issue 27: no request may crash a ps or ruin its model).
// Thread-safety: pure functions; EmptyPushGuard is thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"

namespace fulcrum::ps {

// True iff no value is a NaN or an Inf (exponent bits all ones); *sum_squares gets the sum of
// their squares (+inf once it passes float's range). One pass in 16 independent lanes, which
// the compiler vectorises without fast-math.
bool FiniteWithSumOfSquares(std::span<const float> values, float* sum_squares);

// The memory a definition asks for: the rows this ps keeps with their optimizer slots (and the
// sync accumulators), the largest whole variable while it is initialised and sliced, and the
// chunk count (runtime::kMaxChunks). InvalidArgument naming what is too large.
absl::Status CheckDefinitionFits(double held, double largest_whole, size_t num_slots, bool sync,
                                 int64_t chunk_bytes);

// Refuses a chunk id outside [0, num_chunks) or named twice in one request (a pull naming one
// chunk 1000 times once built a 941 MB reply; a push naming it twice would count twice).
// `ps`, `method` and `task` name the request in an error (built only then: pushes are hot);
// `seen` is the caller's scratch.
absl::Status CheckChunkIds(std::span<const int> ids, int num_chunks, std::vector<bool>* seen,
                           absl::string_view ps, const char* method, absl::string_view task);

// Empty pushes (every chunk's gradient exactly zero) from one task, in a row: a model that
// cannot learn (every unit dead) or a pusher that only advances the step (4000 of them once
// made a run "finish" untrained, as a success). From the kMaxInARow-th on they are refused,
// naming the task, until a push with a gradient comes; the refused ones are counted.
class EmptyPushGuard {
 public:
  static constexpr int kMaxInARow = 200;
  // OK, or FailedPrecondition from `ps` naming `task` and the count when `empty` is the
  // kMaxInARow-th or later in a row from `task`.
  absl::Status Admit(absl::string_view ps, const std::string& task, bool empty);
  int64_t refused() const;

 private:
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, int> in_a_row_ ABSL_GUARDED_BY(mu_);
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fulcrum::ps
