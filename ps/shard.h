// ps: Shard, the parameter-server core. It holds one PS task's variables (whole model
// variables or first-axis slices of them), their optimizer slots and the chunk plan
// (runtime/cluster/chunk_plan.h), and implements the proto/ps.proto contract on proto messages:
// create, pull (optionally waiting for a global step), push (async: apply on arrival; sync:
// SyncReplicasOptimizer-style aggregation of replicas_to_aggregate gradients per step,
// stale gradients dropped; ssp: apply on arrival, a worker held while it is more than
// `staleness` steps ahead of the slowest, ps/staleness.h), deduplication of retried pushes,
// stop, stats and checkpoint shard I/O (in shard_checkpoint.cc). The gRPC service
// (ps/service.h) and the tests' in-process client (tests/testing/in_process_ps_client.h) both
// forward to it. Every error message names the task ("ps:0").
//
// Thread-safety: every method may be called from many threads at once. Each chunk has its
// own lock, so pushes and pulls of different chunks contend only for the brief insert into
// the shard-wide table of seen request ids; a push or pull holds one chunk lock at a time,
// a checkpoint save or restore holds all of them (in chunk order). The locks are
// fulcrum::Mutex (base/mutex.h): checked by clang's -Wthread-safety, seen by ThreadSanitizer.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"
#include "ops/tensor.h"
#include "proto/ps.pb.h"
#include "ps/request_checks.h"
#include "ps/staleness.h"
#include "ps/straggler.h"
#include "runtime/cluster/chunk_plan.h"
#include "runtime/frames/wire_frame.h"

namespace fulcrum::ps {

// A Pull whose request gives no timeout_ms waits at most this long for min_step.
inline constexpr absl::Duration kDefaultPullWait = absl::Seconds(60);
// How many (task, request_id) pairs of past pushes are remembered for deduplication; the
// oldest are forgotten first.
inline constexpr size_t kDedupCapacity = 100000;
// The largest Ping reply (the largest --rpc_chunk_bytes: warm-up pings send one chunk).
inline constexpr int64_t kMaxPingReply = int64_t{64} << 20;
// Ping replies above kLargePing bytes being built at once, at most.
inline constexpr int64_t kLargePing = int64_t{1} << 20;
inline constexpr int kMaxLargePings = 4;
// Waiting requests a task may hold beyond two per chunk (see Shard::TakeWaitSlot).
inline constexpr int kWaitingSlack = 4;

// What a push holding a NaN or an Inf gets (--nonfinite): refused with InvalidArgument (the
// pusher sees the error), or skipped (nothing applied, counted; the pusher is told nothing
// applied). Either way the variables are untouched and the push counts in pushes_nonfinite.
enum class NonFinitePolicy { kError, kSkip };

// Receives the values a pull reads, one chunk at a time, under that chunk's lock.
class ValueSink {
 public:
  virtual ~ValueSink() = default;
  // `parts` are the chunk's segments, valid only during the call; returns the payload bytes
  // written (in `dtype`).
  virtual size_t Write(int chunk, int64_t step, pb::WireDtype dtype,
                       std::span<const std::span<const float>> parts) = 0;
};

// Copies each pulled chunk once, under its lock, into one slice of an outgoing frame (the
// reply of every transport: ps/service.cc, tests/testing/in_process_ps_client.h).
class FrameSink final : public ValueSink {
 public:
  explicit FrameSink(std::vector<runtime::OutChunk>* out) : out_(out) {}
  size_t Write(int chunk, int64_t step, pb::WireDtype dtype,
               std::span<const std::span<const float>> parts) override;

 private:
  std::vector<runtime::OutChunk>* out_;
};

// --replicate_shards: where a primary shard's applies go before they take effect (the backup
// ps holding its replica; ps/replicas.h). A forward's Wait ends when the backup applied the
// request or failed: Unavailable or DeadlineExceeded when the backup is gone (the primary
// goes on without a replica), Aborted when the backup was promoted (the chief took this
// primary for dead: it must stop serving), any other error when the replica cannot follow.
class Replicator {
 public:
  // One forward in flight.
  class Pending {
   public:
    virtual ~Pending() = default;
    // Blocks until the backup answered (or the forward's deadline passed).
    virtual absl::Status Wait() = 0;
  };
  virtual ~Replicator() = default;
  // Starts forwarding `request`: the primary applies locally meanwhile and waits before its
  // step shows.
  virtual std::unique_ptr<Pending> Start(pb::ReplicateRequest request) = 0;
  virtual int backup_task() const = 0;
};

class Shard {
 public:
  // `task_index` is this ps task's index in the cluster spec.
  explicit Shard(int task_index);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  int task_index() const { return task_index_; }
  // Before serving (not thread-safe against concurrent pushes).
  void set_nonfinite_policy(NonFinitePolicy policy) { nonfinite_policy_ = policy; }
  // The task names that may pull and push ("chief:0", "worker:3"; the cluster spec's), set
  // before serving. Empty (the default): any name, as in-process tests and benches use.
  void set_known_tasks(absl::flat_hash_set<std::string> tasks) { known_tasks_ = std::move(tasks); }
  // --replicate_shards: every apply is forwarded to `replicator` first (ps/shard_replica.cc).
  // Before CreateVariables (not thread-safe against pushes); null: no replica.
  void set_replicator(std::unique_ptr<Replicator> replicator);
  // On the backup: applies one forwarded apply to this replica exactly as the primary did
  // (same gradient, scales and Adam step), so the replica stays bit-identical. A forward
  // for a step the chunk is past is an OK no-op (a retry); one for a later step is
  // FailedPrecondition (a gap: the replica can no longer stand in); bad chunk ids or sizes
  // are InvalidArgument. Nothing changes on any error. (A promoted replica is fenced by
  // ps/replicas.h before it gets here.)
  absl::Status ApplyReplicated(const pb::ReplicateRequest& request);
  // Why replication stopped ("" while it runs or when there is none).
  std::string replication_lost() const;
  // The folder SaveShard and RestoreShard paths must lie in (--checkpoint_dir), set before
  // serving. Empty (the default of a Shard): any path, as in-process tests use; the ps task
  // sets it, or refuses both calls when --checkpoint_dir is not given.
  void set_checkpoint_root(std::string root, bool refuse_all) {
    checkpoint_root_ = std::move(root);
    refuse_checkpoints_ = refuse_all;
  }
  // OK when `path` may be written or read as a checkpoint: inside the checkpoint root once
  // symbolic links and ".." are resolved. PermissionDenied naming the path otherwise.
  absl::Status CheckCheckpointPath(const std::string& path, const char* method) const;
  // OK when `task` may call `method`; InvalidArgument naming it otherwise, so a stranger's
  // requests touch nothing (not even the per-peer traffic tables).
  absl::Status CheckTask(const std::string& task, const char* method) const;
  // "ps:<index>", the prefix of every error message.
  const std::string& name() const { return name_; }

  // Validates the definition and initialises every variable deterministically: the whole
  // source variable (full_shape) is initialised from the def's seed and the def's rows are
  // copied, so a slice holds exactly the bits the single-process trainer gives that part.
  // Slots start at ops::SlotInitialValue. A repeat with the same run_id and an identical
  // request is an OK no-op; any other request once created is FailedPrecondition.
  absl::Status CreateVariables(const pb::CreateVariablesRequest& request,
                               pb::CreateVariablesResponse* response);

  // The data methods take the request's header as the transport parsed it (its chunk
  // payloads decoded or still to be written) and trust its task: each transport front checks
  // that once per request with CheckTask (ps/service.cc; in the tests,
  // tests/testing/in_process_ps_client.h).
  //
  // Reads the requested chunks (empty = all) into `sink` (in request.reply_dtype());
  // *response gets the other fields. With min_step > 0, first waits until each chunk's step
  // reaches it, until Stop, or until the earlier of the request's timeout_ms
  // (kDefaultPullWait when <= 0) and `deadline` (the caller's own deadline) —
  // DeadlineExceeded then, naming the chunk and the step it waited for.
  absl::Status Pull(const pb::PullRequest& request, ValueSink& sink, pb::PullResponse* response,
                    absl::Time deadline);
  // Applies (async) or accumulates (sync) the request's chunk gradients: grads[i] holds the
  // floats of request.gradients(i) (whose data is ignored; its wire_dtype tells the bytes it
  // took on the wire). A request whose (task, request_id) was seen before applies nothing and
  // is answered with duplicate=true; request_id 0 means the caller does not ask for
  // deduplication. The whole request is validated before anything is applied (chunk ids,
  // gradient sizes, sync steps).
  absl::Status Push(const pb::PushRequest& request, std::span<const std::span<const float>> grads,
                    pb::PushResponse* response);
  // Push, then Pull of the pushed chunks with the request's min_step and timeout_ms, the
  // values going to `sink` in request.reply_dtype(). A duplicate still pulls. With no_values
  // (async) nothing is pulled; no_values with min_step > 0 is InvalidArgument.
  absl::Status PushPull(const pb::PushRequest& request, std::span<const std::span<const float>> grads,
                        ValueSink& sink, pb::PushResponse* response, absl::Time deadline);

  // Writes a consistent pb::ShardCheckpoint atomically (temporary file, fsync, rename; the
  // parent folders are created) and answers its size and CRC-32C. With at_step > 0 (sync
  // mode) the state of that global step is saved: each chunk is captured under its lock when
  // it reaches the step, so ps tasks saving the same at_step save one consistent step while
  // training goes on; it waits until the earlier of timeout_ms and `deadline` for that
  // (DeadlineExceeded naming the chunks still behind), FailedPrecondition when a chunk is past
  // the step or the shard stops first. One save at a time (FailedPrecondition otherwise).
  // Afterwards remove_paths (older checkpoints, inside --checkpoint_dir) are deleted.
  absl::Status SaveShard(const pb::SaveShardRequest& request, pb::SaveShardResponse* response,
                         absl::Time deadline = absl::InfiniteFuture());
  // Replaces values, slots, chunk steps and update counts with a checkpoint's (pending sync
  // gradients are discarded and counted as dropped). NotFound when the file is missing, DataLoss
  // when it does not parse, is truncated or (request.bytes > 0) does not have the manifest's
  // size and CRC-32C, FailedPrecondition when it is of another shard layout; nothing changes on
  // any failure.
  absl::Status RestoreShard(const pb::RestoreShardRequest& request,
                            pb::RestoreShardResponse* response);

  // Counts as contact from a client (the chief's polls are its heartbeat to the PS).
  void Stats(pb::StatsResponse* response);
  // The same figures for the task's own use (its profiler): not a sign of the chief.
  void LocalStats(pb::StatsResponse* response) const;
  // Echoes reply_bytes zero bytes and the task index; touches no variable (the transfer
  // baseline of bench/ps_throughput). InvalidArgument for a negative reply or one over
  // kMaxPingReply; ResourceExhausted while kMaxLargePings large replies are being built.
  absl::Status Ping(const pb::PingRequest& request, pb::PingResponse* response);
  // ssp mode: the gate no longer waits for the request's workers (finished, failed or gone;
  // see ps/staleness.h). InvalidArgument naming an index that is not a worker's (nothing is
  // released then); an OK no-op in the other modes and before CreateVariables.
  absl::Status ReleaseWorkers(const pb::ReleaseWorkersRequest& request);
  // Training has ended: wakes every waiting pull; later pulls answer at once with
  // stopped=true (values still filled), later pushes apply nothing and say stopped=true.
  // Gradients of an unfinished sync step are discarded and counted as dropped, so that
  // afterwards pushes_received == pushes_applied + pushes_dropped.
  void Stop(const std::string& reason);

  // A signal asked this ps to leave the run (a node drained, an eviction): Stats reports
  // `reason` as `leaving`, so that the chief saves a checkpoint (or ends the run) before the
  // ps goes. Training goes on meanwhile. The first reason is kept.
  void SetLeaving(const std::string& reason);
  std::string leaving() const;
  // SaveShard calls that wrote their checkpoint.
  int64_t saves() const { return saves_.load(std::memory_order_acquire); }
  // The saves' in-memory copy time training waited for: all of it, and the longest one.
  absl::Duration checkpoint_pause() const {
    return absl::Nanoseconds(checkpoint_pause_ns_.load(std::memory_order_relaxed));
  }
  absl::Duration checkpoint_pause_max() const {
    return absl::Nanoseconds(checkpoint_pause_max_ns_.load(std::memory_order_relaxed));
  }
  // The ps leaves without ending training: waiting pulls and saves are woken and, like every
  // later Pull and Push, end Unavailable naming the reason, so that workers wait for the ps
  // to come back (never "training ended", which Stop says).
  void Leave();
  bool left() const { return left_.load(std::memory_order_acquire); }

  // Records contact from a client now (every method above does it too).
  void Touch();
  // When a client last called this shard (construction time before any call).
  absl::Time last_contact() const;
  bool initialized() const;
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  // The created definition's run_dir ("" before CreateVariables).
  std::string run_dir() const;
  // Sync mode: gradients accumulated into a step that has not been applied yet. With the
  // counters: pushes_received == pushes_applied + pushes_dropped + pending_gradients().
  int64_t pending_gradients() const;

 private:
  struct Variable {
    pb::VariableDef def;
    ops::Tensor value;               // the def's rows, shape [rows, full_shape[1:]...]
    std::vector<ops::Tensor> slots;  // ops::SlotNames order, shaped like value
  };
  static constexpr int kNormHistory = 16;
  static constexpr float kNormFactor = 1e4f;
  static constexpr float kNormFloor = 100.0f;  // norms under it always pass (tiny medians)
  struct ChunkState {
    runtime::Chunk plan;  // fixed before the store is published
    size_t index = 0;     // in Store::chunks
    Mutex mu;             // the chunk's values and slots (in Store::variables) and the below
    CondVar advanced;     // signalled when step grows or the shard stops
    int64_t step ABSL_GUARDED_BY(mu) = 0;          // global step of the chunk
    int64_t updates ABSL_GUARDED_BY(mu) = 0;       // applies done (Adam's t = updates + 1)
    std::vector<float> accum ABSL_GUARDED_BY(mu);  // sync: sum of the step's first `count` grads
    int count ABSL_GUARDED_BY(mu) = 0;             // sync: gradients in accum
    std::atomic<int64_t> published_step{0};        // step, readable without the lock
    // The gradient norms of the last kNormHistory pushes of the chunk that were let through:
    // a push whose norm is beyond kNormFactor times their median and kNormFloor is refused (an
    // absurd gradient, finite or not, once ruined the model for every worker).
    std::array<float, kNormHistory> recent_norms ABSL_GUARDED_BY(mu) = {};
    int64_t norms_seen ABSL_GUARDED_BY(mu) = 0;
  };
  // Everything CreateVariables builds. Its layout never changes afterwards; values, slots
  // and chunk state change under the chunk locks.
  struct Store {
    pb::CreateVariablesRequest definition;
    ops::OptimizerConfig optimizer;
    bool sync = false;
    int replicas = 1;
    // async and ssp: each push at learning_rate / (1 + its staleness on the chunk).
    bool staleness_aware_lr = false;
    std::vector<Variable> variables;
    std::vector<std::unique_ptr<ChunkState>> chunks;
    int64_t bytes_held = 0;
    // Created with hold_for_restore and not restored yet: pulls and pushes are refused.
    std::atomic<bool> held{false};
    std::unique_ptr<StalenessGate> ssp;  // ssp mode only: the workers' clocks
    // sync mode with 2 or more replicas: who holds the steps back (ps/straggler.h).
    std::unique_ptr<StragglerDetector> straggler;
  };
  struct Counters {
    std::atomic<int64_t> pushes_received{0};
    std::atomic<int64_t> pushes_applied{0};
    std::atomic<int64_t> pushes_dropped{0};
    std::atomic<int64_t> pushes_duplicate{0};
    std::atomic<int64_t> pushes_nonfinite{0};
    std::atomic<int64_t> pushes_absurd{0};
    std::atomic<int64_t> steps_applied{0};
    std::atomic<int64_t> pulls{0};
    std::atomic<int64_t> bytes_pushed{0};
    std::atomic<int64_t> bytes_pulled{0};
    std::atomic<int64_t> pull_wait_timeouts{0};
    std::atomic<int64_t> apply_ns{0};  // inside ApplyToChunk
    std::atomic<int64_t> wait_ns{0};   // requests held for min_step
  };

  // The shape of a def's rows: [row_end - row_begin, full_shape[1:]...].
  static ops::Shape SliceShape(const pb::VariableDef& def);
  // The store, or FailedPrecondition before CreateVariables.
  absl::StatusOr<std::shared_ptr<Store>> GetStore() const;
  // The store for a worker's Pull, Push or PushPull: Unavailable (retry later) before
  // CreateVariables and while a store created with hold_for_restore waits for its
  // RestoreShard (a restarted ps), naming `method` and `task`.
  absl::StatusOr<std::shared_ptr<Store>> GetDataStore(const char* method,
                                                      const std::string& task) const;
  // CreateVariables's store (ps/shard_create.cc): the request checked whole, then the
  // variables initialised, their slots and the chunks.
  absl::StatusOr<std::shared_ptr<Store>> BuildStore(const pb::CreateVariablesRequest& request);
  absl::Status InitializeVariables(const pb::CreateVariablesRequest& request,
                                   const std::vector<ops::Initializer>& inits, Store* store) const;
  absl::Status MakeChunks(const pb::CreateVariablesRequest& request, Store* store) const;
  // Reads the chunks into `out`; waits for min_step as Pull describes, and adds the time it
  // waited to *waited_us.
  absl::Status PullChunks(Store& store, const std::vector<int>& chunk_ids, int64_t min_step,
                          int64_t timeout_ms, absl::Time deadline, pb::WireDtype dtype,
                          ValueSink& sink, int64_t* waited_us);
  // Checks a push before anything of it is applied (chunk ids, gradient sizes, finite values,
  // sync steps); grads[i] are the floats of request.gradients(i). A NaN or Inf is
  // InvalidArgument under NonFinitePolicy::kError; under kSkip *nonfinite is set and the push
  // is to be skipped whole.
  absl::Status ValidatePush(const Store& store, const pb::PushRequest& request,
                            std::span<const std::span<const float>> grads, bool* nonfinite);
  // Lets a chunk gradient of norm sqrt(sum_squares) through, recording it, or refuses it
  // (InvalidArgument naming the norm and the chunk's recent median) when it is absurd.
  absl::Status AdmitNorm(ChunkState& chunk, int chunk_id, float sum_squares,
                         const std::string& task);
  // Applies (async) or accumulates (sync) one validated chunk gradient; counts it as
  // *applied or *dropped. `step`: the request's; `read_step`: the step of the chunk's values
  // the gradient was computed at (its ChunkData.step): async and ssp raise *staleness to the
  // updates the chunk took since then, and the staleness-aware learning rate divides by it.
  absl::Status PushChunk(Store& store, ChunkState& chunk, int chunk_id, std::span<const float> grad,
                         int64_t step, int64_t read_step, int wire_bytes, int* applied,
                         int* dropped, int64_t* staleness) ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  // True when (task, request_id) was seen before; records it otherwise.
  bool SeenBefore(const std::string& task, uint64_t request_id);
  // Applies grad_scale * grad (sync mode: the workers' sum and 1/n, their mean) to a chunk's
  // segments, at `lr_scale` times the optimizer's learning rate, and advances its step.
  absl::Status ApplyToChunk(Store& store, ChunkState& chunk, std::span<const float> grad,
                            float lr_scale = 1.0f, float grad_scale = 1.0f)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  // --replicate_shards: starts forwarding one apply (ApplyToChunk's arguments) to the backup
  // (null when not replicating); FinishForward waits for it before the apply's step shows:
  // OK when forwarded, or when the backup is gone (replication is then marked lost and the
  // shard goes on alone); Unavailable when the backup was promoted in this shard's place
  // (the shard then leaves: it no longer serves).
  std::unique_ptr<Replicator::Pending> StartForward(const ChunkState& chunk,
                                                    std::span<const float> grad, float lr_scale,
                                                    float grad_scale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  absl::Status FinishForward(Replicator::Pending& pending, int64_t started_ns);
  // Discards a sync step's unfinished gradients, counting them as dropped.
  void DropPending(ChunkState& chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  int64_t GlobalStep(const Store& store) const;
  std::string ChunkWaitMessage(const Store& store, const ChunkState& chunk, int chunk_id,
                               int64_t min_step, absl::Duration waited) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  // A sync SaveShard waiting for its step: the chunks' parts of the values and slots and
  // their counters, copied as each chunk reaches at_step.
  struct Snapshot {
    int64_t at_step = 0;
    std::vector<std::vector<float>> values;  // per variable
    std::vector<std::vector<float>> slots;   // per variable and slot, variable-major
    std::vector<int64_t> chunk_steps;
    std::vector<int64_t> chunk_updates;
    std::vector<bool> captured;
    size_t remaining = 0;
    bool aborted = false;  // a restore replaced the state it was waiting for
    int64_t capture_ns = 0;  // time chunks spent copying themselves in (under their locks)
  };
  // SaveShard's in-memory phase (the first of CheckFreq's two; the file is written after):
  // every chunk copied at once under all chunk locks; returns the global step it holds.
  int64_t SnapshotNow(const Store& store, pb::ShardCheckpoint* checkpoint);
  // Sync mode: each chunk copied as it reaches `at_step` (MaybeCapture), waiting until
  // `deadline`; returns at_step.
  absl::StatusOr<int64_t> SnapshotAtStep(const Store& store, int64_t at_step, absl::Time deadline,
                                         pb::ShardCheckpoint* checkpoint);
  // Waits for every chunk of `snap` to be captured; names the chunks behind otherwise.
  absl::Status WaitForSnapshot(Snapshot& snap, absl::Time deadline);
  // Counts a save's in-memory copy time (training waited for it).
  void RecordPause(int64_t pause_ns);
  // Copies `chunk` into the pending snapshot when the chunk is at its step (ApplyToChunk
  // calls it after each step; SaveShard for the chunks already there).
  void MaybeCapture(const Store& store, ChunkState& chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  // Writes `checkpoint` to the request's path and fills the response (SaveShard's end).
  absl::Status WriteCheckpoint(const pb::SaveShardRequest& request,
                               const pb::ShardCheckpoint& checkpoint, int64_t global_step,
                               pb::SaveShardResponse* response);
  // Checks that `checkpoint` holds this store's layout and complete data (RestoreShard).
  absl::Status CheckCheckpoint(const Store& store, const pb::ShardCheckpoint& checkpoint,
                               const std::string& what) const;
  std::shared_ptr<Store> store() const;

  // ssp mode (the hooks of Push, PushPull and Pull; no-ops in the other modes).
  // The index of the pushing or waiting worker `task`: -1 outside ssp mode, InvalidArgument
  // for a task that is not a worker.
  absl::StatusOr<int> SspWorker(const Store& store, const std::string& task,
                                const char* method) const;
  // Counts the request's chunks as one step of `worker` (>= 0).
  void SspAdvance(Store& store, int worker, const pb::PushRequest& request);
  // Holds `task` until it is within the staleness bound on every chunk of `ids` (or Stop),
  // until the earlier of timeout_ms (kDefaultPullWait when <= 0) and `deadline`; adds the
  // time waited to *waited_us and to the wait counter.
  absl::Status SspWait(Store& store, const std::string& task, const std::vector<int>& ids,
                       int64_t timeout_ms, absl::Time deadline, int64_t* waited_us);

  const int task_index_;
  const std::string name_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> last_contact_ns_;
  // Restores done; a pull waiting for a step sees it change and ends with Aborted (the
  // step it waits for belongs to the replaced state). Changed under every chunk lock.
  std::atomic<int64_t> restores_{0};  // absl::ToUnixNanos

  mutable Mutex store_mu_;                                   // also serialises CreateVariables
  std::shared_ptr<Store> store_ ABSL_GUARDED_BY(store_mu_);  // null until CreateVariables

  // Requests holding a server thread while they wait for a step (Pull or PushPull with
  // min_step), per task: bounded so that one peer cannot pin every thread of the ps.
  mutable Mutex waiting_mu_;
  absl::flat_hash_map<std::string, int> waiting_ ABSL_GUARDED_BY(waiting_mu_);
  // Takes a waiting slot for `task` (released by the returned guard), or ResourceExhausted
  // when the task already holds kMaxWaitingPerChunk per chunk (+ kWaitingSlack).
  class WaitSlot;
  absl::StatusOr<std::unique_ptr<WaitSlot>> TakeWaitSlot(const Store& store,
                                                         const std::string& task,
                                                         const char* method);
  Mutex dedup_mu_;
  // (NameHash(task), request_id) of past pushes, and their arrival order for eviction.
  absl::flat_hash_set<std::pair<uint64_t, uint64_t>> dedup_seen_ ABSL_GUARDED_BY(dedup_mu_);
  std::deque<std::pair<uint64_t, uint64_t>> dedup_order_ ABSL_GUARDED_BY(dedup_mu_);

  // The pending sync snapshot (SaveShard with at_step); lock order: chunk locks first.
  Mutex snapshot_mu_;
  CondVar snapshot_taken_;  // a chunk was captured, the shard stopped or a restore aborted it
  std::shared_ptr<Snapshot> snapshot_ ABSL_GUARDED_BY(snapshot_mu_);
  std::atomic<bool> snapshot_pending_{false};  // snapshot_ != null, readable without the lock
  std::atomic<bool> saving_{false};            // a SaveShard is running
  std::atomic<int64_t> saves_{0};              // SaveShard calls that wrote their file
  std::atomic<int64_t> checkpoint_pause_ns_{0};      // all saves' in-memory copy time
  std::atomic<int64_t> checkpoint_pause_max_ns_{0};  // the longest one
  std::atomic<int64_t> last_pause_ns_{0};            // the latest one (its log line)

  // Leaving (ps/shard_leave.cc): why, and whether the ps has left.
  mutable Mutex leave_mu_;
  std::string leaving_ ABSL_GUARDED_BY(leave_mu_);
  std::atomic<bool> left_{false};
  // Unavailable naming the ps and why it left (left() must be true).
  absl::Status LeftError(const char* method) const;

  // --replicate_shards (ps/shard_replica.cc).
  std::unique_ptr<Replicator> replicator_;
  std::atomic<bool> replicating_{false};  // a replicator is set and its backup answers
  mutable Mutex replica_mu_;
  std::string replication_lost_ ABSL_GUARDED_BY(replica_mu_);
  std::atomic<int64_t> replica_forwards_{0};
  std::atomic<int64_t> replica_forward_ns_{0};
  // The backup was promoted in this shard's place: a push that saw it makes the shard leave
  // once it released its chunk lock.
  std::atomic<bool> fenced_{false};
  // Marks replication lost for `why` (logged once).
  void LoseReplication(const std::string& why);

  Counters counters_;
  EmptyPushGuard empty_pushes_;
  std::atomic<int> large_pings_{0};  // Ping replies > kLargePing being built
  NonFinitePolicy nonfinite_policy_ = NonFinitePolicy::kError;
  absl::flat_hash_set<std::string> known_tasks_;
  std::string checkpoint_root_;
  bool refuse_checkpoints_ = false;
};

}  // namespace fulcrum::ps
