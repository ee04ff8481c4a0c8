// profiler: GPU utilisation, memory and power through NVML, loaded at run time with
// dlopen("libnvidia-ml.so.1") so that Fulcrum builds and runs on machines without the NVIDIA
// driver (the sampler then has no GPU figures; profiler.cc says so once, at INFO).
// Thread-safety: Read() may be called from one thread at a time (the sampler's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fulcrum::profiler {

// One GPU at one moment.
struct GpuReading {
  int index = 0;
  double utilization_percent = 0.0;  // share of the last sample period a kernel ran (0..100)
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  double power_watts = 0.0;  // -1 when the board does not report power
};

class NvmlGpus {
 public:
  // dlopen()s `library`, resolves the NVML entry points and calls nvmlInit_v2. NotFound naming
  // the library when it cannot be loaded (no driver); Unavailable when a symbol is missing or
  // nvmlInit fails (with NVML's error string).
  static absl::StatusOr<std::unique_ptr<NvmlGpus>> Load(
      const std::string& library = "libnvidia-ml.so.1");
  ~NvmlGpus();  // nvmlShutdown and dlclose

  // Every GPU's figures now; Unavailable with NVML's error string when a query fails.
  absl::StatusOr<std::vector<GpuReading>> Read();

 private:
  struct Api;
  explicit NvmlGpus(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

// NvmlGpus::Load() for the live sampler: null, said once at INFO, when there is no NVML
// (no driver, no GPU); an NVML that loads but fails is said at WARN.
std::unique_ptr<NvmlGpus> LoadGpusOrSayWhyNot();

}  // namespace fulcrum::profiler
