// runtime: who may talk to a Fulcrum task, and how the bytes travel. From the flags
// --tls_cert/--tls_key/--tls_ca (mutual TLS: every server requires and verifies a client
// certificate signed by the CA, every channel verifies the server's) and --auth_token_file
// (a shared secret every call carries as "authorization: Bearer <token>"). Without them a
// task runs in protected mode (as Redis does): its cluster spec and its servers must be
// loopback-only, and every server refuses a call from a peer that is not on loopback; the
// explicit opt-out --insecure lets any peer call it, and says so once at start-up.
//
// A task's identity is its certificate's common name, the task name ("ps:0", "worker:1",
// "chief:0"): a channel to ps:0 accepts only a server whose certificate says "ps:0", and a
// server reads the caller's name from the handshake (CallGuard). With a token but no TLS the
// token proves membership of the cluster, not which task is calling.
//
// Thread-safety: TransportSecurity is an immutable value after Load; CallGuard's methods are
// const and safe from every gRPC handler thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "runtime/cluster/cluster_spec.h"

namespace fulcrum::runtime {

// The security flags as given (paths; "{task}" in a path stands for the task's folder name,
// "ps-0", so one command line serves every task).
struct SecurityFlags {
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  std::string auth_token_file;
  bool insecure = false;  // --insecure: no credentials and no protected mode
};

// The smallest token --auth_token_file may hold.
inline constexpr size_t kMinTokenBytes = 16;

class TransportSecurity {
 public:
  // Insecure: plaintext, no token, no identity.
  TransportSecurity() = default;

  // Reads and checks the files the flags name for task `task_name` ("ps:0"; `dir_name`
  // "ps-0" replaces "{task}" in the paths). InvalidArgument naming the flag and the file
  // when: only some of --tls_cert/--tls_key/--tls_ca are given; a file is missing or
  // unreadable; a PEM does not parse; the key does not belong to the certificate; the
  // certificate is not signed by the CA or its common name is not `task_name`; the token
  // file is empty, shorter than kMinTokenBytes, holds other than printable ASCII without
  // spaces, or is readable by group or others; or --insecure is given with any of the
  // credential flags. A trailing newline of the token is dropped.
  static absl::StatusOr<TransportSecurity> Load(const SecurityFlags& flags,
                                                const std::string& task_name,
                                                const std::string& dir_name);

  bool tls() const { return !cert_pem_.empty(); }
  bool has_token() const { return !token_.empty(); }
  const std::string& token() const { return token_; }
  // No credentials and no --insecure: loopback peers only (the default).
  bool protected_mode() const { return !tls() && !has_token() && !insecure_; }

  // Credentials of a channel to a server whose certificate must name `peer_task` ("ps:0"):
  // SSL with this task's certificate and the CA, or insecure without TLS.
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // Channel arguments the TLS check of `peer_task` needs (none without TLS).
  void AddChannelArguments(const std::string& peer_task, grpc::ChannelArguments* args) const;
  // Client interceptors that add the token to every call (none without a token).
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
  ClientInterceptors() const;
  // Server credentials: SSL requiring and verifying a client certificate, or insecure.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;

  // InvalidArgument when this task is in protected mode and `address` ("host:port") of
  // `what` ("ps:0 in the cluster spec", "--metrics_bind") is not a loopback address,
  // naming both, the credential flags, scripts/make_certs.sh and --insecure.
  absl::Status CheckReachableOnlyLocally(absl::string_view what, const std::string& host) const;
  // The same for every address of `cluster` ("ps:0's address in the cluster spec").
  absl::Status CheckSpecReachableOnlyLocally(const ClusterSpec& cluster) const;

  // The one start-up log line of `task_name` on how its RPCs are protected: INFO in protected
  // mode and with TLS, a WARN with --insecure or a token without TLS.
  void LogMode(const std::string& task_name) const;

 private:
  std::string cert_pem_;
  std::string key_pem_;
  std::string ca_pem_;
  std::string token_;
  bool insecure_ = false;
};

// Server-side checks of one call, before its handler does anything. A default CallGuard
// (insecure) allows every call.
class CallGuard {
 public:
  CallGuard() = default;
  explicit CallGuard(const TransportSecurity& security)
      : token_(security.token()), tls_(security.tls()), local_only_(security.protected_mode()) {}

  // PERMISSION_DENIED in protected mode when the peer is not on loopback; UNAUTHENTICATED
  // "missing or wrong auth token" when a token is configured and the call does not carry it
  // (compared in constant time); with TLS, also when the peer has no verified certificate name.
  grpc::Status Authenticate(const grpc::ServerContext& context, absl::string_view method) const;
  // Authenticate, then, when the peer's identity is known (TLS), PERMISSION_DENIED unless it
  // is `claimed_task`, the task the request says it comes from.
  grpc::Status AuthorizeAs(const grpc::ServerContext& context, absl::string_view method,
                           absl::string_view claimed_task) const;
  // Authenticate, then, when the peer's identity is known (TLS), PERMISSION_DENIED unless it
  // is `only_task` (control RPCs come only from "chief:0").
  grpc::Status AuthorizeOnly(const grpc::ServerContext& context, absl::string_view method,
                             absl::string_view only_task) const;

  // The common name of the peer's verified certificate; empty without TLS.
  static std::string PeerTask(const grpc::ServerContext& context);

 private:
  std::string token_;
  bool tls_ = false;
  bool local_only_ = false;
};

// True when gRPC's peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "ipv6:%5B::1%5D:5000",
// "unix:/path", "inproc") names a peer on this machine's loopback or a local socket.
bool IsLocalPeer(absl::string_view grpc_peer);

}  // namespace fulcrum::runtime
