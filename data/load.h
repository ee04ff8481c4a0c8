// data: loading a run's training and test sets by dataset kind (what --dataset and its
// companion flags describe), for every task that needs data: the single trainer, each
// cluster worker (training set) and the chief (test set for evaluation).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/dataset_types.h"

namespace fulcrum::data {

// --dataset: mnist (any MNIST-format set), cifar10 or synthetic, parsed by Abseil
// (base/enum_flag.h).
enum class DatasetKind { kMnist, kCifar10, kSynthetic };
const char* DatasetName(DatasetKind kind);
bool AbslParseFlag(absl::string_view text, DatasetKind* kind, std::string* error);
std::string AbslUnparseFlag(DatasetKind kind);

struct SourceOptions {
  DatasetKind kind = DatasetKind::kMnist;
  std::string dir;             // files of mnist/cifar10
  int64_t synthetic_examples = 60000;
  std::vector<int64_t> synthetic_shape = {28, 28, 1};  // H, W, C
  int synthetic_classes = 10;
  uint64_t seed = 1;  // synthetic data only
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

// Loads one split (the synthetic test split has a sixth of the training examples).
absl::StatusOr<Dataset> LoadSplit(const SourceOptions& options, Split split);

// Loads both splits; the synthetic test split has a sixth of the training examples.
// Errors name the file and the problem (NotFound/InvalidArgument/DataLoss).
absl::StatusOr<TrainTest> LoadTrainTest(const SourceOptions& options);

}  // namespace fulcrum::data
