#include "ops/cuda_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"

namespace fulcrum::ops {
namespace {

absl::StatusOr<const CudaPlugin*> Load() {
  const std::string path = CudaPluginPath();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this build has no GPU backend (", path,
        " does not exist: the CUDA toolkit, nvcc or cuDNN was not found when it was built)"));
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("cannot load the GPU backend: ", dlerror()));
  }
  using Entry = const CudaPlugin* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaPluginSymbol));
  if (entry == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the GPU backend ", path, " has no symbol ", kCudaPluginSymbol));
  }
  const CudaPlugin* plugin = entry();
  const CudaPlugin expected;
  if (plugin == nullptr || plugin->version != expected.version ||
      plugin->status_size != expected.status_size || plugin->tensor_size != expected.tensor_size ||
      plugin->device_count == nullptr || plugin->no_device == nullptr ||
      plugin->create_backend == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the GPU backend ", path, " comes from another build (version ",
                     plugin == nullptr ? -1 : plugin->version, ", expected ", expected.version,
                     "): rebuild Fulcrum"));
  }
  return plugin;  // never dlclosed: its tensors free device memory through its code
}

}  // namespace

std::string CudaPluginPath() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return kCudaPluginFile;
  return (exe.parent_path() / kCudaPluginFile).string();
}

absl::StatusOr<const CudaPlugin*> LoadCudaPlugin() {
  static absl::once_flag once;
  static absl::StatusOr<const CudaPlugin*>* result = nullptr;
  absl::call_once(once, [] { result = new absl::StatusOr<const CudaPlugin*>(Load()); });
  return *result;
}

}  // namespace fulcrum::ops
