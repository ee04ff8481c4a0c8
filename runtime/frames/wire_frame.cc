#include "runtime/frames/wire_frame.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/enum_flag.h"

namespace fulcrum::runtime {
namespace {

constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads a serialized message from the pieces of a received body without copying them.
class PieceReader {
 public:
  explicit PieceReader(const Pieces& body) : body_(body) {
    for (const auto& p : body) remaining_ += p.size();
  }

  size_t remaining() const { return remaining_; }
  size_t offset(size_t total) const { return total - remaining_; }

  bool ReadByte(uint8_t* b) {
    if (!Fill()) return false;
    *b = static_cast<uint8_t>(*cur_);
    ++cur_;
    --avail_;
    --remaining_;
    return true;
  }

  // Up to 10 bytes; false when the buffer ends first or the varint is longer.
  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }

  // The next n bytes as pieces (appended to *pieces), or skipped when pieces is null; false
  // when fewer than n remain.
  bool Take(size_t n, Pieces* pieces) {
    if (n > remaining_) return false;
    while (n > 0) {
      if (!Fill()) return false;
      const size_t k = std::min(n, avail_);
      if (pieces != nullptr) pieces->emplace_back(cur_, k);
      cur_ += k;
      avail_ -= k;
      remaining_ -= k;
      n -= k;
    }
    return true;
  }

  bool Append(size_t n, std::string* out) {
    Pieces pieces;
    if (!Take(n, &pieces)) return false;
    for (const auto& p : pieces) out->append(p.data(), p.size());
    return true;
  }

 private:
  bool Fill() {
    while (avail_ == 0) {
      if (remaining_ == 0 || next_ == body_.size()) return false;
      cur_ = body_[next_].data();
      avail_ = body_[next_].size();
      ++next_;
    }
    return true;
  }

  const Pieces& body_;
  size_t next_ = 0;  // the piece Fill takes next
  const char* cur_ = nullptr;
  size_t avail_ = 0;
  size_t remaining_ = 0;
};

absl::Status Truncated(const char* where, size_t offset) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed or truncated frame: ", where, " at byte ", offset));
}

// Skips (or, with `out`, copies re-encoded) one field's value of wire type `wt`.
bool SkipValue(PieceReader& r, uint32_t wt, std::string* out) {
  switch (wt) {
    case kVarint: {
      uint64_t v;
      if (!r.ReadVarint(&v)) return false;
      if (out != nullptr) AppendVarint(v, out);
      return true;
    }
    case kFixed64:
      return out != nullptr ? r.Append(8, out) : r.Take(8, nullptr);
    case kFixed32:
      return out != nullptr ? r.Append(4, out) : r.Take(4, nullptr);
    case kLengthDelimited: {
      uint64_t n;
      if (!r.ReadVarint(&n) || n > r.remaining()) return false;
      if (out != nullptr) {
        AppendVarint(n, out);
        return r.Append(static_cast<size_t>(n), out);
      }
      return r.Take(static_cast<size_t>(n), nullptr);
    }
    default:  // groups (deprecated) and invalid wire types
      return false;
  }
}

// Widens n 16-bit values at src (any alignment) into dst.
void Widen(pb::WireDtype dtype, const char* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    if (dtype == pb::WIRE_BF16) {
      const uint32_t w = static_cast<uint32_t>(bits) << 16;
      std::memcpy(&dst[i], &w, 4);
    } else {
      dst[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
    }
  }
}

// Narrows n floats into 16-bit values at dst (any alignment), rounding to nearest even.
void Narrow(pb::WireDtype dtype, const float* src, char* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t bits = dtype == pb::WIRE_BF16
                              ? Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(src[i]))
                              : Eigen::numext::bit_cast<uint16_t>(Eigen::half(src[i]));
    std::memcpy(dst + 2 * i, &bits, 2);
  }
}

// Pooled buffers, at most kPoolSize kept.
constexpr size_t kPoolSize = 64;
std::mutex pool_mu;
std::vector<std::unique_ptr<std::vector<float>>>& Pool() {
  static auto* pool = new std::vector<std::unique_ptr<std::vector<float>>>();
  return *pool;
}

}  // namespace

int WireElementBytes(pb::WireDtype dtype) {
  switch (dtype) {
    case pb::WIRE_F32:
      return 4;
    case pb::WIRE_BF16:
    case pb::WIRE_F16:
      return 2;
    default:
      return 0;
  }
}

// The wire dtypes' spellings (--wire_dtype, WireDtypeName).
constexpr EnumName<pb::WireDtype> kWireDtypeNames[] = {
    {pb::WIRE_F32, "f32"}, {pb::WIRE_BF16, "bf16"}, {pb::WIRE_F16, "fp16"}};

std::string WireDtypeName(pb::WireDtype dtype) {
  for (const auto& [value, name] : kWireDtypeNames) {
    if (value == dtype) return name;
  }
  return absl::StrCat("unknown(", static_cast<int>(dtype), ")");
}

size_t NumElements(std::span<const std::span<const float>> parts) {
  size_t n = 0;
  for (const auto& p : parts) n += p.size();
  return n;
}

absl::Status DecodePayload(const Pieces& pieces, pb::WireDtype dtype,
                           std::span<const std::span<float>> dest, absl::string_view what) {
  const int esize = WireElementBytes(dtype);
  if (esize == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unknown wire dtype ", static_cast<int>(dtype)));
  }
  size_t elements = 0;
  for (const auto& d : dest) elements += d.size();
  size_t bytes = 0;
  for (const auto& p : pieces) bytes += p.size();
  if (bytes != elements * static_cast<size_t>(esize)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": payload has ", bytes,
                                                   " bytes, expected ", elements * esize, " (",
                                                   elements, " ", WireDtypeName(dtype), ")"));
  }
  size_t part = 0;  // destination cursor
  size_t pos = 0;   // elements written into dest[part]
  auto advance = [&] {
    while (part < dest.size() && pos == dest[part].size()) {
      ++part;
      pos = 0;
    }
  };
  if (esize == 4) {  // a byte stream into the parts
    size_t byte_pos = 0;
    for (const auto& p : pieces) {
      const char* src = p.data();
      size_t left = p.size();
      while (left > 0) {
        while (part < dest.size() && byte_pos == dest[part].size_bytes()) {
          ++part;
          byte_pos = 0;
        }
        char* dst = reinterpret_cast<char*>(dest[part].data()) + byte_pos;
        const size_t k = std::min(left, dest[part].size_bytes() - byte_pos);
        std::memcpy(dst, src, k);
        src += k;
        left -= k;
        byte_pos += k;
      }
    }
    return absl::OkStatus();
  }
  char carry[2];
  bool has_carry = false;
  for (const auto& p : pieces) {
    const char* src = p.data();
    size_t left = p.size();
    if (has_carry && left > 0) {
      carry[1] = *src++;
      --left;
      advance();
      Widen(dtype, carry, &dest[part][pos], 1);
      ++pos;
      has_carry = false;
    }
    while (left >= 2) {
      advance();
      const size_t k = std::min(left / 2, dest[part].size() - pos);
      Widen(dtype, src, &dest[part][pos], k);
      pos += k;
      src += 2 * k;
      left -= 2 * k;
    }
    if (left == 1) {
      carry[0] = *src;
      has_carry = true;
    }
  }
  return absl::OkStatus();
}

void EncodePayload(std::span<const std::span<const float>> parts, pb::WireDtype dtype, char* dst) {
  const int esize = WireElementBytes(dtype);
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (esize == 4) {
      std::memcpy(dst, p.data(), p.size_bytes());
    } else {
      Narrow(dtype, p.data(), dst, p.size());
    }
    dst += p.size() * static_cast<size_t>(esize);
  }
}

PooledFloats::PooledFloats(size_t n) : size_(n) {
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    auto& pool = Pool();
    if (!pool.empty()) {
      buffer_ = std::move(pool.back());
      pool.pop_back();
    }
  }
  if (buffer_ == nullptr) buffer_ = std::make_unique<std::vector<float>>();
  if (buffer_->size() < n) buffer_->resize(n);
}

PooledFloats::~PooledFloats() {
  if (buffer_ == nullptr) return;
  std::lock_guard<std::mutex> lock(pool_mu);
  auto& pool = Pool();
  if (pool.size() < kPoolSize) pool.push_back(std::move(buffer_));
}

PooledFloats& PooledFloats::operator=(PooledFloats&& other) noexcept {
  if (this != &other) {
    PooledFloats old(std::move(*this));  // returns the old buffer to the pool
    buffer_ = std::move(other.buffer_);
    size_ = other.size_;
    other.size_ = 0;
  }
  return *this;
}

absl::StatusOr<PooledFloats> DecodeToFloats(const pb::ChunkData& meta, const Pieces& pieces) {
  const int esize = WireElementBytes(meta.wire_dtype());
  if (esize == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk ", meta.chunk(), ": unknown wire dtype ", static_cast<int>(meta.wire_dtype())));
  }
  size_t bytes = 0;
  for (const auto& p : pieces) bytes += p.size();
  if (bytes % static_cast<size_t>(esize) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", meta.chunk(), ": payload of ", bytes,
                                                   " bytes is not a whole number of ",
                                                   WireDtypeName(meta.wire_dtype()), " values"));
  }
  PooledFloats floats(bytes / static_cast<size_t>(esize));
  const std::span<float> dest[] = {floats.span()};
  absl::Status s = DecodePayload(pieces, meta.wire_dtype(), dest, "payload");
  if (!s.ok()) return s;
  return floats;
}

void BorrowPayload(std::span<const std::span<const float>> parts, OutChunk* out) {
  out->slices.clear();
  out->bytes = 0;
  out->meta.set_wire_dtype(pb::WIRE_F32);
  for (const auto& p : parts) {
    if (p.empty()) continue;
    out->slices.push_back(Slice::Borrow(p.data(), p.size_bytes()));
    out->bytes += p.size_bytes();
  }
}

void CopyPayload(std::span<const std::span<const float>> parts, pb::WireDtype dtype,
                 OutChunk* out) {
  out->slices.clear();
  out->meta.set_wire_dtype(dtype);
  out->bytes = NumElements(parts) * static_cast<size_t>(WireElementBytes(dtype));
  if (out->bytes == 0) return;
  char* data = nullptr;
  Slice slice = Slice::Allocate(out->bytes, &data);
  EncodePayload(parts, dtype, data);
  out->slices.push_back(std::move(slice));
}

size_t ChunkEntrySize(const pb::ChunkData& meta, size_t payload_bytes) {
  size_t inner = meta.ByteSizeLong();
  if (payload_bytes > 0) inner += 1 + VarintSize(payload_bytes) + payload_bytes;
  return 1 + VarintSize(inner) + inner;  // field numbers < 16: one-byte tags
}

std::optional<std::span<const float>> BorrowFloats(const pb::ChunkData& meta,
                                                   const Pieces& pieces) {
  if (meta.wire_dtype() != pb::WIRE_F32 || pieces.size() > 1) return std::nullopt;
  if (pieces.empty()) return std::span<const float>();  // no payload: no floats
  const std::span<const char> p = pieces.front();
  if (p.size() % sizeof(float) != 0 ||
      reinterpret_cast<uintptr_t>(p.data()) % alignof(float) != 0) {
    return std::nullopt;
  }
  return std::span<const float>(reinterpret_cast<const float*>(p.data()), p.size() / sizeof(float));
}

void SerializeChunks(const std::string& header_bytes, int chunk_field,
                     const std::vector<OutChunk>& chunks, std::vector<Slice>* out,
                     bool align_payloads) {
  std::vector<Slice>& slices = *out;
  slices.clear();
  slices.reserve(2 * chunks.size() + 1);
  std::string pending = header_bytes;  // small bytes not yet in a slice
  size_t sent = 0;                     // bytes already in `slices`
  constexpr uint64_t kPadTag = (uint64_t{pb::ChunkData::kPadFieldNumber} << 3) | kLengthDelimited;
  for (const OutChunk& c : chunks) {
    const std::string meta = c.meta.SerializeAsString();
    const size_t data = c.bytes > 0 ? 1 + VarintSize(c.bytes) + c.bytes : 0;
    // The entry's bytes before its payload with a pad field of `pad` bytes (-1: none).
    const auto prefix = [&](int pad) {
      const size_t pad_bytes = pad < 0 ? 0 : 2 + static_cast<size_t>(pad);
      const size_t inner = meta.size() + pad_bytes + data;
      return std::pair<size_t, size_t>(
          1 + VarintSize(inner) + meta.size() + pad_bytes + 1 + VarintSize(c.bytes), inner);
    };
    int pad = -1;
    if (align_payloads && c.bytes > 0) {
      const size_t at = sent + pending.size();
      for (int p = -1; p <= 3; ++p) {
        if ((at + prefix(p).first) % 4 == 0) {
          pad = p;
          break;
        }
      }
    }
    const size_t inner = prefix(pad).second;
    AppendVarint((static_cast<uint64_t>(chunk_field) << 3) | kLengthDelimited, &pending);
    AppendVarint(inner, &pending);
    pending += meta;
    if (pad >= 0) {
      AppendVarint(kPadTag, &pending);
      AppendVarint(static_cast<uint64_t>(pad), &pending);
      pending.append(static_cast<size_t>(pad), '\0');
    }
    if (c.bytes == 0) continue;
    AppendVarint((uint64_t{pb::ChunkData::kDataFieldNumber} << 3) | kLengthDelimited, &pending);
    AppendVarint(c.bytes, &pending);
    sent += pending.size() + c.bytes;
    slices.push_back(Slice::Own(std::move(pending)));
    pending.clear();
    for (const Slice& s : c.slices) slices.push_back(s);
  }
  if (!pending.empty()) slices.push_back(Slice::Own(std::move(pending)));
}

absl::Status ParseChunkFrame(
    const Pieces& body, int chunk_field, std::string* rest,
    const std::function<absl::Status(const pb::ChunkData& meta, const Pieces& pieces)>& on_chunk) {
  PieceReader r(body);
  const size_t total = r.remaining();
  Pieces pieces;
  while (r.remaining() > 0) {
    uint64_t tag;
    if (!r.ReadVarint(&tag)) return Truncated("field tag", r.offset(total));
    const uint64_t field = tag >> 3;
    const auto wt = static_cast<uint32_t>(tag & 7);
    if (field == 0) return Truncated("field number 0", r.offset(total));
    if (field != static_cast<uint64_t>(chunk_field) || wt != kLengthDelimited) {
      AppendVarint(tag, rest);
      if (!SkipValue(r, wt, rest)) return Truncated("field value", r.offset(total));
      continue;
    }
    uint64_t len;
    if (!r.ReadVarint(&len) || len > r.remaining()) {
      return Truncated("chunk entry length", r.offset(total));
    }
    const size_t end = r.remaining() - static_cast<size_t>(len);
    pb::ChunkData meta;
    pieces.clear();
    while (r.remaining() > end) {
      uint64_t t;
      if (!r.ReadVarint(&t)) return Truncated("chunk field tag", r.offset(total));
      const uint64_t f = t >> 3;
      const auto w = static_cast<uint32_t>(t & 7);
      uint64_t v = 0;
      if (f == pb::ChunkData::kDataFieldNumber && w == kLengthDelimited) {
        if (!r.ReadVarint(&v) || v > r.remaining() - end) {
          return Truncated(("payload length of chunk " + std::to_string(meta.chunk())).c_str(),
                           r.offset(total));
        }
        pieces.clear();  // protobuf: the last occurrence wins
        if (!r.Take(static_cast<size_t>(v), &pieces)) {
          return Truncated("payload", r.offset(total));
        }
      } else if (w == kVarint && (f == pb::ChunkData::kChunkFieldNumber ||
                                  f == pb::ChunkData::kStepFieldNumber ||
                                  f == pb::ChunkData::kWireDtypeFieldNumber)) {
        if (!r.ReadVarint(&v)) return Truncated("chunk field", r.offset(total));
        if (f == pb::ChunkData::kChunkFieldNumber) meta.set_chunk(static_cast<int32_t>(v));
        if (f == pb::ChunkData::kStepFieldNumber) meta.set_step(static_cast<int64_t>(v));
        if (f == pb::ChunkData::kWireDtypeFieldNumber) {
          meta.set_wire_dtype(static_cast<pb::WireDtype>(static_cast<int32_t>(v)));
        }
      } else if (!SkipValue(r, w, nullptr)) {
        return Truncated("chunk field", r.offset(total));
      }
      if (r.remaining() < end) return Truncated("chunk entry overrun", r.offset(total));
    }
    if (absl::Status s = on_chunk(meta, pieces); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::runtime

namespace fulcrum::pb {

bool AbslParseFlag(absl::string_view text, WireDtype* dtype, std::string* error) {
  return ParseEnum(text, runtime::kWireDtypeNames, dtype, error);
}

std::string AbslUnparseFlag(WireDtype dtype) {
  return UnparseEnum(dtype, runtime::kWireDtypeNames);
}

}  // namespace fulcrum::pb
