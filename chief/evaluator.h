// chief: the chief's evaluations of the ps tasks' values. It holds the test set (through the
// input pipeline's evaluation transform, as the workers' models see their batches) and a model
// to run it on, keeps every evaluation of the run (the report's and the profiler's), the time
// the target accuracy was first reached, and runs the accuracy guard (chief/accuracy_guard.h)
// over their history.
// Thread-safety: one thread, the chief's run loop; Evaluate runs the model on a thread of its
// own while the caller's `keep_alive` runs on the calling one.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/accuracy_guard.h"
#include "data/dataset_types.h"
#include "models/model.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"
#include "profiler/profiler.h"
#include "runtime/config/flags.h"

namespace fulcrum::chief {

struct Eval {
  int64_t global_step = 0;
  double seconds = 0.0;  // since the start of training
  std::optional<double> accuracy;
  double loss = 0.0;
};

class Evaluator {
 public:
  // Loads --dataset's test split and builds --model for its examples on `pool` (not owned).
  // `target_accuracy` (0: none) is the accuracy whose first reaching is timed.
  static absl::StatusOr<std::unique_ptr<Evaluator>> Create(const runtime::TrainingOptions& t,
                                                           double target_accuracy,
                                                           ops::ThreadPool* pool);

  const models::Model& model() const { return *model_; }
  // The buffers a pull of every variable fills before Evaluate (model order).
  std::vector<ops::Tensor>& values() { return values_; }

  // Evaluates values(), pulled at `global_step`, `seconds` into training; calls `keep_alive`
  // every `ping` while the model runs (the ps tasks must keep hearing from the chief). Logs
  // it ("<when> global step S/<train_steps>"), records it in `prof` and keeps it. The accuracy
  // guard's error when the accuracy fell to chance after having risen.
  absl::StatusOr<Eval> Evaluate(const char* when, int64_t global_step, double seconds,
                                int64_t train_steps, absl::Duration ping,
                                const std::function<void()>& keep_alive, profiler::Profiler* prof);

  // Every evaluation so far, in order.
  const std::vector<Eval>& evals() const { return evals_; }
  // Seconds into training when an evaluation first reached the target accuracy.
  std::optional<double> time_to_target() const { return time_to_target_; }

 private:
  Evaluator(const runtime::TrainingOptions& t, double target_accuracy)
      : t_(t), target_accuracy_(target_accuracy) {}

  const runtime::TrainingOptions& t_;
  const double target_accuracy_;
  data::Dataset test_;
  std::unique_ptr<models::Model> model_;
  std::vector<ops::Tensor> values_;
  std::vector<Eval> evals_;
  std::vector<AccuracyPoint> accuracy_history_;  // evals_ with an accuracy (the guard's input)
  std::optional<double> time_to_target_;
};

}  // namespace fulcrum::chief
