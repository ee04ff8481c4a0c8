#include "data/synthetic.h"

#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::data {
namespace {

using ::testing::HasSubstr;

SyntheticOptions Options() {
  SyntheticOptions options;
  options.example_shape = ops::Shape({3, 4, 5});
  options.num_classes = 7;
  options.num_examples = 500;
  options.seed = 42;
  return options;
}

std::vector<float> Pixels(const Dataset& dataset) {
  return {dataset.images.flat().begin(), dataset.images.flat().end()};
}

TEST(SyntheticTest, ShapesRangesAndClasses) {
  absl::StatusOr<Dataset> dataset = MakeSynthetic(Options(), Split::kTrain);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->name, "synthetic/train");
  EXPECT_EQ(dataset->images.shape(), ops::Shape({500, 3, 4, 5}));
  EXPECT_EQ(dataset->size(), 500);
  EXPECT_EQ(dataset->example_size(), 60);
  EXPECT_EQ(dataset->num_classes, 7);
  for (float v : dataset->images.flat()) ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
  std::set<int32_t> seen;
  for (int32_t label : dataset->labels) {
    ASSERT_TRUE(label >= 0 && label < 7) << label;
    seen.insert(label);
  }
  EXPECT_GE(seen.size(), 5u);  // not all one class: the centred teacher spreads the labels
}

TEST(SyntheticTest, DeterministicFromSeed) {
  absl::StatusOr<Dataset> a = MakeSynthetic(Options(), Split::kTrain);
  absl::StatusOr<Dataset> b = MakeSynthetic(Options(), Split::kTrain);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Pixels(*a), Pixels(*b));
  EXPECT_EQ(a->labels, b->labels);

  SyntheticOptions other = Options();
  other.seed = 43;
  absl::StatusOr<Dataset> c = MakeSynthetic(other, Split::kTrain);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Pixels(*a), Pixels(*c));
}

TEST(SyntheticTest, TrainAndTestShareTheTeacher) {
  // The splits have different inputs but one teacher: a 1-nearest-neighbour classifier on
  // train predicts test labels far better than chance (1/3), which needs a shared teacher.
  SyntheticOptions options = Options();
  options.example_shape = ops::Shape({4});
  options.num_classes = 3;
  options.num_examples = 2000;
  absl::StatusOr<Dataset> train = MakeSynthetic(options, Split::kTrain);
  absl::StatusOr<Dataset> test = MakeSynthetic(options, Split::kTest);
  ASSERT_TRUE(train.ok() && test.ok());
  EXPECT_EQ(test->name, "synthetic/test");
  EXPECT_NE(Pixels(*train), Pixels(*test));
  int correct = 0;
  const int probes = 200;
  for (int t = 0; t < probes; ++t) {
    const float* q = test->images.data() + t * 4;
    float best = 1e9f;
    int32_t predicted = -1;
    for (int64_t i = 0; i < train->size(); ++i) {
      const float* x = train->images.data() + i * 4;
      float dist = 0.0f;
      for (int j = 0; j < 4; ++j) dist += (x[j] - q[j]) * (x[j] - q[j]);
      if (dist < best) {
        best = dist;
        predicted = train->labels[static_cast<size_t>(i)];
      }
    }
    if (predicted == test->labels[static_cast<size_t>(t)]) ++correct;
  }
  EXPECT_GT(correct, probes * 8 / 10);  // chance is 1/3; a different teacher would be ~1/3
}

TEST(SyntheticTest, BadOptions) {
  SyntheticOptions options = Options();
  options.num_classes = 1;
  absl::Status status = MakeSynthetic(options, Split::kTrain).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("num_classes 1"));

  options = Options();
  options.num_examples = 0;
  status = MakeSynthetic(options, Split::kTrain).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("num_examples 0"));

  options = Options();
  options.example_shape = ops::Shape({3, 0});
  status = MakeSynthetic(options, Split::kTrain).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("example_shape [3, 0]"));

  options.example_shape = ops::Shape();
  EXPECT_EQ(MakeSynthetic(options, Split::kTrain).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fulcrum::data
