#include "transport/data_channel.h"

#include "absl/strings/str_cat.h"
#include "base/enum_flag.h"

namespace fulcrum::transport {

namespace {

constexpr EnumName<DataMethod> kDataMethodNames[] = {
    {DataMethod::kPull, "Pull"}, {DataMethod::kPush, "Push"}, {DataMethod::kPushPull, "PushPull"}};

}  // namespace

const char* DataMethodName(DataMethod method) { return EnumNameOf(method, kDataMethodNames); }

std::string DataMethodName(uint32_t method) {
  if (method >= 1 && method <= 3) return DataMethodName(static_cast<DataMethod>(method));
  return absl::StrCat("method ", method);
}

}  // namespace fulcrum::transport
