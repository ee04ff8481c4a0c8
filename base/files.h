// base: small file helpers every task uses for its run directory output and the PS for its
// checkpoint shards.
// Error codes, one convention for every helper here: a problem with the caller's input
// (an empty path, a folder that cannot be created where asked) is InvalidArgument; a
// missing file is NotFound; an I/O failure of the machine (cannot create, write, fsync,
// rename or read) is Unavailable, since another try (more disk space, a remounted disk) may
// succeed. Every message names the path and the OS error.
// Thread-safety: pure functions (concurrent writers of one path must coordinate).
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fulcrum {

// Writes `text` to `path`.tmp, fsyncs it, renames it over `path` and fsyncs the folder, so
// the file is replaced whole or not at all, even across a crash or power loss. On failure
// the temporary file is removed and `path` is unchanged (Unavailable, see above).
absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& text);

// The whole content of `path`: NotFound when it does not exist, Unavailable when it cannot
// be read.
absl::StatusOr<std::string> ReadFileToString(const std::filesystem::path& path);

// Creates `dir` (and parents); InvalidArgument naming `what` and the OS error on failure.
absl::Status MakeDirs(const std::filesystem::path& dir, const std::string& what);

}  // namespace fulcrum
