#include "bench/grpc_bench_roles.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/grpc_bench_grpc.h"
#include "bench/grpc_bench_ops.h"
#include "bench/grpc_bench_payload.h"
#include "bench/grpc_bench_process.h"
#include "bench/grpc_bench_tcp.h"
#include "nlohmann/json.hpp"
#include "ps/service.h"
#include "ps/shard.h"
#include "runtime/grpc/grpc_server.h"
#include "spdlog/spdlog.h"
#include "transport/tcp_server.h"

namespace fulcrum::bench {
namespace {

constexpr size_t kMaxSamplesPerReply = 2000;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "grpc_bench: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  return 1;
}

std::string HostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

// One untimed step whose echoes are checked, then the steps of one mode for `ms` milliseconds
// (at least one), as the reply line's JSON.
nlohmann::json RunFor(EchoStep& step, int ms) {
  if (absl::Status s = step.Run(true); !s.ok()) return {{"error", s.ToString()}};
  std::vector<double> us;
  int64_t sent = 0, received = 0;
  const auto begin = std::chrono::steady_clock::now();
  const auto end = begin + std::chrono::milliseconds(ms);
  auto now = begin;
  do {
    const auto t0 = now;
    if (absl::Status s = step.Run(false); !s.ok()) return {{"error", s.ToString()}};
    now = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(now - t0).count());
    sent += step.bytes_sent();
    received += step.bytes_received();
  } while (now < end);
  std::vector<double> kept;
  const size_t stride = (us.size() + kMaxSamplesPerReply - 1) / kMaxSamplesPerReply;
  for (size_t i = 0; i < us.size(); i += stride) kept.push_back(us[i]);
  return {{"steps", us.size()},
          {"calls", static_cast<int64_t>(us.size()) * step.calls()},
          {"sent", sent},
          {"received", received},
          {"seconds", std::chrono::duration<double>(now - begin).count()},
          {"us", kept}};
}

}  // namespace

int RunServerRole(const GrpcBenchOptions& o) {
  spdlog::set_level(spdlog::level::warn);  // the shard's "ps:0 holds ..." lines
  StartLifetimeWatchdog(o.lifetime);
  auto tcp = TcpServer::Start(o.bind_host, o.rpc_timeout);
  if (!tcp.ok()) return Fail(tcp.status());
  SerializedBenchService serialized;
  ByteBufferBenchService bytebuffer;
  int grpc_port = 0;
  auto bench = StartBenchServer(o.bind_host, &serialized, &bytebuffer, &grpc_port);
  if (!bench.ok()) return Fail(bench.status());
  ps::Shard shard(0);
  ps::PsService service(&shard);
  auto data_plane = ps::StartDataPlane(&service, "ps:0", o.bind_host);
  if (!data_plane.ok()) return Fail(data_plane.status());
  auto ps = runtime::StartGrpcServer("ps:0", HostPort(o.bind_host, 0), {&service});
  if (!ps.ok()) return Fail(ps.status());
  std::printf("READY %d %d %d\n", (*tcp)->port(), grpc_port, ps->port);
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line) && line != "quit") {
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
  (*bench)->Shutdown(deadline);
  ps->server->Shutdown(deadline);
  (*data_plane)->Shutdown();
  return 0;
}

int RunClientRole(const GrpcBenchOptions& o) {
  StartLifetimeWatchdog(o.lifetime);
  std::vector<std::unique_ptr<Peer>> peers;
  std::vector<Peer*> raw;
  for (const std::string& s : o.servers) {
    auto address = ParseServerAddress(s);
    if (!address.ok()) return Fail(address.status());
    auto peer = ConnectPeer(*address, o.rpc_timeout);
    if (!peer.ok()) return Fail(peer.status());
    raw.push_back(peer->get());
    peers.push_back(std::move(*peer));
  }
  auto spec = SchemePayload(o.client_scheme, o.payload);
  if (!spec.ok()) return Fail(spec.status());
  const PayloadData data(*spec);
  std::vector<std::unique_ptr<EchoStep>> steps;
  for (Mode mode : o.modes) {
    steps.push_back(std::make_unique<EchoStep>(
        mode, raw, &data, MessagePerBuffer(data, static_cast<int>(raw.size())), o.rpc_timeout));
    for (int i = 0; i < 3; ++i) {  // warm: connections, HTTP/2 windows, allocators
      if (absl::Status s = steps.back()->Run(true); !s.ok()) return Fail(s);
    }
  }
  std::printf("READY\n");
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line) && line != "quit") {
    std::istringstream in(line);
    std::string verb, mode;
    int ms = 0;
    in >> verb >> mode >> ms;
    nlohmann::json reply = {{"error", absl::StrCat("bad command '", line, "'")}};
    for (size_t m = 0; m < o.modes.size(); ++m) {
      if (verb == "run" && mode == ModeName(o.modes[m]) && ms > 0) reply = RunFor(*steps[m], ms);
    }
    std::printf("%s\n", reply.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace fulcrum::bench
