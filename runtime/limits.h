// runtime: size limits shared by the PS logic and the gRPC transport, with no gRPC include
// (ps::Shard checks against them without linking the transport's headers).
// Thread-safety: constants only.
#pragma once

namespace fulcrum::runtime {

// gRPC's 4 MiB default receive limit is too small for a big pull reply; Fulcrum's messages
// are bounded by the chunk size, this is the hard ceiling on both sides.
inline constexpr int kMaxMessageBytes = 256 << 20;

}  // namespace fulcrum::runtime
