#include "data/load.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/enum_flag.h"
#include "base/status_macros.h"
#include "data/cifar10.h"
#include "data/mnist.h"
#include "data/synthetic.h"

namespace fulcrum::data {

namespace {

constexpr EnumName<DatasetKind> kDatasetNames[] = {{DatasetKind::kMnist, "mnist"},
                                                   {DatasetKind::kCifar10, "cifar10"},
                                                   {DatasetKind::kSynthetic, "synthetic"}};

}  // namespace

const char* DatasetName(DatasetKind kind) { return EnumNameOf(kind, kDatasetNames); }

bool AbslParseFlag(absl::string_view text, DatasetKind* kind, std::string* error) {
  return ParseEnum(text, kDatasetNames, kind, error);
}

std::string AbslUnparseFlag(DatasetKind kind) { return UnparseEnum(kind, kDatasetNames); }

absl::StatusOr<Dataset> LoadSplit(const SourceOptions& o, Split split) {
  switch (o.kind) {
    case DatasetKind::kMnist:
      return LoadMnistFormat(o.dir, split);
    case DatasetKind::kCifar10:
      return LoadCifar10(o.dir, split);
    case DatasetKind::kSynthetic:
      break;
  }
  SyntheticOptions s;
  s.example_shape = ops::Shape(o.synthetic_shape);
  s.num_classes = o.synthetic_classes;
  s.num_examples = split == Split::kTrain ? o.synthetic_examples
                                          : std::max<int64_t>(1, o.synthetic_examples / 6);
  s.seed = o.seed;
  return MakeSynthetic(s, split);
}

absl::StatusOr<TrainTest> LoadTrainTest(const SourceOptions& o) {
  TrainTest d;
  FULCRUM_ASSIGN_OR_RETURN(d.train, LoadSplit(o, Split::kTrain));
  FULCRUM_ASSIGN_OR_RETURN(d.test, LoadSplit(o, Split::kTest));
  return d;
}

}  // namespace fulcrum::data
