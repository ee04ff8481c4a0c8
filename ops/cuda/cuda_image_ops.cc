// ops/cuda: the CUDA backend's pooling, LRN, dropout and spatial-transformer ops (Fulcrum's
// kernels in kernels.cu, TensorFlow's semantics).
#include "base/random.h"
#include "ops/cuda/cuda_backend_internal.h"

namespace fulcrum::ops::cuda {

absl::Status CudaBackend::MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y) {
  FULCRUM_ASSIGN_OR_RETURN(const auto g, PoolPlan("MaxPool", x, params, y, "y"));
  return FromCuda(kernels::MaxPool(x.data(), g, y->data()), "max pool kernel");
}

absl::Status CudaBackend::MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params,
                                      Tensor* dx) {
  FULCRUM_ASSIGN_OR_RETURN(const auto g, PoolPlan("MaxPoolGrad", x, params, &dy, "dy"));
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "MaxPoolGrad", {{"dx", dx}}));
  FULCRUM_RETURN_IF_ERROR(CheckShape("MaxPoolGrad", "dx", *dx, x.shape()));
  FULCRUM_RETURN_IF_ERROR(Zero(dx));
  return FromCuda(kernels::MaxPoolGrad(x.data(), dy.data(), g, dx->data()),
                  "max pool gradient kernel");
}

absl::Status CudaBackend::AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y) {
  FULCRUM_ASSIGN_OR_RETURN(const auto g, PoolPlan("AvgPool", x, params, y, "y"));
  return FromCuda(kernels::AvgPool(x.data(), g, y->data()), "average pool kernel");
}

absl::Status CudaBackend::AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "AvgPoolGrad", {{"dy", &dy}, {"dx", dx}}));
  FULCRUM_ASSIGN_OR_RETURN(const Pool2DGeometry g,
                           Pool2DGeometryFor(dx->shape(), params, "AvgPoolGrad"));
  FULCRUM_RETURN_IF_ERROR(CheckShape("AvgPoolGrad", "dy", dy, g.output_shape()));
  FULCRUM_RETURN_IF_ERROR(Zero(dx));
  return FromCuda(kernels::AvgPoolGrad(dy.data(), PoolGeometryOf(g), dx->data()),
                  "average pool gradient kernel");
}

absl::Status CudaBackend::Lrn(const Tensor& x, const LrnParams& params, Tensor* y) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(ValidateLrnParams(params, "LRN"));
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "LRN", {{"x", &x}, {"y", y}}));
  FULCRUM_RETURN_IF_ERROR(CheckNhwc("LRN", x));
  FULCRUM_RETURN_IF_ERROR(CheckShape("LRN", "y", *y, x.shape()));
  const int64_t c = x.shape().dim(3);
  return FromCuda(kernels::Lrn(x.data(), x.num_elements() / c, c, params.depth_radius, params.bias,
                               params.alpha, params.beta, y->data()),
                  "LRN kernel");
}

absl::Status CudaBackend::LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params,
                                  Tensor* dx) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(ValidateLrnParams(params, "LRNGrad"));
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "LRNGrad", {{"x", &x}, {"dy", &dy}, {"dx", dx}}));
  FULCRUM_RETURN_IF_ERROR(CheckNhwc("LRNGrad", x));
  FULCRUM_RETURN_IF_ERROR(CheckShape("LRNGrad", "dy", dy, x.shape()));
  FULCRUM_RETURN_IF_ERROR(CheckShape("LRNGrad", "dx", *dx, x.shape()));
  const int64_t c = x.shape().dim(3);
  return FromCuda(
      kernels::LrnGrad(x.data(), dy.data(), x.num_elements() / c, c, params.depth_radius,
                       params.bias, params.alpha, params.beta, dx->data()),
      "LRN gradient kernel");
}

absl::Status CudaBackend::Dropout(const Tensor& x, float rate, uint64_t seed, Tensor* y,
                                  Tensor* mask) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("Dropout: rate ", rate, " is not in [0, 1)"));
  }
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "Dropout", {{"x", &x}, {"y", y}, {"mask", mask}}));
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("Dropout", "x", x, "y", *y));
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("Dropout", "x", x, "mask", *mask));
  // The CPU kernel's constants (ops/cpu/dropout.cc), so both draw the same mask.
  const float scale = 1.0f / (1.0f - rate);
  const auto threshold = static_cast<uint32_t>(std::ceil(static_cast<double>(rate) * 16777216.0));
  return FromCuda(kernels::Dropout(x.data(), x.num_elements(), Mix64(seed), threshold, scale,
                                   y->data(), mask->data()),
                  "dropout kernel");
}

absl::Status CudaBackend::DropoutGrad(const Tensor& dy, const Tensor& mask, Tensor* dx) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(
      CheckOnDevice(*this, "DropoutGrad", {{"dy", &dy}, {"mask", &mask}, {"dx", dx}}));
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("DropoutGrad", "dy", dy, "dx", *dx));
  FULCRUM_RETURN_IF_ERROR(CheckSameCount("DropoutGrad", "dy", dy, "mask", mask));
  return FromCuda(kernels::Multiply(dy.data(), mask.data(), dx->data(), dy.num_elements()),
                  "dropout gradient kernel");
}

absl::Status CudaBackend::AffineGrid(const Tensor& theta, Tensor* grid) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "AffineGrid", {{"theta", &theta}, {"grid", grid}}));
  FULCRUM_RETURN_IF_ERROR(CheckThetaAndGrid("AffineGrid", theta, *grid));
  const Shape& s = grid->shape();
  return FromCuda(kernels::AffineGrid(theta.data(), s.dim(0), s.dim(1), s.dim(2), grid->data()),
                  "affine grid kernel");
}

absl::Status CudaBackend::AffineGridGrad(const Tensor& dgrid, Tensor* dtheta) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(
      CheckOnDevice(*this, "AffineGridGrad", {{"dgrid", &dgrid}, {"dtheta", dtheta}}));
  FULCRUM_RETURN_IF_ERROR(CheckThetaAndGrid("AffineGridGrad", *dtheta, dgrid));
  const Shape& s = dgrid.shape();
  return FromCuda(
      kernels::AffineGridGrad(dgrid.data(), s.dim(0), s.dim(1), s.dim(2), dtheta->data()),
      "affine grid gradient kernel");
}

absl::Status CudaBackend::BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BilinearSample",
                                        {{"input", &input}, {"grid", &grid}, {"output", output}}));
  FULCRUM_ASSIGN_OR_RETURN(const Shape out, SampleOutput("BilinearSample", input, grid));
  FULCRUM_RETURN_IF_ERROR(CheckShape("BilinearSample", "output", *output, out));
  const Shape& s = input.shape();
  return FromCuda(kernels::BilinearSample(input.data(), s.dim(0), s.dim(1), s.dim(2), s.dim(3),
                                          grid.data(), out.dim(1), out.dim(2), output->data()),
                  "bilinear sampler kernel");
}

absl::Status CudaBackend::BilinearSampleGrad(const Tensor& input, const Tensor& grid,
                                             const Tensor& dout, Tensor* dinput, Tensor* dgrid) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BilinearSampleGrad",
                                        {{"input", &input}, {"grid", &grid}, {"dout", &dout}}));
  FULCRUM_ASSIGN_OR_RETURN(const Shape out, SampleOutput("BilinearSampleGrad", input, grid));
  FULCRUM_RETURN_IF_ERROR(CheckShape("BilinearSampleGrad", "dout", dout, out));
  if (dinput != nullptr) {
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BilinearSampleGrad", {{"dinput", dinput}}));
    FULCRUM_RETURN_IF_ERROR(CheckShape("BilinearSampleGrad", "dinput", *dinput, input.shape()));
    FULCRUM_RETURN_IF_ERROR(Zero(dinput));
  }
  if (dgrid != nullptr) {
    FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, "BilinearSampleGrad", {{"dgrid", dgrid}}));
    FULCRUM_RETURN_IF_ERROR(CheckShape("BilinearSampleGrad", "dgrid", *dgrid, grid.shape()));
  }
  if (dinput == nullptr && dgrid == nullptr) return absl::OkStatus();
  const Shape& s = input.shape();
  return FromCuda(kernels::BilinearSampleGrad(input.data(), s.dim(0), s.dim(1), s.dim(2), s.dim(3),
                                              grid.data(), out.dim(1), out.dim(2), dout.data(),
                                              dinput == nullptr ? nullptr : dinput->data(),
                                              dgrid == nullptr ? nullptr : dgrid->data()),
                  "bilinear sampler gradient kernel");
}

absl::Status CudaBackend::CheckNhwc(const char* op, const Tensor& x) {
  if (x.shape().rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x has shape ", x.shape().ToString(), ", expected rank 4 (NHWC)"));
  }
  return ValidateShape(x.shape(), absl::StrCat(op, ": x"));
}

absl::Status CudaBackend::CheckThetaAndGrid(const char* op, const Tensor& theta,
                                            const Tensor& grid) {
  const Shape& t = theta.shape();
  const Shape& g = grid.shape();
  if (t.rank() != 3 || t.dim(1) != 2 || t.dim(2) != 3 || g.rank() != 4 || g.dim(3) != 2 ||
      g.dim(0) != t.dim(0) || g.dim(1) <= 0 || g.dim(2) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": theta ", t.ToString(), " and grid ",
                                                   g.ToString(),
                                                   " are not [N, 2, 3] and [N, H_out, W_out, 2]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> CudaBackend::SampleOutput(const char* op, const Tensor& input,
                                                const Tensor& grid) {
  FULCRUM_RETURN_IF_ERROR(CheckNhwc(op, input));
  const Shape& g = grid.shape();
  if (g.rank() != 4 || g.dim(0) != input.shape().dim(0) || g.dim(1) <= 0 || g.dim(2) <= 0 ||
      g.dim(3) != 2) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": grid has shape ", g.ToString(),
                                                   ", expected [", input.shape().dim(0),
                                                   ", H_out, W_out, 2]"));
  }
  return Shape({g.dim(0), g.dim(1), g.dim(2), input.shape().dim(3)});
}

absl::StatusOr<kernels::PoolGeometry> CudaBackend::PoolPlan(const char* op, const Tensor& x,
                                                            const Pool2DParams& params,
                                                            const Tensor* out,
                                                            const char* out_name) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(CheckOnDevice(*this, op, {{"x", &x}, {out_name, out}}));
  FULCRUM_ASSIGN_OR_RETURN(const Pool2DGeometry g, Pool2DGeometryFor(x.shape(), params, op));
  FULCRUM_RETURN_IF_ERROR(CheckShape(op, out_name, *out, g.output_shape()));
  return PoolGeometryOf(g);
}

}  // namespace fulcrum::ops::cuda
