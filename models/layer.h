// models: the layer API. A layer declares its variables (name, shape, initializer) and computes
// forward and backward on caller-owned tensors; it holds no variable values itself, so the
// same layer runs against values pulled from a parameter server or held locally. Its ops go
// through LayerContext::backend, so the same layer runs on the CPU or on a GPU.
// Thread-safety: layers are immutable after construction and safe to share across threads.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/backend.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/lrn.h"
#include "ops/cpu/pool.h"
#include "ops/initializer.h"
#include "ops/tensor.h"

namespace fulcrum::models {

// A trainable variable as a model declares it: this declaration is what the PS shards.
struct VariableSpec {
  std::string name;  // unique within a model, e.g. "dense_0/kernel"
  ops::Shape shape;
  ops::Initializer initializer;
  // L2 weight decay: the model adds weight_decay * sum(v^2) / 2 to the loss (TF's
  // weight_decay * tf.nn.l2_loss(v)), hence weight_decay * v to the gradient.
  float weight_decay = 0.0f;
  // A kernel (weights), as opposed to a bias: what --weight_decay=X decays.
  bool is_kernel = false;
};

enum class Activation { kNone, kRelu, kSigmoid, kTanh };

// How a layer shows in a TensorFlow graph (models/graph_def.h: TensorBoard's graph tab).
struct LayerOp {
  // TensorFlow's op for what the layer computes: "MatMul", "Conv2D", "MaxPool", ...
  std::string op = "Layer";
  // One example's input and output: {height, width, channels} for images, {values} otherwise.
  std::vector<int64_t> input_dims;
  std::vector<int64_t> output_dims;
  // The layer's last variable is a bias added after `op` (TensorFlow's BiasAdd); `op` reads
  // the variables before it.
  bool bias_add = false;
  Activation activation = Activation::kNone;  // applied last
};

// What one Forward or Backward call computes with, besides its tensors.
struct LayerContext {
  // Runs the layer's ops, on its device: every tensor handed to the layer (inputs, outputs,
  // params, scratch) lives there. Set by the Model; never null.
  ops::Backend* backend = nullptr;
  bool training = true;  // false at evaluation: dropout passes values through
  // This step's seed: a random layer draws from (seed, its own name), so a step is
  // reproducible and two layers never share a stream.
  uint64_t seed = 0;
  // saved_elements(batch) floats that belong to this layer for one batch: written by Forward
  // and read by the Backward of the same batch (a dropout mask, sampling coordinates). Null
  // when the layer asks for none.
  ops::Tensor* saved = nullptr;
  // temp_elements(batch) floats the layer may use freely during one call (im2col columns);
  // shared by every layer of the model. Null when the layer asks for none.
  ops::Tensor* temp = nullptr;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // The layer's name, e.g. "conv1": the prefix of its variables and of its error messages.
  virtual const std::string& name() const = 0;
  // The variables this layer owns, in the order Forward/Backward take them.
  virtual const std::vector<VariableSpec>& variables() const = 0;
  // Elements per example of the input and of the output. A batch is [batch, elements]; a
  // layer that sees images reads each row as one NHWC image of the shape it was built for.
  virtual int64_t input_size() const = 0;
  virtual int64_t output_size() const = 0;
  // How the layer shows in a graph. The default, for a layer that says nothing more, is an
  // op "Layer" over flat examples that reads every variable.
  virtual LayerOp graph_op() const {
    return {.op = "Layer", .input_dims = {input_size()}, .output_dims = {output_size()}};
  }
  // Scratch the layer needs for a batch of `batch` examples (see LayerContext).
  virtual int64_t saved_elements(int64_t batch) const { return 0; }
  virtual int64_t temp_elements(int64_t batch) const { return 0; }

  // y = f(x; params). x: [batch, input_size()], y: [batch, output_size()], preallocated.
  virtual absl::Status Forward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                               ops::Tensor* y, const LayerContext& ctx) const = 0;
  // From x, y = Forward(x) and dy = dLoss/dy, writes dLoss/dparams into dparams and, if dx is
  // non-null, dLoss/dx into dx. dy is used as scratch and may be overwritten.
  virtual absl::Status Backward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                                const ops::Tensor& y, ops::Tensor* dy,
                                std::span<ops::Tensor> dparams, ops::Tensor* dx,
                                const LayerContext& ctx) const = 0;
};

// One example seen as an NHWC image.
struct ImageShape {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;

  int64_t size() const { return height * width * channels; }
  std::string ToString() const;  // "HxWxC"
};

struct DenseOptions {
  Activation activation = Activation::kNone;
  ops::Initializer kernel_init = ops::Initializer::GlorotUniform();
  ops::Initializer bias_init = ops::Initializer::Zeros();
  float weight_decay = 0.0f;  // on the kernel
};

// Fully connected layer: y = activation(x W + b), W: [in, out], b: [out].
std::unique_ptr<Layer> MakeDense(std::string name, int64_t in, int64_t out,
                                 const DenseOptions& options);
// The same with a Glorot-uniform kernel and zero bias.
std::unique_ptr<Layer> MakeDense(std::string name, int64_t in, int64_t out, Activation activation);

struct ConvOptions {
  int64_t kernel_h = 5;
  int64_t kernel_w = 5;
  int64_t filters = 32;
  int64_t stride = 1;
  ops::Padding padding = ops::Padding::kSame;
  Activation activation = Activation::kRelu;
  ops::Initializer kernel_init = ops::Initializer::GlorotUniform();
  ops::Initializer bias_init = ops::Initializer::Zeros();
  float weight_decay = 0.0f;  // on the filter
};

// 2-D convolution + bias + activation on NHWC images: filter [KH, KW, C_in, filters] (TF's
// layout), bias [filters]. InvalidArgument naming the layer if the shapes do not fit.
absl::StatusOr<std::unique_ptr<Layer>> MakeConv2D(std::string name, ImageShape input,
                                                  const ConvOptions& options);
// Max or average pooling (TensorFlow's semantics, ops/cpu/pool.h).
absl::StatusOr<std::unique_ptr<Layer>> MakeMaxPool(std::string name, ImageShape input,
                                                   const ops::Pool2DParams& params);
absl::StatusOr<std::unique_ptr<Layer>> MakeAvgPool(std::string name, ImageShape input,
                                                   const ops::Pool2DParams& params);
// Local response normalization across channels (TensorFlow's definition, ops/cpu/lrn.h).
absl::StatusOr<std::unique_ptr<Layer>> MakeLrn(std::string name, ImageShape input,
                                               const ops::LrnParams& params);
// Inverted dropout: in training each value is zeroed with probability `rate` and the rest
// scaled by 1 / (1 - rate); at evaluation values pass through. rate in [0, 1).
absl::StatusOr<std::unique_ptr<Layer>> MakeDropout(std::string name, int64_t size, double rate);

// The output image of a conv or pooling layer built from `input` (the same checks as the
// makers above).
absl::StatusOr<ImageShape> ConvOutputImage(const std::string& name, ImageShape input,
                                           const ConvOptions& options);
absl::StatusOr<ImageShape> PoolOutputImage(const std::string& name, ImageShape input,
                                           const ops::Pool2DParams& params);

}  // namespace fulcrum::models
