// worker: single mode (the CS744 "Single" set-up): one process holds the variables, trains
// the model on its data and evaluates it, without a cluster. The distributed worker replaces
// the local variable store with pulls and pushes to the PS tasks.
// Thread-safety: RunSingle owns everything it touches; call it once per process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/config/flags.h"

namespace fulcrum::worker {

// What a single-mode run measured; also written to <run_dir>/summary.json.
struct SingleRunResult {
  std::string model;
  int64_t batch_size = 0;
  int64_t steps = 0;                          // steps run
  std::string stop_reason;                    // "reached train_steps", or "interrupted by SIGTERM"
  double epochs = 0.0;                        // passes over the training set the steps amounted to
  std::optional<double> final_test_accuracy;  // absent for models without accuracy
  std::optional<double> final_test_loss;      // absent with --eval=false
  double final_train_loss = 0.0;              // mean loss of the last min(100, steps) steps
  // The run figures, as worker/run_stats.h computes them for every worker.
  double examples_per_sec = 0.0;      // steady state: the first kWarmupSteps (20) steps left out
  double examples_per_sec_all = 0.0;  // every step
  double wall_seconds = 0.0;          // whole run, data loading and evaluation included
  double train_seconds = 0.0;         // the training loop only
  double step_time_p50_ms = 0.0;      // steady state (warm-up left out, as examples_per_sec)
  double step_time_p99_ms = 0.0;      // steady state
  std::string run_dir;
};

// Loads the data, trains, evaluates, writes summary.json. Bad input (flags, data files) comes
// back as InvalidArgument/NotFound/DataLoss; nothing is written to run_dir before the data
// and model are known to be good.
// `profile` says what the built-in profiler samples and writes into the run directory
// (default: on, as the flags' defaults).
absl::StatusOr<SingleRunResult> RunSingle(const runtime::TrainingOptions& options,
                                          const runtime::ProfileFlags& profile = {});

}  // namespace fulcrum::worker
