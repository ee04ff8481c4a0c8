// ps: the ParameterServer gRPC service (proto/ps.proto). Every data and control RPC forwards
// to a Shard; Ping is a bare echo (the no-PS-logic baseline of bench/ps_throughput);
// Shutdown records the request for the task runner (ps/ps_task.h) to act on.
// Thread-safety: gRPC calls the handlers from many threads at once; all methods are safe.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "proto/ps.grpc.pb.h"
#include "ps/shard.h"

namespace fulcrum::ps {

class PsService final : public pb::ParameterServer::Service {
 public:
  explicit PsService(Shard* shard) : shard_(shard) {}

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

  // Waits up to `timeout` for a Shutdown RPC; true (and its reason in *reason) once one came.
  bool WaitForShutdown(absl::Duration timeout, std::string* reason);

 private:
  Shard* const shard_;
  std::mutex mu_;  // guards the two below
  std::condition_variable shutdown_cv_;
  bool shutdown_requested_ = false;
  std::string shutdown_reason_;
};

// Starts a gRPC server for `service` on `address` ("host:port"; port 0 picks a free one,
// returned in *port) with Fulcrum's server settings. Unavailable naming the task and
// address when it cannot listen there.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(PsService* service,
                                                          const std::string& task_name,
                                                          const std::string& address, int* port);

}  // namespace fulcrum::ps
