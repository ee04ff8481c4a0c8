// runtime: float32 tensors held in a bytes field (a checkpoint's values and slots): the
// elements as raw little-endian bytes, the parts laid end to end, never a repeated float
// field. The data path's payloads are the frames' (runtime/frames/wire_frame.h).
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fulcrum::runtime {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian float32; add a byte swap for this host");

// Replaces *out with the parts' floats, concatenated.
void EncodeFloats(std::span<const std::span<const float>> parts, std::string* out);

// Copies the payload into the parts in order. InvalidArgument naming `what` when the payload
// is not exactly the parts' total size.
absl::Status DecodeFloats(absl::string_view bytes, std::span<const std::span<float>> parts,
                          absl::string_view what);

}  // namespace fulcrum::runtime
