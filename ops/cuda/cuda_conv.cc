// ops/cuda: the CUDA backend's convolutions (cuDNN, NHWC, TensorFlow's SAME padding through a
// padded copy of the input) and their planning: descriptors, algorithms chosen once per shape.
#include <memory>

#include "ops/cuda/cuda_backend_internal.h"

namespace fulcrum::ops::cuda {

absl::Status CudaBackend::Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params,
                                 Tensor* y, Tensor*) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(
      CheckOnDevice(*this, "Conv2D", {{"x", &x}, {"filter", &filter}, {"y", y}}));
  ConvPlan plan;
  const ConvDescriptors* described = nullptr;
  FULCRUM_RETURN_IF_ERROR(
      PlanConv("Conv2D", x.shape(), filter.shape(), params, *y, "y", &plan, &described));
  const ConvDescriptors& d = *described;
  FULCRUM_ASSIGN_OR_RETURN(const float* w, FilterToOhwi(filter, plan.g));
  FULCRUM_ASSIGN_OR_RETURN(const float* xp, PaddedInput(x, plan));
  FULCRUM_ASSIGN_OR_RETURN(auto algo, ForwardAlgo(plan, d));
  FULCRUM_ASSIGN_OR_RETURN(void* ws, workspace_.Get(algo.second, "the cuDNN workspace"));
  const float alpha = 1.0f, beta = 0.0f;
  return FromCudnn(cudnnConvolutionForward(cudnn_, &alpha, d.x, xp, d.w, w, d.conv, algo.first, ws,
                                           algo.second, &beta, d.y, y->data()),
                   "cudnnConvolutionForward");
}

absl::Status CudaBackend::Conv2DBackpropInput(const Tensor& dy, const Tensor& filter,
                                              const Conv2DParams& params, Tensor* dx, Tensor*) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(
      CheckOnDevice(*this, "Conv2DBackpropInput", {{"dy", &dy}, {"filter", &filter}, {"dx", dx}}));
  ConvPlan plan;
  const ConvDescriptors* described = nullptr;
  FULCRUM_RETURN_IF_ERROR(PlanConv("Conv2DBackpropInput", dx->shape(), filter.shape(), params, dy,
                                   "dy", &plan, &described));
  const ConvDescriptors& d = *described;
  FULCRUM_ASSIGN_OR_RETURN(const float* w, FilterToOhwi(filter, plan.g));
  float* dxp = dx->data();
  if (plan.padded()) {
    FULCRUM_ASSIGN_OR_RETURN(dxp, padded_.Floats(PaddedElements(plan), "the padded input"));
  }
  FULCRUM_ASSIGN_OR_RETURN(auto algo, BackwardDataAlgo(plan, d));
  FULCRUM_ASSIGN_OR_RETURN(void* ws, workspace_.Get(algo.second, "the cuDNN workspace"));
  const float alpha = 1.0f, beta = 0.0f;
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnConvolutionBackwardData(cudnn_, &alpha, d.w, w, d.y, dy.data(), d.conv,
                                             algo.first, ws, algo.second, &beta, d.x, dxp),
                "cudnnConvolutionBackwardData"));
  if (!plan.padded()) return absl::OkStatus();
  return FromCuda(kernels::CopyWindow(dxp, plan.padded_h(), plan.padded_w(), dx->data(),
                                      plan.g.in_h, plan.g.in_w, plan.g.batch, plan.g.in_c),
                  "crop kernel");
}

absl::Status CudaBackend::Conv2DBackpropFilter(const Tensor& x, const Tensor& dy,
                                               const Conv2DParams& params, Tensor* dfilter,
                                               Tensor*) {
  FULCRUM_RETURN_IF_ERROR(Bind());
  FULCRUM_RETURN_IF_ERROR(
      CheckOnDevice(*this, "Conv2DBackpropFilter", {{"x", &x}, {"dy", &dy}, {"dfilter", dfilter}}));
  ConvPlan plan;
  const ConvDescriptors* described = nullptr;
  FULCRUM_RETURN_IF_ERROR(PlanConv("Conv2DBackpropFilter", x.shape(), dfilter->shape(), params, dy,
                                   "dy", &plan, &described));
  const ConvDescriptors& d = *described;
  FULCRUM_ASSIGN_OR_RETURN(const float* xp, PaddedInput(x, plan));
  FULCRUM_ASSIGN_OR_RETURN(float* dw, filter_t_.Floats(dfilter->num_elements(), "the filter"));
  FULCRUM_ASSIGN_OR_RETURN(auto algo, BackwardFilterAlgo(plan, d));
  FULCRUM_ASSIGN_OR_RETURN(void* ws, workspace_.Get(algo.second, "the cuDNN workspace"));
  const float alpha = 1.0f, beta = 0.0f;
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnConvolutionBackwardFilter(cudnn_, &alpha, d.x, xp, d.y, dy.data(), d.conv,
                                               algo.first, ws, algo.second, &beta, d.w, dw),
                "cudnnConvolutionBackwardFilter"));
  // cuDNN's [C_out, KH, KW, C_in] back to TensorFlow's [KH, KW, C_in, C_out].
  const int64_t per_filter = plan.g.kernel_h * plan.g.kernel_w * plan.g.in_c;
  return FromCuda(kernels::Transpose(dw, dfilter->data(), plan.g.out_c, per_filter),
                  "filter transpose kernel");
}

Shape CudaBackend::OutputShape(const Conv2DGeometry& g) {
  return Shape({g.batch, g.out_h, g.out_w, g.out_c});
}

int64_t CudaBackend::PaddedElements(const ConvPlan& plan) {
  return plan.g.batch * plan.padded_h() * plan.padded_w() * plan.g.in_c;
}

absl::StatusOr<ConvPlan> CudaBackend::Plan(const Shape& x, const Shape& filter,
                                           const Conv2DParams& params, const char* op) {
  ConvPlan plan;
  FULCRUM_ASSIGN_OR_RETURN(plan.g, Conv2DGeometryFor(x, filter, params, op));
  const Conv2DGeometry& g = plan.g;
  plan.extra_h = ExtraPadding(g.in_h, g.out_h, g.kernel_h, g.stride_h, g.pad_top);
  plan.extra_w = ExtraPadding(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_left);
  for (int64_t v : {g.batch, g.in_h + plan.extra_h, g.in_w + plan.extra_w, g.in_c, g.out_c,
                    g.kernel_h, g.kernel_w, g.out_h, g.out_w}) {
    if (!FitsInt(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": a dimension of ", x.ToString(), " does not fit cuDNN's int"));
    }
  }
  if (plan.extra_h < 0 || plan.extra_h > 1 || plan.extra_w < 0 || plan.extra_w > 1) {
    return absl::InternalError(absl::StrCat(op, ": unexpected padding for ", x.ToString()));
  }
  return plan;
}

absl::Status CudaBackend::PlanConv(const char* op, const Shape& x, const Shape& filter,
                                   const Conv2DParams& params, const Tensor& out,
                                   const char* out_name, ConvPlan* plan,
                                   const ConvDescriptors** d) {
  FULCRUM_ASSIGN_OR_RETURN(*plan, Plan(x, filter, params, op));
  FULCRUM_RETURN_IF_ERROR(CheckShape(op, out_name, out, OutputShape(plan->g)));
  // Described once per shape and kept (a step runs the same shapes every time).
  std::unique_ptr<ConvDescriptors>& kept = descriptors_[plan->Key()];
  if (kept == nullptr) {
    auto made = std::make_unique<ConvDescriptors>();
    FULCRUM_RETURN_IF_ERROR(Describe(*plan, made.get()));
    kept = std::move(made);
  }
  *d = kept.get();
  return absl::OkStatus();
}

absl::Status CudaBackend::Describe(const ConvPlan& plan, ConvDescriptors* d) {
  const Conv2DGeometry& g = plan.g;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnCreateTensorDescriptor(&d->x), "cudnnCreateTensorDescriptor"));
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnCreateTensorDescriptor(&d->y), "cudnnCreateTensorDescriptor"));
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnCreateFilterDescriptor(&d->w), "cudnnCreateFilterDescriptor"));
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnCreateConvolutionDescriptor(&d->conv), "cudnnCreateConvolutionDescriptor"));
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(g.batch),
                                           i(g.in_c), i(plan.padded_h()), i(plan.padded_w())),
                "cudnnSetTensor4dDescriptor (input)"));
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(g.batch),
                                           i(g.out_c), i(g.out_h), i(g.out_w)),
                "cudnnSetTensor4dDescriptor (output)"));
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, i(g.out_c),
                                           i(g.in_c), i(g.kernel_h), i(g.kernel_w)),
                "cudnnSetFilter4dDescriptor"));
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnSetConvolution2dDescriptor(d->conv, i(g.pad_top), i(g.pad_left), i(g.stride_h),
                                                i(g.stride_w), 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor"));
  // Full fp32 (no TF32 tensor-core rounding: results agree with the CPU kernels) unless
  // --tf32=on, where cuDNN's default math may round the inputs to TF32.
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnSetConvolutionMathType(d->conv, tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
                "cudnnSetConvolutionMathType"));
  int n = 0, c = 0, h = 0, w = 0;
  FULCRUM_RETURN_IF_ERROR(
      FromCudnn(cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &n, &c, &h, &w),
                "cudnnGetConvolution2dForwardOutputDim"));
  if (n != g.batch || c != g.out_c || h != g.out_h || w != g.out_w) {
    return absl::InternalError(absl::StrCat("cuDNN computes a ", n, "x", h, "x", w, "x", c,
                                            " output for ", plan.Key(), ", expected ",
                                            OutputShape(g).ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<const float*> CudaBackend::FilterToOhwi(const Tensor& filter,
                                                       const Conv2DGeometry& g) {
  FULCRUM_ASSIGN_OR_RETURN(float* w, filter_t_.Floats(filter.num_elements(), "the filter"));
  FULCRUM_RETURN_IF_ERROR(
      FromCuda(kernels::Transpose(filter.data(), w, g.kernel_h * g.kernel_w * g.in_c, g.out_c),
               "filter transpose kernel"));
  return w;
}

absl::StatusOr<const float*> CudaBackend::PaddedInput(const Tensor& x, const ConvPlan& plan) {
  if (!plan.padded()) return x.data();
  const int64_t n = PaddedElements(plan);
  FULCRUM_ASSIGN_OR_RETURN(float* p, padded_.Floats(n, "the padded input"));
  FULCRUM_RETURN_IF_ERROR(
      FromCuda(cudaMemsetAsync(p, 0, n * sizeof(float), nullptr), "cudaMemsetAsync"));
  FULCRUM_RETURN_IF_ERROR(
      FromCuda(kernels::CopyWindow(x.data(), plan.g.in_h, plan.g.in_w, p, plan.padded_h(),
                                   plan.padded_w(), plan.g.batch, plan.g.in_c),
               "pad kernel"));
  return p;
}

absl::StatusOr<std::pair<cudnnConvolutionFwdAlgo_t, size_t>> CudaBackend::ForwardAlgo(
    const ConvPlan& plan, const ConvDescriptors& d) {
  return Choose<cudnnConvolutionFwdAlgoPerf_t>(
      fwd_algos_, plan, "cudnnFindConvolutionForwardAlgorithm",
      [&](int n, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
        return cudnnFindConvolutionForwardAlgorithm(cudnn_, d.x, d.w, d.conv, d.y, n, returned,
                                                    perf);
      });
}

absl::StatusOr<std::pair<cudnnConvolutionBwdDataAlgo_t, size_t>> CudaBackend::BackwardDataAlgo(
    const ConvPlan& plan, const ConvDescriptors& d) {
  return Choose<cudnnConvolutionBwdDataAlgoPerf_t>(
      bwd_data_algos_, plan, "cudnnFindConvolutionBackwardDataAlgorithm",
      [&](int n, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
        return cudnnFindConvolutionBackwardDataAlgorithm(cudnn_, d.w, d.y, d.conv, d.x, n, returned,
                                                         perf);
      });
}

absl::StatusOr<std::pair<cudnnConvolutionBwdFilterAlgo_t, size_t>> CudaBackend::BackwardFilterAlgo(
    const ConvPlan& plan, const ConvDescriptors& d) {
  return Choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
      bwd_filter_algos_, plan, "cudnnFindConvolutionBackwardFilterAlgorithm",
      [&](int n, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
        return cudnnFindConvolutionBackwardFilterAlgorithm(cudnn_, d.x, d.y, d.conv, d.w, n,
                                                           returned, perf);
      });
}

}  // namespace fulcrum::ops::cuda
