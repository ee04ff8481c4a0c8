// The divergence guard on loss sequences shaped like real runs: a healthy classifier and
// regression never trip it (noise and single wild batches included); a classifier stuck far
// above chance loss (async mlp at learning rate 100: ~40 against ln 10) and a regression
// whose loss rose a hundredfold do, at the first step after the warm-up that shows it.
#include "worker/divergence.h"

#include <cmath>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace fulcrum::worker {
namespace {

TEST(DivergenceGuardTest, AHealthyClassifierWithNoiseAndWildBatchesNeverTrips) {
  DivergenceGuard guard(10);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(0.7, 1.3);
  for (int64_t step = 1; step <= 5000; ++step) {
    double loss = (0.3 + 2.0 * std::exp(-step / 300.0)) * noise(rng);
    if (step % 97 == 0) loss = 500.0;  // one wild batch now and then
    ASSERT_TRUE(guard.Observe(step, static_cast<float>(loss)).ok()) << "step " << step;
  }
}

TEST(DivergenceGuardTest, AClassifierFarWorseThanGuessingTripsRightAfterTheWarmUp) {
  DivergenceGuard guard(10);
  absl::Status s;
  int64_t step = 0;
  while (s.ok() && step < 100) s = guard.Observe(++step, 40.0f);
  EXPECT_EQ(step, DivergenceGuard::kWarmupSteps);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  const std::string m(s.message());
  EXPECT_NE(m.find("the model diverged at step 20"), std::string::npos) << m;
  EXPECT_NE(m.find("the loss of guessing uniformly"), std::string::npos) << m;
  EXPECT_NE(m.find("learning rate"), std::string::npos) << m;
}

TEST(DivergenceGuardTest, ARegressionLossRisingAHundredfoldTrips) {
  DivergenceGuard guard(0);  // no classes: only the rise counts
  int64_t step = 0;
  for (; step < 200; ++step) ASSERT_TRUE(guard.Observe(step + 1, 0.02f).ok());
  // Tenfold is training noise at worst; a hundredfold over most of the window is not.
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(guard.Observe(++step, 0.2f).ok());
  absl::Status s;
  int i = 0;
  while (s.ok() && i++ < 50) s = guard.Observe(++step, 2.5f);
  EXPECT_EQ(i, DivergenceGuard::kWindow / 2 + 1) << "trips once the median moved";
  EXPECT_NE(std::string(s.message()).find("the lowest it reached"), std::string::npos) << s;
}

TEST(DivergenceGuardTest, NonFiniteLossesAreLeftToTheTrainingLoop) {
  DivergenceGuard guard(10);
  for (int64_t step = 1; step <= 50; ++step) {
    EXPECT_TRUE(guard.Observe(step, std::nanf("")).ok());
  }
}

}  // namespace
}  // namespace fulcrum::worker
