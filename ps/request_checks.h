// ps: checks of a request's size and content done before anything of it is allocated or
// applied: a definition's memory and chunk count, a request's chunk ids, a gradient's
// finiteness and size (issue 27: no request may crash a ps or ruin its model).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

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

}  // namespace fulcrum::ps
