// bench/grpc_bench: timed rounds and their statistics (BENCHMARKING.md): the modes of one
// item alternate round by round (A B C A B C ...) after one unreported warm-up cycle; a
// mode's figures are pooled (percentiles) or medians (rates) over its reported rounds, and a
// ratio between two modes is taken round by round (median, min, max).
// Thread-safety: pure functions; AlternateRounds runs the round functions on its own thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/grpc_bench_report.h"

namespace fulcrum::bench {

struct RoundResult {
  std::vector<double> us;  // per round trip or step
  int64_t steps = 0, calls = 0, sent = 0, received = 0;
  double seconds = 0;
  double mb_per_s() const;  // payload bytes both ways, 10^6 per second
  double calls_per_s() const;
  double median_us() const;
};

using RoundFn = std::function<absl::StatusOr<RoundResult>()>;

// Runs modes[0], modes[1], ... in turn, 1 + pairs times; returns each mode's reported rounds
// (the first cycle is the warm-up). Cancelled when a stop signal arrived.
absl::StatusOr<std::vector<std::vector<RoundResult>>> AlternateRounds(
    int pairs, const std::vector<RoundFn>& modes);

// Runs `step` (which adds what it moved to the round) until `duration` has passed and at
// least `min_iters` times, timing each call.
absl::StatusOr<RoundResult> TimedSteps(absl::Duration duration, int min_iters,
                                       const std::function<absl::Status(RoundResult*)>& step);

// Fills `row`'s counts, percentiles and median rates from its mode's rounds.
void Summarize(const std::vector<RoundResult>& rounds, Row* row);

// metric(a[i]) / metric(b[i]) round by round.
RatioRange PairRatio(const std::vector<RoundResult>& a, const std::vector<RoundResult>& b,
                     const std::function<double(const RoundResult&)>& metric);
inline double TimeOf(const RoundResult& r) { return r.median_us(); }
inline double SpeedOf(const RoundResult& r) { return r.mb_per_s(); }

}  // namespace fulcrum::bench
