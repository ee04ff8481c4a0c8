#include "ops/cpu/kernels.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/gradient_check.h"

namespace fulcrum::ops {
namespace {

using ::fulcrum::testing::Dot;
using ::fulcrum::testing::ExpectGradientMatches;
using ::fulcrum::testing::Random;

// Reference product with explicit loops and double accumulation.
Tensor NaiveMatMul(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const int64_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols();
  const int64_t n = tb ? b.rows() : b.cols();
  Tensor out = Tensor::Zeros({m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? a.data()[p * a.cols() + i] : a.data()[i * a.cols() + p];
        const float bv = tb ? b.data()[j * b.cols() + p] : b.data()[p * b.cols() + j];
        s += static_cast<double>(av) * bv;
      }
      out.data()[i * n + j] = static_cast<float>(s);
    }
  }
  return out;
}

struct MatMulCase {
  int64_t m, k, n;
};

class MatMulTest : public ::testing::TestWithParam<MatMulCase> {};

// Odd sizes on purpose: none is a multiple of the 16-float AVX-512 vector width.
INSTANTIATE_TEST_SUITE_P(Shapes, MatMulTest,
                         ::testing::Values(MatMulCase{1, 1, 1}, MatMulCase{7, 13, 5},
                                           MatMulCase{33, 65, 17}, MatMulCase{128, 784, 10},
                                           MatMulCase{3, 257, 129}));

TEST_P(MatMulTest, AllTransposesMatchNaive) {
  const auto [m, k, n] = GetParam();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = Random(ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = Random(tb ? Shape{n, k} : Shape{k, n}, 2);
      Tensor out = Tensor::Filled({m, n}, 0.5f);
      ASSERT_TRUE(MatMul(a, ta, b, tb, &out).ok());
      Tensor want = NaiveMatMul(a, ta, b, tb);
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        ASSERT_NEAR(out.data()[i], want.data()[i], 1e-4 * (1 + std::abs(want.data()[i])))
            << "ta=" << ta << " tb=" << tb << " i=" << i;
      }
      // accumulate adds onto what is there.
      ASSERT_TRUE(MatMul(a, ta, b, tb, &out, /*accumulate=*/true).ok());
      for (int64_t i = 0; i < out.num_elements(); ++i) {
        ASSERT_NEAR(out.data()[i], 2 * want.data()[i], 2e-4 * (1 + std::abs(want.data()[i])));
      }
    }
  }
}

TEST_P(MatMulTest, GradientsMatchFiniteDifferences) {
  const auto [m, k, n] = GetParam();
  Tensor a = Random({m, k}, 3), b = Random({k, n}, 4), w = Random({m, n}, 5);
  Tensor y = Tensor::Zeros({m, n});
  auto loss = [&] {
    EXPECT_TRUE(MatMul(a, false, b, false, &y).ok());
    return Dot(w, y);
  };
  // L = sum(w * (a b)): dL/da = w b^T, dL/db = a^T w — the two products Dense's backward uses.
  Tensor da = Tensor::Zeros({m, k}), db = Tensor::Zeros({k, n});
  ASSERT_TRUE(MatMul(w, false, b, true, &da).ok());
  ASSERT_TRUE(MatMul(a, true, w, false, &db).ok());
  // Big operands: check an evenly spread sample of about 500 elements of each.
  ExpectGradientMatches(&a, da, loss, "matmul d/da", 1e-2, 1e-2, 1e-3,
                        std::max<int64_t>(1, a.num_elements() / 500));
  ExpectGradientMatches(&b, db, loss, "matmul d/db", 1e-2, 1e-2, 1e-3,
                        std::max<int64_t>(1, b.num_elements() / 500));
}

TEST(KernelsTest, MatMulRejectsMismatchedShapes) {
  Tensor a = Tensor::Zeros({2, 3}), b = Tensor::Zeros({4, 5}), out = Tensor::Zeros({2, 5});
  absl::Status s = MatMul(a, false, b, false, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[2, 3]"), std::string::npos) << s;
  float dummy = 0;
  Tensor gpu = Tensor::View(&dummy, {1, 1}, Device::kCuda);
  EXPECT_FALSE(MatMul(gpu, false, gpu, false, &gpu).ok());
}

TEST(KernelsTest, BiasAddAndGradient) {
  for (int64_t cols : {1, 5, 17, 33}) {
    Tensor x = Random({9, cols}, 6), bias = Random({cols}, 7), w = Random({9, cols}, 8);
    Tensor x0 = x.Clone();
    ASSERT_TRUE(BiasAdd(bias, &x).ok());
    for (int64_t r = 0; r < 9; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        EXPECT_FLOAT_EQ(x.data()[r * cols + c], x0.data()[r * cols + c] + bias.data()[c]);
      }
    }
    Tensor y = Tensor::Zeros({9, cols});
    auto loss = [&] {
      y = x0.Clone();
      EXPECT_TRUE(BiasAdd(bias, &y).ok());
      return Dot(w, y);
    };
    Tensor dbias = Tensor::Zeros({cols});
    ASSERT_TRUE(BiasAddGrad(w, &dbias).ok());
    ExpectGradientMatches(&bias, dbias, loss, "bias_add d/dbias");
    // The gradient wrt x of a bias add is dy itself.
    ExpectGradientMatches(&x0, w, loss, "bias_add d/dx");
  }
  Tensor x = Tensor::Zeros({2, 3}), bad = Tensor::Zeros({4});
  EXPECT_FALSE(BiasAdd(bad, &x).ok());
}

using Activation = absl::Status (*)(const Tensor&, Tensor*);
using ActivationGrad = absl::Status (*)(const Tensor&, const Tensor&, Tensor*, ThreadPool*);

struct ActivationCase {
  const char* name;
  Activation forward;
  ActivationGrad backward;
  double (*reference)(double);
};

class ActivationTest : public ::testing::TestWithParam<ActivationCase> {};

INSTANTIATE_TEST_SUITE_P(
    All, ActivationTest,
    ::testing::Values(
        ActivationCase{"relu", &Relu, &ReluGrad, [](double x) { return x > 0 ? x : 0.0; }},
        ActivationCase{"sigmoid", &Sigmoid, &SigmoidGrad,
                       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
        ActivationCase{"tanh", &Tanh, &TanhGrad, [](double x) { return std::tanh(x); }}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_P(ActivationTest, ForwardMatchesReferenceOnOddSizes) {
  const auto& c = GetParam();
  for (int64_t n : {1, 7, 15, 16, 17, 33, 1001}) {
    Tensor x = Random({n}, 9, -6.0f, 6.0f), y = Tensor::Zeros({n});
    ASSERT_TRUE(c.forward(x, &y).ok());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y.data()[i], c.reference(x.data()[i]), 2e-6) << c.name << " n=" << n;
    }
    // In place gives the same values.
    ASSERT_TRUE(c.forward(x, &x).ok());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(x.data()[i], y.data()[i]);
  }
}

TEST_P(ActivationTest, GradientMatchesFiniteDifferences) {
  const auto& c = GetParam();
  for (int64_t n : {1, 17, 37}) {
    Tensor x = Random({3, n}, 10, -3.0f, 3.0f);
    // Keep relu's kink away from the finite-difference step.
    for (float& v : x.flat()) {
      if (std::abs(v) < 0.05f) v = 0.1f;
    }
    Tensor w = Random({3, n}, 11), y = Tensor::Zeros({3, n});
    auto loss = [&] {
      EXPECT_TRUE(c.forward(x, &y).ok());
      return Dot(w, y);
    };
    loss();
    Tensor dx = Tensor::Zeros({3, n});
    ASSERT_TRUE(c.backward(y, w, &dx, nullptr).ok());
    ExpectGradientMatches(&x, dx, loss, c.name, 1e-2, 1e-2, 1e-3);
  }
}

// A tensor large enough to be split over the pool gets the same gradient, in place too.
TEST_P(ActivationTest, GradientOnAPoolEqualsTheSerialOne) {
  const auto& c = GetParam();
  const int64_t n = 3 * (int64_t{1} << 15) + 5;
  Tensor y = Random({n}, 12, -3.0f, 3.0f), dy = Random({n}, 13);
  ASSERT_TRUE(c.forward(y, &y).ok());
  Tensor serial = Tensor::Zeros({n}), pooled = dy.Clone();
  ASSERT_TRUE(c.backward(y, dy, &serial, nullptr).ok());
  ThreadPool pool(3);
  ASSERT_TRUE(c.backward(y, pooled, &pooled, &pool).ok());
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(pooled.data()[i], serial.data()[i]) << c.name << " " << i;
}

TEST(KernelsTest, SigmoidAndTanhSaturateWithoutNaN) {
  Tensor x = Tensor::Zeros({4});
  x.data()[0] = 1e4f, x.data()[1] = -1e4f, x.data()[2] = 90.0f, x.data()[3] = -90.0f;
  Tensor y = Tensor::Zeros({4});
  ASSERT_TRUE(Sigmoid(x, &y).ok());
  EXPECT_FLOAT_EQ(y.data()[0], 1.0f);
  EXPECT_NEAR(y.data()[1], 0.0f, 1e-30);
  ASSERT_TRUE(Tanh(x, &y).ok());
  EXPECT_FLOAT_EQ(y.data()[0], 1.0f);
  EXPECT_FLOAT_EQ(y.data()[1], -1.0f);
}

TEST(KernelsTest, SoftmaxCrossEntropyValueAndGradient) {
  for (int64_t classes : {2, 10, 17}) {
    const int64_t batch = 5;
    Tensor logits = Random({batch, classes}, 12, -4.0f, 4.0f);
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < batch; ++i) labels.push_back(static_cast<int32_t>((i * 7) % classes));
    // Reference in double.
    double want = 0;
    for (int64_t r = 0; r < batch; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(logits.data()[r * classes + c]);
      want += std::log(sum) - logits.data()[r * classes + labels[r]];
    }
    want /= batch;
    Tensor dlogits = Tensor::Zeros({batch, classes});
    auto loss = SoftmaxCrossEntropy(logits, labels, &dlogits);
    ASSERT_TRUE(loss.ok());
    EXPECT_NEAR(*loss, want, 1e-5);
    auto f = [&] { return static_cast<double>(*SoftmaxCrossEntropy(logits, labels, nullptr)); };
    ExpectGradientMatches(&logits, dlogits, f, "softmax_cross_entropy", 1e-2, 1e-2, 1e-4);
  }
}

TEST(KernelsTest, SoftmaxCrossEntropyIsStableForHugeLogits) {
  Tensor logits = Tensor::Zeros({2, 3});
  const float big[] = {1e4f, -1e4f, 5e3f, -3e4f, -3e4f + 2.0f, -3e4f + 1.0f};
  std::copy(std::begin(big), std::end(big), logits.data());
  std::vector<int32_t> labels = {2, 1};
  Tensor d = Tensor::Zeros({2, 3});
  auto loss = SoftmaxCrossEntropy(logits, labels, &d);
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(std::isfinite(*loss));
  // Row 0: the loss is 1e4 - 5e3; row 1: log(1 + e^2 + e^1) - 2 ~ 0.4076.
  const double row1 = std::log(1 + std::exp(2.0) + std::exp(1.0)) - 2.0;
  EXPECT_NEAR(*loss, (5e3 + row1) / 2, 1e-2);
  for (float v : d.flat()) EXPECT_TRUE(std::isfinite(v));
}

TEST(KernelsTest, SoftmaxCrossEntropyRejectsBadLabels) {
  Tensor logits = Tensor::Zeros({2, 3});
  std::vector<int32_t> labels = {0, 3};
  auto s = SoftmaxCrossEntropy(logits, labels, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("label 3"), std::string::npos);
  std::vector<int32_t> short_labels = {0};
  EXPECT_FALSE(SoftmaxCrossEntropy(logits, short_labels, nullptr).ok());
}

TEST(KernelsTest, MeanSquaredErrorValueAndGradient) {
  for (int64_t cols : {1, 15, 31}) {
    Tensor pred = Random({4, cols}, 13), target = Random({4, cols}, 14);
    double want = 0;
    for (int64_t i = 0; i < pred.num_elements(); ++i) {
      const double d = pred.data()[i] - target.data()[i];
      want += d * d;
    }
    want /= static_cast<double>(pred.num_elements());
    Tensor dpred = Tensor::Zeros({4, cols});
    auto loss = MeanSquaredError(pred, target, &dpred);
    ASSERT_TRUE(loss.ok());
    EXPECT_NEAR(*loss, want, 1e-6);
    auto f = [&] { return static_cast<double>(*MeanSquaredError(pred, target, nullptr)); };
    ExpectGradientMatches(&pred, dpred, f, "mse", 1e-2, 1e-2, 1e-4);
  }
  Tensor a = Tensor::Zeros({2, 2}), b = Tensor::Zeros({3});
  EXPECT_FALSE(MeanSquaredError(a, b, nullptr).ok());
}

TEST(KernelsTest, CountCorrectUsesArgMaxFirstOnTies) {
  Tensor logits = Tensor::Zeros({3, 4});
  logits.data()[0 * 4 + 2] = 5;  // row 0 -> 2
  logits.data()[1 * 4 + 1] = 1;  // row 1 -> 1
  // row 2: all zeros, a tie -> 0
  std::vector<int32_t> labels = {2, 3, 0};
  auto correct = CountCorrect(logits, labels);
  ASSERT_TRUE(correct.ok());
  EXPECT_EQ(*correct, 2);
  std::vector<int32_t> arg(3);
  ASSERT_TRUE(ArgMaxRows(logits, arg).ok());
  EXPECT_EQ(arg, (std::vector<int32_t>{2, 1, 0}));
  EXPECT_DOUBLE_EQ(SumSquares(logits), 26.0);
}

// Products big enough to be split over a pool, in both split directions and every transpose:
// the parts must add up to exactly what the naive product gives.
TEST(KernelsTest, PooledMatMulMatchesNaive) {
  ThreadPool pool(2);
  const MatMulCase cases[] = {{300, 300, 301}, {1023, 784, 10}, {10, 784, 1023}, {3, 9000, 200}};
  for (const auto& [m, k, n] : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Tensor a = Random(ta ? Shape{k, m} : Shape{m, k}, 15);
        Tensor b = Random(tb ? Shape{n, k} : Shape{k, n}, 16);
        Tensor c = Tensor::Filled({m, n}, 1.0f);
        ASSERT_TRUE(MatMul(a, ta, b, tb, &c, /*accumulate=*/true, &pool).ok());
        Tensor want = NaiveMatMul(a, ta, b, tb);
        for (int64_t i = 0; i < c.num_elements(); i += 7) {
          ASSERT_NEAR(c.data()[i], want.data()[i] + 1.0f, 2e-3 * (1 + std::abs(want.data()[i])))
              << m << "x" << k << "x" << n << " ta=" << ta << " tb=" << tb << " i=" << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fulcrum::ops
