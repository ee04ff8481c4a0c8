#include "worker/run_stats.h"

#include <algorithm>
#include <vector>

#include "base/stats.h"

namespace fulcrum::worker {
namespace {

constexpr size_t kLossTail = 100;

double Examples(std::span<const profiler::StepRecord> steps) {
  double examples = 0.0;
  for (const profiler::StepRecord& r : steps) examples += static_cast<double>(r.examples);
  return examples;
}

double WallMs(std::span<const profiler::StepRecord> steps) {
  double ms = 0.0;
  for (const profiler::StepRecord& r : steps) ms += r.wall_ms;
  return ms;
}

}  // namespace

double ExamplesPerSecAllSteps(std::span<const profiler::StepRecord> steps, double wall_seconds) {
  return wall_seconds > 0 ? Examples(steps) / wall_seconds : 0.0;
}

double ExamplesPerSec(std::span<const profiler::StepRecord> steps, double wall_seconds) {
  const size_t begin = profiler::SteadyStateBegin(steps.size());
  if (begin == 0) return ExamplesPerSecAllSteps(steps, wall_seconds);
  const auto steady = steps.subspan(begin);
  double seconds = wall_seconds - WallMs(steps.first(begin)) / 1000.0;
  // Records that do not fit the wall time (a caller's clock mix-up) fall back on the steady
  // steps' own time.
  if (seconds <= 0) seconds = WallMs(steady) / 1000.0;
  return seconds > 0 ? Examples(steady) / seconds : 0.0;
}

double StepTimePercentileMs(std::span<const profiler::StepRecord> steps, double q) {
  std::vector<double> wall;
  wall.reserve(steps.size());
  for (const profiler::StepRecord& r : steps.subspan(profiler::SteadyStateBegin(steps.size()))) {
    wall.push_back(r.wall_ms);
  }
  return Percentile(std::move(wall), q);
}

double FinalTrainLoss(std::span<const profiler::StepRecord> steps) {
  const size_t tail = std::min(kLossTail, steps.size());
  if (tail == 0) return 0.0;
  double sum = 0.0;
  for (const profiler::StepRecord& r : steps.last(tail)) sum += r.loss;
  return sum / static_cast<double>(tail);
}

RunStats ComputeRunStats(std::span<const profiler::StepRecord> steps, double wall_seconds) {
  RunStats s;
  s.examples_per_sec = ExamplesPerSec(steps, wall_seconds);
  s.examples_per_sec_all_steps = ExamplesPerSecAllSteps(steps, wall_seconds);
  s.step_time_p50_ms = StepTimePercentileMs(steps, 0.50);
  s.step_time_p99_ms = StepTimePercentileMs(steps, 0.99);
  s.final_train_loss = FinalTrainLoss(steps);
  s.train_seconds = wall_seconds;
  return s;
}

void WriteRunStats(const RunStats& stats, nlohmann::json* summary) {
  nlohmann::json& j = *summary;
  j["examples_per_sec"] = stats.examples_per_sec;
  j["examples_per_sec_all_steps"] = stats.examples_per_sec_all_steps;
  j["step_time_p50_ms"] = stats.step_time_p50_ms;
  j["step_time_p99_ms"] = stats.step_time_p99_ms;
  j["final_train_loss"] = stats.final_train_loss;
  j["train_seconds"] = stats.train_seconds;
}

}  // namespace fulcrum::worker
