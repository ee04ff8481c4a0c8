// ops/cpu: 2-D convolution in NHWC with TensorFlow's filter layout [KH, KW, C_in, C_out], and
// its two gradients, by im2col + MatMul (kernels.h): the GEMM is split over the ThreadPool
// when one is given and the product is big enough; im2col / col2im are split by image.
// Padding follows TensorFlow exactly (SAME: out = ceil(in / stride), pad_total =
// max((out - 1) * stride + k - in, 0), pad_before = pad_total / 2; VALID: no padding).
// Outputs are preallocated by the caller. Scratch: the im2col buffer is the caller's
// `workspace` when given (at least Conv2DWorkspaceElements(geometry, 1) floats; its size sets
// how many images go through one GEMM), else allocated inside each call.
// Thread-safety: no state; callers must not write a tensor that another thread reads.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

enum class Padding { kSame, kValid };

const char* PaddingName(Padding padding);

// What a conv layer is, apart from its tensors. The kernel size comes from the filter.
struct Conv2DParams {
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  Padding padding = Padding::kSame;
  // The layer's name: what the kernel choice record (ops/cpu/conv_planner.h) and a fallback's
  // log line call it. Empty for a bare op.
  std::string layer = {};
};

// The elementwise function fused after a convolution's bias.
enum class ConvPostOp { kNone, kRelu, kSigmoid, kTanh };

// Every size one conv needs, computed once from the shapes by Conv2DGeometryFor.
struct Conv2DGeometry {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  int64_t kernel_h = 0, kernel_w = 0, out_c = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0;  // padding before; the rest of pad_total goes after

  // Rows and columns of one image's im2col matrix: [out_h * out_w, kernel_h * kernel_w * in_c].
  int64_t col_rows() const { return out_h * out_w; }
  int64_t col_cols() const { return kernel_h * kernel_w * in_c; }
  Shape output_shape() const { return Shape({batch, out_h, out_w, out_c}); }
};

// Output size and padding before along one axis, TensorFlow's rule. InvalidArgument (naming
// `what`, e.g. "conv1: height") if a size or stride is not positive, or a VALID kernel is
// larger than the input.
absl::Status ConvOutputSize(int64_t in, int64_t kernel, int64_t stride, Padding padding,
                            const std::string& what, int64_t* out, int64_t* pad_before);

// x: [N, H, W, C_in], filter: [KH, KW, C_in, C_out]. `name` (the layer) starts every error.
absl::StatusOr<Conv2DGeometry> Conv2DGeometryFor(const Shape& x, const Shape& filter,
                                                 const Conv2DParams& params,
                                                 absl::string_view name = "Conv2D");

// y: [N, OH, OW, C_out] for x and filter as above.
absl::StatusOr<Shape> Conv2DOutputShape(const Shape& x, const Shape& filter,
                                        const Conv2DParams& params,
                                        absl::string_view name = "Conv2D");

// Floats of im2col scratch for `images` images at once.
inline int64_t Conv2DWorkspaceElements(const Conv2DGeometry& g, int64_t images) {
  return images * g.col_rows() * g.col_cols();
}

// Floats of im2col scratch a conv layer should give these kernels: enough images that one
// GEMM has a few thousand rows (so a thread pool has work to split), at most 32 MiB, and
// never fewer than one image. What the kernels use when given no workspace.
int64_t Conv2DPreferredWorkspaceElements(const Conv2DGeometry& g);

// y = conv(x, filter). x: [N, H, W, C_in], filter: [KH, KW, C_in, C_out], y: [N, OH, OW, C_out].
absl::Status Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params, Tensor* y,
                    ThreadPool* pool = nullptr, Tensor* workspace = nullptr);

// y = post_op(conv(x, filter) + bias), bias: [C_out]. The bias and post_op are applied to
// each block of output rows right after the GEMM that wrote it (while it is in cache): the
// GEMM's epilogue, not passes over y.
absl::Status Conv2DBiasActivation(const Tensor& x, const Tensor& filter, const Tensor& bias,
                                  const Conv2DParams& params, ConvPostOp post_op, Tensor* y,
                                  ThreadPool* pool = nullptr, Tensor* workspace = nullptr);

// dx = d(loss)/dx from dy. dy: [N, OH, OW, C_out], filter as above, dx: [N, H, W, C_in]
// (overwritten).
absl::Status Conv2DBackpropInput(const Tensor& dy, const Tensor& filter, const Conv2DParams& params,
                                 Tensor* dx, ThreadPool* pool = nullptr,
                                 Tensor* workspace = nullptr);

// dfilter = d(loss)/dfilter (+ dfilter if accumulate). x: [N, H, W, C_in],
// dy: [N, OH, OW, C_out], dfilter: [KH, KW, C_in, C_out] (its shape gives the kernel size).
absl::Status Conv2DBackpropFilter(const Tensor& x, const Tensor& dy, const Conv2DParams& params,
                                  Tensor* dfilter, bool accumulate = false,
                                  ThreadPool* pool = nullptr, Tensor* workspace = nullptr);

}  // namespace fulcrum::ops
