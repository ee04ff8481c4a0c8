// ops_bench: forward+backward examples/sec per model (batch 64/128/256, 1 and 2 threads) and
// GEMM GFLOP/s on the models' shapes, with Eigen's square-GEMM figure printed as the baseline
// (BENCHMARKING.md: "Eigen + OpenMP SGEMM ~ 280-300 GFLOP/s on 2 threads" here).
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "models/registry.h"
#include "ops/cpu/kernels.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"

namespace fulcrum {
namespace {

ops::Tensor RandomTensor(const ops::Shape& shape, uint64_t seed) {
  ops::Tensor t = ops::Tensor::Zeros(shape);
  (void)ops::Initialize(ops::Initializer::Uniform(1.0f), seed, &t);
  return t;
}

const char* kModels[] = {"logreg", "mlp", "autoencoder"};

// Args: model index, batch, threads. One iteration = one forward+backward over a batch.
void BM_ModelStep(benchmark::State& state) {
  const std::string name = kModels[state.range(0)];
  const int64_t batch = state.range(1);
  ops::ThreadPool pool(static_cast<int>(state.range(2)));
  models::ModelRegistry registry;
  (void)models::RegisterBuiltinModels(&registry);
  auto model = std::move(registry.Create(name, {}).value());
  model->set_thread_pool(&pool);
  std::vector<ops::Tensor> values, grads;
  uint64_t seed = 1;
  for (const auto& spec : model->variables()) {
    ops::Tensor v = ops::Tensor::Zeros(spec.shape);
    (void)ops::Initialize(spec.initializer, seed++, &v);
    values.push_back(v);
    grads.push_back(ops::Tensor::Zeros(spec.shape));
  }
  ops::Tensor inputs = RandomTensor({batch, 784}, 99);
  for (float& x : inputs.flat()) x = 0.5f * (x + 1.0f);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
  for (auto _ : state) {
    auto loss = model->ComputeGradients(inputs, labels, values, grads);
    benchmark::DoNotOptimize(loss);
  }
  state.counters["examples_per_sec"] = benchmark::Counter(
      static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(name);
}

void ModelArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"model", "batch", "threads"});
  for (int m = 0; m < 3; ++m) {
    for (int batch : {64, 128, 256}) {
      for (int threads : {1, 2}) b->Args({m, batch, threads});
    }
  }
}
BENCHMARK(BM_ModelStep)->Apply(ModelArgs)->UseRealTime()->MinTime(0.3);

// Args: m, k, n, transpose pattern (0: a*b, 1: a^T*b (weight gradient), 2: a*b^T (input
// gradient)), threads.
void BM_Gemm(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int pattern = static_cast<int>(state.range(3));
  ops::ThreadPool pool(static_cast<int>(state.range(4)));
  const bool ta = pattern == 1, tb = pattern == 2;
  ops::Tensor a = RandomTensor(ta ? ops::Shape{k, m} : ops::Shape{m, k}, 1);
  ops::Tensor b = RandomTensor(tb ? ops::Shape{n, k} : ops::Shape{k, n}, 2);
  ops::Tensor c = ops::Tensor::Zeros({m, n});
  for (auto _ : state) {
    (void)ops::MatMul(a, ta, b, tb, &c, false, &pool);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(m * k * n) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void GemmArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "k", "n", "pattern", "threads"});
  for (int threads : {1, 2}) {
    b->Args({1024, 1024, 1024, 0, threads});  // baseline: Eigen's square GEMM
    for (int batch : {128, 256}) {
      // Forward, weight-gradient and input-gradient GEMMs of logreg and mlp at this batch.
      b->Args({batch, 784, 10, 0, threads});
      b->Args({784, batch, 10, 1, threads});
      b->Args({batch, 784, 256, 0, threads});
      b->Args({784, batch, 256, 1, threads});
      b->Args({batch, 256, 128, 0, threads});
      b->Args({256, batch, 128, 1, threads});
      b->Args({batch, 128, 256, 2, threads});
    }
  }
}
BENCHMARK(BM_Gemm)->Apply(GemmArgs)->UseRealTime()->MinTime(0.2);

}  // namespace
}  // namespace fulcrum

BENCHMARK_MAIN();
