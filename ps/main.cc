// ps: the parameter-server task of a training cluster (ps/ps_task.h does the work).
// It accepts the same flag set as worker and chief so one command line can start every task.
#include <cstdio>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "base/exit_code.h"
#include "ps/ps_task.h"
#include "runtime/flags.h"
#include "spdlog/spdlog.h"

ABSL_DECLARE_FLAG(int64_t, train_steps);
ABSL_DECLARE_FLAG(double, epochs);

int main(int argc, char** argv) {
  fulcrum::runtime::ParseFlagsOrExit(
      argc, argv,
      "Fulcrum ps task: holds a shard of the model's variables and applies gradients.\n"
      "Example: ps --cluster_spec=cluster.json --task_index=0");
  // The ps never trains, so it does not need --train_steps or --epochs; the shared
  // validation insists on one of them, so give it a placeholder when neither is set and
  // the rest of the flags are still checked.
  if (absl::GetFlag(FLAGS_train_steps) == 0 && absl::GetFlag(FLAGS_epochs) == 0) {
    absl::SetFlag(&FLAGS_train_steps, 1);
  }
  auto training = fulcrum::runtime::TrainingOptionsFromFlags();
  if (!training.ok()) {
    std::fprintf(stderr, "ps: %s\n", std::string(training.status().message()).c_str());
    return fulcrum::kExitBadInput;
  }
  auto cluster = fulcrum::runtime::ClusterOptionsFromFlags("ps");
  if (!cluster.ok()) {
    std::fprintf(stderr, "ps: %s\n", std::string(cluster.status().message()).c_str());
    return fulcrum::kExitBadInput;
  }
  auto profile = fulcrum::runtime::ProfileFlagsFromFlags();
  if (!profile.ok()) {
    std::fprintf(stderr, "ps: %s\n", std::string(profile.status().message()).c_str());
    return fulcrum::kExitBadInput;
  }
  const absl::Status status = fulcrum::ps::RunPsTask(*cluster, *training, *profile);
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    return fulcrum::ExitCodeForStatus(status);
  }
  return fulcrum::kExitOk;
}
