#include "ops/optimizer.h"

#include <cmath>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"

namespace fulcrum::ops {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

ArrayMap Mutable(Tensor* t) { return ArrayMap(t->data(), t->num_elements()); }

absl::Status CheckOperands(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                           const Tensor* var, std::span<Tensor> slots) {
  if (var == nullptr || var->empty() || grad.empty()) {
    return absl::InvalidArgumentError("ApplyGradient: variable or gradient is empty");
  }
  if (var->device() != Device::kCpu || grad.device() != Device::kCpu) {
    return absl::InvalidArgumentError("ApplyGradient: the cpu kernel needs cpu tensors");
  }
  if (!(var->shape() == grad.shape())) {
    return absl::InvalidArgumentError(absl::StrCat("ApplyGradient: gradient shape ",
                                                   grad.shape().ToString(),
                                                   " differs from variable shape ",
                                                   var->shape().ToString()));
  }
  const size_t want = SlotNames(config.kind).size();
  if (slots.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("ApplyGradient: ", OptimizerName(config.kind),
                                                   " needs ", want, " slots, got ",
                                                   slots.size()));
  }
  for (const Tensor& slot : slots) {
    if (!(slot.shape() == var->shape()) || slot.device() != Device::kCpu) {
      return absl::InvalidArgumentError(absl::StrCat("ApplyGradient: slot shape ",
                                                     slot.shape().ToString(),
                                                     " differs from variable shape ",
                                                     var->shape().ToString()));
    }
  }
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ApplyGradient: step must be >= 1, got ", step));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "momentum") return OptimizerKind::kMomentum;
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "adagrad") return OptimizerKind::kAdagrad;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown optimizer '", name, "': expected one of sgd, momentum, adam, adagrad"));
}

const char* OptimizerName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kMomentum:
      return "momentum";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdagrad:
      return "adagrad";
  }
  return "unknown";
}

std::vector<std::string> SlotNames(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return {};
    case OptimizerKind::kMomentum:
      return {"momentum"};
    case OptimizerKind::kAdam:
      return {"m", "v"};
    case OptimizerKind::kAdagrad:
      return {"accumulator"};
  }
  return {};
}

float SlotInitialValue(const OptimizerConfig& config, int slot_index) {
  return config.kind == OptimizerKind::kAdagrad && slot_index == 0 ? config.initial_accumulator
                                                                   : 0.0f;
}

absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                           Tensor* var, std::span<Tensor> slots) {
  if (auto s = CheckOperands(config, step, grad, var, slots); !s.ok()) return s;
  const ConstArrayMap g(grad.data(), grad.num_elements());
  auto w = Mutable(var);
  const float lr = config.learning_rate;
  switch (config.kind) {
    case OptimizerKind::kSgd:
      w -= lr * g;
      break;
    case OptimizerKind::kMomentum: {
      auto accum = Mutable(&slots[0]);
      accum = config.momentum * accum + g;
      w -= lr * accum;
      break;
    }
    case OptimizerKind::kAdam: {
      auto m = Mutable(&slots[0]);
      auto v = Mutable(&slots[1]);
      const double t = static_cast<double>(step);
      const float lr_t = static_cast<float>(lr * std::sqrt(1.0 - std::pow(config.beta2, t)) /
                                            (1.0 - std::pow(config.beta1, t)));
      m = config.beta1 * m + (1.0f - config.beta1) * g;
      v = config.beta2 * v + (1.0f - config.beta2) * g.square();
      w -= lr_t * m / (v.sqrt() + config.epsilon);
      break;
    }
    case OptimizerKind::kAdagrad: {
      auto accum = Mutable(&slots[0]);
      accum += g.square();
      w -= lr * g * accum.rsqrt();
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
