#include "worker/sharded_variable_store.h"

#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "runtime/grpc_util.h"

namespace fulcrum::worker {

ShardedVariableStore::ShardedVariableStore(runtime::ShardedVariables* sharded,
                                           std::span<const ops::Shape> shapes,
                                           runtime::SyncMode mode, absl::Duration step_timeout)
    : sharded_(sharded), mode_(mode), step_timeout_(step_timeout) {
  for (const ops::Shape& shape : shapes) {
    values_.push_back(ops::Tensor::Zeros(shape));
    grads_.push_back(ops::Tensor::Zeros(shape));
  }
}

absl::StatusOr<absl::Duration> ShardedVariableStore::Start() {
  const absl::Time begin = absl::Now();
  runtime::TransferResult xfer;
  FULCRUM_RETURN_IF_ERROR(
      runtime::RemoteFailure(sharded_->PullAll(0, step_timeout_, values_, &xfer)));
  totals_.bytes_received += xfer.bytes_received;
  global_step_ = xfer.global_step;
  stopped_ = xfer.stopped;
  return absl::Now() - begin;
}

absl::StatusOr<ApplyResult> ShardedVariableStore::Apply() {
  const bool sync = mode_ == runtime::SyncMode::kSync;
  runtime::TransferResult xfer;
  FULCRUM_RETURN_IF_ERROR(runtime::RemoteFailure(sharded_->PushPullAll(
      global_step_, sync ? global_step_ + 1 : 0, grads_, values_, step_timeout_, &xfer)));
  totals_.pushes += xfer.applied + xfer.dropped;  // what the PS took (none once it stopped)
  totals_.dropped += xfer.dropped;
  totals_.duplicates += xfer.duplicates;
  totals_.retries += xfer.retries;
  totals_.bytes_sent += xfer.bytes_sent;
  totals_.bytes_received += xfer.bytes_received;
  global_step_ = xfer.global_step;
  stopped_ = xfer.stopped;
  return ApplyResult{absl::Microseconds(xfer.max_wait_us)};
}

std::string ShardedVariableStore::StopReason() const {
  return stopped_ ? "the ps reported that training ended" : "";
}

}  // namespace fulcrum::worker
