#include "worker/train_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "profiler/rpc_observer.h"
#include "spdlog/spdlog.h"

namespace fulcrum::worker {
namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;
using Seconds = std::chrono::duration<double>;

}  // namespace

TrainLoop::TrainLoop(const TrainLoopOptions& options, models::Model* model, data::Batcher batcher,
                     VariableStore* store, ops::ThreadPool* pool)
    : options_(options),
      model_(model),
      batcher_(std::move(batcher)),
      store_(store),
      pool_(pool),
      labels_(static_cast<size_t>(batcher_.batch_size())) {
  const int64_t batch = batcher_.batch_size();
  inputs_ = ops::Tensor::Zeros({batch, batcher_.batch_shape().num_elements() / batch});
}

absl::StatusOr<TrainLoopResult> TrainLoop::Run() {
  TrainLoopResult result;
  result.stop_reason = "reached train_steps";
  const auto start = Clock::now();
  FULCRUM_ASSIGN_OR_RETURN(const absl::Duration first_pull, store_->Start());
  // The first step's values come from this pull; later ones come with each Apply.
  double pending_pull_ms = absl::ToDoubleMilliseconds(first_pull);
  if (options_.log_global_step) {
    spdlog::info("starting at global step {} of {}", store_->global_step(),
                 options_.target_global_steps);
  }
  auto window_start = Clock::now();
  int64_t window_steps = 0;
  while (store_->StopReason().empty() && store_->global_step() < options_.target_global_steps) {
    const auto local_steps = static_cast<int64_t>(result.steps.size());
    if (const int signal = StopSignal(); signal != 0) {
      result.stop_reason = absl::StrCat("interrupted by ", SignalName(signal));
      spdlog::warn("{}: stopping after step {}, writing what was recorded", result.stop_reason,
                   local_steps);
      break;
    }
    if (stop_check_) {
      std::string reason;
      FULCRUM_RETURN_IF_ERROR(stop_check_(local_steps, &reason));
      if (!reason.empty()) {
        result.stop_reason = std::move(reason);
        break;
      }
    }
    if (local_steps > 0) {  // the first step's values came with Start
      FULCRUM_ASSIGN_OR_RETURN(const absl::Duration refreshed, store_->Refresh());
      pending_pull_ms = absl::ToDoubleMilliseconds(refreshed);
      // A refresh can learn that training ended (the ps stopped, or a recovery was told to).
      if (!store_->StopReason().empty()) break;
    }
    FULCRUM_ASSIGN_OR_RETURN(profiler::StepRecord r, Step(local_steps + 1, pending_pull_ms));
    pending_pull_ms = 0.0;
    result.steps.push_back(r);
    if (step_sink_) step_sink_(r);
    ++window_steps;
    const bool last =
        !store_->StopReason().empty() || store_->global_step() >= options_.target_global_steps;
    if (r.step % options_.log_every == 0 || last) {
      const auto now = Clock::now();
      LogProgress(r, Seconds(now - window_start).count(), window_steps);
      window_start = now;
      window_steps = 0;
    }
  }
  if (const std::string reason = store_->StopReason(); !reason.empty()) result.stop_reason = reason;
  result.wall_seconds = Seconds(Clock::now() - start).count();
  result.global_step = store_->global_step();
  return result;
}

absl::StatusOr<profiler::StepRecord> TrainLoop::Step(int64_t step, double pull_ms) {
  profiler::StepRecord r;
  r.step = step;
  r.examples = batcher_.batch_size();
  r.begin_unix_us = profiler::NowUnixMicros();
  const int64_t global_before = store_->global_step();
  const auto t0 = Clock::now();
  batcher_.Next(&inputs_, labels_, pool_);
  const auto t_data = Clock::now();
  double forward_ms = 0.0;
  FULCRUM_ASSIGN_OR_RETURN(const float loss,
                           replicas_ != nullptr
                               ? replicas_->ComputeGradients(inputs_, labels_, store_->values(),
                                                             store_->grads(), &forward_ms)
                               : model_->ComputeGradients(inputs_, labels_, store_->values(),
                                                          store_->grads(), &forward_ms));
  const auto t_grad = Clock::now();
  if (!std::isfinite(loss)) {
    return absl::InternalError(absl::StrCat("loss became ", loss, " at step ", step,
                                            " (global step ", global_before,
                                            "): the learning rate is probably too high"));
  }
  FULCRUM_ASSIGN_OR_RETURN(const ApplyResult applied, store_->Apply());
  const auto t1 = Clock::now();
  r.global_step = store_->global_step();
  r.loss = loss;
  r.data_ms = Ms(t_data - t0).count();
  r.pull_ms = pull_ms;
  r.forward_ms = forward_ms;
  r.backward_ms = std::max(0.0, Ms(t_grad - t_data).count() - forward_ms);
  // The store's part of the step: the push RPCs (or the local optimizer), less the PS's wait
  // for the step's aggregation.
  const double apply_ms = Ms(t1 - t_grad).count();
  r.sync_wait_ms = std::min(apply_ms, absl::ToDoubleMilliseconds(applied.sync_wait));
  r.push_ms = apply_ms - r.sync_wait_ms;
  // A step that carries a pull began before t0.
  r.wall_ms = Ms(t1 - t0).count() + pull_ms;
  if (pull_ms > 0) r.begin_unix_us -= std::llround(pull_ms * 1000.0);
  return r;
}

void TrainLoop::LogProgress(const profiler::StepRecord& r, double window_seconds,
                            int64_t window_steps) {
  const double rate =
      window_seconds > 0
          ? static_cast<double>(window_steps * batcher_.batch_size()) / window_seconds
          : 0.0;
  if (options_.log_global_step) {
    spdlog::info("step {} (global {}/{}) loss {:.4f} examples/sec {:.0f}", r.step, r.global_step,
                 options_.target_global_steps, r.loss, rate);
  } else {
    spdlog::info("step {}/{} loss {:.4f} examples/sec {:.0f}", r.step, options_.target_global_steps,
                 r.loss, rate);
  }
}

}  // namespace fulcrum::worker
