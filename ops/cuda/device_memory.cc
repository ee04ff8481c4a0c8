#include "ops/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "ops/cuda/status_internal.h"

namespace fulcrum::ops::cuda {

namespace {

// Checks one side of a copy: present, on the expected device, the expected shape.
absl::Status CheckCopyOperand(const Tensor* t, Device want, const Shape& shape,
                              absl::string_view what, absl::string_view name) {
  if (t == nullptr || t->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", name, " is null or empty"));
  }
  if (t->device() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", name, " is on ", DeviceName(t->device()), ", expected ", DeviceName(want)));
  }
  if (!(t->shape() == shape)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shapes differ: ", name, " is ",
                                                   t->shape().ToString(), ", expected ",
                                                   shape.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> DeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaSuccess && count > 0) return count;
  const std::string detail = absl::StrCat("cudaGetDeviceCount returned ", cudaGetErrorName(error),
                                          " (", cudaGetErrorString(error), ")");
  // Recent runtimes report "no device" as cudaErrorNoDevice; older ones as a count of 0.
  if (error == cudaErrorNoDevice || error == cudaSuccess) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: ", detail, error == cudaSuccess ? " and 0 devices" : ""));
  }
  // What a machine without the NVIDIA driver (no libcuda.so.1) reports.
  if (error == cudaErrorInsufficientDriver) {
    return absl::FailedPreconditionError(absl::StrCat("no usable CUDA driver: ", detail));
  }
  return internal::FromCuda(error, "cudaGetDeviceCount");
}

bool IsNoDeviceError(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsFailedPrecondition(status);
}

absl::StatusOr<Tensor> AllocateDevice(const Shape& shape) {
  FULCRUM_RETURN_IF_ERROR(ValidateShape(shape, "AllocateDevice"));
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * sizeof(float);
  void* raw = nullptr;
  FULCRUM_RETURN_IF_ERROR(
      internal::FromCuda(cudaMalloc(&raw, bytes), absl::StrCat("cudaMalloc of ", bytes, " bytes")));
  // Own the memory before anything else can fail, so an error below does not leak it.
  // cudaFree's status is dropped: a deleter cannot report it, and at process exit the
  // runtime may already be unloading (cudaErrorCudartUnloading), which is harmless.
  std::shared_ptr<float> storage(static_cast<float*>(raw),
                                 [](float* p) { static_cast<void>(cudaFree(p)); });
  FULCRUM_RETURN_IF_ERROR(internal::FromCuda(cudaMemset(raw, 0, bytes), "cudaMemset"));
  // cudaMemset is asynchronous to the host for device memory; wait so that a failure is
  // reported here and not by some later, unrelated call.
  FULCRUM_RETURN_IF_ERROR(
      internal::FromCuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize after cudaMemset"));
  return Tensor::Wrap(std::move(storage), shape, Device::kCuda);
}

absl::Status CopyToDevice(const Tensor& host, Tensor* device) {
  FULCRUM_RETURN_IF_ERROR(
      CheckCopyOperand(&host, Device::kCpu, host.shape(), "CopyToDevice", "host"));
  FULCRUM_RETURN_IF_ERROR(
      CheckCopyOperand(device, Device::kCuda, host.shape(), "CopyToDevice", "device"));
  // Host-to-device from pageable memory returns once the source has been consumed.
  return internal::FromCuda(
      cudaMemcpy(device->data(), host.data(), host.bytes(), cudaMemcpyHostToDevice),
      "cudaMemcpy host to device");
}

absl::Status CopyToHost(const Tensor& device, Tensor* host) {
  FULCRUM_RETURN_IF_ERROR(
      CheckCopyOperand(&device, Device::kCuda, device.shape(), "CopyToHost", "device"));
  FULCRUM_RETURN_IF_ERROR(
      CheckCopyOperand(host, Device::kCpu, device.shape(), "CopyToHost", "host"));
  // cudaMemcpy on the legacy default stream waits for all earlier work on that stream
  // (where CublasContext queues its GEMMs) and returns when the bytes are in host memory.
  return internal::FromCuda(
      cudaMemcpy(host->data(), device.data(), device.bytes(), cudaMemcpyDeviceToHost),
      "cudaMemcpy device to host");
}

}  // namespace fulcrum::ops::cuda
