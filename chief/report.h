// chief: the cluster-wide tables of the run report. From the task summaries a report holds
// ("chief", "ps": [...], "workers": [...], each with the profiler's keys) it derives one row
// per task, one per host and the cluster totals (docs/profiler.md documents every key).
// Thread-safety: pure functions.
#pragma once

#include "nlohmann/json.hpp"

namespace fulcrum::chief {

// Adds "tasks", "hosts" and "cluster" to *report. Interface counters are per network
// namespace: every task on a host reads the same ones, so a host's network figures are the
// largest of its tasks' (the task that sampled longest), never their sum; CPU and memory
// are per process and add up. Missing or non-numeric keys count as 0.
void AddClusterTables(nlohmann::json* report);

}  // namespace fulcrum::chief
