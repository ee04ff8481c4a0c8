// ops_bench's roofline part: each study conv layer's forward (bias and ReLU fused) on the
// project's im2col + GEMM and on oneDNN (ops::ConvPlanner with the algorithm forced), as
// GFLOP/s (nominal: 2 * N * OH * OW * KH * KW * C_in * C_out; valid: without the taps that
// fall on padding) and the valid rate as a share of this machine's FMA peak, measured in the
// same run by
// BM_FmaPeak (independent AVX-512 or AVX2 fused multiply-adds in registers, one stream per
// thread, on the same thread pool): the roofline's compute roof, not a data-sheet figure.
//   build/bin/ops_bench --benchmark_filter='BM_FmaPeak|BM_ConvForward'
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "ops/cpu/conv_planner.h"
#include "ops/cpu/thread_pool.h"
#include "ops/initializer.h"
#include "ops/tensor.h"

namespace fulcrum {
namespace {

// GFLOP/s of `threads` threads each running independent FMA chains for about 0.2 s.
double MeasureFmaPeak(int threads) {
  ops::ThreadPool pool(threads);
  std::vector<double> flops(static_cast<size_t>(threads));
  constexpr int64_t kIters = 20'000'000;
  const auto start = std::chrono::steady_clock::now();
  pool.ParallelFor(threads, [&](int t) {
#if defined(__AVX512F__)
    using V = __m512;
    constexpr int kLanes = 16;
    auto fma = [](V a, V m, V c) { return _mm512_fmadd_ps(a, m, c); };
    auto set = [](float v) { return _mm512_set1_ps(v); };
#elif defined(__AVX2__) && defined(__FMA__)
    using V = __m256;
    constexpr int kLanes = 8;
    auto fma = [](V a, V m, V c) { return _mm256_fmadd_ps(a, m, c); };
    auto set = [](float v) { return _mm256_set1_ps(v); };
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
    // Twelve independent chains, named (an array may live in memory): enough to cover the
    // FMA latency on two ports.
    V a0 = set(0.5f), a1 = set(0.6f), a2 = set(0.7f), a3 = set(0.8f), a4 = set(0.9f);
    V a5 = set(1.0f), a6 = set(1.1f), a7 = set(1.2f), a8 = set(1.3f), a9 = set(1.4f);
    V a10 = set(1.5f), a11 = set(1.6f);
    const V m = set(0.999999f), c = set(1e-7f);
    for (int64_t i = 0; i < kIters; ++i) {
      a0 = fma(a0, m, c), a1 = fma(a1, m, c), a2 = fma(a2, m, c), a3 = fma(a3, m, c);
      a4 = fma(a4, m, c), a5 = fma(a5, m, c), a6 = fma(a6, m, c), a7 = fma(a7, m, c);
      a8 = fma(a8, m, c), a9 = fma(a9, m, c), a10 = fma(a10, m, c), a11 = fma(a11, m, c);
    }
    for (V v : {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11}) benchmark::DoNotOptimize(v);
    flops[static_cast<size_t>(t)] = 2.0 * kLanes * 12 * static_cast<double>(kIters);
#else
    flops[static_cast<size_t>(t)] = 0;
#endif
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / seconds / 1e9;
}

// The peak for `threads`: the best of every measurement so far in this run (three at the
// first call, one more at each later call), so that a measurement another process disturbed
// is outvoted by the others. Still a lower bound: quote it from a quiet machine.
double FmaPeak(int threads) {
  static double peak[3] = {0, 0, 0};
  const int runs = peak[threads] == 0 ? 3 : 1;
  for (int i = 0; i < runs; ++i) peak[threads] = std::max(peak[threads], MeasureFmaPeak(threads));
  return peak[threads];
}

void BM_FmaPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) state.counters["GFLOPS"] = FmaPeak(threads);
}
BENCHMARK(BM_FmaPeak)->ArgName("threads")->Arg(1)->Arg(2)->Iterations(1)->UseRealTime();

struct Layer {
  const char* name;
  int64_t batch, h, w, c, k, out_c, stride;
  ops::Padding padding;
};

const std::vector<Layer>& Layers() {
  using ops::Padding;
  static const std::vector<Layer> layers = {
      {"mnist_cnn/conv1", 128, 28, 28, 1, 5, 32, 1, Padding::kSame},
      {"mnist_cnn/conv2", 128, 14, 14, 32, 5, 64, 1, Padding::kSame},
      {"cifar10_cnn/conv1", 128, 24, 24, 3, 5, 64, 1, Padding::kSame},
      {"cifar10_cnn/conv2", 128, 12, 12, 64, 5, 64, 1, Padding::kSame},
      {"alexnet/conv1", 32, 227, 227, 3, 11, 64, 4, Padding::kValid},
      {"alexnet/conv2", 32, 27, 27, 64, 5, 192, 1, Padding::kSame},
      {"alexnet/conv3", 32, 13, 13, 192, 3, 384, 1, Padding::kSame},
      {"alexnet/conv4", 32, 13, 13, 384, 3, 384, 1, Padding::kSame},
      {"vgg16/conv1_2", 64, 32, 32, 64, 3, 64, 1, Padding::kSame},
      {"vgg16/conv2_2", 64, 16, 16, 128, 3, 128, 1, Padding::kSame},
      {"vgg16/conv3_2", 64, 8, 8, 256, 3, 256, 1, Padding::kSame},
      {"vgg16/conv4_2", 64, 4, 4, 512, 3, 512, 1, Padding::kSame},
  };
  return layers;
}

ops::Tensor Random(const ops::Shape& shape, uint64_t seed) {
  ops::Tensor t = ops::Tensor::Zeros(shape);
  (void)ops::Initialize(ops::Initializer::Uniform(1.0f), seed, &t);
  return t;
}

// The share of the nominal taps (N * OH * OW * KH * KW) that read the image, not padding:
// the multiply-adds a convolution must do. oneDNN skips padded taps, im2col multiplies their
// zeros, so the share of peak is taken on these (on small padded images the nominal rate of
// oneDNN can pass the peak).
double ValidTapShare(const ops::Conv2DGeometry& g) {
  auto axis = [](int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
    int64_t valid = 0;
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = o * stride - pad + j;
        valid += (i >= 0 && i < in) ? 1 : 0;
      }
    }
    return static_cast<double>(valid) / static_cast<double>(out * k);
  };
  return axis(g.in_h, g.out_h, g.kernel_h, g.stride_h, g.pad_top) *
         axis(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_left);
}

// Args: layer index, algorithm (1 im2col, 2 onednn), threads.
void BM_ConvForward(benchmark::State& state) {
  const Layer& l = Layers()[static_cast<size_t>(state.range(0))];
  const auto algo = state.range(1) == 1 ? ops::ConvAlgo::kIm2col : ops::ConvAlgo::kOneDnn;
  const int threads = static_cast<int>(state.range(2));
  state.SetLabel(std::string(l.name) + (state.range(1) == 1 ? " im2col" : " onednn"));
  ops::ThreadPool pool(threads);
  ops::ConvPlanner planner(algo, &pool);
  ops::Conv2DParams p;
  p.stride_h = p.stride_w = l.stride;
  p.padding = l.padding;
  const ops::Tensor x = Random({l.batch, l.h, l.w, l.c}, 1);
  const ops::Tensor f = Random({l.k, l.k, l.c, l.out_c}, 2), bias = Random({l.out_c}, 3);
  const ops::Conv2DGeometry g = ops::Conv2DGeometryFor(x.shape(), f.shape(), p).value();
  ops::Tensor y = ops::Tensor::Zeros(g.output_shape());
  ops::Tensor ws = ops::Tensor::Zeros({ops::Conv2DPreferredWorkspaceElements(g)});
  if (auto s = planner.Forward(x, f, bias, p, ops::ConvPostOp::kRelu, &y, &ws); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());  // also the warm-up call
    return;
  }
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    (void)planner.Forward(x, f, bias, p, ops::ConvPostOp::kRelu, &y, &ws);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double gflop = 2.0 * static_cast<double>(g.batch * g.out_h * g.out_w) *
                       static_cast<double>(g.kernel_h * g.kernel_w * g.in_c * g.out_c) / 1e9;
  const double rate = gflop * static_cast<double>(state.iterations()) / seconds;
  const double valid_rate = rate * ValidTapShare(g);
  const double peak = FmaPeak(threads);
  state.counters["GFLOPS"] = rate;
  state.counters["valid_GFLOPS"] = valid_rate;
  state.counters["peak_GFLOPS"] = peak;
  state.counters["pct_of_peak"] = 100.0 * valid_rate / peak;
}

void ConvArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"layer", "algo", "threads"});
  for (int threads : {1, 2}) {
    for (int64_t i = 0; i < static_cast<int64_t>(Layers().size()); ++i) {
      b->Args({i, 1, threads});
      b->Args({i, 2, threads});
    }
  }
}
BENCHMARK(BM_ConvForward)->Apply(ConvArgs)->UseRealTime()->MinTime(0.2);

}  // namespace
}  // namespace fulcrum
