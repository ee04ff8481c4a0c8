#include "chief/report.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace fulcrum::chief {
namespace {

double Num(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0.0;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string Str(const nlohmann::json& j, const char* key, const std::string& fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// One summary's row of the task table.
nlohmann::json TaskRow(const nlohmann::json& s, const std::string& job) {
  const int index = static_cast<int>(Num(s, "task_index"));
  nlohmann::json row;
  row["task"] = job + "-" + std::to_string(index);
  row["job"] = job;
  row["index"] = index;
  row["host"] = Str(s, "host", "unknown");
  row["profile"] = Str(s, "profile", "off");
  row["cpu_seconds"] = Num(s, "cpu_seconds");
  row["cpu_percent_mean"] = Num(s, "cpu_percent_mean");
  row["cpu_percent_max"] = Num(s, "cpu_percent_max");
  row["peak_rss_bytes"] = Num(s, "peak_rss_bytes");
  row["net_bytes_sent"] = Num(s, "Total bytes sent over network");
  row["net_bytes_received"] = Num(s, "Total bytes received over network");
  row["loopback_bytes_sent"] = Num(s, "network_loopback_bytes_sent");
  row["loopback_bytes_received"] = Num(s, "network_loopback_bytes_received");
  row["external_bytes_sent"] = Num(s, "network_external_bytes_sent");
  row["external_bytes_received"] = Num(s, "network_external_bytes_received");
  row["app_bytes_sent"] = Num(s, "app_bytes_sent");
  row["app_bytes_received"] = Num(s, "app_bytes_received");
  row["rpcs"] = Num(s, "rpcs");
  row["job_execution_seconds"] = Num(s, "Job Execution Time");
  if (job == "worker") row["examples_per_sec"] = Num(s, "examples_per_sec");
  return row;
}

constexpr const char* kNetKeys[] = {"net_bytes_sent",      "net_bytes_received",
                                    "loopback_bytes_sent", "loopback_bytes_received",
                                    "external_bytes_sent", "external_bytes_received"};

}  // namespace

void AddClusterTables(nlohmann::json* report) {
  nlohmann::json& r = *report;
  // Summaries in a fixed order: chief, ps by index, workers by index.
  std::vector<std::pair<std::string, const nlohmann::json*>> summaries;
  if (r.contains("chief") && r["chief"].is_object()) summaries.emplace_back("chief", &r["chief"]);
  for (const char* job : {"ps", "workers"}) {
    if (!r.contains(job) || !r[job].is_array()) continue;
    for (const nlohmann::json& s : r[job]) {
      if (!s.is_object()) continue;
      summaries.emplace_back(std::string(job) == "ps" ? "ps" : "worker", &s);
    }
  }
  nlohmann::json tasks = nlohmann::json::array();
  std::map<std::string, nlohmann::json> hosts;  // by host name
  std::vector<std::string> host_order;
  for (const auto& [job, s] : summaries) {
    nlohmann::json row = TaskRow(*s, job);
    const std::string host = row["host"];
    auto [it, inserted] = hosts.try_emplace(host);
    nlohmann::json& h = it->second;
    if (inserted) {
      host_order.push_back(host);
      h["host"] = host;
      h["tasks"] = nlohmann::json::array();
      h["cpu_percent_mean"] = 0.0;
      h["cpu_seconds"] = 0.0;
      h["peak_rss_bytes"] = 0.0;
      for (const char* k : kNetKeys) h[k] = 0.0;
      h["interfaces"] = nlohmann::json::array();
      h["interfaces_from"] = "";
    }
    h["tasks"].push_back(row["task"]);
    h["cpu_percent_mean"] =
        h["cpu_percent_mean"].get<double>() + row["cpu_percent_mean"].get<double>();
    h["cpu_seconds"] = h["cpu_seconds"].get<double>() + row["cpu_seconds"].get<double>();
    h["peak_rss_bytes"] = h["peak_rss_bytes"].get<double>() + row["peak_rss_bytes"].get<double>();
    // The task that saw the most bytes on the shared interfaces speaks for the host.
    if (row["net_bytes_sent"].get<double>() + row["net_bytes_received"].get<double>() >=
        h["net_bytes_sent"].get<double>() + h["net_bytes_received"].get<double>()) {
      for (const char* k : kNetKeys) h[k] = row[k];
      if (s->contains("network_interfaces")) h["interfaces"] = (*s)["network_interfaces"];
      h["interfaces_from"] = row["task"];
    }
    tasks.push_back(std::move(row));
  }
  nlohmann::json host_rows = nlohmann::json::array();
  nlohmann::json cluster;
  cluster["tasks"] = tasks.size();
  cluster["hosts"] = host_order.size();
  double cpu_seconds = 0, cpu_mean = 0, rss = 0, app_sent = 0, app_received = 0, rate = 0;
  for (const nlohmann::json& t : tasks) {
    cpu_seconds += t["cpu_seconds"].get<double>();
    cpu_mean += t["cpu_percent_mean"].get<double>();
    rss += t["peak_rss_bytes"].get<double>();
    app_sent += t["app_bytes_sent"].get<double>();
    app_received += t["app_bytes_received"].get<double>();
    if (t.contains("examples_per_sec")) rate += t["examples_per_sec"].get<double>();
  }
  std::map<std::string, double> net;
  for (const std::string& name : host_order) {
    for (const char* k : kNetKeys) net[k] += hosts[name][k].get<double>();
    host_rows.push_back(std::move(hosts[name]));
  }
  cluster["cpu_seconds"] = cpu_seconds;
  cluster["cpu_percent_mean"] = cpu_mean;
  cluster["peak_rss_bytes"] = rss;
  for (const char* k : kNetKeys) cluster[k] = net[k];
  cluster["app_bytes_sent"] = app_sent;
  cluster["app_bytes_received"] = app_received;
  cluster["examples_per_sec"] = rate;
  r["tasks"] = std::move(tasks);
  r["hosts"] = std::move(host_rows);
  r["cluster"] = std::move(cluster);
}

}  // namespace fulcrum::chief
