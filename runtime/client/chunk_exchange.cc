#include "runtime/client/chunk_exchange.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace fulcrum::runtime {
namespace {

// Every chunk call carries its own deadline (the timeout plus ShardedVariables' slack), so a
// wait this long past the timeout means a client that never reported: logged, and waited on.
constexpr absl::Duration kReportAfter = absl::Seconds(15);

}  // namespace

ChunkExchange::ChunkExchange(ShardedVariables* sharded, int num_variables) : sharded_(sharded) {
  const int n = sharded_->num_chunks();
  variable_chunks_.resize(static_cast<size_t>(num_variables));
  for (int c = 0; c < n; ++c) {
    chunk_sources_.push_back(sharded_->ChunkSources(c));
    const std::vector<int>& sources = chunk_sources_.back();
    chunk_priority_.push_back(sources.empty() ? std::numeric_limits<int>::max() : sources.front());
    for (const int v : sources) variable_chunks_[static_cast<size_t>(v)].push_back(c);
  }
  MutexLock lock(&mu_);
  variable_ready_.assign(static_cast<size_t>(num_variables), true);
  missing_values_.assign(static_cast<size_t>(num_variables), 0);
  missing_grads_.assign(static_cast<size_t>(n), 0);
  state_.assign(static_cast<size_t>(n), ChunkState::kDone);
  resent_.assign(static_cast<size_t>(n), false);
}

ChunkExchange::~ChunkExchange() {
  MutexLock lock(&mu_);
  while (in_flight_ > 0) changed_.WaitFor(&mu_, kReportAfter);
}

bool ChunkExchange::active() const {
  MutexLock lock(&mu_);
  return active_;
}

void ChunkExchange::Begin(int64_t step, int64_t min_step, std::span<const ops::Tensor> grads,
                          std::span<ops::Tensor> values, absl::Duration timeout) {
  step_ = step;
  min_step_ = min_step;
  grads_ = grads;
  values_ = values;
  timeout_ = timeout;
  MutexLock lock(&mu_);
  active_ = true;
  reads_started_ = false;
  failure_ = absl::OkStatus();
  retries_ = 0;
  first_sent_ = absl::InfiniteFuture();
  last_done_ = absl::InfinitePast();
  std::fill(variable_ready_.begin(), variable_ready_.end(), false);
  for (size_t v = 0; v < variable_chunks_.size(); ++v) {
    missing_values_[v] = static_cast<int>(variable_chunks_[v].size());
  }
  for (size_t c = 0; c < chunk_sources_.size(); ++c) {
    missing_grads_[c] = static_cast<int>(chunk_sources_[c].size());
    state_[c] = ChunkState::kWaiting;
    resent_[c] = false;
  }
}

std::vector<int> ChunkExchange::MarkReady(int first, int count) {
  std::vector<int> ready;
  const int end = std::min(first + count, static_cast<int>(variable_ready_.size()));
  for (int v = std::max(first, 0); v < end; ++v) {
    if (variable_ready_[static_cast<size_t>(v)]) continue;
    variable_ready_[static_cast<size_t>(v)] = true;
    for (const int c : variable_chunks_[static_cast<size_t>(v)]) {
      if (--missing_grads_[static_cast<size_t>(c)] == 0) ready.push_back(c);
    }
  }
  // Chunks that became ready together go in the order the next forward pass needs them.
  std::sort(ready.begin(), ready.end(), [this](int a, int b) {
    const int pa = chunk_priority_[static_cast<size_t>(a)];
    const int pb = chunk_priority_[static_cast<size_t>(b)];
    return pa != pb ? pa < pb : a < b;
  });
  for (const int c : ready) state_[static_cast<size_t>(c)] = ChunkState::kInFlight;
  in_flight_ += static_cast<int>(ready.size());
  if (!ready.empty() && first_sent_ == absl::InfiniteFuture()) first_sent_ = absl::Now();
  return ready;
}

void ChunkExchange::GradientsReady(int first, int count) {
  std::vector<int> ready;
  {
    MutexLock lock(&mu_);
    if (!active_) return;
    ready = MarkReady(first, count);
  }
  // Outside the lock: a client may call back inline.
  for (const int c : ready) Send(c);
}

void ChunkExchange::AllGradientsReady() {
  GradientsReady(0, static_cast<int>(variable_chunks_.size()));
  // Chunks of no variable (none in practice: every segment belongs to one) go too.
  std::vector<int> rest;
  {
    MutexLock lock(&mu_);
    if (!active_) return;
    for (size_t c = 0; c < state_.size(); ++c) {
      if (state_[c] != ChunkState::kWaiting) continue;
      state_[c] = ChunkState::kInFlight;
      ++in_flight_;
      rest.push_back(static_cast<int>(c));
    }
    if (!rest.empty() && first_sent_ == absl::InfiniteFuture()) first_sent_ = absl::Now();
  }
  for (const int c : rest) Send(c);
}

void ChunkExchange::Send(int c) {
  sharded_->StartChunkPushPull(
      c, step_, min_step_, grads_, values_, timeout_,
      [this, c](absl::Status s) { OnReply(c, std::move(s)); }, !separate_reads_);
}

void ChunkExchange::Ended(size_t c, absl::Status status) {
  if (status.ok()) {
    state_[c] = ChunkState::kDone;
    for (const int v : chunk_sources_[c]) --missing_values_[static_cast<size_t>(v)];
  } else {
    state_[c] = ChunkState::kFailed;
    if (failure_.ok()) failure_ = std::move(status);
  }
  last_done_ = absl::Now();
  --in_flight_;
  changed_.SignalAll();
}

void ChunkExchange::OnReply(int c, absl::Status status) {
  const size_t i = static_cast<size_t>(c);
  bool read_now = false;
  {
    MutexLock lock(&mu_);
    if (!status.ok() && ShardedVariables::Retryable(status) && !resent_[i]) {
      // Once, with the same request id: the PS applies the push at most once.
      resent_[i] = true;
      ++retries_;
    } else if (status.ok() && separate_reads_) {
      // The push is applied; the values are read when the next step begins.
      read_now = reads_started_;
      state_[i] = read_now ? ChunkState::kReading : ChunkState::kPushed;
      if (!read_now) {
        --in_flight_;
        changed_.SignalAll();
        return;
      }
    } else {
      Ended(i, std::move(status));
      return;
    }
  }
  if (read_now) {
    Read(c);  // stays counted in in_flight_
    return;
  }
  sharded_->ResendChunkPushPull(c, values_, timeout_,
                                [this, c](absl::Status s) { OnReply(c, std::move(s)); });
}

void ChunkExchange::StartReads() {
  if (!separate_reads_) return;
  std::vector<int> now;
  {
    MutexLock lock(&mu_);
    if (!active_ || reads_started_) return;
    reads_started_ = true;
    for (size_t c = 0; c < state_.size(); ++c) {
      if (state_[c] != ChunkState::kPushed) continue;
      state_[c] = ChunkState::kReading;
      ++in_flight_;
      now.push_back(static_cast<int>(c));
    }
  }
  // The first layers' chunks first: the forward pass needs them first.
  std::sort(now.begin(), now.end(), [this](int a, int b) {
    return chunk_priority_[static_cast<size_t>(a)] < chunk_priority_[static_cast<size_t>(b)];
  });
  for (const int c : now) Read(c);
}

void ChunkExchange::Read(int c) {
  sharded_->StartChunkPull(c, values_, timeout_,
                           [this, c](absl::Status s) { OnRead(c, std::move(s)); });
}

void ChunkExchange::OnRead(int c, absl::Status status) {
  const size_t i = static_cast<size_t>(c);
  {
    MutexLock lock(&mu_);
    if (status.ok() || !ShardedVariables::Retryable(status) || resent_[i]) {
      Ended(i, std::move(status));
      return;
    }
    resent_[i] = true;  // a pull is re-sent once too (it changes nothing on the PS)
    ++retries_;
  }
  Read(c);
}

absl::Status ChunkExchange::WaitForValues(int first, int count) {
  StartReads();  // separate reads: asking for values is where the next step begins
  MutexLock lock(&mu_);
  const int end = std::min(first + count, static_cast<int>(missing_values_.size()));
  for (int v = std::max(first, 0); v < end; ++v) {
    while (active_ && failure_.ok() && missing_values_[static_cast<size_t>(v)] > 0) {
      if (!changed_.WaitFor(&mu_, timeout_ + kReportAfter)) {
        spdlog::error("the values of variable {} are past their deadline; still waiting", v);
      }
    }
    if (active_ && !failure_.ok()) return failure_;
  }
  return absl::OkStatus();
}

absl::Status ChunkExchange::Finish(Report* report) {
  *report = Report();
  // Separate reads: values that no step asked for yet are read now, so that the exchange
  // always ends with every value read after this worker's own push.
  StartReads();
  MutexLock lock(&mu_);
  if (!active_) return absl::OkStatus();
  while (in_flight_ > 0) {
    if (!changed_.WaitFor(&mu_, timeout_ + kReportAfter)) {
      spdlog::error("a chunk's push-pull is past its deadline and has not reported; still waiting");
    }
  }
  active_ = false;
  report->first_sent = first_sent_;
  report->last_done = last_done_;
  report->transfer.retries = retries_;
  if (!failure_.ok()) return failure_;
  const auto unsent = std::count(state_.begin(), state_.end(), ChunkState::kWaiting);
  if (unsent > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(unsent, " chunk(s) of step ", step_, " were never sent"));
  }
  report->transfer.global_step = std::numeric_limits<int64_t>::max();
  for (size_t c = 0; c < state_.size(); ++c) {
    sharded_->AddChunkResult(static_cast<int>(c), &report->transfer);
  }
  if (state_.empty()) report->transfer.global_step = 0;
  return absl::OkStatus();
}

}  // namespace fulcrum::runtime
