// ops: naming a compute device: "cpu", "cpu:N", "gpu:N" or "arena" (--device, --devices; the
// arena is host memory posing as a device, for tests: ops/arena_backend.h). Whether a
// named GPU exists is the backend's question (ops/backend.h); this is only the spelling.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

struct DeviceId {
  Device type = Device::kCpu;
  int index = 0;

  friend bool operator==(const DeviceId& a, const DeviceId& b) {
    return a.type == b.type && a.index == b.index;
  }
};

// "cpu:0", "gpu:1": the spelling ParseDeviceId reads.
std::string DeviceIdName(const DeviceId& id);

// "cpu" (= cpu:0), "cpu:N", "gpu:N" (N in [0, 255]) or "arena" (= arena:0). InvalidArgument
// naming `flag` and the text otherwise.
absl::StatusOr<DeviceId> ParseDeviceId(absl::string_view text, absl::string_view flag = "--device");

// Comma-separated device ids, each at most once; empty text gives an empty list.
absl::StatusOr<std::vector<DeviceId>> ParseDeviceList(absl::string_view text,
                                                      absl::string_view flag = "--devices");

}  // namespace fulcrum::ops
