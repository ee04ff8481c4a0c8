// The spatial-transformer models: the layer lists and parameter counts of `stn` and of its deeper
// variant `stn_deep` (the HKUST study's "model size" by depth: one more conv+pool block in the
// classifier), and both training on the real Fashion-MNIST files of Debian's
// dataset-fashion-mnist package until their loss falls. Their composed gradients are checked
// against finite differences in cnn_test.cc.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "data/mnist.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/registry.h"
#include "ops/initializer.h"

namespace fulcrum::models {
namespace {

using ::testing::HasSubstr;

ModelConfig Image(int64_t h, int64_t w, double width = 1.0) {
  return ModelConfig{
      .input_size = h * w, .num_classes = 10, .width = width, .input_shape = {h, w, 1}};
}

absl::StatusOr<std::unique_ptr<Model>> Create(const std::string& name, const ModelConfig& c) {
  ModelRegistry registry;
  if (absl::Status s = RegisterBuiltinModels(&registry); !s.ok()) return s;
  return registry.Create(name, c);
}

std::vector<std::string> NamesAndShapes(const Model& model) {
  std::vector<std::string> names;
  for (const auto& v : model.variables()) names.push_back(v.name + v.shape.ToString());
  return names;
}

// The localisation net both models share, on a 28x28x1 image: conv7x7x8-pool-conv5x5x10-pool
// (28 -> 14 -> 7) -fc32-theta.
std::vector<std::string> Localisation() {
  return {"st/loc_conv1/kernel[7, 7, 1, 8]",  "st/loc_conv1/bias[8]",
          "st/loc_conv2/kernel[5, 5, 8, 10]", "st/loc_conv2/bias[10]",
          "st/loc_fc/kernel[490, 32]",        "st/loc_fc/bias[32]",
          "st/theta/kernel[32, 6]",           "st/theta/bias[6]"};
}
constexpr int64_t kLocalisationParams =
    7 * 7 * 8 + 8 + 5 * 5 * 8 * 10 + 10 + 490 * 32 + 32 + 32 * 6 + 6;

TEST(StnModelsTest, StnLayersAndParameterCount) {
  auto stn = Create("stn", Image(28, 28));
  ASSERT_TRUE(stn.ok()) << stn.status();
  std::vector<std::string> expected = Localisation();
  for (const char* v :
       {"conv1/kernel[5, 5, 1, 32]", "conv1/bias[32]", "conv2/kernel[5, 5, 32, 64]",
        "conv2/bias[64]", "dense1/kernel[3136, 1024]", "dense1/bias[1024]",  // 7x7x64 after pool2
        "logits/kernel[1024, 10]", "logits/bias[10]"}) {
    expected.push_back(v);
  }
  EXPECT_EQ(NamesAndShapes(**stn), expected);
  EXPECT_EQ((*stn)->num_parameters(), kLocalisationParams + 5 * 5 * 32 + 32 + 5 * 5 * 32 * 64 + 64 +
                                          7 * 7 * 64 * 1024 + 1024 + 1024 * 10 + 10);
  EXPECT_EQ((*stn)->num_parameters(), 3292954);  // as docs/models.md says
}

// stn_deep is stn with conv5x5x128(+ReLU)-pool2 after pool2: 28 -> 14 -> 7 -> 3 (VALID), so
// dense1 reads 3x3x128 = 1152 values instead of 3136, and the model has fewer parameters.
TEST(StnModelsTest, StnDeepAddsAConvPoolBlockToTheClassifier) {
  auto deep = Create("stn_deep", Image(28, 28));
  ASSERT_TRUE(deep.ok()) << deep.status();
  EXPECT_EQ((*deep)->name(), "stn_deep");
  std::vector<std::string> expected = Localisation();
  for (const char* v : {"conv1/kernel[5, 5, 1, 32]", "conv1/bias[32]", "conv2/kernel[5, 5, 32, 64]",
                        "conv2/bias[64]", "conv3/kernel[5, 5, 64, 128]", "conv3/bias[128]",
                        "dense1/kernel[1152, 1024]", "dense1/bias[1024]", "logits/kernel[1024, 10]",
                        "logits/bias[10]"}) {
    expected.push_back(v);
  }
  EXPECT_EQ(NamesAndShapes(**deep), expected);
  EXPECT_EQ((*deep)->num_parameters(), kLocalisationParams + 5 * 5 * 32 + 32 + 5 * 5 * 32 * 64 +
                                           64 + 5 * 5 * 64 * 128 + 128 + 3 * 3 * 128 * 1024 + 1024 +
                                           1024 * 10 + 10);
  EXPECT_EQ((*deep)->num_parameters(), 1466266);  // as docs/models.md says
  // Layers: the transformer, then conv1 pool1 conv2 pool2 conv3 pool3 dense1 logits.
  std::vector<std::string> layers;
  for (const auto& l : (*deep)->layers()) layers.push_back(l->name());
  EXPECT_EQ(layers, (std::vector<std::string>{"st", "conv1", "pool1", "conv2", "pool2", "conv3",
                                              "pool3", "dense1", "logits"}));
  EXPECT_EQ((*deep)->layers()[6]->output_size(), 3 * 3 * 128);
  // --model_width scales the new block's filters as every other hidden width.
  auto half = Create("stn_deep", Image(28, 28, 0.5));
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ((*half)->variables()[12].name, "conv3/kernel");
  EXPECT_EQ((*half)->variables()[12].shape, (ops::Shape{5, 5, 32, 64}));
}

TEST(StnModelsTest, StnDeepNeedsImagesForThreePools) {
  EXPECT_TRUE(Create("stn_deep", Image(8, 8)).ok());
  EXPECT_TRUE(Create("stn", Image(7, 7)).ok());
  auto small = Create("stn_deep", Image(7, 7));
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(small.status().message(), HasSubstr("'stn_deep' needs images of at least 8x8"));
  ModelConfig flat;
  flat.input_shape = {784};
  auto not_image = Create("stn_deep", flat);
  ASSERT_FALSE(not_image.ok());
  EXPECT_THAT(not_image.status().message(), HasSubstr("stn_deep"));
}

class StnTrainingTest : public ::testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(BothDepths, StnTrainingTest, ::testing::Values("stn", "stn_deep"),
                         [](const auto& info) { return std::string(info.param); });

// Plain SGD from the declared initializers on consecutive batches of the real training set,
// one thread: the training loss and the loss on 256 held-out test images both fall.
TEST_P(StnTrainingTest, LossFallsOnFashionMnist) {
  if (!std::filesystem::exists(data::kDefaultMnistDir)) {
    GTEST_SKIP() << data::kDefaultMnistDir << " is not installed (dataset-fashion-mnist)";
  }
  auto train = data::LoadMnistFormat(data::kDefaultMnistDir, data::Split::kTrain);
  auto test = data::LoadMnistFormat(data::kDefaultMnistDir, data::Split::kTest);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(test.ok()) << test.status();
  auto model = Create(GetParam(), Image(28, 28));
  ASSERT_TRUE(model.ok()) << model.status();
  Model& m = **model;
  std::vector<ops::Tensor> values, grads;
  uint64_t seed = 1;
  for (const auto& spec : m.variables()) {
    values.push_back(ops::Tensor::Zeros(spec.shape));
    ASSERT_TRUE(ops::Initialize(spec.initializer, seed++, &values.back()).ok());
    grads.push_back(ops::Tensor::Zeros(spec.shape));
  }
  auto as_rows = [](const data::Dataset& d, int64_t begin, int64_t n) {
    auto rows = d.images.Rows(begin, begin + n).Reshaped({n, d.example_size()});
    EXPECT_TRUE(rows.ok()) << rows.status();
    return *rows;
  };
  const int64_t kHeldOut = 256;
  const ops::Tensor held_out = as_rows(*test, 0, kHeldOut);
  const std::span<const int32_t> held_labels(test->labels.data(), kHeldOut);
  auto before = m.Evaluate(held_out, held_labels, values);
  ASSERT_TRUE(before.ok()) << before.status();

  const int kSteps = 150, kBatch = 32, kWindow = 10;
  const float kLearningRate = 0.05f;
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    const int64_t begin = int64_t{step} * kBatch;
    auto loss = m.ComputeGradients(as_rows(*train, begin, kBatch),
                                   std::span(train->labels).subspan(begin, kBatch), values, grads);
    ASSERT_TRUE(loss.ok()) << loss.status();
    losses.push_back(*loss);
    for (size_t i = 0; i < values.size(); ++i) {
      float* v = values[i].data();
      const float* g = grads[i].data();
      for (int64_t j = 0; j < values[i].num_elements(); ++j) v[j] -= kLearningRate * g[j];
    }
  }
  auto mean = [](auto first, auto last) {
    return std::accumulate(first, last, 0.0) / static_cast<double>(last - first);
  };
  const double first = mean(losses.begin(), losses.begin() + kWindow);
  const double last = mean(losses.end() - kWindow, losses.end());
  auto after = m.Evaluate(held_out, held_labels, values);
  ASSERT_TRUE(after.ok()) << after.status();
  const double loss_before = before->loss_sum / kHeldOut, loss_after = after->loss_sum / kHeldOut;
  std::printf(
      "%s: train loss %.3f (first %d steps) -> %.3f (last %d); held-out loss %.3f -> "
      "%.3f, accuracy %.3f\n",
      GetParam(), first, kWindow, last, kWindow, loss_before, loss_after,
      static_cast<double>(after->correct) / kHeldOut);
  EXPECT_LT(last, 0.75 * first);
  EXPECT_LT(loss_after, 0.75 * loss_before);
  EXPECT_GT(after->correct, kHeldOut * 2 / 5);  // 40 %; chance is 10 %
}

}  // namespace
}  // namespace fulcrum::models
