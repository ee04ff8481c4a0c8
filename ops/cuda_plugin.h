// ops/cuda_plugin: the CUDA backend as a plugin loaded at run time (dlopen), as TensorFlow
// loads its GPU libraries. A CPU-only run never loads cuDNN, cuBLAS or the CUDA runtime: their
// static thread-local storage (about 110 KiB with cuBLASLt) would otherwise be reserved in
// every thread's stack, and threads made with a small fixed stack (civetweb's 100 KiB, behind
// the Prometheus endpoint) could no longer start. A binary built with CUDA also runs on a
// machine without the CUDA libraries, and says what is missing only when a GPU is asked for.
//
// The plugin is `libfulcrum_cuda.so` next to the executable (ops/cuda/plugin.cc); it exports
// one C symbol that returns the table below. Both sides are compiled from the same headers in
// one build; the table's version and type sizes are checked before it is used.
// Thread-safety: LoadCudaPlugin may be called from any thread; the plugin is loaded once and
// never unloaded (tensors it allocated free their memory through its code).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/backend.h"

namespace fulcrum::ops {

inline constexpr int kCudaPluginVersion = 2;
inline constexpr char kCudaPluginFile[] = "libfulcrum_cuda.so";
inline constexpr char kCudaPluginSymbol[] = "FulcrumCudaPlugin";

struct CudaPlugin {
  int version = kCudaPluginVersion;
  size_t status_size = sizeof(absl::Status);
  size_t tensor_size = sizeof(Tensor);
  // Number of usable GPUs; an error when there is none (no_device is true for those).
  absl::StatusOr<int> (*device_count)() = nullptr;
  bool (*no_device)(const absl::Status& status) = nullptr;
  // A backend on GPU `ordinal`, TF32 math allowed or not (ops/cuda/cuda_backend.h).
  absl::StatusOr<std::unique_ptr<Backend>> (*create_backend)(int ordinal, bool tf32) = nullptr;
};

// The plugin next to the running executable, loaded on the first call. FailedPrecondition when
// this build has none (built without the CUDA toolkit, nvcc or cuDNN) or when it cannot be
// loaded (the dynamic loader's message names the missing library, e.g. libcudnn.so.9).
absl::StatusOr<const CudaPlugin*> LoadCudaPlugin();

// Where LoadCudaPlugin looks: `kCudaPluginFile` in the directory of /proc/self/exe.
std::string CudaPluginPath();

}  // namespace fulcrum::ops
