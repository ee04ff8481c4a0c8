// data: the input pipelines between a Dataset and a model: "plain" (examples as stored) and
// "cifar10", the TensorFlow CIFAR-10 tutorial's (models/tutorials/image/cifar10/
// cifar10_input.py). Training (distorted_inputs): a random crop_size x crop_size crop at a
// uniform offset, a random horizontal flip (p = 0.5), random brightness (delta in
// [-63/255, 63/255)) and contrast (factor in [0.2, 1.8)), then per-image standardisation.
// Evaluation (inputs): the centre crop and per-image standardisation, no randomness.
// The Batcher applies the training transform row by row (data/batcher.h); the evaluation
// transform is applied once to a whole test set (ApplyEvalPipeline). Works on any NHWC
// dataset. Thread-safety: pure functions; distinct output buffers may be written at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/dataset_types.h"

namespace fulcrum::data {

// --input_pipeline: plain or cifar10, parsed by Abseil (base/enum_flag.h).
enum class PipelineKind { kPlain, kCifar10 };
const char* PipelineName(PipelineKind kind);
bool AbslParseFlag(absl::string_view text, PipelineKind* kind, std::string* error);
std::string AbslUnparseFlag(PipelineKind kind);

struct PipelineOptions {
  PipelineKind kind = PipelineKind::kPlain;  // --input_pipeline
  int crop_size = 24;                 // cifar10: crop height and width (--crop_size)
  // cifar10 training: the tutorial's random brightness and contrast (on by default, as in
  // distorted_inputs). Per-image standardisation removes a uniform brightness shift, so
  // brightness changes the result only by rounding; contrast does change it.
  bool distort_colors = true;
};

// The shape of one example after the pipeline: plain, the dataset's example shape; cifar10,
// [crop_size, crop_size, C]. InvalidArgument naming the flag and the sizes for a crop_size < 1 or
// larger than the images' height or width, or (cifar10) examples that are not images [H, W, C].
absl::StatusOr<std::vector<int64_t>> PipelineExampleShape(const Dataset& dataset,
                                                          const PipelineOptions& options);

// One image [height, width, channels], row-major (HWC).
struct ImageDims {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
};

// What the cifar10 pipeline does to one image: the crop window's top-left corner, whether it
// is mirrored left-right, and the colour changes (0 and 1 = none).
struct ImageTransform {
  int64_t top = 0;
  int64_t left = 0;
  bool flip = false;
  float brightness_delta = 0.0f;
  float contrast_factor = 1.0f;
};

// The training transform of one example, a function of `seed` only: top in
// [0, height - crop_size], left in [0, width - crop_size] (uniform, as tf.random_crop), flip
// with probability 1/2, and with distort_colors the tutorial's brightness and contrast draws
// (scaled to [0,1] pixels). Precondition: 1 <= crop_size <= height, width.
ImageTransform DrawTrainingTransform(const ImageDims& image, int crop_size, bool distort_colors,
                                     uint64_t seed);

// The evaluation transform: the centre crop of tf.image.resize_image_with_crop_or_pad,
// top = (height - crop_size) / 2, left = (width - crop_size) / 2 (rounded down), nothing else.
ImageTransform CentreCropTransform(const ImageDims& image, int crop_size);

// Writes `image` (HWC) transformed by `t` to out [crop_size, crop_size, channels]: the crop,
// mirrored if t.flip, brightness (x + delta), contrast per channel ((x - mean_c) * factor +
// mean_c over the crop), then PerImageStandardize. `out` must not overlap `image`.
void TransformImage(const float* image, const ImageDims& dims, int crop_size,
                    const ImageTransform& t, float* out);

// tf.image.per_image_standardization in place: (x - mean) / max(stddev, 1/sqrt(n)) over all n
// values (n >= 1); a constant image becomes all zeros.
void PerImageStandardize(std::span<float> values);

// Replaces dataset->images by their evaluation transform: plain leaves the dataset as it
// is; cifar10 centre-crops and standardises every image, giving [N, crop, crop, C]. Errors
// as PipelineExampleShape (they name the dataset); on error the dataset is unchanged.
absl::Status ApplyEvalPipeline(const PipelineOptions& options, Dataset* dataset);

}  // namespace fulcrum::data
