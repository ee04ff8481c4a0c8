// The GEMMs Fulcrum's models run, per library, single-threaded (the worker splits a product
// over its own pool; ops/cpu/thread_pool.h says why): Eigen's product (what ops::MatMul ran
// before), ops::MatMul as built (OpenBLAS when the build found it), and, when found at build
// time, OpenBLAS's cblas_sgemm called directly with its own threading off, and, when built with
// them (bench/CMakeLists.txt finds Debian's libblis-dev, libdnnl-dev, libxsmm-dev), BLIS's
// typed gemm, oneDNN's dnnl_sgemm and libxsmm's JIT kernels (small shapes only), every one
// single-threaded and checked once against Eigen's product on random operands (a library
// that disagrees, or cannot run a shape, is skipped saying so). Shapes: mnist_cnn's
// conv1/conv2 (im2col forward, dfilter = cols^T dy, dcols = dy filter^T) and dense1 (forward,
// dW, dx) at batch 128, mlp's three layers at batch 128. Reported: GFLOP/s (2mnk per call) and
// the three side by side in the same run.
//   build/bin/gemm_bench --benchmark_min_time=0.3
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/initializer.h"
#include "ops/tensor.h"
#ifdef FULCRUM_BENCH_GEMM_LIBS
#include "bench/gemm_libs.h"
#endif
#ifdef FULCRUM_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace {

using fulcrum::ops::Tensor;

struct Shape {
  const char* name;
  int64_t m, k, n;
  bool trans_a, trans_b;
};

const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {"mnist_cnn/conv1/fwd", 128 * 784, 25, 32, false, false},
      {"mnist_cnn/conv1/dfilter", 25, 128 * 784, 32, true, false},
      {"mnist_cnn/conv2/fwd", 128 * 196, 800, 64, false, false},
      {"mnist_cnn/conv2/dfilter", 800, 128 * 196, 64, true, false},
      {"mnist_cnn/conv2/dcols", 128 * 196, 64, 800, false, true},
      {"mnist_cnn/dense1/fwd", 128, 3136, 1024, false, false},
      {"mnist_cnn/dense1/dW", 3136, 128, 1024, true, false},
      {"mnist_cnn/dense1/dx", 128, 1024, 3136, false, true},
      {"mlp/dense0/fwd", 128, 784, 256, false, false},
      {"mlp/dense1/fwd", 128, 256, 128, false, false},
      {"mlp/dense2/fwd", 128, 128, 10, false, false},
      {"mlp/dense0/dW", 784, 128, 256, true, false},
  };
  return shapes;
}

Tensor Filled(int64_t rows, int64_t cols, float v) { return Tensor::Filled({rows, cols}, v); }

// Random operands of shape s (a, b) and a zeroed result (c).
struct Operands {
  Tensor a, b, c;
};
// Used only by the other libraries' benchmarks (FULCRUM_BENCH_GEMM_LIBS).
[[maybe_unused]] Operands MakeOperands(const Shape& s) {
  Operands o{s.trans_a ? Filled(s.k, s.m, 0) : Filled(s.m, s.k, 0),
             s.trans_b ? Filled(s.n, s.k, 0) : Filled(s.k, s.n, 0), Filled(s.m, s.n, 0)};
  (void)fulcrum::ops::Initialize(fulcrum::ops::Initializer::Uniform(1.0f), 1, &o.a);
  (void)fulcrum::ops::Initialize(fulcrum::ops::Initializer::Uniform(1.0f), 2, &o.b);
  return o;
}

void SetFlops(benchmark::State& state, const Shape& s) {
  // GFLOP per call times calls, as a rate: GFLOP/s.
  state.counters["GFLOP/s"] = benchmark::Counter(
      2e-9 * static_cast<double>(s.m * s.n * s.k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMatrix>;

void BM_Eigen(benchmark::State& state, Shape s) {
  Tensor a = s.trans_a ? Filled(s.k, s.m, 0.5f) : Filled(s.m, s.k, 0.5f);
  Tensor b = s.trans_b ? Filled(s.n, s.k, 0.25f) : Filled(s.k, s.n, 0.25f);
  Tensor c = Filled(s.m, s.n, 0.0f);
  Map am(a.data(), a.rows(), a.cols()), bm(b.data(), b.rows(), b.cols());
  Map cm(c.data(), s.m, s.n);
  for (auto _ : state) {
    if (!s.trans_a && !s.trans_b) cm.noalias() = am * bm;
    if (!s.trans_a && s.trans_b) cm.noalias() = am * bm.transpose();
    if (s.trans_a && !s.trans_b) cm.noalias() = am.transpose() * bm;
    if (s.trans_a && s.trans_b) cm.noalias() = am.transpose() * bm.transpose();
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, s);
}

void BM_MatMul(benchmark::State& state, Shape s) {
  Tensor a = s.trans_a ? Filled(s.k, s.m, 0.5f) : Filled(s.m, s.k, 0.5f);
  Tensor b = s.trans_b ? Filled(s.n, s.k, 0.25f) : Filled(s.k, s.n, 0.25f);
  Tensor c = Filled(s.m, s.n, 0.0f);
  for (auto _ : state) {
    auto st = fulcrum::ops::MatMul(a, s.trans_a, b, s.trans_b, &c);
    if (!st.ok()) state.SkipWithError(std::string(st.message()).c_str());
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, s);
}

#ifdef FULCRUM_BENCH_OPENBLAS
void BM_OpenBlas(benchmark::State& state, Shape s) {
  openblas_set_num_threads(1);
  Tensor a = s.trans_a ? Filled(s.k, s.m, 0.5f) : Filled(s.m, s.k, 0.5f);
  Tensor b = s.trans_b ? Filled(s.n, s.k, 0.25f) : Filled(s.k, s.n, 0.25f);
  Tensor c = Filled(s.m, s.n, 0.0f);
  const int lda = static_cast<int>(s.trans_a ? s.m : s.k);
  const int ldb = static_cast<int>(s.trans_b ? s.k : s.n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                s.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(s.m), static_cast<int>(s.n),
                static_cast<int>(s.k), 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(),
                static_cast<int>(s.n));
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, s);
}
#endif

#ifdef FULCRUM_BENCH_GEMM_LIBS
using LibraryGemm = bool (*)(bool, bool, int64_t, int64_t, int64_t, const float*, const float*,
                             float*);

// One library on shape s, after checking its result against Eigen's on the same operands.
void BM_Library(benchmark::State& state, Shape s, LibraryGemm gemm) {
  Operands o = MakeOperands(s);
  if (!gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, o.a.data(), o.b.data(), o.c.data())) {
    state.SkipWithError("the library cannot run this shape (libxsmm: outside its JIT range)");
    return;
  }
  Map am(o.a.data(), o.a.rows(), o.a.cols()), bm(o.b.data(), o.b.rows(), o.b.cols());
  RowMatrix want(s.m, s.n);
  if (!s.trans_a && !s.trans_b) want.noalias() = am * bm;
  if (!s.trans_a && s.trans_b) want.noalias() = am * bm.transpose();
  if (s.trans_a && !s.trans_b) want.noalias() = am.transpose() * bm;
  if (s.trans_a && s.trans_b) want.noalias() = am.transpose() * bm.transpose();
  const float diff = (Map(o.c.data(), s.m, s.n) - want).cwiseAbs().maxCoeff();
  if (diff > 1e-3f * static_cast<float>(s.k)) {
    state.SkipWithError(("differs from Eigen's product by " + std::to_string(diff)).c_str());
    return;
  }
  for (auto _ : state) {
    gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, o.a.data(), o.b.data(), o.c.data());
    benchmark::DoNotOptimize(o.c.data());
  }
  SetFlops(state, s);
}
#endif

int Register() {
#ifdef FULCRUM_BENCH_GEMM_LIBS
  fulcrum::bench::SingleThreadedLibraries();
#endif
  for (const Shape& s : Shapes()) {
    benchmark::RegisterBenchmark((std::string("Eigen/") + s.name).c_str(), BM_Eigen, s)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("MatMul/") + s.name).c_str(), BM_MatMul, s)
        ->Unit(benchmark::kMillisecond);
#ifdef FULCRUM_BENCH_OPENBLAS
    benchmark::RegisterBenchmark((std::string("OpenBLAS/") + s.name).c_str(), BM_OpenBlas, s)
        ->Unit(benchmark::kMillisecond);
#endif
#ifdef FULCRUM_BENCH_GEMM_LIBS
    benchmark::RegisterBenchmark((std::string("BLIS/") + s.name).c_str(), BM_Library, s,
                                 &fulcrum::bench::BlisSgemm)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("oneDNN/") + s.name).c_str(), BM_Library, s,
                                 &fulcrum::bench::OneDnnSgemm)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("libxsmm/") + s.name).c_str(), BM_Library, s,
                                 &fulcrum::bench::LibxsmmSgemm)
        ->Unit(benchmark::kMillisecond);
#endif
  }
  return 0;
}
const int kRegistered = Register();

}  // namespace

BENCHMARK_MAIN();
