#include "bench/grpc_bench_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/signals.h"
#include "bench/ps_bench_process.h"

namespace fulcrum::bench {
namespace {

// `ip` for `ip netns exec`, found before fork (execvp's PATH search is not async-signal-safe).
std::string FindIp() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// The last `n` characters of a log, for an error message.
std::string Tail(const std::string& path, size_t n = 2000) {
  const std::string text = ReadTextOrEmpty(path);
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Child>> Child::Spawn(const std::vector<std::string>& argv,
                                                    const std::string& netns,
                                                    const std::string& log) {
  std::vector<std::string> full;
  if (!netns.empty()) {
    const std::string ip = FindIp();
    if (ip.empty()) return absl::FailedPreconditionError("'ip' (iproute2) not found");
    full = {ip, "netns", "exec", netns};
  }
  full.insert(full.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (auto& a : full) args.push_back(a.data());
  args.push_back(nullptr);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return absl::InternalError("pipe failed");
  }
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const pid_t parent = getpid();
  const pid_t pid = log_fd < 0 ? -1 : fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(log_fd, 2);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  if (log_fd >= 0) close(log_fd);
  if (pid < 0) {
    close(in[1]);
    close(out[0]);
    return absl::InternalError(absl::StrCat("cannot start ", full[0], " (log ", log, ")"));
  }
  return std::unique_ptr<Child>(new Child(pid, in[1], out[0], log));
}

Child::~Child() { Stop(absl::Seconds(2)); }

absl::Status Child::Send(const std::string& line) {
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = write(in_, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Died(absl::StrCat("cannot be written to (", std::strerror(errno), ")"));
    done += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Child::ReadLine(absl::Time deadline) {
  for (;;) {
    const size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    if (StopSignal() != 0) return absl::CancelledError("stopped by a signal");
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return Died("did not answer in time");
    pollfd p{out_, POLLIN, 0};
    const int ms = static_cast<int>(std::min<int64_t>(200, absl::ToInt64Milliseconds(left) + 1));
    if (poll(&p, 1, ms) <= 0) continue;
    char buf[4096];
    const ssize_t r = read(out_, buf, sizeof(buf));
    if (r == 0) return Died("exited");
    if (r > 0) pending_.append(buf, static_cast<size_t>(r));
  }
}

absl::Status Child::Died(const std::string& what) {
  int status = 0;
  std::string how;
  if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    how = WIFEXITED(status) ? absl::StrCat(" (exit code ", WEXITSTATUS(status), ")")
                            : absl::StrCat(" (", SignalName(WTERMSIG(status)), ")");
  }
  return absl::UnavailableError(
      absl::StrCat("child process ", what, how, "; its log ", log_, ":\n", Tail(log_)));
}

void Child::Stop(absl::Duration grace) {
  if (in_ >= 0) close(in_);
  in_ = -1;
  if (pid_ > 0) {
    const absl::Time until = absl::Now() + grace;
    int status = 0;
    bool reaped = false;
    while (!(reaped = waitpid(pid_, &status, WNOHANG) == pid_) && absl::Now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!reaped) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  if (out_ >= 0) close(out_);
  out_ = -1;
}

absl::StatusOr<std::string> MakeLogDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/grpc_bench.XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make a log directory ", dir));
  }
  return dir;
}

void StartLifetimeWatchdog(absl::Duration lifetime) {
  const pid_t parent = getppid();
  std::thread([lifetime, parent] {
    const absl::Time until = absl::Now() + lifetime;
    while (absl::Now() < until && getppid() == parent) absl::SleepFor(absl::Milliseconds(200));
    std::fprintf(stderr, "grpc_bench: %s; exiting\n",
                 getppid() != parent ? "the parent process is gone" : "--lifetime_s passed");
    std::fflush(stderr);
    _exit(1);
  }).detach();
}

}  // namespace fulcrum::bench
