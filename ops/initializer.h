// ops: variable initializers. A model declares each variable with one of these; the value is
// a pure function of (initializer, shape, seed), so every process that initialises the same
// variable with the same seed gets the same bits (the PS relies on this for reproducible runs).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

struct Initializer {
  enum class Kind {
    kZeros,
    kConstant,       // every element = value
    kGlorotUniform,  // U(-l, l), l = sqrt(6 / (fan_in + fan_out)) — TensorFlow's Dense default
    kUniform,        // U(-value, value)
    kNormal,         // N(0, value^2), truncated at 2 standard deviations like TF's truncated_normal
  };
  Kind kind = Kind::kZeros;
  float value = 0.0f;

  static Initializer Zeros() { return {Kind::kZeros, 0.0f}; }
  static Initializer Constant(float v) { return {Kind::kConstant, v}; }
  static Initializer GlorotUniform() { return {Kind::kGlorotUniform, 0.0f}; }
  static Initializer Uniform(float limit) { return {Kind::kUniform, limit}; }
  static Initializer TruncatedNormal(float stddev) { return {Kind::kNormal, stddev}; }

  std::string ToString() const;
};

// Fills `out` (a CPU tensor) deterministically from `seed`. Fan-in/fan-out for Glorot are the
// first dimension and the product of the rest (a [in, out] weight matrix), or for a rank > 2
// filter [KH, KW, C_in, C_out] TensorFlow's KH*KW*C_in and KH*KW*C_out.
absl::Status Initialize(const Initializer& init, uint64_t seed, Tensor* out);

}  // namespace fulcrum::ops
