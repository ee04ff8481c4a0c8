#include "runtime/frames/tensor_coding.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace fulcrum::runtime {

void EncodeFloats(std::span<const std::span<const float>> parts, std::string* out) {
  size_t total = 0;
  for (const auto& p : parts) total += p.size_bytes();
  out->resize(total);
  char* dst = out->data();
  for (const auto& p : parts) {
    if (p.empty()) continue;
    std::memcpy(dst, p.data(), p.size_bytes());
    dst += p.size_bytes();
  }
}

absl::Status DecodeFloats(absl::string_view bytes, std::span<const std::span<float>> parts,
                          absl::string_view what) {
  size_t total = 0;
  for (const auto& p : parts) total += p.size_bytes();
  if (bytes.size() != total) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": payload has ", bytes.size(),
                                                   " bytes, expected ", total, " (",
                                                   total / sizeof(float), " float32)"));
  }
  const char* src = bytes.data();
  for (const auto& p : parts) {
    if (p.empty()) continue;
    std::memcpy(p.data(), src, p.size_bytes());
    src += p.size_bytes();
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::runtime
