// ps_throughput: how fast real gRPC parameter servers move a whole model, against plain gRPC
// moving the same bytes on the same path in the same run (BENCHMARKING.md).
//
// Every point starts N PS tasks inside this process — ps::Shard + ps::PsService on a gRPC
// server on 127.0.0.1, created the way the chief does it (one CreateVariablesRequest per shard
// from the placement, async mode, SGD with a tiny learning rate) — and W worker threads. Each
// worker has its own GrpcPsClient per PS and its own runtime::ShardedVariables, and loops
// PushPullAll (push every gradient chunk, read every value chunk back, one RPC per chunk, all
// in flight). The baseline ("plain") is the same W threads doing Ping RPCs over the same
// connections that carry exactly the same bytes each way, cut into the same chunks, all in
// flight, with the same client-side encode/decode: the only difference is the PS logic
// (validation, dedup, chunk locks, SGD apply, encode of the values).
//
// Every worker has its own TCP/HTTP-2 connection per PS, as separate worker processes would
// (runtime::MakeChannel gives each channel its own connection), and by default also its own
// listening port of each server; --separate_connections=0 points every worker at one port.
// The plain Pings use a stub on the PS client's channel, so they share its connection.
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
//                                      the PS tasks as real `ps` processes (the ps binary,
//                                      --ps_binary), each pinned to one core with
//                                      sched_setaffinity: ps:0 on core 0, ps:1 on core 1 (the
//                                      1-PS cluster: ps:0 alone on core 0), emulating PS hosts
//                                      of one core each; the worker threads stay in this
//                                      process, unpinned. This process acts as the chief:
//                                      CreateVariables (optimizer --pinned_optimizer, default
//                                      adam, so that the apply costs the PS more), Stats every
//                                      500 ms as a heartbeat, Shutdown at the end. Also
//                                      reported: each process's CPU use (cores busy, from
//                                      /proc/<pid>/stat) during the rounds. With
//                                      --ps_cpu_quota=F each ps gets at most F of its core
//                                      (its own cgroup-v1 cpu cgroup, CFS quota F*10 ms per
//                                      10 ms; needs root), emulating PS hosts slower than the
//                                      worker side, so that the PS and not the shared cores
//                                      bounds the step.
// A summary (tables, bytes per PS and imbalance per placement, /proc/loadavg before and
// after) is printed at the end.
//
// Own flags (before Google Benchmark's): --round_ms=250 --pairs=3 --placement_workers=4
// --chunk_bytes=2097152 --separate_connections=1 --pinned_ps=0 --ps_binary=<build>/bin/ps
// --pinned_optimizer=adam --ps_cpu_quota=0; env PS_THROUGHPUT_ROUND_MS and PS_THROUGHPUT_PAIRS
// override the defaults (PS_THROUGHPUT_ROUND_MS=100: a ~1 min run). The pinned experiment alone:
//   ps_throughput --pinned_ps=1 --benchmark_filter=pinned/
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/random.h"
#include "benchmark/benchmark.h"
#include "grpcpp/grpcpp.h"
#include "models/registry.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"
#include "ops/tensor.h"
#include "proto/ps.grpc.pb.h"
#include "ps/service.h"
#include "ps/shard.h"
#include "runtime/chunk_plan.h"
#include "runtime/grpc_ps_client.h"
#include "runtime/grpc_util.h"
#include "runtime/placement.h"
#include "runtime/proto_convert.h"
#include "runtime/sharded_variables.h"
#include "runtime/tensor_coding.h"
#include "spdlog/spdlog.h"

namespace fulcrum {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(60);
constexpr uint64_t kSeed = 42;
constexpr int64_t kPartitionMinBytes = 256 << 10;  // runtime/flags.h default

struct Options {
  int round_ms = 250;
  int pairs = 3;
  int placement_workers = 4;
  int64_t chunk_bytes = runtime::kDefaultChunkBytes;
  bool separate_connections = true;
  bool verbose = false;    // env PS_THROUGHPUT_VERBOSE=1: every round's figures on stderr
  bool pinned_ps = false;  // register the pinned/ family (real ps processes, one core each)
#ifdef FULCRUM_PS_BINARY
  std::string ps_binary = FULCRUM_PS_BINARY;
#else
  std::string ps_binary = "bin/ps";
#endif
  std::string pinned_optimizer = "adam";
  // > 0: each pinned ps process may use only this fraction of its core (a cgroup-v1 CFS
  // quota over a 10 ms period), emulating PS hosts slower than the worker side.
  double ps_cpu_quota = 0;
};
Options g_options;

// ---- models ------------------------------------------------------------------------------

struct ModelDef {
  std::string name;
  std::vector<models::VariableSpec> variables;
  int64_t bytes() const {
    int64_t b = 0;
    for (const auto& v : variables) b += v.shape.num_elements() * 4;
    return b;
  }
};

absl::StatusOr<ModelDef> MakeModel(const std::string& name) {
  ModelDef def;
  def.name = name;
  const auto var = [&](const std::string& n, int64_t rows) {
    def.variables.push_back({n, ops::Shape({rows, 1024}), ops::Initializer::Uniform(0.05f)});
  };
  if (name.rfind("syn", 0) == 0) {  // syn<N>mb: 8 equal variables, N MiB in all
    const int64_t mib = std::atoll(name.c_str() + 3);
    if (mib <= 0) return absl::InvalidArgumentError("bad synthetic model " + name);
    for (int i = 0; i < 8; ++i) var(absl::StrCat("v", i), mib * 32);
    return def;
  }
  if (name == "skew16") {  // one 12 MiB variable + 8 of 0.5 MiB
    var("big", 3072);
    for (int i = 0; i < 8; ++i) var(absl::StrCat("small", i), 128);
    return def;
  }
  models::ModelRegistry registry;
  if (absl::Status s = models::RegisterBuiltinModels(&registry); !s.ok()) return s;
  auto model = registry.Create(name, models::ModelConfig{});
  if (!model.ok()) return model.status();
  def.variables = (*model)->variables();
  return def;
}

absl::StatusOr<runtime::Placement> Place(const ModelDef& model, int num_ps,
                                         runtime::PlacementStrategy strategy) {
  std::vector<runtime::VariableInfo> infos;
  for (const auto& v : model.variables) infos.push_back({v.name, v.shape});
  return runtime::PlaceVariables(infos, num_ps, strategy, kPartitionMinBytes);
}

// ---- PS tasks ----------------------------------------------------------------------------

struct PsTask {
  std::unique_ptr<ps::Shard> shard;
  std::unique_ptr<ps::PsService> service;
  std::unique_ptr<grpc::Server> server;
  std::vector<int> ports;  // one per worker with separate connections, else one
};

// Starts a PS task like ps::StartServer, with `num_ports` listening ports on 127.0.0.1.
absl::Status StartPs(int index, int num_ports, PsTask* task) {
  task->shard = std::make_unique<ps::Shard>(index);
  task->service = std::make_unique<ps::PsService>(task->shard.get());
  grpc::ServerBuilder builder;
  runtime::ConfigureServerBuilder(&builder);
  task->ports.assign(static_cast<size_t>(num_ports), 0);
  for (int& port : task->ports) {
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  }
  builder.RegisterService(task->service.get());
  task->server = builder.BuildAndStart();
  for (int port : task->ports) {
    if (task->server == nullptr || port == 0) {
      return absl::UnavailableError(absl::StrCat("ps:", index, " cannot listen on 127.0.0.1"));
    }
  }
  return absl::OkStatus();
}

// What the chief sends ps p (chief/chief_task.cc, Chief::CreateVariables).
pb::CreateVariablesRequest Definition(const ModelDef& model, const runtime::Placement& placement,
                                      int p, ops::OptimizerKind optimizer) {
  pb::CreateVariablesRequest request;
  request.set_run_id("ps_throughput");
  request.set_task_index(p);
  ops::OptimizerConfig config;
  config.kind = optimizer;
  config.learning_rate = 1e-6f;
  *request.mutable_optimizer() = runtime::OptimizerToProto(config);
  request.set_mode(pb::MODE_ASYNC);
  request.set_chunk_bytes(g_options.chunk_bytes);
  for (const auto& v : placement.shards[static_cast<size_t>(p)]) {
    const auto& spec = model.variables[static_cast<size_t>(v.source)];
    pb::VariableDef* def = request.add_variables();
    def->set_name(v.name);
    def->set_source(spec.name);
    for (int64_t d : spec.shape.dims()) def->add_full_shape(d);
    def->set_row_begin(v.row_begin);
    def->set_row_end(v.row_end);
    *def->mutable_initializer() = runtime::InitializerToProto(spec.initializer);
    def->set_seed(VariableSeed(kSeed, spec.name));
  }
  return request;
}

// ---- PS processes (the pinned experiment) -------------------------------------------------

// A port on 127.0.0.1 that nothing listens on right now (the kernel's pick; the ps binds it
// a moment later).
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  if (port == 0) return absl::InternalError("cannot pick a free port on 127.0.0.1");
  return port;
}

// Starts `argv` with its stdout and stderr in `log`, pinned to `core`: the spawning thread
// sets its own affinity first, and the child (and so every thread it ever starts) inherits
// it.
absl::StatusOr<pid_t> SpawnPinned(const std::vector<std::string>& argv, int core,
                                  const std::string& log) {
  pid_t pid = -1;
  int error = 0;
  std::thread spawner([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      error = errno;
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    error = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
  });
  spawner.join();
  if (error != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start ", argv[0], " on core ", core, ": ", std::strerror(error)));
  }
  return pid;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The distinct Cpus_allowed_list values of every thread of `pid` ("0"; "0,1" would mean a
// thread escaped the pinning).
std::string AllowedCpus(pid_t pid) {
  std::set<std::string> lists;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::istringstream status(ReadFile(task.path().string() + "/status"));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        lists.insert(std::string(absl::StripAsciiWhitespace(line.substr(18))));
      }
    }
  }
  return absl::StrJoin(lists, "|");
}

// CPU seconds (user + system, every thread, living or gone) of process `pid` so far.
double CpuSeconds(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  double ticks = 0;
  // After the name: state(3) ... utime(14) stime(15), numbered from pid = 1.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::atof(field.c_str());
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// One `ps` process of the pinned experiment.
struct PsProcess {
  pid_t pid = -1;
  int port = 0;
  int core = 0;
  std::string log;
  std::string allowed_cpus;  // as read back from /proc once it serves
  std::string cgroup;        // with --ps_cpu_quota: its own cpu cgroup, removed at the end
};

constexpr char kCpuCgroupRoot[] = "/sys/fs/cgroup/cpu";
constexpr int kQuotaPeriodUs = 10000;

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", text, "' to ", path));
  return absl::OkStatus();
}

// Puts process `pid` (every thread) into a new cpu cgroup `name` allowed `fraction` of one
// core; sets *path to the cgroup's directory.
absl::Status LimitCpu(pid_t pid, const std::string& name, double fraction, std::string* path) {
  const std::string dir = absl::StrCat(kCpuCgroupRoot, "/", name);
  std::error_code ec;
  if (!std::filesystem::create_directory(dir, ec) || ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--ps_cpu_quota needs a writable cgroup-v1 cpu controller; cannot create ",
                     dir, ": ", ec ? ec.message() : "exists"));
  }
  *path = dir;
  const int quota = std::max(1000, static_cast<int>(fraction * kQuotaPeriodUs));
  absl::Status s = WriteText(dir + "/cpu.cfs_period_us", absl::StrCat(kQuotaPeriodUs));
  if (s.ok()) s = WriteText(dir + "/cpu.cfs_quota_us", absl::StrCat(quota));
  if (s.ok()) s = WriteText(dir + "/cgroup.procs", absl::StrCat(pid));
  return s;
}

// ---- workers -----------------------------------------------------------------------------

// Counts outstanding calls (as runtime/sharded_variables.cc does).
class Pending {
 public:
  explicit Pending(int n) : left_(n) {}
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

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

struct Worker {
  std::vector<std::unique_ptr<runtime::GrpcPsClient>> clients;    // per PS
  std::vector<std::unique_ptr<pb::ParameterServer::Stub>> stubs;  // per PS, same target
  std::unique_ptr<runtime::ShardedVariables> vars;
  std::vector<ops::Tensor> grads;
  std::vector<ops::Tensor> values;
  std::vector<std::unique_ptr<PingSlot>> ping_slots;
  int64_t step = 0;
};

// How a Cluster runs its PS tasks.
struct ClusterConfig {
  // false: in-process tasks (ps::Shard + PsService here). true: real `ps` processes
  // (g_options.ps_binary), ps:p pinned to core p, created and kept alive by a chief client.
  bool pinned = false;
  ops::OptimizerKind optimizer = ops::OptimizerKind::kSgd;
  std::string dir;  // pinned: where the cluster specs and the ps logs go
};

// N PS tasks holding one model under one placement, and W workers on them.
class Cluster {
 public:
  absl::Status Start(const ModelDef& model, int num_ps, runtime::PlacementStrategy strategy,
                     int num_workers, const ClusterConfig& config = {}) {
    auto placement = Place(model, num_ps, strategy);
    if (!placement.ok()) return placement.status();
    placement_ = std::move(*placement);
    std::vector<std::vector<int>> ports(static_cast<size_t>(num_ps));  // per PS: worker w's
    if (config.pinned) {
      if (absl::Status s = StartProcesses(num_ps, config); !s.ok()) return s;
      for (int p = 0; p < num_ps; ++p) {
        ports[static_cast<size_t>(p)] = {processes_[static_cast<size_t>(p)].port};
        pb::CreateVariablesResponse response;
        if (absl::Status s = chief_[static_cast<size_t>(p)]->CreateVariables(
                Definition(model, placement_, p, config.optimizer), &response, kCallTimeout);
            !s.ok()) {
          return s;
        }
      }
      StartHeartbeat();
    } else {
      const int num_ports = g_options.separate_connections ? num_workers : 1;
      tasks_.resize(static_cast<size_t>(num_ps));
      for (int p = 0; p < num_ps; ++p) {
        PsTask& task = tasks_[static_cast<size_t>(p)];
        if (absl::Status s = StartPs(p, num_ports, &task); !s.ok()) return s;
        ports[static_cast<size_t>(p)] = task.ports;
      }
    }
    for (int w = 0; w < num_workers; ++w) {
      auto worker = std::make_unique<Worker>();
      std::vector<runtime::PsClient*> clients;
      for (int p = 0; p < num_ps; ++p) {
        const auto& ports_p = ports[static_cast<size_t>(p)];
        const std::string address =
            absl::StrCat("127.0.0.1:", ports_p[static_cast<size_t>(w) % ports_p.size()]);
        worker->clients.push_back(
            std::make_unique<runtime::GrpcPsClient>(absl::StrCat("ps:", p), address));
        // The plain Pings ride the PS client's own connection.
        worker->stubs.push_back(pb::ParameterServer::NewStub(worker->clients.back()->channel()));
        clients.push_back(worker->clients.back().get());
        if (!worker->clients.back()->WaitUntilReady(absl::Seconds(30))) {
          return absl::UnavailableError(absl::StrCat("ps:", p, " at ", address, " not ready"));
        }
      }
      if (w == 0 && !config.pinned) {  // create the shards through gRPC, like the chief
        for (int p = 0; p < num_ps; ++p) {
          pb::CreateVariablesResponse response;
          if (absl::Status s = worker->clients[static_cast<size_t>(p)]->CreateVariables(
                  Definition(model, placement_, p, config.optimizer), &response, kCallTimeout);
              !s.ok()) {
            return s;
          }
        }
      }
      worker->vars = std::make_unique<runtime::ShardedVariables>(
          placement_, g_options.chunk_bytes, clients, absl::StrCat("worker:", w));
      for (const auto& v : model.variables) {
        worker->grads.push_back(ops::Tensor::Filled(v.shape, 1e-3f));
        worker->values.push_back(ops::Tensor::Zeros(v.shape));
      }
      // The same chunks as the PS path, over the same spans of the same tensors.
      for (int p = 0; p < num_ps; ++p) {
        const auto& vars = worker->vars->variables(p);
        for (const runtime::Chunk& chunk : worker->vars->chunks(p)) {
          auto slot = std::make_unique<PingSlot>();
          slot->ps = p;
          for (const runtime::Segment& seg : chunk.segments) {
            const runtime::PlacedVariable& v = vars[static_cast<size_t>(seg.variable)];
            const size_t offset = static_cast<size_t>(v.element_offset + seg.offset);
            const size_t count = static_cast<size_t>(seg.count);
            slot->grads.push_back(
                worker->grads[static_cast<size_t>(v.source)].flat().subspan(offset, count));
            slot->values.push_back(
                worker->values[static_cast<size_t>(v.source)].flat().subspan(offset, count));
          }
          worker->ping_slots.push_back(std::move(slot));
        }
      }
      // Grow the HTTP/2 windows before the first real transfer.
      for (auto& client : worker->clients) {
        if (absl::Status s = client->Warm(g_options.chunk_bytes, 3, kCallTimeout); !s.ok()) {
          return s;
        }
      }
      workers_.push_back(std::move(worker));
    }
    return absl::OkStatus();
  }

  ~Cluster() {
    StopHeartbeat();
    workers_.clear();
    for (auto& t : tasks_) {
      if (t.server != nullptr) {
        t.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
        t.server->Wait();
      }
    }
    // Like the chief at the end of a run: Shutdown every ps, then reap it (killed if it
    // lingers).
    for (size_t p = 0; p < processes_.size(); ++p) {
      PsProcess& proc = processes_[p];
      if (proc.pid <= 0) continue;
      if (p < chief_.size()) {
        (void)chief_[p]->Shutdown("ps_throughput done", absl::Seconds(5));
      }
      bool reaped = false;
      for (int i = 0; i < 100 && !reaped; ++i) {
        int status = 0;
        reaped = waitpid(proc.pid, &status, WNOHANG) == proc.pid;
        if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!reaped) {
        kill(proc.pid, SIGKILL);
        int status = 0;
        waitpid(proc.pid, &status, 0);
      }
      proc.pid = -1;
    }
    for (const auto& proc : processes_) {
      if (!proc.cgroup.empty()) rmdir(proc.cgroup.c_str());  // empty once its process is gone
    }
  }

  int num_workers() const { return static_cast<int>(workers_.size()); }
  int num_chunks() const { return workers_.empty() ? 0 : workers_[0]->vars->num_chunks(); }
  const runtime::Placement& placement() const { return placement_; }

  // One PushPullAll of worker w; adds the payload bytes moved to *bytes.
  absl::Status PsStep(int w, int64_t* bytes) {
    Worker& worker = *workers_[static_cast<size_t>(w)];
    runtime::TransferResult result;
    absl::Status s = worker.vars->PushPullAll(worker.step, 0, worker.grads, worker.values,
                                              kCallTimeout, &result);
    if (!s.ok()) return s;
    if (result.duplicates != 0 || result.retries != 0) {
      return absl::InternalError(
          absl::StrCat("unexpected duplicates/retries: ", result.duplicates, "/", result.retries));
    }
    worker.step = result.global_step;
    *bytes += result.bytes_sent + result.bytes_received;
    return absl::OkStatus();
  }

  // The plain baseline of PsStep: one Ping per chunk, all in flight.
  absl::Status PlainStep(int w, int64_t* bytes) {
    Worker& worker = *workers_[static_cast<size_t>(w)];
    Pending pending(static_cast<int>(worker.ping_slots.size()));
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
            pending.Done();
          });
    }
    pending.Wait();
    for (const auto& slot : worker.ping_slots) {
      if (!slot->status.ok()) return slot->status;
      *bytes +=
          static_cast<int64_t>(slot->request.payload().size() + slot->response.payload().size());
    }
    return absl::OkStatus();
  }

  // Server-side TCP connections in ESTABLISHED state on this cluster's ports.
  int Connections() const {
    std::set<int> ports;
    for (const auto& t : tasks_) ports.insert(t.ports.begin(), t.ports.end());
    for (const auto& proc : processes_) ports.insert(proc.port);
    int n = 0;
    for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::ifstream in(file);
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

  // Pinned: CPU seconds so far of each ps process (task order), then of this process.
  std::vector<double> Cpu() const {
    std::vector<double> cpu;
    for (const auto& proc : processes_) cpu.push_back(CpuSeconds(proc.pid));
    cpu.push_back(CpuSeconds(getpid()));
    return cpu;
  }
  // Pinned: each ps process's Cpus_allowed_list, e.g. "0 / 1".
  std::string AllowedCpuLists() const {
    std::vector<std::string> lists;
    for (const auto& proc : processes_) lists.push_back(proc.allowed_cpus);
    return absl::StrJoin(lists, " / ");
  }

 private:
  // Starts ps:0..num_ps-1 from the ps binary with a cluster spec of their own, ps:p pinned to
  // core p, and waits until each answers its chief client.
  absl::Status StartProcesses(int num_ps, const ClusterConfig& config) {
    static std::atomic<int> next_id{0};
    const int id = next_id++;
    std::set<int> ports;
    while (ports.size() < static_cast<size_t>(num_ps + 2)) {  // the ps, a chief, a worker
      auto port = FreePort();
      if (!port.ok()) return port.status();
      ports.insert(*port);
    }
    std::vector<std::string> addresses;
    for (int port : ports) addresses.push_back(absl::StrCat("\"127.0.0.1:", port, "\""));
    const std::string spec_path = absl::StrCat(config.dir, "/cluster", id, ".json");
    {
      std::ofstream spec(spec_path);
      spec << "{\"chief\": [" << addresses[static_cast<size_t>(num_ps)] << "], \"ps\": ["
           << absl::StrJoin(addresses.begin(), addresses.begin() + num_ps, ", ")
           << "], \"worker\": [" << addresses[static_cast<size_t>(num_ps) + 1] << "]}\n";
      if (!spec) return absl::InternalError(absl::StrCat("cannot write ", spec_path));
    }
    auto port_it = ports.begin();
    for (int p = 0; p < num_ps; ++p, ++port_it) {
      PsProcess proc;
      proc.port = *port_it;
      proc.core = p;
      proc.log = absl::StrCat(config.dir, "/cluster", id, "-ps", p, ".log");
      auto pid = SpawnPinned(
          {g_options.ps_binary, "--cluster_spec=" + spec_path, absl::StrCat("--task_index=", p),
           "--heartbeat_timeout=30", "--startup_timeout=60"},
          proc.core, proc.log);
      if (!pid.ok()) return pid.status();
      proc.pid = *pid;
      processes_.push_back(proc);
      if (g_options.ps_cpu_quota > 0) {
        if (absl::Status s =
                LimitCpu(proc.pid, absl::StrCat("ps_throughput.", getpid(), ".", id, ".", p),
                         g_options.ps_cpu_quota, &processes_.back().cgroup);
            !s.ok()) {
          return s;
        }
      }
    }
    for (int p = 0; p < num_ps; ++p) {
      PsProcess& proc = processes_[static_cast<size_t>(p)];
      chief_.push_back(std::make_unique<runtime::GrpcPsClient>(
          absl::StrCat("ps:", p), absl::StrCat("127.0.0.1:", proc.port)));
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      while (!chief_.back()->WaitUntilReady(absl::Milliseconds(500))) {
        int status = 0;
        const bool exited = waitpid(proc.pid, &status, WNOHANG) == proc.pid;
        if (exited || absl::Now() > deadline) {
          if (exited) proc.pid = -1;
          return absl::UnavailableError(absl::StrCat("ps:", p, " (", g_options.ps_binary, ") ",
                                                     exited ? "exited" : "not ready", "; its log ",
                                                     proc.log, ":\n", ReadFile(proc.log)));
        }
      }
      proc.allowed_cpus = AllowedCpus(proc.pid);
    }
    return absl::OkStatus();
  }

  // The chief's heartbeat: Stats to every ps every 500 ms, so none hits --heartbeat_timeout
  // between benchmarks.
  void StartHeartbeat() {
    heartbeat_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(heartbeat_mu_);
      while (!heartbeat_cv_.wait_for(lock, std::chrono::milliseconds(500),
                                     [this] { return heartbeat_stop_; })) {
        lock.unlock();
        for (auto& chief : chief_) {
          pb::StatsResponse stats;
          (void)chief->Stats(&stats, absl::Seconds(5));
        }
        lock.lock();
      }
    });
  }
  void StopHeartbeat() {
    if (!heartbeat_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(heartbeat_mu_);
      heartbeat_stop_ = true;
    }
    heartbeat_cv_.notify_all();
    heartbeat_.join();
  }

  runtime::Placement placement_;
  std::vector<PsTask> tasks_;
  std::vector<PsProcess> processes_;
  std::vector<std::unique_ptr<runtime::GrpcPsClient>> chief_;  // per ps process
  std::thread heartbeat_;
  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  bool heartbeat_stop_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
};

// ---- rounds ------------------------------------------------------------------------------

struct Round {
  int64_t steps = 0;  // worker steps, all workers
  int64_t bytes = 0;
  double seconds = 0;
  std::vector<double> cpu;  // with a CPU probe: cores busy per process during the round
  double steps_per_s() const { return static_cast<double>(steps) / seconds; }
  double mb_per_s() const { return static_cast<double>(bytes) / seconds / 1e6; }
};

using StepFn = std::function<absl::Status(int w, int64_t* bytes)>;
// CPU seconds so far of each process of interest (Cluster::Cpu).
using CpuFn = std::function<std::vector<double>()>;

// Runs `step` on num_workers threads for `duration` (each at least one step), all starting
// together; the round lasts until the last worker's last step ends.
absl::StatusOr<Round> RunRound(int num_workers, absl::Duration duration, const StepFn& step) {
  std::latch start(1);
  std::vector<int64_t> steps(static_cast<size_t>(num_workers), 0);
  std::vector<int64_t> bytes(static_cast<size_t>(num_workers), 0);
  std::vector<absl::Status> status(static_cast<size_t>(num_workers));
  absl::Time deadline;
  std::vector<std::thread> threads;
  for (int w = 0; w < num_workers; ++w) {
    threads.emplace_back([&, w] {
      start.wait();
      const size_t i = static_cast<size_t>(w);
      do {
        status[i] = step(w, &bytes[i]);
        if (!status[i].ok()) return;
        ++steps[i];
      } while (absl::Now() < deadline);
    });
  }
  const absl::Time begin = absl::Now();
  deadline = begin + duration;
  start.count_down();
  for (auto& t : threads) t.join();
  Round r;
  r.seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  for (int w = 0; w < num_workers; ++w) {
    const size_t i = static_cast<size_t>(w);
    if (!status[i].ok()) return status[i];
    r.steps += steps[i];
    r.bytes += bytes[i];
  }
  return r;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Series {
  std::vector<Round> rounds;
  double steps() const {
    std::vector<double> v;
    for (const auto& r : rounds) v.push_back(r.steps_per_s());
    return Median(v);
  }
  double mb() const {
    std::vector<double> v;
    for (const auto& r : rounds) v.push_back(r.mb_per_s());
    return Median(v);
  }
  // Median cores busy of process i (Round::cpu), one entry per process.
  std::vector<double> cpu() const {
    std::vector<double> out;
    for (size_t i = 0; !rounds.empty() && i < rounds[0].cpu.size(); ++i) {
      std::vector<double> v;
      for (const auto& r : rounds) v.push_back(i < r.cpu.size() ? r.cpu[i] : 0);
      out.push_back(Median(v));
    }
    return out;
  }
};

struct Ratio {
  double median = 0, min = 0, max = 0;
};

Ratio Pairwise(const Series& a, const Series& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.rounds.size() && i < b.rounds.size(); ++i) {
    r.push_back(a.rounds[i].steps_per_s() / b.rounds[i].steps_per_s());
  }
  if (r.empty()) return {};
  return {Median(r), *std::min_element(r.begin(), r.end()), *std::max_element(r.begin(), r.end())};
}

// Runs the modes in turn (A B [C] A B [C] ...): one unreported warm-up cycle of 2x-long
// rounds (the connections' flow-control windows and the allocators are still settling), then
// g_options.pairs reported cycles. With `cpu` (one probe per mode), each round also records
// the cores each probed process kept busy.
absl::StatusOr<std::vector<Series>> Alternate(int num_workers, const std::vector<StepFn>& modes,
                                              const std::vector<CpuFn>& cpu = {}) {
  const absl::Duration round = absl::Milliseconds(g_options.round_ms);
  std::vector<Series> series(modes.size());
  for (int cycle = 0; cycle <= g_options.pairs; ++cycle) {
    for (size_t m = 0; m < modes.size(); ++m) {
      const std::vector<double> cpu_before = m < cpu.size() ? cpu[m]() : std::vector<double>{};
      const absl::Time begin = absl::Now();
      auto r = RunRound(num_workers, cycle == 0 ? 2 * round : round, modes[m]);
      if (!r.ok()) return r.status();
      if (m < cpu.size()) {
        const std::vector<double> cpu_after = cpu[m]();
        const double wall = absl::ToDoubleSeconds(absl::Now() - begin);
        for (size_t i = 0; i < cpu_after.size() && i < cpu_before.size(); ++i) {
          r->cpu.push_back((cpu_after[i] - cpu_before[i]) / wall);
        }
      }
      if (g_options.verbose) {
        std::fprintf(stderr, "  cycle %d mode %zu: %lld steps in %.3f s = %.1f steps/s%s\n", cycle,
                     m, static_cast<long long>(r->steps), r->seconds, r->steps_per_s(),
                     cycle == 0 ? " (warm-up)" : "");
      }
      if (cycle > 0) series[m].rounds.push_back(*r);
    }
  }
  return series;
}

// ---- results -----------------------------------------------------------------------------

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
std::vector<MatrixResult> g_matrix;
std::vector<PlacementResult> g_placement;
std::vector<PinnedResult> g_pinned;

std::string ReadLoadavg() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

// ---- benchmarks --------------------------------------------------------------------------

void BM_Matrix(benchmark::State& state, const std::string& model_name, int workers, int num_ps) {
  auto model = MakeModel(model_name);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  MatrixResult result;
  for (auto _ : state) {
    Cluster cluster;
    if (absl::Status s =
            cluster.Start(*model, num_ps, runtime::PlacementStrategy::kRoundRobin, workers);
        !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    auto series = Alternate(workers, {[&](int w, int64_t* b) { return cluster.PsStep(w, b); },
                                      [&](int w, int64_t* b) { return cluster.PlainStep(w, b); }});
    if (!series.ok()) {
      state.SkipWithError(series.status().ToString().c_str());
      return;
    }
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
  g_matrix.push_back(result);
}

void BM_Placement(benchmark::State& state, const std::string& model_name,
                  runtime::PlacementStrategy strategy) {
  const int workers = g_options.placement_workers;
  auto model = MakeModel(model_name);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  PlacementResult result;
  for (auto _ : state) {
    Cluster one, two;
    absl::Status s = one.Start(*model, 1, strategy, workers);
    if (s.ok()) s = two.Start(*model, 2, strategy, workers);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    auto series = Alternate(workers, {[&](int w, int64_t* b) { return one.PsStep(w, b); },
                                      [&](int w, int64_t* b) { return two.PsStep(w, b); },
                                      [&](int w, int64_t* b) { return two.PlainStep(w, b); }});
    if (!series.ok()) {
      state.SkipWithError(series.status().ToString().c_str());
      return;
    }
    result.model = model_name;
    result.strategy = runtime::PlacementName(strategy);
    result.workers = workers;
    result.bytes0 = static_cast<double>(two.placement().shard_bytes(0));
    result.bytes1 = static_cast<double>(two.placement().shard_bytes(1));
    result.imbalance = two.placement().imbalance();
    result.one = (*series)[0];
    result.two = (*series)[1];
    result.plain = (*series)[2];
    result.speedup = Pairwise(result.two, result.one);
    result.efficiency = Pairwise(result.two, result.plain);
  }
  state.counters["ps1_steps/s"] = result.one.steps();
  state.counters["ps2_steps/s"] = result.two.steps();
  state.counters["plain2_steps/s"] = result.plain.steps();
  state.counters["ps2/ps1"] = result.speedup.median;
  state.counters["ps2/plain"] = result.efficiency.median;
  state.counters["imbalance"] = result.imbalance;
  g_placement.push_back(result);
}

// The placement experiment with real ps processes, one core each (see the top of the file).
void BM_Pinned(benchmark::State& state, const std::string& model_name,
               runtime::PlacementStrategy strategy) {
  const int workers = g_options.placement_workers;
  auto model = MakeModel(model_name);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  auto optimizer = ops::ParseOptimizerKind(g_options.pinned_optimizer);
  if (!optimizer.ok()) {
    state.SkipWithError(std::string(optimizer.status().message()).c_str());
    return;
  }
  char dir_template[] = "/tmp/ps_throughput.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  ClusterConfig config;
  config.pinned = true;
  config.optimizer = *optimizer;
  config.dir = dir_template;
  PinnedResult result;
  std::string error;
  for (auto _ : state) {
    Cluster one, two;
    absl::Status s = one.Start(*model, 1, strategy, workers, config);
    if (s.ok()) s = two.Start(*model, 2, strategy, workers, config);
    auto series = s.ok() ? Alternate(workers,
                                     {[&](int w, int64_t* b) { return one.PsStep(w, b); },
                                      [&](int w, int64_t* b) { return two.PsStep(w, b); },
                                      [&](int w, int64_t* b) { return two.PlainStep(w, b); }},
                                     {[&] { return one.Cpu(); }, [&] { return two.Cpu(); },
                                      [&] { return two.Cpu(); }})
                         : absl::StatusOr<std::vector<Series>>(s);
    if (!series.ok()) {
      error = series.status().ToString();
      break;
    }
    PlacementResult& r = result.placement;
    r.model = model_name;
    r.strategy = runtime::PlacementName(strategy);
    r.workers = workers;
    r.bytes0 = static_cast<double>(two.placement().shard_bytes(0));
    r.bytes1 = static_cast<double>(two.placement().shard_bytes(1));
    r.imbalance = two.placement().imbalance();
    r.one = (*series)[0];
    r.two = (*series)[1];
    r.plain = (*series)[2];
    r.speedup = Pairwise(r.two, r.one);
    r.efficiency = Pairwise(r.two, r.plain);
    result.optimizer = ops::OptimizerName(*optimizer);
    result.cores_one = one.AllowedCpuLists();
    result.cores_two = two.AllowedCpuLists();
    result.cpu_one = r.one.cpu();
    result.cpu_two = r.two.cpu();
    result.cpu_plain = r.plain.cpu();
  }  // the clusters shut their ps processes down here
  std::error_code ec;
  if (!error.empty()) {
    state.SkipWithError(error.c_str());  // the ps logs stay in dir_template
    return;
  }
  std::filesystem::remove_all(dir_template, ec);
  const PlacementResult& r = result.placement;
  state.counters["ps1_steps/s"] = r.one.steps();
  state.counters["ps2_steps/s"] = r.two.steps();
  state.counters["plain2_steps/s"] = r.plain.steps();
  state.counters["ps2/ps1"] = r.speedup.median;
  state.counters["ps2/plain"] = r.efficiency.median;
  state.counters["imbalance"] = r.imbalance;
  g_pinned.push_back(result);
}

void RegisterAll() {
  const std::vector<std::string> models = {"logreg", "mlp",     "autoencoder", "syn1mb",
                                           "syn4mb", "syn16mb", "syn64mb"};
  for (const auto& m : models) {
    for (int w : {1, 2, 4}) {
      for (int p : {1, 2}) {
        benchmark::RegisterBenchmark(absl::StrCat("matrix/", m, "/w", w, "/ps", p).c_str(),
                                     [m, w, p](benchmark::State& st) { BM_Matrix(st, m, w, p); })
            ->Iterations(1)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  for (const std::string m : {"mlp", "skew16"}) {
    for (auto strategy :
         {runtime::PlacementStrategy::kRoundRobin, runtime::PlacementStrategy::kGreedy,
          runtime::PlacementStrategy::kPartition}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("placement/", m, "/", runtime::PlacementName(strategy)).c_str(),
          [m, strategy](benchmark::State& st) { BM_Placement(st, m, strategy); })
          ->Iterations(1)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  if (!g_options.pinned_ps) return;
  for (const std::string m : {"mlp", "skew16"}) {
    for (auto strategy :
         {runtime::PlacementStrategy::kRoundRobin, runtime::PlacementStrategy::kGreedy,
          runtime::PlacementStrategy::kPartition}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("pinned/", m, "/", runtime::PlacementName(strategy)).c_str(),
          [m, strategy](benchmark::State& st) { BM_Pinned(st, m, strategy); })
          ->Iterations(1)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

std::string Range(const Ratio& r) {
  return absl::StrFormat("%.2f (%.2f–%.2f)", r.median, r.min, r.max);
}

void PrintSummary(const std::string& load_before) {
  std::printf(
      "\nps_throughput: %d reported pair(s) of %d ms rounds after a warm-up pair; chunk "
      "%lld bytes; %s connections\n",
      g_options.pairs, g_options.round_ms, static_cast<long long>(g_options.chunk_bytes),
      g_options.separate_connections ? "per-worker" : "shared");
  std::printf("loadavg before: %s\nloadavg after:  %s\n", load_before.c_str(),
              ReadLoadavg().c_str());
  if (!g_matrix.empty()) {
    std::printf(
        "\n| model | MiB | W | PS | chunks | conns | PS steps/s | plain steps/s | PS MB/s "
        "| plain MB/s | PS/plain median (min–max) |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (const auto& r : g_matrix) {
      std::printf("| %s | %.2f | %d | %d | %d | %d | %.1f | %.1f | %.0f | %.0f | %s |\n",
                  r.model.c_str(), r.model_mb, r.workers, r.num_ps, r.chunks, r.connections,
                  r.ps.steps(), r.plain.steps(), r.ps.mb(), r.plain.mb(), Range(r.ratio).c_str());
    }
  }
  // Bytes per PS and imbalance of each placement over 2 PS (pure computation).
  std::printf("\n| model | placement (2 PS) | ps:0 bytes | ps:1 bytes | imbalance |\n");
  std::printf("|---|---|---:|---:|---:|\n");
  for (const std::string m : {"mlp", "skew16"}) {
    auto model = MakeModel(m);
    if (!model.ok()) continue;
    for (auto strategy :
         {runtime::PlacementStrategy::kRoundRobin, runtime::PlacementStrategy::kGreedy,
          runtime::PlacementStrategy::kPartition}) {
      auto p = Place(*model, 2, strategy);
      if (!p.ok()) continue;
      std::printf("| %s | %s | %lld | %lld | %.2f |\n", m.c_str(), runtime::PlacementName(strategy),
                  static_cast<long long>(p->shard_bytes(0)),
                  static_cast<long long>(p->shard_bytes(1)), p->imbalance());
    }
  }
  if (!g_placement.empty()) {
    std::printf(
        "\n| model | placement | W | 1 PS steps/s | 2 PS steps/s | plain (2 PS chunks) "
        "steps/s | 2PS/1PS median (min–max) | 2PS/plain median (min–max) |\n");
    std::printf("|---|---|---:|---:|---:|---:|---|---|\n");
    for (const auto& r : g_placement) {
      std::printf("| %s | %s | %d | %.1f | %.1f | %.1f | %s | %s |\n", r.model.c_str(),
                  r.strategy.c_str(), r.workers, r.one.steps(), r.two.steps(), r.plain.steps(),
                  Range(r.speedup).c_str(), Range(r.efficiency).c_str());
    }
  }
  if (!g_pinned.empty()) {
    const auto cores = [](const std::vector<double>& v) {
      std::vector<std::string> parts;
      for (double c : v) parts.push_back(absl::StrFormat("%.2f", c));
      return absl::StrJoin(parts, " / ");
    };
    const std::string quota =
        g_options.ps_cpu_quota > 0
            ? absl::StrFormat(", each ps at most %.2f of its core", g_options.ps_cpu_quota)
            : std::string();
    std::printf(
        "\nPinned ps processes (%s; 1 PS on cpus %s, 2 PS on cpus %s%s), workers in "
        "this process, unpinned. bound = total bytes / largest shard, the 2PS/1PS a "
        "PS-bound step could reach. CPU = cores busy (median per round): ps:0 [/ ps:1] / "
        "this process.\n",
        g_pinned[0].optimizer.c_str(), g_pinned[0].cores_one.c_str(), g_pinned[0].cores_two.c_str(),
        quota.c_str());
    std::printf(
        "\n| model | placement | W | ps:0 / ps:1 MiB | bound | 1 PS steps/s | 2 PS "
        "steps/s | plain (2 PS chunks) steps/s | 2PS/1PS median (min–max) | 2PS/plain "
        "median (min–max) | CPU 1 PS | CPU 2 PS | CPU plain |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---|---|\n");
    for (const auto& p : g_pinned) {
      const PlacementResult& r = p.placement;
      std::printf(
          "| %s | %s | %d | %.2f / %.2f | %.2f | %.1f | %.1f | %.1f | %s | %s | %s | %s "
          "| %s |\n",
          r.model.c_str(), r.strategy.c_str(), r.workers, r.bytes0 / (1 << 20),
          r.bytes1 / (1 << 20), (r.bytes0 + r.bytes1) / std::max(r.bytes0, r.bytes1), r.one.steps(),
          r.two.steps(), r.plain.steps(), Range(r.speedup).c_str(), Range(r.efficiency).c_str(),
          cores(p.cpu_one).c_str(), cores(p.cpu_two).c_str(), cores(p.cpu_plain).c_str());
    }
  }
  std::fflush(stdout);
}

// Removes this program's own --name=value flags from argv.
void ParseOwnFlags(int* argc, char** argv) {
  if (const char* e = std::getenv("PS_THROUGHPUT_ROUND_MS")) g_options.round_ms = std::atoi(e);
  if (const char* e = std::getenv("PS_THROUGHPUT_PAIRS")) g_options.pairs = std::atoi(e);
  if (const char* e = std::getenv("PS_THROUGHPUT_VERBOSE")) g_options.verbose = std::atoi(e) != 0;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](const char* name, auto* field) {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (arg.rfind(prefix, 0) != 0) return false;
      *field = static_cast<std::remove_pointer_t<decltype(field)>>(
          std::atoll(arg.c_str() + prefix.size()));
      return true;
    };
    const auto real = [&](const char* name, double* field) {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (arg.rfind(prefix, 0) != 0) return false;
      *field = std::atof(arg.c_str() + prefix.size());
      return true;
    };
    const auto text = [&](const char* name, std::string* field) {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (arg.rfind(prefix, 0) != 0) return false;
      *field = arg.substr(prefix.size());
      return true;
    };
    if (value("round_ms", &g_options.round_ms) || value("pairs", &g_options.pairs) ||
        value("placement_workers", &g_options.placement_workers) ||
        value("chunk_bytes", &g_options.chunk_bytes) ||
        value("separate_connections", &g_options.separate_connections) ||
        value("pinned_ps", &g_options.pinned_ps) || text("ps_binary", &g_options.ps_binary) ||
        text("pinned_optimizer", &g_options.pinned_optimizer) ||
        real("ps_cpu_quota", &g_options.ps_cpu_quota)) {
      continue;
    }
    argv[out++] = argv[i];
  }
  *argc = out;
  g_options.round_ms = std::max(1, g_options.round_ms);
  g_options.pairs = std::max(1, g_options.pairs);
  g_options.placement_workers = std::max(1, g_options.placement_workers);
  g_options.chunk_bytes = std::max<int64_t>(4, g_options.chunk_bytes);
}

}  // namespace
}  // namespace fulcrum

int main(int argc, char** argv) {
  fulcrum::ParseOwnFlags(&argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the shards' "ps:0 holds ..." lines
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const std::string load_before = fulcrum::ReadLoadavg();
  fulcrum::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  fulcrum::PrintSummary(load_before);
  benchmark::Shutdown();
  return 0;
}
