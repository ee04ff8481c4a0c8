#include "models/registry.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "models/builder.h"

namespace fulcrum::models {

absl::Status ModelRegistry::Register(const std::string& name, std::string description,
                                     Factory factory) {
  if (!entries_.try_emplace(name, Entry{std::move(description), std::move(factory)}).second) {
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

std::vector<std::string> ModelRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

std::string ModelRegistry::Description(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? "" : it->second.description;
}

absl::StatusOr<std::unique_ptr<Model>> ModelRegistry::Create(const std::string& name,
                                                             const ModelConfig& config) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model '", name, "': expected one of ", absl::StrJoin(Names(), ", ")));
  }
  if (config.input_size <= 0 || config.num_classes <= 1 || !(config.width > 0.0) ||
      !std::isfinite(config.width)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", name, "': invalid config (input_size ", config.input_size,
                     ", num_classes ", config.num_classes, ", width ", config.width, ")"));
  }
  return it->second.factory(config);
}

namespace {

// A stack of dense layers: widths[0] is the input size, every later entry a layer's output.
absl::StatusOr<std::unique_ptr<Model>> DenseStack(const std::string& name,
                                                  const std::vector<int64_t>& widths,
                                                  Activation hidden, Activation last,
                                                  LossKind loss) {
  std::vector<std::unique_ptr<Layer>> layers;
  for (size_t i = 1; i < widths.size(); ++i) {
    const bool is_last = i + 1 == widths.size();
    layers.push_back(MakeDense(absl::StrCat("dense_", i - 1), widths[i - 1], widths[i],
                               is_last ? last : hidden));
  }
  return Model::Make(name, std::move(layers), loss);
}

}  // namespace

absl::Status RegisterBuiltinModels(ModelRegistry* registry) {
  FULCRUM_RETURN_IF_ERROR(registry->Register(
      "logreg", "softmax regression: input -> classes (Touchstone / CS744 workload)",
      [](const ModelConfig& c) -> absl::StatusOr<std::unique_ptr<Model>> {
        return DenseStack("logreg", {c.input_size, c.num_classes}, Activation::kNone,
                          Activation::kNone, LossKind::kSoftmaxCrossEntropy);
      }));
  FULCRUM_RETURN_IF_ERROR(registry->Register(
      "mlp", "multi-layer perceptron: input-256-128-classes, ReLU",
      [](const ModelConfig& c) -> absl::StatusOr<std::unique_ptr<Model>> {
        return DenseStack(
            "mlp",
            {c.input_size, ScaledWidth(256, c.width), ScaledWidth(128, c.width), c.num_classes},
            Activation::kRelu, Activation::kNone, LossKind::kSoftmaxCrossEntropy);
      }));
  FULCRUM_RETURN_IF_ERROR(registry->Register(
      "autoencoder", "autoencoder: input-256-128-256-input, sigmoid, MSE (HKUST workload)",
      [](const ModelConfig& c) -> absl::StatusOr<std::unique_ptr<Model>> {
        return DenseStack("autoencoder",
                          {c.input_size, ScaledWidth(256, c.width), ScaledWidth(128, c.width),
                           ScaledWidth(256, c.width), c.input_size},
                          Activation::kSigmoid, Activation::kSigmoid, LossKind::kReconstructionMse);
      }));
  FULCRUM_RETURN_IF_ERROR(RegisterCnnModels(registry));
  FULCRUM_RETURN_IF_ERROR(RegisterStn(registry));
  return absl::OkStatus();
}

absl::StatusOr<ImageShape> InputImage(const std::string& model, const ModelConfig& config) {
  const auto& s = config.input_shape;
  if (s.size() != 3 || s[0] <= 0 || s[1] <= 0 || s[2] <= 0 ||
      s[0] * s[1] * s[2] != config.input_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", model, "' needs images (height, width, channels); the examples are [",
        absl::StrJoin(s, ", "), "] with ", config.input_size, " values each"));
  }
  return ImageShape{s[0], s[1], s[2]};
}

absl::StatusOr<std::unique_ptr<Model>> CreateBuiltinModel(const std::string& name,
                                                          const ModelConfig& config,
                                                          ops::ThreadPool* pool) {
  ModelRegistry registry;
  FULCRUM_RETURN_IF_ERROR(RegisterBuiltinModels(&registry));
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, registry.Create(name, config));
  model->set_thread_pool(pool);
  return model;
}

}  // namespace fulcrum::models
