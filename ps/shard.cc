#include "ps/shard.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/malloc.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "ops/initializer.h"
#include "ps/request_checks.h"
#include "runtime/cluster/shard_defs.h"
#include "runtime/frames/proto_convert.h"
#include "runtime/frames/tensor_coding.h"
#include "runtime/frames/wire_frame.h"
#include "spdlog/spdlog.h"
#include "transport/limits.h"

namespace fulcrum::ps {
namespace {

using google::protobuf::RepeatedPtrField;

// Elements [offset, offset + count) of a tensor as a rank-1 view.
ops::Tensor SegmentView(ops::Tensor& t, const runtime::Segment& seg) {
  return ops::Tensor::View(t.data() + seg.offset, ops::Shape({seg.count}));
}

std::span<const float> SegmentSpan(const ops::Tensor& t, const runtime::Segment& seg) {
  return {t.data() + seg.offset, static_cast<size_t>(seg.count)};
}

}  // namespace

Shard::Shard(int task_index)
    : task_index_(task_index),
      name_(absl::StrCat("ps:", task_index)),
      last_contact_ns_(absl::ToUnixNanos(absl::Now())) {}

Shard::~Shard() = default;

void Shard::Touch() {
  last_contact_ns_.store(absl::ToUnixNanos(absl::Now()), std::memory_order_relaxed);
}

absl::Time Shard::last_contact() const {
  return absl::FromUnixNanos(last_contact_ns_.load(std::memory_order_relaxed));
}

std::shared_ptr<Shard::Store> Shard::store() const {
  MutexLock lock(&store_mu_);
  return store_;
}

bool Shard::initialized() const { return store() != nullptr; }

std::string Shard::run_dir() const {
  const std::shared_ptr<Store> s = store();
  return s ? s->definition.run_dir() : std::string();
}

absl::StatusOr<std::shared_ptr<Shard::Store>> Shard::GetStore() const {
  std::shared_ptr<Store> s = store();
  if (s == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, " has no variables yet (the chief creates them)"));
  }
  return s;
}

absl::StatusOr<std::shared_ptr<Shard::Store>> Shard::GetDataStore(const char* method,
                                                                  const std::string& task) const {
  std::shared_ptr<Store> s = store();
  if (s == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        name_, ": ", method, " from ", task,
        ": ps has no variables yet (the chief creates them, or restores them after a restart)"));
  }
  if (s->held.load(std::memory_order_acquire)) {
    return absl::UnavailableError(
        absl::StrCat(name_, ": ", method, " from ", task,
                     ": ps restarted and waits for the chief to restore it from a checkpoint"));
  }
  return s;
}

int64_t Shard::GlobalStep(const Store& store) const {
  int64_t step = std::numeric_limits<int64_t>::max();
  for (const auto& chunk : store.chunks) {
    step = std::min(step, chunk->published_step.load(std::memory_order_acquire));
  }
  return store.chunks.empty() ? 0 : step;
}

// ---------------------------------------------------------------------------------------
// CreateVariables

// ---------------------------------------------------------------------------------------
// Pull

std::string Shard::ChunkWaitMessage(const Store& store, const ChunkState& chunk, int chunk_id,
                                    int64_t min_step, absl::Duration waited) const {
  std::string message = absl::StrCat(
      name_, ": waited ", absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(1))),
      " for chunk ", chunk_id, " to reach step ", min_step, "; it is at step ", chunk.step);
  if (store.sync) {
    absl::StrAppend(&message, " with ", chunk.count, " of ", store.replicas, " gradients");
  }
  return message;
}

size_t FrameSink::Write(int chunk, int64_t step, pb::WireDtype dtype,
                        std::span<const std::span<const float>> parts) {
  runtime::OutChunk& c = out_->emplace_back();
  c.meta.set_chunk(chunk);
  c.meta.set_step(step);
  runtime::CopyPayload(parts, dtype, &c);
  return c.bytes;
}

absl::Status Shard::PullChunks(Store& store, const std::vector<int>& chunk_ids, int64_t min_step,
                               int64_t timeout_ms, absl::Time deadline, pb::WireDtype dtype,
                               ValueSink& sink, int64_t* waited_us) {
  const absl::Time start = absl::Now();
  const absl::Duration wait = timeout_ms > 0 ? absl::Milliseconds(timeout_ms) : kDefaultPullWait;
  deadline = std::min(deadline, start + wait);
  // A restore from here on replaces the state whose step the request waits for.
  const int64_t restores = restores_.load(std::memory_order_acquire);
  auto restored = [&] { return restores_.load(std::memory_order_acquire) != restores; };
  std::vector<std::span<const float>> parts;
  for (const int id : chunk_ids) {
    ChunkState& chunk = *store.chunks[static_cast<size_t>(id)];
    MutexLock lock(&chunk.mu);
    if (min_step > 0) {
      const auto wait_start = std::chrono::steady_clock::now();
      bool reached = true;
      while (chunk.step < min_step && !stopped_.load(std::memory_order_acquire) && !restored() &&
             !left()) {
        if (!chunk.advanced.WaitUntil(&chunk.mu, deadline)) {
          reached = chunk.step >= min_step || stopped_.load(std::memory_order_acquire);
          break;
        }
      }
      const int64_t waited_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - wait_start)
                                    .count();
      counters_.wait_ns.fetch_add(waited_ns, std::memory_order_relaxed);
      *waited_us += waited_ns / 1000;
      if (left()) return LeftError("Pull");
      if (restored()) {
        return absl::AbortedError(absl::StrCat(
            name_, ": restored from a checkpoint (chunk ", id, " now at step ", chunk.step,
            ") while this request waited for step ", min_step, ": pull again"));
      }
      if (!reached) {
        counters_.pull_wait_timeouts.fetch_add(1, std::memory_order_relaxed);
        return absl::DeadlineExceededError(
            ChunkWaitMessage(store, chunk, id, min_step, absl::Now() - start));
      }
    }
    parts.clear();
    for (const runtime::Segment& seg : chunk.plan.segments) {
      parts.push_back(SegmentSpan(store.variables[static_cast<size_t>(seg.variable)].value, seg));
    }
    const size_t bytes = sink.Write(id, chunk.step, dtype, parts);
    counters_.pulls.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_pulled.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckTask(const std::string& task, const char* method) const {
  if (known_tasks_.empty() || known_tasks_.contains(task)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name_, ": ", method, " from '", absl::CEscape(task.substr(0, 64)),
                   "': not a chief or worker task of the cluster spec; refused"));
}

class Shard::WaitSlot {
 public:
  WaitSlot(Shard* shard, std::string task) : shard_(shard), task_(std::move(task)) {}
  ~WaitSlot() {
    MutexLock lock(&shard_->waiting_mu_);
    auto it = shard_->waiting_.find(task_);
    if (it != shard_->waiting_.end() && --it->second <= 0) shard_->waiting_.erase(it);
  }
  WaitSlot(const WaitSlot&) = delete;
  WaitSlot& operator=(const WaitSlot&) = delete;

 private:
  Shard* shard_;
  std::string task_;
};

absl::StatusOr<std::unique_ptr<Shard::WaitSlot>> Shard::TakeWaitSlot(const Store& store,
                                                                     const std::string& task,
                                                                     const char* method) {
  // A worker waits on at most one Pull or PushPull per chunk at a time; twice that, plus
  // slack for retries, is generous for it and still a bound for anyone else.
  const int limit = 2 * static_cast<int>(store.chunks.size()) + kWaitingSlack;
  MutexLock lock(&waiting_mu_);
  int& count = waiting_[task];
  if (count >= limit) {
    if (count == 0) waiting_.erase(task);
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": ", method, " from ", task, ": ", count,
                     " of its requests already wait for a step (at most ", limit, "); refused"));
  }
  ++count;
  return std::make_unique<WaitSlot>(this, task);
}

absl::Status Shard::Pull(const pb::PullRequest& request, ValueSink& sink,
                         pb::PullResponse* response, absl::Time deadline) {
  if (runtime::WireElementBytes(request.reply_dtype()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": Pull from ", request.task(),
                                                   ": unknown reply wire dtype ",
                                                   static_cast<int>(request.reply_dtype())));
  }
  Touch();
  if (left()) return LeftError("Pull");
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetDataStore("Pull", request.task()));
  std::unique_ptr<WaitSlot> slot;
  if (request.min_step() > 0 || request.ssp_wait()) {
    FULCRUM_ASSIGN_OR_RETURN(slot, TakeWaitSlot(*store, request.task(), "Pull"));
  }
  const int num_chunks = static_cast<int>(store->chunks.size());
  std::vector<int> ids(request.chunks().begin(), request.chunks().end());
  if (ids.empty()) {
    for (int i = 0; i < num_chunks; ++i) ids.push_back(i);
  } else {
    thread_local std::vector<bool> seen;
    FULCRUM_RETURN_IF_ERROR(CheckChunkIds(ids, num_chunks, &seen, name_, "Pull", request.task()));
  }
  int64_t waited_us = 0;
  if (request.ssp_wait()) {  // ssp: first wait for the workers behind
    FULCRUM_RETURN_IF_ERROR(
        SspWait(*store, request.task(), ids, request.timeout_ms(), deadline, &waited_us));
  }
  FULCRUM_RETURN_IF_ERROR(PullChunks(*store, ids, request.min_step(), request.timeout_ms(),
                                     deadline, request.reply_dtype(), sink, &waited_us));
  response->set_wait_us(waited_us);
  response->set_global_step(GlobalStep(*store));
  response->set_stopped(stopped());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Push

bool Shard::SeenBefore(const std::string& task, uint64_t request_id) {
  const std::pair<uint64_t, uint64_t> key(NameHash(task), request_id);  // no allocation
  MutexLock lock(&dedup_mu_);
  if (!dedup_seen_.insert(key).second) return true;
  dedup_order_.push_back(key);
  if (dedup_order_.size() > kDedupCapacity) {
    dedup_seen_.erase(dedup_order_.front());
    dedup_order_.pop_front();
  }
  return false;
}

absl::Status Shard::ApplyToChunk(Store& store, ChunkState& chunk, std::span<const float> grad,
                                 float lr_scale, float grad_scale) {
  // --replicate_shards: the backup applies the same while this ps does.
  const auto forward_start = std::chrono::steady_clock::now();
  const std::unique_ptr<Replicator::Pending> forward =
      replicating_.load(std::memory_order_acquire) ? StartForward(chunk, grad, lr_scale, grad_scale)
                                                   : nullptr;
  const auto apply_start = forward == nullptr ? forward_start : std::chrono::steady_clock::now();
  const int64_t t = chunk.updates + 1;
  ops::OptimizerConfig scaled;
  const ops::OptimizerConfig* optimizer = &store.optimizer;
  if (lr_scale != 1.0f) {
    scaled = store.optimizer;
    scaled.learning_rate *= lr_scale;
    optimizer = &scaled;
  }
  std::vector<ops::Tensor> slots;
  for (const runtime::Segment& seg : chunk.plan.segments) {
    Variable& var = store.variables[static_cast<size_t>(seg.variable)];
    ops::Tensor value = SegmentView(var.value, seg);
    slots.clear();
    for (ops::Tensor& slot : var.slots) slots.push_back(SegmentView(slot, seg));
    // The gradient view is only read; Tensor::View takes a mutable pointer.
    const ops::Tensor g =
        ops::Tensor::View(const_cast<float*>(grad.data()), ops::Shape({seg.count}));
    grad = grad.subspan(static_cast<size_t>(seg.count));
    FULCRUM_RETURN_IF_ERROR(ops::ApplyGradient(*optimizer, t, g, &value, slots, grad_scale));
  }
  counters_.apply_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - apply_start)
                                   .count(),
                               std::memory_order_relaxed);
  if (forward != nullptr) {
    FULCRUM_RETURN_IF_ERROR(FinishForward(
        *forward,
        std::chrono::duration_cast<std::chrono::nanoseconds>(forward_start.time_since_epoch())
            .count()));
  }
  chunk.updates = t;
  ++chunk.step;
  chunk.published_step.store(chunk.step, std::memory_order_release);
  chunk.advanced.SignalAll();
  if (snapshot_pending_.load(std::memory_order_acquire)) MaybeCapture(store, chunk);
  return absl::OkStatus();
}

void Shard::DropPending(ChunkState& chunk) {
  counters_.pushes_dropped.fetch_add(chunk.count, std::memory_order_relaxed);
  chunk.count = 0;  // the next step's first gradient overwrites accum
}

absl::Status Shard::PushChunk(Store& store, ChunkState& chunk, int chunk_id,
                              std::span<const float> grad, int64_t step, int64_t read_step,
                              int wire_bytes, int* applied, int* dropped, int64_t* staleness) {
  counters_.pushes_received.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes_pushed.fetch_add(static_cast<int64_t>(grad.size()) * wire_bytes,
                                   std::memory_order_relaxed);
  if (!store.sync) {
    // The updates others applied to this chunk since the gradient's values were read (none
    // for a read past the chunk's step: a ps restored to an older checkpoint).
    const int64_t stale = std::max<int64_t>(0, chunk.step - read_step);
    *staleness = std::max(*staleness, stale);
    const float lr_scale = store.staleness_aware_lr ? 1.0f / static_cast<float>(1 + stale) : 1.0f;
    FULCRUM_RETURN_IF_ERROR(ApplyToChunk(store, chunk, grad, lr_scale));
    ++*applied;
    counters_.pushes_applied.fetch_add(1, std::memory_order_relaxed);
    if (chunk_id == 0) counters_.steps_applied.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  // Computed for a step already applied; or (step > chunk.step) for a state a restore replaced
  // after ValidatePush looked: steps only grow otherwise.
  if (step != chunk.step) {
    ++*dropped;
    counters_.pushes_dropped.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  // The step's first gradient is copied in, the others added; the mean is taken inside the
  // apply (grad_scale 1/n), so the sum is read once more, not twice.
  if (chunk.count == 0) {
    std::copy(grad.begin(), grad.end(), chunk.accum.begin());
  } else {
    std::transform(chunk.accum.begin(), chunk.accum.end(), grad.begin(), chunk.accum.begin(),
                   [](float a, float b) { return a + b; });
  }
  ++chunk.count;
  ++*applied;
  if (chunk.count == store.replicas) {
    chunk.count = 0;
    FULCRUM_RETURN_IF_ERROR(ApplyToChunk(store, chunk, chunk.accum, 1.0f,
                                         1.0f / static_cast<float>(store.replicas)));
    counters_.pushes_applied.fetch_add(store.replicas, std::memory_order_relaxed);
    if (chunk_id == 0) counters_.steps_applied.fetch_add(1, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

absl::Status Shard::Push(const pb::PushRequest& request,
                         std::span<const std::span<const float>> grads,
                         pb::PushResponse* response) {
  Touch();
  if (left()) return LeftError("Push");
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetDataStore("Push", request.task()));
  FULCRUM_ASSIGN_OR_RETURN(const int ssp_worker, SspWorker(*store, request.task(), "Push"));
  response->Clear();
  if (stopped()) {
    response->set_stopped(true);
    response->set_global_step(GlobalStep(*store));
    return absl::OkStatus();
  }
  bool nonfinite = false;
  FULCRUM_RETURN_IF_ERROR(ValidatePush(*store, request, grads, &nonfinite));
  if (nonfinite) {  // --nonfinite=skip: counted in ValidatePush, nothing applied
    if (ssp_worker >= 0) SspAdvance(*store, ssp_worker, request);  // ssp: still a step
    response->set_applied(0);
    response->set_dropped(request.gradients_size());
    response->set_global_step(GlobalStep(*store));
    response->set_stopped(stopped());
    return absl::OkStatus();
  }
  if (request.request_id() != 0 && SeenBefore(request.task(), request.request_id())) {
    counters_.pushes_duplicate.fetch_add(request.gradients_size(), std::memory_order_relaxed);
    response->set_duplicate(true);
    response->set_global_step(GlobalStep(*store));
    response->set_stopped(stopped());
    return absl::OkStatus();
  }
  int applied = 0;
  int dropped = 0;
  int64_t staleness = 0;
  for (int i = 0; i < request.gradients_size(); ++i) {
    const int id = request.gradients(i).chunk();
    ChunkState& chunk = *store->chunks[static_cast<size_t>(id)];
    absl::Status pushed;
    {
      MutexLock lock(&chunk.mu);
      // Stop drains each chunk under its lock after setting stopped_: nothing lands after it.
      if (stopped()) break;
      pushed = PushChunk(*store, chunk, id, grads[static_cast<size_t>(i)], request.step(),
                         request.gradients(i).step(),
                         runtime::WireElementBytes(request.gradients(i).wire_dtype()), &applied,
                         &dropped, &staleness);
    }
    if (!pushed.ok()) {
      // Its replica was promoted in its place (ps/shard_replica.cc): the shard leaves now that
      // it holds no chunk lock.
      if (fenced_.load(std::memory_order_acquire)) Leave();
      return pushed;
    }
  }
  if (ssp_worker >= 0) SspAdvance(*store, ssp_worker, request);  // ssp: the worker's clock
  if (store->straggler != nullptr && applied > 0) {              // sync: when its gradients came
    store->straggler->OnAccepted(request.task(), request.step(), applied, absl::Now());
  }
  response->set_applied(applied);
  response->set_dropped(dropped);
  response->set_staleness(staleness);
  response->set_global_step(GlobalStep(*store));
  response->set_stopped(stopped());
  return absl::OkStatus();
}

absl::Status Shard::PushPull(const pb::PushRequest& request,
                             std::span<const std::span<const float>> grads, ValueSink& sink,
                             pb::PushResponse* response, absl::Time deadline) {
  if (runtime::WireElementBytes(request.reply_dtype()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": PushPull from ", request.task(),
                                                   ": unknown reply wire dtype ",
                                                   static_cast<int>(request.reply_dtype())));
  }
  if (request.no_values() && request.min_step() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": PushPull from ", request.task(), ": no_values with min_step ",
                     request.min_step(), " (a push-pull that waits for a step returns values)"));
  }
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetDataStore("PushPull", request.task()));
  // The slot is taken before the push, so a refused request applies nothing.
  std::unique_ptr<WaitSlot> slot;
  if (request.min_step() > 0 || store->ssp != nullptr) {
    FULCRUM_ASSIGN_OR_RETURN(slot, TakeWaitSlot(*store, request.task(), "PushPull"));
  }
  FULCRUM_RETURN_IF_ERROR(Push(request, grads, response));
  std::vector<int> ids;
  for (const pb::ChunkData& g : request.gradients()) ids.push_back(g.chunk());
  int64_t waited_us = 0;
  // ssp: held while this worker is too far ahead (a no-op in the other modes).
  FULCRUM_RETURN_IF_ERROR(
      SspWait(*store, request.task(), ids, request.timeout_ms(), deadline, &waited_us));
  if (!request.no_values()) {
    FULCRUM_RETURN_IF_ERROR(PullChunks(*store, ids, request.min_step(), request.timeout_ms(),
                                       deadline, request.reply_dtype(), sink, &waited_us));
  }
  response->set_wait_us(waited_us);
  response->set_global_step(GlobalStep(*store));
  response->set_stopped(stopped());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Stop (the figures, Stats and LocalStats, are in ps/shard_stats.cc)

void Shard::Stop(const std::string& reason) {
  Touch();
  if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
  spdlog::info("{} stopping: {}", name_, reason.empty() ? "no reason given" : reason);
  const std::shared_ptr<Store> s = store();
  if (s == nullptr) return;
  for (auto& chunk : s->chunks) {
    // Under the lock, so a pull between checking stopped_ and sleeping cannot miss it.
    MutexLock lock(&chunk->mu);
    // An unfinished sync step will never be applied: its gradients count as dropped.
    DropPending(*chunk);
    chunk->advanced.SignalAll();
  }
  if (s->ssp != nullptr) s->ssp->Stop();  // workers held for the slowest go on
  // A save waiting for a step that will never come gives up.
  MutexLock lock(&snapshot_mu_);
  snapshot_taken_.SignalAll();
}

int64_t Shard::pending_gradients() const {
  const std::shared_ptr<Store> s = store();
  if (s == nullptr) return 0;
  int64_t pending = 0;
  for (auto& chunk : s->chunks) {
    MutexLock lock(&chunk->mu);
    pending += chunk->count;
  }
  return pending;
}

absl::Status Shard::Ping(const pb::PingRequest& request, pb::PingResponse* response) {
  Touch();
  if (request.reply_bytes() < 0 || request.reply_bytes() > kMaxPingReply) {
    return absl::InvalidArgumentError(absl::StrCat(name_,
                                                   ": Ping reply_bytes=", request.reply_bytes(),
                                                   ": must be between 0 and ", kMaxPingReply));
  }
  // Large replies are built a few at a time, so that a burst of them cannot take the ps's
  // memory (8 x 256 MiB took 4.2 GB before this limit).
  const bool large = request.reply_bytes() > kLargePing;
  if (large && large_pings_.fetch_add(1, std::memory_order_acq_rel) >= kMaxLargePings) {
    large_pings_.fetch_sub(1, std::memory_order_acq_rel);
    return absl::ResourceExhaustedError(absl::StrCat(name_, ": Ping: ", kMaxLargePings,
                                                     " replies of more than ", kLargePing,
                                                     " bytes are already being built; refused"));
  }
  response->mutable_payload()->assign(static_cast<size_t>(request.reply_bytes()), '\0');
  response->set_task_index(task_index_);
  if (large) large_pings_.fetch_sub(1, std::memory_order_acq_rel);
  return absl::OkStatus();
}
}  // namespace fulcrum::ps
