// ops: ArenaBackend, host memory posing as a device (--device=arena). Its tensors are
// Device::kArena: separate allocations that no CPU op accepts, so every byte a model, a store
// or an exchange moves between the host and this "device" has to go through CopyFromHost /
// CopyToHost, where it is counted (transfer_counters), as the CUDA backend counts its
// cudaMemcpy calls. The ops run the CPU backend's kernels on the same memory, so results are
// bit-identical to the CPU backend's. What a GPU worker would copy, allocate or synchronise per
// step is thereby testable on a machine without a GPU: a stray per-step copy fails a test here
// (tests/worker/device_store_test.cc), not on a lent GPU. Not a way to train faster.
// Thread-safety: as every backend, one thread at a time.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/cpu_backend.h"

namespace fulcrum::ops {

class ArenaBackend final : public Backend {
 public:
  // The kernels run on `pool`'s threads (not owned; null = the calling thread).
  explicit ArenaBackend(ThreadPool* pool = nullptr) : cpu_(pool) {}

  std::string name() const override { return "arena"; }
  Device device() const override { return Device::kArena; }

  absl::StatusOr<Tensor> Allocate(const Shape& shape) override;
  absl::Status CopyFromHost(const Tensor& host, Tensor* dst) override;
  absl::Status CopyToHost(const Tensor& src, Tensor* host) override;
  absl::Status Copy(const Tensor& src, Tensor* dst) override;
  absl::Status Fill(float value, Tensor* dst) override;
  TransferCounters transfer_counters() const override { return counters_; }
  // The host's available memory (the arena is host memory).
  int64_t free_bytes() const override;
  absl::Status ApplyGradient(const OptimizerConfig& config, int64_t step, const Tensor& grad,
                             Tensor* var, std::span<Tensor> slots, float grad_scale) override;

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
  std::vector<KernelChoice> kernel_choices() const override { return cpu_.kernel_choices(); }
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
  // OK iff every non-null operand is a non-empty arena tensor; names the op and the operand.
  absl::Status On(const char* op,
                  std::initializer_list<std::pair<const char*, const Tensor*>> operands) const;
  void CountToHost(int64_t bytes) {
    counters_.d2h_bytes += bytes;
    ++counters_.d2h_calls;
  }

  CpuBackend cpu_;
  TransferCounters counters_;
};

}  // namespace fulcrum::ops
