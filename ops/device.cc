#include "ops/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fulcrum::ops {

std::string DeviceIdName(const DeviceId& id) {
  if (id.type == Device::kArena) return "arena";
  return absl::StrCat(id.type == Device::kCuda ? "gpu" : "cpu", ":", id.index);
}

absl::StatusOr<DeviceId> ParseDeviceId(absl::string_view text, absl::string_view flag) {
  DeviceId id;
  absl::string_view rest = text;
  if (text == "arena" || text == "arena:0") {
    id.type = Device::kArena;
    return id;
  }
  if (absl::ConsumePrefix(&rest, "cpu")) {
    id.type = Device::kCpu;
  } else if (absl::ConsumePrefix(&rest, "gpu")) {
    id.type = Device::kCuda;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", text, ": expected cpu, cpu:N or gpu:N"));
  }
  if (rest.empty() && id.type == Device::kCpu) return id;
  int index = -1;
  if (!absl::ConsumePrefix(&rest, ":") || !absl::SimpleAtoi(rest, &index) || index < 0 ||
      index > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", text, ": expected cpu, cpu:N or gpu:N with N a device number from 0 to 255"));
  }
  id.index = index;
  return id;
}

absl::StatusOr<std::vector<DeviceId>> ParseDeviceList(absl::string_view text,
                                                      absl::string_view flag) {
  std::vector<DeviceId> ids;
  if (text.empty()) return ids;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    absl::StatusOr<DeviceId> id = ParseDeviceId(part, flag);
    if (!id.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=", text, ": '", part, "' is not cpu, cpu:N or gpu:N"));
    }
    for (const DeviceId& seen : ids) {
      if (seen == *id) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, "=", text, ": ", DeviceIdName(*id), " is named twice"));
      }
    }
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace fulcrum::ops
