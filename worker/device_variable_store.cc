#include "worker/device_variable_store.h"

#include <utility>

#include "base/status_macros.h"
#include "worker/local_variable_store.h"

namespace fulcrum::worker {
namespace {

// A device copy of `host`.
absl::StatusOr<ops::Tensor> Upload(ops::Backend& backend, const ops::Tensor& host) {
  FULCRUM_ASSIGN_OR_RETURN(ops::Tensor device, backend.Allocate(host.shape()));
  FULCRUM_RETURN_IF_ERROR(backend.CopyFromHost(host, &device));
  return device;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceVariableStore>> DeviceVariableStore::Create(
    std::span<const models::VariableSpec> variables, const ops::OptimizerConfig& optimizer,
    uint64_t seed, ops::Backend* backend) {
  // The host store's initial state, so both modes start from the same bits.
  FULCRUM_ASSIGN_OR_RETURN(LocalVariableStore host,
                           LocalVariableStore::Create(variables, optimizer, seed));
  std::unique_ptr<DeviceVariableStore> store(new DeviceVariableStore(optimizer, backend));
  for (size_t i = 0; i < variables.size(); ++i) {
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor value, Upload(*backend, host.values()[i]));
    FULCRUM_ASSIGN_OR_RETURN(ops::Tensor grad, backend->Allocate(variables[i].shape));
    store->values_.push_back(std::move(value));
    store->grads_.push_back(std::move(grad));
    std::vector<ops::Tensor> slots;
    for (const ops::Tensor& slot : host.slots(i)) {
      FULCRUM_ASSIGN_OR_RETURN(ops::Tensor s, Upload(*backend, slot));
      slots.push_back(std::move(s));
    }
    store->slots_.push_back(std::move(slots));
  }
  return store;
}

absl::StatusOr<ApplyResult> DeviceVariableStore::Apply() {
  const int64_t step = global_step_ + 1;  // the optimizer counts steps from 1 (Adam's bias)
  for (size_t i = 0; i < values_.size(); ++i) {
    FULCRUM_RETURN_IF_ERROR(
        backend_->ApplyGradient(optimizer_, step, grads_[i], &values_[i], slots_[i], 1.0f));
  }
  global_step_ = step;
  return ApplyResult{};
}

absl::StatusOr<std::vector<ops::Tensor>> DeviceVariableStore::HostValues() const {
  std::vector<ops::Tensor> host;
  for (const ops::Tensor& value : values_) {
    ops::Tensor h = ops::Tensor::Zeros(value.shape());
    FULCRUM_RETURN_IF_ERROR(backend_->CopyToHost(value, &h));
    host.push_back(std::move(h));
  }
  return host;
}

}  // namespace fulcrum::worker
