// conv_bench: the convolution algorithm, chosen by measurement. On the studies' conv layers,
// forward convolution by
//   fulcrum: ops::Conv2D as built (im2col, one window row per copy, + the OpenBLAS GEMM,
//            split over Fulcrum's pool),
//   eigen:   TensorFlow's CPU method, Eigen's Tensor module: extract_image_patches, then a
//            tensor contraction with the filter (what eigen_spatial_convolutions.h builds on),
//            on Eigen's ThreadPoolDevice,
// with 1 and 2 threads; each case first checks that the two agree (max |difference| in the
// label), and is skipped with the difference if they do not. GFLOP/s counts 2 * N * OH * OW *
// KH * KW * C_in * C_out per call. Winograd for 3x3 is not measured (no implementation here).
//   build/bin/conv_bench --benchmark_min_time=0.3
#define EIGEN_USE_THREADS
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unsupported/Eigen/CXX11/Tensor>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/thread_pool.h"
#include "ops/initializer.h"
#include "ops/tensor.h"

namespace {

using fulcrum::ops::Tensor;

struct ConvShape {
  const char* name;
  int64_t batch, h, w, c, kh, kw, k, stride;
  fulcrum::ops::Padding padding;
};

const std::vector<ConvShape>& Shapes() {
  using fulcrum::ops::Padding;
  static const std::vector<ConvShape> shapes = {
      {"mnist_cnn/conv1", 128, 28, 28, 1, 5, 5, 32, 1, Padding::kSame},
      {"mnist_cnn/conv2", 128, 14, 14, 32, 5, 5, 64, 1, Padding::kSame},
      {"cifar10_cnn/conv1", 100, 24, 24, 3, 5, 5, 64, 1, Padding::kSame},
      {"cifar10_cnn/conv2", 100, 12, 12, 64, 5, 5, 64, 1, Padding::kSame},
      {"vgg16/conv1_2", 32, 32, 32, 64, 3, 3, 64, 1, Padding::kSame},
      {"vgg16/conv4_2", 32, 4, 4, 512, 3, 3, 512, 1, Padding::kSame},
      {"alexnet/conv1", 16, 227, 227, 3, 11, 11, 64, 4, Padding::kValid},
      {"alexnet/conv3", 16, 13, 13, 192, 3, 3, 384, 1, Padding::kSame},
  };
  return shapes;
}

Tensor Random(const fulcrum::ops::Shape& shape, uint64_t seed) {
  Tensor t = Tensor::Zeros(shape);
  (void)fulcrum::ops::Initialize(fulcrum::ops::Initializer::Uniform(1.0f), seed, &t);
  return t;
}

struct Case {
  Tensor x, filter, y;
  fulcrum::ops::Conv2DParams params;
  fulcrum::ops::Conv2DGeometry g;
};

Case MakeCase(const ConvShape& s) {
  Case c;
  c.x = Random({s.batch, s.h, s.w, s.c}, 1);
  c.filter = Random({s.kh, s.kw, s.c, s.k}, 2);
  c.params.stride_h = c.params.stride_w = s.stride;
  c.params.padding = s.padding;
  c.g = fulcrum::ops::Conv2DGeometryFor(c.x.shape(), c.filter.shape(), c.params).value();
  c.y = Tensor::Zeros({s.batch, c.g.out_h, c.g.out_w, s.k});
  return c;
}

using RowTensor4 = Eigen::TensorMap<Eigen::Tensor<const float, 4, Eigen::RowMajor>>;
using RowTensor2 = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>>;

// y = conv(x, filter) the way TensorFlow's CPU kernel does: patches [N*OH*OW, KH*KW*C]
// contracted with the filter [KH*KW*C, K]. Eigen's RowMajor image patches take (cols, rows):
// for NHWC, "rows" are W and "cols" H, so the kernel and stride are passed width first.
void EigenConv(const Eigen::ThreadPoolDevice& device, const Case& c) {
  const auto& g = c.g;
  RowTensor4 x(c.x.data(), g.batch, g.in_h, g.in_w, g.in_c);
  Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>> f(
      c.filter.data(), g.kernel_h * g.kernel_w * g.in_c, g.out_c);
  RowTensor2 y(const_cast<float*>(c.y.data()), g.batch * g.out_h * g.out_w, g.out_c);
  const Eigen::PaddingType pad =
      c.params.padding == fulcrum::ops::Padding::kSame ? Eigen::PADDING_SAME : Eigen::PADDING_VALID;
  const Eigen::array<Eigen::Index, 2> patch_dims = {g.batch * g.out_h * g.out_w,
                                                    g.kernel_h * g.kernel_w * g.in_c};
  const Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> dims = {
      Eigen::IndexPair<Eigen::Index>(1, 0)};
  y.device(device) =
      x.extract_image_patches(g.kernel_w, g.kernel_h, g.stride_w, g.stride_h, 1, 1, pad)
          .reshape(patch_dims)
          .contract(f, dims);
}

double Flops(const fulcrum::ops::Conv2DGeometry& g) {
  return 2.0 * g.batch * g.out_h * g.out_w * g.kernel_h * g.kernel_w * g.in_c * g.out_c;
}

void SetCounters(benchmark::State& state, const Case& c, const std::string& label) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(Flops(c.g) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(label);
}

// Args: shape index, threads.
void BM_FulcrumConv(benchmark::State& state) {
  const ConvShape& s = Shapes()[static_cast<size_t>(state.range(0))];
  Case c = MakeCase(s);
  fulcrum::ops::ThreadPool pool(static_cast<int>(state.range(1)));
  Tensor workspace = Tensor::Zeros({fulcrum::ops::Conv2DPreferredWorkspaceElements(c.g)});
  for (auto _ : state) {
    auto status = fulcrum::ops::Conv2D(c.x, c.filter, c.params, &c.y, &pool, &workspace);
    benchmark::DoNotOptimize(status);
  }
  SetCounters(state, c, s.name);
}

void BM_EigenConv(benchmark::State& state) {
  const ConvShape& s = Shapes()[static_cast<size_t>(state.range(0))];
  Case c = MakeCase(s);
  const int threads = static_cast<int>(state.range(1));
  Eigen::ThreadPool eigen_pool(threads);
  Eigen::ThreadPoolDevice device(&eigen_pool, threads);
  // Agreement with ops::Conv2D first: a fast wrong answer measures nothing.
  Tensor want = Tensor::Zeros(c.y.shape());
  (void)fulcrum::ops::Conv2D(c.x, c.filter, c.params, &want);
  EigenConv(device, c);
  double max_diff = 0.0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(want.data()[i] - c.y.data()[i])));
  }
  if (max_diff > 1e-3) {
    state.SkipWithError(
        absl::StrCat("Eigen's result differs from ops::Conv2D by ", max_diff).c_str());
    return;
  }
  for (auto _ : state) EigenConv(device, c);
  SetCounters(state, c, absl::StrCat(s.name, " (max diff ", max_diff, ")"));
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "threads"});
  for (int i = 0; i < static_cast<int>(Shapes().size()); ++i) {
    for (int threads : {1, 2}) b->Args({i, threads});
  }
}

BENCHMARK(BM_FulcrumConv)->Apply(Args)->UseRealTime()->MinTime(0.2);
BENCHMARK(BM_EigenConv)->Apply(Args)->UseRealTime()->MinTime(0.2);

}  // namespace

BENCHMARK_MAIN();
