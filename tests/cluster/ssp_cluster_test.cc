// Bounded staleness (--mode=ssp) with real ps, worker and chief processes on loopback: one of
// two workers is slowed from outside (SIGSTOP / SIGCONT in a duty cycle: no hook in the
// binaries), and the fast one must stay within --staleness steps of it to the end; a worker
// that dies must not hold the survivor once the chief has declared it gone. Logreg on the
// real Fashion-MNIST files, one compute thread per process. No assertion on wall-clock time.
#include <signal.h>

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
using ::fulcrum::testing::HaveData;
using ::fulcrum::testing::kFashionMnist;
using ::fulcrum::testing::LocalCluster;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::ReadJson;
using ::fulcrum::testing::WriteLocalSpec;



// True while `pid` exists and has not exited (a zombie has: state Z).
bool Running(pid_t pid) {
  if (pid <= 0) return false;
  const std::string stat = ReadFile(fs::path("/proc") / std::to_string(pid) / "stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

std::vector<std::string> SspFlags(const std::string& spec, const fs::path& run_dir, int staleness,
                                  int train_steps) {
  return {absl::StrCat("--cluster_spec=", spec), "--model=logreg", "--batch_size=128",
          "--learning_rate=0.03", absl::StrCat("--train_steps=", train_steps), "--mode=ssp",
          absl::StrCat("--staleness=", staleness), "--eval_every=0", "--threads=1",
          "--log_every=200",
          // The sequential schedule, where the gate's hold is all of the step's sync_wait
          // phase (overlapped, it is the part of the waits for values that the ps held).
          "--overlap=false", "--startup_timeout=60", absl::StrCat("--run_dir=", run_dir.string())};
}

TEST(SspClusterTest, TheFastWorkerStaysWithinTheStalenessOfASlowedOne) {
  if (!HaveData()) GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  constexpr int kStaleness = 2;
  const fs::path dir = FreshDir("ssp_slowed_worker");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  const fs::path run_dir = dir / "run";
  std::vector<std::string> flags = SspFlags(spec, run_dir, kStaleness, 1500);
  flags.push_back("--heartbeat_timeout=60");  // far above the 200 ms stops
  LocalCluster cluster(dir);
  cluster.StartAll(1, 2, flags);
  ASSERT_TRUE(cluster.WaitForLog("worker", 1, "training:", std::chrono::seconds(120)))
      << cluster.Logs();
  // worker:1 runs a quarter of the time until it exits.
  const pid_t slow = cluster.task("worker", 1).pid;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  int cycles = 0;
  while (Running(slow) && std::chrono::steady_clock::now() < give_up) {
    ::kill(slow, SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    ::kill(slow, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ++cycles;
  }
  ::kill(slow, SIGCONT);
  cluster.WaitAll(std::chrono::seconds(120));
  for (const auto& t : cluster.tasks()) {
    ASSERT_EQ(t.exit_code, 0) << t.name() << " failed\n" << cluster.Logs();
  }
  EXPECT_GT(cycles, 0);

  const nlohmann::json report = ReadJson(run_dir / "report.json");
  ASSERT_TRUE(report.is_object()) << "no report.json\n" << cluster.Logs();
  EXPECT_EQ(report["mode"], "ssp");
  EXPECT_EQ(report["staleness"], kStaleness);
  EXPECT_EQ(report["stop_reason"], "reached train_steps 1500");
  EXPECT_GE(report["final_test_accuracy"].get<double>(), 0.7) << report.dump();
  const nlohmann::json fast = ReadJson(run_dir / "worker-0" / "summary.json");
  const nlohmann::json slowed = ReadJson(run_dir / "worker-1" / "summary.json");
  ASSERT_TRUE(fast.is_object() && slowed.is_object()) << cluster.Logs();
  EXPECT_EQ(fast["staleness"], kStaleness);
  const int64_t fast_steps = fast["local_steps"].get<int64_t>();
  const int64_t slow_steps = slowed["local_steps"].get<int64_t>();
  // The bound, plus the one step the end of training (Stop) may release early.
  EXPECT_LE(fast_steps, slow_steps + kStaleness + 1) << fast.dump() << "\n" << slowed.dump();
  EXPECT_LE(slow_steps, fast_steps + kStaleness + 1);
  EXPECT_GE(fast_steps + slow_steps, 1500);
  // The ps counted the same steps, and held the fast worker while the other was stopped: the
  // hold shows as the fast worker's sync_wait phase and the ps's request wait.
  ASSERT_EQ(report["ps"].size(), 1u);
  const nlohmann::json& ps = report["ps"][0];
  EXPECT_EQ(ps["staleness"], kStaleness) << ps.dump();
  ASSERT_EQ(ps["worker_clocks"].size(), 2u) << ps.dump();
  // A step whose push came after the stop was recorded by the worker but not counted.
  for (int w = 0; w < 2; ++w) {
    const int64_t clock = ps["worker_clocks"][w].get<int64_t>();
    const int64_t local = (w == 0 ? fast_steps : slow_steps);
    EXPECT_LE(clock, local) << ps.dump();
    EXPECT_GE(clock + 1, local) << ps.dump();
  }
  EXPECT_LE(ps["worker_clocks"][0].get<int64_t>(),
            ps["worker_clocks"][1].get<int64_t>() + kStaleness + 1)
      << ps.dump();
  EXPECT_EQ(ps["ssp_wait_timeouts"], 0) << ps.dump();
  EXPECT_GT(ps["request_wait_ms"].get<double>(), 0.0) << ps.dump();
  EXPECT_GT(fast["step_phase_mean_ms"]["sync_wait"].get<double>(), 0.0) << fast.dump();
}

// A worker killed mid-run holds the survivor only until the chief declares it gone
// (--heartbeat_timeout) and tells the ps to stop waiting for it; the run then finishes.
TEST(SspClusterTest, ADeadWorkerIsReleasedAndTheRunFinishes) {
  if (!HaveData()) GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  const fs::path dir = FreshDir("ssp_dead_worker");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  const fs::path run_dir = dir / "run";
  std::vector<std::string> flags = SspFlags(spec, run_dir, /*staleness=*/1, 3000);
  // Short enough for a quick test, long enough for a loaded machine's start-up (a ps exits
  // when nobody called it for --heartbeat_timeout).
  flags.push_back("--heartbeat_timeout=8");
  flags.push_back("--step_timeout=5");
  flags.push_back("--log_every=5");
  LocalCluster cluster(dir);
  cluster.StartAll(1, 2, flags);
  // Once both train (a worker that has not begun is slow, not dead: the others wait for it and
  // the chief counts that as no progress), worker:1 is stopped, so worker:0 is soon held by
  // it, and killed.
  ASSERT_TRUE(cluster.WaitForLog("worker", 1, "step 5 (global", std::chrono::seconds(120)))
      << cluster.Logs();
  cluster.Signal("worker", 1, SIGSTOP);
  cluster.Kill("worker", 1);
  cluster.WaitAll(std::chrono::seconds(180));
  EXPECT_EQ(cluster.task("chief", 0).exit_code, 0) << cluster.Logs();
  EXPECT_EQ(cluster.task("ps", 0).exit_code, 0) << cluster.Logs();
  EXPECT_EQ(cluster.task("worker", 0).exit_code, 0) << cluster.Logs();
  const nlohmann::json report = ReadJson(run_dir / "report.json");
  ASSERT_TRUE(report.is_object()) << "no report.json\n" << cluster.Logs();
  EXPECT_EQ(report["stop_reason"], "reached train_steps 3000") << cluster.Logs();
  EXPECT_EQ(report["workers_lost"], nlohmann::json::array({1})) << cluster.Logs();
  bool released = false;
  for (const auto& w : report["ssp_released_workers"]) released = released || w == 1;
  EXPECT_TRUE(released) << report["ssp_released_workers"];
  ASSERT_EQ(report["ps"].size(), 1u);
  EXPECT_EQ(report["ps"][0]["released_workers"][0], 1) << report["ps"][0].dump();
  EXPECT_EQ(report["ps"][0]["ssp_wait_timeouts"], 0) << report["ps"][0].dump();
  EXPECT_NE(ReadFile(cluster.task("ps", 0).log).find("ssp no longer waits for worker:1"),
            std::string::npos);
}

}  // namespace
}  // namespace fulcrum
