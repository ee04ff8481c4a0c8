#include "ops/cpu/lrn.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops/cpu/nhwc_check.h"

namespace fulcrum::ops {
namespace {

// Runs fn(i) for i in [0, n), on the pool when there is one.
template <typename Fn>
void ForEachImage(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->ParallelFor(static_cast<int>(n), [&](int i) { fn(i); });
}

// Windowed sums over channels: out[c] = sum of v[c'] for |c' - c| <= r. prefix: [C + 1].
void WindowSums(const double* v, int64_t c, int64_t r, double* prefix, double* out) {
  prefix[0] = 0.0;
  for (int64_t k = 0; k < c; ++k) prefix[k + 1] = prefix[k] + v[k];
  for (int64_t k = 0; k < c; ++k) {
    out[k] = prefix[std::min(k + r + 1, c)] - prefix[std::max<int64_t>(k - r, 0)];
  }
}

// Per-thread scratch for one pixel's channels.
struct Scratch {
  explicit Scratch(int64_t c)
      : v(static_cast<size_t>(c)),
        prefix(static_cast<size_t>(c + 1)),
        sums(static_cast<size_t>(c)) {}
  std::vector<double> v, prefix, sums;
};

// norm[k] = bias + alpha * sqr_sum[k] for one pixel x: [C]; left in s.sums.
void Norms(const float* x, int64_t c, const LrnParams& p, Scratch* s) {
  for (int64_t k = 0; k < c; ++k) s->v[k] = static_cast<double>(x[k]) * x[k];
  WindowSums(s->v.data(), c, p.depth_radius, s->prefix.data(), s->sums.data());
  for (int64_t k = 0; k < c; ++k) s->sums[k] = p.bias + p.alpha * s->sums[k];
}

// s^-beta. The exponents the models use get sqrt-based forms (several times faster than
// std::pow, equal to it within a few ulps): 0.75 (the CIFAR-10 tutorial, AlexNet) and 0.5
// (TensorFlow's default).
double PowNegBeta(double s, double beta) {
  if (beta == 0.75) {
    const double r = std::sqrt(s);
    return 1.0 / (r * std::sqrt(r));
  }
  if (beta == 0.5) return 1.0 / std::sqrt(s);
  if (beta == 1.0) return 1.0 / s;
  return std::pow(s, -beta);
}

}  // namespace

absl::Status ValidateLrnParams(const LrnParams& params, const char* name) {
  if (params.depth_radius < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": depth_radius is ", params.depth_radius, ", must be >= 0"));
  }
  if (!(params.bias > 0.0f) || !(params.alpha >= 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": bias ", params.bias, " and alpha ",
                                                   params.alpha,
                                                   " must be > 0 and >= 0 (positive norm)"));
  }
  return absl::OkStatus();
}

absl::Status Lrn(const Tensor& x, const LrnParams& params, Tensor* y, ThreadPool* pool) {
  if (auto s = ValidateLrnParams(params, "LRN"); !s.ok()) return s;
  if (auto s = CheckNhwcTensor(&x, nullptr, "LRN", "x"); !s.ok()) return s;
  if (auto s = CheckNhwcTensor(y, &x.shape(), "LRN", "y"); !s.ok()) return s;
  const int64_t c = x.shape().dim(3);
  const int64_t pixels_per_image = x.shape().dim(1) * x.shape().dim(2);
  const float* xd = x.data();
  float* yd = y->data();
  ForEachImage(pool, x.shape().dim(0), [&](int64_t b) {
    Scratch s(c);
    for (int64_t p = b * pixels_per_image; p < (b + 1) * pixels_per_image; ++p) {
      const float* xp = xd + p * c;
      float* yp = yd + p * c;
      Norms(xp, c, params, &s);
      for (int64_t k = 0; k < c; ++k) {
        yp[k] = static_cast<float>(xp[k] * PowNegBeta(s.sums[k], params.beta));
      }
    }
  });
  return absl::OkStatus();
}

absl::Status LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params, Tensor* dx,
                     ThreadPool* pool) {
  if (auto s = ValidateLrnParams(params, "LRNGrad"); !s.ok()) return s;
  if (auto s = CheckNhwcTensor(&x, nullptr, "LRNGrad", "x"); !s.ok()) return s;
  if (auto s = CheckNhwcTensor(&dy, &x.shape(), "LRNGrad", "dy"); !s.ok()) return s;
  if (auto s = CheckNhwcTensor(dx, &x.shape(), "LRNGrad", "dx"); !s.ok()) return s;
  const int64_t c = x.shape().dim(3);
  const int64_t pixels_per_image = x.shape().dim(1) * x.shape().dim(2);
  const double beta = params.beta;
  const double coeff = 2.0 * params.alpha * beta;
  const float* xd = x.data();
  const float* dyd = dy.data();
  float* dxd = dx->data();
  ForEachImage(pool, x.shape().dim(0), [&](int64_t b) {
    Scratch s(c);
    std::vector<double> pow_neg_beta(static_cast<size_t>(c)), t(static_cast<size_t>(c));
    std::vector<double> t_sums(static_cast<size_t>(c));
    for (int64_t p = b * pixels_per_image; p < (b + 1) * pixels_per_image; ++p) {
      const float* xp = xd + p * c;
      const float* dyp = dyd + p * c;
      float* dxp = dxd + p * c;
      Norms(xp, c, params, &s);
      for (int64_t k = 0; k < c; ++k) {
        pow_neg_beta[k] = PowNegBeta(s.sums[k], beta);
        t[k] = static_cast<double>(dyp[k]) * xp[k] * pow_neg_beta[k] / s.sums[k];
      }
      WindowSums(t.data(), c, params.depth_radius, s.prefix.data(), t_sums.data());
      for (int64_t k = 0; k < c; ++k) {
        dxp[k] = static_cast<float>(dyp[k] * pow_neg_beta[k] - coeff * xp[k] * t_sums[k]);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
