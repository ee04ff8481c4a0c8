// data: the in-memory Dataset every reader returns and the Batcher draws from.
// A Dataset is a plain value (images + labels); the readers fill it once and it is then only
// read. Thread-safety: a const Dataset may be read from many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace fulcrum::data {

enum class Split { kTrain, kTest };

// "train" or "test".
const char* SplitName(Split split);

// Where Debian's dataset-fashion-mnist package installs the IDX files (gzipped).
inline constexpr char kDefaultMnistDir[] = "/usr/share/datasets/fashion-mnist";

struct Dataset {
  std::string name;             // e.g. "fashion-mnist/train"; used in messages
  ops::Tensor images;           // [N, H, W, C] float32 in [0,1]; synthetic: [N, example_shape...]
  std::vector<int32_t> labels;  // N labels in [0, num_classes)
  int num_classes = 0;

  // Number of examples N.
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  // Elements per example (H*W*C), the row length of the 2-D view of `images`.
  int64_t example_size() const { return images.cols(); }
};

}  // namespace fulcrum::data
