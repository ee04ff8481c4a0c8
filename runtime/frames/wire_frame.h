// runtime: the zero-copy form of the PS contract's data messages (PushRequest, PullResponse,
// PushResponse). On the wire they are exactly the protobuf messages of proto/ps.proto, so a
// client or server using the generated classes talks to this path unchanged; what differs is
// where the chunk payloads (ChunkData.data) live:
//   - sending: an OutFrame holds the message without its chunk list plus, per chunk, its meta
//     (chunk, step, wire_dtype) and its payload as transport::Slices. A worker's float32 gradients
//     are static slices over the tensor memory itself (no copy; the memory must stay unchanged
//     until the call completes); the ps copies a chunk's values once, under the chunk's lock,
//     into one owned slice (16-bit encodings are narrowed in that same pass).
//   - receiving: an InFrame is parsed straight from the transport's buffers: the header fields
//     through protobuf, each chunk's payload handed as the pieces of those buffers it lies in
//     to a sink that writes it into its destination (a worker: the model's tensors; the ps:
//     one pooled float buffer per chunk, 16-bit payloads widened on the way).
// Frames know no transport: they serialize to Slices and parse from Pieces, the buffer types
// of transport/ (data_channel.h), which carries them without looking inside.
//
// Bad input: a truncated or malformed frame, a payload whose byte length does not fit its
// dtype or destination, an unknown wire dtype: a clear InvalidArgument naming the chunk; the
// parse stops there and nothing of the frame reaches the caller's variables (the ps validates
// every chunk before applying any).
// Thread-safety: frames are plain values, one call at a time; the pool is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/ps.pb.h"
#include "transport/slice.h"

namespace fulcrum::runtime {

// The frames' buffers are the transport's.
using transport::Pieces;
using transport::Slice;

// Bytes per element of a wire dtype; 0 for a value this build does not know.
int WireElementBytes(pb::WireDtype dtype);
// "f32", "bf16", "fp16"; "unknown(<n>)" otherwise.
std::string WireDtypeName(pb::WireDtype dtype);

// Writes the floats a payload of `dtype` holds into `dest` (parts in order), widening 16-bit
// values. InvalidArgument naming `what` when the dtype is unknown or the payload's byte length
// is not exactly the parts' elements in that dtype; `dest` is untouched then.
absl::Status DecodePayload(const Pieces& pieces, pb::WireDtype dtype,
                           std::span<const std::span<float>> dest, absl::string_view what);
// Writes the parts' floats in `dtype` to dst (elements × WireElementBytes(dtype) bytes).
void EncodePayload(std::span<const std::span<const float>> parts, pb::WireDtype dtype, char* dst);
// Total elements of the parts.
size_t NumElements(std::span<const std::span<const float>> parts);

// A float buffer reused across calls (the ps's decoded gradients): taken from a process-wide
// pool, given back on destruction, so steady traffic allocates nothing.
class PooledFloats {
 public:
  PooledFloats() = default;
  explicit PooledFloats(size_t n);
  ~PooledFloats();
  PooledFloats(PooledFloats&& other) noexcept = default;
  PooledFloats& operator=(PooledFloats&& other) noexcept;
  std::span<float> span() { return {buffer_ ? buffer_->data() : nullptr, size_}; }
  std::span<const float> span() const { return {buffer_ ? buffer_->data() : nullptr, size_}; }

 private:
  std::unique_ptr<std::vector<float>> buffer_;
  size_t size_ = 0;
};

// One chunk of an outgoing frame.
struct OutChunk {
  pb::ChunkData meta;               // chunk, step, wire_dtype; its data stays empty
  std::vector<Slice> slices;        // the payload, in order
  size_t bytes = 0;                 // the payload's length
};

// The parts as the chunk's payload without copying (float32 only): static slices over the
// parts' memory, which must stay unchanged until the call that sends them completes.
void BorrowPayload(std::span<const std::span<const float>> parts, OutChunk* out);
// The parts copied (and narrowed to `dtype`) into one slice the frame owns.
void CopyPayload(std::span<const std::span<const float>> parts, pb::WireDtype dtype,
                 OutChunk* out);

// The repeated ChunkData field of each data message.
inline google::protobuf::RepeatedPtrField<pb::ChunkData>* ChunkList(pb::PushRequest* m) {
  return m->mutable_gradients();
}
inline google::protobuf::RepeatedPtrField<pb::ChunkData>* ChunkList(pb::PullResponse* m) {
  return m->mutable_chunks();
}
inline google::protobuf::RepeatedPtrField<pb::ChunkData>* ChunkList(pb::PushResponse* m) {
  return m->mutable_values();
}
inline int ChunkField(const pb::PushRequest*) { return pb::PushRequest::kGradientsFieldNumber; }
inline int ChunkField(const pb::PullResponse*) { return pb::PullResponse::kChunksFieldNumber; }
inline int ChunkField(const pb::PushResponse*) { return pb::PushResponse::kValuesFieldNumber; }

// An outgoing data message: `header` with its chunk list empty, and the chunks.
template <typename Header>
struct OutFrame {
  Header header;
  std::vector<OutChunk> chunks;
  // The serialized size (equal to the generated message's with the same content).
  size_t ByteSize() const;
};

// Parses a serialized data message: the fields other than the chunk list (field number
// `chunk_field`) are appended, re-encoded, to *rest (for the header's protobuf parse); each
// chunk's meta and payload pieces go to `on_chunk`, whose error stops the parse. The frame's
// first problem is InvalidArgument naming the byte offset or chunk.
absl::Status ParseChunkFrame(
    const Pieces& body, int chunk_field, std::string* rest,
    const std::function<absl::Status(const pb::ChunkData& meta, const Pieces& pieces)>& on_chunk);
// The serialized size of a chunk list entry carrying `payload_bytes` of data.
size_t ChunkEntrySize(const pb::ChunkData& meta, size_t payload_bytes);

// An incoming data message: `header` with the chunk metas (their data empty).
template <typename Header>
struct InFrame {
  using Sink = std::function<absl::Status(const pb::ChunkData& meta, const Pieces& pieces)>;
  Header header;
  // Where each chunk's payload goes (a worker's reply: into the model's tensors); set before
  // the call, run on a gRPC thread while the reply is parsed. Without one (the ps), each
  // payload is decoded into `floats`, in the header's chunk order.
  Sink sink;
  std::vector<PooledFloats> floats;
  // Without a sink: each chunk's floats in header order (into `floats`, or, with
  // borrow_aligned_f32, straight into the parsed buffer for a float32 payload that lies in one
  // piece at a 4-byte aligned address: that buffer must then outlive the use of `values`).
  bool borrow_aligned_f32 = false;
  std::vector<std::span<const float>> values;
  absl::Status error;  // the parse's first problem (OK when the frame was whole)
  size_t bytes = 0;    // the serialized size

  // Parses `body` into this frame (clearing what it held before).
  absl::Status Parse(const Pieces& body);
  // Takes `out` as this frame without serializing it (the in-process transport): the header
  // and chunk metas copied, each chunk's payload slices handed over as its pieces, as Parse
  // would hand them (so a borrowed float32 payload points into out's slices).
  absl::Status Deliver(const OutFrame<Header>& out);

 private:
  // One parsed chunk: its payload to the sink, borrowed, or decoded into `floats`.
  absl::Status TakeChunk(const pb::ChunkData& meta, const Pieces& pieces);
};

// Decodes a payload into pooled floats (the ps's gradients): element count from its length.
absl::StatusOr<PooledFloats> DecodeToFloats(const pb::ChunkData& meta, const Pieces& pieces);
// The payload's floats in place: a float32 payload in one piece, at a 4-byte aligned address,
// of a whole number of floats (or none at all); nullopt otherwise (DecodeToFloats then).
std::optional<std::span<const float>> BorrowFloats(const pb::ChunkData& meta, const Pieces& pieces);

template <typename Header>
size_t OutFrame<Header>::ByteSize() const {
  size_t n = header.ByteSizeLong();
  for (const OutChunk& c : chunks) n += ChunkEntrySize(c.meta, c.bytes);
  return n;
}

template <typename Header>
absl::Status InFrame<Header>::TakeChunk(const pb::ChunkData& meta, const Pieces& pieces) {
  if (sink) return sink(meta, pieces);
  if (borrow_aligned_f32) {
    if (auto borrowed = BorrowFloats(meta, pieces)) {
      values.push_back(*borrowed);
      return absl::OkStatus();
    }
  }
  absl::StatusOr<PooledFloats> f = DecodeToFloats(meta, pieces);
  if (!f.ok()) return f.status();
  floats.push_back(std::move(*f));
  values.push_back(floats.back().span());
  return absl::OkStatus();
}

template <typename Header>
absl::Status InFrame<Header>::Parse(const Pieces& body) {
  header.Clear();
  floats.clear();
  values.clear();
  bytes = 0;
  for (const auto& p : body) bytes += p.size();
  std::string rest;
  auto* list = ChunkList(&header);
  std::vector<pb::ChunkData> metas;
  error = ParseChunkFrame(body, ChunkField(&header), &rest,
                          [&](const pb::ChunkData& meta, const Pieces& pieces) -> absl::Status {
                            metas.push_back(meta);
                            return TakeChunk(meta, pieces);
                          });
  if (error.ok() && !header.ParseFromString(rest)) {
    error = absl::InvalidArgumentError("the message's fields do not parse as protobuf");
  }
  list->Clear();  // a generated parse of `rest` holds none; metas are ours
  for (pb::ChunkData& m : metas) *list->Add() = std::move(m);
  return error;
}

template <typename Header>
absl::Status InFrame<Header>::Deliver(const OutFrame<Header>& out) {
  header = out.header;
  floats.clear();
  values.clear();
  bytes = out.ByteSize();
  error = absl::OkStatus();
  auto* list = ChunkList(&header);
  list->Clear();
  for (const OutChunk& c : out.chunks) {
    Pieces pieces;
    for (const Slice& s : c.slices) {
      if (!s.empty()) pieces.emplace_back(s.data(), s.size());
    }
    *list->Add() = c.meta;
    error = TakeChunk(c.meta, pieces);
    if (!error.ok()) break;
  }
  return error;
}

// Serializes a frame's parts into *out: the header's bytes, then per chunk a small prefix and
// its payload slices (referenced, not copied). With `align_payloads`, each chunk entry gets a
// ChunkData.pad field of 2–5 bytes where needed so that its payload starts at a multiple of 4
// bytes from the message's start.
void SerializeChunks(const std::string& header_bytes, int chunk_field,
                     const std::vector<OutChunk>& chunks, std::vector<Slice>* out,
                     bool align_payloads = false);

// The same for a whole frame.
template <typename Header>
void SerializeFrame(const OutFrame<Header>& frame, std::vector<Slice>* out,
                    bool align_payloads = false) {
  SerializeChunks(frame.header.SerializeAsString(), ChunkField(&frame.header), frame.chunks, out,
                  align_payloads);
}

}  // namespace fulcrum::runtime

namespace fulcrum::pb {

// --wire_dtype's spellings, f32, bf16 and fp16 (WireDtypeName's), parsed by Abseil.
bool AbslParseFlag(absl::string_view text, WireDtype* dtype, std::string* error);
std::string AbslUnparseFlag(WireDtype dtype);

}  // namespace fulcrum::pb
