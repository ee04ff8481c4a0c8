// models: the layers that see each example as an NHWC image (conv, pooling, LRN) and dropout.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "models/layer.h"
#include "models/layer_internal.h"
#include "ops/backend.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/lrn.h"
#include "ops/cpu/pool.h"

namespace fulcrum::models {
namespace {

ops::Shape Nhwc(int64_t batch, const ImageShape& s) {
  return ops::Shape({batch, s.height, s.width, s.channels});
}

// The [batch, size] tensor t seen as [batch, H, W, C] (same storage).
absl::StatusOr<ops::Tensor> AsImages(const ops::Tensor& t, const ImageShape& s,
                                     const std::string& layer, const char* what) {
  if (t.cols() != s.size()) {
    return absl::InvalidArgumentError(absl::StrCat(layer, ": ", what, " ", t.shape().ToString(),
                                                   " has ", t.cols(), " values per example, a ",
                                                   s.ToString(), " image has ", s.size()));
  }
  return t.Reshaped(Nhwc(t.rows(), s));
}

absl::Status CheckImage(const std::string& name, const ImageShape& s) {
  if (s.height <= 0 || s.width <= 0 || s.channels <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": input image ", s.ToString(), " must have positive dimensions"));
  }
  return absl::OkStatus();
}

ImageShape ImageOf(const ops::Shape& nhwc) { return {nhwc.dim(1), nhwc.dim(2), nhwc.dim(3)}; }

std::vector<int64_t> Dims(const ImageShape& s) { return {s.height, s.width, s.channels}; }

ops::ConvPostOp PostOp(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return ops::ConvPostOp::kNone;
    case Activation::kRelu:
      return ops::ConvPostOp::kRelu;
    case Activation::kSigmoid:
      return ops::ConvPostOp::kSigmoid;
    case Activation::kTanh:
      return ops::ConvPostOp::kTanh;
  }
  return ops::ConvPostOp::kNone;
}

class Conv2DLayer final : public Layer {
 public:
  Conv2DLayer(std::string name, ImageShape in, ImageShape out, const ConvOptions& o)
      : name_(std::move(name)), in_(in), out_(out), activation_(o.activation) {
    params_.stride_h = o.stride;
    params_.stride_w = o.stride;
    params_.padding = o.padding;
    params_.layer = name_;
    variables_.push_back({absl::StrCat(name_, "/kernel"),
                          ops::Shape{o.kernel_h, o.kernel_w, in.channels, o.filters}, o.kernel_init,
                          o.weight_decay, /*is_kernel=*/true});
    variables_.push_back(
        {absl::StrCat(name_, "/bias"), ops::Shape{o.filters}, o.bias_init, 0.0f, false});
  }

  const std::string& name() const override { return name_; }
  const std::vector<VariableSpec>& variables() const override { return variables_; }
  int64_t input_size() const override { return in_.size(); }
  int64_t output_size() const override { return out_.size(); }
  LayerOp graph_op() const override {
    return {.op = "Conv2D",
            .input_dims = Dims(in_),
            .output_dims = Dims(out_),
            .bias_add = true,
            .activation = activation_};
  }
  int64_t temp_elements(int64_t batch) const override {
    auto g = ops::Conv2DGeometryFor(Nhwc(batch, in_), variables_[0].shape, params_, name_);
    return g.ok() ? ops::Conv2DPreferredWorkspaceElements(*g) : 0;
  }

  absl::Status Forward(std::span<const ops::Tensor> params, const ops::Tensor& x, ops::Tensor* y,
                       const LayerContext& ctx) const override {
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor x4, AsImages(x, in_, name_, "input"));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor y4, AsImages(*y, out_, name_, "output"));
    ops::Backend& b = *ctx.backend;
    // The bias and the activation fused into the convolution (no passes of their own).
    return b.Conv2DBiasActivation(x4, params[0], params[1], params_, PostOp(activation_), &y4,
                                  ctx.temp);
  }

  absl::Status Backward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                        const ops::Tensor& y, ops::Tensor* dy, std::span<ops::Tensor> dparams,
                        ops::Tensor* dx, const LayerContext& ctx) const override {
    ops::Backend& b = *ctx.backend;
    FULCRUM_RETURN_IF_ERROR(ActivationBackward(b, activation_, y, dy));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor x4, AsImages(x, in_, name_, "input"));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor dy4, AsImages(*dy, out_, name_, "gradient"));
    FULCRUM_RETURN_IF_ERROR(
        b.Conv2DBackpropFilterBias(x4, dy4, params_, &dparams[0], &dparams[1], ctx.temp));
    if (dx != nullptr) {
      FULCRUM_ASSIGN_OR_RETURN(ops::Tensor dx4, AsImages(*dx, in_, name_, "input gradient"));
      FULCRUM_RETURN_IF_ERROR(b.Conv2DBackpropInput(dy4, params[0], params_, &dx4, ctx.temp));
    }
    return absl::OkStatus();
  }

 private:
  std::string name_;
  ImageShape in_, out_;
  Activation activation_;
  ops::Conv2DParams params_;
  std::vector<VariableSpec> variables_;
};

class PoolLayer final : public Layer {
 public:
  PoolLayer(std::string name, ImageShape in, ImageShape out, const ops::Pool2DParams& params,
            bool max)
      : name_(std::move(name)), in_(in), out_(out), params_(params), max_(max) {
    params_.layer = name_;
  }

  const std::string& name() const override { return name_; }
  const std::vector<VariableSpec>& variables() const override { return variables_; }
  int64_t input_size() const override { return in_.size(); }
  int64_t output_size() const override { return out_.size(); }
  LayerOp graph_op() const override {
    return {.op = max_ ? "MaxPool" : "AvgPool", .input_dims = Dims(in_), .output_dims = Dims(out_)};
  }

  absl::Status Forward(std::span<const ops::Tensor>, const ops::Tensor& x, ops::Tensor* y,
                       const LayerContext& ctx) const override {
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor x4, AsImages(x, in_, name_, "input"));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor y4, AsImages(*y, out_, name_, "output"));
    return max_ ? ctx.backend->MaxPool(x4, params_, &y4) : ctx.backend->AvgPool(x4, params_, &y4);
  }

  absl::Status Backward(std::span<const ops::Tensor>, const ops::Tensor& x, const ops::Tensor&,
                        ops::Tensor* dy, std::span<ops::Tensor>, ops::Tensor* dx,
                        const LayerContext& ctx) const override {
    if (dx == nullptr) return absl::OkStatus();
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor dy4, AsImages(*dy, out_, name_, "gradient"));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor dx4, AsImages(*dx, in_, name_, "input gradient"));
    if (!max_) return ctx.backend->AvgPoolGrad(dy4, params_, &dx4);
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor x4, AsImages(x, in_, name_, "input"));
    return ctx.backend->MaxPoolGrad(x4, dy4, params_, &dx4);
  }

 private:
  std::string name_;
  ImageShape in_, out_;
  ops::Pool2DParams params_;
  bool max_;
  std::vector<VariableSpec> variables_;
};

class LrnLayer final : public Layer {
 public:
  LrnLayer(std::string name, ImageShape shape, const ops::LrnParams& params)
      : name_(std::move(name)), shape_(shape), params_(params) {
    params_.layer = name_;
  }

  const std::string& name() const override { return name_; }
  const std::vector<VariableSpec>& variables() const override { return variables_; }
  int64_t input_size() const override { return shape_.size(); }
  int64_t output_size() const override { return shape_.size(); }
  LayerOp graph_op() const override {
    return {.op = "LRN", .input_dims = Dims(shape_), .output_dims = Dims(shape_)};
  }

  absl::Status Forward(std::span<const ops::Tensor>, const ops::Tensor& x, ops::Tensor* y,
                       const LayerContext& ctx) const override {
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor x4, AsImages(x, shape_, name_, "input"));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor y4, AsImages(*y, shape_, name_, "output"));
    return ctx.backend->Lrn(x4, params_, &y4);
  }

  absl::Status Backward(std::span<const ops::Tensor>, const ops::Tensor& x, const ops::Tensor&,
                        ops::Tensor* dy, std::span<ops::Tensor>, ops::Tensor* dx,
                        const LayerContext& ctx) const override {
    if (dx == nullptr) return absl::OkStatus();
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor x4, AsImages(x, shape_, name_, "input"));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor dy4, AsImages(*dy, shape_, name_, "gradient"));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor dx4, AsImages(*dx, shape_, name_, "input gradient"));
    return ctx.backend->LrnGrad(x4, dy4, params_, &dx4);
  }

 private:
  std::string name_;
  ImageShape shape_;
  ops::LrnParams params_;
  std::vector<VariableSpec> variables_;
};

class DropoutLayer final : public Layer {
 public:
  DropoutLayer(std::string name, int64_t size, float rate)
      : name_(std::move(name)), size_(size), rate_(rate), stream_(NameHash(name_)) {}

  const std::string& name() const override { return name_; }
  const std::vector<VariableSpec>& variables() const override { return variables_; }
  int64_t input_size() const override { return size_; }
  int64_t output_size() const override { return size_; }
  // TensorFlow builds dropout from several ops in a "dropout" scope; one node stands for them.
  LayerOp graph_op() const override {
    return {.op = "Dropout", .input_dims = {size_}, .output_dims = {size_}};
  }
  int64_t saved_elements(int64_t batch) const override { return batch * size_; }

  absl::Status Forward(std::span<const ops::Tensor>, const ops::Tensor& x, ops::Tensor* y,
                       const LayerContext& ctx) const override {
    if (ctx.saved == nullptr || ctx.saved->num_elements() < x.num_elements()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": no room for the dropout mask of ", x.rows(), " examples"));
    }
    ops::Tensor mask = ops::Tensor::View(ctx.saved->data(), x.shape(), ctx.saved->device());
    ops::Backend& b = *ctx.backend;
    if (!ctx.training || rate_ == 0.0f) {
      FULCRUM_RETURN_IF_ERROR(b.Fill(1.0f, &mask));
      return b.Copy(x, y);
    }
    return b.Dropout(x, rate_, DeriveSeed(ctx.seed, stream_), y, &mask);
  }

  absl::Status Backward(std::span<const ops::Tensor>, const ops::Tensor& x, const ops::Tensor&,
                        ops::Tensor* dy, std::span<ops::Tensor>, ops::Tensor* dx,
                        const LayerContext& ctx) const override {
    if (dx == nullptr) return absl::OkStatus();
    if (ctx.saved == nullptr || ctx.saved->num_elements() < x.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": no dropout mask saved"));
    }
    return ctx.backend->DropoutGrad(
        *dy, ops::Tensor::View(ctx.saved->data(), x.shape(), ctx.saved->device()), dx);
  }

 private:
  std::string name_;
  int64_t size_;
  float rate_;
  uint64_t stream_;
  std::vector<VariableSpec> variables_;
};

}  // namespace

absl::StatusOr<ImageShape> ConvOutputImage(const std::string& name, ImageShape input,
                                           const ConvOptions& o) {
  FULCRUM_RETURN_IF_ERROR(CheckImage(name, input));
  if (o.filters <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": filters must be positive, got ", o.filters));
  }
  ops::Conv2DParams params;
  params.stride_h = o.stride;
  params.stride_w = o.stride;
  params.padding = o.padding;
  FULCRUM_ASSIGN_OR_RETURN(
      ops::Shape out,
      ops::Conv2DOutputShape(Nhwc(1, input),
                             ops::Shape{o.kernel_h, o.kernel_w, input.channels, o.filters}, params,
                             name));
  return ImageOf(out);
}

absl::StatusOr<ImageShape> PoolOutputImage(const std::string& name, ImageShape input,
                                           const ops::Pool2DParams& params) {
  FULCRUM_RETURN_IF_ERROR(CheckImage(name, input));
  FULCRUM_ASSIGN_OR_RETURN(ops::Shape out, ops::Pool2DOutputShape(Nhwc(1, input), params, name));
  return ImageOf(out);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeConv2D(std::string name, ImageShape input,
                                                  const ConvOptions& options) {
  FULCRUM_ASSIGN_OR_RETURN(ImageShape out, ConvOutputImage(name, input, options));
  return std::make_unique<Conv2DLayer>(std::move(name), input, out, options);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeMaxPool(std::string name, ImageShape input,
                                                   const ops::Pool2DParams& params) {
  FULCRUM_ASSIGN_OR_RETURN(ImageShape out, PoolOutputImage(name, input, params));
  return std::make_unique<PoolLayer>(std::move(name), input, out, params, /*max=*/true);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeAvgPool(std::string name, ImageShape input,
                                                   const ops::Pool2DParams& params) {
  FULCRUM_ASSIGN_OR_RETURN(ImageShape out, PoolOutputImage(name, input, params));
  return std::make_unique<PoolLayer>(std::move(name), input, out, params, /*max=*/false);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeLrn(std::string name, ImageShape input,
                                               const ops::LrnParams& params) {
  FULCRUM_RETURN_IF_ERROR(CheckImage(name, input));
  FULCRUM_RETURN_IF_ERROR(ops::ValidateLrnParams(params, name.c_str()));
  return std::make_unique<LrnLayer>(std::move(name), input, params);
}

absl::StatusOr<std::unique_ptr<Layer>> MakeDropout(std::string name, int64_t size, double rate) {
  if (size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": size must be positive, got ", size));
  }
  if (!(rate >= 0.0 && rate < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": dropout rate ", rate, " is not in [0, 1)"));
  }
  return std::make_unique<DropoutLayer>(std::move(name), size, static_cast<float>(rate));
}

}  // namespace fulcrum::models
