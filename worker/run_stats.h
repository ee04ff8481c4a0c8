// worker: a run's statistics, computed in one place from the loop's step records, for single
// mode and cluster workers alike. Steady-state figures leave out the first
// profiler::kWarmupSteps steps when the run has more (a shorter run reports every step);
// figures named *_all_steps include them. These functions are the only writers of the
// summary keys they produce (see WriteRunStats).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <span>

#include "nlohmann/json.hpp"
#include "profiler/records.h"

namespace fulcrum::worker {

// What WriteRunStats puts into summary.json.
struct RunStats {
  double examples_per_sec = 0.0;            // steady state (warm-up excluded)
  double examples_per_sec_all_steps = 0.0;  // every step, over the loop's wall time
  double step_time_p50_ms = 0.0;            // steady state (warm-up excluded)
  double step_time_p99_ms = 0.0;            // steady state (warm-up excluded)
  double final_train_loss = 0.0;            // mean loss of the last min(100, steps) steps
  double train_seconds = 0.0;               // the loop's wall time
};

// Examples per second of the steady-state steps. `wall_seconds` is the loop's wall time
// (from before its first step to after its last); the steady part is that time less the
// warm-up steps' own wall time, so gaps between steady steps count. A run too short for a
// warm-up reports ExamplesPerSecAllSteps. 0 for no steps or no time.
double ExamplesPerSec(std::span<const profiler::StepRecord> steps, double wall_seconds);

// Examples of every step over `wall_seconds`; 0 when wall_seconds <= 0.
double ExamplesPerSecAllSteps(std::span<const profiler::StepRecord> steps, double wall_seconds);

// Nearest-rank percentile q in [0, 1] of the steady-state steps' wall_ms; 0 for no steps.
double StepTimePercentileMs(std::span<const profiler::StepRecord> steps, double q);

// Mean loss of the last min(100, n) steps; 0 for no steps.
double FinalTrainLoss(std::span<const profiler::StepRecord> steps);

// All of the above.
RunStats ComputeRunStats(std::span<const profiler::StepRecord> steps, double wall_seconds);

// Writes examples_per_sec, examples_per_sec_all_steps, step_time_p50_ms, step_time_p99_ms,
// final_train_loss and train_seconds into *summary (replacing any earlier values).
void WriteRunStats(const RunStats& stats, nlohmann::json* summary);

}  // namespace fulcrum::worker
