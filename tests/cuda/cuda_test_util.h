// tests/cuda: helpers shared by the CUDA backend tests: the GPU skip fixture, seeded random
// tensors, and the closeness check against the CPU kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "base/random.h"
#include "gtest/gtest.h"
#include "ops/cuda/device_memory.h"
#include "ops/tensor.h"

namespace fulcrum::ops::cuda {

// Tests that need a GPU derive from this: without one they are skipped with the reason
// DeviceCount gives; any other CUDA failure fails them.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> count = DeviceCount();
    if (!count.ok() && IsNoDeviceError(count.status())) {
      GTEST_SKIP() << count.status().message();
    }
    ASSERT_TRUE(count.ok()) << count.status();
  }
};

// A CPU tensor of `shape` with elements uniform in [-1, 1), the same for the same seed.
inline Tensor RandomTensor(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::Zeros(shape);
  for (float& v : t.flat()) v = static_cast<float>(2.0 * rng.Uniform() - 1.0);
  return t;
}

// Every element of `got` within rel * max(1, |want|) of `want` (relative, with an absolute
// floor so results that cancel to ~0 are not held to a tighter bound than fp32 gives).
inline void ExpectAllClose(const Tensor& got, const Tensor& want, float rel) {
  ASSERT_EQ(got.shape(), want.shape());
  int reported = 0;
  for (int64_t i = 0; i < want.num_elements() && reported < 5; ++i) {
    const float g = got.flat()[static_cast<size_t>(i)];
    const float w = want.flat()[static_cast<size_t>(i)];
    if (!(std::abs(g - w) <= rel * std::max(1.0f, std::abs(w)))) {
      ADD_FAILURE() << "element " << i << ": got " << g << ", want " << w;
      ++reported;
    }
  }
}

}  // namespace fulcrum::ops::cuda
