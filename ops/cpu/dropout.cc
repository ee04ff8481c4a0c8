#include "ops/cpu/dropout.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/random.h"

namespace fulcrum::ops {
namespace {

absl::Status CheckSameSize(const char* op, const Tensor& a, const char* a_name, const Tensor* b,
                           const char* b_name) {
  if (b == nullptr || b->empty() || a.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", a_name, " or ", b_name, " is empty"));
  }
  if (a.device() != Device::kCpu || b->device() != Device::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": the cpu kernel needs cpu tensors"));
  }
  if (a.num_elements() != b->num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", a_name, " has ", a.num_elements(),
                                                   " elements, ", b_name, " ", b->num_elements()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y, Tensor* mask,
                     ThreadPool* pool) {
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("Dropout: rate ", rate, " is not in [0, 1)"));
  }
  if (auto s = CheckSameSize("Dropout", x, "x", y, "y"); !s.ok()) return s;
  if (auto s = CheckSameSize("Dropout", x, "x", mask, "mask"); !s.ok()) return s;
  const float scale = 1.0f / (1.0f - rate);
  // u_i = top 24 bits of a hash of (seed, i) / 2^24: exact in float, uniform on a 2^-24 grid.
  const uint32_t threshold =
      static_cast<uint32_t>(std::ceil(static_cast<double>(rate) * 16777216.0));
  const int64_t n = x.num_elements();
  const float* in = x.data();
  float* out = y->data();
  float* m = mask->data();
  const uint64_t stream = Mix64(seed);
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t u = static_cast<uint32_t>(Mix64(stream ^ static_cast<uint64_t>(i)) >> 40);
      m[i] = u >= threshold ? scale : 0.0f;
      out[i] = in[i] * m[i];
    }
  };
  const int parts =
      pool == nullptr
          ? 1
          : static_cast<int>(std::min<int64_t>(pool->num_threads(), (n + 16383) / 16384));
  if (parts <= 1) {
    run(0, n);
  } else {
    pool->ParallelFor(parts, [&](int p) { run(n * p / parts, n * (p + 1) / parts); });
  }
  return absl::OkStatus();
}

absl::Status DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx) {
  if (auto s = CheckSameSize("DropoutGrad", dy, "dy", dx, "dx"); !s.ok()) return s;
  if (auto s = CheckSameSize("DropoutGrad", dy, "dy", &mask, "mask"); !s.ok()) return s;
  const int64_t n = dy.num_elements();
  const float* g = dy.data();
  const float* m = mask.data();
  float* out = dx->data();
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] * m[i];
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
