// tests: single mode's device-resident store (worker/device_variable_store.h) and the copy
// accounting, on the arena backend (ops/arena_backend.h: host memory posing as a device, every
// copy across counted), so that what a GPU worker would copy per step is checked without a GPU.
// The device store trains bit for bit as the host store does, for every optimizer, with
// learning-rate and weight decay; after the first step a step allocates nothing on the device,
// copies only its batch in and only the loss (and weight-decay sums) out; the cluster path's
// per-step copies are the values in and the gradients out, no more. No timing assertions.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/model.h"
#include "ops/arena_backend.h"
#include "ops/tensor.h"
#include "ps/shard.h"
#include "runtime/client/sharded_variables.h"
#include "runtime/cluster/placement.h"
#include "runtime/cluster/shard_defs.h"
#include "runtime/config/flags.h"
#include "tests/testing/in_process_ps_client.h"
#include "worker/device_variable_store.h"
#include "worker/local_variable_store.h"
#include "worker/setup.h"
#include "worker/sharded_variable_store.h"
#include "worker/train_loop.h"

namespace fulcrum::worker {
namespace {

constexpr int64_t kBatch = 16;

runtime::TrainingOptions Options(const std::string& model, ops::OptimizerKind kind) {
  runtime::TrainingOptions t;
  t.model = model;
  t.dataset = data::DatasetKind::kSynthetic;
  t.synthetic_examples = 512;
  t.synthetic_shape =
      model == "cifar10_cnn" ? std::vector<int64_t>{24, 24, 3} : std::vector<int64_t>{28, 28, 1};
  t.synthetic_classes = 10;
  t.batch_size = kBatch;
  t.optimizer.kind = kind;
  t.optimizer.learning_rate = kind == ops::OptimizerKind::kSgd ? 0.05f : 0.01f;
  t.optimizer.lr_decay_rate = 0.5f;  // the decay runs on the device too
  t.optimizer.lr_decay_steps = 3;
  t.seed = 11;
  return t;
}

std::vector<float> Flat(std::span<const ops::Tensor> tensors) {
  std::vector<float> out;
  for (const ops::Tensor& t : tensors) out.insert(out.end(), t.flat().begin(), t.flat().end());
  return out;
}

struct Trained {
  std::vector<profiler::StepRecord> steps;
  std::vector<float> values;
};

// `steps` steps of single-mode training on the host store (CPU model) or the device store
// (the model on an arena backend).
Trained Train(const runtime::TrainingOptions& t, bool on_arena, int64_t steps) {
  Trained out;
  auto train = data::LoadSplit(runtime::DataSource(t), data::Split::kTrain);
  EXPECT_TRUE(train.ok()) << train.status();
  auto model = BuildModel(t, *train, nullptr);
  EXPECT_TRUE(model.ok()) << model.status();
  auto batcher = data::Batcher::Create(&*train, BatcherOptionsFor(t, 0, 1));
  EXPECT_TRUE(batcher.ok()) << batcher.status();
  ops::ArenaBackend arena;
  std::unique_ptr<VariableStore> store;
  DeviceVariableStore* device = nullptr;
  if (on_arena) {
    (*model)->set_backend(&arena);
    auto made = DeviceVariableStore::Create((*model)->variables(), t.optimizer, t.seed, &arena);
    EXPECT_TRUE(made.ok()) << made.status();
    device = made->get();
    store = std::move(*made);
  } else {
    auto made = LocalVariableStore::Create((*model)->variables(), t.optimizer, t.seed);
    EXPECT_TRUE(made.ok()) << made.status();
    store = std::make_unique<LocalVariableStore>(std::move(*made));
  }
  TrainLoop loop({.target_global_steps = steps, .log_every = 1000}, model->get(),
                 std::move(*batcher), store.get(), nullptr);
  auto result = loop.Run();
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return out;
  out.steps = result->steps;
  if (device != nullptr) {
    auto host = device->HostValues();
    EXPECT_TRUE(host.ok()) << host.status();
    out.values = Flat(*host);
  } else {
    out.values = Flat(store->values());
  }
  return out;
}

class DeviceStoreTest : public ::testing::TestWithParam<ops::OptimizerKind> {};

// mnist_cnn (convolutions, pooling, dropout, dense layers) with each optimizer and
// learning-rate decay: every step's loss and the final values equal the host store's bit for
// bit, and the copies per step are the batch in and the loss out.
TEST_P(DeviceStoreTest, TrainsBitIdenticallyAndMovesOnlyTheBatchAndTheLoss) {
  const runtime::TrainingOptions t = Options("mnist_cnn", GetParam());
  constexpr int64_t kSteps = 6;
  const Trained host = Train(t, /*on_arena=*/false, kSteps);
  const Trained device = Train(t, /*on_arena=*/true, kSteps);
  ASSERT_EQ(host.steps.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(device.steps.size(), static_cast<size_t>(kSteps));
  for (size_t i = 0; i < host.steps.size(); ++i) {
    EXPECT_EQ(host.steps[i].loss, device.steps[i].loss) << "step " << i + 1;
    // The host store copies nothing anywhere.
    EXPECT_EQ(host.steps[i].h2d_bytes + host.steps[i].d2h_bytes + host.steps[i].device_allocs, 0);
  }
  ASSERT_EQ(host.values.size(), device.values.size());
  EXPECT_EQ(
      std::memcmp(host.values.data(), device.values.data(), host.values.size() * sizeof(float)), 0)
      << "the device store's values differ from the host store's";
  // The first step allocates the workspace; every later one nothing, the batch (images and
  // labels) in, the loss out.
  EXPECT_GT(device.steps[0].device_allocs, 0);
  const int64_t batch_bytes = kBatch * 28 * 28 * 1 * 4 + kBatch * 4;
  for (size_t i = 1; i < device.steps.size(); ++i) {
    const profiler::StepRecord& r = device.steps[i];
    EXPECT_EQ(r.device_allocs, 0) << "step " << r.step;
    EXPECT_EQ(r.h2d_bytes, batch_bytes) << "step " << r.step;
    EXPECT_EQ(r.d2h_bytes, 4) << "step " << r.step;
    EXPECT_LE(r.d2h_bytes, 64) << "step " << r.step;
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DeviceStoreTest,
                         ::testing::Values(ops::OptimizerKind::kSgd, ops::OptimizerKind::kMomentum,
                                           ops::OptimizerKind::kAdam, ops::OptimizerKind::kAdagrad,
                                           ops::OptimizerKind::kRmsProp),
                         [](const auto& info) { return ops::OptimizerName(info.param); });

// cifar10_cnn decays two kernels (L2 weight decay, added on the device): still bit-identical,
// and each decayed variable's sum of squares (8 bytes) comes out beside the loss.
TEST(DeviceStoreWeightDecayTest, WeightDecayRunsOnTheDeviceAndOnlyItsSumsComeOut) {
  const runtime::TrainingOptions t = Options("cifar10_cnn", ops::OptimizerKind::kMomentum);
  const Trained host = Train(t, false, 3);
  const Trained device = Train(t, true, 3);
  ASSERT_EQ(device.steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(host.steps[i].loss, device.steps[i].loss);
  EXPECT_EQ(host.values, device.values);
  const profiler::StepRecord& r = device.steps[2];
  EXPECT_EQ(r.device_allocs, 0);
  EXPECT_EQ(r.h2d_bytes, kBatch * 24 * 24 * 3 * 4 + kBatch * 4);
  EXPECT_EQ(r.d2h_bytes, 4 + 2 * 8);  // the loss and local3's and local4's decay sums
}

// A model given values some of which live on the device and some on the host is refused,
// naming the variable, before anything runs.
TEST(DeviceStoreMixedTest, MixedValuesAreRefusedNamingTheVariable) {
  const runtime::TrainingOptions t = Options("mlp", ops::OptimizerKind::kSgd);
  auto train = data::LoadSplit(runtime::DataSource(t), data::Split::kTrain);
  ASSERT_TRUE(train.ok());
  auto model = BuildModel(t, *train, nullptr);
  ASSERT_TRUE(model.ok());
  ops::ArenaBackend arena;
  (*model)->set_backend(&arena);
  auto store = DeviceVariableStore::Create((*model)->variables(), t.optimizer, t.seed, &arena);
  ASSERT_TRUE(store.ok());
  std::vector<ops::Tensor> values((*store)->values().begin(), (*store)->values().end());
  values[1] = ops::Tensor::Zeros(values[1].shape());  // one on the host
  const ops::Tensor inputs = ops::Tensor::Zeros({kBatch, 28 * 28});
  const std::vector<int32_t> labels(kBatch, 0);
  auto loss = (*model)->ComputeGradients(inputs, labels, values, (*store)->grads());
  ASSERT_FALSE(loss.ok());
  EXPECT_NE(std::string(loss.status().message())
                .find("the value of " + (*model)->variables()[1].name + " is in cpu memory"),
            std::string::npos)
      << loss.status();
}

// The cluster path on a device (values from the ps tasks, held on the host): per step after
// the first, every value goes in once and every gradient comes out once, plus the batch and
// the loss; nothing is allocated.
TEST(DeviceStoreClusterTest, TheClusterPathCopiesEachValueInAndEachGradientOutOnce) {
  runtime::TrainingOptions t = Options("mlp", ops::OptimizerKind::kSgd);
  auto train = data::LoadSplit(runtime::DataSource(t), data::Split::kTrain);
  ASSERT_TRUE(train.ok());
  auto model = BuildModel(t, *train, nullptr);
  ASSERT_TRUE(model.ok());
  ops::ArenaBackend arena;
  (*model)->set_backend(&arena);
  std::vector<runtime::VariableInfo> infos;
  std::vector<ops::Shape> shapes;
  int64_t value_bytes = 0;
  for (const auto& v : (*model)->variables()) {
    infos.push_back({v.name, v.shape, v.initializer});
    shapes.push_back(v.shape);
    value_bytes += v.shape.num_elements() * 4;
  }
  auto placement = runtime::PlaceVariables(infos, 1, runtime::PlacementStrategy::kPartition, 128);
  ASSERT_TRUE(placement.ok());
  runtime::ShardDefOptions def;
  def.run_id = "device-store-test";
  def.optimizer = t.optimizer;
  def.mode = runtime::ModeToProto(runtime::SyncMode::kAsync);
  def.chunk_bytes = 1 << 20;
  def.seed = t.seed;
  ps::Shard shard(0);
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(
      shard.CreateVariables(runtime::ShardDefinition(*placement, infos, 0, def), &created).ok());
  fulcrum::testing::InProcessPsClient client(&shard);
  std::vector<runtime::PsClient*> clients = {&client};
  runtime::ShardedVariables sharded(*placement, 1 << 20, clients, "worker:0");
  ShardedVariableStore store(&sharded, shapes, runtime::SyncMode::kAsync, absl::Seconds(60));
  auto batcher = data::Batcher::Create(&*train, BatcherOptionsFor(t, 0, 1));
  ASSERT_TRUE(batcher.ok());
  TrainLoop loop({.target_global_steps = 4, .log_every = 1000}, model->get(), std::move(*batcher),
                 &store, nullptr);
  auto result = loop.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->steps.size(), 4u);
  for (size_t i = 1; i < 4; ++i) {
    const profiler::StepRecord& r = result->steps[i];
    EXPECT_EQ(r.device_allocs, 0);
    EXPECT_EQ(r.h2d_bytes, value_bytes + kBatch * 28 * 28 * 4 + kBatch * 4) << "step " << r.step;
    EXPECT_EQ(r.d2h_bytes, value_bytes + 4) << "step " << r.step;
  }
}

}  // namespace
}  // namespace fulcrum::worker
