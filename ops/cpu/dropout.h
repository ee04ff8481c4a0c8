// ops/cpu: inverted dropout. Each element i is kept when u_i >= rate, where u_i in [0, 1) is
// a pure function of (seed, i) (a counter-based stream: the same mask whatever the thread
// count), and kept elements are scaled by 1 / (1 - rate) so the expectation is unchanged.
// Thread-safety: no state; callers must not write a tensor that another thread reads.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

// y = x * mask with mask[i] = (u_i >= rate) / (1 - rate). rate in [0, 1); x, y and mask have
// the same number of elements; y may alias x. mask receives the factors for DropoutGrad.
absl::Status Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y, Tensor* mask,
                     ThreadPool* pool = nullptr);

// dx = dy * mask; dx may alias dy.
absl::Status DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx);

}  // namespace fulcrum::ops
