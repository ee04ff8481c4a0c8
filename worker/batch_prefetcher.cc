#include "worker/batch_prefetcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace fulcrum::worker {

absl::StatusOr<std::unique_ptr<BatchPrefetcher>> BatchPrefetcher::Start(data::Batcher* batcher,
                                                                        ops::Backend& host) {
  std::unique_ptr<BatchPrefetcher> p(new BatchPrefetcher(batcher));
  const int64_t batch = batcher->batch_size();
  const ops::Shape shape({batch, batcher->batch_shape().num_elements() / batch});
  {
    MutexLock lock(&p->mu_);
    for (Slot& slot : p->slots_) {
      FULCRUM_ASSIGN_OR_RETURN(slot.inputs, host.AllocateHost(shape));
      slot.labels.resize(static_cast<size_t>(batch));
    }
  }
  p->loader_ = std::thread([raw = p.get()] { raw->Load(); });
  return p;
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  changed_.SignalAll();
  if (loader_.joinable()) loader_.join();
}

void BatchPrefetcher::Load() {
  for (int fill = 0;; fill = 1 - fill) {
    ops::Tensor inputs;
    std::span<int32_t> labels;
    {
      MutexLock lock(&mu_);
      while (slots_[fill].full && !stop_) changed_.WaitFor(&mu_, absl::Seconds(1));
      if (stop_) return;
      inputs = slots_[fill].inputs;  // the buffer's handle; the consumer does not hold it
      labels = slots_[fill].labels;
    }
    batcher_->Next(&inputs, labels, /*pool=*/nullptr);
    {
      MutexLock lock(&mu_);
      slots_[fill].full = true;
    }
    changed_.SignalAll();
  }
}

absl::Status BatchPrefetcher::Next(ops::Tensor* inputs, std::span<const int32_t>* labels,
                                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  if (taken_ >= 0) {  // the previous batch is done with: its buffer may be filled again
    slots_[taken_].full = false;
    taken_ = -1;
    changed_.SignalAll();
  }
  while (!slots_[next_].full) {
    if (!changed_.WaitUntil(&mu_, deadline) && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the batch loader gathered no batch within ", absl::FormatDuration(timeout)));
    }
  }
  *inputs = slots_[next_].inputs;
  *labels = slots_[next_].labels;
  taken_ = next_;
  next_ = 1 - next_;
  return absl::OkStatus();
}

}  // namespace fulcrum::worker
