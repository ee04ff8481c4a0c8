// ops: Backend, the set of ops a model's layers run, on one device. The CPU backend
// (ops/cpu/cpu_backend.h) runs the Eigen/OpenBLAS kernels of ops/cpu on host memory; the CUDA
// backend (ops/cuda/cuda_backend.h) runs cuDNN/cuBLAS and small CUDA kernels on one GPU's
// memory. Every tensor passed to a backend's op lives on that backend's device (device());
// data crosses to or from the host only through CopyFromHost / CopyToHost.
// Semantics, shapes and error messages are the CPU kernels' (ops/cpu/*.h): the conformance
// suite (tests/ops/backend_conformance_test.cc) runs every op on every available backend
// against the CPU result.
// Thread-safety: a backend is used by one thread at a time (it owns scratch, handles and a
// stream); give each thread (each replica) its own.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/conv_planner.h"
#include "ops/cpu/lrn.h"
#include "ops/cpu/pool.h"
#include "ops/optimizer.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

enum class ActivationKind { kRelu, kSigmoid, kTanh };

// What crossed between the host and a backend's device, and what the device allocated, since
// the backend was made: the profiler's copy accounting (per step and in summary.json). The CPU
// backend's memory is the host's: all zero there. Scalars a backend returns to the host (a
// loss, a count, a weight-decay sum) count as device-to-host copies of their size.
struct TransferCounters {
  int64_t h2d_bytes = 0;
  int64_t h2d_calls = 0;
  int64_t d2h_bytes = 0;
  int64_t d2h_calls = 0;
  int64_t allocations = 0;
  int64_t allocated_bytes = 0;

  TransferCounters operator-(const TransferCounters& earlier) const {
    return {h2d_bytes - earlier.h2d_bytes,     h2d_calls - earlier.h2d_calls,
            d2h_bytes - earlier.d2h_bytes,     d2h_calls - earlier.d2h_calls,
            allocations - earlier.allocations, allocated_bytes - earlier.allocated_bytes};
  }
  TransferCounters& operator+=(const TransferCounters& more) {
    h2d_bytes += more.h2d_bytes;
    h2d_calls += more.h2d_calls;
    d2h_bytes += more.d2h_bytes;
    d2h_calls += more.d2h_calls;
    allocations += more.allocations;
    allocated_bytes += more.allocated_bytes;
    return *this;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "gpu:0".
  virtual std::string name() const = 0;
  virtual Device device() const = 0;

  // Memory. Allocate returns a zero-filled tensor on the device. Copies need equal element
  // counts; CopyToHost returns once `host` holds the data (all earlier ops are done).
  // CopyFromHost may return before the copy is done (a GPU, from page-locked memory): `host`
  // must then stay unchanged until the next call that brings data back to the host
  // (CopyToHost, a loss, a count or a sum), as a training step's batch and values do.
  virtual absl::StatusOr<Tensor> Allocate(const Shape& shape) = 0;
  virtual absl::Status CopyFromHost(const Tensor& host, Tensor* dst) = 0;
  virtual absl::Status CopyToHost(const Tensor& src, Tensor* host) = 0;
  virtual absl::Status Copy(const Tensor& src, Tensor* dst) = 0;
  virtual absl::Status Fill(float value, Tensor* dst) = 0;
  // A zero-filled host (cpu) tensor for data on its way to this device: page-locked where the
  // device copies faster from such memory (a GPU); plain host memory by default.
  virtual absl::StatusOr<Tensor> AllocateHost(const Shape& shape) { return Tensor::Zeros(shape); }
  // The copies and allocations so far (zeros where memory is the host's).
  virtual TransferCounters transfer_counters() const { return {}; }
  // The device memory that could be allocated now, in bytes; -1 when unknown (the CPU: the
  // host's own checks apply).
  virtual int64_t free_bytes() const { return -1; }

  // One optimizer update on this device, as ops::ApplyGradient (ops/optimizer.h) defines it:
  // a variable, its gradient and its slots that live here are updated here (a device-resident
  // store: worker/device_variable_store.h). The default runs the CPU kernel (cpu tensors).
  virtual absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step,
                                     const Tensor& grad, Tensor* var, std::span<Tensor> slots,
                                     float grad_scale);

  // Dense (ops/cpu/kernels.h).
  virtual absl::Status MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                              Tensor* out, bool accumulate) = 0;
  virtual absl::Status BiasAdd(const Tensor& bias, Tensor* x) = 0;
  virtual absl::Status BiasAddGrad(const Tensor& dy, Tensor* dbias) = 0;
  // y = f(y) in place; dy = dy * f'(.) from f's output y, in place.
  virtual absl::Status Activate(ActivationKind kind, Tensor* y) = 0;
  virtual absl::Status ActivationGrad(ActivationKind kind, const Tensor& y, Tensor* dy) = 0;

  // Losses. Labels are host memory; the loss comes back to the host.
  virtual absl::StatusOr<float> SoftmaxCrossEntropy(const Tensor& logits,
                                                    std::span<const int32_t> labels,
                                                    Tensor* dlogits) = 0;
  virtual absl::StatusOr<int64_t> CountCorrect(const Tensor& logits,
                                               std::span<const int32_t> labels) = 0;
  virtual absl::StatusOr<float> MeanSquaredError(const Tensor& pred, const Tensor& target,
                                                 Tensor* dpred) = 0;
  // y += x (same element count).
  virtual absl::Status Add(const Tensor& x, Tensor* y) = 0;
  // grad += weight_decay * value; returns sum(value^2) (for the loss term).
  virtual absl::StatusOr<double> AddWeightDecay(float weight_decay, const Tensor& value,
                                                Tensor* grad) = 0;

  // Images, NHWC (ops/cpu/conv.h, pool.h, lrn.h). `workspace` is the layer's scratch
  // (LayerContext::temp) for the CPU kernels; a GPU backend keeps its own.
  virtual absl::Status Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params,
                              Tensor* y, Tensor* workspace) = 0;
  virtual absl::Status Conv2DBackpropInput(const Tensor& dy, const Tensor& filter,
                                           const Conv2DParams& params, Tensor* dx,
                                           Tensor* workspace) = 0;
  virtual absl::Status Conv2DBackpropFilter(const Tensor& x, const Tensor& dy,
                                            const Conv2DParams& params, Tensor* dfilter,
                                            Tensor* workspace) = 0;
  // y = post_op(conv(x, filter) + bias), bias: [C_out]: a conv layer's forward. The default
  // runs Conv2D, BiasAdd and Activate; the CPU backend fuses the bias and activation into the
  // convolution (oneDNN post-ops or the im2col GEMM's epilogue).
  virtual absl::Status Conv2DBiasActivation(const Tensor& x, const Tensor& filter,
                                            const Tensor& bias, const Conv2DParams& params,
                                            ConvPostOp post_op, Tensor* y, Tensor* workspace);
  // dfilter and dbias = sum of dy over N, OH, OW: a conv layer's parameter gradients. The
  // default runs BiasAddGrad and Conv2DBackpropFilter; the CPU backend may do both in one pass.
  virtual absl::Status Conv2DBackpropFilterBias(const Tensor& x, const Tensor& dy,
                                                const Conv2DParams& params, Tensor* dfilter,
                                                Tensor* dbias, Tensor* workspace);
  // What each convolution, pooling and LRN shape run so far runs on, for the report (empty
  // where the backend does not choose between algorithms).
  virtual std::vector<KernelChoice> kernel_choices() const { return {}; }

  virtual absl::Status MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y) = 0;
  virtual absl::Status MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params,
                                   Tensor* dx) = 0;
  virtual absl::Status AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y) = 0;
  virtual absl::Status AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx) = 0;
  virtual absl::Status Lrn(const Tensor& x, const LrnParams& params, Tensor* y) = 0;
  virtual absl::Status LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params,
                               Tensor* dx) = 0;

  // Dropout (ops/cpu/dropout.h): the same counter-based mask on every backend.
  virtual absl::Status Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y,
                               Tensor* mask) = 0;
  virtual absl::Status DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx) = 0;

  // Spatial transformer (ops/cpu/spatial_transformer.h).
  virtual absl::Status AffineGrid(const Tensor& theta, Tensor* grid) = 0;
  virtual absl::Status AffineGridGrad(const Tensor& dgrid, Tensor* dtheta) = 0;
  virtual absl::Status BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output) = 0;
  virtual absl::Status BilinearSampleGrad(const Tensor& input, const Tensor& grid,
                                          const Tensor& dout, Tensor* dinput, Tensor* dgrid) = 0;
};

// OK iff a and b hold the same number of elements; InvalidArgument naming both otherwise.
absl::Status CheckSameCount(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                            const Tensor& b);

// OK iff every tensor is non-empty and on `backend`'s device; InvalidArgument naming the op,
// the backend and the first operand that is not.
absl::Status CheckOnDevice(const Backend& backend, const char* op,
                           std::initializer_list<std::pair<const char*, const Tensor*>> tensors);

}  // namespace fulcrum::ops
