// bench/grpc_bench: the four benchmarks the driver runs, each over server (and client)
// processes it starts and stops itself (docs/transport.md says what each measures).
//   latency        echo round trips of one message, per size (single- and multi-buffer) and
//                  per payload scheme, modes alternating round by round; p50/p95/p99.
//   bandwidth      one-way streams with --window messages in flight, same payloads; MB/s.
//   ps_throughput  M server processes x N client processes: each client pushes and pulls a
//                  payload-scheme parameter set split over the servers, one RPC (or TCP frame)
//                  per buffer, all in flight; aggregate MB/s and calls/s.
//   ps_path        a model of S bytes through runtime::ShardedVariables::PushPullAll over
//                  runtime::GrpcPsClient to the ps process of a server (the ps binary),
//                  beside raw TCP and raw gRPC (both modes) echoes of the same S bytes to the
//                  same process; the PS/TCP and PS/gRPC ratios are the targets.
// Thread-safety: run from main()'s thread (the children's parent-death signal follows it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/grpc_bench_ops.h"
#include "bench/grpc_bench_options.h"
#include "bench/grpc_bench_process.h"
#include "bench/grpc_bench_report.h"

namespace fulcrum::bench {

struct DriverContext {
  const GrpcBenchOptions* options = nullptr;
  std::string log_dir;
  std::string server_host = "127.0.0.1";  // where servers listen (198.18.0.1 across hosts)
  std::string server_netns;               // "" or the servers' host, e.g. "gb-h1"
  int next_child = 0;                     // names the children's logs
};

struct ServerProcess {
  std::unique_ptr<Child> child;
  ServerAddress address;
};
// Starts a server-role child and reads its ports.
absl::StatusOr<ServerProcess> StartServer(DriverContext& ctx);

absl::Status RunLatency(DriverContext& ctx, Peer* peer, std::vector<Row>* rows);
absl::Status RunBandwidth(DriverContext& ctx, Peer* peer, std::vector<Row>* rows);
absl::Status RunPsThroughput(DriverContext& ctx, std::vector<Row>* rows);
absl::Status RunPsPath(DriverContext& ctx, std::vector<Row>* rows);

}  // namespace fulcrum::bench
