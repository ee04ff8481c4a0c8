// worker: one training replica. Without a cluster (no --cluster_spec) it runs single mode.
#include <cstdio>

#include "base/exit_code.h"
#include "base/logging.h"
#include "runtime/flags.h"
#include "spdlog/spdlog.h"
#include "worker/single_trainer.h"

int main(int argc, char** argv) {
  fulcrum::runtime::ParseFlagsOrExit(
      argc, argv,
      "Fulcrum worker: trains a model. Without a cluster spec it trains alone (single mode).\n"
      "Example: worker --model=logreg --batch_size=256 --learning_rate=0.01 --train_steps=1000");
  fulcrum::InitLogging("worker");
  fulcrum::TuneMallocForTraining();
  auto options = fulcrum::runtime::TrainingOptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(options.status().message()).c_str());
    return fulcrum::kExitBadInput;
  }
  auto result = fulcrum::worker::RunSingle(*options);
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
  return fulcrum::kExitOk;
}
