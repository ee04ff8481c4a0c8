// chief: the machines a run's processes ran on, and how much CPU each machine spent on work
// that was not the job's while the run lasted (other programs beside it, and kernel work
// charged to no process: interrupts, kernel threads). A run measured beside
// other work is not a quotable figure (docs/benchmarking.md); this says when one was.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace fulcrum::chief {

// One row per machine, in the order the processes first name them. `processes` holds each
// process once (a process playing two roles appears once), as (task name, its summary). A
// machine is a summary's "System Information"."Node Name" (emulated hosts of one machine
// share it; real nodes have their own), "unknown" when missing. Each row:
//   machine, tasks (their names), cores (the machine's, from "Total CPU usage per core"),
//   window_seconds and measured_by: the longest-lived process's "Job Execution Time" and
//     name; its window holds the others' lives, so every figure below is over it;
//   busy_cpus: the machine's CPUs in use over the window (not idle, not iowait), as that
//     process's sampler read /proc/stat;
//   job_cpus: the processes' CPU seconds over the window: the longest-lived one's within its
//     window (cpu_percent_mean x "Job Execution Time"), the others' whole cpu_seconds (they
//     started while it was measured; their start-up, a worker's data loading, is the job's);
//   other_cpus: busy_cpus - job_cpus, at least 0;
//   load1_mean: the 1-minute load average over the window.
// The figures are null when no process of the machine has a sampler's host figures.
nlohmann::json MachineRows(
    const std::vector<std::pair<std::string, const nlohmann::json*>>& processes);

// The largest other_cpus of the rows (0 when none has one).
double MaxOtherCpus(const nlohmann::json& machine_rows);

}  // namespace fulcrum::chief
