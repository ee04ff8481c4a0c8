// chief: the headline a run ends with, one block in the chief's log read from report.json's
// figures (as tf_cnn_benchmarks ends with `total images/sec`): the total examples/sec, each
// worker's, the workers' step time split into phases, each ps's share of the bytes, the CPU
// and the applies, the bytes of each network interface, each machine's CPUs (the job's and
// other work's) and where the report is.
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace fulcrum::chief {

// The headline's lines for `report` (report.json's object, after AddClusterTables) whose page
// is at `html_path`. Figures the report lacks (a failed run, profiling off) are left out or
// said missing, never made up.
std::vector<std::string> HeadlineLines(const nlohmann::json& report, const std::string& html_path);

}  // namespace fulcrum::chief
