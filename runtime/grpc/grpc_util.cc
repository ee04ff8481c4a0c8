#include "runtime/grpc/grpc_util.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/exit_code.h"
#include "grpcpp/resource_quota.h"

namespace fulcrum::runtime {
namespace {

std::atomic<int64_t> keepalive_timeout_ms{10000};

}  // namespace

void SetKeepaliveTimeout(absl::Duration timeout) {
  keepalive_timeout_ms.store(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 1000,
                                                 std::numeric_limits<int>::max()),
                             std::memory_order_relaxed);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const TransportSecurity& security,
                                           const std::string& peer_task) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(transport::kMaxMessageBytes);
  args.SetMaxSendMessageSize(transport::kMaxMessageBytes);
  // Each channel gets its own connection, even to an address another channel of this
  // process already uses (gRPC shares one by default): clients stay independent.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(keepalive_timeout_ms.load(std::memory_order_relaxed)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Retry connecting quickly while the cluster comes up (tasks start in any order).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the deadline of one
  // connection attempt, and 100 ms cut TLS handshakes off whenever no call was polling the
  // channel (the attempt then advances only with gRPC's 5 s backup poller): a worker started
  // before its chief then took 7 s or more to register.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  security.AddChannelArguments(peer_task, &args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, security.ChannelCredentials(), args, security.ClientInterceptors());
}

void ConfigureServerBuilder(grpc::ServerBuilder* builder) {
  // A bound on the memory gRPC holds for requests being received (the ps's stated bound):
  // requests beyond it are refused RESOURCE_EXHAUSTED before they are read whole.
  grpc::ResourceQuota quota("fulcrum-server");
  quota.Resize(static_cast<size_t>(transport::kServerMemoryQuota));
  builder->SetResourceQuota(quota);
  builder->SetMaxReceiveMessageSize(transport::kMaxMessageBytes);
  builder->SetMaxSendMessageSize(transport::kMaxMessageBytes);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // Without this a second process may silently share a port already in use instead of failing.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

absl::Status FromGrpc(const grpc::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

absl::Status RemoteFailure(absl::Status status) {
  if (status.ok() || ExitCodeForStatus(status) != kExitBadInput) return status;
  return absl::InternalError(status.message());
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

}  // namespace fulcrum::runtime
