// ops/cuda (private): turns CUDA runtime and cuBLAS error codes into absl::Status.
// Only ops/cuda/*.cc include this header: it is the one place that includes CUDA headers,
// so no public header of Fulcrum depends on the CUDA toolkit.
// Thread-safety: stateless.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fulcrum::ops::cuda::internal {

// OK for cudaSuccess; otherwise "<what>: <cudaErrorName> (<description>)" with a code that
// says what a caller can do: ResourceExhausted for out-of-memory, Unavailable when there is
// no device, FailedPrecondition when the driver is missing or too old, Internal otherwise.
absl::Status FromCuda(cudaError_t error, absl::string_view what);

// OK for CUBLAS_STATUS_SUCCESS; otherwise "<what>: <CUBLAS_STATUS_NAME> (<description>)".
absl::Status FromCublas(cublasStatus_t status, absl::string_view what);

}  // namespace fulcrum::ops::cuda::internal
