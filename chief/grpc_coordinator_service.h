// chief: the gRPC adapter of the coordinator (proto/coordinator.proto). It only converts:
// each handler calls the Coordinator's logic (chief/coordinator.h) and maps its absl::Status
// to a grpc::Status with runtime::ToGrpc; the long poll is bounded by the caller's deadline.
// Every call first passes the runtime::CallGuard: the token and, with mTLS, a request's task
// id must be the caller's own (its certificate's name).
// Start the server with runtime::StartGrpcServer (runtime/grpc/grpc_server.h).
// Thread-safety: gRPC calls the handlers from many threads at once; the logic is thread-safe.
#pragma once

#include "chief/coordinator.h"
#include "proto/coordinator.grpc.pb.h"
#include "runtime/grpc/security.h"

namespace fulcrum::chief {

class GrpcCoordinatorService final : public pb::Coordinator::Service {
 public:
  // `coordinator` (not owned) must outlive the server this service is registered with;
  // `guard` checks every call (default: insecure, allows all).
  explicit GrpcCoordinatorService(Coordinator* coordinator, runtime::CallGuard guard = {})
      : coordinator_(coordinator), guard_(std::move(guard)) {}

  grpc::Status RegisterTask(grpc::ServerContext* context, const pb::RegisterTaskRequest* request,
                            pb::RegisterTaskResponse* response) override;
  grpc::Status WaitForStart(grpc::ServerContext* context, const pb::WaitForStartRequest* request,
                            pb::WaitForStartResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const pb::HeartbeatRequest* request,
                         pb::HeartbeatResponse* response) override;
  grpc::Status ShouldStop(grpc::ServerContext* context, const pb::ShouldStopRequest* request,
                          pb::ShouldStopResponse* response) override;
  grpc::Status ReportSummary(grpc::ServerContext* context, const pb::ReportSummaryRequest* request,
                             pb::ReportSummaryResponse* response) override;

 private:
  Coordinator* const coordinator_;
  const runtime::CallGuard guard_;
};

}  // namespace fulcrum::chief
