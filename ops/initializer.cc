#include "ops/initializer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/random.h"

namespace fulcrum::ops {

std::string Initializer::ToString() const {
  switch (kind) {
    case Kind::kZeros:
      return "zeros";
    case Kind::kConstant:
      return absl::StrCat("constant(", value, ")");
    case Kind::kGlorotUniform:
      return "glorot_uniform";
    case Kind::kUniform:
      return absl::StrCat("uniform(", value, ")");
    case Kind::kNormal:
      return absl::StrCat("truncated_normal(", value, ")");
  }
  return "unknown";
}

absl::Status Initialize(const Initializer& init, uint64_t seed, Tensor* out) {
  if (out == nullptr || out->empty() || out->device() != Device::kCpu) {
    return absl::InvalidArgumentError("Initialize: output must be a non-empty cpu tensor");
  }
  auto values = out->flat();
  Rng rng(seed);
  switch (init.kind) {
    case Initializer::Kind::kZeros:
      std::fill(values.begin(), values.end(), 0.0f);
      break;
    case Initializer::Kind::kConstant:
      std::fill(values.begin(), values.end(), init.value);
      break;
    case Initializer::Kind::kGlorotUniform:
    case Initializer::Kind::kUniform: {
      double limit = init.value;
      if (init.kind == Initializer::Kind::kGlorotUniform) {
        double fan_in = static_cast<double>(out->rows());
        double fan_out = static_cast<double>(out->shape().rank() <= 1 ? 1 : out->cols());
        const Shape& shape = out->shape();
        if (shape.rank() > 2) {
          // A conv filter [KH, KW, ..., C_in, C_out]: TensorFlow's fans count the receptive field.
          double receptive = 1.0;
          for (int i = 0; i < shape.rank() - 2; ++i) receptive *= static_cast<double>(shape.dim(i));
          fan_in = receptive * static_cast<double>(shape.dim(shape.rank() - 2));
          fan_out = receptive * static_cast<double>(shape.dim(shape.rank() - 1));
        }
        limit = std::sqrt(6.0 / (fan_in + fan_out));
      }
      for (float& v : values) v = static_cast<float>((2.0 * rng.Uniform() - 1.0) * limit);
      break;
    }
    case Initializer::Kind::kNormal:
      for (float& v : values) {
        double z = rng.Normal();
        while (std::abs(z) > 2.0) z = rng.Normal();
        v = static_cast<float>(z * init.value);
      }
      break;
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
