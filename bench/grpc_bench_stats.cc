#include "bench/grpc_bench_stats.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "base/signals.h"
#include "bench/ps_bench_rounds.h"

namespace fulcrum::bench {
namespace {

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

double RoundResult::mb_per_s() const {
  return seconds > 0 ? static_cast<double>(sent + received) / seconds / 1e6 : 0;
}
double RoundResult::calls_per_s() const {
  return seconds > 0 ? static_cast<double>(calls) / seconds : 0;
}
double RoundResult::median_us() const { return Median(us); }

absl::StatusOr<std::vector<std::vector<RoundResult>>> AlternateRounds(
    int pairs, const std::vector<RoundFn>& modes) {
  std::vector<std::vector<RoundResult>> out(modes.size());
  for (int cycle = 0; cycle <= pairs; ++cycle) {
    for (size_t m = 0; m < modes.size(); ++m) {
      if (StopSignal() != 0) return absl::CancelledError("stopped by a signal");
      auto r = modes[m]();
      if (!r.ok()) return r.status();
      if (cycle > 0) out[m].push_back(*std::move(r));
    }
  }
  return out;
}

absl::StatusOr<RoundResult> TimedSteps(absl::Duration duration, int min_iters,
                                       const std::function<absl::Status(RoundResult*)>& step) {
  using Clock = std::chrono::steady_clock;
  RoundResult r;
  const auto begin = Clock::now();
  const auto end = begin + absl::ToChronoNanoseconds(duration);
  auto now = begin;
  while (now < end || r.steps < min_iters) {
    if (StopSignal() != 0) return absl::CancelledError("stopped by a signal");
    const auto t0 = now;
    if (absl::Status s = step(&r); !s.ok()) return s;
    now = Clock::now();
    r.us.push_back(std::chrono::duration<double, std::micro>(now - t0).count());
    ++r.steps;
  }
  r.seconds = std::chrono::duration<double>(now - begin).count();
  return r;
}

void Summarize(const std::vector<RoundResult>& rounds, Row* row) {
  std::vector<double> us, mb, calls;
  row->rounds = static_cast<int>(rounds.size());
  for (const RoundResult& r : rounds) {
    us.insert(us.end(), r.us.begin(), r.us.end());
    mb.push_back(r.mb_per_s());
    calls.push_back(r.calls_per_s());
    row->steps += r.steps;
    row->calls += r.calls;
    row->bytes_sent += r.sent;
    row->bytes_received += r.received;
    row->seconds += r.seconds;
  }
  std::sort(us.begin(), us.end());
  row->samples = static_cast<int64_t>(us.size());
  row->p50_us = Percentile(us, 50);
  row->p95_us = Percentile(us, 95);
  row->p99_us = Percentile(us, 99);
  row->mean_us =
      us.empty() ? 0 : std::accumulate(us.begin(), us.end(), 0.0) / static_cast<double>(us.size());
  row->mb_per_s = Median(mb);
  row->calls_per_s = Median(calls);
}

RatioRange PairRatio(const std::vector<RoundResult>& a, const std::vector<RoundResult>& b,
                     const std::function<double(const RoundResult&)>& metric) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double den = metric(b[i]);
    if (den > 0) r.push_back(metric(a[i]) / den);
  }
  if (r.empty()) return {};
  return {Median(r), *std::min_element(r.begin(), r.end()), *std::max_element(r.begin(), r.end())};
}

}  // namespace fulcrum::bench
