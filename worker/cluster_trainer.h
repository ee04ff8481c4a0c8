// worker: one replica of between-graph replication. Registers with the chief, waits for
// the start, then loops: next batch of its own data shard -> gradients at the pulled
// variables -> push every chunk to its PS in parallel and read the new values back
// (sync: once the step has been aggregated; async: at once) until the global step reaches
// the run's steps or the chief says stop. Writes <run_dir>/worker-<i>/summary.json and hands
// it to the chief.
// Thread-safety: call once per process.
#pragma once

#include "absl/status/status.h"
#include "runtime/config/flags.h"

namespace fulcrum::worker {

// Bad input (flags, data, a configuration the chief refuses) is InvalidArgument/NotFound
// (exit 2); a chief or PS that never answers is DeadlineExceeded/Unavailable (exit 1).
// `profile` says what the built-in profiler samples and writes into the task's folder.
// Logging is the caller's (InitLogging in main).
absl::Status RunClusterWorker(const runtime::TrainingOptions& training,
                              const runtime::ClusterOptions& cluster,
                              const runtime::ProfileFlags& profile);

}  // namespace fulcrum::worker
