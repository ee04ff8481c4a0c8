#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/layer.h"
#include "models/layer_internal.h"

namespace fulcrum::models {

std::string ImageShape::ToString() const { return absl::StrCat(height, "x", width, "x", channels); }

namespace {

std::optional<ops::ActivationKind> KindOf(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return std::nullopt;
    case Activation::kRelu:
      return ops::ActivationKind::kRelu;
    case Activation::kSigmoid:
      return ops::ActivationKind::kSigmoid;
    case Activation::kTanh:
      return ops::ActivationKind::kTanh;
  }
  return std::nullopt;
}

}  // namespace

absl::Status ApplyActivation(ops::Backend& backend, Activation activation, ops::Tensor* y) {
  const auto kind = KindOf(activation);
  return kind.has_value() ? backend.Activate(*kind, y) : absl::OkStatus();
}

absl::Status ActivationBackward(ops::Backend& backend, Activation activation, const ops::Tensor& y,
                                ops::Tensor* dy) {
  const auto kind = KindOf(activation);
  return kind.has_value() ? backend.ActivationGrad(*kind, y, dy) : absl::OkStatus();
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
  LayerOp graph_op() const override {
    return {.op = "MatMul",
            .input_dims = {in_},
            .output_dims = {out_},
            .bias_add = true,
            .activation = activation_};
  }

  absl::Status Forward(std::span<const ops::Tensor> params, const ops::Tensor& x, ops::Tensor* y,
                       const LayerContext& ctx) const override {
    ops::Backend& b = *ctx.backend;
    FULCRUM_RETURN_IF_ERROR(b.MatMul(x, false, params[0], false, y, false));
    FULCRUM_RETURN_IF_ERROR(b.BiasAdd(params[1], y));
    return ApplyActivation(b, activation_, y);
  }

  absl::Status Backward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                        const ops::Tensor& y, ops::Tensor* dy, std::span<ops::Tensor> dparams,
                        ops::Tensor* dx, const LayerContext& ctx) const override {
    // dz = dy * activation'(z), computed from the output y, in place in dy.
    ops::Backend& b = *ctx.backend;
    FULCRUM_RETURN_IF_ERROR(ActivationBackward(b, activation_, y, dy));
    // dW = x^T dz, db = sum_rows dz, dx = dz W^T (skipped for the first layer).
    FULCRUM_RETURN_IF_ERROR(b.MatMul(x, true, *dy, false, &dparams[0], false));
    FULCRUM_RETURN_IF_ERROR(b.BiasAddGrad(*dy, &dparams[1]));
    if (dx != nullptr) {
      FULCRUM_RETURN_IF_ERROR(b.MatMul(*dy, false, params[0], true, dx, false));
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

std::unique_ptr<Layer> MakeDense(std::string name, int64_t in, int64_t out, Activation activation) {
  DenseOptions options;
  options.activation = activation;
  return MakeDense(std::move(name), in, out, options);
}

}  // namespace fulcrum::models
