// ops/cpu: pooling and LRN on the project's kernels (pool.h, lrn.h) or oneDNN's
// (onednn_pool_lrn.h), chosen per shape and direction by measurement (kernel_choice.h), as
// ConvPlanner does for convolutions. Same shapes, errors and results as pool.h and lrn.h.
// A shape oneDNN cannot build runs on the project's kernels with one log line naming the
// layer and the shape. Buffers are made on a shape's first call; later calls allocate nothing.
// Thread-safety: one thread at a time (as the CpuBackend that owns it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ops/cpu/kernel_choice.h"
#include "ops/cpu/lrn.h"
#include "ops/cpu/pool.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

class PoolLrnPlanner {
 public:
  explicit PoolLrnPlanner(ConvAlgo algo = ConvAlgo::kAuto, ThreadPool* pool = nullptr);
  ~PoolLrnPlanner();
  PoolLrnPlanner(const PoolLrnPlanner&) = delete;
  PoolLrnPlanner& operator=(const PoolLrnPlanner&) = delete;

  // Another pool or algorithm: shapes are planned again.
  void set_pool(ThreadPool* pool);
  void set_algo(ConvAlgo algo);

  absl::Status MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y);
  absl::Status MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params,
                           Tensor* dx);
  absl::Status AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y);
  // The oneDNN path needs x's shape only, which dx gives.
  absl::Status AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx);
  absl::Status Lrn(const Tensor& x, const LrnParams& params, Tensor* y);
  absl::Status LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params, Tensor* dx);

  std::vector<KernelChoice> choices() const;

 private:
  struct Plan;
  Plan* PoolPlan(const Pool2DGeometry& g, const Pool2DParams& params, bool max);
  Plan* LrnPlan(const Shape& x, const LrnParams& params);
  absl::Status Run(Plan* plan, bool backward, absl::FunctionRef<absl::Status()> own,
                   absl::FunctionRef<absl::Status()> onednn);
  int threads() const { return pool_ == nullptr ? 1 : pool_->num_threads(); }
  void BindThreads() const { ThreadPool::BindCallerThreads(threads()); }

  ConvAlgo algo_;
  ThreadPool* pool_;
  std::vector<std::unique_ptr<Plan>> plans_;
};

}  // namespace fulcrum::ops
