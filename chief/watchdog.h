// chief: the watchdog of a cluster run, on profiler::StallWatch (the episodes, the threshold
// max(5 x the median step time, --watchdog_secs), the log lines, the report and the gauge).
// Every second it looks at what each worker said in its last heartbeat (its local step, its
// oldest call in flight) and at the chief's own calls to the ps tasks, and names a task that
// has not moved past the threshold: a worker stuck in a call ("worker:1 stuck at local step
// 812 for 31 s, waiting for PushPull on ps:0 for 31 s"), one that stopped heartbeating
// (SIGSTOP, a hung process: heartbeats come from their own thread, so a stuck training thread
// still beats, and the step, not the beat, is what counts), or a ps that does not answer (the
// chief's own Stats waits, or the workers all wait on it).
// Thread-safety: every method may be called from any thread while the watchdog runs.
#pragma once

#include "absl/time/time.h"
#include "chief/coordinator.h"
#include "nlohmann/json.hpp"
#include "profiler/stall_watch.h"
#include "runtime/client/call_tracker.h"

namespace fulcrum::chief {

class Watchdog {
 public:
  using Options = profiler::StallWatch::Options;
  // `coordinator` and `chief_calls` are not owned and outlive this object.
  Watchdog(const Coordinator* coordinator, const runtime::CallTracker* chief_calls,
           Options options);

  // {"threshold_seconds", "episodes": [{task, what, start_unix_s, seconds, ongoing}]}.
  nlohmann::json Report() const { return watch_.Report(); }
  // The current threshold: max(5 x the median step time seen, min_interval).
  absl::Duration Threshold() const { return watch_.Threshold(); }
  // One look at the tasks (the thread does it every poll; tests may too).
  void Check(absl::Time now) { watch_.Check(now); }

 private:
  void Look(profiler::StallWatch& watch, absl::Time now) const;

  const Coordinator* const coordinator_;
  const runtime::CallTracker* const chief_calls_;
  profiler::StallWatch watch_;  // last: its thread looks through the members above
};

}  // namespace fulcrum::chief
