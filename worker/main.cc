// worker: one training replica. With a cluster (--cluster_spec, the host flags or TF_CONFIG)
// it trains as worker <task_index> of the cluster; without one it trains alone (single mode).
// Worker 0 of a spec without a chief job (TensorFlow 1.x's layout, where worker 0 is the
// chief) also runs the chief, in a thread of this process, on its own address.
#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/exit_code.h"
#include "base/logging.h"
#include "base/malloc.h"
#include "base/signals.h"
#include "chief/chief_task.h"
#include "chief/report.h"
#include "runtime/config/flags.h"
#include "runtime/grpc/grpc_server.h"
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

int ExitCodeOf(const absl::Status& status) {
  // Stopped by a signal before the run began (waiting for the chief): nothing failed.
  if (status.code() == absl::StatusCode::kCancelled && fulcrum::StopSignal() != 0) {
    spdlog::info("{}", std::string(status.message()));
    return fulcrum::ExitCodeAfterStopSignal(fulcrum::kExitOk);
  }
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    return fulcrum::ExitCodeForStatus(status);
  }
  return fulcrum::ExitCodeAfterStopSignal(fulcrum::kExitOk);
}

// Worker 0 that is also the chief: the chief's logic in a thread (it serves the coordinator at
// this task's address, so the other tasks find it there, and writes chief-0/ and the report),
// the training here. The exit code is the run's: the chief's error first (it names the cause
// of a failed run), else the worker's.
int RunWorkerAndChief(const fulcrum::runtime::TaskOptions& options) {
  auto chief_cluster = fulcrum::runtime::EmbeddedChiefOptions(options.cluster);
  if (!chief_cluster.ok()) return fulcrum::runtime::ReportBadFlags(chief_cluster.status());
  fulcrum::InitLogging("worker:0+chief:0");
  // The worker would otherwise wait out --startup_timeout for a coordinator that cannot start
  // (or register with whatever holds the port).
  if (const absl::Status free = fulcrum::runtime::CheckCanListen(chief_cluster->task.task_name(),
                                                                 chief_cluster->task.address());
      !free.ok()) {
    return ExitCodeOf(free);
  }
  spdlog::info("no chief job in {}: worker:0 is also the chief (coordinator on {})",
               options.cluster.task.source, options.cluster.task.address());
  // The chief's profiler samples this same process; worker:0's endpoint serves /metrics.
  fulcrum::runtime::ProfileFlags chief_profile = options.profile;
  chief_profile.metrics_port = -1;
  absl::Mutex mu;
  absl::Status worker_status;  // guarded by mu once the worker has finished
  std::atomic<bool> worker_failed{false};
  fulcrum::chief::ChiefHooks hooks;
  hooks.local_worker = [&]() -> absl::Status {
    if (!worker_failed.load()) return absl::OkStatus();
    absl::MutexLock lock(&mu);
    return worker_status;
  };
  absl::Status chief_status;
  std::thread chief([&] {
    chief_status = fulcrum::chief::RunChief(options.training, *chief_cluster, chief_profile, hooks);
  });
  const absl::Status trained =
      fulcrum::worker::RunClusterWorker(options.training, options.cluster, options.profile);
  {
    absl::MutexLock lock(&mu);
    worker_status = trained;
  }
  worker_failed = !trained.ok();
  chief.join();
  if (!chief_status.ok()) {
    if (!trained.ok()) spdlog::error("worker:0: {}", trained.ToString());
    return ExitCodeOf(chief_status);
  }
  return ExitCodeOf(trained);
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
  const fulcrum::runtime::TaskConfig& task = options->cluster.task;
  if (!task.cluster.has_chief_job() && task.task_index == 0) return RunWorkerAndChief(*options);
  fulcrum::InitLogging(task.task_name());
  return ExitCodeOf(
      fulcrum::worker::RunClusterWorker(options->training, options->cluster, options->profile));
}
