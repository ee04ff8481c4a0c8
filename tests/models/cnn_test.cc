// The convolutional models and the layers they are built from: the composed gradients of
// every model against finite differences of its own training loss (dropout masks replayed by
// re-seeding), the layer lists the sources give, dropout's training/evaluation behaviour, L2
// weight decay, and shape errors that name the model and the layer.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/builder.h"
#include "models/registry.h"
#include "ops/initializer.h"
#include "tests/testing/gradient_check.h"

namespace fulcrum::models {
namespace {

using ::fulcrum::testing::Random;
using ::testing::HasSubstr;

ModelConfig ImageConfig(int64_t h, int64_t w, int64_t c, int classes, double width) {
  ModelConfig config;
  config.input_size = h * w * c;
  config.input_shape = {h, w, c};
  config.num_classes = classes;
  config.width = width;
  return config;
}

std::unique_ptr<Model> Build(const std::string& name, const ModelConfig& config) {
  ModelRegistry registry;
  EXPECT_TRUE(RegisterBuiltinModels(&registry).ok());
  auto model = registry.Create(name, config);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(model).value() : nullptr;
}

std::vector<ops::Tensor> InitValues(const Model& model, uint64_t seed) {
  std::vector<ops::Tensor> values;
  for (const auto& spec : model.variables()) {
    ops::Tensor t = ops::Tensor::Zeros(spec.shape);
    EXPECT_TRUE(ops::Initialize(spec.initializer, seed++, &t).ok());
    // Non-zero biases so their gradients are exercised away from the start point; a kernel
    // that starts at zero (the spatial transformer's theta layer) gets small values so the
    // gradient reaches the layers before it.
    const bool all_zero = std::all_of(t.flat().begin(), t.flat().end(),
                                      [](float v) { return v == 0.0f; });
    if (spec.shape.rank() == 1) {
      testing::FillUniform(&t, seed++, -0.1f, 0.1f);
    } else if (all_zero) {
      testing::FillUniform(&t, seed++, -0.05f, 0.05f);
    }
    values.push_back(std::move(t));
  }
  return values;
}

std::vector<ops::Tensor> ZeroGrads(const Model& model) {
  std::vector<ops::Tensor> grads;
  for (const auto& spec : model.variables()) grads.push_back(ops::Tensor::Zeros(spec.shape));
  return grads;
}

struct GradientCase {
  const char* model;
  ModelConfig config;
  int64_t stride;  // check every stride-th element of each variable
  double eps = 3e-3;
  // Elements within eps of a kink are skipped, at most this fraction per variable. The
  // spatial transformer's sampler adds a kink at every pixel boundary the sample points
  // cross, on top of ReLU and max pooling; its ops' gradients are checked exactly in
  // tests/ops/spatial_transformer_test.cc.
  double max_skipped = 0.1;
};

void PrintTo(const GradientCase& c, std::ostream* os) { *os << c.model; }

class CnnGradientTest : public ::testing::TestWithParam<GradientCase> {};

INSTANTIATE_TEST_SUITE_P(
    AllModels, CnnGradientTest,
    ::testing::Values(GradientCase{"mnist_cnn", ImageConfig(12, 12, 1, 5, 0.125), 7},
                      GradientCase{"cifar10_cnn", ImageConfig(11, 13, 3, 4, 1.0 / 16), 7},
                      GradientCase{"vgg16", ImageConfig(32, 32, 3, 3, 1.0 / 64), 5},
                      GradientCase{"alexnet", ImageConfig(67, 67, 3, 3, 1.0 / 32), 23},
                      GradientCase{"stn", ImageConfig(12, 12, 1, 4, 0.25), 5, 1e-3, 0.5},
                      // stn_deep's extra conv3+pool3 block: 12 -> 6 -> 3 -> 1 before dense1.
                      GradientCase{"stn_deep", ImageConfig(12, 12, 1, 4, 0.25), 5, 1e-3, 0.5}),
    [](const auto& info) { return std::string(info.param.model); });

// The gradient ComputeGradients returns is the derivative of the loss it returns (dropout on,
// weight decay included): re-seeding before every call replays the same dropout masks.
TEST_P(CnnGradientTest, EveryVariableMatchesFiniteDifferences) {
  const GradientCase& c = GetParam();
  auto model = Build(c.model, c.config);
  ASSERT_NE(model, nullptr);
  auto values = InitValues(*model, 11);
  const int64_t batch = 3;
  ops::Tensor inputs = Random({batch, c.config.input_size}, 5, 0.0f, 1.0f);
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < batch; ++i) labels.push_back(static_cast<int32_t>(i % c.config.num_classes));
  auto grads = ZeroGrads(*model);
  model->set_seed(42);
  ASSERT_TRUE(model->ComputeGradients(inputs, labels, values, grads).ok());
  auto scratch = ZeroGrads(*model);
  auto loss = [&] {
    model->set_seed(42);
    auto l = model->ComputeGradients(inputs, labels, values, scratch);
    EXPECT_TRUE(l.ok()) << l.status();
    return static_cast<double>(*l);
  };
  for (size_t i = 0; i < values.size(); ++i) {
    testing::ExpectGradientMatchesAwayFromKinks(&values[i], grads[i], loss,
                                                model->variables()[i].name, c.eps, 5e-2, 3e-3,
                                                c.stride, c.max_skipped);
  }
}

TEST(CnnZooTest, Cifar10TutorialLayersAndInitialisers) {
  auto model = Build("cifar10_cnn", ImageConfig(24, 24, 3, 10, 1.0));
  ASSERT_NE(model, nullptr);
  std::vector<std::string> names;
  for (const auto& v : model->variables()) names.push_back(v.name + v.shape.ToString());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "conv1/kernel[5, 5, 3, 64]", "conv1/bias[64]", "conv2/kernel[5, 5, 64, 64]",
                       "conv2/bias[64]", "local3/kernel[2304, 384]", "local3/bias[384]",
                       "local4/kernel[384, 192]", "local4/bias[192]",
                       "softmax_linear/kernel[192, 10]", "softmax_linear/bias[10]"}));
  // Weight decay 0.004 on local3/local4 kernels only, as the tutorial's _variable_with_weight_decay.
  for (size_t i = 0; i < model->variables().size(); ++i) {
    const std::string& n = model->variables()[i].name;
    const bool decayed = n == "local3/kernel" || n == "local4/kernel";
    EXPECT_FLOAT_EQ(model->weight_decay(i), decayed ? 0.004f : 0.0f) << n;
  }
  EXPECT_EQ(model->variables()[0].initializer.ToString(), "truncated_normal(0.05)");
  EXPECT_EQ(model->variables()[3].initializer.ToString(), "constant(0.1)");
  // --weight_decay=X: X on every kernel, nothing on biases.
  model->set_weight_decay_override(0.5);
  EXPECT_FLOAT_EQ(model->weight_decay(0), 0.5f);
  EXPECT_FLOAT_EQ(model->weight_decay(1), 0.0f);
}

TEST(CnnZooTest, LayerShapesOfTheOtherModels) {
  auto mnist = Build("mnist_cnn", ImageConfig(28, 28, 1, 10, 1.0));
  ASSERT_NE(mnist, nullptr);
  // 28 -> pool 14 -> pool 7: the dense layer sees 7*7*64.
  EXPECT_EQ(mnist->variables()[4].shape, (ops::Shape{7 * 7 * 64, 1024}));
  EXPECT_EQ(mnist->num_parameters(), 5 * 5 * 32 + 32 + 5 * 5 * 32 * 64 + 64 +
                                         7 * 7 * 64 * 1024 + 1024 + 1024 * 10 + 10);
  auto alexnet = Build("alexnet", ImageConfig(227, 227, 3, 1000, 1.0));
  ASSERT_NE(alexnet, nullptr);
  // 227 -11/4-> 55 -pool-> 27 -pool-> 13 -pool-> 6: fc6 sees 6*6*256 as in tf_cnn_benchmarks.
  EXPECT_EQ(alexnet->variables()[10].shape, (ops::Shape{6 * 6 * 256, 4096}));
  auto vgg = Build("vgg16", ImageConfig(32, 32, 3, 10, 1.0));
  ASSERT_NE(vgg, nullptr);
  EXPECT_EQ(vgg->variables().size(), 2u * 16);  // 13 conv + 3 fc, kernel and bias each
  EXPECT_EQ(vgg->variables()[26].shape, (ops::Shape{512, 4096}));
}

TEST(CnnZooTest, ShapesThatDoNotFitNameTheModelAndLayer) {
  ModelRegistry registry;
  ASSERT_TRUE(RegisterBuiltinModels(&registry).ok());
  // Not an image at all.
  ModelConfig flat;
  flat.input_size = 784;
  flat.input_shape = {784};
  auto not_image = registry.Create("mnist_cnn", flat);
  ASSERT_FALSE(not_image.ok());
  EXPECT_EQ(not_image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_image.status().message(), HasSubstr("mnist_cnn"));
  // A 3x3 image: the second 2x2 VALID pool has a 1x1 input.
  auto tiny = registry.Create("mnist_cnn", ImageConfig(3, 3, 1, 10, 1.0));
  ASSERT_FALSE(tiny.ok());
  EXPECT_THAT(tiny.status().message(), HasSubstr("mnist_cnn: pool2"));
  EXPECT_THAT(tiny.status().message(), HasSubstr("larger than the input"));
  auto small = registry.Create("alexnet", ImageConfig(32, 32, 3, 10, 1.0));
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(small.status().message(), HasSubstr("67x67"));
  // The builder names the layer when a stride is zero or a kernel is larger than a VALID input.
  ConvOptions zero_stride;
  zero_stride.stride = 0;
  auto bad = NetBuilder("m", {8, 8, 1}).Conv("convA", zero_stride).Build(
      LossKind::kSoftmaxCrossEntropy);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("m: convA"));
  ConvOptions big;
  big.kernel_h = big.kernel_w = 9;
  big.padding = ops::Padding::kValid;
  auto too_big = NetBuilder("m", {8, 8, 1}).Conv("convB", big).Build(
      LossKind::kSoftmaxCrossEntropy);
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(too_big.status().message(), HasSubstr("m: convB"));
  // A conv after a dense layer has no image to read.
  auto flat_conv = NetBuilder("m", {8, 8, 1})
                       .Dense("fc", 10, DenseOptions{})
                       .Conv("convC", ConvOptions{})
                       .Build(LossKind::kSoftmaxCrossEntropy);
  ASSERT_FALSE(flat_conv.ok());
  EXPECT_THAT(flat_conv.status().message(), HasSubstr("convC: needs an image"));
}

TEST(DropoutTest, TrainingDropsAndScalesEvaluationPassesThrough) {
  // A model that is just dropout then a fixed identity-like dense layer: the logits are the
  // (dropped) inputs, so the effect of dropout is visible in the loss.
  auto model = NetBuilder("d", {1, 1, 4000})
                   .Dropout("drop", 0.25)
                   .Dense("fc", 2, DenseOptions{})
                   .Build(LossKind::kSoftmaxCrossEntropy);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<ops::Tensor> values = {ops::Tensor::Zeros({4000, 2}), ops::Tensor::Zeros({2})};
  for (int64_t i = 0; i < 4000; ++i) values[0].data()[i * 2] = 1.0f;  // logit 0 = sum of inputs
  ops::Tensor x = ops::Tensor::Filled({1, 4000}, 1e-3f);
  std::vector<int32_t> labels = {0};
  auto grads = ZeroGrads(**model);
  // Evaluation: no dropout, logit 0 = 4.0 exactly.
  auto eval = (*model)->Evaluate(x, labels, values);
  ASSERT_TRUE(eval.ok());
  EXPECT_NEAR(eval->loss_sum, std::log1p(std::exp(-4.0)), 1e-5);
  // Training: the gradient of the input-side kernel row is 0 where dropped and scaled by
  // 1/(1-rate) where kept; about a quarter are dropped; the same seed replays the same mask.
  (*model)->set_seed(3);
  ASSERT_TRUE((*model)->ComputeGradients(x, labels, values, grads).ok());
  int64_t dropped = 0;
  const float g0 = [&] {
    for (int64_t i = 0; i < 4000; ++i) {
      if (grads[0].data()[i * 2] != 0.0f) return grads[0].data()[i * 2];
    }
    return 0.0f;
  }();
  std::vector<float> first(grads[0].flat().begin(), grads[0].flat().end());
  for (int64_t i = 0; i < 4000; ++i) {
    const float g = grads[0].data()[i * 2];
    if (g == 0.0f) {
      ++dropped;
    } else {
      EXPECT_FLOAT_EQ(g, g0);
    }
  }
  EXPECT_GT(dropped, 900);
  EXPECT_LT(dropped, 1100);
  (*model)->set_seed(3);
  ASSERT_TRUE((*model)->ComputeGradients(x, labels, values, grads).ok());
  EXPECT_EQ(std::vector<float>(grads[0].flat().begin(), grads[0].flat().end()), first);
  // The next step draws a different mask.
  ASSERT_TRUE((*model)->ComputeGradients(x, labels, values, grads).ok());
  EXPECT_NE(std::vector<float>(grads[0].flat().begin(), grads[0].flat().end()), first);
}

TEST(WeightDecayTest, AddsHalfSquaredNormToLossAndDecayToGradient) {
  auto model = Build("cifar10_cnn", ImageConfig(8, 8, 3, 3, 1.0 / 16));
  ASSERT_NE(model, nullptr);
  auto values = InitValues(*model, 2);
  ops::Tensor x = Random({2, 8 * 8 * 3}, 4, 0.0f, 1.0f);
  std::vector<int32_t> labels = {0, 2};
  auto with = ZeroGrads(*model);
  auto without = ZeroGrads(*model);
  auto loss_with = model->ComputeGradients(x, labels, values, with);
  model->set_weight_decay_override(0.0);
  auto loss_without = model->ComputeGradients(x, labels, values, without);
  ASSERT_TRUE(loss_with.ok() && loss_without.ok());
  double expected_extra = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& n = model->variables()[i].name;
    const float wd = n == "local3/kernel" || n == "local4/kernel" ? 0.004f : 0.0f;
    for (int64_t j = 0; j < values[i].num_elements(); ++j) {
      const double v = values[i].data()[j];
      expected_extra += 0.5 * wd * v * v;
      EXPECT_NEAR(with[i].data()[j], without[i].data()[j] + wd * v, 1e-6) << n << " " << j;
    }
  }
  EXPECT_NEAR(*loss_with - *loss_without, expected_extra, 1e-5);
}

}  // namespace
}  // namespace fulcrum::models
