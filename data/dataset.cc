#include "data/dataset_types.h"

namespace fulcrum::data {

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "test"; }

}  // namespace fulcrum::data
