#include "worker/train_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
      labels_(static_cast<size_t>(batcher_.batch_size())),
      divergence_(model->has_accuracy() ? model->output_size() : 0) {
  const int64_t batch = batcher_.batch_size();
  inputs_ = ops::Tensor::Zeros({batch, batcher_.batch_shape().num_elements() / batch});
}

ops::TransferCounters TrainLoop::Copies() const {
  return replicas_ != nullptr ? replicas_->transfer_counters()
                              : model_->backend().transfer_counters();
}

absl::StatusOr<TrainLoopResult> TrainLoop::Run() {
  TrainLoopResult result;
  result.stop_reason = "reached train_steps";
  const auto start = Clock::now();
  FULCRUM_ASSIGN_OR_RETURN(const absl::Duration first_pull, store_->Start());
  if (options_.prefetch) {
    FULCRUM_ASSIGN_OR_RETURN(prefetcher_, BatchPrefetcher::Start(&batcher_, model_->backend()));
  }
  // The loader stops with the run: the batcher is not read after Run returns.
  struct StopLoader {
    std::unique_ptr<BatchPrefetcher>* p;
    ~StopLoader() { p->reset(); }
  } stop_loader{&prefetcher_};
  copies_seen_ = Copies();
  if (options_.log_global_step) {
    spdlog::info("starting at global step {} of {}", store_->global_step(),
                 options_.target_global_steps);
  }
  window_start_ = Clock::now();
  window_steps_ = 0;
  StepExchange* const exchange = options_.overlap ? store_->exchange() : nullptr;
  // The first step's values come from Start's pull; later ones come with each push-pull.
  FULCRUM_RETURN_IF_ERROR(RunSteps(exchange, absl::ToDoubleMilliseconds(first_pull), &result));
  if (const std::string reason = store_->StopReason(); !reason.empty()) result.stop_reason = reason;
  result.wall_seconds = Seconds(Clock::now() - start).count();
  result.global_step = store_->global_step();
  return result;
}

absl::Status TrainLoop::RunSteps(StepExchange* exchange, double pull_ms, TrainLoopResult* result) {
  while (true) {
    // A push-pull that will reach the target anyway (every chunk's step grows by at least
    // this push) is waited for here rather than under a step that would be dropped.
    if (pending_.has_value() && store_->global_step() + 1 >= options_.target_global_steps) {
      FULCRUM_RETURN_IF_ERROR(FinishPending(exchange, result).status());
    }
    if (!pending_.has_value() && Done()) break;
    const auto local_steps = static_cast<int64_t>(result->steps.size() + (pending_ ? 1 : 0));
    FULCRUM_ASSIGN_OR_RETURN(const bool stop, StopRequested(local_steps, result));
    if (stop) break;
    if (exchange == nullptr && local_steps > 0) {  // the first step's values came with Start
      FULCRUM_ASSIGN_OR_RETURN(const absl::Duration refreshed, store_->Refresh());
      pull_ms = absl::ToDoubleMilliseconds(refreshed);
      // A refresh can learn that training ended (the ps stopped, or a recovery was told to).
      if (!store_->StopReason().empty()) break;
    }
    FULCRUM_ASSIGN_OR_RETURN(const Outcome outcome,
                             Step(exchange, local_steps + 1, pull_ms, result));
    pull_ms = 0.0;
    if (outcome == Outcome::kStop) break;
  }
  // A step whose push-pull is still in flight is finished and recorded.
  return FinishPending(exchange, result).status();
}

absl::Status TrainLoop::NextBatch() {
  if (prefetcher_ != nullptr) return prefetcher_->Next(&inputs_, &batch_labels_);
  batcher_.Next(&inputs_, labels_, pool_);
  batch_labels_ = labels_;
  return absl::OkStatus();
}

absl::StatusOr<bool> TrainLoop::StopRequested(int64_t local_steps, TrainLoopResult* result) {
  if (const int signal = StopSignal(); signal != 0) {
    result->stop_reason = absl::StrCat("interrupted by ", SignalName(signal));
    spdlog::warn("{}: stopping after step {}, writing what was recorded", result->stop_reason,
                 local_steps);
    return true;
  }
  if (!stop_check_) return false;
  std::string reason;
  FULCRUM_RETURN_IF_ERROR(stop_check_(local_steps, &reason));
  if (reason.empty()) return false;
  result->stop_reason = std::move(reason);
  return true;
}

absl::Status TrainLoop::CheckFinite(float loss, int64_t step, int64_t global_before) {
  if (std::isfinite(loss)) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("loss became ", loss, " at step ", step, " (global step ",
                                          global_before,
                                          "): the learning rate is probably too high"));
}

bool TrainLoop::Done() const {
  return !store_->StopReason().empty() || store_->global_step() >= options_.target_global_steps;
}

absl::Status TrainLoop::Record(profiler::StepRecord r, TrainLoopResult* result) {
  // What crossed to and from the device since the last record: this step's copies.
  const ops::TransferCounters now = Copies();
  const ops::TransferCounters step = now - copies_seen_;
  copies_seen_ = now;
  r.h2d_bytes = step.h2d_bytes;
  r.h2d_calls = step.h2d_calls;
  r.d2h_bytes = step.d2h_bytes;
  r.d2h_calls = step.d2h_calls;
  r.device_allocs = step.allocations;
  result->steps.push_back(std::move(r));
  const profiler::StepRecord& kept = result->steps.back();
  if (step_sink_) step_sink_(kept);
  // The record is kept (and written) first: the steps that led there are the evidence.
  FULCRUM_RETURN_IF_ERROR(divergence_.Observe(kept.step, kept.loss));
  ++window_steps_;
  if (kept.step % options_.log_every == 0 || Done()) {
    const auto now = Clock::now();
    LogProgress(kept, Seconds(now - window_start_).count(), window_steps_);
    window_start_ = now;
    window_steps_ = 0;
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainLoop::Outcome> TrainLoop::FinishPending(StepExchange* exchange,
                                                            TrainLoopResult* result,
                                                            double* sync_wait_ms) {
  if (!pending_.has_value()) return Done() ? Outcome::kStop : Outcome::kTaken;
  FULCRUM_ASSIGN_OR_RETURN(const ExchangeResult x, exchange->FinishExchange());
  if (sync_wait_ms != nullptr) *sync_wait_ms = absl::ToDoubleMilliseconds(x.applied.sync_wait);
  profiler::StepRecord r = std::move(*pending_);
  pending_.reset();
  r.global_step = store_->global_step();
  if (x.first_sent != absl::InfinitePast() && x.first_sent != absl::InfiniteFuture() &&
      x.last_done >= x.first_sent) {
    const absl::Time begin = absl::FromUnixMicros(r.begin_unix_us);
    r.inflight_begin_ms = absl::ToDoubleMilliseconds(x.first_sent - begin);
    r.inflight_ms = absl::ToDoubleMilliseconds(x.last_done - x.first_sent);
  }
  FULCRUM_RETURN_IF_ERROR(Record(std::move(r), result));
  if (x.recovered) return Outcome::kRetry;
  return Done() ? Outcome::kStop : Outcome::kTaken;
}

// The step in progress, as the overlapped schedule's hooks see it.
struct TrainLoop::StepState {
  profiler::StepRecord r;
  double pull_ms = 0.0;  // spent reading the step's values before it began
  int64_t global_before = 0;
  Clock::time_point t0;
  double waits_ms = 0.0;   // waiting for values under the forward pass
  double finish_ms = 0.0;  // ending the previous step's push-pull
  // The ps's wait for the other workers' gradients of the previous step (sync), as its
  // replies said: the part of the step's blocked time that was waiting for them.
  double sync_wait_ms = 0.0;
  bool wait_failed = false;
  bool delayed = false;               // the backward delay (tests) was slept
  Outcome outcome = Outcome::kTaken;  // what ending the previous push-pull said
};

models::LayerHooks TrainLoop::OverlapHooks(StepExchange* exchange, StepState* s,
                                           TrainLoopResult* result) {
  // Waits shorter than this are not drawn (the values were in: the call's own cost).
  constexpr double kDrawnWaitMs = 0.005;
  models::LayerHooks hooks;
  hooks.values_needed = [exchange, s](size_t first, size_t count) {
    const auto w0 = Clock::now();
    absl::Status status = exchange->WaitForValues(first, count);
    const double ms = Ms(Clock::now() - w0).count();
    s->waits_ms += ms;
    if (ms >= kDrawnWaitMs) s->r.value_waits.push_back({s->pull_ms + Ms(w0 - s->t0).count(), ms});
    s->wait_failed = s->wait_failed || !status.ok();
    return status;
  };
  hooks.forward_done = [this, exchange, s, result](float forward_loss) -> absl::Status {
    // Nothing of a diverged step is sent (its gradients go out during the backward pass).
    FULCRUM_RETURN_IF_ERROR(CheckFinite(forward_loss, s->r.step, s->global_before));
    const auto f0 = Clock::now();
    FULCRUM_ASSIGN_OR_RETURN(s->outcome, FinishPending(exchange, result, &s->sync_wait_ms));
    s->finish_ms = Ms(Clock::now() - f0).count();
    if (s->outcome != Outcome::kTaken) return absl::CancelledError("the step is dropped");
    return absl::OkStatus();
  };
  hooks.gradients_ready = [this, exchange, s](size_t first, size_t count) {
    DelayBackward(s);
    exchange->GradientsReady(first, count);
  };
  return hooks;
}

absl::StatusOr<TrainLoop::Outcome> TrainLoop::Step(StepExchange* exchange, int64_t step,
                                                   double pull_ms, TrainLoopResult* result) {
  StepState s;
  profiler::StepRecord& r = s.r;
  r.step = step;
  r.examples = batcher_.batch_size();
  r.overlap = exchange != nullptr;
  r.begin_unix_us = profiler::NowUnixMicros();
  s.pull_ms = pull_ms;
  s.global_before = store_->global_step();
  s.t0 = Clock::now();
  FULCRUM_RETURN_IF_ERROR(NextBatch());
  const auto t_data = Clock::now();
  // Sequential: the values are all in and every gradient goes with the Apply at the end.
  models::LayerHooks hooks;
  if (exchange != nullptr) hooks = OverlapHooks(exchange, &s, result);
  const models::LayerHooks* const step_hooks = exchange != nullptr ? &hooks : nullptr;
  double forward_ms = 0.0;
  absl::StatusOr<float> loss =
      replicas_ != nullptr ? replicas_->ComputeGradients(inputs_, batch_labels_, store_->values(),
                                                         store_->grads(), &forward_ms, step_hooks)
                           : model_->ComputeGradients(inputs_, batch_labels_, store_->values(),
                                                      store_->grads(), &forward_ms, step_hooks);
  if (!loss.ok()) return Unfinished(exchange, s, loss.status(), result);
  FULCRUM_RETURN_IF_ERROR(CheckFinite(*loss, step, s.global_before));
  DelayBackward(&s);
  if (exchange != nullptr) exchange->SendRest();
  const auto t_grad = Clock::now();
  r.loss = *loss;
  r.data_ms = Ms(t_data - s.t0).count();
  r.pull_ms = pull_ms + s.waits_ms;
  r.forward_ms = std::max(0.0, forward_ms - s.waits_ms);
  r.backward_ms = std::max(0.0, Ms(t_grad - t_data).count() - forward_ms - s.finish_ms);
  // A step that carries a pull began before t0.
  if (pull_ms > 0) r.begin_unix_us -= std::llround(pull_ms * 1000.0);
  if (exchange != nullptr) {  // its push-pull ends under the next step's forward pass
    // Of the time the step was blocked on the previous push-pull (its values, its end), up
    // to the ps's wait for the other workers is that wait; the rest is the transfer's.
    r.sync_wait_ms = std::min(s.waits_ms + s.finish_ms, s.sync_wait_ms);
    const double from_values = std::min(s.waits_ms, r.sync_wait_ms);
    // (Clamped: the subtraction of a wait from itself can round to -1e-19.)
    r.pull_ms = std::max(0.0, pull_ms + s.waits_ms - from_values);
    r.push_ms = std::max(0.0, s.finish_ms - (r.sync_wait_ms - from_values));
    r.comm_wait_ms = r.pull_ms + r.push_ms + r.sync_wait_ms;
    r.wall_ms = Ms(t_grad - s.t0).count() + pull_ms;
    pending_ = std::move(r);
    return Outcome::kTaken;
  }
  FULCRUM_RETURN_IF_ERROR(ApplySequential(s, t_grad));
  FULCRUM_RETURN_IF_ERROR(Record(std::move(r), result));
  return Done() ? Outcome::kStop : Outcome::kTaken;
}

void TrainLoop::DelayBackward(StepState* s) const {
  if (s->delayed || options_.backward_delay <= absl::ZeroDuration()) return;
  s->delayed = true;
  absl::SleepFor(options_.backward_delay);
}

absl::StatusOr<TrainLoop::Outcome> TrainLoop::Unfinished(StepExchange* exchange, const StepState& s,
                                                         absl::Status error,
                                                         TrainLoopResult* result) {
  if (exchange == nullptr) return error;
  if (s.outcome != Outcome::kTaken) return s.outcome;  // dropped after its forward pass
  if (!s.wait_failed) return error;
  // The previous push-pull failed: its end says whether the run goes on (a recovery, and
  // this step, computed on values that were not all in, is dropped).
  FULCRUM_ASSIGN_OR_RETURN(const Outcome after, FinishPending(exchange, result));
  return after == Outcome::kTaken ? Outcome::kRetry : after;
}

absl::Status TrainLoop::ApplySequential(StepState& s, Clock::time_point t_grad) {
  FULCRUM_ASSIGN_OR_RETURN(const ApplyResult applied, store_->Apply());
  const auto t1 = Clock::now();
  profiler::StepRecord& r = s.r;
  r.global_step = store_->global_step();
  // The store's part of the step: the push RPCs (or the local optimizer), less the PS's wait
  // for the step's aggregation.
  const double apply_ms = Ms(t1 - t_grad).count();
  r.sync_wait_ms = std::min(apply_ms, absl::ToDoubleMilliseconds(applied.sync_wait));
  r.push_ms = apply_ms - r.sync_wait_ms;
  if (store_->exchange() != nullptr) {  // a store that moves variables: all of it waited for
    r.comm_wait_ms = r.pull_ms + r.push_ms + r.sync_wait_ms;
    r.inflight_begin_ms = s.pull_ms + Ms(t_grad - s.t0).count();
    r.inflight_ms = apply_ms;
  }
  r.wall_ms = Ms(t1 - s.t0).count() + s.pull_ms;
  return absl::OkStatus();
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
