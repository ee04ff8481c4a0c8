// base: CRC-32C (Castagnoli), as TFRecord framing and the checkpoint manifests need it, from a 256-entry table
// (Debian's Abseil 20220623 has no absl/crc). Checked against the standard test vector
// CRC-32C("123456789") = 0xE3069283. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace fulcrum {

// CRC-32C of `data`, continuing from `crc` (0 to start).
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t MaskCrc32c(uint32_t crc);
uint32_t UnmaskCrc32c(uint32_t masked);

}  // namespace fulcrum
