// tests: worker/train_loop over both variable stores, on the synthetic dataset: the local
// store (single mode) and the sharded store over real ps::Shard objects in this process,
// reached through the in-process PS client (sync and async). Also the loop's stop
// conditions and its step records' phase split, with a small fake store where a real one
// cannot be made to misbehave on purpose. No timing assertions.
#include "worker/train_loop.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ops/tensor.h"
#include "ps/in_process_client.h"
#include "ps/shard.h"
#include "runtime/flags.h"
#include "runtime/placement.h"
#include "runtime/shard_defs.h"
#include "runtime/sharded_variables.h"
#include "worker/local_variable_store.h"
#include "worker/setup.h"
#include "worker/sharded_variable_store.h"

namespace fulcrum::worker {
namespace {

using runtime::SyncMode;

constexpr absl::Duration kTimeout = absl::Seconds(60);
constexpr int64_t kChunkBytes = 256;  // small: every variable spans several chunks

runtime::TrainingOptions Options() {
  runtime::TrainingOptions t;
  t.model = "logreg";
  t.dataset = "synthetic";
  t.synthetic_examples = 4096;
  t.synthetic_shape = {32};
  t.synthetic_classes = 4;
  t.batch_size = 32;
  t.optimizer.kind = ops::OptimizerKind::kSgd;
  t.optimizer.learning_rate = 0.1f;
  t.seed = 7;
  return t;
}

class TrainLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto train = data::LoadSplit(runtime::DataSource(t_), data::Split::kTrain);
    ASSERT_TRUE(train.ok()) << train.status();
    train_ = std::move(*train);
    auto model = BuildModel(t_, train_, nullptr);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }

  data::Batcher MakeBatcher(int worker_index = 0, int num_workers = 1) {
    auto b = data::Batcher::Create(&train_, BatcherOptionsFor(t_, worker_index, num_workers));
    EXPECT_TRUE(b.ok()) << b.status();
    return std::move(*b);
  }

  LocalVariableStore MakeLocalStore() {
    auto store = LocalVariableStore::Create(model_->variables(), t_.optimizer, t_.seed);
    EXPECT_TRUE(store.ok()) << store.status();
    return std::move(*store);
  }

  std::vector<runtime::VariableInfo> Infos() const {
    std::vector<runtime::VariableInfo> infos;
    for (const auto& v : model_->variables()) infos.push_back({v.name, v.shape, v.initializer});
    return infos;
  }
  std::vector<ops::Shape> Shapes() const {
    std::vector<ops::Shape> shapes;
    for (const auto& v : model_->variables()) shapes.push_back(v.shape);
    return shapes;
  }

  // Two PS shards in this process holding the model's variables (the weights partitioned
  // across both), created as the chief creates them.
  void StartPs(SyncMode mode, int replicas_to_aggregate) {
    const auto infos = Infos();
    auto placement = runtime::PlaceVariables(infos, 2, runtime::PlacementStrategy::kPartition, 128);
    ASSERT_TRUE(placement.ok()) << placement.status();
    placement_ = *placement;
    runtime::ShardDefOptions def;
    def.run_id = "train-loop-test";
    def.optimizer = t_.optimizer;
    def.mode = runtime::ModeToProto(mode);
    def.replicas_to_aggregate = replicas_to_aggregate;
    def.chunk_bytes = kChunkBytes;
    def.seed = t_.seed;
    for (int p = 0; p < placement_.num_ps(); ++p) {
      shards_.push_back(std::make_unique<ps::Shard>(p));
      pb::CreateVariablesResponse response;
      ASSERT_TRUE(
          shards_.back()
              ->CreateVariables(runtime::ShardDefinition(placement_, infos, p, def), &response)
              .ok());
      clients_.push_back(std::make_unique<ps::InProcessPsClient>(shards_.back().get()));
    }
  }

  std::unique_ptr<runtime::ShardedVariables> Sharded(const std::string& task) {
    std::vector<runtime::PsClient*> clients;
    for (auto& c : clients_) clients.push_back(c.get());
    return std::make_unique<runtime::ShardedVariables>(placement_, kChunkBytes, clients, task);
  }

  runtime::TrainingOptions t_ = Options();
  data::Dataset train_;
  std::unique_ptr<models::Model> model_;
  runtime::Placement placement_;
  std::vector<std::unique_ptr<ps::Shard>> shards_;
  std::vector<std::unique_ptr<ps::InProcessPsClient>> clients_;
};

double MeanLoss(const std::vector<profiler::StepRecord>& steps, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += steps[i].loss;
  return sum / static_cast<double>(end - begin);
}

std::vector<float> Flat(std::span<const ops::Tensor> tensors) {
  std::vector<float> out;
  for (const ops::Tensor& t : tensors) out.insert(out.end(), t.flat().begin(), t.flat().end());
  return out;
}

TEST_F(TrainLoopTest, LocalStoreLearnsAndStopsAtTheTargetStep) {
  LocalVariableStore store = MakeLocalStore();
  TrainLoop loop({.target_global_steps = 200, .log_every = 50}, model_.get(), MakeBatcher(), &store,
                 nullptr);
  int64_t sunk = 0;
  loop.set_step_sink([&sunk](const profiler::StepRecord&) { ++sunk; });
  auto result = loop.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->steps.size(), 200u);
  EXPECT_EQ(sunk, 200);
  EXPECT_EQ(result->global_step, 200);
  EXPECT_EQ(store.global_step(), 200);
  EXPECT_EQ(result->stop_reason, "reached train_steps");
  EXPECT_GT(result->wall_seconds, 0.0);
  for (size_t i = 0; i < result->steps.size(); ++i) {
    const profiler::StepRecord& r = result->steps[i];
    EXPECT_EQ(r.step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(r.global_step, r.step);  // single mode: local = global
    EXPECT_EQ(r.examples, t_.batch_size);
    EXPECT_EQ(r.pull_ms, 0.0);  // the values were at hand
    EXPECT_EQ(r.sync_wait_ms, 0.0);
  }
  const double first = MeanLoss(result->steps, 0, 20);
  const double last = MeanLoss(result->steps, 180, 200);
  EXPECT_LT(last, 0.8 * first) << "first 20 steps " << first << ", last 20 steps " << last;
}

TEST_F(TrainLoopTest, ThePsStartsFromTheSameValuesAsTheLocalStore) {
  StartPs(SyncMode::kAsync, 0);
  auto sharded = Sharded("worker:0");
  ShardedVariableStore store(sharded.get(), Shapes(), SyncMode::kAsync, kTimeout);
  ASSERT_TRUE(store.Start().ok());
  EXPECT_EQ(store.global_step(), 0);
  EXPECT_EQ(store.StopReason(), "");
  EXPECT_EQ(Flat(store.values()), Flat(MakeLocalStore().values()));
  EXPECT_GT(store.totals().bytes_received, 0);
  EXPECT_EQ(store.totals().pushes, 0);
}

// One async worker over the PS runs the same SGD as single mode: same batches, same start,
// the optimizer applied element by element on the PS.
TEST_F(TrainLoopTest, AsyncShardedStoreTrainsLikeTheLocalStore) {
  StartPs(SyncMode::kAsync, 0);
  auto sharded = Sharded("worker:0");
  ShardedVariableStore store(sharded.get(), Shapes(), SyncMode::kAsync, kTimeout);
  TrainLoop loop({.target_global_steps = 50, .log_every = 10, .log_global_step = true},
                 model_.get(), MakeBatcher(), &store, nullptr);
  auto result = loop.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->steps.size(), 50u);
  EXPECT_EQ(result->global_step, 50);
  EXPECT_EQ(result->steps.back().global_step, 50);
  const TransferTotals& moved = store.totals();
  EXPECT_EQ(moved.pushes, 50 * sharded->num_chunks());
  EXPECT_EQ(moved.dropped, 0);
  EXPECT_EQ(moved.duplicates, 0);
  EXPECT_EQ(moved.retries, 0);
  EXPECT_GT(moved.bytes_sent, 0);

  LocalVariableStore local = MakeLocalStore();
  const std::vector<float> initial = Flat(local.values());
  TrainLoop single({.target_global_steps = 50}, model_.get(), MakeBatcher(), &local, nullptr);
  ASSERT_TRUE(single.Run().ok());
  const std::vector<float> on_ps = Flat(store.values());
  const std::vector<float> here = Flat(local.values());
  ASSERT_EQ(on_ps.size(), here.size());
  EXPECT_NE(on_ps, initial);
  for (size_t i = 0; i < here.size(); ++i) EXPECT_NEAR(on_ps[i], here[i], 1e-5) << i;
}

// Two sync workers on their own threads: every global step aggregates one gradient of each,
// so both see every step and their values stay identical.
TEST_F(TrainLoopTest, SyncShardedStoreAdvancesTheGlobalStepWithTwoWorkers) {
  StartPs(SyncMode::kSync, 2);
  constexpr int64_t kSteps = 30;
  struct Worker {
    std::unique_ptr<runtime::ShardedVariables> sharded;
    std::unique_ptr<ShardedVariableStore> store;
    absl::StatusOr<TrainLoopResult> result;
  };
  std::vector<Worker> workers(2);
  for (int w = 0; w < 2; ++w) {
    workers[w].sharded = Sharded("worker:" + std::to_string(w));
    workers[w].store = std::make_unique<ShardedVariableStore>(workers[w].sharded.get(), Shapes(),
                                                              SyncMode::kSync, kTimeout);
  }
  // Each thread has its own model: a model's scratch buffers are not shared.
  std::vector<std::unique_ptr<models::Model>> models;
  for (int w = 0; w < 2; ++w) models.push_back(*BuildModel(t_, train_, nullptr));
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      TrainLoop loop({.target_global_steps = kSteps, .log_every = 10, .log_global_step = true},
                     models[w].get(), MakeBatcher(w, 2), workers[w].store.get(), nullptr);
      workers[w].result = loop.Run();
    });
  }
  for (auto& t : threads) t.join();
  for (const Worker& w : workers) {
    ASSERT_TRUE(w.result.ok()) << w.result.status();
    ASSERT_EQ(w.result->steps.size(), static_cast<size_t>(kSteps));
    for (int64_t i = 0; i < kSteps; ++i) EXPECT_EQ(w.result->steps[i].global_step, i + 1);
    EXPECT_EQ(w.store->totals().pushes, kSteps * w.sharded->num_chunks());
    EXPECT_EQ(w.store->totals().dropped, 0);
  }
  EXPECT_EQ(Flat(workers[0].store->values()), Flat(workers[1].store->values()));
  EXPECT_NE(Flat(workers[0].store->values()), Flat(MakeLocalStore().values()));
}

// --async_pull=before_step: Refresh reads what other workers applied after this worker's
// PushPull returned; without it (and right after a read) Refresh reads nothing.
TEST_F(TrainLoopTest, RefreshBeforeAStepReadsTheOtherWorkersUpdates) {
  StartPs(SyncMode::kAsync, 0);
  auto sharded_a = Sharded("worker:0");
  auto sharded_b = Sharded("worker:1");
  ShardedVariableStore a(sharded_a.get(), Shapes(), SyncMode::kAsync, kTimeout);
  ShardedVariableStore b(sharded_b.get(), Shapes(), SyncMode::kAsync, kTimeout);
  a.set_pull_before_step(true);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  const std::vector<float> initial = Flat(a.values());
  const int64_t model_bytes = static_cast<int64_t>(initial.size() * sizeof(float));
  // Right after Start the values are fresh: nothing to read.
  auto refreshed = a.Refresh();
  ASSERT_TRUE(refreshed.ok()) << refreshed.status();
  EXPECT_EQ(*refreshed, absl::ZeroDuration());
  EXPECT_EQ(a.totals().bytes_received, model_bytes);

  for (ops::Tensor& g : a.grads()) std::ranges::fill(g.flat(), 1.0f);  // SGD lr 0.1: - 0.1
  for (ops::Tensor& g : b.grads()) std::ranges::fill(g.flat(), 2.0f);  // then - 0.2
  ASSERT_TRUE(a.Apply().ok());
  ASSERT_TRUE(b.Apply().ok());
  EXPECT_EQ(a.global_step(), 1);
  EXPECT_EQ(b.global_step(), 2);
  const std::vector<float> after_a = Flat(a.values());
  const std::vector<float> after_both = Flat(b.values());
  for (size_t i = 0; i < initial.size(); ++i) {
    EXPECT_NEAR(after_a[i], initial[i] - 0.1f, 1e-5) << i;
    EXPECT_NEAR(after_both[i], initial[i] - 0.3f, 1e-5) << i;
  }
  // b reads nothing more (it takes the values its PushPull returned); a reads b's update.
  ASSERT_TRUE(b.Refresh().ok());
  EXPECT_EQ(Flat(b.values()), after_both);
  EXPECT_EQ(b.totals().bytes_received, 2 * model_bytes);
  ASSERT_TRUE(a.Refresh().ok());
  EXPECT_EQ(Flat(a.values()), after_both);
  EXPECT_EQ(a.global_step(), 2);
  EXPECT_EQ(a.totals().bytes_received, 3 * model_bytes);
  ASSERT_TRUE(a.Refresh().ok());  // fresh again: no second read
  EXPECT_EQ(a.totals().bytes_received, 3 * model_bytes);

  // Staleness: b's first gradient (read at step 0) was applied after a's: 1. a's second,
  // read after b's update, is applied next: 0. b's second, computed at the values its
  // PushPull returned (step 2), lands after a's second: 1.
  ASSERT_TRUE(a.Apply().ok());
  ASSERT_TRUE(b.Apply().ok());
  EXPECT_EQ(a.totals().staleness_sum, 0);
  EXPECT_EQ(a.totals().staleness_steps, 2);
  EXPECT_EQ(b.totals().staleness_sum, 2);
  EXPECT_EQ(b.totals().staleness_steps, 2);
}

// One worker pulling before each step trains exactly as with the PushPull's values (nobody
// else writes in between), with one more read per step after the first.
TEST_F(TrainLoopTest, AnAsyncWorkerPullingBeforeEachStepTrainsTheSame) {
  std::vector<std::vector<float>> finals;
  std::vector<int64_t> received;
  for (const bool before_step : {false, true}) {
    clients_.clear();
    shards_.clear();
    StartPs(SyncMode::kAsync, 0);
    auto sharded = Sharded("worker:0");
    ShardedVariableStore store(sharded.get(), Shapes(), SyncMode::kAsync, kTimeout);
    store.set_pull_before_step(before_step);
    TrainLoop loop({.target_global_steps = 20}, model_.get(), MakeBatcher(), &store, nullptr);
    auto result = loop.Run();
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->steps.size(), 20u);
    EXPECT_EQ(result->global_step, 20);
    finals.push_back(Flat(store.values()));
    received.push_back(store.totals().bytes_received);
  }
  EXPECT_EQ(finals[0], finals[1]);
  const auto model_bytes = static_cast<int64_t>(finals[0].size() * sizeof(float));
  EXPECT_EQ(received[0], (1 + 20) * model_bytes);       // Start + 20 PushPulls
  EXPECT_EQ(received[1], (1 + 20 + 19) * model_bytes);  // + a Pull before steps 2..20
}

TEST_F(TrainLoopTest, APsThatStoppedEndsTheLoopBeforeAnyStep) {
  StartPs(SyncMode::kAsync, 0);
  for (auto& shard : shards_) shard->Stop("the chief stopped the run");
  auto sharded = Sharded("worker:0");
  ShardedVariableStore store(sharded.get(), Shapes(), SyncMode::kAsync, kTimeout);
  TrainLoop loop({.target_global_steps = 50}, model_.get(), MakeBatcher(), &store, nullptr);
  auto result = loop.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->steps.empty());
  EXPECT_EQ(result->stop_reason, "the ps reported that training ended");
}

TEST_F(TrainLoopTest, AStopCheckEndsTheLoopCleanly) {
  LocalVariableStore store = MakeLocalStore();
  TrainLoop loop({.target_global_steps = 1000}, model_.get(), MakeBatcher(), &store, nullptr);
  std::vector<int64_t> seen;
  loop.set_stop_check([&seen](int64_t local_steps, std::string* reason) {
    seen.push_back(local_steps);
    if (local_steps == 5) *reason = "the chief asked to stop";
    return absl::OkStatus();
  });
  auto result = loop.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->steps.size(), 5u);
  EXPECT_EQ(result->global_step, 5);
  EXPECT_EQ(result->stop_reason, "the chief asked to stop");
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(TrainLoopTest, AStopCheckErrorEndsTheRunWithIt) {
  LocalVariableStore store = MakeLocalStore();
  TrainLoop loop({.target_global_steps = 1000}, model_.get(), MakeBatcher(), &store, nullptr);
  loop.set_stop_check([](int64_t local_steps, std::string*) {
    return local_steps < 3 ? absl::OkStatus() : absl::UnavailableError("chief:0 silent");
  });
  auto result = loop.Run();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.global_step(), 3);
}

// A store under the test's control: values filled with `fill`, a Start that reports a pull
// of `pull`, an Apply that reports a sync wait of `wait` and stops after `stop_after` steps.
class FakeStore final : public VariableStore {
 public:
  FakeStore(std::span<const models::VariableSpec> variables, float fill, absl::Duration pull,
            absl::Duration wait, int64_t stop_after)
      : pull_(pull), wait_(wait), stop_after_(stop_after) {
    for (const auto& v : variables) {
      values_.push_back(ops::Tensor::Filled(v.shape, fill));
      grads_.push_back(ops::Tensor::Zeros(v.shape));
    }
  }
  absl::StatusOr<absl::Duration> Start() override { return pull_; }
  absl::StatusOr<ApplyResult> Apply() override {
    ++step_;
    return ApplyResult{wait_};
  }
  std::span<const ops::Tensor> values() const override { return values_; }
  std::span<ops::Tensor> grads() override { return grads_; }
  int64_t global_step() const override { return step_; }
  std::string StopReason() const override { return step_ >= stop_after_ ? "fake stop" : ""; }

 private:
  std::vector<ops::Tensor> values_, grads_;
  absl::Duration pull_, wait_;
  int64_t stop_after_;
  int64_t step_ = 0;
};

TEST_F(TrainLoopTest, ANonFiniteLossIsAnErrorNamingTheStep) {
  FakeStore store(model_->variables(), std::numeric_limits<float>::quiet_NaN(),
                  absl::ZeroDuration(), absl::ZeroDuration(), 1000);
  TrainLoop loop({.target_global_steps = 10}, model_.get(), MakeBatcher(), &store, nullptr);
  auto result = loop.Run();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(result.status().message().find("loss became nan at step 1"), std::string::npos)
      << result.status();
}

// The first step carries the store's initial pull; a sync wait longer than the store's call
// is all of the call (push 0).
TEST_F(TrainLoopTest, TheFirstStepCarriesTheInitialPullAndTheStoreEndsTheLoop) {
  FakeStore store(model_->variables(), 0.0f, absl::Milliseconds(5), absl::Hours(1), 3);
  TrainLoop loop({.target_global_steps = 10}, model_.get(), MakeBatcher(), &store, nullptr);
  auto result = loop.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->steps.size(), 3u);
  EXPECT_EQ(result->stop_reason, "fake stop");
  EXPECT_DOUBLE_EQ(result->steps[0].pull_ms, 5.0);
  EXPECT_GE(result->steps[0].wall_ms, 5.0);
  EXPECT_EQ(result->steps[1].pull_ms, 0.0);
  for (const profiler::StepRecord& r : result->steps) {
    EXPECT_EQ(r.push_ms, 0.0);
    EXPECT_GE(r.sync_wait_ms, 0.0);
    EXPECT_NEAR(r.wall_ms,
                r.data_ms + r.pull_ms + r.forward_ms + r.backward_ms + r.push_ms + r.sync_wait_ms,
                1e-6 + 1e-3 * r.wall_ms);
  }
}

}  // namespace
}  // namespace fulcrum::worker
