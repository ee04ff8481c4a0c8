// profiler: fulcrum_monitor's work: profile processes Fulcrum did not start (a TensorFlow
// baseline on the same node) the way a task profiles itself. One Sampler per watched pid reads
// /proc/PID (and the pid's network namespace) plus the host-wide files; the same samples.csv
// and summary.json keys as a task's go to RUN_DIR/pid-PID/, rewritten as the run goes, until
// every pid has exited, a stop signal arrives, or the time limit passes.
// Thread-safety: RunMonitor blocks its caller; the samplers run on their own threads.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fulcrum::profiler {

struct MonitorOptions {
  std::vector<int> pids;                              // --watch_pids
  std::string run_dir;                                // --run_dir
  absl::Duration interval = absl::Milliseconds(500);  // --interval_ms
  absl::Duration max_duration = absl::Hours(24);      // --max_seconds: the wait's deadline
  absl::Duration flush_interval = absl::Seconds(5);   // --flush_secs
};

// "123,456" -> {123, 456}; InvalidArgument naming --watch_pids for an empty list, a token that
// is not a positive number, or a repeated pid.
absl::StatusOr<std::vector<int>> ParsePidList(const std::string& text);

// Checks the options (InvalidArgument naming the flag: a pid with no /proc/PID, an empty
// run_dir, a non-positive interval or duration), then samples until every pid has exited,
// `stop_requested` returns true (polled every interval at most), or max_duration passes.
// Writes RUN_DIR/pid-PID/{samples.csv,summary.json}; Unavailable naming the file when one
// cannot be written.
absl::Status RunMonitor(const MonitorOptions& options, const std::function<bool()>& stop_requested);

}  // namespace fulcrum::profiler
