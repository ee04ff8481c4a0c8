// ops/cuda: device discovery and device memory for Fulcrum tensors (Device::kCuda).
// Includes no CUDA header: device tensors are ordinary ops::Tensor handles whose storage is
// freed with cudaFree when the last handle goes away.
// Thread-safety: the functions keep no state of their own (the CUDA runtime is thread-safe);
// callers must not write a tensor that another thread reads. Memory is allocated on, and
// copies run on, the calling thread's current CUDA device.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/tensor.h"

namespace fulcrum::ops::cuda {

// Number of visible CUDA devices (always >= 1 when OK). When this machine cannot run CUDA
// code the status explains why and names the CUDA error, e.g. "no CUDA device:
// cudaGetDeviceCount returned cudaErrorNoDevice (...)": Unavailable when there is no
// device, FailedPrecondition when the driver is missing or too old, Internal otherwise.
absl::StatusOr<int> DeviceCount();

// True for the statuses DeviceCount returns when the machine has no usable GPU (as opposed
// to a failure on a machine that has one). Tests skip on these.
bool IsNoDeviceError(const absl::Status& status);

// A new zero-filled Device::kCuda tensor of `shape` (every dimension positive); the storage
// is released with cudaFree when the last handle to it goes away.
absl::StatusOr<Tensor> AllocateDevice(const Shape& shape);

// Copies a kCpu tensor into a kCuda tensor of the same shape. Returns once `host` may be
// reused; GPU work queued afterwards (e.g. CublasContext::MatMul) sees the new data.
absl::Status CopyToDevice(const Tensor& host, Tensor* device);

// Copies a kCuda tensor into a kCpu tensor of the same shape. Blocks until the copy is done,
// after all work queued before it on the default stream, so kernel results are visible.
absl::Status CopyToHost(const Tensor& device, Tensor* host);

}  // namespace fulcrum::ops::cuda
