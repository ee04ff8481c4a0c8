// data: reader for the CIFAR-10 binary version (cifar-10-batches-bin).
// Thread-safety: LoadCifar10 is reentrant (no shared state).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "data/dataset_types.h"

namespace fulcrum::data {

// Bytes in one CIFAR-10 record: 1 label byte + 3 planes (R, G, B) of 32x32 pixels.
inline constexpr int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

// Loads data_batch_1.bin .. data_batch_5.bin (train; all five must exist) or test_batch.bin
// (test) from `dir`; each file may also be gzipped with a ".gz" suffix. Returns images
// [N, 32, 32, 3] (NHWC: the file's R, G, B planes interleaved) scaled to [0,1], labels in [0, 10), num_classes 10. Errors name the
// file: NotFound (missing), FailedPrecondition (cannot be opened), DataLoss (size not a
// multiple of 3073 bytes), InvalidArgument (empty file, label out of range).
absl::StatusOr<Dataset> LoadCifar10(const std::string& dir, Split split);

}  // namespace fulcrum::data
