// worker: in-graph replication inside one worker (Wang et al. §3.4; TensorFlow's multi-tower
// training): --devices=cpu:0,cpu:1 builds one replica of the model per device, splits every
// batch into contiguous slices (sizes differ by at most one example), computes each slice's
// gradients on its replica at the same variable values, in parallel, and averages them
// weighted by slice size, so the result is the full batch's mean-loss gradient; the loop then
// applies or pushes it once. A CPU "device" is a replica with its own share of --threads
// (threads / devices, at least one), not a pinned core. A GPU device is a replica whose model
// runs on the CUDA backend (ops/cuda/cuda_backend.h) of that GPU; builds without CUDA, machines
// without a usable GPU and GPU indices past the last are refused (exit 2 naming the flag).
// Thread-safety: one thread calls ComputeGradients at a time; the replicas run on the set's own
// threads during the call.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/dataset_types.h"
#include "models/model.h"
#include "ops/backend.h"
#include "ops/cpu/thread_pool.h"
#include "ops/device.h"
#include "ops/tensor.h"
#include "runtime/config/flags.h"

namespace fulcrum::worker {

// The devices the worker computes on: --devices, or {--device} when empty. InvalidArgument
// naming the flag for a GPU this build or machine cannot run on (no CUDA backend built, no
// usable GPU, an index past the last GPU), for more than 64 devices, or for a batch smaller
// than the number of devices.
absl::StatusOr<std::vector<ops::DeviceId>> ComputeDevices(const runtime::TrainingOptions& t);

// "cpu:0", "cpu:1": the devices of --devices (or --device) by name, for summaries.
std::vector<std::string> DeviceNames(const runtime::TrainingOptions& t);

// What a replica's device holds beside its model (Replicas::Create's memory check).
struct DeviceUse {
  bool resident = false;   // the optimizer's slots live there too (single mode's store)
  int64_t eval_batch = 0;  // the largest evaluation batch it runs (0: none, a cluster worker)
};

class Replicas {
 public:
  // One replica per device of ComputeDevices(t), each built like BuildModel (replica 0 is
  // seeded exactly as a one-device worker, the others from the same seed and their index).
  // A replica on a device (a GPU, the arena) must fit its free memory: InvalidArgument naming
  // the flag, the device and the bytes needed against the bytes free otherwise.
  static absl::StatusOr<std::unique_ptr<Replicas>> Create(const runtime::TrainingOptions& t,
                                                          const data::Dataset& train,
                                                          int worker_index,
                                                          DeviceUse use = DeviceUse());

  // Replica 0: the variable list, evaluation.
  models::Model& model() { return *replicas_[0].model; }
  const std::vector<ops::DeviceId>& devices() const { return devices_; }
  // Replica 0's thread pool: what the loop gathers batches with.
  ops::ThreadPool* pool() { return replicas_[0].pool.get(); }
  // With one device that is not the CPU (a GPU, the arena): its backend, where a
  // device-resident store keeps the variables (worker/device_variable_store.h); else null.
  ops::Backend* device_backend() {
    return replicas_.size() == 1 ? replicas_[0].backend.get() : nullptr;
  }
  // Every replica's copies between the host and its device, and its device allocations.
  ops::TransferCounters transfer_counters() const;

  // As models::Model::ComputeGradients for the whole batch: the mean loss (plus weight decay)
  // and its gradient into grads. forward_ms receives the slowest replica's forward time.
  // `hooks` (may be null): with one device they go to its model; with several, every
  // variable's values_needed and forward_done (with loss 0: not known yet) come before any
  // replica starts and gradients_ready is not called (the caller sends every gradient after
  // the call: no overlap within the pass).
  absl::StatusOr<float> ComputeGradients(const ops::Tensor& inputs, std::span<const int32_t> labels,
                                         std::span<const ops::Tensor> values,
                                         std::span<ops::Tensor> grads, double* forward_ms,
                                         const models::LayerHooks* hooks = nullptr);

 private:
  struct Replica {
    std::unique_ptr<ops::ThreadPool> pool;
    std::unique_ptr<ops::Backend> backend;  // GPU replicas: the model's backend (else null)
    std::unique_ptr<models::Model> model;
    std::vector<ops::Tensor> grads;  // replicas 1..: their own gradient buffers
    absl::StatusOr<float> loss = 0.0f;
    double forward_ms = 0.0;
  };

  Replicas() = default;

  std::vector<ops::DeviceId> devices_;
  std::vector<Replica> replicas_;
  std::unique_ptr<ops::ThreadPool> runner_;  // one thread per replica (the caller is one)
};

}  // namespace fulcrum::worker
