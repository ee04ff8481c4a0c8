// profiler: the small text helpers every /proc parser shares (proc_stats.cc, host_stats.cc):
// whitespace fields, unsigned counters that reject signs, "<n> kB" lines and errors that
// name the file and field. Internal to profiler/. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fulcrum::profiler::proc_text {

// InvalidArgument "<file>: <field> <why>".
absl::Status FieldError(absl::string_view file, absl::string_view field, absl::string_view why);
// A kernel counter: decimal digits only (no sign), else FieldError naming `field`.
absl::StatusOr<uint64_t> ParseCounter(absl::string_view file, absl::string_view field,
                                      absl::string_view token);
// The fields of `text` split at spaces, tabs and newlines, empty ones skipped.
std::vector<absl::string_view> Fields(absl::string_view text);
// "  1716 kB" (what follows "Name:") -> bytes; FieldError naming `field` of `file` otherwise.
absl::StatusOr<int64_t> ParseKbLine(absl::string_view file, absl::string_view field,
                                    absl::string_view rest);

}  // namespace fulcrum::profiler::proc_text
