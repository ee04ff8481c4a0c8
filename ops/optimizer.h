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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

class ThreadPool;  // ops/cpu/thread_pool.h

enum class OptimizerKind { kSgd, kMomentum, kAdam, kAdagrad, kRmsProp };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float learning_rate = 0.01f;
  float momentum = 0.9f;             // momentum: accum = momentum * accum + g
  float beta1 = 0.9f;                // adam
  float beta2 = 0.999f;              // adam
  float epsilon = 1e-8f;             // adam (TF's epsilon-hat)
  float initial_accumulator = 0.1f;  // adagrad (TF's default)
  // rmsprop, TF 1.x's tf.train.RMSPropOptimizer (its defaults; the "rms" slot starts at 1):
  //   ms = decay ms + (1 - decay) g^2;  mom = momentum mom + lr g / sqrt(ms + eps);  var -= mom
  float rmsprop_decay = 0.9f;
  float rmsprop_momentum = 0.0f;
  float rmsprop_epsilon = 1e-10f;
  // Exponential learning-rate decay, tf.train.exponential_decay over the update count t:
  //   lr_t = learning_rate * lr_decay_rate ^ ((t - 1) / lr_decay_steps)
  // with the exponent floored when lr_decay_staircase. lr_decay_steps == 0 turns decay off.
  float lr_decay_rate = 1.0f;
  int64_t lr_decay_steps = 0;
  bool lr_decay_staircase = false;
};

// "sgd", "momentum", "adam", "adagrad" or "rmsprop" (an OptimizerDef's kind); anything else is
// InvalidArgument listing the choices.
absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name);
const char* OptimizerName(OptimizerKind kind);
// --optimizer, parsed by Abseil (base/enum_flag.h).
bool AbslParseFlag(absl::string_view text, OptimizerKind* kind, std::string* error);
std::string AbslUnparseFlag(OptimizerKind kind);

// Names of the slot variables each optimizer keeps per variable, in ApplyGradient's order.
std::vector<std::string> SlotNames(OptimizerKind kind);
// SlotNames(kind).size(), without building the names (what a step's apply checks).
size_t SlotCount(OptimizerKind kind);
// The value every element of slot `slot_index` starts at.
float SlotInitialValue(const OptimizerConfig& config, int slot_index);

// The learning rate of update `step` (1-based): learning_rate with the exponential decay of
// `config` applied (tf.train.exponential_decay at global step step - 1).
float LearningRateAt(const OptimizerConfig& config, int64_t step);

// Applies one update to `var` from `grad`, lr = LearningRateAt(config, step):
//   sgd:      var -= lr * g
//   momentum: accum = momentum * accum + g;  var -= lr * accum
//   adam:     m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//             var -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)
//   adagrad:  accum += g^2;  var -= lr * g / sqrt(accum)
//   rmsprop:  ms = decay ms + (1-decay) g^2;  mom = momentum mom + lr g / sqrt(ms + eps);
//             var -= mom  (TF 1.x; ms starts at 1, mom at 0)
// `step` is t, the 1-based number of this update for the variable (Adam's t; the decay's
// global step + 1).
// `slots` must hold SlotNames(kind).size() tensors shaped like `var`.
// g is grad_scale * grad: a sync ps applies the mean of its workers' summed gradients by
// passing 1/n here rather than dividing the sum in a pass of its own.
absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                           Tensor* var, std::span<Tensor> slots, float grad_scale = 1.0f);

// The same split over `pool`'s threads (nullptr or one thread: the call above): a variable of
// at least kParallelApplyElements elements is cut into one contiguous part per thread, each
// part updated elementwise by one thread. The apply is memory-bound and runs once per step.
inline constexpr int64_t kParallelApplyElements = int64_t{1} << 16;
absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                           Tensor* var, std::span<Tensor> slots, float grad_scale,
                           ThreadPool* pool);

}  // namespace fulcrum::ops
