#include "runtime/tensor_coding.h"

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

absl::StatusOr<std::span<const float>> ViewFloats(absl::string_view bytes, int64_t expected,
                                                  std::vector<float>* scratch,
                                                  absl::string_view what) {
  if (expected < 0 || bytes.size() != static_cast<size_t>(expected) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": payload has ", bytes.size(),
                                                   " bytes, expected ", expected * 4, " (",
                                                   expected, " float32)"));
  }
  const size_t n = static_cast<size_t>(expected);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
    return std::span<const float>(reinterpret_cast<const float*>(bytes.data()), n);
  }
  scratch->resize(n);
  if (n > 0) std::memcpy(scratch->data(), bytes.data(), bytes.size());
  return std::span<const float>(scratch->data(), n);
}

}  // namespace fulcrum::runtime
