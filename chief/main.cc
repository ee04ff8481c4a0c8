// chief: the coordinator task of a training cluster (see chief/chief_task.h).
#include <cstdio>

#include "base/exit_code.h"
#include "base/logging.h"
#include "chief/chief_task.h"
#include "runtime/flags.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  fulcrum::runtime::ParseFlagsOrExit(
      argc, argv,
      "Fulcrum chief: coordinates a training cluster (waits for the tasks, initialises the\n"
      "variables, evaluates, stops the run and writes report.json).\n"
      "Example: chief --cluster_spec=cluster_specs/local_1ps_2w.json --train_steps=1000");
  fulcrum::TuneMallocForTraining();
  auto training = fulcrum::runtime::TrainingOptionsFromFlags();
  if (!training.ok()) {
    std::fprintf(stderr, "chief: %s\n", std::string(training.status().message()).c_str());
    return fulcrum::kExitBadInput;
  }
  auto cluster = fulcrum::runtime::ClusterOptionsFromFlags("chief");
  if (!cluster.ok()) {
    std::fprintf(stderr, "chief: %s\n", std::string(cluster.status().message()).c_str());
    return fulcrum::kExitBadInput;
  }
  auto profile = fulcrum::runtime::ProfileFlagsFromFlags();
  if (!profile.ok()) {
    std::fprintf(stderr, "chief: %s\n", std::string(profile.status().message()).c_str());
    return fulcrum::kExitBadInput;
  }
  const absl::Status status = fulcrum::chief::RunChief(*training, *cluster, *profile);
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    return fulcrum::ExitCodeForStatus(status);
  }
  return fulcrum::kExitOk;
}
