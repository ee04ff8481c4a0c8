#include "chief/headline.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chief/json_fields.h"
#include "chief/whatif.h"

namespace fulcrum::chief {
namespace {

std::string Bytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000.0 && u < 4) {
    b /= 1000.0;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f B", b) : absl::StrFormat("%.2f %s", b, units[u]);
}

// "worker:0 6200 + worker:1 6145 = 12345" from the workers' summaries (steady state).
std::string PerWorker(const nlohmann::json& report) {
  std::vector<std::string> parts;
  for (const nlohmann::json& w : report.value("workers", nlohmann::json::array())) {
    if (!w.is_object()) continue;
    parts.push_back(absl::StrFormat("worker:%d %.0f", static_cast<int>(Num(w, "task_index")),
                                    Num(w, "examples_per_sec")));
  }
  if (parts.empty()) return "no worker summaries";
  return absl::StrFormat("%s = %.0f", absl::StrJoin(parts, " + "),
                         Num(report, "workers_examples_per_sec"));
}

// The workers' mean step split into its phases, in the order a sequential step runs them.
std::string StepSplit(const nlohmann::json& report) {
  static constexpr const char* kPhases[] = {"data",     "pull", "forward",
                                            "backward", "push", "sync_wait"};
  std::map<std::string, double> sum;
  int n = 0;
  for (const nlohmann::json& w : report.value("workers", nlohmann::json::array())) {
    if (!w.is_object() || !w.contains("step_phase_mean_ms")) continue;
    for (const char* p : kPhases) sum[p] += Num(w["step_phase_mean_ms"], p);
    ++n;
  }
  if (n == 0) return "no step records (profiling off?)";
  double total = 0.0;
  std::vector<std::string> parts;
  for (const char* p : kPhases) {
    total += sum[p] / n;
    parts.push_back(absl::StrFormat("%s %.2f", p, sum[p] / n));
  }
  return absl::StrFormat("%s = %.2f ms", absl::StrJoin(parts, " | "), total);
}

// Each ps's share of the ps tasks' application bytes and CPU time, and its applies, from
// report.json's balance rows (chief/report.h).
std::vector<std::string> PsShares(const nlohmann::json& report) {
  std::vector<std::string> lines;
  for (const nlohmann::json& b : report.value("balance", nlohmann::json::array())) {
    lines.push_back(absl::StrFormat("  ps:%d  bytes %s (%.0f%%)  cpu %.2f s (%.0f%%)  applies %.0f",
                                    static_cast<int>(Num(b, "index")), Bytes(Num(b, "bytes")),
                                    100.0 * Num(b, "bytes_share"), Num(b, "cpu_seconds"),
                                    100.0 * Num(b, "cpu_seconds_share"), Num(b, "applies")));
  }
  return lines;
}

// Sync mode: the straggler the ps tasks named at the end, or that none was.
std::vector<std::string> Stragglers(const nlohmann::json& report) {
  std::vector<std::string> named;
  bool judged = false;
  for (const nlohmann::json& r : report.value("stragglers", nlohmann::json::array())) {
    judged = true;
    if (!r.contains("worker") || !r["worker"].is_string()) continue;
    named.push_back(absl::StrFormat("%s holds the sync steps back by %.1f ms (%s, since step %d)",
                                    r["worker"].get<std::string>(), Num(r, "held_back_ms"),
                                    r.value("ps", "?"),
                                    static_cast<int64_t>(Num(r, "since_step"))));
  }
  if (named.empty() && judged) named.push_back("no worker holds the sync steps back");
  for (std::string& line : named) line = "straggler: " + line;
  return named;
}

// Bytes sent and received per network interface of each host (interfaces with none left out).
std::vector<std::string> Interfaces(const nlohmann::json& report) {
  std::vector<std::string> lines;
  for (const nlohmann::json& h : report.value("hosts", nlohmann::json::array())) {
    for (const nlohmann::json& i : h.value("interfaces", nlohmann::json::array())) {
      const double tx = Num(i, "tx_bytes"), rx = Num(i, "rx_bytes");
      if (tx == 0 && rx == 0) continue;
      lines.push_back(absl::StrFormat("  %s %s: sent %s, received %s", h.value("host", "?"),
                                      i.value("name", "?"), Bytes(tx), Bytes(rx)));
    }
  }
  return lines;
}

// The cluster's bytes sent at the three layers, per path that carried any: the protocol's
// overhead over the payload, and the interfaces' payload against TCP's count.
std::vector<std::string> Layers(const nlohmann::json& report) {
  std::vector<std::string> lines;
  const nlohmann::json cluster = report.value("cluster", nlohmann::json());
  const nlohmann::json layers =
      cluster.is_object() ? cluster.value("layers", nlohmann::json()) : nlohmann::json();
  if (!layers.is_object()) return lines;
  for (const char* path : {"loopback", "external"}) {
    const nlohmann::json l = layers.value(path, nlohmann::json());
    const nlohmann::json sent = l.is_object() ? l.value("sent", nlohmann::json()) : nullptr;
    if (Num(sent, "tcp_bytes") == 0) continue;
    auto percent = [](const nlohmann::json& x) {
      return x.is_number() ? absl::StrFormat("%+.2f%%", 100 * x.get<double>()) : std::string("-");
    };
    lines.push_back(
        absl::StrFormat("  %s: app %s, tcp %s (protocol %s), interface payload %s (vs tcp %s); %d "
                        "retransmits",
                        path, Bytes(Num(sent, "app_bytes")), Bytes(Num(sent, "tcp_bytes")),
                        percent(sent.value("protocol_overhead", nlohmann::json())),
                        Bytes(Num(sent, "interface_payload_bytes")),
                        percent(sent.value("interface_vs_tcp", nlohmann::json())),
                        static_cast<int64_t>(Num(l, "retransmits"))));
  }
  return lines;
}

// Each machine's CPUs over the run: the job's and other work's (machines.h), so a run measured
// beside other programs says so where it ends.
std::vector<std::string> Machines(const nlohmann::json& report) {
  std::vector<std::string> lines;
  for (const nlohmann::json& m : report.value("machines", nlohmann::json::array())) {
    if (!At(m, "other_cpus").is_number()) continue;
    lines.push_back(absl::StrFormat(
        "machine %s (%d cores): %.2f CPUs busy over %.1f s, the job's %.2f, other work %.2f "
        "(load %.1f)",
        Str(m, "machine", "?"), static_cast<int>(Num(m, "cores")), Num(m, "busy_cpus"),
        Num(m, "window_seconds"), Num(m, "job_cpus"), Num(m, "other_cpus"), Num(m, "load1_mean")));
  }
  return lines;
}

}  // namespace

std::vector<std::string> HeadlineLines(const nlohmann::json& report, const std::string& html_path) {
  std::vector<std::string> lines;
  const bool failed = report.value("failed", false);
  lines.push_back(absl::StrCat("==== run ", report.value("run_id", "?"), failed ? " FAILED" : "",
                               ": ", report.value("stop_reason", "?"), " ===="));
  lines.push_back(absl::StrFormat(
      "total examples/sec: %.1f (examples of the applied updates over %.2f s of training)",
      Num(report, "examples_per_sec"), Num(report, "train_seconds")));
  lines.push_back("examples/sec per worker (steady state): " + PerWorker(report));
  lines.push_back("step time, workers' mean: " + StepSplit(report));
  const std::vector<std::string> stragglers = Stragglers(report);
  lines.insert(lines.end(), stragglers.begin(), stragglers.end());
  const std::vector<std::string> ps = PsShares(report);
  if (!ps.empty()) lines.push_back("per ps (share of the ps tasks'):");
  lines.insert(lines.end(), ps.begin(), ps.end());
  const std::vector<std::string> net = Interfaces(report);
  lines.push_back(net.empty() ? "bytes per interface: none recorded (profiling off?)"
                              : "bytes per interface:");
  lines.insert(lines.end(), net.begin(), net.end());
  const std::vector<std::string> layers = Layers(report);
  if (!layers.empty()) lines.push_back("bytes sent at three layers:");
  lines.insert(lines.end(), layers.begin(), layers.end());
  const std::vector<std::string> machines = Machines(report);
  lines.insert(lines.end(), machines.begin(), machines.end());
  const std::vector<std::string> whatif = WhatIfLines(report.value("whatif", nlohmann::json()));
  lines.insert(lines.end(), whatif.begin(), whatif.end());
  lines.push_back(absl::StrCat("report: ", html_path, " (every figure in report.json beside it)"));
  return lines;
}

}  // namespace fulcrum::chief
