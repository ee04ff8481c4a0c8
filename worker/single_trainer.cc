#include "worker/single_trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/files.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "data/load.h"
#include "data/pipeline.h"
#include "models/evaluate.h"
#include "nlohmann/json.hpp"
#include "ops/optimizer.h"
#include "profiler/profiler.h"
#include "profiler/stall_watch.h"
#include "runtime/config/run_dir.h"
#include "spdlog/spdlog.h"
#include "worker/device_variable_store.h"
#include "worker/local_variable_store.h"
#include "worker/replicas.h"
#include "worker/run_stats.h"
#include "worker/setup.h"
#include "worker/train_loop.h"

namespace fulcrum::worker {
namespace {

using Clock = std::chrono::steady_clock;

// Single mode's watchdog: the training loop's steps (counted by its step sink into `steps`)
// on a profiler::StallWatch, named "worker:0" in the log, the summary and the gauge.
std::unique_ptr<profiler::StallWatch> StartWatchdog(const runtime::TrainingOptions& o,
                                                    profiler::Profiler* prof,
                                                    const std::atomic<int64_t>* steps) {
  profiler::StallWatch::Options options;
  options.min_interval = o.watchdog_min;
  // A short --watchdog_secs is looked at often enough to be seen.
  options.poll = std::min(options.poll, o.watchdog_min / 2);
  options.on_stuck = [prof](const std::string& task, double seconds) {
    prof->RecordWatchdog(task, seconds);
  };
  return std::make_unique<profiler::StallWatch>(
      [steps](profiler::StallWatch& watch, absl::Time now) {
        const int64_t step = steps->load(std::memory_order_acquire);
        const absl::Duration at = watch.Progress("worker:0", step, now);
        if (at <= watch.Threshold()) return;
        watch.Stuck("worker:0",
                    absl::StrCat("stuck at local step ", step, " for ", profiler::WatchSeconds(at),
                                 ", in its own computation (single mode: its input pipeline or "
                                 "its kernels; no call in flight)"),
                    now - at, now);
      },
      std::move(options));
}

std::string DefaultRunDir(const std::string& model) {
  return absl::StrCat("runs/", model, "-",
                      absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()));
}

// --train_steps, or --epochs in whole batches of this worker's shard (at least one).
int64_t SingleTrainSteps(const runtime::TrainingOptions& o, int64_t steps_per_epoch) {
  if (o.train_steps > 0) return o.train_steps;
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(o.epochs * static_cast<double>(steps_per_epoch))));
}

// The summary keys of single mode other than the run figures (worker/run_stats.h).
nlohmann::json SummaryJson(const runtime::TrainingOptions& o, const SingleRunResult& r,
                           int64_t num_parameters) {
  nlohmann::json j;
  j["mode"] = "single";
  j["model"] = r.model;
  j["model_width"] = o.model_width;
  j["num_parameters"] = num_parameters;
  j["dataset"] = data::DatasetName(o.dataset);
  j["batch_size"] = r.batch_size;
  j["steps"] = r.steps;
  j["stop_reason"] = r.stop_reason;
  j["epochs"] = r.epochs;
  j["optimizer"] = ops::OptimizerName(o.optimizer.kind);
  j["learning_rate"] = runtime::ExactDecimal(o.optimizer.learning_rate);
  runtime::AddTrainingSettings(o, &j);
  j["seed"] = o.seed;
  j["threads"] = o.threads;
  j["devices"] = DeviceNames(o);
  j["tf32"] = o.tf32;
  j["final_test_accuracy"] =
      r.final_test_accuracy ? nlohmann::json(*r.final_test_accuracy) : nlohmann::json(nullptr);
  j["final_test_loss"] =
      r.final_test_loss ? nlohmann::json(*r.final_test_loss) : nlohmann::json(nullptr);
  j["wall_seconds"] = r.wall_seconds;
  return j;
}

// Fills the result's run figures from the loop's statistics.
void SetRunFigures(const RunStats& s, SingleRunResult* r) {
  r->final_train_loss = s.final_train_loss;
  r->examples_per_sec = s.examples_per_sec;
  r->examples_per_sec_all = s.examples_per_sec_all_steps;
  r->train_seconds = s.train_seconds;
  r->step_time_p50_ms = s.step_time_p50_ms;
  r->step_time_p99_ms = s.step_time_p99_ms;
}

// Test loss and (for classifiers) accuracy of `values` over the test split.
absl::Status Evaluate(const runtime::TrainingOptions& o, models::Model& model,
                      const data::Dataset& test, const VariableStore& store, SingleRunResult* r) {
  FULCRUM_ASSIGN_OR_RETURN(models::EvalResult e,
                           models::EvaluateDataset(model, test, store.values(), o.eval_batch_size));
  r->final_test_loss = e.loss_sum / static_cast<double>(e.examples);
  if (model.has_accuracy()) {
    r->final_test_accuracy = static_cast<double>(e.correct) / static_cast<double>(e.examples);
  }
  return absl::OkStatus();
}

// Single mode's store: on the device where one GPU (or the arena) computes, so only the batch
// and a few scalars cross per step; in this process's memory otherwise.
absl::StatusOr<std::unique_ptr<VariableStore>> MakeSingleStore(const runtime::TrainingOptions& o,
                                                               Replicas& replicas) {
  const models::Model& model = replicas.model();
  if (ops::Backend* device = replicas.device_backend(); device != nullptr) {
    spdlog::info("variables, gradients and optimizer slots live on {}", device->name());
    return DeviceVariableStore::Create(model.variables(), o.optimizer, o.seed, device);
  }
  FULCRUM_ASSIGN_OR_RETURN(LocalVariableStore local,
                           LocalVariableStore::Create(model.variables(), o.optimizer, o.seed));
  auto store = std::make_unique<LocalVariableStore>(std::move(local));
  store->set_pool(replicas.pool());
  return store;
}

}  // namespace

absl::StatusOr<SingleRunResult> RunSingle(const runtime::TrainingOptions& o,
                                          const runtime::ProfileFlags& profile) {
  const auto run_start = Clock::now();
  // The devices are checked before anything is written into the run directory.
  FULCRUM_RETURN_IF_ERROR(ComputeDevices(o).status());
  const std::filesystem::path run_dir = o.run_dir.empty() ? DefaultRunDir(o.model) : o.run_dir;
  // A single-mode worker owns its whole run directory.
  FULCRUM_RETURN_IF_ERROR(runtime::CheckRunDirReusable(run_dir, o.overwrite));
  FULCRUM_ASSIGN_OR_RETURN(data::TrainTest data, data::LoadTrainTest(runtime::DataSource(o)));
  spdlog::info("data: {} ({} examples), {} ({} examples), {} values per example", data.train.name,
               data.train.size(), data.test.name, data.test.size(), data.train.example_size());
  // The model is built (and checked against its device's memory) before the run directory is
  // made: a run refused there leaves nothing behind.
  FULCRUM_ASSIGN_OR_RETURN(
      std::unique_ptr<Replicas> replicas,
      Replicas::Create(
          o, data.train, /*worker_index=*/0,
          {.resident = true,
           .eval_batch = o.eval ? std::min<int64_t>(o.eval_batch_size, data.test.size()) : 0}));
  FULCRUM_RETURN_IF_ERROR(MakeDirs(run_dir, "--run_dir"));
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<profiler::Profiler> prof,
                           profiler::Profiler::Start(runtime::ProfilerOptionsFor(
                               profile, nullptr, "worker", 0, run_dir.string())));
  models::Model* const model = &replicas->model();
  SetModelGraph(*model, /*placement=*/nullptr, "/job:worker/task:0", prof.get());
  // Evaluation reads the test set as the pipeline's evaluation transform leaves it.
  FULCRUM_RETURN_IF_ERROR(data::ApplyEvalPipeline(PipelineFor(o), &data.test));
  if (o.input_pipeline == data::PipelineKind::kCifar10) {
    spdlog::info(
        "input pipeline cifar10: training on random {0}x{0} crops (flipped, brightness, "
        "contrast, standardised), testing on centre crops",
        o.crop_size);
  }
  spdlog::info("model: {} ({} variables, {} parameters)", model->name(), model->variables().size(),
               model->num_parameters());
  FULCRUM_ASSIGN_OR_RETURN(data::Batcher batcher,
                           data::Batcher::Create(&data.train, BatcherOptionsFor(o, 0, 1)));
  const int64_t steps_per_epoch = batcher.steps_per_epoch();
  const int64_t steps = SingleTrainSteps(o, steps_per_epoch);
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<VariableStore> store_owner,
                           MakeSingleStore(o, *replicas));
  VariableStore& store = *store_owner;

  spdlog::info("training: {} steps of batch {} with {} (lr {}), {} thread(s)", steps, o.batch_size,
               ops::OptimizerName(o.optimizer.kind), o.optimizer.learning_rate, o.threads);
  TrainLoop loop({.target_global_steps = steps, .log_every = o.log_every, .prefetch = o.prefetch},
                 model, std::move(batcher), &store, replicas->pool());
  loop.set_replicas(replicas.get());
  std::atomic<int64_t> steps_done{0};
  loop.set_step_sink([&prof, &steps_done](const profiler::StepRecord& r) {
    prof->RecordStep(r);
    steps_done.fetch_add(1, std::memory_order_release);
  });
  std::unique_ptr<profiler::StallWatch> watchdog = StartWatchdog(o, prof.get(), &steps_done);
  absl::StatusOr<TrainLoopResult> ran = loop.Run();
  const nlohmann::json watchdog_report = watchdog->Report();
  watchdog.reset();  // the final evaluation's time is not a stall
  FULCRUM_ASSIGN_OR_RETURN(TrainLoopResult trained, std::move(ran));
  const RunStats stats = ComputeRunStats(trained.steps, trained.wall_seconds);

  SingleRunResult r;
  r.model = o.model;
  r.batch_size = o.batch_size;
  r.steps = static_cast<int64_t>(trained.steps.size());  // fewer than planned if interrupted
  r.epochs = static_cast<double>(r.steps) / static_cast<double>(steps_per_epoch);
  r.stop_reason = trained.stop_reason;
  SetRunFigures(stats, &r);
  // An interrupted run writes what it has at once: no final evaluation.
  if (o.eval && StopSignal() == 0) {
    FULCRUM_RETURN_IF_ERROR(Evaluate(o, *model, data.test, store, &r));
  }
  r.run_dir = run_dir.string();
  r.wall_seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
  nlohmann::json summary = SummaryJson(o, r, model->num_parameters());
  summary["kernels"] = KernelsJson(model->backend().kernel_choices());
  summary["watchdog"] = watchdog_report;
  FULCRUM_RETURN_IF_ERROR(
      WriteSummary(prof.get(), stats, &summary, run_dir / "summary.json").status());
  return r;
}

}  // namespace fulcrum::worker
