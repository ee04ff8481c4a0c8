#include "ops/cpu/spatial_transformer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/random.h"
#include "gtest/gtest.h"
#include "tests/testing/gradient_check.h"

namespace fulcrum::ops {
namespace {

using ::fulcrum::testing::Dot;
using ::fulcrum::testing::ExpectGradientMatches;
using ::fulcrum::testing::Random;

Tensor Theta(const std::vector<std::vector<float>>& per_image) {
  Tensor t = Tensor::Zeros({static_cast<int64_t>(per_image.size()), 2, 3});
  for (size_t b = 0; b < per_image.size(); ++b) {
    std::copy(per_image[b].begin(), per_image[b].end(), t.data() + 6 * b);
  }
  return t;
}

const std::vector<float> kIdentity = {1, 0, 0, 0, 1, 0};

// input [N, H, W, C] sampled through theta onto an out_h x out_w grid.
Tensor Transform(const Tensor& input, const Tensor& theta, int64_t out_h, int64_t out_w,
                 ThreadPool* pool = nullptr) {
  const int64_t n = input.shape().dim(0), c = input.shape().dim(3);
  Tensor grid = Tensor::Zeros({n, out_h, out_w, 2});
  Tensor out = Tensor::Zeros({n, out_h, out_w, c});
  EXPECT_TRUE(AffineGrid(theta, &grid, pool).ok());
  EXPECT_TRUE(BilinearSample(input, grid, &out, pool).ok());
  return out;
}

void ExpectValues(const Tensor& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.data()[i], want[i], tol) << "element " << i;
  }
}

// One image [1, 3, 3, 1] holding 10 * row + column.
Tensor RowColumnImage() {
  Tensor x = Tensor::Zeros({1, 3, 3, 1});
  for (int64_t h = 0; h < 3; ++h) {
    for (int64_t w = 0; w < 3; ++w) x.data()[h * 3 + w] = static_cast<float>(10 * h + w);
  }
  return x;
}

TEST(SpatialTransformerTest, IdentityReproducesInputExactly) {
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    for (auto [h, w, c] : {std::tuple{5, 7, 3}, std::tuple{28, 28, 1}, std::tuple{1, 6, 2},
                           std::tuple{227, 131, 1}}) {
      Tensor x = Random({2, h, w, c}, 11);
      Tensor y = Transform(x, Theta({kIdentity, kIdentity}), h, w, p);
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        ASSERT_EQ(y.data()[i], x.data()[i]) << h << "x" << w << "x" << c << " element " << i;
      }
    }
  }
}

TEST(SpatialTransformerTest, AffineGridMatchesHandValues) {
  // x_t = {-1, 0, 1}, y_t = {-1, 1}; grid = (x + 2y + 3, 4x + 5y + 6).
  Tensor grid = Tensor::Zeros({1, 2, 3, 2});
  ASSERT_TRUE(AffineGrid(Theta({{1, 2, 3, 4, 5, 6}}), &grid).ok());
  ExpectValues(grid, {0, -3, 1, 1, 2, 5, 4, 7, 5, 11, 6, 15}, 0.0f);
}

TEST(SpatialTransformerTest, TranslationMatchesHandValues) {
  // +0.5 in normalised x is +0.5 pixel on a 3-pixel axis; the last column reads half of the
  // zero padding.
  Tensor y = Transform(RowColumnImage(), Theta({{1, 0, 0.5f, 0, 1, 0}}), 3, 3);
  ExpectValues(y, {0.5f, 1.5f, 1.0f, 10.5f, 11.5f, 6.0f, 20.5f, 21.5f, 11.0f}, 1e-5f);
  // -1 in normalised y is one pixel up: the first row reads zeros.
  y = Transform(RowColumnImage(), Theta({{1, 0, 0, 0, 1, -1}}), 3, 3);
  ExpectValues(y, {0, 0, 0, 0, 1, 2, 10, 11, 12}, 1e-5f);
  // Entirely outside the image: zeros.
  y = Transform(RowColumnImage(), Theta({{1, 0, 5, 0, 1, 0}}), 3, 3);
  ExpectValues(y, std::vector<float>(9, 0.0f), 0.0f);
}

TEST(SpatialTransformerTest, ScaleMatchesHandValues) {
  // Zoom in by 2 about the centre: samples at pixels {0.5, 1, 1.5} on each axis.
  Tensor y = Transform(RowColumnImage(), Theta({{0.5f, 0, 0, 0, 0.5f, 0}}), 3, 3);
  ExpectValues(y, {5.5f, 6, 6.5f, 10.5f, 11, 11.5f, 15.5f, 16, 16.5f}, 1e-5f);
  // A 2x2 output of the identity reads the four corners.
  y = Transform(RowColumnImage(), Theta({kIdentity}), 2, 2);
  ExpectValues(y, {0, 2, 20, 22}, 0.0f);
}

// Random source points on an H x W image, each at least `margin` pixels from a pixel row or
// column (the interpolation's kinks), some in the half-padded border cells.
Tensor GridAwayFromKinks(int64_t n, int64_t out_h, int64_t out_w, int64_t h, int64_t w,
                         uint64_t seed, float margin) {
  Tensor grid = Random({n, out_h, out_w, 2}, seed, 0.0f, 1.0f);
  Tensor cells = Random({n, out_h, out_w, 2}, seed + 1, 0.0f, 1.0f);
  for (int64_t i = 0; i < grid.num_elements(); ++i) {
    const int64_t size = i % 2 == 0 ? w : h;
    // Cell k covers pixels [k, k + 1), k in [-1, size - 1]: the first and last are half padding.
    const auto k = std::min<int64_t>(size - 1, static_cast<int64_t>(cells.data()[i] *
                                                                    static_cast<float>(size + 1)) -
                                                   1);
    const float f = margin + (1 - 2 * margin) * grid.data()[i];
    const float pixel = static_cast<float>(k) + f;
    grid.data()[i] = 2.0f * pixel / static_cast<float>(size - 1) - 1.0f;
  }
  return grid;
}

// The smallest distance, in pixels, from any point of `grid` to a pixel row or column.
float DistanceToKinks(const Tensor& grid, int64_t h, int64_t w) {
  float d = 1.0f;
  for (int64_t i = 0; i < grid.num_elements(); ++i) {
    const int64_t size = i % 2 == 0 ? w : h;
    const float pixel = (grid.data()[i] + 1.0f) * static_cast<float>(size - 1) / 2.0f;
    d = std::min(d, std::abs(pixel - std::round(pixel)));
  }
  return d;
}

class SpatialTransformerGradTest : public ::testing::TestWithParam<int> {
 protected:
  ThreadPool* pool() { return GetParam() > 1 ? &pool_ : nullptr; }
  ThreadPool pool_{2};
  // Odd shapes: N=2, 5x7x3 images, 4x6 outputs.
  static constexpr int64_t kN = 2, kH = 5, kW = 7, kC = 3, kOutH = 4, kOutW = 6;
};

INSTANTIATE_TEST_SUITE_P(Threads, SpatialTransformerGradTest, ::testing::Values(1, 2));

TEST_P(SpatialTransformerGradTest, InputAndGridGradientsMatchFiniteDifferences) {
  Tensor x = Random({kN, kH, kW, kC}, 1);
  Tensor grid = GridAwayFromKinks(kN, kOutH, kOutW, kH, kW, 2, 0.1f);
  ASSERT_GT(DistanceToKinks(grid, kH, kW), 0.09f);
  const Tensor w = Random({kN, kOutH, kOutW, kC}, 3);  // loss = sum w * y
  Tensor y = Tensor::Zeros({kN, kOutH, kOutW, kC});
  auto loss = [&] {
    EXPECT_TRUE(BilinearSample(x, grid, &y, pool()).ok());
    return Dot(w, y);
  };
  Tensor dx = Tensor::Filled(x.shape(), 7.0f);  // overwritten, not accumulated
  Tensor dgrid = Tensor::Filled(grid.shape(), 7.0f);
  ASSERT_TRUE(BilinearSampleGrad(x, grid, w, &dx, &dgrid, pool()).ok());
  ExpectGradientMatches(&x, dx, loss, "dinput", 1e-2, 1e-3, 1e-4);
  // 1e-3 in normalised units moves a point at most 3e-3 pixels: it never crosses a kink.
  ExpectGradientMatches(&grid, dgrid, loss, "dgrid", 1e-3, 5e-3, 1e-3);
  // Either gradient alone is the same.
  Tensor dgrid_only = Tensor::Zeros(grid.shape());
  ASSERT_TRUE(BilinearSampleGrad(x, grid, w, nullptr, &dgrid_only, pool()).ok());
  for (int64_t i = 0; i < dgrid.num_elements(); ++i) {
    ASSERT_EQ(dgrid_only.data()[i], dgrid.data()[i]);
  }
}

TEST_P(SpatialTransformerGradTest, ThetaGradientMatchesFiniteDifferences) {
  Tensor x = Random({kN, kH, kW, kC}, 4);
  // Zoomed (one image in, one out), sheared, rotated a little and shifted; the shift is
  // chosen, deterministically, so that every sample point lands inside a cell clear of its
  // edges (more than 0.015 pixels from any kink, checked), including cells past the image.
  Tensor theta = Theta({{0.83f, 0.07f, 0.05f, -0.06f, 0.77f, 0.04f},
                        {1.13f, -0.11f, -0.09f, 0.12f, 1.21f, 0.08f}});
  Tensor grid = Tensor::Zeros({kN, kOutH, kOutW, 2});
  float best = 0.0f;
  for (int k = 0; k < 400 && best <= 0.015f; ++k) {
    Tensor candidate = theta.Clone();
    Rng rng(static_cast<uint64_t>(k));
    for (int n = 0; n < kN; ++n) {
      candidate.data()[n * 6 + 2] += static_cast<float>(0.2 * (rng.Uniform() - 0.5));
      candidate.data()[n * 6 + 5] += static_cast<float>(0.2 * (rng.Uniform() - 0.5));
    }
    ASSERT_TRUE(AffineGrid(candidate, &grid, pool()).ok());
    const float d = DistanceToKinks(grid, kH, kW);
    if (d > best) {
      best = d;
      theta = candidate;
    }
  }
  ASSERT_TRUE(AffineGrid(theta, &grid, pool()).ok());
  ASSERT_GT(DistanceToKinks(grid, kH, kW), 0.015f);
  const Tensor w = Random({kN, kOutH, kOutW, kC}, 5);
  Tensor y = Tensor::Zeros({kN, kOutH, kOutW, kC});
  auto loss = [&] {
    EXPECT_TRUE(AffineGrid(theta, &grid, pool()).ok());
    EXPECT_TRUE(BilinearSample(x, grid, &y, pool()).ok());
    return Dot(w, y);
  };
  ASSERT_TRUE(AffineGrid(theta, &grid, pool()).ok());
  Tensor dgrid = Tensor::Zeros(grid.shape());
  Tensor dtheta = Tensor::Filled(theta.shape(), 7.0f);
  ASSERT_TRUE(BilinearSampleGrad(x, grid, w, nullptr, &dgrid, pool()).ok());
  ASSERT_TRUE(AffineGridGrad(dgrid, &dtheta, pool()).ok());
  // 1e-3 on theta moves a point at most 3e-3 * (W - 1) / 2 = 9e-3 pixels.
  ExpectGradientMatches(&theta, dtheta, loss, "dtheta", 1e-3, 5e-3, 1e-3);
}

TEST_P(SpatialTransformerGradTest, AffineGridGradientMatchesFiniteDifferences) {
  Tensor theta = Random({kN, 2, 3}, 6);
  const Tensor w = Random({kN, kOutH, kOutW, 2}, 7);
  Tensor grid = Tensor::Zeros({kN, kOutH, kOutW, 2});
  auto loss = [&] {
    EXPECT_TRUE(AffineGrid(theta, &grid, pool()).ok());
    return Dot(w, grid);
  };
  Tensor dtheta = Tensor::Zeros(theta.shape());
  ASSERT_TRUE(AffineGridGrad(w, &dtheta, pool()).ok());
  ExpectGradientMatches(&theta, dtheta, loss, "dtheta", 1e-2, 1e-3, 1e-4);
}

TEST(SpatialTransformerTest, ThreadsGiveTheSameResult) {
  ThreadPool pool(2);
  Tensor x = Random({5, 6, 9, 2}, 8);
  Tensor theta = Random({5, 2, 3}, 9);
  Tensor serial = Transform(x, theta, 4, 5), parallel = Transform(x, theta, 4, 5, &pool);
  for (int64_t i = 0; i < serial.num_elements(); ++i) {
    ASSERT_EQ(serial.data()[i], parallel.data()[i]);
  }
}

void ExpectInvalid(const absl::Status& s, const std::string& operand) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(operand), std::string::npos) << s;
}

TEST(SpatialTransformerTest, BadShapesNameTheOperand) {
  Tensor x = Tensor::Zeros({2, 5, 7, 3});
  Tensor theta = Tensor::Zeros({2, 2, 3});
  Tensor grid = Tensor::Zeros({2, 4, 6, 2});
  Tensor out = Tensor::Zeros({2, 4, 6, 3});
  Tensor bad_theta = Tensor::Zeros({2, 3, 2});
  ExpectInvalid(AffineGrid(bad_theta, &grid), "AffineGrid: theta");
  Tensor bad_grid = Tensor::Zeros({2, 4, 6, 3});
  ExpectInvalid(AffineGrid(theta, &bad_grid), "AffineGrid: grid");
  Tensor other_batch = Tensor::Zeros({3, 4, 6, 2});
  ExpectInvalid(AffineGrid(theta, &other_batch), "AffineGrid: grid");
  ExpectInvalid(AffineGrid(theta, nullptr), "AffineGrid: grid");
  Tensor bad_dtheta = Tensor::Zeros({3, 2, 3});
  ExpectInvalid(AffineGridGrad(grid, &bad_dtheta), "AffineGridGrad: dtheta");
  ExpectInvalid(BilinearSample(Tensor::Zeros({2, 5, 7}), grid, &out), "BilinearSample: input");
  ExpectInvalid(BilinearSample(x, bad_grid, &out), "BilinearSample: grid");
  ExpectInvalid(BilinearSample(x, other_batch, &out), "BilinearSample: grid");
  Tensor bad_out = Tensor::Zeros({2, 4, 6, 2});
  ExpectInvalid(BilinearSample(x, grid, &bad_out), "BilinearSample: output");
  ExpectInvalid(BilinearSampleGrad(x, grid, bad_out, nullptr, nullptr), "BilinearSampleGrad: dout");
  Tensor bad_dx = Tensor::Zeros({2, 5, 7, 2});
  ExpectInvalid(BilinearSampleGrad(x, grid, out, &bad_dx, nullptr), "BilinearSampleGrad: dinput");
  ExpectInvalid(BilinearSampleGrad(x, grid, out, nullptr, &bad_grid), "BilinearSampleGrad: dgrid");
}

}  // namespace
}  // namespace fulcrum::ops
