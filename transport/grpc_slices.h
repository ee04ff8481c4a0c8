// transport: Slices on gRPC. A Slice becomes a grpc::Slice without a copy (a borrowed one as a
// static slice, a shared one holding its block until gRPC lets it go); a received ByteBuffer
// is read in place as Pieces; statuses and deadlines convert.
// Thread-safety: plain functions over values.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "transport/slice.h"

namespace fulcrum::transport {

// The slices as one ByteBuffer, referenced, not copied.
grpc::ByteBuffer ToByteBuffer(const std::vector<Slice>& slices);
// The buffer's pieces; *keep holds the slices they lie in and must outlive the pieces.
Pieces PiecesOf(const grpc::ByteBuffer& buffer, std::vector<grpc::Slice>* keep);
// absl::Status -> grpc::Status and back (same code and message).
grpc::Status ToGrpc(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);
// The deadline of the call a server handler serves (InfiniteFuture when the client set
// none), so that a wait inside the handler never outlives the call.
absl::Time CallDeadline(const grpc::ServerContext& context);

}  // namespace fulcrum::transport
