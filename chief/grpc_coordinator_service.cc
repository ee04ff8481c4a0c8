#include "chief/grpc_coordinator_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/grpc/grpc_util.h"

namespace fulcrum::chief {
namespace {
// "worker:1", as the caller's certificate names it.
std::string TaskName(const pb::TaskId& task) { return absl::StrCat(task.job(), ":", task.index()); }
}  // namespace

grpc::Status GrpcCoordinatorService::RegisterTask(grpc::ServerContext* context,
                                                  const pb::RegisterTaskRequest* request,
                                                  pb::RegisterTaskResponse* response) {
  if (grpc::Status s = guard_.AuthorizeAs(*context, "RegisterTask", TaskName(request->task()));
      !s.ok()) {
    return s;
  }
  return runtime::ToGrpc(coordinator_->RegisterTask(*request, response));
}

grpc::Status GrpcCoordinatorService::WaitForStart(grpc::ServerContext* context,
                                                  const pb::WaitForStartRequest* request,
                                                  pb::WaitForStartResponse* response) {
  if (grpc::Status s = guard_.AuthorizeAs(*context, "WaitForStart", TaskName(request->task()));
      !s.ok()) {
    return s;
  }
  return runtime::ToGrpc(
      coordinator_->WaitForStart(*request, runtime::CallDeadline(*context), response));
}

grpc::Status GrpcCoordinatorService::Heartbeat(grpc::ServerContext* context,
                                               const pb::HeartbeatRequest* request,
                                               pb::HeartbeatResponse* response) {
  if (grpc::Status s = guard_.AuthorizeAs(*context, "Heartbeat", TaskName(request->task()));
      !s.ok()) {
    return s;
  }
  return runtime::ToGrpc(coordinator_->Heartbeat(*request, response));
}

grpc::Status GrpcCoordinatorService::ShouldStop(grpc::ServerContext* context,
                                                const pb::ShouldStopRequest* request,
                                                pb::ShouldStopResponse* response) {
  if (grpc::Status s = guard_.AuthorizeAs(*context, "ShouldStop", TaskName(request->task()));
      !s.ok()) {
    return s;
  }
  return runtime::ToGrpc(coordinator_->ShouldStop(*request, response));
}

grpc::Status GrpcCoordinatorService::ReportSummary(grpc::ServerContext* context,
                                                   const pb::ReportSummaryRequest* request,
                                                   pb::ReportSummaryResponse* response) {
  if (grpc::Status s = guard_.AuthorizeAs(*context, "ReportSummary", TaskName(request->task()));
      !s.ok()) {
    return s;
  }
  return runtime::ToGrpc(coordinator_->ReportSummary(*request, response));
}

}  // namespace fulcrum::chief
