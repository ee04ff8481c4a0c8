// chief: the coordinator task (MonitoredTrainingSession's chief, as a process). Waits for
// every ps and worker, creates and initialises the variables on every PS, starts the run,
// evaluates test accuracy and loss every --eval_every global steps by pulling the variables,
// stops at --train_steps or --target_accuracy, shuts every task down and writes report.json
// and report.html from every task's summary (chief/report.h).
// Thread-safety: call once per process.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "runtime/config/flags.h"

namespace fulcrum::chief {

// What the process around an in-process chief tells it: worker 0 of a spec without a chief
// job runs the chief beside its own training (TensorFlow 1.x's layout, worker/main.cc).
struct ChiefHooks {
  // Non-OK once the worker of this process has failed: the chief stops waiting for it (which
  // would take --startup_timeout) and ends the run with that error. Called from the chief's
  // thread; must be thread-safe. Empty: no worker in this process.
  std::function<absl::Status()> local_worker;
};

// Runs the whole job. Bad input (flags, data) is InvalidArgument/NotFound (exit 2); a task
// that never shows up or goes silent is DeadlineExceeded/Unavailable (exit 1). On every path
// after the PS tasks are reached it tries to stop and shut them down, so nothing is orphaned.
// `profile` says what the chief's own profiler samples and writes into chief-0/.
// Logging is the caller's (InitLogging in main).
absl::Status RunChief(const runtime::TrainingOptions& training,
                      const runtime::ClusterOptions& cluster, const runtime::ProfileFlags& profile,
                      const ChiefHooks& hooks = {});

}  // namespace fulcrum::chief
