// chief: which workers are still in the run. The roster reads the workers' summaries as they
// come (a worker that failed on its own ends the run; one stopped by a signal left it), takes
// note of the workers silent past --heartbeat_timeout, and decides whether training goes on
// without the ones gone (async and ssp while one is left; sync while --replicas_to_aggregate
// are left); in ssp it tells the ps tasks to stop waiting for them.
// Thread-safety: one thread, the chief's run loop.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "chief/ps_tasks.h"
#include "runtime/config/flags.h"

namespace fulcrum::chief {

class WorkerRoster {
 public:
  explicit WorkerRoster(const runtime::ClusterOptions& c) : c_(c) {}

  // Workers silent past --heartbeat_timeout: the run goes on without them where the mode
  // allows (counted in lost()), else the error naming them.
  absl::Status OnSilent(const std::vector<int>& silent);
  // Reads the summaries (worker -> summary.json text) not read yet, at global `step` of
  // `train_steps`: a worker that failed on its own is the run's error; one that failed
  // waiting for another task is remembered (waited_failure()); one stopped by a signal while
  // this chief was not left the run.
  absl::Status ReadSummaries(const std::map<int, std::string>& summaries, int64_t step,
                             int64_t train_steps);
  // ssp mode: tells the ps tasks not to wait any more for the workers that reported their
  // summary or were lost, once each. A ps that does not answer is retried at the next call.
  // True when a worker was released now.
  bool ReleaseGone(const std::map<int, std::string>& summaries, PsTasks& ps);
  // After a ps recovery: the restarted ps knows of no released worker; tell every ps again.
  void ForgetReleased() { released_.clear(); }
  // A worker that sent no summary by the end of the run and was silent.
  void MarkLost(int w) { lost_.insert(w); }

  const std::set<int>& lost() const { return lost_; }
  const std::set<int>& released() const { return released_; }
  // The first worker that failed waiting for another task ("" when none).
  const std::string& waited_failure() const { return waited_failure_; }

 private:
  // Worker `w` left the run (`why`): training goes on without it where the mode allows, else
  // the error that ends the run, naming it.
  absl::Status OnWorkerLeft(int w, const std::string& why, int64_t step);

  const runtime::ClusterOptions& c_;
  std::set<int> lost_;      // workers the run went on without (silent, or left)
  std::set<int> released_;  // ssp: workers every ps was told not to wait for
  std::set<int> read_;      // workers whose summary was looked at
  std::string waited_failure_;
};

}  // namespace fulcrum::chief
