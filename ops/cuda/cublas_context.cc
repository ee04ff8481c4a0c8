#include "ops/cuda/cublas_context.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "base/status_macros.h"
#include "ops/cuda/gemm_plan.h"
#include "ops/cuda/status_internal.h"

namespace fulcrum::ops::cuda {

struct CublasContext::Impl {
  cublasHandle_t handle = nullptr;

  ~Impl() {
    // Nothing can report a failure from a destructor; the handle is gone either way.
    if (handle != nullptr) static_cast<void>(cublasDestroy(handle));
  }
};

CublasContext::CublasContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CublasContext::~CublasContext() = default;

absl::StatusOr<std::unique_ptr<CublasContext>> CublasContext::Create() {
  auto impl = std::make_unique<Impl>();
  FULCRUM_RETURN_IF_ERROR(internal::FromCublas(cublasCreate(&impl->handle), "cublasCreate"));
  // The handle stays on the legacy default stream (cuBLAS's default), so cudaMemcpy in
  // CopyToHost/CopyToDevice is ordered after the GEMMs without extra events.
  // Default math is full fp32: no TF32 tensor-core rounding, so results match the CPU
  // kernels to fp32 accuracy.
  FULCRUM_RETURN_IF_ERROR(internal::FromCublas(cublasSetMathMode(impl->handle, CUBLAS_DEFAULT_MATH),
                                               "cublasSetMathMode"));
  // alpha and beta are passed from host memory (the default pointer mode, set explicitly).
  FULCRUM_RETURN_IF_ERROR(internal::FromCublas(
      cublasSetPointerMode(impl->handle, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode"));
  return std::unique_ptr<CublasContext>(new CublasContext(std::move(impl)));
}

absl::Status CublasContext::MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                   Tensor* out, bool accumulate) {
  FULCRUM_RETURN_IF_ERROR(CheckMatMulDevices(a, b, out, Device::kCuda));
  FULCRUM_ASSIGN_OR_RETURN(const ColumnMajorGemm g,
                           PlanRowMajorMatMul(a, trans_a, b, trans_b, *out));
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  FULCRUM_RETURN_IF_ERROR(
      internal::FromCublas(cublasSgemm(impl_->handle, g.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       g.trans_y ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha,
                                       b.data(), g.ldx, a.data(), g.ldy, &beta, out->data(), g.ldc),
                           "cublasSgemm"));
  // The GEMM is asynchronous. Waiting here makes an execution error this call's status
  // (instead of a later, unrelated call's) and the result visible to every stream and the
  // host. One GEMM per call is the simple path; batching work on a stream would earn its
  // lines with a benchmark.
  return internal::FromCuda(cudaStreamSynchronize(nullptr),
                            "cudaStreamSynchronize after cublasSgemm");
}

}  // namespace fulcrum::ops::cuda
