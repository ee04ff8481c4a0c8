#include "ops/cpu/cpu_backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ops/cpu/dropout.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/spatial_transformer.h"

namespace fulcrum::ops {

absl::Status CheckOnDevice(const Backend& backend, const char* op,
                           std::initializer_list<std::pair<const char*, const Tensor*>> tensors) {
  for (const auto& [what, t] : tensors) {
    if (t == nullptr || t->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, " on ", backend.name(), ": ", what, " is missing or empty"));
    }
    if (t->device() != backend.device()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, " on ", backend.name(), ": ", what, " is in ", DeviceName(t->device()),
                       " memory, expected ", DeviceName(backend.device())));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSameCount(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                            const Tensor& b) {
  if (a.num_elements() != b.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", a_name, " ", a.shape().ToString(),
                                                   " and ", b_name, " ", b.shape().ToString(),
                                                   " differ in size"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CpuBackend::Allocate(const Shape& shape) { return Tensor::Zeros(shape); }

absl::Status CpuBackend::CopyFromHost(const Tensor& host, Tensor* dst) { return Copy(host, dst); }

absl::Status CpuBackend::CopyToHost(const Tensor& src, Tensor* host) { return Copy(src, host); }

absl::Status CpuBackend::Copy(const Tensor& src, Tensor* dst) {
  if (auto s = CheckOnDevice(*this, "Copy", {{"source", &src}, {"destination", dst}}); !s.ok()) {
    return s;
  }
  if (auto s = CheckSameCount("Copy", "source", src, "destination", *dst); !s.ok()) return s;
  if (src.data() != dst->data()) std::copy(src.flat().begin(), src.flat().end(), dst->data());
  return absl::OkStatus();
}

absl::Status CpuBackend::Fill(float value, Tensor* dst) {
  if (auto s = CheckOnDevice(*this, "Fill", {{"destination", dst}}); !s.ok()) return s;
  std::fill(dst->flat().begin(), dst->flat().end(), value);
  return absl::OkStatus();
}

absl::Status CpuBackend::MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                Tensor* out, bool accumulate) {
  return ops::MatMul(a, trans_a, b, trans_b, out, accumulate, pool_);
}

absl::Status CpuBackend::BiasAdd(const Tensor& bias, Tensor* x) { return ops::BiasAdd(bias, x); }

absl::Status CpuBackend::BiasAddGrad(const Tensor& dy, Tensor* dbias) {
  return ops::BiasAddGrad(dy, dbias);
}

absl::Status CpuBackend::Activate(ActivationKind kind, Tensor* y) {
  if (y == nullptr) return absl::InvalidArgumentError("Activate: no tensor");
  switch (kind) {
    case ActivationKind::kRelu:
      return ops::Relu(*y, y);
    case ActivationKind::kSigmoid:
      return ops::Sigmoid(*y, y);
    case ActivationKind::kTanh:
      return ops::Tanh(*y, y);
  }
  return absl::InvalidArgumentError("Activate: unknown activation");
}

absl::Status CpuBackend::ActivationGrad(ActivationKind kind, const Tensor& y, Tensor* dy) {
  if (dy == nullptr) return absl::InvalidArgumentError("ActivationGrad: no gradient tensor");
  switch (kind) {
    case ActivationKind::kRelu:
      return ops::ReluGrad(y, *dy, dy, pool_);
    case ActivationKind::kSigmoid:
      return ops::SigmoidGrad(y, *dy, dy, pool_);
    case ActivationKind::kTanh:
      return ops::TanhGrad(y, *dy, dy, pool_);
  }
  return absl::InvalidArgumentError("ActivationGrad: unknown activation");
}

absl::StatusOr<float> CpuBackend::SoftmaxCrossEntropy(const Tensor& logits,
                                                      std::span<const int32_t> labels,
                                                      Tensor* dlogits) {
  return ops::SoftmaxCrossEntropy(logits, labels, dlogits);
}

absl::StatusOr<int64_t> CpuBackend::CountCorrect(const Tensor& logits,
                                                 std::span<const int32_t> labels) {
  return ops::CountCorrect(logits, labels);
}

absl::StatusOr<float> CpuBackend::MeanSquaredError(const Tensor& pred, const Tensor& target,
                                                   Tensor* dpred) {
  return ops::MeanSquaredError(pred, target, dpred);
}

absl::Status CpuBackend::Add(const Tensor& x, Tensor* y) {
  if (auto s = CheckOnDevice(*this, "Add", {{"x", &x}, {"y", y}}); !s.ok()) return s;
  if (auto s = CheckSameCount("Add", "x", x, "y", *y); !s.ok()) return s;
  const float* in = x.data();
  float* out = y->data();
  const int64_t n = x.num_elements();
  for (int64_t j = 0; j < n; ++j) out[j] += in[j];
  return absl::OkStatus();
}

absl::StatusOr<double> CpuBackend::AddWeightDecay(float weight_decay, const Tensor& value,
                                                  Tensor* grad) {
  if (auto s = CheckOnDevice(*this, "AddWeightDecay", {{"value", &value}, {"gradient", grad}});
      !s.ok()) {
    return s;
  }
  if (auto s = CheckSameCount("AddWeightDecay", "value", value, "gradient", *grad); !s.ok())
    return s;
  const float* v = value.data();
  float* g = grad->data();
  double sum_sq = 0.0;
  const int64_t n = value.num_elements();
  for (int64_t j = 0; j < n; ++j) {
    g[j] += weight_decay * v[j];
    sum_sq += static_cast<double>(v[j]) * v[j];
  }
  return sum_sq;
}

void CpuBackend::set_conv_algo(ConvAlgo algo) {
  conv_.set_algo(algo);
  pool_lrn_.set_algo(algo);
}

std::vector<KernelChoice> CpuBackend::kernel_choices() const {
  std::vector<KernelChoice> out = conv_.choices();
  for (KernelChoice& c : pool_lrn_.choices()) out.push_back(std::move(c));
  return out;
}

absl::Status CpuBackend::Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params,
                                Tensor* y, Tensor* workspace) {
  return ops::Conv2D(x, filter, params, y, pool_, workspace);
}

absl::Status CpuBackend::Conv2DBiasActivation(const Tensor& x, const Tensor& filter,
                                              const Tensor& bias, const Conv2DParams& params,
                                              ConvPostOp post_op, Tensor* y, Tensor* workspace) {
  return conv_.Forward(x, filter, bias, params, post_op, y, workspace);
}

absl::Status CpuBackend::Conv2DBackpropInput(const Tensor& dy, const Tensor& filter,
                                             const Conv2DParams& params, Tensor* dx,
                                             Tensor* workspace) {
  return conv_.BackwardData(dy, filter, params, dx, workspace);
}

absl::Status CpuBackend::Conv2DBackpropFilter(const Tensor& x, const Tensor& dy,
                                              const Conv2DParams& params, Tensor* dfilter,
                                              Tensor* workspace) {
  return conv_.BackwardFilter(x, dy, params, dfilter, nullptr, workspace);
}

absl::Status CpuBackend::Conv2DBackpropFilterBias(const Tensor& x, const Tensor& dy,
                                                  const Conv2DParams& params, Tensor* dfilter,
                                                  Tensor* dbias, Tensor* workspace) {
  return conv_.BackwardFilter(x, dy, params, dfilter, dbias, workspace);
}

absl::Status CpuBackend::MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y) {
  return pool_lrn_.MaxPool(x, params, y);
}

absl::Status CpuBackend::MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params,
                                     Tensor* dx) {
  return pool_lrn_.MaxPoolGrad(x, dy, params, dx);
}

absl::Status CpuBackend::AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y) {
  return pool_lrn_.AvgPool(x, params, y);
}

absl::Status CpuBackend::AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx) {
  return pool_lrn_.AvgPoolGrad(dy, params, dx);
}

absl::Status CpuBackend::Lrn(const Tensor& x, const LrnParams& params, Tensor* y) {
  return pool_lrn_.Lrn(x, params, y);
}

absl::Status CpuBackend::LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params,
                                 Tensor* dx) {
  return pool_lrn_.LrnGrad(x, dy, params, dx);
}

absl::Status CpuBackend::Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y,
                                 Tensor* mask) {
  return ops::Dropout(x, rate, seed, y, mask, pool_);
}

absl::Status CpuBackend::DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx) {
  return ops::DropoutGrad(dy, mask, dx);
}

absl::Status CpuBackend::AffineGrid(const Tensor& theta, Tensor* grid) {
  return ops::AffineGrid(theta, grid, pool_);
}

absl::Status CpuBackend::AffineGridGrad(const Tensor& dgrid, Tensor* dtheta) {
  return ops::AffineGridGrad(dgrid, dtheta, pool_);
}

absl::Status CpuBackend::BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output) {
  return ops::BilinearSample(input, grid, output, pool_);
}

absl::Status CpuBackend::BilinearSampleGrad(const Tensor& input, const Tensor& grid,
                                            const Tensor& dout, Tensor* dinput, Tensor* dgrid) {
  return ops::BilinearSampleGrad(input, grid, dout, dinput, dgrid, pool_);
}

}  // namespace fulcrum::ops
