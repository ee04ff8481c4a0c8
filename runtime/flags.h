// runtime: the one flag set that ps, worker and chief all accept (TensorFlow's names), the
// command-line parser that turns a bad flag into exit code 2, and the validated options the
// flags describe. Thread-safety: call from main() before starting threads.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "ops/optimizer.h"

namespace fulcrum::runtime {

// Parses Abseil flags from argv (--name=value, --name value, --bool/--nobool, --help).
// An unknown flag or a value that does not parse prints "<program>: <what is wrong>" to stderr
// and exits with code 2. Returns the positional arguments (argv[0] first).
std::vector<std::string> ParseFlagsOrExit(int argc, char** argv, absl::string_view usage);

// Options of a training run, validated (see TrainingOptionsFromFlags).
struct TrainingOptions {
  std::string model = "logreg";
  double model_width = 1.0;
  int64_t batch_size = 128;
  ops::OptimizerConfig optimizer;
  int64_t train_steps = 0;  // exactly one of train_steps and epochs is > 0
  double epochs = 0.0;
  std::string dataset = "mnist";  // mnist (any MNIST-format set), cifar10, synthetic
  std::string data_dir;
  std::string run_dir;
  uint64_t seed = 1;
  int threads = 1;
  int64_t log_every = 100;
  bool eval = true;
  int64_t eval_batch_size = 1000;
  int64_t train_subset = 0;
  int64_t dataset_repeat = 1;
  int64_t synthetic_examples = 60000;
  std::vector<int64_t> synthetic_shape = {1, 28, 28};
  int synthetic_classes = 10;
};

// Reads and validates the flags; InvalidArgument names the flag and what is wrong.
absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags();

}  // namespace fulcrum::runtime
