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
  absl::StatusOr<std::vector<int64_t>> example_shape =
      PipelineExampleShape(*dataset, options.pipeline);
  if (!example_shape.ok()) return example_shape.status();
  std::vector<int64_t> shard(logical->begin() + range.begin, logical->begin() + range.end);
  return Batcher(dataset, options, std::move(shard), *std::move(example_shape));
}

Batcher::Batcher(const Dataset* dataset, const BatcherOptions& options, std::vector<int64_t> shard,
                 std::vector<int64_t> example_shape)
    : dataset_(dataset),
      options_(options),
      shard_(std::move(shard)),
      example_shape_(std::move(example_shape)),
      // Its own stream: the crops do not repeat the shuffle's draws.
      pipeline_seed_(DeriveSeed(DeriveSeed(options.seed, NameHash("data/pipeline")),
                                static_cast<uint64_t>(options.worker_index))) {
  example_elements_ = 1;
  for (int64_t d : example_shape_) example_elements_ *= d;
  StartEpoch(0);
}

ops::Shape Batcher::batch_shape() const {
  std::vector<int64_t> dims = {options_.batch_size};
  dims.insert(dims.end(), example_shape_.begin(), example_shape_.end());
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

void Batcher::Gather(int64_t index, int64_t draw, float* out) const {
  const int64_t row = dataset_->example_size();
  const float* src = dataset_->images.data() + index * row;
  if (options_.pipeline.kind == PipelineKind::kPlain) {
    std::memcpy(out, src, static_cast<size_t>(row) * sizeof(float));
    return;
  }
  const ops::Shape& shape = dataset_->images.shape();  // [N, H, W, C], checked by Create
  const ImageDims dims{shape.dim(1), shape.dim(2), shape.dim(3)};
  const ImageTransform t =
      DrawTrainingTransform(dims, options_.pipeline.crop_size, options_.pipeline.distort_colors,
                            DeriveSeed(pipeline_seed_, static_cast<uint64_t>(draw)));
  TransformImage(src, dims, options_.pipeline.crop_size, t, out);
}

void Batcher::Next(ops::Tensor* images, std::span<int32_t> labels, ops::ThreadPool* pool) {
  const int64_t batch = options_.batch_size;
  const int64_t row = example_elements_;
  if (images->empty() || images->device() != ops::Device::kCpu ||
      images->num_elements() != batch * row) {
    *images = ops::Tensor::Zeros(batch_shape());
  }
  float* dst = images->data();
  const int64_t* index = order_.data() + position_;
  // Rows are contiguous in the dataset and in the batch; each row's random draws depend on
  // its draw number only, so the rows may be split over threads in any way.
  auto gather_rows = [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) Gather(index[k], drawn_ + k, dst + k * row);
  };
  const int parts =
      pool == nullptr ? 1 : static_cast<int>(std::min<int64_t>(pool->num_threads(), batch / 16));
  if (parts <= 1) {
    gather_rows(0, batch);
  } else {
    pool->ParallelFor(parts,
                      [&](int p) { gather_rows(batch * p / parts, batch * (p + 1) / parts); });
  }
  const int64_t num_labels = std::min<int64_t>(batch, static_cast<int64_t>(labels.size()));
  for (int64_t k = 0; k < num_labels; ++k) {
    labels[static_cast<size_t>(k)] = dataset_->labels[static_cast<size_t>(index[k])];
  }
  drawn_ += batch;
  position_ += batch;
  if (shard_size() - position_ < batch) StartEpoch(epoch_ + 1);
}

}  // namespace fulcrum::data
