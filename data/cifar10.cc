// CIFAR-10 binary version (https://www.cs.toronto.edu/~kriz/cifar.html): each file is a
// sequence of 3073-byte records, <label byte><1024 R><1024 G><1024 B>, with no header.
#include "data/cifar10.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/gz_file.h"

namespace fulcrum::data {
namespace {

constexpr int kCifar10Classes = 10;
constexpr int64_t kPixelsPerImage = kCifar10RecordBytes - 1;

std::vector<std::string> BatchFiles(Split split) {
  if (split == Split::kTest) return {"test_batch.bin"};
  std::vector<std::string> files;
  for (int i = 1; i <= 5; ++i) files.push_back(absl::StrCat("data_batch_", i, ".bin"));
  return files;
}

// One file's raw records, checked: whole records only, at least one, labels in range.
absl::StatusOr<std::vector<uint8_t>> ReadBatchFile(const std::string& path) {
  FULCRUM_ASSIGN_OR_RETURN(internal::GzReader file, internal::GzReader::Open(path));
  FULCRUM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, file.ReadToEnd());
  const auto size = static_cast<int64_t>(bytes.size());
  if (size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": empty file, no records"));
  }
  if (size % kCifar10RecordBytes != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": truncated record: file has ", size, " bytes, not a multiple of the ",
                     kCifar10RecordBytes, "-byte record (", size / kCifar10RecordBytes,
                     " whole records and ", size % kCifar10RecordBytes, " bytes)"));
  }
  for (int64_t r = 0; r < size / kCifar10RecordBytes; ++r) {
    const int label = bytes[static_cast<size_t>(r * kCifar10RecordBytes)];
    if (label >= kCifar10Classes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": label ", label, " of record ", r,
                                                     " is out of range [0, ", kCifar10Classes,
                                                     ")"));
    }
  }
  return bytes;
}

}  // namespace

absl::StatusOr<Dataset> LoadCifar10(const std::string& dir, Split split) {
  // Resolve every file first so a missing batch is reported before any long read.
  std::vector<std::string> paths;
  for (const std::string& name : BatchFiles(split)) {
    FULCRUM_ASSIGN_OR_RETURN(std::string path,
                             internal::FindPlainOrGz(internal::JoinPath(dir, name)));
    paths.push_back(std::move(path));
  }
  std::vector<std::vector<uint8_t>> files;
  int64_t records = 0;
  for (const std::string& path : paths) {
    FULCRUM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadBatchFile(path));
    records += static_cast<int64_t>(bytes.size()) / kCifar10RecordBytes;
    files.push_back(std::move(bytes));
  }

  Dataset dataset;
  dataset.name = internal::DatasetName(dir, SplitName(split));
  dataset.num_classes = kCifar10Classes;
  dataset.images = ops::Tensor::Zeros(ops::Shape({records, 32, 32, 3}));
  dataset.labels.reserve(static_cast<size_t>(records));
  float* out = dataset.images.data();
  for (const std::vector<uint8_t>& bytes : files) {
    for (size_t offset = 0; offset < bytes.size(); offset += kCifar10RecordBytes) {
      dataset.labels.push_back(bytes[offset]);
      const uint8_t* pixels = bytes.data() + offset + 1;
      // The file holds planes R, G, B of 32x32 (CHW); Fulcrum's images are NHWC.
      constexpr int64_t kPlane = 32 * 32;
      for (int64_t p = 0; p < kPlane; ++p) {
        for (int64_t c = 0; c < 3; ++c) out[p * 3 + c] = pixels[c * kPlane + p] / 255.0f;
      }
      out += kPixelsPerImage;
    }
  }
  return dataset;
}

}  // namespace fulcrum::data
