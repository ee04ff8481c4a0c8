// tests: central finite-difference gradient checking shared by the op and model tests.
#pragma once

#include <cmath>
#include <functional>
#include <string>

#include "base/random.h"
#include "gtest/gtest.h"
#include "ops/tensor.h"

namespace fulcrum::testing {

// Fills a CPU tensor with U(lo, hi) from a seed.
inline void FillUniform(ops::Tensor* t, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Rng rng(seed);
  for (float& v : t->flat()) v = lo + (hi - lo) * static_cast<float>(rng.Uniform());
}

inline ops::Tensor Random(const ops::Shape& shape, uint64_t seed, float lo = -1.0f,
                          float hi = 1.0f) {
  ops::Tensor t = ops::Tensor::Zeros(shape);
  FillUniform(&t, seed, lo, hi);
  return t;
}

// Checks `analytic` against (f(x + eps e_i) - f(x - eps e_i)) / 2 eps for every element i of
// `x` (or every `stride`-th, for big tensors). f must read x each call; it is evaluated with x
// perturbed in place and x is restored afterwards.
inline void ExpectGradientMatches(ops::Tensor* x, const ops::Tensor& analytic,
                                  const std::function<double()>& f, const std::string& what,
                                  double eps = 1e-2, double rel_tol = 1e-2,
                                  double abs_tol = 1e-3, int64_t stride = 1) {
  ASSERT_EQ(x->num_elements(), analytic.num_elements()) << what;
  int failures = 0;
  for (int64_t i = 0; i < x->num_elements(); i += stride) {
    float& xi = x->data()[i];
    const float saved = xi;
    xi = saved + static_cast<float>(eps);
    const double plus = f();
    xi = saved - static_cast<float>(eps);
    const double minus = f();
    xi = saved;
    const double numeric = (plus - minus) / (2.0 * eps);
    const double got = analytic.data()[i];
    const double tol = abs_tol + rel_tol * std::max(std::abs(numeric), std::abs(got));
    if (std::abs(numeric - got) > tol && ++failures <= 5) {
      ADD_FAILURE() << what << ": element " << i << " analytic " << got << " numeric " << numeric;
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " elements differ";
}

// As ExpectGradientMatches, for functions with kinks (ReLU, max pooling): an element whose
// one-sided differences (f(x + eps) - f(x)) / eps and (f(x) - f(x - eps)) / eps disagree by
// more than the tolerance sits within eps of a kink, where the central difference means
// nothing; it is skipped. At most `max_skipped_fraction` of the checked elements may be
// skipped, so a gradient that is wrong everywhere cannot pass as "all kinks".
inline void ExpectGradientMatchesAwayFromKinks(ops::Tensor* x, const ops::Tensor& analytic,
                                               const std::function<double()>& f,
                                               const std::string& what, double eps,
                                               double rel_tol, double abs_tol, int64_t stride,
                                               double max_skipped_fraction = 0.1) {
  ASSERT_EQ(x->num_elements(), analytic.num_elements()) << what;
  const double f0 = f();
  int failures = 0;
  int64_t checked = 0, skipped = 0;
  for (int64_t i = 0; i < x->num_elements(); i += stride) {
    float& xi = x->data()[i];
    const float saved = xi;
    xi = saved + static_cast<float>(eps);
    const double plus = f();
    xi = saved - static_cast<float>(eps);
    const double minus = f();
    xi = saved;
    ++checked;
    const double forward = (plus - f0) / eps;
    const double backward = (f0 - minus) / eps;
    const double side_tol = abs_tol + rel_tol * std::max(std::abs(forward), std::abs(backward));
    if (std::abs(forward - backward) > side_tol) {
      ++skipped;
      continue;
    }
    const double numeric = (plus - minus) / (2.0 * eps);
    const double got = analytic.data()[i];
    const double tol = abs_tol + rel_tol * std::max(std::abs(numeric), std::abs(got));
    if (std::abs(numeric - got) > tol && ++failures <= 5) {
      ADD_FAILURE() << what << ": element " << i << " analytic " << got << " numeric " << numeric;
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " elements differ";
  EXPECT_LE(static_cast<double>(skipped), max_skipped_fraction * static_cast<double>(checked) + 1)
      << what << ": " << skipped << " of " << checked << " elements sit on kinks";
}

// sum_i w_i * y_i in double: the scalar whose gradient wrt y is w.
inline double Dot(const ops::Tensor& w, const ops::Tensor& y) {
  double s = 0.0;
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    s += static_cast<double>(w.data()[i]) * static_cast<double>(y.data()[i]);
  }
  return s;
}

}  // namespace fulcrum::testing
