// models: helpers the layer implementations share (not part of the module's API).
#pragma once

#include "absl/status/status.h"
#include "models/layer.h"
#include "ops/tensor.h"

namespace fulcrum::models {

// y = activation(y), in place, on `backend`.
absl::Status ApplyActivation(ops::Backend& backend, Activation activation, ops::Tensor* y);
// dy = dy * activation'(z), from the activation's output y, in place.
absl::Status ActivationBackward(ops::Backend& backend, Activation activation, const ops::Tensor& y,
                                ops::Tensor* dy);

}  // namespace fulcrum::models
