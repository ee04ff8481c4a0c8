// models: NetBuilder stacks layers while tracking each example's shape (an NHWC image until the
// first dense layer flattens it), so a model is written as its layer list, and the first shape
// that does not fit ends the build with InvalidArgument naming the model and the layer.
// Thread-safety: a builder belongs to one thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/layer.h"
#include "models/model.h"

namespace fulcrum::models {

class NetBuilder {
 public:
  NetBuilder(std::string model, ImageShape input);

  NetBuilder& Conv(const std::string& name, const ConvOptions& options);
  NetBuilder& MaxPool(const std::string& name, const ops::Pool2DParams& params);
  NetBuilder& AvgPool(const std::string& name, const ops::Pool2DParams& params);
  NetBuilder& Lrn(const std::string& name, const ops::LrnParams& params);
  NetBuilder& Dropout(const std::string& name, double rate);
  // Fully connected; flattens the image (NHWC order, as TensorFlow's reshape does).
  NetBuilder& Dense(const std::string& name, int64_t units, const DenseOptions& options);
  // Any other layer; `image` is its output as an image (nullopt: a flat vector).
  NetBuilder& Add(absl::StatusOr<std::unique_ptr<Layer>> layer, std::optional<ImageShape> image);

  // The current example: an image until flattened.
  const std::optional<ImageShape>& image() const { return image_; }
  int64_t size() const { return size_; }

  // The model, or the first error (prefixed "<model>: ").
  absl::StatusOr<std::unique_ptr<Model>> Build(LossKind loss);

 private:
  // The current image, or an error naming `layer` when it has been flattened.
  absl::StatusOr<ImageShape> NeedImage(const std::string& layer);

  std::string model_;
  std::optional<ImageShape> image_;
  int64_t size_ = 0;
  std::vector<std::unique_ptr<Layer>> layers_;
  absl::Status status_;
};

// Rounds units * width to an integer, at least 1 (the model-size knob).
int64_t ScaledWidth(int64_t units, double width);

}  // namespace fulcrum::models
