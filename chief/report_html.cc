#include "chief/report_html.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace fulcrum::chief {
namespace {

namespace fs = std::filesystem;

// The renderer's last output kept for the error message (a Python traceback ends there).
constexpr size_t kKeptOutput = 2048;

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// Starts `interpreter script in out` with stdin from /dev/null and stdout and stderr on one
// pipe; returns its pid and sets *output to the pipe's read end.
absl::StatusOr<pid_t> Spawn(const ReportRenderer& r, const fs::path& in, const fs::path& out,
                            int* output) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(Errno("pipe2"));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);  // dup2 clears close-on-exec
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::string args[] = {r.interpreter.string(), r.script.string(), in.string(), out.string()};
  char* argv[] = {args[0].data(), args[1].data(), args[2].data(), args[3].data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return absl::InternalError(absl::StrCat("cannot start ", args[0], ": ", std::strerror(rc)));
  }
  *output = fds[0];
  return pid;
}

// Reads the child's output until it closes it (it is exiting) or the deadline passes; keeps
// the last kKeptOutput bytes in *tail. Returns false when the deadline passed first.
bool ReadUntil(int fd, absl::Time deadline, std::string* tail) {
  char buf[4096];
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms + 1, 10'000)));
    if (n < 0 && errno != EINTR) return true;  // cannot watch it: go on to reap it
    if (n <= 0) continue;
    const ssize_t got = ::read(fd, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return true;
    tail->append(buf, static_cast<size_t>(got));
    if (tail->size() > 2 * kKeptOutput) tail->erase(0, tail->size() - kKeptOutput);
  }
}

// Waits for the child until the deadline, then kills it. Returns its wait status, or nullopt
// when it had to be killed.
std::optional<int> Reap(pid_t pid, absl::Time deadline) {
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return W_EXITCODE(127, 0);  // not ours to wait for: failed
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  // SIGKILL cannot be caught or ignored: this wait ends.
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return std::nullopt;
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::StrCat("ended with wait status ", status);
}

std::string Tail(const std::string& output) {
  absl::string_view t = absl::StripAsciiWhitespace(output);
  if (t.size() > kKeptOutput) t = t.substr(t.size() - kKeptOutput);
  return t.empty() ? "(no output)" : std::string(t);
}

absl::Status CheckRenderer(const ReportRenderer& r) {
  if (::access(r.interpreter.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("no Python interpreter at ", r.interpreter.string(),
                                            ": install python3 and python3-matplotlib "
                                            "(scripts/setup.sh)"));
  }
  std::error_code ec;
  if (r.script.empty() || !fs::is_regular_file(r.script, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "report renderer ", r.script.string(),
        " not found: the build copies scripts/render_report.py and scripts/fulcrum_report/ "
        "next to the chief binary"));
  }
  return absl::OkStatus();
}

}  // namespace

ReportRenderer DefaultReportRenderer() {
  ReportRenderer r;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  r.script = ec ? fs::path("render_report.py") : exe.parent_path() / "render_report.py";
  return r;
}

absl::Status WriteReportHtml(const fs::path& report_json, const fs::path& report_html,
                             absl::Duration timeout, const ReportRenderer& renderer) {
  FULCRUM_RETURN_IF_ERROR(CheckRenderer(renderer));
  const absl::Time deadline = absl::Now() + timeout;
  int output = -1;
  FULCRUM_ASSIGN_OR_RETURN(const pid_t pid, Spawn(renderer, report_json, report_html, &output));
  std::string tail;
  const bool closed = ReadUntil(output, deadline, &tail);
  ::close(output);
  const std::optional<int> status = Reap(pid, closed ? deadline : absl::Now());
  if (!status.has_value()) {
    std::error_code ec;  // the renderer's temporary file (render_report.py: OUT_HTML.tmp)
    fs::remove(fs::path(report_html.string() + ".tmp"), ec);
    return absl::DeadlineExceededError(
        absl::StrCat("report renderer ", renderer.script.string(), " did not finish within ",
                     absl::FormatDuration(timeout), " and was killed"));
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return absl::InternalError(absl::StrCat("report renderer ", renderer.script.string(), " ",
                                            Describe(*status), ": ", Tail(tail)));
  }
  // A chart it could not draw is named in its output; the page has the rest.
  if (!absl::StripAsciiWhitespace(tail).empty()) {
    spdlog::info("report renderer: {}", Tail(tail));
  }
  return absl::OkStatus();
}

absl::Status WriteReportHtml(const fs::path& report_json, const fs::path& report_html,
                             absl::Duration timeout) {
  return WriteReportHtml(report_json, report_html, timeout, DefaultReportRenderer());
}

}  // namespace fulcrum::chief
