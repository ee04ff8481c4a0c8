#include "ops/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "ops/cuda/device_memory.h"
#include "ops/cuda/gemm_plan.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/status_internal.h"

namespace fulcrum::ops::cuda {
namespace {

using internal::FromCublas;
using internal::FromCuda;

absl::Status FromCudnn(cudnnStatus_t status, absl::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudnnGetErrorString(status)));
}

// The most a convolution algorithm may ask for as workspace.
constexpr size_t kMaxConvWorkspaceBytes = size_t{1} << 30;

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

int64_t ExtraPadding(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t before) {
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + kernel - in);
  return total - 2 * before;
}

bool FitsInt(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

absl::Status CheckShape(const char* op, const char* what, const Tensor& t, const Shape& expected) {
  if (!(t.shape() == expected)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", what, " has shape ", t.shape().ToString(), ", expected ", expected.ToString()));
  }
  return absl::OkStatus();
}

// The optimizer kernel's arguments for update `step` (ops::ApplyGradient's learning rates).
kernels::OptimizerArgs OptimizerArgsFor(const OptimizerConfig& c, int64_t step, float scale) {
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

kernels::PoolGeometry PoolGeometryOf(const Pool2DGeometry& g) {
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

  absl::StatusOr<Tensor> Allocate(const Shape& shape) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_ASSIGN_OR_RETURN(Tensor t, AllocateDevice(shape));
    ++counters_.allocations;
    counters_.allocated_bytes += static_cast<int64_t>(t.bytes());
    return t;
  }

  TransferCounters transfer_counters() const override { return counters_; }

  int64_t free_bytes() const override {
    size_t free = 0, total = 0;
    if (cudaSetDevice(ordinal_) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
      return -1;
    }
    return static_cast<int64_t>(free);
  }

  absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                             Tensor* var, std::span<Tensor> slots, float grad_scale) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(
        CheckOnDevice(*this, "ApplyGradient", {{"gradient", &grad}, {"variable", var}}));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("ApplyGradient", "gradient", grad, "variable", *var));
    if (slots.size() != SlotCount(config.kind) || step < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ApplyGradient: ", OptimizerName(config.kind), " needs ", SlotCount(config.kind),
          " slots and a step >= 1, got ", slots.size(), " and ", step));
    }
    for (const Tensor& slot : slots) {
      FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "ApplyGradient", {{"slot", &slot}}));
      FULCRUM_RETURN_IF_ERROR(CheckSameCount("ApplyGradient", "slot", slot, "variable", *var));
    }
    return FromCuda(
        kernels::ApplyOptimizer(OptimizerArgsFor(config, step, grad_scale), grad.data(),
                                var->data(), slots.empty() ? nullptr : slots[0].data(),
                                slots.size() < 2 ? nullptr : slots[1].data(), var->num_elements()),
        "optimizer kernel");
  }

  absl::Status CopyFromHost(const Tensor& host, Tensor* dst) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "CopyFromHost", {{"destination", dst}}));
    if (host.empty() || host.device() != Device::kCpu) {
      return absl::InvalidArgumentError("CopyFromHost: the source must be a non-empty cpu tensor");
    }
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("CopyFromHost", "source", host, "destination", *dst));
    counters_.h2d_bytes += static_cast<int64_t>(host.bytes());
    ++counters_.h2d_calls;
    return FromCuda(cudaMemcpy(dst->data(), host.data(), host.bytes(), cudaMemcpyHostToDevice),
                    "cudaMemcpy host to device");
  }

  absl::Status CopyToHost(const Tensor& src, Tensor* host) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "CopyToHost", {{"source", &src}}));
    if (host == nullptr || host->empty() || host->device() != Device::kCpu) {
      return absl::InvalidArgumentError(
          "CopyToHost: the destination must be a non-empty cpu tensor");
    }
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("CopyToHost", "source", src, "destination", *host));
    counters_.d2h_bytes += static_cast<int64_t>(src.bytes());
    ++counters_.d2h_calls;
    // On the legacy default stream: waits for every op queued before it.
    return FromCuda(cudaMemcpy(host->data(), src.data(), src.bytes(), cudaMemcpyDeviceToHost),
                    "cudaMemcpy device to host (or an earlier op on the GPU)");
  }

  absl::Status Copy(const Tensor& src, Tensor* dst) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Copy", {{"source", &src}, {"destination", dst}}));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("Copy", "source", src, "destination", *dst));
    if (src.data() == dst->data()) return absl::OkStatus();
    return FromCuda(
        cudaMemcpyAsync(dst->data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, nullptr),
        "cudaMemcpyAsync device to device");
  }

  absl::Status Fill(float value, Tensor* dst) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Fill", {{"destination", dst}}));
    return FromCuda(kernels::Fill(dst->data(), dst->num_elements(), value), "Fill kernel");
  }

  absl::Status MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor* out,
                      bool accumulate) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckMatMulDevices(a, b, out, Device::kCuda));
    FULCRUM_ASSIGN_OR_RETURN(const ColumnMajorGemm g,
                             PlanRowMajorMatMul(a, trans_a, b, trans_b, *out));
    const float alpha = 1.0f;
    const float beta = accumulate ? 1.0f : 0.0f;
    return FromCublas(cublasSgemm(cublas_, g.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  g.trans_y ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha,
                                  b.data(), g.ldx, a.data(), g.ldy, &beta, out->data(), g.ldc),
                      "cublasSgemm");
  }

  absl::Status BiasAdd(const Tensor& bias, Tensor* x) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BiasAdd", {{"bias", &bias}, {"x", x}}));
    if (bias.num_elements() != x->cols()) {
      return absl::InvalidArgumentError(absl::StrCat("BiasAdd: bias ", bias.shape().ToString(),
                                                     " does not match x ", x->shape().ToString()));
    }
    return FromCuda(kernels::BiasAdd(bias.data(), x->data(), x->rows(), x->cols()),
                    "BiasAdd kernel");
  }

  // dbias = dy^T 1: a GEMV over the rows (dy read column-major is [cols, rows]).
  absl::Status BiasAddGrad(const Tensor& dy, Tensor* dbias) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BiasAddGrad", {{"dy", &dy}, {"dbias", dbias}}));
    if (dbias->num_elements() != dy.cols()) {
      return absl::InvalidArgumentError(absl::StrCat("BiasAddGrad: dbias ",
                                                     dbias->shape().ToString(),
                                                     " does not match dy ", dy.shape().ToString()));
    }
    if (!FitsInt(dy.rows()) || !FitsInt(dy.cols())) {
      return absl::InvalidArgumentError("BiasAddGrad: dy is too large for cuBLAS");
    }
    FULCRUM_ASSIGN_OR_RETURN(const float* ones, Ones(dy.rows()));
    const float alpha = 1.0f, beta = 0.0f;
    const int cols = static_cast<int>(dy.cols()), rows = static_cast<int>(dy.rows());
    return FromCublas(cublasSgemv(cublas_, CUBLAS_OP_N, cols, rows, &alpha, dy.data(), cols, ones,
                                  1, &beta, dbias->data(), 1),
                      "cublasSgemv (bias gradient)");
  }

  absl::Status Activate(ActivationKind kind, Tensor* y) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Activate", {{"y", y}}));
    return FromCuda(kernels::Activate(static_cast<int>(kind), y->data(), y->num_elements()),
                    "activation kernel");
  }

  absl::Status ActivationGrad(ActivationKind kind, const Tensor& y, Tensor* dy) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "ActivationGrad", {{"y", &y}, {"dy", dy}}));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("ActivationGrad", "y", y, "dy", *dy));
    return FromCuda(
        kernels::ActivationGrad(static_cast<int>(kind), y.data(), dy->data(), y.num_elements()),
        "activation gradient kernel");
  }

  absl::StatusOr<float> SoftmaxCrossEntropy(const Tensor& logits, std::span<const int32_t> labels,
                                            Tensor* dlogits) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "SoftmaxCrossEntropy", {{"logits", &logits}}));
    if (dlogits != nullptr) {
      FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "SoftmaxCrossEntropy", {{"dlogits", dlogits}}));
      FULCRUM_RETURN_IF_ERROR(
          CheckShape("SoftmaxCrossEntropy", "dlogits", *dlogits, logits.shape()));
    }
    FULCRUM_ASSIGN_OR_RETURN(const int32_t* device_labels,
                             Labels("SoftmaxCrossEntropy", logits, labels));
    const int64_t rows = logits.rows();
    FULCRUM_ASSIGN_OR_RETURN(float* row_loss, row_loss_.Floats(rows, "per-row losses"));
    FULCRUM_RETURN_IF_ERROR(FromCuda(
        kernels::SoftmaxCrossEntropy(logits.data(), device_labels, rows, logits.cols(), row_loss,
                                     dlogits == nullptr ? nullptr : dlogits->data()),
        "softmax cross-entropy kernel"));
    FULCRUM_ASSIGN_OR_RETURN(double* scalar, Scalar());
    FULCRUM_RETURN_IF_ERROR(
        FromCuda(kernels::SumFloats(row_loss, rows, scalar), "sum of the per-row losses"));
    FULCRUM_ASSIGN_OR_RETURN(const double sum, ScalarToHost(scalar, "the loss"));
    return static_cast<float>(sum / static_cast<double>(rows));
  }

  absl::StatusOr<int64_t> CountCorrect(const Tensor& logits,
                                       std::span<const int32_t> labels) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "CountCorrect", {{"logits", &logits}}));
    FULCRUM_ASSIGN_OR_RETURN(const int32_t* device_labels, Labels("CountCorrect", logits, labels));
    const int64_t rows = logits.rows();
    FULCRUM_ASSIGN_OR_RETURN(void* flags, correct_.Get(rows * sizeof(int32_t), "match flags"));
    auto* correct = static_cast<int32_t*>(flags);
    FULCRUM_RETURN_IF_ERROR(
        FromCuda(kernels::ArgMaxMatches(logits.data(), device_labels, rows, logits.cols(), correct),
                 "arg-max kernel"));
    FULCRUM_ASSIGN_OR_RETURN(double* scalar, Scalar());
    FULCRUM_RETURN_IF_ERROR(
        FromCuda(kernels::SumInts(correct, rows, scalar), "sum of the match flags"));
    FULCRUM_ASSIGN_OR_RETURN(const double count, ScalarToHost(scalar, "the correct count"));
    return static_cast<int64_t>(std::llround(count));
  }

  absl::StatusOr<float> MeanSquaredError(const Tensor& pred, const Tensor& target,
                                         Tensor* dpred) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(
        CheckOnDevice(*this, "MeanSquaredError", {{"pred", &pred}, {"target", &target}}));
    FULCRUM_RETURN_IF_ERROR(CheckShape("MeanSquaredError", "target", target, pred.shape()));
    if (dpred != nullptr) {
      FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "MeanSquaredError", {{"dpred", dpred}}));
      FULCRUM_RETURN_IF_ERROR(CheckShape("MeanSquaredError", "dpred", *dpred, pred.shape()));
    }
    const int64_t n = pred.num_elements();
    FULCRUM_ASSIGN_OR_RETURN(double* partials, Partials());
    FULCRUM_RETURN_IF_ERROR(
        FromCuda(kernels::SquaredError(pred.data(), target.data(), n, 2.0f / static_cast<float>(n),
                                       dpred == nullptr ? nullptr : dpred->data(), partials),
                 "squared error kernel"));
    FULCRUM_ASSIGN_OR_RETURN(const double sum, SumPartials(partials));
    return static_cast<float>(sum / static_cast<double>(n));
  }

  absl::Status Add(const Tensor& x, Tensor* y) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Add", {{"x", &x}, {"y", y}}));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("Add", "x", x, "y", *y));
    return FromCuda(kernels::Add(x.data(), y->data(), x.num_elements()), "Add kernel");
  }

  absl::StatusOr<double> AddWeightDecay(float weight_decay, const Tensor& value,
                                        Tensor* grad) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(
        CheckOnDevice(*this, "AddWeightDecay", {{"value", &value}, {"gradient", grad}}));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("AddWeightDecay", "value", value, "gradient", *grad));
    FULCRUM_ASSIGN_OR_RETURN(double* partials, Partials());
    FULCRUM_RETURN_IF_ERROR(FromCuda(kernels::WeightDecay(weight_decay, value.data(), grad->data(),
                                                          value.num_elements(), partials),
                                     "weight decay kernel"));
    return SumPartials(partials);
  }

  absl::Status Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params, Tensor* y,
                      Tensor*) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(
        CheckOnDevice(*this, "Conv2D", {{"x", &x}, {"filter", &filter}, {"y", y}}));
    ConvPlan plan;
    ConvDescriptors d;
    FULCRUM_RETURN_IF_ERROR(
        PlanConv("Conv2D", x.shape(), filter.shape(), params, *y, "y", &plan, &d));
    FULCRUM_ASSIGN_OR_RETURN(const float* w, FilterToOhwi(filter, plan.g));
    FULCRUM_ASSIGN_OR_RETURN(const float* xp, PaddedInput(x, plan));
    FULCRUM_ASSIGN_OR_RETURN(auto algo, ForwardAlgo(plan, d));
    FULCRUM_ASSIGN_OR_RETURN(void* ws, workspace_.Get(algo.second, "the cuDNN workspace"));
    const float alpha = 1.0f, beta = 0.0f;
    return FromCudnn(cudnnConvolutionForward(cudnn_, &alpha, d.x, xp, d.w, w, d.conv, algo.first,
                                             ws, algo.second, &beta, d.y, y->data()),
                     "cudnnConvolutionForward");
  }

  absl::Status Conv2DBackpropInput(const Tensor& dy, const Tensor& filter,
                                   const Conv2DParams& params, Tensor* dx, Tensor*) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Conv2DBackpropInput",
                                          {{"dy", &dy}, {"filter", &filter}, {"dx", dx}}));
    ConvPlan plan;
    ConvDescriptors d;
    FULCRUM_RETURN_IF_ERROR(
        PlanConv("Conv2DBackpropInput", dx->shape(), filter.shape(), params, dy, "dy", &plan, &d));
    FULCRUM_ASSIGN_OR_RETURN(const float* w, FilterToOhwi(filter, plan.g));
    float* dxp = dx->data();
    if (plan.padded()) {
      FULCRUM_ASSIGN_OR_RETURN(dxp, padded_.Floats(PaddedElements(plan), "the padded input"));
    }
    FULCRUM_ASSIGN_OR_RETURN(auto algo, BackwardDataAlgo(plan, d));
    FULCRUM_ASSIGN_OR_RETURN(void* ws, workspace_.Get(algo.second, "the cuDNN workspace"));
    const float alpha = 1.0f, beta = 0.0f;
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnConvolutionBackwardData(cudnn_, &alpha, d.w, w, d.y, dy.data(), d.conv,
                                               algo.first, ws, algo.second, &beta, d.x, dxp),
                  "cudnnConvolutionBackwardData"));
    if (!plan.padded()) return absl::OkStatus();
    return FromCuda(kernels::CopyWindow(dxp, plan.padded_h(), plan.padded_w(), dx->data(),
                                        plan.g.in_h, plan.g.in_w, plan.g.batch, plan.g.in_c),
                    "crop kernel");
  }

  absl::Status Conv2DBackpropFilter(const Tensor& x, const Tensor& dy, const Conv2DParams& params,
                                    Tensor* dfilter, Tensor*) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Conv2DBackpropFilter",
                                          {{"x", &x}, {"dy", &dy}, {"dfilter", dfilter}}));
    ConvPlan plan;
    ConvDescriptors d;
    FULCRUM_RETURN_IF_ERROR(
        PlanConv("Conv2DBackpropFilter", x.shape(), dfilter->shape(), params, dy, "dy", &plan, &d));
    FULCRUM_ASSIGN_OR_RETURN(const float* xp, PaddedInput(x, plan));
    FULCRUM_ASSIGN_OR_RETURN(float* dw, filter_t_.Floats(dfilter->num_elements(), "the filter"));
    FULCRUM_ASSIGN_OR_RETURN(auto algo, BackwardFilterAlgo(plan, d));
    FULCRUM_ASSIGN_OR_RETURN(void* ws, workspace_.Get(algo.second, "the cuDNN workspace"));
    const float alpha = 1.0f, beta = 0.0f;
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnConvolutionBackwardFilter(cudnn_, &alpha, d.x, xp, d.y, dy.data(), d.conv,
                                                 algo.first, ws, algo.second, &beta, d.w, dw),
                  "cudnnConvolutionBackwardFilter"));
    // cuDNN's [C_out, KH, KW, C_in] back to TensorFlow's [KH, KW, C_in, C_out].
    const int64_t per_filter = plan.g.kernel_h * plan.g.kernel_w * plan.g.in_c;
    return FromCuda(kernels::Transpose(dw, dfilter->data(), plan.g.out_c, per_filter),
                    "filter transpose kernel");
  }

  absl::Status MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y) override {
    FULCRUM_ASSIGN_OR_RETURN(const auto g, PoolPlan("MaxPool", x, params, y, "y"));
    return FromCuda(kernels::MaxPool(x.data(), g, y->data()), "max pool kernel");
  }

  absl::Status MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params,
                           Tensor* dx) override {
    FULCRUM_ASSIGN_OR_RETURN(const auto g, PoolPlan("MaxPoolGrad", x, params, &dy, "dy"));
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "MaxPoolGrad", {{"dx", dx}}));
    FULCRUM_RETURN_IF_ERROR(CheckShape("MaxPoolGrad", "dx", *dx, x.shape()));
    FULCRUM_RETURN_IF_ERROR(Zero(dx));
    return FromCuda(kernels::MaxPoolGrad(x.data(), dy.data(), g, dx->data()),
                    "max pool gradient kernel");
  }

  absl::Status AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y) override {
    FULCRUM_ASSIGN_OR_RETURN(const auto g, PoolPlan("AvgPool", x, params, y, "y"));
    return FromCuda(kernels::AvgPool(x.data(), g, y->data()), "average pool kernel");
  }

  absl::Status AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "AvgPoolGrad", {{"dy", &dy}, {"dx", dx}}));
    FULCRUM_ASSIGN_OR_RETURN(const Pool2DGeometry g,
                             Pool2DGeometryFor(dx->shape(), params, "AvgPoolGrad"));
    FULCRUM_RETURN_IF_ERROR(CheckShape("AvgPoolGrad", "dy", dy, g.output_shape()));
    FULCRUM_RETURN_IF_ERROR(Zero(dx));
    return FromCuda(kernels::AvgPoolGrad(dy.data(), PoolGeometryOf(g), dx->data()),
                    "average pool gradient kernel");
  }

  absl::Status Lrn(const Tensor& x, const LrnParams& params, Tensor* y) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(ValidateLrnParams(params, "LRN"));
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "LRN", {{"x", &x}, {"y", y}}));
    FULCRUM_RETURN_IF_ERROR(CheckNhwc("LRN", x));
    FULCRUM_RETURN_IF_ERROR(CheckShape("LRN", "y", *y, x.shape()));
    const int64_t c = x.shape().dim(3);
    return FromCuda(kernels::Lrn(x.data(), x.num_elements() / c, c, params.depth_radius,
                                 params.bias, params.alpha, params.beta, y->data()),
                    "LRN kernel");
  }

  absl::Status LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params,
                       Tensor* dx) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(ValidateLrnParams(params, "LRNGrad"));
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "LRNGrad", {{"x", &x}, {"dy", &dy}, {"dx", dx}}));
    FULCRUM_RETURN_IF_ERROR(CheckNhwc("LRNGrad", x));
    FULCRUM_RETURN_IF_ERROR(CheckShape("LRNGrad", "dy", dy, x.shape()));
    FULCRUM_RETURN_IF_ERROR(CheckShape("LRNGrad", "dx", *dx, x.shape()));
    const int64_t c = x.shape().dim(3);
    return FromCuda(
        kernels::LrnGrad(x.data(), dy.data(), x.num_elements() / c, c, params.depth_radius,
                         params.bias, params.alpha, params.beta, dx->data()),
        "LRN gradient kernel");
  }

  absl::Status Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y,
                       Tensor* mask) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    if (!(rate >= 0.0f && rate < 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("Dropout: rate ", rate, " is not in [0, 1)"));
    }
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Dropout", {{"x", &x}, {"y", y}, {"mask", mask}}));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("Dropout", "x", x, "y", *y));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("Dropout", "x", x, "mask", *mask));
    // The CPU kernel's constants (ops/cpu/dropout.cc), so both draw the same mask.
    const float scale = 1.0f / (1.0f - rate);
    const auto threshold = static_cast<uint32_t>(std::ceil(static_cast<double>(rate) * 16777216.0));
    return FromCuda(kernels::Dropout(x.data(), x.num_elements(), Mix64(seed), threshold, scale,
                                     y->data(), mask->data()),
                    "dropout kernel");
  }

  absl::Status DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(
        CheckOnDevice(*this, "DropoutGrad", {{"dy", &dy}, {"mask", &mask}, {"dx", dx}}));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("DropoutGrad", "dy", dy, "dx", *dx));
    FULCRUM_RETURN_IF_ERROR(CheckSameCount("DropoutGrad", "dy", dy, "mask", mask));
    return FromCuda(kernels::Multiply(dy.data(), mask.data(), dx->data(), dy.num_elements()),
                    "dropout gradient kernel");
  }

  absl::Status AffineGrid(const Tensor& theta, Tensor* grid) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(
        CheckOnDevice(*this, "AffineGrid", {{"theta", &theta}, {"grid", grid}}));
    FULCRUM_RETURN_IF_ERROR(CheckThetaAndGrid("AffineGrid", theta, *grid));
    const Shape& s = grid->shape();
    return FromCuda(kernels::AffineGrid(theta.data(), s.dim(0), s.dim(1), s.dim(2), grid->data()),
                    "affine grid kernel");
  }

  absl::Status AffineGridGrad(const Tensor& dgrid, Tensor* dtheta) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(
        CheckOnDevice(*this, "AffineGridGrad", {{"dgrid", &dgrid}, {"dtheta", dtheta}}));
    FULCRUM_RETURN_IF_ERROR(CheckThetaAndGrid("AffineGridGrad", *dtheta, dgrid));
    const Shape& s = dgrid.shape();
    return FromCuda(
        kernels::AffineGridGrad(dgrid.data(), s.dim(0), s.dim(1), s.dim(2), dtheta->data()),
        "affine grid gradient kernel");
  }

  absl::Status BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(
        *this, "BilinearSample", {{"input", &input}, {"grid", &grid}, {"output", output}}));
    FULCRUM_ASSIGN_OR_RETURN(const Shape out, SampleOutput("BilinearSample", input, grid));
    FULCRUM_RETURN_IF_ERROR(CheckShape("BilinearSample", "output", *output, out));
    const Shape& s = input.shape();
    return FromCuda(kernels::BilinearSample(input.data(), s.dim(0), s.dim(1), s.dim(2), s.dim(3),
                                            grid.data(), out.dim(1), out.dim(2), output->data()),
                    "bilinear sampler kernel");
  }

  absl::Status BilinearSampleGrad(const Tensor& input, const Tensor& grid, const Tensor& dout,
                                  Tensor* dinput, Tensor* dgrid) override {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BilinearSampleGrad",
                                          {{"input", &input}, {"grid", &grid}, {"dout", &dout}}));
    FULCRUM_ASSIGN_OR_RETURN(const Shape out, SampleOutput("BilinearSampleGrad", input, grid));
    FULCRUM_RETURN_IF_ERROR(CheckShape("BilinearSampleGrad", "dout", dout, out));
    if (dinput != nullptr) {
      FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BilinearSampleGrad", {{"dinput", dinput}}));
      FULCRUM_RETURN_IF_ERROR(CheckShape("BilinearSampleGrad", "dinput", *dinput, input.shape()));
      FULCRUM_RETURN_IF_ERROR(Zero(dinput));
    }
    if (dgrid != nullptr) {
      FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BilinearSampleGrad", {{"dgrid", dgrid}}));
      FULCRUM_RETURN_IF_ERROR(CheckShape("BilinearSampleGrad", "dgrid", *dgrid, grid.shape()));
    }
    if (dinput == nullptr && dgrid == nullptr) return absl::OkStatus();
    const Shape& s = input.shape();
    return FromCuda(
        kernels::BilinearSampleGrad(input.data(), s.dim(0), s.dim(1), s.dim(2), s.dim(3),
                                    grid.data(), out.dim(1), out.dim(2), dout.data(),
                                    dinput == nullptr ? nullptr : dinput->data(),
                                    dgrid == nullptr ? nullptr : dgrid->data()),
        "bilinear sampler gradient kernel");
  }

 private:
  absl::Status Bind() { return FromCuda(cudaSetDevice(ordinal_), name().c_str()); }

  absl::Status Zero(Tensor* t) {
    return FromCuda(cudaMemsetAsync(t->data(), 0, t->bytes(), nullptr), "cudaMemsetAsync");
  }

  static absl::Status CheckNhwc(const char* op, const Tensor& x) {
    if (x.shape().rank() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": x has shape ", x.shape().ToString(), ", expected rank 4 (NHWC)"));
    }
    return ValidateShape(x.shape(), absl::StrCat(op, ": x"));
  }

  static absl::Status CheckThetaAndGrid(const char* op, const Tensor& theta, const Tensor& grid) {
    const Shape& t = theta.shape();
    const Shape& g = grid.shape();
    if (t.rank() != 3 || t.dim(1) != 2 || t.dim(2) != 3 || g.rank() != 4 || g.dim(3) != 2 ||
        g.dim(0) != t.dim(0) || g.dim(1) <= 0 || g.dim(2) <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": theta ", t.ToString(), " and grid ", g.ToString(),
                       " are not [N, 2, 3] and [N, H_out, W_out, 2]"));
    }
    return absl::OkStatus();
  }

  static absl::StatusOr<Shape> SampleOutput(const char* op, const Tensor& input,
                                            const Tensor& grid) {
    FULCRUM_RETURN_IF_ERROR(CheckNhwc(op, input));
    const Shape& g = grid.shape();
    if (g.rank() != 4 || g.dim(0) != input.shape().dim(0) || g.dim(1) <= 0 || g.dim(2) <= 0 ||
        g.dim(3) != 2) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": grid has shape ", g.ToString(),
                                                     ", expected [", input.shape().dim(0),
                                                     ", H_out, W_out, 2]"));
    }
    return Shape({g.dim(0), g.dim(1), g.dim(2), input.shape().dim(3)});
  }

  absl::StatusOr<kernels::PoolGeometry> PoolPlan(const char* op, const Tensor& x,
                                                 const Pool2DParams& params, const Tensor* out,
                                                 const char* out_name) {
    FULCRUM_RETURN_IF_ERROR(Bind());
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, op, {{"x", &x}, {out_name, out}}));
    FULCRUM_ASSIGN_OR_RETURN(const Pool2DGeometry g, Pool2DGeometryFor(x.shape(), params, op));
    FULCRUM_RETURN_IF_ERROR(CheckShape(op, out_name, *out, g.output_shape()));
    return PoolGeometryOf(g);
  }

  // The labels on the device, after checking them against the logits on the host.
  absl::StatusOr<const int32_t*> Labels(const char* op, const Tensor& logits,
                                        std::span<const int32_t> labels) {
    if (logits.shape().rank() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": logits have shape ", logits.shape().ToString(), ", expected [batch, classes]"));
    }
    const int64_t rows = logits.rows(), classes = logits.cols();
    if (static_cast<int64_t>(labels.size()) != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", labels.size(), " labels for ", rows, " rows of logits"));
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] < 0 || labels[i] >= classes) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": label ", labels[i], " at row ", i,
                                                       " is not in [0, ", classes, ")"));
      }
    }
    FULCRUM_ASSIGN_OR_RETURN(void* p, labels_.Get(labels.size() * sizeof(int32_t), "labels"));
    FULCRUM_RETURN_IF_ERROR(FromCuda(
        cudaMemcpy(p, labels.data(), labels.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
        "cudaMemcpy of the labels"));
    counters_.h2d_bytes += static_cast<int64_t>(labels.size_bytes());
    ++counters_.h2d_calls;
    return static_cast<const int32_t*>(p);
  }

  absl::StatusOr<double*> Partials() {
    FULCRUM_ASSIGN_OR_RETURN(
        void* p, partials_.Get(kernels::kReduceBlocks * sizeof(double), "partial sums"));
    return static_cast<double*>(p);
  }

  absl::StatusOr<double> SumPartials(const double* partials) {
    FULCRUM_ASSIGN_OR_RETURN(double* scalar, Scalar());
    FULCRUM_RETURN_IF_ERROR(FromCuda(kernels::SumDoubles(partials, kernels::kReduceBlocks, scalar),
                                     "sum of the partial sums"));
    return ScalarToHost(scalar, "a sum");
  }

  // One double on the device for a reduction's result.
  absl::StatusOr<double*> Scalar() {
    FULCRUM_ASSIGN_OR_RETURN(void* p, scalar_.Get(sizeof(double), "a scalar"));
    return static_cast<double*>(p);
  }

  // The scalar, back on the host (8 bytes; waits for the ops queued before it).
  absl::StatusOr<double> ScalarToHost(const double* scalar, const char* what) {
    double host = 0.0;
    FULCRUM_RETURN_IF_ERROR(
        FromCuda(cudaMemcpy(&host, scalar, sizeof(host), cudaMemcpyDeviceToHost),
                 absl::StrCat("cudaMemcpy of ", what)));
    counters_.d2h_bytes += sizeof(host);
    ++counters_.d2h_calls;
    return host;
  }

  // A vector of `n` ones (the bias gradient's GEMV operand), grown on demand.
  absl::StatusOr<const float*> Ones(int64_t n) {
    if (n > ones_size_) {
      FULCRUM_ASSIGN_OR_RETURN(float* p, ones_.Floats(n, "the ones vector"));
      FULCRUM_RETURN_IF_ERROR(FromCuda(kernels::Fill(p, n, 1.0f), "Fill kernel"));
      ones_size_ = n;
    }
    FULCRUM_ASSIGN_OR_RETURN(float* p, ones_.Floats(ones_size_, "the ones vector"));
    return p;
  }

  static Shape OutputShape(const Conv2DGeometry& g) {
    return Shape({g.batch, g.out_h, g.out_w, g.out_c});
  }

  static int64_t PaddedElements(const ConvPlan& plan) {
    return plan.g.batch * plan.padded_h() * plan.padded_w() * plan.g.in_c;
  }

  static absl::StatusOr<ConvPlan> Plan(const Shape& x, const Shape& filter,
                                       const Conv2DParams& params, const char* op) {
    ConvPlan plan;
    FULCRUM_ASSIGN_OR_RETURN(plan.g, Conv2DGeometryFor(x, filter, params, op));
    const Conv2DGeometry& g = plan.g;
    plan.extra_h = ExtraPadding(g.in_h, g.out_h, g.kernel_h, g.stride_h, g.pad_top);
    plan.extra_w = ExtraPadding(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_left);
    for (int64_t v : {g.batch, g.in_h + plan.extra_h, g.in_w + plan.extra_w, g.in_c, g.out_c,
                      g.kernel_h, g.kernel_w, g.out_h, g.out_w}) {
      if (!FitsInt(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, ": a dimension of ", x.ToString(), " does not fit cuDNN's int"));
      }
    }
    if (plan.extra_h < 0 || plan.extra_h > 1 || plan.extra_w < 0 || plan.extra_w > 1) {
      return absl::InternalError(absl::StrCat(op, ": unexpected padding for ", x.ToString()));
    }
    return plan;
  }

  // The plan and descriptors of one of `op`'s convolutions from its input and filter shapes,
  // after checking that `out` (y forward, dy backward) has the output's shape.
  absl::Status PlanConv(const char* op, const Shape& x, const Shape& filter,
                        const Conv2DParams& params, const Tensor& out, const char* out_name,
                        ConvPlan* plan, ConvDescriptors* d) {
    FULCRUM_ASSIGN_OR_RETURN(*plan, Plan(x, filter, params, op));
    FULCRUM_RETURN_IF_ERROR(CheckShape(op, out_name, out, OutputShape(plan->g)));
    return Describe(*plan, d);
  }

  absl::Status Describe(const ConvPlan& plan, ConvDescriptors* d) {
    const Conv2DGeometry& g = plan.g;
    auto i = [](int64_t v) { return static_cast<int>(v); };
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnCreateTensorDescriptor(&d->x), "cudnnCreateTensorDescriptor"));
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnCreateTensorDescriptor(&d->y), "cudnnCreateTensorDescriptor"));
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnCreateFilterDescriptor(&d->w), "cudnnCreateFilterDescriptor"));
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnCreateConvolutionDescriptor(&d->conv), "cudnnCreateConvolutionDescriptor"));
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(g.batch),
                                             i(g.in_c), i(plan.padded_h()), i(plan.padded_w())),
                  "cudnnSetTensor4dDescriptor (input)"));
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(g.batch),
                                             i(g.out_c), i(g.out_h), i(g.out_w)),
                  "cudnnSetTensor4dDescriptor (output)"));
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, i(g.out_c),
                                             i(g.in_c), i(g.kernel_h), i(g.kernel_w)),
                  "cudnnSetFilter4dDescriptor"));
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnSetConvolution2dDescriptor(d->conv, i(g.pad_top), i(g.pad_left),
                                                  i(g.stride_h), i(g.stride_w), 1, 1,
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  "cudnnSetConvolution2dDescriptor"));
    // Full fp32 (no TF32 tensor-core rounding: results agree with the CPU kernels) unless
    // --tf32=on, where cuDNN's default math may round the inputs to TF32.
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnSetConvolutionMathType(d->conv, tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
                  "cudnnSetConvolutionMathType"));
    int n = 0, c = 0, h = 0, w = 0;
    FULCRUM_RETURN_IF_ERROR(
        FromCudnn(cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &n, &c, &h, &w),
                  "cudnnGetConvolution2dForwardOutputDim"));
    if (n != g.batch || c != g.out_c || h != g.out_h || w != g.out_w) {
      return absl::InternalError(absl::StrCat("cuDNN computes a ", n, "x", h, "x", w, "x", c,
                                              " output for ", plan.Key(), ", expected ",
                                              OutputShape(g).ToString()));
    }
    return absl::OkStatus();
  }

  // Filter [KH, KW, C_in, C_out] (a [KH*KW*C_in, C_out] matrix) as cuDNN's NHWC filter
  // [C_out, KH, KW, C_in]: its transpose.
  absl::StatusOr<const float*> FilterToOhwi(const Tensor& filter, const Conv2DGeometry& g) {
    FULCRUM_ASSIGN_OR_RETURN(float* w, filter_t_.Floats(filter.num_elements(), "the filter"));
    FULCRUM_RETURN_IF_ERROR(
        FromCuda(kernels::Transpose(filter.data(), w, g.kernel_h * g.kernel_w * g.in_c, g.out_c),
                 "filter transpose kernel"));
    return w;
  }

  absl::StatusOr<const float*> PaddedInput(const Tensor& x, const ConvPlan& plan) {
    if (!plan.padded()) return x.data();
    const int64_t n = PaddedElements(plan);
    FULCRUM_ASSIGN_OR_RETURN(float* p, padded_.Floats(n, "the padded input"));
    FULCRUM_RETURN_IF_ERROR(
        FromCuda(cudaMemsetAsync(p, 0, n * sizeof(float), nullptr), "cudaMemsetAsync"));
    FULCRUM_RETURN_IF_ERROR(
        FromCuda(kernels::CopyWindow(x.data(), plan.g.in_h, plan.g.in_w, p, plan.padded_h(),
                                     plan.padded_w(), plan.g.batch, plan.g.in_c),
                 "pad kernel"));
    return p;
  }

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
      const ConvPlan& plan, const ConvDescriptors& d) {
    return Choose<cudnnConvolutionFwdAlgoPerf_t>(
        fwd_algos_, plan, "cudnnFindConvolutionForwardAlgorithm",
        [&](int n, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
          return cudnnFindConvolutionForwardAlgorithm(cudnn_, d.x, d.w, d.conv, d.y, n, returned,
                                                      perf);
        });
  }

  absl::StatusOr<std::pair<cudnnConvolutionBwdDataAlgo_t, size_t>> BackwardDataAlgo(
      const ConvPlan& plan, const ConvDescriptors& d) {
    return Choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        bwd_data_algos_, plan, "cudnnFindConvolutionBackwardDataAlgorithm",
        [&](int n, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
          return cudnnFindConvolutionBackwardDataAlgorithm(cudnn_, d.w, d.y, d.conv, d.x, n,
                                                           returned, perf);
        });
  }

  absl::StatusOr<std::pair<cudnnConvolutionBwdFilterAlgo_t, size_t>> BackwardFilterAlgo(
      const ConvPlan& plan, const ConvDescriptors& d) {
    return Choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
        bwd_filter_algos_, plan, "cudnnFindConvolutionBackwardFilterAlgorithm",
        [&](int n, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
          return cudnnFindConvolutionBackwardFilterAlgorithm(cudnn_, d.x, d.y, d.conv, d.w, n,
                                                             returned, perf);
        });
  }

  const int ordinal_;
  const bool tf32_;  // --tf32=on: convolutions may use TF32 tensor-core math
  cublasHandle_t cublas_;
  cudnnHandle_t cudnn_;
  TransferCounters counters_;
  Scratch workspace_{&counters_}, filter_t_{&counters_}, padded_{&counters_}, labels_{&counters_},
      row_loss_{&counters_}, correct_{&counters_}, partials_{&counters_}, scalar_{&counters_},
      ones_{&counters_};
  int64_t ones_size_ = 0;
  std::map<std::string, std::pair<cudnnConvolutionFwdAlgo_t, size_t>> fwd_algos_;
  std::map<std::string, std::pair<cudnnConvolutionBwdDataAlgo_t, size_t>> bwd_data_algos_;
  std::map<std::string, std::pair<cudnnConvolutionBwdFilterAlgo_t, size_t>> bwd_filter_algos_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int ordinal, bool tf32) {
  FULCRUM_ASSIGN_OR_RETURN(const int count, DeviceCount());
  if (ordinal < 0 || ordinal >= count) {
    return absl::InvalidArgumentError(absl::StrCat("gpu:", ordinal,
                                                   " does not exist: this machine has ", count,
                                                   " GPU(s), gpu:0 to gpu:", count - 1));
  }
  FULCRUM_RETURN_IF_ERROR(
      FromCuda(cudaSetDevice(ordinal), absl::StrCat("cudaSetDevice(", ordinal, ")")));
  cublasHandle_t cublas = nullptr;
  FULCRUM_RETURN_IF_ERROR(FromCublas(cublasCreate(&cublas), "cublasCreate"));
  // Full fp32 (TF32 with --tf32=on), alpha/beta from host memory, the legacy default stream
  // (cuBLAS's defaults, set explicitly): ordered with the kernels and cudaMemcpy without events.
  cudnnHandle_t cudnn = nullptr;
  absl::Status s =
      FromCublas(cublasSetMathMode(cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                 "cublasSetMathMode");
  if (s.ok()) {
    s = FromCublas(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  }
  if (s.ok()) s = FromCudnn(cudnnCreate(&cudnn), "cudnnCreate");
  if (!s.ok()) {
    cublasDestroy(cublas);
    return s;
  }
  return std::unique_ptr<Backend>(new CudaBackend(ordinal, tf32, cublas, cudnn));
}

}  // namespace fulcrum::ops::cuda
