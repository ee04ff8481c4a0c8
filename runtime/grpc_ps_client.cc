#include "runtime/grpc_ps_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "grpcpp/support/client_callback.h"
#include "runtime/grpc_frames.h"
#include "runtime/grpc_util.h"
#include "spdlog/spdlog.h"

namespace fulcrum::runtime {
namespace {

using profiler::NowUnixMicros;

void Report(const GrpcPsClient* client, const char* method, int64_t begin_unix_us,
            const google::protobuf::Message& request, const google::protobuf::Message& response) {
  profiler::ReportRpc(client->observer(), client->peer(), method, begin_unix_us, request, response);
}

// Owns the ClientContext of one callback call until it completes. The error label is built
// only when the call fails: the data path makes thousands of calls a second.
struct Call {
  grpc::ClientContext context;
  PsClient::Done done;
  const char* method;
  const GrpcPsClient* client;
  const google::protobuf::Message* request;
  const google::protobuf::Message* response;
  int64_t begin_unix_us;
  int64_t tracked = 0;  // the client's CallTracker token
};

template <typename Start>
void StartCall(const char* method, const GrpcPsClient* client, absl::Duration timeout,
               const google::protobuf::Message* request, const google::protobuf::Message* response,
               PsClient::Done done, Start start) {
  auto* call = new Call{{}, std::move(done), method, client, request, response, NowUnixMicros()};
  if (CallTracker* t = client->call_tracker(); t != nullptr) {
    call->tracked = t->Begin(method, client->name());
  }
  call->context.set_deadline(DeadlineIn(timeout));
  start(&call->context, [call](grpc::Status status) {
    if (CallTracker* t = call->client->call_tracker(); t != nullptr) t->End(call->tracked);
    PsClient::Done d = std::move(call->done);
    Report(call->client, call->method, call->begin_unix_us, *call->request, *call->response);
    absl::Status s = status.ok()
                         ? absl::OkStatus()
                         : FromGrpc(status, absl::StrCat(call->method, " on ", call->client->name(),
                                                         " (", call->client->target(), ")"));
    delete call;
    d(std::move(s));
  });
}

// One zero-copy call: its context, until it completes. A reply the sink refused (a wrong
// payload length, an unknown dtype) fails the call with that reason, named by the client.
struct FrameCall {
  grpc::ClientContext context;
  PsClient::Done done;
  const GrpcPsClient* client;
  int64_t begin_unix_us;
  int64_t tracked = 0;  // the client's CallTracker token

  // A call of `method` on `client`, registered with its CallTracker until Finish.
  static FrameCall* Start(const char* method, PsClient::Done done, const GrpcPsClient* client) {
    auto* call = new FrameCall{{}, std::move(done), client, NowUnixMicros()};
    if (CallTracker* t = client->call_tracker(); t != nullptr) {
      call->tracked = t->Begin(method, client->name());
    }
    return call;
  }

  void Finish(const char* method, const grpc::Status& status, const absl::Status& parse) {
    Finish(method,
           absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message()),
           parse);
  }
  // The same for a call's end as an absl::Status (the tcp data plane's).
  void Finish(const char* method, const absl::Status& status, const absl::Status& parse) {
    if (CallTracker* t = client->call_tracker(); t != nullptr) t->End(tracked);
    PsClient::Done d = std::move(done);
    absl::Status s;
    // The parse's reason first: it names the chunk (the call's status may only say INTERNAL).
    if (!parse.ok()) {
      s = absl::Status(parse.code(), absl::StrCat(method, " on ", client->name(), " (",
                                                  client->target(), "): reply: ", parse.message()));
    } else if (!status.ok()) {
      s = absl::Status(status.code(), absl::StrCat(method, " on ", client->name(), " (",
                                                   client->target(), "): ", status.message()));
    }
    delete this;
    d(std::move(s));
  }
};

// Parses a data-plane reply into a zero-copy frame (its error is the frame's `error`).
template <typename Frame>
TcpDataChannel::ParseReply ParseFrameInto(Frame* response) {
  return [response](const Pieces& reply) {
    (void)response->Parse(reply);
    return absl::OkStatus();
  };
}

}  // namespace

GrpcPsClient::GrpcPsClient(std::string name, const std::string& address,
                           const TransportSecurity& security)
    : name_(std::move(name)),
      peer_(profiler::PeerName(name_)),
      target_(address),
      channel_(MakeChannel(address, security, name_)),
      stub_(pb::ParameterServer::NewStub(channel_)),
      pull_method_("/fulcrum.pb.ParameterServer/Pull", grpc::internal::RpcMethod::NORMAL_RPC,
                   channel_),
      push_method_("/fulcrum.pb.ParameterServer/Push", grpc::internal::RpcMethod::NORMAL_RPC,
                   channel_),
      push_pull_method_("/fulcrum.pb.ParameterServer/PushPull",
                        grpc::internal::RpcMethod::NORMAL_RPC, channel_) {}

absl::StatusOr<std::shared_ptr<TcpDataChannel>> GrpcPsClient::DataChannel(const std::string& task,
                                                                          absl::Duration timeout) {
  MutexLock lock(&data_mu_);
  std::shared_ptr<TcpDataChannel>& data = data_[task];
  if (data != nullptr && data->healthy()) return data;
  if (data != nullptr) retired_.push_back(std::move(data));
  const absl::Time deadline = absl::Now() + timeout;
  pb::OpenDataPlaneRequest request;
  request.set_task(task);
  pb::OpenDataPlaneResponse response;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(timeout));
  const int64_t begin = NowUnixMicros();
  const grpc::Status status = stub_->OpenDataPlane(&context, request, &response);
  Report(this, "OpenDataPlane", begin, request, response);
  if (!status.ok()) {
    return FromGrpc(status, absl::StrCat("OpenDataPlane on ", name_, " (", target_, ")"));
  }
  FULCRUM_ASSIGN_OR_RETURN(
      data, TcpDataChannel::Connect(
                HostOf(target_), response.port(), response.ticket(), deadline,
                absl::StrCat(name_, " data plane (", HostOf(target_), ":", response.port(), ")")));
  return data;
}

void GrpcPsClient::OverTcp(DataMethod method, const std::string& task, std::vector<Slice> body,
                           absl::Duration timeout, TcpDataChannel::ParseReply parse, Done finish) {
  absl::StatusOr<std::shared_ptr<TcpDataChannel>> channel = DataChannel(task, timeout);
  if (!channel.ok()) return finish(channel.status());
  (*channel)->Call(method, std::move(body), timeout, std::move(parse), std::move(finish));
}

void GrpcPsClient::PullAsync(const pb::PullRequest* request, PullReply* response,
                             absl::Duration timeout, Done done) {
  response->error = absl::OkStatus();
  response->bytes = 0;
  auto* call = FrameCall::Start("Pull", std::move(done), this);
  // The call's end on either transport (a grpc::Status or an absl::Status).
  auto end = [call, request, response](const auto& status) {
    profiler::ReportRpcBytes(call->client->observer(), call->client->peer(), "Pull",
                             call->begin_unix_us, request->ByteSizeLong(), response->bytes);
    call->Finish("Pull", status, response->error);
  };
  if (tcp_data_plane_) {
    std::vector<Slice> body = {Slice::Own(request->SerializeAsString())};
    return OverTcp(DataMethod::kPull, request->task(), std::move(body), timeout,
                   ParseFrameInto(response), std::move(end));
  }
  call->context.set_deadline(DeadlineIn(timeout));
  grpc::internal::CallbackUnaryCall<pb::PullRequest, PullReply>(
      channel_.get(), pull_method_, &call->context, request, response, std::move(end));
}

void GrpcPsClient::PushAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                             Done done) {
  SendPush(DataMethod::kPush, push_method_, request, response, timeout, std::move(done));
}

void GrpcPsClient::PushPullAsync(const PushFrame* request, PushReply* response,
                                 absl::Duration timeout, Done done) {
  SendPush(DataMethod::kPushPull, push_pull_method_, request, response, timeout, std::move(done));
}

void GrpcPsClient::SendPush(DataMethod method, const grpc::internal::RpcMethod& rpc,
                            const PushFrame* request, PushReply* response, absl::Duration timeout,
                            Done done) {
  const char* name = method == DataMethod::kPush ? "Push" : "PushPull";
  response->error = absl::OkStatus();
  response->bytes = 0;
  auto* call = FrameCall::Start(name, std::move(done), this);
  std::vector<Slice> body;
  size_t sent = request->ByteSize();
  // On the tcp data plane, payloads at 4-byte offsets: the ps applies the gradients in place.
  if (tcp_data_plane_) {
    SerializeFrame(*request, &body, /*align_payloads=*/true);
    sent = 0;
    for (const Slice& s : body) sent += s.size();  // with any pads
  }
  auto end = [call, name, sent, response](const auto& status) {
    profiler::ReportRpcBytes(call->client->observer(), call->client->peer(), name,
                             call->begin_unix_us, sent, response->bytes);
    call->Finish(name, status, response->error);
  };
  if (tcp_data_plane_) {
    return OverTcp(method, request->header.task(), std::move(body), timeout,
                   ParseFrameInto(response), std::move(end));
  }
  call->context.set_deadline(DeadlineIn(timeout));
  grpc::internal::CallbackUnaryCall<PushFrame, PushReply>(channel_.get(), rpc, &call->context,
                                                          request, response, std::move(end));
}

void GrpcPsClient::ReplicateAsync(const pb::ReplicateRequest* request,
                                  pb::ReplicateResponse* response, absl::Duration timeout,
                                  Done done) {
  StartCall("Replicate", this, timeout, request, response, std::move(done),
            [&](grpc::ClientContext* ctx, std::function<void(grpc::Status)> cb) {
              stub_->async()->Replicate(ctx, request, response, std::move(cb));
            });
}

#define FULCRUM_UNARY(Method, request, response)                          \
  TrackedCall tracked(tracker_, #Method, name_);                          \
  grpc::ClientContext context;                                            \
  context.set_deadline(DeadlineIn(timeout));                              \
  const int64_t begin = NowUnixMicros();                                  \
  const grpc::Status status = stub_->Method(&context, request, response); \
  Report(this, #Method, begin, request, *(response));                     \
  return FromGrpc(status, absl::StrCat(#Method " on ", name_, " (", target_, ")"))

absl::Status GrpcPsClient::CreateVariables(const pb::CreateVariablesRequest& request,
                                           pb::CreateVariablesResponse* response,
                                           absl::Duration timeout) {
  FULCRUM_UNARY(CreateVariables, request, response);
}

absl::Status GrpcPsClient::SaveShard(const pb::SaveShardRequest& given,
                                     pb::SaveShardResponse* response, absl::Duration timeout) {
  pb::SaveShardRequest request = given;
  if (shard_) request.set_shard(*shard_);
  FULCRUM_UNARY(SaveShard, request, response);
}

absl::Status GrpcPsClient::RestoreShard(const pb::RestoreShardRequest& given,
                                        pb::RestoreShardResponse* response,
                                        absl::Duration timeout) {
  pb::RestoreShardRequest request = given;
  if (shard_) request.set_shard(*shard_);
  FULCRUM_UNARY(RestoreShard, request, response);
}

absl::Status GrpcPsClient::Stats(pb::StatsResponse* response, absl::Duration timeout) {
  pb::StatsRequest request;
  if (shard_) request.set_shard(*shard_);
  FULCRUM_UNARY(Stats, request, response);
}

absl::Status GrpcPsClient::PromoteReplica(const pb::PromoteReplicaRequest& request,
                                          pb::PromoteReplicaResponse* response,
                                          absl::Duration timeout) {
  FULCRUM_UNARY(PromoteReplica, request, response);
}

absl::Status GrpcPsClient::ReleaseWorkers(const pb::ReleaseWorkersRequest& request,
                                          absl::Duration timeout) {
  pb::ReleaseWorkersResponse response;
  FULCRUM_UNARY(ReleaseWorkers, request, &response);
}

absl::Status GrpcPsClient::Stop(const std::string& reason, absl::Duration timeout) {
  pb::StopRequest request;
  request.set_reason(reason);
  pb::StopResponse response;
  FULCRUM_UNARY(Stop, request, &response);
}

absl::Status GrpcPsClient::Shutdown(const std::string& reason, absl::Duration timeout,
                                    std::string* summary_json) {
  pb::ShutdownRequest request;
  request.set_reason(reason);
  pb::ShutdownResponse response;
  absl::Status s = [&]() -> absl::Status { FULCRUM_UNARY(Shutdown, request, &response); }();
  if (s.ok() && summary_json != nullptr) *summary_json = response.summary_json();
  return s;
}

absl::Status GrpcPsClient::Ping(const pb::PingRequest& request, pb::PingResponse* response,
                                absl::Duration timeout) {
  FULCRUM_UNARY(Ping, request, response);
}

#undef FULCRUM_UNARY

bool GrpcPsClient::WaitUntilReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    pb::PingRequest request;
    pb::PingResponse response;
    grpc::ClientContext context;
    context.set_wait_for_ready(true);  // wait for the connection instead of failing fast
    context.set_deadline(DeadlineIn(std::min(absl::Seconds(1), deadline - absl::Now())));
    const grpc::Status s = stub_->Ping(&context, request, &response);
    if (s.ok()) return true;
    // The ps answered but refused this task's credentials: waiting cannot help.
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      spdlog::error("{} at {} refused the connection: {}", name_, target_, s.error_message());
      return false;
    }
  }
  return false;
}

absl::Status GrpcPsClient::Warm(int64_t bytes, int rounds, absl::Duration timeout) {
  pb::PingRequest request;
  request.set_payload(std::string(static_cast<size_t>(bytes), '\0'));
  request.set_reply_bytes(bytes);
  for (int i = 0; i < rounds; ++i) {
    pb::PingResponse response;
    if (absl::Status s = Ping(request, &response, timeout); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::runtime
