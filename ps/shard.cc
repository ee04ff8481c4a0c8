#include "ps/shard.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "ops/initializer.h"
#include "runtime/grpc_util.h"
#include "runtime/proto_convert.h"
#include "runtime/tensor_coding.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ps {
namespace {

using google::protobuf::RepeatedPtrField;

// The shape of a def's rows: [row_end - row_begin, full_shape[1:]...].
ops::Shape SliceShape(const pb::VariableDef& def) {
  std::vector<int64_t> dims(def.full_shape().begin(), def.full_shape().end());
  dims[0] = def.row_end() - def.row_begin();
  return ops::Shape(std::move(dims));
}

// Elements [offset, offset + count) of a tensor as a rank-1 view.
ops::Tensor SegmentView(ops::Tensor& t, const runtime::Segment& seg) {
  return ops::Tensor::View(t.data() + seg.offset, ops::Shape({seg.count}));
}

std::span<const float> SegmentSpan(const ops::Tensor& t, const runtime::Segment& seg) {
  return {t.data() + seg.offset, static_cast<size_t>(seg.count)};
}

const char* ModeName(pb::Mode mode) { return mode == pb::MODE_SYNC ? "sync" : "async"; }

// Writes `bytes` to path.tmp, fsyncs it, renames it over `path` and fsyncs the folder, so
// the file is replaced whole or not at all, even across a crash.
absl::Status WriteFileDurably(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string error = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::UnavailableError(absl::StrCat(tmp, ": write failed: ", error));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string error = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(tmp, ": fsync failed: ", error));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": rename failed: ", error));
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const char* dir = parent.empty() ? "." : parent.c_str();
  if (const int dfd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
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
  std::lock_guard lock(store_mu_);
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

int64_t Shard::GlobalStep(const Store& store) const {
  int64_t step = std::numeric_limits<int64_t>::max();
  for (const auto& chunk : store.chunks) {
    step = std::min(step, chunk->published_step.load(std::memory_order_acquire));
  }
  return store.chunks.empty() ? 0 : step;
}

// ---------------------------------------------------------------------------------------
// CreateVariables

absl::StatusOr<std::shared_ptr<Shard::Store>> Shard::BuildStore(
    const pb::CreateVariablesRequest& request) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": CreateVariables: ", parts...));
  };
  if (request.task_index() != task_index_) {
    return bad("the request is for ps:", request.task_index(), " but this server is ", name_);
  }
  if (request.variables().empty()) return bad("no variables");
  if (request.chunk_bytes() <= 0) {
    return bad("chunk_bytes=", request.chunk_bytes(), ": must be positive");
  }
  auto store = std::make_shared<Store>();
  store->definition = request;
  switch (request.mode()) {
    case pb::MODE_ASYNC:
      break;
    case pb::MODE_SYNC:
      if (request.replicas_to_aggregate() < 1) {
        return bad("replicas_to_aggregate=", request.replicas_to_aggregate(),
                   ": sync mode needs at least 1");
      }
      store->sync = true;
      store->replicas = request.replicas_to_aggregate();
      break;
    default:
      return bad("mode ", static_cast<int>(request.mode()), ": expected async or sync");
  }
  auto optimizer = runtime::OptimizerFromProto(request.optimizer());
  if (!optimizer.ok()) return bad(optimizer.status().message());
  store->optimizer = *optimizer;
  const size_t num_slots = ops::SlotNames(store->optimizer.kind).size();

  absl::flat_hash_set<std::string> names;
  std::vector<int64_t> elements;
  for (const pb::VariableDef& def : request.variables()) {
    const std::string what = absl::StrCat("variable '", def.name(), "'");
    if (def.name().empty()) return bad("a variable has no name");
    if (!names.insert(def.name()).second) return bad(what, " is defined twice");
    if (def.full_shape().empty()) return bad(what, ": full_shape has no dimensions");
    std::vector<int64_t> full_dims(def.full_shape().begin(), def.full_shape().end());
    const ops::Shape full(full_dims);
    if (absl::Status s = ops::ValidateShape(full, what); !s.ok()) return bad(s.message());
    if (def.row_begin() < 0 || def.row_begin() >= def.row_end() || def.row_end() > full.dim(0)) {
      return bad(what, ": rows [", def.row_begin(), ", ", def.row_end(),
                 ") are not a non-empty range inside the ", full.dim(0), " rows of ",
                 full.ToString());
    }
    auto init = runtime::InitializerFromProto(def.initializer());
    if (!init.ok()) return bad(what, ": ", init.status().message());

    // The whole source variable, then its rows: the bits single-process training has.
    ops::Tensor whole = ops::Tensor::Zeros(full);
    if (absl::Status s = ops::Initialize(*init, def.seed(), &whole); !s.ok()) {
      return bad(what, ": ", s.message());
    }
    Variable var;
    var.def = def;
    var.value = ops::Tensor::Zeros(SliceShape(def));
    const ops::Tensor rows = whole.Rows(def.row_begin(), def.row_end());
    std::copy(rows.flat().begin(), rows.flat().end(), var.value.flat().begin());
    for (size_t s = 0; s < num_slots; ++s) {
      var.slots.push_back(ops::Tensor::Filled(
          var.value.shape(), ops::SlotInitialValue(store->optimizer, static_cast<int>(s))));
    }
    elements.push_back(var.value.num_elements());
    store->bytes_held += static_cast<int64_t>(var.value.bytes());
    store->variables.push_back(std::move(var));
  }
  for (runtime::Chunk& plan : runtime::PlanChunks(elements, request.chunk_bytes())) {
    auto chunk = std::make_unique<ChunkState>();
    if (store->sync) chunk->accum.assign(static_cast<size_t>(plan.num_elements), 0.0f);
    chunk->plan = std::move(plan);
    store->chunks.push_back(std::move(chunk));
  }
  return store;
}

absl::Status Shard::CreateVariables(const pb::CreateVariablesRequest& request,
                                    pb::CreateVariablesResponse* response) {
  Touch();
  std::lock_guard lock(store_mu_);
  if (store_ != nullptr) {
    const pb::CreateVariablesRequest& have = store_->definition;
    if (have.run_id() != request.run_id() ||
        have.SerializeAsString() != request.SerializeAsString()) {
      return absl::FailedPreconditionError(absl::StrCat(
          name_, " already holds the variables of run '", have.run_id(),
          "'; a different CreateVariables (run '", request.run_id(), "') cannot replace them"));
    }
  } else {
    FULCRUM_ASSIGN_OR_RETURN(store_, BuildStore(request));
    spdlog::info("{} holds {} variables, {} bytes, in {} chunks ({} mode, optimizer {})", name_,
                 store_->variables.size(), store_->bytes_held, store_->chunks.size(),
                 ModeName(request.mode()), ops::OptimizerName(store_->optimizer.kind));
  }
  response->set_bytes_held(store_->bytes_held);
  response->set_num_chunks(static_cast<int32_t>(store_->chunks.size()));
  return absl::OkStatus();
}

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

absl::Status Shard::PullChunks(Store& store, const std::vector<int>& chunk_ids, int64_t min_step,
                               int64_t timeout_ms, absl::Time deadline,
                               RepeatedPtrField<pb::ChunkData>* out, int64_t* waited_us) {
  const absl::Time start = absl::Now();
  const absl::Duration wait = timeout_ms > 0 ? absl::Milliseconds(timeout_ms) : kDefaultPullWait;
  deadline = std::min(deadline, start + wait);
  std::vector<std::span<const float>> parts;
  for (const int id : chunk_ids) {
    ChunkState& chunk = *store.chunks[static_cast<size_t>(id)];
    pb::ChunkData* data = out->Add();
    data->set_chunk(id);
    std::unique_lock lock(chunk.mu);
    if (min_step > 0) {
      const auto steady_deadline =
          std::chrono::steady_clock::now() +
          absl::ToChronoNanoseconds(std::max(deadline - absl::Now(), absl::ZeroDuration()));
      const auto wait_start = std::chrono::steady_clock::now();
      const bool reached = chunk.advanced.wait_until(lock, steady_deadline, [&] {
        return chunk.step >= min_step || stopped_.load(std::memory_order_acquire);
      });
      const int64_t waited_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - wait_start)
                                    .count();
      counters_.wait_ns.fetch_add(waited_ns, std::memory_order_relaxed);
      *waited_us += waited_ns / 1000;
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
    runtime::EncodeFloats(parts, data->mutable_data());
    data->set_step(chunk.step);
    counters_.pulls.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_pulled.fetch_add(static_cast<int64_t>(data->data().size()),
                                     std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

absl::Status Shard::Pull(const pb::PullRequest& request, pb::PullResponse* response,
                         absl::Time deadline) {
  Touch();
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetStore());
  const int num_chunks = static_cast<int>(store->chunks.size());
  std::vector<int> ids;
  if (request.chunks().empty()) {
    for (int i = 0; i < num_chunks; ++i) ids.push_back(i);
  } else {
    for (const int id : request.chunks()) {
      if (id < 0 || id >= num_chunks) {
        return absl::InvalidArgumentError(absl::StrCat(name_, ": Pull from ", request.task(),
                                                       ": chunk ", id, " does not exist (",
                                                       num_chunks, " chunks)"));
      }
      ids.push_back(id);
    }
  }
  response->Clear();
  int64_t waited_us = 0;
  FULCRUM_RETURN_IF_ERROR(PullChunks(*store, ids, request.min_step(), request.timeout_ms(),
                                     deadline, response->mutable_chunks(), &waited_us));
  response->set_wait_us(waited_us);
  response->set_global_step(GlobalStep(*store));
  response->set_stopped(stopped());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Push

bool Shard::SeenBefore(const std::string& task, uint64_t request_id) {
  const std::pair<uint64_t, uint64_t> key(NameHash(task), request_id);  // no allocation
  std::lock_guard lock(dedup_mu_);
  if (!dedup_seen_.insert(key).second) return true;
  dedup_order_.push_back(key);
  if (dedup_order_.size() > kDedupCapacity) {
    dedup_seen_.erase(dedup_order_.front());
    dedup_order_.pop_front();
  }
  return false;
}

absl::Status Shard::ApplyToChunk(Store& store, ChunkState& chunk, std::span<const float> grad) {
  const auto apply_start = std::chrono::steady_clock::now();
  const int64_t t = chunk.updates + 1;
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
    FULCRUM_RETURN_IF_ERROR(ops::ApplyGradient(store.optimizer, t, g, &value, slots));
  }
  counters_.apply_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - apply_start)
                                   .count(),
                               std::memory_order_relaxed);
  chunk.updates = t;
  ++chunk.step;
  chunk.published_step.store(chunk.step, std::memory_order_release);
  chunk.advanced.notify_all();
  return absl::OkStatus();
}

absl::Status Shard::Push(const pb::PushRequest& request, pb::PushResponse* response) {
  Touch();
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetStore());
  response->Clear();
  if (stopped()) {
    response->set_stopped(true);
    response->set_global_step(GlobalStep(*store));
    return absl::OkStatus();
  }
  // Validate the whole request before applying any of it.
  const int num_chunks = static_cast<int>(store->chunks.size());
  std::vector<std::vector<float>> scratch(static_cast<size_t>(request.gradients_size()));
  std::vector<std::span<const float>> grads;
  for (int i = 0; i < request.gradients_size(); ++i) {
    const pb::ChunkData& g = request.gradients(i);
    if (g.chunk() < 0 || g.chunk() >= num_chunks) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": Push from ", request.task(),
                                                     ": chunk ", g.chunk(), " does not exist (",
                                                     num_chunks, " chunks)"));
    }
    const ChunkState& chunk = *store->chunks[static_cast<size_t>(g.chunk())];
    absl::StatusOr<std::span<const float>> floats = runtime::ViewFloats(
        g.data(), chunk.plan.num_elements, &scratch[static_cast<size_t>(i)], "gradient");
    if (!floats.ok()) {  // the label is built only on this path: pushes are hot
      return absl::InvalidArgumentError(absl::StrCat(name_, ": Push from ", request.task(),
                                                     ": chunk ", g.chunk(), " ",
                                                     floats.status().message()));
    }
    grads.push_back(*floats);
  }
  if (store->sync) {
    for (const pb::ChunkData& g : request.gradients()) {
      ChunkState& chunk = *store->chunks[static_cast<size_t>(g.chunk())];
      std::lock_guard lock(chunk.mu);
      if (request.step() > chunk.step) {
        return absl::FailedPreconditionError(
            absl::StrCat(name_, ": Push from ", request.task(), ": gradient for step ",
                         request.step(), " but chunk ", g.chunk(), " is at step ", chunk.step));
      }
    }
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
  for (int i = 0; i < request.gradients_size(); ++i) {
    const int id = request.gradients(i).chunk();
    ChunkState& chunk = *store->chunks[static_cast<size_t>(id)];
    const std::span<const float> grad = grads[static_cast<size_t>(i)];
    std::lock_guard lock(chunk.mu);
    // Stop drains each chunk under its lock after setting stopped_: nothing lands after it.
    if (stopped()) break;
    counters_.pushes_received.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_pushed.fetch_add(static_cast<int64_t>(grad.size_bytes()),
                                     std::memory_order_relaxed);
    if (!store->sync) {
      FULCRUM_RETURN_IF_ERROR(ApplyToChunk(*store, chunk, grad));
      ++applied;
      counters_.pushes_applied.fetch_add(1, std::memory_order_relaxed);
      if (id == 0) counters_.steps_applied.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (request.step() < chunk.step) {  // computed for a step already applied
      ++dropped;
      counters_.pushes_dropped.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // request.step() == chunk.step: the earlier check holds because steps only grow.
    std::transform(chunk.accum.begin(), chunk.accum.end(), grad.begin(), chunk.accum.begin(),
                   [](float a, float b) { return a + b; });
    ++chunk.count;
    ++applied;
    if (chunk.count == store->replicas) {
      const float n = static_cast<float>(store->replicas);
      for (float& a : chunk.accum) a /= n;
      FULCRUM_RETURN_IF_ERROR(ApplyToChunk(*store, chunk, chunk.accum));
      std::fill(chunk.accum.begin(), chunk.accum.end(), 0.0f);
      chunk.count = 0;
      counters_.pushes_applied.fetch_add(store->replicas, std::memory_order_relaxed);
      if (id == 0) counters_.steps_applied.fetch_add(1, std::memory_order_relaxed);
    }
  }
  response->set_applied(applied);
  response->set_dropped(dropped);
  response->set_global_step(GlobalStep(*store));
  response->set_stopped(stopped());
  return absl::OkStatus();
}

absl::Status Shard::PushPull(const pb::PushRequest& request, pb::PushResponse* response,
                             absl::Time deadline) {
  FULCRUM_RETURN_IF_ERROR(Push(request, response));
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetStore());
  std::vector<int> ids;
  for (const pb::ChunkData& g : request.gradients()) ids.push_back(g.chunk());
  int64_t waited_us = 0;
  FULCRUM_RETURN_IF_ERROR(PullChunks(*store, ids, request.min_step(), request.timeout_ms(),
                                     deadline, response->mutable_values(), &waited_us));
  response->set_wait_us(waited_us);
  response->set_global_step(GlobalStep(*store));
  response->set_stopped(stopped());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Stop, stats

void Shard::Stop(const std::string& reason) {
  Touch();
  if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
  spdlog::info("{} stopping: {}", name_, reason.empty() ? "no reason given" : reason);
  const std::shared_ptr<Store> s = store();
  if (s == nullptr) return;
  for (auto& chunk : s->chunks) {
    // Under the lock, so a pull between checking stopped_ and sleeping cannot miss it.
    std::lock_guard lock(chunk->mu);
    // An unfinished sync step will never be applied: its gradients count as dropped.
    counters_.pushes_dropped.fetch_add(chunk->count, std::memory_order_relaxed);
    std::fill(chunk->accum.begin(), chunk->accum.end(), 0.0f);
    chunk->count = 0;
    chunk->advanced.notify_all();
  }
}

int64_t Shard::pending_gradients() const {
  const std::shared_ptr<Store> s = store();
  if (s == nullptr) return 0;
  int64_t pending = 0;
  for (auto& chunk : s->chunks) {
    std::lock_guard lock(chunk->mu);
    pending += chunk->count;
  }
  return pending;
}

void Shard::Stats(pb::StatsResponse* response) {
  Touch();
  LocalStats(response);
}

void Shard::LocalStats(pb::StatsResponse* response) const {
  response->Clear();
  response->set_task_index(task_index_);
  response->set_stopped(stopped());
  if (const std::shared_ptr<Store> store = this->store(); store != nullptr) {
    response->set_initialized(true);
    response->set_mode(store->definition.mode());
    response->set_global_step(GlobalStep(*store));
    response->set_bytes_held(store->bytes_held);
    for (const Variable& var : store->variables) {
      pb::VariableStats* v = response->add_variables();
      v->set_name(var.def.name());
      v->set_bytes(static_cast<int64_t>(var.value.bytes()));
    }
    response->set_num_chunks(static_cast<int32_t>(store->chunks.size()));
  }
  const Counters& c = counters_;
  response->set_pushes_received(c.pushes_received.load(std::memory_order_relaxed));
  response->set_pushes_applied(c.pushes_applied.load(std::memory_order_relaxed));
  response->set_pushes_dropped(c.pushes_dropped.load(std::memory_order_relaxed));
  response->set_pushes_duplicate(c.pushes_duplicate.load(std::memory_order_relaxed));
  response->set_steps_applied(c.steps_applied.load(std::memory_order_relaxed));
  response->set_pulls(c.pulls.load(std::memory_order_relaxed));
  response->set_bytes_pushed(c.bytes_pushed.load(std::memory_order_relaxed));
  response->set_bytes_pulled(c.bytes_pulled.load(std::memory_order_relaxed));
  response->set_pull_wait_timeouts(c.pull_wait_timeouts.load(std::memory_order_relaxed));
  response->set_apply_us(c.apply_ns.load(std::memory_order_relaxed) / 1000);
  response->set_wait_us(c.wait_ns.load(std::memory_order_relaxed) / 1000);
}

absl::Status Shard::Ping(const pb::PingRequest& request, pb::PingResponse* response) {
  Touch();
  constexpr int64_t kMaxReply = runtime::kMaxMessageBytes - 1024;  // room for the framing
  if (request.reply_bytes() < 0 || request.reply_bytes() > kMaxReply) {
    return absl::InvalidArgumentError(absl::StrCat(name_,
                                                   ": Ping reply_bytes=", request.reply_bytes(),
                                                   ": must be between 0 and ", kMaxReply));
  }
  response->mutable_payload()->assign(static_cast<size_t>(request.reply_bytes()), '\0');
  response->set_task_index(task_index_);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Checkpoints

absl::Status Shard::SaveShard(const pb::SaveShardRequest& request,
                              pb::SaveShardResponse* response) {
  Touch();
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetStore());
  if (request.path().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": SaveShard: empty path"));
  }
  pb::ShardCheckpoint checkpoint;
  checkpoint.set_task_index(task_index_);
  *checkpoint.mutable_definition() = store->definition;
  int64_t global_step = 0;
  {
    // Every chunk lock, in chunk order, so the checkpoint is one consistent state.
    std::vector<std::unique_lock<std::mutex>> locks;
    for (auto& chunk : store->chunks) locks.emplace_back(chunk->mu);
    for (auto& chunk : store->chunks) {
      checkpoint.add_chunk_steps(chunk->step);
      checkpoint.add_chunk_updates(chunk->updates);
    }
    for (const Variable& var : store->variables) {
      const std::span<const float> value = var.value.flat();
      runtime::EncodeFloats({&value, 1}, checkpoint.add_values());
    }
    for (const Variable& var : store->variables) {
      for (const ops::Tensor& slot : var.slots) {
        const std::span<const float> values = slot.flat();
        runtime::EncodeFloats({&values, 1}, checkpoint.add_slots());
      }
    }
    global_step = GlobalStep(*store);
  }
  const std::string bytes = checkpoint.SerializeAsString();
  if (absl::Status s = WriteFileDurably(request.path(), bytes); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(name_, ": SaveShard: ", s.message()));
  }
  response->set_bytes_written(static_cast<int64_t>(bytes.size()));
  response->set_global_step(global_step);
  spdlog::info("{} saved its shard at global step {} to {} ({} bytes)", name_, global_step,
               request.path(), bytes.size());
  return absl::OkStatus();
}

absl::Status Shard::RestoreShard(const pb::RestoreShardRequest& request,
                                 pb::RestoreShardResponse* response) {
  Touch();
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetStore());
  const std::string& path = request.path();
  const std::string what = absl::StrCat(name_, ": RestoreShard from ", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) {
      return absl::NotFoundError(absl::StrCat(what, ": no such file"));
    }
    return absl::UnavailableError(absl::StrCat(what, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  pb::ShardCheckpoint checkpoint;
  if (!checkpoint.ParseFromString(buffer.str())) {
    return absl::DataLossError(
        absl::StrCat(what, ": not a shard checkpoint (truncated or corrupt)"));
  }

  // Same layout: variables (names, shapes, rows), chunking and optimizer slots.
  const pb::CreateVariablesRequest& have = store->definition;
  const pb::CreateVariablesRequest& saved = checkpoint.definition();
  if (checkpoint.task_index() != task_index_) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the checkpoint is of ps:", checkpoint.task_index()));
  }
  if (saved.variables_size() != have.variables_size()) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": it holds ", saved.variables_size(),
                                                      " variables, ", name_, " holds ",
                                                      have.variables_size()));
  }
  for (int v = 0; v < have.variables_size(); ++v) {
    const pb::VariableDef& a = have.variables(v);
    const pb::VariableDef& b = saved.variables(v);
    if (a.name() != b.name() || a.row_begin() != b.row_begin() || a.row_end() != b.row_end() ||
        !std::equal(a.full_shape().begin(), a.full_shape().end(), b.full_shape().begin(),
                    b.full_shape().end())) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": variable ", v, " is '", b.name(), "' ", SliceShape(b).ToString(),
                       " there but '", a.name(), "' ", SliceShape(a).ToString(), " here"));
    }
  }
  if (saved.chunk_bytes() != have.chunk_bytes()) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": chunk_bytes ", saved.chunk_bytes(),
                                                      " there, ", have.chunk_bytes(), " here"));
  }
  if (saved.optimizer().kind() != have.optimizer().kind()) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": optimizer ",
                                                      saved.optimizer().kind(), " there, ",
                                                      have.optimizer().kind(), " here"));
  }
  const size_t num_chunks = store->chunks.size();
  const size_t num_vars = store->variables.size();
  const size_t num_slots = ops::SlotNames(store->optimizer.kind).size();
  if (static_cast<size_t>(checkpoint.chunk_steps_size()) != num_chunks ||
      static_cast<size_t>(checkpoint.chunk_updates_size()) != num_chunks ||
      static_cast<size_t>(checkpoint.values_size()) != num_vars ||
      static_cast<size_t>(checkpoint.slots_size()) != num_vars * num_slots) {
    return absl::DataLossError(absl::StrCat(
        what, ": truncated or corrupt: ", checkpoint.chunk_steps_size(), " chunk steps, ",
        checkpoint.values_size(), " values, ", checkpoint.slots_size(), " slots for ", num_chunks,
        " chunks and ", num_vars, " variables with ", num_slots, " slots each"));
  }
  for (size_t v = 0; v < num_vars; ++v) {
    const size_t expect = store->variables[v].value.bytes();
    bool ok = checkpoint.values(static_cast<int>(v)).size() == expect;
    for (size_t s = 0; s < num_slots; ++s) {
      ok = ok && checkpoint.slots(static_cast<int>(v * num_slots + s)).size() == expect;
    }
    if (!ok) {
      return absl::DataLossError(absl::StrCat(what, ": truncated or corrupt: variable '",
                                              have.variables(static_cast<int>(v)).name(),
                                              "' does not have ", expect, " bytes"));
    }
  }

  // Validated, so the decoding below cannot fail half-way. Replace everything under every
  // chunk lock; gradients pending in sync accumulators are discarded and counted as dropped.
  {
    std::vector<std::unique_lock<std::mutex>> locks;
    for (auto& chunk : store->chunks) locks.emplace_back(chunk->mu);
    for (size_t v = 0; v < num_vars; ++v) {
      Variable& var = store->variables[v];
      std::span<float> part = var.value.flat();
      FULCRUM_RETURN_IF_ERROR(
          runtime::DecodeFloats(checkpoint.values(static_cast<int>(v)), {&part, 1}, what));
      for (size_t s = 0; s < num_slots; ++s) {
        part = var.slots[s].flat();
        FULCRUM_RETURN_IF_ERROR(runtime::DecodeFloats(
            checkpoint.slots(static_cast<int>(v * num_slots + s)), {&part, 1}, what));
      }
    }
    for (size_t c = 0; c < num_chunks; ++c) {
      ChunkState& chunk = *store->chunks[c];
      chunk.step = checkpoint.chunk_steps(static_cast<int>(c));
      chunk.updates = checkpoint.chunk_updates(static_cast<int>(c));
      std::fill(chunk.accum.begin(), chunk.accum.end(), 0.0f);
      counters_.pushes_dropped.fetch_add(chunk.count, std::memory_order_relaxed);
      chunk.count = 0;
      chunk.published_step.store(chunk.step, std::memory_order_release);
      chunk.advanced.notify_all();
    }
  }
  response->set_global_step(GlobalStep(*store));
  spdlog::info("{} restored its shard at global step {} from {}", name_, response->global_step(),
               path);
  return absl::OkStatus();
}

}  // namespace fulcrum::ps
