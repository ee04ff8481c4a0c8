// models: the spatial transformer layer and the `stn` model (Jaderberg et al. 2015, its MNIST
// experiments; the HKUST study's STN workload), and `stn_deep`, the study's deeper STN.
#include "models/stn.h"

#include <algorithm>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/builder.h"
#include "models/registry.h"

namespace fulcrum::models {
namespace {

constexpr float kIdentity[6] = {1, 0, 0, 0, 1, 0};

// Hands out consecutive views of one scratch tensor, in the order the layout declares them.
class Carver {
 public:
  explicit Carver(ops::Tensor* scratch)
      : next_(scratch == nullptr ? nullptr : scratch->data()),
        device_(scratch == nullptr ? ops::Device::kCpu : scratch->device()) {}
  ops::Tensor Take(const ops::Shape& shape) {
    ops::Tensor t = ops::Tensor::View(next_, shape, device_);
    next_ += shape.num_elements();
    return t;
  }
  // A flat view of n floats, or an empty tensor when n is 0.
  ops::Tensor TakeFlat(int64_t n) { return n > 0 ? Take(ops::Shape{n}) : ops::Tensor(); }
  ops::Device device() const { return device_; }

 private:
  float* next_;
  ops::Device device_;
};

class SpatialTransformerLayer final : public Layer {
 public:
  SpatialTransformerLayer(std::string name, ImageShape in, ImageShape out,
                          std::vector<std::unique_ptr<Layer>> loc)
      : name_(std::move(name)), in_(in), out_(out), loc_(std::move(loc)) {
    for (const auto& layer : loc_) {
      first_variable_.push_back(variables_.size());
      for (const VariableSpec& spec : layer->variables()) variables_.push_back(spec);
    }
  }

  const std::string& name() const override { return name_; }
  const std::vector<VariableSpec>& variables() const override { return variables_; }
  int64_t input_size() const override { return in_.size(); }
  int64_t output_size() const override { return out_.size(); }
  // One node in TensorBoard's graph, reading the localisation network's variables.
  LayerOp graph_op() const override {
    return {.op = "SpatialTransformer",
            .input_dims = {in_.height, in_.width, in_.channels},
            .output_dims = {out_.height, out_.width, out_.channels}};
  }

  // Kept from Forward to Backward: every localisation activation, theta, the grid, and the
  // localisation layers' own saved scratch.
  int64_t saved_elements(int64_t batch) const override {
    int64_t n = batch * 6 + GridElements(batch) + 6;
    for (const auto& layer : loc_) n += batch * layer->output_size() + layer->saved_elements(batch);
    return n;
  }
  // The localisation layers' temp first (shared by them), then, in Backward only, dgrid, two
  // ping-pong gradient buffers for the localisation layers and their gradient wrt the input.
  int64_t temp_elements(int64_t batch) const override {
    return LocTemp(batch) + GridElements(batch) + 2 * batch * MaxLocOutput() + batch * in_.size();
  }

  absl::Status Forward(std::span<const ops::Tensor> params, const ops::Tensor& x, ops::Tensor* y,
                       const LayerContext& ctx) const override {
    const int64_t batch = x.rows();
    FULCRUM_RETURN_IF_ERROR(CheckOperands(x, *y, ctx));
    Saved s = CarveSaved(ctx, batch);
    Carver temp(ctx.temp);
    ops::Tensor loc_temp = temp.TakeFlat(LocTemp(batch));
    for (size_t i = 0; i < loc_.size(); ++i) {
      FULCRUM_RETURN_IF_ERROR(loc_[i]->Forward(LocParams(params, i), i == 0 ? x : s.acts[i - 1],
                                               &s.acts[i], LocContext(ctx, s, i, loc_temp)));
    }
    // theta = the localisation output + the identity transform.
    ops::Backend& b = *ctx.backend;
    float identity[6];
    std::copy(std::begin(kIdentity), std::end(kIdentity), identity);
    FULCRUM_RETURN_IF_ERROR(b.CopyFromHost(ops::Tensor::View(identity, {6}), &s.identity));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor theta_rows, s.theta.Reshaped({batch, 6}));
    FULCRUM_RETURN_IF_ERROR(b.Copy(s.acts.back(), &theta_rows));
    FULCRUM_RETURN_IF_ERROR(b.BiasAdd(s.identity, &theta_rows));
    FULCRUM_RETURN_IF_ERROR(b.AffineGrid(s.theta, &s.grid));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor x4, x.Reshaped(Nhwc(batch, in_)));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor y4, y->Reshaped(Nhwc(batch, out_)));
    return b.BilinearSample(x4, s.grid, &y4);
  }

  absl::Status Backward(std::span<const ops::Tensor> params, const ops::Tensor& x,
                        const ops::Tensor& y, ops::Tensor* dy, std::span<ops::Tensor> dparams,
                        ops::Tensor* dx, const LayerContext& ctx) const override {
    const int64_t batch = x.rows();
    FULCRUM_RETURN_IF_ERROR(CheckOperands(x, y, ctx));
    if (dx != nullptr && !(dx->shape() == x.shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": input gradient ", dx->shape().ToString(), ", expected ", x.shape().ToString()));
    }
    Saved s = CarveSaved(ctx, batch);
    Carver temp(ctx.temp);
    ops::Tensor loc_temp = temp.TakeFlat(LocTemp(batch));
    ops::Tensor dgrid = temp.Take(s.grid.shape());
    float* ping = temp.TakeFlat(batch * MaxLocOutput()).data();
    float* pong = temp.TakeFlat(batch * MaxLocOutput()).data();
    ops::Tensor loc_dx = temp.Take({batch, in_.size()});

    // Through the sampler: d(input) straight into dx, d(grid) -> d(theta).
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor x4, x.Reshaped(Nhwc(batch, in_)));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor dy4, dy->Reshaped(Nhwc(batch, out_)));
    ops::Tensor dx4;
    if (dx != nullptr) {
      FULCRUM_ASSIGN_OR_RETURN(dx4, dx->Reshaped(Nhwc(batch, in_)));
    }
    ops::Backend& b = *ctx.backend;
    FULCRUM_RETURN_IF_ERROR(
        b.BilinearSampleGrad(x4, s.grid, dy4, dx == nullptr ? nullptr : &dx4, &dgrid));
    ops::Tensor dtheta = ops::Tensor::View(ping, {batch, 2, 3}, temp.device());
    FULCRUM_RETURN_IF_ERROR(b.AffineGridGrad(dgrid, &dtheta));

    // Through the localisation network, last layer first; its first layer's input gradient
    // is added to the sampler's.
    ops::Tensor delta = ops::Tensor::View(ping, {batch, 6}, temp.device());
    for (size_t i = loc_.size(); i-- > 0;) {
      ops::Tensor next;
      if (i > 0) {
        next = ops::Tensor::View(delta.data() == ping ? pong : ping,
                                 {batch, loc_[i - 1]->output_size()}, temp.device());
      } else if (dx != nullptr) {
        next = loc_dx;
      }
      FULCRUM_RETURN_IF_ERROR(
          loc_[i]->Backward(LocParams(params, i), i == 0 ? x : s.acts[i - 1], s.acts[i], &delta,
                            dparams.subspan(first_variable_[i], loc_[i]->variables().size()),
                            next.empty() ? nullptr : &next, LocContext(ctx, s, i, loc_temp)));
      delta = next;
    }
    return dx != nullptr ? b.Add(loc_dx, dx) : absl::OkStatus();
  }

 private:
  // Views into LayerContext::saved, laid out as saved_elements() counts them.
  struct Saved {
    std::vector<ops::Tensor> acts;       // localisation layer i's output, [batch, out_i]
    ops::Tensor theta;                   // [batch, 2, 3]
    ops::Tensor grid;                    // [batch, out H, out W, 2]
    ops::Tensor identity;                // [6]: the identity transform, added to theta
    std::vector<ops::Tensor> loc_saved;  // localisation layer i's saved scratch (may be empty)
  };

  static ops::Shape Nhwc(int64_t batch, const ImageShape& s) {
    return ops::Shape({batch, s.height, s.width, s.channels});
  }
  int64_t GridElements(int64_t batch) const { return batch * out_.height * out_.width * 2; }
  int64_t LocTemp(int64_t batch) const {
    int64_t n = 0;
    for (const auto& layer : loc_) n = std::max(n, layer->temp_elements(batch));
    return n;
  }
  int64_t MaxLocOutput() const {
    int64_t n = 0;
    for (const auto& layer : loc_) n = std::max(n, layer->output_size());
    return n;
  }

  std::span<const ops::Tensor> LocParams(std::span<const ops::Tensor> params, size_t i) const {
    return params.subspan(first_variable_[i], loc_[i]->variables().size());
  }

  absl::Status CheckOperands(const ops::Tensor& x, const ops::Tensor& y,
                             const LayerContext& ctx) const {
    const int64_t batch = x.rows();
    if (x.cols() != in_.size() || y.rows() != batch || y.cols() != out_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": input ", x.shape().ToString(), " and output ", y.shape().ToString(),
          " do not fit ", in_.ToString(), " -> ", out_.ToString(), " images"));
    }
    if (ctx.saved == nullptr || ctx.saved->num_elements() < saved_elements(batch)) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": needs ", saved_elements(batch),
                                                     " floats of saved scratch for ", batch,
                                                     " examples"));
    }
    if (ctx.temp == nullptr || ctx.temp->num_elements() < temp_elements(batch)) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": needs ", temp_elements(batch),
                                                     " floats of temp scratch for ", batch,
                                                     " examples"));
    }
    return absl::OkStatus();
  }

  Saved CarveSaved(const LayerContext& ctx, int64_t batch) const {
    Carver c(ctx.saved);
    Saved s;
    for (const auto& layer : loc_) s.acts.push_back(c.Take({batch, layer->output_size()}));
    s.theta = c.Take({batch, 2, 3});
    s.grid = c.Take({batch, out_.height, out_.width, 2});
    s.identity = c.Take({6});
    for (const auto& layer : loc_) s.loc_saved.push_back(c.TakeFlat(layer->saved_elements(batch)));
    return s;
  }

  // Localisation layer i's context: ours, with its saved scratch and the shared loc temp.
  // `loc_temp` is a member of the caller's frame, so the pointers stay valid for the call.
  static LayerContext LocContext(const LayerContext& ctx, Saved& s, size_t i,
                                 ops::Tensor& loc_temp) {
    LayerContext c = ctx;
    c.saved = s.loc_saved[i].empty() ? nullptr : &s.loc_saved[i];
    c.temp = loc_temp.empty() ? nullptr : &loc_temp;
    return c;
  }

  std::string name_;
  ImageShape in_, out_;
  std::vector<std::unique_ptr<Layer>> loc_;  // the localisation body, then "<name>/theta"
  std::vector<VariableSpec> variables_;
  std::vector<size_t> first_variable_;  // index into variables_ of loc_[i]'s first variable
};

absl::Status CheckImageShape(const std::string& name, const char* what, const ImageShape& s) {
  if (s.height <= 0 || s.width <= 0 || s.channels <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", what, " image ", s.ToString(), " must have positive dimensions"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> MakeSpatialTransformer(
    std::string name, ImageShape input, std::vector<std::unique_ptr<Layer>> localisation,
    ImageShape output) {
  FULCRUM_RETURN_IF_ERROR(CheckImageShape(name, "input", input));
  FULCRUM_RETURN_IF_ERROR(CheckImageShape(name, "output", output));
  if (output.channels != input.channels) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": output image ", output.ToString(),
                                                   " must have the input's ", input.channels,
                                                   " channels"));
  }
  const std::string prefix = absl::StrCat(name, "/");
  int64_t size = input.size();
  for (const auto& layer : localisation) {
    if (layer == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": a localisation layer is null"));
    }
    if (!absl::StartsWith(layer->name(), prefix)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": localisation layer ", layer->name(),
                                                     " must be named \"", prefix, "...\""));
    }
    if (layer->input_size() != size) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": localisation layer ", layer->name(),
                                                     " takes ", layer->input_size(),
                                                     " values per example, it is given ", size));
    }
    size = layer->output_size();
  }
  DenseOptions theta;
  theta.kernel_init = ops::Initializer::Zeros();
  theta.bias_init = ops::Initializer::Zeros();
  localisation.push_back(MakeDense(absl::StrCat(prefix, "theta"), size, 6, theta));
  return std::make_unique<SpatialTransformerLayer>(std::move(name), input, output,
                                                   std::move(localisation));
}

namespace {

using ops::Padding;

ConvOptions Conv(int64_t k, int64_t filters) {
  ConvOptions o;
  o.kernel_h = k;
  o.kernel_w = k;
  o.filters = filters;
  o.padding = Padding::kSame;
  o.activation = Activation::kRelu;
  return o;
}

ops::Pool2DParams Pool2() { return ops::Pool2DParams{}; }  // 2x2, stride 2, VALID

DenseOptions Relu() {
  DenseOptions o;
  o.activation = Activation::kRelu;
  return o;
}

// The localisation body of the PyTorch STN tutorial's MNIST network (after the paper's CNN
// localisation net): conv7x7x8-pool2-conv5x5x10-pool2-fc32, ReLU, SAME convs so any image of at
// least 4x4 fits.
absl::StatusOr<std::vector<std::unique_ptr<Layer>>> Localisation(const std::string& st,
                                                                 ImageShape input, double w) {
  std::vector<std::unique_ptr<Layer>> layers;
  ImageShape image = input;
  const std::pair<int64_t, int64_t> convs[2] = {{7, ScaledWidth(8, w)}, {5, ScaledWidth(10, w)}};
  for (int i = 0; i < 2; ++i) {
    const std::string conv = absl::StrCat(st, "/loc_conv", i + 1);
    const ConvOptions options = Conv(convs[i].first, convs[i].second);
    FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<Layer> c, MakeConv2D(conv, image, options));
    FULCRUM_ASSIGN_OR_RETURN(image, ConvOutputImage(conv, image, options));
    layers.push_back(std::move(c));
    const std::string pool = absl::StrCat(st, "/loc_pool", i + 1);
    FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<Layer> p, MakeMaxPool(pool, image, Pool2()));
    FULCRUM_ASSIGN_OR_RETURN(image, PoolOutputImage(pool, image, Pool2()));
    layers.push_back(std::move(p));
  }
  layers.push_back(
      MakeDense(absl::StrCat(st, "/loc_fc"), image.size(), ScaledWidth(32, w), Relu()));
  return layers;
}

// Spatial transformer -> conv5x5x32-pool2-conv5x5x64-pool2-fc1024-fc(classes): the ST-CNN of
// Jaderberg et al. (localisation net before a classification CNN) with TensorFlow's MNIST
// layers-tutorial CNN (mnist_cnn, without its dropout) as the classifier.
// `deep` (model `stn_deep`, the HKUST study's "model size" by depth): the classifier after the
// transformer gets one more conv(+ReLU)+maxpool block, conv5x5x128-pool2, between pool2 and
// dense1, as a deeper STN adds its extra conv + pool layers in the common TF STN examples; the
// localisation net stays as in `stn`. On 28x28 images the third VALID pool leaves 3x3x128 for
// dense1 (stn: 7x7x64), so stn_deep computes more per example and has fewer parameters.
absl::StatusOr<std::unique_ptr<Model>> BuildStn(const ModelConfig& c, bool deep) {
  const std::string model = deep ? "stn_deep" : "stn";
  FULCRUM_ASSIGN_OR_RETURN(ImageShape input, InputImage(model, c));
  const int64_t min_side = deep ? 8 : 4;
  if (input.height < min_side || input.width < min_side) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model, "' needs images of at least ",
                                                   min_side, "x", min_side, " (", deep ? 3 : 2,
                                                   " 2x2 pools), got ", input.ToString()));
  }
  const double w = c.width;
  FULCRUM_ASSIGN_OR_RETURN(auto loc, Localisation("st", input, w));
  NetBuilder b(model, input);
  b.Add(MakeSpatialTransformer("st", input, std::move(loc), input), input)
      .Conv("conv1", Conv(5, ScaledWidth(32, w)))
      .MaxPool("pool1", Pool2())
      .Conv("conv2", Conv(5, ScaledWidth(64, w)))
      .MaxPool("pool2", Pool2());
  if (deep) b.Conv("conv3", Conv(5, ScaledWidth(128, w))).MaxPool("pool3", Pool2());
  return b.Dense("dense1", ScaledWidth(1024, w), Relu())
      .Dense("logits", c.num_classes, DenseOptions{})
      .Build(LossKind::kSoftmaxCrossEntropy);
}

}  // namespace

absl::Status RegisterStn(ModelRegistry* registry) {
  FULCRUM_RETURN_IF_ERROR(registry->Register(
      "stn",
      "spatial transformer (loc conv7x7x8-pool-conv5x5x10-pool-fc32-fc6, identity start; affine "
      "grid, bilinear sampler) -> conv5x5x32-pool-conv5x5x64-pool-fc1024-fc (Jaderberg et al.)",
      [](const ModelConfig& c) { return BuildStn(c, /*deep=*/false); }));
  return registry->Register(
      "stn_deep",
      "stn with one more conv+pool block in its classifier: spatial transformer (as stn) -> "
      "conv5x5x32-pool-conv5x5x64-pool-conv5x5x128-pool-fc1024-fc (the HKUST study's deeper "
      "STN)",
      [](const ModelConfig& c) { return BuildStn(c, /*deep=*/true); });
}

}  // namespace fulcrum::models
