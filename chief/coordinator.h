// chief: the coordinator service (proto/coordinator.proto). Workers register (their
// configuration fingerprint must match the chief's), long-poll for the start, heartbeat,
// learn when to stop and hand in their summaries; the chief's run loop reads all of it.
// Thread-safety: all methods are thread-safe (gRPC calls them from its threads).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.grpc.pb.h"

namespace fulcrum::chief {

class Coordinator final : public pb::Coordinator::Service {
 public:
  // `fingerprint`: runtime::ConfigFingerprint of the chief; `num_workers` expected.
  Coordinator(std::string run_id, std::string run_dir, std::string fingerprint, int num_workers);

  grpc::Status RegisterTask(grpc::ServerContext*, const pb::RegisterTaskRequest* request,
                            pb::RegisterTaskResponse* response) override;
  grpc::Status WaitForStart(grpc::ServerContext*, const pb::WaitForStartRequest* request,
                            pb::WaitForStartResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const pb::HeartbeatRequest* request,
                         pb::HeartbeatResponse* response) override;
  grpc::Status ShouldStop(grpc::ServerContext*, const pb::ShouldStopRequest* request,
                          pb::ShouldStopResponse* response) override;
  grpc::Status ReportSummary(grpc::ServerContext*, const pb::ReportSummaryRequest* request,
                             pb::ReportSummaryResponse* response) override;

  // Waits until every worker has registered or `deadline`; returns the indices still missing.
  std::vector<int> WaitForWorkers(absl::Time deadline);
  void Start();
  void RequestStop(const std::string& reason);
  // Waits until every worker has reported its summary or `deadline`; returns those missing.
  std::vector<int> WaitForSummaries(absl::Time deadline);
  // Summaries received so far, by worker index (JSON text).
  std::map<int, std::string> summaries() const;
  // Workers whose last sign of life (register, heartbeat, summary) is older than `age` and
  // that have not reported their summary.
  std::vector<int> SilentWorkers(absl::Duration age) const;
  int64_t max_worker_step() const;

 private:
  struct WorkerState {
    bool registered = false;
    std::string hostname;
    int pid = 0;
    absl::Time last_seen = absl::InfinitePast();
    int64_t local_step = 0;
    std::optional<std::string> summary;
  };
  grpc::Status CheckWorker(const pb::TaskId& task) const;

  const std::string run_id_;
  const std::string run_dir_;
  const std::string fingerprint_;
  mutable absl::Mutex mu_;
  std::vector<WorkerState> workers_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fulcrum::chief
