// ops/cuda (private): the small CUDA kernels of the CUDA backend, where cuDNN and cuBLAS have
// no op with the CPU kernels' semantics (TensorFlow's asymmetric SAME padding in pooling, its
// LRN and bilinear sampler definitions, the counter-based dropout mask). Each launcher queues
// its kernel on the legacy default stream and returns the launch status; execution errors
// surface at the next synchronising call. Pointers are device memory; sizes are elements.
// Only ops/cuda/*.cc include this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fulcrum::ops::cuda::kernels {

// The sizes of a pooling op (ops::Pool2DGeometry).
struct PoolGeometry {
  int64_t batch, in_h, in_w, channels, window_h, window_w, stride_h, stride_w, out_h, out_w,
      pad_top, pad_left;
};

cudaError_t Fill(float* p, int64_t n, float value);
cudaError_t Add(const float* x, float* y, int64_t n);                         // y += x
cudaError_t Multiply(const float* a, const float* b, float* out, int64_t n);  // out = a * b
cudaError_t BiasAdd(const float* bias, float* x, int64_t rows, int64_t cols);
// kind: 0 relu, 1 sigmoid, 2 tanh (ops::ActivationKind's order).
cudaError_t Activate(int kind, float* y, int64_t n);
cudaError_t ActivationGrad(int kind, const float* y, float* dy, int64_t n);

// Per-row loss of softmax cross-entropy into row_loss[rows]; if dlogits, (softmax - onehot) /
// rows. labels: device int32, already checked to be in [0, classes).
cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t rows,
                                int64_t classes, float* row_loss, float* dlogits);
// correct[row] = 1 if the row's arg-max (first on ties) equals its label, else 0.
cudaError_t ArgMaxMatches(const float* logits, const int32_t* labels, int64_t rows, int64_t classes,
                          int32_t* correct);

// The number of partial sums the reductions below write (one per block).
inline constexpr int kReduceBlocks = 128;
// partials[b] = block b's share of sum((pred - target)^2); dpred (if not null) =
// scale * (pred - target).
cudaError_t SquaredError(const float* pred, const float* target, int64_t n, float scale,
                         float* dpred, double* partials);
// grad += weight_decay * value; partials[b] = block b's share of sum(value^2).
cudaError_t WeightDecay(float weight_decay, const float* value, float* grad, int64_t n,
                        double* partials);

// ops::ApplyGradient's update on the device (optimizer_kernels.cu). kind: ops::OptimizerKind's
// order; lr is the step's learning rate (decay applied on the host), lr_t Adam's bias-corrected
// one; slot0/slot1 as SlotNames orders them (null where the optimizer has fewer).
struct OptimizerArgs {
  int kind;
  float lr, lr_t, grad_scale, momentum, beta1, beta2, epsilon, rmsprop_decay, rmsprop_momentum,
      rmsprop_epsilon;
};
cudaError_t ApplyOptimizer(const OptimizerArgs& args, const float* grad, float* var, float* slot0,
                           float* slot1, int64_t n);
// out[0] = the sum of in[0, n) in double, on the device (one block): a scalar comes back as
// 8 bytes.
cudaError_t SumFloats(const float* in, int64_t n, double* out);
cudaError_t SumInts(const int32_t* in, int64_t n, double* out);
cudaError_t SumDoubles(const double* in, int64_t n, double* out);

// out [cols, rows] = in [rows, cols]^T (row-major).
cudaError_t Transpose(const float* in, float* out, int64_t rows, int64_t cols);
// Copies the top-left min(H) x min(W) window of every NHWC image between two sizes (zero
// padding at the bottom/right when dst is larger and was zeroed; a crop when smaller).
cudaError_t CopyWindow(const float* src, int64_t src_h, int64_t src_w, float* dst, int64_t dst_h,
                       int64_t dst_w, int64_t batch, int64_t channels);

cudaError_t MaxPool(const float* x, const PoolGeometry& g, float* y);
// Every dy goes to its window's arg-max (first on ties). dx is written whole: each element
// gathers from the windows that hold it, in output order (deterministic, no atomics).
cudaError_t MaxPoolGrad(const float* x, const float* dy, const PoolGeometry& g, float* dx);
cudaError_t AvgPool(const float* x, const PoolGeometry& g, float* y);
// dx is written whole, gathered as MaxPoolGrad's (deterministic).
cudaError_t AvgPoolGrad(const float* dy, const PoolGeometry& g, float* dx);

// TensorFlow's LRN over the channels of NHWC pixels (ops/cpu/lrn.h).
cudaError_t Lrn(const float* x, int64_t pixels, int64_t channels, int64_t radius, float bias,
                float alpha, float beta, float* y);
cudaError_t LrnGrad(const float* x, const float* dy, int64_t pixels, int64_t channels,
                    int64_t radius, float bias, float alpha, float beta, float* dx);

// ops/cpu/dropout.cc's mask: element i kept iff top 24 bits of Mix64(stream ^ i) >= threshold.
cudaError_t Dropout(const float* x, int64_t n, uint64_t stream, uint32_t threshold, float scale,
                    float* y, float* mask);

// ops/cpu/spatial_transformer.h. BilinearSampleGrad: dinput (if not null) must be zeroed.
cudaError_t AffineGrid(const float* theta, int64_t batch, int64_t out_h, int64_t out_w,
                       float* grid);
cudaError_t AffineGridGrad(const float* dgrid, int64_t batch, int64_t out_h, int64_t out_w,
                           float* dtheta);
cudaError_t BilinearSample(const float* input, int64_t batch, int64_t h, int64_t w, int64_t c,
                           const float* grid, int64_t out_h, int64_t out_w, float* output);
cudaError_t BilinearSampleGrad(const float* input, int64_t batch, int64_t h, int64_t w, int64_t c,
                               const float* grid, int64_t out_h, int64_t out_w, const float* dout,
                               float* dinput, float* dgrid);

}  // namespace fulcrum::ops::cuda::kernels
