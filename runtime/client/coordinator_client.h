// runtime: the client side of the coordinator contract (proto/coordinator.proto), seen from a
// task of the cluster: register with the chief, wait for the start, heartbeat, hand in the
// summary. CoordinatorClient is the interface (a test or an in-process chief can stand in);
// GrpcCoordinatorClient talks to the chief over gRPC, as GrpcPsClient does to a PS. Every
// call has a deadline, is reported to an optional profiler::RpcObserver (peer "chief-0"),
// and maps the chief's errors with RemoteFailure, so that only the chief's refusal of this
// task's own configuration reads as bad input.
// Thread-safety: every method may be called from many threads at once; set_observer before
// the first call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "profiler/rpc_observer.h"
#include "proto/coordinator.grpc.pb.h"
#include "runtime/grpc/security.h"

namespace fulcrum::runtime {

class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;

  // Registers this task with its configuration fingerprint (runtime::ConfigFingerprint),
  // retrying with backoff while the chief is unreachable. InvalidArgument when the chief
  // refuses the task (its flags differ): bad input of this task, passed through.
  // Unauthenticated / PermissionDenied at once when the chief refuses its credentials.
  // DeadlineExceeded once `deadline` passed without an answer. Safe to retry.
  virtual absl::StatusOr<pb::RegisterTaskResponse> Register(const std::string& config_fingerprint,
                                                            absl::Time deadline) = 0;

  // Waits (long polls) until the chief starts the run. Aborted when the chief ended the run
  // before it started; DeadlineExceeded once `deadline` passed. Safe to retry.
  virtual absl::Status WaitForStart(absl::Time deadline) = 0;

  // Tells the chief this task is alive at `local_step`, and its oldest call in flight
  // (`waiting_for`, "" when none, for `waiting_ms`); returns the chief's answer: whether it
  // asks the task to stop, and then why and whether the run failed. Errors: the call's
  // (Unavailable, DeadlineExceeded, ...). Safe to retry.
  virtual absl::StatusOr<pb::HeartbeatResponse> Heartbeat(int64_t local_step,
                                                          const std::string& waiting_for,
                                                          int64_t waiting_ms) = 0;

  // Hands the task's summary.json text to the chief. Safe to retry (the chief keeps the
  // last one per task).
  virtual absl::Status ReportSummary(const std::string& summary_json) = 0;
};

class GrpcCoordinatorClient final : public CoordinatorClient {
 public:
  struct Options {
    absl::Duration register_attempt = absl::Seconds(5);  // one RegisterTask call
    absl::Duration start_poll = absl::Seconds(2);        // the chief holds a WaitForStart this long
    absl::Duration start_call = absl::Seconds(10);       // one WaitForStart call
    absl::Duration heartbeat = absl::Seconds(5);         // one Heartbeat call
    absl::Duration report = absl::Seconds(30);  // ReportSummary, waiting for the chief to be up
    TransportSecurity security;  // how the channel is secured (default: insecure)
  };

  // Speaks for `task` (job, index) to the chief at `address` ("host:port").
  GrpcCoordinatorClient(pb::TaskId task, const std::string& address, Options options);
  GrpcCoordinatorClient(pb::TaskId task, const std::string& address)
      : GrpcCoordinatorClient(std::move(task), address, Options()) {}

  // Not owned; null (the default) reports nothing.
  void set_observer(profiler::RpcObserver* observer) { observer_ = observer; }
  const std::string& target() const { return target_; }

  absl::StatusOr<pb::RegisterTaskResponse> Register(const std::string& config_fingerprint,
                                                    absl::Time deadline) override;
  absl::Status WaitForStart(absl::Time deadline) override;
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(int64_t local_step,
                                                  const std::string& waiting_for,
                                                  int64_t waiting_ms) override;
  absl::Status ReportSummary(const std::string& summary_json) override;

 private:
  // One WaitForStart call; *started/*ended from its answer.
  absl::Status PollStart(bool* started, bool* ended);

  const pb::TaskId task_;
  const std::string task_name_;  // "worker:0", for messages
  const std::string peer_;       // "chief-0", for the observer
  const std::string target_;
  const Options options_;
  profiler::RpcObserver* observer_ = nullptr;
  std::unique_ptr<pb::Coordinator::Stub> stub_;
};

}  // namespace fulcrum::runtime
