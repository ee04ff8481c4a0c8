#include "runtime/client/grpc_ps_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/net.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "grpcpp/support/client_callback.h"
#include "runtime/grpc/grpc_util.h"
#include "spdlog/spdlog.h"
#include "transport/grpc_channel.h"
#include "transport/tcp_channel.h"

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

// One data call, from its start to its end: registered with the client's CallTracker, its
// bytes reported to the observer, its error named by the client. A reply the sink refused (a
// wrong payload length, an unknown dtype) fails the call with that reason.
struct DataCall {
  PsClient::Done done;
  const GrpcPsClient* client;
  const char* method;
  size_t sent;
  int64_t begin_unix_us = NowUnixMicros();
  int64_t tracked = 0;  // the client's CallTracker token

  void Finish(const absl::Status& status, const absl::Status& parse, size_t received) {
    if (CallTracker* t = client->call_tracker(); t != nullptr) t->End(tracked);
    profiler::ReportRpcBytes(client->observer(), client->peer(), method, begin_unix_us, sent,
                             received);
    PsClient::Done d = std::move(done);
    // The parse's reason first: it names the chunk (the call's status may only say INTERNAL).
    const absl::Status& why = parse.ok() ? status : parse;
    absl::Status s;
    if (!why.ok()) {
      s = absl::Status(why.code(),
                       absl::StrCat(method, " on ", client->name(), " (", client->target(),
                                    "): ", parse.ok() ? "" : "reply: ", why.message()));
    }
    delete this;
    d(std::move(s));
  }
};

// A push's body: payloads at 4-byte offsets, so the ps applies float32 gradients where they
// arrived.
std::vector<Slice> AlignedBody(const PsClient::PushFrame& request) {
  std::vector<Slice> body;
  SerializeFrame(request, &body, /*align_payloads=*/true);
  return body;
}

}  // namespace

GrpcPsClient::GrpcPsClient(std::string name, const std::string& address,
                           const TransportSecurity& security)
    : name_(std::move(name)),
      peer_(profiler::PeerName(name_)),
      target_(address),
      channel_(MakeChannel(address, security, name_)),
      stub_(pb::ParameterServer::NewStub(channel_)),
      grpc_data_(std::make_shared<transport::GrpcDataChannel>(
          channel_, "/fulcrum.pb.ParameterServer", absl::StrCat(name_, " (", target_, ")"))) {}

absl::StatusOr<std::shared_ptr<transport::DataChannel>> GrpcPsClient::DataChannelFor(
    const std::string& task, absl::Duration timeout) {
  if (!tcp_data_plane_) return grpc_data_;
  MutexLock lock(&data_mu_);
  std::shared_ptr<transport::DataChannel>& data = tcp_[task];
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
  const std::string host = HostOf(target_);
  FULCRUM_ASSIGN_OR_RETURN(
      data, transport::TcpDataChannel::Connect(
                host, response.port(), response.ticket(), deadline,
                absl::StrCat(name_, " data plane (", host, ":", response.port(), ")")));
  return data;
}

template <typename Reply>
void GrpcPsClient::SendData(transport::DataMethod method, const std::string& task,
                            std::vector<Slice> body, Reply* response, absl::Duration timeout,
                            Done done) {
  response->error = absl::OkStatus();
  response->bytes = 0;
  size_t sent = 0;
  for (const Slice& s : body) sent += s.size();
  auto* call = new DataCall{std::move(done), this, transport::DataMethodName(method), sent};
  if (CallTracker* t = tracker_; t != nullptr) call->tracked = t->Begin(call->method, name_);
  absl::StatusOr<std::shared_ptr<transport::DataChannel>> channel = DataChannelFor(task, timeout);
  if (!channel.ok()) return call->Finish(channel.status(), absl::OkStatus(), 0);
  (*channel)->Call(
      method, std::move(body), timeout,
      [response](const Pieces& reply) {
        (void)response->Parse(reply);  // its error is the frame's, reported by Finish
        return absl::OkStatus();
      },
      [call, response](absl::Status status) {
        call->Finish(status, response->error, response->bytes);
      });
}

void GrpcPsClient::PullAsync(const pb::PullRequest* request, PullReply* response,
                             absl::Duration timeout, Done done) {
  SendData(transport::DataMethod::kPull, request->task(),
           {Slice::Own(request->SerializeAsString())}, response, timeout, std::move(done));
}

void GrpcPsClient::PushAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                             Done done) {
  SendData(transport::DataMethod::kPush, request->header.task(), AlignedBody(*request), response,
           timeout, std::move(done));
}

void GrpcPsClient::PushPullAsync(const PushFrame* request, PushReply* response,
                                 absl::Duration timeout, Done done) {
  SendData(transport::DataMethod::kPushPull, request->header.task(), AlignedBody(*request),
           response, timeout, std::move(done));
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
  // A stop request (Ctrl-C, a launcher's SIGTERM) ends the wait within one probe.
  while (absl::Now() < deadline && StopSignal() == 0) {
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
