#include "models/evaluate.h"

#include <algorithm>

#include "base/status_macros.h"

namespace fulcrum::models {

absl::StatusOr<EvalResult> EvaluateDataset(Model& model, const data::Dataset& dataset,
                                           std::span<const ops::Tensor> values,
                                           int64_t batch_size) {
  EvalResult total;
  for (int64_t begin = 0; begin < dataset.size(); begin += batch_size) {
    const int64_t end = std::min(dataset.size(), begin + batch_size);
    const ops::Tensor inputs = dataset.images.Rows(begin, end);
    std::span<const int32_t> labels(dataset.labels.data() + begin,
                                    static_cast<size_t>(end - begin));
    FULCRUM_ASSIGN_OR_RETURN(EvalResult r, model.Evaluate(inputs, labels, values));
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
    total.examples += r.examples;
  }
  return total;
}

}  // namespace fulcrum::models
