#include "chief/machines.h"

#include <algorithm>
#include <map>

#include "chief/json_fields.h"

namespace fulcrum::chief {
namespace {

std::string MachineOf(const nlohmann::json& summary) {
  return Str(At(summary, "System Information"), "Node Name", "unknown");
}

// The machine's CPUs in use over a process's window, from its sampler's host figures; -1 when
// the summary has none.
double BusyCpus(const nlohmann::json& summary, double cores) {
  const nlohmann::json& host = At(summary, "host_system");
  if (!host.is_object() || !At(host, "cpu_idle_percent_mean").is_number()) return -1.0;
  const double idle = Num(host, "cpu_idle_percent_mean") + Num(host, "cpu_iowait_percent_mean");
  return std::max(0.0, 100.0 - idle) / 100.0 * cores;
}

// The row of one machine from its processes (task name, summary).
nlohmann::json MachineRow(
    const std::string& machine,
    const std::vector<std::pair<std::string, const nlohmann::json*>>& processes) {
  nlohmann::json row = {{"machine", machine}, {"tasks", nlohmann::json::array()}};
  const std::pair<std::string, const nlohmann::json*>* longest = nullptr;
  double cpu_seconds = 0.0;  // every process's but the longest-lived one's
  for (const auto& p : processes) {
    row["tasks"].push_back(p.first);
    cpu_seconds += Num(*p.second, "cpu_seconds");
    const bool sampled = At(*p.second, "host_system").is_object();
    if (sampled && (longest == nullptr || Num(*p.second, "Job Execution Time") >
                                              Num(*longest->second, "Job Execution Time"))) {
      longest = &p;
    }
  }
  for (const char* k : {"cores", "window_seconds", "measured_by", "busy_cpus", "job_cpus",
                        "other_cpus", "load1_mean"}) {
    row[k] = nullptr;
  }
  if (longest == nullptr) return row;
  const nlohmann::json& s = *longest->second;
  const double cores = static_cast<double>(Array(s, "Total CPU usage per core").size());
  const double window = Num(s, "Job Execution Time");
  // The longest-lived process counts its CPU within its window only: its cpu_seconds run from
  // its start, before its profiler (a worker's data loading). The others started while it was
  // measured (the tasks of a job start together), so their whole cpu_seconds count.
  cpu_seconds += Num(s, "cpu_percent_mean") / 100.0 * window - Num(s, "cpu_seconds");
  const double busy = BusyCpus(s, cores);
  row["cores"] = cores;
  row["window_seconds"] = window;
  row["measured_by"] = longest->first;
  row["load1_mean"] = Num(At(s, "host_system"), "load1_mean");
  if (cores <= 0 || window <= 0 || busy < 0) return row;
  const double job = cpu_seconds / window;
  row["busy_cpus"] = busy;
  row["job_cpus"] = job;
  row["other_cpus"] = std::max(0.0, busy - job);
  return row;
}

}  // namespace

nlohmann::json MachineRows(
    const std::vector<std::pair<std::string, const nlohmann::json*>>& processes) {
  std::map<std::string, std::vector<std::pair<std::string, const nlohmann::json*>>> by_machine;
  std::vector<std::string> order;
  for (const auto& p : processes) {
    const std::string machine = MachineOf(*p.second);
    auto [it, fresh] = by_machine.try_emplace(machine);
    if (fresh) order.push_back(machine);
    it->second.push_back(p);
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& machine : order) rows.push_back(MachineRow(machine, by_machine[machine]));
  return rows;
}

double MaxOtherCpus(const nlohmann::json& machine_rows) {
  double most = 0.0;
  if (!machine_rows.is_array()) return most;
  for (const nlohmann::json& row : machine_rows) most = std::max(most, Num(row, "other_cpus"));
  return most;
}

}  // namespace fulcrum::chief
