// scripts/slurm/fulcrum.sbatch on a real Slurm: each test starts a one-machine Slurm cluster
// of Debian's packages (munged, slurmctld, slurmd) in its own temporary folder (its own
// slurm.conf, munge key and socket, state, spool, logs and ports, so it collides with no system
// Slurm or munge), submits jobs with sbatch and checks what they did; at the end it stops every
// daemon it started, checks that no process is left using the folder, and removes it.
// Skips, naming why, without root, without the packages, or without the dataset.
#include "tests/slurm/slurm_cluster.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using ::fulcrum::slurm_testing::FreePortRange;
using ::fulcrum::slurm_testing::JobResult;
using ::fulcrum::slurm_testing::SlurmClusterTest;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::ReadJson;
using ::fulcrum::testing::RunResult;
using ::fulcrum::testing::RunShell;

// How often `needle` occurs in `text`.
int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The job's token (RUN_DIR/launch/token): mode 0600, one line of 64 hex characters, made by the
// batch step (its plan names it) and never printed itself; "" and a test failure otherwise.
std::string CheckToken(const fs::path& run, const JobResult& job) {
  const fs::path token = run / "launch" / "token";
  if (!fs::exists(token)) {
    ADD_FAILURE() << "no " << token << ":\n" << job.output;
    return "";
  }
  EXPECT_EQ(fs::status(token).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write)
      << token;
  const std::string text = ReadFile(token);
  EXPECT_EQ(text.size(), 65u) << token;
  EXPECT_EQ(text.find_first_not_of("0123456789abcdef"), 64u) << token;
  const std::string secret = text.substr(0, 64);
  EXPECT_EQ(job.output.find(secret), std::string::npos) << "the token was printed";
  EXPECT_NE(job.output.find(absl::StrCat("  token: ", token.string(), " (made for this job")),
            std::string::npos)
      << job.output;
  return secret;
}

TEST_F(SlurmClusterTest, TrainsOneChiefOnePsAndTwoWorkers) {
  const int base_port = FreePortRange(4);
  const fs::path run = dir_ / "run";
  const JobResult job =
      Submit({"--ntasks=4"},
             {"--ps", "1", "--workers", "2", "--base_port", std::to_string(base_port), "--run_dir",
              run.string(), "--bin_dir", FULCRUM_BIN_DIR, "--", "--model=logreg",
              "--train_steps=50", "--batch_size=32", "--threads=1", "--eval_every=0"});
  EXPECT_EQ(job.state, "COMPLETED") << job.output << Logs();
  EXPECT_EQ(job.exit_code, "0:0") << job.output;

  // Every task wrote the same spec: the node's name, the base port + each task's local rank.
  const auto addr = [&](int local) {
    return absl::StrCat("\"", node_, ":", base_port + local, "\"");
  };
  EXPECT_EQ(ReadFile(run / "cluster_spec.json"),
            absl::StrCat("{\"chief\": [", addr(0), "], \"ps\": [", addr(1), "], \"worker\": [",
                         addr(2), ", ", addr(3), "]}\n"));
  for (const std::string task : {"chief:0", "ps:0", "worker:0", "worker:1"}) {
    EXPECT_NE(job.output.find(absl::StrCat("-> ", task, " at ", node_, ":")), std::string::npos)
        << task << " did not start:\n"
        << job.output;
  }
  // One token for the job, handed to every task as --auth_token_file (the spec names this
  // node: without credentials protected mode would refuse a non-loopback name).
  CheckToken(run, job);
  EXPECT_EQ(Count(job.output, absl::StrCat("spec ", (run / "cluster_spec.json").string(),
                                           ", token ", (run / "launch" / "token").string())),
            4)
      << job.output;

  const nlohmann::json report = ReadJson(run / "report.json");
  ASSERT_TRUE(report.is_object()) << "no report.json:\n" << job.output;
  EXPECT_EQ(report["num_ps"], 1) << report.dump(1).substr(0, 3000);
  EXPECT_EQ(report["num_workers"], 2);
  EXPECT_EQ(report["ps"].size(), 1u);
  EXPECT_EQ(report["workers"].size(), 2u);
  EXPECT_EQ(report["cluster"]["tasks"], 4);
  EXPECT_EQ(report["failed"], false);
  EXPECT_EQ(report["stop_reason"], "reached train_steps 50");
  EXPECT_GE(report["global_step"].get<int>(), 50);
  EXPECT_TRUE(report["vanished_tasks"].empty()) << report["vanished_tasks"].dump();
  for (const char* task : {"chief-0", "ps-0", "worker-0", "worker-1"}) {
    EXPECT_TRUE(fs::exists(run / task / "summary.json")) << task;
  }
}

// scancel sends every task SIGTERM: each ends cleanly, the chief writes the report.
TEST_F(SlurmClusterTest, ScancelStopsEveryTaskCleanly) {
  const fs::path run = dir_ / "run";
  const std::string id = SubmitOnly(
      {"--ntasks=4"}, {"--base_port", std::to_string(FreePortRange(4)), "--run_dir", run.string(),
                       "--bin_dir", FULCRUM_BIN_DIR, "--", "--model=logreg",
                       "--train_steps=100000000", "--threads=1", "--eval_every=0"});
  ASSERT_FALSE(id.empty());
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (JobOutput(id).find("[worker:1] [info] training:") == std::string::npos) {
    ASSERT_LT(Clock::now(), deadline) << "not training after 60 s:\n" << JobOutput(id) << Logs();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(RunShell(absl::StrCat("scancel ", id), 10).exit_code, 0);
  const JobResult job = Wait(id);
  EXPECT_EQ(job.state, "CANCELLED") << job.output;
  const nlohmann::json report = ReadJson(run / "report.json");
  ASSERT_TRUE(report.is_object()) << "no report.json:\n" << job.output;
  EXPECT_EQ(report["stop_reason"], "interrupted by SIGTERM") << job.output;
  for (const char* task : {"chief-0", "ps-0", "worker-0", "worker-1"}) {
    EXPECT_TRUE(fs::exists(run / task / "summary.json")) << task << "\n" << job.output;
  }
}

TEST_F(SlurmClusterTest, BadInputFailsTheJobNamingTheProblem) {
  // 2 tasks for 1 chief + 1 ps + 2 workers.
  JobResult job = Submit({"--ntasks=2"}, {"--workers", "2", "--run_dir", (dir_ / "run").string(),
                                          "--bin_dir", FULCRUM_BIN_DIR, "--", "--model=logreg"});
  EXPECT_EQ(job.state, "FAILED") << job.output;
  EXPECT_EQ(job.exit_code, "2:0") << job.output;
  EXPECT_NE(job.output.find("the allocation has 2 Slurm task(s), too few for 1 chief + 1 ps + 2 "
                            "worker(s) = 4: submit with --ntasks=4"),
            std::string::npos)
      << job.output;
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "a task started:\n" << job.output;

  // No binaries where --bin_dir points.
  job = Submit({"--ntasks=3"}, {"--bin_dir", (dir_ / "nowhere").string(), "--", "--model=logreg"});
  EXPECT_EQ(job.exit_code, "2:0") << job.output;
  EXPECT_NE(job.output.find(absl::StrCat((dir_ / "nowhere").string(), "/chief not found")),
            std::string::npos)
      << job.output;

  // Flags before -- that the launcher does not know.
  job = Submit({"--ntasks=3"}, {"--model=logreg"});
  EXPECT_EQ(job.exit_code, "2:0") << job.output;
  EXPECT_NE(job.output.find("unknown option '--model=logreg' (the flags for the tasks go after --"),
            std::string::npos)
      << job.output;
}

// Two Slurm nodes (two slurmd on this machine, n1 and n2): which task runs where, for srun's
// block and cyclic distributions, the spec every task builds from it and the job's token every
// task gets (none when the flags carry credentials or --insecure). The node names do not
// resolve, so the binaries here are stand-ins that print how they were started.
class SlurmTwoNodeTest : public SlurmClusterTest {
 protected:
  SlurmTwoNodeTest() { num_nodes_ = 2; }
};

TEST_F(SlurmTwoNodeTest, PlacesTasksAsSlurmDoes) {
  const fs::path bin = dir_ / "fakebin";
  fs::create_directories(bin);
  for (const char* job : {"chief", "ps", "worker"}) {
    std::ofstream(bin / job) << "#!/bin/sh\necho \"started " << job
                             << " on $SLURMD_NODENAME as local task $SLURM_LOCALID: $*\"\n";
    fs::permissions(bin / job, fs::perms::owner_all, fs::perm_options::add);
  }
  struct Case {
    std::string distribution;
    std::string spec;
    std::vector<std::string> started;
  };
  const std::vector<Case> cases = {
      {"block",
       R"({"chief": ["n1:2500"], "ps": ["n1:2501"], "worker": ["n2:2500", "n2:2501"]})",
       {"started chief on n1 as local task 0", "started ps on n1 as local task 1",
        "started worker on n2 as local task 0", "started worker on n2 as local task 1"}},
      {"cyclic",
       R"({"chief": ["n1:2500"], "ps": ["n2:2500"], "worker": ["n1:2501", "n2:2501"]})",
       {"started chief on n1 as local task 0", "started ps on n2 as local task 0",
        "started worker on n1 as local task 1", "started worker on n2 as local task 1"}},
  };
  for (const Case& c : cases) {
    const fs::path run = dir_ / c.distribution;
    const JobResult job = Submit(
        {"--nodes=2", "--ntasks-per-node=2", absl::StrCat("--distribution=", c.distribution)},
        {"--base_port", "2500", "--run_dir", run.string(), "--bin_dir", bin.string(), "--",
         "--model=logreg"});
    EXPECT_EQ(job.state, "COMPLETED") << c.distribution << "\n" << job.output << Logs();
    EXPECT_EQ(ReadFile(run / "cluster_spec.json"), c.spec + "\n") << c.distribution;
    CheckToken(run, job);
    const std::vector<std::string> jobs = {"chief", "ps", "worker", "worker"};
    const std::vector<int> indices = {0, 0, 0, 1};
    for (size_t i = 0; i < c.started.size(); ++i) {
      const std::string line = absl::StrCat(
          c.started[i], ": --cluster_spec=", (run / "cluster_spec.json").string(),
          " --job_name=", jobs[i], " --task_index=", indices[i], " --run_dir=", run.string(),
          " --auth_token_file=", (run / "launch" / "token").string(), " --model=logreg\n");
      EXPECT_NE(job.output.find(line), std::string::npos)
          << c.distribution << ": no line " << line << job.output;
    }
  }

  // Credentials of the user's own, or the opt-out: no token made, the flags as given.
  // (--insecure=false is not the opt-out.)
  int n = 0;
  for (const std::string own : {"--insecure", "--auth_token_file=/own/token",
                                "--tls_cert=certs/ps-0.pem", "--insecure=false"}) {
    const fs::path run = dir_ / absl::StrCat("own-", n++);
    const JobResult job = Submit({"--nodes=2", "--ntasks-per-node=2"},
                                 {"--base_port", "2500", "--run_dir", run.string(), "--bin_dir",
                                  bin.string(), "--", "--model=logreg", own});
    EXPECT_EQ(job.state, "COMPLETED") << own << "\n" << job.output << Logs();
    const bool made = own == "--insecure=false";
    EXPECT_EQ(fs::exists(run / "launch" / "token"), made) << own << "\n" << job.output;
    EXPECT_EQ(job.output.find("  credentials: from the flags") != std::string::npos, !made)
        << own << "\n"
        << job.output;
    const std::string added =
        made ? absl::StrCat(" --auth_token_file=", (run / "launch" / "token").string()) : "";
    EXPECT_NE(job.output.find(absl::StrCat(
                  "started chief on n1 as local task 0: --cluster_spec=",
                  (run / "cluster_spec.json").string(), " --job_name=chief --task_index=0",
                  " --run_dir=", run.string(), added, " --model=logreg ", own, "\n")),
              std::string::npos)
        << own << "\n"
        << job.output;
    const bool own_token = absl::StartsWith(own, "--auth_token_file=");
    EXPECT_EQ(Count(job.output, "--auth_token_file="), made || own_token ? 4 : 0) << own << "\n"
                                                                                  << job.output;
  }
}

// Without Slurm (no daemons needed): both scripts refuse, exit 2, naming why.
TEST(SlurmScriptsTest, OutsideSlurmExitTwoNamingWhy) {
  const std::string dir = absl::StrCat(FULCRUM_SOURCE_DIR, "/scripts/slurm/");
  const std::string clean = "env -u SLURM_JOB_ID -u SLURM_PROCID -u SLURM_STEP_ID ";
  RunResult r = RunShell(absl::StrCat(clean, dir, "fulcrum_task.sh -- --model=logreg"), 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not running under Slurm (no SLURM_PROCID)"), std::string::npos)
      << r.output;
  r = RunShell(absl::StrCat(clean, dir, "fulcrum.sbatch"), 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not running under Slurm (no SLURM_JOB_ID)"), std::string::npos)
      << r.output;
  r = RunShell(absl::StrCat(clean, dir, "fulcrum_task.sh --workers"), 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("option --workers needs a value"), std::string::npos) << r.output;
  // Inside a batch step but not under srun: one task would wait for the others forever.
  r = RunShell(absl::StrCat(clean, "SLURM_JOB_ID=1 SLURM_PROCID=0 ", dir, "fulcrum_task.sh"), 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not started by srun"), std::string::npos) << r.output;
  r = RunShell(absl::StrCat(dir, "fulcrum_task.sh --help"), 30);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("task 0 = chief:0"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace fulcrum