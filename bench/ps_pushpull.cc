// ps_pushpull: one Fulcrum worker process moving a whole model through real `ps` processes
// (build/bin/ps) as fast as it can, push + pull per round: the Fulcrum side of
// bench/compare_pslite.sh, the counterpart of bench/pslite/pslite_bench.cc's worker.
//
// The ps tasks and this process share a cluster spec without a chief job ({"ps": [...],
// "worker": [...]}): worker 0 plays chief:0 as in TensorFlow 1.x's layout, creating the
// variables on every ps (bench/ps_bench_model: the model, round_robin placement, async SGD lr
// 1e-6, chunks of --rpc_chunk_bytes) and, at the end, sending every ps Shutdown. Each worker
// has one GrpcPsClient (its own connection) per ps and loops ShardedVariables::PushPullAll: one
// PushPull RPC per chunk, all in flight, the new values decoded into the worker's tensors.
// Timing (bench/pslite/pushpull_common.h, shared with ps-lite's side): --warmup_s of
// unreported rounds, a file barrier in --barrier_dir so every worker's window starts together,
// --seconds of rounds, one RESULT line per worker (payload bytes = gradients pushed + values
// pulled, as TransferResult counts them; checked against 2 x the model's bytes every round).
//
// Flags: Fulcrum's own --cluster_spec (required), --task_index, --model (logreg, mlp, ... or
// syn<N>mb: 8 equal float variables, N MiB in all), --rpc_chunk_bytes, --data_plane (the ps
// tasks must run with the same); and --warmup_s=1
// --seconds=3 --barrier_dir (required) --shutdown_ps=true. A bad flag exits 2 naming it.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/exit_code.h"
#include "base/files.h"
#include "base/malloc.h"
#include "bench/ps_bench_model.h"
#include "bench/pslite/pushpull_common.h"
#include "ops/optimizer.h"
#include "ops/tensor.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/client/sharded_variables.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/cluster/placement.h"
#include "runtime/config/flags.h"
#include "spdlog/spdlog.h"

ABSL_DECLARE_FLAG(std::string, cluster_spec);
ABSL_DECLARE_FLAG(int32_t, task_index);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int64_t, rpc_chunk_bytes);
ABSL_DECLARE_FLAG(fulcrum::runtime::DataPlane, data_plane);
ABSL_FLAG(double, warmup_s, 1, "Seconds of unreported push+pull rounds before the window.");
ABSL_FLAG(double, seconds, 3, "Seconds of the measured window.");
ABSL_FLAG(std::string, barrier_dir, "",
          "An empty folder shared by the workers of one run: their start barrier.");
ABSL_FLAG(bool, shutdown_ps, true, "Worker 0 sends every ps Shutdown at the end.");

namespace fulcrum::bench {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(60);
constexpr double kBarrierTimeoutS = 120;

int Fail(const std::string& what) {
  std::fprintf(stderr, "ps_pushpull: %s\n", what.c_str());
  return kExitRuntimeFailure;
}

int Run() {
  const std::string spec_path = absl::GetFlag(FLAGS_cluster_spec);
  const int rank = std::max(0, absl::GetFlag(FLAGS_task_index));
  const int64_t chunk_bytes = absl::GetFlag(FLAGS_rpc_chunk_bytes);
  const double warmup_s = absl::GetFlag(FLAGS_warmup_s);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const std::string barrier_dir = absl::GetFlag(FLAGS_barrier_dir);
  const auto bad = [](const std::string& message) {
    return runtime::ReportBadFlags(absl::InvalidArgumentError(message));
  };
  if (spec_path.empty()) return bad("--cluster_spec: required");
  if (barrier_dir.empty()) return bad("--barrier_dir: required");
  if (chunk_bytes < 4) return bad("--rpc_chunk_bytes: must be at least 4");
  const runtime::DataPlane data_plane = absl::GetFlag(FLAGS_data_plane);
  if (warmup_s < 0) return bad("--warmup_s: must be >= 0");
  if (seconds <= 0) return bad("--seconds: must be > 0");
  absl::StatusOr<std::string> text = ReadFileToString(spec_path);
  if (!text.ok()) return bad(absl::StrCat("--cluster_spec: ", text.status().message()));
  absl::StatusOr<runtime::ClusterSpec> spec = runtime::ParseClusterSpec(*text, spec_path);
  if (!spec.ok()) return bad(absl::StrCat("--cluster_spec: ", spec.status().message()));
  const int num_ps = spec->num_tasks(runtime::kPsJob);
  const int workers = spec->num_tasks(runtime::kWorkerJob);
  if (rank >= workers) {
    return bad(absl::StrCat("--task_index: ", rank, " but the spec has ", workers, " workers"));
  }
  absl::StatusOr<BenchModel> model = MakeModel(absl::GetFlag(FLAGS_model));
  if (!model.ok()) return bad(absl::StrCat("--model: ", model.status().message()));
  absl::StatusOr<runtime::Placement> placement =
      Place(*model, num_ps, runtime::PlacementStrategy::kRoundRobin);
  if (!placement.ok()) return Fail(placement.status().ToString());

  std::vector<std::unique_ptr<runtime::GrpcPsClient>> clients;
  std::vector<runtime::PsClient*> client_ptrs;
  for (int p = 0; p < num_ps; ++p) {
    clients.push_back(std::make_unique<runtime::GrpcPsClient>(absl::StrCat("ps:", p),
                                                              spec->address(runtime::kPsJob, p)));
    client_ptrs.push_back(clients.back().get());
    if (!clients.back()->WaitUntilReady(absl::Seconds(30))) {
      return Fail(absl::StrCat("ps:", p, " at ", spec->address(runtime::kPsJob, p), " not ready"));
    }
  }
  if (rank == 0) {  // chief:0's part: create the variables on every ps
    for (int p = 0; p < num_ps; ++p) {
      pb::CreateVariablesResponse response;
      absl::Status s = clients[static_cast<size_t>(p)]->CreateVariables(
          Definition(*model, *placement, p, ops::OptimizerKind::kSgd, chunk_bytes), &response,
          kCallTimeout);
      if (!s.ok()) return Fail(s.ToString());
    }
  }
  if (!pushpull::FileBarrier(barrier_dir, "created", rank, workers, kBarrierTimeoutS)) {
    return Fail("barrier 'created' timed out in " + barrier_dir);
  }
  runtime::ShardedVariables vars(*placement, chunk_bytes, client_ptrs,
                                 absl::StrCat("worker:", rank));
  for (auto& client : clients) {  // grow the HTTP/2 windows first, as the worker does
    if (absl::Status s = client->Warm(chunk_bytes, 3, kCallTimeout); !s.ok()) {
      return Fail(s.ToString());
    }
    if (data_plane != runtime::DataPlane::kGrpc) {  // auto: tcp (this one runs without TLS)
      client->set_tcp_data_plane(true);
      if (absl::Status s = client->OpenDataPlane(absl::StrCat("worker:", rank), kCallTimeout);
          !s.ok()) {
        return Fail(s.ToString());
      }
    }
  }
  std::vector<ops::Tensor> grads, values;
  for (const auto& v : model->variables) {
    grads.push_back(ops::Tensor::Filled(v.shape, 1e-3f));
    values.push_back(ops::Tensor::Zeros(v.shape));
  }
  int64_t step = 0;
  absl::Status failure;
  const int64_t want_bytes = 2 * model->bytes();
  const auto round = [&]() -> bool {
    runtime::TransferResult result;
    failure = vars.PushPullAll(step, 0, grads, values, kCallTimeout, &result);
    if (failure.ok() && (result.duplicates != 0 || result.retries != 0)) {
      failure = absl::InternalError(
          absl::StrCat("unexpected duplicates/retries: ", result.duplicates, "/", result.retries));
    }
    if (failure.ok() && result.bytes_sent + result.bytes_received != want_bytes) {
      failure = absl::InternalError(absl::StrCat(
          "moved ", result.bytes_sent, " + ", result.bytes_received, " bytes, want ", want_bytes));
    }
    step = result.global_step;
    return failure.ok();
  };
  if (pushpull::RunFor(warmup_s > 0 ? warmup_s : 1e-9, round).rounds < 0) {
    return Fail(failure.ToString());
  }
  if (!pushpull::FileBarrier(barrier_dir, "measure", rank, workers, kBarrierTimeoutS)) {
    return Fail("barrier 'measure' timed out in " + barrier_dir);
  }
  const pushpull::Timed t = pushpull::RunFor(seconds, round);
  if (t.rounds < 0) return Fail(failure.ToString());
  pushpull::PrintResult("fulcrum", rank, workers, num_ps, model->bytes(), vars.num_chunks(), t);
  if (!pushpull::FileBarrier(barrier_dir, "done", rank, workers, kBarrierTimeoutS)) {
    return Fail("barrier 'done' timed out in " + barrier_dir);
  }
  if (rank == 0 && absl::GetFlag(FLAGS_shutdown_ps)) {
    for (auto& client : clients) {
      if (absl::Status s = client->Shutdown("ps_pushpull done", absl::Seconds(10)); !s.ok()) {
        return Fail(s.ToString());
      }
    }
  }
  return kExitOk;
}

}  // namespace
}  // namespace fulcrum::bench

int main(int argc, char** argv) {
  fulcrum::runtime::ParseFlagsOrExit(
      argc, argv,
      "ps_pushpull --cluster_spec=FILE --task_index=I --model=M --barrier_dir=DIR: one worker "
      "process looping push+pull of a whole model through real ps processes");
  fulcrum::TuneMallocForTraining();
  spdlog::set_level(spdlog::level::warn);
  return fulcrum::bench::Run();
}
