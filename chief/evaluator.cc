#include "chief/evaluator.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "base/status_macros.h"
#include "data/load.h"
#include "data/pipeline.h"
#include "models/evaluate.h"
#include "models/registry.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {

absl::StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const runtime::TrainingOptions& t,
                                                             double target_accuracy,
                                                             ops::ThreadPool* pool) {
  std::unique_ptr<Evaluator> e(new Evaluator(t, target_accuracy));
  FULCRUM_ASSIGN_OR_RETURN(e->test_, data::LoadSplit(runtime::DataSource(t), data::Split::kTest));
  // The model and evaluation see the test set through the pipeline's evaluation transform
  // (the workers' models are built for the same example shape: worker/setup.cc).
  data::PipelineOptions pipeline;
  pipeline.kind = t.input_pipeline;
  pipeline.crop_size = t.crop_size;
  FULCRUM_RETURN_IF_ERROR(data::ApplyEvalPipeline(pipeline, &e->test_));
  const auto& dims = e->test_.images.shape().dims();
  FULCRUM_ASSIGN_OR_RETURN(e->model_,
                           models::CreateBuiltinModel(
                               t.model,
                               {.input_size = e->test_.example_size(),
                                .num_classes = e->test_.num_classes,
                                .width = t.model_width,
                                .input_shape = std::vector<int64_t>(dims.begin() + 1, dims.end())},
                               pool));
  for (const auto& v : e->model_->variables()) e->values_.push_back(ops::Tensor::Zeros(v.shape));
  return e;
}

absl::StatusOr<Eval> Evaluator::Evaluate(const char* when, int64_t global_step, double seconds,
                                         int64_t train_steps, absl::Duration ping,
                                         const std::function<void()>& keep_alive,
                                         profiler::Profiler* prof) {
  // The evaluation runs on a thread of its own while this one keeps calling the ps tasks: an
  // evaluation longer than --heartbeat_timeout (a large test set, a slow or CPU-capped host)
  // must not make them take the chief for dead.
  absl::StatusOr<models::EvalResult> evaluated = absl::UnknownError("evaluation did not run");
  absl::Notification evaluated_done;
  std::thread evaluation([&] {
    evaluated = models::EvaluateDataset(*model_, test_, values_, t_.eval_batch_size);
    evaluated_done.Notify();
  });
  while (!evaluated_done.WaitForNotificationWithTimeout(ping)) keep_alive();
  evaluation.join();
  FULCRUM_ASSIGN_OR_RETURN(models::EvalResult r, std::move(evaluated));
  Eval e;
  e.global_step = global_step;
  e.seconds = seconds;
  e.loss = r.loss_sum / static_cast<double>(std::max<int64_t>(1, r.examples));
  if (model_->has_accuracy()) {
    e.accuracy =
        static_cast<double>(r.correct) / static_cast<double>(std::max<int64_t>(1, r.examples));
    spdlog::info("{} global step {}/{}: test accuracy {:.4f}, test loss {:.4f} ({:.1f} s)", when,
                 e.global_step, train_steps, *e.accuracy, e.loss, e.seconds);
  } else {
    spdlog::info("{} global step {}/{}: test loss {:.5f} ({:.1f} s)", when, e.global_step,
                 train_steps, e.loss, e.seconds);
  }
  evals_.push_back(e);
  profiler::EvalRecord record;
  record.unix_us = profiler::NowUnixMicros();
  record.global_step = e.global_step;
  record.accuracy = e.accuracy ? *e.accuracy : -1.0;
  record.loss = e.loss;
  prof->RecordEval(record);
  if (target_accuracy_ > 0 && e.accuracy && *e.accuracy >= target_accuracy_ && !time_to_target_) {
    time_to_target_ = e.seconds;
  }
  if (e.accuracy) {  // recorded first: the report shows the evaluation that failed the run
    accuracy_history_.push_back({e.global_step, *e.accuracy});
    FULCRUM_RETURN_IF_ERROR(CheckAccuracyHeld(accuracy_history_, test_.num_classes));
  }
  return e;
}

}  // namespace fulcrum::chief
