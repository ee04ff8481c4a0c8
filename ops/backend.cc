#include "ops/backend.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fulcrum::ops {
namespace {

// t [..., C] as the matrix [elements / C, C] (same storage).
absl::StatusOr<Tensor> ChannelRows(const Tensor& t, int64_t channels) {
  if (channels <= 0 || t.num_elements() % channels != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "conv: ", t.shape().ToString(), " is not a whole number of ", channels, "-channel pixels"));
  }
  return t.Reshaped({t.num_elements() / channels, channels});
}

}  // namespace

absl::Status Backend::ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                                    Tensor* var, std::span<Tensor> slots, float grad_scale) {
  return ops::ApplyGradient(config, step, grad, var, slots, grad_scale);
}

absl::Status Backend::Conv2DBiasActivation(const Tensor& x, const Tensor& filter,
                                           const Tensor& bias, const Conv2DParams& params,
                                           ConvPostOp post_op, Tensor* y, Tensor* workspace) {
  FULCRUM_RETURN_IF_ERROR(Conv2D(x, filter, params, y, workspace));
  FULCRUM_ASSIGN_OR_RETURN(Tensor rows, ChannelRows(*y, bias.num_elements()));
  FULCRUM_RETURN_IF_ERROR(BiasAdd(bias, &rows));
  switch (post_op) {
    case ConvPostOp::kNone:
      return absl::OkStatus();
    case ConvPostOp::kRelu:
      return Activate(ActivationKind::kRelu, y);
    case ConvPostOp::kSigmoid:
      return Activate(ActivationKind::kSigmoid, y);
    case ConvPostOp::kTanh:
      return Activate(ActivationKind::kTanh, y);
  }
  return absl::InvalidArgumentError("Conv2DBiasActivation: unknown post-op");
}

absl::Status Backend::Conv2DBackpropFilterBias(const Tensor& x, const Tensor& dy,
                                               const Conv2DParams& params, Tensor* dfilter,
                                               Tensor* dbias, Tensor* workspace) {
  if (dbias != nullptr) {
    FULCRUM_ASSIGN_OR_RETURN(Tensor rows, ChannelRows(dy, dbias->num_elements()));
    FULCRUM_RETURN_IF_ERROR(BiasAddGrad(rows, dbias));
  }
  return Conv2DBackpropFilter(x, dy, params, dfilter, workspace);
}

}  // namespace fulcrum::ops
