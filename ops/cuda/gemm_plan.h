// ops/cuda: how a row-major MatMul maps onto a column-major BLAS GEMM (cublasSgemm).
// A row-major [r, c] buffer read column-major is its transpose, [c, r] with leading
// dimension c. So out = op(a) op(b) (row-major [m, n]) is computed, without copies, as
// out^T = op(b)^T op(a)^T in column-major: the GEMM's first operand X is b's buffer, its
// second Y is a's buffer, and its result C is out's buffer.
// No CUDA header: the plan is plain arithmetic that tests check without a GPU.
// Thread-safety: stateless.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/tensor.h"

namespace fulcrum::ops::cuda {

// Column-major C (m x n, leading dimension ldc) = op(X) (m x k) * op(Y) (k x n), with
// op(X) = X^T if trans_x; X is b's buffer (leading dimension ldx), Y is a's (ldy).
// Sizes are int because that is what the BLAS interface takes.
struct ColumnMajorGemm {
  bool trans_x = false;
  bool trans_y = false;
  int m = 0;
  int n = 0;
  int k = 0;
  int ldx = 0;
  int ldy = 0;
  int ldc = 0;
};

// OK iff a, b and *out are present, non-empty and all on `device`; InvalidArgument naming
// the first operand that is not.
absl::Status CheckMatMulDevices(const Tensor& a, const Tensor& b, const Tensor* out, Device device);

// Checks shapes as ops::MatMul does (tensors seen as [rows, cols]; a: [m, k], or [k, m] if
// trans_a; b: [k, n], or [n, k] if trans_b; out: [m, n]) and that every size fits in an int,
// and returns the GEMM that computes out = op(a) op(b). InvalidArgument on a mismatch.
// Does not look at devices or data.
absl::StatusOr<ColumnMajorGemm> PlanRowMajorMatMul(const Tensor& a, bool trans_a, const Tensor& b,
                                                   bool trans_b, const Tensor& out);

}  // namespace fulcrum::ops::cuda
