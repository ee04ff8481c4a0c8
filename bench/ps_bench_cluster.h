// bench/ps_throughput: a benchmark cluster: N PS tasks holding one model under one
// placement (real `ps` processes from the product's ps binary on 127.0.0.1, pinned one core
// each or not, created and kept alive by a chief client in this process) and W workers on
// them, each with its own GrpcPsClient per PS and its own
// runtime::ShardedVariables. PsStep is one worker's PushPullAll; PlainStep moves exactly the
// same bytes, cut into the same chunks, as Ping RPCs on the same connections.
// Thread-safety: Start and the destructor from one thread; PsStep/PlainStep of different
// workers may run at once (one thread per worker); the heartbeat thread is internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "base/mutex.h"
#include "bench/ps_bench_model.h"
#include "bench/ps_bench_options.h"
#include "bench/ps_bench_process.h"
#include "ops/optimizer.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/cluster/placement.h"

namespace fulcrum::bench {

// How a Cluster runs its PS tasks.
struct ClusterConfig {
  // The ps processes (options.ps_binary) are created and kept alive by a chief client in
  // this process; true: ps:p pinned to core p.
  bool pinned = false;
  ops::OptimizerKind optimizer = ops::OptimizerKind::kSgd;
  std::string dir;  // where the cluster specs and the ps logs go
  int id = 0;       // names the spec and log files of this cluster in `dir`
};

class Cluster {
 public:
  // `options` must outlive the cluster.
  explicit Cluster(const PsBenchOptions& options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Places `model` on `num_ps` tasks, starts them, creates their variables and connects
  // `num_workers` workers (channels warmed up).
  absl::Status Start(const BenchModel& model, int num_ps, runtime::PlacementStrategy strategy,
                     int num_workers, const ClusterConfig& config = {});

  int num_workers() const { return static_cast<int>(workers_.size()); }
  int num_chunks() const;
  const runtime::Placement& placement() const { return placement_; }

  // One PushPullAll of worker w; adds the payload bytes moved to *bytes.
  absl::Status PsStep(int w, int64_t* bytes);
  // The plain baseline of PsStep: one Ping per chunk, all in flight.
  absl::Status PlainStep(int w, int64_t* bytes);

  // Server-side TCP connections in ESTABLISHED state on this cluster's ports.
  int Connections() const;
  // CPU seconds so far of each ps process (task order), then of this process.
  std::vector<double> Cpu() const;
  // Each ps process's Cpus_allowed_list, e.g. "0 / 1".
  std::string AllowedCpuLists() const;

 private:
  struct Worker;

  // The ps processes from the ps binary, their variables created through the chief clients.
  absl::Status StartProcesses(const BenchModel& model, int num_ps, int num_workers,
                              const ClusterConfig& config);
  // Spawns ps:0..num_ps-1 on `ports` with the spec at `spec_path`.
  absl::Status SpawnProcesses(const std::vector<int>& ports, int num_ps,
                              const std::string& spec_path, const ClusterConfig& config);
  // Waits until ps process p answers its chief client.
  absl::Status AwaitProcess(int p);
  // Worker w with a client (its own connection) to every ps process.
  absl::Status AddWorker(const BenchModel& model, int w);
  // The Ping slots of a worker: the same chunks as its PS path, over the same spans.
  void BuildPingSlots(Worker& worker) const;
  void StartHeartbeat();
  void StopHeartbeat();
  void ShutdownProcesses();

  const PsBenchOptions& options_;
  runtime::Placement placement_;
  std::vector<PsProcess> processes_;
  std::vector<std::unique_ptr<runtime::GrpcPsClient>> chief_;  // per ps process
  std::vector<std::unique_ptr<Worker>> workers_;
  std::thread heartbeat_;
  Mutex heartbeat_mu_;
  CondVar heartbeat_cv_;
  bool heartbeat_stop_ ABSL_GUARDED_BY(heartbeat_mu_) = false;
};

}  // namespace fulcrum::bench
