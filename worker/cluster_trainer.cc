#include "worker/cluster_trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "data/batcher.h"
#include "data/load.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "ops/cpu/thread_pool.h"
#include "profiler/profiler.h"
#include "proto/coordinator.grpc.pb.h"
#include "runtime/grpc_ps_client.h"
#include "runtime/grpc_util.h"
#include "runtime/sharded_variables.h"
#include "spdlog/spdlog.h"

namespace fulcrum::worker {
namespace {

using Clock = std::chrono::steady_clock;
using runtime::ClusterOptions;
using runtime::TrainingOptions;

constexpr int64_t kWarmupSteps = 20;  // dropped from steady-state throughput (BENCHMARKING.md)

pb::TaskId MyTask(const ClusterOptions& c) {
  pb::TaskId id;
  id.set_job(c.task.job_name);
  id.set_index(c.task.task_index);
  return id;
}

// Registers with the chief, retrying with backoff until `deadline` while it is unreachable.
// The chief as a peer in the profiler's traffic tables.
constexpr char kChiefPeer[] = "chief-0";

absl::StatusOr<pb::RegisterTaskResponse> Register(pb::Coordinator::Stub& chief,
                                                  const TrainingOptions& t, const ClusterOptions& c,
                                                  absl::Time deadline,
                                                  profiler::RpcObserver* observer) {
  pb::RegisterTaskRequest request;
  *request.mutable_task() = MyTask(c);
  request.set_config_fingerprint(runtime::ConfigFingerprint(t, c));
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  request.set_hostname(host);
  request.set_pid(static_cast<int>(::getpid()));
  const std::string chief_address = c.task.cluster.address(runtime::kChiefJob, 0);
  absl::Duration backoff = absl::Milliseconds(100);
  absl::Time next_log = absl::Now();
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(runtime::DeadlineIn(absl::Seconds(5)));
    pb::RegisterTaskResponse response;
    const int64_t begin = profiler::NowUnixMicros();
    const grpc::Status s = chief.RegisterTask(&context, request, &response);
    profiler::ReportRpc(observer, kChiefPeer, "RegisterTask", begin, request, response);
    if (s.ok()) return response;
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      return absl::InvalidArgumentError(s.error_message());
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          c.task.task_name(), ": chief:0 at ", chief_address, " did not answer within ",
          absl::FormatDuration(c.startup_timeout), " (--startup_timeout): ", s.error_message()));
    }
    if (absl::Now() >= next_log) {
      spdlog::info("waiting for chief:0 at {} ({})", chief_address, s.error_message());
      next_log = absl::Now() + absl::Seconds(5);
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

absl::Status WaitForStart(pb::Coordinator::Stub& chief, const ClusterOptions& c,
                          absl::Time deadline, profiler::RpcObserver* observer) {
  absl::Time next_log = absl::Now() + absl::Seconds(5);
  while (true) {
    pb::WaitForStartRequest request;
    *request.mutable_task() = MyTask(c);
    request.set_timeout_ms(2000);
    pb::WaitForStartResponse response;
    grpc::ClientContext context;
    context.set_deadline(runtime::DeadlineIn(absl::Seconds(10)));
    const int64_t begin = profiler::NowUnixMicros();
    const grpc::Status s = chief.WaitForStart(&context, request, &response);
    profiler::ReportRpc(observer, kChiefPeer, "WaitForStart", begin, request, response);
    if (s.ok() && response.started()) return absl::OkStatus();
    if (s.ok() && response.should_stop()) {
      return absl::AbortedError(
          absl::StrCat(c.task.task_name(), ": the chief ended the run before it started"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(c.task.task_name(), ": the chief did not start the run within ",
                       absl::FormatDuration(c.startup_timeout), " (--startup_timeout)",
                       s.ok() ? "" : absl::StrCat(": ", s.error_message())));
    }
    if (absl::Now() >= next_log) {
      spdlog::info("registered; waiting for the chief to start the run");
      next_log = absl::Now() + absl::Seconds(5);
    }
    if (!s.ok()) absl::SleepFor(absl::Milliseconds(200));
  }
}

// Heartbeats the chief once a second from its own thread; learns should_stop and notices a
// chief that has gone silent for longer than --heartbeat_timeout.
class Heartbeat {
 public:
  Heartbeat(pb::Coordinator::Stub* chief, pb::TaskId task, absl::Duration timeout,
            profiler::RpcObserver* observer)
      : chief_(chief),
        task_(std::move(task)),
        timeout_(timeout),
        observer_(observer),
        thread_([this] { Loop(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  bool should_stop() const { return should_stop_.load(); }
  bool chief_lost() const { return chief_lost_.load(); }

 private:
  void Loop() {
    absl::Time last_ok = absl::Now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      lock.unlock();
      pb::HeartbeatRequest request;
      *request.mutable_task() = task_;
      request.set_local_step(step_.load(std::memory_order_relaxed));
      pb::HeartbeatResponse response;
      grpc::ClientContext context;
      context.set_deadline(runtime::DeadlineIn(absl::Seconds(5)));
      const int64_t begin = profiler::NowUnixMicros();
      const bool ok = chief_->Heartbeat(&context, request, &response).ok();
      profiler::ReportRpc(observer_, kChiefPeer, "Heartbeat", begin, request, response);
      if (ok) {
        last_ok = absl::Now();
        if (response.should_stop()) should_stop_ = true;
      } else if (absl::Now() - last_ok > timeout_) {
        chief_lost_ = true;
      }
      lock.lock();
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; });
    }
  }

  pb::Coordinator::Stub* chief_;
  const pb::TaskId task_;
  const absl::Duration timeout_;
  profiler::RpcObserver* const observer_;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> should_stop_{false};
  std::atomic<bool> chief_lost_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

absl::Status RunClusterWorker(const TrainingOptions& t, const ClusterOptions& c,
                              const runtime::ProfileFlags& profile) {
  const absl::Time process_start = absl::Now();
  const absl::Time startup_deadline = process_start + c.startup_timeout;
  InitLogging(c.task.task_name());
  // The profiler samples from the start; its files go to the task's folder once the chief
  // has said where the run directory is.
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<profiler::Profiler> prof,
                           profiler::Profiler::Start(runtime::ProfilerOptionsFor(
                               profile, &c.task.cluster, c.task.job_name, c.task.task_index, "")));
  ops::ThreadPool pool(t.threads);

  FULCRUM_ASSIGN_OR_RETURN(data::Dataset train,
                           data::LoadSplit(runtime::DataSource(t), data::Split::kTrain));
  models::ModelRegistry registry;
  FULCRUM_RETURN_IF_ERROR(models::RegisterBuiltinModels(&registry));
  models::ModelConfig config;
  config.input_size = train.example_size();
  config.num_classes = train.num_classes;
  config.width = t.model_width;
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, registry.Create(t.model, config));
  model->set_thread_pool(&pool);
  std::vector<runtime::VariableInfo> infos;
  std::vector<ops::Tensor> values, grads;
  for (const auto& v : model->variables()) {
    infos.push_back({v.name, v.shape});
    values.push_back(ops::Tensor::Zeros(v.shape));
    grads.push_back(ops::Tensor::Zeros(v.shape));
  }
  const int num_ps = c.task.cluster.num_tasks(runtime::kPsJob);
  const int num_workers = c.task.cluster.num_tasks(runtime::kWorkerJob);
  FULCRUM_ASSIGN_OR_RETURN(
      runtime::Placement placement,
      runtime::PlaceVariables(infos, num_ps, c.placement, c.partition_min_bytes));
  data::BatcherOptions bo;
  bo.batch_size = t.batch_size;
  bo.worker_index = c.task.task_index;
  bo.num_workers = num_workers;
  bo.seed = t.seed;
  bo.subset = t.train_subset;
  bo.repeat = t.dataset_repeat;
  FULCRUM_ASSIGN_OR_RETURN(data::Batcher batcher, data::Batcher::Create(&train, bo));
  const int64_t train_steps = runtime::GlobalTrainSteps(t, c, train.size());
  const bool sync = c.mode == runtime::SyncMode::kSync;

  // Chief: register (the chief checks our flags against its own), then wait for the start.
  auto chief =
      pb::Coordinator::NewStub(runtime::MakeChannel(c.task.cluster.address(runtime::kChiefJob, 0)));
  FULCRUM_ASSIGN_OR_RETURN(pb::RegisterTaskResponse registered,
                           Register(*chief, t, c, startup_deadline, prof.get()));
  const std::filesystem::path task_dir =
      std::filesystem::path(registered.run_dir()) / c.task.dir_name();
  FULCRUM_RETURN_IF_ERROR(MakeDirs(task_dir, "run directory"));
  FULCRUM_RETURN_IF_ERROR(prof->SetTaskDir(task_dir.string()));
  FULCRUM_RETURN_IF_ERROR(WaitForStart(*chief, c, startup_deadline, prof.get()));

  std::vector<std::unique_ptr<runtime::GrpcPsClient>> ps;
  std::vector<runtime::PsClient*> clients;
  for (int p = 0; p < num_ps; ++p) {
    ps.push_back(std::make_unique<runtime::GrpcPsClient>(
        absl::StrCat("ps:", p), c.task.cluster.address(runtime::kPsJob, p)));
    ps.back()->set_observer(prof.get());
    clients.push_back(ps.back().get());
    if (!ps.back()->WaitUntilReady(std::max(absl::Seconds(1), startup_deadline - absl::Now()))) {
      return absl::DeadlineExceededError(absl::StrCat(c.task.task_name(), ": ps:", p, " at ",
                                                      ps.back()->target(), " did not answer"));
    }
    FULCRUM_RETURN_IF_ERROR(
        runtime::RemoteFailure(ps.back()->Warm(c.chunk_bytes, 2, c.step_timeout)));
  }
  runtime::ShardedVariables sharded(placement, c.chunk_bytes, clients, c.task.task_name());
  Heartbeat heartbeat(chief.get(), MyTask(c), c.heartbeat_timeout, prof.get());

  ops::Tensor inputs = ops::Tensor::Zeros({t.batch_size, train.example_size()});
  std::vector<int32_t> labels(static_cast<size_t>(t.batch_size));
  runtime::TransferResult xfer;
  const int64_t first_pull_begin = profiler::NowUnixMicros();
  FULCRUM_RETURN_IF_ERROR(
      runtime::RemoteFailure(sharded.PullAll(0, c.step_timeout, values, &xfer)));
  // The first step's values come from this pull; later ones come back with each push.
  double pending_pull_ms =
      static_cast<double>(profiler::NowUnixMicros() - first_pull_begin) / 1000.0;
  int64_t global_step = xfer.global_step;
  int64_t local_steps = 0, pushes = 0, dropped = 0, duplicates = 0, retries = 0;
  int64_t bytes_sent = 0, bytes_received = xfer.bytes_received;
  std::vector<double> step_ms;
  std::vector<float> losses;
  std::string stop_reason = "reached train_steps";
  spdlog::info("training: {} {} from global step {} to {}, batch {}, {} chunk(s) on {} ps",
               sync ? "sync" : "async", t.model, global_step, train_steps, t.batch_size,
               sharded.num_chunks(), num_ps);
  const auto train_start = Clock::now();
  auto steady_start = train_start;
  auto window_start = train_start;
  int64_t window_steps = 0;
  bool stopped = xfer.stopped;
  while (!stopped && global_step < train_steps) {
    if (heartbeat.should_stop()) {
      stop_reason = "the chief asked to stop";
      break;
    }
    if (heartbeat.chief_lost()) {
      return absl::UnavailableError(absl::StrCat(c.task.task_name(), ": chief:0 silent for ",
                                                 absl::FormatDuration(c.heartbeat_timeout),
                                                 " (--heartbeat_timeout)"));
    }
    const int64_t begin_unix_us = profiler::NowUnixMicros();
    const auto t0 = Clock::now();
    batcher.Next(&inputs, labels, &pool);
    const auto t_data = Clock::now();
    double forward_ms = 0.0;
    FULCRUM_ASSIGN_OR_RETURN(float loss,
                             model->ComputeGradients(inputs, labels, values, grads, &forward_ms));
    const auto t_grad = Clock::now();
    if (!std::isfinite(loss)) {
      return absl::InternalError(absl::StrCat("loss became ", loss, " at global step ", global_step,
                                              ": the learning rate is probably too high"));
    }
    FULCRUM_RETURN_IF_ERROR(runtime::RemoteFailure(sharded.PushPullAll(
        global_step, sync ? global_step + 1 : 0, grads, values, c.step_timeout, &xfer)));
    const auto t1 = Clock::now();
    ++local_steps;
    ++window_steps;
    pushes += xfer.applied + xfer.dropped;  // what the PS took (none once it has stopped)
    dropped += xfer.dropped;
    duplicates += xfer.duplicates;
    retries += xfer.retries;
    bytes_sent += xfer.bytes_sent;
    bytes_received += xfer.bytes_received;
    global_step = xfer.global_step;
    stopped = xfer.stopped;
    heartbeat.set_step(local_steps);
    step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    losses.push_back(loss);
    {
      using Ms = std::chrono::duration<double, std::milli>;
      profiler::StepRecord r;
      r.step = local_steps;
      r.global_step = global_step;
      r.examples = t.batch_size;
      r.loss = loss;
      r.begin_unix_us = begin_unix_us;
      r.data_ms = Ms(t_data - t0).count();
      r.pull_ms = pending_pull_ms;
      pending_pull_ms = 0.0;
      r.forward_ms = forward_ms;
      r.backward_ms = std::max(0.0, Ms(t_grad - t_data).count() - forward_ms);
      const double rpc_ms = Ms(t1 - t_grad).count();
      r.sync_wait_ms = std::min(rpc_ms, static_cast<double>(xfer.max_wait_us) / 1000.0);
      r.push_ms = rpc_ms - r.sync_wait_ms;
      // The first step also carries its initial pull, before t0.
      r.wall_ms = Ms(t1 - t0).count() + r.pull_ms;
      if (r.pull_ms > 0) r.begin_unix_us -= std::llround(r.pull_ms * 1000.0);
      prof->RecordStep(r);
    }
    if (local_steps == kWarmupSteps) steady_start = t1;
    if (local_steps % t.log_every == 0) {
      const double secs = std::chrono::duration<double>(t1 - window_start).count();
      spdlog::info("step {} (global {}/{}) loss {:.4f} examples/sec {:.0f}", local_steps,
                   global_step, train_steps, loss,
                   static_cast<double>(window_steps * t.batch_size) / secs);
      window_start = t1;
      window_steps = 0;
    }
  }
  if (stopped) stop_reason = "the ps reported that training ended";
  const auto train_end = Clock::now();
  const double train_seconds = std::chrono::duration<double>(train_end - train_start).count();
  const int64_t steady_steps = local_steps - kWarmupSteps;
  const double rate_all =
      train_seconds > 0 ? static_cast<double>(local_steps * t.batch_size) / train_seconds : 0.0;
  const double rate = steady_steps > 0
                          ? static_cast<double>(steady_steps * t.batch_size) /
                                std::chrono::duration<double>(train_end - steady_start).count()
                          : rate_all;
  double tail_loss = 0.0;
  const size_t tail = std::min<size_t>(100, losses.size());
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) tail_loss += losses[i];
  if (tail > 0) tail_loss /= static_cast<double>(tail);

  nlohmann::json j;
  j["job"] = c.task.job_name;
  j["task_index"] = c.task.task_index;
  j["mode"] = sync ? "sync" : "async";
  j["model"] = t.model;
  j["batch_size"] = t.batch_size;
  j["local_steps"] = local_steps;
  j["last_global_step"] = global_step;
  j["stop_reason"] = stop_reason;
  j["pushes"] = pushes;
  j["pushes_dropped"] = dropped;
  j["pushes_duplicate"] = duplicates;
  j["rpc_retries"] = retries;
  j["bytes_pushed"] = bytes_sent;
  j["bytes_pulled"] = bytes_received;
  j["final_train_loss"] = tail_loss;
  j["examples_per_sec"] = rate;
  j["examples_per_sec_all_steps"] = rate_all;
  j["step_time_p50_ms"] = Percentile(step_ms, 0.50);
  j["step_time_p99_ms"] = Percentile(step_ms, 0.99);
  j["train_seconds"] = train_seconds;
  j["wall_seconds"] = absl::ToDoubleSeconds(absl::Now() - process_start);
  FULCRUM_RETURN_IF_ERROR(prof->Finish(&j));
  const std::string text = j.dump(2) + "\n";
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(task_dir / "summary.json", text));
  spdlog::info(
      "done after {} local steps (global step {}): {}; {:.0f} examples/sec, "
      "{} of {} pushes dropped as stale",
      local_steps, global_step, stop_reason, rate, dropped, pushes);

  pb::ReportSummaryRequest report;
  *report.mutable_task() = MyTask(c);
  report.set_summary_json(text);
  pb::ReportSummaryResponse ack;
  grpc::ClientContext context;
  context.set_deadline(runtime::DeadlineIn(absl::Seconds(30)));
  return runtime::RemoteFailure(
      runtime::FromGrpc(chief->ReportSummary(&context, report, &ack), "ReportSummary to chief:0"));
}

}  // namespace fulcrum::worker
