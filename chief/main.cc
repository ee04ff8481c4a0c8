// chief: the coordinator task of a training cluster (see chief/chief_task.h).
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "base/exit_code.h"
#include "base/logging.h"
#include "base/malloc.h"
#include "base/signals.h"
#include "chief/chief_task.h"
#include "chief/report.h"
#include "chief/whatif.h"
#include "runtime/config/flags.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, whatif, "",
          "Print the what-if predictions of a finished run (its report.json or run dir; with "
          "--link_rate, --link_burst_bytes and --host_cpus as the run's hosts) and exit; no "
          "cluster is started.");
ABSL_FLAG(bool, whatif_json, false, "With --whatif: print the predictions as JSON.");
ABSL_FLAG(std::string, refresh_report, "",
          "Recompute the tables of a finished run's report.json (the file or its run dir) from "
          "the task summaries it holds, rewrite it and exit: a report written by an older chief "
          "gets the tables added since (machines); no cluster is started.");

namespace {

int WhatIfMain(const std::string& path) {
  absl::StatusOr<fulcrum::runtime::HostModel> hosts = fulcrum::runtime::HostModelFromFlags();
  if (!hosts.ok()) return fulcrum::runtime::ReportBadFlags(hosts.status());
  const absl::Status s =
      fulcrum::chief::PrintWhatIf(path, *hosts, absl::GetFlag(FLAGS_whatif_json));
  return s.ok() ? fulcrum::kExitOk : fulcrum::runtime::ReportBadFlags(s);
}

}  // namespace

int main(int argc, char** argv) {
  fulcrum::runtime::ParseFlagsOrExit(
      argc, argv,
      "Fulcrum chief: coordinates a training cluster (waits for the tasks, initialises the\n"
      "variables, evaluates, stops the run and writes report.json).\n"
      "Example: chief --cluster_spec=cluster_specs/local_1ps_2w.json --train_steps=1000");
  if (const std::string path = absl::GetFlag(FLAGS_whatif); !path.empty()) return WhatIfMain(path);
  if (const std::string path = absl::GetFlag(FLAGS_refresh_report); !path.empty()) {
    const absl::Status s = fulcrum::chief::RefreshReport(path);
    return s.ok() ? fulcrum::kExitOk : fulcrum::runtime::ReportBadFlags(s);
  }
  // Ctrl-C / SIGTERM end the run cleanly, with its records written (base/signals.h).
  fulcrum::InstallStopSignalHandlers();
  fulcrum::TuneMallocForTraining();
  auto options = fulcrum::runtime::TaskOptionsFromFlags("chief");
  if (!options.ok()) return fulcrum::runtime::ReportBadFlags(options.status());
  fulcrum::InitLogging(options->cluster.task.task_name());
  const absl::Status status =
      fulcrum::chief::RunChief(options->training, options->cluster, options->profile);
  // Stopped by a signal before the run began (waiting for the tasks): the launcher's or the
  // user's stop, not a failure of this task.
  if (status.code() == absl::StatusCode::kCancelled && fulcrum::StopSignal() != 0) {
    spdlog::warn("{}", std::string(status.message()));
    return fulcrum::ExitCodeAfterStopSignal(fulcrum::kExitOk);
  }
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    return fulcrum::ExitCodeForStatus(status);
  }
  return fulcrum::ExitCodeAfterStopSignal(fulcrum::kExitOk);
}
