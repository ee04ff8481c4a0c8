// runtime/tensor_coding: float32 payloads as raw little-endian bytes.
#include "runtime/frames/tensor_coding.h"

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

}  // namespace
}  // namespace fulcrum::runtime
