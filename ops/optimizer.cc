#include "ops/optimizer.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/enum_flag.h"
#include "ops/cpu/thread_pool.h"

namespace fulcrum::ops {
namespace {

// ApplyGradient over a pool: at most this many parts; slots per variable at most kMaxSlots.
constexpr int kMaxApplyParts = 64;
constexpr size_t kMaxSlots = 2;

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

ArrayMap Mutable(Tensor* t) { return ArrayMap(t->data(), t->num_elements()); }

// accum = momentum * accum + scale * g; var -= lr * accum, in one pass over the three arrays
// (the two Eigen statements read accum twice: the apply is memory-bound).
void MomentumStep(float lr, float momentum, float scale, const Tensor& grad, Tensor* var,
                  Tensor* accum) {
  const float* __restrict g = grad.data();
  float* __restrict w = var->data();
  float* __restrict a = accum->data();
  const int64_t n = grad.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const float v = momentum * a[i] + scale * g[i];
    a[i] = v;
    w[i] -= lr * v;
  }
}

absl::Status CheckOperands(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                           const Tensor* var, std::span<Tensor> slots) {
  if (var == nullptr || var->empty() || grad.empty()) {
    return absl::InvalidArgumentError("ApplyGradient: variable or gradient is empty");
  }
  if (var->device() != Device::kCpu || grad.device() != Device::kCpu) {
    return absl::InvalidArgumentError("ApplyGradient: the cpu kernel needs cpu tensors");
  }
  if (!(var->shape() == grad.shape())) {
    return absl::InvalidArgumentError(
        absl::StrCat("ApplyGradient: gradient shape ", grad.shape().ToString(),
                     " differs from variable shape ", var->shape().ToString()));
  }
  const size_t want = SlotCount(config.kind);
  if (slots.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("ApplyGradient: ", OptimizerName(config.kind),
                                                   " needs ", want, " slots, got ", slots.size()));
  }
  for (const Tensor& slot : slots) {
    if (!(slot.shape() == var->shape()) || slot.device() != Device::kCpu) {
      return absl::InvalidArgumentError(
          absl::StrCat("ApplyGradient: slot shape ", slot.shape().ToString(),
                       " differs from variable shape ", var->shape().ToString()));
    }
  }
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ApplyGradient: step must be >= 1, got ", step));
  }
  return absl::OkStatus();
}

constexpr EnumName<OptimizerKind> kOptimizerNames[] = {{OptimizerKind::kSgd, "sgd"},
                                                       {OptimizerKind::kMomentum, "momentum"},
                                                       {OptimizerKind::kAdam, "adam"},
                                                       {OptimizerKind::kAdagrad, "adagrad"},
                                                       {OptimizerKind::kRmsProp, "rmsprop"}};

}  // namespace

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name) {
  OptimizerKind kind;
  std::string error;
  if (AbslParseFlag(name, &kind, &error)) return kind;
  return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", name, "': ", error));
}

const char* OptimizerName(OptimizerKind kind) { return EnumNameOf(kind, kOptimizerNames); }

bool AbslParseFlag(absl::string_view text, OptimizerKind* kind, std::string* error) {
  return ParseEnum(text, kOptimizerNames, kind, error);
}

std::string AbslUnparseFlag(OptimizerKind kind) { return UnparseEnum(kind, kOptimizerNames); }

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
    case OptimizerKind::kRmsProp:
      return {"rms", "momentum"};
  }
  return {};
}

size_t SlotCount(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kMomentum:
    case OptimizerKind::kAdagrad:
      return 1;
    case OptimizerKind::kAdam:
    case OptimizerKind::kRmsProp:
      return 2;
  }
  return 0;
}

float SlotInitialValue(const OptimizerConfig& config, int slot_index) {
  if (config.kind == OptimizerKind::kAdagrad && slot_index == 0) return config.initial_accumulator;
  // TF 1.x's RMSPropOptimizer starts its "rms" slot at ones.
  if (config.kind == OptimizerKind::kRmsProp && slot_index == 0) return 1.0f;
  return 0.0f;
}

float LearningRateAt(const OptimizerConfig& config, int64_t step) {
  if (config.lr_decay_steps <= 0 || config.lr_decay_rate == 1.0f) return config.learning_rate;
  double exponent = static_cast<double>(step - 1) / static_cast<double>(config.lr_decay_steps);
  if (config.lr_decay_staircase) exponent = std::floor(exponent);
  return static_cast<float>(config.learning_rate * std::pow(config.lr_decay_rate, exponent));
}

absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                           Tensor* var, std::span<Tensor> slots, float grad_scale) {
  if (auto s = CheckOperands(config, step, grad, var, slots); !s.ok()) return s;
  if (config.kind == OptimizerKind::kMomentum) {
    MomentumStep(LearningRateAt(config, step), config.momentum, grad_scale, grad, var, &slots[0]);
    return absl::OkStatus();
  }
  const auto g = grad_scale * ConstArrayMap(grad.data(), grad.num_elements());
  auto w = Mutable(var);
  const float lr = LearningRateAt(config, step);
  switch (config.kind) {
    case OptimizerKind::kSgd:
      w -= lr * g;
      break;
    case OptimizerKind::kMomentum:  // MomentumStep above
      break;
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
    case OptimizerKind::kRmsProp: {
      auto ms = Mutable(&slots[0]);
      auto mom = Mutable(&slots[1]);
      ms = config.rmsprop_decay * ms + (1.0f - config.rmsprop_decay) * g.square();
      mom = config.rmsprop_momentum * mom + lr * g * (ms + config.rmsprop_epsilon).rsqrt();
      w -= mom;
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                           Tensor* var, std::span<Tensor> slots, float grad_scale,
                           ThreadPool* pool) {
  const int64_t n = grad.num_elements();
  const int parts = pool == nullptr ? 1 : std::min(pool->num_threads(), kMaxApplyParts);
  if (parts <= 1 || n < kParallelApplyElements) {
    return ApplyGradient(config, step, grad, var, slots, grad_scale);
  }
  if (auto s = CheckOperands(config, step, grad, var, slots); !s.ok()) return s;
  // Part p updates [cut(p), cut(p + 1)), cut on 64-byte boundaries.
  const auto cut = [n, parts](int p) {
    return p == parts ? n : std::min(n, (n * p / parts + 15) & ~int64_t{15});
  };
  std::array<absl::Status, kMaxApplyParts> status;
  pool->ParallelFor(parts, [&](int p) {
    const int64_t b = cut(p);
    const int64_t e = cut(p + 1);
    if (e <= b) return;
    const Shape part({e - b});
    const Tensor g = Tensor::View(const_cast<float*>(grad.data()) + b, part);
    Tensor w = Tensor::View(var->data() + b, part);
    std::array<Tensor, kMaxSlots> s;
    for (size_t i = 0; i < slots.size(); ++i) s[i] = Tensor::View(slots[i].data() + b, part);
    status[static_cast<size_t>(p)] =
        ApplyGradient(config, step, g, &w, std::span<Tensor>(s.data(), slots.size()), grad_scale);
  });
  for (int p = 0; p < parts; ++p) {
    if (!status[static_cast<size_t>(p)].ok()) return status[static_cast<size_t>(p)];
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
