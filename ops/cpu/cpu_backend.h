// ops/cpu: the CPU backend: ops::Backend over the kernels of ops/cpu, on host memory, with the
// big kernels split over a ThreadPool (not owned; null = the calling thread only). Convolutions
// go through a ConvPlanner (conv_planner.h), pooling and LRN through a PoolLrnPlanner
// (pool_lrn_planner.h): the project's kernels or oneDNN per shape, by measurement.
// Thread-safety: as ops::Backend (one thread at a time); set_pool between calls only.
#pragma once

#include <memory>

#include "ops/backend.h"
#include "ops/cpu/conv_planner.h"
#include "ops/cpu/pool_lrn_planner.h"
#include "ops/cpu/thread_pool.h"

namespace fulcrum::ops {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool* pool = nullptr, ConvAlgo conv_algo = ConvAlgo::kAuto)
      : pool_(pool), conv_(conv_algo, pool), pool_lrn_(conv_algo, pool) {}

  void set_pool(ThreadPool* pool) {
    pool_ = pool;
    conv_.set_pool(pool);
    pool_lrn_.set_pool(pool);
  }
  // Which convolution algorithm (before the first convolution).
  void set_conv_algo(ConvAlgo algo);
  ConvAlgo conv_algo() const { return conv_.algo(); }
  ThreadPool* pool() const { return pool_; }

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::kCpu; }

  absl::StatusOr<Tensor> Allocate(const Shape& shape) override;
  absl::Status CopyFromHost(const Tensor& host, Tensor* dst) override;
  absl::Status CopyToHost(const Tensor& src, Tensor* host) override;
  absl::Status Copy(const Tensor& src, Tensor* dst) override;
  absl::Status Fill(float value, Tensor* dst) override;
  // ops::ApplyGradient split over the backend's pool.
  absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                             Tensor* var, std::span<Tensor> slots, float grad_scale) override {
    return ops::ApplyGradient(config, step, grad, var, slots, grad_scale, pool_);
  }

  absl::Status MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor* out,
                      bool accumulate) override;
  absl::Status BiasAdd(const Tensor& bias, Tensor* x) override;
  absl::Status BiasAddGrad(const Tensor& dy, Tensor* dbias) override;
  absl::Status Activate(ActivationKind kind, Tensor* y) override;
  absl::Status ActivationGrad(ActivationKind kind, const Tensor& y, Tensor* dy) override;

  absl::StatusOr<float> SoftmaxCrossEntropy(const Tensor& logits, std::span<const int32_t> labels,
                                            Tensor* dlogits) override;
  absl::StatusOr<int64_t> CountCorrect(const Tensor& logits,
                                       std::span<const int32_t> labels) override;
  absl::StatusOr<float> MeanSquaredError(const Tensor& pred, const Tensor& target,
                                         Tensor* dpred) override;
  absl::Status Add(const Tensor& x, Tensor* y) override;
  absl::StatusOr<double> AddWeightDecay(float weight_decay, const Tensor& value,
                                        Tensor* grad) override;

  absl::Status Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params, Tensor* y,
                      Tensor* workspace) override;
  absl::Status Conv2DBackpropInput(const Tensor& dy, const Tensor& filter,
                                   const Conv2DParams& params, Tensor* dx,
                                   Tensor* workspace) override;
  absl::Status Conv2DBackpropFilter(const Tensor& x, const Tensor& dy, const Conv2DParams& params,
                                    Tensor* dfilter, Tensor* workspace) override;
  absl::Status Conv2DBiasActivation(const Tensor& x, const Tensor& filter, const Tensor& bias,
                                    const Conv2DParams& params, ConvPostOp post_op, Tensor* y,
                                    Tensor* workspace) override;
  absl::Status Conv2DBackpropFilterBias(const Tensor& x, const Tensor& dy,
                                        const Conv2DParams& params, Tensor* dfilter, Tensor* dbias,
                                        Tensor* workspace) override;
  std::vector<KernelChoice> kernel_choices() const override;
  absl::Status MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y) override;
  absl::Status MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params,
                           Tensor* dx) override;
  absl::Status AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y) override;
  absl::Status AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx) override;
  absl::Status Lrn(const Tensor& x, const LrnParams& params, Tensor* y) override;
  absl::Status LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params,
                       Tensor* dx) override;

  absl::Status Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y,
                       Tensor* mask) override;
  absl::Status DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx) override;

  absl::Status AffineGrid(const Tensor& theta, Tensor* grid) override;
  absl::Status AffineGridGrad(const Tensor& dgrid, Tensor* dtheta) override;
  absl::Status BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output) override;
  absl::Status BilinearSampleGrad(const Tensor& input, const Tensor& grid, const Tensor& dout,
                                  Tensor* dinput, Tensor* dgrid) override;

 private:
  ThreadPool* pool_;
  ConvPlanner conv_;
  PoolLrnPlanner pool_lrn_;
};

}  // namespace fulcrum::ops
