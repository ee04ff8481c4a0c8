// worker: LocalVariableStore, the variable store of single mode: the variables and their
// optimizer slots live in this process, initialised from the run's seed exactly as the PS
// tasks initialise them, and each Apply runs the optimizer on them (ops::ApplyGradient).
// Thread-safety: one call at a time (the training loop's thread).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/layer.h"
#include "ops/optimizer.h"
#include "ops/tensor.h"
#include "worker/variable_store.h"

namespace fulcrum::worker {

class LocalVariableStore final : public VariableStore {
 public:
  // One variable per spec, initialised by its initializer from VariableSeed(seed, name); the
  // optimizer's slots start at their initial values. Errors of an initializer pass through.
  static absl::StatusOr<LocalVariableStore> Create(std::span<const models::VariableSpec> variables,
                                                   const ops::OptimizerConfig& optimizer,
                                                   uint64_t seed);

  // Nothing to read: the values are here. Returns zero.
  absl::StatusOr<absl::Duration> Start() override;
  // Applies the optimizer to every variable as step global_step() + 1, each large variable
  // split over the pool's threads when set_pool gave one.
  absl::StatusOr<ApplyResult> Apply() override;
  // The process's compute threads (not owned; must outlive the store), or nullptr.
  void set_pool(ops::ThreadPool* pool) { pool_ = pool; }

  std::span<const ops::Tensor> values() const override { return values_; }
  std::span<ops::Tensor> grads() override { return grads_; }
  // Variable i's optimizer slots, in SlotNames order.
  std::span<const ops::Tensor> slots(size_t i) const { return slots_[i]; }
  int64_t global_step() const override { return global_step_; }
  std::string StopReason() const override { return ""; }

 private:
  explicit LocalVariableStore(const ops::OptimizerConfig& optimizer) : optimizer_(optimizer) {}

  ops::OptimizerConfig optimizer_;
  std::vector<ops::Tensor> values_;
  std::vector<ops::Tensor> grads_;
  std::vector<std::vector<ops::Tensor>> slots_;  // per variable, in SlotNames order
  int64_t global_step_ = 0;
  ops::ThreadPool* pool_ = nullptr;
};

}  // namespace fulcrum::worker
