// ops/cpu: the convolution algorithm of each layer shape, chosen by measurement
// (kernel_choice.h) between the project's im2col + GEMM (conv.h) and oneDNN (onednn_conv.h),
// per direction (forward, backward-data, backward-filter). The record of every choice
// (choices()) goes into the run's report. Forward fuses the bias and
// the activation on both paths; backward-filter computes the bias gradient with it.
// A shape oneDNN cannot build a primitive for runs on im2col, with one log line naming the
// layer and the shape. Buffers are made on a shape's first call; later calls allocate nothing.
// Thread-safety: one thread at a time (as the CpuBackend that owns it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/kernel_choice.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

using ConvChoice = KernelChoice;

class ConvPlanner {
 public:
  explicit ConvPlanner(ConvAlgo algo = ConvAlgo::kAuto, ThreadPool* pool = nullptr);
  ~ConvPlanner();
  ConvPlanner(const ConvPlanner&) = delete;
  ConvPlanner& operator=(const ConvPlanner&) = delete;

  // Another pool: shapes are planned again when its thread count differs.
  void set_pool(ThreadPool* pool);
  // Another algorithm: every shape is planned (and measured) again.
  void set_algo(ConvAlgo algo);
  ConvAlgo algo() const { return algo_; }

  // The ops of conv.h on the chosen path (same shapes, errors and results).
  absl::Status Forward(const Tensor& x, const Tensor& filter, const Tensor& bias,
                       const Conv2DParams& params, ConvPostOp post_op, Tensor* y,
                       Tensor* workspace);
  absl::Status BackwardData(const Tensor& dy, const Tensor& filter, const Conv2DParams& params,
                            Tensor* dx, Tensor* workspace);
  // dfilter and dbias (null: none) overwritten.
  absl::Status BackwardFilter(const Tensor& x, const Tensor& dy, const Conv2DParams& params,
                              Tensor* dfilter, Tensor* dbias, Tensor* workspace);

  std::vector<ConvChoice> choices() const;

 private:
  struct Plan;
  enum Dir { kFwd = 0, kBwdData = 1, kBwdFilter = 2 };
  absl::StatusOr<Plan*> PlanFor(const Conv2DGeometry& g, const Conv2DParams& params,
                                ConvPostOp post_op, bool match_post_op);
  // Runs direction `dir` of `plan` on its chosen path (choosing first if not yet chosen).
  absl::Status Run(Plan* plan, Dir dir, absl::FunctionRef<absl::Status()> im2col,
                   absl::FunctionRef<absl::Status()> onednn);
  void BindThreads() const;
  int threads() const { return pool_ == nullptr ? 1 : pool_->num_threads(); }

  ConvAlgo algo_;
  ThreadPool* pool_;
  std::vector<std::unique_ptr<Plan>> plans_;
};

}  // namespace fulcrum::ops
