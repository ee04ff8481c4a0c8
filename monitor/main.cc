// fulcrum_monitor: profiles processes Fulcrum did not start (a TensorFlow baseline on the same
// node) as a Fulcrum task profiles itself: samples.csv and summary.json per pid under
// --run_dir (profiler/monitor.h does the work), until they exit, Ctrl-C, or --max_seconds.
// Exit codes: 0 done, 2 bad flags, 1 a file could not be written; 128+signal after a signal.
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "base/exit_code.h"
#include "base/signals.h"
#include "profiler/monitor.h"
#include "runtime/config/flags.h"
#include "spdlog/spdlog.h"

// --run_dir is the runtime's (runtime/config/flags.cc): the same flag names the run folder here.
ABSL_DECLARE_FLAG(std::string, run_dir);
ABSL_FLAG(std::string, watch_pids, "", "Comma-separated ids of the processes to profile.");
ABSL_FLAG(int64_t, interval_ms, 500, "Sampling interval in milliseconds.");
ABSL_FLAG(double, max_seconds, 86400, "Stop after this many seconds even if the pids still run.");
ABSL_FLAG(double, flush_secs, 5, "Rewrite the files every this many seconds (0: only at the end).");

namespace {

absl::StatusOr<fulcrum::profiler::MonitorOptions> OptionsFromFlags() {
  fulcrum::profiler::MonitorOptions o;
  auto pids = fulcrum::profiler::ParsePidList(absl::GetFlag(FLAGS_watch_pids));
  if (!pids.ok()) return pids.status();
  o.pids = *pids;
  o.run_dir = absl::GetFlag(FLAGS_run_dir);
  o.interval = absl::Milliseconds(absl::GetFlag(FLAGS_interval_ms));
  o.max_duration = absl::Seconds(absl::GetFlag(FLAGS_max_seconds));
  const double flush = absl::GetFlag(FLAGS_flush_secs);
  if (!(flush >= 0)) return absl::InvalidArgumentError("--flush_secs: must be 0 or more");
  o.flush_interval = absl::Seconds(flush);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  fulcrum::runtime::ParseFlagsOrExit(
      argc, argv,
      "Fulcrum monitor: profiles running processes (CPU, threads, memory, I/O, network, host).\n"
      "Example: fulcrum_monitor --watch_pids=1234 --run_dir=/tmp/tf-baseline");
  fulcrum::InstallStopSignalHandlers();
  auto options = OptionsFromFlags();
  if (!options.ok()) return fulcrum::runtime::ReportBadFlags(options.status());
  const absl::Status status =
      fulcrum::profiler::RunMonitor(*options, [] { return fulcrum::StopSignal() != 0; });
  if (!status.ok()) {
    if (absl::IsInvalidArgument(status)) return fulcrum::runtime::ReportBadFlags(status);
    spdlog::error("{}", status.ToString());
    return fulcrum::ExitCodeForStatus(status);
  }
  return fulcrum::ExitCodeAfterStopSignal(fulcrum::kExitOk);
}
