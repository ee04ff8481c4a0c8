// data: reader for the IDX ("MNIST") format, as used by MNIST and Fashion-MNIST.
// Thread-safety: LoadMnistFormat is reentrant (no shared state).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "data/dataset_types.h"

namespace fulcrum::data {

// Loads {train,t10k}-images-idx3-ubyte and {train,t10k}-labels-idx1-ubyte from `dir`; each
// file may be plain or gzipped with a ".gz" suffix (the plain name is tried first).
// Returns images [N, 1, rows, cols] scaled to [0,1], labels in [0, 10), num_classes 10, and
// name "<basename of dir>/<train|test>". Errors name the file: NotFound (missing),
// FailedPrecondition (cannot be opened), InvalidArgument (wrong magic, zero-sized dimension,
// count mismatch, label out of range, trailing bytes), DataLoss (truncated or corrupt gzip).
absl::StatusOr<Dataset> LoadMnistFormat(const std::string& dir, Split split);

}  // namespace fulcrum::data
