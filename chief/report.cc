#include "chief/report.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "chief/json_fields.h"
#include "chief/layers.h"
#include "chief/machines.h"
#include "chief/report_html.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {
namespace {

// The RPC of the warm-up (runtime's channel warm-up before the first step): its bytes are
// shown apart from training's.
constexpr char kWarmupMethod[] = "Ping";

// What an RPC between two tasks is for: "warm-up", "control" (the chief's registration,
// heartbeats, evaluation pulls, checkpoints, stop) or "training" (a worker's pulls and pushes).
std::string TrafficKind(const std::string& method, const std::string& a, const std::string& b) {
  if (method == kWarmupMethod) return "warm-up";
  if (absl::StartsWith(a, "chief-") || absl::StartsWith(b, "chief-")) return "control";
  return "training";
}

// Directed rows (from, to, kind) of application bytes, each direction counted by its sender
// ("bytes_counted_by_sender") and by its receiver ("bytes_counted_by_receiver"), null where that
// end keeps no count. Where both count, they agree unless a call was cut off.
nlohmann::json TrafficRows(const std::vector<std::pair<std::string, const nlohmann::json*>>& s) {
  // A count stays null where that end keeps none (a ps does not count the warm-up's Pings it
  // serves, the chief not the coordinator calls it serves; a task that vanished sent none).
  std::map<std::tuple<std::string, std::string, std::string>, std::array<nlohmann::json, 2>> rows;
  auto add = [](nlohmann::json* count, double bytes) {
    *count = (count->is_null() ? 0.0 : count->get<double>()) + bytes;
  };
  for (const auto& [job, summary] : s) {
    const std::string me =
        job + "-" + std::to_string(static_cast<int>(Num(*summary, "task_index")));
    for (const nlohmann::json& e : Array(*summary, "rpc_traffic")) {
      const std::string peer = Str(e, "peer", "unknown");
      const std::string kind = TrafficKind(Str(e, "method", ""), me, peer);
      add(&rows[{me, peer, kind}][0], Num(e, "bytes_sent"));
      add(&rows[{peer, me, kind}][1], Num(e, "bytes_received"));
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, v] : rows) {
    out.push_back({{"from", std::get<0>(key)},
                   {"to", std::get<1>(key)},
                   {"kind", std::get<2>(key)},
                   {"bytes_counted_by_sender", v[0]},
                   {"bytes_counted_by_receiver", v[1]}});
  }
  return out;
}

// One summary's row of the task table: per-process figures only (interface counters belong to
// a host: every task of a network namespace reads the same ones).
nlohmann::json TaskRow(const nlohmann::json& s, const std::string& job) {
  const int index = static_cast<int>(Num(s, "task_index"));
  nlohmann::json row;
  row["task"] = job + "-" + std::to_string(index);
  row["job"] = job;
  row["index"] = index;
  row["host"] = Str(s, "host", "unknown");
  row["pid"] = Num(s, "pid");  // 0: not recorded
  row["profile"] = Str(s, "profile", "off");
  const bool vanished = s.is_object() && s.value("vanished", false);
  row["status"] = vanished ? "vanished" : "reported";
  if (vanished) row["records"] = s.value("partial", false) ? "partial" : "final";
  row["cpu_seconds"] = Num(s, "cpu_seconds");
  row["cpu_percent_mean"] = Num(s, "cpu_percent_mean");
  row["cpu_percent_max"] = Num(s, "cpu_percent_max");
  row["peak_rss_bytes"] = Num(s, "peak_rss_bytes");
  row["app_bytes_sent"] = Num(s, "app_bytes_sent");
  row["app_bytes_received"] = Num(s, "app_bytes_received");
  double warmup_sent = 0, warmup_received = 0;
  for (const nlohmann::json& e : Array(s, "rpc_traffic")) {
    if (Str(e, "method", "") != kWarmupMethod) continue;
    warmup_sent += Num(e, "bytes_sent");
    warmup_received += Num(e, "bytes_received");
  }
  row["app_bytes_sent_warmup"] = warmup_sent;
  row["app_bytes_received_warmup"] = warmup_received;
  row["rpcs"] = Num(s, "rpcs");
  row["job_execution_seconds"] = Num(s, "Job Execution Time");
  if (job == "worker") row["examples_per_sec"] = Num(s, "examples_per_sec");
  return row;
}

// A summary's interface counters, as the report's keys name them.
constexpr std::pair<const char*, const char*> kNetKeys[] = {
    {"net_bytes_sent", "Total bytes sent over network"},
    {"net_bytes_received", "Total bytes received over network"},
    {"loopback_bytes_sent", "network_loopback_bytes_sent"},
    {"loopback_bytes_received", "network_loopback_bytes_received"},
    {"external_bytes_sent", "network_external_bytes_sent"},
    {"external_bytes_received", "network_external_bytes_received"}};

// Fulcrum's payload on a host's interfaces, from its tasks' peer_traffic: bytes to and from
// peers on the same host went over loopback, the rest over the external interfaces.
void AddPayload(const nlohmann::json& summary, const std::string& host,
                const std::map<std::string, std::string>& host_of, nlohmann::json* h) {
  for (const nlohmann::json& p : Array(summary, "peer_traffic")) {
    auto it = host_of.find(Str(p, "peer", ""));
    const bool local = it != host_of.end() && it->second == host;
    const std::string where = local ? "loopback" : "external";
    for (const char* dir : {"sent", "received"}) {
      const std::string key = absl::StrCat("fulcrum_", where, "_bytes_", dir);
      (*h)[key] = (*h)[key].get<double>() + Num(p, absl::StrCat("bytes_", dir).c_str());
    }
  }
}

// Splits each interface class of a host into Fulcrum's payload and the rest ("other_...":
// protocol headers, and any other process's traffic in the namespace, e.g. a TensorFlow
// baseline on the same node).
void AddOtherTraffic(nlohmann::json* h) {
  for (const char* where : {"loopback", "external"}) {
    for (const char* dir : {"sent", "received"}) {
      const double all = (*h)[absl::StrCat(where, "_bytes_", dir)].get<double>();
      const double ours = (*h)[absl::StrCat("fulcrum_", where, "_bytes_", dir)].get<double>();
      (*h)[absl::StrCat("other_", where, "_bytes_", dir)] = std::max(0.0, all - ours);
    }
  }
}

}  // namespace
nlohmann::json LeftSummary(const std::filesystem::path& task_dir, absl::Time since) {
  const std::filesystem::path path = task_dir / "summary.json";
  std::error_code ec;
  const auto written = std::filesystem::last_write_time(path, ec);
  if (ec) return nullptr;
  if (absl::FromChrono(std::chrono::file_clock::to_sys(written)) < since) return nullptr;
  std::ifstream in(path);
  nlohmann::json s = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!s.is_object()) return nullptr;
  s["vanished"] = true;
  return s;
}

namespace {

// A new host row, every figure at 0.
nlohmann::json HostRow(const std::string& host) {
  nlohmann::json h;
  h["host"] = host;
  h["tasks"] = nlohmann::json::array();
  for (const char* k : {"cpu_percent_mean", "cpu_seconds", "peak_rss_bytes"}) h[k] = 0.0;
  for (const auto& [key, from] : kNetKeys) h[key] = 0.0;
  for (const char* where : {"loopback", "external"}) {
    for (const char* dir : {"sent", "received"}) {
      h[absl::StrCat("fulcrum_", where, "_bytes_", dir)] = 0.0;
    }
  }
  h["interfaces"] = nlohmann::json::array();
  h["interfaces_from"] = "";
  h["tcp"] = nullptr;  // the sum of its processes' tcp_sockets, when they read them
  return h;
}

void Add(nlohmann::json* h, const char* key, double x) { (*h)[key] = (*h)[key].get<double>() + x; }

// The cluster's totals over the task rows: a process's CPU and memory once (a row that shares
// its process with an earlier one adds none), each role's application bytes, the workers'
// examples/s.
nlohmann::json ClusterTotals(const nlohmann::json& tasks) {
  nlohmann::json cluster;
  cluster["tasks"] = tasks.size();
  for (const char* k :
       {"cpu_seconds", "cpu_percent_mean", "peak_rss_bytes", "app_bytes_sent", "app_bytes_received",
        "app_bytes_sent_warmup", "app_bytes_received_warmup"}) {
    cluster[k] = 0.0;
    const bool per_process = !absl::StartsWith(k, "app_");
    for (const nlohmann::json& t : tasks) {
      if (!(per_process && t.contains("same_process_as"))) Add(&cluster, k, t[k].get<double>());
    }
  }
  // The sum of the workers' steady-state rates, named as report.json's own sum is (the run's
  // throughput is report.json's examples_per_sec, docs/profiler.md).
  cluster["workers_examples_per_sec"] = 0.0;
  for (const nlohmann::json& t : tasks) {
    if (t.contains("examples_per_sec")) {
      Add(&cluster, "workers_examples_per_sec", t["examples_per_sec"]);
    }
  }
  return cluster;
}

// The ps tasks side by side: each one's application bytes (both ways), CPU time and applies,
// and its share of the ps tasks' total of each (0 when the total is 0).
nlohmann::json BalanceRows(const nlohmann::json& tasks, const nlohmann::json& ps_summaries) {
  std::map<int, double> applies;  // by ps index
  if (ps_summaries.is_array()) {
    for (const nlohmann::json& s : ps_summaries) {
      applies[static_cast<int>(Num(s, "task_index"))] = Num(s, "pushes_applied");
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  double totals[3] = {0, 0, 0};
  for (const nlohmann::json& t : tasks) {
    if (t["job"] != "ps") continue;
    const double figures[3] = {
        t["app_bytes_sent"].get<double>() + t["app_bytes_received"].get<double>(),
        t["cpu_seconds"].get<double>(), applies[t["index"].get<int>()]};
    for (int i = 0; i < 3; ++i) totals[i] += figures[i];
    rows.push_back({{"task", t["task"]},
                    {"index", t["index"]},
                    {"bytes", figures[0]},
                    {"cpu_seconds", figures[1]},
                    {"applies", figures[2]}});
  }
  for (nlohmann::json& row : rows) {
    int i = 0;
    for (const char* key : {"bytes", "cpu_seconds", "applies"}) {
      row[absl::StrCat(key, "_share")] = totals[i] > 0 ? row[key].get<double>() / totals[i] : 0.0;
      ++i;
    }
  }
  return rows;
}

// The report's task summaries as (job, summary), in a fixed order: chief, ps by index, workers
// by index.
std::vector<std::pair<std::string, const nlohmann::json*>> Summaries(const nlohmann::json& r) {
  std::vector<std::pair<std::string, const nlohmann::json*>> summaries;
  if (r.contains("chief") && r["chief"].is_object()) summaries.emplace_back("chief", &r["chief"]);
  for (const char* job : {"ps", "workers"}) {
    if (!r.contains(job) || !r[job].is_array()) continue;
    for (const nlohmann::json& s : r[job]) {
      if (!s.is_object()) continue;
      summaries.emplace_back(std::string(job) == "ps" ? "ps" : "worker", &s);
    }
  }
  return summaries;
}

}  // namespace

void AddClusterTables(nlohmann::json* report) {
  nlohmann::json& r = *report;
  const std::vector<std::pair<std::string, const nlohmann::json*>> summaries = Summaries(r);
  nlohmann::json tasks = nlohmann::json::array();
  std::map<std::string, std::string> host_of;  // task name ("ps-0") -> host
  for (const auto& [job, s] : summaries) {
    tasks.push_back(TaskRow(*s, job));
    host_of[tasks.back()["task"]] = tasks.back()["host"];
  }
  std::map<std::string, nlohmann::json> hosts;  // by host name
  std::vector<std::string> host_order;
  std::map<std::string, std::string> process_of;  // "host/pid" -> the first task it runs
  std::vector<std::pair<std::string, const nlohmann::json*>> processes;  // (host, summary)
  std::vector<std::pair<std::string, const nlohmann::json*>> named;      // (task, summary)
  for (size_t i = 0; i < summaries.size(); ++i) {
    const nlohmann::json& s = *summaries[i].second;
    nlohmann::json& row = tasks[i];
    const std::string host = row["host"];
    auto [it, inserted] = hosts.try_emplace(host, HostRow(host));
    if (inserted) host_order.push_back(host);
    nlohmann::json& h = it->second;
    h["tasks"].push_back(row["task"]);
    // A process is counted once, whatever roles it plays (worker 0 as the chief): its CPU and
    // memory are the process's, read alike by each role's profiler.
    const auto pid = static_cast<int64_t>(row["pid"].get<double>());
    const std::string process =
        pid > 0 ? absl::StrCat(host, "/", pid) : row["task"].get<std::string>();
    if (auto [first, fresh] = process_of.try_emplace(process, row["task"]); !fresh) {
      row["same_process_as"] = first->second;
    } else {
      for (const char* k : {"cpu_percent_mean", "cpu_seconds", "peak_rss_bytes"}) {
        Add(&h, k, row[k].get<double>());  // processes add up
      }
      processes.emplace_back(host, &s);
      named.emplace_back(row["task"].get<std::string>(), &s);
    }
    AddPayload(s, host, host_of, &h);
    // Interface counters are the namespace's, read alike by each of its tasks: the task that
    // saw the most bytes (it sampled longest) speaks for the host.
    const double seen =
        Num(s, "Total bytes sent over network") + Num(s, "Total bytes received over network");
    if (seen >= h["net_bytes_sent"].get<double>() + h["net_bytes_received"].get<double>()) {
      for (const auto& [key, from] : kNetKeys) h[key] = Num(s, from);
      if (s.contains("network_interfaces")) h["interfaces"] = s["network_interfaces"];
      h["interfaces_from"] = row["task"];
    }
  }
  // TCP connections: each process's once (each role's profiler reads the same ones).
  for (auto& [host, tcp] : TcpByHost(processes)) hosts[host]["tcp"] = std::move(tcp);
  nlohmann::json cluster = ClusterTotals(tasks);
  cluster["hosts"] = host_order.size();
  cluster["processes"] = process_of.size();
  r["machines"] = MachineRows(named);
  cluster["other_cpus_max"] = MaxOtherCpus(r["machines"]);
  nlohmann::json host_rows = nlohmann::json::array();
  for (const auto& [key, from] : kNetKeys) cluster[key] = 0.0;
  r["traffic"] = TrafficRows(summaries);
  std::map<std::string, nlohmann::json> app = AppByHost(r["traffic"], host_of);
  for (const std::string& name : host_order) {
    nlohmann::json& h = hosts[name];
    AddOtherTraffic(&h);
    h["app"] = std::move(app[name]);
    h["layers"] = HostLayers(h);
    for (const auto& [key, from] : kNetKeys) Add(&cluster, key, h[key].get<double>());
    host_rows.push_back(std::move(h));
  }
  cluster["layers"] = ClusterLayers(host_rows);
  r["tasks"] = std::move(tasks);
  r["hosts"] = std::move(host_rows);
  r["cluster"] = std::move(cluster);
  r["balance"] = BalanceRows(r["tasks"], r.contains("ps") ? r["ps"] : nlohmann::json());
}

absl::StatusOr<std::pair<std::filesystem::path, nlohmann::json>> ReadReport(
    const std::string& flag, const std::filesystem::path& path) {
  const std::filesystem::path file =
      std::filesystem::is_directory(path) ? path / "report.json" : path;
  absl::StatusOr<std::string> text = ReadFileToString(file);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path.string(), ": ", text.status().message()));
  }
  nlohmann::json report = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path.string(), ": ", file.string(), " is not a JSON object"));
  }
  return std::make_pair(file, std::move(report));
}

absl::Status RefreshReport(const std::filesystem::path& path) {
  FULCRUM_ASSIGN_OR_RETURN(auto read, ReadReport("--refresh_report", path));
  AddClusterTables(&read.second);
  return WriteFileAtomically(read.first, read.second.dump(2) + "\n");
}

absl::Status WriteSingleRunReport(const std::filesystem::path& run_dir) {
  FULCRUM_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(run_dir / "summary.json"));
  const nlohmann::json summary = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!summary.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat((run_dir / "summary.json").string(), " is not a JSON object"));
  }
  nlohmann::json report;
  for (const auto& [key, value] : summary.items()) {
    if (!value.is_structured()) report[key] = value;  // the settings and figures
  }
  report["run_id"] = run_dir.filename().string();
  report["single_mode"] = true;
  report["num_ps"] = 0;
  report["num_workers"] = 1;
  report["workers_examples_per_sec"] = Num(summary, "examples_per_sec");
  report["vanished_tasks"] = nlohmann::json::array();
  report["ps"] = nlohmann::json::array();
  report["workers"] = nlohmann::json::array({summary});
  AddClusterTables(&report);
  const std::filesystem::path json_path = run_dir / "report.json";
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(json_path, report.dump(2) + "\n"));
  if (absl::Status html = WriteReportHtml(json_path, run_dir / "report.html"); !html.ok()) {
    spdlog::warn("report.html not written ({}); report.json has every figure", html.ToString());
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::chief
