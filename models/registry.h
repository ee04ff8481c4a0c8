// models: the model zoo and a registry by name. The registry is filled by an explicit call
// (RegisterBuiltinModels), never by static self-registration.
// Thread-safety: fill the registry before sharing it; Create is then safe from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"

namespace fulcrum::models {

// What a model needs to know about the data and the experiment.
struct ModelConfig {
  int64_t input_size = 784;  // values per example
  int num_classes = 10;
  // Scales every hidden width (the HKUST study's "model size" knob); output widths stay.
  double width = 1.0;
  // One example as height, width, channels (NHWC), as the dataset gives it; what the
  // convolutional models read. Empty when the examples are not images.
  std::vector<int64_t> input_shape = {};
};

class ModelRegistry {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Model>>(const ModelConfig&)>;

  // Adds a model; AlreadyExists if the name is taken.
  absl::Status Register(const std::string& name, std::string description, Factory factory);
  // Builds a fresh model; InvalidArgument naming the choices if `name` is unknown or the
  // config is invalid.
  absl::StatusOr<std::unique_ptr<Model>> Create(const std::string& name,
                                                const ModelConfig& config) const;
  std::vector<std::string> Names() const;
  std::string Description(const std::string& name) const;

 private:
  struct Entry {
    std::string description;
    Factory factory;
  };
  std::map<std::string, Entry> entries_;
};

// Registers logreg, mlp and autoencoder, the convolutional models (cnn_zoo.cc: mnist_cnn,
// cifar10_cnn, alexnet, vgg16) and stn, stn_deep (stn.cc).
absl::Status RegisterBuiltinModels(ModelRegistry* registry);

// A fresh built-in model `name` for `config`, computing on `pool` (not owned; may be null).
// What the worker and the chief both build: InvalidArgument as ModelRegistry::Create.
// The convolutional models, and the spatial transformers stn and stn_deep (registered by
// RegisterBuiltinModels).
absl::Status RegisterCnnModels(ModelRegistry* registry);
absl::Status RegisterStn(ModelRegistry* registry);

// The input image of model `model` from config.input_shape: InvalidArgument naming the model
// when the examples are not images of rank 3 whose size is config.input_size.
absl::StatusOr<ImageShape> InputImage(const std::string& model, const ModelConfig& config);

absl::StatusOr<std::unique_ptr<Model>> CreateBuiltinModel(const std::string& name,
                                                          const ModelConfig& config,
                                                          ops::ThreadPool* pool);

}  // namespace fulcrum::models
