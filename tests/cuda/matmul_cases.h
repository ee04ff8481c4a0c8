// tests/cuda: the MatMul conformance cases shared by the plan test (CPU only) and the cuBLAS
// test (GPU): odd shapes times the four transpose combinations.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ops/tensor.h"

namespace fulcrum::ops::cuda {

// out [m, n] = op(a) [m, k] * op(b) [k, n].
struct MatMulDims {
  int64_t m;
  int64_t k;
  int64_t n;
};

// Readable parameters in test output and ctest names ("7x13x5", not bytes).
inline void PrintTo(const MatMulDims& d, std::ostream* os) {
  *os << d.m << "x" << d.k << "x" << d.n;
}

inline constexpr MatMulDims kMatMulDims[] = {{1, 1, 1},      {7, 13, 5}, {33, 65, 17},
                                             {128, 784, 10}, {3, 1, 4},  {1, 9, 1}};

// (dims, trans_a, trans_b)
using MatMulCase = std::tuple<MatMulDims, bool, bool>;

inline auto AllMatMulCases() {
  return ::testing::Combine(::testing::ValuesIn(kMatMulDims), ::testing::Bool(), ::testing::Bool());
}

inline std::string MatMulCaseName(const ::testing::TestParamInfo<MatMulCase>& info) {
  const auto& [d, trans_a, trans_b] = info.param;
  return absl::StrCat(d.m, "x", d.k, "x", d.n, trans_a ? "_At" : "_A", trans_b ? "_Bt" : "_B");
}

// The stored shapes of a and b for a case (transposed operands are stored transposed).
inline Shape ShapeOfA(const MatMulDims& d, bool trans_a) {
  return trans_a ? Shape{d.k, d.m} : Shape{d.m, d.k};
}
inline Shape ShapeOfB(const MatMulDims& d, bool trans_b) {
  return trans_b ? Shape{d.n, d.k} : Shape{d.k, d.n};
}

}  // namespace fulcrum::ops::cuda
