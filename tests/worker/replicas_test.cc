// In-graph replication on CPU devices: two or three replicas, each on its slice of the batch,
// give the full batch's mean-loss gradient (the weighted average of the slices' gradients),
// for a dense and a convolutional model and a batch that does not divide evenly; one device is
// the model alone; GPU devices and batches smaller than the device count are refused naming
// the flag.
#include "worker/replicas.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "data/load.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/initializer.h"
#include "runtime/config/flags.h"
#include "worker/setup.h"

namespace fulcrum::worker {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

runtime::TrainingOptions Options(const std::string& model, std::vector<int64_t> shape) {
  runtime::TrainingOptions t;
  t.model = model;
  t.model_width = 0.125;
  t.dataset = data::DatasetKind::kSynthetic;
  t.synthetic_examples = 64;
  t.synthetic_shape = std::move(shape);
  t.synthetic_classes = 5;
  t.batch_size = 7;
  t.threads = 2;
  t.seed = 3;
  return t;
}

struct Case {
  const char* model;
  std::vector<int64_t> shape;
  int devices;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " on " << c.devices; }

class ReplicasTest : public ::testing::TestWithParam<Case> {};

INSTANTIATE_TEST_SUITE_P(Models, ReplicasTest,
                         ::testing::Values(Case{"mlp", {6, 6, 1}, 2}, Case{"mlp", {6, 6, 1}, 3},
                                           Case{"cifar10_cnn", {9, 9, 3}, 2}),
                         [](const auto& info) {
                           return std::string(info.param.model) + "_" +
                                  std::to_string(info.param.devices);
                         });

TEST_P(ReplicasTest, AveragedSliceGradientsEqualTheFullBatchGradient) {
  const Case& c = GetParam();
  runtime::TrainingOptions t = Options(c.model, c.shape);
  auto train = data::LoadSplit(runtime::DataSource(t), data::Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  auto single = Replicas::Create(t, *train, 0);
  ASSERT_TRUE(single.ok()) << single.status();
  for (int d = 0; d < c.devices; ++d) t.devices.push_back({ops::Device::kCpu, d});
  auto replicated = Replicas::Create(t, *train, 0);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  ASSERT_EQ((*replicated)->devices().size(), static_cast<size_t>(c.devices));

  const auto& specs = (*single)->model().variables();
  std::vector<ops::Tensor> values, full, split;
  uint64_t seed = 10;
  for (const auto& spec : specs) {
    ops::Tensor v = ops::Tensor::Zeros(spec.shape);
    ASSERT_TRUE(ops::Initialize(spec.initializer, seed++, &v).ok());
    if (spec.shape.rank() == 1) {  // non-zero biases
      for (int64_t i = 0; i < v.num_elements(); ++i)
        v.data()[i] = 0.01f * static_cast<float>(i % 7);
    }
    values.push_back(v);
    full.push_back(ops::Tensor::Zeros(spec.shape));
    split.push_back(ops::Tensor::Filled(spec.shape, 123.0f));  // overwritten, not added to
  }
  const int64_t batch = t.batch_size;
  ops::Tensor inputs = train->images.Rows(0, batch).Clone();
  std::vector<int32_t> labels(train->labels.begin(), train->labels.begin() + batch);

  auto full_loss = (*single)->ComputeGradients(inputs, labels, values, full, nullptr);
  ASSERT_TRUE(full_loss.ok()) << full_loss.status();
  double forward_ms = -1;
  auto split_loss = (*replicated)->ComputeGradients(inputs, labels, values, split, &forward_ms);
  ASSERT_TRUE(split_loss.ok()) << split_loss.status();
  EXPECT_GE(forward_ms, 0.0);
  EXPECT_NEAR(*split_loss, *full_loss, 1e-5 * (1 + std::abs(*full_loss)));
  for (size_t i = 0; i < full.size(); ++i) {
    double max_abs = 0, max_diff = 0;
    for (int64_t j = 0; j < full[i].num_elements(); ++j) {
      max_abs = std::max(max_abs, static_cast<double>(std::abs(full[i].data()[j])));
      max_diff =
          std::max(max_diff, static_cast<double>(std::abs(full[i].data()[j] - split[i].data()[j])));
    }
    EXPECT_LE(max_diff, 1e-5 * (1 + max_abs)) << specs[i].name;
    EXPECT_GT(max_abs, 0.0) << specs[i].name << ": a gradient that is all zero checks nothing";
  }
}

// A GPU this machine does not have (gpu:255: past the last GPU of any machine; any GPU on one
// without a usable driver or in a build without CUDA) is refused naming the flag and why.
TEST(ReplicasErrorsTest, MissingGpusAndTinyBatchesAreRefusedNamingTheFlag) {
  runtime::TrainingOptions t = Options("mlp", {6, 6, 1});
  t.devices = {{ops::Device::kCpu, 0}, {ops::Device::kCuda, 255}};
  auto gpu = ComputeDevices(t);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(gpu.status().message(), HasSubstr("--devices: gpu:255"));
  EXPECT_THAT(gpu.status().message(),
              AnyOf(HasSubstr("does not exist: this machine has"), HasSubstr("no usable GPU"),
                    HasSubstr("this build has no GPU backend")));
  t.devices.clear();
  t.device = {ops::Device::kCuda, 255};
  auto one_gpu = ComputeDevices(t);
  ASSERT_FALSE(one_gpu.ok());
  EXPECT_THAT(one_gpu.status().message(), HasSubstr("--device: gpu:255"));
  t.device = {};
  for (int d = 0; d < 8; ++d) t.devices.push_back({ops::Device::kCpu, d});
  auto tiny = ComputeDevices(t);
  ASSERT_FALSE(tiny.ok());
  EXPECT_THAT(tiny.status().message(), HasSubstr("--batch_size=7 is smaller than the 8 devices"));
  EXPECT_EQ(DeviceNames(t).size(), 8u);
  EXPECT_EQ(DeviceNames(t)[7], "cpu:7");
}

}  // namespace
}  // namespace fulcrum::worker
