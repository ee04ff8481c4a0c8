#include "bench/ps_bench_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/net.h"

namespace fulcrum::bench {
namespace {

constexpr char kCpuCgroupRoot[] = "/sys/fs/cgroup/cpu";
constexpr int kQuotaPeriodUs = 10000;

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", text, "' to ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, int core,
                            const std::string& log) {
  pid_t pid = -1;
  int error = 0;
  std::thread spawner([&] {
    if (core >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(core, &set);
      if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        error = errno;
        return;
      }
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    error = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
  });
  spawner.join();
  if (error != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", argv[0],
                                            core >= 0 ? absl::StrCat(" on core ", core) : "", ": ",
                                            std::strerror(error)));
  }
  return pid;
}

absl::Status WritePsSpec(const std::string& path, const std::string& host,
                         const std::vector<int>& ports, int num_ps) {
  if (ports.size() < static_cast<size_t>(num_ps) + 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("a spec of ", num_ps, " ps needs at least ", num_ps + 2, " ports"));
  }
  std::vector<std::string> addresses;
  for (int port : ports) addresses.push_back(absl::StrCat("\"", JoinHostPort(host, port), "\""));
  const auto ps_end = addresses.begin() + num_ps;
  const std::string spec = absl::StrCat(
      "{\"ps\": [", absl::StrJoin(addresses.begin(), ps_end, ", "), "], \"chief\": [", *ps_end,
      "], \"worker\": [", absl::StrJoin(ps_end + 1, addresses.end(), ", "), "]}\n");
  return WriteText(path, spec);
}

absl::StatusOr<PsProcess> StartPs(const std::string& ps_binary, const std::string& spec_path,
                                  int index, int port, int core, const std::string& log,
                                  const std::vector<std::string>& flags) {
  PsProcess proc;
  proc.port = port;
  proc.core = core;
  proc.log = log;
  std::vector<std::string> argv = {ps_binary, "--cluster_spec=" + spec_path,
                                   absl::StrCat("--task_index=", index)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<pid_t> pid = Spawn(argv, core, log);
  if (!pid.ok()) return pid.status();
  proc.pid = *pid;
  return proc;
}

absl::Status AwaitPs(PsProcess& proc, runtime::GrpcPsClient& client, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!client.WaitUntilReady(absl::Milliseconds(500))) {
    int status = 0;
    const bool exited = waitpid(proc.pid, &status, WNOHANG) == proc.pid;
    if (exited || absl::Now() > deadline) {
      if (exited) proc.pid = -1;
      return absl::UnavailableError(absl::StrCat("ps on port ", proc.port, " ",
                                                 exited ? "exited" : "not ready", "; its log ",
                                                 proc.log, ":\n", ReadTextOrEmpty(proc.log)));
    }
  }
  proc.allowed_cpus = AllowedCpus(proc.pid);
  return absl::OkStatus();
}

void ReapOrKill(pid_t pid) {
  bool reaped = false;
  for (int i = 0; i < 100 && !reaped; ++i) {
    int status = 0;
    reaped = waitpid(pid, &status, WNOHANG) == pid;
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!reaped) {
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
  }
}

absl::Status LimitCpu(pid_t pid, const std::string& name, double fraction, std::string* path) {
  const std::string dir = absl::StrCat(kCpuCgroupRoot, "/", name);
  std::error_code ec;
  if (!std::filesystem::create_directory(dir, ec) || ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--ps_cpu_quota needs a writable cgroup-v1 cpu controller; cannot create ",
                     dir, ": ", ec ? ec.message() : "exists"));
  }
  *path = dir;
  const int quota = std::max(1000, static_cast<int>(fraction * kQuotaPeriodUs));
  absl::Status s = WriteText(dir + "/cpu.cfs_period_us", absl::StrCat(kQuotaPeriodUs));
  if (s.ok()) s = WriteText(dir + "/cpu.cfs_quota_us", absl::StrCat(quota));
  if (s.ok()) s = WriteText(dir + "/cgroup.procs", absl::StrCat(pid));
  return s;
}

std::string ReadTextOrEmpty(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  return text.ok() ? *std::move(text) : std::string();
}

std::string AllowedCpus(pid_t pid) {
  std::set<std::string> lists;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::istringstream status(ReadTextOrEmpty(task.path().string() + "/status"));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        lists.insert(std::string(absl::StripAsciiWhitespace(line.substr(18))));
      }
    }
  }
  return absl::StrJoin(lists, "|");
}

double CpuSeconds(pid_t pid) {
  const std::string stat = ReadTextOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  double ticks = 0;
  // After the name: state(3) ... utime(14) stime(15), numbered from pid = 1.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::atof(field.c_str());
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string ReadLoadavg() {
  std::istringstream in(ReadTextOrEmpty("/proc/loadavg"));
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace fulcrum::bench
