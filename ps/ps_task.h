// ps: one parameter-server task from start to exit. It listens on its ClusterSpec address,
// serves its shard until the chief's Shutdown RPC, then writes <run_dir>/ps-<i>/summary.json.
// It gives up when the chief never creates the variables within --startup_timeout
// (DeadlineExceeded) or falls silent for --heartbeat_timeout afterwards (Unavailable).
// Thread-safety: call once, from main().
#pragma once

#include "absl/status/status.h"
#include "runtime/config/flags.h"

namespace fulcrum::ps {

// Only training.run_dir is read: the fallback run directory when the chief's
// CreateVariablesRequest names none.
// `profile` says what the built-in profiler samples and writes into ps-<i>/.
absl::Status RunPsTask(const runtime::ClusterOptions& cluster,
                       const runtime::TrainingOptions& training,
                       const runtime::ProfileFlags& profile);

}  // namespace fulcrum::ps
