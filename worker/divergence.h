// worker: telling a diverged model from a training one by its loss, so that a ruined run ends
// as a failure naming the cause instead of a success at chance accuracy (async mlp at learning
// rate 100 once trained 300 steps at loss ~40 and ended "done" at 0.10). Non-finite losses
// are caught where they appear (train_loop.cc); this looks at finite ones, as the median of
// the last kWindow steps (one wild batch moves it not at all), after kWarmupSteps:
// - a classifier whose median loss is kWorseThanChance times the loss of guessing
//   uniformly among its classes (ln C) or more: worse than knowing nothing, most of the window;
// - any model whose median loss rose kRiseFactor times or more above the lowest it reached
//   (and above kRiseFloor): orders of magnitude, not a noisy step.
// Thread-safety: one thread (the training loop's).
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/status.h"

namespace fulcrum::worker {

class DivergenceGuard {
 public:
  static constexpr int64_t kWarmupSteps = 20;
  static constexpr int kWindow = 11;
  static constexpr double kWorseThanChance = 5.0;
  static constexpr double kRiseFactor = 100.0;
  static constexpr double kRiseFloor = 1e-3;

  // num_classes: the classifier's output width (>= 2), or 0 for a model without classes.
  explicit DivergenceGuard(int64_t num_classes);

  // One step's loss (a non-finite one is ignored here); Internal (as a non-finite loss is)
  // naming the step, the median loss and the rule once the model diverged.
  absl::Status Observe(int64_t step, float loss);

 private:
  const double chance_loss_;  // ln(num_classes), 0 without classes
  int64_t observed_ = 0;
  std::array<double, kWindow> recent_{};  // the last kWindow losses, a ring
  double lowest_ = 0.0;                   // the lowest median since the warm-up
};

}  // namespace fulcrum::worker
