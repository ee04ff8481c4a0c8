#include "transport/data_channel.h"

#include "absl/strings/str_cat.h"

namespace fulcrum::transport {

const char* DataMethodName(DataMethod method) {
  switch (method) {
    case DataMethod::kPull:
      return "Pull";
    case DataMethod::kPush:
      return "Push";
    case DataMethod::kPushPull:
      return "PushPull";
  }
  return "unknown";
}

std::string DataMethodName(uint32_t method) {
  if (method >= 1 && method <= 3) return DataMethodName(static_cast<DataMethod>(method));
  return absl::StrCat("method ", method);
}

}  // namespace fulcrum::transport
