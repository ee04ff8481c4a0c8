// bench/grpc_bench: the program's options (every role's) and their parsing. The parser is
// our own over Abseil's flag registry, so that a bad flag exits 2 naming the flag (Abseil's
// own parser exits 1) and --help lists exactly this program's flags.
// Thread-safety: ParseGrpcBenchOptions runs once from main() before any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fulcrum::bench {

// The transports a micro-benchmark compares (the PS path adds kFulcrumPs, the Fulcrum PS on
// its gRPC data path, and kFulcrumPsTcp, on its tcp data plane: --data_plane=tcp).
enum class Mode { kTcp, kSerialized, kByteBuffer, kFulcrumPs, kFulcrumPsTcp };
const char* ModeName(Mode mode);

// One buffer size class of the payload schemes: sizes drawn in [min, max]; the uniform
// scheme uses `uniform` for every buffer.
struct SizeClass {
  int64_t min = 0, max = 0, uniform = 0;
};

// How payloads of the scheme rows are made (see grpc_bench_payload.h).
struct PayloadOptions {
  std::array<SizeClass, 3> classes;    // small, medium, large
  std::array<double, 3> skew_weights;  // class probabilities of the skew scheme
  int scheme_buffers = 16;
  uint64_t seed = 1;
};

struct GrpcBenchOptions {
  std::string role = "driver";  // driver | server | client
  std::string program;          // argv[0] resolved, for spawning this binary again
  std::vector<std::string> benchmarks;
  std::vector<Mode> modes;  // tcp, serialized, bytebuffer
  std::vector<int64_t> sizes;
  std::vector<int> iovec;
  std::vector<std::string> schemes;
  PayloadOptions payload;
  absl::Duration round = absl::Milliseconds(200);
  int pairs = 3;
  int min_iters = 3;
  int window = 16;
  std::vector<int> ps_servers, ps_clients;
  std::vector<std::string> ps_schemes;
  std::vector<std::string> ps_models;
  int64_t chunk_bytes = 0;
  absl::Duration rpc_timeout = absl::Seconds(60);
  std::string json, csv;
  std::string netns;          // prefix of the emulated hosts; "" = loopback
  bool inside_netns = false;  // this driver already runs in the client host
  // Server role: the address to listen on, the longest it lives, and its ps.
  std::string bind_host = "127.0.0.1";
  absl::Duration lifetime = absl::Hours(2);
  std::string ps_binary;  // the product's ps binary, run by the server role for ps_path
  // Client role: "host:tcp_port:grpc_port" per server, and the parameter-set scheme.
  std::vector<std::string> servers;
  std::string client_scheme;
  int client_index = 0;
  std::vector<std::string> argv;  // the command line, for the records
};

// Parses argv. --help prints every flag of this program and exits 0; an unknown flag, a
// value that does not parse or validate, or a stray argument prints "grpc_bench: <what>"
// naming the flag and exits 2.
GrpcBenchOptions ParseGrpcBenchOptions(int argc, char** argv);

// "32", "4K", "4KiB", "16M", "1G" (K = 1024) -> bytes; InvalidArgument otherwise.
absl::StatusOr<int64_t> ParseBytes(const std::string& text);
// 1536 -> "1.5 KiB", 16777216 -> "16 MiB", 100 -> "100 B".
std::string FormatBytes(int64_t bytes);

// The flags a child process of `role` gets from this driver's options (payload settings,
// timeouts), without --role.
std::vector<std::string> ChildFlags(const GrpcBenchOptions& options);

}  // namespace fulcrum::bench
