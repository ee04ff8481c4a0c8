// base: BlockingCounter, a count of outstanding operations that one thread waits to reach
// zero (every asynchronous fan-out: ShardedVariables' per-chunk RPCs, the bench's Pings).
// Thread-safety: DecrementCount may be called from any thread; Wait from one thread.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace fulcrum {

class BlockingCounter {
 public:
  // Starts with `count` (>= 0) operations outstanding.
  explicit BlockingCounter(int count) : left_(count) {}
  BlockingCounter(const BlockingCounter&) = delete;
  BlockingCounter& operator=(const BlockingCounter&) = delete;

  // One operation finished; wakes the waiter when it was the last.
  void DecrementCount() {
    MutexLock lock(&mu_);
    if (--left_ == 0) zero_.SignalAll();
  }

  // Waits until every operation finished or `deadline` passed; true when all finished.
  // Callers whose operations carry their own deadlines pass a deadline past those, so that
  // a false return means an operation never reported (a bug), not a slow peer.
  bool WaitUntil(absl::Time deadline) {
    MutexLock lock(&mu_);
    while (left_ > 0) {
      if (!zero_.WaitUntil(&mu_, deadline)) return left_ <= 0;
    }
    return true;
  }
  bool WaitFor(absl::Duration timeout) { return WaitUntil(absl::Now() + timeout); }

 private:
  Mutex mu_;
  CondVar zero_;  // signalled when left_ reaches 0
  int left_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fulcrum
