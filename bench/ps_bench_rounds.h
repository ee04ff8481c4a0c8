// bench/ps_throughput: timed rounds and their statistics. A round runs every worker thread
// for a fixed time; modes (PS, plain, ...) alternate round by round after a warm-up cycle,
// and each mode's figures are the median over its rounds, ratios taken pair by pair.
// Thread-safety: RunRound/Alternate start and join their own threads; the rest is pure.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/ps_bench_options.h"

namespace fulcrum::bench {

struct Round {
  int64_t steps = 0;  // worker steps, all workers
  int64_t bytes = 0;
  double seconds = 0;
  std::vector<double> cpu;  // with a CPU probe: cores busy per process during the round
  double steps_per_s() const { return static_cast<double>(steps) / seconds; }
  double mb_per_s() const { return static_cast<double>(bytes) / seconds / 1e6; }
};

// Median (mean of the middle two for an even count); 0 for no values.
double Median(std::vector<double> v);

struct Series {
  std::vector<Round> rounds;
  double steps() const;  // median steps/s
  double mb() const;     // median MB/s
  // Median cores busy of process i (Round::cpu), one entry per process.
  std::vector<double> cpu() const;
};

struct Ratio {
  double median = 0, min = 0, max = 0;
};

// a/b of steps/s, round by round.
Ratio Pairwise(const Series& a, const Series& b);

using StepFn = std::function<absl::Status(int w, int64_t* bytes)>;
// CPU seconds so far of each process of interest (Cluster::Cpu).
using CpuFn = std::function<std::vector<double>()>;

// Runs `step` on num_workers threads for `duration` (each at least one step), all starting
// together; the round lasts until the last worker's last step ends.
absl::StatusOr<Round> RunRound(int num_workers, absl::Duration duration, const StepFn& step);

// Runs the modes in turn (A B [C] A B [C] ...): one unreported warm-up cycle of 2x-long
// rounds (the connections' flow-control windows and the allocators are still settling), then
// options.pairs reported cycles of options.round_ms rounds. With `cpu` (one probe per mode),
// each round also records the cores each probed process kept busy.
absl::StatusOr<std::vector<Series>> Alternate(const PsBenchOptions& options, int num_workers,
                                              const std::vector<StepFn>& modes,
                                              const std::vector<CpuFn>& cpu = {});

}  // namespace fulcrum::bench
