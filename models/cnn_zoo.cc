// models: the convolutional models of the studies Fulcrum reruns. Every hidden width (filters,
// units) scales with ModelConfig::width; the input image and the class count come from the
// data. Layer lists follow the sources named on each model.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/builder.h"
#include "models/registry.h"

namespace fulcrum::models {
namespace {

using ops::Initializer;
using ops::Padding;

ConvOptions Conv(int64_t k, int64_t filters, int64_t stride = 1, Padding padding = Padding::kSame) {
  ConvOptions o;
  o.kernel_h = k;
  o.kernel_w = k;
  o.filters = filters;
  o.stride = stride;
  o.padding = padding;
  o.activation = Activation::kRelu;
  return o;
}

ops::Pool2DParams Pool(int64_t window, int64_t stride, Padding padding) {
  ops::Pool2DParams p;
  p.window_h = window;
  p.window_w = window;
  p.stride_h = stride;
  p.stride_w = stride;
  p.padding = padding;
  return p;
}

DenseOptions Relu() {
  DenseOptions o;
  o.activation = Activation::kRelu;
  return o;
}

DenseOptions Linear() { return DenseOptions{}; }

// TensorFlow's layers tutorial (tensorflow/examples/tutorials/layers/cnn_mnist.py):
// conv5x5x32-pool2-conv5x5x64-pool2-fc1024-dropout(0.4)-fc(classes), Glorot kernels.
absl::StatusOr<std::unique_ptr<Model>> MnistCnn(const ModelConfig& c) {
  FULCRUM_ASSIGN_OR_RETURN(ImageShape input, InputImage("mnist_cnn", c));
  const double w = c.width;
  return NetBuilder("mnist_cnn", input)
      .Conv("conv1", Conv(5, ScaledWidth(32, w)))
      .MaxPool("pool1", Pool(2, 2, Padding::kValid))
      .Conv("conv2", Conv(5, ScaledWidth(64, w)))
      .MaxPool("pool2", Pool(2, 2, Padding::kValid))
      .Dense("dense1", ScaledWidth(1024, w), Relu())
      .Dropout("dropout1", 0.4)
      .Dense("logits", c.num_classes, Linear())
      .Build(LossKind::kSoftmaxCrossEntropy);
}

// TensorFlow's CIFAR-10 tutorial (models/tutorials/image/cifar10/cifar10.py), initializers
// and weight decay included: conv5x5x64-pool3s2-LRN-conv5x5x64-LRN-pool3s2-fc384-fc192-fc10.
absl::StatusOr<std::unique_ptr<Model>> Cifar10Cnn(const ModelConfig& c) {
  FULCRUM_ASSIGN_OR_RETURN(ImageShape input, InputImage("cifar10_cnn", c));
  const double w = c.width;
  const ops::LrnParams lrn{.depth_radius = 4, .bias = 1.0f, .alpha = 0.001f / 9.0f, .beta = 0.75f};
  ConvOptions conv1 = Conv(5, ScaledWidth(64, w));
  conv1.kernel_init = Initializer::TruncatedNormal(5e-2f);
  conv1.bias_init = Initializer::Zeros();
  ConvOptions conv2 = conv1;
  conv2.bias_init = Initializer::Constant(0.1f);
  DenseOptions local = Relu();
  local.kernel_init = Initializer::TruncatedNormal(0.04f);
  local.bias_init = Initializer::Constant(0.1f);
  local.weight_decay = 0.004f;
  DenseOptions softmax = Linear();
  softmax.kernel_init = Initializer::TruncatedNormal(1.0f / 192.0f);
  return NetBuilder("cifar10_cnn", input)
      .Conv("conv1", conv1)
      .MaxPool("pool1", Pool(3, 2, Padding::kSame))
      .Lrn("norm1", lrn)
      .Conv("conv2", conv2)
      .Lrn("norm2", lrn)
      .MaxPool("pool2", Pool(3, 2, Padding::kSame))
      .Dense("local3", ScaledWidth(384, w), local)
      .Dense("local4", ScaledWidth(192, w), local)
      .Dense("softmax_linear", c.num_classes, softmax)
      .Build(LossKind::kSoftmaxCrossEntropy);
}

// AlexNet as tf_cnn_benchmarks builds it (models/alexnet_model.py, one tower, no LRN):
// conv11x11x64/4 VALID-pool3s2-conv5x5x192-pool3s2-conv3x3x384-conv3x3x384-conv3x3x256-
// pool3s2-fc4096-dropout-fc4096-dropout-fc(classes); 227x227 images as in those benchmarks
// (any image of at least 67x67 fits).
absl::StatusOr<std::unique_ptr<Model>> AlexNet(const ModelConfig& c) {
  FULCRUM_ASSIGN_OR_RETURN(ImageShape input, InputImage("alexnet", c));
  if (input.height < 67 || input.width < 67) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model 'alexnet' needs images of at least 67x67 (its 11x11 stride-4 VALID conv and three "
        "3x3 stride-2 pools), got ",
        input.ToString(), "; e.g. --dataset=synthetic --synthetic_shape=227,227,3"));
  }
  const double w = c.width;
  const ops::Pool2DParams pool = Pool(3, 2, Padding::kValid);
  return NetBuilder("alexnet", input)
      .Conv("conv1", Conv(11, ScaledWidth(64, w), 4, Padding::kValid))
      .MaxPool("pool1", pool)
      .Conv("conv2", Conv(5, ScaledWidth(192, w)))
      .MaxPool("pool2", pool)
      .Conv("conv3", Conv(3, ScaledWidth(384, w)))
      .Conv("conv4", Conv(3, ScaledWidth(384, w)))
      .Conv("conv5", Conv(3, ScaledWidth(256, w)))
      .MaxPool("pool5", pool)
      .Dense("fc6", ScaledWidth(4096, w), Relu())
      .Dropout("dropout6", 0.5)
      .Dense("fc7", ScaledWidth(4096, w), Relu())
      .Dropout("dropout7", 0.5)
      .Dense("fc8", c.num_classes, Linear())
      .Build(LossKind::kSoftmaxCrossEntropy);
}

// VGG16 (configuration D) as tf_cnn_benchmarks builds it (models/vgg_model.py): five blocks of
// 3x3 SAME convs (2x64, 2x128, 3x256, 3x512, 3x512), each followed by a 2x2 stride-2 pool, then
// fc4096-dropout-fc4096-dropout-fc(classes). Images of at least 32x32 (CIFAR-10's) fit.
absl::StatusOr<std::unique_ptr<Model>> Vgg16(const ModelConfig& c) {
  FULCRUM_ASSIGN_OR_RETURN(ImageShape input, InputImage("vgg16", c));
  if (input.height < 32 || input.width < 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("model 'vgg16' needs images of at least 32x32 (five 2x2 stride-2 pools), got ",
                     input.ToString()));
  }
  const double w = c.width;
  NetBuilder b("vgg16", input);
  const int64_t blocks[5][2] = {{2, 64}, {2, 128}, {3, 256}, {3, 512}, {3, 512}};
  for (int i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < blocks[i][0]; ++j) {
      b.Conv(absl::StrCat("conv", i + 1, "_", j + 1), Conv(3, ScaledWidth(blocks[i][1], w)));
    }
    b.MaxPool(absl::StrCat("pool", i + 1), Pool(2, 2, Padding::kValid));
  }
  return b.Dense("fc6", ScaledWidth(4096, w), Relu())
      .Dropout("dropout6", 0.5)
      .Dense("fc7", ScaledWidth(4096, w), Relu())
      .Dropout("dropout7", 0.5)
      .Dense("fc8", c.num_classes, Linear())
      .Build(LossKind::kSoftmaxCrossEntropy);
}

}  // namespace

absl::Status RegisterCnnModels(ModelRegistry* registry) {
  FULCRUM_RETURN_IF_ERROR(registry->Register(
      "mnist_cnn",
      "conv5x5x32-pool-conv5x5x64-pool-fc1024-dropout-fc (TensorFlow's layers tutorial)",
      MnistCnn));
  FULCRUM_RETURN_IF_ERROR(registry->Register(
      "cifar10_cnn",
      "conv5x5x64-pool-LRN-conv5x5x64-LRN-pool-fc384-fc192-fc (TensorFlow's CIFAR-10 tutorial; "
      "24x24 crops with --input_pipeline=cifar10)",
      Cifar10Cnn));
  FULCRUM_RETURN_IF_ERROR(registry->Register(
      "alexnet", "AlexNet as tf_cnn_benchmarks builds it (5 conv, 3 fc; 227x227 images)", AlexNet));
  FULCRUM_RETURN_IF_ERROR(
      registry->Register("vgg16", "VGG16 as tf_cnn_benchmarks builds it (13 conv, 3 fc)", Vgg16));
  return absl::OkStatus();
}

}  // namespace fulcrum::models
