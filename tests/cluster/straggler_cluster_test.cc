// Issue 30: the straggler named. A sync run of real binaries where one worker's backward pass
// sleeps (--test_backward_delay_ms, a test-only flag) has that worker named by the ps within
// 10 steps, in its log, its summary, the report and the chief's headline; 1000 clean sync
// steps name nobody.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
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
using ::fulcrum::testing::HaveData;
using ::fulcrum::testing::LocalCluster;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::ReadJson;
using ::fulcrum::testing::WriteLocalSpec;

struct SyncRun {
  std::unique_ptr<LocalCluster> cluster;
  nlohmann::json report;
};

// A sync run of logreg over 1 ps and 2 workers for `steps`; worker:1 gets `slow_flag` too.
SyncRun RunSync(const std::string& name, int steps, const std::string& slow_flag) {
  const fs::path dir = FreshDir(name);
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  const std::vector<std::string> flags = {absl::StrCat("--cluster_spec=", spec),
                                          "--model=logreg",
                                          "--batch_size=64",
                                          absl::StrCat("--train_steps=", steps),
                                          "--mode=sync",
                                          "--eval_every=0",
                                          "--threads=1",
                                          "--log_every=100",
                                          "--startup_timeout=60",
                                          absl::StrCat("--run_dir=", (dir / "run").string())};
  SyncRun run{std::make_unique<LocalCluster>(dir), nullptr};
  run.cluster->Start("ps", 0, flags);
  run.cluster->Start("worker", 0, flags);
  std::vector<std::string> slow = flags;
  if (!slow_flag.empty()) slow.push_back(slow_flag);
  run.cluster->Start("worker", 1, slow);
  run.cluster->Start("chief", 0, flags);
  run.cluster->WaitAll(std::chrono::seconds(300));
  for (const auto& t : run.cluster->tasks()) {
    EXPECT_EQ(t.exit_code, 0) << t.name() << " failed\n" << run.cluster->Logs();
  }
  run.report = ReadJson(dir / "run" / "report.json");
  return run;
}

TEST(StragglerClusterTest, ADelayedWorkerIsNamedWithinTenSteps) {
  if (!HaveData()) GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  const SyncRun run = RunSync("straggler_delayed", 60, "--test_backward_delay_ms=40");
  const nlohmann::json& report = run.report;
  LocalCluster* cluster = run.cluster.get();
  ASSERT_TRUE(report.is_object()) << cluster->Logs();
  ASSERT_EQ(report["stragglers"].size(), 1u) << report["stragglers"].dump();
  const nlohmann::json& row = report["stragglers"][0];
  EXPECT_EQ(row["ps"], "ps:0");
  EXPECT_EQ(row["worker"], "worker:1") << row.dump();
  EXPECT_LE(row["since_step"].get<int64_t>(), 10) << row.dump();
  // The sleep is the lead, less the other worker's own compute at most.
  EXPECT_GT(row["held_back_ms"].get<double>(), 20.0) << row.dump();
  EXPECT_LT(row["held_back_ms"].get<double>(), 200.0) << row.dump();
  EXPECT_NE(ReadFile(cluster->task("ps", 0).log).find("worker:1 holds the sync steps back"),
            std::string::npos)
      << cluster->Logs();
  EXPECT_NE(ReadFile(cluster->task("chief", 0).log)
                .find("straggler: worker:1 holds the sync steps back by"),
            std::string::npos)
      << ReadFile(cluster->task("chief", 0).log);
}

TEST(StragglerClusterTest, NoWorkerIsNamedInAThousandCleanSteps) {
  if (!HaveData()) GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  const SyncRun run = RunSync("straggler_clean", 1000, "");
  const nlohmann::json& report = run.report;
  LocalCluster* cluster = run.cluster.get();
  ASSERT_TRUE(report.is_object()) << cluster->Logs();
  ASSERT_EQ(report["stragglers"].size(), 1u) << report["stragglers"].dump();
  const nlohmann::json& row = report["stragglers"][0];
  EXPECT_TRUE(row["worker"].is_null()) << row.dump();
  EXPECT_EQ(row["steps_named"], 0) << row.dump();
  EXPECT_EQ(ReadFile(cluster->task("ps", 0).log).find("holds the sync steps back"),
            std::string::npos)
      << ReadFile(cluster->task("ps", 0).log);
  EXPECT_NE(ReadFile(cluster->task("chief", 0).log)
                .find("straggler: no worker holds the sync steps back"),
            std::string::npos);
}

// A bad value of the test flag is bad input, said before the worker reaches anyone.
TEST(StragglerClusterTest, ANegativeDelayExitsTwo) {
  const fs::path dir = FreshDir("straggler_bad_flag");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  const testing::RunResult r =
      testing::RunBinary("worker",
                         {absl::StrCat("--cluster_spec=", spec), "--job_name=worker",
                          "--task_index=0", "--train_steps=10", "--test_backward_delay_ms=-5"},
                         60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--test_backward_delay_ms=-5: expected 0 to 60000 milliseconds"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace fulcrum
