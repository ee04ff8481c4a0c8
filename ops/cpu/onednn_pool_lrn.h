// ops/cpu: one pooling or LRN shape through oneDNN, NHWC in and out, with TensorFlow's
// semantics (pool.h, lrn.h): max pooling never takes a padded element, average pooling
// divides by the valid elements only, LRN's alpha is TensorFlow's (oneDNN divides its alpha
// by the window size, so it gets alpha * (2 * depth_radius + 1)). oneDNN's backward passes
// read a workspace its forward-training pass writes; the backward here runs that forward
// itself into buffers of its own (the Backend's gradients take x, not a workspace), so it
// costs one more forward pass, which the measured choice (kernel_choice.h) includes; average
// pooling needs no workspace and skips it.
// Every buffer is allocated by Create; a call allocates nothing.
// Built without oneDNN, Create returns Unimplemented.
// Thread-safety: one thread at a time per object; oneDNN runs on the caller's OpenMP team.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cpu/lrn.h"
#include "ops/cpu/pool.h"

namespace fulcrum::ops {

class OneDnnPool {
 public:
  static absl::StatusOr<std::unique_ptr<OneDnnPool>> Create(const Pool2DGeometry& g, bool max);
  ~OneDnnPool();
  OneDnnPool(const OneDnnPool&) = delete;
  OneDnnPool& operator=(const OneDnnPool&) = delete;

  absl::Status Forward(const float* x, float* y);
  // dx (overwritten) from x and dy.
  absl::Status Backward(const float* x, const float* dy, float* dx);
  const std::string& forward_impl() const;
  const std::string& backward_impl() const;

  struct Impl;

 private:
  explicit OneDnnPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class OneDnnLrn {
 public:
  // x: [N, H, W, C].
  static absl::StatusOr<std::unique_ptr<OneDnnLrn>> Create(const Shape& x, const LrnParams& params);
  ~OneDnnLrn();
  OneDnnLrn(const OneDnnLrn&) = delete;
  OneDnnLrn& operator=(const OneDnnLrn&) = delete;

  absl::Status Forward(const float* x, float* y);
  absl::Status Backward(const float* x, const float* dy, float* dx);
  const std::string& forward_impl() const;
  const std::string& backward_impl() const;

  struct Impl;

 private:
  explicit OneDnnLrn(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum::ops
