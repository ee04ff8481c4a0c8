// ops_bench: forward+backward examples/sec per model (dense: batch 64/128/256, 1 and 2
// threads; CNNs: batch 1 to 400, 2 threads; on GPU 0 too when built with CUDA) and
// GEMM GFLOP/s on the models' shapes, with Eigen's square-GEMM figure printed as the baseline
// (BENCHMARKING.md: "Eigen + OpenMP SGEMM ~ 280-300 GFLOP/s on 2 threads" here), and each
// study conv layer's forward against the measured FMA peak (conv_roofline.cc).
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "models/registry.h"
#include "ops/backend.h"
#include "ops/cpu/kernels.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"

#ifdef FULCRUM_HAVE_CUDA
#include "ops/cuda/cuda_backend.h"
#endif

namespace fulcrum {
namespace {

ops::Tensor RandomTensor(const ops::Shape& shape, uint64_t seed) {
  ops::Tensor t = ops::Tensor::Zeros(shape);
  (void)ops::Initialize(ops::Initializer::Uniform(1.0f), seed, &t);
  return t;
}

// The models and the example shape each benchmark feeds them (NHWC for the CNNs: the
// studies' input sizes).
struct BenchModel {
  const char* name;
  std::vector<int64_t> shape;
};
const BenchModel kModels[] = {{"logreg", {784}},
                              {"mlp", {784}},
                              {"autoencoder", {784}},
                              {"mnist_cnn", {28, 28, 1}},
                              {"cifar10_cnn", {24, 24, 3}},
                              {"stn", {28, 28, 1}},
                              {"vgg16", {32, 32, 3}},
                              {"alexnet", {227, 227, 3}}};
constexpr int kDenseModels = 3;

// Forward+backward of `model` on `backend` (null: the model's CPU backend over `pool`).
// One iteration = one ComputeGradients over a batch of random inputs already in memory: no
// data loading, no optimizer, no push (bench/compare_cnn.sh measures the full step).
void RunModelStep(benchmark::State& state, const BenchModel& m, int64_t batch,
                  ops::ThreadPool* pool, ops::Backend* backend) {
  models::ModelConfig config;
  config.input_size = 1;
  for (int64_t d : m.shape) config.input_size *= d;
  if (m.shape.size() == 3) config.input_shape = m.shape;
  auto created = models::CreateBuiltinModel(m.name, config, pool);
  if (!created.ok()) {
    state.SkipWithError(std::string(created.status().message()).c_str());
    return;
  }
  auto model = std::move(created).value();
  if (backend != nullptr) model->set_backend(backend);
  std::vector<ops::Tensor> values, grads;
  uint64_t seed = 1;
  for (const auto& spec : model->variables()) {
    ops::Tensor v = ops::Tensor::Zeros(spec.shape);
    (void)ops::Initialize(spec.initializer, seed++, &v);
    values.push_back(v);
    grads.push_back(ops::Tensor::Zeros(spec.shape));
  }
  ops::Tensor inputs = RandomTensor({batch, config.input_size}, 99);
  for (float& x : inputs.flat()) x = 0.5f * (x + 1.0f);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
  for (auto _ : state) {
    auto loss = model->ComputeGradients(inputs, labels, values, grads);
    if (!loss.ok()) {
      state.SkipWithError(std::string(loss.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(loss);
  }
  state.counters["examples_per_sec"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(m.name);
}

// Args: model index, batch, threads.
void BM_ModelStep(benchmark::State& state) {
  ops::ThreadPool pool(static_cast<int>(state.range(2)));
  RunModelStep(state, kModels[state.range(0)], state.range(1), &pool, nullptr);
}

void ModelArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"model", "batch", "threads"});
  for (int m = 0; m < kDenseModels; ++m) {
    for (int batch : {64, 128, 256}) {
      for (int threads : {1, 2}) b->Args({m, batch, threads});
    }
  }
  // The CNNs over Wang et al.'s batch sweep, 2 threads (AlexNet at 227x227 up to 50).
  for (int m = kDenseModels; m < static_cast<int>(std::size(kModels)); ++m) {
    const bool alexnet = std::string(kModels[m].name) == "alexnet";
    for (int batch : {1, 10, 50, 100, 200, 400}) {
      if (alexnet && batch > 50) continue;
      b->Args({m, batch, 2});
    }
  }
}
BENCHMARK(BM_ModelStep)->Apply(ModelArgs)->UseRealTime()->MinTime(0.3);

#ifdef FULCRUM_HAVE_CUDA
// The same on GPU 0 (the CUDA backend); each case is skipped with the reason where there is
// no usable GPU. Args: model index, batch.
void BM_ModelStepGpu(benchmark::State& state) {
  static absl::StatusOr<std::unique_ptr<ops::Backend>> gpu = ops::cuda::CreateCudaBackend(0);
  if (!gpu.ok()) {
    state.SkipWithError(absl::StrCat("no GPU: ", gpu.status().message()).c_str());
    return;
  }
  RunModelStep(state, kModels[state.range(0)], state.range(1), nullptr, gpu->get());
}
void GpuModelArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"model", "batch"});
  for (int m = 0; m < static_cast<int>(std::size(kModels)); ++m) {
    for (int batch : {1, 10, 50, 100, 128, 200, 400}) b->Args({m, batch});
  }
}
BENCHMARK(BM_ModelStepGpu)->Apply(GpuModelArgs)->UseRealTime()->MinTime(0.3);
#endif

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
