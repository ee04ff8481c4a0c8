// runtime: the data path's frames (runtime/wire_frame.h) on gRPC. Slices become grpc::Slices
// without a copy (a borrowed one as a static slice, a shared one holding its block until gRPC
// lets it go), a received ByteBuffer is parsed from its slices in place, and the
// grpc::SerializationTraits at the end make the frames usable as request and response types
// of gRPC calls (runtime/grpc_ps_client.cc, ps/service.cc). Nothing else of the data path
// knows gRPC's types.
// Thread-safety: plain functions over values.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "grpcpp/impl/serialization_traits.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "runtime/slice.h"
#include "runtime/wire_frame.h"

namespace fulcrum::runtime {

// The slices as one ByteBuffer, referenced, not copied.
grpc::ByteBuffer ToByteBuffer(const std::vector<Slice>& slices);
// The buffer's pieces; *keep holds the slices they lie in and must outlive the pieces.
Pieces PiecesOf(grpc::ByteBuffer* buffer, std::vector<grpc::Slice>* keep);
// absl::Status -> grpc::Status (same code and message).
grpc::Status FrameStatus(const absl::Status& s);

}  // namespace fulcrum::runtime

namespace grpc {

template <typename Header>
class SerializationTraits<fulcrum::runtime::OutFrame<Header>> {
 public:
  static Status Serialize(const fulcrum::runtime::OutFrame<Header>& frame, ByteBuffer* buffer,
                          bool* own_buffer) {
    std::vector<fulcrum::runtime::Slice> slices;
    fulcrum::runtime::SerializeFrame(frame, &slices);
    ByteBuffer out = fulcrum::runtime::ToByteBuffer(slices);
    buffer->Swap(&out);
    *own_buffer = true;
    return Status::OK;
  }
};

template <typename Header>
class SerializationTraits<fulcrum::runtime::InFrame<Header>> {
 public:
  static Status Deserialize(ByteBuffer* buffer, fulcrum::runtime::InFrame<Header>* frame) {
    std::vector<Slice> keep;
    const absl::Status s = frame->Parse(fulcrum::runtime::PiecesOf(buffer, &keep));
    keep.clear();
    buffer->Clear();
    return fulcrum::runtime::FrameStatus(s);
  }
};

}  // namespace grpc
