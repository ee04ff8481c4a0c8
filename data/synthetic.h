// data: a synthetic, learnable classification task for tests and benchmarks without files.
// Thread-safety: MakeSynthetic is reentrant (no shared state).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "data/dataset_types.h"
#include "ops/tensor.h"

namespace fulcrum::data {

struct SyntheticOptions {
  ops::Shape example_shape;  // e.g. {784} or {32, 32, 3} (H, W, C); every dimension positive
  int num_classes = 10;      // >= 2
  int64_t num_examples = 1024;
  uint64_t seed = 1;
};

// Returns images [num_examples, example_shape...] uniform in [0,1) and labels
// argmax_c (W (x - 0.5))_c for a fixed random "teacher" W of shape [num_classes, D], so a
// linear model can learn the task. W depends on `seed` only (train and test of one seed are
// the same task); the inputs depend on (seed, split). Deterministic on every platform.
// InvalidArgument names the bad option (empty or non-positive shape, num_classes < 2,
// num_examples < 1).
absl::StatusOr<Dataset> MakeSynthetic(const SyntheticOptions& options, Split split);

}  // namespace fulcrum::data
