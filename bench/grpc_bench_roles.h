// bench/grpc_bench: the two child roles the driver starts (grpc_bench_process.h).
//
// server  listens on --bind_host with three servers on ports the kernel picks: the raw TCP
//         echo server, a gRPC server with both bench services (serialized and bytebuffer),
//         and a Fulcrum PS task (a child process of the product's ps binary, --ps_binary,
//         with its tcp data plane; variables created by the driver's CreateVariables).
//         Prints "READY <tcp port> <grpc port> <ps port>", then serves until its stdin closes
//         (or "quit"), --lifetime_s passes or its parent dies.
// client  one of the N clients of ps_throughput: connects to every server of --servers, warms
//         each mode up, prints "READY", then answers "run <mode> <ms>" with one JSON line
//         {"steps", "calls", "sent", "received", "seconds", "us": [per-step µs]} (or
//         {"error": ...}) after running push+pull steps of the --client_scheme parameter set
//         for that long; "quit" or the end of stdin ends it.
// Both return the process exit code (0, or 1 after printing why to stderr).
// Thread-safety: each runs once from main().
#pragma once

#include "bench/grpc_bench_options.h"

namespace fulcrum::bench {

int RunServerRole(const GrpcBenchOptions& options);
int RunClientRole(const GrpcBenchOptions& options);

}  // namespace fulcrum::bench
