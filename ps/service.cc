#include "ps/service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/method_handler.h"
#include "runtime/grpc/grpc_server.h"
#include "runtime/grpc/grpc_util.h"
#include "transport/tcp_server.h"

namespace fulcrum::ps {
namespace {
// The only task that may call the control RPCs when identities are known (mTLS).
constexpr char kChief[] = "chief:0";

// The service's full name in proto/ps.proto: methods are registered as "/<it>/<Method>".
constexpr char kService[] = "/fulcrum.pb.ParameterServer";

}  // namespace

PsService::PsService(Shard* shard, profiler::RpcObserver* observer, runtime::CallGuard guard)
    : transport::GrpcDataService(
          kService,
          [this](const transport::DataRequest& call, std::vector<transport::Slice>* reply) {
            return ServeData(call, reply);
          },
          [this](const grpc::ServerContext& context, transport::DataMethod method,
                 const std::string& task) {
            return transport::FromGrpcStatus(
                guard_.AuthorizeAs(context, transport::DataMethodName(method), task));
          }),
      shard_(shard),
      no_replicas_(std::make_unique<ReplicaSet>(
          shard,
          [name = shard->name()](int backup) -> absl::StatusOr<std::unique_ptr<Replicator>> {
            return absl::FailedPreconditionError(absl::StrCat(
                name, " cannot reach ps:", backup, " as a backup (it runs without replication)"));
          },
          [](Shard&) {})),
      replicas_(no_replicas_.get()),
      observer_(observer),
      guard_(std::move(guard)) {
  // The control methods of proto/ps.proto's ParameterServer, registered as the generated
  // service would (the data methods are the transport's, above).
  Add<pb::CreateVariablesRequest, pb::CreateVariablesResponse>("CreateVariables",
                                                               &PsService::CreateVariables);
  Add<pb::SaveShardRequest, pb::SaveShardResponse>("SaveShard", &PsService::SaveShard);
  Add<pb::RestoreShardRequest, pb::RestoreShardResponse>("RestoreShard", &PsService::RestoreShard);
  Add<pb::StatsRequest, pb::StatsResponse>("Stats", &PsService::Stats);
  Add<pb::StopRequest, pb::StopResponse>("Stop", &PsService::Stop);
  Add<pb::ShutdownRequest, pb::ShutdownResponse>("Shutdown", &PsService::Shutdown);
  Add<pb::PingRequest, pb::PingResponse>("Ping", &PsService::Ping);
  Add<pb::ReleaseWorkersRequest, pb::ReleaseWorkersResponse>("ReleaseWorkers",
                                                             &PsService::ReleaseWorkers);
  Add<pb::OpenDataPlaneRequest, pb::OpenDataPlaneResponse>("OpenDataPlane",
                                                           &PsService::OpenDataPlane);
  Add<pb::ReplicateRequest, pb::ReplicateResponse>("Replicate", &PsService::Replicate);
  Add<pb::PromoteReplicaRequest, pb::PromoteReplicaResponse>("PromoteReplica",
                                                             &PsService::PromoteReplica);
}

absl::StatusOr<Shard*> PsService::Route(bool has_shard, int shard, const char* method) {
  return replicas_->Route(has_shard ? std::optional<int>(shard) : std::nullopt, method);
}

template <typename Request, typename Response>
void PsService::Add(const char* method,
                    grpc::Status (PsService::*handler)(grpc::ServerContext*, const Request*,
                                                       Response*)) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      MethodName(absl::StrCat(kService, "/", method)), grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<PsService, Request, Response>(
          [handler](PsService* service, grpc::ServerContext* context, const Request* request,
                    Response* response) { return (service->*handler)(context, request, response); },
          this)));
}

void PsService::Observe(const char* method, const std::string& task, uint64_t sent,
                        uint64_t received, int64_t begin_unix_us) {
  if (observer_ == nullptr) return;
  const std::string* peer;
  {
    MutexLock lock(&peers_mu_);
    auto it = peers_.find(task);
    if (it == peers_.end()) it = peers_.emplace(task, profiler::PeerName(task)).first;
    peer = &it->second;  // map nodes are stable
  }
  profiler::ReportRpcBytes(observer_, *peer, method, begin_unix_us, sent, received);
}

grpc::Status PsService::CreateVariables(grpc::ServerContext* context,
                                        const pb::CreateVariablesRequest* request,
                                        pb::CreateVariablesResponse* response) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "CreateVariables", kChief); !s.ok()) return s;
  return runtime::ToGrpc(replicas_->CreateVariables(*request, response));
}

grpc::Status PsService::OpenDataPlane(grpc::ServerContext* context,
                                      const pb::OpenDataPlaneRequest* request,
                                      pb::OpenDataPlaneResponse* response) {
  // Checked as a data request of that task is.
  if (grpc::Status s = guard_.AuthorizeAs(*context, "OpenDataPlane", request->task()); !s.ok()) {
    return s;
  }
  if (absl::Status s = shard_->CheckTask(request->task(), "OpenDataPlane"); !s.ok()) {
    return runtime::ToGrpc(s);
  }
  if (data_plane_ == nullptr) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat(shard_->name(), " serves no tcp data plane (it runs with --data_plane=grpc)"));
  }
  response->set_port(data_plane_->port());
  response->set_ticket(data_plane_->IssueTicket(request->task()));
  return grpc::Status::OK;
}

absl::Status PsService::ServeData(const transport::DataRequest& call,
                                  std::vector<transport::Slice>* reply) {
  if (call.method == transport::DataMethod::kPull) return ServePull(call, reply);
  const int64_t begin = profiler::NowUnixMicros();
  const char* name = transport::DataMethodName(call.method);
  PushFrame request;
  // The body outlives the request here: aligned float32 gradients are applied in place.
  request.borrow_aligned_f32 = true;
  if (absl::Status s = request.Parse(*call.body); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(name, " request: ", s.message()));
  }
  const pb::PushRequest& header = request.header;
  FULCRUM_RETURN_IF_ERROR(Check(call, header.task()));
  absl::StatusOr<Shard*> shard = Route(header.has_shard(), header.shard(), name);
  absl::Status s = shard.status();
  size_t sent = 0;
  if (call.method == transport::DataMethod::kPush) {
    pb::PushResponse response;
    if (s.ok()) s = (*shard)->Push(header, request.values, &response);
    if (s.ok()) reply->push_back(transport::Slice::Own(response.SerializeAsString()));
    sent = response.ByteSizeLong();
  } else {
    PushReply response;
    FrameSink sink(&response.chunks);
    if (s.ok()) {
      s = (*shard)->PushPull(header, request.values, sink, &response.header, call.deadline);
    }
    if (s.ok()) runtime::SerializeFrame(response, reply);
    sent = response.ByteSize();
  }
  Observe(name, header.task(), sent, request.bytes, begin);
  return s;
}

absl::Status PsService::ServePull(const transport::DataRequest& call,
                                  std::vector<transport::Slice>* reply) {
  const int64_t begin = profiler::NowUnixMicros();
  std::string bytes;
  for (const auto& p : *call.body) bytes.append(p.data(), p.size());
  pb::PullRequest request;
  if (!request.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("Pull request does not parse as protobuf");
  }
  FULCRUM_RETURN_IF_ERROR(Check(call, request.task()));
  absl::StatusOr<Shard*> shard = Route(request.has_shard(), request.shard(), "Pull");
  PullReply response;
  FrameSink sink(&response.chunks);
  const absl::Status s =
      shard.ok() ? (*shard)->Pull(request, sink, &response.header, call.deadline) : shard.status();
  if (s.ok()) runtime::SerializeFrame(response, reply);
  Observe("Pull", request.task(), response.ByteSize(), request.ByteSizeLong(), begin);
  return s;
}

absl::Status PsService::Check(const transport::DataRequest& call, const std::string& task) const {
  FULCRUM_RETURN_IF_ERROR(call.authorize(task));
  // A stranger is refused before anything records it (no per-peer entry).
  return shard_->CheckTask(task, transport::DataMethodName(call.method));
}

grpc::Status PsService::SaveShard(grpc::ServerContext* context, const pb::SaveShardRequest* request,
                                  pb::SaveShardResponse* response) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "SaveShard", kChief); !s.ok()) return s;
  absl::StatusOr<Shard*> shard = Route(request->has_shard(), request->shard(), "SaveShard");
  if (!shard.ok()) return runtime::ToGrpc(shard.status());
  return runtime::ToGrpc((*shard)->SaveShard(*request, response, runtime::CallDeadline(*context)));
}

grpc::Status PsService::RestoreShard(grpc::ServerContext* context,
                                     const pb::RestoreShardRequest* request,
                                     pb::RestoreShardResponse* response) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "RestoreShard", kChief); !s.ok()) return s;
  // A replica is restored whether or not it serves (the chief restores every copy).
  absl::StatusOr<Shard*> shard = request->has_shard() && request->shard() != shard_->task_index()
                                     ? replicas_->Replica(request->shard(), "RestoreShard")
                                     : absl::StatusOr<Shard*>(shard_);
  if (!shard.ok()) return runtime::ToGrpc(shard.status());
  return runtime::ToGrpc((*shard)->RestoreShard(*request, response));
}

grpc::Status PsService::Stats(grpc::ServerContext* context, const pb::StatsRequest* request,
                              pb::StatsResponse* response) {
  if (grpc::Status s = guard_.Authenticate(*context, "Stats"); !s.ok()) return s;
  absl::StatusOr<Shard*> shard = Route(request->has_shard(), request->shard(), "Stats");
  if (!shard.ok()) return runtime::ToGrpc(shard.status());
  (*shard)->Stats(response);
  replicas_->AddStats(response);
  return grpc::Status::OK;
}

grpc::Status PsService::Stop(grpc::ServerContext* context, const pb::StopRequest* request,
                             pb::StopResponse*) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "Stop", kChief); !s.ok()) return s;
  replicas_->StopAll(request->reason());
  return grpc::Status::OK;
}

grpc::Status PsService::Shutdown(grpc::ServerContext* context, const pb::ShutdownRequest* request,
                                 pb::ShutdownResponse* response) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "Shutdown", kChief); !s.ok()) return s;
  shard_->Touch();
  MutexLock lock(&mu_);
  if (!shutdown_requested_) {
    shutdown_requested_ = true;
    shutdown_reason_ = request->reason();
  }
  shutdown_cv_.SignalAll();
  // Wait for the runner's summary, but never past the caller's deadline.
  const absl::Time deadline = std::min(runtime::CallDeadline(*context), absl::Now() + kSummaryWait);
  while (!summary_ready_ && shutdown_cv_.WaitUntil(&mu_, deadline)) {
  }
  if (summary_ready_) response->set_summary_json(summary_json_);
  return grpc::Status::OK;
}

void PsService::SetShutdownSummary(std::string summary_json) {
  MutexLock lock(&mu_);
  summary_json_ = std::move(summary_json);
  summary_ready_ = true;
  shutdown_cv_.SignalAll();
}

grpc::Status PsService::Ping(grpc::ServerContext* context, const pb::PingRequest* request,
                             pb::PingResponse* response) {
  if (grpc::Status s = guard_.Authenticate(*context, "Ping"); !s.ok()) return s;
  return runtime::ToGrpc(shard_->Ping(*request, response));
}

grpc::Status PsService::ReleaseWorkers(grpc::ServerContext* context,
                                       const pb::ReleaseWorkersRequest* request,
                                       pb::ReleaseWorkersResponse*) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "ReleaseWorkers", kChief); !s.ok()) return s;
  return runtime::ToGrpc(shard_->ReleaseWorkers(*request));
}

grpc::Status PsService::Replicate(grpc::ServerContext* context, const pb::ReplicateRequest* request,
                                  pb::ReplicateResponse*) {
  const std::string primary = absl::StrCat("ps:", request->shard());
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "Replicate", primary.c_str()); !s.ok()) {
    return s;
  }
  return runtime::ToGrpc(replicas_->Replicate(*request));
}

grpc::Status PsService::PromoteReplica(grpc::ServerContext* context,
                                       const pb::PromoteReplicaRequest* request,
                                       pb::PromoteReplicaResponse* response) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "PromoteReplica", kChief); !s.ok()) return s;
  absl::StatusOr<int64_t> step = replicas_->Promote(request->shard(), request->reason());
  if (!step.ok()) return runtime::ToGrpc(step.status());
  response->set_global_step(*step);
  return grpc::Status::OK;
}

bool PsService::WaitForShutdown(absl::Duration timeout, std::string* reason) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (!shutdown_requested_ && shutdown_cv_.WaitUntil(&mu_, deadline)) {
  }
  if (!shutdown_requested_) return false;
  *reason = shutdown_reason_;
  return true;
}

absl::StatusOr<std::unique_ptr<transport::TcpDataServer>> StartDataPlane(PsService* service,
                                                                         const std::string& name,
                                                                         const std::string& host) {
  FULCRUM_ASSIGN_OR_RETURN(
      std::unique_ptr<transport::TcpDataServer> server,
      transport::TcpDataServer::Start(
          name, host,
          [service](const transport::DataRequest& call, std::vector<transport::Slice>* reply) {
            return service->ServeData(call, reply);
          }));
  service->set_data_plane(server.get());
  return server;
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(PsService* service,
                                                          const std::string& task_name,
                                                          const std::string& address, int* port) {
  FULCRUM_ASSIGN_OR_RETURN(runtime::StartedServer started,
                           runtime::StartGrpcServer(task_name, address, {service}));
  if (port != nullptr) *port = started.port;
  return std::move(started.server);
}

}  // namespace fulcrum::ps
