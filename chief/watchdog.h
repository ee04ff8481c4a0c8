// chief: the watchdog. A thread of the chief that, every second, looks at what each worker
// said in its last heartbeat (its local step, its oldest call in flight) and at the chief's own
// calls to the ps tasks, and names a task that has not moved for longer than
// max(5 x the median step time, --watchdog_secs): a worker stuck in a call ("worker:1 stuck at
// local step 812 for 31 s, waiting for PushPull on ps:0 for 31 s"), one that stopped
// heartbeating (SIGSTOP, a hung process: heartbeats come from their own thread, so a stuck
// training thread still beats, and the step, not the beat, is what counts), or a ps that does
// not answer (the chief's own Stats waits, or the workers all wait on it). Each episode is
// logged once when it starts and once when the task moves again, kept for the report and set
// as the Prometheus gauge fulcrum_watchdog_stuck_seconds{stuck_task}.
// Thread-safety: Episodes() may be called from any thread while the watchdog runs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "chief/coordinator.h"
#include "nlohmann/json.hpp"
#include "runtime/call_tracker.h"

namespace fulcrum::chief {

class Watchdog {
 public:
  struct Options {
    absl::Duration min_interval = absl::Seconds(30);  // --watchdog_secs
    absl::Duration poll = absl::Seconds(1);
    // Called with (task, seconds stuck) as an episode goes on, and (task, 0) when it ends.
    std::function<void(const std::string&, double)> on_stuck;
  };
  // `coordinator` and `chief_calls` are not owned and outlive this object.
  Watchdog(const Coordinator* coordinator, const runtime::CallTracker* chief_calls,
           Options options);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // {"threshold_seconds", "episodes": [{task, what, start_unix_s, seconds, ongoing}]}.
  nlohmann::json Report() const;
  // The current threshold: max(5 x the median step time seen, min_interval).
  absl::Duration Threshold() const;

  // One look at the tasks (the thread calls it every poll; tests may too).
  void Check(absl::Time now);

 private:
  struct Progress {
    int64_t step = -1;
    absl::Time since;  // when `step` was first seen
  };
  struct Episode {
    std::string task;
    std::string what;
    absl::Time start;
    absl::Time last;
    bool ongoing = true;
  };
  void Loop();
  // Starts, updates or ends `task`'s episode.
  void Note(const std::string& task, const std::string& what, absl::Time since, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Clear(const std::string& task, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration ThresholdLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Coordinator* const coordinator_;
  const runtime::CallTracker* const chief_calls_;
  const Options options_;
  mutable Mutex mu_;
  CondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Progress> progress_ ABSL_GUARDED_BY(mu_);      // by worker
  std::vector<double> step_seconds_ ABSL_GUARDED_BY(mu_);    // recent per-step times
  std::map<std::string, size_t> open_ ABSL_GUARDED_BY(mu_);  // task -> its ongoing episode
  std::vector<Episode> episodes_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace fulcrum::chief
