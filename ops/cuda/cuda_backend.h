// ops/cuda: the CUDA backend: ops::Backend on one GPU. Convolutions run on cuDNN (NHWC,
// full fp32 math: no TF32 rounding), GEMMs and bias gradients on cuBLAS, the rest on the
// small kernels of ops/cuda/kernels.cu (pooling with TensorFlow's asymmetric SAME padding,
// which cuDNN cannot express, LRN, activations, softmax cross-entropy, dropout, the spatial
// transformer's sampler). Tensors are Device::kCuda; ops are queued on the legacy default
// stream and run asynchronously to the host: the host waits only where a result comes back
// (CopyToHost, a loss, a count), and an execution error is reported by that call.
// Includes no CUDA header.
// Thread-safety: as ops::Backend; every op first makes the backend's GPU current on the
// calling thread, so replicas on several threads may each own one.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "ops/backend.h"

namespace fulcrum::ops::cuda {

// A backend on GPU `ordinal` (0-based). Unavailable / FailedPrecondition (naming the CUDA
// error) when the machine has no usable GPU (IsNoDeviceError is true for those);
// InvalidArgument naming the ordinal and the device count when it is out of range. With
// `tf32` (--tf32=on) cuDNN and cuBLAS may round fp32 inputs to TF32 on tensor cores; without,
// every convolution and GEMM is full fp32 (results comparable with the CPU backend).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int ordinal, bool tf32 = false);

}  // namespace fulcrum::ops::cuda
