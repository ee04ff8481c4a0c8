// runtime: --device, --devices, --tf32 and --prefetch (the batches' way to the device),
// defined beside the code that reads them.
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/enum_flag.h"
#include "base/status_macros.h"
#include "ops/device.h"
#include "runtime/config/flags.h"

ABSL_FLAG(std::string, device, "cpu",
          "Device of the model's ops: cpu, gpu:N, or arena (host memory posing as a device, "
          "every copy across counted: for tests, ops/arena_backend.h).");
ABSL_FLAG(std::string, devices, "",
          "In-graph replication: devices that each take a slice of every batch, their gradients "
          "averaged before the update (e.g. cpu:0,cpu:1 or gpu:0,gpu:1). Empty: --device alone.");
ABSL_FLAG(fulcrum::OnOff, tf32, fulcrum::OnOff::kOff,
          "on: cuDNN convolutions and cuBLAS GEMMs on a GPU may round their inputs to TF32 "
          "(tensor cores; PyTorch's default for convolutions); off: full fp32, results comparable "
          "with the CPU backend. Only with a GPU device.");

ABSL_FLAG(bool, prefetch, true,
          "Gather each next batch on a loader thread while the step computes (two buffers, "
          "page-locked on a GPU); --noprefetch: on the training thread at the step's start.");

namespace fulcrum::runtime {

absl::Status DeviceFromFlags(TrainingOptions& o) {
  FULCRUM_ASSIGN_OR_RETURN(o.device, ops::ParseDeviceId(absl::GetFlag(FLAGS_device)));
  FULCRUM_ASSIGN_OR_RETURN(o.devices, ops::ParseDeviceList(absl::GetFlag(FLAGS_devices)));
  o.prefetch = absl::GetFlag(FLAGS_prefetch);
  o.tf32 = absl::GetFlag(FLAGS_tf32) == OnOff::kOn;
  if (!o.tf32) return absl::OkStatus();
  bool gpu = o.devices.empty() && o.device.type == ops::Device::kCuda;
  for (const ops::DeviceId& d : o.devices) gpu = gpu || d.type == ops::Device::kCuda;
  if (!gpu) {
    const std::string where = o.devices.empty()
                                  ? absl::StrCat("--device=", absl::GetFlag(FLAGS_device))
                                  : absl::StrCat("--devices=", absl::GetFlag(FLAGS_devices));
    return absl::InvalidArgumentError(absl::StrCat(
        "--tf32=on needs a GPU device (TF32 is a tensor-core format of cuDNN and cuBLAS); ", where,
        " names none"));
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::runtime
