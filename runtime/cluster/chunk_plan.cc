#include "runtime/cluster/chunk_plan.h"

#include <algorithm>

namespace fulcrum::runtime {

std::vector<Chunk> PlanChunks(std::span<const int64_t> variable_elements, int64_t chunk_bytes) {
  const int64_t capacity = std::max<int64_t>(1, chunk_bytes / static_cast<int64_t>(sizeof(float)));
  std::vector<Chunk> chunks;
  Chunk current;
  for (size_t v = 0; v < variable_elements.size(); ++v) {
    int64_t offset = 0;
    const int64_t total = variable_elements[v];
    while (offset < total) {
      const int64_t take = std::min(total - offset, capacity - current.num_elements);
      current.segments.push_back({static_cast<int>(v), offset, take});
      current.num_elements += take;
      offset += take;
      if (current.num_elements == capacity) {
        chunks.push_back(std::move(current));
        current = Chunk();
      }
    }
  }
  if (current.num_elements > 0) chunks.push_back(std::move(current));
  return chunks;
}

}  // namespace fulcrum::runtime
