#include "bench/grpc_bench_report.h"

#include <cstdio>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace fulcrum::bench {
namespace {

const std::vector<std::string> kRatioNames = {"time_vs_tcp", "speed_vs_tcp", "time_vs_serialized",
                                              "time_vs_bytebuffer"};

std::string Ratio(const Row& r, const std::string& name) {
  const auto it = r.ratios.find(name);
  if (it == r.ratios.end()) return "";
  return absl::StrFormat("%.2f (%.2f–%.2f)", it->second.median, it->second.min, it->second.max);
}

std::string Us(double us) {
  return us >= 10000 ? absl::StrFormat("%.0f", us) : absl::StrFormat("%.1f", us);
}

void PrintLatency(const std::vector<Row>& rows) {
  std::printf(
      "\n### latency: echo round trip of one message (p50/p95/p99 over every round trip)\n\n"
      "| payload | buffers | bytes | mode | n | p50 µs | p95 µs | p99 µs | MB/s | time ×TCP |\n"
      "|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n");
  for (const Row& r : rows) {
    if (r.benchmark != "latency") continue;
    std::printf("| %s | %d | %lld | %s | %lld | %s | %s | %s | %.0f | %s |\n", r.payload.c_str(),
                r.buffers, static_cast<long long>(r.message_bytes), r.mode.c_str(),
                static_cast<long long>(r.samples), Us(r.p50_us).c_str(), Us(r.p95_us).c_str(),
                Us(r.p99_us).c_str(), r.mb_per_s, Ratio(r, "time_vs_tcp").c_str());
  }
}

void PrintBandwidth(const std::vector<Row>& rows) {
  std::printf(
      "\n### bandwidth: one way, a window of messages in flight (median over rounds)\n\n"
      "| payload | buffers | bytes | window | mode | MB/s | msgs/s | speed ×TCP |\n"
      "|---|---:|---:|---:|---|---:|---:|---|\n");
  for (const Row& r : rows) {
    if (r.benchmark != "bandwidth") continue;
    std::printf("| %s | %d | %lld | %d | %s | %.0f | %.0f | %s |\n", r.payload.c_str(), r.buffers,
                static_cast<long long>(r.message_bytes), r.window, r.mode.c_str(), r.mb_per_s,
                r.calls_per_s, Ratio(r, "speed_vs_tcp").c_str());
  }
}

void PrintPsThroughput(const std::vector<Row>& rows) {
  std::printf(
      "\n### ps_throughput: N clients push+pull a parameter set over M servers (one RPC per "
      "buffer, all in flight; aggregate)\n\n"
      "| scheme | M | N | buffers | set bytes | mode | MB/s | calls/s | step p50 µs | speed ×TCP "
      "|\n"
      "|---|---:|---:|---:|---:|---|---:|---:|---:|---|\n");
  for (const Row& r : rows) {
    if (r.benchmark != "ps_throughput") continue;
    std::printf("| %s | %d | %d | %d | %lld | %s | %.0f | %.0f | %s | %s |\n", r.payload.c_str(),
                r.servers, r.clients, r.buffers, static_cast<long long>(r.message_bytes),
                r.mode.c_str(), r.mb_per_s, r.calls_per_s, Us(r.p50_us).c_str(),
                Ratio(r, "speed_vs_tcp").c_str());
  }
}

void PrintPsPath(const std::vector<Row>& rows) {
  std::printf(
      "\n### ps_path: one push+pull of a model through the Fulcrum PS (its gRPC data path, and "
      "its tcp data plane) beside raw round trips of the same bytes (p50 µs per round trip; "
      "ratios per round)\n\n"
      "| model | bytes | PS µs | PS-tcp µs | TCP µs | gRPC µs | gRPC-BB µs | PS MB/s | PS-tcp "
      "MB/s | TCP MB/s | PS/TCP speed | PS-tcp/TCP speed (≥ 0.7) | PS/gRPC time (≤ 1.3) | "
      "PS-tcp/gRPC time | PS/gRPC-BB time |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|\n");
  std::map<std::string, std::map<std::string, const Row*>> by_model;
  std::vector<std::string> order;
  for (const Row& r : rows) {
    if (r.benchmark != "ps_path") continue;
    if (by_model.count(r.payload) == 0) order.push_back(r.payload);
    by_model[r.payload][r.mode] = &r;
  }
  for (const std::string& model : order) {
    auto& m = by_model[model];
    auto us = [&](const char* mode) {
      return m.count(mode) ? Us(m[mode]->p50_us) : std::string("—");
    };
    auto mb = [&](const char* mode) {
      return m.count(mode) ? absl::StrFormat("%.0f", m[mode]->mb_per_s) : std::string("—");
    };
    auto ratio = [&](const char* mode, const char* what) {
      return m.count(mode) ? Ratio(*m[mode], what) : std::string();
    };
    const Row* ps = m.count("fulcrum_ps") ? m["fulcrum_ps"] : nullptr;
    std::printf("| %s | %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                model.c_str(), static_cast<long long>(ps != nullptr ? ps->message_bytes : 0),
                us("fulcrum_ps").c_str(), us("fulcrum_ps_tcp").c_str(), us("tcp").c_str(),
                us("serialized").c_str(), us("bytebuffer").c_str(), mb("fulcrum_ps").c_str(),
                mb("fulcrum_ps_tcp").c_str(), mb("tcp").c_str(),
                ratio("fulcrum_ps", "speed_vs_tcp").c_str(),
                ratio("fulcrum_ps_tcp", "speed_vs_tcp").c_str(),
                ratio("fulcrum_ps", "time_vs_serialized").c_str(),
                ratio("fulcrum_ps_tcp", "time_vs_serialized").c_str(),
                ratio("fulcrum_ps", "time_vs_bytebuffer").c_str());
  }
}

nlohmann::json RowJson(const Row& r) {
  nlohmann::json j = {{"benchmark", r.benchmark},
                      {"mode", r.mode},
                      {"payload", r.payload},
                      {"scheme", r.scheme},
                      {"message_bytes", r.message_bytes},
                      {"buffers", r.buffers},
                      {"servers", r.servers},
                      {"clients", r.clients},
                      {"window", r.window},
                      {"rounds", r.rounds},
                      {"steps", r.steps},
                      {"calls", r.calls},
                      {"bytes_sent", r.bytes_sent},
                      {"bytes_received", r.bytes_received},
                      {"bytes_expected", r.bytes_expected},
                      {"seconds", r.seconds},
                      {"samples", r.samples},
                      {"p50_us", r.p50_us},
                      {"p95_us", r.p95_us},
                      {"p99_us", r.p99_us},
                      {"mean_us", r.mean_us},
                      {"mb_per_s", r.mb_per_s},
                      {"calls_per_s", r.calls_per_s}};
  nlohmann::json ratios = nlohmann::json::object();
  for (const auto& [name, v] : r.ratios) {
    ratios[name] = {{"median", v.median}, {"min", v.min}, {"max", v.max}};
  }
  j["ratios"] = ratios;
  return j;
}

}  // namespace

void PrintTables(const std::vector<Row>& rows, const RunInfo& info) {
  std::printf(
      "\ngrpc_bench %s\n%s; %s (%d CPUs); %d reported round(s) of %d ms per mode after a "
      "warm-up round\nloadavg before: %s\nloadavg after:  %s\n",
      info.date.c_str(), info.network.c_str(), info.cpu.c_str(), info.cpus, info.pairs,
      info.round_ms, info.loadavg_before.c_str(), info.loadavg_after.c_str());
  for (const auto& [name, sizes] : info.schemes) {
    std::printf("scheme %s: %s\n", name.c_str(), absl::StrJoin(sizes, " ").c_str());
  }
  std::set<std::string> present;
  for (const Row& r : rows) present.insert(r.benchmark);
  if (present.count("latency")) PrintLatency(rows);
  if (present.count("bandwidth")) PrintBandwidth(rows);
  if (present.count("ps_throughput")) PrintPsThroughput(rows);
  if (present.count("ps_path")) PrintPsPath(rows);
  std::fflush(stdout);
}

absl::Status WriteJson(const std::string& path, const std::vector<Row>& rows, const RunInfo& info) {
  nlohmann::json j;
  j["meta"] = {{"command", info.command},
               {"date", info.date},
               {"loadavg_before", info.loadavg_before},
               {"loadavg_after", info.loadavg_after},
               {"network", info.network},
               {"cpu", info.cpu},
               {"cpus", info.cpus},
               {"pairs", info.pairs},
               {"round_ms", info.round_ms},
               {"schemes", info.schemes}};
  j["rows"] = nlohmann::json::array();
  for (const Row& r : rows) j["rows"].push_back(RowJson(r));
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status WriteCsv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream out(path);
  std::vector<std::string> header = {
      "benchmark",  "mode",           "payload",        "scheme",   "message_bytes", "buffers",
      "servers",    "clients",        "window",         "rounds",   "steps",         "calls",
      "bytes_sent", "bytes_received", "bytes_expected", "seconds",  "samples",       "p50_us",
      "p95_us",     "p99_us",         "mean_us",        "mb_per_s", "calls_per_s"};
  for (const auto& name : kRatioNames) {
    for (const char* part : {"", "_min", "_max"}) header.push_back(name + part);
  }
  out << absl::StrJoin(header, ",") << "\n";
  for (const Row& r : rows) {
    std::vector<std::string> f = {r.benchmark,
                                  r.mode,
                                  absl::StrCat("\"", r.payload, "\""),
                                  r.scheme,
                                  absl::StrCat(r.message_bytes),
                                  absl::StrCat(r.buffers),
                                  absl::StrCat(r.servers),
                                  absl::StrCat(r.clients),
                                  absl::StrCat(r.window),
                                  absl::StrCat(r.rounds),
                                  absl::StrCat(r.steps),
                                  absl::StrCat(r.calls),
                                  absl::StrCat(r.bytes_sent),
                                  absl::StrCat(r.bytes_received),
                                  absl::StrCat(r.bytes_expected),
                                  absl::StrFormat("%.6f", r.seconds),
                                  absl::StrCat(r.samples),
                                  absl::StrFormat("%.3f", r.p50_us),
                                  absl::StrFormat("%.3f", r.p95_us),
                                  absl::StrFormat("%.3f", r.p99_us),
                                  absl::StrFormat("%.3f", r.mean_us),
                                  absl::StrFormat("%.3f", r.mb_per_s),
                                  absl::StrFormat("%.3f", r.calls_per_s)};
    for (const auto& name : kRatioNames) {
      const auto it = r.ratios.find(name);
      for (int part = 0; part < 3; ++part) {
        if (it == r.ratios.end()) {
          f.emplace_back();
        } else {
          const double v = part == 0   ? it->second.median
                           : part == 1 ? it->second.min
                                       : it->second.max;
          f.push_back(absl::StrFormat("%.4f", v));
        }
      }
    }
    out << absl::StrJoin(f, ",") << "\n";
  }
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace fulcrum::bench
