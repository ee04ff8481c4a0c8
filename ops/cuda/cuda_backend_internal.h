// ops/cuda (private): the CUDA backend's class, shared by the files that define its ops by
// family: cuda_backend.cc (memory, the optimizer, dense ops, losses), cuda_conv.cc (cuDNN
// convolutions and their planning), cuda_image_ops.cc (pooling, LRN, dropout, the spatial
// transformer). Only ops/cuda/*.cc include this header; ops/cuda/cuda_backend.h is the public
// face (CreateCudaBackend).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/backend.h"
#include "ops/cuda/device_memory.h"
#include "ops/cuda/gemm_plan.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/status_internal.h"

namespace fulcrum::ops::cuda {

using internal::FromCublas;
using internal::FromCuda;

inline absl::Status FromCudnn(cudnnStatus_t status, absl::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudnnGetErrorString(status)));
}

// The most a convolution algorithm may ask for as workspace.
inline constexpr size_t kMaxConvWorkspaceBytes = size_t{1} << 30;

// A grow-only device allocation for scratch that lives as long as the backend; each growth is
// counted as a device allocation.
class Scratch {
 public:
  explicit Scratch(TransferCounters* counters) : counters_(counters) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (ptr_ != nullptr) static_cast<void>(cudaFree(ptr_));
  }

  // At least `bytes` of device memory (contents undefined). cudaFree of a smaller, older
  // buffer waits for the work that may still read it.
  absl::StatusOr<void*> Get(size_t bytes, const char* what) {
    if (bytes <= capacity_ && ptr_ != nullptr) return ptr_;
    if (ptr_ != nullptr) {
      FULCRUM_RETURN_IF_ERROR(FromCuda(cudaFree(ptr_), absl::StrCat("cudaFree of ", what)));
      ptr_ = nullptr;
      capacity_ = 0;
    }
    const size_t size = std::max<size_t>(bytes, 256);
    FULCRUM_RETURN_IF_ERROR(FromCuda(cudaMalloc(&ptr_, size),
                                     absl::StrCat("cudaMalloc of ", size, " bytes for ", what)));
    capacity_ = size;
    ++counters_->allocations;
    counters_->allocated_bytes += static_cast<int64_t>(size);
    return ptr_;
  }
  absl::StatusOr<float*> Floats(int64_t n, const char* what) {
    FULCRUM_ASSIGN_OR_RETURN(void* p, Get(static_cast<size_t>(n) * sizeof(float), what));
    return static_cast<float*>(p);
  }

 private:
  TransferCounters* counters_;
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

// The cuDNN descriptors of one convolution, destroyed with it.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  ConvDescriptors() = default;
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;
  ~ConvDescriptors() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// How one of ops::Conv2D's convolutions runs on cuDNN. TensorFlow's SAME padding puts the odd
// row (column) of an odd total at the bottom (right); cuDNN pads symmetrically. So the input
// is copied into a buffer one row (column) larger, zero at the bottom (right), and cuDNN pads
// pad_top (pad_left) on every side: the same windows, the same output size.
struct ConvPlan {
  Conv2DGeometry g;
  int64_t extra_h = 0, extra_w = 0;  // 0 or 1
  int64_t padded_h() const { return g.in_h + extra_h; }
  int64_t padded_w() const { return g.in_w + extra_w; }
  bool padded() const { return extra_h != 0 || extra_w != 0; }
  std::string Key() const {
    return absl::StrCat(g.batch, "x", g.in_h, "x", g.in_w, "x", g.in_c, "/", g.kernel_h, "x",
                        g.kernel_w, "x", g.out_c, "/", g.stride_h, "x", g.stride_w, "/", g.pad_top,
                        "+", extra_h, "x", g.pad_left, "+", extra_w);
  }
};

inline int64_t ExtraPadding(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                            int64_t before) {
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + kernel - in);
  return total - 2 * before;
}

inline bool FitsInt(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

inline absl::Status CheckShape(const char* op, const char* what, const Tensor& t,
                               const Shape& expected) {
  if (!(t.shape() == expected)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", what, " has shape ", t.shape().ToString(), ", expected ", expected.ToString()));
  }
  return absl::OkStatus();
}

// The optimizer kernel's arguments for update `step` (ops::ApplyGradient's learning rates).
inline kernels::OptimizerArgs OptimizerArgsFor(const OptimizerConfig& c, int64_t step,
                                               float scale) {
  const float lr = LearningRateAt(c, step);
  const double t = static_cast<double>(step);
  const float lr_t =
      static_cast<float>(lr * std::sqrt(1.0 - std::pow(c.beta2, t)) / (1.0 - std::pow(c.beta1, t)));
  return {static_cast<int>(c.kind),
          lr,
          lr_t,
          scale,
          c.momentum,
          c.beta1,
          c.beta2,
          c.epsilon,
          c.rmsprop_decay,
          c.rmsprop_momentum,
          c.rmsprop_epsilon};
}

inline kernels::PoolGeometry PoolGeometryOf(const Pool2DGeometry& g) {
  return {g.batch,    g.in_h,     g.in_w,  g.channels, g.window_h, g.window_w,
          g.stride_h, g.stride_w, g.out_h, g.out_w,    g.pad_top,  g.pad_left};
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int ordinal, bool tf32, cublasHandle_t cublas, cudnnHandle_t cudnn)
      : ordinal_(ordinal), tf32_(tf32), cublas_(cublas), cudnn_(cudnn) {}
  ~CudaBackend() override {
    static_cast<void>(cudaSetDevice(ordinal_));
    static_cast<void>(cudaDeviceSynchronize());
    if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
  }

  std::string name() const override { return absl::StrCat("gpu:", ordinal_); }
  Device device() const override { return Device::kCuda; }

  absl::StatusOr<Tensor> Allocate(const Shape& shape) override;

  TransferCounters transfer_counters() const override { return counters_; }

  int64_t free_bytes() const override;
  // Page-locked host memory (cudaHostAlloc): batches copied from it run at the bus's speed.
  absl::StatusOr<Tensor> AllocateHost(const Shape& shape) override;

  absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                             Tensor* var, std::span<Tensor> slots, float grad_scale) override;

  absl::Status CopyFromHost(const Tensor& host, Tensor* dst) override;

  absl::Status CopyToHost(const Tensor& src, Tensor* host) override;

  absl::Status Copy(const Tensor& src, Tensor* dst) override;

  absl::Status Fill(float value, Tensor* dst) override;

  absl::Status MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor* out,
                      bool accumulate) override;

  absl::Status BiasAdd(const Tensor& bias, Tensor* x) override;

  // dbias = dy^T 1: a GEMV over the rows (dy read column-major is [cols, rows]).
  absl::Status BiasAddGrad(const Tensor& dy, Tensor* dbias) override;

  absl::Status Activate(ActivationKind kind, Tensor* y) override;

  absl::Status ActivationGrad(ActivationKind kind, const Tensor& y, Tensor* dy) override;

  absl::StatusOr<float> SoftmaxCrossEntropy(const Tensor& logits, std::span<const int32_t> labels,
                                            Tensor* dlogits) override;

  absl::StatusOr<int64_t> CountCorrect(const Tensor& logits,
                                       std::span<const int32_t> labels) override;

  absl::StatusOr<float> MeanSquaredError(const Tensor& pred, const Tensor& target,
                                         Tensor* dpred) override;

  absl::Status Add(const Tensor& x, Tensor* y) override;

  absl::StatusOr<double> AddWeightDecay(float weight_decay, const Tensor& value,
                                        Tensor* grad) override;

  absl::Status Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params, Tensor* y,
                      Tensor*) override;

  absl::Status Conv2DBackpropInput(const Tensor& dy, const Tensor& filter,
                                   const Conv2DParams& params, Tensor* dx, Tensor*) override;

  absl::Status Conv2DBackpropFilter(const Tensor& x, const Tensor& dy, const Conv2DParams& params,
                                    Tensor* dfilter, Tensor*) override;

  absl::Status MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y) override;

  absl::Status MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params,
                           Tensor* dx) override;

  absl::Status AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y) override;

  absl::Status AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx) override;

  absl::Status Lrn(const Tensor& x, const LrnParams& params, Tensor* y) override;

  absl::Status LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params,
                       Tensor* dx) override;

  absl::Status Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y,
                       Tensor* mask) override;

  absl::Status DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx) override;

  absl::Status AffineGrid(const Tensor& theta, Tensor* grid) override;

  absl::Status AffineGridGrad(const Tensor& dgrid, Tensor* dtheta) override;

  absl::Status BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output) override;

  absl::Status BilinearSampleGrad(const Tensor& input, const Tensor& grid, const Tensor& dout,
                                  Tensor* dinput, Tensor* dgrid) override;

 private:
  absl::Status Bind() { return FromCuda(cudaSetDevice(ordinal_), name().c_str()); }

  absl::Status Zero(Tensor* t);

  static absl::Status CheckNhwc(const char* op, const Tensor& x);

  static absl::Status CheckThetaAndGrid(const char* op, const Tensor& theta, const Tensor& grid);

  static absl::StatusOr<Shape> SampleOutput(const char* op, const Tensor& input,
                                            const Tensor& grid);

  absl::StatusOr<kernels::PoolGeometry> PoolPlan(const char* op, const Tensor& x,
                                                 const Pool2DParams& params, const Tensor* out,
                                                 const char* out_name);

  // The labels on the device, after checking them against the logits on the host.
  absl::StatusOr<const int32_t*> Labels(const char* op, const Tensor& logits,
                                        std::span<const int32_t> labels);

  absl::StatusOr<double*> Partials();

  absl::StatusOr<double> SumPartials(const double* partials);

  // One double on the device for a reduction's result.
  absl::StatusOr<double*> Scalar();

  // The scalar, back on the host (8 bytes; waits for the ops queued before it).
  absl::StatusOr<double> ScalarToHost(const double* scalar, const char* what);

  // A vector of `n` ones (the bias gradient's GEMV operand), grown on demand.
  absl::StatusOr<const float*> Ones(int64_t n);

  static Shape OutputShape(const Conv2DGeometry& g);

  static int64_t PaddedElements(const ConvPlan& plan);

  static absl::StatusOr<ConvPlan> Plan(const Shape& x, const Shape& filter,
                                       const Conv2DParams& params, const char* op);

  // The plan and descriptors of one of `op`'s convolutions from its input and filter shapes,
  // after checking that `out` (y forward, dy backward) has the output's shape.
  absl::Status PlanConv(const char* op, const Shape& x, const Shape& filter,
                        const Conv2DParams& params, const Tensor& out, const char* out_name,
                        ConvPlan* plan, const ConvDescriptors** d);

  absl::Status Describe(const ConvPlan& plan, ConvDescriptors* d);

  // Filter [KH, KW, C_in, C_out] (a [KH*KW*C_in, C_out] matrix) as cuDNN's NHWC filter
  // [C_out, KH, KW, C_in]: its transpose.
  absl::StatusOr<const float*> FilterToOhwi(const Tensor& filter, const Conv2DGeometry& g);

  absl::StatusOr<const float*> PaddedInput(const Tensor& x, const ConvPlan& plan);

  // The fastest algorithm cuDNN measures that needs at most kMaxConvWorkspaceBytes, once per
  // shape (cudnnFind* runs each candidate on buffers of its own).
  template <typename Perf, typename FindFn>
  absl::StatusOr<std::pair<decltype(Perf{}.algo), size_t>> Choose(
      std::map<std::string, std::pair<decltype(Perf{}.algo), size_t>>& cache, const ConvPlan& plan,
      const char* what, FindFn find) {
    const std::string key = plan.Key();
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    Perf perf[16];
    int returned = 0;
    FULCRUM_RETURN_IF_ERROR(FromCudnn(find(16, &returned, perf), what));
    for (int k = 0; k < returned; ++k) {
      if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= kMaxConvWorkspaceBytes) {
        return cache[key] = {perf[k].algo, perf[k].memory};
      }
    }
    return absl::InternalError(absl::StrCat(what, ": no algorithm for ", key, " within ",
                                            kMaxConvWorkspaceBytes, " bytes of workspace"));
  }

  absl::StatusOr<std::pair<cudnnConvolutionFwdAlgo_t, size_t>> ForwardAlgo(
      const ConvPlan& plan, const ConvDescriptors& d);

  absl::StatusOr<std::pair<cudnnConvolutionBwdDataAlgo_t, size_t>> BackwardDataAlgo(
      const ConvPlan& plan, const ConvDescriptors& d);

  absl::StatusOr<std::pair<cudnnConvolutionBwdFilterAlgo_t, size_t>> BackwardFilterAlgo(
      const ConvPlan& plan, const ConvDescriptors& d);

  const int ordinal_;
  const bool tf32_;  // --tf32=on: convolutions may use TF32 tensor-core math
  cublasHandle_t cublas_;
  cudnnHandle_t cudnn_;
  TransferCounters counters_;
  Scratch workspace_{&counters_}, filter_t_{&counters_}, padded_{&counters_}, labels_{&counters_},
      row_loss_{&counters_}, correct_{&counters_}, partials_{&counters_}, scalar_{&counters_},
      ones_{&counters_};
  int64_t ones_size_ = 0;
  // Per convolution shape (ConvPlan::Key): its cuDNN descriptors, made once.
  std::map<std::string, std::unique_ptr<ConvDescriptors>> descriptors_;
  std::map<std::string, std::pair<cudnnConvolutionFwdAlgo_t, size_t>> fwd_algos_;
  std::map<std::string, std::pair<cudnnConvolutionBwdDataAlgo_t, size_t>> bwd_data_algos_;
  std::map<std::string, std::pair<cudnnConvolutionBwdFilterAlgo_t, size_t>> bwd_filter_algos_;
};

}  // namespace fulcrum::ops::cuda
