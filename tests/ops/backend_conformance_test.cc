// The backend conformance suite: every op of ops::Backend, and every model's whole training
// step, on every backend this build has, against the CPU kernels run on one thread (the
// reference, itself checked against finite differences in the kernel and model tests).
// Backends: "cpu" (the CPU backend over a 2-thread pool: the split kernels and the backend's
// plumbing), "arena" (ops/arena_backend.h: the same kernels on memory only copies reach) and
// "gpu0" (the CUDA backend on GPU 0). Where a backend cannot run here, its
// tests skip saying why: no CUDA toolkit at build time, or no usable GPU on this machine.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/registry.h"
#include "ops/arena_backend.h"
#include "ops/backend.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/dropout.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/lrn.h"
#include "ops/cpu/pool.h"
#include "ops/cpu/spatial_transformer.h"
#include "ops/cpu/thread_pool.h"
#include "ops/cuda_plugin.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"
#include "tests/testing/gradient_check.h"

namespace fulcrum::ops {
namespace {

using ::fulcrum::testing::Random;
using ::testing::HasSubstr;

class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cpu") {
      pool_ = std::make_unique<ThreadPool>(2);
      backend_ = std::make_unique<CpuBackend>(pool_.get());
      return;
    }
    if (GetParam() == "arena") {  // host memory posing as a device: the copies' plumbing
      pool_ = std::make_unique<ThreadPool>(2);
      backend_ = std::make_unique<ArenaBackend>(pool_.get());
      return;
    }
#ifdef FULCRUM_HAVE_CUDA
    // The GPU backend as the worker loads it: the plugin next to this binary.
    absl::StatusOr<const CudaPlugin*> plugin = LoadCudaPlugin();
    ASSERT_TRUE(plugin.ok()) << plugin.status();
    absl::StatusOr<int> count = (*plugin)->device_count();
    if (!count.ok() && (*plugin)->no_device(count.status())) {
      GTEST_SKIP() << "no GPU here: " << count.status().message();
    }
    ASSERT_TRUE(count.ok()) << count.status();
    auto backend = (*plugin)->create_backend(0, /*tf32=*/false);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(backend).value();
#else
    GTEST_SKIP() << "this build has no CUDA backend (the CUDA toolkit, nvcc or cuDNN was not "
                    "found at configure time)";
#endif
  }

  Backend& b() { return *backend_; }

  // A copy of host tensor `h` on the backend's device.
  Tensor On(const Tensor& h) {
    auto t = b().Allocate(h.shape());
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return Tensor();
    EXPECT_TRUE(b().CopyFromHost(h, &*t).ok());
    return *t;
  }
  Tensor Empty(const Shape& shape) {
    auto t = b().Allocate(shape);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : Tensor();
  }
  Tensor Host(const Tensor& d) {
    Tensor h = Tensor::Zeros(d.shape());
    const absl::Status s = b().CopyToHost(d, &h);
    EXPECT_TRUE(s.ok()) << s;
    return h;
  }
  // Every element of the backend's `got` within rel * max(1, |want|) of `want`.
  void ExpectClose(const Tensor& got, const Tensor& want, float rel, const std::string& what) {
    const Tensor g = Host(got);
    ASSERT_EQ(g.shape(), want.shape()) << what;
    int reported = 0;
    for (int64_t i = 0; i < want.num_elements() && reported < 5; ++i) {
      const float x = g.flat()[static_cast<size_t>(i)], y = want.flat()[static_cast<size_t>(i)];
      if (!(std::abs(x - y) <= rel * std::max(1.0f, std::abs(y)))) {
        ADD_FAILURE() << what << " on " << b().name() << ", element " << i << ": got " << x
                      << ", want " << y;
        ++reported;
      }
    }
  }

  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> backend_;
};

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest, ::testing::Values("cpu", "arena", "gpu0"),
                         [](const auto& info) { return info.param; });

constexpr float kTol = 2e-5f;

TEST_P(BackendTest, CopiesFillAndAdd) {
  const Tensor x = Random({5, 7}, 1);
  Tensor d = On(x);
  ExpectClose(d, x, 0, "round trip");
  Tensor c = Empty({35});
  ASSERT_TRUE(b().Copy(d, &c).ok());
  ExpectClose(c, x.Reshaped({35}).value(), 0, "Copy");
  ASSERT_TRUE(b().Fill(2.5f, &c).ok());
  ExpectClose(c, Tensor::Filled({35}, 2.5f), 0, "Fill");
  Tensor y = On(Random({5, 7}, 2));
  ASSERT_TRUE(b().Add(d, &y).ok());
  Tensor want = Random({5, 7}, 2);
  for (int64_t i = 0; i < 35; ++i) want.data()[i] += x.data()[i];
  ExpectClose(y, want, kTol, "Add");
}

// The optimizers as a device-resident store runs them (ops::Backend::ApplyGradient): three
// updates of every optimizer, with learning-rate decay and a gradient scale, against the CPU
// kernel; the slots too.
TEST_P(BackendTest, OptimizerUpdatesMatchTheCpuKernel) {
  for (const OptimizerKind kind :
       {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam,
        OptimizerKind::kAdagrad, OptimizerKind::kRmsProp}) {
    OptimizerConfig config;
    config.kind = kind;
    config.learning_rate = 0.05f;
    config.rmsprop_momentum = 0.5f;
    config.lr_decay_rate = 0.7f;
    config.lr_decay_steps = 2;
    const Shape shape({37, 5});
    Tensor want = Random(shape, 20);
    Tensor got = On(want);
    std::vector<Tensor> want_slots, got_slots;
    for (size_t k = 0; k < SlotCount(kind); ++k) {
      want_slots.push_back(Tensor::Filled(shape, SlotInitialValue(config, static_cast<int>(k))));
      got_slots.push_back(On(want_slots.back()));
    }
    for (int64_t step = 1; step <= 3; ++step) {
      const Tensor grad = Random(shape, 30 + static_cast<uint64_t>(step));
      ASSERT_TRUE(ApplyGradient(config, step, grad, &want, want_slots, 0.5f).ok());
      const absl::Status s = b().ApplyGradient(config, step, On(grad), &got, got_slots, 0.5f);
      ASSERT_TRUE(s.ok()) << s;
    }
    const std::string name = OptimizerName(kind);
    ExpectClose(got, want, kTol, name + " values");
    for (size_t k = 0; k < want_slots.size(); ++k) {
      ExpectClose(got_slots[k], want_slots[k], kTol, absl::StrCat(name, " slot ", k));
    }
  }
}

TEST_P(BackendTest, MatMulEveryTransposeAndAccumulate) {
  const int64_t m = 13, k = 37, n = 11;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (bool acc : {false, true}) {
        const Tensor a = Random(ta ? Shape{k, m} : Shape{m, k}, 3);
        const Tensor bb = Random(tb ? Shape{n, k} : Shape{k, n}, 4);
        Tensor want = Random({m, n}, 5);
        Tensor got = On(want);
        ASSERT_TRUE(MatMul(a, ta, bb, tb, &want, acc).ok());
        ASSERT_TRUE(b().MatMul(On(a), ta, On(bb), tb, &got, acc).ok());
        ExpectClose(got, want, 1e-5f, absl::StrCat("MatMul ta=", ta, " tb=", tb, " acc=", acc));
      }
    }
  }
}

TEST_P(BackendTest, BiasAndActivations) {
  const Tensor x = Random({9, 6}, 6, -3, 3), bias = Random({6}, 7);
  Tensor want = x.Clone();
  ASSERT_TRUE(BiasAdd(bias, &want).ok());
  Tensor got = On(x);
  ASSERT_TRUE(b().BiasAdd(On(bias), &got).ok());
  ExpectClose(got, want, kTol, "BiasAdd");
  Tensor db_want = Tensor::Zeros({6});
  ASSERT_TRUE(BiasAddGrad(x, &db_want).ok());
  Tensor db = Empty({6});
  ASSERT_TRUE(b().BiasAddGrad(On(x), &db).ok());
  ExpectClose(db, db_want, 1e-5f, "BiasAddGrad");

  const Tensor dy = Random({9, 6}, 8);
  using Fwd = absl::Status (*)(const Tensor&, Tensor*);
  using Bwd = absl::Status (*)(const Tensor&, const Tensor&, Tensor*, ThreadPool*);
  const struct {
    ActivationKind kind;
    Fwd fwd;
    Bwd bwd;
    const char* name;
  } acts[] = {{ActivationKind::kRelu, Relu, ReluGrad, "relu"},
              {ActivationKind::kSigmoid, Sigmoid, SigmoidGrad, "sigmoid"},
              {ActivationKind::kTanh, Tanh, TanhGrad, "tanh"}};
  for (const auto& a : acts) {
    Tensor y_want = x.Clone();
    ASSERT_TRUE(a.fwd(y_want, &y_want).ok());
    Tensor y = On(x);
    ASSERT_TRUE(b().Activate(a.kind, &y).ok());
    ExpectClose(y, y_want, 1e-5f, a.name);
    Tensor dx_want = dy.Clone();
    ASSERT_TRUE(a.bwd(y_want, dx_want, &dx_want, nullptr).ok());
    Tensor dx = On(dy);
    ASSERT_TRUE(b().ActivationGrad(a.kind, On(y_want), &dx).ok());
    ExpectClose(dx, dx_want, 1e-5f, absl::StrCat(a.name, " gradient"));
  }
}

TEST_P(BackendTest, LossesCountsAndWeightDecay) {
  const Tensor logits = Random({7, 5}, 9, -4, 4);
  const std::vector<int32_t> labels = {0, 4, 2, 2, 1, 3, 0};
  Tensor dl_want = Tensor::Zeros({7, 5});
  auto loss_want = SoftmaxCrossEntropy(logits, labels, &dl_want);
  ASSERT_TRUE(loss_want.ok());
  Tensor dl = Empty({7, 5});
  auto loss = b().SoftmaxCrossEntropy(On(logits), labels, &dl);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, *loss_want, 1e-5 * std::max(1.0f, *loss_want));
  ExpectClose(dl, dl_want, 1e-5f, "softmax cross-entropy gradient");
  auto correct = b().CountCorrect(On(logits), labels);
  ASSERT_TRUE(correct.ok());
  EXPECT_EQ(*correct, CountCorrect(logits, labels).value());
  const std::vector<int32_t> bad = {0, 4, 2, 5, 1, 3, 0};
  auto refused = b().SoftmaxCrossEntropy(On(logits), bad, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);

  const Tensor pred = Random({6, 9}, 10), target = Random({6, 9}, 11);
  Tensor dp_want = Tensor::Zeros({6, 9});
  const float mse_want = MeanSquaredError(pred, target, &dp_want).value();
  Tensor dp = Empty({6, 9});
  auto mse = b().MeanSquaredError(On(pred), On(target), &dp);
  ASSERT_TRUE(mse.ok());
  EXPECT_NEAR(*mse, mse_want, 1e-5 * mse_want);
  ExpectClose(dp, dp_want, 1e-5f, "squared error gradient");

  const Tensor v = Random({17, 3}, 12), g = Random({17, 3}, 13);
  Tensor g_want = g.Clone();
  double sum_sq = 0.0;
  for (int64_t i = 0; i < v.num_elements(); ++i) {
    g_want.data()[i] += 0.25f * v.data()[i];
    sum_sq += static_cast<double>(v.data()[i]) * v.data()[i];
  }
  Tensor gd = On(g);
  auto got = b().AddWeightDecay(0.25f, On(v), &gd);
  ASSERT_TRUE(got.ok());
  EXPECT_NEAR(*got, sum_sq, 1e-9 * sum_sq);
  ExpectClose(gd, g_want, 1e-6f, "weight decay gradient");
}

struct ConvCase {
  Shape x, filter;
  int64_t stride;
  Padding padding;
};

// Odd sizes; SAME with odd total padding (TensorFlow puts the odd row/column after), strides
// that leave rows over, 1x1 kernels.
TEST_P(BackendTest, Conv2DForwardAndBothGradients) {
  const ConvCase cases[] = {{{3, 9, 7, 5}, {5, 5, 5, 6}, 1, Padding::kSame},
                            {{2, 10, 9, 3}, {3, 3, 3, 4}, 2, Padding::kSame},
                            {{2, 11, 8, 4}, {4, 3, 4, 5}, 2, Padding::kValid},
                            {{3, 6, 5, 7}, {1, 1, 7, 2}, 1, Padding::kValid},
                            {{1, 8, 8, 2}, {2, 2, 2, 3}, 3, Padding::kSame}};
  uint64_t seed = 20;
  for (const ConvCase& c : cases) {
    const std::string what = absl::StrCat("conv x", c.x.ToString(), " f", c.filter.ToString(), " s",
                                          c.stride, " ", PaddingName(c.padding));
    Conv2DParams p;
    p.stride_h = p.stride_w = c.stride;
    p.padding = c.padding;
    const Shape y_shape = Conv2DOutputShape(c.x, c.filter, p).value();
    const Tensor x = Random(c.x, seed++), f = Random(c.filter, seed++),
                 dy = Random(y_shape, seed++);
    Tensor y_want = Tensor::Zeros(y_shape);
    ASSERT_TRUE(Conv2D(x, f, p, &y_want).ok());
    Tensor y = Empty(y_shape);
    ASSERT_TRUE(b().Conv2D(On(x), On(f), p, &y, nullptr).ok()) << what;
    ExpectClose(y, y_want, 1e-4f, what);

    Tensor dx_want = Tensor::Zeros(c.x);
    ASSERT_TRUE(Conv2DBackpropInput(dy, f, p, &dx_want).ok());
    Tensor dx = Empty(c.x);
    ASSERT_TRUE(b().Conv2DBackpropInput(On(dy), On(f), p, &dx, nullptr).ok()) << what;
    ExpectClose(dx, dx_want, 1e-4f, what + " input gradient");

    Tensor df_want = Tensor::Zeros(c.filter);
    ASSERT_TRUE(Conv2DBackpropFilter(x, dy, p, &df_want).ok());
    Tensor df = Empty(c.filter);
    ASSERT_TRUE(b().Conv2DBackpropFilter(On(x), On(dy), p, &df, nullptr).ok()) << what;
    ExpectClose(df, df_want, 1e-4f, what + " filter gradient");
  }
  // A kernel larger than a VALID input is refused, naming the op.
  Conv2DParams valid;
  valid.padding = Padding::kValid;
  Tensor y = Empty({1, 1, 1, 1});
  const absl::Status s =
      b().Conv2D(On(Random({1, 3, 3, 1}, 1)), On(Random({4, 4, 1, 1}, 2)), valid, &y, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST_P(BackendTest, PoolingForwardAndGradients) {
  const Pool2DParams cases[] = {{3, 3, 2, 2, Padding::kSame},
                                {2, 2, 2, 2, Padding::kValid},
                                {3, 2, 1, 2, Padding::kSame},
                                {2, 3, 3, 1, Padding::kValid}};
  uint64_t seed = 40;
  for (const Pool2DParams& p : cases) {
    const Shape xs{2, 9, 7, 3};
    const std::string what = absl::StrCat("pool ", p.window_h, "x", p.window_w, " s", p.stride_h,
                                          "x", p.stride_w, " ", PaddingName(p.padding));
    const Shape ys = Pool2DOutputShape(xs, p).value();
    const Tensor x = Random(xs, seed++), dy = Random(ys, seed++);
    for (bool max : {true, false}) {
      const std::string op = absl::StrCat(max ? "max " : "avg ", what);
      Tensor y_want = Tensor::Zeros(ys);
      ASSERT_TRUE((max ? MaxPool(x, p, &y_want) : AvgPool(x, p, &y_want)).ok());
      Tensor y = Empty(ys);
      ASSERT_TRUE((max ? b().MaxPool(On(x), p, &y) : b().AvgPool(On(x), p, &y)).ok()) << op;
      ExpectClose(y, y_want, 1e-5f, op);
      Tensor dx_want = Tensor::Zeros(xs);
      ASSERT_TRUE((max ? MaxPoolGrad(x, dy, p, &dx_want) : AvgPoolGrad(dy, p, &dx_want)).ok());
      Tensor dx = On(Random(xs, 99));  // stale values: the op must overwrite them
      ASSERT_TRUE(
          (max ? b().MaxPoolGrad(On(x), On(dy), p, &dx) : b().AvgPoolGrad(On(dy), p, &dx)).ok())
          << op;
      ExpectClose(dx, dx_want, 1e-5f, op + " gradient");
    }
  }
}

TEST_P(BackendTest, LrnForwardAndGradient) {
  const LrnParams cases[] = {
      {4, 1.0f, 0.001f / 9, 0.75f}, {2, 2.0f, 0.3f, 0.5f}, {0, 1.0f, 1.0f, 1.0f}};
  uint64_t seed = 60;
  for (const LrnParams& p : cases) {
    const std::string what =
        absl::StrCat("LRN r", p.depth_radius, " b", p.bias, " a", p.alpha, " beta", p.beta);
    const Shape s{2, 5, 3, 11};
    const Tensor x = Random(s, seed++, -2, 2), dy = Random(s, seed++);
    Tensor y_want = Tensor::Zeros(s);
    ASSERT_TRUE(Lrn(x, p, &y_want).ok());
    Tensor y = Empty(s);
    ASSERT_TRUE(b().Lrn(On(x), p, &y).ok()) << what;
    ExpectClose(y, y_want, 1e-5f, what);
    Tensor dx_want = Tensor::Zeros(s);
    ASSERT_TRUE(LrnGrad(x, dy, p, &dx_want).ok());
    Tensor dx = Empty(s);
    ASSERT_TRUE(b().LrnGrad(On(x), On(dy), p, &dx).ok()) << what;
    ExpectClose(dx, dx_want, 1e-5f, what + " gradient");
  }
}

// The same seed draws the same mask on every backend: a step is reproducible across devices.
TEST_P(BackendTest, DropoutDrawsTheCpuMask) {
  const Tensor x = Random({33, 71}, 70), dy = Random({33, 71}, 71);
  Tensor y_want = Tensor::Zeros(x.shape()), mask_want = Tensor::Zeros(x.shape());
  ASSERT_TRUE(Dropout(x, 0.4f, 1234, &y_want, &mask_want).ok());
  Tensor y = Empty(x.shape()), mask = Empty(x.shape());
  ASSERT_TRUE(b().Dropout(On(x), 0.4f, 1234, &y, &mask).ok());
  ExpectClose(mask, mask_want, 0, "dropout mask");
  ExpectClose(y, y_want, 1e-6f, "dropout");
  Tensor dx_want = Tensor::Zeros(x.shape());
  ASSERT_TRUE(DropoutGrad(dy, mask_want, &dx_want).ok());
  Tensor dx = Empty(x.shape());
  ASSERT_TRUE(b().DropoutGrad(On(dy), mask, &dx).ok());
  ExpectClose(dx, dx_want, 1e-6f, "dropout gradient");
  EXPECT_EQ(b().Dropout(On(x), 1.0f, 1, &y, &mask).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(BackendTest, SpatialTransformerOps) {
  const int64_t n = 3, h = 7, w = 6, c = 2, oh = 5, ow = 4;
  Tensor theta = Random({n, 2, 3}, 80, -0.6f, 0.6f);
  for (int64_t i = 0; i < n; ++i) {  // near the identity, so points fall in and out
    theta.data()[6 * i] += 1.0f;
    theta.data()[6 * i + 4] += 1.0f;
  }
  Tensor grid_want = Tensor::Zeros({n, oh, ow, 2});
  ASSERT_TRUE(AffineGrid(theta, &grid_want).ok());
  Tensor grid = Empty({n, oh, ow, 2});
  ASSERT_TRUE(b().AffineGrid(On(theta), &grid).ok());
  ExpectClose(grid, grid_want, 1e-6f, "AffineGrid");

  const Tensor dgrid = Random({n, oh, ow, 2}, 81);
  Tensor dtheta_want = Tensor::Zeros({n, 2, 3});
  ASSERT_TRUE(AffineGridGrad(dgrid, &dtheta_want).ok());
  Tensor dtheta = Empty({n, 2, 3});
  ASSERT_TRUE(b().AffineGridGrad(On(dgrid), &dtheta).ok());
  ExpectClose(dtheta, dtheta_want, 1e-5f, "AffineGridGrad");

  const Tensor input = Random({n, h, w, c}, 82), dout = Random({n, oh, ow, c}, 83);
  Tensor out_want = Tensor::Zeros({n, oh, ow, c});
  ASSERT_TRUE(BilinearSample(input, grid_want, &out_want).ok());
  Tensor out = Empty({n, oh, ow, c});
  const Tensor grid_d = On(grid_want);
  ASSERT_TRUE(b().BilinearSample(On(input), grid_d, &out).ok());
  ExpectClose(out, out_want, 1e-5f, "BilinearSample");
  Tensor din_want = Tensor::Zeros(input.shape()), dg_want = Tensor::Zeros(grid_want.shape());
  ASSERT_TRUE(BilinearSampleGrad(input, grid_want, dout, &din_want, &dg_want).ok());
  Tensor din = On(Random(input.shape(), 84)), dg = Empty(grid_want.shape());
  ASSERT_TRUE(b().BilinearSampleGrad(On(input), grid_d, On(dout), &din, &dg).ok());
  ExpectClose(din, din_want, 1e-5f, "BilinearSampleGrad input");
  ExpectClose(dg, dg_want, 1e-4f, "BilinearSampleGrad grid");
}

// A tensor that lives elsewhere is refused before anything reads it, naming op and operand.
TEST_P(BackendTest, TensorsOnAnotherDeviceAreRefused) {
  float storage[12] = {};
  const Device other = b().device() == Device::kCpu ? Device::kCuda : Device::kCpu;
  Tensor alien = Tensor::View(storage, {3, 4}, other);
  Tensor out = Empty({3, 4});
  const absl::Status s = b().Add(alien, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("Add on " + b().name() + ": x is in"));
}

// Whole training steps: every model of the registry (small widths and inputs), gradients and
// loss on the backend against the model on the reference CPU path, dropout masks included.
struct ModelCase {
  const char* name;
  models::ModelConfig config;
};

TEST_P(BackendTest, EveryModelsTrainingStepAndEvaluation) {
  auto image = [](int64_t h, int64_t w, int64_t c, int classes, double width) {
    models::ModelConfig m;
    m.input_size = h * w * c;
    m.input_shape = {h, w, c};
    m.num_classes = classes;
    m.width = width;
    return m;
  };
  models::ModelConfig dense;
  dense.input_size = 30;
  dense.num_classes = 4;
  dense.width = 0.25;
  const ModelCase cases[] = {{"logreg", dense},
                             {"mlp", dense},
                             {"autoencoder", dense},
                             {"mnist_cnn", image(12, 12, 1, 5, 0.125)},
                             {"cifar10_cnn", image(13, 11, 3, 4, 1.0 / 16)},
                             {"alexnet", image(67, 67, 3, 3, 1.0 / 32)},
                             {"vgg16", image(32, 32, 3, 3, 1.0 / 64)},
                             {"stn", image(12, 12, 1, 4, 0.25)}};
  for (const ModelCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto reference = models::CreateBuiltinModel(c.name, c.config, nullptr);
    auto model = models::CreateBuiltinModel(c.name, c.config, nullptr);
    ASSERT_TRUE(reference.ok() && model.ok()) << reference.status() << model.status();
    (*model)->set_backend(backend_.get());
    std::vector<Tensor> values, grads_want, grads;
    uint64_t seed = 100;
    for (const auto& spec : (*reference)->variables()) {
      Tensor v = Tensor::Zeros(spec.shape);
      ASSERT_TRUE(Initialize(spec.initializer, seed++, &v).ok());
      testing::FillUniform(&v, seed++, -0.1f, 0.1f);  // biases and the theta layer non-zero
      values.push_back(v);
      grads_want.push_back(Tensor::Zeros(spec.shape));
      grads.push_back(Tensor::Zeros(spec.shape));
    }
    const int64_t batch = 5;
    const Tensor inputs = Random({batch, c.config.input_size}, 7, 0.0f, 1.0f);
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < batch; ++i)
      labels.push_back(static_cast<int32_t>(i % c.config.num_classes));
    (*reference)->set_seed(3);
    (*model)->set_seed(3);
    for (int step = 0; step < 2; ++step) {  // the second step reuses the device buffers
      auto loss_want = (*reference)->ComputeGradients(inputs, labels, values, grads_want);
      auto loss = (*model)->ComputeGradients(inputs, labels, values, grads);
      ASSERT_TRUE(loss_want.ok()) << loss_want.status();
      ASSERT_TRUE(loss.ok()) << loss.status();
      EXPECT_NEAR(*loss, *loss_want, 1e-4 * std::max(1.0f, std::abs(*loss_want)));
      for (size_t i = 0; i < grads.size(); ++i) {
        // Relative to the variable's largest gradient: summation order differs by device.
        const Tensor& g = grads[i];
        const Tensor& want = grads_want[i];
        float scale = 0.0f;
        for (float v : want.flat()) scale = std::max(scale, std::abs(v));
        int reported = 0;
        for (int64_t j = 0; j < want.num_elements() && reported < 3; ++j) {
          const float x = g.data()[j], y = want.data()[j];
          if (!(std::abs(x - y) <= 1e-3f * scale + 1e-7f)) {
            ADD_FAILURE() << (*reference)->variables()[i].name << "[" << j << "] step " << step
                          << ": got " << x << ", want " << y << " (largest " << scale << ")";
            ++reported;
          }
        }
      }
    }
    auto eval_want = (*reference)->Evaluate(inputs, labels, values);
    auto eval = (*model)->Evaluate(inputs, labels, values);
    ASSERT_TRUE(eval_want.ok() && eval.ok());
    EXPECT_NEAR(eval->loss_sum, eval_want->loss_sum, 1e-4 * std::max(1.0, eval_want->loss_sum));
    EXPECT_EQ(eval->correct, eval_want->correct);
  }
}

}  // namespace
}  // namespace fulcrum::ops
