#include "models/model.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/registry.h"
#include "ops/initializer.h"
#include "tests/testing/gradient_check.h"

namespace fulcrum::models {
namespace {

using ::fulcrum::testing::ExpectGradientMatches;
using ::fulcrum::testing::Random;

std::unique_ptr<Model> Build(const std::string& name, const ModelConfig& config) {
  ModelRegistry registry;
  EXPECT_TRUE(RegisterBuiltinModels(&registry).ok());
  auto model = registry.Create(name, config);
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(model).value();
}

std::vector<ops::Tensor> InitValues(const Model& model, uint64_t seed) {
  std::vector<ops::Tensor> values;
  for (const auto& spec : model.variables()) {
    ops::Tensor t = ops::Tensor::Zeros(spec.shape);
    EXPECT_TRUE(ops::Initialize(spec.initializer, seed++, &t).ok());
    // Non-zero biases so their gradients are exercised away from the start point.
    if (spec.shape.rank() == 1) testing::FillUniform(&t, seed++, -0.1f, 0.1f);
    values.push_back(std::move(t));
  }
  return values;
}

TEST(RegistryTest, DeclaresTheDocumentedVariables) {
  auto mlp = Build("mlp", {});
  std::vector<std::string> names;
  for (const auto& v : mlp->variables()) names.push_back(v.name + v.shape.ToString());
  EXPECT_EQ(names, (std::vector<std::string>{"dense_0/kernel[784, 256]", "dense_0/bias[256]",
                                             "dense_1/kernel[256, 128]", "dense_1/bias[128]",
                                             "dense_2/kernel[128, 10]", "dense_2/bias[10]"}));
  auto logreg = Build("logreg", {});
  EXPECT_EQ(logreg->num_parameters(), 784 * 10 + 10);
  auto ae = Build("autoencoder", {});
  EXPECT_EQ(ae->output_size(), 784);
  EXPECT_FALSE(ae->has_accuracy());
  // The width knob scales hidden layers only.
  auto wide = Build("autoencoder", {.input_size = 784, .num_classes = 10, .width = 2.0});
  EXPECT_EQ(wide->variables()[0].shape, (ops::Shape{784, 512}));
  EXPECT_EQ(wide->output_size(), 784);
}

TEST(RegistryTest, UnknownModelListsChoices) {
  ModelRegistry registry;
  ASSERT_TRUE(RegisterBuiltinModels(&registry).ok());
  auto bad = registry.Create("resnet", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("logreg"), std::string::npos);
  EXPECT_FALSE(registry.Register("mlp", "dup", nullptr).ok());
  EXPECT_FALSE(registry.Create("mlp", {.input_size = 0}).ok());
}

class ModelGradientTest : public ::testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(AllModels, ModelGradientTest,
                         ::testing::Values("logreg", "mlp", "autoencoder"),
                         [](const auto& info) { return std::string(info.param); });

// Whole-model gradient (every layer's backward composed) against finite differences of the
// loss, on a small input size and width so every element can be checked.
TEST_P(ModelGradientTest, EveryVariableMatchesFiniteDifferences) {
  const ModelConfig config{.input_size = 13, .num_classes = 5, .width = 0.05};
  auto model = Build(GetParam(), config);
  auto values = InitValues(*model, 7);
  const int64_t batch = 6;
  ops::Tensor inputs = Random({batch, 13}, 3, 0.0f, 1.0f);
  std::vector<int32_t> labels = {0, 1, 2, 3, 4, 1};
  std::vector<ops::Tensor> grads;
  for (const auto& spec : model->variables()) grads.push_back(ops::Tensor::Zeros(spec.shape));
  ASSERT_TRUE(model->ComputeGradients(inputs, labels, values, grads).ok());
  auto loss = [&] {
    auto e = model->Evaluate(inputs, labels, values);
    EXPECT_TRUE(e.ok());
    return e->loss_sum / static_cast<double>(e->examples);
  };
  for (size_t i = 0; i < values.size(); ++i) {
    ExpectGradientMatches(&values[i], grads[i], loss, model->variables()[i].name, 1e-2, 2e-2, 2e-4);
  }
}

TEST_P(ModelGradientTest, LossMatchesEvaluate) {
  auto model = Build(GetParam(), {.input_size = 20, .num_classes = 4, .width = 0.1});
  auto values = InitValues(*model, 1);
  ops::Tensor inputs = Random({8, 20}, 2, 0.0f, 1.0f);
  std::vector<int32_t> labels = {0, 1, 2, 3, 0, 1, 2, 3};
  std::vector<ops::Tensor> grads;
  for (const auto& spec : model->variables()) grads.push_back(ops::Tensor::Zeros(spec.shape));
  auto loss = model->ComputeGradients(inputs, labels, values, grads);
  ASSERT_TRUE(loss.ok());
  // Evaluate on another batch size (a second workspace), then the same batch again.
  ASSERT_TRUE(model->Evaluate(inputs.Rows(0, 3), std::span(labels).subspan(0, 3), values).ok());
  auto eval = model->Evaluate(inputs, labels, values);
  ASSERT_TRUE(eval.ok());
  EXPECT_NEAR(*loss, eval->loss_sum / 8, 1e-6);
}

TEST(ModelTest, RejectsMismatchedOperands) {
  auto model = Build("logreg", {});
  auto values = InitValues(*model, 1);
  std::vector<ops::Tensor> grads = {ops::Tensor::Zeros({784, 10}), ops::Tensor::Zeros({10})};
  ops::Tensor wrong_inputs = ops::Tensor::Zeros({4, 100});
  std::vector<int32_t> labels = {0, 1, 2, 3};
  auto s = model->ComputeGradients(wrong_inputs, labels, values, grads);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("784"), std::string::npos);
  std::vector<ops::Tensor> one_value = {values[0]};
  EXPECT_FALSE(model->Evaluate(ops::Tensor::Zeros({4, 784}), labels, one_value).ok());
}

// The layer hooks (what --overlap hangs on): each layer with variables asks for its values
// before its forward in layer order, forward_done comes once with the loss, each layer's
// gradients are handed over after its backward, last layer first, and everything computed
// is bit for bit what the call computes without hooks (weight decay included).
TEST(ModelTest, LayerHooksComeInOrderAndChangeNothing) {
  auto model = Build("mlp", {.input_size = 13, .num_classes = 5, .width = 0.05});
  model->set_weight_decay_override(0.05);
  const auto values = InitValues(*model, 11);
  const ops::Tensor inputs = Random({6, 13}, 5, 0.0f, 1.0f);
  const std::vector<int32_t> labels = {0, 1, 2, 3, 4, 1};
  const auto zeros = [&] {
    std::vector<ops::Tensor> g;
    for (const auto& spec : model->variables()) g.push_back(ops::Tensor::Zeros(spec.shape));
    return g;
  };
  std::vector<ops::Tensor> plain = zeros(), hooked = zeros();
  model->set_seed(3);
  auto loss = model->ComputeGradients(inputs, labels, values, plain);
  ASSERT_TRUE(loss.ok()) << loss.status();

  std::vector<std::string> calls;
  float forward_loss = 0.0f;
  LayerHooks hooks;
  hooks.values_needed = [&](size_t first, size_t count) {
    calls.push_back("values " + std::to_string(first) + "+" + std::to_string(count));
    return absl::OkStatus();
  };
  hooks.forward_done = [&](float l) {
    forward_loss = l;
    calls.push_back("forward done");
    return absl::OkStatus();
  };
  hooks.gradients_ready = [&](size_t first, size_t count) {
    calls.push_back("grads " + std::to_string(first) + "+" + std::to_string(count));
    // Final when handed over: what the call without hooks ends with.
    for (size_t i = first; i < first + count; ++i) {
      EXPECT_TRUE(std::ranges::equal(hooked[i].flat(), plain[i].flat()))
          << model->variables()[i].name;
    }
  };
  model->set_seed(3);
  auto hooked_loss = model->ComputeGradients(inputs, labels, values, hooked, nullptr, &hooks);
  ASSERT_TRUE(hooked_loss.ok()) << hooked_loss.status();
  EXPECT_EQ(*hooked_loss, *loss);
  EXPECT_GT(*loss, forward_loss);  // the weight decay comes on top
  EXPECT_EQ(calls,
            (std::vector<std::string>{"values 0+2", "values 2+2", "values 4+2", "forward done",
                                      "grads 4+2", "grads 2+2", "grads 0+2"}));
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(std::ranges::equal(hooked[i].flat(), plain[i].flat())) << i;
  }
}

// A hook's error ends the call with it; one from forward_done leaves the gradients unwritten.
TEST(ModelTest, AHookErrorEndsTheCall) {
  auto model = Build("mlp", {.input_size = 13, .num_classes = 5, .width = 0.05});
  const auto values = InitValues(*model, 11);
  const ops::Tensor inputs = Random({6, 13}, 5, 0.0f, 1.0f);
  const std::vector<int32_t> labels = {0, 1, 2, 3, 4, 1};
  std::vector<ops::Tensor> grads;
  for (const auto& spec : model->variables()) grads.push_back(ops::Tensor::Filled(spec.shape, 7));
  LayerHooks hooks;
  int ready = 0;
  hooks.forward_done = [](float) { return absl::CancelledError("dropped"); };
  hooks.gradients_ready = [&](size_t, size_t) { ++ready; };
  auto r = model->ComputeGradients(inputs, labels, values, grads, nullptr, &hooks);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(ready, 0);
  for (const ops::Tensor& g : grads) {
    for (const float x : g.flat()) ASSERT_EQ(x, 7.0f);
  }
  hooks.forward_done = nullptr;
  hooks.values_needed = [](size_t first, size_t) {
    return first == 2 ? absl::UnavailableError("ps:0 gone") : absl::OkStatus();
  };
  r = model->ComputeGradients(inputs, labels, values, grads, nullptr, &hooks);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace fulcrum::models
