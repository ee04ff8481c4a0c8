// runtime/tensor_coding: float32 payloads as raw little-endian bytes.
#include "runtime/tensor_coding.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::runtime {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(TensorCodingTest, RoundTripOfSeveralParts) {
  const std::vector<float> a = {1.0f, -2.5f, 3.25f};
  const std::vector<float> b = {};
  const std::vector<float> c = {std::numeric_limits<float>::infinity(), -0.0f, 1e-38f,
                                std::numeric_limits<float>::max()};
  const std::span<const float> parts[] = {a, b, c};
  std::string bytes = "stale contents";
  EncodeFloats(parts, &bytes);
  ASSERT_EQ(bytes.size(), 7 * sizeof(float));

  std::vector<float> x(3), y(0), z(4);
  const std::span<float> out[] = {x, y, z};
  ASSERT_TRUE(DecodeFloats(bytes, out, "chunk 3").ok());
  EXPECT_EQ(x, a);
  EXPECT_EQ(z.size(), c.size());
  // Bit-exact, including the sign of zero.
  EXPECT_EQ(std::memcmp(z.data(), c.data(), c.size() * sizeof(float)), 0);
}

TEST(TensorCodingTest, LittleEndianFloat32OnTheWire) {
  const std::vector<float> one = {1.0f};  // 0x3f800000
  const std::span<const float> parts[] = {one};
  std::string bytes;
  EncodeFloats(parts, &bytes);
  ASSERT_EQ(bytes.size(), 4u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x00);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x00);
  EXPECT_EQ(static_cast<unsigned char>(bytes[2]), 0x80);
  EXPECT_EQ(static_cast<unsigned char>(bytes[3]), 0x3f);
}

TEST(TensorCodingTest, EmptyPayload) {
  std::string bytes = "x";
  EncodeFloats({}, &bytes);
  EXPECT_TRUE(bytes.empty());
  EXPECT_TRUE(DecodeFloats("", {}, "nothing").ok());
  std::vector<float> scratch;
  auto view = ViewFloats("", 0, &scratch, "nothing");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(view->empty());
}

TEST(TensorCodingTest, DecodeSizeMismatchNamesWhat) {
  std::vector<float> x(3);
  const std::span<float> out[] = {x};
  for (size_t size : {size_t{0}, size_t{11}, size_t{16}}) {
    const std::string bytes(size, '\0');
    const absl::Status s = DecodeFloats(bytes, out, "gradients of chunk 7 from worker:1");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << size;
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("gradients of chunk 7 from worker:1"), HasSubstr("12")))
        << size;
  }
  EXPECT_EQ(x, std::vector<float>(3, 0.0f));  // untouched on error
}

TEST(TensorCodingTest, ViewAlignedPayloadWithoutCopy) {
  std::vector<float> values = {1.5f, 2.5f, 3.5f, 4.5f};
  const absl::string_view bytes(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(float));
  std::vector<float> scratch;
  auto view = ViewFloats(bytes, 4, &scratch, "values");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data(), values.data());  // no copy
  EXPECT_TRUE(scratch.empty());
  EXPECT_EQ(std::vector<float>(view->begin(), view->end()), values);
}

TEST(TensorCodingTest, ViewUnalignedPayloadCopiesIntoScratch) {
  const std::vector<float> values = {0.1f, -7.0f, 42.0f, 1e20f, -0.0f};
  const std::span<const float> parts[] = {values};
  std::string encoded;
  EncodeFloats(parts, &encoded);
  // Misalign by one byte inside a larger buffer.
  std::vector<char> buffer(encoded.size() + 8);
  char* start = buffer.data();
  while (reinterpret_cast<uintptr_t>(start) % alignof(float) != 1) ++start;
  std::memcpy(start, encoded.data(), encoded.size());
  const absl::string_view bytes(start, encoded.size());

  std::vector<float> scratch = {9.0f};  // stale contents are replaced
  auto view = ViewFloats(bytes, static_cast<int64_t>(values.size()), &scratch, "values");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data(), scratch.data());
  ASSERT_EQ(view->size(), values.size());
  EXPECT_EQ(std::memcmp(view->data(), values.data(), values.size() * sizeof(float)), 0);
}

TEST(TensorCodingTest, ViewSizeMismatchNamesWhat) {
  const std::string bytes(10, '\0');
  std::vector<float> scratch;
  for (int64_t expected : {int64_t{2}, int64_t{3}, int64_t{-1}}) {
    auto view = ViewFloats(bytes, expected, &scratch, "pull reply for chunk 2");
    EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument) << expected;
    EXPECT_THAT(std::string(view.status().message()),
                AllOf(HasSubstr("pull reply for chunk 2"), HasSubstr("10 bytes")))
        << expected;
  }
}

}  // namespace
}  // namespace fulcrum::runtime
