// ps: the ParameterServer gRPC service (proto/ps.proto). Every data and control RPC forwards
// to a Shard; Ping is a bare echo (the no-PS-logic baseline of bench/ps_throughput);
// Shutdown records the request for the task runner (ps/ps_task.h) to act on and answers
// with the summary the runner hands back. Data RPCs are reported to an optional
// profiler::RpcObserver (per-peer traffic as the PS sees it). Every call first passes the
// runtime::CallGuard (token; with mTLS, Pull/Push/PushPull only under the caller's own task
// name and the control RPCs CreateVariables/SaveShard/RestoreShard/ReleaseWorkers/Stop/
// Shutdown only from chief:0), so a refused call changes nothing.
// The data RPCs (Pull, Push, PushPull) are the transport's (transport::GrpcDataService, and
// the tcp data plane's transport::TcpDataServer): both hand each request to ServeData, which
// parses the zero-copy frames of runtime/frames/wire_frame.h straight into pooled gradient buffers
// (or applies aligned float32 gradients where they arrived) and copies the values once into
// the reply's slices.
// Thread-safety: gRPC calls the handlers from many threads at once; all methods are safe.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server.h"
#include "profiler/rpc_observer.h"
#include "proto/ps.grpc.pb.h"
#include "ps/replicas.h"
#include "ps/shard.h"
#include "runtime/frames/wire_frame.h"
#include "runtime/grpc/security.h"
#include "transport/grpc_channel.h"
#include "transport/tcp_server.h"

namespace fulcrum::ps {

class PsService final : public transport::GrpcDataService {
 public:
  // `observer` (not owned, may be null) hears of every Pull, Push and PushPull; `guard`
  // checks every call (default: insecure, allows all).
  explicit PsService(Shard* shard, profiler::RpcObserver* observer = nullptr,
                     runtime::CallGuard guard = {});

  using PushFrame = runtime::InFrame<pb::PushRequest>;
  using PullReply = runtime::OutFrame<pb::PullResponse>;
  using PushReply = runtime::OutFrame<pb::PushResponse>;
  grpc::Status CreateVariables(grpc::ServerContext* context,
                               const pb::CreateVariablesRequest* request,
                               pb::CreateVariablesResponse* response);
  grpc::Status SaveShard(grpc::ServerContext* context, const pb::SaveShardRequest* request,
                         pb::SaveShardResponse* response);
  grpc::Status RestoreShard(grpc::ServerContext* context, const pb::RestoreShardRequest* request,
                            pb::RestoreShardResponse* response);
  grpc::Status Stats(grpc::ServerContext* context, const pb::StatsRequest* request,
                     pb::StatsResponse* response);
  grpc::Status Stop(grpc::ServerContext* context, const pb::StopRequest* request,
                    pb::StopResponse* response);
  grpc::Status Shutdown(grpc::ServerContext* context, const pb::ShutdownRequest* request,
                        pb::ShutdownResponse* response);
  grpc::Status Ping(grpc::ServerContext* context, const pb::PingRequest* request,
                    pb::PingResponse* response);
  grpc::Status ReleaseWorkers(grpc::ServerContext* context,
                              const pb::ReleaseWorkersRequest* request,
                              pb::ReleaseWorkersResponse* response);
  // The tcp data plane's port and a one-use ticket for the caller's task, checked as a data
  // RPC of that task is; FailedPrecondition when this ps serves no tcp data plane.
  grpc::Status OpenDataPlane(grpc::ServerContext* context, const pb::OpenDataPlaneRequest* request,
                             pb::OpenDataPlaneResponse* response);

  // --replicate_shards: Replicate (from the primary ps of request.shard) and PromoteReplica
  // (from the chief) go to the ps's ReplicaSet.
  grpc::Status Replicate(grpc::ServerContext* context, const pb::ReplicateRequest* request,
                         pb::ReplicateResponse* response);
  grpc::Status PromoteReplica(grpc::ServerContext* context,
                              const pb::PromoteReplicaRequest* request,
                              pb::PromoteReplicaResponse* response);
  // The ps's replicas (not owned; its own shard must be this service's). Set before the
  // server starts; without it the service has no replicas and makes no replication links.
  void set_replicas(ReplicaSet* replicas) { replicas_ = replicas; }

  // The tcp data plane (not owned; null: none). Set before the server starts.
  void set_data_plane(transport::TcpDataServer* server) { data_plane_ = server; }
  // Serves one data request from either transport: checks the caller once (the transport's
  // `authorize` for the task the request names, then that the task is one of the cluster's),
  // then runs it on the shard it addresses.
  absl::Status ServeData(const transport::DataRequest& call, std::vector<transport::Slice>* reply);

  // Waits up to `timeout` for a Shutdown RPC; true (and its reason in *reason) once one came.
  bool WaitForShutdown(absl::Duration timeout, std::string* reason);
  // The runner's answer to Shutdown: the task's summary.json text. A Shutdown call waits for
  // it up to kSummaryWait (then answers without one).
  void SetShutdownSummary(std::string summary_json);
  static constexpr absl::Duration kSummaryWait = absl::Seconds(20);

 private:
  // Registers `handler` as the unary method "/fulcrum.pb.ParameterServer/<method>".
  template <typename Request, typename Response>
  void Add(const char* method,
           grpc::Status (PsService::*handler)(grpc::ServerContext*, const Request*, Response*));

  // Reports a data RPC of `task` (bytes this process sent and received) to the observer.
  void Observe(const char* method, const std::string& task, uint64_t sent, uint64_t received,
               int64_t begin_unix_us);
  // ServeData's Pull.
  absl::Status ServePull(const transport::DataRequest& call, std::vector<transport::Slice>* reply);
  // The one check of a data request's caller: the transport's `authorize` for the task the
  // request names, then that the task is one of the cluster's.
  absl::Status Check(const transport::DataRequest& call, const std::string& task) const;

  // The shard a request addresses (ReplicaSet::Route).
  absl::StatusOr<Shard*> Route(bool has_shard, int shard, const char* method);

  Shard* const shard_;
  std::unique_ptr<ReplicaSet> no_replicas_;  // the default: the own shard only
  ReplicaSet* replicas_;
  profiler::RpcObserver* const observer_;
  const runtime::CallGuard guard_;
  transport::TcpDataServer* data_plane_ = nullptr;
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

// Starts the tcp data plane of `service` on `host` (a transport::TcpDataServer serving
// PsService::ServeData; the kernel picks the port) and sets it as the service's. `name`
// ("ps:0") labels its logs and errors. Unavailable when it cannot listen there.
absl::StatusOr<std::unique_ptr<transport::TcpDataServer>> StartDataPlane(PsService* service,
                                                                         const std::string& name,
                                                                         const std::string& host);

// Starts a gRPC server for `service` on `address` ("host:port"; port 0 picks a free one,
// returned in *port) through runtime::StartGrpcServer. Unavailable naming the task and
// address when it cannot listen there.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(PsService* service,
                                                          const std::string& task_name,
                                                          const std::string& address, int* port);

}  // namespace fulcrum::ps
