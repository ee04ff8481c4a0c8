#include "worker/local_variable_store.h"

#include <utility>

#include "base/random.h"
#include "base/status_macros.h"
#include "ops/initializer.h"

namespace fulcrum::worker {

absl::StatusOr<LocalVariableStore> LocalVariableStore::Create(
    std::span<const models::VariableSpec> variables, const ops::OptimizerConfig& optimizer,
    uint64_t seed) {
  LocalVariableStore store(optimizer);
  const size_t num_slots = ops::SlotNames(optimizer.kind).size();
  for (const models::VariableSpec& spec : variables) {
    ops::Tensor value = ops::Tensor::Zeros(spec.shape);
    FULCRUM_RETURN_IF_ERROR(
        ops::Initialize(spec.initializer, VariableSeed(seed, spec.name), &value));
    store.values_.push_back(std::move(value));
    store.grads_.push_back(ops::Tensor::Zeros(spec.shape));
    std::vector<ops::Tensor> slots;
    for (size_t s = 0; s < num_slots; ++s) {
      slots.push_back(
          ops::Tensor::Filled(spec.shape, ops::SlotInitialValue(optimizer, static_cast<int>(s))));
    }
    store.slots_.push_back(std::move(slots));
  }
  return store;
}

absl::StatusOr<absl::Duration> LocalVariableStore::Start() { return absl::ZeroDuration(); }

absl::StatusOr<ApplyResult> LocalVariableStore::Apply() {
  const int64_t step = global_step_ + 1;  // the optimizer counts steps from 1 (Adam's bias)
  for (size_t i = 0; i < values_.size(); ++i) {
    FULCRUM_RETURN_IF_ERROR(
        ops::ApplyGradient(optimizer_, step, grads_[i], &values_[i], slots_[i], 1.0f, pool_));
  }
  global_step_ = step;
  return ApplyResult{};
}

}  // namespace fulcrum::worker
