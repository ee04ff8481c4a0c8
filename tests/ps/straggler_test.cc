// StragglerDetector (ps/straggler.h) on its own, fed the arrival times a ps would see: a
// worker whose gradients come last by a wide margin step after step is named within the
// window; balanced steps (the last place moving between workers, small leads) never name
// anyone; the name clears once the worker keeps up again.
#include "ps/straggler.h"

#include <cstdint>
#include <random>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace fulcrum::ps {
namespace {

constexpr int kChunks = 3;

// One sync step on a ps of kChunks chunks: each worker's chunks arrive one after another,
// its first at `start + offset[w]`, 1 ms apart.
void Step(StragglerDetector& d, int64_t step, absl::Time start, const double (&offset_ms)[2]) {
  for (int c = 0; c < kChunks; ++c) {
    for (int w = 0; w < 2; ++w) {
      d.OnAccepted("worker:" + std::to_string(w), step, 1,
                   start + absl::Milliseconds(offset_ms[w] + c));
    }
  }
}

TEST(StragglerDetectorTest, AWorkerLateEveryStepIsNamedWithinTheWindow) {
  StragglerDetector d("ps:0", 2 * kChunks);
  absl::Time t = absl::FromUnixSeconds(1000);
  int64_t named_at = -1;
  for (int64_t step = 0; step < 30; ++step) {
    Step(d, step, t, {0.0, 40.0});  // worker:1 40 ms behind
    t += absl::Milliseconds(60);
    if (named_at < 0 && d.Current().worker >= 0) named_at = step;
  }
  EXPECT_GE(named_at, 0);
  EXPECT_LT(named_at, 10);
  const Straggler s = d.Current();
  EXPECT_EQ(s.worker, 1);
  EXPECT_NEAR(s.held_back_ms, 40.0, 1e-6);
  EXPECT_EQ(s.since_step, named_at);
  EXPECT_EQ(s.steps_named, 30 - named_at);

  // It keeps up again: within a window the name clears.
  for (int64_t step = 30; step < 45; ++step) {
    Step(d, step, t, {0.0, 0.5});
    t += absl::Milliseconds(20);
  }
  EXPECT_EQ(d.Current().worker, -1);
  EXPECT_EQ(d.Current().since_step, -1);
}

TEST(StragglerDetectorTest, BalancedStepsNameNobodyIn1000Steps) {
  StragglerDetector d("ps:0", 2 * kChunks);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(0.0, 3.0);
  absl::Time t = absl::FromUnixSeconds(1000);
  for (int64_t step = 0; step < 1000; ++step) {
    Step(d, step, t, {jitter(rng), jitter(rng)});
    t += absl::Milliseconds(20);
    ASSERT_EQ(d.Current().worker, -1) << "named at step " << step;
  }
  EXPECT_EQ(d.Current().steps_named, 0);
}

// Always last, but by less than a quarter of a step: not a straggler worth naming.
TEST(StragglerDetectorTest, ASmallSteadyLeadIsNotNamed) {
  StragglerDetector d("ps:0", 2 * kChunks);
  absl::Time t = absl::FromUnixSeconds(1000);
  for (int64_t step = 0; step < 50; ++step) {
    Step(d, step, t, {0.0, 6.0});
    t += absl::Milliseconds(100);
  }
  EXPECT_EQ(d.Current().worker, -1);
}

// Pushes from other tasks, of no chunk, or steps never completed are ignored.
TEST(StragglerDetectorTest, IgnoresWhatIsNotAWorkersGradients) {
  StragglerDetector d("ps:0", 2 * kChunks);
  const absl::Time t = absl::FromUnixSeconds(1000);
  d.OnAccepted("chief:0", 0, kChunks, t);
  d.OnAccepted("worker:x", 0, kChunks, t);
  d.OnAccepted("worker:0", 0, 0, t);
  for (int64_t step = 1; step < 200; ++step) d.OnAccepted("worker:0", step, kChunks, t);
  EXPECT_EQ(d.Current().worker, -1);
  EXPECT_EQ(d.Current().steps_named, 0);
}

}  // namespace
}  // namespace fulcrum::ps
