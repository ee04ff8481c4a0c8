#include "models/model.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/malloc.h"
#include "base/random.h"
#include "base/status_macros.h"

namespace fulcrum::models {

Model::Model(std::string name, std::vector<std::unique_ptr<Layer>> layers, LossKind loss)
    : name_(std::move(name)), layers_(std::move(layers)), loss_(loss) {
  for (const auto& layer : layers_) {
    first_variable_.push_back(variables_.size());
    for (const auto& spec : layer->variables()) variables_.push_back(spec);
  }
  input_size_ = layers_.empty() ? 0 : layers_.front()->input_size();
  set_weight_decay_override(std::nullopt);
}

absl::StatusOr<std::unique_ptr<Model>> Model::Make(std::string name,
                                                   std::vector<std::unique_ptr<Layer>> layers,
                                                   LossKind loss) {
  if (layers.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no layers"));
  std::set<std::string> seen;
  double parameters = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& layer = *layers[i];
    if (layer.input_size() <= 0 || layer.output_size() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": layer ", layer.name(),
                                                     " has input size ", layer.input_size(),
                                                     " and output size ", layer.output_size()));
    }
    if (i > 0 && layers[i - 1]->output_size() != layer.input_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": layer ", layer.name(), " takes ", layer.input_size(), " values per example but ",
          layers[i - 1]->name(), " gives ", layers[i - 1]->output_size()));
    }
    for (const VariableSpec& spec : layer.variables()) {
      if (!seen.insert(spec.name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": variable ", spec.name, " is declared twice"));
      }
      // Overflow-safe, before anything is allocated (--model_width=1e9 asks for this).
      FULCRUM_RETURN_IF_ERROR(
          ops::ValidateShape(spec.shape, absl::StrCat(name, ": variable ", spec.name)));
      parameters += static_cast<double>(spec.shape.num_elements());
    }
  }
  // A worker holds each variable's value and gradient at least; checked in double.
  FULCRUM_RETURN_IF_ERROR(CheckFitsInMemory(
      parameters * 2 * sizeof(float),
      absl::StrCat(name, ": ", parameters, " parameters (values and gradients)")));
  return std::make_unique<Model>(std::move(name), std::move(layers), loss);
}

void Model::set_weight_decay_override(std::optional<double> weight_decay) {
  weight_decay_.clear();
  for (const VariableSpec& spec : variables_) {
    if (!weight_decay.has_value()) {
      weight_decay_.push_back(spec.weight_decay);
    } else {
      weight_decay_.push_back(spec.is_kernel ? static_cast<float>(*weight_decay) : 0.0f);
    }
  }
}

int64_t Model::output_size() const { return layers_.back()->output_size(); }

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& spec : variables_) n += spec.shape.num_elements();
  return n;
}

int64_t Model::DeviceBytes(std::span<const int64_t> batches, size_t slots) const {
  int64_t floats = num_parameters() * static_cast<int64_t>(2 + slots);
  for (const int64_t batch : batches) {
    int64_t temp = 0;
    floats += batch * input_size_;
    for (const auto& layer : layers_) {
      floats += 2 * batch * layer->output_size() + layer->saved_elements(batch);
      temp = std::max(temp, layer->temp_elements(batch));
    }
    floats += temp;
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

std::span<const ops::Tensor> Model::LayerValues(std::span<const ops::Tensor> values,
                                                size_t i) const {
  return values.subspan(first_variable_[i], layers_[i]->variables().size());
}

absl::Status Model::CheckOperands(const ops::Tensor& inputs, std::span<const int32_t> labels,
                                  std::span<const ops::Tensor> values) const {
  if (values.size() != variables_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": got ", values.size(),
                                                   " variable values, the model declares ",
                                                   variables_.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!(values[i].shape() == variables_[i].shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": variable ", variables_[i].name, " has shape ", values[i].shape().ToString(),
          ", declared ", variables_[i].shape.ToString()));
    }
  }
  if (inputs.cols() != input_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": inputs ", inputs.shape().ToString(), " have ", inputs.cols(),
                     " values per example, the model takes ", input_size_));
  }
  if (has_accuracy() && static_cast<int64_t>(labels.size()) != inputs.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": ", labels.size(), " labels for ", inputs.rows(), " examples"));
  }
  return absl::OkStatus();
}

void Model::set_backend(ops::Backend* backend) {
  backend_ = backend;
  workspaces_.clear();
  device_values_.clear();
  device_grads_.clear();
}

absl::StatusOr<Model::Workspace*> Model::WorkspaceFor(int64_t batch) {
  if (auto it = workspaces_.find(batch); it != workspaces_.end()) return &it->second;
  ops::Backend& b = backend();
  Workspace ws;
  int64_t temp = 0;
  if (!on_cpu()) {
    FULCRUM_ASSIGN_OR_RETURN(ws.inputs, b.Allocate({batch, input_size_}));
  }
  for (const auto& layer : layers_) {
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor activation, b.Allocate({batch, layer->output_size()}));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor delta, b.Allocate({batch, layer->output_size()}));
    ws.activations.push_back(std::move(activation));
    ws.deltas.push_back(std::move(delta));
    const int64_t saved = layer->saved_elements(batch);
    if (saved > 0) {
      FULCRUM_ASSIGN_OR_RETURN(ops::Tensor t, b.Allocate({saved}));
      ws.saved.push_back(std::move(t));
    } else {
      ws.saved.emplace_back();
    }
    temp = std::max(temp, layer->temp_elements(batch));
  }
  if (temp > 0) {
    FULCRUM_ASSIGN_OR_RETURN(ws.temp, b.Allocate({temp}));
  }
  return &workspaces_.emplace(batch, std::move(ws)).first->second;
}

absl::StatusOr<const ops::Tensor*> Model::DeviceInputs(const ops::Tensor& flat_inputs,
                                                       Workspace& ws) {
  if (on_cpu()) return &flat_inputs;
  FULCRUM_RETURN_IF_ERROR(backend().CopyFromHost(flat_inputs, &ws.inputs));
  return &ws.inputs;
}

absl::Status Model::SetResident(std::span<const ops::Tensor> values,
                                std::span<const ops::Tensor> grads) {
  resident_ = !on_cpu() && !values.empty() && values[0].device() == backend().device();
  const ops::Device want = resident_ ? backend().device() : ops::Device::kCpu;
  const auto check = [&](std::span<const ops::Tensor> tensors, const char* what) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].device() != want) {
        return absl::InvalidArgumentError(absl::StrCat(
            name_, ": the ", what, " of ", variables_[i].name, " is in ",
            ops::DeviceName(tensors[i].device()), " memory, the first value in ",
            ops::DeviceName(values[0].device()), " memory (on ", backend().name(),
            " every value and gradient lives on the device or every one on the host)"));
      }
    }
    return absl::OkStatus();
  };
  FULCRUM_RETURN_IF_ERROR(check(values, "value"));
  return check(grads, "gradient");
}

absl::StatusOr<std::span<const ops::Tensor>> Model::DeviceValues(
    std::span<const ops::Tensor> values) {
  if (on_cpu() || resident_) return values;
  ops::Backend& b = backend();
  if (device_values_.empty()) {
    for (const VariableSpec& spec : variables_) {
      FULCRUM_ASSIGN_OR_RETURN(ops::Tensor v, b.Allocate(spec.shape));
      FULCRUM_ASSIGN_OR_RETURN(ops::Tensor g, b.Allocate(spec.shape));
      device_values_.push_back(std::move(v));
      device_grads_.push_back(std::move(g));
    }
  }
  return std::span<const ops::Tensor>(device_values_);
}

absl::StatusOr<std::span<const ops::Tensor>> Model::LayerInputs(std::span<const ops::Tensor> values,
                                                                std::span<const ops::Tensor> device,
                                                                size_t i, const LayerHooks* hooks) {
  const size_t first = first_variable_[i];
  const size_t count = layers_[i]->variables().size();
  if (count > 0 && hooks != nullptr && hooks->values_needed) {
    FULCRUM_RETURN_IF_ERROR(hooks->values_needed(first, count));
  }
  if (on_cpu() || resident_) return values.subspan(first, count);
  // Copied layer by layer, each once the hook let its values be read.
  for (size_t k = first; k < first + count; ++k) {
    FULCRUM_RETURN_IF_ERROR(backend().CopyFromHost(values[k], &device_values_[k]));
  }
  return device.subspan(first, count);
}

LayerContext Model::ContextFor(Workspace& ws, size_t layer, bool training) {
  LayerContext ctx;
  ctx.backend = &backend();
  ctx.training = training;
  ctx.seed = DeriveSeed(seed_, steps_);
  ctx.saved = ws.saved[layer].empty() ? nullptr : &ws.saved[layer];
  ctx.temp = ws.temp.empty() ? nullptr : &ws.temp;
  return ctx;
}

absl::Status Model::Forward(const ops::Tensor& inputs, std::span<const ops::Tensor> values,
                            std::span<const ops::Tensor> device_values, Workspace& ws,
                            bool training, const LayerHooks* hooks) {
  const ops::Tensor* x = &inputs;
  for (size_t i = 0; i < layers_.size(); ++i) {
    FULCRUM_ASSIGN_OR_RETURN(std::span<const ops::Tensor> params,
                             LayerInputs(values, device_values, i, hooks));
    FULCRUM_RETURN_IF_ERROR(
        layers_[i]->Forward(params, *x, &ws.activations[i], ContextFor(ws, i, training)));
    x = &ws.activations[i];
  }
  return absl::OkStatus();
}

absl::Status Model::AddWeightDecay(std::span<const ops::Tensor> values,
                                   std::span<ops::Tensor> grads, size_t first, size_t count) {
  for (size_t i = first; i < first + count; ++i) {
    const float wd = weight_decay_[i];
    decay_terms_[i] = 0.0;
    if (wd == 0.0f) continue;
    FULCRUM_ASSIGN_OR_RETURN(const double sum_sq,
                             backend().AddWeightDecay(wd, values[i], &grads[i]));
    decay_terms_[i] = 0.5 * wd * sum_sq;
  }
  return absl::OkStatus();
}

absl::Status Model::BackwardLayer(size_t i, const ops::Tensor& x0, std::span<const ops::Tensor> v,
                                  std::span<ops::Tensor> g, std::span<ops::Tensor> grads,
                                  Workspace& ws) {
  const size_t first = first_variable_[i];
  const size_t count = layers_[i]->variables().size();
  const ops::Tensor& x = i == 0 ? x0 : ws.activations[i - 1];
  ops::Tensor* dx = i == 0 ? nullptr : &ws.deltas[i - 1];
  FULCRUM_RETURN_IF_ERROR(layers_[i]->Backward(LayerValues(v, i), x, ws.activations[i],
                                               &ws.deltas[i], g.subspan(first, count), dx,
                                               ContextFor(ws, i, /*training=*/true)));
  // The decay goes in before the layer's gradients are handed over (a pusher sends them
  // next); each variable's term is its own, so the result is that of decaying all at the end.
  FULCRUM_RETURN_IF_ERROR(AddWeightDecay(v, g, first, count));
  if (!on_cpu() && !resident_) {
    for (size_t k = first; k < first + count; ++k) {
      FULCRUM_RETURN_IF_ERROR(backend().CopyToHost(device_grads_[k], &grads[k]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<float> Model::ComputeGradients(const ops::Tensor& inputs,
                                              std::span<const int32_t> labels,
                                              std::span<const ops::Tensor> values,
                                              std::span<ops::Tensor> grads, double* forward_ms,
                                              const LayerHooks* hooks) {
  const auto start = std::chrono::steady_clock::now();
  FULCRUM_RETURN_IF_ERROR(CheckOperands(inputs, labels, values));
  if (grads.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": got ", grads.size(), " gradient tensors for ", values.size(), " variables"));
  }
  // A batch given as [batch, c, h, w] is seen as [batch, c*h*w] by the dense layers.
  FULCRUM_ASSIGN_OR_RETURN(const ops::Tensor flat_inputs,
                           inputs.Reshaped({inputs.rows(), inputs.cols()}));
  FULCRUM_RETURN_IF_ERROR(SetResident(values, grads));
  FULCRUM_ASSIGN_OR_RETURN(Workspace * ws, WorkspaceFor(inputs.rows()));
  ops::Backend& b = backend();
  FULCRUM_ASSIGN_OR_RETURN(const ops::Tensor* x0, DeviceInputs(flat_inputs, *ws));
  FULCRUM_ASSIGN_OR_RETURN(std::span<const ops::Tensor> v, DeviceValues(values));
  std::span<ops::Tensor> g = on_cpu() || resident_ ? grads : std::span<ops::Tensor>(device_grads_);
  FULCRUM_RETURN_IF_ERROR(Forward(*x0, values, v, *ws, /*training=*/true, hooks));
  float loss = 0.0f;
  if (loss_ == LossKind::kSoftmaxCrossEntropy) {
    FULCRUM_ASSIGN_OR_RETURN(
        loss, b.SoftmaxCrossEntropy(ws->activations.back(), labels, &ws->deltas.back()));
  } else {
    FULCRUM_ASSIGN_OR_RETURN(loss,
                             b.MeanSquaredError(ws->activations.back(), *x0, &ws->deltas.back()));
  }
  if (forward_ms != nullptr) {
    *forward_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  if (hooks != nullptr && hooks->forward_done) FULCRUM_RETURN_IF_ERROR(hooks->forward_done(loss));
  decay_terms_.assign(variables_.size(), 0.0);
  for (size_t i = layers_.size(); i-- > 0;) {
    FULCRUM_RETURN_IF_ERROR(BackwardLayer(i, *x0, v, g, grads, *ws));
    const size_t count = layers_[i]->variables().size();
    if (count > 0 && hooks != nullptr && hooks->gradients_ready) {
      hooks->gradients_ready(first_variable_[i], count);
    }
  }
  ++steps_;
  // Summed in variable order, as one pass over the variables after the backward pass did.
  double decay = 0.0;
  for (size_t i = 0; i < variables_.size(); ++i) {
    if (weight_decay_[i] != 0.0f) decay += decay_terms_[i];
  }
  return static_cast<float>(loss + decay);
}

absl::StatusOr<EvalResult> Model::Evaluate(const ops::Tensor& inputs,
                                           std::span<const int32_t> labels,
                                           std::span<const ops::Tensor> values) {
  FULCRUM_RETURN_IF_ERROR(CheckOperands(inputs, labels, values));
  FULCRUM_ASSIGN_OR_RETURN(const ops::Tensor flat_inputs,
                           inputs.Reshaped({inputs.rows(), inputs.cols()}));
  FULCRUM_RETURN_IF_ERROR(SetResident(values, {}));
  FULCRUM_ASSIGN_OR_RETURN(Workspace * ws, WorkspaceFor(inputs.rows()));
  ops::Backend& b = backend();
  FULCRUM_ASSIGN_OR_RETURN(const ops::Tensor* x0, DeviceInputs(flat_inputs, *ws));
  FULCRUM_ASSIGN_OR_RETURN(std::span<const ops::Tensor> v, DeviceValues(values));
  FULCRUM_RETURN_IF_ERROR(Forward(*x0, values, v, *ws, /*training=*/false, nullptr));
  EvalResult result;
  result.examples = inputs.rows();
  float mean = 0.0f;
  if (loss_ == LossKind::kSoftmaxCrossEntropy) {
    FULCRUM_ASSIGN_OR_RETURN(mean, b.SoftmaxCrossEntropy(ws->activations.back(), labels, nullptr));
    FULCRUM_ASSIGN_OR_RETURN(result.correct, b.CountCorrect(ws->activations.back(), labels));
  } else {
    FULCRUM_ASSIGN_OR_RETURN(mean, b.MeanSquaredError(ws->activations.back(), *x0, nullptr));
  }
  result.loss_sum = static_cast<double>(mean) * static_cast<double>(result.examples);
  return result;
}

}  // namespace fulcrum::models
