#include "ops/cpu/conv_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/onednn_conv.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ops {
namespace {

bool SameGeometry(const Conv2DGeometry& a, const Conv2DGeometry& b) {
  return a.batch == b.batch && a.in_h == b.in_h && a.in_w == b.in_w && a.in_c == b.in_c &&
         a.kernel_h == b.kernel_h && a.kernel_w == b.kernel_w && a.out_c == b.out_c &&
         a.stride_h == b.stride_h && a.stride_w == b.stride_w && a.out_h == b.out_h &&
         a.out_w == b.out_w && a.pad_top == b.pad_top && a.pad_left == b.pad_left;
}

std::string ShapeName(const Conv2DGeometry& g, Padding padding) {
  return absl::StrCat(g.batch, "x", g.in_h, "x", g.in_w, "x", g.in_c, " * ", g.kernel_h, "x",
                      g.kernel_w, "x", g.in_c, "x", g.out_c, " stride ", g.stride_h, "x",
                      g.stride_w, " ", PaddingName(padding));
}

// dy [N, OH, OW, C] as the matrix [N * OH * OW, C].
Tensor Rows(const Tensor& t) {
  const int64_t c = t.shape().dim(t.shape().rank() - 1);
  return Tensor::View(const_cast<float*>(t.data()), Shape({t.num_elements() / c, c}));
}

}  // namespace

struct ConvPlanner::Plan {
  Conv2DGeometry g;
  ConvPostOp post_op = ConvPostOp::kNone;
  std::unique_ptr<OneDnnConv> dnn;  // null: im2col only
  std::vector<std::string> layers;
  ConvChoice record;
  ChoiceState state[3];

  ConvChoice::Direction& Record(Dir dir) {
    return dir == kFwd ? record.forward
                       : (dir == kBwdData ? record.backward_data : record.backward_filter);
  }
  void NoteLayer(const std::string& layer) {
    if (layer.empty() || std::find(layers.begin(), layers.end(), layer) != layers.end()) return;
    layers.push_back(layer);
  }
};

ConvPlanner::ConvPlanner(ConvAlgo algo, ThreadPool* pool) : algo_(algo), pool_(pool) {}
ConvPlanner::~ConvPlanner() = default;

void ConvPlanner::set_pool(ThreadPool* pool) {
  if ((pool == nullptr ? 1 : pool->num_threads()) != threads()) {
    plans_.clear();  // primitives are made per team size
  }
  pool_ = pool;
}

void ConvPlanner::set_algo(ConvAlgo algo) {
  algo_ = algo;
  plans_.clear();
}

void ConvPlanner::BindThreads() const {
  ThreadPool::BindCallerThreads(pool_ == nullptr ? 1 : pool_->num_threads());
}

absl::StatusOr<ConvPlanner::Plan*> ConvPlanner::PlanFor(const Conv2DGeometry& g,
                                                        const Conv2DParams& params,
                                                        ConvPostOp post_op, bool match_post_op) {
  for (const auto& plan : plans_) {
    if (SameGeometry(plan->g, g) && (!match_post_op || plan->post_op == post_op)) {
      plan->NoteLayer(params.layer);
      return plan.get();
    }
  }
  auto plan = std::make_unique<Plan>();
  plan->g = g;
  plan->post_op = post_op;
  plan->NoteLayer(params.layer);
  plan->record.op = "conv2d";
  plan->record.shape = ShapeName(g, params.padding);
  plan->record.forward_gflop = 2.0 * static_cast<double>(g.batch * g.out_h * g.out_w) *
                               static_cast<double>(g.kernel_h * g.kernel_w * g.in_c * g.out_c) /
                               1e9;
  if (algo_ != ConvAlgo::kIm2col) {
    // oneDNN fixes a primitive's thread split when it is made: make it for this pool's team.
    BindThreads();
    absl::StatusOr<std::unique_ptr<OneDnnConv>> dnn = OneDnnConv::Create(g, post_op);
    if (dnn.ok()) {
      plan->dnn = std::move(*dnn);
      plan->record.forward.impl = plan->dnn->forward_impl();
      plan->record.backward_data.impl = plan->dnn->backward_data_impl();
      plan->record.backward_filter.impl = plan->dnn->backward_filter_impl();
    } else {
      plan->record.fallback = std::string(dnn.status().message());
      spdlog::warn("{}: convolution {} runs on im2col: {}",
                   params.layer.empty() ? "conv" : params.layer, plan->record.shape,
                   plan->record.fallback);
    }
  } else {
    plan->record.fallback = "--conv_algo=im2col";
  }
  plans_.push_back(std::move(plan));
  return plans_.back().get();
}

absl::Status ConvPlanner::Run(Plan* plan, Dir dir, absl::FunctionRef<absl::Status()> im2col,
                              absl::FunctionRef<absl::Status()> onednn) {
  ChoiceState& state = plan->state[dir];
  if (state.chosen) {  // the common case, without building the key
    if (!state.use_dnn) return im2col();
    BindThreads();
    return onednn();
  }
  const std::string key =
      absl::StrCat("conv2d ", plan->record.shape, " post-op ", static_cast<int>(plan->post_op),
                   " direction ", static_cast<int>(dir), " threads ", threads());
  return RunChosen(algo_, plan->dnn != nullptr, key, "im2col", &state, &plan->Record(dir), im2col,
                   onednn, [this] { BindThreads(); });
}

absl::Status ConvPlanner::Forward(const Tensor& x, const Tensor& filter, const Tensor& bias,
                                  const Conv2DParams& params, ConvPostOp post_op, Tensor* y,
                                  Tensor* workspace) {
  auto g = Conv2DGeometryFor(x.shape(), filter.shape(), params, "Conv2D");
  if (!g.ok()) return g.status();
  absl::StatusOr<Plan*> plan = PlanFor(*g, params, post_op, /*match_post_op=*/true);
  if (!plan.ok()) return plan.status();
  auto im2col = [&] {
    return Conv2DBiasActivation(x, filter, bias, params, post_op, y, pool_, workspace);
  };
  auto onednn = [&]() -> absl::Status {
    // The im2col path checks every operand; oneDNN reads raw pointers, so check here.
    if (y == nullptr || y->shape() != g->output_shape() || bias.num_elements() != g->out_c ||
        y->device() != Device::kCpu || x.device() != Device::kCpu ||
        filter.device() != Device::kCpu || bias.device() != Device::kCpu) {
      return im2col();  // reports the mismatch in conv.h's words
    }
    return (*plan)->dnn->Forward(x.data(), filter.data(), bias.data(), y->data());
  };
  return Run(*plan, kFwd, im2col, onednn);
}

absl::Status ConvPlanner::BackwardData(const Tensor& dy, const Tensor& filter,
                                       const Conv2DParams& params, Tensor* dx, Tensor* workspace) {
  if (dx == nullptr) return absl::InvalidArgumentError("Conv2DBackpropInput: dx is null");
  auto g = Conv2DGeometryFor(dx->shape(), filter.shape(), params, "Conv2DBackpropInput");
  if (!g.ok()) return g.status();
  absl::StatusOr<Plan*> plan = PlanFor(*g, params, ConvPostOp::kNone, /*match_post_op=*/false);
  if (!plan.ok()) return plan.status();
  auto im2col = [&] { return Conv2DBackpropInput(dy, filter, params, dx, pool_, workspace); };
  auto onednn = [&]() -> absl::Status {
    if (dy.shape() != g->output_shape() || dy.device() != Device::kCpu ||
        dx->device() != Device::kCpu || filter.device() != Device::kCpu) {
      return im2col();
    }
    return (*plan)->dnn->BackwardData(dy.data(), filter.data(), dx->data());
  };
  return Run(*plan, kBwdData, im2col, onednn);
}

absl::Status ConvPlanner::BackwardFilter(const Tensor& x, const Tensor& dy,
                                         const Conv2DParams& params, Tensor* dfilter, Tensor* dbias,
                                         Tensor* workspace) {
  if (dfilter == nullptr)
    return absl::InvalidArgumentError("Conv2DBackpropFilter: dfilter is null");
  auto g = Conv2DGeometryFor(x.shape(), dfilter->shape(), params, "Conv2DBackpropFilter");
  if (!g.ok()) return g.status();
  absl::StatusOr<Plan*> plan = PlanFor(*g, params, ConvPostOp::kNone, /*match_post_op=*/false);
  if (!plan.ok()) return plan.status();
  auto im2col = [&]() -> absl::Status {
    if (dbias != nullptr) {
      if (auto s = BiasAddGrad(Rows(dy), dbias); !s.ok()) return s;
    }
    return Conv2DBackpropFilter(x, dy, params, dfilter, false, pool_, workspace);
  };
  auto onednn = [&]() -> absl::Status {
    if (dbias == nullptr || dbias->num_elements() != g->out_c || dy.shape() != g->output_shape() ||
        dy.device() != Device::kCpu || x.device() != Device::kCpu ||
        dfilter->device() != Device::kCpu || dbias->device() != Device::kCpu) {
      return im2col();
    }
    return (*plan)->dnn->BackwardFilter(x.data(), dy.data(), dfilter->data(), dbias->data());
  };
  return Run(*plan, kBwdFilter, im2col, onednn);
}

std::vector<ConvChoice> ConvPlanner::choices() const {
  std::vector<ConvChoice> out;
  for (const auto& plan : plans_) {
    ConvChoice c = plan->record;
    c.layers = absl::StrJoin(plan->layers, ",");
    if (plan->dnn != nullptr) {
      c.reorders = plan->dnn->reorders();
      c.reorder_ms = plan->dnn->reorder_seconds() * 1e3;
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fulcrum::ops
