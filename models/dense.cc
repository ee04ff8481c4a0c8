#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/layer.h"
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

namespace {

class Dense final : public Layer {
 public:
  Dense(std::string name, int64_t in, int64_t out, Activation activation)
      : out_(out), activation_(activation) {
    variables_.push_back({absl::StrCat(name, "/kernel"), ops::Shape{in, out},
                          ops::Initializer::GlorotUniform()});
    variables_.push_back({absl::StrCat(name, "/bias"), ops::Shape{out}, ops::Initializer::Zeros()});
  }

  const std::vector<VariableSpec>& variables() const override { return variables_; }
  int64_t output_size() const override { return out_; }

  absl::Status Forward(std::span<const ops::Tensor> params, const ops::Tensor& x, ops::Tensor* y,
                       ops::ThreadPool* pool) const override {
    FULCRUM_RETURN_IF_ERROR(ops::MatMul(x, false, params[0], false, y, false, pool));
    FULCRUM_RETURN_IF_ERROR(ops::BiasAdd(params[1], y));
    switch (activation_) {
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

  absl::Status Backward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                        const ops::Tensor& y, ops::Tensor* dy, std::span<ops::Tensor> dparams,
                        ops::Tensor* dx, ops::ThreadPool* pool) const override {
    // dz = dy * activation'(z), computed from the output y, in place in dy.
    switch (activation_) {
      case Activation::kNone:
        break;
      case Activation::kRelu:
        FULCRUM_RETURN_IF_ERROR(ops::ReluGrad(y, *dy, dy));
        break;
      case Activation::kSigmoid:
        FULCRUM_RETURN_IF_ERROR(ops::SigmoidGrad(y, *dy, dy));
        break;
      case Activation::kTanh:
        FULCRUM_RETURN_IF_ERROR(ops::TanhGrad(y, *dy, dy));
        break;
    }
    // dW = x^T dz, db = sum_rows dz, dx = dz W^T (skipped for the first layer).
    FULCRUM_RETURN_IF_ERROR(ops::MatMul(x, true, *dy, false, &dparams[0], false, pool));
    FULCRUM_RETURN_IF_ERROR(ops::BiasAddGrad(*dy, &dparams[1]));
    if (dx != nullptr) {
      FULCRUM_RETURN_IF_ERROR(ops::MatMul(*dy, false, params[0], true, dx, false, pool));
    }
    return absl::OkStatus();
  }

 private:
  int64_t out_;
  Activation activation_;
  std::vector<VariableSpec> variables_;
};

}  // namespace

std::unique_ptr<Layer> MakeDense(std::string name, int64_t in, int64_t out,
                                 Activation activation) {
  return std::make_unique<Dense>(std::move(name), in, out, activation);
}

}  // namespace fulcrum::models
