// ops/cpu: 2-D max and average pooling in NHWC, forward and backward, with TensorFlow's
// semantics: padding by TensorFlow's rule (ConvOutputSize in conv.h: SAME out = ceil(in /
// stride), pad_before = pad_total / 2; VALID out = ceil((in - window + 1) / stride)); padded
// elements never win a max and are not counted in an average (SAME average pooling divides by
// the number of valid elements in each window); max ties go to the first element of the window
// in row-major (h, w) order. Work is split by image over the ThreadPool when one is given.
// Outputs are preallocated by the caller and overwritten.
// Thread-safety: no state; callers must not write a tensor that another thread reads.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

// What a pooling layer is, apart from its tensors. The defaults are a 2x2 window, stride 2.
struct Pool2DParams {
  int64_t window_h = 2;
  int64_t window_w = 2;
  int64_t stride_h = 2;
  int64_t stride_w = 2;
  Padding padding = Padding::kValid;
  std::string layer = {};  // the layer's name, for the kernel choice record; empty for a bare op
};

// Every size one pooling op needs, computed once from the input shape by Pool2DGeometryFor.
struct Pool2DGeometry {
  int64_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  int64_t window_h = 0, window_w = 0, stride_h = 1, stride_w = 1;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0;  // padding before; the rest of pad_total goes after

  Shape input_shape() const { return Shape({batch, in_h, in_w, channels}); }
  Shape output_shape() const { return Shape({batch, out_h, out_w, channels}); }
};

// x: [N, H, W, C]. InvalidArgument, starting with `name`, if x is not rank 4 with positive
// dimensions, a window or stride is not positive, or a VALID window is larger than the input.
absl::StatusOr<Pool2DGeometry> Pool2DGeometryFor(const Shape& x, const Pool2DParams& params,
                                                 const std::string& name = "Pool2D");

// y: [N, OH, OW, C] for x: [N, H, W, C].
absl::StatusOr<Shape> Pool2DOutputShape(const Shape& x, const Pool2DParams& params,
                                        const std::string& name = "Pool2D");

// y = max over each window of x. x: [N, H, W, C], y: [N, OH, OW, C].
// If argmax is non-empty (y.num_elements() entries) it receives, for each element of y, the
// offset of the winning element of x within its image: (h * W + w) * C + c.
absl::Status MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y,
                     ThreadPool* pool = nullptr, std::span<int32_t> argmax = {});

// dx = d(loss)/dx from dy, the arg-max recomputed from x (TensorFlow's MaxPoolGrad).
// x: [N, H, W, C], dy: [N, OH, OW, C], dx: [N, H, W, C].
absl::Status MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params, Tensor* dx,
                         ThreadPool* pool = nullptr);

// dx = d(loss)/dx from dy and the arg-max that MaxPool recorded (dx's shape is x's).
// dy: [N, OH, OW, C], argmax: dy.num_elements() offsets, dx: [N, H, W, C].
absl::Status MaxPoolGradWithArgmax(const Tensor& dy, std::span<const int32_t> argmax,
                                   const Pool2DParams& params, Tensor* dx,
                                   ThreadPool* pool = nullptr);

// y = mean over the valid (non-padded) elements of each window of x.
// x: [N, H, W, C], y: [N, OH, OW, C].
absl::Status AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y,
                     ThreadPool* pool = nullptr);

// dx = d(loss)/dx from dy; dx's shape is the input's. dy: [N, OH, OW, C], dx: [N, H, W, C].
absl::Status AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx,
                         ThreadPool* pool = nullptr);

}  // namespace fulcrum::ops
