// ops/cpu: the CPU kernels of Fulcrum on Eigen (vectorised), the GEMM on OpenBLAS's sgemm when
// the build found it (else Eigen); a GEMM is split over a ThreadPool when one is given and the
// product is big enough to pay for it. Every kernel has its gradient here too.
// Shapes are checked; a mismatch returns InvalidArgument naming the operands. Tensors are
// seen as row-major matrices [rows, cols] (Tensor::rows/cols). Outputs are preallocated by
// the caller. Thread-safety: kernels keep no state; callers must not write a tensor that
// another thread reads.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

// out = op(a) * op(b) (+ out if accumulate), op(x) = x or x^T.
// a: [m, k] (or [k, m] if trans_a), b: [k, n] (or [n, k] if trans_b), out: [m, n].
// With a pool of several threads, a product of at least kMinParallelGemmWork multiply-adds is
// split into one independent block of rows (or columns) of out per thread.
absl::Status MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor* out,
                    bool accumulate = false, ThreadPool* pool = nullptr);
inline constexpr int64_t kMinParallelGemmWork = int64_t{1} << 19;
// Built with OpenBLAS (FULCRUM_HAVE_OPENBLAS), products of at least this many multiply-adds
// run on its sgemm (one thread per part), smaller ones on Eigen: measured on the models'
// shapes in bench/gemm_bench.cc (docs/performance.md).
inline constexpr int64_t kMinBlasGemmWork = int64_t{1} << 12;

// x[i, :] += bias for every row i. x: [rows, n], bias: [n].
absl::Status BiasAdd(const Tensor& bias, Tensor* x);
// dbias = sum over rows of dy (+ dbias if accumulate). dy: [rows, n], dbias: [n].
absl::Status BiasAddGrad(const Tensor& dy, Tensor* dbias, bool accumulate = false);

// Elementwise activations; y may be the same tensor as x.
absl::Status Relu(const Tensor& x, Tensor* y);
absl::Status Sigmoid(const Tensor& x, Tensor* y);
absl::Status Tanh(const Tensor& x, Tensor* y);
// Gradients from the activation's output y and upstream dy; dx may alias dy.
// relu: dx = dy * (y > 0); sigmoid: dx = dy * y * (1 - y); tanh: dx = dy * (1 - y^2).
// Large tensors are split over `pool` when one is given.
absl::Status ReluGrad(const Tensor& y, const Tensor& dy, Tensor* dx, ThreadPool* pool = nullptr);
absl::Status SigmoidGrad(const Tensor& y, const Tensor& dy, Tensor* dx, ThreadPool* pool = nullptr);
absl::Status TanhGrad(const Tensor& y, const Tensor& dy, Tensor* dx, ThreadPool* pool = nullptr);

// Mean over the batch of softmax cross-entropy between logits [batch, classes] and integer
// labels in [0, classes). Stable for any logit magnitude (max-shifted log-sum-exp).
// If dlogits is non-null it receives d(mean loss)/d(logits) = (softmax - onehot) / batch.
absl::StatusOr<float> SoftmaxCrossEntropy(const Tensor& logits, std::span<const int32_t> labels,
                                          Tensor* dlogits);

// Mean over all elements of (pred - target)^2. If dpred is non-null it receives
// d(mean)/d(pred) = 2 (pred - target) / num_elements.
absl::StatusOr<float> MeanSquaredError(const Tensor& pred, const Tensor& target, Tensor* dpred);

// Number of rows whose arg-max (first on ties) equals the label.
absl::StatusOr<int64_t> CountCorrect(const Tensor& logits, std::span<const int32_t> labels);
// Arg-max of each row into `out` (size rows).
absl::Status ArgMaxRows(const Tensor& x, std::span<int32_t> out);
// Sum of squares of all elements (accumulated in double).
double SumSquares(const Tensor& x);

}  // namespace fulcrum::ops
