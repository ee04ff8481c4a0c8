// chief: checkpoints of a cluster run, as TF's MonitoredTrainingSession keeps them. The chief
// coordinates a save of every ps shard into <checkpoint_dir>/ckpt-<step>/ps-<i>.ckpt (each ps
// writes its own file, atomically and fsynced), then writes that folder's manifest.json: the
// step, the job's layout fingerprint and every shard file's size and CRC-32C, with a CRC of the
// manifest itself. A checkpoint exists once its manifest does; only the newest
// --keep_checkpoints are kept. A job started on a folder holding checkpoints restores the
// newest intact one into every ps before training starts; a checkpoint whose manifest or shard
// file is corrupt or missing is refused (logged, naming the file) and the next older is tried.
//
// Consistency: in sync mode the chief asks every ps, at once, to save the same future global
// step (each chunk is captured when it reaches it: ps/shard.h SaveShard), so the checkpoint is
// one step of the whole model while training goes on. In async mode there is no such step: each
// ps saves its current state (as TF's Saver does), and the manifest's step is the smallest.
// The final checkpoint, after the ps tasks stopped, is the state they stopped in.
//
// Every ps must be given the same --checkpoint_dir path (a shared file system, or the same local
// path on each node: each ps writes and reads only its own files, the chief only the
// manifests). Thread-safety: one caller at a time (the chief's run loop).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"

namespace fulcrum::chief {

class PsTasks;

// What a resumed job restored.
struct Restored {
  int64_t global_step = 0;
  std::string folder;                // <checkpoint_dir>/ckpt-<step>
  std::vector<std::string> refused;  // newer checkpoints refused, each "file: why"
};

// One manifest.json, parsed and checked.
struct Manifest {
  int64_t global_step = 0;
  std::string run_id;
  std::string model;
  std::string layout;  // LayoutFingerprint of the job that wrote it
  struct Shard {
    int ps = 0;
    std::string path;  // the file's name in the checkpoint folder ("ps-0.ckpt")
    int64_t bytes = 0;
    uint32_t crc32c = 0;
    int64_t global_step = 0;
  };
  std::vector<Shard> shards;  // by ps index
};

// A fingerprint of what a checkpoint must match to be restored into a job: the number of ps
// tasks and each shard's variables (names, shapes, rows), chunking and optimizer kind. Learning
// rates, mode, worker count and step counts may differ between the saving and resuming jobs.
std::string LayoutFingerprint(const std::vector<pb::CreateVariablesRequest>& shards);

// Reads and checks <folder>/manifest.json. DataLoss naming the file when it does not parse,
// misses a field or its CRC does not match; NotFound when it is missing.
absl::StatusOr<Manifest> ReadManifest(const std::filesystem::path& folder);
// Writes `manifest` to <folder>/manifest.json atomically (temporary file, fsync, rename).
absl::Status WriteManifest(const std::filesystem::path& folder, const Manifest& manifest);
// The checkpoint folders (ckpt-<step>) under `dir` that hold a manifest.json, newest first.
std::vector<std::filesystem::path> ListCheckpoints(const std::filesystem::path& dir);

struct CheckpointOptions {
  std::string dir;                              // --checkpoint_dir ("" = no checkpoints)
  int64_t every_steps = 0;                      // --checkpoint_every_steps (0 = not by steps)
  absl::Duration every = absl::ZeroDuration();  // --checkpoint_every_secs (0 = not by time)
  int keep = 5;                                 // --keep_checkpoints
  bool sync = false;                            // sync mode: saves are of one global step
  absl::Duration timeout = absl::Seconds(60);   // per save (--step_timeout)
};

class Checkpointer {
 public:
  // `shards` are the definitions the ps tasks were created with (by ps index); `ps` is not
  // owned and outlives this.
  Checkpointer(CheckpointOptions options, PsTasks* ps, std::string run_id, std::string model,
               const std::vector<pb::CreateVariablesRequest>& shards);

  bool enabled() const { return !options_.dir.empty(); }

  // Restores the newest intact checkpoint of the folder into every ps. nullopt when the folder
  // holds none (a fresh job). InvalidArgument when the newest manifest is of another job
  // (another model or layout: the flags or the folder are wrong), DataLoss naming every file
  // refused when checkpoints exist but none is intact.
  absl::StatusOr<std::optional<Restored>> RestoreLatest();

  // Whether a periodic save is due at global step `step` (by steps or by time).
  bool Due(int64_t step, absl::Time now) const;
  // Saves a checkpoint. `step` is the cluster's global step now; in sync mode with `stopped`
  // false the save is of a step a little ahead (chosen from `steps_per_sec`), else of the
  // current state. Returns the checkpoint's step, or -1 when the run ends before the step a
  // sync save would aim at (the final checkpoint comes then). The manifest is written only when
  // every ps saved; older checkpoints beyond --keep_checkpoints are then removed. A save that
  // fails leaves no folder: what the ps tasks wrote is removed (here at once, and by each ps
  // with its next save).
  absl::StatusOr<int64_t> Save(int64_t step, double steps_per_sec, bool stopped, int64_t last_step);
  // The checkpoint of the freshly initialised variables (ckpt-0), before any worker trains:
  // a ps lost before the first periodic save is restored from it.
  absl::StatusOr<int64_t> SaveInitial() { return SaveAt(0, 0); }

  int saves() const { return saves_; }
  int64_t last_saved_step() const { return last_saved_step_; }

 private:
  // Saves global step at_step (sync), or the current state when at_step is 0; `step` is the
  // cluster's step now.
  absl::StatusOr<int64_t> SaveAt(int64_t at_step, int64_t step);
  // Keeps the newest --keep_checkpoints valid checkpoints; removes older ones and folders
  // without a valid manifest older than the newest valid one.
  void Prune();

  const CheckpointOptions options_;
  PsTasks* const ps_;
  const std::string run_id_;
  const std::string model_;
  const std::string layout_;
  int saves_ = 0;
  int64_t last_saved_step_ = -1;
  absl::Time last_save_time_;
  // Shard files of pruned checkpoints each ps is still to delete on its own disk (sent with
  // its next save), by ps index.
  std::vector<std::vector<std::string>> pending_removals_;
};

}  // namespace fulcrum::chief
