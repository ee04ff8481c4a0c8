// ops/cpu: one 2-D convolution shape through oneDNN (Debian's libdnnl, the library TensorFlow
// and PyTorch run on CPU): forward with the bias and the activation fused as post-ops,
// backward-data, and backward-filter with the bias gradient in the same pass. Activations stay
// NHWC (no reorder of an image tensor); the filter keeps TensorFlow's [KH, KW, C_in, C_out]
// layout outside and is reordered into the blocked layout oneDNN's fastest kernels read, each
// call (the values change every step), counted and timed (reorders(), reorder_seconds()).
// Every buffer (blocked filters, scratchpad) is allocated by Create; a call allocates nothing.
// Built without oneDNN (FULCRUM_HAVE_ONEDNN unset), Create returns Unimplemented.
// Thread-safety: one thread at a time per object. oneDNN runs on the calling thread's OpenMP
// team, whose size the caller sets (ops/cpu/thread_pool.h: ThreadPool::BindCaller).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/cpu/conv.h"

namespace fulcrum::ops {

// Whether this build has oneDNN.
bool OneDnnBuilt();

class OneDnnConv {
 public:
  // Primitives for the geometry g: Unimplemented (naming the shape and the direction) when
  // oneDNN has no implementation for it or was not built in.
  static absl::StatusOr<std::unique_ptr<OneDnnConv>> Create(const Conv2DGeometry& g,
                                                            ConvPostOp post_op);
  ~OneDnnConv();
  OneDnnConv(const OneDnnConv&) = delete;
  OneDnnConv& operator=(const OneDnnConv&) = delete;

  // y = post_op(conv(x, filter) + bias). x: N*H*W*C_in floats (NHWC), filter: TF's layout,
  // bias: C_out floats, y: N*OH*OW*C_out floats.
  absl::Status Forward(const float* x, const float* filter, const float* bias, float* y);
  // dx = conv^T(dy, filter), overwritten.
  absl::Status BackwardData(const float* dy, const float* filter, float* dx);
  // dfilter (TF's layout) and dbias (C_out) from x and dy, both overwritten.
  absl::Status BackwardFilter(const float* x, const float* dy, float* dfilter, float* dbias);

  // oneDNN's name for the implementation each direction runs ("brgconv:avx512_core").
  const std::string& forward_impl() const;
  const std::string& backward_data_impl() const;
  const std::string& backward_filter_impl() const;
  // Filter reorders run so far and their total time.
  int64_t reorders() const;
  double reorder_seconds() const;

 private:
  struct Impl;
  explicit OneDnnConv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum::ops
