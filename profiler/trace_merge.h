// profiler: the run's merged trace. The chief reads every task's trace.json it can reach in
// the run directory (<run_dir>/<job>-<index>/trace.json) and writes them as one Chrome trace,
// one process per task (its pid from TracePid, whatever the file said), so a whole run opens
// in Perfetto at once; timestamps are µs since the epoch already, so the tasks line up.
// Tasks whose trace is not there (another host's run directory, a task that died before its
// first flush) are named in the result, not an error.
// Thread-safety: a pure function over files.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace fulcrum::profiler {

// One task of the run, as the run directory names it ("<job>-<task_index>").
struct TraceTask {
  std::string job;
  int task_index = 0;
};

// What went into the merged trace.
struct TraceMergeResult {
  std::vector<std::string> merged;  // task folders whose trace was taken ("worker-0")
  // task folder and why its trace was left out ("not found", a parse error, ...)
  std::vector<std::pair<std::string, std::string>> missing;
  size_t events = 0;  // events written
};

// Reads <run_dir>/<job>-<index>/trace.json of every task in `tasks` and writes them merged
// to `out_path` atomically. FailedPrecondition when no task's trace could be read (nothing is
// written then); the file system's error when the merged file cannot be written.
absl::StatusOr<TraceMergeResult> MergeRunTrace(const std::string& run_dir,
                                               const std::vector<TraceTask>& tasks,
                                               const std::string& out_path);

}  // namespace fulcrum::profiler
