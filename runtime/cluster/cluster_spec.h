// runtime: the ClusterSpec (TensorFlow's shape, {"chief": ["host:port"], "ps": [...],
// "worker": [...]}) and which task of it this process is, from --cluster_spec=FILE or the
// TF_CONFIG environment variable exactly as TensorFlow defines it
// ({"cluster": {...}, "task": {"type": "worker", "index": 1}}).
// Everything is validated before any socket opens; every error is InvalidArgument (a spec
// file that is missing or unreadable: NotFound; both exit 2) naming the file or variable
// and what is wrong. When --cluster_spec is given, TF_CONFIG is not read at all.
// Thread-safety: pure functions and value types.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fulcrum::runtime {

inline constexpr char kChiefJob[] = "chief";
inline constexpr char kPsJob[] = "ps";
inline constexpr char kWorkerJob[] = "worker";

class ClusterSpec {
 public:
  ClusterSpec() = default;
  explicit ClusterSpec(std::map<std::string, std::vector<std::string>> jobs)
      : jobs_(std::move(jobs)) {}

  const std::map<std::string, std::vector<std::string>>& jobs() const { return jobs_; }
  int num_tasks(absl::string_view job) const;  // 0 for a job the spec lacks
  // "host:port" of task `index` of `job`; the caller checks the index (ResolveTask does).
  const std::string& address(absl::string_view job, int index) const;
  // True when the spec has a chief (or master) job. Without one (TensorFlow 1.x's layout)
  // worker 0 is the chief: it runs the coordinator in-process, on its own address, while it
  // trains (worker/main.cc).
  bool has_chief_job() const;
  // Where the coordinator (chief:0) listens: the chief's address, else worker 0's.
  const std::string& coordinator_address() const;
  // {"chief": [...], "ps": [...], "worker": [...]}
  std::string ToJson() const;

 private:
  std::map<std::string, std::vector<std::string>> jobs_;
};

// Parses and validates a spec: a JSON object whose keys are chief (one task, optional: without
// it worker 0 is the chief, as in TensorFlow 1.x), ps and worker (at least one each), each a list
// of "host:port" strings (host non-empty, "[v6]" allowed; port 1–65535), no address used twice.
// `source` names the text in errors.
absl::StatusOr<ClusterSpec> ParseClusterSpec(absl::string_view json, absl::string_view source);

// Splits "host:port"; InvalidArgument when malformed. "[::1]:80" gives host "::1".
absl::Status SplitHostPort(absl::string_view address, std::string* host, int* port);

// This process's place in the cluster.
struct TaskConfig {
  ClusterSpec cluster;
  std::string job_name;  // chief, ps or worker
  int task_index = 0;
  std::string source;  // where the spec came from: the file path or "TF_CONFIG"

  std::string task_name() const;  // "worker:1"
  std::string dir_name() const;   // "worker-1" (its run sub-folder)
  // This task's host:port; chief:0 of a spec without a chief job is at worker 0's.
  const std::string& address() const;
};

// One of TensorFlow 1.x's host flags: --ps_hosts=h:p,h:p gives job "ps" two tasks.
struct HostsFlag {
  std::string flag;   // "ps_hosts", as errors name it
  std::string job;    // "ps", "worker", "chief" or "master" (the chief)
  std::string value;  // "h:p,h:p"; empty = not given
};

// The spec the host flags with a value describe, validated as ParseClusterSpec does: ps, worker and
// a chief (chief or master, not both) needed. Entries are comma-separated host:port, blanks around
// them ignored. InvalidArgument names the flag and the entry that is malformed ("--ps_hosts=a:1,b:
// entry 1: ...").
absl::StatusOr<ClusterSpec> ClusterSpecFromHosts(const std::vector<HostsFlag>& flags);

// Resolves the task: the spec from `cluster_spec_path` when non-empty, else from
// `tf_config` (the TF_CONFIG text; null or empty = unset). The job is `job_name` when
// non-empty, else TF_CONFIG's task type, else `default_job` (the binary's own role); the
// index likewise from `task_index` (>= 0) or TF_CONFIG's task index, else 0. A job that is
// not default_job is refused: the ps binary only runs ps tasks.
absl::StatusOr<TaskConfig> ResolveTask(const std::string& cluster_spec_path, const char* tf_config,
                                       const std::string& job_name, int task_index,
                                       absl::string_view default_job);

// As ResolveTask, for a spec already parsed (the host flags); `source` names it in errors.
absl::StatusOr<TaskConfig> ResolveTaskInSpec(ClusterSpec spec, std::string source,
                                             const std::string& job_name, int task_index,
                                             absl::string_view default_job);

}  // namespace fulcrum::runtime
