// worker: DeviceVariableStore, single mode's variable store on a device (a GPU, or the arena
// of ops/arena_backend.h): the variables, their gradients and the optimizer's slots live in
// the backend's memory from the start to the end of the run, and each Apply runs the
// optimizer there (ops::Backend::ApplyGradient: the five optimizers, learning-rate decay; the
// model adds L2 weight decay on the device before). The model reads the values and writes the
// gradients in place (models/model.h), so a step moves only its batch in and a few scalars
// (the loss, weight-decay sums) out. Initialised exactly as LocalVariableStore (on the host,
// from the run's seed), then copied once; HostValues copies them back (evaluation elsewhere,
// a test). Thread-safety: one call at a time (the training loop's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/layer.h"
#include "ops/backend.h"
#include "ops/optimizer.h"
#include "ops/tensor.h"
#include "worker/variable_store.h"

namespace fulcrum::worker {

class DeviceVariableStore final : public VariableStore {
 public:
  // `backend` (not owned, must outlive the store) is the model's; its device holds everything.
  static absl::StatusOr<std::unique_ptr<DeviceVariableStore>> Create(
      std::span<const models::VariableSpec> variables, const ops::OptimizerConfig& optimizer,
      uint64_t seed, ops::Backend* backend);

  absl::StatusOr<absl::Duration> Start() override { return absl::ZeroDuration(); }
  // Applies the optimizer to every variable on the device as step global_step() + 1.
  absl::StatusOr<ApplyResult> Apply() override;

  std::span<const ops::Tensor> values() const override { return values_; }
  std::span<ops::Tensor> grads() override { return grads_; }
  int64_t global_step() const override { return global_step_; }
  std::string StopReason() const override { return ""; }

  // The values copied to the host (new CPU tensors).
  absl::StatusOr<std::vector<ops::Tensor>> HostValues() const;

 private:
  DeviceVariableStore(const ops::OptimizerConfig& optimizer, ops::Backend* backend)
      : optimizer_(optimizer), backend_(backend) {}

  ops::OptimizerConfig optimizer_;
  ops::Backend* backend_;
  std::vector<ops::Tensor> values_;
  std::vector<ops::Tensor> grads_;
  std::vector<std::vector<ops::Tensor>> slots_;  // per variable, in SlotNames order
  int64_t global_step_ = 0;
};

}  // namespace fulcrum::worker
