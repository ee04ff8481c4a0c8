// ps_throughput: how fast real gRPC parameter servers move a whole model, against plain gRPC
// moving the same bytes on the same path in the same run (BENCHMARKING.md).
//
// Every point starts N PS tasks as real `ps` processes (the product's ps binary, --ps_binary)
// on 127.0.0.1, created the way the chief does it (one CreateVariablesRequest per shard from
// the placement, async mode, SGD with a tiny learning rate; this process acts as the chief:
// CreateVariables, Stats every 500 ms as a heartbeat, Shutdown at the end), and W worker
// threads. Each worker has its own GrpcPsClient per PS and its own
// runtime::ShardedVariables, and loops PushPullAll (push every gradient chunk, read every
// value chunk back, one RPC per chunk, all in flight). The baseline ("plain") is the same W
// threads doing Ping RPCs over the same connections that carry exactly the same bytes each
// way, cut into the same chunks, all in flight, with the same client-side encode/decode: the
// only difference is the PS logic (validation, dedup, chunk locks, SGD apply, encode of the
// values).
//
// Every worker has its own TCP/HTTP-2 connection per PS, as separate worker processes would
// (runtime::MakeChannel gives each channel its own connection). The plain Pings use a stub
// on the PS client's channel, so they share its connection.
//
// Rounds alternate PS and plain (A B A B ..., --pairs pairs, after an unreported warm-up
// pair of 2x-long rounds); each round runs every worker for --round_ms (at least one step
// each). Reported: medians of steps/s and MB/s (10^6 bytes pushed + pulled per second, all
// workers), and the median, min and max of the per-pair ratio PS/plain. The benchmark's own
// time column is the whole point (setup, warm-up and all rounds); read the counters.
// PS_THROUGHPUT_VERBOSE=1 prints every round on stderr.
//
// Benchmarks (filter with --benchmark_filter):
//   matrix/<model>/w<W>/ps<P>          models logreg, mlp, autoencoder (ModelConfig defaults)
//                                      and syn<N>mb: 8 equal float variables [N*32, 1024],
//                                      N MiB in all; W in {1,2,4}, P in {1,2}; round_robin.
//   placement/<model>/<strategy>       mlp and skew16 (one 12 MiB variable [3072,1024] + 8
//                                      of 0.5 MiB): rounds cycle 1 PS, 2 PS under <strategy>,
//                                      plain gRPC on the 2-PS chunks; --placement_workers.
//   pinned/<model>/<strategy>          only with --pinned_ps=1: the placement experiment with
//                                      each ps process pinned to one core with
//                                      sched_setaffinity: ps:0 on core 0, ps:1 on core 1 (the
//                                      1-PS cluster: ps:0 alone on core 0), emulating PS hosts
//                                      of one core each; the worker threads stay in this
//                                      process, unpinned. Optimizer --pinned_optimizer
//                                      (default adam, so that the apply costs the PS more).
//                                      Also reported: each process's CPU use (cores busy, from
//                                      /proc/<pid>/stat) during the rounds. With
//                                      --ps_cpu_quota=F each ps gets at most F of its core
//                                      (its own cgroup-v1 cpu cgroup, CFS quota F*10 ms per
//                                      10 ms; needs root), emulating PS hosts slower than the
//                                      worker side, so that the PS and not the shared cores
//                                      bounds the step.
// A summary (tables, bytes per PS and imbalance per placement, /proc/loadavg before and
// after) is printed at the end. The ps logs of a failed point stay in /tmp/ps_throughput.*.
//
// Own flags (before Google Benchmark's): --round_ms=250 --pairs=3 --placement_workers=4
// --chunk_bytes=2097152 --pinned_ps=0 --ps_binary=<build>/bin/ps --pinned_optimizer=adam
// --ps_cpu_quota=0; env PS_THROUGHPUT_ROUND_MS and PS_THROUGHPUT_PAIRS override the defaults
// (PS_THROUGHPUT_ROUND_MS=100: a ~1 min run). The pinned experiment alone:
//   ps_throughput --pinned_ps=1 --benchmark_filter=pinned/
//
// Files: ps_bench_options (flags), ps_bench_model (models, placement, PS definitions),
// ps_bench_cluster (the PS processes and workers), ps_bench_process (spawning ps processes),
// ps_bench_rounds (timed rounds, medians, ratios); this file: the benchmarks and the summary.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/ps_bench_cluster.h"
#include "bench/ps_bench_model.h"
#include "bench/ps_bench_options.h"
#include "bench/ps_bench_process.h"
#include "bench/ps_bench_rounds.h"
#include "benchmark/benchmark.h"
#include "ops/optimizer.h"
#include "runtime/cluster/placement.h"

namespace fulcrum::bench {
namespace {

constexpr runtime::PlacementStrategy kStrategies[] = {runtime::PlacementStrategy::kRoundRobin,
                                                      runtime::PlacementStrategy::kGreedy,
                                                      runtime::PlacementStrategy::kPartition};

struct MatrixResult {
  std::string model;
  int workers = 0, num_ps = 0, chunks = 0, connections = 0;
  double model_mb = 0;
  Series ps, plain;
  Ratio ratio;
};
struct PlacementResult {
  std::string model, strategy;
  int workers = 0;
  double bytes0 = 0, bytes1 = 0, imbalance = 0;
  Series one, two, plain;
  Ratio speedup, efficiency;
};
struct PinnedResult {
  PlacementResult placement;
  std::string optimizer;
  std::string cores_one, cores_two;                 // Cpus_allowed_list of each ps process
  std::vector<double> cpu_one, cpu_two, cpu_plain;  // cores busy: ps:0 [ps:1] bench
};

// One run of the program: its options and what the benchmarks found, for the summary.
struct BenchRun {
  PsBenchOptions options;
  std::vector<MatrixResult> matrix;
  std::vector<PlacementResult> placement;
  std::vector<PinnedResult> pinned;
  int next_cluster_id = 0;  // names the clusters' files
};

// A folder of /tmp for one benchmark's cluster specs and ps logs: removed at the end unless
// kept (a failed benchmark keeps its ps logs for the reader).
class ScratchDir {
 public:
  ScratchDir() {
    char path[] = "/tmp/ps_throughput.XXXXXX";
    if (mkdtemp(path) != nullptr) path_ = path;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty() && !keep_) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

// Skips the benchmark with `status`, keeping `dir`'s ps logs.
void Skip(benchmark::State& state, const absl::Status& status, ScratchDir& dir) {
  dir.Keep();
  state.SkipWithError(absl::StrCat(status.ToString(), " (ps logs in ", dir.path(), ")").c_str());
}

// The 1-PS vs 2-PS comparison of a placement, from the three series (1 PS, 2 PS, plain).
PlacementResult Compare(const std::string& model, runtime::PlacementStrategy strategy, int workers,
                        const Cluster& two, const std::vector<Series>& series) {
  PlacementResult r;
  r.model = model;
  r.strategy = runtime::PlacementName(strategy);
  r.workers = workers;
  r.bytes0 = static_cast<double>(two.placement().shard_bytes(0));
  r.bytes1 = static_cast<double>(two.placement().shard_bytes(1));
  r.imbalance = two.placement().imbalance();
  r.one = series[0];
  r.two = series[1];
  r.plain = series[2];
  r.speedup = Pairwise(r.two, r.one);
  r.efficiency = Pairwise(r.two, r.plain);
  return r;
}

void SetPlacementCounters(benchmark::State& state, const PlacementResult& r) {
  state.counters["ps1_steps/s"] = r.one.steps();
  state.counters["ps2_steps/s"] = r.two.steps();
  state.counters["plain2_steps/s"] = r.plain.steps();
  state.counters["ps2/ps1"] = r.speedup.median;
  state.counters["ps2/plain"] = r.efficiency.median;
  state.counters["imbalance"] = r.imbalance;
}

// The three modes of a placement comparison: 1 PS, 2 PS, plain gRPC on the 2-PS chunks.
std::vector<StepFn> PlacementModes(Cluster& one, Cluster& two) {
  return {[&](int w, int64_t* b) { return one.PsStep(w, b); },
          [&](int w, int64_t* b) { return two.PsStep(w, b); },
          [&](int w, int64_t* b) { return two.PlainStep(w, b); }};
}

void BM_Matrix(benchmark::State& state, BenchRun& run, const std::string& model_name, int workers,
               int num_ps) {
  auto model = MakeModel(model_name);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  ScratchDir dir;
  if (!dir.ok()) return state.SkipWithError("mkdtemp failed");
  MatrixResult result;
  for (auto _ : state) {
    Cluster cluster(run.options);
    const ClusterConfig config{.dir = dir.path(), .id = run.next_cluster_id++};
    if (absl::Status s =
            cluster.Start(*model, num_ps, runtime::PlacementStrategy::kRoundRobin, workers, config);
        !s.ok()) {
      return Skip(state, s, dir);
    }
    auto series = Alternate(run.options, workers,
                            {[&](int w, int64_t* b) { return cluster.PsStep(w, b); },
                             [&](int w, int64_t* b) { return cluster.PlainStep(w, b); }});
    if (!series.ok()) return Skip(state, series.status(), dir);
    result.model = model_name;
    result.workers = workers;
    result.num_ps = num_ps;
    result.chunks = cluster.num_chunks();
    result.connections = cluster.Connections();
    result.model_mb = static_cast<double>(model->bytes()) / (1 << 20);
    result.ps = (*series)[0];
    result.plain = (*series)[1];
    result.ratio = Pairwise(result.ps, result.plain);
  }
  state.counters["ps_steps/s"] = result.ps.steps();
  state.counters["plain_steps/s"] = result.plain.steps();
  state.counters["ps_MB/s"] = result.ps.mb();
  state.counters["plain_MB/s"] = result.plain.mb();
  state.counters["ps/plain"] = result.ratio.median;
  state.counters["ratio_min"] = result.ratio.min;
  state.counters["ratio_max"] = result.ratio.max;
  state.counters["chunks"] = result.chunks;
  state.counters["tcp_conns"] = result.connections;
  run.matrix.push_back(result);
}

void BM_Placement(benchmark::State& state, BenchRun& run, const std::string& model_name,
                  runtime::PlacementStrategy strategy) {
  const int workers = run.options.placement_workers;
  auto model = MakeModel(model_name);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  ScratchDir dir;
  if (!dir.ok()) return state.SkipWithError("mkdtemp failed");
  PlacementResult result;
  for (auto _ : state) {
    Cluster one(run.options), two(run.options);
    absl::Status s =
        one.Start(*model, 1, strategy, workers, {.dir = dir.path(), .id = run.next_cluster_id++});
    if (s.ok()) {
      s = two.Start(*model, 2, strategy, workers, {.dir = dir.path(), .id = run.next_cluster_id++});
    }
    if (!s.ok()) return Skip(state, s, dir);
    auto series = Alternate(run.options, workers, PlacementModes(one, two));
    if (!series.ok()) return Skip(state, series.status(), dir);
    result = Compare(model_name, strategy, workers, two, *series);
  }
  SetPlacementCounters(state, result);
  run.placement.push_back(result);
}

// One iteration of the pinned experiment in `dir`: both clusters, the rounds, the result.
absl::Status RunPinned(BenchRun& run, const BenchModel& model, runtime::PlacementStrategy strategy,
                       ops::OptimizerKind optimizer, const std::string& dir, PinnedResult* result) {
  const int workers = run.options.placement_workers;
  ClusterConfig config;
  config.pinned = true;
  config.optimizer = optimizer;
  config.dir = dir;
  Cluster one(run.options), two(run.options);
  config.id = run.next_cluster_id++;
  absl::Status s = one.Start(model, 1, strategy, workers, config);
  config.id = run.next_cluster_id++;
  if (s.ok()) s = two.Start(model, 2, strategy, workers, config);
  if (!s.ok()) return s;
  auto series =
      Alternate(run.options, workers, PlacementModes(one, two),
                {[&] { return one.Cpu(); }, [&] { return two.Cpu(); }, [&] { return two.Cpu(); }});
  if (!series.ok()) return series.status();
  result->placement = Compare(model.name, strategy, workers, two, *series);
  result->optimizer = ops::OptimizerName(optimizer);
  result->cores_one = one.AllowedCpuLists();
  result->cores_two = two.AllowedCpuLists();
  result->cpu_one = result->placement.one.cpu();
  result->cpu_two = result->placement.two.cpu();
  result->cpu_plain = result->placement.plain.cpu();
  return absl::OkStatus();  // the clusters shut their ps processes down here
}

// The placement experiment with real ps processes, one core each (see the top of the file).
void BM_Pinned(benchmark::State& state, BenchRun& run, const std::string& model_name,
               runtime::PlacementStrategy strategy) {
  auto model = MakeModel(model_name);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  auto optimizer = ops::ParseOptimizerKind(run.options.pinned_optimizer);
  if (!optimizer.ok()) {
    state.SkipWithError(std::string(optimizer.status().message()).c_str());
    return;
  }
  ScratchDir dir;
  if (!dir.ok()) return state.SkipWithError("mkdtemp failed");
  PinnedResult result;
  for (auto _ : state) {
    if (absl::Status s = RunPinned(run, *model, strategy, *optimizer, dir.path(), &result);
        !s.ok()) {
      return Skip(state, s, dir);
    }
  }
  SetPlacementCounters(state, result.placement);
  run.pinned.push_back(result);
}

// Registers one benchmark of one iteration, timed in real milliseconds.
void Register(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

void RegisterAll(BenchRun& run) {
  const std::vector<std::string> models = {"logreg", "mlp",     "autoencoder", "syn1mb",
                                           "syn4mb", "syn16mb", "syn64mb"};
  for (const auto& m : models) {
    for (int w : {1, 2, 4}) {
      for (int p : {1, 2}) {
        Register(absl::StrCat("matrix/", m, "/w", w, "/ps", p),
                 [&run, m, w, p](benchmark::State& st) { BM_Matrix(st, run, m, w, p); });
      }
    }
  }
  for (const std::string m : {"mlp", "skew16"}) {
    for (auto strategy : kStrategies) {
      Register(absl::StrCat("placement/", m, "/", runtime::PlacementName(strategy)),
               [&run, m, strategy](benchmark::State& st) { BM_Placement(st, run, m, strategy); });
    }
  }
  if (!run.options.pinned_ps) return;
  for (const std::string m : {"mlp", "skew16"}) {
    for (auto strategy : kStrategies) {
      Register(absl::StrCat("pinned/", m, "/", runtime::PlacementName(strategy)),
               [&run, m, strategy](benchmark::State& st) { BM_Pinned(st, run, m, strategy); });
    }
  }
}

std::string Range(const Ratio& r) {
  return absl::StrFormat("%.2f (%.2f–%.2f)", r.median, r.min, r.max);
}

void PrintMatrix(const std::vector<MatrixResult>& matrix) {
  if (matrix.empty()) return;
  std::printf(
      "\n| model | MiB | W | PS | chunks | conns | PS steps/s | plain steps/s | PS MB/s "
      "| plain MB/s | PS/plain median (min–max) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (const auto& r : matrix) {
    std::printf("| %s | %.2f | %d | %d | %d | %d | %.1f | %.1f | %.0f | %.0f | %s |\n",
                r.model.c_str(), r.model_mb, r.workers, r.num_ps, r.chunks, r.connections,
                r.ps.steps(), r.plain.steps(), r.ps.mb(), r.plain.mb(), Range(r.ratio).c_str());
  }
}

// Bytes per PS and imbalance of each placement over 2 PS (pure computation).
void PrintPlacementBytes() {
  std::printf("\n| model | placement (2 PS) | ps:0 bytes | ps:1 bytes | imbalance |\n");
  std::printf("|---|---|---:|---:|---:|\n");
  for (const std::string m : {"mlp", "skew16"}) {
    auto model = MakeModel(m);
    if (!model.ok()) continue;
    for (auto strategy : kStrategies) {
      auto p = Place(*model, 2, strategy);
      if (!p.ok()) continue;
      std::printf("| %s | %s | %lld | %lld | %.2f |\n", m.c_str(), runtime::PlacementName(strategy),
                  static_cast<long long>(p->shard_bytes(0)),
                  static_cast<long long>(p->shard_bytes(1)), p->imbalance());
    }
  }
}

void PrintPlacement(const std::vector<PlacementResult>& placement) {
  if (placement.empty()) return;
  std::printf(
      "\n| model | placement | W | 1 PS steps/s | 2 PS steps/s | plain (2 PS chunks) "
      "steps/s | 2PS/1PS median (min–max) | 2PS/plain median (min–max) |\n");
  std::printf("|---|---|---:|---:|---:|---:|---|---|\n");
  for (const auto& r : placement) {
    std::printf("| %s | %s | %d | %.1f | %.1f | %.1f | %s | %s |\n", r.model.c_str(),
                r.strategy.c_str(), r.workers, r.one.steps(), r.two.steps(), r.plain.steps(),
                Range(r.speedup).c_str(), Range(r.efficiency).c_str());
  }
}

std::string Cores(const std::vector<double>& v) {
  std::vector<std::string> parts;
  for (double c : v) parts.push_back(absl::StrFormat("%.2f", c));
  return absl::StrJoin(parts, " / ");
}

void PrintPinned(const std::vector<PinnedResult>& pinned, double ps_cpu_quota) {
  if (pinned.empty()) return;
  const std::string quota =
      ps_cpu_quota > 0 ? absl::StrFormat(", each ps at most %.2f of its core", ps_cpu_quota)
                       : std::string();
  std::printf(
      "\nPinned ps processes (%s; 1 PS on cpus %s, 2 PS on cpus %s%s), workers in "
      "this process, unpinned. bound = total bytes / largest shard, the 2PS/1PS a "
      "PS-bound step could reach. CPU = cores busy (median per round): ps:0 [/ ps:1] / "
      "this process.\n",
      pinned[0].optimizer.c_str(), pinned[0].cores_one.c_str(), pinned[0].cores_two.c_str(),
      quota.c_str());
  std::printf(
      "\n| model | placement | W | ps:0 / ps:1 MiB | bound | 1 PS steps/s | 2 PS "
      "steps/s | plain (2 PS chunks) steps/s | 2PS/1PS median (min–max) | 2PS/plain "
      "median (min–max) | CPU 1 PS | CPU 2 PS | CPU plain |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---|---|\n");
  for (const auto& p : pinned) {
    const PlacementResult& r = p.placement;
    std::printf(
        "| %s | %s | %d | %.2f / %.2f | %.2f | %.1f | %.1f | %.1f | %s | %s | %s | %s "
        "| %s |\n",
        r.model.c_str(), r.strategy.c_str(), r.workers, r.bytes0 / (1 << 20), r.bytes1 / (1 << 20),
        (r.bytes0 + r.bytes1) / std::max(r.bytes0, r.bytes1), r.one.steps(), r.two.steps(),
        r.plain.steps(), Range(r.speedup).c_str(), Range(r.efficiency).c_str(),
        Cores(p.cpu_one).c_str(), Cores(p.cpu_two).c_str(), Cores(p.cpu_plain).c_str());
  }
}

void PrintSummary(const BenchRun& run, const std::string& load_before) {
  const PsBenchOptions& o = run.options;
  std::printf(
      "\nps_throughput: %d reported pair(s) of %d ms rounds after a warm-up pair; chunk "
      "%lld bytes; a connection per worker and ps\n",
      o.pairs, o.round_ms, static_cast<long long>(o.chunk_bytes));
  std::printf("loadavg before: %s\nloadavg after:  %s\n", load_before.c_str(),
              ReadLoadavg().c_str());
  PrintMatrix(run.matrix);
  PrintPlacementBytes();
  PrintPlacement(run.placement);
  PrintPinned(run.pinned, o.ps_cpu_quota);
  std::fflush(stdout);
}

}  // namespace
}  // namespace fulcrum::bench

int main(int argc, char** argv) {
  // Google Benchmark takes its --benchmark_* flags out of argv first; the rest are ours.
  benchmark::Initialize(&argc, argv);
  fulcrum::bench::BenchRun run;
  run.options = fulcrum::bench::ParsePsBenchOptions(argc, argv);
  const std::string load_before = fulcrum::bench::ReadLoadavg();
  fulcrum::bench::RegisterAll(run);
  benchmark::RunSpecifiedBenchmarks();
  fulcrum::bench::PrintSummary(run, load_before);
  benchmark::Shutdown();
  return 0;
}
