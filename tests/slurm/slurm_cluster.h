// tests/slurm: a one-machine Slurm cluster of Debian's packages (munged, slurmctld, slurmd)
// for the tests of scripts/slurm/: SlurmClusterTest starts it in its own temporary folder (its
// own slurm.conf, munge key and socket, state, spool, logs and ports, so it collides with no
// system Slurm or munge), submits scripts/slurm/fulcrum.sbatch with sbatch, and at the end stops
// every daemon it started, checks that no process is left using the folder, and removes it.
// Skips, naming why, without root, without the packages, or without the dataset.
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

extern char** environ;

namespace fulcrum::slurm_testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using ::fulcrum::testing::ForEachProcess;
using ::fulcrum::testing::FreePort;
using ::fulcrum::testing::HaveData;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::RunResult;
using ::fulcrum::testing::RunShell;

// The full path of program `name` (PATH, then the sbin folders), or "".
inline std::string FindProgram(const std::string& name) {
  std::string path = ::getenv("PATH") != nullptr ? ::getenv("PATH") : "";
  for (const auto& dir : absl::StrSplit(absl::StrCat(path, ":/usr/sbin:/sbin"), ':')) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(std::string(dir)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// Whether a TCP socket can listen on `port` of every address now.
inline bool PortFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// A port P with P .. P + n - 1 free (the tasks of one node listen on base + local rank).
inline int FreePortRange(int n) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int base = FreePort();
    bool all = base > 0;
    for (int i = 1; i < n && all; ++i) all = PortFree(base + i);
    if (all) return base;
  }
  ADD_FAILURE() << "no " << n << " consecutive free ports";
  return 0;
}

// This machine's short host name when it resolves to an address a task can listen on (as a
// real node's name does), else "localhost": the Slurm node's name, which the launcher puts in
// the ClusterSpec.
inline std::string NodeName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  std::string name(buf);
  name = name.substr(0, name.find('.'));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (name.empty() || ::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0) return "localhost";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const bool bindable = fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0;
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return bindable ? name : "localhost";
}

inline std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct JobResult {
  std::string id;
  std::string state;      // JobState, e.g. COMPLETED or FAILED
  std::string exit_code;  // ExitCode, "code:signal"
  std::string output;     // the job's output file
};

class SlurmClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: the test's slurmd runs the jobs' tasks as root (SlurmUser=root)";
    }
    for (const char* program : {"munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun",
                                "sinfo", "squeue", "scontrol", "scancel"}) {
      if (FindProgram(program).empty()) {
        GTEST_SKIP() << program << " is not installed (Debian packages munge, slurmctld, slurmd, "
                     << "slurm-client; scripts/setup.sh installs them)";
      }
    }
    if (!HaveData()) GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";

    // A Slurm job around the test (CI inside an allocation) must not leak into these jobs.
    std::vector<std::string> inherited;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var(*e);
      for (const char* prefix : {"SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SINFO_"}) {
        if (absl::StartsWith(var, prefix)) inherited.push_back(var.substr(0, var.find('=')));
      }
    }
    for (const auto& var : inherited) ::unsetenv(var.c_str());

    // munged wants the folders on its socket's path executable by everyone.
    std::string templ = (fs::path(::testing::TempDir()) / "fulcrum_slurm_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr) << templ;
    dir_ = templ;
    ::chmod(dir_.c_str(), 0755);
    StartGuard();
    for (const char* sub : {"munge", "state", "spool", "log"}) fs::create_directories(dir_ / sub);
    node_ = NodeName();
    // One node named after this machine, or num_nodes_ nodes n1, n2, ... that are all this
    // machine (one slurmd each, on its own port).
    std::string node_lines;
    if (num_nodes_ == 1) {
      nodes_ = {node_};
      node_lines = absl::StrCat("NodeName=", node_, " CPUs=8 State=UNKNOWN\n");
    } else {
      char host[256] = {};
      ::gethostname(host, sizeof(host) - 1);
      const std::string short_host = std::string(host).substr(0, std::string(host).find('.'));
      for (int i = 1; i <= num_nodes_; ++i) {
        nodes_.push_back(absl::StrCat("n", i));
        absl::StrAppend(&node_lines, "NodeName=n", i, " NodeHostname=", short_host,
                        " NodeAddr=127.0.0.1 Port=", FreePort(), " CPUs=4 State=UNKNOWN\n");
      }
    }
    const fs::path conf = dir_ / "slurm.conf";
    ::setenv("SLURM_CONF", conf.c_str(), 1);

    // munge: its own key, socket, pid, seed and log files.
    const std::string socket = (dir_ / "munge" / "munge.sock").string();
    RunResult key = RunShell(
        absl::StrCat("mungekey --create --keyfile=", Quote((dir_ / "munge.key").string())), 30);
    ASSERT_EQ(key.exit_code, 0) << key.output;
    munged_ = Start({"munged", "-F", absl::StrCat("--key-file=", (dir_ / "munge.key").string()),
                     absl::StrCat("--socket=", socket),
                     absl::StrCat("--pid-file=", (dir_ / "munge" / "munged.pid").string()),
                     absl::StrCat("--seed-file=", (dir_ / "munge" / "munged.seed").string()),
                     absl::StrCat("--log-file=", (dir_ / "log" / "munged.log").string())},
                    dir_ / "log" / "munged.out");
    const auto munge_deadline = Clock::now() + std::chrono::seconds(20);
    while (!fs::exists(socket)) {
      ASSERT_LT(Clock::now(), munge_deadline) << "munged did not start:\n" << Logs();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }

    // Slurm: more CPUs than this machine has (config_overrides), no cgroups.
    const auto path = [&](const char* p) { return (dir_ / p).string(); };
    std::ofstream(conf) << absl::StrCat(
        "ClusterName=fulcrumtest\n", "SlurmctldHost=", node_, "\n", "SlurmctldPort=", FreePort(),
        "\n", "SlurmdPort=", FreePort(), "\n", "SlurmUser=root\nSlurmdUser=root\n",
        "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=", socket, "\n",
        "StateSaveLocation=", path("state"), "\n", "SlurmdSpoolDir=", path("spool-%n"), "\n",
        "SlurmctldPidFile=", path("slurmctld.pid"), "\n", "SlurmdPidFile=", path("slurmd-%n.pid"),
        "\n", "SlurmctldLogFile=", path("log/slurmctld.log"), "\n",
        "SlurmdLogFile=", path("log/slurmd-%n.log"), "\n",
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n",
        "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n",
        "JobCompType=jobcomp/none\nMpiDefault=none\nSwitchType=switch/none\n",
        "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n",
        "SlurmdParameters=config_overrides\nReturnToService=2\nSchedulerType=sched/builtin\n",
        // Batch jobs start at once (the default waits up to 3 s for more submissions).
        "SchedulerParameters=batch_sched_delay=0\n", "KillWait=5\n", node_lines,
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
    slurmctld_ = Start({"slurmctld", "-D", "-f", conf.string()}, dir_ / "log" / "slurmctld.out");
    for (const auto& node : nodes_) {
      slurmds_.push_back(Start({"slurmd", "-D", "-N", node, "-f", conf.string()},
                               dir_ / "log" / absl::StrCat("slurmd-", node, ".out")));
    }

    // Until every node is idle (its slurmd registered with slurmctld).
    const auto deadline = Clock::now() + std::chrono::seconds(45);
    while (true) {
      const RunResult sinfo = RunShell("sinfo -h -o '%T %D'", 10);
      if (sinfo.exit_code == 0 &&
          absl::StripAsciiWhitespace(sinfo.output) == absl::StrCat("idle ", num_nodes_)) {
        break;
      }
      ASSERT_LT(Clock::now(), deadline) << "the nodes are not idle: " << sinfo.output << Logs();
      bool alive = Alive(slurmctld_);
      for (pid_t pid : slurmds_) alive = alive && Alive(pid);
      ASSERT_TRUE(alive) << "a Slurm daemon died:\n" << Logs();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void TearDown() override {
    if (dir_.empty()) return;
    // Every job first (their tasks run under slurmstepd, not under the daemons).
    if (Alive(slurmctld_)) {
      RunShell("scancel --quiet --partition=debug", 10);
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (Clock::now() < deadline) {
        const RunResult q = RunShell("squeue -h -o %i", 10);
        if (q.exit_code == 0 && absl::StripAsciiWhitespace(q.output).empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    for (pid_t& pid : slurmds_) Stop(pid, "slurmd");
    Stop(slurmctld_, "slurmctld");
    Stop(munged_, "munged");
    // Nothing may be left using the folder: no daemon, slurmstepd or task.
    std::vector<std::string> left = ProcessesUsingDir();
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    while (!left.empty() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      left = ProcessesUsingDir();
    }
    EXPECT_TRUE(left.empty()) << "left running:\n" << absl::StrJoin(left, "\n") << Logs();
    for (const auto& entry : left) ::kill(std::stoi(entry), SIGKILL);
    std::error_code ec;
    fs::remove_all(dir_, ec);
    EXPECT_FALSE(fs::exists(dir_)) << ec.message();
    // Done: the guard may go.
    if (guard_fd_ >= 0) {
      (void)!::write(guard_fd_, "x", 1);
      ::close(guard_fd_);
      ::waitpid(guard_, nullptr, 0);
    }
  }

  // A child process that outlives this one if it dies without its TearDown (killed by a ctest
  // timeout): it then kills whatever still uses the folder (the daemons get SIGTERM on their
  // own, PR_SET_PDEATHSIG, but a job's slurmstepd and tasks would run on) and removes it.
  void StartGuard() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;  // the write end stays out of every exec'd child
    guard_ = ::fork();
    if (guard_ == 0) {
      ::close(fds[1]);
      ::setpgid(0, 0);
      char c = 0;
      ssize_t n;
      do {
        n = ::read(fds[0], &c, 1);
      } while (n < 0 && errno == EINTR);
      if (n == 1) ::_exit(0);  // TearDown cleaned up
      for (int round = 0; round < 50; ++round) {
        const std::vector<std::string> left = ProcessesUsingDir();
        if (left.empty()) break;
        for (const auto& entry : left) ::kill(std::stoi(entry), SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      std::error_code ec;
      fs::remove_all(dir_, ec);
      ::_exit(0);
    }
    ::close(fds[0]);
    if (guard_ > 0) {
      guard_fd_ = fds[1];
    } else {
      ::close(fds[1]);
    }
  }

  // Starts a daemon (found as FindProgram does) with its output in `log`.
  pid_t Start(std::vector<std::string> args, const fs::path& log) {
    args[0] = FindProgram(args[0]);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      // Out of the terminal's Ctrl-C, and stopped if the test dies without its TearDown (a
      // ctest timeout).
      ::setpgid(0, 0);
      if (::chdir(dir_.c_str()) != 0) ::_exit(127);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }

  static bool Alive(pid_t pid) { return pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0; }

  // SIGTERM, up to 15 s to exit, then SIGKILL (a test failure).
  void Stop(pid_t& pid, const char* name) {
    if (pid <= 0) return;
    ::kill(pid, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    while (::waitpid(pid, nullptr, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ADD_FAILURE() << name << " did not stop on SIGTERM within 15 s; killed";
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pid = -1;
  }

  // "pid command line" of every other process whose command line, working directory or open
  // files are in the folder.
  std::vector<std::string> ProcessesUsingDir() const {
    const std::string dir = dir_.string();
    std::vector<std::string> found;
    ForEachProcess([&](pid_t pid, const std::string& cmdline) {
      if (pid == ::getpid()) return;
      bool uses = cmdline.find(dir) != std::string::npos;
      const fs::path proc = fs::path("/proc") / std::to_string(pid);
      std::error_code ec;
      uses = uses || absl::StartsWith(fs::read_symlink(proc / "cwd", ec).string(), dir);
      for (const auto& fd : fs::directory_iterator(proc / "fd", ec)) {
        std::error_code ec2;
        uses = uses || absl::StartsWith(fs::read_symlink(fd.path(), ec2).string(), dir);
      }
      if (uses) found.push_back(absl::StrCat(pid, " ", cmdline));
    });
    return found;
  }

  std::string Logs() const {
    std::string out;
    std::vector<std::string> logs = {"munged.out", "munged.log", "slurmctld.out", "slurmctld.log"};
    for (const auto& node : nodes_) {
      logs.push_back(absl::StrCat("slurmd-", node, ".out"));
      logs.push_back(absl::StrCat("slurmd-", node, ".log"));
    }
    for (const auto& log : logs) {
      const std::string text = ReadFile(dir_ / "log" / log);
      if (text.empty()) continue;
      absl::StrAppend(&out, "\n--- ", log, " ---\n",
                      text.substr(text.size() > 6000 ? text.size() - 6000 : 0));
    }
    return out;
  }

  // Submits scripts/slurm/fulcrum.sbatch with `sbatch_args` before it and `args` after it;
  // the job's id ("" and a test failure when sbatch refuses).
  std::string SubmitOnly(const std::vector<std::string>& sbatch_args,
                         const std::vector<std::string>& args) {
    std::string line = absl::StrCat("sbatch --parsable --time=5 --chdir=", Quote(dir_.string()),
                                    " --output=", Quote((dir_ / "job-%j.out").string()));
    for (const auto& a : sbatch_args) absl::StrAppend(&line, " ", Quote(a));
    absl::StrAppend(&line, " ",
                    Quote(absl::StrCat(FULCRUM_SOURCE_DIR, "/scripts/slurm/fulcrum.sbatch")));
    for (const auto& a : args) absl::StrAppend(&line, " ", Quote(a));
    const RunResult submitted = RunShell(line, 30);
    if (submitted.exit_code != 0) {
      ADD_FAILURE() << line << "\n" << submitted.output << Logs();
      return "";
    }
    const std::string id(absl::StripAsciiWhitespace(submitted.output));
    return id.substr(0, id.find(';'));  // "id;cluster" on a federation
  }

  std::string JobOutput(const std::string& id) const {
    return ReadFile(dir_ / absl::StrCat("job-", id, ".out"));
  }

  // Waits (up to 2 minutes; then cancels it) until job `id` has ended.
  JobResult Wait(const std::string& id) {
    JobResult job;
    job.id = id;
    if (id.empty()) return job;
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    std::string shown;
    while (true) {
      shown = RunShell(absl::StrCat("scontrol show job -o ", job.id), 10).output;
      job.state = Field(shown, "JobState");
      if (!job.state.empty() && job.state != "PENDING" && job.state != "CONFIGURING" &&
          job.state != "RUNNING" && job.state != "COMPLETING") {
        break;
      }
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "job " << job.id << " still " << job.state
                      << " after 2 minutes; cancelled\n"
                      << shown << JobOutput(id) << Logs();
        RunShell(absl::StrCat("scancel ", job.id), 10);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    job.exit_code = Field(shown, "ExitCode");
    job.output = JobOutput(id);
    return job;
  }

  JobResult Submit(const std::vector<std::string>& sbatch_args,
                   const std::vector<std::string>& args) {
    return Wait(SubmitOnly(sbatch_args, args));
  }

  // The value of `key` in `scontrol show -o` output.
  static std::string Field(const std::string& shown, const std::string& key) {
    const size_t at = shown.find(absl::StrCat(" ", key, "="));
    if (at == std::string::npos) return "";
    const size_t start = at + key.size() + 2;
    return shown.substr(start, shown.find_first_of(" \n", start) - start);
  }

  fs::path dir_;
  int num_nodes_ = 1;               // set by a subclass's constructor
  std::string node_;                // this machine's name (the only node when num_nodes_ is 1)
  std::vector<std::string> nodes_;  // the Slurm nodes
  pid_t munged_ = -1, slurmctld_ = -1;
  std::vector<pid_t> slurmds_;
  pid_t guard_ = -1;
  int guard_fd_ = -1;
};

}  // namespace fulcrum::slurm_testing
