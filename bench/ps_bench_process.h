// bench: child `ps` processes of the benchmarks (ps_throughput's clusters, grpc_bench's
// server): write their cluster spec, start one (pinned to a core or not) and wait until it
// answers, limit its CPU with a cgroup, read its CPU time and allowed CPUs from /proc.
// Thread-safety: pure functions over the OS; a PsProcess belongs to one thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/client/grpc_ps_client.h"

namespace fulcrum::bench {

// One `ps` process of a benchmark cluster.
struct PsProcess {
  pid_t pid = -1;
  int port = 0;
  int core = -1;  // the core it is pinned to; -1: not pinned
  std::string log;
  std::string allowed_cpus;  // as read back from /proc once it serves
  std::string cgroup;        // with --ps_cpu_quota: its own cpu cgroup, removed at the end
};

// Starts `argv` with its stdout and stderr in `log`, pinned to `core` unless it is -1: the
// spawning thread sets its own affinity first, and the child (and so every thread it ever
// starts) inherits it.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, int core, const std::string& log);

// Writes a cluster spec at `path`: ps tasks at `host`:ports[0..num_ps), a chief at the next
// port and a worker at each port after it (tasks that are no processes: the caller plays
// the chief and the workers, whose names the ps checks).
absl::Status WritePsSpec(const std::string& path, const std::string& host,
                         const std::vector<int>& ports, int num_ps);

// Starts ps task `index` of the spec at `spec_path` from `ps_binary`, listening on `port`,
// pinned to `core` unless it is -1, logging to `log`; `flags` follow the cluster's.
absl::StatusOr<PsProcess> StartPs(const std::string& ps_binary, const std::string& spec_path,
                                  int index, int port, int core, const std::string& log,
                                  const std::vector<std::string>& flags = {});

// Waits up to `timeout` until `proc` answers `client` (a client of it); Unavailable naming
// the process and holding its log when it exited or never answered.
absl::Status AwaitPs(PsProcess& proc, runtime::GrpcPsClient& client, absl::Duration timeout);

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
