#include "ps/service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "runtime/grpc_server.h"
#include "runtime/grpc_util.h"

namespace fulcrum::ps {
namespace {
// The only task that may call the control RPCs when identities are known (mTLS).
constexpr char kChief[] = "chief:0";
}  // namespace

template <typename Request, typename Response>
void PsService::Observe(const char* method, const Request& request, const Response& response,
                        int64_t begin_unix_us) {
  if (observer_ == nullptr) return;
  const std::string* peer;
  {
    MutexLock lock(&peers_mu_);
    auto it = peers_.find(request.task());
    if (it == peers_.end()) {
      it = peers_.emplace(request.task(), profiler::PeerName(request.task())).first;
    }
    peer = &it->second;  // map nodes are stable
  }
  profiler::ReportRpc(observer_, *peer, method, begin_unix_us, /*sent=*/response,
                      /*received=*/request);
}

grpc::Status PsService::CreateVariables(grpc::ServerContext* context,
                                        const pb::CreateVariablesRequest* request,
                                        pb::CreateVariablesResponse* response) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "CreateVariables", kChief); !s.ok()) return s;
  return runtime::ToGrpc(shard_->CreateVariables(*request, response));
}

grpc::Status PsService::Pull(grpc::ServerContext* context, const pb::PullRequest* request,
                             pb::PullResponse* response) {
  if (grpc::Status s = guard_.AuthorizeAs(*context, "Pull", request->task()); !s.ok()) return s;
  // A stranger is refused before anything records it (no per-peer entry).
  if (absl::Status s = shard_->CheckTask(request->task(), "Pull"); !s.ok()) {
    return runtime::ToGrpc(s);
  }
  const int64_t begin = profiler::NowUnixMicros();
  grpc::Status s =
      runtime::ToGrpc(shard_->Pull(*request, response, runtime::CallDeadline(*context)));
  Observe("Pull", *request, *response, begin);
  return s;
}

grpc::Status PsService::Push(grpc::ServerContext* context, const pb::PushRequest* request,
                             pb::PushResponse* response) {
  if (grpc::Status s = guard_.AuthorizeAs(*context, "Push", request->task()); !s.ok()) return s;
  if (absl::Status s = shard_->CheckTask(request->task(), "Push"); !s.ok()) {
    return runtime::ToGrpc(s);
  }
  const int64_t begin = profiler::NowUnixMicros();
  grpc::Status s = runtime::ToGrpc(shard_->Push(*request, response));
  Observe("Push", *request, *response, begin);
  return s;
}

grpc::Status PsService::PushPull(grpc::ServerContext* context, const pb::PushRequest* request,
                                 pb::PushResponse* response) {
  if (grpc::Status s = guard_.AuthorizeAs(*context, "PushPull", request->task()); !s.ok()) return s;
  if (absl::Status s = shard_->CheckTask(request->task(), "PushPull"); !s.ok()) {
    return runtime::ToGrpc(s);
  }
  const int64_t begin = profiler::NowUnixMicros();
  grpc::Status s =
      runtime::ToGrpc(shard_->PushPull(*request, response, runtime::CallDeadline(*context)));
  Observe("PushPull", *request, *response, begin);
  return s;
}

grpc::Status PsService::SaveShard(grpc::ServerContext* context, const pb::SaveShardRequest* request,
                                  pb::SaveShardResponse* response) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "SaveShard", kChief); !s.ok()) return s;
  return runtime::ToGrpc(shard_->SaveShard(*request, response, runtime::CallDeadline(*context)));
}

grpc::Status PsService::RestoreShard(grpc::ServerContext* context,
                                     const pb::RestoreShardRequest* request,
                                     pb::RestoreShardResponse* response) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "RestoreShard", kChief); !s.ok()) return s;
  return runtime::ToGrpc(shard_->RestoreShard(*request, response));
}

grpc::Status PsService::Stats(grpc::ServerContext* context, const pb::StatsRequest*,
                              pb::StatsResponse* response) {
  if (grpc::Status s = guard_.Authenticate(*context, "Stats"); !s.ok()) return s;
  shard_->Stats(response);
  return grpc::Status::OK;
}

grpc::Status PsService::Stop(grpc::ServerContext* context, const pb::StopRequest* request,
                             pb::StopResponse*) {
  if (grpc::Status s = guard_.AuthorizeOnly(*context, "Stop", kChief); !s.ok()) return s;
  shard_->Stop(request->reason());
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

bool PsService::WaitForShutdown(absl::Duration timeout, std::string* reason) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (!shutdown_requested_ && shutdown_cv_.WaitUntil(&mu_, deadline)) {
  }
  if (!shutdown_requested_) return false;
  *reason = shutdown_reason_;
  return true;
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
