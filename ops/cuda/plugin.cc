// The entry point of libfulcrum_cuda.so (ops/cuda_plugin.h): the only symbol it exports.
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/device_memory.h"
#include "ops/cuda_plugin.h"

extern "C" __attribute__((visibility("default"))) const fulcrum::ops::CudaPlugin*
FulcrumCudaPlugin() {
  static const fulcrum::ops::CudaPlugin plugin = [] {
    fulcrum::ops::CudaPlugin p;
    p.device_count = &fulcrum::ops::cuda::DeviceCount;
    p.no_device = &fulcrum::ops::cuda::IsNoDeviceError;
    p.create_backend = &fulcrum::ops::cuda::CreateCudaBackend;
    return p;
  }();
  return &plugin;
}
