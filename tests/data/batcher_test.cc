#include "data/batcher.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::data {
namespace {

using ::testing::HasSubstr;

// N examples of 3 floats; example i holds (i, i + 0.25, i + 0.5) and label i % 10, so a batch
// row tells which example it came from.
Dataset Numbered(int64_t n) {
  Dataset dataset;
  dataset.name = "numbered/train";
  dataset.num_classes = 10;
  dataset.images = ops::Tensor::Zeros(ops::Shape({n, 3}));
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) {
      dataset.images.data()[i * 3 + j] = static_cast<float>(i) + 0.25f * static_cast<float>(j);
    }
    dataset.labels.push_back(static_cast<int32_t>(i % 10));
  }
  return dataset;
}

BatcherOptions Options(int64_t batch_size, int worker = 0, int workers = 1) {
  BatcherOptions options;
  options.batch_size = batch_size;
  options.worker_index = worker;
  options.num_workers = workers;
  return options;
}

Batcher MustCreate(const Dataset& dataset, const BatcherOptions& options) {
  absl::StatusOr<Batcher> batcher = Batcher::Create(&dataset, options);
  EXPECT_TRUE(batcher.ok()) << batcher.status();
  return *std::move(batcher);
}

// Draws one batch and returns the example indices it holds, checking rows and labels agree.
std::vector<int64_t> DrawIndices(Batcher& batcher, const Dataset& dataset) {
  ops::Tensor images;
  std::vector<int32_t> labels(static_cast<size_t>(batcher.batch_size()));
  batcher.Next(&images, labels);
  EXPECT_EQ(images.shape(), batcher.batch_shape());
  std::vector<int64_t> indices;
  for (int64_t k = 0; k < batcher.batch_size(); ++k) {
    const float* row = images.data() + k * 3;
    const auto i = static_cast<int64_t>(row[0]);
    EXPECT_FLOAT_EQ(row[2], static_cast<float>(i) + 0.5f);
    EXPECT_EQ(labels[static_cast<size_t>(k)], dataset.labels[static_cast<size_t>(i)]);
    indices.push_back(i);
  }
  return indices;
}

std::vector<int64_t> DrawEpoch(Batcher& batcher, const Dataset& dataset) {
  std::vector<int64_t> all;
  for (int64_t s = 0; s < batcher.steps_per_epoch(); ++s) {
    std::vector<int64_t> batch = DrawIndices(batcher, dataset);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  return all;
}

std::vector<int64_t> Sorted(std::span<const int64_t> v) {
  std::vector<int64_t> out(v.begin(), v.end());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SubsetAndRepeatTest, KeepsPrefixAndRepeats) {
  EXPECT_EQ(*SubsetAndRepeat(5, 0, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(*SubsetAndRepeat(5, 3, 2), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(SubsetAndRepeat(5, 6, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SubsetAndRepeat(5, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShardOfTest, TilesWithSizesWithinOne) {
  for (int workers = 1; workers <= 7; ++workers) {
    int64_t next = 0;
    for (int w = 0; w < workers; ++w) {
      const ShardRange range = ShardOf(100, w, workers);
      EXPECT_EQ(range.begin, next);
      const int64_t size = range.end - range.begin;
      EXPECT_TRUE(size == 100 / workers || size == 100 / workers + 1) << size;
      next = range.end;
    }
    EXPECT_EQ(next, 100);
  }
}

TEST(BatcherTest, ShardsAreDisjointAndCoverTheLogicalList) {
  const Dataset dataset = Numbered(103);
  for (int workers : {1, 2, 3, 4}) {
    BatcherOptions options = Options(8, 0, workers);
    options.subset = 50;
    options.repeat = 3;
    std::vector<int64_t> all;
    std::vector<int64_t> sizes;
    for (int w = 0; w < workers; ++w) {
      options.worker_index = w;
      Batcher batcher = MustCreate(dataset, options);
      sizes.push_back(batcher.shard_size());
      all.insert(all.end(), batcher.shard_indices().begin(), batcher.shard_indices().end());
    }
    // Concatenated in worker order, the shards are exactly the logical list (disjoint blocks).
    EXPECT_EQ(all, *SubsetAndRepeat(103, 50, 3)) << workers;
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    EXPECT_LE(*hi - *lo, 1);
  }
}

TEST(BatcherTest, DisjointExamplesWithoutRepeat) {
  const Dataset dataset = Numbered(40);
  std::set<int64_t> seen;
  for (int w = 0; w < 4; ++w) {
    Batcher batcher = MustCreate(dataset, Options(5, w, 4));
    EXPECT_EQ(batcher.shard_size(), 10);
    for (int64_t i : DrawEpoch(batcher, dataset)) EXPECT_TRUE(seen.insert(i).second) << i;
  }
  EXPECT_EQ(seen.size(), 40u);
}

TEST(BatcherTest, EveryExampleOncePerEpochAndEpochAdvances) {
  const Dataset dataset = Numbered(60);
  Batcher batcher = MustCreate(dataset, Options(6, 1, 2));  // shard of 30 = 5 batches
  EXPECT_EQ(batcher.steps_per_epoch(), 5);
  const std::vector<int64_t> shard = Sorted(batcher.shard_indices());
  std::vector<int64_t> previous;
  for (int64_t e = 0; e < 3; ++e) {
    EXPECT_EQ(batcher.epoch(), e);
    std::vector<int64_t> epoch;
    for (int64_t s = 0; s < batcher.steps_per_epoch(); ++s) {
      EXPECT_EQ(batcher.epoch(), e);
      std::vector<int64_t> batch = DrawIndices(batcher, dataset);
      epoch.insert(epoch.end(), batch.begin(), batch.end());
    }
    EXPECT_EQ(batcher.epoch(), e + 1);
    EXPECT_EQ(Sorted(epoch), shard);
    EXPECT_NE(epoch, previous);  // reshuffled each epoch
    previous = epoch;
  }
}

TEST(BatcherTest, RemainderIsDroppedWithoutDuplicates) {
  const Dataset dataset = Numbered(23);
  Batcher batcher = MustCreate(dataset, Options(5));
  EXPECT_EQ(batcher.steps_per_epoch(), 4);
  std::vector<int64_t> epoch = DrawEpoch(batcher, dataset);
  EXPECT_EQ(epoch.size(), 20u);
  EXPECT_EQ(std::set<int64_t>(epoch.begin(), epoch.end()).size(), 20u);
  EXPECT_EQ(batcher.epoch(), 1);
}

TEST(BatcherTest, ShuffleIsAFunctionOfSeedWorkerAndEpoch) {
  const Dataset dataset = Numbered(64);
  BatcherOptions options = Options(4, 0, 2);
  Batcher a = MustCreate(dataset, options);
  Batcher b = MustCreate(dataset, options);
  const std::vector<int64_t> a0 = DrawEpoch(a, dataset);
  const std::vector<int64_t> a1 = DrawEpoch(a, dataset);
  EXPECT_EQ(a0, DrawEpoch(b, dataset));
  EXPECT_EQ(a1, DrawEpoch(b, dataset));
  EXPECT_NE(a0, a1);

  options.seed = 2;
  Batcher c = MustCreate(dataset, options);
  EXPECT_NE(DrawEpoch(c, dataset), a0);

  options.shuffle = false;
  Batcher d = MustCreate(dataset, options);
  const std::vector<int64_t> in_order = DrawEpoch(d, dataset);
  EXPECT_EQ(in_order, std::vector<int64_t>(d.shard_indices().begin(), d.shard_indices().end()));
  EXPECT_EQ(DrawEpoch(d, dataset), in_order);
}

TEST(BatcherTest, SubsetAndRepeatChangeShardSize) {
  const Dataset dataset = Numbered(100);
  BatcherOptions options = Options(4, 0, 3);
  EXPECT_EQ(MustCreate(dataset, options).shard_size(), 34);  // 100 = 34 + 33 + 33
  options.subset = 30;
  EXPECT_EQ(MustCreate(dataset, options).shard_size(), 10);
  options.repeat = 4;
  Batcher batcher = MustCreate(dataset, options);
  EXPECT_EQ(batcher.shard_size(), 40);
  EXPECT_EQ(batcher.steps_per_epoch(), 10);
  std::map<int64_t, int> counts;
  for (int64_t i : DrawEpoch(batcher, dataset)) {
    EXPECT_LT(i, 30);
    ++counts[i];
  }
  int64_t total = 0;
  for (const auto& [i, n] : counts) total += n;
  EXPECT_EQ(total, 40);
}

TEST(BatcherTest, FillsCallerTensorOfAnyShapeWithRightSize) {
  const Dataset dataset = Numbered(16);
  Batcher batcher = MustCreate(dataset, Options(4));
  ops::Tensor images = ops::Tensor::Zeros(ops::Shape({4, 1, 3}));
  const float* storage = images.data();
  std::vector<int32_t> labels(4);
  batcher.Next(&images, labels);
  EXPECT_EQ(images.data(), storage);  // written in place, not reallocated
  EXPECT_EQ(images.shape(), ops::Shape({4, 1, 3}));
  for (int k = 0; k < 4; ++k) {
    const auto i = static_cast<int64_t>(images.data()[k * 3]);
    EXPECT_EQ(labels[static_cast<size_t>(k)], i % 10);
  }
}

// Copying the rows on a pool of threads gives the same batches as copying them on the caller.
TEST(BatcherTest, PooledCopyMatchesSerialCopy) {
  const Dataset dataset = Numbered(1000);
  Batcher serial = MustCreate(dataset, Options(100));
  Batcher pooled = MustCreate(dataset, Options(100));
  ops::ThreadPool pool(2);
  ops::Tensor a, b;
  std::vector<int32_t> la(100), lb(100);
  for (int step = 0; step < 25; ++step) {
    serial.Next(&a, la);
    pooled.Next(&b, lb, &pool);
    ASSERT_EQ(la, lb) << step;
    for (int64_t i = 0; i < a.num_elements(); ++i) ASSERT_EQ(a.data()[i], b.data()[i]) << step;
  }
}

TEST(BatcherTest, BadOptionsNameTheOption) {
  const Dataset dataset = Numbered(10);
  struct Case {
    BatcherOptions options;
    const char* message;
  };
  std::vector<Case> cases;
  cases.push_back({Options(0), "batch_size 0"});
  cases.push_back({Options(2, 2, 2), "worker_index 2"});
  cases.push_back({Options(2, -1, 2), "worker_index -1"});
  cases.push_back({Options(2, 0, 0), "num_workers 0"});
  cases.push_back({Options(6, 1, 2), "batch_size 6"});  // shard of 5
  BatcherOptions subset = Options(2);
  subset.subset = 11;
  cases.push_back({subset, "subset 11"});
  subset.subset = -1;
  cases.push_back({subset, "subset -1"});
  BatcherOptions repeat = Options(2);
  repeat.repeat = 0;
  cases.push_back({repeat, "repeat 0"});
  for (const Case& c : cases) {
    absl::Status status = Batcher::Create(&dataset, c.options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
  EXPECT_EQ(Batcher::Create(nullptr, Options(2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const Dataset empty;
  EXPECT_EQ(Batcher::Create(&empty, Options(2)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fulcrum::data
