#include "chief/grpc_coordinator_service.h"

#include <chrono>

#include "absl/time/clock.h"
#include "runtime/grpc_util.h"

namespace fulcrum::chief {
grpc::Status GrpcCoordinatorService::RegisterTask(grpc::ServerContext*,
                                                  const pb::RegisterTaskRequest* request,
                                                  pb::RegisterTaskResponse* response) {
  return runtime::ToGrpc(coordinator_->RegisterTask(*request, response));
}

grpc::Status GrpcCoordinatorService::WaitForStart(grpc::ServerContext* context,
                                                  const pb::WaitForStartRequest* request,
                                                  pb::WaitForStartResponse* response) {
  return runtime::ToGrpc(
      coordinator_->WaitForStart(*request, runtime::CallDeadline(*context), response));
}

grpc::Status GrpcCoordinatorService::Heartbeat(grpc::ServerContext*,
                                               const pb::HeartbeatRequest* request,
                                               pb::HeartbeatResponse* response) {
  return runtime::ToGrpc(coordinator_->Heartbeat(*request, response));
}

grpc::Status GrpcCoordinatorService::ShouldStop(grpc::ServerContext*,
                                                const pb::ShouldStopRequest* request,
                                                pb::ShouldStopResponse* response) {
  return runtime::ToGrpc(coordinator_->ShouldStop(*request, response));
}

grpc::Status GrpcCoordinatorService::ReportSummary(grpc::ServerContext*,
                                                   const pb::ReportSummaryRequest* request,
                                                   pb::ReportSummaryResponse* response) {
  return runtime::ToGrpc(coordinator_->ReportSummary(*request, response));
}

}  // namespace fulcrum::chief
