// tests: ShardedVariables' retry against a real ps::Shard in this process, through
// FaultyPsClient (tests/testing/faulty_ps_client.h). A push-pull whose reply is lost, that
// fails before reaching the PS, or that the transport sends twice must be applied exactly
// once (values and the shard's counters), and be reported as a retry or a duplicate; a
// fault that outlasts the one retry must come back as the error. Sync and async modes.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"
#include "ops/tensor.h"
#include "ps/shard.h"
#include "runtime/client/sharded_variables.h"
#include "runtime/cluster/placement.h"
#include "runtime/cluster/shard_defs.h"
#include "tests/testing/faulty_ps_client.h"
#include "tests/testing/in_process_ps_client.h"

namespace fulcrum::runtime {
namespace {

using ::fulcrum::testing::Fault;
using ::fulcrum::testing::FaultName;
using ::fulcrum::testing::FaultyPsClient;

constexpr absl::Duration kTimeout = absl::Seconds(30);
constexpr float kLearningRate = 0.5f;
constexpr int64_t kChunkBytes = 28;  // 7 floats: "w" [4, 5] spans three chunks

struct Case {
  pb::Mode mode;
  Fault fault;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << ModeName(c.mode) << "/" << FaultName(c.fault);
}

std::vector<VariableInfo> Variables() {
  return {{"w", ops::Shape({4, 5}), ops::Initializer::GlorotUniform()},
          {"b", ops::Shape({5}), ops::Initializer::Constant(0.5f)}};
}

// One PS holding the model, one worker reaching it through a FaultyPsClient.
class ShardedVariablesFaultTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto placement = PlaceVariables(variables_, 1, PlacementStrategy::kRoundRobin, 1 << 20);
    ASSERT_TRUE(placement.ok()) << placement.status();
    placement_ = *placement;
    ShardDefOptions options;
    options.run_id = "fault-test";
    options.optimizer.kind = ops::OptimizerKind::kSgd;
    options.optimizer.learning_rate = kLearningRate;
    options.mode = GetParam().mode;
    options.replicas_to_aggregate = GetParam().mode == pb::MODE_SYNC ? 1 : 0;
    options.chunk_bytes = kChunkBytes;
    options.seed = 7;
    pb::CreateVariablesResponse created;
    ASSERT_TRUE(inner_
                    .CreateVariables(ShardDefinition(placement_, variables_, 0, options), &created,
                                     kTimeout)
                    .ok());
    vars_ = std::make_unique<ShardedVariables>(placement_, kChunkBytes,
                                               std::vector<PsClient*>{&faulty_}, "worker:0");
    ASSERT_GT(vars_->num_chunks(), 2);
    for (const VariableInfo& v : variables_) {
      initial_.push_back(ops::Tensor::Zeros(v.shape));
      values_.push_back(ops::Tensor::Zeros(v.shape));
      // Distinct gradient elements, so a chunk applied twice or to the wrong place shows.
      ops::Tensor g = ops::Tensor::Zeros(v.shape);
      for (int64_t i = 0; i < g.num_elements(); ++i) {
        g.data()[i] = 0.01f * static_cast<float>(i + 1);
      }
      grads_.push_back(std::move(g));
    }
    TransferResult pulled;
    ASSERT_TRUE(vars_->PullAll(0, kTimeout, initial_, &pulled).ok());
  }

  void TearDown() override { shard_.Stop("test over"); }

  bool sync() const { return GetParam().mode == pb::MODE_SYNC; }

  // PushPullAll of grads_ at step 0 (sync: reading step 1's values back).
  absl::Status PushPull(TransferResult* result) {
    return vars_->PushPullAll(0, sync() ? 1 : 0, grads_, values_, kTimeout, result);
  }

  // values_ hold exactly one SGD step from the initial values.
  void ExpectAppliedOnce() {
    for (size_t v = 0; v < values_.size(); ++v) {
      for (int64_t i = 0; i < values_[v].num_elements(); ++i) {
        const float expect = initial_[v].data()[i] - kLearningRate * grads_[v].data()[i];
        ASSERT_FLOAT_EQ(values_[v].data()[i], expect) << variables_[v].name << "[" << i << "]";
      }
    }
  }

  pb::StatsResponse Stats() {
    pb::StatsResponse stats;
    EXPECT_TRUE(inner_.Stats(&stats, kTimeout).ok());
    return stats;
  }

  const std::vector<VariableInfo> variables_ = Variables();
  Placement placement_;
  ps::Shard shard_{0};
  fulcrum::testing::InProcessPsClient inner_{&shard_};
  FaultyPsClient faulty_{&inner_};
  std::unique_ptr<ShardedVariables> vars_;
  std::vector<ops::Tensor> initial_, values_, grads_;
};

TEST_P(ShardedVariablesFaultTest, OneFaultIsAppliedExactlyOnce) {
  faulty_.Inject(GetParam().fault, 1, /*chunk=*/1);
  TransferResult result;
  const absl::Status s = PushPull(&result);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(faulty_.faults_injected(), 1);
  ExpectAppliedOnce();

  const int64_t chunks = vars_->num_chunks();
  const pb::StatsResponse stats = Stats();
  EXPECT_EQ(stats.pushes_applied(), chunks);
  EXPECT_EQ(stats.pushes_received(), chunks);
  EXPECT_EQ(stats.pushes_dropped(), 0);
  EXPECT_EQ(stats.global_step(), 1);
  EXPECT_EQ(result.global_step, 1);

  const bool reached_ps_twice =
      GetParam().fault == Fault::kDropReply || GetParam().fault == Fault::kDuplicate;
  const bool retried =
      GetParam().fault == Fault::kDropReply || GetParam().fault == Fault::kFailBeforeSend;
  EXPECT_EQ(stats.pushes_duplicate(), reached_ps_twice ? 1 : 0);
  EXPECT_EQ(result.duplicates, reached_ps_twice ? 1 : 0);
  EXPECT_EQ(result.retries, retried ? 1 : 0);
  // A chunk answered as a duplicate reports nothing applied by that answer.
  EXPECT_EQ(result.applied, chunks - (reached_ps_twice ? 1 : 0));

  // The next step goes through cleanly on top of it.
  TransferResult next;
  ASSERT_TRUE(vars_->PushPullAll(1, sync() ? 2 : 0, grads_, values_, kTimeout, &next).ok());
  EXPECT_EQ(next.retries, 0);
  EXPECT_EQ(next.duplicates, 0);
  EXPECT_EQ(next.applied, chunks);
  EXPECT_EQ(Stats().pushes_applied(), 2 * chunks);
}

// The faults that fail a call (a duplicate does not).
class ShardedVariablesFailureTest : public ShardedVariablesFaultTest {};

TEST_P(ShardedVariablesFailureTest, AFaultPastTheRetryIsReturned) {
  faulty_.Inject(GetParam().fault, 2, /*chunk=*/1);  // chunk 1's first try and its retry
  TransferResult result;
  const absl::Status s = PushPull(&result);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(faulty_.faults_injected(), 2);

  // Whatever reached the PS was applied once: every chunk when only replies were lost,
  // every chunk but the failed one when the call never reached it.
  const int64_t chunks = vars_->num_chunks();
  const pb::StatsResponse stats = Stats();
  const bool lost_replies = GetParam().fault == Fault::kDropReply;
  EXPECT_EQ(stats.pushes_applied(), lost_replies ? chunks : chunks - 1);
  EXPECT_EQ(stats.pushes_duplicate(), lost_replies ? 1 : 0);
  EXPECT_EQ(stats.pushes_dropped(), 0);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrCat(ModeName(info.param.mode), "_", FaultName(info.param.fault));
}

INSTANTIATE_TEST_SUITE_P(AllFaults, ShardedVariablesFaultTest,
                         ::testing::Values(Case{pb::MODE_ASYNC, Fault::kDropReply},
                                           Case{pb::MODE_ASYNC, Fault::kFailBeforeSend},
                                           Case{pb::MODE_ASYNC, Fault::kDuplicate},
                                           Case{pb::MODE_SYNC, Fault::kDropReply},
                                           Case{pb::MODE_SYNC, Fault::kFailBeforeSend},
                                           Case{pb::MODE_SYNC, Fault::kDuplicate}),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(FailingFaults, ShardedVariablesFailureTest,
                         ::testing::Values(Case{pb::MODE_ASYNC, Fault::kDropReply},
                                           Case{pb::MODE_ASYNC, Fault::kFailBeforeSend},
                                           Case{pb::MODE_SYNC, Fault::kDropReply},
                                           Case{pb::MODE_SYNC, Fault::kFailBeforeSend}),
                         CaseName);

}  // namespace
}  // namespace fulcrum::runtime
