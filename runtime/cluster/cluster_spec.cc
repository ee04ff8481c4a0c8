#include "runtime/cluster/cluster_spec.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace fulcrum::runtime {
namespace {

using Json = nlohmann::json;

constexpr const char* kJobs[] = {kChiefJob, kPsJob, kWorkerJob};
constexpr char kJobList[] = "chief, ps or worker";
constexpr char kTfConfig[] = "TF_CONFIG";

bool IsKnownJob(absl::string_view job) {
  for (const char* known : kJobs) {
    if (job == known) return true;
  }
  return false;
}

// The JSON type in words, for "expected X, got Y" messages.
std::string TypeName(const Json& value) { return value.type_name(); }

absl::Status PortError(absl::string_view address, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("address \"", address, "\": ", what, " (expected host:port)"));
}

// Parses the decimal port of `address`; `text` is what follows the host's ':'.
absl::Status ParsePort(absl::string_view address, absl::string_view text, int* port) {
  if (text.empty()) return PortError(address, "missing port");
  for (char c : text) {
    if (c < '0' || c > '9') {
      return PortError(address, absl::StrCat("port \"", text, "\" is not a number"));
    }
  }
  if (text.size() > 5) {
    return PortError(address, absl::StrCat("port ", text, " is out of range 1-65535"));
  }
  int value = 0;
  for (char c : text) value = value * 10 + (c - '0');
  if (value < 1 || value > 65535) {
    return PortError(address, absl::StrCat("port ", value, " is out of range 1-65535"));
  }
  *port = value;
  return absl::OkStatus();
}

absl::Status CheckHostChars(absl::string_view address, absl::string_view host) {
  for (char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
        !absl::ascii_isprint(static_cast<unsigned char>(c)) || c == '/' || c == '[' || c == ']' ||
        c == '@') {
      return PortError(address, absl::StrCat("host \"", host, "\" has an invalid character"));
    }
  }
  return absl::OkStatus();
}

// One task's address in errors: `source`: job "worker" task 1.
std::string TaskWhere(absl::string_view source, absl::string_view job, size_t index) {
  return absl::StrCat(source, ": job \"", job, "\" task ", index);
}

absl::StatusOr<std::string> ReadSpecFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("--cluster_spec=", path, ": no such file"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return absl::NotFoundError(
        absl::StrCat("--cluster_spec=", path, ": is a directory, not a cluster spec file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("--cluster_spec=", path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::NotFoundError(absl::StrCat("--cluster_spec=", path, ": cannot read"));
  }
  return text.str();
}

// TF_CONFIG's "task" entry; fields absent stay empty / -1.
struct TfTask {
  std::string type;
  int index = -1;
};

absl::Status ParseTfTask(const Json& config, TfTask* task) {
  const auto it = config.find("task");
  if (it == config.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG: \"task\" must be an object like {\"type\": \"worker\", \"index\": 0}, got ",
        TypeName(*it)));
  }
  if (const auto type = it->find("type"); type != it->end() && !type->is_null()) {
    if (!type->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: task \"type\" must be a string (",
                                                     kJobList, "), got ", TypeName(*type)));
    }
    task->type = type->get<std::string>();
  }
  if (const auto index = it->find("index"); index != it->end() && !index->is_null()) {
    if (!index->is_number_integer() || index->get<int64_t>() < 0 ||
        index->get<int64_t>() > 1'000'000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: task \"index\" must be a non-negative integer, got ", index->dump()));
    }
    task->index = static_cast<int>(index->get<int64_t>());
  }
  return absl::OkStatus();
}

}  // namespace

int ClusterSpec::num_tasks(absl::string_view job) const {
  const auto it = jobs_.find(std::string(job));
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

const std::string& ClusterSpec::address(absl::string_view job, int index) const {
  static const std::string* const kEmpty = new std::string();
  const auto it = jobs_.find(std::string(job));
  if (it == jobs_.end() || index < 0 || static_cast<size_t>(index) >= it->second.size()) {
    return *kEmpty;
  }
  return it->second[static_cast<size_t>(index)];
}

bool ClusterSpec::has_chief_job() const { return num_tasks(kChiefJob) > 0; }

const std::string& ClusterSpec::coordinator_address() const {
  return has_chief_job() ? address(kChiefJob, 0) : address(kWorkerJob, 0);
}

std::string ClusterSpec::ToJson() const {
  Json out = Json::object();
  for (const auto& [job, addresses] : jobs_) out[job] = addresses;
  return out.dump();
}

absl::Status SplitHostPort(absl::string_view address, std::string* host, int* port) {
  if (address.empty()) return PortError(address, "empty address");
  absl::string_view host_part;
  absl::string_view port_part;
  if (address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return PortError(address, "\"[\" without a closing \"]\"");
    }
    host_part = address.substr(1, close - 1);
    if (host_part.empty()) return PortError(address, "empty host");
    const absl::string_view rest = address.substr(close + 1);
    if (rest.empty()) return PortError(address, "missing port");
    if (rest.front() != ':') {
      return PortError(address, absl::StrCat("unexpected \"", rest, "\" after \"]\""));
    }
    port_part = rest.substr(1);
    for (char c : host_part) {
      const bool ok = absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.' ||
                      c == '%' || absl::ascii_isalnum(static_cast<unsigned char>(c));
      if (!ok) {
        return PortError(address,
                         absl::StrCat("bracketed host \"", host_part, "\" is not an IPv6 address"));
      }
    }
  } else {
    const size_t colon = address.find(':');
    if (colon == absl::string_view::npos) return PortError(address, "missing port");
    if (address.find(':', colon + 1) != absl::string_view::npos) {
      return PortError(address,
                       "more than one ':'; write an IPv6 host in brackets, like [::1]:2222");
    }
    host_part = address.substr(0, colon);
    port_part = address.substr(colon + 1);
    if (host_part.empty()) return PortError(address, "empty host");
    auto status = CheckHostChars(address, host_part);
    if (!status.ok()) return status;
  }
  int value = 0;
  auto status = ParsePort(address, port_part, &value);
  if (!status.ok()) return status;
  *host = std::string(host_part);
  *port = value;
  return absl::OkStatus();
}

namespace {

using JobAddresses = std::map<std::string, std::vector<std::string>>;

// The "host:port" list of `job` in the spec's JSON, each address checked.
absl::Status ReadJob(absl::string_view source, const std::string& job, const Json& tasks,
                     std::vector<std::string>* addresses) {
  if (!IsKnownJob(job)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": unknown job \"", job, "\" (expected ", kJobList, ")"));
  }
  if (!tasks.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": job \"", job, "\" must be a list of \"host:port\" strings, got ",
                     TypeName(tasks)));
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Json& task = tasks[i];
    if (!task.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(TaskWhere(source, job, i),
                                                     ": expected a \"host:port\" string, got ",
                                                     TypeName(task), " ", task.dump()));
    }
    std::string address = task.get<std::string>();
    std::string host;
    int port = 0;
    const absl::Status status = SplitHostPort(address, &host, &port);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(TaskWhere(source, job, i), ": ", status.message()));
    }
    addresses->push_back(std::move(address));
  }
  return absl::OkStatus();
}

// At most one chief (none: TensorFlow 1.x's layout, worker 0 is the chief), at least one ps
// and one worker.
absl::Status CheckJobCounts(absl::string_view source, JobAddresses& jobs) {
  if (const auto chief = jobs.find(kChiefJob); chief != jobs.end() && chief->second.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": job \"chief\" must have exactly 1 task, has ", chief->second.size(),
                     " (or leave it out: worker 0 is then the chief, as in TensorFlow 1.x)"));
  }
  if (!jobs.count(kPsJob) || jobs[kPsJob].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no ps task: the spec needs \"ps\" with at least one address"));
  }
  if (!jobs.count(kWorkerJob) || jobs[kWorkerJob].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": no worker task: the spec needs \"worker\" with at least one address"));
  }
  return absl::OkStatus();
}

// Same host (case-insensitive) and port = same address, however it is spelt.
absl::Status CheckDistinctAddresses(absl::string_view source, JobAddresses& jobs) {
  std::map<std::pair<std::string, int>, std::string> seen;  // -> "job:index"
  for (const char* job : kJobs) {
    const auto found = jobs.find(job);
    if (found == jobs.end()) continue;
    const std::vector<std::string>& addresses = found->second;
    for (size_t i = 0; i < addresses.size(); ++i) {
      std::string host;
      int port = 0;
      // Already validated by ReadJob.
      (void)SplitHostPort(addresses[i], &host, &port);
      const std::string task = absl::StrCat(job, ":", i);
      auto [it, inserted] = seen.emplace(std::make_pair(absl::AsciiStrToLower(host), port), task);
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": address \"", addresses[i], "\" is used by both ", it->second,
                         " and ", task, "; every task needs its own host:port"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClusterSpec> ParseClusterSpec(absl::string_view json, absl::string_view source) {
  Json root;
  try {
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": a cluster spec must be a JSON object like {\"chief\": [\"host:port\"], "
                     "\"ps\": [...], \"worker\": [...]}, got ",
                     TypeName(root)));
  }
  JobAddresses jobs;
  if (root.contains("master") && root.contains(kChiefJob)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": both \"chief\" and \"master\" jobs: give one (TensorFlow 1.x's master is "
                     "the chief)"));
  }
  for (const auto& [given, tasks] : root.items()) {
    // TensorFlow 1.x's name for the chief.
    const std::string job = given == "master" ? std::string(kChiefJob) : given;
    FULCRUM_RETURN_IF_ERROR(ReadJob(source, job, tasks, &jobs[job]));
  }
  FULCRUM_RETURN_IF_ERROR(CheckJobCounts(source, jobs));
  FULCRUM_RETURN_IF_ERROR(CheckDistinctAddresses(source, jobs));
  return ClusterSpec(std::move(jobs));
}

absl::StatusOr<ClusterSpec> ClusterSpecFromHosts(const std::vector<HostsFlag>& flags) {
  JobAddresses jobs;
  std::vector<std::string> given;  // "--ps_hosts", for errors
  for (const HostsFlag& f : flags) {
    if (f.value.empty()) continue;
    const std::string flag = absl::StrCat("--", f.flag);
    // TensorFlow 1.x's name for the chief.
    const std::string job = f.job == "master" ? std::string(kChiefJob) : f.job;
    if (jobs.count(job)) {
      return absl::InvalidArgumentError(absl::StrCat(
          given.back(), " and ", flag, " both name the chief: give one (master is the chief)"));
    }
    std::vector<std::string>& addresses = jobs[job];
    for (absl::string_view entry : absl::StrSplit(f.value, ',')) {
      entry = absl::StripAsciiWhitespace(entry);
      std::string host;
      int port = 0;
      if (absl::Status s = SplitHostPort(entry, &host, &port); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, "=", f.value, ": entry ", addresses.size(), ": ", s.message()));
      }
      addresses.push_back(std::string(entry));
    }
    given.push_back(flag);
  }
  if (given.empty()) return absl::InvalidArgumentError("no --ps_hosts or --worker_hosts given");
  const std::string source = absl::StrJoin(given, " ");
  if (!jobs.count(kPsJob)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no --ps_hosts: give it with --worker_hosts (host:port,...)"));
  }
  if (!jobs.count(kWorkerJob)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no --worker_hosts: give it with --ps_hosts (host:port,...)"));
  }
  FULCRUM_RETURN_IF_ERROR(CheckJobCounts(source, jobs));
  FULCRUM_RETURN_IF_ERROR(CheckDistinctAddresses(source, jobs));
  return ClusterSpec(std::move(jobs));
}

const std::string& TaskConfig::address() const {
  if (job_name == kChiefJob && !cluster.has_chief_job()) return cluster.coordinator_address();
  return cluster.address(job_name, task_index);
}

std::string TaskConfig::task_name() const { return absl::StrCat(job_name, ":", task_index); }

std::string TaskConfig::dir_name() const { return absl::StrCat(job_name, "-", task_index); }

namespace {

// The cluster and task TF_CONFIG describes: {"cluster": {...}, "task": {"type", "index"}}.
absl::Status ReadTfConfig(const char* tf_config, TaskConfig* config, TfTask* tf_task) {
  Json root;
  try {
    root = Json::parse(tf_config);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: not valid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG: must be a JSON object like {\"cluster\": {...}, \"task\": {\"type\": "
        "\"worker\", \"index\": 0}}, got ",
        TypeName(root)));
  }
  const auto cluster = root.find("cluster");
  if (cluster == root.end() || cluster->is_null()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG: no \"cluster\" key; expected {\"cluster\": {\"chief\": [...], \"ps\": "
        "[...], \"worker\": [...]}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
  }
  FULCRUM_ASSIGN_OR_RETURN(config->cluster, ParseClusterSpec(cluster->dump(), kTfConfig));
  config->source = kTfConfig;
  return ParseTfTask(root, tf_task);
}

// The job: --job_name, else TF_CONFIG's task type, else the binary's own; it must be the
// binary's own.
absl::Status ResolveJob(const std::string& job_name, const TfTask& tf_task,
                        absl::string_view default_job, TaskConfig* config) {
  std::string job_from;  // how the job was given, for errors
  if (!job_name.empty()) {
    config->job_name = job_name;
    job_from = absl::StrCat("--job_name=", job_name);
  } else if (!tf_task.type.empty()) {
    config->job_name = tf_task.type;
    job_from = absl::StrCat("TF_CONFIG task type \"", tf_task.type, "\"");
  } else {
    config->job_name = std::string(default_job);
    job_from = absl::StrCat("job ", default_job);
  }
  if (config->job_name == "master") config->job_name = kChiefJob;  // TensorFlow 1.x's name
  if (!IsKnownJob(config->job_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(job_from, ": unknown job (expected ", kJobList, ")"));
  }
  if (config->job_name != default_job) {
    return absl::InvalidArgumentError(absl::StrCat(job_from, ": this is the ", default_job,
                                                   " binary; start build/bin/", config->job_name,
                                                   " for ", config->job_name, " tasks"));
  }
  return absl::OkStatus();
}

// The index: --task_index, else TF_CONFIG's task index, else 0; within the job's tasks.
absl::Status ResolveIndex(int task_index, const TfTask& tf_task, TaskConfig* config) {
  std::string index_from;
  if (task_index >= 0) {
    config->task_index = task_index;
    index_from = absl::StrCat("--task_index=", task_index);
  } else if (tf_task.index >= 0) {
    config->task_index = tf_task.index;
    index_from = absl::StrCat("TF_CONFIG task index ", tf_task.index);
  } else {
    config->task_index = 0;
    index_from = "task index 0";
  }
  const int tasks = config->cluster.num_tasks(config->job_name);
  if (tasks == 0 && config->job_name == kChiefJob) {
    return absl::InvalidArgumentError(absl::StrCat(
        config->source,
        " has no chief job: worker 0 is the chief there (TensorFlow 1.x's layout); start no "
        "chief task, or add \"chief\": [\"host:port\"] to the spec"));
  }
  if (config->task_index >= tasks) {
    return absl::InvalidArgumentError(absl::StrCat(index_from, ": the cluster spec has ", tasks,
                                                   " ", config->job_name, " task(s) (0..",
                                                   tasks - 1, ") in ", config->source));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TaskConfig> ResolveTask(const std::string& cluster_spec_path, const char* tf_config,
                                       const std::string& job_name, int task_index,
                                       absl::string_view default_job) {
  TaskConfig config;
  TfTask tf_task;
  if (!cluster_spec_path.empty()) {
    // The file wins; TF_CONFIG (spec and task) is then ignored entirely.
    FULCRUM_ASSIGN_OR_RETURN(const std::string text, ReadSpecFile(cluster_spec_path));
    FULCRUM_ASSIGN_OR_RETURN(config.cluster, ParseClusterSpec(text, cluster_spec_path));
    config.source = cluster_spec_path;
  } else if (tf_config != nullptr && *tf_config != '\0') {
    FULCRUM_RETURN_IF_ERROR(ReadTfConfig(tf_config, &config, &tf_task));
  } else {
    return absl::InvalidArgumentError(
        "no cluster: give --cluster_spec=FILE, --ps_hosts and --worker_hosts, or set TF_CONFIG");
  }
  FULCRUM_RETURN_IF_ERROR(ResolveJob(job_name, tf_task, default_job, &config));
  FULCRUM_RETURN_IF_ERROR(ResolveIndex(task_index, tf_task, &config));
  return config;
}

absl::StatusOr<TaskConfig> ResolveTaskInSpec(ClusterSpec spec, std::string source,
                                             const std::string& job_name, int task_index,
                                             absl::string_view default_job) {
  TaskConfig config;
  config.cluster = std::move(spec);
  config.source = std::move(source);
  FULCRUM_RETURN_IF_ERROR(ResolveJob(job_name, TfTask{}, default_job, &config));
  FULCRUM_RETURN_IF_ERROR(ResolveIndex(task_index, TfTask{}, &config));
  return config;
}

}  // namespace fulcrum::runtime
