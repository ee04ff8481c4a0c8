#include "runtime/grpc/grpc_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpc/support/log.h"
#include "grpcpp/server_builder.h"
#include "runtime/grpc/grpc_util.h"
#include "spdlog/spdlog.h"

namespace fulcrum::runtime {
namespace {

// One log line of gRPC's.
struct GrpcLogLine {
  std::string file;
  int line = 0;
  gpr_log_severity severity = GPR_LOG_SEVERITY_ERROR;
  std::string message;
};

// gRPC's log lines of a server start on this thread, held instead of printed (gRPC writes
// the whole error tree of a failed bind on one long line). Null outside StartGrpcServer.
thread_local std::vector<GrpcLogLine>* held_grpc_lines = nullptr;

void LogToSpdlog(const GrpcLogLine& l) {
  const spdlog::level::level_enum level = l.severity == GPR_LOG_SEVERITY_ERROR ? spdlog::level::err
                                          : l.severity == GPR_LOG_SEVERITY_INFO
                                              ? spdlog::level::info
                                              : spdlog::level::debug;
  spdlog::log(level, "grpc: {} ({}:{})", l.message, l.file, l.line);
}

// gRPC's log function once a server was started here: lines of a start on this thread are
// held; every other line goes to spdlog, so the process keeps one log format. gRPC only
// calls it for the severities GRPC_VERBOSITY lets through (errors by default).
void RouteGrpcLog(gpr_log_func_args* args) {
  GrpcLogLine line{args->file, args->line, args->severity, args->message};
  if (held_grpc_lines != nullptr) {
    held_grpc_lines->push_back(std::move(line));
  } else {
    LogToSpdlog(line);
  }
}

// Holds gRPC's log lines of this thread for the scope.
class HoldGrpcLog {
 public:
  HoldGrpcLog() {
    static std::once_flag routed;
    std::call_once(routed, [] { gpr_set_log_function(&RouteGrpcLog); });
    held_grpc_lines = &lines_;
  }
  ~HoldGrpcLog() { held_grpc_lines = nullptr; }
  HoldGrpcLog(const HoldGrpcLog&) = delete;
  HoldGrpcLog& operator=(const HoldGrpcLog&) = delete;

  const std::vector<GrpcLogLine>& lines() const { return lines_; }

 private:
  std::vector<GrpcLogLine> lines_;
};

constexpr char kMalformed[] = "not host:port with a port in 0-65535";

// Splits "host:port" or "[v6]:port" with a port in 0-65535; false when malformed.
bool SplitListenAddress(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  int value = 0;
  return !host->empty() && !port->empty() &&
         std::all_of(port->begin(), port->end(), absl::ascii_isdigit) &&
         absl::SimpleAtoi(*port, &value) && value <= 65535;
}

// Why nothing can listen on `address`, found with a plain bind() (gRPC says it only in its
// log): "in use?" when the port is taken; empty when it binds.
std::string BindError(const std::string& address) {
  std::string host, port;
  if (!SplitListenAddress(address, &host, &port)) return kMalformed;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc));
  }
  int error = 0;
  for (addrinfo* a = found; a != nullptr && error == 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;  // as gRPC binds: a port held only by closed connections is free
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) error = errno;
    close(fd);
  }
  freeaddrinfo(found);
  if (error == 0) return "";
  if (error == EADDRINUSE) return "in use?";
  if (error == EADDRNOTAVAIL) return "not an address of this host";
  return std::strerror(error);
}

// As BindError, after gRPC could not listen: "in use?" also when the reason is unknown (the
// port came free since).
std::string WhyCannotListen(const std::string& address) {
  const std::string why = BindError(address);
  return why.empty() ? "in use?" : why;
}

}  // namespace

absl::Status CheckCanListen(const std::string& task_name, const std::string& address) {
  const std::string why = BindError(address);
  if (why.empty()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(task_name, " cannot listen on ", address, " (", why, ")"));
}

absl::StatusOr<StartedServer> StartGrpcServer(const std::string& task_name,
                                              const std::vector<std::string>& addresses,
                                              std::initializer_list<grpc::Service*> services,
                                              const TransportSecurity& security) {
  auto cannot_listen = [&](const std::string& address, const std::string& why) {
    return absl::UnavailableError(
        absl::StrCat(task_name, " cannot listen on ", address, " (", why, ")"));
  };
  std::string host, port;
  for (const std::string& address : addresses) {
    // gRPC itself would listen on "host:70000" as port 70000 - 65536.
    if (!SplitListenAddress(address, &host, &port)) return cannot_listen(address, kMalformed);
  }
  grpc::ServerBuilder builder;
  // ConfigureServerBuilder turns gRPC's SO_REUSEPORT off, so a taken port is an error.
  ConfigureServerBuilder(&builder);
  StartedServer started;
  started.ports.assign(addresses.size(), 0);
  const std::shared_ptr<grpc::ServerCredentials> credentials = security.ServerCredentials();
  for (size_t i = 0; i < addresses.size(); ++i) {
    builder.AddListeningPort(addresses[i], credentials, &started.ports[i]);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  HoldGrpcLog held;
  started.server = builder.BuildAndStart();
  const auto unbound = std::find(started.ports.begin(), started.ports.end(), 0);
  if (started.server != nullptr && unbound == started.ports.end()) {
    for (const GrpcLogLine& line : held.lines()) LogToSpdlog(line);
    started.port = started.ports.front();
    return started;
  }
  if (started.server != nullptr) started.server->Shutdown();
  for (const GrpcLogLine& line : held.lines()) {
    spdlog::debug("{}: gRPC could not start a server: {}", task_name, line.message);
  }
  const std::string& failed = addresses[static_cast<size_t>(
      unbound == started.ports.end() ? 0 : unbound - started.ports.begin())];
  return cannot_listen(failed, WhyCannotListen(failed));
}

absl::StatusOr<StartedServer> StartGrpcServer(const std::string& task_name,
                                              const std::string& address,
                                              std::initializer_list<grpc::Service*> services,
                                              const TransportSecurity& security) {
  return StartGrpcServer(task_name, std::vector<std::string>{address}, services, security);
}

}  // namespace fulcrum::runtime
