// models: the layer API. A layer declares its variables (name, shape, initializer) and computes
// forward and backward on caller-owned tensors; it holds no variable values itself, so the
// same layer runs against values pulled from a parameter server or held locally.
// Thread-safety: layers are immutable after construction and safe to share across threads.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cpu/thread_pool.h"
#include "ops/initializer.h"
#include "ops/tensor.h"

namespace fulcrum::models {

// A trainable variable as a model declares it: this declaration is what the PS shards.
struct VariableSpec {
  std::string name;  // unique within a model, e.g. "dense_0/kernel"
  ops::Shape shape;
  ops::Initializer initializer;
};

enum class Activation { kNone, kRelu, kSigmoid, kTanh };
const char* ActivationName(Activation activation);

class Layer {
 public:
  virtual ~Layer() = default;

  // The variables this layer owns, in the order Forward/Backward take them.
  virtual const std::vector<VariableSpec>& variables() const = 0;
  // Elements per example of the output, given elements per example of the input.
  virtual int64_t output_size() const = 0;

  // y = f(x; params). x: [batch, in], y: [batch, out], preallocated.
  // pool (may be null) lends threads to the layer's big kernels.
  virtual absl::Status Forward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                               ops::Tensor* y, ops::ThreadPool* pool) const = 0;
  // From x, y = Forward(x) and dy = dLoss/dy, writes dLoss/dparams into dparams and, if dx is
  // non-null, dLoss/dx into dx. dy is used as scratch and may be overwritten.
  virtual absl::Status Backward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                                const ops::Tensor& y, ops::Tensor* dy,
                                std::span<ops::Tensor> dparams, ops::Tensor* dx,
                                ops::ThreadPool* pool) const = 0;
};

// Fully connected layer: y = activation(x W + b), W: [in, out] Glorot-uniform, b: [out] zeros.
std::unique_ptr<Layer> MakeDense(std::string name, int64_t in, int64_t out,
                                 Activation activation);

}  // namespace fulcrum::models
