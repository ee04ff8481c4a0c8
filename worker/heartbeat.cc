#include "worker/heartbeat.h"

#include "absl/time/clock.h"
#include "base/thread_name.h"

namespace fulcrum::worker {

Heartbeat::Heartbeat(runtime::CoordinatorClient* chief, absl::Duration timeout,
                     absl::Duration interval, const runtime::CallTracker* calls)
    : chief_(chief),
      calls_(calls),
      timeout_(timeout),
      interval_(interval),
      thread_([this] { Loop(); }) {}

Heartbeat::~Heartbeat() {
  {
    MutexLock lock(&mu_);
    done_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

bool Heartbeat::Beat(absl::Time* last_ok) {
  std::optional<runtime::CallTracker::InFlight> oldest;
  if (calls_ != nullptr) oldest = calls_->Oldest();
  const absl::StatusOr<pb::HeartbeatResponse> answer = chief_->Heartbeat(
      step_.load(std::memory_order_relaxed), oldest ? oldest->what : std::string(),
      oldest ? absl::ToInt64Milliseconds(oldest->age) : 0);
  if (!answer.ok()) return false;
  *last_ok = absl::Now();
  if (answer->should_stop()) {
    {
      MutexLock lock(&mu_);
      if (stop_reason_.empty()) stop_reason_ = answer->stop_reason();
    }
    if (answer->run_failed()) run_failed_ = true;
    should_stop_ = true;
  }
  return true;
}

void Heartbeat::Loop() {
  SetCurrentThreadName("fulcrum-heartbt");
  absl::Time last_ok = absl::Now();
  do {
    if (!Beat(&last_ok) && absl::Now() - last_ok > timeout_) chief_lost_ = true;
  } while (Pause());
}

void Heartbeat::PollNow() {
  absl::Time ignored;
  Beat(&ignored);
}

std::string Heartbeat::stop_reason() const {
  MutexLock lock(&mu_);
  return stop_reason_;
}

bool Heartbeat::Pause() {
  const absl::Time until = absl::Now() + interval_;
  MutexLock lock(&mu_);
  // WaitUntil returns false at the deadline; a wake-up before it re-checks done_.
  while (!done_ && cv_.WaitUntil(&mu_, until)) {
  }
  return !done_;
}

}  // namespace fulcrum::worker
