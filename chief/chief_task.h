// chief: the coordinator task (MonitoredTrainingSession's chief, as a process). Waits for
// every ps and worker, creates and initialises the variables on every PS, starts the run,
// evaluates test accuracy and loss every --eval_every global steps by pulling the variables,
// stops at --train_steps or --target_accuracy, shuts every task down and writes report.json
// and report.html from every task's summary (chief/report.h).
// Thread-safety: call once per process.
#pragma once

#include "absl/status/status.h"
#include "runtime/flags.h"

namespace fulcrum::chief {

// Runs the whole job. Bad input (flags, data) is InvalidArgument/NotFound (exit 2); a task
// that never shows up or goes silent is DeadlineExceeded/Unavailable (exit 1). On every path
// after the PS tasks are reached it tries to stop and shut them down, so nothing is orphaned.
// `profile` says what the chief's own profiler samples and writes into chief-0/.
absl::Status RunChief(const runtime::TrainingOptions& training,
                      const runtime::ClusterOptions& cluster, const runtime::ProfileFlags& profile);

}  // namespace fulcrum::chief
