// ps: the parameter-server task of a training cluster (ps/ps_task.h does the work).
// It accepts the same flag set as worker and chief so one command line can start every task.
#include "absl/status/status.h"
#include "base/exit_code.h"
#include "base/malloc.h"
#include "base/signals.h"
#include "ps/ps_task.h"
#include "runtime/config/flags.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // Reply slices and gradient buffers of a few MiB are freed and taken again every step:
  // without this glibc maps each afresh and the kernel zeroes its pages (~14% of a ps's
  // cycles under 16 MiB of pushes, perf).
  fulcrum::TuneMallocForTraining();
  fulcrum::runtime::ParseFlagsOrExit(
      argc, argv,
      "Fulcrum ps task: holds a shard of the model's variables and applies gradients.\n"
      "Example: ps --cluster_spec=cluster.json --task_index=0");
  // Ctrl-C / SIGTERM end the run cleanly, with its records written (base/signals.h).
  fulcrum::InstallStopSignalHandlers();
  auto options = fulcrum::runtime::TaskOptionsFromFlags("ps");
  if (!options.ok()) return fulcrum::runtime::ReportBadFlags(options.status());
  const absl::Status status =
      fulcrum::ps::RunPsTask(options->cluster, options->training, options->profile);
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    return fulcrum::ExitCodeForStatus(status);
  }
  return fulcrum::ExitCodeAfterStopSignal(fulcrum::kExitOk);
}
