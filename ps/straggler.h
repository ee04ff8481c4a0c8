// ps: naming the straggler of sync training from what this ps sees. For each sync step, the
// time each worker's gradients of the step were all in (its last accepted chunk) tells which
// worker came last and by how much it held the step back (its arrival after the one before
// it). A worker that came last in at least kMinLast of the last kWindow complete steps, with a
// median lead of at least kMinLeadMs and kMinLeadShare of the median time between steps, is
// named: it holds the steps back by that median lead. Noise does not name anyone: in a
// balanced run the last place moves between workers and the leads are small.
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace fulcrum::ps {

// Who holds the sync steps back, as a StragglerDetector sees it now.
struct Straggler {
  int worker = -1;            // worker:N, or -1 when no worker is named
  double held_back_ms = 0.0;  // its median lead over the others in the window
  int64_t since_step = -1;    // the step at which it was named
  int64_t steps_named = 0;    // complete steps that ended with some worker named
};

class StragglerDetector {
 public:
  static constexpr int kWindow = 10;
  static constexpr int kMinLast = 8;
  static constexpr double kMinLeadMs = 5.0;
  static constexpr double kMinLeadShare = 0.25;

  // `name` ("ps:0") prefixes the log lines; a step is complete on this ps once `per_step`
  // chunk gradients of it were accepted (replicas_to_aggregate x the ps's chunks).
  StragglerDetector(std::string name, int64_t per_step);

  // `task` ("worker:3") had `chunks` chunk gradients of sync step `step` accepted at `now`.
  void OnAccepted(const std::string& task, int64_t step, int chunks, absl::Time now);
  Straggler Current() const;

 private:
  struct Arrivals {
    std::map<int, absl::Time> last;  // by worker: its latest accepted chunk of the step
    int64_t chunks = 0;
  };
  struct Outcome {
    int last_worker = -1;
    double lead_ms = 0.0;
    absl::Time done;
  };
  // The step's outcome once it is complete, then a new verdict over the window.
  void Complete(int64_t step, const Arrivals& arrivals) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Judge(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  const int64_t per_step_;
  mutable Mutex mu_;
  std::map<int64_t, Arrivals> open_ ABSL_GUARDED_BY(mu_);  // steps not complete yet
  std::deque<Outcome> window_ ABSL_GUARDED_BY(mu_);        // the last kWindow complete steps
  Straggler current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fulcrum::ps
