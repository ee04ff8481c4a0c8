#include "models/model.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/cpu/kernels.h"

namespace fulcrum::models {

Model::Model(std::string name, std::vector<std::unique_ptr<Layer>> layers, LossKind loss)
    : name_(std::move(name)), layers_(std::move(layers)), loss_(loss) {
  for (const auto& layer : layers_) {
    first_variable_.push_back(variables_.size());
    for (const auto& spec : layer->variables()) variables_.push_back(spec);
  }
  // A layer's first variable is its [in, out] kernel: the first layer's gives the input size.
  input_size_ = variables_.empty() ? 0 : variables_.front().shape.dim(0);
}

int64_t Model::output_size() const { return layers_.back()->output_size(); }

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& spec : variables_) n += spec.shape.num_elements();
  return n;
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

Model::Workspace& Model::WorkspaceFor(int64_t batch) {
  auto [it, inserted] = workspaces_.try_emplace(batch);
  if (inserted) {
    for (const auto& layer : layers_) {
      it->second.activations.push_back(ops::Tensor::Zeros({batch, layer->output_size()}));
      it->second.deltas.push_back(ops::Tensor::Zeros({batch, layer->output_size()}));
    }
  }
  return it->second;
}

absl::Status Model::Forward(const ops::Tensor& inputs, std::span<const ops::Tensor> values,
                            Workspace& ws) const {
  const ops::Tensor* x = &inputs;
  for (size_t i = 0; i < layers_.size(); ++i) {
    FULCRUM_RETURN_IF_ERROR(
        layers_[i]->Forward(LayerValues(values, i), *x, &ws.activations[i], pool_));
    x = &ws.activations[i];
  }
  return absl::OkStatus();
}

absl::StatusOr<float> Model::ComputeGradients(const ops::Tensor& inputs,
                                              std::span<const int32_t> labels,
                                              std::span<const ops::Tensor> values,
                                              std::span<ops::Tensor> grads, double* forward_ms) {
  const auto start = std::chrono::steady_clock::now();
  FULCRUM_RETURN_IF_ERROR(CheckOperands(inputs, labels, values));
  if (grads.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": got ", grads.size(), " gradient tensors for ", values.size(), " variables"));
  }
  // A batch given as [batch, c, h, w] is seen as [batch, c*h*w] by the dense layers.
  FULCRUM_ASSIGN_OR_RETURN(const ops::Tensor flat_inputs,
                           inputs.Reshaped({inputs.rows(), inputs.cols()}));
  Workspace& ws = WorkspaceFor(inputs.rows());
  FULCRUM_RETURN_IF_ERROR(Forward(flat_inputs, values, ws));
  float loss = 0.0f;
  if (loss_ == LossKind::kSoftmaxCrossEntropy) {
    FULCRUM_ASSIGN_OR_RETURN(
        loss, ops::SoftmaxCrossEntropy(ws.activations.back(), labels, &ws.deltas.back()));
  } else {
    FULCRUM_ASSIGN_OR_RETURN(
        loss, ops::MeanSquaredError(ws.activations.back(), flat_inputs, &ws.deltas.back()));
  }
  if (forward_ms != nullptr) {
    *forward_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    const ops::Tensor& x = i == 0 ? flat_inputs : ws.activations[i - 1];
    ops::Tensor* dx = i == 0 ? nullptr : &ws.deltas[i - 1];
    auto dparams = grads.subspan(first_variable_[i], layers_[i]->variables().size());
    FULCRUM_RETURN_IF_ERROR(layers_[i]->Backward(LayerValues(values, i), x, ws.activations[i],
                                                 &ws.deltas[i], dparams, dx, pool_));
  }
  return loss;
}

absl::StatusOr<EvalResult> Model::Evaluate(const ops::Tensor& inputs,
                                           std::span<const int32_t> labels,
                                           std::span<const ops::Tensor> values) {
  FULCRUM_RETURN_IF_ERROR(CheckOperands(inputs, labels, values));
  FULCRUM_ASSIGN_OR_RETURN(const ops::Tensor flat_inputs,
                           inputs.Reshaped({inputs.rows(), inputs.cols()}));
  Workspace& ws = WorkspaceFor(inputs.rows());
  FULCRUM_RETURN_IF_ERROR(Forward(flat_inputs, values, ws));
  EvalResult result;
  result.examples = inputs.rows();
  float mean = 0.0f;
  if (loss_ == LossKind::kSoftmaxCrossEntropy) {
    FULCRUM_ASSIGN_OR_RETURN(mean,
                             ops::SoftmaxCrossEntropy(ws.activations.back(), labels, nullptr));
    FULCRUM_ASSIGN_OR_RETURN(result.correct, ops::CountCorrect(ws.activations.back(), labels));
  } else {
    FULCRUM_ASSIGN_OR_RETURN(mean,
                             ops::MeanSquaredError(ws.activations.back(), flat_inputs, nullptr));
  }
  result.loss_sum = static_cast<double>(mean) * static_cast<double>(result.examples);
  return result;
}

}  // namespace fulcrum::models
