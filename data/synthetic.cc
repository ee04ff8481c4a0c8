#include "data/synthetic.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/malloc.h"
#include "base/random.h"
#include "base/status_macros.h"

namespace fulcrum::data {
namespace {

// Seed streams: the teacher depends on the seed only; inputs on the seed and the split.
constexpr uint64_t kTeacherStream = 0;
constexpr uint64_t kTrainInputStream = 1;
constexpr uint64_t kTestInputStream = 2;

absl::Status Validate(const SyntheticOptions& options) {
  if (options.example_shape.rank() == 0) {
    return absl::InvalidArgumentError("synthetic: example_shape [] must have at least one dim");
  }
  FULCRUM_RETURN_IF_ERROR(ops::ValidateShape(options.example_shape, "synthetic: example_shape"));
  if (options.num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic: num_classes ", options.num_classes, " must be >= 2"));
  }
  if (options.num_examples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic: num_examples ", options.num_examples, " must be >= 1"));
  }
  // Checked in double before anything is allocated: an absurd request must not overflow.
  return CheckFitsInMemory(static_cast<double>(options.num_examples) *
                               static_cast<double>(options.example_shape.num_elements()) *
                               sizeof(float),
                           absl::StrCat("synthetic: ", options.num_examples, " examples of ",
                                        options.example_shape.ToString(), " floats"));
}

}  // namespace

absl::StatusOr<Dataset> MakeSynthetic(const SyntheticOptions& options, Split split) {
  if (absl::Status status = Validate(options); !status.ok()) return status;
  const int64_t n = options.num_examples;
  const int64_t d = options.example_shape.num_elements();
  const int classes = options.num_classes;

  // Teacher W: [classes, d], standard normal.
  std::vector<float> teacher(static_cast<size_t>(classes * d));
  Rng teacher_rng(DeriveSeed(options.seed, kTeacherStream));
  for (float& w : teacher) w = static_cast<float>(teacher_rng.Normal());

  std::vector<int64_t> dims = {n};
  dims.insert(dims.end(), options.example_shape.dims().begin(), options.example_shape.dims().end());
  Dataset dataset;
  dataset.name = absl::StrCat("synthetic/", SplitName(split));
  dataset.num_classes = classes;
  dataset.images = ops::Tensor::Zeros(ops::Shape(std::move(dims)));
  dataset.labels.resize(static_cast<size_t>(n));

  Rng input_rng(
      DeriveSeed(options.seed, split == Split::kTrain ? kTrainInputStream : kTestInputStream));
  float* x = dataset.images.data();
  for (int64_t i = 0; i < n; ++i, x += d) {
    for (int64_t j = 0; j < d; ++j) x[j] = static_cast<float>(input_rng.Uniform());
    // Centre the input so the label is not dominated by each row's sum of weights; this
    // keeps the classes roughly balanced.
    int best = 0;
    float best_score = 0.0f;
    for (int c = 0; c < classes; ++c) {
      const float* w = teacher.data() + c * d;
      float score = 0.0f;
      for (int64_t j = 0; j < d; ++j) score += w[j] * (x[j] - 0.5f);
      if (c == 0 || score > best_score) {
        best = c;
        best_score = score;
      }
    }
    dataset.labels[static_cast<size_t>(i)] = best;
  }
  return dataset;
}

}  // namespace fulcrum::data
