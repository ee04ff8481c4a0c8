// ops/cuda: GEMM on Device::kCuda tensors through cuBLAS, with ops::MatMul's row-major
// semantics and shape checks (see ops/cpu/kernels.h; the mapping is in gemm_plan.h).
// Includes no CUDA header: the cuBLAS handle sits behind a pointer to an opaque Impl.
// Thread-safety: a CublasContext is not thread-safe (a cuBLAS handle must not be used by two
// threads at once); give each thread its own. It is bound to the CUDA device that was current
// on the thread that created it.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/tensor.h"

namespace fulcrum::ops::cuda {

class CublasContext {
 public:
  // A context with a new cuBLAS handle on the calling thread's current device. Fails with
  // FailedPrecondition or Unavailable (naming the cuBLAS/CUDA error) without a usable GPU.
  static absl::StatusOr<std::unique_ptr<CublasContext>> Create();

  ~CublasContext();
  CublasContext(const CublasContext&) = delete;
  CublasContext& operator=(const CublasContext&) = delete;

  // out = op(a) * op(b) (+ out if accumulate), op(x) = x or x^T, row-major, in fp32.
  // a: [m, k] (or [k, m] if trans_a), b: [k, n] (or [n, k] if trans_b), out: [m, n], all
  // kCuda (a kCpu operand is InvalidArgument). Returns once the result is in `out`, with
  // any asynchronous CUDA error reported here. `out` must not alias `a` or `b`.
  absl::Status MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor* out,
                      bool accumulate = false);

 private:
  struct Impl;
  explicit CublasContext(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum::ops::cuda
