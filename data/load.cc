#include "data/load.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/cifar10.h"
#include "data/mnist.h"
#include "data/synthetic.h"

namespace fulcrum::data {

absl::StatusOr<Dataset> LoadSplit(const SourceOptions& o, Split split) {
  if (o.kind == "mnist") return LoadMnistFormat(o.dir, split);
  if (o.kind == "cifar10") return LoadCifar10(o.dir, split);
  if (o.kind == "synthetic") {
    SyntheticOptions s;
    s.example_shape = ops::Shape(o.synthetic_shape);
    s.num_classes = o.synthetic_classes;
    s.num_examples = split == Split::kTrain ? o.synthetic_examples
                                            : std::max<int64_t>(1, o.synthetic_examples / 6);
    s.seed = o.seed;
    return MakeSynthetic(s, split);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dataset '", o.kind, "': expected one of mnist, cifar10, synthetic"));
}

absl::StatusOr<TrainTest> LoadTrainTest(const SourceOptions& o) {
  TrainTest d;
  FULCRUM_ASSIGN_OR_RETURN(d.train, LoadSplit(o, Split::kTrain));
  FULCRUM_ASSIGN_OR_RETURN(d.test, LoadSplit(o, Split::kTest));
  return d;
}

}  // namespace fulcrum::data
