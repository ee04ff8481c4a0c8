#include "chief/coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/config/flags.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {

Coordinator::Coordinator(std::string run_id, std::string run_dir, std::string fingerprint,
                         int num_workers, const Clock* clock)
    : run_id_(std::move(run_id)),
      run_dir_(std::move(run_dir)),
      fingerprint_(std::move(fingerprint)),
      clock_(clock),
      workers_(static_cast<size_t>(num_workers)) {}

absl::Status Coordinator::CheckWorker(const pb::TaskId& task) const {
  if (task.job() != "worker" || task.index() < 0 ||
      task.index() >= static_cast<int>(workers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("chief: unknown task ", task.job(), ":",
                                                   task.index(), "; the cluster spec has ",
                                                   workers_.size(), " worker(s)"));
  }
  return absl::OkStatus();
}

template <typename Has>
std::vector<int> Coordinator::Lacking(Has has) const {
  std::vector<int> lacking;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!has(workers_[i])) lacking.push_back(static_cast<int>(i));
  }
  return lacking;
}

absl::Status Coordinator::RegisterTask(const pb::RegisterTaskRequest& request,
                                       pb::RegisterTaskResponse* response) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(request.task()); !s.ok()) return s;
  if (request.config_fingerprint() != fingerprint_) {
    absl::Status refused = absl::InvalidArgumentError(absl::StrCat(
        "worker:", request.task().index(), "'s flags differ from the chief's (worker vs chief): ",
        runtime::FingerprintDifference(request.config_fingerprint(), fingerprint_)));
    if (refused_.empty()) refused_ = std::string(refused.message());
    changed_.SignalAll();
    return refused;
  }
  WorkerState& w = worker(request.task());
  // A second process under a registered name while the first is still heard from: two tasks
  // were started as the same worker. Refused (the newcomer's registration retries until its
  // start-up deadline); a restarted worker is accepted once its predecessor fell silent.
  const absl::Duration silent_for = clock_->Now() - w.last_seen;
  if (w.registered && w.pid != 0 && (w.pid != request.pid() || w.hostname != request.hostname()) &&
      silent_for < kDuplicateWindow) {
    spdlog::warn("worker:{} from {} (pid {}) refused: already registered from {} (pid {})",
                 request.task().index(), request.hostname(), request.pid(), w.hostname, w.pid);
    return absl::AlreadyExistsError(
        absl::StrCat("worker:", request.task().index(), " is already registered from ", w.hostname,
                     " (pid ", w.pid, "), heard from ",
                     absl::FormatDuration(absl::Trunc(silent_for, absl::Milliseconds(1))),
                     " ago: is a second task started as worker:", request.task().index(),
                     "? (a restarted worker is accepted once the first is silent for ",
                     absl::FormatDuration(kDuplicateWindow), ")"));
  }
  if (!w.registered) {
    spdlog::info("worker:{} registered from {} (pid {})", request.task().index(),
                 request.hostname(), request.pid());
  }
  w.registered = true;
  w.hostname = request.hostname();
  w.pid = request.pid();
  w.last_seen = clock_->Now();
  response->set_run_id(run_id_);
  response->set_run_dir(run_dir_);
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::Status Coordinator::WaitForStart(const pb::WaitForStartRequest& request,
                                       absl::Time call_deadline,
                                       pb::WaitForStartResponse* response) {
  const absl::Duration poll =
      std::clamp(absl::Milliseconds(request.timeout_ms()), absl::ZeroDuration(), kMaxStartPoll);
  const absl::Time deadline = std::min(absl::Now() + poll, call_deadline);  // a real wait
  MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(request.task()); !s.ok()) return s;
  while (!started_ && !stop_ && changed_.WaitUntil(&mu_, deadline)) {
  }
  worker(request.task()).last_seen = clock_->Now();
  response->set_started(started_);
  response->set_should_stop(stop_);
  response->set_run_id(run_id_);
  return absl::OkStatus();
}

absl::Status Coordinator::Heartbeat(const pb::HeartbeatRequest& request,
                                    pb::HeartbeatResponse* response) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(request.task()); !s.ok()) return s;
  WorkerState& w = worker(request.task());
  w.last_seen = clock_->Now();
  w.local_step = request.local_step();
  w.waiting_for = request.waiting_for();
  w.waiting_ms = request.waiting_ms();
  response->set_should_stop(stop_);
  if (stop_) {
    response->set_run_failed(stop_failed_);
    response->set_stop_reason(stop_reason_);
  }
  return absl::OkStatus();
}

absl::Status Coordinator::ShouldStop(const pb::ShouldStopRequest& request,
                                     pb::ShouldStopResponse* response) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(request.task()); !s.ok()) return s;
  response->set_should_stop(stop_);
  response->set_reason(stop_reason_);
  return absl::OkStatus();
}

absl::Status Coordinator::ReportSummary(const pb::ReportSummaryRequest& request,
                                        pb::ReportSummaryResponse*) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(request.task()); !s.ok()) return s;
  WorkerState& w = worker(request.task());
  w.summary = request.summary_json();
  w.last_seen = clock_->Now();
  changed_.SignalAll();
  return absl::OkStatus();
}

std::vector<int> Coordinator::WaitForWorkers(absl::Time deadline) {
  MutexLock lock(&mu_);
  auto registered = [](const WorkerState& w) { return w.registered; };
  std::vector<int> missing = Lacking(registered);
  while (!missing.empty() && refused_.empty() && changed_.WaitUntil(&mu_, deadline)) {
    missing = Lacking(registered);
  }
  return missing;
}

std::string Coordinator::refused() const {
  MutexLock lock(&mu_);
  return refused_;
}

void Coordinator::Start() {
  MutexLock lock(&mu_);
  started_ = true;
  changed_.SignalAll();
}

void Coordinator::Adopt() {
  MutexLock lock(&mu_);
  for (WorkerState& w : workers_) {
    w.registered = true;
    w.last_seen = clock_->Now();
  }
  started_ = true;
  changed_.SignalAll();
}

void Coordinator::RequestStop(const std::string& reason, bool failed) {
  MutexLock lock(&mu_);
  if (!stop_) stop_reason_ = reason;
  stop_failed_ |= failed;
  stop_ = true;
  changed_.SignalAll();
}

std::vector<int> Coordinator::WaitForSummaries(absl::Time deadline) {
  MutexLock lock(&mu_);
  auto reported = [](const WorkerState& w) { return w.summary.has_value(); };
  std::vector<int> missing = Lacking(reported);
  while (!missing.empty() && changed_.WaitUntil(&mu_, deadline)) missing = Lacking(reported);
  return missing;
}

std::map<int, std::string> Coordinator::summaries() const {
  MutexLock lock(&mu_);
  std::map<int, std::string> out;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].summary) out[static_cast<int>(i)] = *workers_[i].summary;
  }
  return out;
}

std::vector<int> Coordinator::SilentWorkers(absl::Duration age) const {
  MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  return Lacking(
      [&](const WorkerState& w) { return w.summary.has_value() || now - w.last_seen <= age; });
}

std::pair<int, absl::Duration> Coordinator::StalestWorker() const {
  MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::pair<int, absl::Duration> stalest{-1, absl::ZeroDuration()};
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].summary.has_value()) continue;
    const absl::Duration age = now - workers_[i].last_seen;
    if (stalest.first < 0 || age > stalest.second) stalest = {static_cast<int>(i), age};
  }
  return stalest;
}

int64_t Coordinator::max_worker_step() const {
  MutexLock lock(&mu_);
  int64_t m = 0;
  for (const auto& w : workers_) m = std::max(m, w.local_step);
  return m;
}

std::vector<Coordinator::WorkerView> Coordinator::Workers() const {
  MutexLock lock(&mu_);
  std::vector<WorkerView> views;
  for (const WorkerState& w : workers_) {
    views.push_back({w.local_step, w.last_seen, w.waiting_for, w.waiting_ms, w.summary.has_value()});
  }
  return views;
}

}  // namespace fulcrum::chief
