// transport: size limits shared by the PS logic and the transports, with no gRPC include
// (ps::Shard checks against them without linking the transport's headers).
// Thread-safety: constants only.
#pragma once

namespace fulcrum::transport {

// gRPC's 4 MiB default receive limit is too small for a big pull reply; Fulcrum's messages
// are bounded by the chunk size, this is the hard ceiling on both sides.
inline constexpr int kMaxMessageBytes = 256 << 20;

// The memory a server's gRPC transport may hold for the requests it is receiving (every
// Fulcrum server: ps, chief, worker). Requests that would take it past this are refused
// with RESOURCE_EXHAUSTED; room for two messages at the ceiling above. Each request a handler
// takes is parsed once more, so a flood of large requests peaks at about twice this (16
// requests of 200 MiB at once: tests/cluster/hostile_client_test.cc).
inline constexpr long long kServerMemoryQuota = 512LL << 20;

}  // namespace fulcrum::transport
