#include "bench/ps_bench_cluster.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <span>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/blocking_counter.h"
#include "base/net.h"
#include "base/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps.grpc.pb.h"
#include "runtime/client/sharded_variables.h"
#include "runtime/cluster/chunk_plan.h"
#include "runtime/frames/tensor_coding.h"
#include "runtime/grpc/grpc_util.h"

namespace fulcrum::bench {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(60);

// One chunk of the plain baseline: a Ping carrying the chunk's gradient bytes out and its
// value bytes back.
struct PingSlot {
  int ps = 0;
  std::vector<std::span<const float>> grads;
  std::vector<std::span<float>> values;
  pb::PingRequest request;
  pb::PingResponse response;
  absl::Status status;
};

}  // namespace

struct Cluster::Worker {
  std::vector<std::unique_ptr<runtime::GrpcPsClient>> clients;    // per PS
  std::vector<std::unique_ptr<pb::ParameterServer::Stub>> stubs;  // per PS, same target
  std::unique_ptr<runtime::ShardedVariables> vars;
  std::vector<ops::Tensor> grads;
  std::vector<ops::Tensor> values;
  std::vector<std::unique_ptr<PingSlot>> ping_slots;
  int64_t step = 0;
};

Cluster::Cluster(const PsBenchOptions& options) : options_(options) {}

Cluster::~Cluster() {
  StopHeartbeat();
  workers_.clear();
  ShutdownProcesses();
}

absl::Status Cluster::Start(const BenchModel& model, int num_ps,
                            runtime::PlacementStrategy strategy, int num_workers,
                            const ClusterConfig& config) {
  auto placement = Place(model, num_ps, strategy);
  if (!placement.ok()) return placement.status();
  placement_ = std::move(*placement);
  FULCRUM_RETURN_IF_ERROR(StartProcesses(model, num_ps, num_workers, config));
  for (int w = 0; w < num_workers; ++w) FULCRUM_RETURN_IF_ERROR(AddWorker(model, w));
  return absl::OkStatus();
}

absl::Status Cluster::AddWorker(const BenchModel& model, int w) {
  auto worker = std::make_unique<Worker>();
  std::vector<runtime::PsClient*> clients;
  const int num_ps = placement_.num_ps();
  for (int p = 0; p < num_ps; ++p) {
    // Each client's channel is a connection of its own (runtime::MakeChannel), as a
    // separate worker process's would be.
    const std::string address = absl::StrCat("127.0.0.1:", processes_[static_cast<size_t>(p)].port);
    worker->clients.push_back(
        std::make_unique<runtime::GrpcPsClient>(absl::StrCat("ps:", p), address));
    // The plain Pings ride the PS client's own connection.
    worker->stubs.push_back(pb::ParameterServer::NewStub(worker->clients.back()->channel()));
    clients.push_back(worker->clients.back().get());
    if (!worker->clients.back()->WaitUntilReady(absl::Seconds(30))) {
      return absl::UnavailableError(absl::StrCat("ps:", p, " at ", address, " not ready"));
    }
  }
  worker->vars = std::make_unique<runtime::ShardedVariables>(placement_, options_.chunk_bytes,
                                                             clients, absl::StrCat("worker:", w));
  for (const auto& v : model.variables) {
    worker->grads.push_back(ops::Tensor::Filled(v.shape, 1e-3f));
    worker->values.push_back(ops::Tensor::Zeros(v.shape));
  }
  BuildPingSlots(*worker);
  // Grow the HTTP/2 windows before the first real transfer.
  for (auto& client : worker->clients) {
    if (absl::Status s = client->Warm(options_.chunk_bytes, 3, kCallTimeout); !s.ok()) return s;
  }
  workers_.push_back(std::move(worker));
  return absl::OkStatus();
}

void Cluster::BuildPingSlots(Worker& worker) const {
  for (int p = 0; p < placement_.num_ps(); ++p) {
    const auto& vars = worker.vars->variables(p);
    for (const runtime::Chunk& chunk : worker.vars->chunks(p)) {
      auto slot = std::make_unique<PingSlot>();
      slot->ps = p;
      for (const runtime::Segment& seg : chunk.segments) {
        const runtime::PlacedVariable& v = vars[static_cast<size_t>(seg.variable)];
        const size_t offset = static_cast<size_t>(v.element_offset + seg.offset);
        const size_t count = static_cast<size_t>(seg.count);
        slot->grads.push_back(
            worker.grads[static_cast<size_t>(v.source)].flat().subspan(offset, count));
        slot->values.push_back(
            worker.values[static_cast<size_t>(v.source)].flat().subspan(offset, count));
      }
      worker.ping_slots.push_back(std::move(slot));
    }
  }
}

int Cluster::num_chunks() const { return workers_.empty() ? 0 : workers_[0]->vars->num_chunks(); }

absl::Status Cluster::PsStep(int w, int64_t* bytes) {
  Worker& worker = *workers_[static_cast<size_t>(w)];
  runtime::TransferResult result;
  absl::Status s =
      worker.vars->PushPullAll(worker.step, 0, worker.grads, worker.values, kCallTimeout, &result);
  if (!s.ok()) return s;
  if (result.duplicates != 0 || result.retries != 0) {
    return absl::InternalError(
        absl::StrCat("unexpected duplicates/retries: ", result.duplicates, "/", result.retries));
  }
  worker.step = result.global_step;
  *bytes += result.bytes_sent + result.bytes_received;
  return absl::OkStatus();
}

absl::Status Cluster::PlainStep(int w, int64_t* bytes) {
  Worker& worker = *workers_[static_cast<size_t>(w)];
  BlockingCounter pending(static_cast<int>(worker.ping_slots.size()));
  for (auto& slot_ptr : worker.ping_slots) {
    PingSlot* slot = slot_ptr.get();
    runtime::EncodeFloats(slot->grads, slot->request.mutable_payload());
    slot->request.set_reply_bytes(static_cast<int64_t>(slot->request.payload().size()));
    slot->response.Clear();
    auto* context = new grpc::ClientContext;
    context->set_deadline(runtime::DeadlineIn(kCallTimeout));
    worker.stubs[static_cast<size_t>(slot->ps)]->async()->Ping(
        context, &slot->request, &slot->response, [slot, context, &pending](grpc::Status status) {
          delete context;
          absl::Status s = runtime::FromGrpc(status, "Ping");
          if (s.ok()) s = runtime::DecodeFloats(slot->response.payload(), slot->values, "Ping");
          slot->status = std::move(s);
          pending.DecrementCount();
        });
  }
  // Every Ping carries a deadline, so they all report; the wait's own bound is past it.
  while (!pending.WaitFor(kCallTimeout + absl::Seconds(10))) {
  }
  for (const auto& slot : worker.ping_slots) {
    if (!slot->status.ok()) return slot->status;
    *bytes +=
        static_cast<int64_t>(slot->request.payload().size() + slot->response.payload().size());
  }
  return absl::OkStatus();
}

int Cluster::Connections() const {
  std::set<int> ports;
  for (const auto& proc : processes_) ports.insert(proc.port);
  int n = 0;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(ReadTextOrEmpty(file));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state;
      fields >> sl >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "01") continue;
      const int port = static_cast<int>(std::strtol(local.c_str() + colon + 1, nullptr, 16));
      if (ports.count(port) != 0) ++n;
    }
  }
  return n;
}

std::vector<double> Cluster::Cpu() const {
  std::vector<double> cpu;
  for (const auto& proc : processes_) cpu.push_back(CpuSeconds(proc.pid));
  cpu.push_back(CpuSeconds(getpid()));
  return cpu;
}

std::string Cluster::AllowedCpuLists() const {
  std::vector<std::string> lists;
  for (const auto& proc : processes_) lists.push_back(proc.allowed_cpus);
  return absl::StrJoin(lists, " / ");
}

// ---- the ps processes ----------------------------------------------------------------------

absl::Status Cluster::StartProcesses(const BenchModel& model, int num_ps, int num_workers,
                                     const ClusterConfig& config) {
  std::vector<int> spec_ports;  // the ps, the chief, the workers (PickFreePort: all distinct)
  while (spec_ports.size() < static_cast<size_t>(num_ps + 1 + num_workers)) {
    FULCRUM_ASSIGN_OR_RETURN(const int port, PickFreePort());
    spec_ports.push_back(port);
  }
  const std::string spec_path = absl::StrCat(config.dir, "/cluster", config.id, ".json");
  FULCRUM_RETURN_IF_ERROR(WritePsSpec(spec_path, "127.0.0.1", spec_ports, num_ps));
  FULCRUM_RETURN_IF_ERROR(SpawnProcesses(spec_ports, num_ps, spec_path, config));
  for (int p = 0; p < num_ps; ++p) {
    FULCRUM_RETURN_IF_ERROR(AwaitProcess(p));
    pb::CreateVariablesResponse response;
    if (absl::Status s = chief_[static_cast<size_t>(p)]->CreateVariables(
            Definition(model, placement_, p, config.optimizer, options_.chunk_bytes), &response,
            kCallTimeout);
        !s.ok()) {
      return s;
    }
  }
  StartHeartbeat();
  return absl::OkStatus();
}

absl::Status Cluster::SpawnProcesses(const std::vector<int>& ports, int num_ps,
                                     const std::string& spec_path, const ClusterConfig& config) {
  for (int p = 0; p < num_ps; ++p) {
    FULCRUM_ASSIGN_OR_RETURN(
        PsProcess proc, StartPs(options_.ps_binary, spec_path, p, ports[static_cast<size_t>(p)],
                                config.pinned ? p : -1,
                                absl::StrCat(config.dir, "/cluster", config.id, "-ps", p, ".log"),
                                {"--heartbeat_timeout=30", "--startup_timeout=60"}));
    processes_.push_back(proc);
    if (options_.ps_cpu_quota > 0) {
      FULCRUM_RETURN_IF_ERROR(
          LimitCpu(proc.pid, absl::StrCat("ps_throughput.", getpid(), ".", config.id, ".", p),
                   options_.ps_cpu_quota, &processes_.back().cgroup));
    }
  }
  return absl::OkStatus();
}

absl::Status Cluster::AwaitProcess(int p) {
  PsProcess& proc = processes_[static_cast<size_t>(p)];
  chief_.push_back(std::make_unique<runtime::GrpcPsClient>(absl::StrCat("ps:", p),
                                                           absl::StrCat("127.0.0.1:", proc.port)));
  return AwaitPs(proc, *chief_.back(), absl::Seconds(30));
}

// Like the chief at the end of a run: Shutdown every ps, then reap it (killed if it lingers).
void Cluster::ShutdownProcesses() {
  for (size_t p = 0; p < processes_.size(); ++p) {
    PsProcess& proc = processes_[p];
    if (proc.pid <= 0) continue;
    if (p < chief_.size()) (void)chief_[p]->Shutdown("ps_throughput done", absl::Seconds(5));
    ReapOrKill(proc.pid);
    proc.pid = -1;
  }
  for (const auto& proc : processes_) {
    if (!proc.cgroup.empty()) rmdir(proc.cgroup.c_str());  // empty once its process is gone
  }
}

// The chief's heartbeat: Stats to every ps every 500 ms, so none hits --heartbeat_timeout
// between benchmarks.
void Cluster::StartHeartbeat() {
  heartbeat_ = std::thread([this] {
    for (;;) {
      {
        MutexLock lock(&heartbeat_mu_);
        const absl::Time next = absl::Now() + absl::Milliseconds(500);
        while (!heartbeat_stop_ && heartbeat_cv_.WaitUntil(&heartbeat_mu_, next)) {
        }
        if (heartbeat_stop_) return;
      }
      for (auto& chief : chief_) {
        pb::StatsResponse stats;
        (void)chief->Stats(&stats, absl::Seconds(5));
      }
    }
  });
}

void Cluster::StopHeartbeat() {
  if (!heartbeat_.joinable()) return;
  {
    MutexLock lock(&heartbeat_mu_);
    heartbeat_stop_ = true;
  }
  heartbeat_cv_.SignalAll();
  heartbeat_.join();
}

}  // namespace fulcrum::bench
