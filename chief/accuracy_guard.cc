#include "chief/accuracy_guard.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fulcrum::chief {

absl::Status CheckAccuracyHeld(const std::vector<AccuracyPoint>& evals, int num_classes) {
  if (num_classes < 2 || evals.size() < 2) return absl::OkStatus();
  const double chance = 1.0 / num_classes;
  const AccuracyPoint& last = evals.back();
  if (last.accuracy > kChanceMargin * chance) return absl::OkStatus();
  const AccuracyPoint* best = nullptr;
  for (size_t i = 0; i + 1 < evals.size(); ++i) {
    if (best == nullptr || evals[i].accuracy > best->accuracy) best = &evals[i];
  }
  if (best->accuracy < chance + kLearnedShare * (1 - chance)) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat(
      "the model diverged: test accuracy fell from %.4f at global step %d to %.4f at %d, "
      "chance is %.4g (lower --learning_rate, or add --staleness_aware_lr in async mode)",
      best->accuracy, best->global_step, last.accuracy, last.global_step, chance));
}

}  // namespace fulcrum::chief
