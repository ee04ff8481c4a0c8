// runtime: the one flag set that ps, worker and chief all accept (TensorFlow's names), the
// command-line parser that turns a bad flag into exit code 2, and the validated options the
// flags describe. Thread-safety: call from main() before starting threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "data/load.h"
#include "data/pipeline.h"
#include "nlohmann/json_fwd.hpp"
#include "ops/cpu/conv_planner.h"
#include "ops/device.h"
#include "ops/optimizer.h"
#include "profiler/options.h"
#include "proto/ps.pb.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/cluster/placement.h"
#include "runtime/grpc/security.h"

namespace fulcrum::runtime {

// Parses argv with Abseil's parser: --name=value, --name value, --bool/--nobool, -name;
// --flagfile=F1,F2 (one flag a line, '#' comments), --fromenv=a,b (from $FLAGS_a, $FLAGS_b),
// --tryfromenv, --undefok. `usage` heads the help text. --help lists every flag of this
// binary with its help text and default and exits 0 (--helpfull, --help=substring as Abseil
// does). An unknown flag, a value that does not parse, a flagfile that cannot be read, a
// --fromenv variable that is not set or a positional argument prints "<program>: <what is
// wrong>" to stderr and exits with code 2 (kExitBadInput). Call once, first in main().
void ParseFlagsOrExit(int argc, char** argv, absl::string_view usage);

// Prints "<program>: <status message>" to stderr and returns kExitBadInput: what main()
// returns when the flags parse but do not validate (the *FromFlags functions below).
int ReportBadFlags(const absl::Status& status);

// Options of a training run, validated (see TrainingOptionsFromFlags).
struct TrainingOptions {
  std::string model = "logreg";
  double model_width = 1.0;
  int64_t batch_size = 128;
  ops::OptimizerConfig optimizer;
  int64_t train_steps = 0;  // exactly one of train_steps and epochs is > 0
  double epochs = 0.0;
  data::DatasetKind dataset = data::DatasetKind::kMnist;
  std::string data_dir;
  std::string run_dir;
  // --overwrite: a --run_dir holding a finished run's records may be reused (they are
  // replaced); without it the run owner refuses it (runtime/config/run_dir.h).
  bool overwrite = false;
  uint64_t seed = 1;
  int threads = 1;
  ops::ConvAlgo conv_algo = ops::ConvAlgo::kAuto;  // --conv_algo
  int64_t log_every = 100;
  // --watchdog_secs, single mode (worker/single_trainer.cc; a cluster's is ClusterOptions').
  absl::Duration watchdog_min = absl::Seconds(30);
  bool eval = true;
  int64_t eval_batch_size = 1000;
  int64_t train_subset = 0;
  int64_t dataset_repeat = 1;
  int64_t synthetic_examples = 60000;
  std::vector<int64_t> synthetic_shape = {28, 28, 1};  // one example, H, W, C
  int synthetic_classes = 10;
  // L2 weight decay: unset = each variable's own (as the model declares it); set = this
  // coefficient on every kernel and none on biases (--weight_decay).
  std::optional<double> weight_decay;
  data::PipelineKind input_pipeline = data::PipelineKind::kPlain;
  int crop_size = 24;                    // input_pipeline cifar10
  ops::DeviceId device;                  // --device
  std::vector<ops::DeviceId> devices;    // --devices; empty = {device}
  bool tf32 = false;                     // --tf32=on: TF32 tensor-core math on GPUs
  bool prefetch = true;                  // --prefetch: batches gathered on a loader thread
};

// Reads and validates the flags; InvalidArgument names the flag and what is wrong.
absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags();

// The dataset the options describe.
data::SourceOptions DataSource(const TrainingOptions& options);

// Adds the settings of the optimizer extras, weight decay and input pipeline to a summary or
// report: "learning_rate_decay" ({rate, steps, staircase}, null when off), "rmsprop"
// ({decay, momentum, epsilon}, rmsprop only), "weight_decay" ("model" or the number),
// "input_pipeline", "crop_size" (null when plain).
void AddTrainingSettings(const TrainingOptions& options, nlohmann::json* j);

// The shortest decimal that reads back as `value`, as a double for JSON: 0.01f gives 0.01, not
// 0.009999999776482582 (float hyperparameters in summaries and reports).
double ExactDecimal(float value);

// kSsp: stale synchronous parallel (bounded staleness): applied as in async, but no worker
// runs more than `staleness` steps ahead of the slowest (ps/staleness.h).
enum class SyncMode { kAsync, kSync, kSsp };

// "sync", "async" or "ssp": the flag's spelling, used in logs, summaries and reports.
inline const char* ModeName(SyncMode mode) {
  switch (mode) {
    case SyncMode::kSync:
      return "sync";
    case SyncMode::kSsp:
      return "ssp";
    case SyncMode::kAsync:
      break;
  }
  return "async";
}

// The enum-valued flags, parsed by Abseil (base/enum_flag.h): --mode, --async_pull,
// --data_plane, --nonfinite. A wrong spelling exits 2 while the command line is parsed,
// naming the valid ones ("--mode=lockstep: expected sync, async or ssp").
bool AbslParseFlag(absl::string_view text, SyncMode* mode, std::string* error);
std::string AbslUnparseFlag(SyncMode mode);
// --async_pull: where an async worker's values for a step come from.
enum class AsyncPull { kAtStepStart, kWithPush, kBeforeStep };
bool AbslParseFlag(absl::string_view text, AsyncPull* pull, std::string* error);
std::string AbslUnparseFlag(AsyncPull pull);
// --data_plane: auto (tcp without TLS, grpc with it), grpc or tcp.
enum class DataPlane { kAuto, kGrpc, kTcp };
bool AbslParseFlag(absl::string_view text, DataPlane* plane, std::string* error);
std::string AbslUnparseFlag(DataPlane plane);
// --nonfinite: what a ps does with a NaN or Inf gradient.
enum class NonFiniteAction { kError, kSkip };
bool AbslParseFlag(absl::string_view text, NonFiniteAction* action, std::string* error);
std::string AbslUnparseFlag(NonFiniteAction action);

// --staleness: its default with --mode=ssp, and its largest value.
inline constexpr int64_t kDefaultStaleness = 3;
inline constexpr int64_t kMaxStaleness = 1000000;

// The hosts as the chief's what-if predictions take them (chief/whatif.h); 0 = not known.
struct HostModel {
  double link_bits_per_sec = 0.0;  // --link_rate, per direction
  double link_burst_bytes = 0.0;   // --link_burst_bytes: passed at once before the rate applies
  double host_cpus = 0.0;          // --host_cpus: each host's cores
};

struct ClusterOptions;
// "at_step_start", "with_push" or "before_step": --async_pull, for logs, summaries, reports.
const char* AsyncPullName(const ClusterOptions& c);

// Options of a distributed run (ps, worker and chief read the same ones), validated.
struct ClusterOptions {
  TaskConfig task;
  SyncMode mode = SyncMode::kAsync;
  int replicas_to_aggregate = 0;  // resolved: --replicas_to_aggregate or the worker count
  int64_t staleness = 0;          // ssp: --staleness (kDefaultStaleness when not given); else 0
  // --async_pull=before_step (async only): a worker reads the values with a Pull of its own
  // at the start of each step instead of taking those its PushPull returned right after its
  // own gradient was applied (fewer updates by others land between a gradient's read and
  // its apply, at the cost of one more RPC per chunk and step; docs/distributed.md).
  bool pull_before_step = false;
  // --async_pull=at_step_start (the default; async with --overlap): each chunk's push-pull
  // carries no values back; the chunk is pulled when the next step begins (after this
  // worker's own gradient of it was applied), as TensorFlow's async workers read their
  // variables at the start of a step, and the forward pass waits layer by layer.
  bool reads_at_step_start = false;
  // --staleness_aware_lr (async and ssp): the ps divides the learning rate of each push by
  // 1 + the push's staleness on that chunk (ps/shard.h; docs/distributed.md).
  bool staleness_aware_lr = false;
  PlacementStrategy placement = PlacementStrategy::kRoundRobin;
  int64_t partition_min_bytes = 256 << 10;
  int64_t chunk_bytes = 2 << 20;
  // --wire_dtype: how workers' gradients and the values sent back travel (f32 exact; bf16 and
  // fp16 halve the bytes and round each value).
  pb::WireDtype wire_dtype = pb::WIRE_F32;
  // --data_plane=tcp (and auto without TLS): Pull, Push and PushPull go over a plain TCP
  // connection per worker and ps (transport/tcp_wire.h) instead of gRPC; a ps then serves that
  // plane. Never with TLS.
  bool tcp_data_plane = false;
  // --overlap: a worker's transfers overlap its backward and forward passes
  // (worker/train_loop.h); a choice of each worker, not checked against the chief's.
  bool overlap = true;
  absl::Duration startup_timeout = absl::Seconds(120);
  absl::Duration step_timeout = absl::Seconds(60);
  absl::Duration heartbeat_timeout = absl::Seconds(60);
  absl::Duration watchdog_min = absl::Seconds(30);  // --watchdog_secs (chief/watchdog.h)
  int64_t eval_every = 100;      // global steps between the chief's evaluations; 0 = end only
  double target_accuracy = 0.0;  // stop once test accuracy reaches it; 0 = off
  // What the chief's what-if predictions take the hosts to be (chief/whatif.h).
  HostModel hosts;
  // --nonfinite=skip: a ps skips (and counts) a push holding a NaN or an Inf; error (the
  // default) refuses it.
  bool nonfinite_skip = false;
  // --checkpoint_dir: where the chief keeps checkpoints and a ps may save and restore its
  // shard; empty = no checkpoints.
  std::string checkpoint_dir;
  int64_t checkpoint_every_steps = 0;                    // 0 = not by steps
  absl::Duration checkpoint_every = absl::Seconds(600);  // 0 = not by time
  int keep_checkpoints = 5;
  // --recovery_timeout: with a checkpoint_dir, how long the chief waits for a dead ps to come
  // back (then restores every ps from the newest checkpoint) and workers wait for that; zero
  // (or no checkpoint_dir) = a dead ps ends the run.
  absl::Duration recovery_timeout = absl::Seconds(120);
  bool recovers() const {
    return !checkpoint_dir.empty() && recovery_timeout > absl::ZeroDuration();
  }
  // --replicate_shards (runtime/config/replication_flags.cc): ps i's shard has a replica on ps
  // (i + 1) mod n, updated after aggregation; the chief promotes it when ps i dies.
  bool replicate_shards = false;
  // --tls_cert/--tls_key/--tls_ca/--auth_token_file, loaded and checked (runtime/grpc/security.h);
  // default: insecure.
  TransportSecurity security;
};

// The profiler flags: --profile=on|off, --profile_interval_ms, --metrics_port.
struct ProfileFlags {
  bool enabled = true;
  absl::Duration interval = absl::Milliseconds(500);
  absl::Duration flush_interval = absl::Seconds(5);      // --profile_flush_secs; 0 = at the end
  absl::Duration metrics_linger = absl::ZeroDuration();  // --metrics_linger_secs
  // < 0: no Prometheus endpoint; 0: any free port; P > 0: see ProfilerOptionsFor.
  int metrics_port = -1;
  std::string metrics_bind;  // --metrics_bind; empty = the task's own host
};
absl::StatusOr<ProfileFlags> ProfileFlagsFromFlags();

// The profiler options of one task writing into `task_dir`. With --metrics_port=P > 0 the
// tasks of a cluster listen on P + their position in the spec (chief first, then ps, then
// worker tasks in index order), so one command line serves every task of a host; a task
// without a cluster (single mode) listens on P.
profiler::ProfilerOptions ProfilerOptionsFor(const ProfileFlags& flags, const ClusterSpec* cluster,
                                             const std::string& job, int task_index,
                                             const std::string& task_dir);

// Every validated option of one task of a cluster (ps, chief, or a worker with a cluster).
struct TaskOptions {
  TrainingOptions training;
  ClusterOptions cluster;
  ProfileFlags profile;
};

// Reads and validates the training, cluster and profile flags of a task whose own role is
// `default_job` ("ps", "worker" or "chief"); the first InvalidArgument found. The ps never
// trains, so for it --train_steps and --epochs may both be unset (training then holds
// train_steps = 1, a placeholder).
absl::StatusOr<TaskOptions> TaskOptionsFromFlags(absl::string_view default_job);

// True when --cluster_spec or TF_CONFIG is set (the worker trains alone otherwise).
bool ClusterRequested();

// "1gbit", "500mbit", "100kbit", "8bit" or a plain number: a link rate in bits/s
// (--link_rate). InvalidArgument naming the text otherwise.
absl::StatusOr<double> ParseLinkRate(absl::string_view text);
// --link_rate, --link_burst_bytes and --host_cpus (0 when not given); InvalidArgument naming
// the flag when one is malformed.
absl::StatusOr<HostModel> HostModelFromFlags();

// Reads and validates the cluster flags and spec for a process whose own role is
// `default_job`; InvalidArgument names the flag, file or TF_CONFIG and what is wrong.
absl::StatusOr<ClusterOptions> ClusterOptionsFromFlags(absl::string_view default_job);
// Reads and checks --replicate_shards into `o` (whose mode and cluster are read already):
// InvalidArgument naming the ps count for fewer than 2 ps tasks, and for ssp.
absl::Status ReplicationFromFlags(ClusterOptions& o);
// Reads and checks --device, --devices, --tf32 and --prefetch into `o`
// (runtime/config/device_flags.cc): InvalidArgument naming the flag for a device that does not
// parse and for --tf32=on without a GPU among the devices.
absl::Status DeviceFromFlags(TrainingOptions& o);

// The options of the chief that worker 0 runs in-process when the spec has no chief job
// (TensorFlow 1.x's layout): `worker0`'s, as task chief:0 (listening at worker 0's address),
// with the security flags loaded for chief:0 ("{task}" = chief-0). InvalidArgument as
// ClusterOptionsFromFlags.
absl::StatusOr<ClusterOptions> EmbeddedChiefOptions(const ClusterOptions& worker0);

// The settings every task of a cluster must agree on, one "name=value" per line, in a
// fixed order. The chief refuses a task whose fingerprint differs (naming the settings).
std::string ConfigFingerprint(const TrainingOptions& training, const ClusterOptions& cluster);
// The lines on which two fingerprints differ, "name: a vs b", joined by "; ".
std::string FingerprintDifference(const std::string& mine, const std::string& theirs);

// Global steps of a cluster run: --train_steps, or --epochs converted with the training
// set's size: one global step consumes batch_size examples (async) or batch_size x
// replicas_to_aggregate examples (sync).
int64_t GlobalTrainSteps(const TrainingOptions& training, const ClusterOptions& cluster,
                         int64_t train_examples);

}  // namespace fulcrum::runtime
