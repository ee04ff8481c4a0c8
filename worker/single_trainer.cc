#include "worker/single_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "data/dataset.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "ops/cpu/kernels.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"
#include "spdlog/spdlog.h"

namespace fulcrum::worker {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kWarmupSteps = 20;  // dropped from steady-state throughput (BENCHMARKING.md)

struct TrainTest {
  data::Dataset train;
  data::Dataset test;
};

absl::StatusOr<TrainTest> LoadData(const runtime::TrainingOptions& o) {
  TrainTest d;
  if (o.dataset == "mnist") {
    FULCRUM_ASSIGN_OR_RETURN(d.train, data::LoadMnistFormat(o.data_dir, data::Split::kTrain));
    FULCRUM_ASSIGN_OR_RETURN(d.test, data::LoadMnistFormat(o.data_dir, data::Split::kTest));
  } else if (o.dataset == "cifar10") {
    FULCRUM_ASSIGN_OR_RETURN(d.train, data::LoadCifar10(o.data_dir, data::Split::kTrain));
    FULCRUM_ASSIGN_OR_RETURN(d.test, data::LoadCifar10(o.data_dir, data::Split::kTest));
  } else {
    data::SyntheticOptions s;
    s.example_shape = ops::Shape(o.synthetic_shape);
    s.num_classes = o.synthetic_classes;
    s.num_examples = o.synthetic_examples;
    s.seed = o.seed;
    FULCRUM_ASSIGN_OR_RETURN(d.train, data::MakeSynthetic(s, data::Split::kTrain));
    s.num_examples = std::max<int64_t>(1, o.synthetic_examples / 6);
    FULCRUM_ASSIGN_OR_RETURN(d.test, data::MakeSynthetic(s, data::Split::kTest));
  }
  return d;
}

// FNV-1a of a variable's name: its initial value depends on (seed, name) only, so the same
// variable gets the same bits whichever process or PS shard initialises it.
uint64_t NameHash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

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

absl::StatusOr<models::EvalResult> EvaluateAll(models::Model& model, const data::Dataset& test,
                                               std::span<const ops::Tensor> values,
                                               int64_t batch) {
  models::EvalResult total;
  for (int64_t begin = 0; begin < test.size(); begin += batch) {
    const int64_t end = std::min(test.size(), begin + batch);
    const ops::Tensor inputs = test.images.Rows(begin, end);
    std::span<const int32_t> labels(test.labels.data() + begin, static_cast<size_t>(end - begin));
    FULCRUM_ASSIGN_OR_RETURN(models::EvalResult r, model.Evaluate(inputs, labels, values));
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
    total.examples += r.examples;
  }
  return total;
}

// Nearest-rank percentile, q in [0, 1].
double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  const auto k = static_cast<size_t>(std::llround(q * static_cast<double>(values.size() - 1)));
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(k), values.end());
  return values[k];
}

std::string DefaultRunDir(const std::string& model) {
  return absl::StrCat("runs/", model, "-",
                      absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()));
}

// Writes the file next to its final name and renames it into place, so a crash never
// leaves a half-written summary and an old one is replaced whole or not at all.
absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return absl::InternalError(absl::StrCat(tmp.string(), ": write failed"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path.string(), ": ", ec.message()));
  return absl::OkStatus();
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
  j["final_test_accuracy"] = r.final_test_accuracy ? nlohmann::json(*r.final_test_accuracy)
                                                   : nlohmann::json(nullptr);
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

absl::StatusOr<SingleRunResult> RunSingle(const runtime::TrainingOptions& o) {
  const auto run_start = Clock::now();
  ops::ThreadPool pool(o.threads);

  models::ModelRegistry registry;
  FULCRUM_RETURN_IF_ERROR(models::RegisterBuiltinModels(&registry));
  FULCRUM_ASSIGN_OR_RETURN(TrainTest data, LoadData(o));
  spdlog::info("data: {} ({} examples), {} ({} examples), {} values per example", data.train.name,
               data.train.size(), data.test.name, data.test.size(), data.train.example_size());

  models::ModelConfig config;
  config.input_size = data.train.example_size();
  config.num_classes = data.train.num_classes;
  config.width = o.model_width;
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, registry.Create(o.model, config));
  model->set_thread_pool(&pool);
  spdlog::info("model: {} ({} variables, {} parameters)", model->name(),
               model->variables().size(), model->num_parameters());

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

  const std::filesystem::path run_dir = o.run_dir.empty() ? DefaultRunDir(o.model) : o.run_dir;
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--run_dir=", run_dir.string(), ": cannot create: ", ec.message()));
  }

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
    const auto t0 = Clock::now();
    batcher.Next(&inputs, labels, &pool);
    FULCRUM_ASSIGN_OR_RETURN(float loss,
                             model->ComputeGradients(inputs, labels, vars.values, vars.grads));
    if (!std::isfinite(loss)) {
      return absl::InternalError(absl::StrCat("loss became ", loss, " at step ", step,
                                              ": the learning rate is probably too high"));
    }
    for (size_t i = 0; i < vars.values.size(); ++i) {
      FULCRUM_RETURN_IF_ERROR(ops::ApplyGradient(o.optimizer, step, vars.grads[i],
                                                 &vars.values[i], vars.slots[i]));
    }
    const auto t1 = Clock::now();
    step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    losses.push_back(loss);
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
  r.examples_per_sec =
      steady_steps > 0 ? static_cast<double>(steady_steps * o.batch_size) /
                             std::chrono::duration<double>(train_end - steady_start).count()
                       : r.examples_per_sec_all;
  const size_t tail = std::min<size_t>(100, losses.size());
  double tail_sum = 0.0;
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) tail_sum += losses[i];
  r.final_train_loss = tail_sum / static_cast<double>(tail);
  r.step_time_p50_ms = Percentile(step_ms, 0.50);
  r.step_time_p99_ms = Percentile(step_ms, 0.99);

  if (o.eval) {
    FULCRUM_ASSIGN_OR_RETURN(models::EvalResult e,
                             EvaluateAll(*model, data.test, vars.values, o.eval_batch_size));
    r.final_test_loss = e.loss_sum / static_cast<double>(e.examples);
    if (model->has_accuracy()) {
      r.final_test_accuracy = static_cast<double>(e.correct) / static_cast<double>(e.examples);
    }
  }
  r.run_dir = run_dir.string();
  r.wall_seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
  FULCRUM_RETURN_IF_ERROR(
      WriteFileAtomically(run_dir / "summary.json", SummaryJson(o, r).dump(2) + "\n"));
  return r;
}

}  // namespace fulcrum::worker
