// chief: a model that learned and then lost it. A diverging run may keep its loss finite (the
// worker's DivergenceGuard watches the loss; the ps refuses absurd gradients) and still end at
// chance: every evaluation is checked against the best one before it.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"

namespace fulcrum::chief {

struct AccuracyPoint {
  int64_t global_step = 0;
  double accuracy = 0;
};

// Internal naming both evaluations when the last of `evals` (in order) is at chance, at most
// kChanceMargin x 1/num_classes, after an earlier one got kLearnedShare of the way from
// chance to a perfect score (10 classes: 0.325; 2 classes: 0.625): the model diverged ("test
// accuracy fell from 0.91 at global step 2000 to 0.098 at 4000; chance is 0.1"). OK otherwise, and
// for fewer than 2 classes.
inline constexpr double kChanceMargin = 1.2;
inline constexpr double kLearnedShare = 0.25;
absl::Status CheckAccuracyHeld(const std::vector<AccuracyPoint>& evals, int num_classes);

}  // namespace fulcrum::chief
