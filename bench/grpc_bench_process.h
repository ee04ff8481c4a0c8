// bench/grpc_bench: the child processes of a run (this binary again, in the server or client
// role, optionally inside an emulated host). A child talks over pipes: it reads commands
// from its stdin, one per line, and answers on its stdout, one line each; its stderr goes to
// a log file that is shown when it fails. Every child is killed and reaped on every way out:
// the Child destructor closes its stdin, waits a moment, then SIGKILLs and reaps it; the
// child also gets SIGKILL from the kernel when this process dies (PR_SET_PDEATHSIG), exits
// when its stdin closes, and on its own once its --lifetime_s passes.
// Thread-safety: a Child belongs to one thread (the one that spawned it, since the parent-death
// signal follows that thread).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fulcrum::bench {

class Child {
 public:
  // Starts `argv` (argv[0] a path), inside network namespace `netns` when not empty (through
  // `ip netns exec`), with stderr appended to `log`.
  static absl::StatusOr<std::unique_ptr<Child>> Spawn(const std::vector<std::string>& argv,
                                                      const std::string& netns,
                                                      const std::string& log);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }
  // Writes one line (a newline is added).
  absl::Status Send(const std::string& line);
  // The next line of its stdout, without the newline. DeadlineExceeded at `deadline`,
  // Unavailable (with its log) when it exited, Cancelled on a stop signal.
  absl::StatusOr<std::string> ReadLine(absl::Time deadline);
  // Closes its stdin, waits up to `grace` for it to exit, then kills it; reaps it.
  void Stop(absl::Duration grace);

 private:
  Child(pid_t pid, int in, int out, std::string log)
      : pid_(pid), in_(in), out_(out), log_(std::move(log)) {}
  absl::Status Died(const std::string& what);

  pid_t pid_;
  int in_, out_;
  std::string log_;
  std::string pending_;  // read but not yet returned
};

// A fresh directory for the run's logs under $TMPDIR (or /tmp).
absl::StatusOr<std::string> MakeLogDir();

// In a child role: a thread that ends the process (exit code 1) after `lifetime`, or as soon
// as its parent is gone, whatever the role is doing then.
void StartLifetimeWatchdog(absl::Duration lifetime);

}  // namespace fulcrum::bench
