// worker: BatchPrefetcher, the training loop's loader thread: it gathers the next batch from a
// data::Batcher while the current step computes, into two buffers used in turn (double
// buffering), so a step's data phase is only the wait for a batch already gathered. Buffers
// come from the model's backend (Backend::AllocateHost: page-locked on a GPU, so the batch's
// copy to the device runs at the bus's speed). The batches are the Batcher's, in its order,
// bit for bit (gathered without a thread pool: the pool computes the step meanwhile).
// Thread-safety: Next is called by one thread (the training loop's); the loader thread is the
// only other user of the Batcher, which must outlive this.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "data/batcher.h"
#include "ops/backend.h"
#include "ops/tensor.h"

namespace fulcrum::worker {

class BatchPrefetcher {
 public:
  // Starts the loader thread. `host` allocates the two buffers (not owned).
  static absl::StatusOr<std::unique_ptr<BatchPrefetcher>> Start(data::Batcher* batcher,
                                                                ops::Backend& host);
  // Stops the loader (after the batch it may be gathering) and joins it.
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next batch: *inputs and *labels view a buffer that stays unchanged until the next
  // call. Waits for the loader, at most `timeout` (DeadlineExceeded then).
  absl::Status Next(ops::Tensor* inputs, std::span<const int32_t>* labels,
                    absl::Duration timeout = absl::Minutes(10));

 private:
  struct Slot {
    ops::Tensor inputs;
    std::vector<int32_t> labels;
    bool full = false;
  };
  explicit BatchPrefetcher(data::Batcher* batcher) : batcher_(batcher) {}
  void Load();

  data::Batcher* const batcher_;
  Mutex mu_;
  CondVar changed_;  // a slot was filled or emptied, or the loader is told to stop
  std::array<Slot, 2> slots_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int taken_ = -1;  // the slot the consumer holds (training thread only)
  int next_ = 0;    // the slot it takes next
  std::thread loader_;
};

}  // namespace fulcrum::worker
