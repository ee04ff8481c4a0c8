// ops/cpu: the two ops of a spatial transformer (Jaderberg et al. 2015), forward and backward:
// AffineGrid turns 2x3 affine matrices into sampling grids, BilinearSample reads NHWC images at
// those points. Coordinates are normalised to [-1, 1] with align_corners semantics (the
// classic STN's x_t = linspace(-1, 1, W_out)): -1 and +1 are the centres of the first and last
// pixels, so source pixel x_pix = (x + 1) * (W - 1) / 2 (0 for a one-pixel axis). Sampling
// outside the image reads zeros (PyTorch's padding_mode="zeros"). A coordinate within float
// rounding of a pixel centre ((W - 1) * 2^-24 pixels) is read at that centre, so the identity
// transform reproduces its input exactly rather than to an ulp.
// Work is split by image over the ThreadPool when one is given. Outputs are preallocated by
// the caller and overwritten. Shape errors are InvalidArgument naming the op and the operand.
// Thread-safety: no state; callers must not write a tensor that another thread reads.
#pragma once

#include "absl/status/status.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

// grid[n, i, j] = theta[n] * (x_t(j), y_t(i), 1), stored as (x, y): the source point of output
// pixel (i, j), with x_t(j) = -1 + 2 j / (W_out - 1) and y_t(i) likewise (0 for a size of 1).
// theta: [N, 2, 3]; grid: [N, H_out, W_out, 2] (its shape sets the output size).
absl::Status AffineGrid(const Tensor& theta, Tensor* grid, ThreadPool* pool = nullptr);

// dtheta = d(loss)/d(theta) from dgrid = d(loss)/d(grid).
// dgrid: [N, H_out, W_out, 2]; dtheta: [N, 2, 3].
absl::Status AffineGridGrad(const Tensor& dgrid, Tensor* dtheta, ThreadPool* pool = nullptr);

// output[n, i, j, c] = bilinear interpolation of input[n, :, :, c] at grid[n, i, j], with
// zeros outside the image. input: [N, H, W, C]; grid: [N, H_out, W_out, 2];
// output: [N, H_out, W_out, C].
absl::Status BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output,
                            ThreadPool* pool = nullptr);

// From dout = d(loss)/d(output) writes d(loss)/d(input) into dinput and d(loss)/d(grid) into
// dgrid; either may be null (not computed). At a pixel boundary, where the interpolation has a
// kink, the gradient is that of the cell the point was read from (the floor of x_pix).
// input: [N, H, W, C]; grid: [N, H_out, W_out, 2]; dout: [N, H_out, W_out, C];
// dinput: as input; dgrid: as grid.
absl::Status BilinearSampleGrad(const Tensor& input, const Tensor& grid, const Tensor& dout,
                                Tensor* dinput, Tensor* dgrid, ThreadPool* pool = nullptr);

}  // namespace fulcrum::ops
