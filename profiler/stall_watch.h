// profiler: the watchdog's core, shared by the chief's cluster watchdog (chief/watchdog.h) and
// a single-mode worker (worker/single_trainer.cc). A thread that, every poll, has a `look`
// report each watched task's step (Progress) and, for one that has not moved for longer than
// the threshold, what it waits for (Stuck). The threshold is max(5 x the median time per step
// seen, min_interval). Each episode is logged once when it starts ("watchdog: worker:1 stuck
// at local step 812 for 31.0 s, waiting for PushPull on ps:0 for 31.0 s"), again when its kind
// changes, and once when the task moves again; it is kept for the report and handed to
// on_stuck (the Prometheus gauge fulcrum_watchdog_stuck_seconds{stuck_task}).
// Thread-safety: every method may be called from any thread; `look` runs on the watch's own
// thread (and on the caller's, in Check) without the watch's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "nlohmann/json.hpp"

namespace fulcrum::profiler {

class StallWatch {
 public:
  struct Options {
    absl::Duration min_interval = absl::Seconds(30);  // --watchdog_secs
    absl::Duration poll = absl::Seconds(1);
    // Called with (task, seconds stuck) as an episode goes on, and (task, 0) when it ends.
    std::function<void(const std::string&, double)> on_stuck;
  };
  using Look = std::function<void(StallWatch& watch, absl::Time now)>;

  // Starts the thread; the first look comes one poll later.
  StallWatch(Look look, Options options);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // `task` is at `step` now: how long it has been there (zero when it just moved, which ends
  // its episode and adds the time per step it took to the median).
  absl::Duration Progress(const std::string& task, int64_t step, absl::Time now);
  // `task` is stuck since `since`, doing `what` (starts or updates its episode).
  void Stuck(const std::string& task, const std::string& what, absl::Time since, absl::Time now);
  // `task` is not stuck (finished, not heard from yet, or it answered): its episode ends.
  void Moved(const std::string& task, absl::Time now);
  // The tasks with an episode going on.
  std::vector<std::string> StuckTasks() const;
  // max(5 x the median step time seen, min_interval).
  absl::Duration Threshold() const;
  // One look now (the thread does it every poll; tests and the end of a run may too).
  void Check(absl::Time now);
  // {"threshold_seconds", "episodes": [{task, what, start_unix_s, seconds, ongoing}]}.
  nlohmann::json Report() const;

 private:
  struct Position {
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
  void ClearLocked(const std::string& task, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration ThresholdLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Look look_;
  const Options options_;
  mutable Mutex mu_;
  CondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Position> positions_ ABSL_GUARDED_BY(mu_);
  std::vector<double> step_seconds_ ABSL_GUARDED_BY(mu_);    // recent per-step times
  std::map<std::string, size_t> open_ ABSL_GUARDED_BY(mu_);  // task -> its ongoing episode
  std::vector<Episode> episodes_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once everything above is built
};

// "31.0 s": how the watchdog writes a duration.
std::string WatchSeconds(absl::Duration d);

}  // namespace fulcrum::profiler
