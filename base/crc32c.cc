#include "base/crc32c.h"

#include <array>

namespace fulcrum {
namespace {

// The reflected Castagnoli polynomial 0x1EDC6F41: bits are processed least significant first,
// as in TensorFlow, LevelDB and iSCSI, so our CRCs match the ones TensorBoard checks.
constexpr uint32_t kPolynomial = 0x82F63B78;
constexpr uint32_t kMaskDelta = 0xa282ead8;

// table[b] is the CRC register after shifting byte b through an all-zero register, built at
// compile time so there is no initialisation order or thread-safety question.
constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    table[b] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();

}  // namespace

uint32_t Crc32c(absl::string_view data, uint32_t crc) {
  // The register is kept inverted between calls (init and final XOR with ~0), so feeding the
  // previous result back in continues the same CRC: Crc32c(b, Crc32c(a)) == Crc32c(a + b).
  crc = ~crc;
  for (const char c : data) {
    crc = kTable[(crc ^ static_cast<uint8_t>(c)) & 0xff] ^ (crc >> 8);
  }
  return ~crc;
}

// TFRecord stores masked CRCs because the CRC of a string that itself contains CRCs is weak;
// the rotation plus constant is TensorFlow's (tensorflow/core/lib/hash/crc32c.h).
uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace fulcrum
