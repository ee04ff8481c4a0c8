// chief: the coordinator's logic (proto/coordinator.proto, no gRPC here; the adapter is
// chief/grpc_coordinator_service.h). Workers register (their configuration fingerprint must
// match the chief's), long-poll for the start, heartbeat, learn when to stop and hand in
// their summaries; the chief's run loop waits on and reads all of it.
// Thread-safety: all methods are thread-safe (the adapter calls them from gRPC's threads
// while the chief's run loop calls the chief-side ones). Every wait has a deadline.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "proto/coordinator.pb.h"

namespace fulcrum::chief {

// A registration under a worker name whose current holder (another pid or host) was heard
// from less than this long ago is a duplicate task and refused.
inline constexpr absl::Duration kDuplicateWindow = absl::Seconds(3);

class Coordinator {
 public:
  // The longest a WaitForStart holds its caller, whatever the request asks.
  static constexpr absl::Duration kMaxStartPoll = absl::Seconds(5);

  // `fingerprint`: runtime::ConfigFingerprint of the chief; `num_workers` expected, indexed
  // 0..num_workers-1. RegisterTask answers with `run_id` and `run_dir`. `clock` (not owned)
  // times the workers' signs of life (last_seen, silences, the duplicate window).
  Coordinator(std::string run_id, std::string run_dir, std::string fingerprint, int num_workers,
              const Clock* clock = Clock::Real());

  // --- The service side: one method per RPC. Each answers InvalidArgument for a task that
  // is not a worker of the spec. All are safe to retry.

  // Registers a worker; InvalidArgument naming the flags that differ when its fingerprint is
  // not the chief's (the worker exits 2). Registering again updates host and pid.
  absl::Status RegisterTask(const pb::RegisterTaskRequest& request,
                            pb::RegisterTaskResponse* response);
  // Long poll: returns once the run started or a stop was requested, or after the request's
  // timeout_ms (clamped to [0, kMaxStartPoll]), or at `call_deadline` (the caller's own
  // deadline), whichever is first; the response says which state it found.
  absl::Status WaitForStart(const pb::WaitForStartRequest& request, absl::Time call_deadline,
                            pb::WaitForStartResponse* response);
  // Records the worker's sign of life and local step; answers whether to stop.
  absl::Status Heartbeat(const pb::HeartbeatRequest& request, pb::HeartbeatResponse* response);
  // Whether a stop was requested, and why.
  absl::Status ShouldStop(const pb::ShouldStopRequest& request, pb::ShouldStopResponse* response);
  // Keeps the worker's summary (the last one, when it reports twice).
  absl::Status ReportSummary(const pb::ReportSummaryRequest& request,
                             pb::ReportSummaryResponse* response);

  // --- The chief's side.

  // Waits until every worker has registered, one was refused (see refused()) or `deadline`;
  // returns the indices still missing.
  std::vector<int> WaitForWorkers(absl::Time deadline);
  // The first registration refused for its flags ("" when none): the run cannot start.
  std::string refused() const;
  // Releases every WaitForStart: training begins.
  void Start();
  // A restarted chief took over a running job: the workers (which do not register again)
  // count as registered and seen now; training has begun.
  void Adopt();
  // Asks every worker to stop (the first reason is kept) and releases WaitForStart; with
  // `failed` the heartbeats say the run failed, so no worker takes the stop for success.
  void RequestStop(const std::string& reason, bool failed = false);
  // Waits until every worker has reported its summary or `deadline`; returns those missing.
  std::vector<int> WaitForSummaries(absl::Time deadline);
  // Summaries received so far, by worker index (JSON text).
  std::map<int, std::string> summaries() const;
  // Workers whose last sign of life (register, start poll, heartbeat, summary) is older than
  // `age` and that have not reported their summary.
  std::vector<int> SilentWorkers(absl::Duration age) const;
  // The worker without a summary heard from least recently and how long ago; -1 when every
  // worker has reported.
  std::pair<int, absl::Duration> StalestWorker() const;
  // What the watchdog reads of each worker (by index): its last heartbeat's step and what it
  // waited for then, when it was last heard from, whether it reported its summary.
  struct WorkerView {
    int64_t local_step = 0;
    absl::Time last_seen = absl::InfinitePast();
    std::string waiting_for;
    int64_t waiting_ms = 0;
    bool done = false;
  };
  std::vector<WorkerView> Workers() const;
  // The highest local step any worker's heartbeat reported.
  int64_t max_worker_step() const;

 private:
  struct WorkerState {
    bool registered = false;
    std::string hostname;
    int pid = 0;
    absl::Time last_seen = absl::InfinitePast();
    int64_t local_step = 0;
    std::string waiting_for;  // its last heartbeat's (proto/coordinator.proto)
    int64_t waiting_ms = 0;
    std::optional<std::string> summary;
  };
  // InvalidArgument unless `task` is a worker of the spec.
  absl::Status CheckWorker(const pb::TaskId& task) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  WorkerState& worker(const pb::TaskId& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return workers_[static_cast<size_t>(task.index())];
  }
  // Indices of the workers for which `has(worker)` is false.
  template <typename Has>
  std::vector<int> Lacking(Has has) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string run_id_;
  const std::string run_dir_;
  const std::string fingerprint_;
  const Clock* const clock_;
  mutable Mutex mu_;
  // Signalled on every change a waiter may wait for: a registration, a summary, the start
  // and a stop request.
  CondVar changed_;
  std::vector<WorkerState> workers_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  std::string refused_ ABSL_GUARDED_BY(mu_);  // the first refused registration's reason
};

}  // namespace fulcrum::chief
