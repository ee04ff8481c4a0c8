#include "ops/cpu/onednn_pool_lrn.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

#ifdef FULCRUM_HAVE_ONEDNN
#include "ops/cpu/onednn_util.h"
#endif

namespace fulcrum::ops {

#ifdef FULCRUM_HAVE_ONEDNN

using namespace onednn;  // NOLINT(build/namespaces): this file's vocabulary

namespace {

// A forward-only pass (x -> y), a forward-training pass into buffers of its own (x -> its y,
// the workspace) and the backward pass (dy, the workspace [, x] -> dx): what both ops share.
struct FwdBwd {
  dnnl::stream stream{Engine()};
  memory x, y, dy, dx;  // the caller's tensors, bound per call
  Owned train_y, workspace;
  Prim fwd, fwd_train, bwd;
  Scratch fwd_scratch, train_scratch, bwd_scratch;
  std::string fwd_impl, bwd_impl;

  // Binds the arguments once the three primitive descriptors are made.
  void Bind(const dnnl::primitive_desc& inference, const dnnl::primitive_desc& training,
            const dnnl::primitive_desc& backward, bool backward_reads_x) {
    fwd_impl = inference.impl_info_str();
    bwd_impl = backward.impl_info_str();
    fwd.prim = dnnl::primitive(inference);
    fwd.Arg(DNNL_ARG_SRC, x), fwd.Arg(DNNL_ARG_DST, y);
    fwd_scratch.Bind(&fwd, inference.scratchpad_desc());
    train_y = Owned(training.dst_desc());
    fwd_train.prim = dnnl::primitive(training);
    fwd_train.Arg(DNNL_ARG_SRC, x), fwd_train.Arg(DNNL_ARG_DST, train_y.mem);
    const memory::desc ws = training.workspace_desc();
    if (ws.get_size() > 0) {
      workspace = Owned(ws);
      fwd_train.Arg(DNNL_ARG_WORKSPACE, workspace.mem);
    }
    train_scratch.Bind(&fwd_train, training.scratchpad_desc());
    bwd.prim = dnnl::primitive(backward);
    if (backward_reads_x) bwd.Arg(DNNL_ARG_SRC, x);
    bwd.Arg(DNNL_ARG_DIFF_DST, dy), bwd.Arg(DNNL_ARG_DIFF_SRC, dx);
    if (ws.get_size() > 0) bwd.Arg(DNNL_ARG_WORKSPACE, workspace.mem);
    bwd_scratch.Bind(&bwd, backward.scratchpad_desc());
  }

  absl::Status Forward(const float* in, float* out) {
    x.set_data_handle(const_cast<float*>(in));
    y.set_data_handle(out);
    if (!fwd.Run(stream)) return absl::InternalError("oneDNN forward failed");
    return absl::OkStatus();
  }

  absl::Status Backward(const float* in, const float* d_out, float* d_in) {
    x.set_data_handle(const_cast<float*>(in));
    dy.set_data_handle(const_cast<float*>(d_out));
    dx.set_data_handle(d_in);
    // The forward-training pass only feeds the workspace: none (average pooling), no pass.
    const bool need_forward = workspace.buffer != nullptr;
    if ((need_forward && !fwd_train.Run(stream)) || !bwd.Run(stream)) {
      return absl::InternalError("oneDNN backward failed");
    }
    return absl::OkStatus();
  }
};

}  // namespace

struct OneDnnPool::Impl : FwdBwd {};
struct OneDnnLrn::Impl : FwdBwd {};

absl::StatusOr<std::unique_ptr<OneDnnPool>> OneDnnPool::Create(const Pool2DGeometry& g, bool max) {
  auto impl = std::make_unique<Impl>();
  const int64_t pad_h = std::max<int64_t>((g.out_h - 1) * g.stride_h + g.window_h - g.in_h, 0);
  const int64_t pad_w = std::max<int64_t>((g.out_w - 1) * g.stride_w + g.window_w - g.in_w, 0);
  const memory::desc xd({g.batch, g.channels, g.in_h, g.in_w}, Dt::f32, Tag::nhwc);
  const memory::desc yd({g.batch, g.channels, g.out_h, g.out_w}, Dt::f32, Tag::nhwc);
  const memory::dims strides{g.stride_h, g.stride_w}, kernel{g.window_h, g.window_w};
  const memory::dims pad_l{g.pad_top, g.pad_left}, pad_r{pad_h - g.pad_top, pad_w - g.pad_left};
  const auto algo =
      max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  try {
    impl->x = Unbound(xd), impl->dx = Unbound(xd), impl->y = Unbound(yd), impl->dy = Unbound(yd);
    using F = dnnl::pooling_forward;
    using B = dnnl::pooling_backward;
    F::primitive_desc inference(
        F::desc(dnnl::prop_kind::forward_inference, algo, xd, yd, strides, kernel, pad_l, pad_r),
        UserScratchpad(), Engine());
    F::primitive_desc training(
        F::desc(dnnl::prop_kind::forward_training, algo, xd, yd, strides, kernel, pad_l, pad_r),
        UserScratchpad(), Engine());
    B::primitive_desc backward(B::desc(algo, xd, yd, strides, kernel, pad_l, pad_r),
                               UserScratchpad(), Engine(), training);
    impl->Bind(inference, training, backward, /*backward_reads_x=*/false);
  } catch (const dnnl::error& e) {
    return absl::UnimplementedError(absl::StrCat("oneDNN has no ", max ? "max" : "average",
                                                 " pooling for this shape: ", e.what()));
  }
  return std::unique_ptr<OneDnnPool>(new OneDnnPool(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<OneDnnLrn>> OneDnnLrn::Create(const Shape& x,
                                                             const LrnParams& params) {
  if (params.depth_radius == 0) {
    // oneDNN 2.6.3's JIT LRN backward crashes (SIGSEGV while the primitive is made) for a
    // window of one channel: seen here, so never asked for.
    return absl::UnimplementedError(
        "oneDNN 2.6's LRN backward fails for depth_radius 0 (a window of one channel)");
  }
  auto impl = std::make_unique<Impl>();
  const memory::desc xd({x.dim(0), x.dim(3), x.dim(1), x.dim(2)}, Dt::f32, Tag::nhwc);
  const int64_t size = 2 * params.depth_radius + 1;
  const float alpha = params.alpha * static_cast<float>(size);  // oneDNN divides by size
  const auto algo = dnnl::algorithm::lrn_across_channels;
  try {
    impl->x = Unbound(xd), impl->dx = Unbound(xd), impl->y = Unbound(xd), impl->dy = Unbound(xd);
    using F = dnnl::lrn_forward;
    using B = dnnl::lrn_backward;
    F::primitive_desc inference(F::desc(dnnl::prop_kind::forward_inference, algo, xd, size, alpha,
                                        params.beta, params.bias),
                                UserScratchpad(), Engine());
    F::primitive_desc training(
        F::desc(dnnl::prop_kind::forward_training, algo, xd, size, alpha, params.beta, params.bias),
        UserScratchpad(), Engine());
    B::primitive_desc backward(B::desc(algo, xd, xd, size, alpha, params.beta, params.bias),
                               UserScratchpad(), Engine(), training);
    impl->Bind(inference, training, backward, /*backward_reads_x=*/true);
  } catch (const dnnl::error& e) {
    return absl::UnimplementedError(
        absl::StrCat("oneDNN has no LRN for ", x.ToString(), ": ", e.what()));
  }
  return std::unique_ptr<OneDnnLrn>(new OneDnnLrn(std::move(impl)));
}

absl::Status OneDnnPool::Forward(const float* x, float* y) { return impl_->Forward(x, y); }
absl::Status OneDnnPool::Backward(const float* x, const float* dy, float* dx) {
  return impl_->Backward(x, dy, dx);
}
const std::string& OneDnnPool::forward_impl() const { return impl_->fwd_impl; }
const std::string& OneDnnPool::backward_impl() const { return impl_->bwd_impl; }

absl::Status OneDnnLrn::Forward(const float* x, float* y) { return impl_->Forward(x, y); }
absl::Status OneDnnLrn::Backward(const float* x, const float* dy, float* dx) {
  return impl_->Backward(x, dy, dx);
}
const std::string& OneDnnLrn::forward_impl() const { return impl_->fwd_impl; }
const std::string& OneDnnLrn::backward_impl() const { return impl_->bwd_impl; }

#else  // !FULCRUM_HAVE_ONEDNN

struct OneDnnPool::Impl {};
struct OneDnnLrn::Impl {};

absl::StatusOr<std::unique_ptr<OneDnnPool>> OneDnnPool::Create(const Pool2DGeometry&, bool) {
  return absl::UnimplementedError("this build has no oneDNN (libdnnl-dev was not found)");
}
absl::StatusOr<std::unique_ptr<OneDnnLrn>> OneDnnLrn::Create(const Shape&, const LrnParams&) {
  return absl::UnimplementedError("this build has no oneDNN (libdnnl-dev was not found)");
}
// Never called: no object exists without oneDNN.
absl::Status OneDnnPool::Forward(const float*, float*) { return absl::UnimplementedError(""); }
absl::Status OneDnnPool::Backward(const float*, const float*, float*) {
  return absl::UnimplementedError("");
}
absl::Status OneDnnLrn::Forward(const float*, float*) { return absl::UnimplementedError(""); }
absl::Status OneDnnLrn::Backward(const float*, const float*, float*) {
  return absl::UnimplementedError("");
}
const std::string& OneDnnPool::forward_impl() const {
  static const std::string none;
  return none;
}
const std::string& OneDnnPool::backward_impl() const { return forward_impl(); }
const std::string& OneDnnLrn::forward_impl() const {
  static const std::string none;
  return none;
}
const std::string& OneDnnLrn::backward_impl() const { return forward_impl(); }

#endif  // FULCRUM_HAVE_ONEDNN

OneDnnPool::OneDnnPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnPool::~OneDnnPool() = default;
OneDnnLrn::OneDnnLrn(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnLrn::~OneDnnLrn() = default;

}  // namespace fulcrum::ops
