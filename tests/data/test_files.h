// Test helpers: a scratch directory per test and writers for IDX and CIFAR-10 files, plain
// or gzipped, so the readers can be checked against files whose content the test knows.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fulcrum::data::testing {

using Bytes = std::vector<uint8_t>;

// A fresh directory under ::testing::TempDir(), removed when the object goes away.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            (std::string("fulcrum_data_") + info->test_suite_name() + "_" + info->name() + "_" +
             std::to_string(getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string path() const { return path_.string(); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void PutBigEndian32(Bytes* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

// IDX images file: magic 2051, n, rows, cols, then pixel (i * 7 + j) % 256 for image i,
// pixel j, so tests can check values.
inline uint8_t TestPixel(int64_t image, int64_t pixel) {
  return static_cast<uint8_t>((image * 7 + pixel) % 256);
}
inline Bytes IdxImages(uint32_t n, uint32_t rows, uint32_t cols, uint32_t magic = 2051) {
  Bytes out;
  PutBigEndian32(&out, magic);
  PutBigEndian32(&out, n);
  PutBigEndian32(&out, rows);
  PutBigEndian32(&out, cols);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < int64_t{rows} * cols; ++j) out.push_back(TestPixel(i, j));
  }
  return out;
}

inline Bytes IdxLabels(const std::vector<uint8_t>& labels, uint32_t magic = 2049) {
  Bytes out;
  PutBigEndian32(&out, magic);
  PutBigEndian32(&out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

// CIFAR-10 records: label then 3072 pixels, pixel (r * 3 + j) % 256 for record r.
inline Bytes CifarRecords(const std::vector<uint8_t>& labels) {
  Bytes out;
  for (size_t r = 0; r < labels.size(); ++r) {
    out.push_back(labels[r]);
    for (int j = 0; j < 3072; ++j) out.push_back(static_cast<uint8_t>((r * 3 + j) % 256));
  }
  return out;
}

inline void WritePlain(const std::string& path, const Bytes& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(file.good()) << path;
}

inline void WriteGz(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()))
        << path;
  }
  ASSERT_EQ(gzclose(file), Z_OK) << path;
}

inline Bytes Truncated(Bytes bytes, size_t keep) {
  bytes.resize(keep);
  return bytes;
}

}  // namespace fulcrum::data::testing
