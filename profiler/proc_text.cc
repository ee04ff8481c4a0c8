#include "profiler/proc_text.h"

#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fulcrum::profiler::proc_text {

absl::Status FieldError(absl::string_view file, absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", field, " ", why));
}

absl::StatusOr<uint64_t> ParseCounter(absl::string_view file, absl::string_view field,
                                      absl::string_view token) {
  uint64_t value = 0;
  // SimpleAtoi accepts a sign; kernel counters never carry one, so a '-' means corrupt text.
  if (token.empty() || token[0] == '-' || token[0] == '+' || !absl::SimpleAtoi(token, &value)) {
    return FieldError(file, field, absl::StrCat("is not an unsigned number: '", token, "'"));
  }
  return value;
}

std::vector<absl::string_view> Fields(absl::string_view text) {
  return absl::StrSplit(text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

absl::StatusOr<int64_t> ParseKbLine(absl::string_view file, absl::string_view field,
                                    absl::string_view rest) {
  const std::vector<absl::string_view> parts = Fields(rest);
  if (parts.size() != 2 || parts[1] != "kB") {
    return FieldError(file, field, absl::StrCat("is not '<number> kB': '", rest, "'"));
  }
  auto kb = ParseCounter(file, field, parts[0]);
  if (!kb.ok()) return kb.status();
  if (*kb > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 1024)) {
    return FieldError(file, field, "is out of range");
  }
  return static_cast<int64_t>(*kb) * 1024;
}

}  // namespace fulcrum::profiler::proc_text
