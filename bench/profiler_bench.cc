// What the profiler costs per event, beside the work it measures: recording one worker step,
// reporting one RPC, and taking one /proc sample, each next to a baseline from the same run
// (an empty loop body's clock read; one logreg forward/backward step of batch 256).
//   build/bin/profiler_bench [--benchmark_repetitions=3]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "models/model.h"
#include "models/registry.h"
#include "ops/tensor.h"
#include "profiler/profiler.h"
#include "profiler/sampler.h"
#include "profiler/csv_sink.h"
#include "profiler/tfevents.h"
#include "profiler/trace_sink.h"

namespace fulcrum {
namespace {

std::unique_ptr<profiler::Profiler> Enabled() {
  profiler::ProfilerOptions o;
  o.interval = absl::Hours(1);  // the sampler thread stays idle during the measurement
  auto p = profiler::Profiler::Start(o);
  if (!p.ok()) return nullptr;
  return std::move(*p);
}

// Baseline: the clock read every step record starts with.
void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(profiler::NowUnixMicros());
}
BENCHMARK(BM_ClockRead);

void BM_RecordStep(benchmark::State& state) {
  auto prof = Enabled();
  if (prof == nullptr) return state.SkipWithError("profiler did not start");
  profiler::StepRecord r;
  r.examples = 256;
  r.wall_ms = 1.0;
  for (auto _ : state) {
    r.begin_unix_us = profiler::NowUnixMicros();
    ++r.step;
    prof->RecordStep(r);
  }
}
BENCHMARK(BM_RecordStep);

void BM_OnRpc(benchmark::State& state) {
  auto prof = Enabled();
  if (prof == nullptr) return state.SkipWithError("profiler did not start");
  const std::string peer = "ps-0";
  profiler::RpcEvent e;
  e.peer = &peer;
  e.method = "PushPull";
  e.bytes_sent = 31400;
  e.bytes_received = 31400;
  for (auto _ : state) {
    e.begin_unix_us = profiler::NowUnixMicros();
    prof->OnRpc(e);
  }
}
BENCHMARK(BM_OnRpc);

// One TensorBoard scalar record (Event proto, TFRecord framing with two CRCs, buffered write),
// as the sampler thread writes three per worker step.
void BM_TfEventScalar(benchmark::State& state) {
  const std::string dir = "/tmp/fulcrum_profiler_bench_events";
  auto writer = profiler::EventFileWriter::Create(dir, std::to_string(::getpid()));
  if (!writer.ok()) return state.SkipWithError("cannot create the event file");
  int64_t step = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(writer->WriteScalar("train/loss", ++step, 1.7e9, 0.5));
  }
  (void)writer->Close();
  std::remove(writer->path().c_str());
}
BENCHMARK(BM_TfEventScalar);

// One sample of the live /proc on the caller's thread: the process's stat, status, io and
// every thread's stat; the host's stat, meminfo, loadavg, diskstats; net/dev and net/snmp.
// The argument is how many extra (idle) threads the process has: each adds one
// task/TID/stat read (a worker with gRPC has a few dozen threads).
void BM_Sample(benchmark::State& state) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> idle;
  for (int64_t i = 0; i < state.range(0); ++i) {
    idle.emplace_back([&stop] {
      while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  }
  profiler::Sampler sampler(profiler::LiveProcSource(), absl::Hours(1));
  if (!sampler.SampleNow().ok()) state.SkipWithError("cannot read /proc");
  for (auto _ : state) benchmark::DoNotOptimize(sampler.SampleNow());
  stop = true;
  for (std::thread& t : idle) t.join();
}
BENCHMARK(BM_Sample)->Arg(0)->Arg(32);

// One rewrite of a worker's records (what --profile_flush_secs does every 5 s, and the end of
// the run once): steps.csv, samples.csv and trace.json for `steps` steps with 15 chunk RPCs each
// (mlp's chunk count; the trace keeps at most 100000 RPCs) and a sample per 100 steps. Its cost
// grows with the run; it runs on the sampler's thread.
void BM_RewriteRecords(benchmark::State& state) {
  profiler::TraceInput in;
  in.job = "worker";
  const int64_t steps = state.range(0);
  const int64_t t0 = 1'700'000'000'000'000;
  for (int64_t i = 0; i < steps; ++i) {
    profiler::StepRecord r;
    r.step = i + 1;
    r.global_step = i + 1;
    r.examples = 256;
    r.loss = 0.5;
    r.begin_unix_us = t0 + i * 1750;
    r.wall_ms = 1.7;
    r.data_ms = 0.1;
    r.forward_ms = 0.5;
    r.backward_ms = 0.6;
    r.push_ms = 0.4;
    in.steps.push_back(r);
    for (int c = 0; c < 15; ++c) {
      in.rpc_spans.push_back({"ps-0", "PushPull", r.begin_unix_us + 1200, 400});
    }
    if (i % 100 == 0) {
      profiler::SystemSample s;
      s.unix_micros = r.begin_unix_us;
      profiler::InterfaceSample lo;
      lo.name = "lo";
      lo.loopback = true;
      lo.rx_bytes = lo.tx_bytes = static_cast<uint64_t>(1000 * i);
      lo.rx_bytes_per_sec = lo.tx_bytes_per_sec = 1e6;
      s.interfaces.push_back(lo);
      in.samples.push_back(s);
    }
  }
  const std::string dir = "/tmp/fulcrum_bench_rewrite_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const bool csv = state.range(1) != 0, trace = state.range(2) != 0;
  for (auto _ : state) {
    if (csv) {
      benchmark::DoNotOptimize(
          profiler::WriteCsvFiles(dir, in.job, in.samples, in.steps, in.ps_records, in.evals));
    }
    if (trace) benchmark::DoNotOptimize(profiler::WriteTrace(in, dir + "/trace.json"));
  }
  std::filesystem::remove_all(dir);
}
// Arguments: steps, CSV files (0/1), trace.json (0/1).
BENCHMARK(BM_RewriteRecords)
    ->ArgNames({"steps", "csv", "trace"})
    ->Args({1000, 1, 1})
    ->Args({8000, 1, 0})
    ->Args({8000, 0, 1})
    ->Args({8000, 1, 1})
    ->Args({20000, 1, 1})
    ->Unit(benchmark::kMillisecond);

// The work a step record describes: a logreg forward/backward of batch 256 (no data, no RPC).
void BM_LogregStep(benchmark::State& state) {
  models::ModelRegistry registry;
  (void)models::RegisterBuiltinModels(&registry);
  models::ModelConfig config;
  config.input_size = 784;
  config.num_classes = 10;
  auto model = registry.Create("logreg", config);
  if (!model.ok()) return state.SkipWithError("no logreg model");
  std::vector<ops::Tensor> values, grads;
  for (const auto& v : (*model)->variables()) {
    values.push_back(ops::Tensor::Zeros(v.shape));
    grads.push_back(ops::Tensor::Zeros(v.shape));
  }
  ops::Tensor inputs = ops::Tensor::Zeros({256, 784});
  std::vector<int32_t> labels(256, 3);
  for (auto _ : state) {
    benchmark::DoNotOptimize((*model)->ComputeGradients(inputs, labels, values, grads));
  }
}
BENCHMARK(BM_LogregStep);

}  // namespace
}  // namespace fulcrum

BENCHMARK_MAIN();
