// runtime/flags: the validated options the flags describe, read in-process (the command
// line itself is tested through the real binaries in flags_binary_test.cc).
#include "runtime/config/flags.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/exit_code.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

ABSL_DECLARE_FLAG(std::string, cluster_spec);
ABSL_DECLARE_FLAG(int64_t, train_steps);
ABSL_DECLARE_FLAG(double, epochs);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(fulcrum::runtime::SyncMode, mode);
ABSL_DECLARE_FLAG(std::optional<int64_t>, staleness);
ABSL_DECLARE_FLAG(fulcrum::runtime::AsyncPull, async_pull);
ABSL_DECLARE_FLAG(bool, staleness_aware_lr);

namespace fulcrum::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A cluster spec file with one chief, one ps and two workers, in a fresh scratch folder.
std::string WriteSpec() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::path(::testing::TempDir()) / absl::StrCat("fulcrum_flags_", getpid(), "_", info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path spec = dir / "cluster.json";
  std::ofstream(spec) << R"({"chief": ["localhost:2222"], "ps": ["localhost:2223"],
                             "worker": ["localhost:2224", "localhost:2225"]})";
  return spec.string();
}

class FlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("TF_CONFIG") != nullptr) GTEST_SKIP() << "TF_CONFIG is set";
    absl::SetFlag(&FLAGS_cluster_spec, WriteSpec());
  }

  absl::FlagSaver saver_;  // every flag back to its value before the test
};

TEST_F(FlagsTest, PsNeedsNoTrainingLength) {
  absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("ps");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->cluster.task.job_name, "ps");
  EXPECT_EQ(options->training.train_steps, 1);  // the placeholder
  EXPECT_EQ(options->training.epochs, 0.0);
}

TEST_F(FlagsTest, PsKeepsAGivenTrainingLength) {
  absl::SetFlag(&FLAGS_epochs, 2.5);
  absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("ps");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->training.train_steps, 0);
  EXPECT_EQ(options->training.epochs, 2.5);
}

TEST_F(FlagsTest, ChiefAndWorkerNeedATrainingLength) {
  for (const char* job : {"chief", "worker"}) {
    absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags(job);
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << job;
    EXPECT_THAT(options.status().message(), HasSubstr("--train_steps")) << job;
  }
  EXPECT_EQ(TrainingOptionsFromFlags().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FlagsTest, WorkerReadsEveryPart) {
  absl::SetFlag(&FLAGS_train_steps, 7);
  absl::SetFlag(&FLAGS_model, "mlp");
  absl::SetFlag(&FLAGS_mode, SyncMode::kSync);
  absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("worker");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->training.model, "mlp");
  EXPECT_EQ(options->training.train_steps, 7);
  EXPECT_EQ(options->cluster.task.job_name, "worker");
  EXPECT_EQ(options->cluster.mode, SyncMode::kSync);
  EXPECT_EQ(options->cluster.replicas_to_aggregate, 2);  // the spec's workers
  EXPECT_TRUE(options->profile.enabled);
}

TEST_F(FlagsTest, TheFirstInvalidFlagIsNamed) {
  absl::SetFlag(&FLAGS_train_steps, 7);
  absl::SetFlag(&FLAGS_staleness, std::optional<int64_t>(2));  // without --mode=ssp
  absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("chief");
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(), HasSubstr("--staleness=2"));
}

// The enum-valued flags take exactly their spellings; Abseil refuses any other while it parses
// the command line, with the reason these give (the binaries exit 2 with it:
// FlagsBinaryTest, PsTaskTest).
TEST(EnumFlagsTest, ParseTheirSpellingsAndNameThemOtherwise) {
  SyncMode mode = SyncMode::kAsync;
  std::string error;
  EXPECT_TRUE(absl::ParseFlag("ssp", &mode, &error));
  EXPECT_EQ(mode, SyncMode::kSsp);
  EXPECT_EQ(absl::UnparseFlag(SyncMode::kSync), "sync");
  EXPECT_FALSE(absl::ParseFlag("lockstep", &mode, &error));
  EXPECT_EQ(error, "expected sync, async or ssp");
  EXPECT_EQ(mode, SyncMode::kSsp);  // untouched
  AsyncPull pull = AsyncPull::kAtStepStart;
  EXPECT_FALSE(absl::ParseFlag("later", &pull, &error));
  EXPECT_EQ(error, "expected at_step_start, with_push or before_step");
  EXPECT_TRUE(absl::ParseFlag("with_push", &pull, &error));
  EXPECT_EQ(pull, AsyncPull::kWithPush);
  DataPlane plane = DataPlane::kAuto;
  EXPECT_FALSE(absl::ParseFlag("udp", &plane, &error));
  EXPECT_EQ(error, "expected auto, grpc or tcp");
  EXPECT_EQ(absl::UnparseFlag(DataPlane::kTcp), "tcp");
  NonFiniteAction action = NonFiniteAction::kError;
  EXPECT_TRUE(absl::ParseFlag("skip", &action, &error));
  EXPECT_EQ(action, NonFiniteAction::kSkip);
  EXPECT_FALSE(absl::ParseFlag("ignore", &action, &error));
  EXPECT_EQ(error, "expected error or skip");
}

TEST_F(FlagsTest, SspReadsTheStalenessWithItsDefault) {
  absl::SetFlag(&FLAGS_train_steps, 7);
  absl::SetFlag(&FLAGS_mode, SyncMode::kSsp);
  absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("worker");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->cluster.mode, SyncMode::kSsp);
  EXPECT_EQ(options->cluster.staleness, kDefaultStaleness);
  EXPECT_STREQ(ModeName(options->cluster.mode), "ssp");
  absl::SetFlag(&FLAGS_staleness, std::optional<int64_t>(0));  // lock-step
  options = TaskOptionsFromFlags("worker");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->cluster.staleness, 0);
  // Tasks with another bound are told apart when they register.
  absl::SetFlag(&FLAGS_staleness, std::optional<int64_t>(2));
  const absl::StatusOr<TaskOptions> other = TaskOptionsFromFlags("worker");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(FingerprintDifference(ConfigFingerprint(options->training, options->cluster),
                                    ConfigFingerprint(other->training, other->cluster)),
              HasSubstr("staleness: 0 vs 2"));
}

TEST_F(FlagsTest, StalenessOutsideSspOrNegativeIsNamed) {
  absl::SetFlag(&FLAGS_train_steps, 7);
  absl::SetFlag(&FLAGS_staleness, std::optional<int64_t>(2));
  for (const SyncMode mode : {SyncMode::kAsync, SyncMode::kSync}) {
    absl::SetFlag(&FLAGS_mode, mode);
    const absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("worker");
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << ModeName(mode);
    EXPECT_THAT(options.status().message(), HasSubstr("--staleness=2")) << ModeName(mode);
    EXPECT_THAT(options.status().message(), HasSubstr("--mode=ssp")) << ModeName(mode);
  }
  absl::SetFlag(&FLAGS_mode, SyncMode::kSsp);
  absl::SetFlag(&FLAGS_staleness, std::optional<int64_t>(-1));
  const absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("ps");
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(), HasSubstr("--staleness=-1: must be between 0"));
}

TEST_F(FlagsTest, AsyncPullIsAtStepStartUnlessToldAndBeforeStepOnlyForAsync) {
  absl::SetFlag(&FLAGS_train_steps, 7);
  absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("worker");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->cluster.pull_before_step);
  EXPECT_TRUE(options->cluster.reads_at_step_start);
  EXPECT_STREQ(AsyncPullName(options->cluster), "at_step_start");

  absl::SetFlag(&FLAGS_async_pull, AsyncPull::kWithPush);
  options = TaskOptionsFromFlags("worker");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->cluster.pull_before_step);
  EXPECT_FALSE(options->cluster.reads_at_step_start);
  EXPECT_STREQ(AsyncPullName(options->cluster), "with_push");

  absl::SetFlag(&FLAGS_async_pull, AsyncPull::kBeforeStep);
  options = TaskOptionsFromFlags("worker");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->cluster.pull_before_step);
  EXPECT_STREQ(AsyncPullName(options->cluster), "before_step");
  // The chief checks every worker's flags against its own: a worker that differs is named.
  const std::string before = ConfigFingerprint(options->training, options->cluster);
  options->cluster.pull_before_step = false;
  EXPECT_EQ(FingerprintDifference(before, ConfigFingerprint(options->training, options->cluster)),
            "async_pull: before_step vs with_push");

  absl::SetFlag(&FLAGS_mode, SyncMode::kSync);
  options = TaskOptionsFromFlags("chief");
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(),
              HasSubstr("--async_pull=before_step is for --mode=async"));
}

TEST_F(FlagsTest, StalenessAwareLrIsOffUnlessToldAndRefusedInSync) {
  absl::SetFlag(&FLAGS_train_steps, 7);
  absl::StatusOr<TaskOptions> options = TaskOptionsFromFlags("chief");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->cluster.staleness_aware_lr);

  absl::SetFlag(&FLAGS_staleness_aware_lr, true);
  options = TaskOptionsFromFlags("chief");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->cluster.staleness_aware_lr);
  const std::string with = ConfigFingerprint(options->training, options->cluster);
  options->cluster.staleness_aware_lr = false;
  EXPECT_EQ(FingerprintDifference(with, ConfigFingerprint(options->training, options->cluster)),
            "staleness_aware_lr: true vs false");
  absl::SetFlag(&FLAGS_mode, SyncMode::kSsp);
  EXPECT_TRUE(TaskOptionsFromFlags("ps").ok());

  absl::SetFlag(&FLAGS_mode, SyncMode::kSync);
  options = TaskOptionsFromFlags("worker");
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(),
              HasSubstr("--staleness_aware_lr is for --mode=async or ssp"));
}

TEST(ReportBadFlagsTest, ReturnsTheBadInputExitCode) {
  EXPECT_EQ(ReportBadFlags(absl::InvalidArgumentError("--x=1: wrong")), kExitBadInput);
}

}  // namespace
}  // namespace fulcrum::runtime

namespace fulcrum::runtime {
namespace {

// The Prometheus endpoint listens on the task's own host, never on every interface unless
// --metrics_bind says so (issue 12: it bound 0.0.0.0 on public-address nodes).
TEST(MetricsBindTest, TheTasksOwnHostUnlessTold) {
  const ClusterSpec cluster({{"chief", {"127.0.0.1:4000"}},
                             {"ps", {"127.0.0.2:4001"}},
                             {"worker", {"127.0.0.3:4002", "localhost:4003"}}});
  ProfileFlags flags;
  flags.metrics_port = 9100;
  EXPECT_EQ(ProfilerOptionsFor(flags, &cluster, "ps", 0, "").metrics_bind, "127.0.0.2");
  EXPECT_EQ(ProfilerOptionsFor(flags, &cluster, "worker", 0, "").metrics_bind, "127.0.0.3");
  // A host name is resolved to the address the HTTP server binds.
  EXPECT_EQ(ProfilerOptionsFor(flags, &cluster, "worker", 1, "").metrics_bind, "127.0.0.1");
  EXPECT_EQ(ProfilerOptionsFor(flags, nullptr, "worker", 0, "").metrics_bind, "127.0.0.1");
  flags.metrics_bind = "0.0.0.0";
  EXPECT_EQ(ProfilerOptionsFor(flags, &cluster, "ps", 0, "").metrics_bind, "0.0.0.0");
}

}  // namespace
}  // namespace fulcrum::runtime

namespace fulcrum::runtime {
namespace {

// Float hyperparameters are reported as the decimal the user wrote (issue 13: the report read
// learning_rate 0.009999999776482582 for --learning_rate=0.01).
TEST(ExactDecimalTest, GivesTheShortestDecimalThatReadsBack) {
  EXPECT_EQ(ExactDecimal(0.01f), 0.01);
  EXPECT_EQ(ExactDecimal(0.1f), 0.1);
  EXPECT_EQ(ExactDecimal(0.9f), 0.9);
  EXPECT_EQ(ExactDecimal(1e-10f), 1e-10);
  EXPECT_EQ(ExactDecimal(2.0f), 2.0);
  EXPECT_EQ(nlohmann::json(ExactDecimal(0.01f)).dump(), "0.01");
  // Values that need every digit still read back exactly.
  const float third = 1.0f / 3.0f;
  EXPECT_EQ(static_cast<float>(ExactDecimal(third)), third);
  EXPECT_EQ(static_cast<float>(ExactDecimal(16777217.0f)), 16777217.0f);
}

}  // namespace
}  // namespace fulcrum::runtime
