// ops: optimizer apply kernels with TensorFlow 1.x semantics. They run wherever variables
// live: in the single-process trainer now, on the PS in distributed runs. Slot variables
// (momentum accumulators, Adam moments, Adagrad accumulators) are stored beside the variable
// by the caller and passed in by position, in the order SlotNames() gives.
// Thread-safety: pure functions over caller-owned tensors; the caller serialises updates of
// one variable (the PS holds the variable's lock).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

enum class OptimizerKind { kSgd, kMomentum, kAdam, kAdagrad };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float learning_rate = 0.01f;
  float momentum = 0.9f;             // momentum: accum = momentum * accum + g
  float beta1 = 0.9f;                // adam
  float beta2 = 0.999f;              // adam
  float epsilon = 1e-8f;             // adam (TF's epsilon-hat)
  float initial_accumulator = 0.1f;  // adagrad (TF's default)
};

// "sgd", "momentum", "adam" or "adagrad"; anything else is InvalidArgument listing the choices.
absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name);
const char* OptimizerName(OptimizerKind kind);

// Names of the slot variables each optimizer keeps per variable, in ApplyGradient's order.
std::vector<std::string> SlotNames(OptimizerKind kind);
// The value every element of slot `slot_index` starts at.
float SlotInitialValue(const OptimizerConfig& config, int slot_index);

// Applies one update to `var` from `grad`:
//   sgd:      var -= lr * g
//   momentum: accum = momentum * accum + g;  var -= lr * accum
//   adam:     m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//             var -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)
//   adagrad:  accum += g^2;  var -= lr * g / sqrt(accum)
// `step` is t, the 1-based number of this update for the variable (used by Adam).
// `slots` must hold SlotNames(kind).size() tensors shaped like `var`.
absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                           Tensor* var, std::span<Tensor> slots);

}  // namespace fulcrum::ops
