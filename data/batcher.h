// data: per-worker sharding, per-epoch shuffling and batching over a Dataset.
// The Batcher turns (dataset, worker_index, num_workers, seed) into a deterministic stream of
// fixed-size batches: subset/repeat make the logical index list, each worker takes one
// contiguous block of it (its shard), and each epoch visits the shard in an order that is a
// function of (seed, worker_index, epoch) only. The remainder of an epoch is dropped.
// With an input pipeline (data/pipeline.h) each example is transformed as it is gathered;
// the random choices for the d-th example this Batcher draws are a function of (seed,
// worker_index, d) only, so they do not depend on the thread count.
// Thread-safety: a Batcher is not thread-safe (Next mutates it); use one per thread. It holds
// a pointer to the Dataset, which must outlive it and not change while it is used.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset_types.h"
#include "data/pipeline.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::data {

// The dataset-size knob: the first `subset` indices of [0, dataset_size) (0 = all), repeated
// `repeat` times (0..n-1, 0..n-1, ...). Returns indices into the dataset; no pixel is copied.
// InvalidArgument unless 0 <= subset <= dataset_size and repeat >= 1.
absl::StatusOr<std::vector<int64_t>> SubsetAndRepeat(int64_t dataset_size, int64_t subset,
                                                     int64_t repeat);

// Worker `worker_index` of `num_workers`' contiguous block [begin, end) of `total` items;
// block sizes differ by at most one and the blocks tile [0, total). Preconditions:
// 0 <= worker_index < num_workers, total >= 0.
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
};
ShardRange ShardOf(int64_t total, int worker_index, int num_workers);

struct BatcherOptions {
  int64_t batch_size = 128;
  int worker_index = 0;  // this worker's shard: worker i of num_workers gets a disjoint part
  int num_workers = 1;
  uint64_t seed = 1;  // the shuffle of epoch e is a function of (seed, worker_index, e) only
  bool shuffle = true;
  int64_t subset = 0;  // keep the first `subset` examples; 0 = whole dataset
  int64_t repeat = 1;  // repeat the (subset) list this many times; >= 1
  // The training transform applied to every example gathered (plain = copied as stored);
  // its random draws are seeded from `seed` and worker_index.
  PipelineOptions pipeline;
};

class Batcher {
 public:
  // Validates the options (batch_size >= 1, 0 <= worker_index < num_workers, 0 <= subset <=
  // dataset size, repeat >= 1, shard holds at least one full batch, the pipeline fits the
  // examples: see PipelineExampleShape) and the dataset (non-null, non-empty, one label per
  // image row); InvalidArgument names the bad option and its value. `dataset` is not owned
  // and must outlive the Batcher.
  static absl::StatusOr<Batcher> Create(const Dataset* dataset, const BatcherOptions& options);

  // Copies the next batch: example k into row k of `images` (one memcpy per row, or the
  // pipeline's training transform of it) and its label into labels[k]. `images` should be a
  // CPU tensor of batch_shape().num_elements() elements (any shape, e.g. [B, D] or
  // [B, H, W, C]); otherwise it is replaced by a new tensor of shape batch_shape(). `labels`
  // should hold batch_size entries (only the first labels.size() are written if it is
  // shorter). When fewer than batch_size examples of the epoch remain, they are dropped and
  // the next epoch (reshuffled) starts at once. With a pool, the rows are gathered by all its
  // threads (scattered rows are bound by memory latency, so two cores fetching at once
  // finish sooner; the pipeline's transform is work worth splitting too).
  void Next(ops::Tensor* images, std::span<int32_t> labels, ops::ThreadPool* pool = nullptr);

  // Index of the epoch the next batch comes from (= epochs completed); 0 at first and 1
  // after steps_per_epoch() calls of Next.
  int64_t epoch() const { return epoch_; }
  // Full batches per epoch: shard_size() / batch_size.
  int64_t steps_per_epoch() const { return shard_size() / options_.batch_size; }
  // Examples in this worker's shard (after subset and repeat).
  int64_t shard_size() const { return static_cast<int64_t>(shard_.size()); }
  int64_t batch_size() const { return options_.batch_size; }
  // [batch_size, dims of one example after the pipeline...], e.g. [128, 28, 28, 1], or
  // [128, 24, 24, 3] for CIFAR-10 through the cifar10 pipeline.
  ops::Shape batch_shape() const;
  const BatcherOptions& options() const { return options_; }

  // This shard's dataset indices in their unshuffled order.
  std::span<const int64_t> shard_indices() const { return shard_; }
  // Dataset indices of the current epoch in visiting order; the next batch starts at
  // position().
  std::span<const int64_t> epoch_order() const { return order_; }
  int64_t position() const { return position_; }

 private:
  Batcher(const Dataset* dataset, const BatcherOptions& options, std::vector<int64_t> shard,
          std::vector<int64_t> example_shape);
  // Writes example `index` of the dataset, the `draw`-th this Batcher draws, to `out`.
  void Gather(int64_t index, int64_t draw, float* out) const;
  // Sets order_ to the shard in epoch `epoch`'s order and rewinds to its start.
  void StartEpoch(int64_t epoch);

  const Dataset* dataset_;
  BatcherOptions options_;
  std::vector<int64_t> shard_;  // dataset indices, unshuffled
  std::vector<int64_t> order_;  // shard_ permuted for the current epoch
  int64_t position_ = 0;        // next unread entry of order_
  int64_t epoch_ = 0;
  std::vector<int64_t> example_shape_;  // after the pipeline
  int64_t example_elements_ = 0;        // product of example_shape_
  uint64_t pipeline_seed_ = 0;          // of this worker's draws
  int64_t drawn_ = 0;                   // examples drawn so far (all epochs)
};

}  // namespace fulcrum::data
