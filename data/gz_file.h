// data (internal): reads a data file that may be plain or gzip-compressed, through zlib's
// gzopen/gzread (which read both), and turns every failure into a Status naming the path.
// Thread-safety: a GzReader is not thread-safe; the free functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

struct gzFile_s;  // zlib's file handle; zlib.h stays out of this header.

namespace fulcrum::data::internal {

// Returns `path` if it exists, else `path` + ".gz" if that exists. NotFound (naming both)
// when neither exists; FailedPrecondition when the name exists but is not a regular file.
absl::StatusOr<std::string> FindPlainOrGz(const std::string& path);

// `dir`/`name` as a string.
std::string JoinPath(const std::string& dir, const std::string& name);

// "<last component of dir>/<split name>", e.g. "fashion-mnist/train".
std::string DatasetName(const std::string& dir, const char* split_name);

class GzReader {
 public:
  // Opens `path` (plain or gzip) for reading. NotFound if missing, FailedPrecondition if it
  // cannot be opened.
  static absl::StatusOr<GzReader> Open(const std::string& path);

  // Reads up to `n` bytes into `dst`; returns the count, smaller than `n` only at end of
  // file (a truncated gzip stream also ends early). DataLoss on a read or gzip error.
  absl::StatusOr<size_t> Read(void* dst, size_t n);
  // Reads everything that is left.
  absl::StatusOr<std::vector<uint8_t>> ReadToEnd();

  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(gzFile_s* file) const;
  };
  GzReader(std::string path, gzFile_s* file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  std::unique_ptr<gzFile_s, Closer> file_;
};

}  // namespace fulcrum::data::internal
