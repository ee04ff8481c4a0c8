#include "data/batcher.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/random.h"

namespace fulcrum::data {

absl::StatusOr<std::vector<int64_t>> SubsetAndRepeat(int64_t dataset_size, int64_t subset,
                                                     int64_t repeat) {
  if (subset < 0 || subset > dataset_size) {
    return absl::InvalidArgumentError(absl::StrCat("subset ", subset, " must be in [0, ",
                                                   dataset_size, "] (the dataset size; 0 = all)"));
  }
  if (repeat < 1) {
    return absl::InvalidArgumentError(absl::StrCat("repeat ", repeat, " must be >= 1"));
  }
  const int64_t kept = subset == 0 ? dataset_size : subset;
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(kept * repeat));
  for (int64_t r = 0; r < repeat; ++r) {
    for (int64_t i = 0; i < kept; ++i) indices.push_back(i);
  }
  return indices;
}

ShardRange ShardOf(int64_t total, int worker_index, int num_workers) {
  const int64_t base = total / num_workers;
  const int64_t extra = total % num_workers;  // the first `extra` workers get one more
  const int64_t begin = worker_index * base + std::min<int64_t>(worker_index, extra);
  return {begin, begin + base + (worker_index < extra ? 1 : 0)};
}

absl::StatusOr<Batcher> Batcher::Create(const Dataset* dataset, const BatcherOptions& options) {
  if (dataset == nullptr) return absl::InvalidArgumentError("Batcher: dataset is null");
  if (dataset->size() == 0 || dataset->images.empty() ||
      dataset->images.rows() != dataset->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dataset->name, ": Batcher needs a non-empty dataset with one label per image; has ",
        dataset->size(), " labels and images of shape ", dataset->images.shape().ToString()));
  }
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", options.batch_size, " must be >= 1"));
  }
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers ", options.num_workers, " must be >= 1"));
  }
  if (options.worker_index < 0 || options.worker_index >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker_index ", options.worker_index,
                                                   " must be in [0, ", options.num_workers,
                                                   ") (num_workers ", options.num_workers, ")"));
  }
  absl::StatusOr<std::vector<int64_t>> logical =
      SubsetAndRepeat(dataset->size(), options.subset, options.repeat);
  if (!logical.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dataset->name, ": ", logical.status().message()));
  }
  const auto total = static_cast<int64_t>(logical->size());
  const ShardRange range = ShardOf(total, options.worker_index, options.num_workers);
  if (range.end - range.begin < options.batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size ", options.batch_size, " is larger than the shard of worker_index ",
        options.worker_index, " (", range.end - range.begin, " of ", total, " examples of ",
        dataset->name, " after subset/repeat, split over num_workers ", options.num_workers, ")"));
  }
  std::vector<int64_t> shard(logical->begin() + range.begin, logical->begin() + range.end);
  return Batcher(dataset, options, std::move(shard));
}

Batcher::Batcher(const Dataset* dataset, const BatcherOptions& options, std::vector<int64_t> shard)
    : dataset_(dataset), options_(options), shard_(std::move(shard)) {
  StartEpoch(0);
}

ops::Shape Batcher::batch_shape() const {
  std::vector<int64_t> dims = dataset_->images.shape().dims();
  dims[0] = options_.batch_size;
  return ops::Shape(std::move(dims));
}

void Batcher::StartEpoch(int64_t epoch) {
  epoch_ = epoch;
  position_ = 0;
  // Always permute the unshuffled shard, so epoch e's order does not depend on history.
  order_ = shard_;
  if (!options_.shuffle) return;
  Rng rng(DeriveSeed(DeriveSeed(options_.seed, static_cast<uint64_t>(options_.worker_index)),
                     static_cast<uint64_t>(epoch)));
  for (size_t i = order_.size() - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(order_[i], order_[rng.Below(i + 1)]);
  }
}

void Batcher::Next(ops::Tensor* images, std::span<int32_t> labels, ops::ThreadPool* pool) {
  const int64_t batch = options_.batch_size;
  const int64_t row = dataset_->example_size();
  if (images->empty() || images->device() != ops::Device::kCpu ||
      images->num_elements() != batch * row) {
    *images = ops::Tensor::Zeros(batch_shape());
  }
  const float* src = dataset_->images.data();
  float* dst = images->data();
  const size_t row_bytes = static_cast<size_t>(row) * sizeof(float);
  const int64_t* index = order_.data() + position_;
  // One memcpy per row: rows are contiguous in the dataset and in the batch.
  auto copy_rows = [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      std::memcpy(dst + k * row, src + index[k] * row, row_bytes);
    }
  };
  const int parts =
      pool == nullptr ? 1 : static_cast<int>(std::min<int64_t>(pool->num_threads(), batch / 16));
  if (parts <= 1) {
    copy_rows(0, batch);
  } else {
    pool->ParallelFor(parts,
                      [&](int p) { copy_rows(batch * p / parts, batch * (p + 1) / parts); });
  }
  const int64_t num_labels = std::min<int64_t>(batch, static_cast<int64_t>(labels.size()));
  for (int64_t k = 0; k < num_labels; ++k) {
    labels[static_cast<size_t>(k)] = dataset_->labels[static_cast<size_t>(index[k])];
  }
  position_ += batch;
  if (shard_size() - position_ < batch) StartEpoch(epoch_ + 1);
}

}  // namespace fulcrum::data
