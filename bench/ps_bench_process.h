// bench/ps_throughput: child `ps` processes of the pinned experiment: start one pinned to a
// core, limit its CPU with a cgroup, read its CPU time and allowed CPUs from /proc.
// Thread-safety: pure functions over the OS; a PsProcess belongs to one thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fulcrum::bench {

// One `ps` process of the pinned experiment.
struct PsProcess {
  pid_t pid = -1;
  int port = 0;
  int core = 0;
  std::string log;
  std::string allowed_cpus;  // as read back from /proc once it serves
  std::string cgroup;        // with --ps_cpu_quota: its own cpu cgroup, removed at the end
};

// Starts `argv` with its stdout and stderr in `log`, pinned to `core`: the spawning thread
// sets its own affinity first, and the child (and so every thread it ever starts) inherits
// it.
absl::StatusOr<pid_t> SpawnPinned(const std::vector<std::string>& argv, int core,
                                  const std::string& log);

// Waits up to 10 s for `pid` to exit, then kills it; reaps it either way.
void ReapOrKill(pid_t pid);

// Puts process `pid` (every thread) into a new cpu cgroup `name` allowed `fraction` of one
// core; sets *path to the cgroup's directory. FailedPrecondition without a writable
// cgroup-v1 cpu controller.
absl::Status LimitCpu(pid_t pid, const std::string& name, double fraction, std::string* path);

// The distinct Cpus_allowed_list values of every thread of `pid` ("0"; "0,1" would mean a
// thread escaped the pinning).
std::string AllowedCpus(pid_t pid);

// CPU seconds (user + system, every thread, living or gone) of process `pid` so far.
double CpuSeconds(pid_t pid);

// The text of `path`, "" when it cannot be read (a /proc file or a log for a message).
std::string ReadTextOrEmpty(const std::string& path);

// The first line of /proc/loadavg.
std::string ReadLoadavg();

}  // namespace fulcrum::bench
