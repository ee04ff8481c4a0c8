// worker: one training replica. With a cluster (--cluster_spec or TF_CONFIG) it trains as
// worker <task_index> of the cluster; without one it trains alone (single mode).
#include "absl/status/status.h"
#include "base/exit_code.h"
#include "base/logging.h"
#include "base/malloc.h"
#include "base/signals.h"
#include "chief/report.h"
#include "runtime/flags.h"
#include "spdlog/spdlog.h"
#include "worker/cluster_trainer.h"
#include "worker/single_trainer.h"

namespace {

int RunSingleMode(const fulcrum::runtime::TrainingOptions& options,
                  const fulcrum::runtime::ProfileFlags& profile) {
  fulcrum::InitLogging("worker");
  auto result = fulcrum::worker::RunSingle(options, profile);
  if (!result.ok()) {
    spdlog::error("{}", result.status().ToString());
    return fulcrum::ExitCodeForStatus(result.status());
  }
  if (result->final_test_accuracy) {
    spdlog::info("final test accuracy {:.4f}, test loss {:.4f}", *result->final_test_accuracy,
                 *result->final_test_loss);
  } else if (result->final_test_loss) {
    spdlog::info("final test loss {:.5f}", *result->final_test_loss);
  }
  spdlog::info("{:.0f} examples/sec (steady state), {:.2f} s wall; summary in {}/summary.json",
               result->examples_per_sec, result->wall_seconds, result->run_dir);
  // A single run gets the report a cluster run gets (report.json, report.html).
  if (const absl::Status s = fulcrum::chief::WriteSingleRunReport(result->run_dir); !s.ok()) {
    spdlog::warn("no report.json: {}", s.ToString());
  } else {
    spdlog::info("report: {}/report.json", result->run_dir);
  }
  return fulcrum::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  fulcrum::runtime::ParseFlagsOrExit(
      argc, argv,
      "Fulcrum worker: trains a model. Without a cluster spec it trains alone (single mode).\n"
      "Example: worker --model=logreg --batch_size=256 --learning_rate=0.01 --train_steps=1000\n"
      "Cluster: worker --cluster_spec=cluster_specs/local_1ps_2w.json --task_index=1 ...");
  // Ctrl-C / SIGTERM end the run cleanly, with its records written (base/signals.h).
  fulcrum::InstallStopSignalHandlers();
  fulcrum::TuneMallocForTraining();
  if (!fulcrum::runtime::ClusterRequested()) {
    auto options = fulcrum::runtime::TrainingOptionsFromFlags();
    if (!options.ok()) return fulcrum::runtime::ReportBadFlags(options.status());
    auto profile = fulcrum::runtime::ProfileFlagsFromFlags();
    if (!profile.ok()) return fulcrum::runtime::ReportBadFlags(profile.status());
    return fulcrum::ExitCodeAfterStopSignal(RunSingleMode(*options, *profile));
  }
  auto options = fulcrum::runtime::TaskOptionsFromFlags("worker");
  if (!options.ok()) return fulcrum::runtime::ReportBadFlags(options.status());
  const absl::Status status =
      fulcrum::worker::RunClusterWorker(options->training, options->cluster, options->profile);
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    return fulcrum::ExitCodeForStatus(status);
  }
  return fulcrum::ExitCodeAfterStopSignal(fulcrum::kExitOk);
}
