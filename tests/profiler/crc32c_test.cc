// CRC-32C against the standard check value and the iSCSI test vectors (RFC 3720 B.4), plus the
// TFRecord mask.
#include "base/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace fulcrum::profiler {
namespace {

TEST(Crc32cTest, StandardCheckValue) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

TEST(Crc32cTest, Rfc3720Vectors) {
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32cTest, EmptyIsZero) { EXPECT_EQ(Crc32c(""), 0u); }

TEST(Crc32cTest, ExtendEqualsWhole) {
  const std::string text = "hello, parameter server world";
  for (size_t split = 0; split <= text.size(); ++split) {
    EXPECT_EQ(Crc32c(text.substr(split), Crc32c(text.substr(0, split))), Crc32c(text))
        << "split " << split;
  }
}

TEST(Crc32cTest, MaskKnownValues) {
  // mask(c) = ror(c, 15) + 0xa282ead8, worked out by hand for these two.
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(MaskCrc32c(0xE3069283u), 0xC78AB0E5u);
}

TEST(Crc32cTest, MaskRoundTrips) {
  const uint32_t crc = Crc32c("foo");
  EXPECT_NE(MaskCrc32c(crc), crc);
  EXPECT_NE(MaskCrc32c(MaskCrc32c(crc)), crc);
  EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
  EXPECT_EQ(UnmaskCrc32c(UnmaskCrc32c(MaskCrc32c(MaskCrc32c(crc)))), crc);
  for (uint32_t v : {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0xdeadbeefu}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(v)), v) << v;
  }
}

}  // namespace
}  // namespace fulcrum::profiler
