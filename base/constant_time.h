// base: comparing secrets (tokens, tickets) in time that does not depend on where they differ.
// Thread-safety: a pure function.
#pragma once

#include <cstddef>

#include "absl/strings/string_view.h"

namespace fulcrum {

// Whether a and b are equal; for equal lengths, the time taken does not depend on the bytes.
inline bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace fulcrum
