#include "worker/divergence.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fulcrum::worker {
DivergenceGuard::DivergenceGuard(int64_t num_classes)
    : chance_loss_(num_classes >= 2 ? std::log(static_cast<double>(num_classes)) : 0.0) {}

absl::Status DivergenceGuard::Observe(int64_t step, float loss) {
  if (!std::isfinite(loss)) return absl::OkStatus();  // train_loop.cc names those itself
  recent_[static_cast<size_t>(observed_ % kWindow)] = loss;
  if (++observed_ < kWarmupSteps) return absl::OkStatus();
  std::array<double, kWindow> sorted = recent_;
  std::nth_element(sorted.begin(), sorted.begin() + kWindow / 2, sorted.end());
  const double median = sorted[kWindow / 2];
  lowest_ = observed_ == kWarmupSteps ? median : std::min(lowest_, median);
  const auto diverged = [&](const std::string& rule) {
    return absl::InternalError(absl::StrCat(
        "the model diverged at step ", step, ": the training loss was ",
        absl::SixDigits(median), " over the last ", kWindow, " steps (median), ", rule,
        "; the learning rate is probably too high"));
  };
  if (chance_loss_ > 0 && median >= kWorseThanChance * chance_loss_) {
    return diverged(absl::StrCat(absl::SixDigits(median / chance_loss_),
                                 "x the loss of guessing uniformly (ln of the classes = ",
                                 absl::SixDigits(chance_loss_), ")"));
  }
  if (median >= kRiseFactor * std::max(lowest_, kRiseFloor)) {
    return diverged(absl::StrCat(absl::SixDigits(median / std::max(lowest_, kRiseFloor)),
                                 "x the lowest it reached (", absl::SixDigits(lowest_), ")"));
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::worker
