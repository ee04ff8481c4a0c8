// ps: the ParameterServer gRPC service (proto/ps.proto). Every data and control RPC forwards
// to a Shard; Ping is a bare echo (the no-PS-logic baseline of bench/ps_throughput);
// Shutdown records the request for the task runner (ps/ps_task.h) to act on and answers
// with the summary the runner hands back. Data RPCs are reported to an optional
// profiler::RpcObserver (per-peer traffic as the PS sees it). Every call first passes the
// runtime::CallGuard (token; with mTLS, Pull/Push/PushPull only under the caller's own task
// name and the control RPCs CreateVariables/SaveShard/RestoreShard/ReleaseWorkers/Stop/
// Shutdown only from chief:0), so a refused call changes nothing.
// Thread-safety: gRPC calls the handlers from many threads at once; all methods are safe.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "profiler/rpc_observer.h"
#include "proto/ps.grpc.pb.h"
#include "ps/shard.h"
#include "runtime/security.h"

namespace fulcrum::ps {

class PsService final : public pb::ParameterServer::Service {
 public:
  // `observer` (not owned, may be null) hears of every Pull, Push and PushPull; `guard`
  // checks every call (default: insecure, allows all).
  explicit PsService(Shard* shard, profiler::RpcObserver* observer = nullptr,
                     runtime::CallGuard guard = {})
      : shard_(shard), observer_(observer), guard_(std::move(guard)) {}

  grpc::Status CreateVariables(grpc::ServerContext* context,
                               const pb::CreateVariablesRequest* request,
                               pb::CreateVariablesResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* context, const pb::PullRequest* request,
                    pb::PullResponse* response) override;
  grpc::Status Push(grpc::ServerContext* context, const pb::PushRequest* request,
                    pb::PushResponse* response) override;
  grpc::Status PushPull(grpc::ServerContext* context, const pb::PushRequest* request,
                        pb::PushResponse* response) override;
  grpc::Status SaveShard(grpc::ServerContext* context, const pb::SaveShardRequest* request,
                         pb::SaveShardResponse* response) override;
  grpc::Status RestoreShard(grpc::ServerContext* context, const pb::RestoreShardRequest* request,
                            pb::RestoreShardResponse* response) override;
  grpc::Status Stats(grpc::ServerContext* context, const pb::StatsRequest* request,
                     pb::StatsResponse* response) override;
  grpc::Status Stop(grpc::ServerContext* context, const pb::StopRequest* request,
                    pb::StopResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const pb::ShutdownRequest* request,
                        pb::ShutdownResponse* response) override;
  grpc::Status Ping(grpc::ServerContext* context, const pb::PingRequest* request,
                    pb::PingResponse* response) override;
  grpc::Status ReleaseWorkers(grpc::ServerContext* context,
                              const pb::ReleaseWorkersRequest* request,
                              pb::ReleaseWorkersResponse* response) override;

  // Waits up to `timeout` for a Shutdown RPC; true (and its reason in *reason) once one came.
  bool WaitForShutdown(absl::Duration timeout, std::string* reason);
  // The runner's answer to Shutdown: the task's summary.json text. A Shutdown call waits for
  // it up to kSummaryWait (then answers without one).
  void SetShutdownSummary(std::string summary_json);
  static constexpr absl::Duration kSummaryWait = absl::Seconds(20);

 private:
  template <typename Request, typename Response>
  void Observe(const char* method, const Request& request, const Response& response,
               int64_t begin_unix_us);

  Shard* const shard_;
  profiler::RpcObserver* const observer_;
  const runtime::CallGuard guard_;
  Mutex mu_;
  CondVar shutdown_cv_;  // signalled when a Shutdown arrives or the summary is set
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::string shutdown_reason_ ABSL_GUARDED_BY(mu_);
  bool summary_ready_ ABSL_GUARDED_BY(mu_) = false;
  std::string summary_json_ ABSL_GUARDED_BY(mu_);
  Mutex peers_mu_;
  // "worker:1" -> "worker-1", built once per peer.
  std::map<std::string, std::string, std::less<>> peers_ ABSL_GUARDED_BY(peers_mu_);
};

// Starts a gRPC server for `service` on `address` ("host:port"; port 0 picks a free one,
// returned in *port) through runtime::StartGrpcServer. Unavailable naming the task and
// address when it cannot listen there.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(PsService* service,
                                                          const std::string& task_name,
                                                          const std::string& address, int* port);

}  // namespace fulcrum::ps
