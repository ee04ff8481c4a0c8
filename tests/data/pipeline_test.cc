#include "data/pipeline.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "data/batcher.h"
#include "data/cifar10.h"
#include "data/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/cpu/thread_pool.h"
#include "tests/data/test_files.h"

namespace fulcrum::data {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr ImageDims kCifar{32, 32, 3};

PipelineOptions Cifar10(int crop_size = 24, bool distort_colors = true) {
  PipelineOptions options;
  options.kind = PipelineKind::kCifar10;
  options.crop_size = crop_size;
  options.distort_colors = distort_colors;
  return options;
}

Dataset Synthetic(std::vector<int64_t> shape, int64_t n, Split split = Split::kTrain) {
  SyntheticOptions options;
  options.example_shape = ops::Shape(std::move(shape));
  options.num_examples = n;
  options.seed = 7;
  absl::StatusOr<Dataset> dataset = MakeSynthetic(options, split);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return *std::move(dataset);
}

// The [crop, crop, C] window of `image` at (top, left), mirrored if `flip`, standardised:
// written out with plain loops as the reference for TransformImage.
std::vector<float> ReferenceCrop(const float* image, const ImageDims& d, int crop, int64_t top,
                                 int64_t left, bool flip) {
  std::vector<float> out;
  for (int64_t y = 0; y < crop; ++y) {
    for (int64_t x = 0; x < crop; ++x) {
      const int64_t sx = flip ? left + crop - 1 - x : left + x;
      for (int64_t c = 0; c < d.channels; ++c) {
        out.push_back(image[((top + y) * d.width + sx) * d.channels + c]);
      }
    }
  }
  PerImageStandardize(out);
  return out;
}

std::vector<float> Transformed(const float* image, const ImageDims& d, int crop,
                               const ImageTransform& t) {
  std::vector<float> out(static_cast<size_t>(crop * crop * d.channels));
  TransformImage(image, d, crop, t, out.data());
  return out;
}

void ExpectStandardised(std::span<const float> values, const std::string& what) {
  double sum = 0.0;
  double squares = 0.0;
  for (float v : values) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(values.size());
  EXPECT_NEAR(sum / n, 0.0, 1e-5) << what;
  EXPECT_NEAR(std::sqrt(squares / n), 1.0, 1e-4) << what;
}

TEST(PipelineExampleShapeTest, PlainKeepsTheShapeCifar10Crops) {
  const Dataset cifar = Synthetic({32, 32, 3}, 4);
  EXPECT_THAT(*PipelineExampleShape(cifar, PipelineOptions{}), ElementsAre(32, 32, 3));
  EXPECT_THAT(*PipelineExampleShape(cifar, Cifar10()), ElementsAre(24, 24, 3));
  EXPECT_THAT(*PipelineExampleShape(cifar, Cifar10(32)), ElementsAre(32, 32, 3));
  // Any NHWC dataset: MNIST-shaped images crop the same way.
  const Dataset mnist = Synthetic({28, 28, 1}, 4);
  EXPECT_THAT(*PipelineExampleShape(mnist, Cifar10()), ElementsAre(24, 24, 1));
  // Plain takes examples that are not images as they are.
  const Dataset flat = Synthetic({784}, 4);
  EXPECT_THAT(*PipelineExampleShape(flat, PipelineOptions{}), ElementsAre(784));
}

TEST(PipelineExampleShapeTest, BadInputNamesTheFlagAndTheSizes) {
  const Dataset cifar = Synthetic({32, 32, 3}, 4);
  absl::Status big = PipelineExampleShape(cifar, Cifar10(40)).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.message(), AllOf(HasSubstr("--crop_size=40"), HasSubstr("32x32"),
                                   HasSubstr(cifar.name), HasSubstr("between 1 and 32")));
  const Dataset wide = Synthetic({20, 40, 3}, 4);  // height is the limit, not width
  EXPECT_THAT(PipelineExampleShape(wide, Cifar10(24)).status().message(),
              AllOf(HasSubstr("--crop_size=24"), HasSubstr("20x40")));
  EXPECT_EQ(PipelineExampleShape(cifar, Cifar10(0)).status().code(),
            absl::StatusCode::kInvalidArgument);

  const Dataset flat = Synthetic({784}, 4);
  absl::Status rank = PipelineExampleShape(flat, Cifar10()).status();
  EXPECT_EQ(rank.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rank.message(), AllOf(HasSubstr("--input_pipeline=cifar10"), HasSubstr("[784]"),
                                    HasSubstr("rank 1"), HasSubstr(flat.name)));

  PipelineKind kind = PipelineKind::kPlain;
  std::string error;
  EXPECT_FALSE(AbslParseFlag("imagenet", &kind, &error));
  EXPECT_EQ(error, "expected plain or cifar10");
  ASSERT_TRUE(AbslParseFlag("cifar10", &kind, &error));
  EXPECT_EQ(kind, PipelineKind::kCifar10);
  EXPECT_EQ(AbslUnparseFlag(kind), "cifar10");
}

TEST(TrainingTransformTest, OffsetsCoverTheRangeAndRepeatForASeed) {
  std::set<int64_t> tops;
  std::set<int64_t> lefts;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const ImageTransform t = DrawTrainingTransform(kCifar, 24, true, seed);
    ASSERT_GE(t.top, 0);
    ASSERT_LE(t.top, 8);
    ASSERT_GE(t.left, 0);
    ASSERT_LE(t.left, 8);
    tops.insert(t.top);
    lefts.insert(t.left);
    EXPECT_GE(t.brightness_delta, -63.0f / 255.0f);
    EXPECT_LT(t.brightness_delta, 63.0f / 255.0f);
    EXPECT_GE(t.contrast_factor, 0.2f);
    EXPECT_LT(t.contrast_factor, 1.8f);
    const ImageTransform again = DrawTrainingTransform(kCifar, 24, true, seed);
    EXPECT_EQ(again.top, t.top);
    EXPECT_EQ(again.left, t.left);
    EXPECT_EQ(again.flip, t.flip);
    EXPECT_EQ(again.brightness_delta, t.brightness_delta);
    EXPECT_EQ(again.contrast_factor, t.contrast_factor);
  }
  EXPECT_EQ(tops.size(), 9u);  // every offset 0..8 occurs
  EXPECT_EQ(lefts.size(), 9u);
  // A crop as large as the image has one position.
  const ImageTransform whole = DrawTrainingTransform(kCifar, 32, false, 5);
  EXPECT_EQ(whole.top, 0);
  EXPECT_EQ(whole.left, 0);
  EXPECT_EQ(whole.brightness_delta, 0.0f);
  EXPECT_EQ(whole.contrast_factor, 1.0f);
}

TEST(TrainingTransformTest, FlipsAboutHalfTheTime) {
  int flips = 0;
  constexpr int kDraws = 4000;
  for (uint64_t seed = 0; seed < kDraws; ++seed) {
    flips += DrawTrainingTransform(kCifar, 24, false, seed * 7919 + 3).flip ? 1 : 0;
  }
  // Binomial(4000, 1/2): standard deviation ~32, so +-200 is over 6 of them.
  EXPECT_GT(flips, kDraws / 2 - 200);
  EXPECT_LT(flips, kDraws / 2 + 200);
}

TEST(TransformImageTest, CropsAndMirrorsExactly) {
  const Dataset dataset = Synthetic({32, 32, 3}, 1);
  const float* image = dataset.images.data();
  for (bool flip : {false, true}) {
    ImageTransform t;
    t.top = 3;
    t.left = 7;
    t.flip = flip;
    EXPECT_EQ(Transformed(image, kCifar, 24, t), ReferenceCrop(image, kCifar, 24, 3, 7, flip))
        << "flip " << flip;
  }
  // The mirrored crop is the plain crop with its columns reversed.
  ImageTransform plain{.top = 3, .left = 7};
  ImageTransform mirrored{.top = 3, .left = 7, .flip = true};
  const std::vector<float> a = Transformed(image, kCifar, 24, plain);
  const std::vector<float> b = Transformed(image, kCifar, 24, mirrored);
  for (int64_t y = 0; y < 24; ++y) {
    for (int64_t x = 0; x < 24; ++x) {
      for (int64_t c = 0; c < 3; ++c) {
        ASSERT_FLOAT_EQ(b[static_cast<size_t>((y * 24 + x) * 3 + c)],
                        a[static_cast<size_t>((y * 24 + 23 - x) * 3 + c)]);
      }
    }
  }
}

TEST(TransformImageTest, BrightnessCancelsContrastScalesAroundChannelMeans) {
  const Dataset dataset = Synthetic({32, 32, 3}, 1);
  const float* image = dataset.images.data();
  const ImageTransform none{.top = 4, .left = 4};
  const std::vector<float> base = Transformed(image, kCifar, 24, none);
  // Standardisation subtracts the mean: a uniform shift leaves the result (up to rounding).
  const std::vector<float> brighter =
      Transformed(image, kCifar, 24, {.top = 4, .left = 4, .brightness_delta = 0.2f});
  for (size_t i = 0; i < base.size(); ++i) ASSERT_NEAR(brighter[i], base[i], 1e-5f) << i;
  // Contrast: per channel (x - mean_c) * f + mean_c, then standardised.
  std::vector<float> crop;
  for (int64_t y = 0; y < 24; ++y) {
    for (int64_t x = 0; x < 24 * 3; ++x) crop.push_back(image[(4 + y) * 32 * 3 + 4 * 3 + x]);
  }
  for (int c = 0; c < 3; ++c) {
    double mean = 0.0;
    for (size_t i = static_cast<size_t>(c); i < crop.size(); i += 3) mean += crop[i];
    mean /= 24 * 24;
    for (size_t i = static_cast<size_t>(c); i < crop.size(); i += 3) {
      crop[i] = static_cast<float>((crop[i] - mean) * 0.5 + mean);
    }
  }
  PerImageStandardize(crop);
  const std::vector<float> flatter =
      Transformed(image, kCifar, 24, {.top = 4, .left = 4, .contrast_factor = 0.5f});
  for (size_t i = 0; i < crop.size(); ++i) ASSERT_NEAR(flatter[i], crop[i], 1e-5f) << i;
  EXPECT_GT(std::abs(flatter[0] - base[0]) + std::abs(flatter[1] - base[1]), 1e-3f);
  ExpectStandardised(flatter, "contrast 0.5");
}

TEST(PerImageStandardizeTest, MeanZeroStddevOne) {
  const Dataset dataset = Synthetic({24, 24, 3}, 3);
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<float> values(dataset.images.data() + i * 1728,
                              dataset.images.data() + (i + 1) * 1728);
    PerImageStandardize(values);
    ExpectStandardised(values, "image " + std::to_string(i));
  }
}

TEST(PerImageStandardizeTest, FlatImagesUseTheOneOverSqrtNFloor) {
  std::vector<float> constant(1728, 0.7f);
  PerImageStandardize(constant);
  for (float v : constant) ASSERT_EQ(v, 0.0f);
  // Stddev 1e-4 is below 1/sqrt(1728) ~ 0.024: the values are divided by the floor, i.e.
  // multiplied by sqrt(1728), not scaled up to stddev 1.
  std::vector<float> flat(1728);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = 0.5f + (i % 2 == 0 ? 1e-4f : -1e-4f);
  PerImageStandardize(flat);
  const float expected = 1e-4f * std::sqrt(1728.0f);
  EXPECT_NEAR(flat[0], expected, 1e-6f);
  EXPECT_NEAR(flat[1], -expected, 1e-6f);
}

TEST(CentreCropTest, TakesTheExactCentre) {
  const ImageTransform t = CentreCropTransform(kCifar, 24);
  EXPECT_EQ(t.top, 4);  // (32 - 24) / 2, as resize_image_with_crop_or_pad
  EXPECT_EQ(t.left, 4);
  EXPECT_FALSE(t.flip);
  EXPECT_EQ(t.brightness_delta, 0.0f);
  EXPECT_EQ(t.contrast_factor, 1.0f);
  const ImageTransform odd = CentreCropTransform({33, 31, 1}, 24);  // rounded down
  EXPECT_EQ(odd.top, 4);
  EXPECT_EQ(odd.left, 3);
}

// The evaluation transform on a test set read from a real CIFAR-10 file.
TEST(ApplyEvalPipelineTest, CentreCropsAndStandardisesACifar10File) {
  testing::ScratchDir dir;
  testing::WritePlain(dir.File("test_batch.bin"), testing::CifarRecords({3, 8, 1}));
  absl::StatusOr<Dataset> loaded = LoadCifar10(dir.path(), Split::kTest);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Dataset original = *loaded;
  Dataset test = *std::move(loaded);

  ASSERT_TRUE(ApplyEvalPipeline(PipelineOptions{}, &test).ok());  // plain: untouched
  EXPECT_EQ(test.images.shape(), original.images.shape());

  ASSERT_TRUE(ApplyEvalPipeline(Cifar10(), &test).ok());
  EXPECT_EQ(test.images.shape(), ops::Shape({3, 24, 24, 3}));
  EXPECT_EQ(test.labels, original.labels);
  for (int64_t i = 0; i < 3; ++i) {
    const std::vector<float> row(test.images.data() + i * 1728,
                                 test.images.data() + (i + 1) * 1728);
    EXPECT_EQ(row, ReferenceCrop(original.images.data() + i * 3072, kCifar, 24, 4, 4, false))
        << "example " << i;
    ExpectStandardised(row, "example " + std::to_string(i));
  }

  Dataset again = original;
  absl::Status big = ApplyEvalPipeline(Cifar10(33), &again);
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.message(), AllOf(HasSubstr("--crop_size=33"), HasSubstr(original.name)));
}

BatcherOptions PipelineBatcher(int64_t batch, uint64_t seed, PipelineOptions pipeline) {
  BatcherOptions options;
  options.batch_size = batch;
  options.seed = seed;
  options.pipeline = std::move(pipeline);
  return options;
}

std::vector<float> DrawBatch(Batcher& batcher, ops::ThreadPool* pool = nullptr) {
  ops::Tensor images;
  std::vector<int32_t> labels(static_cast<size_t>(batcher.batch_size()));
  batcher.Next(&images, labels, pool);
  EXPECT_EQ(images.shape(), batcher.batch_shape());
  return {images.data(), images.data() + images.num_elements()};
}

TEST(PipelineBatcherTest, BatchesAreCroppedStandardisedImages) {
  const Dataset dataset = Synthetic({32, 32, 3}, 100);
  absl::StatusOr<Batcher> batcher = Batcher::Create(&dataset, PipelineBatcher(32, 1, Cifar10()));
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  EXPECT_EQ(batcher->batch_shape(), ops::Shape({32, 24, 24, 3}));
  // Caller tensors of the pipeline's size are written in place.
  ops::Tensor images = ops::Tensor::Zeros(ops::Shape({32, 24 * 24 * 3}));
  const float* storage = images.data();
  std::vector<int32_t> labels(32);
  batcher->Next(&images, labels);
  EXPECT_EQ(images.data(), storage);
  for (int64_t k = 0; k < 32; ++k) {
    ExpectStandardised({images.data() + k * 1728, 1728}, "row " + std::to_string(k));
  }
  // MNIST-shaped data goes through the same pipeline.
  const Dataset mnist = Synthetic({28, 28, 1}, 100);
  absl::StatusOr<Batcher> gray = Batcher::Create(&mnist, PipelineBatcher(10, 1, Cifar10()));
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_EQ(gray->batch_shape(), ops::Shape({10, 24, 24, 1}));
  EXPECT_EQ(DrawBatch(*gray).size(), 10u * 24 * 24);
}

// Without colour changes every row is some crop (in range) of its source image, mirrored or
// not, and both kinds occur.
TEST(PipelineBatcherTest, RowsAreCropsOfTheirExamples) {
  const Dataset dataset = Synthetic({32, 32, 3}, 64);
  absl::StatusOr<Batcher> batcher =
      Batcher::Create(&dataset, PipelineBatcher(16, 3, Cifar10(24, false)));
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  int flipped = 0;
  int total = 0;
  for (int step = 0; step < 4; ++step) {
    const std::vector<int64_t> order(batcher->epoch_order().begin() + batcher->position(),
                                     batcher->epoch_order().begin() + batcher->position() + 16);
    const std::vector<float> batch = DrawBatch(*batcher);
    for (int64_t k = 0; k < 16; ++k) {
      const std::vector<float> row(batch.begin() + k * 1728, batch.begin() + (k + 1) * 1728);
      const float* image = dataset.images.data() + order[static_cast<size_t>(k)] * 3072;
      bool found = false;
      for (int64_t top = 0; top <= 8 && !found; ++top) {
        for (int64_t left = 0; left <= 8 && !found; ++left) {
          for (bool flip : {false, true}) {
            if (row == ReferenceCrop(image, kCifar, 24, top, left, flip)) {
              found = true;
              flipped += flip ? 1 : 0;
              break;
            }
          }
        }
      }
      EXPECT_TRUE(found) << "step " << step << " row " << k;
      ++total;
    }
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, total);
}

TEST(PipelineBatcherTest, SameSeedSameCropsAnyThreadCount) {
  const Dataset dataset = Synthetic({32, 32, 3}, 96);
  auto make = [&](uint64_t seed) {
    absl::StatusOr<Batcher> b = Batcher::Create(&dataset, PipelineBatcher(32, seed, Cifar10()));
    EXPECT_TRUE(b.ok()) << b.status();
    return *std::move(b);
  };
  Batcher serial = make(11);
  Batcher pooled = make(11);
  Batcher other = make(12);
  ops::ThreadPool pool(3);
  for (int step = 0; step < 7; ++step) {  // over two epochs (3 batches each)
    const std::vector<float> a = DrawBatch(serial);
    ASSERT_EQ(a, DrawBatch(pooled, &pool)) << "step " << step;
    EXPECT_NE(a, DrawBatch(other)) << "step " << step;
  }
}

TEST(PipelineBatcherTest, BadCropSizeIsInvalidArgument) {
  const Dataset dataset = Synthetic({32, 32, 3}, 16);
  absl::Status status = Batcher::Create(&dataset, PipelineBatcher(4, 1, Cifar10(40))).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("--crop_size=40"), HasSubstr("32x32")));
  const Dataset flat = Synthetic({3072}, 16);
  EXPECT_THAT(Batcher::Create(&flat, PipelineBatcher(4, 1, Cifar10())).status().message(),
              HasSubstr("--input_pipeline=cifar10"));
}

}  // namespace
}  // namespace fulcrum::data
