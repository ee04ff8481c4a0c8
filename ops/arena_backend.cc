#include "ops/arena_backend.h"

#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/malloc.h"
#include "base/status_macros.h"

namespace fulcrum::ops {
namespace {

// The same memory as a CPU tensor, for the CPU kernels.
Tensor Host(const Tensor& t) {
  return Tensor::View(const_cast<float*>(t.data()), t.shape(), Device::kCpu);
}

// An optional operand's CPU view: `view` holds it; null stays null.
Tensor* HostOrNull(Tensor* t, Tensor* view) {
  if (t == nullptr) return nullptr;
  *view = Host(*t);
  return view;
}

}  // namespace

absl::Status ArenaBackend::On(
    const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> operands) const {
  for (const auto& [what, t] : operands) {
    if (t == nullptr) continue;
    if (t->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(op, " on arena: ", what, " is empty"));
    }
    if (t->device() != Device::kArena) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, " on arena: ", what, " is in ", DeviceName(t->device()), " memory, expected arena"));
    }
  }
  return absl::OkStatus();
}

int64_t ArenaBackend::free_bytes() const { return AvailableMemoryBytes(); }

absl::StatusOr<Tensor> ArenaBackend::Allocate(const Shape& shape) {
  FULCRUM_RETURN_IF_ERROR(ValidateShape(shape, "arena: Allocate"));
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * sizeof(float);
  const size_t rounded = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  void* memory = std::aligned_alloc(kTensorAlignment, rounded);
  if (memory == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("arena: Allocate ", shape.ToString(), ": out of memory (", bytes, " bytes)"));
  }
  std::memset(memory, 0, rounded);
  ++counters_.allocations;
  counters_.allocated_bytes += static_cast<int64_t>(bytes);
  return Tensor::Wrap(std::shared_ptr<float>(static_cast<float*>(memory), std::free), shape,
                      Device::kArena);
}

absl::Status ArenaBackend::CopyFromHost(const Tensor& host, Tensor* dst) {
  FULCRUM_RETURN_IF_ERROR(On("CopyFromHost", {{"destination", dst}}));
  if (dst == nullptr || host.empty() || host.device() != Device::kCpu) {
    return absl::InvalidArgumentError("CopyFromHost: the source must be a non-empty cpu tensor");
  }
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("CopyFromHost", "source", host, "destination", *dst));
  std::memcpy(dst->data(), host.data(), host.bytes());
  counters_.h2d_bytes += static_cast<int64_t>(host.bytes());
  ++counters_.h2d_calls;
  return absl::OkStatus();
}

absl::Status ArenaBackend::CopyToHost(const Tensor& src, Tensor* host) {
  FULCRUM_RETURN_IF_ERROR(On("CopyToHost", {{"source", &src}}));
  if (host == nullptr || host->empty() || host->device() != Device::kCpu) {
    return absl::InvalidArgumentError("CopyToHost: the destination must be a non-empty cpu tensor");
  }
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("CopyToHost", "source", src, "destination", *host));
  std::memcpy(host->data(), src.data(), src.bytes());
  CountToHost(static_cast<int64_t>(src.bytes()));
  return absl::OkStatus();
}

absl::Status ArenaBackend::Copy(const Tensor& src, Tensor* dst) {
  FULCRUM_RETURN_IF_ERROR(On("Copy", {{"source", &src}, {"destination", dst}}));
  Tensor d = Host(*dst);
  return cpu_.Copy(Host(src), &d);
}

absl::Status ArenaBackend::Fill(float value, Tensor* dst) {
  FULCRUM_RETURN_IF_ERROR(On("Fill", {{"destination", dst}}));
  Tensor d = Host(*dst);
  return cpu_.Fill(value, &d);
}

absl::Status ArenaBackend::ApplyGradient(const OptimizerConfig& config, int64_t step,
                                         const Tensor& grad, Tensor* var, std::span<Tensor> slots,
                                         float grad_scale) {
  FULCRUM_RETURN_IF_ERROR(On("ApplyGradient", {{"gradient", &grad}, {"variable", var}}));
  std::vector<Tensor> host_slots;
  host_slots.reserve(slots.size());
  for (const Tensor& slot : slots) {
    FULCRUM_RETURN_IF_ERROR(On("ApplyGradient", {{"slot", &slot}}));
    host_slots.push_back(Host(slot));
  }
  Tensor v = Host(*var);
  return cpu_.ApplyGradient(config, step, Host(grad), &v, host_slots, grad_scale);
}

absl::Status ArenaBackend::MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                  Tensor* out, bool accumulate) {
  FULCRUM_RETURN_IF_ERROR(On("MatMul", {{"a", &a}, {"b", &b}, {"out", out}}));
  Tensor o = Host(*out);
  return cpu_.MatMul(Host(a), trans_a, Host(b), trans_b, &o, accumulate);
}

absl::Status ArenaBackend::BiasAdd(const Tensor& bias, Tensor* x) {
  FULCRUM_RETURN_IF_ERROR(On("BiasAdd", {{"bias", &bias}, {"x", x}}));
  Tensor h = Host(*x);
  return cpu_.BiasAdd(Host(bias), &h);
}

absl::Status ArenaBackend::BiasAddGrad(const Tensor& dy, Tensor* dbias) {
  FULCRUM_RETURN_IF_ERROR(On("BiasAddGrad", {{"dy", &dy}, {"dbias", dbias}}));
  Tensor h = Host(*dbias);
  return cpu_.BiasAddGrad(Host(dy), &h);
}

absl::Status ArenaBackend::Activate(ActivationKind kind, Tensor* y) {
  FULCRUM_RETURN_IF_ERROR(On("Activate", {{"y", y}}));
  Tensor h = Host(*y);
  return cpu_.Activate(kind, &h);
}

absl::Status ArenaBackend::ActivationGrad(ActivationKind kind, const Tensor& y, Tensor* dy) {
  FULCRUM_RETURN_IF_ERROR(On("ActivationGrad", {{"y", &y}, {"dy", dy}}));
  Tensor h = Host(*dy);
  return cpu_.ActivationGrad(kind, Host(y), &h);
}

// The losses take host labels and return a host scalar: as on a GPU, the labels go in (a copy
// of their bytes) and the scalar comes out (a copy of its size).
absl::StatusOr<float> ArenaBackend::SoftmaxCrossEntropy(const Tensor& logits,
                                                        std::span<const int32_t> labels,
                                                        Tensor* dlogits) {
  FULCRUM_RETURN_IF_ERROR(On("SoftmaxCrossEntropy", {{"logits", &logits}, {"dlogits", dlogits}}));
  counters_.h2d_bytes += static_cast<int64_t>(labels.size_bytes());
  ++counters_.h2d_calls;
  Tensor view;
  FULCRUM_ASSIGN_OR_RETURN(
      const float loss, cpu_.SoftmaxCrossEntropy(Host(logits), labels, HostOrNull(dlogits, &view)));
  CountToHost(sizeof(float));
  return loss;
}

absl::StatusOr<int64_t> ArenaBackend::CountCorrect(const Tensor& logits,
                                                   std::span<const int32_t> labels) {
  FULCRUM_RETURN_IF_ERROR(On("CountCorrect", {{"logits", &logits}}));
  counters_.h2d_bytes += static_cast<int64_t>(labels.size_bytes());
  ++counters_.h2d_calls;
  FULCRUM_ASSIGN_OR_RETURN(const int64_t correct, cpu_.CountCorrect(Host(logits), labels));
  CountToHost(sizeof(int64_t));
  return correct;
}

absl::StatusOr<float> ArenaBackend::MeanSquaredError(const Tensor& pred, const Tensor& target,
                                                     Tensor* dpred) {
  FULCRUM_RETURN_IF_ERROR(
      On("MeanSquaredError", {{"prediction", &pred}, {"target", &target}, {"dpred", dpred}}));
  Tensor view;
  FULCRUM_ASSIGN_OR_RETURN(
      const float loss, cpu_.MeanSquaredError(Host(pred), Host(target), HostOrNull(dpred, &view)));
  CountToHost(sizeof(float));
  return loss;
}

absl::Status ArenaBackend::Add(const Tensor& x, Tensor* y) {
  FULCRUM_RETURN_IF_ERROR(On("Add", {{"x", &x}, {"y", y}}));
  Tensor h = Host(*y);
  return cpu_.Add(Host(x), &h);
}

absl::StatusOr<double> ArenaBackend::AddWeightDecay(float weight_decay, const Tensor& value,
                                                    Tensor* grad) {
  FULCRUM_RETURN_IF_ERROR(On("AddWeightDecay", {{"value", &value}, {"gradient", grad}}));
  Tensor h = Host(*grad);
  FULCRUM_ASSIGN_OR_RETURN(const double sum, cpu_.AddWeightDecay(weight_decay, Host(value), &h));
  CountToHost(sizeof(double));
  return sum;
}

absl::Status ArenaBackend::Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params,
                                  Tensor* y, Tensor* workspace) {
  FULCRUM_RETURN_IF_ERROR(On("Conv2D", {{"x", &x}, {"filter", &filter}, {"y", y}}));
  Tensor h = Host(*y), w;
  return cpu_.Conv2D(Host(x), Host(filter), params, &h, HostOrNull(workspace, &w));
}

absl::Status ArenaBackend::Conv2DBackpropInput(const Tensor& dy, const Tensor& filter,
                                               const Conv2DParams& params, Tensor* dx,
                                               Tensor* workspace) {
  FULCRUM_RETURN_IF_ERROR(
      On("Conv2DBackpropInput", {{"dy", &dy}, {"filter", &filter}, {"dx", dx}}));
  Tensor h = Host(*dx), w;
  return cpu_.Conv2DBackpropInput(Host(dy), Host(filter), params, &h, HostOrNull(workspace, &w));
}

absl::Status ArenaBackend::Conv2DBackpropFilter(const Tensor& x, const Tensor& dy,
                                                const Conv2DParams& params, Tensor* dfilter,
                                                Tensor* workspace) {
  FULCRUM_RETURN_IF_ERROR(
      On("Conv2DBackpropFilter", {{"x", &x}, {"dy", &dy}, {"dfilter", dfilter}}));
  Tensor h = Host(*dfilter), w;
  return cpu_.Conv2DBackpropFilter(Host(x), Host(dy), params, &h, HostOrNull(workspace, &w));
}

absl::Status ArenaBackend::Conv2DBiasActivation(const Tensor& x, const Tensor& filter,
                                                const Tensor& bias, const Conv2DParams& params,
                                                ConvPostOp post_op, Tensor* y, Tensor* workspace) {
  FULCRUM_RETURN_IF_ERROR(
      On("Conv2DBiasActivation", {{"x", &x}, {"filter", &filter}, {"bias", &bias}, {"y", y}}));
  Tensor h = Host(*y), w;
  return cpu_.Conv2DBiasActivation(Host(x), Host(filter), Host(bias), params, post_op, &h,
                                   HostOrNull(workspace, &w));
}

absl::Status ArenaBackend::Conv2DBackpropFilterBias(const Tensor& x, const Tensor& dy,
                                                    const Conv2DParams& params, Tensor* dfilter,
                                                    Tensor* dbias, Tensor* workspace) {
  FULCRUM_RETURN_IF_ERROR(On("Conv2DBackpropFilterBias",
                             {{"x", &x}, {"dy", &dy}, {"dfilter", dfilter}, {"dbias", dbias}}));
  Tensor f = Host(*dfilter), b, w;
  return cpu_.Conv2DBackpropFilterBias(Host(x), Host(dy), params, &f, HostOrNull(dbias, &b),
                                       HostOrNull(workspace, &w));
}

absl::Status ArenaBackend::MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y) {
  FULCRUM_RETURN_IF_ERROR(On("MaxPool", {{"x", &x}, {"y", y}}));
  Tensor h = Host(*y);
  return cpu_.MaxPool(Host(x), params, &h);
}

absl::Status ArenaBackend::MaxPoolGrad(const Tensor& x, const Tensor& dy,
                                       const Pool2DParams& params, Tensor* dx) {
  FULCRUM_RETURN_IF_ERROR(On("MaxPoolGrad", {{"x", &x}, {"dy", &dy}, {"dx", dx}}));
  Tensor h = Host(*dx);
  return cpu_.MaxPoolGrad(Host(x), Host(dy), params, &h);
}

absl::Status ArenaBackend::AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y) {
  FULCRUM_RETURN_IF_ERROR(On("AvgPool", {{"x", &x}, {"y", y}}));
  Tensor h = Host(*y);
  return cpu_.AvgPool(Host(x), params, &h);
}

absl::Status ArenaBackend::AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx) {
  FULCRUM_RETURN_IF_ERROR(On("AvgPoolGrad", {{"dy", &dy}, {"dx", dx}}));
  Tensor h = Host(*dx);
  return cpu_.AvgPoolGrad(Host(dy), params, &h);
}

absl::Status ArenaBackend::Lrn(const Tensor& x, const LrnParams& params, Tensor* y) {
  FULCRUM_RETURN_IF_ERROR(On("Lrn", {{"x", &x}, {"y", y}}));
  Tensor h = Host(*y);
  return cpu_.Lrn(Host(x), params, &h);
}

absl::Status ArenaBackend::LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params,
                                   Tensor* dx) {
  FULCRUM_RETURN_IF_ERROR(On("LrnGrad", {{"x", &x}, {"dy", &dy}, {"dx", dx}}));
  Tensor h = Host(*dx);
  return cpu_.LrnGrad(Host(x), Host(dy), params, &h);
}

absl::Status ArenaBackend::Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y,
                                   Tensor* mask) {
  FULCRUM_RETURN_IF_ERROR(On("Dropout", {{"x", &x}, {"y", y}, {"mask", mask}}));
  Tensor h = Host(*y), m;
  return cpu_.Dropout(Host(x), rate, seed, &h, HostOrNull(mask, &m));
}

absl::Status ArenaBackend::DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx) {
  FULCRUM_RETURN_IF_ERROR(On("DropoutGrad", {{"dy", &dy}, {"mask", &mask}, {"dx", dx}}));
  Tensor h = Host(*dx);
  return cpu_.DropoutGrad(Host(dy), Host(mask), &h);
}

absl::Status ArenaBackend::AffineGrid(const Tensor& theta, Tensor* grid) {
  FULCRUM_RETURN_IF_ERROR(On("AffineGrid", {{"theta", &theta}, {"grid", grid}}));
  Tensor h = Host(*grid);
  return cpu_.AffineGrid(Host(theta), &h);
}

absl::Status ArenaBackend::AffineGridGrad(const Tensor& dgrid, Tensor* dtheta) {
  FULCRUM_RETURN_IF_ERROR(On("AffineGridGrad", {{"dgrid", &dgrid}, {"dtheta", dtheta}}));
  Tensor h = Host(*dtheta);
  return cpu_.AffineGridGrad(Host(dgrid), &h);
}

absl::Status ArenaBackend::BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output) {
  FULCRUM_RETURN_IF_ERROR(
      On("BilinearSample", {{"input", &input}, {"grid", &grid}, {"output", output}}));
  Tensor h = Host(*output);
  return cpu_.BilinearSample(Host(input), Host(grid), &h);
}

absl::Status ArenaBackend::BilinearSampleGrad(const Tensor& input, const Tensor& grid,
                                              const Tensor& dout, Tensor* dinput, Tensor* dgrid) {
  FULCRUM_RETURN_IF_ERROR(On(
      "BilinearSampleGrad",
      {{"input", &input}, {"grid", &grid}, {"dout", &dout}, {"dinput", dinput}, {"dgrid", dgrid}}));
  Tensor i, g;
  return cpu_.BilinearSampleGrad(Host(input), Host(grid), Host(dout), HostOrNull(dinput, &i),
                                 HostOrNull(dgrid, &g));
}

}  // namespace fulcrum::ops
