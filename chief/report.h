// chief: the cluster-wide tables of the run report. From the task summaries a report holds
// ("chief", "ps": [...], "workers": [...], each with the profiler's keys) it derives one row
// per task, one per host and the cluster totals (docs/profiler.md documents every key).
// Thread-safety: pure functions.
#pragma once

#include <filesystem>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace fulcrum::chief {

// Adds "tasks", "hosts", "machines" (MachineRows, machines.h) and "cluster" to *report. Interface
// counters are per network namespace: every task on a host reads the same ones, so a host's network
// figures are the largest of its tasks' (the task that sampled longest), never their sum; CPU and
// memory are per process and add up. Missing or non-numeric keys count as 0. Each task row has
// "status": "reported" (its summary reached the chief) or "vanished" (it sent none: killed,
// crashed, or lost with its host; the row holds what it left on disk, see LeftSummary, and
// "records" says how much: "partial" or "final").
void AddClusterTables(nlohmann::json* report);

// What a task that sent the chief no summary left in its folder of the run dir (`task_dir`):
// its summary.json, the profiler's partial one (rewritten every --profile_flush_secs) or its
// final one, if written at `since` or later (an older one is an earlier run's), marked
// "vanished": true. Null when there is none (the folder is on another host, or the task died
// before its first flush).
nlohmann::json LeftSummary(const std::filesystem::path& task_dir, absl::Time since);

// A finished run's report.json (`path` is the file or its run dir) as (file, object);
// InvalidArgument naming `flag`=path and the problem when it cannot be read or is not a JSON
// object.
absl::StatusOr<std::pair<std::filesystem::path, nlohmann::json>> ReadReport(
    const std::string& flag, const std::filesystem::path& path);

// Recomputes a finished run's tables (AddClusterTables) from the task summaries its report.json
// holds and rewrites the file atomically (the chief's --refresh_report), so that a report
// written before a table existed (machines) gets it. report.html is left as it was.
absl::Status RefreshReport(const std::filesystem::path& path);

// The report of a single-mode run (a worker alone: no chief): report.json and report.html in
// `run_dir`, beside the summary.json the worker wrote there, in the cluster report's layout
// (the run's settings and figures at the top, the worker as "workers"[0], the tables), so the
// same page, tools and compare_runs.py read both. A report.html that cannot be drawn is
// logged, not an error; an unreadable summary.json is.
absl::Status WriteSingleRunReport(const std::filesystem::path& run_dir);

}  // namespace fulcrum::chief
