// fulcrum_monitor as a user runs it: it profiles a process it did not start until that
// process exits, or until SIGINT, writing the same samples.csv and summary.json keys as a
// task; bad flags exit 2 naming the flag.
#include "profiler/monitor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

namespace fulcrum::profiler {
namespace {

namespace fs = std::filesystem;
using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::ReadJson;
using ::fulcrum::testing::RunBinary;
using ::fulcrum::testing::RunShell;

TEST(MonitorTest, ProfilesAForeignProcessUntilItExits) {
  const fs::path dir = FreshDir("monitor_exit");
  // A foreign process that burns CPU for about a second and exits.
  const auto run = RunShell(
      absl::StrCat("bash -c \"sh -c 'while :; do :; done' & p=\\$!; (sleep 1.2; kill \\$p) & ",
                   FULCRUM_BIN_DIR, "/fulcrum_monitor --watch_pids=\\$p --run_dir=", dir.string(),
                   " --interval_ms=100; echo rc=\\$?\""),
      60);
  ASSERT_NE(run.output.find("rc=0"), std::string::npos) << run.output;
  fs::path pid_dir;
  for (const auto& entry : fs::directory_iterator(dir)) pid_dir = entry.path();
  ASSERT_EQ(pid_dir.filename().string().rfind("pid-", 0), 0u) << pid_dir;
  const nlohmann::json summary = ReadJson(pid_dir / "summary.json");
  EXPECT_EQ(summary["command"], "sh");
  EXPECT_FALSE(summary.contains("partial"));
  // It ran a busy loop: mostly user CPU, far above idle.
  EXPECT_GT(summary["cpu_user_percent_mean"].get<double>(), 30.0) << summary.dump(1);
  EXPECT_TRUE(summary["host_system"].contains("mem_total_bytes"));
  const std::string csv = ReadFile(pid_dir / "samples.csv");
  EXPECT_NE(csv.find("host_mem_used_bytes"), std::string::npos);
  EXPECT_NE(csv.find("thread_sh_user_percent"), std::string::npos);
}

TEST(MonitorTest, StopsAtSigintWithItsRecords) {
  const fs::path dir = FreshDir("monitor_sigint");
  const auto run =
      RunShell(absl::StrCat("bash -c \"sleep 30 & p=\\$!; ", FULCRUM_BIN_DIR,
                            "/fulcrum_monitor --watch_pids=\\$p --run_dir=", dir.string(),
                            " --interval_ms=50 & m=\\$!; sleep 0.5; kill -INT \\$m; wait \\$m; "
                            "echo rc=\\$?; kill \\$p\""),
               60);
  EXPECT_NE(run.output.find("rc=130"), std::string::npos) << run.output;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    files += fs::exists(entry.path() / "summary.json") && fs::exists(entry.path() / "samples.csv");
  }
  EXPECT_EQ(files, 1);
}

TEST(MonitorTest, BadFlagsExit2NamingTheFlag) {
  const std::string dir = FreshDir("monitor_bad").string();
  const std::pair<std::string, std::string> cases[] = {
      {"--watch_pids=abc --run_dir=" + dir, "--watch_pids"},
      {"--watch_pids=1,1 --run_dir=" + dir, "--watch_pids"},
      {"--watch_pids=2147483 --run_dir=" + dir, "--watch_pids"},  // no such process
      {absl::StrCat("--watch_pids=", ::getpid()), "--run_dir"},
      {absl::StrCat("--watch_pids=", ::getpid(), " --run_dir=", dir, " --interval_ms=0"),
       "--interval_ms"},
      {absl::StrCat("--watch_pids=", ::getpid(), " --run_dir=", dir, " --max_seconds=-1"),
       "--max_seconds"},
      {"--no_such_flag=1", "no_such_flag"}};
  for (const auto& [flags, named] : cases) {
    const auto run = RunBinary("fulcrum_monitor", {flags}, 30);
    EXPECT_EQ(run.exit_code, 2) << flags << "\n" << run.output;
    EXPECT_NE(run.output.find(named), std::string::npos) << flags << "\n" << run.output;
  }
}

TEST(MonitorTest, ParsePidList) {
  auto pids = ParsePidList("12,345");
  ASSERT_TRUE(pids.ok());
  EXPECT_EQ(*pids, (std::vector<int>{12, 345}));
  EXPECT_FALSE(ParsePidList("").ok());
  EXPECT_FALSE(ParsePidList("1,,2").ok());
  EXPECT_FALSE(ParsePidList("-3").ok());
}

}  // namespace
}  // namespace fulcrum::profiler
