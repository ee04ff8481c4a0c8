#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "gtest/gtest.h"
#include "ops/cpu/lrn.h"
#include "ops/cpu/onednn_conv.h"
#include "ops/cpu/pool.h"
#include "ops/cpu/pool_lrn_planner.h"
#include "ops/cpu/thread_pool.h"
#include "tests/testing/gradient_check.h"
#include "tests/testing/padding_reference.h"

namespace fulcrum::ops {
namespace {

using ::fulcrum::testing::Dot;
using ::fulcrum::testing::ExpectGradientMatches;
using ::fulcrum::testing::Random;
using ::fulcrum::testing::RefPaddedSize;

// Direct-loop pooling over the valid elements of each window. x: [N, H, W, C].
Tensor RefPool(const Tensor& x, const Pool2DParams& p, bool max) {
  const int64_t n = x.shape().dim(0), h = x.shape().dim(1), w = x.shape().dim(2);
  const int64_t c = x.shape().dim(3);
  int64_t oh, ow, pt, pl;
  RefPaddedSize(h, p.window_h, p.stride_h, p.padding, &oh, &pt);
  RefPaddedSize(w, p.window_w, p.stride_w, p.padding, &ow, &pl);
  Tensor y = Tensor::Zeros({n, oh, ow, c});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t k = 0; k < c; ++k) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
          int count = 0;
          for (int64_t di = 0; di < p.window_h; ++di)
            for (int64_t dj = 0; dj < p.window_w; ++dj) {
              const int64_t r = i * p.stride_h - pt + di, q = j * p.stride_w - pl + dj;
              if (r < 0 || r >= h || q < 0 || q >= w) continue;
              const double v = x.data()[((b * h + r) * w + q) * c + k];
              acc = max ? std::max(acc, v) : acc + v;
              ++count;
            }
          y.data()[((b * oh + i) * ow + j) * c + k] = static_cast<float>(max ? acc : acc / count);
        }
  return y;
}

// Direct-loop LRN in double. x: [N, H, W, C].
Tensor RefLrn(const Tensor& x, const LrnParams& p) {
  const int64_t c = x.shape().dim(3), pixels = x.num_elements() / c;
  Tensor y = Tensor::Zeros(x.shape());
  for (int64_t px = 0; px < pixels; ++px)
    for (int64_t k = 0; k < c; ++k) {
      double sqr = 0.0;
      for (int64_t q = std::max<int64_t>(k - p.depth_radius, 0);
           q <= std::min(k + p.depth_radius, c - 1); ++q) {
        const double v = x.data()[px * c + q];
        sqr += v * v;
      }
      y.data()[px * c + k] = static_cast<float>(
          x.data()[px * c + k] / std::pow(p.bias + p.alpha * sqr, static_cast<double>(p.beta)));
    }
  return y;
}

void ExpectNear(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    ASSERT_NEAR(got.data()[i], want.data()[i], tol) << what << " element " << i;
  }
}

// Distinct values (a shuffled ramp with step 0.05) so that max pooling's arg-max is stable
// under a finite-difference step of 0.01.
Tensor DistinctRandom(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::Zeros(shape);
  std::vector<int64_t> order(static_cast<size_t>(t.num_elements()));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  for (size_t i = 0; i < order.size(); ++i) {
    t.data()[i] = 0.05f * static_cast<float>(order[i]) - 2.0f;
  }
  return t;
}

// (window, stride, padding, threads) on x: [2, 7, 5, 3].
using PoolCase = std::tuple<int, int, Padding, int>;

class PoolTest : public ::testing::TestWithParam<PoolCase> {
 protected:
  Pool2DParams Params() const {
    const auto [k, s, padding, threads] = GetParam();
    return {k, k, s, s, padding};
  }
  ThreadPool* Pool() {
    if (std::get<3>(GetParam()) > 1 && pool_ == nullptr) {
      pool_ = std::make_unique<ThreadPool>(std::get<3>(GetParam()));
    }
    return pool_.get();
  }
  const Shape x_shape_{2, 7, 5, 3};
  std::unique_ptr<ThreadPool> pool_;
};

TEST_P(PoolTest, MaxPoolMatchesReferenceAndRecordsArgmax) {
  const Pool2DParams p = Params();
  Tensor x = Random(x_shape_, 11);
  absl::StatusOr<Shape> ys = Pool2DOutputShape(x_shape_, p);
  ASSERT_TRUE(ys.ok()) << ys.status();
  Tensor y = Tensor::Zeros(*ys);
  std::vector<int32_t> argmax(static_cast<size_t>(y.num_elements()));
  ASSERT_TRUE(MaxPool(x, p, &y, Pool(), argmax).ok());
  ExpectNear(y, RefPool(x, p, /*max=*/true), 0.0, "max");
  const int64_t image = 7 * 5 * 3, out_image = y.num_elements() / 2;
  for (int64_t o = 0; o < y.num_elements(); ++o) {
    const int64_t b = o / out_image;
    EXPECT_EQ(x.data()[b * image + argmax[static_cast<size_t>(o)]], y.data()[o]) << o;
    EXPECT_EQ(argmax[static_cast<size_t>(o)] % 3, o % 3) << "channel of " << o;
  }
}

TEST_P(PoolTest, AvgPoolMatchesReference) {
  const Pool2DParams p = Params();
  Tensor x = Random(x_shape_, 12);
  Tensor y = Tensor::Zeros(*Pool2DOutputShape(x_shape_, p));
  ASSERT_TRUE(AvgPool(x, p, &y, Pool()).ok());
  ExpectNear(y, RefPool(x, p, /*max=*/false), 1e-6, "avg");
}

TEST_P(PoolTest, MaxPoolGradMatchesFiniteDifferences) {
  const Pool2DParams p = Params();
  Tensor x = DistinctRandom(x_shape_, 13);
  const Shape ys = *Pool2DOutputShape(x_shape_, p);
  Tensor r = Random(ys, 14);
  Tensor y = Tensor::Zeros(ys);
  std::vector<int32_t> argmax(static_cast<size_t>(y.num_elements()));
  ASSERT_TRUE(MaxPool(x, p, &y, Pool(), argmax).ok());
  Tensor dx = Tensor::Zeros(x_shape_);
  ASSERT_TRUE(MaxPoolGrad(x, r, p, &dx, Pool()).ok());
  Tensor dx_argmax = Tensor::Filled(x_shape_, 7.0f);  // overwritten
  ASSERT_TRUE(MaxPoolGradWithArgmax(r, argmax, p, &dx_argmax, Pool()).ok());
  ExpectNear(dx_argmax, dx, 0.0, "argmax vs recomputed");
  ExpectGradientMatches(
      &x, dx,
      [&] {
        Tensor yy = Tensor::Zeros(ys);
        EXPECT_TRUE(MaxPool(x, p, &yy).ok());
        return Dot(r, yy);
      },
      "MaxPoolGrad");
}

TEST_P(PoolTest, AvgPoolGradMatchesFiniteDifferences) {
  const Pool2DParams p = Params();
  Tensor x = Random(x_shape_, 15);
  const Shape ys = *Pool2DOutputShape(x_shape_, p);
  Tensor r = Random(ys, 16);
  Tensor dx = Tensor::Filled(x_shape_, 3.0f);  // overwritten
  ASSERT_TRUE(AvgPoolGrad(r, p, &dx, Pool()).ok());
  ExpectGradientMatches(
      &x, dx,
      [&] {
        Tensor yy = Tensor::Zeros(ys);
        EXPECT_TRUE(AvgPool(x, p, &yy).ok());
        return Dot(r, yy);
      },
      "AvgPoolGrad");
}

INSTANTIATE_TEST_SUITE_P(Shapes, PoolTest,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(2),
                                            ::testing::Values(Padding::kSame, Padding::kValid),
                                            ::testing::Values(1, 2)),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           return absl::StrCat(
                               "k", std::get<0>(info.param), "s", std::get<1>(info.param),
                               PaddingName(std::get<2>(info.param)), "t", std::get<3>(info.param));
                         });

// 1x3x3x1 holding 1..9, 3x3 window, stride 2, SAME: pad 1 before and 1 after on each axis, so
// every window covers 2x2 valid elements and the average divides by 4, not 9.
TEST(PoolHandTest, SameWindowsCountOnlyValidElements) {
  Tensor x = Tensor::Zeros({1, 3, 3, 1});
  for (int i = 0; i < 9; ++i) x.data()[i] = static_cast<float>(i + 1);
  const Pool2DParams p{3, 3, 2, 2, Padding::kSame};
  Tensor y = Tensor::Zeros({1, 2, 2, 1});
  ASSERT_TRUE(AvgPool(x, p, &y).ok());
  EXPECT_EQ(std::vector<float>(y.flat().begin(), y.flat().end()), (std::vector<float>{3, 4, 6, 7}));
  ASSERT_TRUE(MaxPool(x, p, &y).ok());
  EXPECT_EQ(std::vector<float>(y.flat().begin(), y.flat().end()), (std::vector<float>{5, 6, 8, 9}));
}

TEST(PoolHandTest, MaxTiesGoToTheFirstElement) {
  Tensor x = Tensor::Filled({1, 2, 2, 1}, 1.0f);
  const Pool2DParams p{2, 2, 2, 2, Padding::kValid};
  Tensor y = Tensor::Zeros({1, 1, 1, 1});
  std::vector<int32_t> argmax(1, -1);
  ASSERT_TRUE(MaxPool(x, p, &y, nullptr, argmax).ok());
  EXPECT_EQ(argmax[0], 0);
  Tensor dy = Tensor::Filled({1, 1, 1, 1}, 1.0f);
  Tensor dx = Tensor::Zeros({1, 2, 2, 1});
  ASSERT_TRUE(MaxPoolGrad(x, dy, p, &dx).ok());
  EXPECT_EQ(std::vector<float>(dx.flat().begin(), dx.flat().end()),
            (std::vector<float>{1, 0, 0, 0}));
}

TEST(PoolShapeTest, OutputSizesFollowTensorFlow) {
  // CIFAR-10 tutorial: 24x24 -> pool 3x3 stride 2 SAME -> 12x12.
  EXPECT_EQ(*Pool2DOutputShape({8, 24, 24, 64}, {3, 3, 2, 2, Padding::kSame}),
            Shape({8, 12, 12, 64}));
  EXPECT_EQ(*Pool2DOutputShape({1, 7, 5, 3}, {3, 3, 2, 2, Padding::kValid}), Shape({1, 3, 2, 3}));
  EXPECT_EQ(*Pool2DOutputShape({1, 7, 5, 3}, {2, 2, 2, 2, Padding::kSame}), Shape({1, 4, 3, 3}));
}

void ExpectInvalid(const absl::Status& s, const std::string& fragment) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find(fragment), std::string::npos) << s;
}

TEST(PoolShapeTest, BadShapesAreInvalidArgument) {
  ExpectInvalid(Pool2DOutputShape({1, 2, 5, 3}, {3, 3, 1, 1, Padding::kValid}).status(),
                "window height: kernel 3 is larger than the input 2");
  ExpectInvalid(Pool2DOutputShape({1, 7, 5, 3}, {2, 2, 0, 2, Padding::kSame}).status(),
                "window height: stride is 0");
  ExpectInvalid(Pool2DOutputShape({1, 7, 5, 3}, {2, 2, 2, 0, Padding::kValid}).status(),
                "window width: stride is 0");
  ExpectInvalid(Pool2DOutputShape({7, 5, 3}, {}).status(), "must be rank 4");
  ExpectInvalid(Pool2DOutputShape({1, 0, 5, 3}, {}).status(), "input");
  Tensor x = Tensor::Zeros({1, 4, 4, 2});
  Tensor y = Tensor::Zeros({1, 3, 2, 2});
  ExpectInvalid(MaxPool(x, {}, &y), "MaxPool: y has shape [1, 3, 2, 2], expected [1, 2, 2, 2]");
  ExpectInvalid(AvgPool(x, {}, nullptr), "AvgPool: y is null");
  Tensor dy = Tensor::Zeros({1, 2, 2, 2});
  Tensor dx = Tensor::Zeros({1, 4, 4, 3});
  ExpectInvalid(MaxPoolGrad(x, dy, {}, &dx), "MaxPoolGrad: dx has shape");
  ExpectInvalid(AvgPoolGrad(dy, {}, &dx), "AvgPoolGrad: dy has shape");
  std::vector<int32_t> bad(8, 1000);
  Tensor dx_ok = Tensor::Zeros({1, 4, 4, 2});
  ExpectInvalid(MaxPoolGradWithArgmax(dy, bad, {}, &dx_ok), "argmax offset 1000 is outside");
  ExpectInvalid(MaxPoolGradWithArgmax(dy, std::vector<int32_t>(3, 0), {}, &dx_ok),
                "argmax has 3 entries");
}

// (params, input scale, threads).
struct LrnCase {
  const char* name;
  LrnParams params;
  float scale;
  int threads;
};

void PrintTo(const LrnCase& c, std::ostream* os) { *os << c.name; }

class LrnTest : public ::testing::TestWithParam<LrnCase> {};

TEST_P(LrnTest, ForwardMatchesReference) {
  const LrnCase& c = GetParam();
  ThreadPool pool(c.threads);
  Tensor x = Random({2, 7, 5, 11}, 21, -c.scale, c.scale);
  Tensor y = Tensor::Zeros(x.shape());
  ASSERT_TRUE(Lrn(x, c.params, &y, &pool).ok());
  Tensor want = RefLrn(x, c.params);
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    ASSERT_NEAR(y.data()[i], want.data()[i], 1e-5 * (1.0 + std::abs(want.data()[i]))) << i;
  }
}

TEST_P(LrnTest, GradMatchesFiniteDifferences) {
  const LrnCase& c = GetParam();
  ThreadPool pool(c.threads);
  Tensor x = Random({2, 3, 2, 11}, 22, -c.scale, c.scale);
  Tensor r = Random(x.shape(), 23);
  Tensor dx = Tensor::Filled(x.shape(), 5.0f);  // overwritten
  ASSERT_TRUE(LrnGrad(x, r, c.params, &dx, &pool).ok());
  ExpectGradientMatches(
      &x, dx,
      [&] {
        Tensor yy = Tensor::Zeros(x.shape());
        EXPECT_TRUE(Lrn(x, c.params, &yy).ok());
        return Dot(r, yy);
      },
      absl::StrCat("LRNGrad ", c.name), /*eps=*/1e-2 * c.scale);
}

INSTANTIATE_TEST_SUITE_P(
    Params, LrnTest,
    ::testing::Values(LrnCase{"TfDefaults", {}, 1.0f, 1}, LrnCase{"TfDefaultsThreads", {}, 1.0f, 2},
                      // The CIFAR-10 tutorial's parameters; large inputs so alpha matters.
                      LrnCase{"Cifar10", {4, 1.0f, 0.001f / 9.0f, 0.75f}, 10.0f, 1},
                      LrnCase{"Cifar10Threads", {4, 1.0f, 0.001f / 9.0f, 0.75f}, 10.0f, 2}),
    [](const ::testing::TestParamInfo<LrnCase>& info) { return std::string(info.param.name); });

// One channel, radius 0: y = x / (bias + alpha x^2)^beta, by hand: 2 / (1 + 4)^0.5.
TEST(LrnHandTest, SingleChannel) {
  Tensor x = Tensor::Filled({1, 1, 1, 1}, 2.0f);
  Tensor y = Tensor::Zeros(x.shape());
  ASSERT_TRUE(Lrn(x, {0, 1.0f, 1.0f, 0.5f}, &y).ok());
  EXPECT_NEAR(y.data()[0], 2.0 / std::sqrt(5.0), 1e-6);
}

TEST(LrnShapeTest, BadArgumentsAreInvalidArgument) {
  Tensor x = Tensor::Zeros({1, 2, 2, 3});
  Tensor y = Tensor::Zeros({1, 2, 2, 4});
  ExpectInvalid(Lrn(x, {}, &y), "LRN: y has shape [1, 2, 2, 4], expected [1, 2, 2, 3]");
  Tensor flat = Tensor::Zeros({4, 3});
  ExpectInvalid(Lrn(flat, {}, &flat), "LRN: x [4, 3] must be rank 4");
  Tensor y_ok = Tensor::Zeros(x.shape());
  ExpectInvalid(Lrn(x, {-1, 1.0f, 1.0f, 0.5f}, &y_ok), "depth_radius is -1");
  ExpectInvalid(Lrn(x, {5, 0.0f, 1.0f, 0.5f}, &y_ok), "bias 0");
  ExpectInvalid(LrnGrad(x, y, {}, &y_ok), "LRNGrad: dy has shape");
}

// The oneDNN path of the planner against the project's kernels (already checked against
// direct loops and finite differences above), forward and backward.
void ExpectClose(const Tensor& got, const Tensor& want, float tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int failures = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    if (std::abs(got.data()[i] - want.data()[i]) > tol && ++failures <= 5) {
      ADD_FAILURE() << what << " element " << i << ": " << got.data()[i] << " vs "
                    << want.data()[i];
    }
  }
}

TEST(PoolLrnPlannerTest, OneDnnPoolingMatchesTheOwnKernels) {
  if (!OneDnnBuilt()) GTEST_SKIP() << "built without oneDNN (-DFULCRUM_ONEDNN=OFF)";
  ThreadPool threads(2);
  PoolLrnPlanner own(ConvAlgo::kIm2col, &threads), dnn(ConvAlgo::kOneDnn, &threads);
  for (const auto& [w, stride, padding] : {std::tuple{3, 2, Padding::kSame},
                                           {2, 2, Padding::kValid},
                                           {3, 1, Padding::kSame},
                                           {3, 2, Padding::kValid}}) {
    Pool2DParams p;
    p.window_h = p.window_w = w;
    p.stride_h = p.stride_w = stride;
    p.padding = padding;
    const Tensor x = Random(Shape({3, 9, 8, 5}), 7);
    const Shape out = Pool2DOutputShape(x.shape(), p).value();
    const Tensor dy = Random(out, 8);
    const std::string what =
        absl::StrCat("window ", w, " stride ", stride, " ", PaddingName(padding));
    Tensor y1 = Tensor::Zeros(out), y2 = Tensor::Zeros(out);
    Tensor dx1 = Tensor::Zeros(x.shape()), dx2 = Tensor::Zeros(x.shape());
    ASSERT_TRUE(own.MaxPool(x, p, &y1).ok());
    ASSERT_TRUE(dnn.MaxPool(x, p, &y2).ok());
    ExpectClose(y2, y1, 0, "max " + what);
    ASSERT_TRUE(own.MaxPoolGrad(x, dy, p, &dx1).ok());
    ASSERT_TRUE(dnn.MaxPoolGrad(x, dy, p, &dx2).ok());
    ExpectClose(dx2, dx1, 1e-6f, "max grad " + what);
    ASSERT_TRUE(own.AvgPool(x, p, &y1).ok());
    ASSERT_TRUE(dnn.AvgPool(x, p, &y2).ok());
    ExpectClose(y2, y1, 1e-5f, "avg " + what);
    ASSERT_TRUE(own.AvgPoolGrad(dy, p, &dx1).ok());
    ASSERT_TRUE(dnn.AvgPoolGrad(dy, p, &dx2).ok());
    ExpectClose(dx2, dx1, 1e-5f, "avg grad " + what);
  }
  const std::vector<KernelChoice> choices = dnn.choices();
  ASSERT_EQ(choices.size(), 8u);
  EXPECT_EQ(choices[0].op, "max_pool");
  EXPECT_EQ(choices[0].forward.algo, "onednn");
  EXPECT_EQ(choices[0].backward_data.algo, "onednn");
  EXPECT_FALSE(choices[0].forward.impl.empty());
}

TEST(PoolLrnPlannerTest, OneDnnLrnMatchesTheOwnKernels) {
  if (!OneDnnBuilt()) GTEST_SKIP() << "built without oneDNN (-DFULCRUM_ONEDNN=OFF)";
  ThreadPool threads(2);
  PoolLrnPlanner own(ConvAlgo::kIm2col, &threads), dnn(ConvAlgo::kOneDnn, &threads);
  for (const LrnParams& p :
       {LrnParams{4, 1.0f, 0.001f / 9, 0.75f, "norm1"}, LrnParams{2, 2.0f, 0.5f, 0.5f, "norm2"}}) {
    for (int64_t c : {5, 64}) {
      const Tensor x = Random(Shape({2, 5, 6, c}), 3, -2.0f, 2.0f);
      const Tensor dy = Random(x.shape(), 4);
      const std::string what = absl::StrCat(p.layer, " C=", c);
      Tensor y1 = Tensor::Zeros(x.shape()), y2 = Tensor::Zeros(x.shape());
      Tensor dx1 = Tensor::Zeros(x.shape()), dx2 = Tensor::Zeros(x.shape());
      ASSERT_TRUE(own.Lrn(x, p, &y1).ok());
      ASSERT_TRUE(dnn.Lrn(x, p, &y2).ok());
      ExpectClose(y2, y1, 2e-5f, "lrn " + what);
      ASSERT_TRUE(own.LrnGrad(x, dy, p, &dx1).ok());
      ASSERT_TRUE(dnn.LrnGrad(x, dy, p, &dx2).ok());
      ExpectClose(dx2, dx1, 1e-4f, "lrn grad " + what);
    }
  }
  const std::vector<KernelChoice> choices = dnn.choices();
  ASSERT_FALSE(choices.empty());
  EXPECT_EQ(choices[0].op, "lrn");
  EXPECT_EQ(choices[0].layers, "norm1");
  EXPECT_EQ(choices[0].forward.algo, "onednn");
}

// A shape oneDNN cannot take (its LRN backward fails for a one-channel window) runs on the
// project's kernel with the reason recorded, never a crash.
TEST(PoolLrnPlannerTest, WhatOneDnnCannotTakeFallsBackToTheOwnKernel) {
  PoolLrnPlanner dnn(ConvAlgo::kOneDnn, nullptr);
  const LrnParams p{0, 1.0f, 1.0f, 1.0f, "norm0"};
  const Tensor x = Random(Shape({2, 5, 3, 11}), 3, -2.0f, 2.0f), dy = Random(x.shape(), 4);
  Tensor y1 = Tensor::Zeros(x.shape()), y2 = Tensor::Zeros(x.shape());
  Tensor dx1 = Tensor::Zeros(x.shape()), dx2 = Tensor::Zeros(x.shape());
  ASSERT_TRUE(Lrn(x, p, &y1).ok());
  ASSERT_TRUE(LrnGrad(x, dy, p, &dx1).ok());
  ASSERT_TRUE(dnn.Lrn(x, p, &y2).ok());
  ASSERT_TRUE(dnn.LrnGrad(x, dy, p, &dx2).ok());
  ExpectClose(y2, y1, 0, "lrn r0");
  ExpectClose(dx2, dx1, 0, "lrn r0 gradient");
  const KernelChoice c = dnn.choices().at(0);
  EXPECT_EQ(c.forward.algo, "fulcrum");
  EXPECT_EQ(c.backward_data.algo, "fulcrum");
  EXPECT_FALSE(c.fallback.empty());
}

TEST(PoolLrnPlannerTest, AutoTimesBothSidesOnce) {
  if (!OneDnnBuilt()) GTEST_SKIP() << "built without oneDNN (-DFULCRUM_ONEDNN=OFF)";
  PoolLrnPlanner planner(ConvAlgo::kAuto, nullptr);
  const Tensor x = Random(Shape({4, 12, 12, 16}), 5);
  Pool2DParams p;
  p.window_h = p.window_w = 3;
  p.padding = Padding::kSame;
  p.layer = "pool1";
  Tensor y = Tensor::Zeros(Pool2DOutputShape(x.shape(), p).value());
  ASSERT_TRUE(planner.MaxPool(x, p, &y).ok());
  const KernelChoice c = planner.choices().at(0);
  EXPECT_EQ(c.layers, "pool1");
  EXPECT_GT(c.forward.own_ms, 0);
  EXPECT_GT(c.forward.onednn_ms, 0);
  EXPECT_EQ(c.forward.algo, c.forward.onednn_ms < c.forward.own_ms ? "onednn" : "fulcrum");
}

}  // namespace
}  // namespace fulcrum::ops
