#include "worker/single_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/files.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "data/dataset.h"
#include "models/evaluate.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "ops/cpu/kernels.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"
#include "profiler/profiler.h"
#include "spdlog/spdlog.h"

namespace fulcrum::worker {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kWarmupSteps = 20;  // dropped from steady-state throughput (BENCHMARKING.md)

struct Variables {
  std::vector<ops::Tensor> values;
  std::vector<ops::Tensor> grads;
  std::vector<std::vector<ops::Tensor>> slots;
};

absl::StatusOr<Variables> InitVariables(const models::Model& model,
                                        const ops::OptimizerConfig& optimizer, uint64_t seed) {
  Variables v;
  const size_t num_slots = ops::SlotNames(optimizer.kind).size();
  for (const auto& spec : model.variables()) {
    ops::Tensor value = ops::Tensor::Zeros(spec.shape);
    FULCRUM_RETURN_IF_ERROR(
        ops::Initialize(spec.initializer, VariableSeed(seed, spec.name), &value));
    v.values.push_back(std::move(value));
    v.grads.push_back(ops::Tensor::Zeros(spec.shape));
    std::vector<ops::Tensor> slots;
    for (size_t s = 0; s < num_slots; ++s) {
      slots.push_back(
          ops::Tensor::Filled(spec.shape, ops::SlotInitialValue(optimizer, static_cast<int>(s))));
    }
    v.slots.push_back(std::move(slots));
  }
  return v;
}

std::string DefaultRunDir(const std::string& model) {
  return absl::StrCat("runs/", model, "-",
                      absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()));
}

nlohmann::json SummaryJson(const runtime::TrainingOptions& o, const SingleRunResult& r) {
  nlohmann::json j;
  j["mode"] = "single";
  j["model"] = r.model;
  j["model_width"] = o.model_width;
  j["dataset"] = o.dataset;
  j["batch_size"] = r.batch_size;
  j["steps"] = r.steps;
  j["epochs"] = r.epochs;
  j["optimizer"] = ops::OptimizerName(o.optimizer.kind);
  j["learning_rate"] = o.optimizer.learning_rate;
  j["seed"] = o.seed;
  j["threads"] = o.threads;
  j["final_test_accuracy"] =
      r.final_test_accuracy ? nlohmann::json(*r.final_test_accuracy) : nlohmann::json(nullptr);
  j["final_test_loss"] =
      r.final_test_loss ? nlohmann::json(*r.final_test_loss) : nlohmann::json(nullptr);
  j["final_train_loss"] = r.final_train_loss;
  j["examples_per_sec"] = r.examples_per_sec;
  j["examples_per_sec_all_steps"] = r.examples_per_sec_all;
  j["step_time_p50_ms"] = r.step_time_p50_ms;
  j["step_time_p99_ms"] = r.step_time_p99_ms;
  j["wall_seconds"] = r.wall_seconds;
  j["train_seconds"] = r.train_seconds;
  return j;
}

}  // namespace

absl::StatusOr<SingleRunResult> RunSingle(const runtime::TrainingOptions& o,
                                          const runtime::ProfileFlags& profile) {
  const auto run_start = Clock::now();
  const std::filesystem::path run_dir = o.run_dir.empty() ? DefaultRunDir(o.model) : o.run_dir;
  FULCRUM_RETURN_IF_ERROR(MakeDirs(run_dir, "--run_dir"));
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<profiler::Profiler> prof,
                           profiler::Profiler::Start(runtime::ProfilerOptionsFor(
                               profile, nullptr, "worker", 0, run_dir.string())));
  ops::ThreadPool pool(o.threads);

  models::ModelRegistry registry;
  FULCRUM_RETURN_IF_ERROR(models::RegisterBuiltinModels(&registry));
  FULCRUM_ASSIGN_OR_RETURN(data::TrainTest data, data::LoadTrainTest(runtime::DataSource(o)));
  spdlog::info("data: {} ({} examples), {} ({} examples), {} values per example", data.train.name,
               data.train.size(), data.test.name, data.test.size(), data.train.example_size());

  models::ModelConfig config;
  config.input_size = data.train.example_size();
  config.num_classes = data.train.num_classes;
  config.width = o.model_width;
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, registry.Create(o.model, config));
  model->set_thread_pool(&pool);
  spdlog::info("model: {} ({} variables, {} parameters)", model->name(), model->variables().size(),
               model->num_parameters());

  data::BatcherOptions bo;
  bo.batch_size = o.batch_size;
  bo.seed = o.seed;
  bo.subset = o.train_subset;
  bo.repeat = o.dataset_repeat;
  FULCRUM_ASSIGN_OR_RETURN(data::Batcher batcher, data::Batcher::Create(&data.train, bo));
  const int64_t steps =
      o.train_steps > 0
          ? o.train_steps
          : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(
                                     o.epochs * static_cast<double>(batcher.steps_per_epoch()))));

  FULCRUM_ASSIGN_OR_RETURN(Variables vars, InitVariables(*model, o.optimizer, o.seed));
  ops::Tensor inputs = ops::Tensor::Zeros({o.batch_size, data.train.example_size()});
  std::vector<int32_t> labels(static_cast<size_t>(o.batch_size));
  std::vector<double> step_ms;
  std::vector<float> losses;
  step_ms.reserve(static_cast<size_t>(steps));
  losses.reserve(static_cast<size_t>(steps));

  spdlog::info("training: {} steps of batch {} with {} (lr {}), {} thread(s)", steps, o.batch_size,
               ops::OptimizerName(o.optimizer.kind), o.optimizer.learning_rate, o.threads);
  const auto train_start = Clock::now();
  auto steady_start = train_start;
  auto window_start = train_start;
  for (int64_t step = 1; step <= steps; ++step) {
    const int64_t begin_unix_us = profiler::NowUnixMicros();
    const auto t0 = Clock::now();
    batcher.Next(&inputs, labels, &pool);
    const auto t_data = Clock::now();
    double forward_ms = 0.0;
    FULCRUM_ASSIGN_OR_RETURN(
        float loss, model->ComputeGradients(inputs, labels, vars.values, vars.grads, &forward_ms));
    const auto t_grad = Clock::now();
    if (!std::isfinite(loss)) {
      return absl::InternalError(absl::StrCat("loss became ", loss, " at step ", step,
                                              ": the learning rate is probably too high"));
    }
    for (size_t i = 0; i < vars.values.size(); ++i) {
      FULCRUM_RETURN_IF_ERROR(
          ops::ApplyGradient(o.optimizer, step, vars.grads[i], &vars.values[i], vars.slots[i]));
    }
    const auto t1 = Clock::now();
    step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    losses.push_back(loss);
    {
      // Single mode: the optimizer's apply takes the place of the push.
      using Ms = std::chrono::duration<double, std::milli>;
      profiler::StepRecord rec;
      rec.step = step;
      rec.global_step = step;
      rec.examples = o.batch_size;
      rec.loss = loss;
      rec.begin_unix_us = begin_unix_us;
      rec.wall_ms = Ms(t1 - t0).count();
      rec.data_ms = Ms(t_data - t0).count();
      rec.forward_ms = forward_ms;
      rec.backward_ms = std::max(0.0, Ms(t_grad - t_data).count() - forward_ms);
      rec.push_ms = Ms(t1 - t_grad).count();
      prof->RecordStep(rec);
    }
    if (step == kWarmupSteps) steady_start = t1;
    if (step % o.log_every == 0 || step == steps) {
      const int64_t window_steps = step % o.log_every == 0 ? o.log_every : step % o.log_every;
      const double secs = std::chrono::duration<double>(t1 - window_start).count();
      spdlog::info("step {}/{} loss {:.4f} examples/sec {:.0f}", step, steps, loss,
                   static_cast<double>(window_steps * o.batch_size) / secs);
      window_start = Clock::now();
    }
  }
  const auto train_end = Clock::now();

  SingleRunResult r;
  r.model = o.model;
  r.batch_size = o.batch_size;
  r.steps = steps;
  r.epochs = static_cast<double>(steps) / static_cast<double>(batcher.steps_per_epoch());
  r.train_seconds = std::chrono::duration<double>(train_end - train_start).count();
  r.examples_per_sec_all = static_cast<double>(steps * o.batch_size) / r.train_seconds;
  // Steady state excludes the first kWarmupSteps steps; a run too short for that reports all.
  const int64_t steady_steps = steps - kWarmupSteps;
  r.examples_per_sec = steady_steps > 0
                           ? static_cast<double>(steady_steps * o.batch_size) /
                                 std::chrono::duration<double>(train_end - steady_start).count()
                           : r.examples_per_sec_all;
  const size_t tail = std::min<size_t>(100, losses.size());
  double tail_sum = 0.0;
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) tail_sum += losses[i];
  r.final_train_loss = tail_sum / static_cast<double>(tail);
  r.step_time_p50_ms = Percentile(step_ms, 0.50);
  r.step_time_p99_ms = Percentile(step_ms, 0.99);

  if (o.eval) {
    FULCRUM_ASSIGN_OR_RETURN(
        models::EvalResult e,
        models::EvaluateDataset(*model, data.test, vars.values, o.eval_batch_size));
    r.final_test_loss = e.loss_sum / static_cast<double>(e.examples);
    if (model->has_accuracy()) {
      r.final_test_accuracy = static_cast<double>(e.correct) / static_cast<double>(e.examples);
    }
  }
  r.run_dir = run_dir.string();
  r.wall_seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
  nlohmann::json summary = SummaryJson(o, r);
  FULCRUM_RETURN_IF_ERROR(prof->Finish(&summary));
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(run_dir / "summary.json", summary.dump(2) + "\n"));
  return r;
}

}  // namespace fulcrum::worker
