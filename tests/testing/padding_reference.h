// tests: TensorFlow's SAME/VALID output-size rule written out independently of ops/cpu, so
// the conv and pooling references do not share the kernels' code.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/cpu/conv.h"

namespace fulcrum::testing {

// Output size and padding before along one axis of input `in`, kernel `k`, stride `s`.
inline void RefPaddedSize(int64_t in, int64_t k, int64_t s, ops::Padding p, int64_t* out,
                          int64_t* before) {
  if (p == ops::Padding::kValid) {
    *out = (in - k + s) / s;  // ceil((in - k + 1) / s)
    *before = 0;
    return;
  }
  *out = (in + s - 1) / s;
  *before = std::max<int64_t>((*out - 1) * s + k - in, 0) / 2;
}

}  // namespace fulcrum::testing
