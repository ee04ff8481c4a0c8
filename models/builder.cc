#include "models/builder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fulcrum::models {

int64_t ScaledWidth(int64_t units, double width) {
  // Clamped before the conversion: an absurd --model_width gives a layer too big to build
  // (refused by Model::Make, naming it), not an out-of-range llround.
  const double scaled = std::min(static_cast<double>(units) * width, 1e15);
  return std::max<int64_t>(1, std::llround(scaled));
}

NetBuilder::NetBuilder(std::string model, ImageShape input)
    : model_(std::move(model)), image_(input), size_(input.size()) {
  if (input.height <= 0 || input.width <= 0 || input.channels <= 0) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("input image ", input.ToString(), " must have positive dimensions"));
  }
}

absl::StatusOr<ImageShape> NetBuilder::NeedImage(const std::string& layer) {
  if (!image_.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ": needs an image but the input was flattened by an earlier layer"));
  }
  return *image_;
}

NetBuilder& NetBuilder::Add(absl::StatusOr<std::unique_ptr<Layer>> layer,
                            std::optional<ImageShape> image) {
  if (!status_.ok()) return *this;
  if (!layer.ok()) {
    status_ = layer.status();
    return *this;
  }
  if ((*layer)->input_size() != size_) {
    status_ = absl::InvalidArgumentError(absl::StrCat((*layer)->name(), ": takes ",
                                                      (*layer)->input_size(),
                                                      " values per example, the layer before "
                                                      "gives ",
                                                      size_));
    return *this;
  }
  size_ = (*layer)->output_size();
  image_ = image;
  layers_.push_back(std::move(*layer));
  return *this;
}

NetBuilder& NetBuilder::Conv(const std::string& name, const ConvOptions& options) {
  if (!status_.ok()) return *this;
  absl::StatusOr<ImageShape> in = NeedImage(name);
  if (!in.ok()) return Add(in.status(), std::nullopt);
  absl::StatusOr<ImageShape> out = ConvOutputImage(name, *in, options);
  if (!out.ok()) return Add(out.status(), std::nullopt);
  return Add(MakeConv2D(name, *in, options), *out);
}

NetBuilder& NetBuilder::MaxPool(const std::string& name, const ops::Pool2DParams& params) {
  if (!status_.ok()) return *this;
  absl::StatusOr<ImageShape> in = NeedImage(name);
  if (!in.ok()) return Add(in.status(), std::nullopt);
  absl::StatusOr<ImageShape> out = PoolOutputImage(name, *in, params);
  if (!out.ok()) return Add(out.status(), std::nullopt);
  return Add(MakeMaxPool(name, *in, params), *out);
}

NetBuilder& NetBuilder::AvgPool(const std::string& name, const ops::Pool2DParams& params) {
  if (!status_.ok()) return *this;
  absl::StatusOr<ImageShape> in = NeedImage(name);
  if (!in.ok()) return Add(in.status(), std::nullopt);
  absl::StatusOr<ImageShape> out = PoolOutputImage(name, *in, params);
  if (!out.ok()) return Add(out.status(), std::nullopt);
  return Add(MakeAvgPool(name, *in, params), *out);
}

NetBuilder& NetBuilder::Lrn(const std::string& name, const ops::LrnParams& params) {
  if (!status_.ok()) return *this;
  absl::StatusOr<ImageShape> in = NeedImage(name);
  if (!in.ok()) return Add(in.status(), std::nullopt);
  return Add(MakeLrn(name, *in, params), *in);
}

NetBuilder& NetBuilder::Dropout(const std::string& name, double rate) {
  return Add(MakeDropout(name, size_, rate), image_);
}

NetBuilder& NetBuilder::Dense(const std::string& name, int64_t units, const DenseOptions& options) {
  if (!status_.ok()) return *this;
  if (units <= 0) {
    return Add(
        absl::InvalidArgumentError(absl::StrCat(name, ": units must be positive, got ", units)),
        std::nullopt);
  }
  return Add(MakeDense(name, size_, units, options), std::nullopt);
}

absl::StatusOr<std::unique_ptr<Model>> NetBuilder::Build(LossKind loss) {
  if (!status_.ok()) {
    return absl::Status(status_.code(), absl::StrCat(model_, ": ", status_.message()));
  }
  return Model::Make(model_, std::move(layers_), loss);
}

}  // namespace fulcrum::models
