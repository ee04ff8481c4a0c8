// grpc_bench: gRPC measured the way a TensorFlow parameter server uses it, after
// TF-gRPC-Bench (Biswas, Lu, Panda, OSU: "Designing a Micro-Benchmark Suite to Evaluate gRPC
// for TensorFlow: Early Experiences", BPOE-9 2018, arXiv:1804.01138), with raw TCP on the
// same path as the limit and the Fulcrum PS path on the same bytes (docs/transport.md).
//
//   grpc_bench [--benchmarks=latency,bandwidth,ps_throughput,ps_path] [--json=F] [--csv=F]
//              [--netns=PREFIX] ...        (--help lists every flag)
//
// This process is the driver: it starts server processes (this binary, --role=server: raw
// TCP and gRPC serialized + bytebuffer services on ports of its own, and a child process of
// the product's ps binary, --ps_binary, with its tcp data plane) and, for ps_throughput, client
// processes (--role=client); it measures latency, bandwidth and the PS path itself. Modes alternate
// round by round (BENCHMARKING.md); figures are medians/percentiles of the reported rounds, ratios
// per round. With --netns=P the servers run in emulated host P-h1 and this driver and the clients
// in P-h2 (root; made by scripts/netns_hosts.sh up 2 --prefix P). Files: grpc_bench_options
// (flags), _payload (sizes and schemes), _tcp, _grpc, _ops (the transports), _process (children),
// _roles (server and client), _stats (rounds), _suites (the benchmarks), _report (outputs).
//
// Exit codes: 0 done (or --netns skipped without root), 2 bad flags, 1 a failure (the
// children's logs are kept and named), 128 + signal after SIGINT/SIGTERM. Every wait has a
// deadline and every child is killed and reaped on the way out.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/exit_code.h"
#include "base/malloc.h"
#include "base/signals.h"
#include "bench/grpc_bench_options.h"
#include "bench/grpc_bench_payload.h"
#include "bench/grpc_bench_roles.h"
#include "bench/grpc_bench_suites.h"
#include "bench/ps_bench_process.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace fulcrum::bench {
namespace {

bool Wants(const GrpcBenchOptions& o, const char* benchmark) {
  return std::find(o.benchmarks.begin(), o.benchmarks.end(), benchmark) != o.benchmarks.end();
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

RunInfo StartInfo(const GrpcBenchOptions& o) {
  RunInfo info;
  info.command = absl::StrJoin(o.argv, " ");
  info.date = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  info.loadavg_before = ReadLoadavg();
  info.network = o.netns.empty() ? "loopback 127.0.0.1"
                                 : absl::StrCat("netns: servers in ", o.netns,
                                                "-h1 (198.18.0.1), "
                                                "clients in ",
                                                o.netns, "-h2");
  info.cpu = CpuModel();
  info.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  info.pairs = o.pairs;
  info.round_ms = static_cast<int>(absl::ToInt64Milliseconds(o.round));
  std::vector<std::string> schemes = o.schemes;
  if (Wants(o, "ps_throughput"))
    schemes.insert(schemes.end(), o.ps_schemes.begin(), o.ps_schemes.end());
  for (const std::string& scheme : schemes) {
    auto spec = SchemePayload(scheme, o.payload);
    if (spec.ok()) info.schemes[scheme] = spec->sizes;
  }
  return info;
}

// Across hosts: checks, then runs this same command again inside P-h2 (exec; no return on
// success). Returns the exit code when it cannot go on.
int EnterClientHost(const GrpcBenchOptions& o) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "grpc_bench: --netns=%s needs root (network namespaces); skipped\n",
                 o.netns.c_str());
    if (!o.json.empty()) {
      std::ofstream(o.json) << nlohmann::json{{"skipped", "--netns needs root"},
                                              {"rows", nlohmann::json::array()}}
                                   .dump(1)
                            << "\n";
    }
    return kExitOk;
  }
  for (const char* h : {"-h1", "-h2"}) {
    if (!std::filesystem::exists(absl::StrCat("/var/run/netns/", o.netns, h))) {
      std::fprintf(stderr,
                   "grpc_bench: --netns=%s: host %s%s not found (make it with "
                   "scripts/netns_hosts.sh up 2 --prefix %s)\n",
                   o.netns.c_str(), o.netns.c_str(), h, o.netns.c_str());
      return kExitBadInput;
    }
  }
  std::vector<std::string> argv = {"/usr/sbin/ip", "netns", "exec", o.netns + "-h2", o.program};
  if (access(argv[0].c_str(), X_OK) != 0) argv[0] = "/sbin/ip";
  argv.insert(argv.end(), o.argv.begin() + 1, o.argv.end());
  argv.push_back("--inside_netns");
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  execv(args[0], args.data());
  std::perror("grpc_bench: cannot exec ip netns exec");
  return kExitRuntimeFailure;
}

absl::Status RunBenchmarks(DriverContext& ctx, std::vector<Row>* rows) {
  const GrpcBenchOptions& o = *ctx.options;
  if (Wants(o, "latency") || Wants(o, "bandwidth")) {
    auto server = StartServer(ctx);
    if (!server.ok()) return server.status();
    auto peer = ConnectPeer(server->address, o.rpc_timeout);
    if (!peer.ok()) return peer.status();
    if (Wants(o, "latency")) {
      if (absl::Status s = RunLatency(ctx, peer->get(), rows); !s.ok()) return s;
    }
    if (Wants(o, "bandwidth")) {
      if (absl::Status s = RunBandwidth(ctx, peer->get(), rows); !s.ok()) return s;
    }
  }
  if (Wants(o, "ps_throughput")) {
    if (absl::Status s = RunPsThroughput(ctx, rows); !s.ok()) return s;
  }
  if (Wants(o, "ps_path")) return RunPsPath(ctx, rows);
  return absl::OkStatus();
}

int RunDriver(const GrpcBenchOptions& o) {
  spdlog::set_level(spdlog::level::warn);
  InstallStopSignalHandlers();
  DriverContext ctx;
  ctx.options = &o;
  if (!o.netns.empty()) {
    if (!o.inside_netns) return EnterClientHost(o);
    ctx.server_host = "198.18.0.1";
    ctx.server_netns = o.netns + "-h1";
  }
  RunInfo info = StartInfo(o);
  auto log_dir = MakeLogDir();
  if (!log_dir.ok()) {
    std::fprintf(stderr, "grpc_bench: %s\n", log_dir.status().ToString().c_str());
    return kExitRuntimeFailure;
  }
  ctx.log_dir = *log_dir;
  std::vector<Row> rows;
  absl::Status s = RunBenchmarks(ctx, &rows);  // every child is stopped by now
  if (s.ok()) {
    info.loadavg_after = ReadLoadavg();
    PrintTables(rows, info);
    if (!o.json.empty()) s = WriteJson(o.json, rows, info);
    if (s.ok() && !o.csv.empty()) s = WriteCsv(o.csv, rows);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "grpc_bench: %s\n(children's logs kept in %s)\n", s.ToString().c_str(),
                 ctx.log_dir.c_str());
    return StopSignal() != 0 ? ExitCodeAfterStopSignal(kExitOk) : kExitRuntimeFailure;
  }
  std::error_code ec;
  std::filesystem::remove_all(ctx.log_dir, ec);
  return ExitCodeAfterStopSignal(kExitOk);
}

}  // namespace
}  // namespace fulcrum::bench

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);  // a dead child's pipe is an error to report, not a reason to die
  const fulcrum::bench::GrpcBenchOptions options =
      fulcrum::bench::ParseGrpcBenchOptions(argc, argv);
  // Every role keeps freed buffers as bin/worker and bin/ps do (base/malloc.h), for every mode.
  fulcrum::TuneMallocForTraining();
  if (options.role == "server") return fulcrum::bench::RunServerRole(options);
  if (options.role == "client") return fulcrum::bench::RunClientRole(options);
  return fulcrum::bench::RunDriver(options);
}
