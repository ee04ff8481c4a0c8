// runtime/chunk_plan: cutting a PS shard's variables into chunks of at most chunk_bytes.
#include "runtime/cluster/chunk_plan.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace fulcrum::runtime {
namespace {

// Every element of every variable is in exactly one segment, in shard order; chunks respect
// the capacity, are non-empty and (all but the last) full.
void ExpectValidPlan(const std::vector<int64_t>& elements, int64_t chunk_bytes,
                     const std::vector<Chunk>& chunks) {
  const int64_t capacity = std::max<int64_t>(1, chunk_bytes / 4);
  int64_t total = 0;
  for (int64_t e : elements) total += e;
  std::vector<int64_t> next(elements.size(), 0);  // next uncovered element per variable
  int last_variable = -1;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& chunk = chunks[c];
    SCOPED_TRACE(c);
    EXPECT_GT(chunk.num_elements, 0);
    EXPECT_LE(chunk.num_elements, capacity);
    if (c + 1 < chunks.size()) {
      EXPECT_EQ(chunk.num_elements, capacity);
    }
    int64_t sum = 0;
    for (const Segment& s : chunk.segments) {
      ASSERT_GE(s.variable, 0);
      ASSERT_LT(static_cast<size_t>(s.variable), elements.size());
      EXPECT_GT(s.count, 0);
      EXPECT_GE(s.variable, last_variable);  // shard order
      last_variable = s.variable;
      EXPECT_EQ(s.offset, next[static_cast<size_t>(s.variable)]);
      next[static_cast<size_t>(s.variable)] += s.count;
      sum += s.count;
    }
    EXPECT_EQ(sum, chunk.num_elements);
  }
  for (size_t v = 0; v < elements.size(); ++v) EXPECT_EQ(next[v], elements[v]) << v;
  EXPECT_EQ(static_cast<int64_t>(chunks.size()), (total + capacity - 1) / capacity);
}

TEST(ChunkPlanTest, SmallVariablesShareAChunk) {
  const std::vector<int64_t> elements = {10, 20, 30};
  const auto chunks = PlanChunks(elements, 4096);
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_EQ(chunks[0].segments.size(), 3u);
  EXPECT_EQ(chunks[0].num_elements, 60);
  for (int v = 0; v < 3; ++v) {
    EXPECT_EQ(chunks[0].segments[static_cast<size_t>(v)].variable, v);
    EXPECT_EQ(chunks[0].segments[static_cast<size_t>(v)].offset, 0);
  }
  ExpectValidPlan(elements, 4096, chunks);
}

TEST(ChunkPlanTest, BigVariableSpansChunks) {
  const std::vector<int64_t> elements = {2500};
  const auto chunks = PlanChunks(elements, 4000);  // 1000 floats per chunk
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].segments[0].offset, 0);
  EXPECT_EQ(chunks[1].segments[0].offset, 1000);
  EXPECT_EQ(chunks[2].segments[0].offset, 2000);
  EXPECT_EQ(chunks[2].num_elements, 500);
  ExpectValidPlan(elements, 4000, chunks);
}

TEST(ChunkPlanTest, ChunksFillAcrossVariableBoundaries) {
  const std::vector<int64_t> elements = {7, 1, 12, 3, 9};
  const auto chunks = PlanChunks(elements, 5 * 4);
  ExpectValidPlan(elements, 5 * 4, chunks);
  ASSERT_EQ(chunks.size(), 7u);
  // Chunk 1 holds variable 0's last 2 elements, variable 1 and 2 elements of variable 2.
  ASSERT_EQ(chunks[1].segments.size(), 3u);
  EXPECT_EQ(chunks[1].segments[0].variable, 0);
  EXPECT_EQ(chunks[1].segments[0].offset, 5);
  EXPECT_EQ(chunks[1].segments[0].count, 2);
  EXPECT_EQ(chunks[1].segments[1].variable, 1);
  EXPECT_EQ(chunks[1].segments[2].variable, 2);
  EXPECT_EQ(chunks[1].segments[2].count, 2);
}

TEST(ChunkPlanTest, ZeroElementVariablesGetNoSegment) {
  const std::vector<int64_t> elements = {0, 4, 0, 0, 3, 0};
  const auto chunks = PlanChunks(elements, 1 << 20);
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_EQ(chunks[0].segments.size(), 2u);
  EXPECT_EQ(chunks[0].segments[0].variable, 1);
  EXPECT_EQ(chunks[0].segments[1].variable, 4);
  ExpectValidPlan(elements, 1 << 20, chunks);
}

TEST(ChunkPlanTest, NothingToPlan) {
  EXPECT_TRUE(PlanChunks({}, 1024).empty());
  const std::vector<int64_t> zeros = {0, 0};
  EXPECT_TRUE(PlanChunks(zeros, 1024).empty());
}

TEST(ChunkPlanTest, TinyChunkBytesMeansOneElementPerChunk) {
  const std::vector<int64_t> elements = {2, 1};
  for (int64_t bytes : {int64_t{3}, int64_t{1}, int64_t{0}, int64_t{-8}}) {
    SCOPED_TRACE(bytes);
    const auto chunks = PlanChunks(elements, bytes);
    ASSERT_EQ(chunks.size(), 3u);
    for (const Chunk& c : chunks) EXPECT_EQ(c.num_elements, 1);
    ExpectValidPlan(elements, bytes, chunks);
  }
}

TEST(ChunkPlanTest, NonMultipleOfFourRoundsDown) {
  const std::vector<int64_t> elements = {10};
  const auto chunks = PlanChunks(elements, 11);  // 2 floats
  ASSERT_EQ(chunks.size(), 5u);
  ExpectValidPlan(elements, 11, chunks);
}

TEST(ChunkPlanTest, DefaultChunkBytesOnAModel) {
  // VGG16-like: large conv and fc kernels among small biases.
  const std::vector<int64_t> elements = {1728, 64, 36864, 64, 25088 * 4096, 4096,
                                         4096 * 4096, 4096, 4096 * 10, 10};
  const auto chunks = PlanChunks(elements, kDefaultChunkBytes);
  ExpectValidPlan(elements, kDefaultChunkBytes, chunks);
  EXPECT_GT(chunks.size(), 100u);
}

TEST(ChunkPlanTest, Deterministic) {
  const std::vector<int64_t> elements = {5, 100, 3, 77, 0, 1000};
  const auto a = PlanChunks(elements, 64);
  const auto b = PlanChunks(elements, 64);
  ASSERT_EQ(a.size(), b.size());
  for (size_t c = 0; c < a.size(); ++c) {
    ASSERT_EQ(a[c].segments.size(), b[c].segments.size());
    EXPECT_EQ(a[c].num_elements, b[c].num_elements);
    for (size_t s = 0; s < a[c].segments.size(); ++s) {
      EXPECT_EQ(a[c].segments[s].variable, b[c].segments[s].variable);
      EXPECT_EQ(a[c].segments[s].offset, b[c].segments[s].offset);
      EXPECT_EQ(a[c].segments[s].count, b[c].segments[s].count);
    }
  }
}

}  // namespace
}  // namespace fulcrum::runtime
