// ops/cuda: the optimizer update and the reductions to one scalar (see kernels.h). The update
// mirrors ops/optimizer.cc formula for formula (the conformance suite holds it to the CPU
// kernel); the reductions finish on the device, so a loss, a count or a sum of squares comes
// back to the host as 8 bytes instead of a block of partial sums.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/cuda/kernels.h"

namespace fulcrum::ops::cuda::kernels {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 8192));
}

__global__ void ApplyOptimizerKernel(OptimizerArgs a, const float* grad, float* var, float* s0,
                                     float* s1, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const float g = a.grad_scale * grad[i];
    switch (a.kind) {
      case 0:  // sgd
        var[i] -= a.lr * g;
        break;
      case 1: {  // momentum
        const float v = a.momentum * s0[i] + g;
        s0[i] = v;
        var[i] -= a.lr * v;
        break;
      }
      case 2: {  // adam
        const float m = a.beta1 * s0[i] + (1.0f - a.beta1) * g;
        const float v = a.beta2 * s1[i] + (1.0f - a.beta2) * (g * g);
        s0[i] = m;
        s1[i] = v;
        var[i] -= a.lr_t * m / (sqrtf(v) + a.epsilon);
        break;
      }
      case 3: {  // adagrad
        const float accum = s0[i] + g * g;
        s0[i] = accum;
        var[i] -= a.lr * g * rsqrtf(accum);
        break;
      }
      default: {  // rmsprop
        const float ms = a.rmsprop_decay * s0[i] + (1.0f - a.rmsprop_decay) * (g * g);
        const float mom = a.rmsprop_momentum * s1[i] + a.lr * g * rsqrtf(ms + a.rmsprop_epsilon);
        s0[i] = ms;
        s1[i] = mom;
        var[i] -= mom;
        break;
      }
    }
  }
}

// One block: out[0] = sum of in[0, n) in double.
template <typename T>
__global__ void SumKernel(const T* in, int64_t n, double* out) {
  __shared__ double red[kThreads];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += static_cast<double>(in[i]);
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = red[0];
}

}  // namespace

cudaError_t ApplyOptimizer(const OptimizerArgs& args, const float* grad, float* var, float* slot0,
                           float* slot1, int64_t n) {
  ApplyOptimizerKernel<<<Blocks(n), kThreads>>>(args, grad, var, slot0, slot1, n);
  return cudaGetLastError();
}

cudaError_t SumFloats(const float* in, int64_t n, double* out) {
  SumKernel<float><<<1, kThreads>>>(in, n, out);
  return cudaGetLastError();
}

cudaError_t SumInts(const int32_t* in, int64_t n, double* out) {
  SumKernel<int32_t><<<1, kThreads>>>(in, n, out);
  return cudaGetLastError();
}

cudaError_t SumDoubles(const double* in, int64_t n, double* out) {
  SumKernel<double><<<1, kThreads>>>(in, n, out);
  return cudaGetLastError();
}

}  // namespace fulcrum::ops::cuda::kernels
