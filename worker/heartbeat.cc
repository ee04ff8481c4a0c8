#include "worker/heartbeat.h"

#include "absl/time/clock.h"
#include "base/thread_name.h"

namespace fulcrum::worker {

Heartbeat::Heartbeat(runtime::CoordinatorClient* chief, absl::Duration timeout,
                     absl::Duration interval)
    : chief_(chief), timeout_(timeout), interval_(interval), thread_([this] { Loop(); }) {}

Heartbeat::~Heartbeat() {
  {
    MutexLock lock(&mu_);
    done_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void Heartbeat::Loop() {
  SetCurrentThreadName("fulcrum-heartbt");
  absl::Time last_ok = absl::Now();
  do {
    const absl::StatusOr<bool> stop = chief_->Heartbeat(step_.load(std::memory_order_relaxed));
    if (stop.ok()) {
      last_ok = absl::Now();
      if (*stop) should_stop_ = true;
    } else if (absl::Now() - last_ok > timeout_) {
      chief_lost_ = true;
    }
  } while (Pause());
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
