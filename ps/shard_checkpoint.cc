// ps::Shard's checkpoint shard I/O: SaveShard (now, or at a sync step), RestoreShard and the
// layout and checksum checks between them (the rest of Shard is in shard.cc).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/crc32c.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "ps/shard.h"
#include "runtime/frames/tensor_coding.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ps {

namespace fs = std::filesystem;
namespace {

// Holds every chunk lock of a store, in chunk order (checkpoint save and restore). The
// analysis cannot follow a lock per element of a vector: code under it calls
// chunk.mu.AssertHeld() before touching a chunk's guarded fields.
class AllChunksLocked {
 public:
  template <typename Chunks>
  explicit AllChunksLocked(Chunks& chunks) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto& chunk : chunks) {
      chunk->mu.Lock();
      locked_.push_back(&chunk->mu);
    }
  }
  ~AllChunksLocked() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) (*it)->Unlock();
  }
  AllChunksLocked(const AllChunksLocked&) = delete;
  AllChunksLocked& operator=(const AllChunksLocked&) = delete;

 private:
  std::vector<Mutex*> locked_;
};

}  // namespace

absl::Status Shard::CheckCheckpointPath(const std::string& path, const char* method) const {
  if (refuse_checkpoints_) {
    return absl::PermissionDeniedError(absl::StrCat(
        name_, ": ", method, ": checkpoints are off on this ps (no --checkpoint_dir)"));
  }
  if (checkpoint_root_.empty()) return absl::OkStatus();
  // Both sides resolved as far as they exist (symbolic links followed, "." and ".." folded),
  // so neither "root/../x" nor a link inside the root that points out of it passes.
  std::error_code error;
  const fs::path root = fs::weakly_canonical(fs::path(checkpoint_root_), error);
  const fs::path target = error ? fs::path() : fs::weakly_canonical(fs::path(path), error);
  const std::string root_text = root.string() + "/";
  if (error || path.empty() || target.string().rfind(root_text, 0) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        name_, ": ", method, ": '", absl::CEscape(path.substr(0, 256)),
        "' is not inside the checkpoint folder ", checkpoint_root_, " (--checkpoint_dir)"));
  }
  return absl::OkStatus();
}

void Shard::MaybeCapture(const Store& store, ChunkState& chunk) {
  MutexLock lock(&snapshot_mu_);
  if (snapshot_ == nullptr) return;
  Snapshot& snap = *snapshot_;
  if (chunk.step != snap.at_step || snap.captured[chunk.index]) return;
  const auto start = std::chrono::steady_clock::now();
  const size_t num_slots = ops::SlotNames(store.optimizer.kind).size();
  for (const runtime::Segment& seg : chunk.plan.segments) {
    const size_t v = static_cast<size_t>(seg.variable);
    const Variable& var = store.variables[v];
    const auto copy = [&](const ops::Tensor& from, std::vector<float>& to) {
      std::copy_n(from.flat().data() + seg.offset, seg.count, to.data() + seg.offset);
    };
    copy(var.value, snap.values[v]);
    for (size_t k = 0; k < num_slots; ++k) copy(var.slots[k], snap.slots[v * num_slots + k]);
  }
  snap.chunk_steps[chunk.index] = chunk.step;
  snap.chunk_updates[chunk.index] = chunk.updates;
  snap.captured[chunk.index] = true;
  snap.capture_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  if (--snap.remaining == 0) snapshot_taken_.SignalAll();
}

void Shard::RecordPause(int64_t pause_ns) {
  checkpoint_pause_ns_.fetch_add(pause_ns, std::memory_order_relaxed);
  int64_t max = checkpoint_pause_max_ns_.load(std::memory_order_relaxed);
  while (pause_ns > max &&
         !checkpoint_pause_max_ns_.compare_exchange_weak(max, pause_ns, std::memory_order_relaxed)) {
  }
  last_pause_ns_.store(pause_ns, std::memory_order_relaxed);
}

int64_t Shard::SnapshotNow(const Store& store, pb::ShardCheckpoint* checkpoint) {
  // Every chunk lock, in chunk order, so the checkpoint is one consistent state; training
  // waits for this copy only (the file is written after the locks are released).
  const auto start = std::chrono::steady_clock::now();
  AllChunksLocked locked(store.chunks);
  for (const auto& chunk : store.chunks) {
    chunk->mu.AssertHeld();
    checkpoint->add_chunk_steps(chunk->step);
    checkpoint->add_chunk_updates(chunk->updates);
  }
  for (const Variable& var : store.variables) {
    const std::span<const float> value = var.value.flat();
    runtime::EncodeFloats({&value, 1}, checkpoint->add_values());
  }
  for (const Variable& var : store.variables) {
    for (const ops::Tensor& slot : var.slots) {
      const std::span<const float> values = slot.flat();
      runtime::EncodeFloats({&values, 1}, checkpoint->add_slots());
    }
  }
  RecordPause(std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count());
  return GlobalStep(store);
}

absl::StatusOr<int64_t> Shard::SnapshotAtStep(const Store& store, int64_t at_step,
                                              absl::Time deadline,
                                              pb::ShardCheckpoint* checkpoint) {
  auto snap = std::make_shared<Snapshot>();
  snap->at_step = at_step;
  const size_t num_slots = ops::SlotNames(store.optimizer.kind).size();
  for (const Variable& var : store.variables) {
    snap->values.emplace_back(static_cast<size_t>(var.value.num_elements()));
    for (size_t k = 0; k < num_slots; ++k) {
      snap->slots.emplace_back(static_cast<size_t>(var.value.num_elements()));
    }
  }
  const size_t num_chunks = store.chunks.size();
  snap->chunk_steps.assign(num_chunks, 0);
  snap->chunk_updates.assign(num_chunks, 0);
  snap->captured.assign(num_chunks, false);
  snap->remaining = num_chunks;
  {
    // Registered under every chunk lock: no chunk can step past at_step unseen.
    AllChunksLocked locked(store.chunks);
    for (const auto& chunk : store.chunks) {
      chunk->mu.AssertHeld();
      if (chunk->step > at_step) {
        return absl::FailedPreconditionError(absl::StrCat(name_, ": SaveShard: chunk ",
                                                          chunk->index, " is already at step ",
                                                          chunk->step, ", past at_step ", at_step));
      }
    }
    {
      MutexLock lock(&snapshot_mu_);
      snapshot_ = snap;
    }
    snapshot_pending_.store(true, std::memory_order_release);
    for (const auto& chunk : store.chunks) {
      chunk->mu.AssertHeld();
      MaybeCapture(store, *chunk);
    }
  }
  FULCRUM_RETURN_IF_ERROR(WaitForSnapshot(*snap, deadline));
  RecordPause(snap->capture_ns);
  for (size_t c = 0; c < num_chunks; ++c) {
    checkpoint->add_chunk_steps(snap->chunk_steps[c]);
    checkpoint->add_chunk_updates(snap->chunk_updates[c]);
  }
  for (const std::vector<float>& value : snap->values) {
    const std::span<const float> part(value);
    runtime::EncodeFloats({&part, 1}, checkpoint->add_values());
  }
  for (const std::vector<float>& slot : snap->slots) {
    const std::span<const float> part(slot);
    runtime::EncodeFloats({&part, 1}, checkpoint->add_slots());
  }
  return at_step;
}

absl::Status Shard::WaitForSnapshot(Snapshot& snap, absl::Time deadline) {
  const size_t num_chunks = snap.captured.size();
  MutexLock lock(&snapshot_mu_);
  while (snap.remaining > 0 && !snap.aborted && !stopped() && !left()) {
    if (!snapshot_taken_.WaitUntil(&snapshot_mu_, deadline)) break;
  }
  snapshot_ = nullptr;
  snapshot_pending_.store(false, std::memory_order_release);
  if (snap.remaining == 0) return absl::OkStatus();
  std::vector<std::string> behind;
  for (size_t c = 0; c < num_chunks && behind.size() < 8; ++c) {
    if (!snap.captured[c]) behind.push_back(absl::StrCat(c));
  }
  const std::string which = absl::StrCat("chunk(s) ", absl::StrJoin(behind, ", "),
                                         snap.remaining > behind.size() ? ", ..." : "");
  if (snap.aborted) {
    return absl::AbortedError(absl::StrCat(name_, ": SaveShard at step ", snap.at_step,
                                           ": a restore replaced the state"));
  }
  if (stopped() || left()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, ": SaveShard at step ", snap.at_step, ": ",
                     left() ? "the ps left" : "training stopped", " before ", which, " reached it"));
  }
  return absl::DeadlineExceededError(absl::StrCat(name_, ": SaveShard: ", which,
                                                  " did not reach step ", snap.at_step, " in time"));
}

absl::Status Shard::SaveShard(const pb::SaveShardRequest& request, pb::SaveShardResponse* response,
                              absl::Time deadline) {
  Touch();
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetStore());
  if (request.path().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": SaveShard: empty path"));
  }
  FULCRUM_RETURN_IF_ERROR(CheckCheckpointPath(request.path(), "SaveShard"));
  for (const std::string& old : request.remove_paths()) {
    FULCRUM_RETURN_IF_ERROR(CheckCheckpointPath(old, "SaveShard (remove_paths)"));
  }
  if (request.at_step() < 0 || (request.at_step() > 0 && !store->sync)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": SaveShard: at_step ", request.at_step(),
                     " (a step to wait for is for sync mode only, and not negative)"));
  }
  if (saving_.exchange(true, std::memory_order_acq_rel)) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, ": SaveShard: another save is in progress"));
  }
  struct Done {
    std::atomic<bool>* flag;
    ~Done() { flag->store(false, std::memory_order_release); }
  } done{&saving_};

  pb::ShardCheckpoint checkpoint;
  checkpoint.set_task_index(task_index_);
  *checkpoint.mutable_definition() = store->definition;
  int64_t global_step = 0;
  if (request.at_step() == 0) {
    global_step = SnapshotNow(*store, &checkpoint);
  } else {
    if (request.timeout_ms() > 0) {
      deadline = std::min(deadline, absl::Now() + absl::Milliseconds(request.timeout_ms()));
    }
    FULCRUM_ASSIGN_OR_RETURN(global_step,
                             SnapshotAtStep(*store, request.at_step(), deadline, &checkpoint));
  }
  FULCRUM_RETURN_IF_ERROR(WriteCheckpoint(request, checkpoint, global_step, response));
  saves_.fetch_add(1, std::memory_order_acq_rel);
  return absl::OkStatus();
}

absl::Status Shard::WriteCheckpoint(const pb::SaveShardRequest& request,
                                    const pb::ShardCheckpoint& checkpoint, int64_t global_step,
                                    pb::SaveShardResponse* response) {
  const std::string bytes = checkpoint.SerializeAsString();
  const fs::path path(request.path());
  if (path.has_parent_path()) {
    if (absl::Status s = MakeDirs(path.parent_path(), "--checkpoint_dir"); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(name_, ": SaveShard: ", s.message()));
    }
  }
  if (absl::Status s = WriteFileAtomically(path, bytes); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(name_, ": SaveShard: ", s.message()));
  }
  response->set_bytes_written(static_cast<int64_t>(bytes.size()));
  response->set_global_step(global_step);
  response->set_crc32c(Crc32c(bytes));
  spdlog::info("{} saved its shard at global step {} to {} ({} bytes; training waited {:.1f} ms "
               "for the copy in memory)",
               name_, global_step, request.path(), bytes.size(),
               static_cast<double>(last_pause_ns_.load(std::memory_order_relaxed)) / 1e6);
  for (const std::string& old : request.remove_paths()) {
    std::error_code error;
    fs::remove(old, error);
    if (error)
      spdlog::warn("{}: could not remove old checkpoint {}: {}", name_, old, error.message());
    fs::remove(old + ".tmp", error);  // left by a save that was cut off
    // Its folder goes too once empty (the chief's manifest lives there on a shared disk).
    const fs::path folder = fs::path(old).parent_path();
    if (!folder.empty() && fs::is_empty(folder, error) && !error) fs::remove(folder, error);
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckCheckpoint(const Store& store, const pb::ShardCheckpoint& checkpoint,
                                    const std::string& what) const {
  // Same layout: variables (names, shapes, rows), chunking and optimizer slots.
  const pb::CreateVariablesRequest& have = store.definition;
  const pb::CreateVariablesRequest& saved = checkpoint.definition();
  const auto mismatch = [&](auto&&... parts) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", parts...));
  };
  if (checkpoint.task_index() != task_index_) {
    return mismatch("the checkpoint is of ps:", checkpoint.task_index());
  }
  if (saved.variables_size() != have.variables_size()) {
    return mismatch("it holds ", saved.variables_size(), " variables, ", name_, " holds ",
                    have.variables_size());
  }
  for (int v = 0; v < have.variables_size(); ++v) {
    const pb::VariableDef& a = have.variables(v);
    const pb::VariableDef& b = saved.variables(v);
    if (a.name() != b.name() || a.row_begin() != b.row_begin() || a.row_end() != b.row_end() ||
        !std::equal(a.full_shape().begin(), a.full_shape().end(), b.full_shape().begin(),
                    b.full_shape().end())) {
      return mismatch("variable ", v, " is '", b.name(), "' ", SliceShape(b).ToString(),
                      " there but '", a.name(), "' ", SliceShape(a).ToString(), " here");
    }
  }
  if (saved.chunk_bytes() != have.chunk_bytes()) {
    return mismatch("chunk_bytes ", saved.chunk_bytes(), " there, ", have.chunk_bytes(), " here");
  }
  if (saved.optimizer().kind() != have.optimizer().kind()) {
    return mismatch("optimizer ", saved.optimizer().kind(), " there, ", have.optimizer().kind(),
                    " here");
  }
  const size_t num_chunks = store.chunks.size();
  const size_t num_vars = store.variables.size();
  const size_t num_slots = ops::SlotNames(store.optimizer.kind).size();
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
    const size_t expect = store.variables[v].value.bytes();
    bool ok = checkpoint.values(static_cast<int>(v)).size() == expect;
    for (size_t k = 0; k < num_slots; ++k) {
      ok = ok && checkpoint.slots(static_cast<int>(v * num_slots + k)).size() == expect;
    }
    if (!ok) {
      return absl::DataLossError(absl::StrCat(what, ": truncated or corrupt: variable '",
                                              have.variables(static_cast<int>(v)).name(),
                                              "' does not have ", expect, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status Shard::RestoreShard(const pb::RestoreShardRequest& request,
                                 pb::RestoreShardResponse* response) {
  Touch();
  FULCRUM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, GetStore());
  FULCRUM_RETURN_IF_ERROR(CheckCheckpointPath(request.path(), "RestoreShard"));
  const std::string what = absl::StrCat(name_, ": RestoreShard from ", request.path());
  absl::StatusOr<std::string> bytes = ReadFileToString(request.path());
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat(name_, ": RestoreShard: ", bytes.status().message()));
  }
  if (request.bytes() > 0) {
    const uint32_t crc = Crc32c(*bytes);
    if (static_cast<int64_t>(bytes->size()) != request.bytes() || crc != request.crc32c()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: corrupt: %d bytes with CRC-32C %08x, the manifest says %d bytes with %08x", what,
          bytes->size(), crc, request.bytes(), request.crc32c()));
    }
  }
  pb::ShardCheckpoint checkpoint;
  if (!checkpoint.ParseFromString(*bytes)) {
    return absl::DataLossError(
        absl::StrCat(what, ": not a shard checkpoint (truncated or corrupt)"));
  }
  FULCRUM_RETURN_IF_ERROR(CheckCheckpoint(*store, checkpoint, what));
  // Validated, so the decoding below cannot fail half-way. Replace everything under every
  // chunk lock; gradients pending in sync accumulators are discarded and counted as dropped.
  const size_t num_slots = ops::SlotNames(store->optimizer.kind).size();
  AllChunksLocked locked(store->chunks);
  {
    // A sync save waiting for a step of the replaced state would never see it.
    MutexLock lock(&snapshot_mu_);
    if (snapshot_ != nullptr) {
      snapshot_->aborted = true;
      snapshot_taken_.SignalAll();
    }
  }
  for (size_t v = 0; v < store->variables.size(); ++v) {
    Variable& var = store->variables[v];
    std::span<float> part = var.value.flat();
    FULCRUM_RETURN_IF_ERROR(
        runtime::DecodeFloats(checkpoint.values(static_cast<int>(v)), {&part, 1}, what));
    for (size_t k = 0; k < num_slots; ++k) {
      part = var.slots[k].flat();
      FULCRUM_RETURN_IF_ERROR(runtime::DecodeFloats(
          checkpoint.slots(static_cast<int>(v * num_slots + k)), {&part, 1}, what));
    }
  }
  // Requests waiting for a step of the replaced state end with Aborted (they see this when
  // the signal below wakes them).
  restores_.fetch_add(1, std::memory_order_acq_rel);
  for (size_t c = 0; c < store->chunks.size(); ++c) {
    ChunkState& chunk = *store->chunks[c];
    chunk.mu.AssertHeld();
    chunk.step = checkpoint.chunk_steps(static_cast<int>(c));
    chunk.updates = checkpoint.chunk_updates(static_cast<int>(c));
    DropPending(chunk);
    chunk.published_step.store(chunk.step, std::memory_order_release);
    chunk.advanced.SignalAll();
  }
  store->held.store(false, std::memory_order_release);  // a restarted ps serves again
  response->set_global_step(GlobalStep(*store));
  spdlog::info("{} restored its shard at global step {} from {}", name_, response->global_step(),
               request.path());
  return absl::OkStatus();
}

}  // namespace fulcrum::ps
