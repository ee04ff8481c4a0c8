// worker: Heartbeat, the thread that tells the chief this worker is alive (once a second,
// with its local step) and learns from the answers whether the chief asks it to stop; it
// also notices a chief that has not answered for longer than the heartbeat timeout.
// Thread-safety: set_step, should_stop and chief_lost may be called from any thread while
// the heartbeat thread runs; the destructor stops and joins that thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "runtime/client/call_tracker.h"
#include "runtime/client/coordinator_client.h"

namespace fulcrum::worker {

class Heartbeat {
 public:
  // Starts beating at once. `chief` (not owned) must outlive this object; `timeout` is how
  // long the chief may stay silent before chief_lost().
  // `calls` (not owned; may be null) are this worker's calls in flight: each heartbeat says
  // which one is the oldest, for the chief's watchdog.
  Heartbeat(runtime::CoordinatorClient* chief, absl::Duration timeout,
            absl::Duration interval = absl::Seconds(1),
            const runtime::CallTracker* calls = nullptr);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // The local step the next heartbeat reports.
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  // True once the chief asked this worker to stop.
  bool should_stop() const { return should_stop_.load(); }
  // With should_stop: whether the chief ends the run as a failure, and why.
  bool run_failed() const { return run_failed_.load(); }
  std::string stop_reason() const;
  // One heartbeat now, from the caller's thread (the end of training asks the chief how the
  // run ends before it reports "done"); the answer updates the state above.
  void PollNow();
  // True once no heartbeat succeeded for longer than the timeout.
  bool chief_lost() const { return chief_lost_.load(); }

 private:
  void Loop();
  // Waits `interval_` or until the destructor asks to end; returns true to go on.
  bool Pause();

  runtime::CoordinatorClient* const chief_;
  const runtime::CallTracker* const calls_;
  const absl::Duration timeout_;
  const absl::Duration interval_;
  std::atomic<int64_t> step_{0};
  // Records the chief's answer; true when it arrived.
  bool Beat(absl::Time* last_ok);

  std::atomic<bool> should_stop_{false};
  std::atomic<bool> run_failed_{false};
  std::atomic<bool> chief_lost_{false};
  mutable Mutex mu_;
  CondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace fulcrum::worker
