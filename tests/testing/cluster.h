// tests: a whole Fulcrum cluster on loopback for integration tests. Picks free ports from
// the OS, writes the ClusterSpec file, starts the real ps / worker / chief binaries as child
// processes (each with its own log file), waits for them under a deadline and kills any
// that outlive it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/net.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::testing {

// Where Debian's dataset-fashion-mnist puts the data the cluster tests train on.
inline constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
// Whether it is installed (scripts/setup.sh does it); tests skip naming it otherwise.
inline bool HaveData() {
  return std::filesystem::exists(std::filesystem::path(kFashionMnist) /
                                 "train-images-idx3-ubyte.gz");
}

// A TCP port on 127.0.0.1 that was free a moment ago (base/net.h PickFreePort: below the
// ephemeral range, random, never the same twice in one process); 0 and a test failure when
// none is free.
inline int FreePort() {
  const absl::StatusOr<int> port = PickFreePort();
  if (!port.ok()) {
    ADD_FAILURE() << port.status();
    return 0;
  }
  return *port;
}

// Writes {"chief": [..], "ps": [..], "worker": [..]} on 127.0.0.1 with fresh ports.
inline std::string WriteLocalSpec(const std::filesystem::path& path, int num_ps, int num_workers) {
  auto addresses = [](int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("\"127.0.0.1:", FreePort(), "\""));
    return absl::StrCat("[", absl::StrJoin(out, ", "), "]");
  };
  std::ofstream(path) << "{\"chief\": " << addresses(1) << ", \"ps\": " << addresses(num_ps)
                      << ", \"worker\": " << addresses(num_workers) << "}\n";
  return path.string();
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The JSON of a summary or report file; a discarded value when it is missing or does not parse.
inline nlohmann::json ReadJson(const std::filesystem::path& path) {
  return nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
}

// Calls fn(pid, command line with spaces for NULs) for every process.
template <typename Fn>
void ForEachProcess(const Fn& fn) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadFile(entry.path() / "cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    fn(static_cast<pid_t>(std::stol(name)), cmdline);
  }
}

// Processes other than this one whose command line mentions `needle` (a run's unique spec
// path): what a test leaves behind.
inline int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  ForEachProcess([&](pid_t pid, const std::string& cmdline) {
    if (cmdline.find(needle) != std::string::npos && pid != ::getpid()) ++n;
  });
  return n;
}

struct Task {
  std::string job;
  int index = 0;
  pid_t pid = -1;
  int exit_code = -1;  // -1: killed or not exited
  std::filesystem::path log;
  std::string name() const { return absl::StrCat(job, ":", index); }
};

class LocalCluster {
 public:
  explicit LocalCluster(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~LocalCluster() {
    for (Task& t : tasks_) {
      if (t.pid > 0) {
        ::kill(t.pid, SIGKILL);
        ::waitpid(t.pid, nullptr, 0);
      }
    }
  }

  // Starts build/bin/<job> with `flags` (one argv entry each) and, unless `tf_config` is
  // given (then it is the child's TF_CONFIG and names the task), --job_name/--task_index.
  // Starting a task again (a restart) logs to <job>-<index>.restart<k>.log; task() then
  // names the newest.
  void Start(const std::string& job, int index, const std::vector<std::string>& flags,
             const std::string& tf_config = "") {
    Task t;
    t.job = job;
    t.index = index;
    int earlier = 0;
    for (const Task& other : tasks_) earlier += other.job == job && other.index == index ? 1 : 0;
    t.log = dir_ / (earlier == 0 ? absl::StrCat(job, "-", index, ".log")
                                 : absl::StrCat(job, "-", index, ".restart", earlier, ".log"));
    std::vector<std::string> args = {absl::StrCat(FULCRUM_BIN_DIR, "/", job)};
    if (tf_config.empty()) {
      args.push_back(absl::StrCat("--job_name=", job));
      args.push_back(absl::StrCat("--task_index=", index));
    }
    args.insert(args.end(), flags.begin(), flags.end());
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(t.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      if (!tf_config.empty()) ::setenv("TF_CONFIG", tf_config.c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    t.pid = pid;
    tasks_.push_back(std::move(t));
  }

  // Starts every ps, then every worker, then the chief, all with the same flags.
  void StartAll(int num_ps, int num_workers, const std::vector<std::string>& flags) {
    for (int i = 0; i < num_ps; ++i) Start("ps", i, flags);
    for (int i = 0; i < num_workers; ++i) Start("worker", i, flags);
    Start("chief", 0, flags);
  }

  // Waits for every task to exit, up to `timeout`; kills the rest (their exit_code stays -1).
  void WaitAll(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      bool running = false;
      for (Task& t : tasks_) {
        if (t.pid <= 0) continue;
        int status = 0;
        if (::waitpid(t.pid, &status, WNOHANG) == t.pid) {
          t.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
          t.pid = -1;
        } else {
          running = true;
        }
      }
      if (!running) return;
      if (std::chrono::steady_clock::now() > deadline) {
        for (Task& t : tasks_) {
          if (t.pid > 0) {
            ::kill(t.pid, SIGKILL);
            ::waitpid(t.pid, nullptr, 0);
            t.pid = -1;
            ADD_FAILURE() << t.name() << " still running after the deadline; killed";
          }
        }
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Waits until the task's log contains `text`; false after `timeout`.
  bool WaitForLog(const std::string& job, int index, const std::string& text,
                  std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ReadFile(task(job, index).log).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Kills the task at once (SIGKILL), as a crash or a lost machine would.
  void Kill(const std::string& job, int index) {
    for (Task& t : tasks_) {
      if (t.job == job && t.index == index && t.pid > 0) {
        ::kill(t.pid, SIGKILL);
        ::waitpid(t.pid, nullptr, 0);
        t.pid = -1;
      }
    }
  }

  // Sends `signal` to a running task (it keeps running until it exits on its own).
  void Signal(const std::string& job, int index, int signal) {
    for (const Task& t : tasks_) {
      if (t.job == job && t.index == index && t.pid > 0) ::kill(t.pid, signal);
    }
  }

  const std::vector<Task>& tasks() const { return tasks_; }
  const Task& task(const std::string& job, int index) const {
    for (auto it = tasks_.rbegin(); it != tasks_.rend(); ++it) {
      if (it->job == job && it->index == index) return *it;
    }
    static const Task kNone;
    return kNone;
  }
  // Every task's log, for failure messages.
  std::string Logs() const {
    std::string out;
    for (const Task& t : tasks_) {
      out += absl::StrCat("----- ", t.name(), " (exit ", t.exit_code, ") -----\n", ReadFile(t.log),
                          "\n");
    }
    return out;
  }

 private:
  std::filesystem::path dir_;
  std::vector<Task> tasks_;
};

}  // namespace fulcrum::testing
