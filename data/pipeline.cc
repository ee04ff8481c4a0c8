#include "data/pipeline.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/enum_flag.h"
#include "base/random.h"
#include "base/status_macros.h"

namespace fulcrum::data {
namespace {

// The tutorial draws on pixels in [0, 255]: brightness max_delta 63, contrast [0.2, 1.8).
constexpr double kMaxBrightnessDelta = 63.0 / 255.0;
constexpr double kContrastLower = 0.2;
constexpr double kContrastUpper = 1.8;

std::string ExampleShapeText(const Dataset& dataset) {
  const ops::Shape::Dims& dims = dataset.images.shape().dims();
  if (dims.size() < 2) return "[]";
  return absl::StrCat("[", absl::StrJoin(dims.begin() + 1, dims.end(), ", "), "]");
}

// Per channel of the [crop, crop, C] image at `out`: (x - mean_c) * factor + mean_c, as
// tf.image.adjust_contrast.
void AdjustContrast(float* out, int64_t pixels, int64_t channels, float factor) {
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0;
    for (int64_t p = 0; p < pixels; ++p) sum += out[p * channels + c];
    const auto mean = static_cast<float>(sum / static_cast<double>(pixels));
    for (int64_t p = 0; p < pixels; ++p) {
      float& x = out[p * channels + c];
      x = (x - mean) * factor + mean;
    }
  }
}

constexpr EnumName<PipelineKind> kPipelineNames[] = {{PipelineKind::kPlain, "plain"},
                                                     {PipelineKind::kCifar10, "cifar10"}};

}  // namespace

const char* PipelineName(PipelineKind kind) { return EnumNameOf(kind, kPipelineNames); }

bool AbslParseFlag(absl::string_view text, PipelineKind* kind, std::string* error) {
  return ParseEnum(text, kPipelineNames, kind, error);
}

std::string AbslUnparseFlag(PipelineKind kind) { return UnparseEnum(kind, kPipelineNames); }

absl::StatusOr<std::vector<int64_t>> PipelineExampleShape(const Dataset& dataset,
                                                          const PipelineOptions& options) {
  const ops::Shape::Dims& dims = dataset.images.shape().dims();
  std::vector<int64_t> example(dims.begin() + std::min<size_t>(1, dims.size()), dims.end());
  if (options.kind == PipelineKind::kPlain) return example;
  if (example.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input_pipeline=cifar10 needs images [height, width, channels]; the examples of ",
        dataset.name, " have shape ", ExampleShapeText(dataset), " (rank ", example.size(), ")"));
  }
  const int64_t crop = options.crop_size;
  if (crop < 1 || crop > example[0] || crop > example[1]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--crop_size=", crop, " does not fit the ", example[0], "x", example[1], " images of ",
        dataset.name, ": it must be between 1 and ", std::min(example[0], example[1])));
  }
  return std::vector<int64_t>{crop, crop, example[2]};
}

ImageTransform DrawTrainingTransform(const ImageDims& image, int crop_size, bool distort_colors,
                                     uint64_t seed) {
  Rng rng(seed);
  ImageTransform t;
  t.top = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(image.height - crop_size + 1)));
  t.left = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(image.width - crop_size + 1)));
  t.flip = rng.Below(2) == 1;
  if (distort_colors) {
    t.brightness_delta = static_cast<float>((2.0 * rng.Uniform() - 1.0) * kMaxBrightnessDelta);
    t.contrast_factor =
        static_cast<float>(kContrastLower + (kContrastUpper - kContrastLower) * rng.Uniform());
  }
  return t;
}

ImageTransform CentreCropTransform(const ImageDims& image, int crop_size) {
  ImageTransform t;
  t.top = (image.height - crop_size) / 2;
  t.left = (image.width - crop_size) / 2;
  return t;
}

void TransformImage(const float* image, const ImageDims& dims, int crop_size,
                    const ImageTransform& t, float* out) {
  const int64_t crop = crop_size;
  const int64_t c = dims.channels;
  for (int64_t y = 0; y < crop; ++y) {
    const float* src_row = image + ((t.top + y) * dims.width + t.left) * c;
    float* dst_row = out + y * crop * c;
    if (!t.flip) {
      std::copy(src_row, src_row + crop * c, dst_row);
      continue;
    }
    for (int64_t x = 0; x < crop; ++x) {  // output column x is input column crop-1-x
      std::copy(src_row + (crop - 1 - x) * c, src_row + (crop - x) * c, dst_row + x * c);
    }
  }
  const int64_t n = crop * crop * c;
  if (t.brightness_delta != 0.0f) {
    for (int64_t i = 0; i < n; ++i) out[i] += t.brightness_delta;
  }
  if (t.contrast_factor != 1.0f) AdjustContrast(out, crop * crop, c, t.contrast_factor);
  PerImageStandardize(std::span<float>(out, static_cast<size_t>(n)));
}

void PerImageStandardize(std::span<float> values) {
  // Two passes in double: the same quantity as TensorFlow's E[x^2] - E[x]^2, without its
  // cancellation on images with a large mean.
  const auto n = static_cast<double>(values.size());
  double sum = 0.0;
  for (float v : values) sum += v;
  const double mean = sum / n;
  double squares = 0.0;
  for (float v : values) squares += (v - mean) * (v - mean);
  const double stddev = std::sqrt(squares / n);
  const double scale = 1.0 / std::max(stddev, 1.0 / std::sqrt(n));
  for (float& v : values) v = static_cast<float>((v - mean) * scale);
}

absl::Status ApplyEvalPipeline(const PipelineOptions& options, Dataset* dataset) {
  FULCRUM_ASSIGN_OR_RETURN(std::vector<int64_t> example, PipelineExampleShape(*dataset, options));
  if (options.kind == PipelineKind::kPlain) return absl::OkStatus();
  const ops::Shape& in = dataset->images.shape();
  const ImageDims dims{in.dim(1), in.dim(2), in.dim(3)};
  const int64_t n = dataset->images.rows();
  std::vector<int64_t> out_dims = {n};
  out_dims.insert(out_dims.end(), example.begin(), example.end());
  ops::Tensor out = ops::Tensor::Zeros(ops::Shape(std::move(out_dims)));
  const int64_t in_row = dims.height * dims.width * dims.channels;
  const int64_t out_row = out.num_elements() / std::max<int64_t>(1, n);
  const ImageTransform centre = CentreCropTransform(dims, options.crop_size);
  for (int64_t i = 0; i < n; ++i) {
    TransformImage(dataset->images.data() + i * in_row, dims, options.crop_size, centre,
                   out.data() + i * out_row);
  }
  dataset->images = std::move(out);
  return absl::OkStatus();
}

}  // namespace fulcrum::data
