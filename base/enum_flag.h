// base: enum-valued flags parsed by Abseil. An enum gives its spellings as a table of
// {value, name}; its AbslParseFlag and AbslUnparseFlag (declared beside the enum, in its
// namespace) call these, so `ABSL_FLAG(SyncMode, mode, ...)` takes exactly those names and a
// wrong one is refused while the command line is parsed, naming the valid ones.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fulcrum {

template <typename E>
using EnumName = std::pair<E, const char*>;

// "a, b or c".
template <typename E, size_t N>
std::string EnumSpellings(const EnumName<E> (&names)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) absl::StrAppend(&out, i + 1 == N ? " or " : ", ");
    absl::StrAppend(&out, names[i].second);
  }
  return out;
}

// Sets *out to the value spelled `text`; false with *error "expected a, b or c" otherwise.
template <typename E, size_t N>
bool ParseEnum(absl::string_view text, const EnumName<E> (&names)[N], E* out, std::string* error) {
  for (const auto& [value, name] : names) {
    if (text == name) {
      *out = value;
      return true;
    }
  }
  *error = absl::StrCat("expected ", EnumSpellings(names));
  return false;
}

// The spelling of `value` ("unknown" for a value outside the table).
template <typename E, size_t N>
const char* EnumNameOf(E value, const EnumName<E> (&names)[N]) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "unknown";
}
template <typename E, size_t N>
std::string UnparseEnum(E value, const EnumName<E> (&names)[N]) {
  return EnumNameOf(value, names);
}

// A switch spelled on or off (--profile, --tf32).
enum class OnOff { kOff, kOn };
inline constexpr EnumName<OnOff> kOnOffNames[] = {{OnOff::kOn, "on"}, {OnOff::kOff, "off"}};
inline bool AbslParseFlag(absl::string_view text, OnOff* out, std::string* error) {
  return ParseEnum(text, kOnOffNames, out, error);
}
inline std::string AbslUnparseFlag(OnOff value) { return UnparseEnum(value, kOnOffNames); }

}  // namespace fulcrum
