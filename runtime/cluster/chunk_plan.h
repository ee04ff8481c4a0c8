// runtime: how a PS shard is cut into chunks. A chunk is a run of at most chunk_bytes of the
// shard's variables laid end to end (small variables share a chunk, big ones span several);
// it is the unit of one RPC, of the PS's locking and of sync-mode aggregation. The PS and
// every worker compute the same plan from the same shard definition, so only chunk ids and
// raw bytes travel.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fulcrum::runtime {

// Default chunk size: large enough to amortise an RPC, small enough that gRPC stays in its
// fast regime (1–4 MiB messages, docs/benchmarking.md) and pieces go out in parallel.
inline constexpr int64_t kDefaultChunkBytes = int64_t{2} << 20;
// The most chunks a shard may be cut into: each is a PS-side state (a lock, counters, its
// plan), so a tiny chunk_bytes on a big shard must be refused before any exists (65,536
// chunks of the default size hold 128 GiB).
inline constexpr int64_t kMaxChunks = int64_t{1} << 16;

// Elements [offset, offset + count) of shard variable `variable`.
struct Segment {
  int variable = 0;
  int64_t offset = 0;
  int64_t count = 0;
};

struct Chunk {
  std::vector<Segment> segments;  // in shard order
  int64_t num_elements = 0;       // sum of the segments' counts
};

// Cuts variables (element counts, shard order) into chunks of at most
// max(1, chunk_bytes / 4) elements, filling each chunk before starting the next.
// Zero-element variables get no segment. Deterministic.
std::vector<Chunk> PlanChunks(std::span<const int64_t> variable_elements, int64_t chunk_bytes);

}  // namespace fulcrum::runtime
