// runtime: gRPC plumbing shared by every Fulcrum process: channels with the message limits
// and keepalive Fulcrum needs, status conversion both ways, channel warm-up.
// Thread-safety: pure functions; channels are thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "runtime/grpc/security.h"
#include "transport/grpc_slices.h"
#include "transport/limits.h"  // kMaxMessageBytes

namespace fulcrum::runtime {

// A channel to "host:port" with Fulcrum's limits and keepalive, secured as `security` says
// (the default: insecure): with TLS the server's certificate must name `peer_task` ("ps:0"),
// with a token every call carries it.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const TransportSecurity& security = {},
                                           const std::string& peer_task = "");

// How long a channel made afterwards waits for the answer to a keepalive ping before it
// drops the connection (default 10 s). Tasks set their --step_timeout, so that a peer that
// stalls for less than that is waited for, not cut off. Thread-safe.
void SetKeepaliveTimeout(absl::Duration timeout);

// Builder settings for a Fulcrum server (message limits, keepalive, no port sharing).
void ConfigureServerBuilder(grpc::ServerBuilder* builder);

// gRPC status -> absl::Status, prefixed with what was called ("Pull on ps:0 (host:port)").
absl::Status FromGrpc(const grpc::Status& status, absl::string_view what);
// An error another task answered is a failure of the run (exit code 1), even when its code
// would mean bad input in this process (e.g. FailedPrecondition, "ps:0 has no variables
// yet"): such codes become Internal, keeping the message. Others pass through.
absl::Status RemoteFailure(absl::Status status);
// absl::Status -> gRPC status, and a handler's deadline: the transport's.
using transport::CallDeadline;
using transport::ToGrpc;

// Deadline `timeout` from now, for a ClientContext.
std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout);

}  // namespace fulcrum::runtime
