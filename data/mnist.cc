// IDX format (http://yann.lecun.com/exdb/mnist/): a big-endian header of 32-bit integers
// (magic, then one count per dimension) followed by unsigned bytes, row-major.
#include "data/mnist.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/gz_file.h"

namespace fulcrum::data {
namespace {

using internal::GzReader;

constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
constexpr int kMnistClasses = 10;
// Refuse headers that promise more than this many pixels rather than allocate without limit.
constexpr int64_t kMaxPixels = int64_t{1} << 34;

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads a header of `words` 32-bit integers, checks the magic number and that every dimension
// is positive; returns the dimensions.
absl::StatusOr<std::vector<int64_t>> ReadHeader(GzReader& file, int words, uint32_t magic,
                                                const char* kind) {
  std::array<uint8_t, 16> bytes{};
  const size_t header_bytes = 4 * static_cast<size_t>(words);
  FULCRUM_ASSIGN_OR_RETURN(const size_t got, file.Read(bytes.data(), header_bytes));
  if (got < header_bytes) {
    return absl::DataLossError(absl::StrCat(file.path(), ": truncated: the ", kind,
                                            " header needs ", header_bytes, " bytes, file has ",
                                            got));
  }
  const uint32_t found = BigEndian32(bytes.data());
  if (found != magic) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": wrong magic number ", found,
                                                   ", expected ", magic, " (", kind, ")"));
  }
  std::vector<int64_t> dims;
  for (int i = 1; i < words; ++i) {
    dims.push_back(BigEndian32(bytes.data() + 4 * i));
    if (dims.back() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.path(), ": zero-sized dimension ", i - 1, " in the ", kind, " header"));
    }
  }
  return dims;
}

// After the promised payload the file must end; extra bytes mean a wrong or damaged file.
absl::Status ExpectEnd(GzReader& file, int64_t promised) {
  uint8_t extra = 0;
  FULCRUM_ASSIGN_OR_RETURN(const size_t got, file.Read(&extra, 1));
  if (got != 0) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(),
                                                   ": unexpected trailing bytes after the ",
                                                   promised, " bytes the header promises"));
  }
  return absl::OkStatus();
}

// Reads `path` (or `path`.gz) into [N, 1, rows, cols]; sets *found to the file actually read.
absl::StatusOr<ops::Tensor> ReadImages(const std::string& path, std::string* found_path) {
  FULCRUM_ASSIGN_OR_RETURN(*found_path, internal::FindPlainOrGz(path));
  const std::string& found = *found_path;
  FULCRUM_ASSIGN_OR_RETURN(GzReader file, GzReader::Open(found));
  FULCRUM_ASSIGN_OR_RETURN(const std::vector<int64_t> dims,
                           ReadHeader(file, 4, kImagesMagic, "IDX images"));
  // Each dimension is below 2^32, so check before multiplying to avoid overflow.
  if (dims[1] > kMaxPixels / dims[2] || dims[0] > kMaxPixels / (dims[1] * dims[2])) {
    return absl::InvalidArgumentError(absl::StrCat(found, ": header promises ", dims[0], "x",
                                                   dims[1], "x", dims[2],
                                                   " pixels, more than this reader accepts"));
  }
  const int64_t pixels = dims[0] * dims[1] * dims[2];
  ops::Tensor images = ops::Tensor::Zeros(ops::Shape({dims[0], dims[1], dims[2], 1}));
  float* out = images.data();
  // Convert in chunks so the raw bytes never need a second full-size buffer.
  std::vector<uint8_t> chunk(size_t{1} << 20);
  int64_t done = 0;
  while (done < pixels) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(pixels - done, chunk.size()));
    FULCRUM_ASSIGN_OR_RETURN(const size_t got, file.Read(chunk.data(), want));
    for (size_t i = 0; i < got; ++i) out[done + static_cast<int64_t>(i)] = chunk[i] / 255.0f;
    done += static_cast<int64_t>(got);
    if (got < want) {
      return absl::DataLossError(absl::StrCat(found, ": truncated: header promises ", pixels,
                                              " bytes of pixels, file has ", done));
    }
  }
  FULCRUM_RETURN_IF_ERROR(ExpectEnd(file, pixels));
  return images;
}

absl::StatusOr<std::vector<int32_t>> ReadLabels(const std::string& path, int64_t num_images,
                                                const std::string& images_path) {
  FULCRUM_ASSIGN_OR_RETURN(const std::string found, internal::FindPlainOrGz(path));
  FULCRUM_ASSIGN_OR_RETURN(GzReader file, GzReader::Open(found));
  FULCRUM_ASSIGN_OR_RETURN(const std::vector<int64_t> dims,
                           ReadHeader(file, 2, kLabelsMagic, "IDX labels"));
  const int64_t count = dims[0];
  if (count != num_images) {
    return absl::InvalidArgumentError(absl::StrCat(found, ": count mismatch: ", count,
                                                   " labels but ", images_path, " has ", num_images,
                                                   " images"));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  FULCRUM_ASSIGN_OR_RETURN(const size_t got, file.Read(bytes.data(), bytes.size()));
  if (got < bytes.size()) {
    return absl::DataLossError(absl::StrCat(found, ": truncated: header promises ", count,
                                            " bytes of labels, file has ", got));
  }
  FULCRUM_RETURN_IF_ERROR(ExpectEnd(file, count));
  std::vector<int32_t> labels(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] >= kMnistClasses) {
      return absl::InvalidArgumentError(absl::StrCat(found, ": label ", int{bytes[i]}, " at index ",
                                                     i, " is out of range [0, ", kMnistClasses,
                                                     ")"));
    }
    labels[i] = bytes[i];
  }
  return labels;
}

}  // namespace

absl::StatusOr<Dataset> LoadMnistFormat(const std::string& dir, Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_path = internal::JoinPath(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = internal::JoinPath(dir, prefix + "-labels-idx1-ubyte");
  // Fail on a missing labels file before spending time on the images.
  FULCRUM_RETURN_IF_ERROR(internal::FindPlainOrGz(labels_path).status());
  Dataset dataset;
  dataset.name = internal::DatasetName(dir, SplitName(split));
  dataset.num_classes = kMnistClasses;
  std::string images_found;
  FULCRUM_ASSIGN_OR_RETURN(dataset.images, ReadImages(images_path, &images_found));
  FULCRUM_ASSIGN_OR_RETURN(dataset.labels,
                           ReadLabels(labels_path, dataset.images.rows(), images_found));
  return dataset;
}

}  // namespace fulcrum::data
