// profiler: log2 histograms, the distributions the summaries keep beside their means and
// percentiles: bucket 0 counts the values below `first_upper`, bucket i those in
// [first_upper * 2^(i-1), first_upper * 2^i), and the last bucket every larger one.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "nlohmann/json.hpp"

namespace fulcrum::profiler {

// Per-RPC payload sizes: < 64 B, 64-128 B, ..., the last bucket 64 MiB and up.
inline constexpr int kPayloadBuckets = 22;
inline constexpr double kPayloadFirstUpper = 64.0;
// Step times: < 0.25 ms, ..., the last bucket 8.192 s and up.
inline constexpr int kStepTimeBuckets = 16;
inline constexpr double kStepTimeFirstUpperMs = 0.25;

// The bucket of `value` among `buckets` (>= 1) whose first upper bound is `first_upper` (> 0).
int Log2Bucket(double value, double first_upper, int buckets);

// {"upper": [first_upper, 2 * first_upper, ..., null (the last bucket's: none)], "counts": [...]}.
nlohmann::json HistogramJson(std::span<const int64_t> counts, double first_upper);

}  // namespace fulcrum::profiler
