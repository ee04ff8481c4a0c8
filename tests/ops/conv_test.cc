#include "ops/cpu/conv.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ops/cpu/conv_planner.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/onednn_conv.h"
#include "ops/cpu/thread_pool.h"
#include "tests/testing/gradient_check.h"
#include "tests/testing/padding_reference.h"

namespace fulcrum::ops {
namespace {

using ::fulcrum::testing::Dot;
using ::fulcrum::testing::ExpectGradientMatches;
using ::fulcrum::testing::Random;
using ::fulcrum::testing::RefPaddedSize;

// Direct-loop convolution, double accumulation. x: [N, H, W, C], f: [KH, KW, C, O].
Tensor RefConv(const Tensor& x, const Tensor& f, const Conv2DParams& p) {
  const int64_t n = x.shape().dim(0), h = x.shape().dim(1), w = x.shape().dim(2);
  const int64_t c = x.shape().dim(3), kh = f.shape().dim(0), kw = f.shape().dim(1);
  const int64_t o = f.shape().dim(3);
  int64_t oh, ow, pt, pl;
  RefPaddedSize(h, kh, p.stride_h, p.padding, &oh, &pt);
  RefPaddedSize(w, kw, p.stride_w, p.padding, &ow, &pl);
  Tensor y = Tensor::Zeros({n, oh, ow, o});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t q = 0; q < o; ++q) {
          double s = 0;
          for (int64_t u = 0; u < kh; ++u)
            for (int64_t v = 0; v < kw; ++v) {
              const int64_t ih = i * p.stride_h - pt + u, iw = j * p.stride_w - pl + v;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (int64_t ci = 0; ci < c; ++ci) {
                s += static_cast<double>(x.data()[((b * h + ih) * w + iw) * c + ci]) *
                     f.data()[((u * kw + v) * c + ci) * o + q];
              }
            }
          y.data()[((b * oh + i) * ow + j) * o + q] = static_cast<float>(s);
        }
  return y;
}

void ExpectNear(const Tensor& got, const Tensor& want, float tol) {
  ASSERT_EQ(got.shape(), want.shape());
  int failures = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    if (std::abs(got.data()[i] - want.data()[i]) > tol && ++failures <= 5) {
      ADD_FAILURE() << "element " << i << ": " << got.data()[i] << " vs " << want.data()[i];
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(ConvOutputSizeTest, MatchesTensorFlowSame) {
  struct Case {
    int64_t in, k, s, out, before;
  };
  // in 6, k 3, s 2: pad_total 1 goes after (TF), so pad_before is 0.
  for (const Case& c : {Case{7, 3, 2, 4, 1}, Case{6, 3, 2, 3, 0}, Case{5, 5, 2, 3, 2},
                        Case{7, 1, 2, 4, 0}, Case{3, 5, 1, 3, 2}, Case{4, 2, 1, 4, 0}}) {
    int64_t out = 0, before = -1;
    ASSERT_TRUE(ConvOutputSize(c.in, c.k, c.s, Padding::kSame, "h", &out, &before).ok());
    EXPECT_EQ(out, c.out) << c.in << " " << c.k << " " << c.s;
    EXPECT_EQ(before, c.before) << c.in << " " << c.k << " " << c.s;
  }
  int64_t out = 0, before = -1;
  ASSERT_TRUE(ConvOutputSize(7, 3, 2, Padding::kValid, "h", &out, &before).ok());
  EXPECT_EQ(out, 3);
  EXPECT_EQ(before, 0);
}

// (kernel, stride, padding, threads)
using ConvCase = std::tuple<int, int, Padding, int>;

class Conv2DTest : public ::testing::TestWithParam<ConvCase> {
 protected:
  Conv2DParams params() const {
    Conv2DParams p;
    p.stride_h = p.stride_w = std::get<1>(GetParam());
    p.padding = std::get<2>(GetParam());
    return p;
  }
  int64_t kernel() const { return std::get<0>(GetParam()); }
  ThreadPool* pool() { return std::get<3>(GetParam()) > 1 ? &pool_ : nullptr; }

  ThreadPool pool_{2};
};

TEST_P(Conv2DTest, ForwardMatchesDirectLoops) {
  const Tensor x = Random({2, 7, 5, 3}, 1);
  const Tensor f = Random({kernel(), kernel(), 3, 4}, 2);
  auto shape = Conv2DOutputShape(x.shape(), f.shape(), params());
  ASSERT_TRUE(shape.ok()) << shape.status();
  Tensor y = Tensor::Filled(*shape, 42.0f);
  ASSERT_TRUE(Conv2D(x, f, params(), &y, pool()).ok());
  ExpectNear(y, RefConv(x, f, params()), 1e-5f);
}

// dx and dfilter against central differences of loss = sum(y * r) for a fixed random r.
void CheckGradients(const Shape& x_shape, const Shape& f_shape, const Conv2DParams& p,
                    ThreadPool* pool) {
  Tensor x = Random(x_shape, 3);
  Tensor f = Random(f_shape, 4);
  auto shape = Conv2DOutputShape(x.shape(), f.shape(), p);
  ASSERT_TRUE(shape.ok()) << shape.status();
  const Tensor r = Random(*shape, 5);  // dy = r
  Tensor dx = Tensor::Filled(x.shape(), 42.0f);
  Tensor df = Tensor::Filled(f.shape(), 42.0f);
  ASSERT_TRUE(Conv2DBackpropInput(r, f, p, &dx, pool).ok());
  ASSERT_TRUE(Conv2DBackpropFilter(x, r, p, &df, false, pool).ok());
  Tensor y = Tensor::Zeros(*shape);
  auto loss = [&] {
    EXPECT_TRUE(Conv2D(x, f, p, &y, pool).ok());
    return Dot(r, y);
  };
  // The loss is linear in x and in f, so a large step has no truncation error.
  ExpectGradientMatches(&x, dx, loss, "dx", 0.05, 1e-3, 1e-3);
  ExpectGradientMatches(&f, df, loss, "dfilter", 0.05, 1e-3, 1e-3);
}

TEST_P(Conv2DTest, GradientsMatchFiniteDifferences) {
  CheckGradients(Shape({2, 7, 5, 3}), Shape({kernel(), kernel(), 3, 4}), params(), pool());
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2DTest,
                         ::testing::Combine(::testing::Values(1, 3, 5), ::testing::Values(1, 2),
                                            ::testing::Values(Padding::kSame, Padding::kValid),
                                            ::testing::Values(1, 2)),
                         [](const ::testing::TestParamInfo<ConvCase>& info) {
                           return absl::StrCat(
                               "k", std::get<0>(info.param), "_s", std::get<1>(info.param), "_",
                               PaddingName(std::get<2>(info.param)), "_t", std::get<3>(info.param));
                         });

TEST(Conv2DKernelTest, NonSquareKernelAndStrides) {
  Conv2DParams p{.stride_h = 2, .stride_w = 1, .padding = Padding::kSame};
  const Tensor x = Random({3, 9, 6, 2}, 6);
  const Tensor f = Random({2, 4, 2, 5}, 7);
  Tensor y = Tensor::Zeros(*Conv2DOutputShape(x.shape(), f.shape(), p));
  ASSERT_TRUE(Conv2D(x, f, p, &y).ok());
  ExpectNear(y, RefConv(x, f, p), 1e-5f);
  // Odd pad_total (9 rows, kernel 2, stride 2): TensorFlow puts the extra row after.
  CheckGradients(x.shape(), f.shape(), p, nullptr);
}

// Big enough that MatMul splits over the pool, with a workspace of one image so the batch
// goes through the GEMM in several chunks; dfilter accumulates across them.
TEST(Conv2DKernelTest, WorkspaceChunksAndParallelGemmAgree) {
  ThreadPool pool(2);
  Conv2DParams p{.stride_h = 1, .stride_w = 1, .padding = Padding::kSame};
  const Tensor x = Random({4, 16, 16, 8}, 8);
  const Tensor f = Random({3, 3, 8, 16}, 9);
  auto g = Conv2DGeometryFor(x.shape(), f.shape(), p);
  ASSERT_TRUE(g.ok());
  Tensor ws = Tensor::Zeros({Conv2DWorkspaceElements(*g, 1) + 3});
  Tensor y1 = Tensor::Zeros(g->output_shape()), y2 = Tensor::Zeros(g->output_shape());
  ASSERT_TRUE(Conv2D(x, f, p, &y1, &pool).ok());
  ASSERT_TRUE(Conv2D(x, f, p, &y2, nullptr, &ws).ok());
  const Tensor want = RefConv(x, f, p);
  ExpectNear(y1, want, 1e-4f);
  ExpectNear(y2, want, 1e-4f);

  const Tensor r = Random(g->output_shape(), 10);
  Tensor dx1 = Tensor::Zeros(x.shape()), dx2 = Tensor::Zeros(x.shape());
  ASSERT_TRUE(Conv2DBackpropInput(r, f, p, &dx1, &pool).ok());
  ASSERT_TRUE(Conv2DBackpropInput(r, f, p, &dx2, nullptr, &ws).ok());
  ExpectNear(dx1, dx2, 1e-4f);
  Tensor df1 = Tensor::Zeros(f.shape()), df2 = Tensor::Filled(f.shape(), 1.0f);
  ASSERT_TRUE(Conv2DBackpropFilter(x, r, p, &df1, false, &pool).ok());
  ASSERT_TRUE(Conv2DBackpropFilter(x, r, p, &df2, true, nullptr, &ws).ok());
  for (float& v : df2.flat()) v -= 1.0f;
  ExpectNear(df1, df2, 1e-3f);
}

void ExpectInvalid(const absl::Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find(needle), std::string::npos)
      << "message \"" << s.message() << "\" lacks \"" << needle << "\"";
}

TEST(Conv2DBadInputTest, KernelLargerThanValidInput) {
  Conv2DParams p{.stride_h = 1, .stride_w = 1, .padding = Padding::kValid};
  auto s = Conv2DOutputShape(Shape({2, 7, 5, 3}), Shape({3, 7, 3, 4}), p, "conv1");
  ExpectInvalid(s.status(), "conv1: width: kernel 7 is larger than the input 5");
  // SAME pads instead, as TensorFlow does.
  p.padding = Padding::kSame;
  auto same = Conv2DOutputShape(Shape({2, 7, 5, 3}), Shape({3, 7, 3, 4}), p);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, Shape({2, 7, 5, 4}));
}

TEST(Conv2DBadInputTest, ZeroStride) {
  Conv2DParams p{.stride_h = 0, .stride_w = 1, .padding = Padding::kSame};
  auto s = Conv2DOutputShape(Shape({2, 7, 5, 3}), Shape({3, 3, 3, 4}), p, "conv2");
  ExpectInvalid(s.status(), "conv2: height: stride is 0");
}

TEST(Conv2DBadInputTest, MismatchedTensors) {
  Conv2DParams p;
  const Tensor x = Random({2, 7, 5, 3}, 1);
  Tensor y = Tensor::Zeros({2, 7, 5, 4});
  ExpectInvalid(Conv2D(x, Tensor::Zeros({3, 3, 2, 4}), p, &y), "input channels");
  ExpectInvalid(Conv2D(x, Tensor::Zeros({3, 3, 3}), p, &y), "is not [KH, KW, C_in, C_out]");
  ExpectInvalid(Conv2D(Tensor::Zeros({7, 5, 3}), Tensor::Zeros({3, 3, 3, 4}), p, &y),
                "is not [N, H, W, C_in]");
  ExpectInvalid(Conv2D(x, Tensor::Zeros({3, 3, 3, 5}), p, &y),
                "output is [2, 7, 5, 4], expected [2, 7, 5, 5]");
  ExpectInvalid(Conv2D(x, Tensor::Zeros({3, 3, 3, 4}), p, nullptr), "output is null");
  Tensor ws = Tensor::Zeros({10});
  ExpectInvalid(Conv2D(x, Tensor::Zeros({3, 3, 3, 4}), p, &y, nullptr, &ws),
                "workspace has 10 floats");
  Tensor dx = Tensor::Zeros(x.shape());
  ExpectInvalid(
      Conv2DBackpropInput(Tensor::Zeros({2, 7, 5, 5}), Tensor::Zeros({3, 3, 3, 4}), p, &dx),
      "Conv2DBackpropInput: dy is [2, 7, 5, 5]");
  Tensor df = Tensor::Zeros({3, 3, 3, 4});
  ExpectInvalid(Conv2DBackpropFilter(x, Tensor::Zeros({2, 4, 5, 4}), p, &df),
                "Conv2DBackpropFilter: dy is [2, 4, 5, 4]");
}

// One conv layer's shapes: the planner's three directions on each algorithm.
struct PlannerCase {
  Shape x, filter;
  int64_t stride;
  Padding padding;
};

std::vector<PlannerCase> PlannerCases() {
  return {{Shape({3, 7, 9, 1}), Shape({5, 5, 1, 4}), 1, Padding::kSame},
          {Shape({2, 11, 10, 3}), Shape({3, 3, 3, 17}), 2, Padding::kSame},
          {Shape({2, 13, 13, 8}), Shape({5, 3, 8, 16}), 2, Padding::kValid},
          {Shape({4, 6, 6, 32}), Shape({1, 1, 32, 24}), 1, Padding::kSame},
          {Shape({1, 19, 19, 3}), Shape({11, 11, 3, 8}), 4, Padding::kValid}};
}

struct PlannerOutputs {
  Tensor y, dx, dfilter, dbias;
};

// Forward (bias + ReLU fused), backward-data and backward-filter+bias with `algo`.
PlannerOutputs RunPlanner(ConvAlgo algo, const PlannerCase& c, ThreadPool* pool) {
  ConvPlanner planner(algo, pool);
  Conv2DParams p;
  p.stride_h = p.stride_w = c.stride;
  p.padding = c.padding;
  p.layer = "conv_t";
  const Tensor x = Random(c.x, 1), f = Random(c.filter, 2);
  const Tensor bias = Random(Shape({c.filter.dim(3)}), 3);
  const Shape out = Conv2DOutputShape(c.x, c.filter, p).value();
  const Tensor dy = Random(out, 4);
  PlannerOutputs o{Tensor::Zeros(out), Tensor::Zeros(c.x), Tensor::Zeros(c.filter),
                   Tensor::Zeros(Shape({c.filter.dim(3)}))};
  EXPECT_TRUE(planner.Forward(x, f, bias, p, ConvPostOp::kRelu, &o.y, nullptr).ok());
  EXPECT_TRUE(planner.BackwardData(dy, f, p, &o.dx, nullptr).ok());
  EXPECT_TRUE(planner.BackwardFilter(x, dy, p, &o.dfilter, &o.dbias, nullptr).ok());
  // The reference: direct loops, then bias and ReLU.
  Tensor want = RefConv(x, f, p);
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const float v = want.data()[i] + bias.data()[i % c.filter.dim(3)];
    want.data()[i] = v > 0 ? v : 0;
  }
  ExpectNear(o.y, want, 1e-3f);
  return o;
}

TEST(ConvPlannerTest, OneDnnAndIm2colAgreeInEveryDirection) {
  if (!OneDnnBuilt()) GTEST_SKIP() << "built without oneDNN (-DFULCRUM_ONEDNN=OFF)";
  ThreadPool pool(2);
  for (const PlannerCase& c : PlannerCases()) {
    SCOPED_TRACE(absl::StrCat(c.x.ToString(), " * ", c.filter.ToString(), " stride ", c.stride));
    const PlannerOutputs a = RunPlanner(ConvAlgo::kIm2col, c, &pool);
    const PlannerOutputs b = RunPlanner(ConvAlgo::kOneDnn, c, &pool);
    ExpectNear(b.dx, a.dx, 1e-3f);
    ExpectNear(b.dfilter, a.dfilter, 2e-3f);
    ExpectNear(b.dbias, a.dbias, 1e-3f);
  }
}

TEST(ConvPlannerTest, AutoTimesBothAndRecordsTheChoicePerShape) {
  if (!OneDnnBuilt()) GTEST_SKIP() << "built without oneDNN (-DFULCRUM_ONEDNN=OFF)";
  ThreadPool pool(2);
  ConvPlanner planner(ConvAlgo::kAuto, &pool);
  const PlannerCase c = PlannerCases()[1];
  Conv2DParams p;
  p.stride_h = p.stride_w = c.stride;
  p.layer = "conv1";
  const Tensor x = Random(c.x, 1), f = Random(c.filter, 2), bias = Random(Shape({17}), 3);
  Tensor y = Tensor::Zeros(Conv2DOutputShape(c.x, c.filter, p).value());
  ASSERT_TRUE(planner.Forward(x, f, bias, p, ConvPostOp::kRelu, &y, nullptr).ok());
  Tensor y2 = Tensor::Zeros(y.shape());
  p.layer = "conv2";  // a second layer of the same shape shares the plan
  ASSERT_TRUE(planner.Forward(x, f, bias, p, ConvPostOp::kRelu, &y2, nullptr).ok());
  ExpectNear(y2, y, 1e-5f);
  const std::vector<ConvChoice> choices = planner.choices();
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_EQ(choices[0].layers, "conv1,conv2");
  EXPECT_EQ(choices[0].shape, "2x11x10x3 * 3x3x3x17 stride 2x2 SAME");
  EXPECT_GT(choices[0].forward.own_ms, 0);
  EXPECT_GT(choices[0].forward.onednn_ms, 0);
  EXPECT_EQ(choices[0].forward.algo,
            choices[0].forward.onednn_ms < choices[0].forward.own_ms ? "onednn" : "im2col");
  EXPECT_FALSE(choices[0].forward.impl.empty());
  EXPECT_EQ(choices[0].backward_data.algo, "");  // not run yet
}

TEST(ConvPlannerTest, BadShapesAreRefusedOnTheOneDnnPath) {
  ConvPlanner planner(ConvAlgo::kOneDnn, nullptr);
  Conv2DParams p;
  const Tensor x = Random(Shape({1, 5, 5, 2}), 1), f = Random(Shape({3, 3, 2, 4}), 2);
  const Tensor bias = Random(Shape({3}), 3);  // 3 biases for 4 filters
  Tensor y = Tensor::Zeros(Shape({1, 5, 5, 4}));
  const absl::Status s = planner.Forward(x, f, bias, p, ConvPostOp::kNone, &y, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bias"), absl::string_view::npos) << s;
  Tensor wrong = Tensor::Zeros(Shape({1, 4, 4, 4}));
  EXPECT_EQ(
      planner.Forward(x, f, Random(Shape({4}), 3), p, ConvPostOp::kNone, &wrong, nullptr).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(ConvAlgoTest, TheFlagTakesExactlyItsNames) {
  for (ConvAlgo a : {ConvAlgo::kAuto, ConvAlgo::kIm2col, ConvAlgo::kOneDnn}) {
    ConvAlgo parsed = ConvAlgo::kAuto;
    std::string error;
    ASSERT_TRUE(AbslParseFlag(ConvAlgoName(a), &parsed, &error)) << error;
    EXPECT_EQ(parsed, a);
    EXPECT_EQ(AbslUnparseFlag(a), ConvAlgoName(a));
  }
  ConvAlgo parsed = ConvAlgo::kAuto;
  std::string error;
  EXPECT_FALSE(AbslParseFlag("winograd", &parsed, &error));
  EXPECT_EQ(error, "expected auto, im2col or onednn");
}

}  // namespace
}  // namespace fulcrum::ops
