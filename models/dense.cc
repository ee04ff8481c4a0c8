#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/layer.h"
#include "models/layer_internal.h"
#include "ops/cpu/kernels.h"

namespace fulcrum::models {

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return "linear";
    case Activation::kRelu:
      return "relu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
  }
  return "unknown";
}

std::string ImageShape::ToString() const { return absl::StrCat(height, "x", width, "x", channels); }

absl::Status ApplyActivation(Activation activation, ops::Tensor* y) {
  switch (activation) {
    case Activation::kNone:
      return absl::OkStatus();
    case Activation::kRelu:
      return ops::Relu(*y, y);
    case Activation::kSigmoid:
      return ops::Sigmoid(*y, y);
    case Activation::kTanh:
      return ops::Tanh(*y, y);
  }
  return absl::OkStatus();
}

absl::Status ActivationBackward(Activation activation, const ops::Tensor& y, ops::Tensor* dy) {
  switch (activation) {
    case Activation::kNone:
      return absl::OkStatus();
    case Activation::kRelu:
      return ops::ReluGrad(y, *dy, dy);
    case Activation::kSigmoid:
      return ops::SigmoidGrad(y, *dy, dy);
    case Activation::kTanh:
      return ops::TanhGrad(y, *dy, dy);
  }
  return absl::OkStatus();
}

namespace {

class Dense final : public Layer {
 public:
  Dense(std::string name, int64_t in, int64_t out, const DenseOptions& options)
      : name_(std::move(name)), in_(in), out_(out), activation_(options.activation) {
    variables_.push_back({absl::StrCat(name_, "/kernel"), ops::Shape{in, out}, options.kernel_init,
                          options.weight_decay, /*is_kernel=*/true});
    variables_.push_back(
        {absl::StrCat(name_, "/bias"), ops::Shape{out}, options.bias_init, 0.0f, false});
  }

  const std::string& name() const override { return name_; }
  const std::vector<VariableSpec>& variables() const override { return variables_; }
  int64_t input_size() const override { return in_; }
  int64_t output_size() const override { return out_; }

  absl::Status Forward(std::span<const ops::Tensor> params, const ops::Tensor& x, ops::Tensor* y,
                       const LayerContext& ctx) const override {
    FULCRUM_RETURN_IF_ERROR(ops::MatMul(x, false, params[0], false, y, false, ctx.pool));
    FULCRUM_RETURN_IF_ERROR(ops::BiasAdd(params[1], y));
    return ApplyActivation(activation_, y);
  }

  absl::Status Backward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                        const ops::Tensor& y, ops::Tensor* dy, std::span<ops::Tensor> dparams,
                        ops::Tensor* dx, const LayerContext& ctx) const override {
    // dz = dy * activation'(z), computed from the output y, in place in dy.
    FULCRUM_RETURN_IF_ERROR(ActivationBackward(activation_, y, dy));
    // dW = x^T dz, db = sum_rows dz, dx = dz W^T (skipped for the first layer).
    FULCRUM_RETURN_IF_ERROR(ops::MatMul(x, true, *dy, false, &dparams[0], false, ctx.pool));
    FULCRUM_RETURN_IF_ERROR(ops::BiasAddGrad(*dy, &dparams[1]));
    if (dx != nullptr) {
      FULCRUM_RETURN_IF_ERROR(ops::MatMul(*dy, false, params[0], true, dx, false, ctx.pool));
    }
    return absl::OkStatus();
  }

 private:
  std::string name_;
  int64_t in_;
  int64_t out_;
  Activation activation_;
  std::vector<VariableSpec> variables_;
};

}  // namespace

std::unique_ptr<Layer> MakeDense(std::string name, int64_t in, int64_t out,
                                 const DenseOptions& options) {
  return std::make_unique<Dense>(std::move(name), in, out, options);
}

std::unique_ptr<Layer> MakeDense(std::string name, int64_t in, int64_t out,
                                 Activation activation) {
  DenseOptions options;
  options.activation = activation;
  return MakeDense(std::move(name), in, out, options);
}

}  // namespace fulcrum::models
