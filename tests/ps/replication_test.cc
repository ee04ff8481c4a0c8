// tests: --replicate_shards on the ps side (ps/replicas.h, ps/shard_replica.cc). Two ps
// services on real gRPC servers on 127.0.0.1: ps:0's shard forwards every apply to its
// replica on ps:1 over gRPC. The replica stays bit-identical (values and every optimizer
// slot, as their checkpoints show) in sync and async mode for all five optimizers; a
// promoted replica serves the shard and fences its old primary; a primary whose backup is
// gone goes on alone and says so; forwards with a gap or a bad size are refused, naming it.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ops/optimizer.h"
#include "ps/replicas.h"
#include "ps/service.h"
#include "ps/shard.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/frames/proto_convert.h"
#include "runtime/frames/tensor_coding.h"
#include "tests/testing/frame_calls.h"
#include "tests/testing/in_process_ps_client.h"

namespace fulcrum::ps {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(10);

// Two variables in 3 chunks of at most 24 floats: w [6, 8] and b [8].
pb::CreateVariablesRequest Definition(ops::OptimizerKind kind, pb::Mode mode) {
  pb::CreateVariablesRequest r;
  r.set_run_id("run-rep");
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, uint64_t seed) {
    pb::VariableDef* v = r.add_variables();
    v->set_name(name);
    v->set_source(name);
    for (int64_t d : shape) v->add_full_shape(d);
    v->set_row_begin(0);
    v->set_row_end(shape[0]);
    v->mutable_initializer()->set_kind("glorot_uniform");
    v->set_seed(seed);
  };
  add("w", {6, 8}, 3);
  add("b", {8}, 4);
  ops::OptimizerConfig optimizer;
  optimizer.kind = kind;
  optimizer.learning_rate = 0.05f;
  *r.mutable_optimizer() = runtime::OptimizerToProto(optimizer);
  r.set_mode(mode);
  r.set_replicas_to_aggregate(mode == pb::MODE_SYNC ? 2 : 0);
  r.set_chunk_bytes(96);
  r.set_task_index(0);
  return r;
}

// One ps: its shard, its replicas, its service on a real gRPC server.
// A push straight to a shard in this process (as a worker's would arrive).
absl::Status PushLocally(Shard& shard, const pb::PushRequest& request, pb::PushResponse* response) {
  fulcrum::testing::InProcessPsClient client(&shard);
  return testing::CallPush(client, request, response, absl::Seconds(30));
}

struct Ps {
  explicit Ps(int index) : shard(index) {}
  Shard shard;
  std::unique_ptr<PsService> service;
  std::unique_ptr<ReplicaSet> replicas;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      ps_.push_back(std::make_unique<Ps>(i));
      Ps& ps = *ps_.back();
      ps.service = std::make_unique<PsService>(&ps.shard);
      ps.replicas = std::make_unique<ReplicaSet>(
          &ps.shard,
          [this](int backup) -> absl::StatusOr<std::unique_ptr<Replicator>> {
            auto client = std::make_unique<runtime::GrpcPsClient>(
                absl::StrCat("ps:", backup),
                absl::StrCat("127.0.0.1:", ps_[static_cast<size_t>(backup)]->port));
            return std::make_unique<GrpcReplicator>(std::move(client), backup);
          },
          [](Shard&) {});
      ps.service->set_replicas(ps.replicas.get());
      auto server = StartServer(ps.service.get(), absl::StrCat("ps:", i), "127.0.0.1:0", &ps.port);
      ASSERT_TRUE(server.ok()) << server.status();
      ps.server = std::move(*server);
    }
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("fulcrum_replication_", ::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    for (auto& ps : ps_) ShutDown(*ps);
    std::filesystem::remove_all(dir_);
  }
  void ShutDown(Ps& ps) {
    if (ps.server == nullptr) return;
    ps.replicas->StopAll("test over");
    ps.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ps.server->Wait();
    ps.server.reset();
  }

  // ps:0's shard with its replica on ps:1, as the chief creates them.
  void CreateReplicated(const pb::CreateVariablesRequest& def) {
    pb::CreateVariablesRequest replica = def;
    replica.set_as_replica(true);
    pb::CreateVariablesResponse response;
    ASSERT_TRUE(ps_[1]->replicas->CreateVariables(replica, &response).ok());
    pb::CreateVariablesRequest primary = def;
    primary.set_backup_task(1);
    ASSERT_TRUE(ps_[0]->replicas->CreateVariables(primary, &response).ok());
  }

  // A push of `value` + the worker's index into every chunk of `def` at `step`.
  static pb::PushRequest PushOf(const pb::CreateVariablesRequest& def, int worker, int64_t step,
                                uint64_t id) {
    pb::PushRequest r;
    r.set_task(absl::StrCat("worker:", worker));
    r.set_request_id(id);
    r.set_step(step);
    // 48 + 8 floats in chunks of 24: 24, 24, 8.
    const int sizes[] = {24, 24, 8};
    for (int c = 0; c < 3; ++c) {
      std::vector<float> g(static_cast<size_t>(sizes[c]));
      for (size_t k = 0; k < g.size(); ++k) {
        g[k] = 0.01f *
                   static_cast<float>(
                       (k * 7 + static_cast<size_t>(step) * 3 + static_cast<size_t>(worker)) % 11) -
               0.05f;
      }
      const std::span<const float> part(g);
      pb::ChunkData* data = r.add_gradients();
      data->set_chunk(c);
      data->set_step(step);
      runtime::EncodeFloats(std::span<const std::span<const float>>(&part, 1),
                            data->mutable_data());
    }
    return r;
  }

  // Trains ps:0's shard `steps` steps (sync: both workers push each step).
  void Train(const pb::CreateVariablesRequest& def, int steps) {
    uint64_t id = 1;
    for (int64_t s = 0; s < steps; ++s) {
      for (int w = 0; w < 2; ++w) {
        pb::PushResponse response;
        const int64_t step = def.mode() == pb::MODE_SYNC ? s : 2 * s + w;
        ASSERT_TRUE(PushLocally(ps_[0]->shard, PushOf(def, w, step, id++), &response).ok());
      }
    }
  }

  // The checkpoint `shard` writes (values, slots, chunk steps and updates).
  pb::ShardCheckpoint Saved(Shard& shard, const std::string& name) {
    pb::SaveShardRequest request;
    request.set_path((dir_ / name).string());
    pb::SaveShardResponse response;
    EXPECT_TRUE(shard.SaveShard(request, &response).ok());
    pb::ShardCheckpoint checkpoint;
    std::ifstream in(request.path(), std::ios::binary);
    EXPECT_TRUE(checkpoint.ParseFromIstream(&in));
    return checkpoint;
  }

  Shard& Replica() {
    absl::StatusOr<Shard*> replica = ps_[1]->replicas->Replica(0, "test");
    EXPECT_TRUE(replica.ok()) << replica.status();
    return **replica;
  }

  std::vector<std::unique_ptr<Ps>> ps_;
  std::filesystem::path dir_;
};

class ReplicaPerOptimizer
    : public ReplicationTest,
      public ::testing::WithParamInterface<std::tuple<ops::OptimizerKind, pb::Mode>> {};

TEST_P(ReplicaPerOptimizer, TheReplicaIsBitIdenticalValuesSlotsAndSteps) {
  const auto [kind, mode] = GetParam();
  const pb::CreateVariablesRequest def = Definition(kind, mode);
  CreateReplicated(def);
  Train(def, 20);
  const pb::ShardCheckpoint primary = Saved(ps_[0]->shard, "primary");
  const pb::ShardCheckpoint replica = Saved(Replica(), "replica");
  ASSERT_EQ(primary.values_size(), 2);
  EXPECT_EQ(primary.chunk_steps(0), mode == pb::MODE_SYNC ? 20 : 40);
  // Bytes, not floats: the same bits.
  for (int v = 0; v < primary.values_size(); ++v) EXPECT_EQ(primary.values(v), replica.values(v));
  ASSERT_EQ(primary.slots_size(), replica.slots_size());
  for (int s = 0; s < primary.slots_size(); ++s) EXPECT_EQ(primary.slots(s), replica.slots(s));
  EXPECT_EQ(std::vector<int64_t>(primary.chunk_steps().begin(), primary.chunk_steps().end()),
            std::vector<int64_t>(replica.chunk_steps().begin(), replica.chunk_steps().end()));
  EXPECT_EQ(std::vector<int64_t>(primary.chunk_updates().begin(), primary.chunk_updates().end()),
            std::vector<int64_t>(replica.chunk_updates().begin(), replica.chunk_updates().end()));
  pb::StatsResponse stats;
  ps_[0]->shard.LocalStats(&stats);
  EXPECT_EQ(stats.backup_task(), 1);
  EXPECT_EQ(stats.replica_forwards(), mode == pb::MODE_SYNC ? 20 * 3 : 40 * 3);
  EXPECT_EQ(stats.replication_lost(), "");
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, ReplicaPerOptimizer,
    ::testing::Combine(::testing::Values(ops::OptimizerKind::kSgd, ops::OptimizerKind::kMomentum,
                                         ops::OptimizerKind::kAdam, ops::OptimizerKind::kAdagrad,
                                         ops::OptimizerKind::kRmsProp),
                       ::testing::Values(pb::MODE_SYNC, pb::MODE_ASYNC)),
    [](const auto& info) {
      return absl::StrCat(ops::OptimizerName(std::get<0>(info.param)), "_",
                          std::get<1>(info.param) == pb::MODE_SYNC ? "sync" : "async");
    });

TEST_F(ReplicationTest, APromotedReplicaServesTheShardAndFencesItsPrimary) {
  const pb::CreateVariablesRequest def = Definition(ops::OptimizerKind::kAdam, pb::MODE_SYNC);
  CreateReplicated(def);
  Train(def, 5);
  // Before promotion the backup refuses requests for the shard (Unavailable: try ps:0).
  runtime::GrpcPsClient backup("ps:1", absl::StrCat("127.0.0.1:", ps_[1]->port));
  backup.set_shard(0);
  pb::StatsResponse stats;
  const absl::Status early = backup.Stats(&stats, kTimeout);
  EXPECT_TRUE(absl::IsUnavailable(early)) << early;
  EXPECT_NE(early.message().find("not promoted"), std::string::npos) << early;

  pb::PromoteReplicaRequest promote;
  promote.set_shard(0);
  promote.set_reason("test: ps:0 taken for dead");
  pb::PromoteReplicaResponse promoted;
  ASSERT_TRUE(backup.PromoteReplica(promote, &promoted, kTimeout).ok());
  EXPECT_EQ(promoted.global_step(), 5);
  ASSERT_TRUE(backup.Stats(&stats, kTimeout).ok());
  EXPECT_EQ(stats.task_index(), 0);  // the replica answers for shard 0
  EXPECT_EQ(stats.global_step(), 5);
  EXPECT_EQ(std::vector<int>(stats.replicas_promoted().begin(), stats.replicas_promoted().end()),
            std::vector<int>{0});

  // The old primary's next apply is refused by the backup: it leaves, Unavailable.
  pb::PushResponse response;
  ASSERT_TRUE(PushLocally(ps_[0]->shard, PushOf(def, 0, 5, 100), &response).ok());
  const absl::Status fenced = PushLocally(ps_[0]->shard, PushOf(def, 1, 5, 101), &response);
  EXPECT_TRUE(absl::IsUnavailable(fenced)) << fenced;
  EXPECT_NE(fenced.message().find("replaced by its replica on ps:1"), std::string::npos) << fenced;
  EXPECT_TRUE(ps_[0]->shard.left());

  // The promoted replica trains on over gRPC, with the shard named in the requests.
  for (int w = 0; w < 2; ++w) {
    pb::PushRequest push = PushOf(def, w, 5, 200 + static_cast<uint64_t>(w));
    push.set_shard(0);
    ASSERT_TRUE(testing::CallPush(backup, push, &response, kTimeout).ok());
  }
  ASSERT_TRUE(backup.Stats(&stats, kTimeout).ok());
  EXPECT_EQ(stats.global_step(), 6);
}

TEST_F(ReplicationTest, APrimaryWhoseBackupIsGoneGoesOnAloneAndSaysSo) {
  const pb::CreateVariablesRequest def = Definition(ops::OptimizerKind::kSgd, pb::MODE_SYNC);
  CreateReplicated(def);
  Train(def, 2);
  ShutDown(*ps_[1]);
  Train(def, 1);  // steps 0 and 1 again: dropped as stale, nothing forwarded
  pb::PushResponse response;
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(
        PushLocally(ps_[0]->shard, PushOf(def, w, 2, 50 + static_cast<uint64_t>(w)), &response)
            .ok());
  }
  pb::StatsResponse stats;
  ps_[0]->shard.LocalStats(&stats);
  EXPECT_EQ(stats.global_step(), 3);
  EXPECT_NE(stats.replication_lost().find("backup ps:1 failed"), std::string::npos)
      << stats.replication_lost();
}

TEST_F(ReplicationTest, ForwardsWithAGapOrABadShapeAreRefusedNamingThem) {
  const pb::CreateVariablesRequest def = Definition(ops::OptimizerKind::kSgd, pb::MODE_ASYNC);
  CreateReplicated(def);
  pb::ReplicateRequest forward;
  forward.set_shard(0);
  forward.set_chunk(2);
  forward.set_step(0);
  forward.set_lr_scale(1);
  forward.set_grad_scale(1);
  forward.set_gradient(std::string(8 * sizeof(float), '\0'));
  EXPECT_TRUE(ps_[1]->replicas->Replicate(forward).ok());
  EXPECT_TRUE(ps_[1]->replicas->Replicate(forward).ok());  // a retry: a no-op
  forward.set_step(5);
  const absl::Status gap = ps_[1]->replicas->Replicate(forward);
  EXPECT_TRUE(absl::IsFailedPrecondition(gap)) << gap;
  EXPECT_NE(gap.message().find("is at step 1 but the primary applied step 5"), std::string::npos)
      << gap;
  forward.set_step(1);
  forward.set_gradient(std::string(7 * sizeof(float), '\0'));
  const absl::Status size = ps_[1]->replicas->Replicate(forward);
  EXPECT_TRUE(absl::IsInvalidArgument(size)) << size;
  forward.set_chunk(3);
  EXPECT_TRUE(absl::IsInvalidArgument(ps_[1]->replicas->Replicate(forward)));
  forward.set_shard(1);  // ps:1 keeps no replica of itself
  EXPECT_TRUE(absl::IsFailedPrecondition(ps_[1]->replicas->Replicate(forward)));
  pb::CreateVariablesRequest self = def;
  self.set_as_replica(true);
  self.set_task_index(1);
  pb::CreateVariablesResponse response;
  const absl::Status refused = ps_[1]->replicas->CreateVariables(self, &response);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
}

}  // namespace
}  // namespace fulcrum::ps
