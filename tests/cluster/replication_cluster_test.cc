// tests: --replicate_shards on whole clusters of the real binaries (issue 27 item 5). Two ps,
// two workers and the chief on loopback, no checkpoints at all: a ps SIGKILLed mid-run (sync,
// and async) or stopped with SIGTERM is replaced by its replica on the other ps; the run
// ends at train_steps as a success, every live task exits 0, nothing went back to a
// checkpoint (there is none), and the report names the promotion and the step the replica
// took over at, which is past the evaluation seen before the kill (nothing rolled back).
// Bad input: one ps, or ssp, exits 2 naming what is needed.
#include <csignal>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
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

constexpr int64_t kTrainSteps = 4000;

std::vector<std::string> Flags(const std::string& spec, const fs::path& dir,
                               const std::string& mode) {
  return {absl::StrCat("--cluster_spec=", spec),
          "--model=mlp",
          "--dataset=synthetic",
          absl::StrCat("--mode=", mode),
          absl::StrCat("--train_steps=", kTrainSteps),
          "--eval_every=500",
          "--threads=1",
          "--profile=off",
          "--replicate_shards",
          absl::StrCat("--run_dir=", (dir / "run").string())};
}

// Runs the cluster, sends `signal` to ps:`victim` after the first evaluation and checks that
// its replica on the other ps finished the run. With `restart` the victim is started again at
// once, as `local_cluster.sh --restart` does: the chief, seeing it answer without variables,
// promotes the replica all the same, and shuts the newcomer down with the run (exit 0).
void LoseAPs(const std::string& name, const std::string& mode, int victim, int signal,
             bool restart = false) {
  const fs::path dir = FreshDir(name);
  const std::string spec = WriteLocalSpec(dir / "spec.json", 2, 2);
  const std::vector<std::string> flags = Flags(spec, dir, mode);
  LocalCluster cluster(dir);
  cluster.StartAll(2, 2, flags);
  ASSERT_TRUE(cluster.WaitForLog("chief", 0, "eval at global step", std::chrono::seconds(90)))
      << cluster.Logs();
  const auto signalled = std::chrono::system_clock::now();
  if (signal == SIGKILL) {
    cluster.Kill("ps", victim);
    if (restart) cluster.Start("ps", victim, flags);
  } else {
    cluster.Signal("ps", victim, signal);
  }
  cluster.WaitAll(std::chrono::seconds(180));
  const int survivor = 1 - victim;
  for (const auto& [job, index] : std::vector<std::pair<std::string, int>>{
           {"chief", 0}, {"worker", 0}, {"worker", 1}, {"ps", survivor}}) {
    EXPECT_EQ(cluster.task(job, index).exit_code, 0) << job << ":" << index << "\n"
                                                     << cluster.Logs();
  }
  // A ps stopped with SIGTERM leaves the run (exit 143) once its replica took over.
  if (signal == SIGTERM) {
    EXPECT_EQ(cluster.task("ps", victim).exit_code, 143) << cluster.Logs();
  }
  if (restart) {
    EXPECT_EQ(cluster.task("ps", victim).exit_code, 0) << cluster.Logs();
    EXPECT_NE(ReadFile(dir / "chief-0.log")
                  .find(absl::StrCat("shut down the restarted ps:", victim)),
              std::string::npos)
        << cluster.Logs();
  }

  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  EXPECT_EQ(report["failed"], false) << report.dump(2);
  EXPECT_GE(report["global_step"].get<int64_t>(), kTrainSteps);
  EXPECT_TRUE(report["ps_recoveries"].empty()) << report["ps_recoveries"];
  const nlohmann::json& replication = report["replication"];
  ASSERT_TRUE(replication.is_object()) << report.dump(2);
  ASSERT_EQ(replication["promotions"].size(), 1u) << replication.dump(2);
  const nlohmann::json& promotion = replication["promotions"][0];
  EXPECT_EQ(promotion["shard"], absl::StrCat("ps:", victim));
  EXPECT_EQ(promotion["served_by"], absl::StrCat("ps:", survivor));
  // Past the evaluation at step 500 that came before the signal: with no checkpoint to go
  // back to, the replica held every applied step.
  EXPECT_GE(promotion["global_step"].get<int64_t>(), 500) << promotion.dump();
  EXPECT_EQ(replication["replicas"][victim]["promoted"], true);
  EXPECT_EQ(replication["replicas"][survivor]["promoted"], false);

  // The survivor served the victim's shard to the end: its replica reached train_steps.
  const nlohmann::json ps = ReadJson(dir / "run" / absl::StrCat("ps-", survivor) / "summary.json");
  ASSERT_TRUE(ps.is_object()) << cluster.Logs();
  ASSERT_EQ(ps["replicas_kept"].size(), 1u) << ps.dump(2);
  EXPECT_EQ(ps["replicas_kept"][0]["shard"], absl::StrCat("ps:", victim));
  EXPECT_EQ(ps["replicas_kept"][0]["promoted"], true);
  EXPECT_GE(ps["replicas_kept"][0]["global_step"].get<int64_t>(), kTrainSteps);
  // How long each worker went without the shard (printed, not asserted: a figure, not a
  // behaviour): from the signal to its log's line saying the replica serves it.
  for (int w = 0; w < 2; ++w) {
    const std::string log = ReadFile(dir / absl::StrCat("worker-", w, ".log"));
    const size_t at = log.find("is served by its replica");
    // The line's start: "[2026-11-28 18:33:14.059] [worker:0] ...".
    const size_t line = at == std::string::npos ? at : log.rfind('\n', at);
    const size_t open = at == std::string::npos ? at : line == std::string::npos ? 0 : line + 1;
    absl::Time when;
    std::string error;
    if (open != std::string::npos &&
        absl::ParseTime("%Y-%m-%d %H:%M:%E3S", log.substr(open + 1, 23), absl::LocalTimeZone(),
                        &when, &error)) {
      std::cout << "worker:" << w << " was served by the replica "
                << absl::FormatDuration(when - absl::FromChrono(signalled))
                << " after the signal to ps:" << victim << "\n";
    }
  }
  const std::string chief_log = ReadFile(dir / "chief-0.log");
  EXPECT_NE(chief_log.find(absl::StrCat("its replica on ps:", survivor, " serves ps:", victim)),
            std::string::npos)
      << chief_log;
}

TEST(ReplicationClusterTest, SyncAKilledAndRestartedPsIsReplacedByItsReplicaWithNoStepLost) {
  LoseAPs("cluster_replication_sync_kill", "sync", 0, SIGKILL, /*restart=*/true);
}

TEST(ReplicationClusterTest, AsyncAKilledPsIsReplacedByItsReplica) {
  LoseAPs("cluster_replication_async_kill", "async", 1, SIGKILL);
}

TEST(ReplicationClusterTest, SyncAStoppedPsHandsItsShardToItsReplicaAndLeaves) {
  LoseAPs("cluster_replication_sync_term", "sync", 0, SIGTERM);
}

TEST(ReplicationClusterTest, OnePsOrSspIsRefusedWithExitTwoNamingWhatIsNeeded) {
  const fs::path dir = FreshDir("cluster_replication_bad");
  const std::string one = WriteLocalSpec(dir / "one.json", 1, 1);
  const std::string two = WriteLocalSpec(dir / "two.json", 2, 1);
  const struct {
    std::string spec, mode, expect;
  } cases[] = {{one, "sync", "needs at least 2 ps tasks"},
               {two, "ssp", "works with --mode=sync or async, not ssp"}};
  for (const auto& c : cases) {
    for (const std::string job : {"ps", "worker", "chief"}) {
      const testing::RunResult r = testing::RunBinary(
          job,
          {absl::StrCat("--job_name=", job), "--task_index=0",
           absl::StrCat("--cluster_spec=", c.spec), absl::StrCat("--mode=", c.mode),
           "--replicate_shards", "--model=mlp", "--dataset=synthetic", "--train_steps=10",
           absl::StrCat("--run_dir=", (dir / "run").string())},
          60);
      EXPECT_EQ(r.exit_code, 2) << job << " " << c.mode << ": " << r.output;
      EXPECT_NE(r.output.find(c.expect), std::string::npos) << job << ": " << r.output;
    }
  }
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// A job resumed from a checkpoint under --replicate_shards restores each replica from the
// same file as its primary: the primaries' forwards line up with their replicas to the end
// (a replica left behind would refuse them, and replication would stop, in the summary).
TEST(ReplicationClusterTest, AResumedJobRestoresTheReplicasWithThePrimaries) {
  const fs::path dir = FreshDir("cluster_replication_resume");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 2, 2);
  for (const int64_t steps : {300, 600}) {
    std::vector<std::string> flags = Flags(spec, dir, "sync");
    flags.push_back(absl::StrCat("--checkpoint_dir=", (dir / "ckpt").string()));
    flags.push_back(absl::StrCat("--train_steps=", steps));  // the last one given wins
    flags.push_back("--overwrite");
    LocalCluster cluster(dir);
    cluster.StartAll(2, 2, flags);
    cluster.WaitAll(std::chrono::seconds(180));
    for (const auto& t : cluster.tasks()) ASSERT_EQ(t.exit_code, 0) << t.name() << cluster.Logs();
    const nlohmann::json report = ReadJson(dir / "run" / "report.json");
    ASSERT_TRUE(report.is_object()) << cluster.Logs();
    EXPECT_EQ(report["global_step"], steps);
    if (steps == 600) {
      EXPECT_EQ(report["checkpoint"]["resumed_from_step"], 300) << report.dump(2);
    }
    for (int p = 0; p < 2; ++p) {
      const nlohmann::json ps = ReadJson(dir / "run" / absl::StrCat("ps-", p) / "summary.json");
      ASSERT_TRUE(ps.is_object()) << cluster.Logs();
      EXPECT_EQ(ps["replication"]["lost"], "") << ps["replication"].dump();
      EXPECT_GT(ps["replication"]["forwards"].get<int64_t>(), 0);
      EXPECT_EQ(ps["replicas_kept"][0]["global_step"], steps) << ps["replicas_kept"].dump();
    }
  }
}

}  // namespace
}  // namespace fulcrum
