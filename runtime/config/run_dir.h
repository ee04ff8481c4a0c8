// runtime: whether a --run_dir already holds a finished run's records, so that starting a new
// run there does not silently replace them (issue 13: a reused --run_dir was overwritten).
// Thread-safety: pure functions over the file system.
#pragma once

#include <filesystem>

#include "absl/status/status.h"

namespace fulcrum::runtime {

// True when `path` holds a task's final summary.json (a run that ended): not a partial one,
// which the profiler rewrites while its run goes on (its "partial": true), nor a file that is
// missing or unreadable.
bool IsFinalSummary(const std::filesystem::path& path);

// OK when `run_dir` is missing, empty or holds only an unfinished run's records (partial
// summaries: a task restarted into a running job, a run that crashed), or when `overwrite`
// (--overwrite) says to replace them. Otherwise InvalidArgument (exit 2) naming the folder,
// the record found (report.json, or <task>/summary.json, or summary.json of a single-mode run)
// and --overwrite. Reads only; never changes the folder.
absl::Status CheckRunDirReusable(const std::filesystem::path& run_dir, bool overwrite);

}  // namespace fulcrum::runtime
