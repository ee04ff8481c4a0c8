// bench/grpc_bench: what a run found, one Row per (benchmark, payload, layout, mode), and its
// three outputs: tables on stdout (markdown), --json (every row, plus the run's command, date,
// machine and load) and --csv (one line per row). Keys are documented in docs/transport.md.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace fulcrum::bench {

struct RatioRange {
  double median = 0, min = 0, max = 0;
};

struct Row {
  std::string benchmark;      // latency, bandwidth, ps_throughput, ps_path
  std::string mode;           // tcp, serialized, bytebuffer, fulcrum_ps
  std::string payload;        // "1 MiB x8", "skew", "syn16mb"
  std::string scheme;         // size, uniform-small, ..., skew; the model for ps_path
  int64_t message_bytes = 0;  // payload bytes of one message (a parameter set, a model)
  int buffers = 0;
  int servers = 1, clients = 1;
  int window = 0;  // bandwidth: messages in flight
  int rounds = 0;  // reported rounds
  int64_t steps = 0, calls = 0;
  // Payload bytes moved in the reported rounds, and what the steps asked for.
  int64_t bytes_sent = 0, bytes_received = 0, bytes_expected = 0;
  double seconds = 0;
  // Per round trip (latency, ps_path) or per step (ps_throughput), pooled over the rounds.
  int64_t samples = 0;
  double p50_us = 0, p95_us = 0, p99_us = 0, mean_us = 0;
  // Medians over the rounds: payload MB (10^6 bytes, both ways) per second, calls per second.
  double mb_per_s = 0, calls_per_s = 0;
  // Pairwise per round against another mode of the same item (median, min, max):
  // time_vs_tcp (this mode's time / TCP's), speed_vs_tcp (this MB/s / TCP's),
  // time_vs_serialized, time_vs_bytebuffer (ps_path: the PS's time / raw gRPC's).
  std::map<std::string, RatioRange> ratios;
};

struct RunInfo {
  std::string command;
  std::string date;  // UTC, ISO 8601
  std::string loadavg_before, loadavg_after;
  std::string network;  // "loopback" or "netns <prefix> (...)"
  std::string cpu;
  int cpus = 0;
  int pairs = 0;
  int round_ms = 0;
  // The payload schemes' buffer sizes in this run (fixed by --payload_seed and the classes).
  std::map<std::string, std::vector<int64_t>> schemes;
};

// The tables, one per benchmark present in `rows`.
void PrintTables(const std::vector<Row>& rows, const RunInfo& info);
absl::Status WriteJson(const std::string& path, const std::vector<Row>& rows, const RunInfo& info);
absl::Status WriteCsv(const std::string& path, const std::vector<Row>& rows);

}  // namespace fulcrum::bench
