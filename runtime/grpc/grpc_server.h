// runtime: starting a Fulcrum gRPC server, the one way every task does it (ps, chief, tests):
// the server settings of ConfigureServerBuilder, the services given, one listening address,
// and a one-line error naming the task and the address when the task cannot listen there.
// gRPC's own multi-line account of the failure is kept out of the output (it is logged at
// debug level); the reason is diagnosed with a plain bind() instead.
// Thread-safety: StartGrpcServer may be called from several threads at once.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "runtime/grpc/security.h"

namespace fulcrum::runtime {

// A started server and the port(s) it listens on.
struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;            // the bound port: the one the kernel picked for an address's port 0
  std::vector<int> ports;  // with several addresses, one per address in order (port = ports[0])
};

// Builds and starts a server on `address` ("host:port", "[v6]:port"; port 0 picks a free
// port) serving `services` (not owned; they must outlive the server). `task_name` ("ps:0")
// labels the error. When the task cannot listen there, Unavailable (exit code 1, a runtime
// failure, as a port taken by another process is) reading
//   "ps:0 cannot listen on 127.0.0.1:2222 (in use?)"
// or, with another reason in the parentheses: "not an address of this host",
// "cannot resolve HOST: ...", "not host:port with a port in 0-65535", or the kernel's word.
// The server's credentials come from `security` (default: insecure); the token and peer
// checks of each call are the services' own (runtime::CallGuard).
absl::StatusOr<StartedServer> StartGrpcServer(const std::string& task_name,
                                              const std::string& address,
                                              std::initializer_list<grpc::Service*> services,
                                              const TransportSecurity& security = {});

// The same on several addresses at once (e.g. n x "127.0.0.1:0" for one connection per port
// in a benchmark); the error names the first address that could not be bound.
// Precondition: `addresses` is not empty.
absl::StatusOr<StartedServer> StartGrpcServer(const std::string& task_name,
                                              const std::vector<std::string>& addresses,
                                              std::initializer_list<grpc::Service*> services,
                                              const TransportSecurity& security = {});

// Whether a server could listen on `address` now, by a plain bind() that is released at once:
// OK, or StartGrpcServer's Unavailable error for it ("ps:0 cannot listen on ... (in use?)").
// A check before work that would otherwise run before the server starts (another process may
// still take the port in between; StartGrpcServer then fails as usual).
absl::Status CheckCanListen(const std::string& task_name, const std::string& address);

}  // namespace fulcrum::runtime
