#include "chief/coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/flags.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {

Coordinator::Coordinator(std::string run_id, std::string run_dir, std::string fingerprint,
                         int num_workers)
    : run_id_(std::move(run_id)),
      run_dir_(std::move(run_dir)),
      fingerprint_(std::move(fingerprint)),
      workers_(static_cast<size_t>(num_workers)) {}

grpc::Status Coordinator::CheckWorker(const pb::TaskId& task) const {
  if (task.job() != "worker" || task.index() < 0 ||
      task.index() >= static_cast<int>(workers_.size())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("chief: unknown task ", task.job(), ":", task.index(),
                                     "; the cluster spec has ", workers_.size(), " worker(s)"));
  }
  return grpc::Status::OK;
}

grpc::Status Coordinator::RegisterTask(grpc::ServerContext*, const pb::RegisterTaskRequest* request,
                                       pb::RegisterTaskResponse* response) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status s = CheckWorker(request->task()); !s.ok()) return s;
  if (request->config_fingerprint() != fingerprint_) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("worker:", request->task().index(),
                     "'s flags differ from the chief's (worker vs chief): ",
                     runtime::FingerprintDifference(request->config_fingerprint(), fingerprint_)));
  }
  WorkerState& w = workers_[static_cast<size_t>(request->task().index())];
  if (!w.registered) {
    spdlog::info("worker:{} registered from {} (pid {})", request->task().index(),
                 request->hostname(), request->pid());
  }
  w.registered = true;
  w.hostname = request->hostname();
  w.pid = request->pid();
  w.last_seen = absl::Now();
  response->set_run_id(run_id_);
  response->set_run_dir(run_dir_);
  return grpc::Status::OK;
}

grpc::Status Coordinator::WaitForStart(grpc::ServerContext*, const pb::WaitForStartRequest* request,
                                       pb::WaitForStartResponse* response) {
  const absl::Duration wait =
      std::clamp(absl::Milliseconds(request->timeout_ms()), absl::ZeroDuration(), absl::Seconds(5));
  absl::MutexLock lock(&mu_);
  if (grpc::Status s = CheckWorker(request->task()); !s.ok()) return s;
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return started_ || stop_; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
  workers_[static_cast<size_t>(request->task().index())].last_seen = absl::Now();
  response->set_started(started_);
  response->set_should_stop(stop_);
  response->set_run_id(run_id_);
  return grpc::Status::OK;
}

grpc::Status Coordinator::Heartbeat(grpc::ServerContext*, const pb::HeartbeatRequest* request,
                                    pb::HeartbeatResponse* response) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status s = CheckWorker(request->task()); !s.ok()) return s;
  WorkerState& w = workers_[static_cast<size_t>(request->task().index())];
  w.last_seen = absl::Now();
  w.local_step = request->local_step();
  response->set_should_stop(stop_);
  return grpc::Status::OK;
}

grpc::Status Coordinator::ShouldStop(grpc::ServerContext*, const pb::ShouldStopRequest* request,
                                     pb::ShouldStopResponse* response) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status s = CheckWorker(request->task()); !s.ok()) return s;
  response->set_should_stop(stop_);
  response->set_reason(stop_reason_);
  return grpc::Status::OK;
}

grpc::Status Coordinator::ReportSummary(grpc::ServerContext*,
                                        const pb::ReportSummaryRequest* request,
                                        pb::ReportSummaryResponse*) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status s = CheckWorker(request->task()); !s.ok()) return s;
  WorkerState& w = workers_[static_cast<size_t>(request->task().index())];
  w.summary = request->summary_json();
  w.last_seen = absl::Now();
  return grpc::Status::OK;
}

std::vector<int> Coordinator::WaitForWorkers(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto all = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return std::all_of(workers_.begin(), workers_.end(),
                       [](const WorkerState& w) { return w.registered; });
  };
  mu_.AwaitWithDeadline(absl::Condition(&all), deadline);
  std::vector<int> missing;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].registered) missing.push_back(static_cast<int>(i));
  }
  return missing;
}

void Coordinator::Start() {
  absl::MutexLock lock(&mu_);
  started_ = true;
}

void Coordinator::RequestStop(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (!stop_) stop_reason_ = reason;
  stop_ = true;
}

std::vector<int> Coordinator::WaitForSummaries(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto all = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return std::all_of(workers_.begin(), workers_.end(),
                       [](const WorkerState& w) { return w.summary.has_value(); });
  };
  mu_.AwaitWithDeadline(absl::Condition(&all), deadline);
  std::vector<int> missing;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].summary) missing.push_back(static_cast<int>(i));
  }
  return missing;
}

std::map<int, std::string> Coordinator::summaries() const {
  absl::MutexLock lock(&mu_);
  std::map<int, std::string> out;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].summary) out[static_cast<int>(i)] = *workers_[i].summary;
  }
  return out;
}

std::vector<int> Coordinator::SilentWorkers(absl::Duration age) const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  std::vector<int> silent;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].summary && now - workers_[i].last_seen > age) {
      silent.push_back(static_cast<int>(i));
    }
  }
  return silent;
}

int64_t Coordinator::max_worker_step() const {
  absl::MutexLock lock(&mu_);
  int64_t m = 0;
  for (const auto& w : workers_) m = std::max(m, w.local_step);
  return m;
}

}  // namespace fulcrum::chief
