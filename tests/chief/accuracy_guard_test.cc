// chief/accuracy_guard.h: a model that learned and fell back to chance is named as diverged;
// one that never learned, is still learning, or dips without reaching chance is not.
#include "chief/accuracy_guard.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::chief {
namespace {

using ::testing::HasSubstr;

TEST(AccuracyGuardTest, AModelBackAtChanceAfterLearningDiverged) {
  const absl::Status s = CheckAccuracyHeld({{1000, 0.85}, {2000, 0.91}, {3000, 0.098}}, 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("fell from 0.9100 at global step 2000 to 0.0980 at 3000"));
  EXPECT_THAT(s.message(), HasSubstr("chance is 0.1"));
}

TEST(AccuracyGuardTest, NoLearningADipOrTooFewEvaluationsIsNoDivergence) {
  // Never a quarter of the way from chance to perfect (0.325): a slow start, not a divergence.
  EXPECT_TRUE(CheckAccuracyHeld({{100, 0.11}, {200, 0.30}, {300, 0.10}}, 10).ok());
  // Worse, but well above chance.
  EXPECT_TRUE(CheckAccuracyHeld({{100, 0.90}, {200, 0.60}}, 10).ok());
  // Still learning.
  EXPECT_TRUE(CheckAccuracyHeld({{100, 0.30}, {200, 0.60}}, 10).ok());
  EXPECT_TRUE(CheckAccuracyHeld({{100, 0.05}}, 10).ok());
  EXPECT_TRUE(CheckAccuracyHeld({}, 10).ok());
  // Two classes: chance is 0.5, so 0.55 after 0.99 is back at chance (within 1.2x)...
  EXPECT_FALSE(CheckAccuracyHeld({{100, 0.99}, {200, 0.55}}, 2).ok());
  EXPECT_TRUE(CheckAccuracyHeld({{100, 0.60}, {200, 0.55}}, 2).ok());
  // ...and with fewer than two classes there is no chance to fall back to.
  EXPECT_TRUE(CheckAccuracyHeld({{100, 0.99}, {200, 0.0}}, 1).ok());
}

}  // namespace
}  // namespace fulcrum::chief
