#include "transport/grpc_slices.h"

#include <chrono>
#include <memory>
#include <string>

namespace fulcrum::transport {
namespace {

// gRPC's destroy callback of a shared slice: lets go of the block.
void ReleaseBlock(void* owner) { delete static_cast<std::shared_ptr<const void>*>(owner); }

}  // namespace

grpc::ByteBuffer ToByteBuffer(const std::vector<Slice>& slices) {
  std::vector<grpc::Slice> out;
  out.reserve(slices.size());
  for (const Slice& s : slices) {
    void* data = const_cast<char*>(s.data());
    if (s.owner() == nullptr) {
      out.emplace_back(data, s.size(), grpc::Slice::STATIC_SLICE);
    } else {
      out.emplace_back(data, s.size(), &ReleaseBlock, new std::shared_ptr<const void>(s.owner()));
    }
  }
  return grpc::ByteBuffer(out.data(), out.size());
}

Pieces PiecesOf(const grpc::ByteBuffer& buffer, std::vector<grpc::Slice>* keep) {
  keep->clear();
  Pieces pieces;
  if (!buffer.Dump(keep).ok()) return pieces;
  for (const grpc::Slice& s : *keep) {
    if (s.size() > 0) pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return pieces;
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::Time CallDeadline(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

}  // namespace fulcrum::transport
