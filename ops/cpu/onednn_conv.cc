#include "ops/cpu/onednn_conv.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#ifdef FULCRUM_HAVE_ONEDNN
#include "ops/cpu/onednn_util.h"
#endif

namespace fulcrum::ops {

#ifdef FULCRUM_HAVE_ONEDNN

using namespace onednn;  // NOLINT(build/namespaces): this file's vocabulary

namespace {

std::string ShapeText(const Conv2DGeometry& g) {
  return absl::StrCat(g.batch, "x", g.in_h, "x", g.in_w, "x", g.in_c, " * ", g.kernel_h, "x",
                      g.kernel_w, "x", g.in_c, "x", g.out_c, " stride ", g.stride_h, "x",
                      g.stride_w);
}

dnnl::post_ops PostOps(ConvPostOp op) {
  dnnl::post_ops ops;
  switch (op) {
    case ConvPostOp::kNone:
      break;
    case ConvPostOp::kRelu:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      break;
    case ConvPostOp::kSigmoid:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
      break;
    case ConvPostOp::kTanh:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f);
      break;
  }
  return ops;
}

// The memory descriptors of one geometry, in the caller's layouts.
struct Descs {
  memory::desc x, y, filter, filter_any, bias;
  memory::dims strides, pad_l, pad_r;
};

Descs DescsFor(const Conv2DGeometry& g) {
  const int64_t pad_h = std::max<int64_t>((g.out_h - 1) * g.stride_h + g.kernel_h - g.in_h, 0);
  const int64_t pad_w = std::max<int64_t>((g.out_w - 1) * g.stride_w + g.kernel_w - g.in_w, 0);
  const memory::dims filter_dims{g.out_c, g.in_c, g.kernel_h, g.kernel_w};
  Descs d;
  d.x = memory::desc({g.batch, g.in_c, g.in_h, g.in_w}, Dt::f32, Tag::nhwc);
  d.y = memory::desc({g.batch, g.out_c, g.out_h, g.out_w}, Dt::f32, Tag::nhwc);
  d.filter = memory::desc(filter_dims, Dt::f32, Tag::hwio);
  d.filter_any = memory::desc(filter_dims, Dt::f32, Tag::any);
  d.bias = memory::desc({g.out_c}, Dt::f32, Tag::x);
  d.strides = {g.stride_h, g.stride_w};
  d.pad_l = {g.pad_top, g.pad_left};
  d.pad_r = {pad_h - g.pad_top, pad_w - g.pad_left};
  return d;
}

}  // namespace

struct OneDnnConv::Impl {
  dnnl::stream stream{Engine()};
  // The caller's tensors (handles bound per call).
  memory x, y, filter, bias, dy, dx, dfilter, dbias;
  // The filter in each primitive's layout, when it is not the caller's.
  memory filter_fwd, filter_bwd, dfilter_blocked;
  std::unique_ptr<Buffer> filter_fwd_buf, filter_bwd_buf, dfilter_buf, scratch_buf;
  Prim fwd, bwd_data, bwd_filter, to_fwd, to_bwd, from_dfilter;
  bool reorder_fwd = false, reorder_bwd = false, reorder_dfilter = false;
  std::string fwd_impl, bwd_data_impl, bwd_filter_impl;
  int64_t reorders = 0;
  double reorder_seconds = 0.0;

  // Scratchpads: one buffer for all (calls run one after another), sized at the largest.
  std::vector<std::pair<Prim*, memory::desc>> scratch_users;
  std::vector<memory> scratch_memories;  // alive as long as the primitives' argument arrays

  void AddScratch(Prim* p, const memory::desc& md) { scratch_users.push_back({p, md}); }
  void BindScratch() {
    size_t bytes = 0;
    for (const auto& [p, md] : scratch_users) bytes = std::max(bytes, md.get_size());
    scratch_buf = std::make_unique<Buffer>(bytes);
    scratch_memories.reserve(scratch_users.size());
    for (const auto& [p, md] : scratch_users) {
      if (md.get_size() == 0) continue;
      scratch_memories.emplace_back(md, Engine(), scratch_buf->data);
      p->Arg(DNNL_ARG_SCRATCHPAD, scratch_memories.back());
    }
  }

  // A layout-converting copy (counted and timed).
  bool Reorder(const Prim& p) {
    const auto start = std::chrono::steady_clock::now();
    const bool ok = p.Run(stream);
    reorder_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++reorders;
    return ok;
  }

  // `user` itself when `want` is its layout (*reorder = false); else memory in `want` on a new
  // buffer (*reorder = true: the caller adds the reorder between the two).
  memory Blocked(const memory& user, const memory::desc& want, std::unique_ptr<Buffer>* buf,
                 bool* reorder) {
    *reorder = !(want == user.get_desc());
    if (!*reorder) return user;
    *buf = std::make_unique<Buffer>(want.get_size());
    return memory(want, Engine(), (*buf)->data);
  }

  void MakeReorder(Prim* p, const memory& from, const memory& to) {
    dnnl::reorder::primitive_desc pd(from, to, UserScratchpad());
    p->prim = dnnl::reorder(pd);
    p->Arg(DNNL_ARG_FROM, from);
    p->Arg(DNNL_ARG_TO, to);
    AddScratch(p, pd.scratchpad_desc());
  }

  void Build(const Conv2DGeometry& g, ConvPostOp post_op);
};

void OneDnnConv::Impl::Build(const Conv2DGeometry& g, ConvPostOp post_op) {
  const Descs d = DescsFor(g);
  const auto direct = dnnl::algorithm::convolution_direct;
  x = Unbound(d.x), y = Unbound(d.y), dy = Unbound(d.y), dx = Unbound(d.x);
  filter = Unbound(d.filter), dfilter = Unbound(d.filter);
  bias = Unbound(d.bias), dbias = Unbound(d.bias);

  dnnl::convolution_forward::primitive_desc fpd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, direct, d.x, d.filter_any,
                                      d.bias, d.y, d.strides, d.pad_l, d.pad_r),
      UserScratchpad(PostOps(post_op)), Engine());
  fwd_impl = fpd.impl_info_str();
  filter_fwd = Blocked(filter, fpd.weights_desc(), &filter_fwd_buf, &reorder_fwd);
  if (reorder_fwd) MakeReorder(&to_fwd, filter, filter_fwd);
  fwd.prim = dnnl::convolution_forward(fpd);
  fwd.Arg(DNNL_ARG_SRC, x), fwd.Arg(DNNL_ARG_WEIGHTS, filter_fwd);
  fwd.Arg(DNNL_ARG_BIAS, bias), fwd.Arg(DNNL_ARG_DST, y);
  AddScratch(&fwd, fpd.scratchpad_desc());

  dnnl::convolution_backward_data::primitive_desc dpd(
      dnnl::convolution_backward_data::desc(direct, d.x, d.filter_any, d.y, d.strides, d.pad_l,
                                            d.pad_r),
      UserScratchpad(), Engine(), fpd);
  bwd_data_impl = dpd.impl_info_str();
  filter_bwd = Blocked(filter, dpd.weights_desc(), &filter_bwd_buf, &reorder_bwd);
  if (reorder_bwd) MakeReorder(&to_bwd, filter, filter_bwd);
  bwd_data.prim = dnnl::convolution_backward_data(dpd);
  bwd_data.Arg(DNNL_ARG_DIFF_DST, dy), bwd_data.Arg(DNNL_ARG_WEIGHTS, filter_bwd);
  bwd_data.Arg(DNNL_ARG_DIFF_SRC, dx);
  AddScratch(&bwd_data, dpd.scratchpad_desc());

  dnnl::convolution_backward_weights::primitive_desc wpd(
      dnnl::convolution_backward_weights::desc(direct, d.x, d.filter_any, d.bias, d.y, d.strides,
                                               d.pad_l, d.pad_r),
      UserScratchpad(), Engine(), fpd);
  bwd_filter_impl = wpd.impl_info_str();
  dfilter_blocked = Blocked(dfilter, wpd.diff_weights_desc(), &dfilter_buf, &reorder_dfilter);
  if (reorder_dfilter) MakeReorder(&from_dfilter, dfilter_blocked, dfilter);
  bwd_filter.prim = dnnl::convolution_backward_weights(wpd);
  bwd_filter.Arg(DNNL_ARG_SRC, x), bwd_filter.Arg(DNNL_ARG_DIFF_DST, dy);
  bwd_filter.Arg(DNNL_ARG_DIFF_WEIGHTS, dfilter_blocked);
  bwd_filter.Arg(DNNL_ARG_DIFF_BIAS, dbias);
  AddScratch(&bwd_filter, wpd.scratchpad_desc());
  BindScratch();
}

bool OneDnnBuilt() { return true; }

absl::StatusOr<std::unique_ptr<OneDnnConv>> OneDnnConv::Create(const Conv2DGeometry& g,
                                                               ConvPostOp post_op) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->Build(g, post_op);
  } catch (const dnnl::error& e) {
    return absl::UnimplementedError(
        absl::StrCat("oneDNN has no convolution for ", ShapeText(g), ": ", e.what()));
  }
  return std::unique_ptr<OneDnnConv>(new OneDnnConv(std::move(impl)));
}

namespace {
absl::Status Failed(const char* what) {
  return absl::InternalError(absl::StrCat("oneDNN ", what, " failed"));
}
}  // namespace

absl::Status OneDnnConv::Forward(const float* x, const float* filter, const float* bias, float* y) {
  Impl& m = *impl_;
  m.x.set_data_handle(const_cast<float*>(x));
  m.filter.set_data_handle(const_cast<float*>(filter));
  m.bias.set_data_handle(const_cast<float*>(bias));
  m.y.set_data_handle(y);
  if (m.reorder_fwd && !m.Reorder(m.to_fwd)) return Failed("filter reorder");
  return m.fwd.Run(m.stream) ? absl::OkStatus() : Failed("convolution forward");
}

absl::Status OneDnnConv::BackwardData(const float* dy, const float* filter, float* dx) {
  Impl& m = *impl_;
  m.dy.set_data_handle(const_cast<float*>(dy));
  m.filter.set_data_handle(const_cast<float*>(filter));
  m.dx.set_data_handle(dx);
  if (m.reorder_bwd && !m.Reorder(m.to_bwd)) return Failed("filter reorder");
  return m.bwd_data.Run(m.stream) ? absl::OkStatus() : Failed("convolution backward-data");
}

absl::Status OneDnnConv::BackwardFilter(const float* x, const float* dy, float* dfilter,
                                        float* dbias) {
  Impl& m = *impl_;
  m.x.set_data_handle(const_cast<float*>(x));
  m.dy.set_data_handle(const_cast<float*>(dy));
  m.dfilter.set_data_handle(dfilter);
  m.dbias.set_data_handle(dbias);
  if (!m.bwd_filter.Run(m.stream)) return Failed("convolution backward-filter");
  if (m.reorder_dfilter && !m.Reorder(m.from_dfilter)) return Failed("filter gradient reorder");
  return absl::OkStatus();
}

const std::string& OneDnnConv::forward_impl() const { return impl_->fwd_impl; }
const std::string& OneDnnConv::backward_data_impl() const { return impl_->bwd_data_impl; }
const std::string& OneDnnConv::backward_filter_impl() const { return impl_->bwd_filter_impl; }
int64_t OneDnnConv::reorders() const { return impl_->reorders; }
double OneDnnConv::reorder_seconds() const { return impl_->reorder_seconds; }

#else  // !FULCRUM_HAVE_ONEDNN

struct OneDnnConv::Impl {
  std::string none = "none";
};

bool OneDnnBuilt() { return false; }

absl::StatusOr<std::unique_ptr<OneDnnConv>> OneDnnConv::Create(const Conv2DGeometry&, ConvPostOp) {
  return absl::UnimplementedError("this build has no oneDNN (libdnnl-dev was not found)");
}
absl::Status OneDnnConv::Forward(const float*, const float*, const float*, float*) {
  return absl::UnimplementedError("no oneDNN");
}
absl::Status OneDnnConv::BackwardData(const float*, const float*, float*) {
  return absl::UnimplementedError("no oneDNN");
}
absl::Status OneDnnConv::BackwardFilter(const float*, const float*, float*, float*) {
  return absl::UnimplementedError("no oneDNN");
}
const std::string& OneDnnConv::forward_impl() const { return impl_->none; }
const std::string& OneDnnConv::backward_data_impl() const { return impl_->none; }
const std::string& OneDnnConv::backward_filter_impl() const { return impl_->none; }
int64_t OneDnnConv::reorders() const { return 0; }
double OneDnnConv::reorder_seconds() const { return 0.0; }

#endif  // FULCRUM_HAVE_ONEDNN

OneDnnConv::OneDnnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnConv::~OneDnnConv() = default;

}  // namespace fulcrum::ops
