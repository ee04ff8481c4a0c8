// ops/cpu: local response normalization across channels in NHWC, TensorFlow's definition
// (tf.nn.local_response_normalization):
//   sqr_sum[n, h, w, c] = sum over c' in [c - depth_radius, c + depth_radius] of x[n, h, w, c']^2
//   y = x / (bias + alpha * sqr_sum)^beta
// and its gradient. Work is split by image over the ThreadPool when one is given; sums of
// squares are accumulated in double. Outputs are preallocated by the caller and overwritten.
// Thread-safety: no state; callers must not write a tensor that another thread reads.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

// TensorFlow's defaults. The CIFAR-10 tutorial uses {4, 1, 0.001 / 9, 0.75}.
struct LrnParams {
  int64_t depth_radius = 5;
  float bias = 1.0f;
  float alpha = 1.0f;
  float beta = 0.5f;
  std::string layer = {};  // the layer's name, for the kernel choice record; empty for a bare op
};

// OK iff depth_radius >= 0, bias > 0 and alpha >= 0 (so the base of the power is positive).
absl::Status ValidateLrnParams(const LrnParams& params, const char* name = "LRN");

// x: [N, H, W, C], y: [N, H, W, C]; y may not alias x.
absl::Status Lrn(const Tensor& x, const LrnParams& params, Tensor* y, ThreadPool* pool = nullptr);

// dx = d(loss)/dx from dy, the norms recomputed from x. With s_c = bias + alpha * sqr_sum_c:
//   dx_j = dy_j s_j^-beta - 2 alpha beta x_j sum over c within depth_radius of j of
//          dy_c x_c s_c^(-beta - 1).
// x, dy, dx: [N, H, W, C]; dx may not alias x or dy.
absl::Status LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params, Tensor* dx,
                     ThreadPool* pool = nullptr);

}  // namespace fulcrum::ops
