#include "runtime/client/coordinator_client.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/signals.h"
#include "runtime/grpc/grpc_util.h"
#include "spdlog/spdlog.h"

namespace fulcrum::runtime {
namespace {

using profiler::NowUnixMicros;

// How often a task still waiting for the chief says so in its log.
constexpr absl::Duration kWaitLogInterval = absl::Seconds(5);
// Pause after a failed WaitForStart before the next poll (a held poll needs none).
constexpr absl::Duration kStartRetryPause = absl::Milliseconds(200);

std::string HostnameOfThisMachine() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

GrpcCoordinatorClient::GrpcCoordinatorClient(pb::TaskId task, const std::string& address,
                                             Options options)
    : task_(std::move(task)),
      task_name_(absl::StrCat(task_.job(), ":", task_.index())),
      peer_("chief-0"),
      target_(address),
      options_(options),
      stub_(pb::Coordinator::NewStub(MakeChannel(address, options_.security, "chief:0"))) {}

absl::StatusOr<pb::RegisterTaskResponse> GrpcCoordinatorClient::Register(
    const std::string& config_fingerprint, absl::Time deadline) {
  pb::RegisterTaskRequest request;
  *request.mutable_task() = task_;
  request.set_config_fingerprint(config_fingerprint);
  request.set_hostname(HostnameOfThisMachine());
  request.set_pid(static_cast<int>(::getpid()));
  absl::Duration backoff = absl::Milliseconds(100);
  absl::Time next_log = absl::Now();
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(
        std::clamp(deadline - absl::Now(), absl::Milliseconds(100), options_.register_attempt)));
    // The call waits for the connection (and drives it: a TLS handshake advances only while
    // some call polls the channel) instead of failing at once while the chief is not up.
    context.set_wait_for_ready(true);
    pb::RegisterTaskResponse response;
    const int64_t begin = NowUnixMicros();
    const grpc::Status s = stub_->RegisterTask(&context, request, &response);
    profiler::ReportRpc(observer_, peer_, "RegisterTask", begin, request, response);
    if (s.ok()) return response;
    // The chief refused this task's configuration: the task's own bad input.
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      return absl::InvalidArgumentError(s.error_message());
    }
    // Refused for its credentials (token, certificate name): retrying cannot help.
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      return FromGrpc(s, absl::StrCat("RegisterTask of ", task_name_, " on chief:0 at ", target_));
    }
    if (const int signal = StopSignal(); signal != 0) {
      return absl::CancelledError(absl::StrCat(task_name_, ": interrupted by ", SignalName(signal),
                                               " while waiting for chief:0 at ", target_));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      // ALREADY_EXISTS: the chief answers, but another process holds this task's name.
      const bool refused = s.error_code() == grpc::StatusCode::ALREADY_EXISTS;
      return absl::DeadlineExceededError(absl::StrCat(
          task_name_, ": chief:0 at ", target_,
          refused ? " still refused this task at the start-up deadline: "
                  : " did not answer before the start-up deadline: ",
          s.error_message()));
    }
    if (now >= next_log) {
      spdlog::info("waiting for chief:0 at {} ({})", target_, s.error_message());
      next_log = now + kWaitLogInterval;
    }
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

absl::Status GrpcCoordinatorClient::PollStart(bool* started, bool* ended) {
  pb::WaitForStartRequest request;
  *request.mutable_task() = task_;
  request.set_timeout_ms(absl::ToInt64Milliseconds(options_.start_poll));
  pb::WaitForStartResponse response;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(options_.start_call));
  const int64_t begin = NowUnixMicros();
  const grpc::Status s = stub_->WaitForStart(&context, request, &response);
  profiler::ReportRpc(observer_, peer_, "WaitForStart", begin, request, response);
  *started = s.ok() && response.started();
  *ended = s.ok() && response.should_stop();
  return RemoteFailure(FromGrpc(s, absl::StrCat("WaitForStart on chief:0 (", target_, ")")));
}

absl::Status GrpcCoordinatorClient::WaitForStart(absl::Time deadline) {
  absl::Time next_log = absl::Now() + kWaitLogInterval;
  while (true) {
    bool started = false, ended = false;
    const absl::Status s = PollStart(&started, &ended);
    if (started) return absl::OkStatus();
    if (ended) {
      return absl::AbortedError(
          absl::StrCat(task_name_, ": the chief ended the run before it started"));
    }
    if (const int signal = StopSignal(); signal != 0) {
      return absl::CancelledError(absl::StrCat(task_name_, ": interrupted by ", SignalName(signal),
                                               " while waiting for the chief to start the run"));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(task_name_, ": the chief did not start the run before the start-up deadline",
                       s.ok() ? "" : absl::StrCat(": ", s.message())));
    }
    if (now >= next_log) {
      spdlog::info("registered; waiting for the chief to start the run");
      next_log = now + kWaitLogInterval;
    }
    if (!s.ok()) absl::SleepFor(std::min(kStartRetryPause, deadline - now));
  }
}

absl::StatusOr<pb::HeartbeatResponse> GrpcCoordinatorClient::Heartbeat(
    int64_t local_step, const std::string& waiting_for, int64_t waiting_ms) {
  pb::HeartbeatRequest request;
  *request.mutable_task() = task_;
  request.set_local_step(local_step);
  request.set_waiting_for(waiting_for);
  request.set_waiting_ms(waiting_ms);
  pb::HeartbeatResponse response;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(options_.heartbeat));
  const int64_t begin = NowUnixMicros();
  const grpc::Status s = stub_->Heartbeat(&context, request, &response);
  profiler::ReportRpc(observer_, peer_, "Heartbeat", begin, request, response);
  if (!s.ok()) {
    return RemoteFailure(FromGrpc(s, absl::StrCat("Heartbeat to chief:0 (", target_, ")")));
  }
  return response;
}

absl::Status GrpcCoordinatorClient::ReportSummary(const std::string& summary_json) {
  pb::ReportSummaryRequest request;
  *request.mutable_task() = task_;
  request.set_summary_json(summary_json);
  pb::ReportSummaryResponse response;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(options_.report));
  // A chief that is restarting (it takes the job over) answers once it is back.
  context.set_wait_for_ready(true);
  const int64_t begin = NowUnixMicros();
  const grpc::Status s = stub_->ReportSummary(&context, request, &response);
  profiler::ReportRpc(observer_, peer_, "ReportSummary", begin, request, response);
  return RemoteFailure(FromGrpc(s, "ReportSummary to chief:0"));
}

}  // namespace fulcrum::runtime
