// base: the time a component reads, as a seam: the real clock in production; a manual clock
// in tests that must make time pass (a silence, a window running out) without sleeping.
// Waits on condition variables keep real deadlines: only the time a component records and
// compares goes through its Clock.
// Thread-safety: Now may be called from any thread; ManualClock::Advance too.
#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace fulcrum {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // absl::Now(); never destroyed.
  static const Clock* Real();
};

// Starts at `start` and moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::Now()) : now_(start) {}
  absl::Time Now() const override {
    MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fulcrum
