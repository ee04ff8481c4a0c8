// tests: worker/run_stats, the one place a run's figures are computed: warm-up exclusion,
// runs too short for a warm-up, the loss tail and the summary keys written.
#include "worker/run_stats.h"

#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "profiler/records.h"

namespace fulcrum::worker {
namespace {

using profiler::kWarmupSteps;
using profiler::SteadyStateBegin;
using profiler::StepRecord;

// `n` steps of `examples` each; step i (from 0) takes wall_ms(i) and has loss i.
template <typename WallMs>
std::vector<StepRecord> Steps(int64_t n, int64_t examples, WallMs wall_ms) {
  std::vector<StepRecord> steps;
  for (int64_t i = 0; i < n; ++i) {
    StepRecord r;
    r.step = i + 1;
    r.global_step = i + 1;
    r.examples = examples;
    r.wall_ms = wall_ms(i);
    r.loss = static_cast<double>(i);
    steps.push_back(r);
  }
  return steps;
}

TEST(RunStatsTest, SteadyStateBeginsAfterTheWarmupOnlyWhenTheRunIsLonger) {
  EXPECT_EQ(SteadyStateBegin(0), 0u);
  EXPECT_EQ(SteadyStateBegin(static_cast<size_t>(kWarmupSteps)), 0u);
  EXPECT_EQ(SteadyStateBegin(static_cast<size_t>(kWarmupSteps) + 1),
            static_cast<size_t>(kWarmupSteps));
}

TEST(RunStatsTest, ExamplesPerSecLeavesOutTheWarmupSteps) {
  // 20 slow warm-up steps of 1 s, then 80 steps of 0.1 s: 100 examples each.
  const auto steps = Steps(100, 100, [](int64_t i) { return i < kWarmupSteps ? 1000.0 : 100.0; });
  const double wall = 20 * 1.0 + 80 * 0.1;  // 28 s
  EXPECT_NEAR(ExamplesPerSec(steps, wall), 80 * 100 / 8.0, 1e-9);
  EXPECT_NEAR(ExamplesPerSecAllSteps(steps, wall), 100 * 100 / 28.0, 1e-9);
}

TEST(RunStatsTest, GapsBetweenSteadyStepsCountAgainstTheRate) {
  // The loop's wall time is longer than its steps' (logging, a heartbeat check): the steady
  // part is the wall time less the warm-up steps' own time.
  const auto steps = Steps(30, 10, [](int64_t) { return 100.0; });
  EXPECT_NEAR(ExamplesPerSec(steps, /*wall_seconds=*/4.0), 10 * 10 / (4.0 - 2.0), 1e-9);
}

TEST(RunStatsTest, AShortRunReportsEveryStep) {
  const auto steps = Steps(kWarmupSteps, 10, [](int64_t i) { return 10.0 * (i + 1); });
  const double wall = 3.0;
  EXPECT_DOUBLE_EQ(ExamplesPerSec(steps, wall), ExamplesPerSecAllSteps(steps, wall));
  EXPECT_NEAR(ExamplesPerSecAllSteps(steps, wall), kWarmupSteps * 10 / 3.0, 1e-9);
  // Step times 10, 20, ..., 200 ms: every step counts.
  EXPECT_DOUBLE_EQ(StepTimePercentileMs(steps, 0.0), 10.0);
  EXPECT_DOUBLE_EQ(StepTimePercentileMs(steps, 1.0), 200.0);
}

TEST(RunStatsTest, StepTimePercentilesLeaveOutTheWarmupSteps) {
  // Warm-up steps are 1000 ms; steady ones 1, 2, ..., 100 ms.
  const auto steps = Steps(kWarmupSteps + 100, 1, [](int64_t i) {
    return i < kWarmupSteps ? 1000.0 : static_cast<double>(i - kWarmupSteps + 1);
  });
  EXPECT_DOUBLE_EQ(StepTimePercentileMs(steps, 0.5), 51.0);  // nearest rank of 100 values
  EXPECT_DOUBLE_EQ(StepTimePercentileMs(steps, 0.99), 99.0);
  EXPECT_DOUBLE_EQ(StepTimePercentileMs(steps, 1.0), 100.0);
}

TEST(RunStatsTest, FinalTrainLossIsTheMeanOfTheLastHundredSteps) {
  // Losses 0, 1, ..., 249: the last 100 are 150..249, mean 199.5.
  EXPECT_DOUBLE_EQ(FinalTrainLoss(Steps(250, 1, [](int64_t) { return 1.0; })), 199.5);
  // Fewer than 100 steps: all of them (0..9, mean 4.5).
  EXPECT_DOUBLE_EQ(FinalTrainLoss(Steps(10, 1, [](int64_t) { return 1.0; })), 4.5);
  EXPECT_DOUBLE_EQ(FinalTrainLoss({}), 0.0);
}

TEST(RunStatsTest, NoStepsOrNoTimeGiveZeros) {
  const RunStats none = ComputeRunStats({}, 0.0);
  EXPECT_EQ(none.examples_per_sec, 0.0);
  EXPECT_EQ(none.examples_per_sec_all_steps, 0.0);
  EXPECT_EQ(none.step_time_p50_ms, 0.0);
  EXPECT_EQ(none.final_train_loss, 0.0);
  EXPECT_EQ(ExamplesPerSecAllSteps(Steps(5, 1, [](int64_t) { return 1.0; }), 0.0), 0.0);
}

TEST(RunStatsTest, WriteRunStatsWritesEveryKeyAndReplacesEarlierValues) {
  const auto steps = Steps(50, 8, [](int64_t) { return 4.0; });
  const RunStats stats = ComputeRunStats(steps, 0.2);
  nlohmann::json summary;
  summary["step_time_p50_ms"] = -1.0;  // an earlier writer's figure
  summary["model"] = "logreg";
  WriteRunStats(stats, &summary);
  EXPECT_DOUBLE_EQ(summary["step_time_p50_ms"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(summary["step_time_p99_ms"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(summary["examples_per_sec"].get<double>(), stats.examples_per_sec);
  EXPECT_DOUBLE_EQ(summary["examples_per_sec_all_steps"].get<double>(), 50 * 8 / 0.2);
  EXPECT_DOUBLE_EQ(summary["final_train_loss"].get<double>(), 24.5);
  EXPECT_DOUBLE_EQ(summary["train_seconds"].get<double>(), 0.2);
  EXPECT_EQ(summary["model"], "logreg");
}

}  // namespace
}  // namespace fulcrum::worker
