#include "ops/cpu/pool_lrn_planner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/cpu/onednn_pool_lrn.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ops {
namespace {

enum class Kind { kMax, kAvg, kLrn };

bool SameGeometry(const Pool2DGeometry& a, const Pool2DGeometry& b) {
  return a.batch == b.batch && a.in_h == b.in_h && a.in_w == b.in_w && a.channels == b.channels &&
         a.window_h == b.window_h && a.window_w == b.window_w && a.stride_h == b.stride_h &&
         a.stride_w == b.stride_w && a.out_h == b.out_h && a.out_w == b.out_w &&
         a.pad_top == b.pad_top && a.pad_left == b.pad_left;
}

bool SameLrn(const LrnParams& a, const LrnParams& b) {
  return a.depth_radius == b.depth_radius && a.bias == b.bias && a.alpha == b.alpha &&
         a.beta == b.beta;
}

std::string PoolShapeName(const Pool2DGeometry& g, Padding padding) {
  return absl::StrCat(g.batch, "x", g.in_h, "x", g.in_w, "x", g.channels, " window ", g.window_h,
                      "x", g.window_w, " stride ", g.stride_h, "x", g.stride_w, " ",
                      PaddingName(padding));
}

std::string LrnShapeName(const Shape& x, const LrnParams& p) {
  return absl::StrCat(x.ToString(), " radius ", p.depth_radius, " bias ", p.bias, " alpha ",
                      p.alpha, " beta ", p.beta);
}

}  // namespace

struct PoolLrnPlanner::Plan {
  Kind kind = Kind::kMax;
  Pool2DGeometry g;  // pooling
  Shape x;           // LRN
  LrnParams lrn;     // LRN
  std::unique_ptr<OneDnnPool> dnn_pool;
  std::unique_ptr<OneDnnLrn> dnn_lrn;
  std::vector<std::string> layers;
  KernelChoice record;
  ChoiceState state[2];  // forward, backward

  bool has_dnn() const { return dnn_pool != nullptr || dnn_lrn != nullptr; }
  void NoteLayer(const std::string& layer) {
    if (layer.empty() || std::find(layers.begin(), layers.end(), layer) != layers.end()) return;
    layers.push_back(layer);
  }
  // The oneDNN object's names, or the reason there is none (logged once).
  template <typename T>
  void Adopt(absl::StatusOr<std::unique_ptr<T>> dnn, std::unique_ptr<T>* slot,
             const std::string& layer) {
    if (!dnn.ok()) {
      record.fallback = std::string(dnn.status().message());
      spdlog::warn("{}: {} {} runs on Fulcrum's kernel: {}", layer.empty() ? record.op : layer,
                   record.op, record.shape, record.fallback);
      return;
    }
    *slot = std::move(*dnn);
    record.forward.impl = (*slot)->forward_impl();
    record.backward_data.impl = (*slot)->backward_impl();
  }
};

PoolLrnPlanner::PoolLrnPlanner(ConvAlgo algo, ThreadPool* pool) : algo_(algo), pool_(pool) {}
PoolLrnPlanner::~PoolLrnPlanner() = default;

void PoolLrnPlanner::set_pool(ThreadPool* pool) {
  if ((pool == nullptr ? 1 : pool->num_threads()) != threads()) plans_.clear();
  pool_ = pool;
}

void PoolLrnPlanner::set_algo(ConvAlgo algo) {
  algo_ = algo;
  plans_.clear();
}

PoolLrnPlanner::Plan* PoolLrnPlanner::PoolPlan(const Pool2DGeometry& g, const Pool2DParams& params,
                                               bool max) {
  const Kind kind = max ? Kind::kMax : Kind::kAvg;
  for (const auto& plan : plans_) {
    if (plan->kind == kind && SameGeometry(plan->g, g)) {
      plan->NoteLayer(params.layer);
      return plan.get();
    }
  }
  auto plan = std::make_unique<Plan>();
  plan->kind = kind;
  plan->g = g;
  plan->record.op = max ? "max_pool" : "avg_pool";
  plan->record.shape = PoolShapeName(g, params.padding);
  plan->NoteLayer(params.layer);
  if (algo_ != ConvAlgo::kIm2col) {
    BindThreads();  // oneDNN fixes a primitive's thread split when it is made
    plan->Adopt(OneDnnPool::Create(g, max), &plan->dnn_pool, params.layer);
  }
  plans_.push_back(std::move(plan));
  return plans_.back().get();
}

PoolLrnPlanner::Plan* PoolLrnPlanner::LrnPlan(const Shape& x, const LrnParams& params) {
  for (const auto& plan : plans_) {
    if (plan->kind == Kind::kLrn && plan->x == x && SameLrn(plan->lrn, params)) {
      plan->NoteLayer(params.layer);
      return plan.get();
    }
  }
  auto plan = std::make_unique<Plan>();
  plan->kind = Kind::kLrn;
  plan->x = x;
  plan->lrn = params;
  plan->record.op = "lrn";
  plan->record.shape = LrnShapeName(x, params);
  plan->NoteLayer(params.layer);
  if (algo_ != ConvAlgo::kIm2col) {
    BindThreads();
    plan->Adopt(OneDnnLrn::Create(x, params), &plan->dnn_lrn, params.layer);
  }
  plans_.push_back(std::move(plan));
  return plans_.back().get();
}

absl::Status PoolLrnPlanner::Run(Plan* plan, bool backward, absl::FunctionRef<absl::Status()> own,
                                 absl::FunctionRef<absl::Status()> onednn) {
  ChoiceState& state = plan->state[backward ? 1 : 0];
  if (state.chosen) {
    if (!state.use_dnn) return own();
    BindThreads();
    return onednn();
  }
  const std::string key = absl::StrCat(plan->record.op, " ", plan->record.shape,
                                       backward ? " backward" : " forward", " threads ", threads());
  return RunChosen(algo_, plan->has_dnn(), key, "fulcrum", &state,
                   backward ? &plan->record.backward_data : &plan->record.forward, own, onednn,
                   [this] { BindThreads(); });
}

std::vector<KernelChoice> PoolLrnPlanner::choices() const {
  std::vector<KernelChoice> out;
  for (const auto& plan : plans_) {
    KernelChoice c = plan->record;
    c.layers = absl::StrJoin(plan->layers, ",");
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

// OK when every tensor is a CPU tensor of the expected shape: the condition for handing raw
// pointers to oneDNN (anything else goes to the own kernel, which reports it in its words).
bool Fits(std::initializer_list<std::pair<const Tensor*, Shape>> tensors) {
  for (const auto& [t, shape] : tensors) {
    if (t == nullptr || t->device() != Device::kCpu || t->shape() != shape) return false;
  }
  return true;
}

}  // namespace

absl::Status PoolLrnPlanner::MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y) {
  auto g = Pool2DGeometryFor(x.shape(), params, "MaxPool");
  if (!g.ok()) return g.status();
  Plan* plan = PoolPlan(*g, params, /*max=*/true);
  auto own = [&] { return ops::MaxPool(x, params, y, pool_); };
  auto onednn = [&]() -> absl::Status {
    if (!Fits({{&x, g->input_shape()}, {y, g->output_shape()}})) return own();
    return plan->dnn_pool->Forward(x.data(), y->data());
  };
  return Run(plan, false, own, onednn);
}

absl::Status PoolLrnPlanner::MaxPoolGrad(const Tensor& x, const Tensor& dy,
                                         const Pool2DParams& params, Tensor* dx) {
  auto g = Pool2DGeometryFor(x.shape(), params, "MaxPoolGrad");
  if (!g.ok()) return g.status();
  Plan* plan = PoolPlan(*g, params, /*max=*/true);
  auto own = [&] { return ops::MaxPoolGrad(x, dy, params, dx, pool_); };
  auto onednn = [&]() -> absl::Status {
    if (!Fits({{&x, g->input_shape()}, {&dy, g->output_shape()}, {dx, g->input_shape()}})) {
      return own();
    }
    return plan->dnn_pool->Backward(x.data(), dy.data(), dx->data());
  };
  return Run(plan, true, own, onednn);
}

absl::Status PoolLrnPlanner::AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y) {
  auto g = Pool2DGeometryFor(x.shape(), params, "AvgPool");
  if (!g.ok()) return g.status();
  Plan* plan = PoolPlan(*g, params, /*max=*/false);
  auto own = [&] { return ops::AvgPool(x, params, y, pool_); };
  auto onednn = [&]() -> absl::Status {
    if (!Fits({{&x, g->input_shape()}, {y, g->output_shape()}})) return own();
    return plan->dnn_pool->Forward(x.data(), y->data());
  };
  return Run(plan, false, own, onednn);
}

absl::Status PoolLrnPlanner::AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx) {
  if (dx == nullptr) return absl::InvalidArgumentError("AvgPoolGrad: dx is null");
  auto g = Pool2DGeometryFor(dx->shape(), params, "AvgPoolGrad");
  if (!g.ok()) return g.status();
  Plan* plan = PoolPlan(*g, params, /*max=*/false);
  auto own = [&] { return ops::AvgPoolGrad(dy, params, dx, pool_); };
  auto onednn = [&]() -> absl::Status {
    if (!Fits({{&dy, g->output_shape()}, {dx, g->input_shape()}})) return own();
    // Average pooling's backward reads no x (its forward pass here only fills a workspace
    // it does not use): dx stands in for x.
    return plan->dnn_pool->Backward(dx->data(), dy.data(), dx->data());
  };
  return Run(plan, true, own, onednn);
}

absl::Status PoolLrnPlanner::Lrn(const Tensor& x, const LrnParams& params, Tensor* y) {
  if (auto s = ValidateLrnParams(params, "LRN"); !s.ok()) return s;
  if (x.shape().rank() != 4) return ops::Lrn(x, params, y, pool_);  // its error
  Plan* plan = LrnPlan(x.shape(), params);
  auto own = [&] { return ops::Lrn(x, params, y, pool_); };
  auto onednn = [&]() -> absl::Status {
    if (!Fits({{&x, x.shape()}, {y, x.shape()}}) || y->data() == x.data()) return own();
    return plan->dnn_lrn->Forward(x.data(), y->data());
  };
  return Run(plan, false, own, onednn);
}

absl::Status PoolLrnPlanner::LrnGrad(const Tensor& x, const Tensor& dy, const LrnParams& params,
                                     Tensor* dx) {
  if (auto s = ValidateLrnParams(params, "LRNGrad"); !s.ok()) return s;
  if (x.shape().rank() != 4) return ops::LrnGrad(x, dy, params, dx, pool_);
  Plan* plan = LrnPlan(x.shape(), params);
  auto own = [&] { return ops::LrnGrad(x, dy, params, dx, pool_); };
  auto onednn = [&]() -> absl::Status {
    if (!Fits({{&x, x.shape()}, {&dy, x.shape()}, {dx, x.shape()}})) return own();
    return plan->dnn_lrn->Backward(x.data(), dy.data(), dx->data());
  };
  return Run(plan, true, own, onednn);
}

}  // namespace fulcrum::ops
