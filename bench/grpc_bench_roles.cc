#include "bench/grpc_bench_roles.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/net.h"
#include "base/status_macros.h"
#include "bench/grpc_bench_grpc.h"
#include "bench/grpc_bench_ops.h"
#include "bench/grpc_bench_payload.h"
#include "bench/grpc_bench_process.h"
#include "bench/grpc_bench_tcp.h"
#include "bench/ps_bench_process.h"
#include "nlohmann/json.hpp"
#include "runtime/client/grpc_ps_client.h"

namespace fulcrum::bench {
namespace {

constexpr size_t kMaxSamplesPerReply = 2000;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "grpc_bench: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  return 1;
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

// The PS of ps_path: a process of the product's ps binary in this server's host, with its
// tcp data plane, alive as long as this server (the driver creates its variables).
struct PsChild {
  std::string dir;  // its cluster spec and log
  PsProcess proc;
  std::unique_ptr<runtime::GrpcPsClient> client;
  PsChild() = default;
  PsChild(const PsChild&) = delete;
  PsChild& operator=(const PsChild&) = delete;
  // Asks the ps to shut down and removes its folder first: the driver gives this server 2 s
  // to exit before it kills it, and a ps told to shut down exits by itself.
  ~PsChild() {
    if (proc.pid > 0 && client != nullptr) {
      (void)client->Shutdown("grpc_bench done", absl::Seconds(1));
    }
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    if (proc.pid > 0) ReapOrKill(proc.pid);
  }
};

absl::StatusOr<std::unique_ptr<PsChild>> StartPsChild(const GrpcBenchOptions& o) {
  auto child = std::make_unique<PsChild>();
  FULCRUM_ASSIGN_OR_RETURN(child->dir, MakeLogDir());
  std::vector<int> ports;  // the ps, then the spec's chief and worker (never run)
  for (int i = 0; i < 3; ++i) {
    FULCRUM_ASSIGN_OR_RETURN(const int port, PickFreePort());
    ports.push_back(port);
  }
  const std::string spec = child->dir + "/cluster.json";
  FULCRUM_RETURN_IF_ERROR(WritePsSpec(spec, o.bind_host, ports, 1));
  // Left alone (this server killed, or a suite that never creates its variables) it exits by
  // itself after 15 minutes without a call.
  const std::string life =
      absl::StrCat(absl::ToDoubleSeconds(std::min(o.lifetime, absl::Minutes(15))));
  std::vector<std::string> flags = {"--data_plane=tcp", "--heartbeat_timeout=" + life,
                                    "--startup_timeout=" + life};
  // Across emulated hosts (--netns) the benchmark's client reaches the ps from another
  // namespace's address, which a ps without credentials refuses: the hosts are private
  // namespaces on 198.18.0.0/15 that only this run can reach, so the ps runs --insecure there.
  if (!IsLoopbackHost(o.bind_host)) flags.push_back("--insecure");
  FULCRUM_ASSIGN_OR_RETURN(
      child->proc, StartPs(o.ps_binary, spec, 0, ports[0], -1, child->dir + "/ps.log", flags));
  child->client =
      std::make_unique<runtime::GrpcPsClient>("ps:0", JoinHostPort(o.bind_host, ports[0]));
  FULCRUM_RETURN_IF_ERROR(AwaitPs(child->proc, *child->client, absl::Seconds(30)));
  return child;
}

}  // namespace

int RunServerRole(const GrpcBenchOptions& o) {
  StartLifetimeWatchdog(o.lifetime);
  auto tcp = TcpServer::Start(o.bind_host, o.rpc_timeout);
  if (!tcp.ok()) return Fail(tcp.status());
  SerializedBenchService serialized;
  ByteBufferBenchService bytebuffer;
  int grpc_port = 0;
  auto bench = StartBenchServer(o.bind_host, &serialized, &bytebuffer, &grpc_port);
  if (!bench.ok()) return Fail(bench.status());
  auto ps = StartPsChild(o);
  if (!ps.ok()) return Fail(ps.status());
  std::printf("READY %d %d %d\n", (*tcp)->port(), grpc_port, (*ps)->proc.port);
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line) && line != "quit") {
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
  (*bench)->Shutdown(deadline);
  return 0;  // *ps shuts its process down
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
