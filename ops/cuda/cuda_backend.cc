// ops/cuda: the CUDA backend (cuda_backend_internal.h): its memory, the optimizer, the dense
// ops and the losses, and CreateCudaBackend. Convolutions: cuda_conv.cc; pooling, LRN,
// dropout and the spatial transformer: cuda_image_ops.cc.
#include "ops/cuda/cuda_backend.h"

#include <cstring>
#include <memory>
#include <vector>

#include "ops/cuda/cuda_backend_internal.h"

namespace fulcrum::ops::cuda {

absl::StatusOr<Tensor> CudaBackend::Allocate(const Shape& shape) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_ASSIGN_OR_RETURN(Tensor t, AllocateDevice(shape));
  ++counters_.allocations;
  counters_.allocated_bytes += static_cast<int64_t>(t.bytes());
  return t;
}

absl::StatusOr<Tensor> CudaBackend::AllocateHost(const Shape& shape) {
  FULCRUM_RETURN_IF_ERROR(ValidateShape(shape, "AllocateHost"));
  FULCRUM_RETURN_IF_ERROR(Bind());
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * sizeof(float);
  void* p = nullptr;
  FULCRUM_RETURN_IF_ERROR(FromCuda(cudaHostAlloc(&p, bytes, cudaHostAllocDefault),
                                   absl::StrCat("cudaHostAlloc of ", bytes, " bytes")));
  std::memset(p, 0, bytes);
  return Tensor::Wrap(
      std::shared_ptr<float>(static_cast<float*>(p),
                             [](float* q) { static_cast<void>(cudaFreeHost(q)); }),
      shape, Device::kCpu);
}

int64_t CudaBackend::free_bytes() const {
  size_t free = 0, total = 0;
  if (cudaSetDevice(ordinal_) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
    return -1;
  }
  return static_cast<int64_t>(free);
}

absl::Status CudaBackend::ApplyGradient(const OptimizerConfig& config, int64_t step,
                                        const Tensor& grad, Tensor* var, std::span<Tensor> slots,
                                        float grad_scale) {
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
      kernels::ApplyOptimizer(OptimizerArgsFor(config, step, grad_scale), grad.data(), var->data(),
                              slots.empty() ? nullptr : slots[0].data(),
                              slots.size() < 2 ? nullptr : slots[1].data(), var->num_elements()),
      "optimizer kernel");
}

absl::Status CudaBackend::CopyFromHost(const Tensor& host, Tensor* dst) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "CopyFromHost", {{"destination", dst}}));
  if (host.empty() || host.device() != Device::kCpu) {
    return absl::InvalidArgumentError("CopyFromHost: the source must be a non-empty cpu tensor");
  }
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("CopyFromHost", "source", host, "destination", *dst));
  counters_.h2d_bytes += static_cast<int64_t>(host.bytes());
  ++counters_.h2d_calls;
  // Queued on the legacy default stream, ordered with every op: from page-locked memory the
  // host goes on at once (the DMA runs beside it; Backend::CopyFromHost says how long the
  // source must stay put), from pageable memory it returns once the bytes are staged.
  return FromCuda(
      cudaMemcpyAsync(dst->data(), host.data(), host.bytes(), cudaMemcpyHostToDevice, nullptr),
      "cudaMemcpyAsync host to device");
}

absl::Status CudaBackend::CopyToHost(const Tensor& src, Tensor* host) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "CopyToHost", {{"source", &src}}));
  if (host == nullptr || host->empty() || host->device() != Device::kCpu) {
    return absl::InvalidArgumentError("CopyToHost: the destination must be a non-empty cpu tensor");
  }
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("CopyToHost", "source", src, "destination", *host));
  counters_.d2h_bytes += static_cast<int64_t>(src.bytes());
  ++counters_.d2h_calls;
  // On the legacy default stream: waits for every op queued before it.
  return FromCuda(cudaMemcpy(host->data(), src.data(), src.bytes(), cudaMemcpyDeviceToHost),
                  "cudaMemcpy device to host (or an earlier op on the GPU)");
}

absl::Status CudaBackend::Copy(const Tensor& src, Tensor* dst) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Copy", {{"source", &src}, {"destination", dst}}));
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("Copy", "source", src, "destination", *dst));
  if (src.data() == dst->data()) return absl::OkStatus();
  return FromCuda(
      cudaMemcpyAsync(dst->data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, nullptr),
      "cudaMemcpyAsync device to device");
}

absl::Status CudaBackend::Fill(float value, Tensor* dst) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Fill", {{"destination", dst}}));
  return FromCuda(kernels::Fill(dst->data(), dst->num_elements(), value), "Fill kernel");
}

absl::Status CudaBackend::MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                 Tensor* out, bool accumulate) {
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

absl::Status CudaBackend::BiasAdd(const Tensor& bias, Tensor* x) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BiasAdd", {{"bias", &bias}, {"x", x}}));
  if (bias.num_elements() != x->cols()) {
    return absl::InvalidArgumentError(absl::StrCat("BiasAdd: bias ", bias.shape().ToString(),
                                                   " does not match x ", x->shape().ToString()));
  }
  return FromCuda(kernels::BiasAdd(bias.data(), x->data(), x->rows(), x->cols()), "BiasAdd kernel");
}

absl::Status CudaBackend::BiasAddGrad(const Tensor& dy, Tensor* dbias) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BiasAddGrad", {{"dy", &dy}, {"dbias", dbias}}));
  if (dbias->num_elements() != dy.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("BiasAddGrad: dbias ", dbias->shape().ToString(),
                                                   " does not match dy ", dy.shape().ToString()));
  }
  if (!FitsInt(dy.rows()) || !FitsInt(dy.cols())) {
    return absl::InvalidArgumentError("BiasAddGrad: dy is too large for cuBLAS");
  }
  FULCRUM_ASSIGN_OR_RETURN(const float* ones, Ones(dy.rows()));
  const float alpha = 1.0f, beta = 0.0f;
  const int cols = static_cast<int>(dy.cols()), rows = static_cast<int>(dy.rows());
  return FromCublas(cublasSgemv(cublas_, CUBLAS_OP_N, cols, rows, &alpha, dy.data(), cols, ones, 1,
                                &beta, dbias->data(), 1),
                    "cublasSgemv (bias gradient)");
}

absl::Status CudaBackend::Activate(ActivationKind kind, Tensor* y) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Activate", {{"y", y}}));
  return FromCuda(kernels::Activate(static_cast<int>(kind), y->data(), y->num_elements()),
                  "activation kernel");
}

absl::Status CudaBackend::ActivationGrad(ActivationKind kind, const Tensor& y, Tensor* dy) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "ActivationGrad", {{"y", &y}, {"dy", dy}}));
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("ActivationGrad", "y", y, "dy", *dy));
  return FromCuda(
      kernels::ActivationGrad(static_cast<int>(kind), y.data(), dy->data(), y.num_elements()),
      "activation gradient kernel");
}

absl::StatusOr<float> CudaBackend::SoftmaxCrossEntropy(const Tensor& logits,
                                                       std::span<const int32_t> labels,
                                                       Tensor* dlogits) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "SoftmaxCrossEntropy", {{"logits", &logits}}));
  if (dlogits != nullptr) {
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "SoftmaxCrossEntropy", {{"dlogits", dlogits}}));
    FULCRUM_RETURN_IF_ERROR(CheckShape("SoftmaxCrossEntropy", "dlogits", *dlogits, logits.shape()));
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

absl::StatusOr<int64_t> CudaBackend::CountCorrect(const Tensor& logits,
                                                  std::span<const int32_t> labels) {
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

absl::StatusOr<float> CudaBackend::MeanSquaredError(const Tensor& pred, const Tensor& target,
                                                    Tensor* dpred) {
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

absl::Status CudaBackend::Add(const Tensor& x, Tensor* y) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Add", {{"x", &x}, {"y", y}}));
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("Add", "x", x, "y", *y));
  return FromCuda(kernels::Add(x.data(), y->data(), x.num_elements()), "Add kernel");
}

absl::StatusOr<double> CudaBackend::AddWeightDecay(float weight_decay, const Tensor& value,
                                                   Tensor* grad) {
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

absl::Status CudaBackend::Zero(Tensor* t) {
  return FromCuda(cudaMemsetAsync(t->data(), 0, t->bytes(), nullptr), "cudaMemsetAsync");
}

absl::StatusOr<const int32_t*> CudaBackend::Labels(const char* op, const Tensor& logits,
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
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": label ", labels[i], " at row ", i, " is not in [0, ", classes, ")"));
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

absl::StatusOr<double*> CudaBackend::Partials() {
  FULCRUM_ASSIGN_OR_RETURN(void* p,
                           partials_.Get(kernels::kReduceBlocks * sizeof(double), "partial sums"));
  return static_cast<double*>(p);
}

absl::StatusOr<double> CudaBackend::SumPartials(const double* partials) {
  FULCRUM_ASSIGN_OR_RETURN(double* scalar, Scalar());
  FULCRUM_RETURN_IF_ERROR(FromCuda(kernels::SumDoubles(partials, kernels::kReduceBlocks, scalar),
                                   "sum of the partial sums"));
  return ScalarToHost(scalar, "a sum");
}

absl::StatusOr<double*> CudaBackend::Scalar() {
  FULCRUM_ASSIGN_OR_RETURN(void* p, scalar_.Get(sizeof(double), "a scalar"));
  return static_cast<double*>(p);
}

absl::StatusOr<double> CudaBackend::ScalarToHost(const double* scalar, const char* what) {
  double host = 0.0;
  FULCRUM_RETURN_IF_ERROR(FromCuda(cudaMemcpy(&host, scalar, sizeof(host), cudaMemcpyDeviceToHost),
                                   absl::StrCat("cudaMemcpy of ", what)));
  counters_.d2h_bytes += sizeof(host);
  ++counters_.d2h_calls;
  return host;
}

absl::StatusOr<const float*> CudaBackend::Ones(int64_t n) {
  if (n > ones_size_) {
    FULCRUM_ASSIGN_OR_RETURN(float* p, ones_.Floats(n, "the ones vector"));
    FULCRUM_RETURN_IF_ERROR(FromCuda(kernels::Fill(p, n, 1.0f), "Fill kernel"));
    ones_size_ = n;
  }
  FULCRUM_ASSIGN_OR_RETURN(float* p, ones_.Floats(ones_size_, "the ones vector"));
  return p;
}

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
