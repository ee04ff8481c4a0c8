// chief: what-if predictions from one run's records: examples/s and step time for one more ps,
// the links at 2x and 1/2 their rate, --wire_dtype=bf16, the other placements and twice the
// workers, each on hosts like the run's (a host per added task, with the run's CPU share and
// link), and the most useful of them.
//
// The model (docs/profiler.md, "What-if"): a worker's mean step is its compute (data, forward,
// backward: unchanged by any of these changes) plus its communication, which is a fixed part
// (latency, the RPCs' CPU, the sync barrier) and the busiest shared resource's time per step:
// the most loaded host link (each host's bytes per step to and from tasks on other hosts, from
// the placement's per-ps bytes, beyond the link's burst; in sync one direction after the other)
// or the busiest ps's CPU (its CPU seconds per round of pushes, per value handled, over its
// host's CPU share). The run calibrates it: the fixed part is what the measured communication
// leaves beyond the resource time, or, when the resource time exceeds it (the overlap hides
// some), the steps show only the share of it the measured communication covers. A change moves
// the resource times and the step time follows, never below the busiest link's bytes at its
// rate; examples/s = workers x batch / step time.
// Thread-safety: pure functions.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/config/flags.h"

namespace fulcrum::chief {

// The hosts (runtime/config/flags.h HostModel: --link_rate, --link_burst_bytes, --host_cpus):
// without a link rate the link changes are not predicted; without a CPU share a host has one
// core.
using WhatIfOptions = runtime::HostModel;

// The predictions for `report` (a report.json with its cluster tables): {"run": {...the
// calibration...}, "scenarios": [{"name", "change", "examples_per_sec", "step_time_ms",
// "speedup"}], "skipped": [{"name", "why"}], "most_useful": name or null}.
// FailedPrecondition naming the missing record when the run lacks one the model needs: ps
// tasks (a single-mode run), the placement table, the workers' step phases (profiling off),
// its throughput, or the ps tasks' CPU time.
absl::StatusOr<nlohmann::json> PredictWhatIf(const nlohmann::json& report,
                                             const WhatIfOptions& options);

// The predictions as lines for people: one per scenario (its change, examples/s, step time,
// speedup), one per skipped one with why, and the most useful change; or the error.
std::vector<std::string> WhatIfLines(const nlohmann::json& whatif);

// `chief --whatif=PATH`: the predictions of a finished run (PATH: its report.json or its
// run dir) printed to stdout, and the JSON with --whatif_json. InvalidArgument naming the
// file when it cannot be read or parsed; FailedPrecondition naming a missing record.
absl::Status PrintWhatIf(const std::filesystem::path& path, const WhatIfOptions& options,
                         bool json);

}  // namespace fulcrum::chief
