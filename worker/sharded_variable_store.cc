#include "worker/sharded_variable_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "runtime/grpc/grpc_util.h"
#include "spdlog/spdlog.h"

namespace fulcrum::worker {

ShardedVariableStore::ShardedVariableStore(runtime::ShardedVariables* sharded,
                                           std::span<const ops::Shape> shapes,
                                           runtime::SyncMode mode, absl::Duration step_timeout,
                                           ops::Backend* staging)
    : sharded_(sharded),
      mode_(mode),
      step_timeout_(step_timeout),
      chunks_(sharded, static_cast<int>(shapes.size())) {
  // Page-locked where the backend offers it; plain host memory when it cannot (said once).
  bool warned = false;
  const auto host = [&](const ops::Shape& shape) {
    if (staging != nullptr) {
      absl::StatusOr<ops::Tensor> t = staging->AllocateHost(shape);
      if (t.ok()) return *std::move(t);
      if (!warned) {
        spdlog::warn("{}: staging buffers in plain host memory: {}", staging->name(),
                     t.status().ToString());
        warned = true;
      }
    }
    return ops::Tensor::Zeros(shape);
  };
  for (const ops::Shape& shape : shapes) {
    values_.push_back(host(shape));
    grads_.push_back(host(shape));
  }
}

absl::Status ShardedVariableStore::PullValues() {
  runtime::TransferResult xfer;
  FULCRUM_RETURN_IF_ERROR(
      runtime::RemoteFailure(sharded_->PullAll(0, step_timeout_, values_, &xfer)));
  totals_.bytes_received += xfer.bytes_received;
  global_step_ = xfer.global_step;
  stopped_ = xfer.stopped;
  values_fresh_ = true;
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> ShardedVariableStore::Start() {
  const absl::Time begin = absl::Now();
  if (const absl::Status pulled = PullValues(); !pulled.ok()) {
    // A ps lost before the first step (restored from the initial checkpoint) is waited for
    // as one lost later is.
    const bool recoverable = absl::IsUnavailable(pulled) || absl::IsAborted(pulled);
    if (!recoverable || recovery_timeout_ <= absl::ZeroDuration()) return pulled;
    FULCRUM_RETURN_IF_ERROR(Recover(pulled));
  }
  return absl::Now() - begin;
}

absl::StatusOr<absl::Duration> ShardedVariableStore::Refresh() {
  if (!pull_before_step_ || mode_ == runtime::SyncMode::kSync || values_fresh_) {
    return absl::ZeroDuration();
  }
  const absl::Time begin = absl::Now();
  if (const absl::Status pulled = PullValues(); !pulled.ok()) {
    // As in Apply: a ps that went away or back to a checkpoint is waited for.
    const bool recoverable = absl::IsUnavailable(pulled) || absl::IsAborted(pulled);
    if (!recoverable || recovery_timeout_ <= absl::ZeroDuration()) return pulled;
    FULCRUM_RETURN_IF_ERROR(Recover(pulled));
  }
  return absl::Now() - begin;
}

absl::StatusOr<ApplyResult> ShardedVariableStore::Apply() {
  const bool sync = mode_ == runtime::SyncMode::kSync;
  runtime::TransferResult xfer;
  const absl::Status pushed = sharded_->PushPullAll(global_step_, sync ? global_step_ + 1 : 0,
                                                    grads_, values_, step_timeout_, &xfer);
  if (!pushed.ok()) {
    const bool recoverable = absl::IsUnavailable(pushed) || absl::IsAborted(pushed);
    if (!recoverable || recovery_timeout_ <= absl::ZeroDuration()) {
      return runtime::RemoteFailure(pushed);
    }
    FULCRUM_RETURN_IF_ERROR(Recover(pushed));
    return ApplyResult{};
  }
  Took(xfer);
  return ApplyResult{absl::Microseconds(xfer.max_wait_us)};
}

void ShardedVariableStore::Took(const runtime::TransferResult& xfer) {
  const bool sync = mode_ == runtime::SyncMode::kSync;
  if (!sync && xfer.applied > 0) {
    totals_.staleness_sum += xfer.staleness;
    ++totals_.staleness_steps;
    const int64_t last = TransferTotals::kStalenessBuckets - 1;
    ++totals_.staleness_histogram[static_cast<size_t>(std::min(xfer.staleness, last))];
  }
  totals_.pushes += xfer.applied + xfer.dropped;  // what the PS took (none once it stopped)
  totals_.dropped += xfer.dropped;
  totals_.duplicates += xfer.duplicates;
  totals_.retries += xfer.retries;
  totals_.bytes_sent += xfer.bytes_sent;
  totals_.bytes_received += xfer.bytes_received;
  global_step_ = xfer.global_step;
  stopped_ = xfer.stopped;
  values_fresh_ = false;
}

void ShardedVariableStore::BeginExchange() {
  if (chunks_.active()) return;
  const bool sync = mode_ == runtime::SyncMode::kSync;
  chunks_.Begin(global_step_, sync ? global_step_ + 1 : 0, grads_, values_, step_timeout_);
}

void ShardedVariableStore::GradientsReady(size_t first, size_t count) {
  BeginExchange();
  chunks_.GradientsReady(static_cast<int>(first), static_cast<int>(count));
}

void ShardedVariableStore::SendRest() {
  BeginExchange();
  chunks_.AllGradientsReady();
}

absl::Status ShardedVariableStore::WaitForValues(size_t first, size_t count) {
  return chunks_.WaitForValues(static_cast<int>(first), static_cast<int>(count));
}

absl::StatusOr<ExchangeResult> ShardedVariableStore::FinishExchange() {
  ExchangeResult result;
  if (!chunks_.active()) return result;
  runtime::ChunkExchange::Report report;
  const absl::Status pushed = chunks_.Finish(&report);
  result.first_sent = report.first_sent;
  result.last_done = report.last_done;
  totals_.retries += report.transfer.retries;
  if (!pushed.ok()) {
    const bool recoverable = absl::IsUnavailable(pushed) || absl::IsAborted(pushed);
    if (!recoverable || recovery_timeout_ <= absl::ZeroDuration()) {
      return runtime::RemoteFailure(pushed);
    }
    FULCRUM_RETURN_IF_ERROR(Recover(pushed));
    result.recovered = true;
    return result;
  }
  report.transfer.retries = 0;  // counted above
  Took(report.transfer);
  result.applied.sync_wait = absl::Microseconds(report.transfer.max_wait_us);
  return result;
}

absl::Status ShardedVariableStore::Recover(const absl::Status& cause) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + recovery_timeout_;
  spdlog::warn(
      "{}; this step's gradients are discarded, waiting up to {} (--recovery_timeout) "
      "for the chief to restore the ps tasks (or promote a replica: --replicate_shards)",
      std::string(cause.message()), absl::FormatDuration(recovery_timeout_));
  absl::Status last = cause;
  while (true) {
    if (const int signal = StopSignal(); signal != 0) {
      stop_reason_ = absl::StrCat("interrupted by ", SignalName(signal), " while waiting for a ps");
      return absl::OkStatus();
    }
    if (recovery_check_) {
      FULCRUM_RETURN_IF_ERROR(recovery_check_(&stop_reason_));
      if (!stop_reason_.empty()) return absl::OkStatus();
    }
    runtime::TransferResult xfer;
    const absl::Duration wait = std::min(step_timeout_, absl::Seconds(2));
    last = sharded_->PullAll(0, wait, values_, &xfer);
    if (last.ok()) {
      totals_.bytes_received += xfer.bytes_received;
      totals_.recoveries += 1;
      totals_.pushes_at_recovery = totals_.pushes;
      spdlog::info("the ps tasks answer again after {}: going on from global step {} (was {})",
                   absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))),
                   xfer.global_step, global_step_);
      global_step_ = xfer.global_step;
      stopped_ = xfer.stopped;
      values_fresh_ = true;
      return absl::OkStatus();
    }
    if (!absl::IsUnavailable(last) && !absl::IsAborted(last) && !absl::IsDeadlineExceeded(last)) {
      return runtime::RemoteFailure(last);
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the ps tasks were not restored within ", absl::FormatDuration(recovery_timeout_),
          " (--recovery_timeout); last error: ", last.message()));
    }
    absl::SleepFor(std::min(absl::Milliseconds(500), deadline - absl::Now()));
  }
}

std::string ShardedVariableStore::StopReason() const {
  if (!stop_reason_.empty()) return stop_reason_;
  return stopped_ ? "the ps reported that training ended" : "";
}

}  // namespace fulcrum::worker
