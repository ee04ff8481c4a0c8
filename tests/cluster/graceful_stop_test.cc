// tests: a ps stopped gracefully (SIGTERM, as a drained node or a Kubernetes eviction sends it)
// is not a crash and not the end of training (issue 27). With --checkpoint_dir the ps says it
// is leaving, the chief saves a checkpoint for it at once, the ps exits 143 after it (never
// telling the workers training ended), and once it is started again the chief restores every
// ps from that checkpoint and the run finishes with exit 0 everywhere. Without checkpoints the
// chief ends the run at once as failed, naming the ps, and no worker exits 0 or says "done".
// A worker stopped by SIGTERM leaves the run: sync training that needs it ends at once with a
// final checkpoint; async training goes on, and a killed worker does not delay the end.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <set>
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

// mlp on synthetic data, with the chief's checkpoints only when asked (and then none on a
// schedule: only the one saved for a leaving ps).
// A worker's first progress line ("step 100 (global 100/...)"): training has taken steps. (Its
// "starting at global step 0" line comes before any; a signal then, under load, ended a run at
// step 0.)
constexpr char kStepsTaken[] = "(global ";

std::vector<std::string> Flags(const fs::path& dir, const std::string& spec,
                               const std::string& mode, int64_t train_steps, bool checkpoints) {
  std::vector<std::string> flags = {absl::StrCat("--cluster_spec=", spec),
                                    "--model=mlp",
                                    "--dataset=synthetic",
                                    absl::StrCat("--mode=", mode),
                                    absl::StrCat("--train_steps=", train_steps),
                                    "--eval_every=0",
                                    "--threads=1",
                                    "--profile=off",
                                    "--heartbeat_timeout=60",
                                    absl::StrCat("--run_dir=", (dir / "run").string())};
  if (checkpoints) {
    flags.push_back(absl::StrCat("--checkpoint_dir=", (dir / "ckpt").string()));
    flags.push_back("--checkpoint_every_secs=0");  // only the checkpoint saved for the ps
    flags.push_back("--recovery_timeout=60");
  }
  return flags;
}

TEST(GracefulStopTest, ASignalledPsIsSavedForThenRestoredAndTheRunFinishes) {
  const fs::path dir = FreshDir("graceful_ps_sync");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 2, 2);
  const int64_t train_steps = 2000;
  const std::vector<std::string> flags = Flags(dir, spec, "sync", train_steps, true);
  LocalCluster cluster(dir);
  cluster.StartAll(2, 2, flags);
  ASSERT_TRUE(cluster.WaitForLog("worker", 0, kStepsTaken, std::chrono::seconds(90)))
      << cluster.Logs();
  cluster.Signal("ps", 1, SIGTERM);
  ASSERT_TRUE(cluster.WaitForLog("ps", 1, "left the run", std::chrono::seconds(30)))
      << cluster.Logs();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  cluster.Start("ps", 1, flags);
  cluster.WaitAll(std::chrono::seconds(240));

  // The signalled ps exited 143 (128 + SIGTERM); every task running at the end exited 0.
  EXPECT_EQ(cluster.tasks()[1].exit_code, 143) << cluster.Logs();
  for (const auto& [job, n] :
       std::vector<std::pair<std::string, int>>{{"ps", 2}, {"worker", 2}, {"chief", 1}}) {
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(cluster.task(job, i).exit_code, 0) << job << ":" << i << "\n" << cluster.Logs();
    }
  }
  const std::string chief_log = ReadFile(dir / "chief-0.log");
  EXPECT_NE(chief_log.find("ps:1 (stopped by SIGTERM) is leaving the run: saving a checkpoint"),
            std::string::npos)
      << chief_log;
  EXPECT_NE(ReadFile(dir / "ps-1.log").find("after the chief saved a checkpoint"),
            std::string::npos)
      << cluster.Logs();
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], false);
  EXPECT_GE(report["global_step"].get<int64_t>(), train_steps);
  ASSERT_EQ(report["ps_recoveries"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["ps_recoveries"][0]["ps"], nlohmann::json::array({1}));
  EXPECT_GT(report["ps_recoveries"][0]["restored_step"].get<int64_t>(), 0);
  for (int w = 0; w < 2; ++w) {
    const nlohmann::json s = ReadJson(dir / "run" / absl::StrCat("worker-", w) / "summary.json");
    ASSERT_TRUE(s.is_object()) << cluster.Logs();
    // No worker took the ps's exit for the end of training: each went on to the run's end.
    // (At the end a worker may learn it from a ps the chief stopped, "the ps reported that
    // training ended", rather than from its own last step; that is the run's end, not the
    // signalled ps's: a CI run under load saw it once.)
    EXPECT_GE(s["last_global_step"].get<int64_t>(), train_steps - 2) << s.dump(2);
  }
}

TEST(GracefulStopTest, WithoutCheckpointsASignalledPsEndsTheRunFailedAndNoWorkerSaysDone) {
  const fs::path dir = FreshDir("graceful_ps_none");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  LocalCluster cluster(dir);
  cluster.StartAll(1, 2, Flags(dir, spec, "async", 1000000, false));
  ASSERT_TRUE(cluster.WaitForLog("worker", 0, kStepsTaken, std::chrono::seconds(90)))
      << cluster.Logs();
  cluster.Signal("ps", 0, SIGTERM);
  cluster.WaitAll(std::chrono::seconds(60));
  EXPECT_EQ(cluster.task("chief", 0).exit_code, 1) << cluster.Logs();
  const std::string chief_log = ReadFile(dir / "chief-0.log");
  EXPECT_NE(chief_log.find("ps:0 (stopped by SIGTERM) is leaving the run at global step"),
            std::string::npos)
      << chief_log;
  EXPECT_NE(chief_log.find("without --checkpoint_dir"), std::string::npos) << chief_log;
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(cluster.task("worker", w).exit_code, 1) << cluster.Logs();
    const std::string log = ReadFile(dir / absl::StrCat("worker-", w, ".log"));
    EXPECT_NE(log.find("the chief ended the run as failed"), std::string::npos) << log;
    EXPECT_EQ(log.find("done after"), std::string::npos) << log;
  }
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], true);
}

// A sync worker stopped by SIGTERM (not the whole cluster) leaves the run: with every worker
// needed for a step the chief ends the run at once, naming it, with a final checkpoint, instead
// of waiting --heartbeat_timeout for a step that cannot come.
TEST(GracefulStopTest, ASignalledSyncWorkerEndsTheRunAtOnceWithAFinalCheckpoint) {
  const fs::path dir = FreshDir("graceful_worker_sync");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  std::vector<std::string> flags = Flags(dir, spec, "sync", 1000000, true);
  flags.push_back("--heartbeat_timeout=120");
  LocalCluster cluster(dir);
  cluster.StartAll(1, 2, flags);
  ASSERT_TRUE(cluster.WaitForLog("worker", 1, kStepsTaken, std::chrono::seconds(90)))
      << cluster.Logs();
  cluster.Signal("worker", 1, SIGTERM);
  cluster.WaitAll(std::chrono::seconds(60));  // well inside the 120 s heartbeat timeout
  EXPECT_EQ(cluster.task("worker", 1).exit_code, 143) << cluster.Logs();
  EXPECT_EQ(cluster.task("chief", 0).exit_code, 1) << cluster.Logs();
  EXPECT_EQ(cluster.task("worker", 0).exit_code, 1) << cluster.Logs();
  const std::string chief_log = ReadFile(dir / "chief-0.log");
  EXPECT_NE(chief_log.find("worker:1 left the run (interrupted by SIGTERM) at global step"),
            std::string::npos)
      << chief_log;
  EXPECT_NE(chief_log.find("sync training needs 2 workers a step"), std::string::npos) << chief_log;
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], true);
  // The final checkpoint holds the step the run ended at.
  EXPECT_GT(report["checkpoint"]["last_step"].get<int64_t>(), 0) << report.dump(2);
}

// An async worker that leaves (SIGTERM) or dies (SIGKILL) never holds the run up: the others
// train to the end, and the chief does not wait --heartbeat_timeout for the dead one's summary.
TEST(GracefulStopTest, AsyncWorkersThatLeaveOrDieNeverDelayTheEnd) {
  const fs::path dir = FreshDir("graceful_worker_async");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 3);
  std::vector<std::string> flags = Flags(dir, spec, "async", 6000, false);
  flags.push_back("--heartbeat_timeout=120");
  LocalCluster cluster(dir);
  cluster.StartAll(1, 3, flags);
  ASSERT_TRUE(cluster.WaitForLog("worker", 1, kStepsTaken, std::chrono::seconds(90)))
      << cluster.Logs();
  cluster.Signal("worker", 1, SIGTERM);
  cluster.Kill("worker", 2);
  cluster.WaitAll(std::chrono::seconds(90));  // a wait for the dead one would take 120 s
  EXPECT_EQ(cluster.task("worker", 1).exit_code, 143) << cluster.Logs();
  for (const auto& [job, i] :
       std::vector<std::pair<std::string, int>>{{"ps", 0}, {"worker", 0}, {"chief", 0}}) {
    EXPECT_EQ(cluster.task(job, i).exit_code, 0) << job << ":" << i << "\n" << cluster.Logs();
  }
  EXPECT_NE(ReadFile(dir / "chief-0.log").find("worker:1 left the run (interrupted by SIGTERM)"),
            std::string::npos)
      << cluster.Logs();
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], false);
  EXPECT_GE(report["global_step"].get<int64_t>(), 6000);
  EXPECT_EQ(report["workers_lost"], nlohmann::json::array({1, 2})) << report.dump(2);
}

// The watchdog (--watchdog_secs=2 here): a SIGSTOPped worker and then a SIGSTOPped ps are each
// named within two intervals with what they (or the chief) wait for, and once continued they
// move again; the run then ends on a Ctrl-C of every task with the episodes in report.json.
TEST(GracefulStopTest, TheWatchdogNamesAStoppedWorkerAndAStoppedPs) {
  const fs::path dir = FreshDir("watchdog_stopped");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  std::vector<std::string> flags = Flags(dir, spec, "async", 100000000, false);
  flags.push_back("--heartbeat_timeout=120");
  flags.push_back("--step_timeout=120");
  flags.push_back("--watchdog_secs=2");
  LocalCluster cluster(dir);
  cluster.StartAll(1, 2, flags);
  ASSERT_TRUE(cluster.WaitForLog("worker", 1, "step 100 (global", std::chrono::seconds(90)))
      << cluster.Logs();
  cluster.Signal("worker", 1, SIGSTOP);
  EXPECT_TRUE(cluster.WaitForLog("chief", 0, "watchdog: worker:1 stuck at local step",
                                 std::chrono::seconds(10)))
      << cluster.Logs();
  EXPECT_TRUE(cluster.WaitForLog("chief", 0, "(the process is stopped, e.g. SIGSTOP, or hung)",
                                 std::chrono::seconds(10)))
      << cluster.Logs();
  cluster.Signal("worker", 1, SIGCONT);
  EXPECT_TRUE(
      cluster.WaitForLog("chief", 0, "watchdog: worker:1 moves again", std::chrono::seconds(10)))
      << cluster.Logs();
  cluster.Signal("ps", 0, SIGSTOP);
  EXPECT_TRUE(cluster.WaitForLog("chief", 0, "watchdog: ps:0 has not answered the chief's Stats",
                                 std::chrono::seconds(10)))
      << cluster.Logs();
  cluster.Signal("ps", 0, SIGCONT);
  EXPECT_TRUE(
      cluster.WaitForLog("chief", 0, "watchdog: ps:0 moves again", std::chrono::seconds(10)))
      << cluster.Logs();
  // Ctrl-C on the whole cluster.
  for (const auto& [job, i] : std::vector<std::pair<std::string, int>>{
           {"ps", 0}, {"worker", 0}, {"worker", 1}, {"chief", 0}}) {
    cluster.Signal(job, i, SIGINT);
  }
  cluster.WaitAll(std::chrono::seconds(60));
  EXPECT_EQ(cluster.task("chief", 0).exit_code, 130) << cluster.Logs();
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  // Both named and both over (a worker that waited on the stopped ps may still be in an episode
  // when the run ends: its next heartbeat had not come yet).
  std::set<std::string> ended;
  for (const auto& e : report["watchdog"]["episodes"]) {
    if (!e["ongoing"].get<bool>()) ended.insert(e["task"].get<std::string>());
  }
  EXPECT_TRUE(ended.contains("worker:1")) << report["watchdog"].dump(2);
  EXPECT_TRUE(ended.contains("ps:0")) << report["watchdog"].dump(2);
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// Starts `task` (a task's command line, its output into `log`) in the background after
// `before` (commands that start its peers, or nothing), sends it SIGTERM once `log` shows
// `waiting`, and expects it to have stopped within 7 s (not after its --startup_timeout of
// 120 s) with exit code 143 and `said` in its log. `after` stops the peers.
void ExpectStopsOnSigtermWhileWaiting(const std::string& before, const std::string& task,
                                      const std::string& log, const std::string& waiting,
                                      const std::string& said, const std::string& after = "") {
  const ::fulcrum::testing::RunResult r = ::fulcrum::testing::RunShell(absl::StrCat(
      "sh -c '", before, task, " --startup_timeout=120 > ", log,
      " 2>&1 & p=$!; for i in $(seq 300); do grep -q \"", waiting, "\" ", log,
      " && break; sleep 0.1; done; start=$(date +%s); kill -TERM $p; wait $p; echo exit=$?;",
      " echo took=$(( $(date +%s) - start )); ", after, "'"));
  EXPECT_NE(r.output.find("exit=143"), std::string::npos) << r.output << ReadFile(log);
  const size_t took = r.output.find("took=");
  ASSERT_NE(took, std::string::npos) << r.output;
  EXPECT_LE(std::stoi(r.output.substr(took + 5)), 7) << r.output;
  EXPECT_NE(ReadFile(log).find(said), std::string::npos) << ReadFile(log);
}

// A worker still waiting for a chief that never came (it failed, or is not up yet) stops on
// SIGTERM, as a launcher stopping a failed run sends it, within its current RegisterTask
// attempt (at most 5 s) instead of waiting out --startup_timeout; the exit code says a signal
// stopped it.
TEST(GracefulStopTest, AWorkerWaitingForTheChiefStopsOnSigtermWithinOneAttempt) {
  const std::filesystem::path dir = ::fulcrum::testing::FreshDir("worker_waits_sigterm");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 1);
  ExpectStopsOnSigtermWhileWaiting(
      "",
      absl::StrCat(FULCRUM_BIN_DIR, "/worker --cluster_spec=", spec,
                   " --job_name=worker --task_index=0 --model=logreg --train_steps=10"),
      (dir / "worker.log").string(), "waiting for chief",
      "interrupted by SIGTERM while waiting for chief:0");
}

// The chief, waiting for a ps that never came (Ctrl-C during a start that hangs), stops on
// SIGTERM within a probe or two; its log names what it was waiting for.
TEST(GracefulStopTest, AChiefWaitingForAPsStopsOnSigtermWithinAProbe) {
  const std::filesystem::path dir = ::fulcrum::testing::FreshDir("chief_waits_sigterm");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 1);
  ExpectStopsOnSigtermWhileWaiting(
      "",
      absl::StrCat(FULCRUM_BIN_DIR, "/chief --cluster_spec=", spec,
                   " --model=logreg --train_steps=10 --run_dir=", (dir / "run").string()),
      (dir / "chief.log").string(), "waiting for ps:0",
      "chief: interrupted by SIGTERM while waiting for ps:0 at ");
}

// The same while the chief waits for a worker to register (its ps is up; the worker never
// came, as when it exits on bad input and the launcher stops the others).
TEST(GracefulStopTest, AChiefWaitingForAWorkerStopsOnSigtermWithinASecond) {
  const std::filesystem::path dir = ::fulcrum::testing::FreshDir("chief_waits_worker_sigterm");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 1);
  ExpectStopsOnSigtermWhileWaiting(
      absl::StrCat(FULCRUM_BIN_DIR, "/ps --cluster_spec=", spec, " --job_name=ps --task_index=0 > ",
                   (dir / "ps.log").string(), " 2>&1 & q=$!; "),
      absl::StrCat(FULCRUM_BIN_DIR, "/chief --cluster_spec=", spec,
                   " --model=logreg --train_steps=10 --run_dir=", (dir / "run").string()),
      (dir / "chief.log").string(), "to register",
      "chief: interrupted by SIGTERM while waiting for worker:0 to register",
      "kill -TERM $q; wait $q");
}

}  // namespace
}  // namespace fulcrum
