#include "profiler/nvml.h"

#include <dlfcn.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace fulcrum::profiler {
namespace {

// The few NVML declarations used, as nvml.h defines them (its ABI is stable), so no NVIDIA
// header is needed to build.
using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;  // NOLINT(runtime/int): NVML's type
  unsigned long long free;   // NOLINT(runtime/int)
  unsigned long long used;   // NOLINT(runtime/int)
};

template <typename F>
bool Resolve(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(::dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

struct NvmlGpus::Api {
  void* handle = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*count)(unsigned int*) = nullptr;
  NvmlReturn (*by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;

  // Resolves every entry point; the name of the first missing one, or "".
  std::string ResolveAll() {
    void* h = handle;
    const std::pair<const char*, bool> found[] = {
        {"nvmlInit_v2", Resolve(h, "nvmlInit_v2", &init)},
        {"nvmlShutdown", Resolve(h, "nvmlShutdown", &shutdown)},
        {"nvmlErrorString", Resolve(h, "nvmlErrorString", &error_string)},
        {"nvmlDeviceGetCount_v2", Resolve(h, "nvmlDeviceGetCount_v2", &count)},
        {"nvmlDeviceGetHandleByIndex_v2", Resolve(h, "nvmlDeviceGetHandleByIndex_v2", &by_index)},
        {"nvmlDeviceGetUtilizationRates",
         Resolve(h, "nvmlDeviceGetUtilizationRates", &utilization)},
        {"nvmlDeviceGetMemoryInfo", Resolve(h, "nvmlDeviceGetMemoryInfo", &memory)},
        {"nvmlDeviceGetPowerUsage", Resolve(h, "nvmlDeviceGetPowerUsage", &power)}};
    for (const auto& [name, ok] : found) {
      if (!ok) return name;
    }
    return "";
  }

  absl::Status Check(NvmlReturn r, const char* what) const {
    if (r == 0) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("NVML ", what, ": ", error_string(r)));
  }
};

absl::StatusOr<std::unique_ptr<NvmlGpus>> NvmlGpus::Load(const std::string& library) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return absl::NotFoundError(absl::StrCat(
        "cannot load ", library, " (no NVIDIA driver?): ", why != nullptr ? why : "dlopen failed"));
  }
  auto api = std::make_unique<Api>();
  api->handle = handle;
  const std::string missing = api->ResolveAll();
  if (!missing.empty()) {
    ::dlclose(handle);
    return absl::UnavailableError(absl::StrCat(library, " has no symbol ", missing));
  }
  if (absl::Status st = api->Check(api->init(), "nvmlInit_v2"); !st.ok()) {
    ::dlclose(handle);
    return st;
  }
  return std::unique_ptr<NvmlGpus>(new NvmlGpus(std::move(api)));
}

NvmlGpus::NvmlGpus(std::unique_ptr<Api> api) : api_(std::move(api)) {}

NvmlGpus::~NvmlGpus() {
  api_->shutdown();
  ::dlclose(api_->handle);
}

absl::StatusOr<std::vector<GpuReading>> NvmlGpus::Read() {
  unsigned int count = 0;
  if (absl::Status st = api_->Check(api_->count(&count), "nvmlDeviceGetCount"); !st.ok()) return st;
  std::vector<GpuReading> gpus;
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    NvmlUtilization util{};
    NvmlMemory memory{};
    unsigned int milliwatts = 0;
    absl::Status st = api_->Check(api_->by_index(i, &device), "nvmlDeviceGetHandleByIndex");
    if (st.ok()) st = api_->Check(api_->utilization(device, &util), "utilization");
    if (st.ok()) st = api_->Check(api_->memory(device, &memory), "memory info");
    if (!st.ok()) return st;
    GpuReading g;
    g.index = static_cast<int>(i);
    g.utilization_percent = util.gpu;
    g.memory_used_bytes = static_cast<int64_t>(memory.used);
    g.memory_total_bytes = static_cast<int64_t>(memory.total);
    // Boards without a power sensor answer NOT_SUPPORTED: the figure is absent, not an error.
    g.power_watts = api_->power(device, &milliwatts) == 0 ? milliwatts / 1000.0 : -1.0;
    gpus.push_back(g);
  }
  return gpus;
}

std::unique_ptr<NvmlGpus> LoadGpusOrSayWhyNot() {
  absl::StatusOr<std::unique_ptr<NvmlGpus>> gpus = NvmlGpus::Load();
  if (gpus.ok()) return *std::move(gpus);
  if (absl::IsNotFound(gpus.status())) {
    spdlog::info("profiler: no GPU figures: {}", std::string(gpus.status().message()));
  } else {
    spdlog::warn("profiler: no GPU figures: {}", std::string(gpus.status().message()));
  }
  return nullptr;
}

}  // namespace fulcrum::profiler
