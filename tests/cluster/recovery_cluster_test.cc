// tests: recovery of whole clusters of the real binaries (issue 12). A ps is SIGKILLed after
// the first checkpoint and started again by hand with the same flags: the chief waits for it
// (--recovery_timeout), recreates its variables held until restored and restores every ps
// from the newest checkpoint; the workers discard the step that failed, pull again and go
// on; the run ends at train_steps with every task's exit code 0 and the recovery in the
// report and the workers' summaries. Async on one ps, sync on two (the live ps goes back too,
// and the workers' waits for the lost step end at once). A killed chief started again takes
// the running job over; without checkpoints a dead ps ends the run, naming it.
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;
using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::LocalCluster;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::ReadJson;
using ::fulcrum::testing::WriteLocalSpec;

// Trains mlp on synthetic data with checkpoints every 100 steps, kills ps:`victim` once the
// first checkpoint is written, restarts it a second later, and checks the outcome.
void KillAndRestartPs(const std::string& name, const std::string& mode, int num_ps, int victim) {
  const fs::path dir = FreshDir(name);
  const std::string spec = WriteLocalSpec(dir / "spec.json", num_ps, 2);
  const int64_t train_steps = 1200;
  const std::vector<std::string> flags = {
      absl::StrCat("--cluster_spec=", spec),
      "--model=mlp",
      "--dataset=synthetic",
      absl::StrCat("--mode=", mode),
      absl::StrCat("--train_steps=", train_steps),
      "--eval_every=0",
      "--threads=1",
      "--profile=off",
      "--checkpoint_every_steps=100",
      "--checkpoint_every_secs=0",
      "--recovery_timeout=60",
      absl::StrCat("--checkpoint_dir=", (dir / "ckpt").string()),
      absl::StrCat("--run_dir=", (dir / "run").string())};
  LocalCluster cluster(dir);
  cluster.StartAll(num_ps, 2, flags);
  // The first periodic checkpoint (at a step from 100 on; ckpt-0 is written before training).
  ASSERT_TRUE(cluster.WaitForLog("chief", 0, "written (global step 1", std::chrono::seconds(90)))
      << cluster.Logs();
  cluster.Kill("ps", victim);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  cluster.Start("ps", victim, flags);
  cluster.WaitAll(std::chrono::seconds(240));

  // Every task running at the end exited 0 (the killed incarnation is the first ps:victim).
  for (const std::string job : {"ps", "worker", "chief"}) {
    const int n = job == "ps" ? num_ps : job == "worker" ? 2 : 1;
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(cluster.task(job, i).exit_code, 0) << job << ":" << i << "\n" << cluster.Logs();
    }
  }
  const std::string chief_log = ReadFile(dir / "chief-0.log");
  EXPECT_NE(chief_log.find(absl::StrCat("chief lost ps:", victim)), std::string::npos) << chief_log;
  EXPECT_NE(chief_log.find("--recovery_timeout"), std::string::npos) << chief_log;

  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], false);
  EXPECT_GE(report["global_step"].get<int64_t>(), train_steps);
  ASSERT_EQ(report["ps_recoveries"].size(), 1u) << report.dump(2);
  const nlohmann::json& recovery = report["ps_recoveries"][0];
  EXPECT_EQ(recovery["ps"], nlohmann::json::array({victim}));
  EXPECT_GE(recovery["restored_step"].get<int64_t>(), 100);
  EXPECT_LT(recovery["restored_step"].get<int64_t>(), train_steps);
  // Every ps (the restarted one included) reached the end and wrote its summary.
  for (int p = 0; p < num_ps; ++p) {
    const nlohmann::json ps = ReadJson(dir / "run" / absl::StrCat("ps-", p) / "summary.json");
    ASSERT_TRUE(ps.is_object()) << "ps:" << p << "\n" << cluster.Logs();
    EXPECT_GE(ps["global_step"].get<int64_t>(), train_steps);
  }
  // Each worker met the failure and went back to the checkpoint.
  for (int w = 0; w < 2; ++w) {
    const nlohmann::json s = ReadJson(dir / "run" / absl::StrCat("worker-", w) / "summary.json");
    ASSERT_TRUE(s.is_object()) << "worker:" << w << "\n" << cluster.Logs();
    EXPECT_GE(s["ps_recoveries"].get<int64_t>(), 1) << s.dump(2);
    EXPECT_NE(ReadFile(dir / absl::StrCat("worker-", w, ".log")).find("--recovery_timeout"),
              std::string::npos);
  }
}

TEST(RecoveryClusterTest, AsyncPsKilledAndRestartedIsRestoredAndTheRunFinishes) {
  KillAndRestartPs("cluster_recovery_async", "async", /*num_ps=*/1, /*victim=*/0);
}

TEST(RecoveryClusterTest, SyncOneOfTwoPsKilledAndRestartedBothGoBackAndTheRunFinishes) {
  KillAndRestartPs("cluster_recovery_sync", "sync", /*num_ps=*/2, /*victim=*/1);
}

// A chief killed mid-run and started again with the same flags takes the running job over:
// the ps tasks keep their state, the workers (which never noticed more than failed
// heartbeats) go on, and the run ends at train_steps with every exit code 0 and a report
// that says at which step the job was adopted and holds every worker's summary.
TEST(RecoveryClusterTest, ARestartedChiefTakesTheRunningJobOver) {
  const fs::path dir = FreshDir("cluster_recovery_chief");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  const int64_t train_steps = 6000;
  const std::vector<std::string> flags = {absl::StrCat("--cluster_spec=", spec),
                                          "--model=mlp",
                                          "--dataset=synthetic",
                                          absl::StrCat("--train_steps=", train_steps),
                                          "--eval_every=0",
                                          "--threads=1",
                                          "--profile=off",
                                          "--heartbeat_timeout=30",
                                          absl::StrCat("--run_dir=", (dir / "run").string())};
  LocalCluster cluster(dir);
  cluster.StartAll(1, 2, flags);
  ASSERT_TRUE(cluster.WaitForLog("chief", 0, "ready: training starts", std::chrono::seconds(60)))
      << cluster.Logs();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  cluster.Kill("chief", 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  cluster.Start("chief", 0, flags);
  cluster.WaitAll(std::chrono::seconds(180));
  for (const auto& [job, n] :
       std::vector<std::pair<std::string, int>>{{"ps", 1}, {"worker", 2}, {"chief", 1}}) {
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(cluster.task(job, i).exit_code, 0) << job << ":" << i << "\n" << cluster.Logs();
    }
  }
  const std::string log = ReadFile(cluster.task("chief", 0).log);
  EXPECT_NE(log.find("this chief takes that job over"), std::string::npos) << log;
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], false);
  ASSERT_TRUE(report["adopted"].is_object()) << report.dump(2);
  EXPECT_GT(report["adopted"]["at_step"].get<int64_t>(), 0);
  EXPECT_LT(report["adopted"]["at_step"].get<int64_t>(), train_steps);
  EXPECT_GE(report["global_step"].get<int64_t>(), train_steps);
  for (int w = 0; w < 2; ++w) {
    const nlohmann::json s = ReadJson(dir / "run" / absl::StrCat("worker-", w) / "summary.json");
    ASSERT_TRUE(s.is_object()) << cluster.Logs();
    EXPECT_GE(s["last_global_step"].get<int64_t>(), train_steps - 2);
  }
}

// A model that diverges (a loss that is no longer finite, or first a gradient the ps refuses as
// absurd: elements past 1e19) ends the whole run at once with exit 1
// naming the worker and the step, not after --heartbeat_timeout of silence; the report is
// written as failed.
// Fashion-MNIST (not the synthetic set, on which an mlp's ReLUs can die first and leave a large
// but finite loss): its loss is NaN within the first steps at this rate.
TEST(RecoveryClusterTest, ADivergedModelEndsTheRunAtOnceNamingTheWorker) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  }
  const fs::path dir = FreshDir("cluster_diverged");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  const std::vector<std::string> flags = {absl::StrCat("--cluster_spec=", spec),
                                          "--model=mlp",
                                          "--learning_rate=1000",
                                          "--train_steps=100000",
                                          "--eval_every=0",
                                          "--threads=1",
                                          "--profile=off",
                                          "--heartbeat_timeout=120",
                                          absl::StrCat("--run_dir=", (dir / "run").string())};
  LocalCluster cluster(dir);
  cluster.StartAll(1, 2, flags);
  cluster.WaitAll(std::chrono::seconds(60));  // well inside the 120 s heartbeat timeout
  EXPECT_EQ(cluster.task("chief", 0).exit_code, 1) << cluster.Logs();
  const std::string log = ReadFile(dir / "chief-0.log");
  EXPECT_NE(log.find("failed: "), std::string::npos) << log;
  EXPECT_TRUE(log.find("loss became") != std::string::npos ||
              log.find("NaN or an Inf") != std::string::npos ||
              log.find("the model diverged") != std::string::npos ||
              log.find("an absurd gradient") != std::string::npos)
      << log;
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], true);
}

// Without --checkpoint_dir a dead ps cannot be restored: the run ends with exit 1, the error
// names the ps and says what would have saved it, and the report is written as failed, its
// evaluations kept but none given as the final one (issue 27).
TEST(RecoveryClusterTest, WithoutCheckpointsADeadPsEndsTheRunNamingIt) {
  const fs::path dir = FreshDir("cluster_recovery_none");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 1);
  const std::vector<std::string> flags = {absl::StrCat("--cluster_spec=", spec),
                                          "--model=logreg",
                                          "--dataset=synthetic",
                                          "--train_steps=100000",
                                          "--eval_every=20000",
                                          "--threads=1",
                                          "--profile=off",
                                          "--heartbeat_timeout=10",
                                          absl::StrCat("--run_dir=", (dir / "run").string())};
  LocalCluster cluster(dir);
  cluster.StartAll(1, 1, flags);
  // An evaluation first (a failed run keeps it in `evals` but reports no final one); the ps
  // dies while the workers train, ~9 s before the next evaluation (one dying under an
  // evaluation fails the run on the chief's pull, not as a lost ps).
  ASSERT_TRUE(cluster.WaitForLog("chief", 0, "eval at global step", std::chrono::seconds(60)))
      << cluster.Logs();
  cluster.Kill("ps", 0);
  cluster.WaitAll(std::chrono::seconds(120));
  EXPECT_EQ(cluster.task("chief", 0).exit_code, 1) << cluster.Logs();
  const std::string chief_log = ReadFile(dir / "chief-0.log");
  EXPECT_NE(chief_log.find("chief lost ps:0"), std::string::npos) << chief_log;
  EXPECT_NE(chief_log.find("with --checkpoint_dir"), std::string::npos) << chief_log;
  EXPECT_NE(cluster.task("worker", 0).exit_code, 0) << cluster.Logs();
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], true);
  EXPECT_FALSE(report["evals"].empty()) << report.dump();
  EXPECT_TRUE(report["final_test_accuracy"].is_null()) << report["final_test_accuracy"];
  EXPECT_TRUE(report["final_test_loss"].is_null()) << report["final_test_loss"];
  EXPECT_TRUE(report["global_step"].is_null()) << report["global_step"];
}

}  // namespace
}  // namespace fulcrum
