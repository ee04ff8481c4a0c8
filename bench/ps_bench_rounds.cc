#include "bench/ps_bench_rounds.h"

#include <algorithm>
#include <cstdio>
#include <latch>
#include <thread>

#include "absl/time/clock.h"

namespace fulcrum::bench {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Series::steps() const {
  std::vector<double> v;
  for (const auto& r : rounds) v.push_back(r.steps_per_s());
  return Median(v);
}

double Series::mb() const {
  std::vector<double> v;
  for (const auto& r : rounds) v.push_back(r.mb_per_s());
  return Median(v);
}

std::vector<double> Series::cpu() const {
  std::vector<double> out;
  for (size_t i = 0; !rounds.empty() && i < rounds[0].cpu.size(); ++i) {
    std::vector<double> v;
    for (const auto& r : rounds) v.push_back(i < r.cpu.size() ? r.cpu[i] : 0);
    out.push_back(Median(v));
  }
  return out;
}

Ratio Pairwise(const Series& a, const Series& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.rounds.size() && i < b.rounds.size(); ++i) {
    r.push_back(a.rounds[i].steps_per_s() / b.rounds[i].steps_per_s());
  }
  if (r.empty()) return {};
  return {Median(r), *std::min_element(r.begin(), r.end()), *std::max_element(r.begin(), r.end())};
}

absl::StatusOr<Round> RunRound(int num_workers, absl::Duration duration, const StepFn& step) {
  std::latch start(1);
  std::vector<int64_t> steps(static_cast<size_t>(num_workers), 0);
  std::vector<int64_t> bytes(static_cast<size_t>(num_workers), 0);
  std::vector<absl::Status> status(static_cast<size_t>(num_workers));
  absl::Time deadline;  // written before count_down, which the threads wait for
  std::vector<std::thread> threads;
  for (int w = 0; w < num_workers; ++w) {
    threads.emplace_back([&, w] {
      start.wait();
      const size_t i = static_cast<size_t>(w);
      do {
        status[i] = step(w, &bytes[i]);
        if (!status[i].ok()) return;
        ++steps[i];
      } while (absl::Now() < deadline);
    });
  }
  const absl::Time begin = absl::Now();
  deadline = begin + duration;
  start.count_down();
  for (auto& t : threads) t.join();
  Round r;
  r.seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  for (int w = 0; w < num_workers; ++w) {
    const size_t i = static_cast<size_t>(w);
    if (!status[i].ok()) return status[i];
    r.steps += steps[i];
    r.bytes += bytes[i];
  }
  return r;
}

absl::StatusOr<std::vector<Series>> Alternate(const PsBenchOptions& options, int num_workers,
                                              const std::vector<StepFn>& modes,
                                              const std::vector<CpuFn>& cpu) {
  const absl::Duration round = absl::Milliseconds(options.round_ms);
  std::vector<Series> series(modes.size());
  for (int cycle = 0; cycle <= options.pairs; ++cycle) {
    for (size_t m = 0; m < modes.size(); ++m) {
      const std::vector<double> cpu_before = m < cpu.size() ? cpu[m]() : std::vector<double>{};
      const absl::Time begin = absl::Now();
      auto r = RunRound(num_workers, cycle == 0 ? 2 * round : round, modes[m]);
      if (!r.ok()) return r.status();
      if (m < cpu.size()) {
        const std::vector<double> cpu_after = cpu[m]();
        const double wall = absl::ToDoubleSeconds(absl::Now() - begin);
        for (size_t i = 0; i < cpu_after.size() && i < cpu_before.size(); ++i) {
          r->cpu.push_back((cpu_after[i] - cpu_before[i]) / wall);
        }
      }
      if (options.verbose) {
        std::fprintf(stderr, "  cycle %d mode %zu: %lld steps in %.3f s = %.1f steps/s%s\n", cycle,
                     m, static_cast<long long>(r->steps), r->seconds, r->steps_per_s(),
                     cycle == 0 ? " (warm-up)" : "");
      }
      if (cycle > 0) series[m].rounds.push_back(*r);
    }
  }
  return series;
}

}  // namespace fulcrum::bench
