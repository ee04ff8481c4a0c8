// A cluster on emulated hosts: scripts/netns_hosts.sh makes two network namespaces joined by
// a bridge (1 Gbit/s links), scripts/make_spec.py lays out PW-W (host 1: chief, ps and
// worker 0; host 2: worker 1), scripts/local_cluster.sh --hosts runs each task in its host.
// The report must group the tasks by host and split the bytes as on real nodes: what stays
// on a host goes over its lo, what crosses goes over eth0 (the veth). Needs root; skips
// without it.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;
using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::ReadFile;

// A shell command line (shell-safe already) with a deadline: output and exit code.
::fulcrum::testing::RunResult Shell(const std::string& line, int timeout_seconds = 300) {
  return ::fulcrum::testing::RunShell(line, timeout_seconds);
}

// bench/sweep.py with this build's binaries, as the start of a shell command line.
std::string Sweep() {
  return absl::StrCat("env BIN_DIR=", FULCRUM_BIN_DIR, " ", FULCRUM_SOURCE_DIR, "/bench/sweep.py");
}

// Why a training cluster on emulated hosts cannot run here, or "" when it can: the hosts need
// root (network namespaces), the tasks the Fashion-MNIST package.
std::string WhyNoEmulatedCluster() {
  if (::geteuid() != 0) return "emulated hosts need root (network namespaces)";
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    return "the dataset-fashion-mnist package is not installed";
  }
  return "";
}

class NetnsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = WhyNoEmulatedCluster(); !why.empty()) GTEST_SKIP() << why;
    prefix_ = absl::StrCat("t", ::getpid() % 100000);
    const auto up =
        Shell(absl::StrCat(kScripts, "/netns_hosts.sh up 2 --rate 1gbit --prefix ", prefix_));
    if (up.exit_code != 0) GTEST_SKIP() << "cannot make emulated hosts here:\n" << up.output;
    made_ = true;
  }
  void TearDown() override {
    if (made_) {
      const auto down = Shell(absl::StrCat(kScripts, "/netns_hosts.sh down --prefix ", prefix_));
      EXPECT_EQ(down.exit_code, 0) << down.output;
      // Nothing of ours is left behind.
      EXPECT_EQ(Shell(absl::StrCat("ip netns list | grep -c '^", prefix_, "-h'")).output, "0\n");
    }
  }

  static constexpr const char* kScripts = FULCRUM_SOURCE_DIR "/scripts";
  std::string prefix_;
  bool made_ = false;
};

TEST_F(NetnsClusterTest, PwWSplitsLoopbackAndCrossHostBytesByHost) {
  const fs::path dir = FreshDir("netns_pw_w");
  const auto spec = Shell(absl::StrCat(kScripts, "/make_spec.py --layout pw-w --workers 2 --ps 1",
                                       " --hosts 2 --prefix ", prefix_, " --out ", dir.string()));
  ASSERT_EQ(spec.exit_code, 0) << spec.output;
  const fs::path run_dir = dir / "run";
  const auto run = Shell(absl::StrCat(
      "env BIN_DIR=", FULCRUM_BIN_DIR, " ", kScripts, "/local_cluster.sh --hosts ",
      (dir / "hosts.json").string(), " ", (dir / "spec.json").string(),
      " --model=logreg --batch_size=128 --learning_rate=0.03 --train_steps=300 --mode=sync",
      " --eval_every=0 --threads=1 --startup_timeout=60 --profile_interval_ms=100",
      " --run_dir=", run_dir.string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The emulated hosts' addresses are not loopback: without credentials of its own the
  // launcher gave every task a fresh token (protected mode would refuse the spec).
  EXPECT_NE(run.output.find("every task gets a fresh token"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("ps:0: RPCs carry the --auth_token_file token"), std::string::npos)
      << run.output;

  const nlohmann::json r = nlohmann::json::parse(ReadFile(run_dir / "report.json"));
  ASSERT_EQ(r["hosts"].size(), 2u) << r["hosts"].dump();
  const nlohmann::json& h1 = r["hosts"][0];
  const nlohmann::json& h2 = r["hosts"][1];
  EXPECT_EQ(h1["host"], prefix_ + "-h1");
  EXPECT_EQ(h1["tasks"], nlohmann::json({"chief-0", "ps-0", "worker-0"}));
  EXPECT_EQ(h2["host"], prefix_ + "-h2");
  EXPECT_EQ(h2["tasks"], nlohmann::json({"worker-1"}));

  nlohmann::json w0, w1;
  for (const auto& t : r["tasks"]) {
    if (t["task"] == "worker-0") w0 = t;
    if (t["task"] == "worker-1") w1 = t;
  }
  // worker-0 talks to ps-0 on its own host: over lo, so host 1's lo carries at least its bytes.
  EXPECT_GE(h1["loopback_bytes_sent"].get<double>(),
            w0["app_bytes_sent"].get<double>() + w0["app_bytes_received"].get<double>());
  // worker-1 is alone on host 2: nothing on its lo; all its traffic crosses eth0, and the
  // host row says so: its payload is Fulcrum's external bytes, the rest (headers; no other
  // process talks in the namespace) a few percent.
  EXPECT_EQ(h2["loopback_bytes_sent"].get<double>(), 0.0) << h2.dump();
  EXPECT_GE(h2["external_bytes_sent"].get<double>(), w1["app_bytes_sent"].get<double>());
  EXPECT_GE(h2["external_bytes_received"].get<double>(), w1["app_bytes_received"].get<double>());
  EXPECT_EQ(h2["fulcrum_external_bytes_sent"].get<double>(), w1["app_bytes_sent"].get<double>());
  EXPECT_EQ(h2["fulcrum_loopback_bytes_sent"].get<double>(), 0.0);
  EXPECT_LE(h2["other_external_bytes_sent"].get<double>(),
            0.05 * h2["external_bytes_sent"].get<double>() + 262144)
      << h2.dump();
  // What leaves host 2 arrives at host 1 and the other way round (one bridge between them).
  EXPECT_NEAR(h2["external_bytes_sent"].get<double>(), h1["external_bytes_received"].get<double>(),
              0.02 * h2["external_bytes_sent"].get<double>() + 65536);
  // The per-interface figures come out per host: host 2's interfaces are lo and eth0 only.
  std::vector<std::string> names;
  for (const auto& i : h2["interfaces"]) names.push_back(i["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"lo", "eth0"}));

  // Bytes at three layers (chief/layers.h): on each path of each host the interfaces' payload
  // (their bytes less one TCP/IP/Ethernet header per packet) is what the run's TCP connections
  // counted, within 2%, and TCP carries the runtime's payload plus the protocol's framing.
  for (const nlohmann::json& h : {h1, h2}) {
    for (const char* path : {"loopback", "external"}) {
      for (const char* dir : {"sent", "received"}) {
        const nlohmann::json& l = h["layers"][path][dir];
        std::printf("%s %s %s: %s\n", h["host"].get<std::string>().c_str(), path, dir,
                    l.dump().c_str());
        if (l["tcp_bytes"].get<double>() == 0) continue;
        EXPECT_LE(std::abs(l["interface_vs_tcp"].get<double>()), 0.02) << l.dump();
        EXPECT_GE(l["protocol_overhead"].get<double>(), 0.0) << l.dump();
      }
    }
  }
  EXPECT_GT(h2["layers"]["external"]["sent"]["tcp_bytes"].get<double>(), 0.0);
  // What host 2 sent over TCP host 1 received (each connection's two ends, one on each host).
  EXPECT_EQ(h2["layers"]["external"]["sent"]["tcp_bytes"],
            h1["layers"]["external"]["received"]["tcp_bytes"]);
  // Retransmits are counted (how many depends on the run: a tail-loss probe counts too).
  EXPECT_TRUE(r["cluster"]["layers"]["external"]["retransmits"].is_number()) << r["cluster"].dump();

  // The what-if of a profiled cluster run: the changes it can predict without a link rate.
  const nlohmann::json& w = r["whatif"];
  ASSERT_TRUE(w.contains("scenarios")) << w.dump(2);
  std::vector<std::string> predicted, skipped;
  for (const auto& sc : w["scenarios"]) {
    predicted.push_back(sc["name"]);
    EXPECT_GT(sc["examples_per_sec"].get<double>(), 0.0) << sc.dump();
  }
  for (const auto& sc : w["skipped"]) skipped.push_back(sc["name"]);
  EXPECT_EQ(predicted, (std::vector<std::string>{"one_more_ps", "wire_bf16", "workers_2x"}))
      << w.dump(2);
  // No link rate given; one ps: every placement is the same.
  EXPECT_EQ(skipped, (std::vector<std::string>{"link_2x", "link_half", "placement_greedy",
                                               "placement_partition"}))
      << w.dump(2);
}

// scripts/launch_ssh.sh as on real nodes, with its --exec hook running each task in its
// emulated host instead of over ssh: every task exits 0 and the report covers both hosts.
TEST_F(NetnsClusterTest, LaunchSshWithExecHookRunsEveryTaskOnItsHost) {
  const fs::path dir = FreshDir("netns_launch_ssh");
  const auto spec = Shell(absl::StrCat(kScripts, "/make_spec.py --layout ps-w-w --workers 2",
                                       " --hosts 2 --prefix ", prefix_, " --out ", dir.string()));
  ASSERT_EQ(spec.exit_code, 0) << spec.output;
  const fs::path run_dir = dir / "run";
  const auto run = Shell(absl::StrCat(
      kScripts, "/launch_ssh.sh --exec 'ip netns exec {host}' --remote_dir ", FULCRUM_SOURCE_DIR,
      " --bin_dir ", FULCRUM_BIN_DIR, " --hosts ", (dir / "hosts.json").string(), " --run_dir ",
      run_dir.string(), " ", (dir / "spec.json").string(),
      " --model=logreg --batch_size=128 --train_steps=200 --mode=async --eval_every=0",
      " --threads=1 --startup_timeout=60"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json r = nlohmann::json::parse(ReadFile(run_dir / "report.json"));
  ASSERT_EQ(r["hosts"].size(), 2u) << r["hosts"].dump();
  EXPECT_EQ(r["hosts"][1]["tasks"], nlohmann::json({"worker-0", "worker-1"}));
  for (const char* task : {"chief-0", "ps-0", "worker-0", "worker-1"}) {
    EXPECT_TRUE(fs::exists(run_dir / "launch" / (std::string(task) + ".log"))) << task;
    EXPECT_TRUE(fs::exists(run_dir / task / "summary.json")) << task;
  }
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// scripts/launch_ssh.sh's ssh path, with tests/testing/fake_ssh.sh standing in for ssh (it
// runs the remote command here): the spec is copied, every task runs with the quoted
// command line, and the task folders are gathered back into the run directory.
TEST(LaunchSshTest, SshPathStartsEveryTaskAndGathersTheRunDirectory) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  }
  const fs::path dir = FreshDir("launch_ssh_fake");
  const std::string spec = ::fulcrum::testing::WriteLocalSpec(dir / "spec.json", 1, 2);
  const fs::path run_dir = dir / "run dir";  // a space: the remote command must be quoted
  const auto run = Shell(
      absl::StrCat(FULCRUM_SOURCE_DIR, "/scripts/launch_ssh.sh --ssh ", FULCRUM_SOURCE_DIR,
                   "/tests/testing/fake_ssh.sh --remote_dir ", FULCRUM_SOURCE_DIR, " --bin_dir ",
                   FULCRUM_BIN_DIR, " --run_dir '", run_dir.string(), "' ", spec,
                   " --model=logreg --batch_size=128 --train_steps=100 --mode=async --eval_every=0",
                   " --threads=1 --startup_timeout=60"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json r = nlohmann::json::parse(ReadFile(run_dir / "report.json"));
  EXPECT_EQ(r["tasks"].size(), 4u);
  EXPECT_TRUE(fs::exists(run_dir / "report.html"));
  for (const char* task : {"chief-0", "ps-0", "worker-0", "worker-1"}) {
    EXPECT_TRUE(fs::exists(run_dir / task / "summary.json")) << task;
    EXPECT_TRUE(fs::exists(run_dir / "launch" / (std::string(task) + ".log"))) << task;
  }
  EXPECT_FALSE(fs::exists(run_dir / "launch" / "gather-worker-0"));  // staging removed
}

// Bad input to the host and layout tools is refused by name with exit code 2, before
// anything is made.
TEST(NetnsToolsTest, BadInputIsRefusedWithExitCode2) {
  const std::string scripts = FULCRUM_SOURCE_DIR "/scripts";
  const fs::path dir = FreshDir("netns_bad_input");
  struct Case {
    std::string command;
    std::string says;
  };
  const Case cases[] = {
      {"/make_spec.py --layout ring --workers 2 --out " + dir.string(), "--layout=ring"},
      {"/make_spec.py --layout ps-w-w --workers 2 --hosts 1 --out " + dir.string(),
       "needs at least 2 hosts"},
      {"/make_spec.py --layout pw-pw --workers 1 --ps 1 --hosts 2 --out " + dir.string(),
       "a ps and a worker on every host"},
      {"/make_spec.py --layout ps-w-w --workers 3 --hosts per_task --nodes a,b --out " +
           dir.string(),
       "2 node(s) for a layout of 4 host(s) (ps-w-w, 1 ps + 3 workers): the node list is too "
       "short"},
      {"/make_spec.py --layout ps-w-w --workers 2 --hosts some --out " + dir.string(),
       "--hosts=some: expected a number or per_task"},
      {"/make_spec.py --layout ps-w-w --workers 2 --ps 1 --ps_hosts 2 --hosts 4 --out " +
           dir.string(),
       "more ps hosts than ps tasks"},
      {"/netns_hosts.sh up 0", "the number of hosts"},
      {"/netns_hosts.sh up 2 --rate fast", "--rate must be"},
      {"/netns_hosts.sh up 2 --prefix Bad-Name", "--prefix must be"},
      {"/netns_hosts.sh sideways", "unknown command"},
      {"/netns_hosts.sh up 2 --cpus 9999", "more than this machine's"},
      {"/netns_hosts.sh up 2 --cpus many", "--cpus must be a positive number"},
      {"/netns_hosts.sh up 2 --cpus 1 --scale 0.5", "--scale must be a number >= 1"},
      {"/netns_hosts.sh up 2 --cpus 0.01 --scale 4", "less than 1 ms per --cpu_period_us"},
      {"/netns_hosts.sh up 2 --cpus 1 --cpu_period_us 50", "--cpu_period_us must be"},
      {"/netns_hosts.sh exec nohost -- true", "the host must be <prefix>-h<i>"},
      {"/netns_hosts.sh exec zq-h1 true", "usage: exec HOST -- COMMAND"},
      {"/local_cluster.sh --hosts " + (dir / "missing.json").string() + " " +
           (dir / "missing.json").string(),
       "not found"},
  };
  for (const Case& c : cases) {
    const auto r = Shell(scripts + c.command);
    EXPECT_EQ(r.exit_code, 2) << c.command << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.command << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "spec.json"));
}

// The CPU seconds bash's `times` gives for the children of `line` run under `bash -c`.
double ChildCpuSeconds(const std::string& output) {
  // `times` prints two lines "XmY.YYYs XmY.YYYs": the shell's, then its children's.
  double total = 0;
  int line = 0;
  size_t pos = 0;
  while (pos < output.size()) {
    const size_t end = output.find('\n', pos);
    const std::string text = output.substr(pos, end == std::string::npos ? end : end - pos);
    pos = end == std::string::npos ? output.size() : end + 1;
    int m1 = 0, m2 = 0;
    double s1 = 0, s2 = 0;
    if (std::sscanf(text.c_str(), "%dm%lfs %dm%lfs", &m1, &s1, &m2, &s2) == 4 && ++line == 2) {
      total = m1 * 60 + s1 + m2 * 60 + s2;
    }
  }
  return total;
}

// Scaled emulation: `up --cpus C --scale F` gives each host a CPU share of C / F in a cgroup
// of the cpu controller, and `exec` runs a command inside it, so a busy loop in a host gets
// no more than its share; `down` kills what still runs there and leaves no cgroup behind.
TEST(NetnsCpuShareTest, AHostsTasksGetItsShareAndDownLeavesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "emulated hosts need root (network namespaces, cgroups)";
  const std::string scripts = FULCRUM_SOURCE_DIR "/scripts";
  const std::string prefix = absl::StrCat("c", ::getpid() % 100000);
  const auto up = Shell(absl::StrCat(scripts, "/netns_hosts.sh up 2 --cpus 1 --scale 4",
                                     " --rate 1gbit --prefix ", prefix));
  if (up.exit_code != 0) GTEST_SKIP() << "cannot make hosts with CPU shares here:\n" << up.output;
  const std::string host = prefix + "-h1";
  const auto status = Shell(absl::StrCat(scripts, "/netns_hosts.sh status --prefix ", prefix));
  EXPECT_NE(status.output.find(host + " 198.18.0.1/24"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("cpu 0.25"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("rate 250Mbit"), std::string::npos) << status.output;

  // A busy loop of 1.5 s inside the host, capped at 25 ms per 100 ms period: at most ~0.4 s
  // of CPU; outside any host the same loop takes what a core gives it.
  const std::string busy = "bash -c 'timeout 1.5 sh -c \"while :; do :; done\"; times'";
  const auto inside = Shell(absl::StrCat(scripts, "/netns_hosts.sh exec ", host, " -- ", busy));
  const double capped = ChildCpuSeconds(inside.output);
  EXPECT_GT(capped, 0.05) << inside.output;
  EXPECT_LT(capped, 0.5) << inside.output;
  // It ran in the host's network namespace, too.
  const auto addr = Shell(
      absl::StrCat(scripts, "/netns_hosts.sh exec ", host, " -- ip -4 -o addr show dev eth0"));
  EXPECT_NE(addr.output.find("198.18.0.1/24"), std::string::npos) << addr.output;

  // A task left running in a host is killed by `down`, with its cgroup. Its command line is
  // this test's own (a sleep of 300.<pid> s), so no other process on the machine is counted.
  const std::string sleeper = absl::StrCat("sleep 300.", ::getpid() % 100000);
  const auto left = Shell(absl::StrCat(scripts, "/netns_hosts.sh exec ", host, " -- ", sleeper,
                                       " > /dev/null 2>&1 & echo started"));
  ASSERT_EQ(left.exit_code, 0) << left.output;
  const auto down = Shell(absl::StrCat(scripts, "/netns_hosts.sh down --prefix ", prefix));
  EXPECT_EQ(down.exit_code, 0) << down.output;
  EXPECT_EQ(Shell(absl::StrCat("ip netns list | grep -c '^", prefix, "-h'")).output, "0\n");
  EXPECT_EQ(Shell(absl::StrCat("ls -d /sys/fs/cgroup/cpu/fulcrum-", prefix, "-* ",
                               "/sys/fs/cgroup/fulcrum-", prefix, "-* ",
                               "/sys/fs/cgroup/unified/fulcrum-", prefix, "-* 2>/dev/null | wc -l"))
                .output,
            "0\n");
  EXPECT_EQ(Shell(absl::StrCat("pgrep -fx '", sleeper, "' | wc -l")).output, "0\n");
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// A small sweep as CI can afford: 2 layouts x 2 worker counts on 1 Gbit/s links, few steps.
// The CSV has a row per combination (pw-w with one worker is skipped, by name), and the
// bytes land where the layout puts them: PS-W-W sends every worker's traffic across hosts,
// PW-W keeps worker 0's on the ps host's lo. A repeat resumes instead of running again.
TEST(SweepTest, SmallSweepWritesTheCsvAndSplitsBytesByLayout) {
  if (const std::string why = WhyNoEmulatedCluster(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = FreshDir("sweep_small");
  const std::string cmd =
      absl::StrCat(Sweep(), " --layouts=ps-w-w,pw-w --workers=1,2 --rates=1gbit --steps=150",
                   " --extra=--learning_rate=0.03 --prefix=swa --out=", dir.string());
  const auto first = Shell(cmd, 600);
  if (first.output.find("cannot make") != std::string::npos) {
    GTEST_SKIP() << "cannot make emulated hosts here:\n" << first.output;
  }
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string csv = ReadFile(dir / "results.csv");
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = csv.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(csv.substr(start, end - start));
  }
  ASSERT_EQ(lines.size(), 5u) << csv;  // header + 4 combinations
  EXPECT_EQ(lines[0].rfind("layout,workers,ps,hosts,batch_size,mode,rate,model,", 0), 0u);
  auto field = [](const std::string& line, int i) {
    size_t start = 0;
    for (int k = 0; k < i; ++k) start = line.find(',', start) + 1;
    return line.substr(start, line.find(',', start) - start);
  };
  auto column = [&](const std::string& name) {  // the header's index of `name`, or -1
    for (int i = 0; i < 64; ++i) {
      if (field(lines[0], i) == name) return i;
    }
    return -1;
  };
  const int status = column("status"), lo = column("loopback_bytes_sent"),
            ext = column("external_bytes_sent");
  ASSERT_GE(status, 0) << lines[0];
  ASSERT_GE(lo, 0) << lines[0];
  ASSERT_GE(ext, 0) << lines[0];
  ASSERT_GE(column("app_bytes_sent"), 0) << lines[0];
  EXPECT_EQ(field(lines[3], status), "pw-w needs 2 or more workers") << lines[3];
  for (int row : {1, 2, 4}) {
    EXPECT_EQ(field(lines[row], status), "ok") << lines[row];
  }
  const double psww_ext = std::stod(field(lines[2], ext));  // ps-w-w, 2 workers
  const double psww_lo = std::stod(field(lines[2], lo));
  const double pww_ext = std::stod(field(lines[4], ext));  // pw-w, 2 workers
  const double pww_lo = std::stod(field(lines[4], lo));
  // PS-W-W: both workers cross; PW-W: only worker 1 crosses, worker 0 stays on lo.
  EXPECT_GT(psww_ext, 1.6 * pww_ext) << csv;
  EXPECT_GT(pww_lo, 2.0 * psww_lo) << csv;
  EXPECT_TRUE(fs::exists(dir / "index.html"));
  EXPECT_NE(ReadFile(dir / "index.html").find("<svg"), std::string::npos);

  const auto again = Shell(cmd, 600);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("from an earlier sweep"), std::string::npos) << again.output;
  // Each run records its sources; the reused runs are this sweep's own, so no warning.
  EXPECT_TRUE(fs::exists(dir / "runs" / "ps-w-w_w1_ps1_h2_b128_sync_1gbit_logreg_x1_full_e0_sgd_s1_r1" /
                         "sweep_run.json"));
  EXPECT_NE(ReadFile(dir / "runs.csv").find(",commit,binaries,settings_hash,"), std::string::npos);
  EXPECT_EQ(again.output.find("source(s) other than"), std::string::npos) << again.output;
  // Other settings into the same folder are run again, not reused.
  const auto other = Shell(absl::StrCat(cmd, " --layouts=ps-w-w --workers=1 --steps=60"), 600);
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("ran with other settings"), std::string::npos) << other.output;
  EXPECT_EQ(other.output.find("from an earlier sweep"), std::string::npos) << other.output;
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// A run that fails (here: every task refuses a bad flag) is recorded as failed and the sweep
// still finishes, writing its CSVs, then exits 1 so that an unattended caller sees it; the
// same command again runs the failed run again (its report is no finished run to reuse).
TEST(SweepTest, FailedRunIsRecordedAndTheSweepGoesOn) {
  if (::geteuid() != 0) GTEST_SKIP() << "emulated hosts need root (network namespaces)";
  const fs::path dir = FreshDir("sweep_failed");
  const std::string command =
      absl::StrCat(Sweep(), " --layouts=ps-w-w --workers=1 --rates=none --steps=10",
                   " --extra=--learning_rate=-1 --timeout=60 --prefix=swb --out=", dir.string());
  const auto r = ::fulcrum::testing::RunShell(command, 300);
  if (r.output.find("cannot make") != std::string::npos) {
    GTEST_SKIP() << "cannot make emulated hosts here:\n" << r.output;
  }
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("1 failed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 run(s) failed"), std::string::npos) << r.output;
  const auto again = ::fulcrum::testing::RunShell(command, 300);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("_r1: failed in"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("from an earlier sweep"), std::string::npos) << again.output;
  const std::string runs = ReadFile(dir / "runs.csv");
  EXPECT_NE(runs.find(",failed,2,"), std::string::npos) << runs;  // status, exit code
  EXPECT_NE(ReadFile(dir / "results.csv").find(",failed,0,1,"), std::string::npos);
  EXPECT_NE(ReadFile(dir / "runs" / "ps-w-w_w1_ps1_h2_b128_sync_none_logreg_x1_full_e0_sgd_s1_r1" /
                     "cluster.log")
                .find("learning_rate"),
            std::string::npos);
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// The rows of a CSV file, each split at its commas (the sweep writes no quoted fields here).
std::vector<std::vector<std::string>> CsvRows(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  const std::string text = ReadFile(path);
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos;
       start = end + 1) {
    std::vector<std::string> row;
    const std::string line = text.substr(start, end - start);
    for (size_t a = 0, b;; a = b + 1) {
      b = line.find(',', a);
      row.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
      if (b == std::string::npos) break;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// The value of column `name` in `row`, by the header; "" when the header lacks it.
std::string Cell(const std::vector<std::string>& header, const std::vector<std::string>& row,
                 const std::string& name) {
  for (size_t i = 0; i < header.size() && i < row.size(); ++i) {
    if (header[i] == name) return row[i];
  }
  return "";
}

// True when nothing of the emulated hosts with `prefix` is left: no namespace, no CPU cgroup.
bool HostsGone(const std::string& prefix) {
  const auto netns = ::fulcrum::testing::RunShell("ip netns list", 30);
  if (netns.output.find(prefix + "-h") != std::string::npos) return false;
  for (const char* root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup"}) {
    if (fs::exists(fs::path(root) / ("fulcrum-" + prefix + "-h1"))) return false;
  }
  return true;
}

// A run measured beside other work (two CPU-bound loops, real processes, on the machine the
// emulated hosts share) keeps its figures but is named: runs.csv's other_cpus and results.csv's
// other_cpus_max say how many CPUs the other work took, and the sweep warns. Without
// --rerun_busy the same command reuses it; with it, the run is run again.
TEST(SweepTest, ARunBesideOtherWorkIsNamedAndRerunOnRequest) {
  if (const std::string why = WhyNoEmulatedCluster(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = FreshDir("sweep_busy");
  const std::string sweep =
      absl::StrCat(Sweep(), " --layouts=ps-w-w --workers=1 --rates=none --steps=400",
                   " --extra=--learning_rate=0.03 --prefix=swo --out=", dir.string());
  const auto busy =
      Shell(absl::StrCat("sh -c 'p=; for i in 1 2; do timeout 300 sh -c \"while :; do :; done\" & ",
                         "p=\"$p $!\"; done; ", sweep, "; code=$?; kill $p; exit $code'"),
            600);
  if (busy.output.find("cannot make") != std::string::npos) {
    GTEST_SKIP() << "cannot make emulated hosts here:\n" << busy.output;
  }
  ASSERT_EQ(busy.exit_code, 0) << busy.output;  // its figures are kept, and named
  EXPECT_NE(busy.output.find("ran beside more than 0.5 CPUs of other work"), std::string::npos)
      << busy.output;
  const auto runs = CsvRows(dir / "runs.csv");
  ASSERT_EQ(runs.size(), 2u);
  const std::string other = Cell(runs[0], runs[1], "other_cpus");
  ASSERT_FALSE(other.empty()) << ReadFile(dir / "runs.csv");
  EXPECT_GT(std::stod(other), 0.5) << ReadFile(dir / "runs.csv");
  const auto results = CsvRows(dir / "results.csv");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(Cell(results[0], results[1], "other_cpus_max"), other);
  EXPECT_EQ(Cell(results[0], results[1], "status"), "ok");

  const auto reused = Shell(sweep, 600);
  ASSERT_EQ(reused.exit_code, 0) << reused.output;
  EXPECT_NE(reused.output.find("from an earlier sweep"), std::string::npos) << reused.output;
  EXPECT_NE(reused.output.find("ran beside more than"), std::string::npos) << reused.output;
  const auto rerun = Shell(sweep + " --rerun_busy", 600);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("CPUs of other work (more than --max_other_cpus=0.5): running it "
                              "again"),
            std::string::npos)
      << rerun.output;
  EXPECT_EQ(rerun.output.find("from an earlier sweep"), std::string::npos) << rerun.output;
}

// Issue 15: a host per task (2 ps on hosts of their own), scaled CPU shares and the
// single-process baseline row, in one small sweep.
TEST(SweepTest, PerTaskHostsScaledSharesAndTheSingleBaseline) {
  if (const std::string why = WhyNoEmulatedCluster(); !why.empty()) GTEST_SKIP() << why;
  const fs::path dir = FreshDir("sweep_per_task");
  const auto r = ::fulcrum::testing::RunShell(
      absl::StrCat(Sweep(), " --layouts=ps-w-w --workers=2 --ps=2 --hosts=per_task",
                   " --single_baseline --cpus=0.4 --scales=2 --rates=1gbit --steps=40",
                   " --timeout=240 --prefix=swc --out=", dir.string()),
      900);
  if (r.output.find("cannot make") != std::string::npos) {
    GTEST_SKIP() << "cannot make emulated hosts here:\n" << r.output;
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = CsvRows(dir / "results.csv");
  ASSERT_EQ(rows.size(), 3u) << ReadFile(dir / "results.csv");  // header, cluster, baseline
  const auto& h = rows[0];
  EXPECT_EQ(Cell(h, rows[1], "layout"), "ps-w-w");
  EXPECT_EQ(Cell(h, rows[1], "hosts"), "4");  // 2 ps + 2 workers, a host each
  EXPECT_EQ(Cell(h, rows[2], "layout"), "single-process");
  EXPECT_EQ(Cell(h, rows[2], "ps"), "0");
  for (const auto* row : {&rows[1], &rows[2]}) {
    EXPECT_EQ(Cell(h, *row, "status"), "ok") << absl::StrJoin(*row, ",");
    EXPECT_EQ(Cell(h, *row, "cpus"), "0.4");
    EXPECT_EQ(Cell(h, *row, "scale"), "2.0");
    EXPECT_GT(std::stod(Cell(h, *row, "examples_per_sec")), 0.0);
  }
  // The cluster's spec: ps 0 (with the chief) on host 1, ps 1 on host 2, the workers on 3, 4.
  const auto spec = nlohmann::json::parse(ReadFile(
      dir / "runs" / "ps-w-w_w2_ps2_h4_b128_sync_1gbit_logreg_x1_full_e0_sgd_s2_r1" / "spec.json"));
  EXPECT_EQ(spec["ps"][0].get<std::string>().rfind("198.18.0.1:", 0), 0u) << spec.dump();
  EXPECT_EQ(spec["ps"][1].get<std::string>().rfind("198.18.0.2:", 0), 0u) << spec.dump();
  EXPECT_EQ(spec["worker"][0].get<std::string>().rfind("198.18.0.3:", 0), 0u) << spec.dump();
  EXPECT_EQ(spec["worker"][1].get<std::string>().rfind("198.18.0.4:", 0), 0u) << spec.dump();
  EXPECT_TRUE(HostsGone("swc"));
}

// Bad input to the sweep: exit 2 naming the problem, before any host is made; nothing left.
TEST(SweepTest, BadInputExitsTwoAndLeavesNothing) {
  const fs::path dir = FreshDir("sweep_bad_input");
  const std::string sweep = absl::StrCat(Sweep(), " --prefix=swd --out=", dir.string());
  struct Case {
    std::string args;
    std::string says;
  };
  const Case cases[] = {
      {" --layouts=ps-w-w --workers=4 --hosts=per_task --cpus=0.9 --rates=1gbit",
       "--cpus 0.9 x 5 hosts / --scale 1 = 4.50 CPUs, more than this machine's"},
      {" --cpus=0.2 --scales=0.5", "a scale F is 1 or more"},
      {" --scales=4", "--scales needs --cpus"},
      {" --layouts=ps-w-w --workers=2 --hosts=per_task --nodes=a,b",
       "needs 3 nodes, --nodes lists 2"},
      {" --nodes=a,b,c --rates=1gbit", "no emulated links or CPU shares"},
      {" --datasets=half", "'half' is not full, subsetN or repeatN"},
      {" --optimizers=lbfgs", "unknown lbfgs"},
      {" --hosts=spread", "--hosts=spread: expected packed or per_task"},
  };
  for (const Case& c : cases) {
    const auto r = ::fulcrum::testing::RunShell(sweep + c.args, 120);
    if (::geteuid() != 0 && r.output.find("need root") != std::string::npos) continue;
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "runs"));
  EXPECT_TRUE(HostsGone("swd"));
}

// Real nodes through scripts/launch_ssh.sh: here every "node" is this machine (the spec names
// 127.0.0.1, --launch_exec=env runs each task locally instead of over ssh).
TEST(SweepTest, RealNodesThroughLaunchSsh) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  }
  const fs::path dir = FreshDir("sweep_nodes");
  const int base_port = ::fulcrum::testing::FreePort();
  const auto r = ::fulcrum::testing::RunShell(
      absl::StrCat(Sweep(), " --layouts=ps-w-w --workers=2 --hosts=per_task",
                   " --nodes=127.0.0.1,127.0.0.1,127.0.0.1 --launch_exec=env --steps=30",
                   " --timeout=120 --base_port=", base_port, " --out=", dir.string()),
      600);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = CsvRows(dir / "results.csv");
  ASSERT_EQ(rows.size(), 2u) << ReadFile(dir / "results.csv");
  EXPECT_EQ(Cell(rows[0], rows[1], "status"), "ok") << absl::StrJoin(rows[1], ",");
  EXPECT_EQ(Cell(rows[0], rows[1], "hosts"), "3");
  const auto spec = nlohmann::json::parse(ReadFile(
      dir / "runs" / "ps-w-w_w2_ps1_h3_b128_sync_none_logreg_x1_full_e0_sgd_s1_r1" / "spec.json"));
  EXPECT_EQ(spec["worker"][1].get<std::string>(), absl::StrCat("127.0.0.1:", base_port + 3));
}

}  // namespace
}  // namespace fulcrum
