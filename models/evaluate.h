// models: evaluating a model over a whole dataset in batches (test loss and accuracy), for
// the single trainer and the chief.
// Thread-safety: uses `model`'s scratch buffers; one thread per Model at a time.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "data/dataset_types.h"
#include "models/model.h"

namespace fulcrum::models {

// Sums Evaluate over `dataset` in batches of `batch_size` examples.
absl::StatusOr<EvalResult> EvaluateDataset(Model& model, const data::Dataset& dataset,
                                           std::span<const ops::Tensor> values, int64_t batch_size);

}  // namespace fulcrum::models
