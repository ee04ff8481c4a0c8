// models: a model is a stack of layers and a loss. It declares its variables (what the PS
// shards) and, given the variables' values and a batch, computes the mean loss and the
// gradient of every variable. It keeps per-batch-size scratch buffers, so one Model instance
// must be used by one thread at a time (each worker thread builds its own).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/layer.h"
#include "ops/backend.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/tensor.h"

namespace fulcrum::models {

enum class LossKind {
  kSoftmaxCrossEntropy,  // classification: logits vs integer labels; accuracy is defined
  kReconstructionMse,    // autoencoder: mean squared error of the output against the input
};

struct EvalResult {
  double loss_sum = 0.0;  // sum over examples of the per-example mean loss
  int64_t correct = 0;    // classification only
  int64_t examples = 0;
};

// What ComputeGradients calls between layers, so that a caller can move variables while the
// layers compute (worker/train_loop.h, --overlap): every member may be empty. Ranges are of
// variables() indices; each layer's variables are one range.
struct LayerHooks {
  // Before a layer's forward reads the values of variables [first, first + count): may block
  // until they are in. An error ends the call with it.
  std::function<absl::Status(size_t first, size_t count)> values_needed;
  // After the forward pass and the loss (given without weight decay), before the backward
  // pass; not part of forward_ms. An error ends the call with it, before any gradient is
  // written.
  std::function<absl::Status(float loss)> forward_done;
  // During the backward pass, last layer first: the gradients of variables [first,
  // first + count) are final (weight decay added; on a device, copied to the host) and are
  // not written again by this call; the backward pass reads those variables' values no more.
  std::function<void(size_t first, size_t count)> gradients_ready;
};

class Model {
 public:
  Model(std::string name, std::vector<std::unique_ptr<Layer>> layers, LossKind loss);
  // The model after checking that it has layers, that each layer's input is the previous
  // layer's output and that variable names are unique: InvalidArgument naming the layer.
  static absl::StatusOr<std::unique_ptr<Model>> Make(std::string name,
                                                     std::vector<std::unique_ptr<Layer>> layers,
                                                     LossKind loss);

  const std::string& name() const { return name_; }
  LossKind loss_kind() const { return loss_; }
  bool has_accuracy() const { return loss_ == LossKind::kSoftmaxCrossEntropy; }
  // Every variable of every layer, in layer order: the order of values and gradients below.
  const std::vector<VariableSpec>& variables() const { return variables_; }
  int64_t input_size() const { return input_size_; }
  int64_t output_size() const;
  int64_t num_parameters() const;
  // Device memory a run on a non-CPU backend needs: every variable's value and gradient and
  // `slots` optimizer slots each (a device-resident store), and the workspace (batch,
  // activations, their gradients, saved tensors, scratch) of each batch size in `batches`.
  int64_t DeviceBytes(std::span<const int64_t> batches, size_t slots) const;
  // Threads the CPU backend's kernels may use (not owned; null = the calling thread only).
  void set_thread_pool(ops::ThreadPool* pool) { cpu_.set_pool(pool); }
  // The backend the layers run on (not owned; null = the model's own CPU backend). With a
  // GPU backend, ComputeGradients and Evaluate copy the batch and the variable values to the
  // device, run every layer and the loss there, and copy only the gradients back: activations,
  // scratch and the device copies of the variables stay on the device between calls. Values
  // and gradients that already live on the backend's device (a device-resident store,
  // worker/device_variable_store.h) are used in place: only the batch goes in and the loss
  // (and the weight-decay sums) come out.
  void set_backend(ops::Backend* backend);
  ops::Backend& backend() { return backend_ != nullptr ? *backend_ : cpu_; }
  // Seed of the random layers (dropout): the k-th ComputeGradients call after set_seed draws
  // from (seed, k), so setting the same seed again replays the same masks. Give each worker
  // its own (the worker mixes in its task index).
  void set_seed(uint64_t seed) {
    seed_ = seed;
    steps_ = 0;
  }
  // L2 weight decay: unset = each variable's declared weight_decay; set = this coefficient on
  // every kernel and none on the rest (--weight_decay).
  void set_weight_decay_override(std::optional<double> weight_decay);
  // The CPU backend's convolution algorithm (--conv_algo), before the first step.
  void set_conv_algo(ops::ConvAlgo algo) { cpu_.set_conv_algo(algo); }
  // The weight decay in force for variable i.
  float weight_decay(size_t i) const { return weight_decay_[i]; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }

  // Mean loss over the batch (plus the L2 weight-decay terms); writes d(that)/d(variable i)
  // into grads[i]. Random layers are in training mode.
  // inputs: [batch, input_size]; labels: batch entries (ignored for reconstruction);
  // values and grads: one tensor per variables() entry, shaped as declared.
  // `forward_ms` (optional) receives the time of the forward pass and the loss (the hooks'
  // values_needed included); the rest of the call is the backward pass. `hooks` (optional,
  // not owned) are called as LayerHooks says; the gradients and the loss are bit for bit the
  // same with or without them.
  absl::StatusOr<float> ComputeGradients(const ops::Tensor& inputs, std::span<const int32_t> labels,
                                         std::span<const ops::Tensor> values,
                                         std::span<ops::Tensor> grads, double* forward_ms = nullptr,
                                         const LayerHooks* hooks = nullptr);

  // Forward only, random layers in evaluation mode: loss (without weight decay) and
  // (classification) correct predictions over the batch.
  absl::StatusOr<EvalResult> Evaluate(const ops::Tensor& inputs, std::span<const int32_t> labels,
                                      std::span<const ops::Tensor> values);

 private:
  struct Workspace {
    ops::Tensor inputs;                    // off-CPU backends: the batch on the device
    std::vector<ops::Tensor> activations;  // output of layer i, [batch, out_i]
    std::vector<ops::Tensor> deltas;       // dLoss/d(output of layer i)
    std::vector<ops::Tensor> saved;        // layer i's LayerContext::saved (may be empty)
    ops::Tensor temp;                      // every layer's LayerContext::temp (may be empty)
  };
  LayerContext ContextFor(Workspace& ws, size_t layer, bool training);
  // Adds the weight-decay terms of variables [first, first + count) to grads; writes what each
  // adds to the loss into decay_terms[i].
  absl::Status AddWeightDecay(std::span<const ops::Tensor> values, std::span<ops::Tensor> grads,
                              size_t first, size_t count);
  absl::Status CheckOperands(const ops::Tensor& inputs, std::span<const int32_t> labels,
                             std::span<const ops::Tensor> values) const;
  // Sets resident_: off the CPU, whether the caller's values (and gradients) live on the
  // backend's device; InvalidArgument naming the variable when they are mixed.
  absl::Status SetResident(std::span<const ops::Tensor> values, std::span<const ops::Tensor> grads);
  absl::StatusOr<Workspace*> WorkspaceFor(int64_t batch);
  // The batch and the values as the backend sees them: the callers' tensors on the CPU, device
  // copies otherwise (copied in here).
  absl::StatusOr<const ops::Tensor*> DeviceInputs(const ops::Tensor& flat_inputs, Workspace& ws);
  // Off-CPU backends allocate the device copies here; copying in is per layer (LayerInputs).
  absl::StatusOr<std::span<const ops::Tensor>> DeviceValues(std::span<const ops::Tensor> values);
  // Layer i's values as the backend sees them, once hooks->values_needed let them be read:
  // off the CPU, copied to the device here.
  absl::StatusOr<std::span<const ops::Tensor>> LayerInputs(std::span<const ops::Tensor> values,
                                                           std::span<const ops::Tensor> device,
                                                           size_t i, const LayerHooks* hooks);
  // Layer i's backward, its weight decay and (off the CPU) its gradients' copy to the host.
  absl::Status BackwardLayer(size_t i, const ops::Tensor& x0, std::span<const ops::Tensor> v,
                             std::span<ops::Tensor> g, std::span<ops::Tensor> grads, Workspace& ws);
  bool on_cpu() { return backend().device() == ops::Device::kCpu; }
  absl::Status Forward(const ops::Tensor& inputs, std::span<const ops::Tensor> values,
                       std::span<const ops::Tensor> device_values, Workspace& ws, bool training,
                       const LayerHooks* hooks);
  std::span<const ops::Tensor> LayerValues(std::span<const ops::Tensor> values, size_t i) const;

  std::string name_;
  std::vector<std::unique_ptr<Layer>> layers_;
  LossKind loss_;
  std::vector<VariableSpec> variables_;
  std::vector<size_t> first_variable_;  // index into variables_ of each layer's first variable
  int64_t input_size_ = 0;
  std::map<int64_t, Workspace> workspaces_;  // by batch size; training and eval sizes
  ops::CpuBackend cpu_;
  ops::Backend* backend_ = nullptr;         // not owned; null = cpu_
  std::vector<ops::Tensor> device_values_;  // off-CPU backends: the variables on the device
  std::vector<ops::Tensor> device_grads_;   // and their gradients
  bool resident_ = false;  // this call's values and gradients live on the backend's device
  uint64_t seed_ = 1;
  uint64_t steps_ = 0;               // ComputeGradients calls so far: the random layers' stream
  std::vector<float> weight_decay_;  // per variable, in force
  std::vector<double> decay_terms_;  // per variable: its weight decay's part of the loss
};

}  // namespace fulcrum::models
