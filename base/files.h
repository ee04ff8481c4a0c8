// base: small file and statistics helpers every task uses for its run directory output.
// Thread-safety: pure functions (concurrent writers of one path must coordinate).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace fulcrum {

// Writes `text` next to `path`, flushes it to disk and renames it into place, so a crash
// never leaves a half-written file and an old one is replaced whole or not at all.
absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& text);

// Creates `dir` (and parents); InvalidArgument naming `what` and the OS error on failure.
absl::Status MakeDirs(const std::filesystem::path& dir, const std::string& what);

// Nearest-rank percentile of `values`, q in [0, 1]; 0 for no values.
double Percentile(std::vector<double> values, double q);

}  // namespace fulcrum
