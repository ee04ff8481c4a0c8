// tests: the parameter-server contract (proto/ps.proto), on the frames that are its only data
// API, run over every transport: the in-process client handing frames to a Shard directly, and
// GrpcPsClient talking to a real ps on 127.0.0.1 (port chosen by the kernel), its data calls over
// gRPC or over the tcp data plane. Most tests write their requests as generated messages with
// the payloads in ChunkData.data (tests/testing/frame_calls.h sends those bytes as frames).
// Deterministic: waits that must succeed have generous deadlines, and only a wait that must fail
// uses a short one.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"
#include "ops/tensor.h"
#include "ps/service.h"
#include "ps/shard.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/cluster/chunk_plan.h"
#include "runtime/frames/proto_convert.h"
#include "runtime/frames/tensor_coding.h"
#include "tests/testing/frame_calls.h"
#include "tests/testing/in_process_ps_client.h"
#include "transport/limits.h"
#include "transport/tcp_server.h"
#include "transport/tcp_wire.h"

namespace fulcrum::ps {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// kTcp: a GrpcPsClient whose data calls go over the ps's tcp data plane (--data_plane=tcp),
// the control calls over gRPC.
enum class Transport { kInProcess, kGrpc, kTcp };

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kGrpc:
      return "Grpc";
    case Transport::kTcp:
      return "Tcp";
    case Transport::kInProcess:
      break;
  }
  return "InProcess";
}

void PrintTo(Transport t, std::ostream* os) { *os << TransportName(t); }

// ---- definitions -----------------------------------------------------------------------

pb::VariableDef Var(const std::string& name, std::vector<int64_t> full_shape,
                    const ops::Initializer& init, uint64_t seed, int64_t row_begin = 0,
                    int64_t row_end = -1) {
  pb::VariableDef def;
  def.set_name(name);
  def.set_source(name);
  for (int64_t d : full_shape) def.add_full_shape(d);
  def.set_row_begin(row_begin);
  def.set_row_end(row_end < 0 ? full_shape[0] : row_end);
  *def.mutable_initializer() = runtime::InitializerToProto(init);
  def.set_seed(seed);
  return def;
}

ops::OptimizerConfig Sgd(float lr) {
  ops::OptimizerConfig c;
  c.kind = ops::OptimizerKind::kSgd;
  c.learning_rate = lr;
  return c;
}

pb::CreateVariablesRequest Definition(std::vector<pb::VariableDef> vars,
                                      const ops::OptimizerConfig& optimizer,
                                      pb::Mode mode = pb::MODE_ASYNC, int replicas = 0,
                                      int64_t chunk_bytes = 1 << 20) {
  pb::CreateVariablesRequest r;
  r.set_run_id("run-1");
  for (auto& v : vars) *r.add_variables() = std::move(v);
  *r.mutable_optimizer() = runtime::OptimizerToProto(optimizer);
  r.set_mode(mode);
  r.set_replicas_to_aggregate(replicas);
  r.set_chunk_bytes(chunk_bytes);
  r.set_task_index(0);
  return r;
}

// Three variables, 28-byte (7-float) chunks: "w" [4, 5] spans three chunks, and chunk 2
// holds the end of "w" and the start of "b".
pb::CreateVariablesRequest SmallModel(const ops::OptimizerConfig& optimizer,
                                      pb::Mode mode = pb::MODE_ASYNC, int replicas = 0) {
  return Definition({Var("w", {4, 5}, ops::Initializer::GlorotUniform(), 11),
                     Var("b", {5}, ops::Initializer::Constant(0.5f), 12),
                     Var("e", {6, 3}, ops::Initializer::Uniform(1.0f), 13, 2, 5)},
                    optimizer, mode, replicas, /*chunk_bytes=*/28);
}

std::vector<runtime::Chunk> Plan(const pb::CreateVariablesRequest& def) {
  std::vector<int64_t> elements;
  for (const auto& v : def.variables()) {
    int64_t n = v.row_end() - v.row_begin();
    for (int i = 1; i < v.full_shape_size(); ++i) n *= v.full_shape(i);
    elements.push_back(n);
  }
  return runtime::PlanChunks(elements, def.chunk_bytes());
}

using Values = std::vector<std::vector<float>>;  // per variable

Values ZerosLike(const pb::CreateVariablesRequest& def) {
  Values out;
  for (const auto& v : def.variables()) {
    int64_t n = v.row_end() - v.row_begin();
    for (int i = 1; i < v.full_shape_size(); ++i) n *= v.full_shape(i);
    out.emplace_back(static_cast<size_t>(n), 0.0f);
  }
  return out;
}

Values Filled(const pb::CreateVariablesRequest& def, float value) {
  Values out = ZerosLike(def);
  for (auto& v : out) std::fill(v.begin(), v.end(), value);
  return out;
}

// The value the single-process trainer gives a variable: the whole source variable's
// initial value, then the def's rows.
std::vector<float> ExpectedInitial(const pb::VariableDef& def) {
  std::vector<int64_t> dims(def.full_shape().begin(), def.full_shape().end());
  ops::Tensor whole = ops::Tensor::Zeros(ops::Shape(dims));
  auto init = runtime::InitializerFromProto(def.initializer());
  EXPECT_TRUE(init.ok());
  EXPECT_TRUE(ops::Initialize(*init, def.seed(), &whole).ok());
  const ops::Tensor rows = whole.Rows(def.row_begin(), def.row_end());
  return {rows.flat().begin(), rows.flat().end()};
}

// A push of per-variable gradients, cut into every chunk of the plan.
// The restore of what `save` wrote, with the size and CRC-32C the save answered (as the chief's
// manifest gives them).
pb::RestoreShardRequest RestoreOf(const pb::SaveShardRequest& save,
                                  const pb::SaveShardResponse& saved) {
  pb::RestoreShardRequest restore;
  restore.set_path(save.path());
  restore.set_bytes(saved.bytes_written());
  restore.set_crc32c(saved.crc32c());
  return restore;
}

pb::PushRequest PushOf(const pb::CreateVariablesRequest& def, const Values& grads,
                       const std::string& task, uint64_t request_id, int64_t step = 0) {
  pb::PushRequest r;
  r.set_task(task);
  r.set_request_id(request_id);
  r.set_step(step);
  const auto plan = Plan(def);
  for (size_t c = 0; c < plan.size(); ++c) {
    std::vector<std::span<const float>> parts;
    for (const auto& seg : plan[c].segments) {
      parts.push_back(
          std::span<const float>(grads[static_cast<size_t>(seg.variable)])
              .subspan(static_cast<size_t>(seg.offset), static_cast<size_t>(seg.count)));
    }
    pb::ChunkData* g = r.add_gradients();
    g->set_chunk(static_cast<int>(c));
    g->set_step(step);  // the values were read at `step` (as a worker sends it)
    runtime::EncodeFloats(parts, g->mutable_data());
  }
  return r;
}

// Scatters chunk payloads back into per-variable values.
Values Assemble(const pb::CreateVariablesRequest& def,
                const google::protobuf::RepeatedPtrField<pb::ChunkData>& chunks) {
  Values out = ZerosLike(def);
  const auto plan = Plan(def);
  for (const pb::ChunkData& data : chunks) {
    std::vector<std::span<float>> parts;
    for (const auto& seg : plan[static_cast<size_t>(data.chunk())].segments) {
      parts.push_back(
          std::span<float>(out[static_cast<size_t>(seg.variable)])
              .subspan(static_cast<size_t>(seg.offset), static_cast<size_t>(seg.count)));
    }
    EXPECT_TRUE(runtime::DecodeFloats(data.data(), parts, "test pull").ok());
  }
  return out;
}

// ---- fixture -----------------------------------------------------------------------------

class PsContractTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    shard_ = std::make_unique<Shard>(0);
    if (GetParam() == Transport::kInProcess) {
      client_ = std::make_unique<fulcrum::testing::InProcessPsClient>(shard_.get());
      return;
    }
    service_ = std::make_unique<PsService>(shard_.get());
    if (GetParam() == Transport::kTcp) {
      auto data_plane = StartDataPlane(service_.get(), "ps:0", "127.0.0.1");
      ASSERT_TRUE(data_plane.ok()) << data_plane.status();
      data_plane_ = std::move(*data_plane);
    }
    int port = 0;
    auto server = StartServer(service_.get(), "ps:0", "127.0.0.1:0", &port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto grpc_client =
        std::make_unique<runtime::GrpcPsClient>("ps:0", absl::StrCat("127.0.0.1:", port));
    ASSERT_TRUE(grpc_client->WaitUntilReady(kTimeout));
    grpc_client->set_tcp_data_plane(GetParam() == Transport::kTcp);
    client_ = std::move(grpc_client);
  }

  void TearDown() override {
    if (!temp_dir_.empty()) std::filesystem::remove_all(temp_dir_);
    client_.reset();
    shard_->Stop("test over");
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
      server_->Wait();
    }
    if (data_plane_ != nullptr) data_plane_->Shutdown();
  }

  void Create(const pb::CreateVariablesRequest& def) {
    pb::CreateVariablesResponse response;
    ASSERT_TRUE(client_->CreateVariables(def, &response, kTimeout).ok());
  }

  Values PullAll(const pb::CreateVariablesRequest& def, int64_t* global_step = nullptr) {
    pb::PullRequest request;
    request.set_task("worker:0");
    pb::PullResponse response;
    const absl::Status s = testing::CallPull(*client_, request, &response, kTimeout);
    EXPECT_TRUE(s.ok()) << s;
    if (global_step != nullptr) *global_step = response.global_step();
    return Assemble(def, response.chunks());
  }

  pb::PushResponse Push(const pb::PushRequest& request) {
    pb::PushResponse response;
    const absl::Status s = testing::CallPush(*client_, request, &response, kTimeout);
    EXPECT_TRUE(s.ok()) << s;
    return response;
  }

  pb::StatsResponse Stats() {
    pb::StatsResponse stats;
    EXPECT_TRUE(client_->Stats(&stats, kTimeout).ok());
    return stats;
  }

  // Polls Stats until `ready` holds of it (30 s at most); whether it did.
  template <typename Ready>
  bool WaitForStats(Ready ready) {
    for (int i = 0; i < 3000; ++i) {
      if (ready(Stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // A path in a scratch folder of this test, removed afterwards.
  std::string TempPath(const std::string& name) {
    if (temp_dir_.empty()) {
      const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
      std::string test = absl::StrCat(info->test_suite_name(), "_", info->name());
      std::replace(test.begin(), test.end(), '/', '_');
      temp_dir_ = std::filesystem::path(::testing::TempDir()) /
                  absl::StrCat("fulcrum_ps_test_", ::getpid(), "_", test);
      std::filesystem::create_directories(temp_dir_);
    }
    return (temp_dir_ / name).string();
  }

  std::filesystem::path temp_dir_;
  std::unique_ptr<Shard> shard_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<transport::TcpDataServer> data_plane_;
  std::unique_ptr<runtime::PsClient> client_;
};

INSTANTIATE_TEST_SUITE_P(Transports, PsContractTest,
                         ::testing::Values(Transport::kInProcess, Transport::kGrpc,
                                           Transport::kTcp),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return TransportName(info.param);
                         });

// ---- creation and initial values ----------------------------------------------------------

TEST_P(PsContractTest, InitialValuesEqualSingleProcessInitOfTheWholeVariable) {
  const auto def = SmallModel(Sgd(0.1f));
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(client_->CreateVariables(def, &created, kTimeout).ok());
  const auto plan = Plan(def);
  EXPECT_EQ(created.num_chunks(), static_cast<int>(plan.size()));
  EXPECT_EQ(created.bytes_held(), (20 + 5 + 9) * 4);
  ASSERT_GT(plan.size(), 3u);              // variables span several chunks
  EXPECT_EQ(plan[2].segments.size(), 2u);  // and a chunk holds several variables

  int64_t global_step = -1;
  const Values got = PullAll(def, &global_step);
  EXPECT_EQ(global_step, 0);
  for (int v = 0; v < def.variables_size(); ++v) {
    EXPECT_EQ(got[static_cast<size_t>(v)], ExpectedInitial(def.variables(v)))
        << def.variables(v).name();
  }
  // The slice "e" holds rows 2..4 of the whole [6, 3] variable, not a fresh [3, 3] init.
  ops::Tensor fresh = ops::Tensor::Zeros(ops::Shape({3, 3}));
  ASSERT_TRUE(ops::Initialize(ops::Initializer::Uniform(1.0f), 13, &fresh).ok());
  EXPECT_NE(got[2], std::vector<float>(fresh.flat().begin(), fresh.flat().end()));
}

TEST_P(PsContractTest, PullOfChosenChunksReturnsThemInOrder) {
  const auto def = SmallModel(Sgd(0.1f));
  Create(def);
  pb::PullRequest request;
  request.add_chunks(3);
  request.add_chunks(0);
  pb::PullResponse response;
  ASSERT_TRUE(testing::CallPull(*client_, request, &response, kTimeout).ok());
  ASSERT_EQ(response.chunks_size(), 2);
  EXPECT_EQ(response.chunks(0).chunk(), 3);
  EXPECT_EQ(response.chunks(1).chunk(), 0);
  const auto plan = Plan(def);
  EXPECT_EQ(response.chunks(0).data().size(), static_cast<size_t>(plan[3].num_elements * 4));
  EXPECT_EQ(response.chunks(1).data().size(), static_cast<size_t>(plan[0].num_elements * 4));
  EXPECT_FALSE(response.stopped());
  EXPECT_EQ(Stats().pulls(), 2);
}

TEST_P(PsContractTest, CreateVariablesRepeatIsANoOpAndAConflictIsRefused) {
  const auto def = SmallModel(Sgd(0.1f));
  Create(def);
  pb::CreateVariablesResponse response;
  EXPECT_TRUE(client_->CreateVariables(def, &response, kTimeout).ok());
  EXPECT_EQ(response.num_chunks(), static_cast<int>(Plan(def).size()));

  auto other_run = def;
  other_run.set_run_id("run-2");
  absl::Status s = client_->CreateVariables(other_run, &response, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("run-1"));
  EXPECT_THAT(s.message(), HasSubstr("ps:0"));

  auto other_def = def;
  other_def.mutable_variables(0)->set_seed(99);
  s = client_->CreateVariables(other_def, &response, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST_P(PsContractTest, InvalidDefinitionsAreRefusedAndCreateNothing) {
  pb::CreateVariablesResponse response;
  auto expect_invalid = [&](const pb::CreateVariablesRequest& def, const std::string& text) {
    const absl::Status s = client_->CreateVariables(def, &response, kTimeout);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(text));
    EXPECT_THAT(s.message(), HasSubstr("ps:0"));
  };
  auto def = SmallModel(Sgd(0.1f));
  def.set_task_index(1);
  expect_invalid(def, "ps:1");
  def = SmallModel(Sgd(0.1f));
  def.mutable_variables(2)->set_row_end(7);
  expect_invalid(def, "'e'");
  def = SmallModel(Sgd(0.1f));
  def.mutable_variables(1)->set_name("w");
  expect_invalid(def, "defined twice");
  def = SmallModel(Sgd(0.1f));
  def.mutable_variables(0)->mutable_initializer()->set_kind("ones");
  expect_invalid(def, "ones");
  def = SmallModel(Sgd(0.1f));
  def.mutable_optimizer()->set_kind("lamb");
  expect_invalid(def, "lamb");
  def = SmallModel(Sgd(0.1f));
  def.mutable_optimizer()->set_kind("rmsprop");
  def.mutable_optimizer()->set_rmsprop_decay(1.5f);
  def.mutable_optimizer()->set_rmsprop_epsilon(1e-10f);
  expect_invalid(def, "out of range");
  def = SmallModel(Sgd(0.1f));
  def.mutable_optimizer()->set_lr_decay_steps(-1);
  expect_invalid(def, "out of range");
  def = SmallModel(Sgd(0.1f), pb::MODE_SYNC, 0);
  expect_invalid(def, "replicas_to_aggregate");
  def = SmallModel(Sgd(0.1f), pb::MODE_SYNC, 2);
  def.set_staleness_aware_lr(true);
  expect_invalid(def, "staleness_aware_lr is for async and ssp");
  def = SmallModel(Sgd(0.1f));
  def.set_chunk_bytes(0);
  expect_invalid(def, "chunk_bytes");
  def = SmallModel(Sgd(0.1f));
  def.mutable_variables(0)->set_full_shape(1, 0);
  expect_invalid(def, "'w'");
  // Shapes whose element count overflows int64, or wraps to a small number, or is merely
  // absurd: refused before anything is allocated (they crashed the ps, or made a pull return
  // heap memory, before the check).
  for (const std::vector<int64_t>& huge :
       {std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40},
        std::vector<int64_t>{(int64_t{1} << 32) + 1, int64_t{1} << 32},
        std::vector<int64_t>{4, int64_t{1} << 62, 4}, std::vector<int64_t>{int64_t{1} << 35}}) {
    def = SmallModel(Sgd(0.1f));
    def.mutable_variables(0)->clear_full_shape();
    for (int64_t d : huge) def.mutable_variables(0)->add_full_shape(d);
    def.mutable_variables(0)->set_row_end(huge[0]);
    expect_invalid(def, "elements");
  }
  // Many variables that are each allowed but together are not.
  def = SmallModel(Sgd(0.1f));
  for (int i = 0; i < 5; ++i) {
    *def.add_variables() =
        Var(absl::StrCat("big", i), {int64_t{1} << 32}, ops::Initializer::Zeros(), 20 + i);
  }
  expect_invalid(def, "in all");
  EXPECT_FALSE(Stats().initialized());
  Create(SmallModel(Sgd(0.1f)));  // a valid one still works afterwards
  EXPECT_TRUE(Stats().initialized());
}

// Pulls and pushes before CreateVariables are Unavailable (a worker retries: the ps may have
// restarted and wait for the chief); the chief's own calls are FailedPrecondition.
TEST_P(PsContractTest, DataCallsBeforeCreateVariablesAreUnavailableOthersFailedPrecondition) {
  pb::PullResponse pulled;
  pb::PullRequest pull;
  pull.set_task("worker:0");
  absl::Status s = testing::CallPull(*client_, pull, &pulled, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps:0: Pull from worker:0: ps has no variables yet"));
  pb::PushResponse pushed;
  pb::PushRequest push;
  push.set_task("worker:0");
  s = testing::CallPush(*client_, push, &pushed, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  s = testing::CallPushPull(*client_, push, &pushed, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  pb::SaveShardRequest save;
  save.set_path(TempPath("never.ckpt"));
  pb::SaveShardResponse saved;
  s = client_->SaveShard(save, &saved, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("ps:0 has no variables yet"));
  const auto stats = Stats();
  EXPECT_FALSE(stats.initialized());
  EXPECT_EQ(stats.task_index(), 0);
}

TEST_P(PsContractTest, BadChunkIdOrPayloadSizeIsInvalidArgumentAndAppliesNothing) {
  const auto def = SmallModel(Sgd(1.0f));
  Create(def);
  const Values before = PullAll(def);

  pb::PullRequest pull;
  pull.add_chunks(99);
  pb::PullResponse pulled;
  absl::Status s = testing::CallPull(*client_, pull, &pulled, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("chunk 99"));

  // The first chunk is fine, the last one is short: nothing of the request applies.
  pb::PushRequest push = PushOf(def, Filled(def, 1.0f), "worker:0", 1);
  auto* last = push.mutable_gradients(push.gradients_size() - 1);
  last->mutable_data()->resize(last->data().size() - 4);
  pb::PushResponse pushed;
  s = testing::CallPush(*client_, push, &pushed, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("chunk ", push.gradients_size() - 1)));
  EXPECT_THAT(s.message(), HasSubstr("bytes"));

  push = PushOf(def, Filled(def, 1.0f), "worker:0", 2);
  push.mutable_gradients(1)->set_chunk(-1);
  s = testing::CallPush(*client_, push, &pushed, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("chunk -1"));

  EXPECT_EQ(PullAll(def), before);
  EXPECT_EQ(Stats().pushes_received(), 0);
}

// ---- async mode -----------------------------------------------------------------------------

TEST_P(PsContractTest, AsyncSgdAppliesEachPushExactly) {
  auto def = SmallModel(Sgd(0.5f));
  Create(def);
  const Values start = PullAll(def);
  Values grad = ZerosLike(def);
  for (size_t v = 0; v < grad.size(); ++v) {
    for (size_t i = 0; i < grad[v].size(); ++i) grad[v][i] = static_cast<float>(i % 7) - 3.0f;
  }
  const pb::PushResponse r = Push(PushOf(def, grad, "worker:0", 1));
  EXPECT_EQ(r.applied(), static_cast<int>(Plan(def).size()));
  EXPECT_EQ(r.dropped(), 0);
  EXPECT_FALSE(r.duplicate());
  EXPECT_EQ(r.global_step(), 1);

  int64_t step = 0;
  const Values got = PullAll(def, &step);
  EXPECT_EQ(step, 1);
  for (size_t v = 0; v < got.size(); ++v) {
    for (size_t i = 0; i < got[v].size(); ++i) {
      EXPECT_EQ(got[v][i], start[v][i] - 0.5f * grad[v][i]) << v << "/" << i;
    }
  }
  const auto stats = Stats();
  EXPECT_EQ(stats.pushes_received(), r.applied());
  EXPECT_EQ(stats.pushes_applied(), r.applied());
  EXPECT_EQ(stats.steps_applied(), 1);
  EXPECT_EQ(stats.bytes_pushed(), (20 + 5 + 9) * 4);
  EXPECT_EQ(stats.mode(), pb::MODE_ASYNC);
}

// --staleness_aware_lr: each chunk gradient is applied at lr / (1 + tau), tau = the updates
// the chunk took since the step its values were read at (the gradient's ChunkData.step); a
// read step past the chunk's (a ps gone back to a checkpoint) counts as fresh.
TEST_P(PsContractTest, StalenessAwareLrDividesEachPushByOnePlusItsStaleness) {
  auto def = SmallModel(Sgd(1.0f));
  def.set_staleness_aware_lr(true);
  Create(def);
  Values expected = PullAll(def);
  const Values grad = Filled(def, 0.75f);
  auto apply = [&](float lr) {
    for (size_t v = 0; v < expected.size(); ++v) {
      for (float& x : expected[v]) x -= lr * 0.75f;
    }
  };
  // All read at step 0: staleness 0, 1, 2, each answered in PushResponse.staleness.
  auto push = [&](uint64_t id, int64_t read_step, int64_t staleness) {
    const pb::PushResponse r =
        Push(PushOf(def, grad, id % 2 ? "worker:0" : "worker:1", id, read_step));
    EXPECT_EQ(r.global_step(), static_cast<int64_t>(id));
    EXPECT_EQ(r.staleness(), staleness) << "push " << id;
  };
  push(1, 0, 0);
  apply(1.0f);
  push(2, 0, 1);
  apply(1.0f / 2.0f);
  push(3, 0, 2);
  apply(1.0f / 3.0f);
  // Read at the current step: fresh again; read "ahead" of the ps: fresh.
  push(4, 3, 0);
  apply(1.0f);
  push(5, 100, 0);
  apply(1.0f);
  const Values got = PullAll(def);
  for (size_t v = 0; v < got.size(); ++v) {
    for (size_t i = 0; i < got[v].size(); ++i) {
      EXPECT_FLOAT_EQ(got[v][i], expected[v][i]) << v << "/" << i;
    }
  }
}

// Without it (TensorFlow's async PS), a stale push is applied at the full learning rate.
TEST_P(PsContractTest, WithoutStalenessAwareLrStalePushesApplyAtTheFullRate) {
  const auto plain = SmallModel(Sgd(1.0f));
  const Values grad = Filled(plain, 0.75f);
  Create(plain);
  const Values start = PullAll(plain);
  Push(PushOf(plain, grad, "worker:0", 1, /*step=*/0));
  Push(PushOf(plain, grad, "worker:1", 2, /*step=*/0));
  const Values full = PullAll(plain);
  for (size_t v = 0; v < full.size(); ++v) {
    for (size_t i = 0; i < full[v].size(); ++i) {
      EXPECT_FLOAT_EQ(full[v][i], start[v][i] - 2 * 0.75f) << v << "/" << i;
    }
  }
}

// A gradient holding a NaN or an Inf (a hostile or broken worker) is refused whole by default
// (--nonfinite=error) and skipped whole with --nonfinite=skip: never applied, always counted.
TEST_P(PsContractTest, NonFiniteGradientsAreRefusedOrSkippedAndApplyNothing) {
  for (const NonFinitePolicy policy : {NonFinitePolicy::kError, NonFinitePolicy::kSkip}) {
    SCOPED_TRACE(policy == NonFinitePolicy::kError ? "error" : "skip");
    if (policy == NonFinitePolicy::kSkip) {  // a fresh shard and server for the second policy
      TearDown();
      SetUp();
    }
    shard_->set_nonfinite_policy(policy);
    const auto def = SmallModel(Sgd(0.5f));
    Create(def);
    const Values before = PullAll(def);
    int64_t sent = 0;
    for (const float poison :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()}) {
      Values grad = Filled(def, 0.25f);
      grad[1][3] = poison;  // in "b": the chunks before it are clean
      const pb::PushRequest push = PushOf(def, grad, "worker:0", static_cast<uint64_t>(++sent));
      pb::PushResponse response;
      const absl::Status s = testing::CallPush(*client_, push, &response, kTimeout);
      if (policy == NonFinitePolicy::kError) {
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
        EXPECT_THAT(s.message(), HasSubstr("ps:0: Push from worker:0: chunk "));
        EXPECT_THAT(s.message(),
                    HasSubstr("holds a NaN or an Inf; nothing of the push is applied"));
      } else {
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(response.applied(), 0);
        EXPECT_EQ(response.dropped(), push.gradients_size());
      }
    }
    EXPECT_EQ(PullAll(def), before);
    const auto stats = Stats();
    EXPECT_EQ(stats.pushes_applied(), 0);
    EXPECT_EQ(stats.steps_applied(), 0);
    EXPECT_EQ(stats.pushes_nonfinite(), sent * static_cast<int64_t>(Plan(def).size()));
    // A clean push afterwards applies as usual.
    const pb::PushResponse ok = Push(PushOf(def, Filled(def, 0.25f), "worker:0", 99));
    EXPECT_EQ(ok.applied(), static_cast<int>(Plan(def).size()));
  }
}

// A ps told its cluster's tasks refuses pulls and pushes under any other name, before
// anything is applied or recorded (issue 12: 30,000 made-up names grew the ps by 164 MB).
TEST_P(PsContractTest, UnknownTaskNamesAreRefused) {
  shard_->set_known_tasks({"chief:0", "worker:0", "worker:1"});
  const auto def = SmallModel(Sgd(0.5f));
  Create(def);
  const Values before = PullAll(def);  // as worker:0
  for (const std::string& stranger :
       std::vector<std::string>{"worker:2", "ps:0", "evil", std::string(200, 'x')}) {
    pb::PushResponse pushed;
    absl::Status s =
        testing::CallPush(*client_, PushOf(def, Filled(def, 1.0f), stranger, 7), &pushed, kTimeout);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("not a chief or worker task of the cluster spec"));
    s = testing::CallPushPull(*client_, PushOf(def, Filled(def, 1.0f), stranger, 8), &pushed,
                              kTimeout);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    pb::PullRequest pull;
    pull.set_task(stranger);
    pb::PullResponse pulled;
    s = testing::CallPull(*client_, pull, &pulled, kTimeout);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(pulled.chunks_size(), 0);
  }
  EXPECT_EQ(PullAll(def), before);
  EXPECT_EQ(Stats().pushes_received(), 0);
  EXPECT_EQ(Push(PushOf(def, Filled(def, 1.0f), "worker:1", 9)).applied(),
            static_cast<int>(Plan(def).size()));
}

// One task cannot pin every server thread with requests waiting for a step (issue 12: 200
// waiting pulls added 200 threads): beyond two per chunk plus a little slack it is refused at
// once with ResourceExhausted, and a refused PushPull applies nothing.
TEST_P(PsContractTest, WaitingRequestsPerTaskAreBounded) {
  const auto def = SmallModel(Sgd(0.5f));
  Create(def);
  const int limit = 2 * static_cast<int>(Plan(def).size()) + kWaitingSlack;
  constexpr int kRequests = 40;
  std::vector<absl::StatusCode> codes(kRequests);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      pb::PullRequest request;
      request.set_task("worker:0");
      request.set_min_step(1000);  // never reached
      request.set_timeout_ms(1500);
      pb::PullResponse response;
      codes[static_cast<size_t>(i)] =
          testing::CallPull(*client_, request, &response, kTimeout).code();
    });
  }
  for (auto& t : threads) t.join();
  const auto refused = std::count(codes.begin(), codes.end(), absl::StatusCode::kResourceExhausted);
  const auto waited = std::count(codes.begin(), codes.end(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(refused + waited, kRequests);
  EXPECT_LE(waited, limit);
  EXPECT_GE(refused, kRequests - limit);
  // Slots are given back: a later waiting request is served (times out normally).
  pb::PullRequest request;
  request.set_task("worker:0");
  request.set_min_step(1000);
  request.set_timeout_ms(100);
  pb::PullResponse response;
  EXPECT_EQ(testing::CallPull(*client_, request, &response, kTimeout).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Stats().pushes_received(), 0);
}

TEST_P(PsContractTest, ManyConcurrentPushersLoseNothing) {
  const auto def = Definition({Var("w", {10, 3}, ops::Initializer::Zeros(), 1),
                               Var("b", {3}, ops::Initializer::Zeros(), 2)},
                              Sgd(1.0f), pb::MODE_ASYNC, 0, /*chunk_bytes=*/40);
  Create(def);
  constexpr int kThreads = 8;
  constexpr int kPushes = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string task = absl::StrCat("worker:", t);
      const auto request = [&](int i) {
        return PushOf(def, Filled(def, -static_cast<float>(t + 1)), task,
                      static_cast<uint64_t>(i + 1));
      };
      for (int i = 0; i < kPushes; ++i) {
        pb::PushResponse response;
        const absl::Status s = testing::CallPush(*client_, request(i), &response, kTimeout);
        EXPECT_TRUE(s.ok()) << s;
        EXPECT_FALSE(response.duplicate());
      }
    });
  }
  for (auto& t : threads) t.join();
  int64_t step = 0;
  const Values got = PullAll(def, &step);
  EXPECT_EQ(step, kThreads * kPushes);
  const float expected = kPushes * (kThreads * (kThreads + 1) / 2);  // 200 * 36, exact
  for (const auto& v : got) {
    for (float x : v) ASSERT_EQ(x, expected);
  }
  const auto stats = Stats();
  const int64_t chunks = static_cast<int64_t>(Plan(def).size());
  EXPECT_EQ(stats.pushes_received(), kThreads * kPushes * chunks);
  EXPECT_EQ(stats.pushes_applied(), kThreads * kPushes * chunks);
  EXPECT_EQ(stats.steps_applied(), kThreads * kPushes);
  EXPECT_EQ(stats.pushes_duplicate(), 0);
}

TEST_P(PsContractTest, DuplicateRequestIdIsAnsweredButNotApplied) {
  const auto def = SmallModel(Sgd(1.0f));
  Create(def);
  const Values start = PullAll(def);
  const pb::PushRequest request = PushOf(def, Filled(def, 1.0f), "worker:3", 42);
  EXPECT_FALSE(Push(request).duplicate());
  const pb::PushResponse again = Push(request);
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(again.applied(), 0);
  // The same id from another task is another push.
  pb::PushRequest other = request;
  other.set_task("worker:4");
  EXPECT_FALSE(Push(other).duplicate());

  int64_t step = 0;
  const Values got = PullAll(def, &step);
  EXPECT_EQ(step, 2);
  EXPECT_EQ(got[1][0], start[1][0] - 2.0f);

  // PushPull: a duplicate applies nothing but still returns the values.
  pb::PushRequest pp = PushOf(def, Filled(def, 1.0f), "worker:3", 43);
  pb::PushResponse first;
  ASSERT_TRUE(testing::CallPushPull(*client_, pp, &first, kTimeout).ok());
  pb::PushResponse second;
  ASSERT_TRUE(testing::CallPushPull(*client_, pp, &second, kTimeout).ok());
  EXPECT_FALSE(first.duplicate());
  EXPECT_TRUE(second.duplicate());
  EXPECT_EQ(Assemble(def, second.values()), Assemble(def, first.values()));
  EXPECT_EQ(Assemble(def, second.values())[1][0], start[1][0] - 3.0f);
  EXPECT_EQ(second.global_step(), 3);

  const auto stats = Stats();
  const int64_t chunks = static_cast<int64_t>(Plan(def).size());
  EXPECT_EQ(stats.pushes_duplicate(), 2 * chunks);
  EXPECT_EQ(stats.pushes_received(), 3 * chunks);
}

// Momentum, Adam and Adagrad keep slots per element; cutting variables into chunks must
// give what one apply over the whole tensor gives.
TEST_P(PsContractTest, SlotOptimizersAcrossChunksMatchWholeTensorApply) {
  for (const ops::OptimizerKind kind :
       {ops::OptimizerKind::kMomentum, ops::OptimizerKind::kAdam, ops::OptimizerKind::kAdagrad}) {
    SCOPED_TRACE(ops::OptimizerName(kind));
    TearDown();
    SetUp();
    ops::OptimizerConfig config;
    config.kind = kind;
    config.learning_rate = 0.1f;
    const auto def = Definition({Var("w", {7, 3}, ops::Initializer::Uniform(1.0f), 5),
                                 Var("b", {5}, ops::Initializer::Constant(0.2f), 6)},
                                config, pb::MODE_ASYNC, 0, /*chunk_bytes=*/20);
    Create(def);
    // Reference: whole tensors with their own slots.
    std::vector<ops::Tensor> vars;
    std::vector<std::vector<ops::Tensor>> slots;
    for (const auto& v : def.variables()) {
      const std::vector<float> init = ExpectedInitial(v);
      ops::Tensor t = ops::Tensor::Zeros(ops::Shape({static_cast<int64_t>(init.size())}));
      std::copy(init.begin(), init.end(), t.flat().begin());
      vars.push_back(t);
      slots.emplace_back();
      for (size_t s = 0; s < ops::SlotNames(kind).size(); ++s) {
        slots.back().push_back(
            ops::Tensor::Filled(t.shape(), ops::SlotInitialValue(config, static_cast<int>(s))));
      }
    }
    for (int step = 1; step <= 3; ++step) {
      Values grad = ZerosLike(def);
      for (size_t v = 0; v < grad.size(); ++v) {
        for (size_t i = 0; i < grad[v].size(); ++i) {
          grad[v][i] =
              0.1f * static_cast<float>((i * 7 + v * 3 + static_cast<size_t>(step)) % 11) - 0.5f;
        }
        ops::Tensor g = ops::Tensor::View(grad[v].data(), vars[v].shape());
        ASSERT_TRUE(ops::ApplyGradient(config, step, g, &vars[v], slots[v]).ok());
      }
      Push(PushOf(def, grad, "worker:0", static_cast<uint64_t>(step)));
    }
    const Values got = PullAll(def);
    for (size_t v = 0; v < got.size(); ++v) {
      for (size_t i = 0; i < got[v].size(); ++i) {
        // Eigen's vectorised body and scalar tail round Adam's sqrt/divide chain slightly
        // differently, and chunk cuts move where the tails fall: equal to ~1e-6, not bitwise.
        const float want = vars[v].flat()[i];
        EXPECT_NEAR(got[v][i], want, 1e-5f * std::abs(want) + 1e-7f)
            << "variable " << v << " element " << i;
      }
    }
  }
}

// ---- sync mode --------------------------------------------------------------------------------

TEST_P(PsContractTest, SyncAppliesTheMeanOfTheReplicasOnceAndDropsStaleGradients) {
  const auto def = Definition(
      {Var("w", {3, 4}, ops::Initializer::Zeros(), 1), Var("b", {4}, ops::Initializer::Zeros(), 2)},
      Sgd(1.0f), pb::MODE_SYNC, 2, /*chunk_bytes=*/24);
  Create(def);
  const int chunks = static_cast<int>(Plan(def).size());

  pb::PushResponse r = Push(PushOf(def, Filled(def, 2.0f), "worker:0", 1, /*step=*/0));
  EXPECT_EQ(r.applied(), chunks);  // accumulated
  EXPECT_EQ(r.global_step(), 0);
  int64_t step = -1;
  EXPECT_EQ(PullAll(def, &step)[0][0], 0.0f);  // not applied yet
  EXPECT_EQ(step, 0);
  EXPECT_EQ(shard_->pending_gradients(), chunks);

  r = Push(PushOf(def, Filled(def, 4.0f), "worker:1", 1, /*step=*/0));
  EXPECT_EQ(r.global_step(), 1);
  const Values after = PullAll(def, &step);
  EXPECT_EQ(step, 1);
  for (const auto& v : after) {
    for (float x : v) EXPECT_EQ(x, -3.0f);  // mean of 2 and 4, lr 1, applied once
  }

  // A third worker's gradient for step 0 arrives late: dropped and counted.
  r = Push(PushOf(def, Filled(def, 100.0f), "worker:2", 1, /*step=*/0));
  EXPECT_EQ(r.dropped(), chunks);
  EXPECT_EQ(r.applied(), 0);
  EXPECT_EQ(PullAll(def), after);

  // Half of step 1.
  Push(PushOf(def, Filled(def, 1.0f), "worker:0", 2, /*step=*/1));
  const auto stats = Stats();
  EXPECT_EQ(stats.mode(), pb::MODE_SYNC);
  EXPECT_EQ(stats.global_step(), 1);
  EXPECT_EQ(stats.steps_applied(), 1);
  EXPECT_EQ(stats.pushes_received(), 4 * chunks);
  EXPECT_EQ(stats.pushes_applied(), 2 * chunks);
  EXPECT_EQ(stats.pushes_dropped(), chunks);
  EXPECT_EQ(stats.pushes_received(),
            stats.pushes_applied() + stats.pushes_dropped() + shard_->pending_gradients());
}

TEST_P(PsContractTest, SyncBackupWorkerGradientsAreDropped) {
  // replicas_to_aggregate 1 with two workers: the slower one is a backup.
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, 1);
  Create(def);
  const Values start = PullAll(def);
  const int chunks = static_cast<int>(Plan(def).size());
  pb::PushResponse r = Push(PushOf(def, Filled(def, 1.0f), "worker:0", 1, 0));
  EXPECT_EQ(r.global_step(), 1);
  r = Push(PushOf(def, Filled(def, 1.0f), "worker:1", 1, 0));
  EXPECT_EQ(r.dropped(), chunks);
  EXPECT_EQ(PullAll(def)[1][0], start[1][0] - 1.0f);
  const auto stats = Stats();
  EXPECT_EQ(stats.pushes_received(), stats.pushes_applied() + stats.pushes_dropped());
}

// Only a worker whose view is ahead of a restored ps sends one: it is told to pull again.
TEST_P(PsContractTest, SyncGradientForAFutureStepIsAborted) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, 2);
  Create(def);
  const Values start = PullAll(def);
  pb::PushResponse r;
  const absl::Status s = testing::CallPush(
      *client_, PushOf(def, Filled(def, 1.0f), "worker:0", 1, /*step=*/5), &r, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(s.message(), HasSubstr("pull again"));
  EXPECT_THAT(s.message(), HasSubstr("gradient for step 5"));
  EXPECT_THAT(s.message(), HasSubstr("at step 0"));
  EXPECT_THAT(s.message(), HasSubstr("ps:0"));
  EXPECT_EQ(PullAll(def), start);
  EXPECT_EQ(Stats().pushes_received(), 0);
  EXPECT_EQ(shard_->pending_gradients(), 0);
  // The refused request id was not remembered: the corrected retry applies.
  r = Push(PushOf(def, Filled(def, 1.0f), "worker:0", 1, /*step=*/0));
  EXPECT_FALSE(r.duplicate());
}

TEST_P(PsContractTest, PullWithMinStepWaitsForTheStep) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, 2);
  Create(def);
  const Values start = PullAll(def);
  pb::PullResponse waited;
  absl::Status wait_status;
  std::thread puller([&] {
    pb::PullRequest request;
    request.set_task("worker:0");
    request.set_min_step(1);
    request.set_timeout_ms(30000);
    wait_status = testing::CallPull(*client_, request, &waited, kTimeout);
  });
  Push(PushOf(def, Filled(def, 1.0f), "worker:0", 1, 0));
  Push(PushOf(def, Filled(def, 3.0f), "worker:1", 1, 0));
  puller.join();
  ASSERT_TRUE(wait_status.ok()) << wait_status;
  EXPECT_EQ(waited.global_step(), 1);
  for (const auto& c : waited.chunks()) EXPECT_EQ(c.step(), 1);
  EXPECT_EQ(Assemble(def, waited.chunks())[1][0], start[1][0] - 2.0f);
}

TEST_P(PsContractTest, PullWithMinStepTimesOutNamingTheStep) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, 2);
  Create(def);
  Push(PushOf(def, Filled(def, 1.0f), "worker:0", 1, 0));  // 1 of 2 gradients
  pb::PullRequest request;
  request.set_task("worker:0");
  request.add_chunks(2);
  request.set_min_step(1);
  request.set_timeout_ms(200);
  pb::PullResponse response;
  const absl::Status s = testing::CallPull(*client_, request, &response, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps:0"));
  EXPECT_THAT(s.message(), HasSubstr("chunk 2 to reach step 1"));
  EXPECT_THAT(s.message(), HasSubstr("at step 0 with 1 of 2 gradients"));
  EXPECT_EQ(Stats().pull_wait_timeouts(), 1);
}

TEST_P(PsContractTest, PushPullReturnsTheValuesAfterTheStep) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, 2);
  Create(def);
  const Values start = PullAll(def);
  pb::PushResponse responses[2];
  absl::Status statuses[2];
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      pb::PushRequest request =
          PushOf(def, Filled(def, w == 0 ? 1.0f : 5.0f), absl::StrCat("worker:", w), 1, 0);
      request.set_min_step(1);
      request.set_timeout_ms(30000);
      statuses[w] = testing::CallPushPull(*client_, request, &responses[w], kTimeout);
    });
  }
  for (auto& t : workers) t.join();
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(statuses[w].ok()) << statuses[w];
    EXPECT_EQ(responses[w].global_step(), 1);
    const Values got = Assemble(def, responses[w].values());
    for (size_t v = 0; v < got.size(); ++v) {
      for (size_t i = 0; i < got[v].size(); ++i) EXPECT_EQ(got[v][i], start[v][i] - 3.0f);
    }
  }
}

// Every worker but the last blocks in its PushPull until the step completes: the server must
// hold that many waiting calls at once, step after step.
TEST_P(PsContractTest, ManySyncWorkersWaitingTogetherAdvanceInLockstep) {
  constexpr int kWorkers = 16;
  constexpr int kSteps = 5;
  const auto def = Definition({Var("w", {8, 4}, ops::Initializer::Zeros(), 1)}, Sgd(1.0f),
                              pb::MODE_SYNC, kWorkers, /*chunk_bytes=*/64);
  Create(def);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int step = 0; step < kSteps; ++step) {
        pb::PushRequest request =
            PushOf(def, Filled(def, static_cast<float>(w + 1)), absl::StrCat("worker:", w),
                   static_cast<uint64_t>(step + 1), step);
        request.set_min_step(step + 1);
        request.set_timeout_ms(30000);
        pb::PushResponse response;
        const absl::Status s = testing::CallPushPull(*client_, request, &response, kTimeout);
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_EQ(response.dropped(), 0);
        ASSERT_GE(response.global_step(), step + 1);
      }
    });
  }
  for (auto& t : workers) t.join();
  int64_t step = 0;
  const Values got = PullAll(def, &step);
  EXPECT_EQ(step, kSteps);
  for (float x : got[0]) ASSERT_EQ(x, -kSteps * (kWorkers + 1) / 2.0f);  // mean of 1..16
  const auto stats = Stats();
  EXPECT_EQ(stats.pushes_applied(), stats.pushes_received());
  EXPECT_EQ(stats.steps_applied(), kSteps);
}

TEST_P(PsContractTest, StopWakesABlockedPullAndEndsPushes) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, 2);
  Create(def);
  const Values start = PullAll(def);
  Push(PushOf(def, Filled(def, 1.0f), "worker:0", 1, 0));  // 1 of 2: never completes
  pb::PullResponse waited;
  absl::Status wait_status;
  std::thread puller([&] {
    pb::PullRequest request;
    request.set_min_step(100);
    request.set_timeout_ms(60000);
    wait_status = testing::CallPull(*client_, request, &waited, kTimeout);
  });
  ASSERT_TRUE(client_->Stop("test", kTimeout).ok());
  puller.join();
  ASSERT_TRUE(wait_status.ok()) << wait_status;
  EXPECT_TRUE(waited.stopped());
  EXPECT_EQ(Assemble(def, waited.chunks()), start);

  const pb::PushResponse r = Push(PushOf(def, Filled(def, 1.0f), "worker:1", 1, 0));
  EXPECT_TRUE(r.stopped());
  EXPECT_EQ(r.applied(), 0);
  EXPECT_EQ(PullAll(def), start);
  const auto stats = Stats();
  EXPECT_TRUE(stats.stopped());
  // The unfinished step's gradients were dropped; the push after Stop was not received.
  EXPECT_EQ(shard_->pending_gradients(), 0);
  EXPECT_EQ(stats.pushes_received(), static_cast<int64_t>(Plan(def).size()));
  EXPECT_EQ(stats.pushes_received(), stats.pushes_applied() + stats.pushes_dropped());
}

// ---- ssp (bounded staleness) ------------------------------------------------------------

pb::CreateVariablesRequest SspModel(int num_workers, int staleness) {
  auto def = SmallModel(Sgd(1.0f), pb::MODE_SSP);
  def.set_num_workers(num_workers);
  def.set_staleness(staleness);
  return def;
}

pb::PushRequest SspPush(const pb::CreateVariablesRequest& def, int worker, uint64_t request_id) {
  pb::PushRequest request =
      PushOf(def, Filled(def, 1.0f), absl::StrCat("worker:", worker), request_id);
  request.set_timeout_ms(30000);
  return request;
}

TEST_P(PsContractTest, SspDefinitionsAreChecked) {
  pb::CreateVariablesResponse response;
  auto def = SspModel(0, 1);
  absl::Status s = client_->CreateVariables(def, &response, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("num_workers=0"));
  def = SspModel(2, -1);
  s = client_->CreateVariables(def, &response, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("staleness=-1"));
  Create(SspModel(2, 3));
  const auto stats = Stats();
  EXPECT_EQ(stats.mode(), pb::MODE_SSP);
  EXPECT_EQ(stats.staleness(), 3);
  EXPECT_THAT(stats.worker_clocks(), ::testing::ElementsAre(0, 0));
}

// The rule: a worker that pushed its step c gets values back only once every worker
// has pushed c - staleness. The slow worker pushes by hand while the fast one is held.
TEST_P(PsContractTest, SspFastWorkerIsHeldUntilTheSlowOneCatchesUp) {
  const auto def = SspModel(2, 1);
  Create(def);
  const Values start = PullAll(def);
  const int chunks = static_cast<int>(Plan(def).size());
  pb::PushResponse r;
  // Step 1: one ahead of worker:1, within the bound.
  ASSERT_TRUE(testing::CallPushPull(*client_, SspPush(def, 0, 1), &r, kTimeout).ok());
  EXPECT_EQ(r.values_size(), chunks);
  EXPECT_EQ(Assemble(def, r.values())[1][0], start[1][0] - 1.0f);
  // Step 2 (a plain push), then a pull that waits as PushPull does: two ahead, held.
  EXPECT_EQ(Push(SspPush(def, 0, 2)).applied(), chunks);
  pb::PullRequest pull;
  pull.set_task("worker:0");
  pull.set_ssp_wait(true);
  pull.set_timeout_ms(200);
  pb::PullResponse pulled;
  absl::Status s = testing::CallPull(*client_, pull, &pulled, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps:0: worker:0 waited"));
  EXPECT_THAT(s.message(), HasSubstr("behind: worker:1 at step 0 (2 steps behind)"));
  EXPECT_EQ(Stats().ssp_wait_timeouts(), 1);
  EXPECT_EQ(Stats().pull_wait_timeouts(), 1);

  // Step 3 as a PushPull in a thread: held until worker:1 has pushed 2 steps.
  std::atomic<bool> caught_up{false};
  bool released_after_catch_up = false;
  pb::PushResponse held;
  absl::Status held_status;
  std::thread fast([&] {
    held_status = testing::CallPushPull(*client_, SspPush(def, 0, 3), &held, kTimeout);
    released_after_catch_up = caught_up.load();
  });
  // Its push is applied (the ps counts it) before it waits.
  ASSERT_TRUE(WaitForStats([](const pb::StatsResponse& st) { return st.worker_clocks(0) >= 3; }));
  ASSERT_EQ(Stats().worker_clocks(0), 3);
  Push(SspPush(def, 1, 1));  // worker:1 at 1: not enough
  caught_up = true;
  Push(SspPush(def, 1, 2));  // worker:1 at 2 = 3 - 1
  fast.join();
  ASSERT_TRUE(held_status.ok()) << held_status;
  EXPECT_TRUE(released_after_catch_up);
  EXPECT_GT(held.wait_us(), 0);  // the hold is reported as the step's wait
  EXPECT_EQ(held.values_size(), chunks);
  // The values it got hold all five pushes (3 of its own, 2 of worker:1).
  EXPECT_EQ(Assemble(def, held.values())[1][0], start[1][0] - 5.0f);
  const auto stats = Stats();
  EXPECT_THAT(stats.worker_clocks(), ::testing::ElementsAre(3, 2));
  EXPECT_EQ(stats.pushes_applied(), 5 * chunks);
  // A retried push (same request id) is answered, not counted as a step.
  EXPECT_TRUE(Push(SspPush(def, 1, 2)).duplicate());
  EXPECT_THAT(Stats().worker_clocks(), ::testing::ElementsAre(3, 2));
}

// Workers running freely: whenever a PushPull returns, every chunk it read already holds the
// pushes the bound guarantees (its own step plus, from each other worker, step - staleness).
TEST_P(PsContractTest, SspConcurrentWorkersNeverReadPastTheBound) {
  constexpr int kWorkers = 3;
  constexpr int kSteps = 20;
  for (const int staleness : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("staleness ", staleness));
    TearDown();
    SetUp();
    const auto def = SspModel(kWorkers, staleness);
    Create(def);
    std::vector<std::thread> workers;
    std::atomic<int> violations{0};
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        for (int step = 1; step <= kSteps; ++step) {
          if (w == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the slow one
          pb::PushResponse r;
          const absl::Status s = testing::CallPushPull(
              *client_, SspPush(def, w, static_cast<uint64_t>(step)), &r, kTimeout);
          ASSERT_TRUE(s.ok()) << s;
          const int64_t least = step + (kWorkers - 1) * std::max(0, step - staleness);
          for (const pb::ChunkData& c : r.values()) {
            if (c.step() < least) violations.fetch_add(1);
          }
        }
      });
    }
    for (auto& t : workers) t.join();
    EXPECT_EQ(violations.load(), 0);
    const auto stats = Stats();
    EXPECT_THAT(stats.worker_clocks(), ::testing::ElementsAre(kSteps, kSteps, kSteps));
    EXPECT_EQ(stats.global_step(), kWorkers * kSteps);
  }
}

// A worker that finished or is gone must not hold the others: the chief releases it.
TEST_P(PsContractTest, SspReleasedWorkersAreNotWaitedFor) {
  const auto def = SspModel(3, 0);
  Create(def);
  Push(SspPush(def, 1, 1));
  std::atomic<bool> released{false};
  bool after_release = false;
  absl::Status held_status;
  std::thread fast([&] {
    pb::PushResponse r;
    held_status = testing::CallPushPull(*client_, SspPush(def, 0, 1), &r, kTimeout);
    after_release = released.load();
  });
  ASSERT_TRUE(WaitForStats([](const pb::StatsResponse& st) { return st.worker_clocks(0) >= 1; }));
  pb::ReleaseWorkersRequest release;
  release.add_workers(2);
  release.set_reason("worker:2 finished");
  released = true;
  ASSERT_TRUE(client_->ReleaseWorkers(release, kTimeout).ok());
  fast.join();
  ASSERT_TRUE(held_status.ok()) << held_status;
  EXPECT_TRUE(after_release);
  EXPECT_THAT(Stats().released_workers(), ::testing::ElementsAre(2));
  ASSERT_TRUE(client_->ReleaseWorkers(release, kTimeout).ok());  // a repeat is harmless
  pb::ReleaseWorkersRequest bad;
  bad.add_workers(0);
  bad.add_workers(3);
  const absl::Status s = client_->ReleaseWorkers(bad, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker 3 is not one of the 3 workers"));
  EXPECT_THAT(Stats().released_workers(), ::testing::ElementsAre(2));  // nothing of it
}

TEST_P(PsContractTest, SspStopReleasesAHeldWorker) {
  const auto def = SspModel(2, 0);
  Create(def);
  std::atomic<bool> stopped{false};
  bool after_stop = false;
  pb::PushResponse r;
  absl::Status held_status;
  std::thread fast([&] {
    held_status = testing::CallPushPull(*client_, SspPush(def, 0, 1), &r, kTimeout);
    after_stop = stopped.load();
  });
  ASSERT_TRUE(WaitForStats([](const pb::StatsResponse& st) { return st.worker_clocks(0) >= 1; }));
  stopped = true;
  ASSERT_TRUE(client_->Stop("test", kTimeout).ok());
  fast.join();
  ASSERT_TRUE(held_status.ok()) << held_status;
  EXPECT_TRUE(after_stop);
  EXPECT_TRUE(r.stopped());
}

// In ssp mode only the spec's workers push and wait; the chief still pulls (its evaluations).
TEST_P(PsContractTest, SspRefusesPushesFromOtherTasks) {
  const auto def = SspModel(2, 1);
  Create(def);
  const Values start = PullAll(def);
  pb::PushResponse r;
  for (const char* task : {"chief:0", "worker:2"}) {
    const absl::Status s =
        testing::CallPush(*client_, PushOf(def, Filled(def, 1.0f), task, 1), &r, kTimeout);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("in ssp mode only the workers")) << task;
  }
  pb::PullRequest pull;
  pull.set_task("chief:0");
  pull.set_ssp_wait(true);
  pb::PullResponse pulled;
  EXPECT_EQ(testing::CallPull(*client_, pull, &pulled, kTimeout).code(),
            absl::StatusCode::kInvalidArgument);
  pull.set_ssp_wait(false);
  ASSERT_TRUE(testing::CallPull(*client_, pull, &pulled, kTimeout).ok());
  EXPECT_EQ(Assemble(def, pulled.chunks()), start);
  EXPECT_EQ(Stats().pushes_received(), 0);
}

// Outside ssp mode the release is a no-op (the chief sends it only in ssp mode anyway).
TEST_P(PsContractTest, ReleaseWorkersIsANoOpInAsyncMode) {
  Create(SmallModel(Sgd(1.0f)));
  pb::ReleaseWorkersRequest release;
  release.add_workers(9);
  EXPECT_TRUE(client_->ReleaseWorkers(release, kTimeout).ok());
  EXPECT_EQ(Stats().worker_clocks_size(), 0);
}

// ---- checkpoints
// ---------------------------------------------------------------------------------

// SaveShard and RestoreShard touch only files inside the checkpoint folder (issue 12: a
// stranger could make a root ps overwrite any file); with no --checkpoint_dir they are off.
TEST_P(PsContractTest, CheckpointPathsAreConfinedToTheCheckpointFolder) {
  const auto def = SmallModel(Sgd(0.5f));
  Create(def);
  const std::string root = TempPath("checkpoints");
  std::filesystem::create_directories(root);
  const std::string outside = TempPath("outside");
  std::filesystem::create_directories(outside);
  std::filesystem::create_symlink(outside, std::filesystem::path(root) / "link");
  shard_->set_checkpoint_root(root, /*refuse_all=*/false);
  pb::SaveShardResponse saved;
  pb::SaveShardRequest save;
  save.set_path(root + "/shard.ckpt");
  ASSERT_TRUE(client_->SaveShard(save, &saved, kTimeout).ok());
  for (const std::string& bad : {outside + "/x.ckpt", root + "/../outside/x.ckpt",
                                 root + "/link/x.ckpt", root, std::string("/etc/fulcrum-x")}) {
    save.set_path(bad);
    const absl::Status s = client_->SaveShard(save, &saved, kTimeout);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << bad << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("is not inside the checkpoint folder")) << bad;
    pb::RestoreShardRequest restore;
    restore.set_path(bad);
    pb::RestoreShardResponse restored;
    EXPECT_EQ(client_->RestoreShard(restore, &restored, kTimeout).code(),
              absl::StatusCode::kPermissionDenied)
        << bad;
  }
  EXPECT_TRUE(std::filesystem::is_empty(outside));
  EXPECT_FALSE(std::filesystem::exists("/etc/fulcrum-x"));
  shard_->set_checkpoint_root("", /*refuse_all=*/true);
  save.set_path(root + "/again.ckpt");
  const absl::Status off = client_->SaveShard(save, &saved, kTimeout);
  EXPECT_EQ(off.code(), absl::StatusCode::kPermissionDenied) << off;
  EXPECT_THAT(off.message(), HasSubstr("checkpoints are off on this ps (no --checkpoint_dir)"));
}

TEST_P(PsContractTest, CheckpointRestoresValuesSlotsAndSteps) {
  ops::OptimizerConfig adam;
  adam.kind = ops::OptimizerKind::kAdam;
  adam.learning_rate = 0.05f;
  const auto def = SmallModel(adam);
  Create(def);
  Push(PushOf(def, Filled(def, 0.5f), "worker:0", 1));
  Push(PushOf(def, Filled(def, -0.25f), "worker:0", 2));

  pb::SaveShardRequest save;
  save.set_path(TempPath("shard.ckpt"));
  pb::SaveShardResponse saved;
  ASSERT_TRUE(client_->SaveShard(save, &saved, kTimeout).ok());
  EXPECT_EQ(saved.global_step(), 2);
  EXPECT_GT(saved.bytes_written(), 3 * (20 + 5 + 9) * 4);
  EXPECT_FALSE(std::filesystem::exists(save.path() + ".tmp"));
  const Values at_save = PullAll(def);

  Push(PushOf(def, Filled(def, 0.75f), "worker:0", 3));  // step 3 from the saved state
  const Values continued = PullAll(def);
  Push(PushOf(def, Filled(def, 9.0f), "worker:0", 4));  // and more

  pb::RestoreShardRequest restore;
  restore.set_path(save.path());
  pb::RestoreShardResponse restored;
  ASSERT_TRUE(client_->RestoreShard(restore, &restored, kTimeout).ok());
  EXPECT_EQ(restored.global_step(), 2);
  int64_t step = 0;
  EXPECT_EQ(PullAll(def, &step), at_save);
  EXPECT_EQ(step, 2);
  // The same step again gives the same values: Adam's moments and t came back too.
  Push(PushOf(def, Filled(def, 0.75f), "worker:0", 5));
  EXPECT_EQ(PullAll(def), continued);
}

TEST_P(PsContractTest, BadCheckpointsAreRefusedAndChangeNothing) {
  const auto def = SmallModel(Sgd(1.0f));
  Create(def);
  pb::SaveShardRequest save;
  save.set_path(TempPath("good.ckpt"));
  pb::SaveShardResponse saved;
  ASSERT_TRUE(client_->SaveShard(save, &saved, kTimeout).ok());
  Push(PushOf(def, Filled(def, 1.0f), "worker:0", 1));
  const Values now = PullAll(def);

  std::string bytes;
  {
    std::ifstream in(save.path(), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [](const std::string& path, const std::string& contents) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
    return path;
  };
  pb::RestoreShardRequest restore;
  pb::RestoreShardResponse restored;

  restore.set_path(write(TempPath("truncated.ckpt"), bytes.substr(0, bytes.size() / 2)));
  absl::Status s = client_->RestoreShard(restore, &restored, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("truncated.ckpt"));

  restore.set_path(write(TempPath("corrupt.ckpt"), std::string(64, '\xff')));
  s = client_->RestoreShard(restore, &restored, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;

  restore.set_path(TempPath("missing.ckpt"));
  s = client_->RestoreShard(restore, &restored, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("missing.ckpt"));

  // A checkpoint of another layout.
  Shard other(0);
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(
      other
          .CreateVariables(Definition({Var("w", {4, 4}, ops::Initializer::Zeros(), 1)}, Sgd(1.0f)),
                           &created)
          .ok());
  pb::SaveShardRequest other_save;
  other_save.set_path(TempPath("other.ckpt"));
  ASSERT_TRUE(other.SaveShard(other_save, &saved).ok());
  restore.set_path(other_save.path());
  s = client_->RestoreShard(restore, &restored, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;

  int64_t step = 0;
  EXPECT_EQ(PullAll(def, &step), now);
  EXPECT_EQ(step, 1);
}

// A sync save of a future step captures each chunk when it reaches that step, while training
// goes on past it: the file holds exactly the state of that step (issue 12: the chief needs
// one consistent step of every ps).
TEST_P(PsContractTest, SyncSaveAtAStepCapturesThatStepWhileTrainingGoesOn) {
  ops::OptimizerConfig momentum;
  momentum.kind = ops::OptimizerKind::kMomentum;
  momentum.learning_rate = 0.1f;
  momentum.momentum = 0.9f;
  const auto def = SmallModel(momentum, pb::MODE_SYNC, /*replicas=*/1);
  Create(def);
  Push(PushOf(def, Filled(def, 0.5f), "worker:0", 1, /*step=*/0));

  pb::SaveShardRequest save;
  save.set_path(TempPath("sub/step3.ckpt"));  // the folder does not exist yet
  save.set_at_step(3);
  pb::SaveShardResponse saved;
  absl::Status save_status;
  std::thread saver([&] { save_status = client_->SaveShard(save, &saved, kTimeout); });
  // The save registers before step 3, then training runs past it.
  ASSERT_TRUE(WaitForStats([](const pb::StatsResponse& st) { return st.save_pending(); }));
  Values at_3;
  for (int64_t step = 1; step < 6; ++step) {
    Push(PushOf(def, Filled(def, 0.1f * static_cast<float>(step)), "worker:0",
                static_cast<uint64_t>(step + 1), step));
    if (step == 2) at_3 = PullAll(def);  // after the step-2 gradient: global step 3
  }
  saver.join();
  ASSERT_TRUE(save_status.ok()) << save_status;
  EXPECT_EQ(saved.global_step(), 3);
  EXPECT_NE(saved.crc32c(), 0u);
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(save.path())), saved.bytes_written());

  const pb::RestoreShardRequest restore = RestoreOf(save, saved);
  pb::RestoreShardResponse restored;
  ASSERT_TRUE(client_->RestoreShard(restore, &restored, kTimeout).ok());
  EXPECT_EQ(restored.global_step(), 3);
  int64_t step = 0;
  EXPECT_EQ(PullAll(def, &step), at_3);
  EXPECT_EQ(step, 3);

  // A step every chunk is already past cannot be saved; asking for one in async is an error.
  save.set_at_step(2);
  pb::SaveShardResponse refused;
  const absl::Status past = client_->SaveShard(save, &refused, kTimeout);
  EXPECT_EQ(past.code(), absl::StatusCode::kFailedPrecondition) << past;
  EXPECT_THAT(past.message(), HasSubstr("past at_step 2"));
}

// Recovery (issue 12): a restore ends the pulls waiting for a step of the replaced state
// with Aborted, and a restarted ps created with hold_for_restore refuses pulls and pushes
// with Unavailable until the chief's RestoreShard, then serves the checkpoint's values.
TEST_P(PsContractTest, ARestoreEndsWaitingPullsAndAHeldShardServesOnlyOnceRestored) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, /*replicas=*/2);
  Create(def);
  const Values start = PullAll(def);
  pb::SaveShardRequest save;
  save.set_path(TempPath("recover.ckpt"));
  pb::SaveShardResponse saved;
  ASSERT_TRUE(client_->SaveShard(save, &saved, kTimeout).ok());
  Push(PushOf(def, Filled(def, 1.0f), "worker:0", 1, 0));  // 1 of 2 gradients of step 0

  pb::PullResponse waited;
  absl::Status wait_status;
  std::thread puller([&] {
    pb::PullRequest request;
    request.set_task("worker:0");
    request.set_min_step(1);
    request.set_timeout_ms(30000);
    wait_status = testing::CallPull(*client_, request, &waited, kTimeout);
  });
  ASSERT_TRUE(WaitForStats([](const pb::StatsResponse& st) { return st.requests_waiting() > 0; }));
  const pb::RestoreShardRequest restore = RestoreOf(save, saved);
  pb::RestoreShardResponse restored;
  ASSERT_TRUE(client_->RestoreShard(restore, &restored, kTimeout).ok());
  puller.join();
  EXPECT_EQ(wait_status.code(), absl::StatusCode::kAborted) << wait_status;
  EXPECT_THAT(wait_status.message(), HasSubstr("restored from a checkpoint"));
  EXPECT_THAT(wait_status.message(), HasSubstr("pull again"));
  // The pending gradient of the replaced state, one per chunk.
  EXPECT_EQ(Stats().pushes_dropped(), static_cast<int64_t>(Plan(def).size()));
  EXPECT_EQ(PullAll(def), start);

  // A restarted ps: the same definition, held until restored.
  Shard restarted(0);
  restarted.set_known_tasks({"chief:0", "worker:0"});
  auto held_def = def;
  held_def.set_hold_for_restore(true);
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(restarted.CreateVariables(held_def, &created).ok());
  fulcrum::testing::InProcessPsClient restarted_client(&restarted);
  pb::PullRequest pull;
  pull.set_task("worker:0");
  pb::PullResponse pulled;
  absl::Status s = testing::CallPull(restarted_client, pull, &pulled, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("waits for the chief to restore it"));
  pb::PushResponse pushed;
  s = testing::CallPush(restarted_client, PushOf(def, Filled(def, 1.0f), "worker:0", 7, 0), &pushed,
                        kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  pb::StatsResponse stats;
  restarted.Stats(&stats);
  EXPECT_EQ(stats.pushes_received(), 0);
  ASSERT_TRUE(restarted.RestoreShard(restore, &restored).ok());
  ASSERT_TRUE(testing::CallPull(restarted_client, pull, &pulled, kTimeout).ok());
  EXPECT_EQ(Assemble(def, pulled.chunks()), start);
}

// A save of a step that never comes ends when the shard stops, saying so, and writes nothing.
TEST_P(PsContractTest, SyncSaveOfAStepThatNeverComesEndsAtStop) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, /*replicas=*/1);
  Create(def);
  pb::SaveShardRequest save;
  save.set_path(TempPath("never.ckpt"));
  save.set_at_step(100);
  save.set_timeout_ms(60000);
  pb::SaveShardResponse saved;
  absl::Status status;
  std::thread saver([&] { status = client_->SaveShard(save, &saved, kTimeout); });
  ASSERT_TRUE(WaitForStats([](const pb::StatsResponse& st) { return st.save_pending(); }));
  shard_->Stop("test: run over");
  saver.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("training stopped"));
  EXPECT_FALSE(std::filesystem::exists(save.path()));
  // With a short timeout instead: DeadlineExceeded naming the chunks behind.
  Shard other(0);
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(other.CreateVariables(def, &created).ok());
  save.set_timeout_ms(100);
  status = other.SaveShard(save, &saved);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), HasSubstr("did not reach step 100"));
}

// A checkpoint whose bytes do not match the manifest's size and CRC-32C is refused as corrupt
// and changes nothing (issue 12: one flipped bit in the values restored silently); old files
// listed in remove_paths are deleted by the next save.
TEST_P(PsContractTest, ChecksumMismatchIsRefusedAndOldFilesAreRemoved) {
  const auto def = SmallModel(Sgd(1.0f));
  Create(def);
  pb::SaveShardRequest save;
  save.set_path(TempPath("ckpt-0/ps-0.ckpt"));
  pb::SaveShardResponse saved;
  ASSERT_TRUE(client_->SaveShard(save, &saved, kTimeout).ok());
  Push(PushOf(def, Filled(def, 1.0f), "worker:0", 1));
  const Values now = PullAll(def);

  std::string bytes;
  {
    std::ifstream in(save.path(), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() - 3] ^= 0x01;  // one bit of the last value
  std::ofstream(save.path(), std::ios::binary | std::ios::trunc) << bytes;
  const pb::RestoreShardRequest restore = RestoreOf(save, saved);
  pb::RestoreShardResponse restored;
  const absl::Status s = client_->RestoreShard(restore, &restored, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("ckpt-0/ps-0.ckpt: corrupt"));
  int64_t step = 0;
  EXPECT_EQ(PullAll(def, &step), now);
  EXPECT_EQ(step, 1);

  pb::SaveShardRequest next;
  next.set_path(TempPath("ckpt-1/ps-0.ckpt"));
  next.add_remove_paths(save.path());
  ASSERT_TRUE(client_->SaveShard(next, &saved, kTimeout).ok());
  EXPECT_FALSE(std::filesystem::exists(save.path()));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(save.path()).parent_path()));
  EXPECT_TRUE(std::filesystem::exists(next.path()));
}

// ---- ping
// -----------------------------------------------------------------------------------------

TEST_P(PsContractTest, PingEchoesTheRequestedBytes) {
  pb::PingRequest request;
  request.set_payload(std::string(1000, 'x'));
  request.set_reply_bytes(4096);
  pb::PingResponse response;
  ASSERT_TRUE(client_->Ping(request, &response, kTimeout).ok());
  EXPECT_EQ(response.payload().size(), 4096u);
  EXPECT_EQ(response.task_index(), 0);
  request.set_reply_bytes(-1);
  EXPECT_EQ(client_->Ping(request, &response, kTimeout).code(), absl::StatusCode::kInvalidArgument);
  // 256 MiB replies (8 of them took the ps to 4.2 GB) are refused; the largest chunk is fine.
  request.set_reply_bytes(int64_t{256} << 20);
  const absl::Status big = client_->Ping(request, &response, kTimeout);
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument) << big;
  EXPECT_THAT(big.message(), HasSubstr("must be between 0 and 67108864"));
  request.set_reply_bytes(kMaxPingReply);
  ASSERT_TRUE(client_->Ping(request, &response, kTimeout).ok());
  EXPECT_EQ(static_cast<int64_t>(response.payload().size()), kMaxPingReply);
}

// ---- frames over borrowed memory, as a worker sends them -----------------------------------

// The parts of chunk c of `values` (per variable), in segment order.
template <typename T, typename V>
std::vector<std::span<T>> ChunkParts(const std::vector<runtime::Chunk>& plan, size_t c, V& values) {
  std::vector<std::span<T>> parts;
  for (const auto& seg : plan[c].segments) {
    parts.push_back(std::span<T>(values[static_cast<size_t>(seg.variable)])
                        .subspan(static_cast<size_t>(seg.offset), static_cast<size_t>(seg.count)));
  }
  return parts;
}

// Push-pulls every chunk of `grads` through the frame calls in `dtype`; returns the values the
// reply carried (per variable). With no_values the reply must carry none (zeros returned).
Values FramePushPull(runtime::PsClient& client, const pb::CreateVariablesRequest& def,
                     const Values& grads, pb::WireDtype dtype, uint64_t request_id,
                     bool no_values = false, int64_t* global_step = nullptr) {
  const auto plan = Plan(def);
  runtime::PsClient::PushFrame frame;
  frame.header.set_task("worker:0");
  frame.header.set_request_id(request_id);
  frame.header.set_reply_dtype(dtype);
  frame.header.set_no_values(no_values);
  for (size_t c = 0; c < plan.size(); ++c) {
    runtime::OutChunk& out = frame.chunks.emplace_back();
    out.meta.set_chunk(static_cast<int>(c));
    const auto parts = ChunkParts<const float>(plan, c, grads);
    if (dtype == pb::WIRE_F32) {
      runtime::BorrowPayload(parts, &out);
    } else {
      runtime::CopyPayload(parts, dtype, &out);
    }
  }
  Values returned = ZerosLike(def);
  runtime::PsClient::PushReply reply;
  reply.sink = [&](const pb::ChunkData& meta, const transport::Pieces& pieces) {
    const auto parts = ChunkParts<float>(plan, static_cast<size_t>(meta.chunk()), returned);
    return runtime::DecodePayload(pieces, meta.wire_dtype(), parts, "reply");
  };
  std::promise<absl::Status> done;
  client.PushPullAsync(&frame, &reply, kTimeout,
                       [&done](absl::Status s) { done.set_value(std::move(s)); });
  const absl::Status s = done.get_future().get();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(reply.header.values_size(), no_values ? 0 : static_cast<int>(plan.size()));
  if (global_step != nullptr) *global_step = reply.header.global_step();
  return returned;
}

// What `dtype` makes of each value.
Values OnTheWire(Values values, pb::WireDtype dtype) {
  for (auto& v : values) {
    std::string bytes(v.size() * 2, '\0');
    const std::span<const float> in[] = {v};
    runtime::EncodePayload(in, dtype, bytes.data());
    const std::span<float> out[] = {v};
    const transport::Pieces pieces = {std::span<const char>(bytes)};
    EXPECT_TRUE(runtime::DecodePayload(pieces, dtype, out, "round trip").ok());
  }
  return values;
}

TEST_P(PsContractTest, GradientsSentFromBorrowedMemoryComeBackAsTheNewValues) {
  const auto def = SmallModel(Sgd(0.5f));
  Create(def);
  const Values start = PullAll(def);
  Values grad = ZerosLike(def);
  for (size_t v = 0; v < grad.size(); ++v) {
    for (size_t i = 0; i < grad[v].size(); ++i) grad[v][i] = 0.1f * static_cast<float>(i % 5 + v);
  }
  const Values returned = FramePushPull(*client_, def, grad, pb::WIRE_F32, 1);
  EXPECT_EQ(returned, PullAll(def));
  for (size_t v = 0; v < grad.size(); ++v) {
    for (size_t i = 0; i < grad[v].size(); ++i) {
      EXPECT_NEAR(returned[v][i], start[v][i] - 0.5f * grad[v][i], 1e-6) << v << "," << i;
    }
  }
  const auto stats = Stats();
  int64_t elements = 0;
  for (const auto& v : grad) elements += static_cast<int64_t>(v.size());
  EXPECT_EQ(stats.bytes_pushed(), 4 * elements);
  EXPECT_EQ(stats.pushes_applied(), static_cast<int64_t>(Plan(def).size()));
}

// --async_pull=at_step_start: the push is applied and answered without values (the worker
// pulls them when its next step begins); a push-pull that waits for a step cannot do that.
TEST_P(PsContractTest, ANoValuesPushPullIsAppliedAndAnsweredWithoutValues) {
  const auto def = SmallModel(Sgd(0.5f));
  Create(def);
  const Values start = PullAll(def);
  const Values grad = Filled(def, 1.0f);
  int64_t global_step = -1;
  const Values returned =
      FramePushPull(*client_, def, grad, pb::WIRE_F32, 1, /*no_values=*/true, &global_step);
  EXPECT_EQ(returned, ZerosLike(def));
  EXPECT_EQ(global_step, 1);
  const Values after = PullAll(def);
  for (size_t v = 0; v < after.size(); ++v) {
    for (size_t i = 0; i < after[v].size(); ++i) {
      EXPECT_FLOAT_EQ(after[v][i], start[v][i] - 0.5f) << v << "," << i;
    }
  }
  int64_t elements = 0;
  for (const auto& v : start) elements += static_cast<int64_t>(v.size());
  EXPECT_EQ(Stats().bytes_pulled(), 2 * 4 * elements);  // the two PullAll, nothing else

  pb::PushRequest waits = PushOf(def, grad, "worker:0", 2);
  waits.set_no_values(true);
  waits.set_min_step(2);
  pb::PushResponse refused;
  const absl::Status s = testing::CallPushPull(*client_, waits, &refused, kTimeout);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("no_values with min_step 2"));
  EXPECT_EQ(PullAll(def), after);  // nothing applied
}

TEST_P(PsContractTest, SixteenBitWireRoundsGradientsAndRepliesButThePsKeepsFloat32) {
  for (const pb::WireDtype dtype : {pb::WIRE_BF16, pb::WIRE_F16}) {
    SCOPED_TRACE(runtime::WireDtypeName(dtype));
    TearDown();
    SetUp();
    const auto def = SmallModel(Sgd(0.5f));
    Create(def);
    const Values start = PullAll(def);
    Values grad = ZerosLike(def);
    for (size_t v = 0; v < grad.size(); ++v) {
      for (size_t i = 0; i < grad[v].size(); ++i) grad[v][i] = 1.0f / static_cast<float>(3 + i);
    }
    const Values returned = FramePushPull(*client_, def, grad, dtype, 1);
    const Values held = PullAll(def);  // float32 from the ps
    const Values sent = OnTheWire(grad, dtype);
    EXPECT_EQ(returned, OnTheWire(held, dtype));
    EXPECT_NE(sent, grad);  // 1/3, 1/5, ... are not exact in 16 bits
    for (size_t v = 0; v < grad.size(); ++v) {
      for (size_t i = 0; i < grad[v].size(); ++i) {
        EXPECT_NEAR(held[v][i], start[v][i] - 0.5f * sent[v][i], 1e-6) << v << "," << i;
      }
    }
    int64_t elements = 0;
    for (const auto& v : grad) elements += static_cast<int64_t>(v.size());
    EXPECT_EQ(Stats().bytes_pushed(), 2 * elements);  // the bytes the wire carried
  }
}

// A raw client sends bytes a generated or frame client never would: each is refused with a
// reason and nothing of it is applied.
TEST(PsFrameTest, MalformedFramesFromARawClientAreRefusedAndApplyNothing) {
  Shard shard(0);
  PsService service(&shard);
  int port = 0;
  auto server = StartServer(&service, "ps:0", "127.0.0.1:0", &port);
  ASSERT_TRUE(server.ok()) << server.status();
  runtime::GrpcPsClient client("ps:0", absl::StrCat("127.0.0.1:", port));
  ASSERT_TRUE(client.WaitUntilReady(kTimeout));
  const auto def = SmallModel(Sgd(1.0f));
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(client.CreateVariables(def, &created, kTimeout).ok());
  pb::PullRequest pull_all;
  pull_all.set_task("worker:0");
  pb::PullResponse before;
  ASSERT_TRUE(testing::CallPull(client, pull_all, &before, kTimeout).ok());

  auto call = [&](const char* method, const std::string& bytes) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        client.channel().get(),
        grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::NORMAL_RPC), &context,
        request, &response);
  };
  const std::string push = PushOf(def, Filled(def, 1.0f), "worker:0", 1).SerializeAsString();

  // Cut inside the last chunk's payload.
  grpc::Status s = call("/fulcrum.pb.ParameterServer/Push", push.substr(0, push.size() - 3));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("truncated"));
  s = call("/fulcrum.pb.ParameterServer/PushPull", push.substr(0, push.size() - 3));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A chunk in a dtype this ps does not know.
  pb::PushRequest unknown = PushOf(def, Filled(def, 1.0f), "worker:0", 2);
  unknown.mutable_gradients(1)->set_wire_dtype(static_cast<pb::WireDtype>(9));
  s = call("/fulcrum.pb.ParameterServer/Push", unknown.SerializeAsString());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("chunk 1: unknown wire dtype 9"));

  // A bf16 payload one value short of its chunk: named by the shard, nothing applied.
  pb::PushRequest short_bf16 = PushOf(def, Filled(def, 1.0f), "worker:0", 3);
  for (auto& g : *short_bf16.mutable_gradients()) {
    g.set_wire_dtype(pb::WIRE_BF16);
    g.mutable_data()->resize(g.data().size() / 2);
  }
  short_bf16.mutable_gradients(2)->mutable_data()->resize(
      short_bf16.gradients(2).data().size() - 2);
  s = call("/fulcrum.pb.ParameterServer/Push", short_bf16.SerializeAsString());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("chunk 2 gradient: payload has"));

  // A reply in a dtype this ps does not know.
  pb::PullRequest bad_reply = pull_all;
  bad_reply.set_reply_dtype(static_cast<pb::WireDtype>(5));
  s = call("/fulcrum.pb.ParameterServer/Pull", bad_reply.SerializeAsString());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("unknown reply wire dtype 5"));

  pb::PullResponse after;
  ASSERT_TRUE(testing::CallPull(client, pull_all, &after, kTimeout).ok());
  EXPECT_EQ(Assemble(def, after.chunks()), Assemble(def, before.chunks()));
  pb::StatsResponse stats;
  ASSERT_TRUE(client.Stats(&stats, kTimeout).ok());
  EXPECT_EQ(stats.pushes_received(), 0);
  shard.Stop("test over");
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  (*server)->Wait();
}

// ---- the tcp data plane itself ------------------------------------------------------------

// A ps with a tcp data plane on 127.0.0.1, a client using it, and raw sockets to it.
class TcpDataPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shard_ = std::make_unique<Shard>(0);
    service_ = std::make_unique<PsService>(shard_.get());
    StartDataPlane();
    int port = 0;
    auto server = StartServer(service_.get(), "ps:0", "127.0.0.1:0", &port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<runtime::GrpcPsClient>("ps:0", absl::StrCat("127.0.0.1:", port));
    ASSERT_TRUE(client_->WaitUntilReady(kTimeout));
    client_->set_tcp_data_plane(true);
    stub_ = pb::ParameterServer::NewStub(client_->channel());
  }

  void TearDown() override {
    client_.reset();
    shard_->Stop("test over");
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
    data_plane_->Shutdown();
  }

  void StartDataPlane() {
    auto data_plane = ::fulcrum::ps::StartDataPlane(service_.get(), "ps:0", "127.0.0.1");
    ASSERT_TRUE(data_plane.ok()) << data_plane.status();
    if (data_plane_ != nullptr) retired_.push_back(std::move(data_plane_));
    data_plane_ = std::move(*data_plane);
  }

  // A ticket for `task` from OpenDataPlane, as a worker gets one.
  std::string Ticket(const std::string& task) {
    pb::OpenDataPlaneRequest request;
    request.set_task(task);
    pb::OpenDataPlaneResponse response;
    grpc::ClientContext context;
    const grpc::Status s = stub_->OpenDataPlane(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.port(), data_plane_->port());
    return response.ticket();
  }

  // A raw connection to the data plane that sent `hello` (the whole kHelloBytes).
  int Connect(const char* hello) {
    absl::StatusOr<int> fd =
        transport::ConnectTcp("127.0.0.1", data_plane_->port(), absl::Now() + kTimeout);
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (!fd.ok()) return -1;
    iovec iov{const_cast<char*>(hello), transport::kHelloBytes};
    EXPECT_TRUE(transport::WriteFull(*fd, std::span<iovec>(&iov, 1), absl::Now() + kTimeout).ok());
    fds_.push_back(*fd);
    return *fd;
  }
  // The server's answer to a hello: true when accepted.
  bool Accepted(int fd) {
    char answer[transport::kHelloAnswerBytes];
    const absl::Status s = transport::ReadFull(fd, answer, absl::Now() + kTimeout);
    return s.ok() && answer[8] == 0;
  }
  int ConnectWithTicket(const std::string& task) {
    char hello[transport::kHelloBytes];
    transport::EncodeHello(Ticket(task), hello);
    const int fd = Connect(hello);
    EXPECT_TRUE(Accepted(fd));
    return fd;
  }
  // Sends a request of `method` with `body`.
  void Send(int fd, transport::DataMethod method, uint64_t id, const std::string& body,
            uint64_t claimed_length) {
    transport::RequestHeader h;
    h.method = static_cast<uint32_t>(method);
    h.id = id;
    h.length = claimed_length;
    h.timeout_us = absl::ToInt64Microseconds(kTimeout);
    char header[transport::kRequestHeaderBytes];
    transport::EncodeRequestHeader(h, header);
    iovec iov[2] = {{header, sizeof(header)}, {const_cast<char*>(body.data()), body.size()}};
    ASSERT_TRUE(transport::WriteFull(fd, iov, absl::Now() + kTimeout).ok());
  }
  // Reads one reply: its status (the body is dropped).
  absl::Status Reply(int fd, uint64_t want_id) {
    char header[transport::kReplyHeaderBytes];
    if (absl::Status s = transport::ReadFull(fd, header, absl::Now() + kTimeout); !s.ok()) return s;
    absl::StatusOr<transport::ReplyHeader> h =
        transport::DecodeReplyHeader(header, transport::kMaxMessageBytes);
    if (!h.ok()) return h.status();
    EXPECT_EQ(h->id, want_id);
    std::string rest(h->message_length + h->length, '\0');
    if (absl::Status s = transport::ReadFull(fd, rest, absl::Now() + kTimeout); !s.ok()) return s;
    return absl::Status(static_cast<absl::StatusCode>(h->code), rest.substr(0, h->message_length));
  }
  // True when the server closed `fd` (a read sees the end).
  static bool Closed(int fd) {
    char byte;
    return absl::IsUnavailable(
        transport::ReadFull(fd, std::span<char>(&byte, 1), absl::Now() + kTimeout));
  }

  pb::StatsResponse Stats(runtime::PsClient& client) {
    pb::StatsResponse stats;
    EXPECT_TRUE(client.Stats(&stats, kTimeout).ok());
    return stats;
  }

  ~TcpDataPlaneTest() override {
    for (int fd : fds_) close(fd);
  }

  std::unique_ptr<Shard> shard_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<transport::TcpDataServer> data_plane_;
  std::vector<std::unique_ptr<transport::TcpDataServer>> retired_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<runtime::GrpcPsClient> client_;
  std::unique_ptr<pb::ParameterServer::Stub> stub_;
  std::vector<int> fds_;
};

TEST_F(TcpDataPlaneTest, ConnectionsWithoutALiveTicketAreRefused) {
  const auto def = SmallModel(Sgd(1.0f));
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(client_->CreateVariables(def, &created, kTimeout).ok());

  char hello[transport::kHelloBytes];
  transport::EncodeHello(std::string(transport::kTicketBytes, 'x'), hello);  // made up
  int fd = Connect(hello);
  EXPECT_FALSE(Accepted(fd));
  EXPECT_TRUE(Closed(fd));

  std::memset(hello, 'G', sizeof(hello));  // not a hello at all: closed without an answer
  EXPECT_TRUE(Closed(Connect(hello)));

  const std::string ticket = Ticket("worker:0");
  transport::EncodeHello(ticket, hello);
  EXPECT_TRUE(Accepted(Connect(hello)));
  fd = Connect(hello);  // the same ticket again: used up
  EXPECT_FALSE(Accepted(fd));
  EXPECT_EQ(data_plane_->connections_refused(), 3);

  // A ticket is only handed out as a data RPC of that task would be allowed.
  shard_->set_known_tasks({"worker:0"});
  pb::OpenDataPlaneRequest request;
  request.set_task("intruder:7");
  pb::OpenDataPlaneResponse response;
  grpc::ClientContext context;
  const grpc::Status s = stub_->OpenDataPlane(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("intruder:7"));
  EXPECT_TRUE(response.ticket().empty());
  EXPECT_EQ(Stats(*client_).pushes_received(), 0);
}

TEST_F(TcpDataPlaneTest, BadFramesAreRefusedNamingWhyAndApplyNothing) {
  const auto def = SmallModel(Sgd(1.0f));
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(client_->CreateVariables(def, &created, kTimeout).ok());
  const std::string push = PushOf(def, Filled(def, 1.0f), "worker:0", 1).SerializeAsString();

  // A truncated body (the header's length is honest): refused, the connection stays.
  int fd = ConnectWithTicket("worker:0");
  Send(fd, transport::DataMethod::kPushPull, 1, push.substr(0, push.size() - 3), push.size() - 3);
  absl::Status s = Reply(fd, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("PushPull request"));
  // A request in another task's name: refused.
  Send(fd, transport::DataMethod::kPushPull, 2,
       PushOf(def, Filled(def, 1.0f), "worker:1", 2).SerializeAsString(), push.size());
  s = Reply(fd, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr("opened for worker:0"));
  // An unknown method: refused by name.
  Send(fd, static_cast<transport::DataMethod>(9), 3, push, push.size());
  s = Reply(fd, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("unknown data-plane method 9"));

  // A frame cut off by the peer closing: nothing of it is applied.
  Send(fd, transport::DataMethod::kPushPull, 4, push.substr(0, 10), push.size());
  close(fd);
  fds_.pop_back();
  // A body over the message limit: the connection is closed.
  fd = ConnectWithTicket("worker:0");
  Send(fd, transport::DataMethod::kPushPull, 5, "", uint64_t{1} << 40);
  EXPECT_TRUE(Closed(fd));
  // Not a request header at all: closed.
  fd = ConnectWithTicket("worker:0");
  const std::string junk(transport::kRequestHeaderBytes, 'J');
  iovec iov{const_cast<char*>(junk.data()), junk.size()};
  ASSERT_TRUE(transport::WriteFull(fd, std::span<iovec>(&iov, 1), absl::Now() + kTimeout).ok());
  EXPECT_TRUE(Closed(fd));

  // Nothing was applied; a well-formed push on a new connection still is.
  pb::StatsResponse stats = Stats(*client_);
  EXPECT_EQ(stats.pushes_received(), 0);
  EXPECT_EQ(stats.global_step(), 0);
  fd = ConnectWithTicket("worker:0");
  Send(fd, transport::DataMethod::kPushPull, 6, push, push.size());
  EXPECT_TRUE(Reply(fd, 6).ok());
  EXPECT_EQ(Stats(*client_).pushes_received(), static_cast<int64_t>(Plan(def).size()));
}

TEST_F(TcpDataPlaneTest, ACallEndsAtItsDeadlineAndTheConnectionGoesOn) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, 2);
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(client_->CreateVariables(def, &created, kTimeout).ok());
  pb::PullRequest waiting;
  waiting.set_task("worker:0");
  waiting.set_min_step(100);  // never comes
  waiting.set_timeout_ms(60000);
  pb::PullResponse response;
  const absl::Status s = testing::CallPull(*client_, waiting, &response, absl::Milliseconds(300));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("Pull on ps:0"));
  pb::PullRequest now;
  now.set_task("worker:0");
  EXPECT_TRUE(testing::CallPull(*client_, now, &response, kTimeout).ok());
  EXPECT_EQ(response.chunks_size(), static_cast<int>(Plan(def).size()));
}

TEST_F(TcpDataPlaneTest, ALostConnectionEndsItsCallsUnavailableAndTheNextCallReconnects) {
  const auto def = SmallModel(Sgd(1.0f), pb::MODE_SYNC, 2);
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(client_->CreateVariables(def, &created, kTimeout).ok());
  pb::PullRequest waiting;
  waiting.set_task("worker:0");
  waiting.set_min_step(100);
  waiting.set_timeout_ms(3000);  // the ps's own wait ends DeadlineExceeded, not Unavailable
  pb::PullResponse response;
  absl::Status s;
  std::thread puller([&] { s = testing::CallPull(*client_, waiting, &response, kTimeout); });
  // The ps's data plane goes (its connections with it) once the pull waits there.
  for (int i = 0; i < 3000; ++i) {
    pb::StatsResponse stats;
    shard_->Stats(&stats);
    if (stats.requests_waiting() > 0) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  data_plane_->Shutdown();
  puller.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps:0 data plane"));
  // A new one (a restarted ps): the next call opens a connection to it.
  StartDataPlane();
  pb::PullRequest now;
  now.set_task("worker:0");
  s = testing::CallPull(*client_, now, &response, kTimeout);
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace fulcrum::ps
