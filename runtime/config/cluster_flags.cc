// runtime: the cluster's flags (the spec, the job and task, mode, placement, checkpoints and
// recovery, the transports' settings, timeouts, evaluation), defined beside the code that
// reads them: ClusterOptionsFromFlags, TaskOptionsFromFlags, the config fingerprint.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/enum_flag.h"
#include "base/status_macros.h"
#include "runtime/config/flags.h"
#include "runtime/config/flags_internal.h"
#include "runtime/frames/wire_frame.h"

// Defined in runtime/config/flags.cc (read there too).
ABSL_DECLARE_FLAG(int32_t, task_index);
ABSL_DECLARE_FLAG(double, watchdog_secs);

// Cluster flags (TensorFlow's names where TensorFlow has one).
ABSL_FLAG(std::string, cluster_spec, "",
          "ClusterSpec JSON file {\"chief\": [...], \"ps\": [...], \"worker\": [...]}; "
          "without it TF_CONFIG is read, and without either the worker trains alone.");
// TensorFlow 1.x scripts' way (tf.app.flags in the classic distributed MNIST example).
ABSL_FLAG(std::string, ps_hosts, "",
          "TensorFlow 1.x style, instead of --cluster_spec: the ps tasks, host:port,host:port "
          "(give --worker_hosts too).");
ABSL_FLAG(std::string, worker_hosts, "",
          "TensorFlow 1.x style: the worker tasks, host:port,...; without --chief_hosts worker 0 "
          "is also the chief.");
ABSL_FLAG(std::string, chief_hosts, "",
          "TensorFlow 1.x style: the chief task's host:port (optional; --master_hosts is the "
          "same).");
ABSL_FLAG(std::string, master_hosts, "",
          "TensorFlow 1.x style: the master (chief) task's host:port; same as --chief_hosts.");
ABSL_FLAG(std::string, job_name, "",
          "This task's job: chief, ps or worker (default: the binary's).");
ABSL_FLAG(fulcrum::runtime::SyncMode, mode, fulcrum::runtime::SyncMode::kAsync,
          "Distributed training: sync (aggregate, like "
          "SyncReplicasOptimizer), async (apply each push on arrival) or ssp (stale synchronous "
          "parallel: async, but no worker runs more than --staleness steps ahead of the "
          "slowest).");
ABSL_FLAG(std::optional<int64_t>, staleness, std::nullopt,
          "With --mode=ssp: the steps a worker may run ahead of the slowest worker (0 = "
          "lock-step; default 3). Only with --mode=ssp.");
ABSL_FLAG(int32_t, replicas_to_aggregate, 0,
          "Sync mode: gradients aggregated per step (default: the number of workers; fewer "
          "makes the rest backup workers).");
ABSL_FLAG(fulcrum::runtime::AsyncPull, async_pull, fulcrum::runtime::AsyncPull::kAtStepStart,
          "Async mode: where a worker's values for a step come from: at_step_start (default, "
          "TensorFlow's PS reads: each chunk is pulled when the step begins, once this worker's "
          "own gradient of it was applied, and the forward pass waits layer by layer), "
          "with_push (the values each chunk's PushPull returns right after its gradient was "
          "applied, mid-backward under --overlap: staler) or before_step (a whole Pull before "
          "each step, no overlap).");
ABSL_FLAG(bool, staleness_aware_lr, false,
          "Async and ssp modes: the ps applies each pushed gradient with the learning rate "
          "divided by 1 + its staleness (the updates other workers applied to that chunk "
          "since the values the gradient was computed at were read; Zhang et al., "
          "staleness-aware async SGD, 2016). Off: every push at the full learning rate, as "
          "TensorFlow's async PS does.");
ABSL_FLAG(fulcrum::runtime::PlacementStrategy, placement,
          fulcrum::runtime::PlacementStrategy::kRoundRobin,
          "Variable placement over PS tasks: round_robin, greedy (byte-balanced) or partition.");
ABSL_FLAG(int64_t, partition_min_bytes, 256 << 10,
          "--placement=partition splits variables larger than this along their first axis.");
ABSL_FLAG(
    std::string, checkpoint_dir, "",
    "Checkpoints: the chief saves every ps's shard into ckpt-<step>/ folders here (give every "
    "task the same path) and a job started on a folder holding one resumes from it; a ps "
    "refuses SaveShard and RestoreShard paths outside it (empty: no checkpoints).");
ABSL_FLAG(int64_t, checkpoint_every_steps, 0,
          "The chief saves a checkpoint into --checkpoint_dir every this many global steps "
          "(0 = not by steps).");
ABSL_FLAG(double, checkpoint_every_secs, 600,
          "The chief saves a checkpoint into --checkpoint_dir every this many seconds (0 = not "
          "by time); a final one is saved when the run ends either way.");
ABSL_FLAG(int32_t, keep_checkpoints, 5,
          "How many checkpoints (the newest) the chief keeps in --checkpoint_dir.");
ABSL_FLAG(double, recovery_timeout, 120,
          "With --checkpoint_dir: seconds the chief waits for a ps that died to be restarted (by "
          "hand or a launcher) before it restores every ps from the newest checkpoint, and "
          "workers wait for that restore (0 = no recovery: a dead ps ends the run).");
ABSL_FLAG(fulcrum::runtime::NonFiniteAction, nonfinite, fulcrum::runtime::NonFiniteAction::kError,
          "What a ps does with a pushed gradient holding a NaN or an Inf: error (refuse it, the "
          "pusher fails) or skip (apply nothing, count it in pushes_nonfinite).");
ABSL_FLAG(int64_t, rpc_chunk_bytes, 2 << 20,
          "Largest piece of a shard sent in one RPC (pieces go out in parallel).");
ABSL_FLAG(fulcrum::pb::WireDtype, wire_dtype, fulcrum::pb::WIRE_F32,
          "How gradients and values travel between workers and ps tasks: f32 (exact, sent from "
          "the tensors without a copy), bf16 or fp16 (16-bit, half the bytes, each value rounded "
          "to nearest even; the ps keeps float32).");
ABSL_FLAG(fulcrum::runtime::DataPlane, data_plane, fulcrum::runtime::DataPlane::kAuto,
          "How Pull, Push and PushPull travel between workers and ps tasks: tcp (one plain TCP "
          "connection per worker and ps beside the gRPC channel, opened with a one-use ticket "
          "from the ps's gRPC service; no HTTP/2, faster, unencrypted), grpc (on the task's gRPC "
          "channel, TLS when the TLS flags are given), or auto (the default: tcp, or grpc with "
          "--tls_cert). A ps with tcp listens for it on a port the kernel picks; a worker with "
          "tcp needs its ps tasks to run with tcp.");
ABSL_FLAG(bool, overlap, true,
          "Cluster workers: send each chunk of gradients as soon as the backward pass has made "
          "it final, and start each layer of the next forward pass as soon as its values are "
          "in (false: push and pull the whole model between steps).");
ABSL_FLAG(double, startup_timeout, 120, "Seconds to wait for every task of the cluster.");
ABSL_FLAG(double, step_timeout, 60,
          "Seconds a worker waits for a PS (e.g. for a sync step to complete) before failing.");
ABSL_FLAG(double, heartbeat_timeout, 60,
          "Seconds without a sign of life before it counts as lost: a ps without the chief "
          "exits, the chief names a worker it no longer hears from, and fails a run whose "
          "global step made no progress (raise it when one step takes longer, e.g. AlexNet's "
          "first steps on CPUs).");
ABSL_FLAG(int64_t, eval_every, 100,
          "The chief evaluates on the test set every this many global steps (0 = at the end).");
ABSL_FLAG(double, target_accuracy, 0,
          "Stop once the chief's test accuracy reaches this (0 = train --train_steps).");
ABSL_FLAG(std::string, link_rate, "",
          "The hosts' link rate per direction (1gbit, 500mbit, ...), for the chief's what-if "
          "predictions of faster and slower links; empty: not known (those are skipped).");
ABSL_FLAG(double, link_burst_bytes, 0,
          "Bytes the hosts' links pass at once before their rate applies (a token bucket's "
          "burst: scripts/netns_hosts.sh gives max(1 ms at the rate, 64 KiB)), for the chief's "
          "what-if predictions; 0: none, as a plain NIC.");
ABSL_FLAG(double, host_cpus, 0,
          "Each host's CPU cores (netns_hosts.sh --cpus), for the chief's what-if predictions; "
          "0: one core.");

namespace fulcrum::runtime {

using flags_internal::Positive;
using flags_internal::ReadTrainingOptions;
using flags_internal::Seconds;
using flags_internal::SecurityFlagsFromFlags;

namespace {

std::vector<HostsFlag> HostsFlags() {
  return {{"chief_hosts", kChiefJob, absl::GetFlag(FLAGS_chief_hosts)},
          {"master_hosts", "master", absl::GetFlag(FLAGS_master_hosts)},
          {"ps_hosts", kPsJob, absl::GetFlag(FLAGS_ps_hosts)},
          {"worker_hosts", kWorkerJob, absl::GetFlag(FLAGS_worker_hosts)}};
}

// The host flags given, "--ps_hosts --worker_hosts"; empty when none is.
std::string HostsFlagsGiven() {
  std::vector<std::string> given;
  for (const HostsFlag& f : HostsFlags()) {
    if (!f.value.empty()) given.push_back(absl::StrCat("--", f.flag));
  }
  return absl::StrJoin(given, " ");
}

// The task from --cluster_spec, the host flags or TF_CONFIG (in that order; a flag wins over
// the environment, and --cluster_spec with host flags is refused).
absl::StatusOr<TaskConfig> ResolveTaskFromFlags(absl::string_view default_job) {
  const std::string spec_path = absl::GetFlag(FLAGS_cluster_spec);
  const std::string hosts = HostsFlagsGiven();
  if (hosts.empty()) {
    return ResolveTask(spec_path, std::getenv("TF_CONFIG"), absl::GetFlag(FLAGS_job_name),
                       absl::GetFlag(FLAGS_task_index), default_job);
  }
  if (!spec_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cluster_spec=", spec_path, " and ", hosts,
                     " both describe the cluster: give --cluster_spec or the host flags"));
  }
  FULCRUM_ASSIGN_OR_RETURN(ClusterSpec spec, ClusterSpecFromHosts(HostsFlags()));
  return ResolveTaskInSpec(std::move(spec), hosts, absl::GetFlag(FLAGS_job_name),
                           absl::GetFlag(FLAGS_task_index), default_job);
}

constexpr EnumName<SyncMode> kModes[] = {
    {SyncMode::kSync, "sync"}, {SyncMode::kAsync, "async"}, {SyncMode::kSsp, "ssp"}};
constexpr EnumName<AsyncPull> kAsyncPulls[] = {{AsyncPull::kAtStepStart, "at_step_start"},
                                               {AsyncPull::kWithPush, "with_push"},
                                               {AsyncPull::kBeforeStep, "before_step"}};
constexpr EnumName<DataPlane> kDataPlanes[] = {
    {DataPlane::kAuto, "auto"}, {DataPlane::kGrpc, "grpc"}, {DataPlane::kTcp, "tcp"}};
constexpr EnumName<NonFiniteAction> kNonFiniteActions[] = {{NonFiniteAction::kError, "error"},
                                                           {NonFiniteAction::kSkip, "skip"}};

}  // namespace

bool AbslParseFlag(absl::string_view text, SyncMode* mode, std::string* error) {
  return ParseEnum(text, kModes, mode, error);
}
std::string AbslUnparseFlag(SyncMode mode) { return UnparseEnum(mode, kModes); }
bool AbslParseFlag(absl::string_view text, AsyncPull* pull, std::string* error) {
  return ParseEnum(text, kAsyncPulls, pull, error);
}
std::string AbslUnparseFlag(AsyncPull pull) { return UnparseEnum(pull, kAsyncPulls); }
bool AbslParseFlag(absl::string_view text, DataPlane* plane, std::string* error) {
  return ParseEnum(text, kDataPlanes, plane, error);
}
std::string AbslUnparseFlag(DataPlane plane) { return UnparseEnum(plane, kDataPlanes); }
bool AbslParseFlag(absl::string_view text, NonFiniteAction* action, std::string* error) {
  return ParseEnum(text, kNonFiniteActions, action, error);
}
std::string AbslUnparseFlag(NonFiniteAction action) {
  return UnparseEnum(action, kNonFiniteActions);
}

bool ClusterRequested() {
  const char* tf_config = std::getenv("TF_CONFIG");
  return !absl::GetFlag(FLAGS_cluster_spec).empty() || !HostsFlagsGiven().empty() ||
         (tf_config != nullptr && *tf_config);
}

namespace {

// --mode and how steps are made: ssp's staleness, sync's replicas, async's reads, the
// staleness-aware learning rate.
absl::Status ReadSchedule(ClusterOptions& o) {
  o.mode = absl::GetFlag(FLAGS_mode);
  const char* const mode = ModeName(o.mode);
  const std::optional<int64_t> staleness = absl::GetFlag(FLAGS_staleness);
  if (staleness && o.mode != SyncMode::kSsp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--staleness=", *staleness, " is given with --mode=", mode, ": it needs --mode=ssp"));
  }
  if (staleness && (*staleness < 0 || *staleness > kMaxStaleness)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--staleness=", *staleness, ": must be between 0 and ", kMaxStaleness));
  }
  o.staleness = o.mode == SyncMode::kSsp ? staleness.value_or(kDefaultStaleness) : 0;
  const int workers = o.task.cluster.num_tasks(kWorkerJob);
  o.replicas_to_aggregate = absl::GetFlag(FLAGS_replicas_to_aggregate);
  if (o.replicas_to_aggregate == 0) o.replicas_to_aggregate = workers;
  if (o.replicas_to_aggregate < 1 || o.replicas_to_aggregate > workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replicas_to_aggregate=", o.replicas_to_aggregate,
                     ": must be between 1 and the ", workers, " worker(s) of the cluster spec"));
  }
  const AsyncPull async_pull = absl::GetFlag(FLAGS_async_pull);
  o.pull_before_step = async_pull == AsyncPull::kBeforeStep;
  o.reads_at_step_start = async_pull == AsyncPull::kAtStepStart;
  if (o.pull_before_step && o.mode == SyncMode::kSync) {
    return absl::InvalidArgumentError(
        "--async_pull=before_step is for --mode=async (a sync step's values come with its push)");
  }
  o.staleness_aware_lr = absl::GetFlag(FLAGS_staleness_aware_lr);
  if (o.staleness_aware_lr && o.mode == SyncMode::kSync) {
    return absl::InvalidArgumentError(
        "--staleness_aware_lr is for --mode=async or ssp (a sync step applies the mean of "
        "gradients computed at the same values: nothing is stale)");
  }
  return absl::OkStatus();
}

// Placement, overlap, chunking, the wire's number format and the data plane (*data_plane as
// given: auto is decided once the security flags are read).
absl::Status ReadTransport(ClusterOptions& o, DataPlane* data_plane) {
  o.placement = absl::GetFlag(FLAGS_placement);
  o.partition_min_bytes = absl::GetFlag(FLAGS_partition_min_bytes);
  FULCRUM_RETURN_IF_ERROR(
      Positive("partition_min_bytes", static_cast<double>(o.partition_min_bytes)));
  o.overlap = absl::GetFlag(FLAGS_overlap);
  o.chunk_bytes = absl::GetFlag(FLAGS_rpc_chunk_bytes);
  if (o.chunk_bytes < 4 || o.chunk_bytes > (64 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rpc_chunk_bytes=", o.chunk_bytes, ": must be between 4 and 67108864"));
  }
  o.wire_dtype = absl::GetFlag(FLAGS_wire_dtype);
  *data_plane = absl::GetFlag(FLAGS_data_plane);
  o.tcp_data_plane = *data_plane == DataPlane::kTcp;  // auto: decided with the security flags
  return absl::OkStatus();
}

// The waits' deadlines, evaluation, and what a non-finite gradient does.
absl::Status ReadTimeouts(ClusterOptions& o) {
  FULCRUM_ASSIGN_OR_RETURN(o.startup_timeout,
                           Seconds("startup_timeout", absl::GetFlag(FLAGS_startup_timeout)));
  FULCRUM_ASSIGN_OR_RETURN(o.step_timeout,
                           Seconds("step_timeout", absl::GetFlag(FLAGS_step_timeout)));
  FULCRUM_ASSIGN_OR_RETURN(o.heartbeat_timeout,
                           Seconds("heartbeat_timeout", absl::GetFlag(FLAGS_heartbeat_timeout)));
  FULCRUM_ASSIGN_OR_RETURN(o.watchdog_min,
                           Seconds("watchdog_secs", absl::GetFlag(FLAGS_watchdog_secs)));
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  if (o.eval_every < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval_every=", o.eval_every, ": must not be negative"));
  }
  o.nonfinite_skip = absl::GetFlag(FLAGS_nonfinite) == NonFiniteAction::kSkip;
  return absl::OkStatus();
}

// Checkpoints, recovery and the target accuracy.
absl::Status ReadCheckpoints(ClusterOptions& o) {
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.checkpoint_every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  if (o.checkpoint_every_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every_steps=", o.checkpoint_every_steps, ": must not be negative"));
  }
  const double every_secs = absl::GetFlag(FLAGS_checkpoint_every_secs);
  if (!(every_secs >= 0 && every_secs <= 1e9)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpoint_every_secs=", every_secs, ": must be in [0, 1e9]"));
  }
  o.checkpoint_every = absl::Seconds(every_secs);
  o.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  if (o.keep_checkpoints < 1 || o.keep_checkpoints > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keep_checkpoints=", o.keep_checkpoints, ": must be between 1 and 100000"));
  }
  const double recovery_secs = absl::GetFlag(FLAGS_recovery_timeout);
  if (!(recovery_secs >= 0 && recovery_secs <= 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--recovery_timeout=", recovery_secs, ": must be in [0, 1e6] seconds"));
  }
  o.recovery_timeout = absl::Seconds(recovery_secs);
  o.target_accuracy = absl::GetFlag(FLAGS_target_accuracy);
  if (!(o.target_accuracy >= 0 && o.target_accuracy <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target_accuracy=", o.target_accuracy, ": must be in [0, 1]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> ParseLinkRate(absl::string_view text) {
  absl::string_view number = text;
  double unit = 1;
  for (const auto& [suffix, scale] : {std::pair<absl::string_view, double>{"gbit", 1e9},
                                      {"mbit", 1e6},
                                      {"kbit", 1e3},
                                      {"bit", 1}}) {
    if (absl::ConsumeSuffix(&number, suffix)) {
      unit = scale;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !(value > 0) || !(value * unit < 1e15)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--link_rate=", text, ": expected a positive rate like 1gbit, 500mbit or 1e9 (bits/s)"));
  }
  return value * unit;
}

absl::StatusOr<HostModel> HostModelFromFlags() {
  HostModel h;
  if (const std::string rate = absl::GetFlag(FLAGS_link_rate); !rate.empty()) {
    FULCRUM_ASSIGN_OR_RETURN(h.link_bits_per_sec, ParseLinkRate(rate));
  }
  h.link_burst_bytes = absl::GetFlag(FLAGS_link_burst_bytes);
  if (!(h.link_burst_bytes >= 0 && h.link_burst_bytes <= 1e12)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--link_burst_bytes=", h.link_burst_bytes, ": must be in [0, 1e12] bytes"));
  }
  h.host_cpus = absl::GetFlag(FLAGS_host_cpus);
  if (!(h.host_cpus >= 0 && h.host_cpus <= 4096)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--host_cpus=", h.host_cpus, ": must be in [0, 4096] cores"));
  }
  return h;
}

absl::StatusOr<ClusterOptions> ClusterOptionsFromFlags(absl::string_view default_job) {
  ClusterOptions o;
  FULCRUM_ASSIGN_OR_RETURN(o.task, ResolveTaskFromFlags(default_job));
  FULCRUM_RETURN_IF_ERROR(ReadSchedule(o));
  DataPlane data_plane = DataPlane::kAuto;
  FULCRUM_RETURN_IF_ERROR(ReadTransport(o, &data_plane));
  FULCRUM_RETURN_IF_ERROR(ReadTimeouts(o));
  FULCRUM_RETURN_IF_ERROR(ReadCheckpoints(o));
  FULCRUM_ASSIGN_OR_RETURN(o.hosts, HostModelFromFlags());
  const SecurityFlags security = SecurityFlagsFromFlags();
  FULCRUM_ASSIGN_OR_RETURN(
      o.security, TransportSecurity::Load(security, o.task.task_name(), o.task.dir_name()));
  FULCRUM_RETURN_IF_ERROR(o.security.CheckSpecReachableOnlyLocally(o.task.cluster));
  FULCRUM_RETURN_IF_ERROR(ReplicationFromFlags(o));
  if (data_plane == DataPlane::kAuto) o.tcp_data_plane = !o.security.tls();
  if (o.tcp_data_plane && o.security.tls()) {
    return absl::InvalidArgumentError(
        "--data_plane=tcp with --tls_cert: the tcp data plane sends tensors unencrypted; use "
        "--data_plane=grpc (TLS) or drop the TLS flags on a trusted network");
  }
  return o;
}

absl::StatusOr<ClusterOptions> EmbeddedChiefOptions(const ClusterOptions& worker0) {
  ClusterOptions o = worker0;
  o.task.job_name = kChiefJob;
  o.task.task_index = 0;
  const SecurityFlags security = SecurityFlagsFromFlags();
  FULCRUM_ASSIGN_OR_RETURN(
      o.security, TransportSecurity::Load(security, o.task.task_name(), o.task.dir_name()));
  return o;
}

absl::StatusOr<TaskOptions> TaskOptionsFromFlags(absl::string_view default_job) {
  TaskOptions o;
  FULCRUM_ASSIGN_OR_RETURN(o.training, ReadTrainingOptions(default_job != kPsJob));
  FULCRUM_ASSIGN_OR_RETURN(o.cluster, ClusterOptionsFromFlags(default_job));
  FULCRUM_ASSIGN_OR_RETURN(o.profile, ProfileFlagsFromFlags());
  return o;
}

const char* AsyncPullName(const ClusterOptions& c) {
  return c.pull_before_step ? "before_step" : c.reads_at_step_start ? "at_step_start" : "with_push";
}

std::string ConfigFingerprint(const TrainingOptions& t, const ClusterOptions& c) {
  return absl::StrCat(
      "model=", t.model, "\nmodel_width=", t.model_width, "\nbatch_size=", t.batch_size,
      "\noptimizer=", ops::OptimizerName(t.optimizer.kind),
      "\nlearning_rate=", t.optimizer.learning_rate, "\nmomentum=", t.optimizer.momentum,
      "\nrmsprop=", t.optimizer.rmsprop_decay, ",", t.optimizer.rmsprop_momentum, ",",
      t.optimizer.rmsprop_epsilon, "\nlearning_rate_decay=", t.optimizer.lr_decay_rate, ",",
      t.optimizer.lr_decay_steps, ",", t.optimizer.lr_decay_staircase ? "staircase" : "smooth",
      "\nweight_decay=", t.weight_decay ? absl::StrCat(*t.weight_decay) : "model",
      "\ninput_pipeline=", data::PipelineName(t.input_pipeline), "\ncrop_size=", t.crop_size,
      "\ntrain_steps=", t.train_steps, "\nepochs=", t.epochs,
      "\ndataset=", data::DatasetName(t.dataset), "\ntrain_subset=", t.train_subset,
      "\ndataset_repeat=", t.dataset_repeat, "\nseed=", t.seed, "\nmode=", ModeName(c.mode),
      "\nstaleness=", c.staleness, "\nreplicas_to_aggregate=", c.replicas_to_aggregate,
      "\nasync_pull=", AsyncPullName(c),
      "\nstaleness_aware_lr=", c.staleness_aware_lr ? "true" : "false",
      "\nplacement=", PlacementName(c.placement), "\npartition_min_bytes=", c.partition_min_bytes,
      "\nrpc_chunk_bytes=", c.chunk_bytes, "\nwire_dtype=", WireDtypeName(c.wire_dtype),
      "\nreplicate_shards=", c.replicate_shards ? "true" : "false",
      "\ncheckpoint_dir=", c.checkpoint_dir,
      "\nrecovery_timeout=", absl::FormatDuration(c.recovery_timeout),
      "\ncluster=", c.task.cluster.ToJson());
}

std::string FingerprintDifference(const std::string& mine, const std::string& theirs) {
  const std::vector<std::string> a = absl::StrSplit(mine, '\n');
  const std::vector<std::string> b = absl::StrSplit(theirs, '\n');
  std::vector<std::string> diffs;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "";
    const std::string y = i < b.size() ? b[i] : "";
    if (x == y) continue;
    const size_t eq = x.find('=');
    const std::string name = eq == std::string::npos ? x : x.substr(0, eq);
    const std::string yv = y.find('=') == std::string::npos ? y : y.substr(y.find('=') + 1);
    const std::string xv = eq == std::string::npos ? "" : x.substr(eq + 1);
    diffs.push_back(absl::StrCat(name, ": ", xv, " vs ", yv));
  }
  return absl::StrJoin(diffs, "; ");
}

int64_t GlobalTrainSteps(const TrainingOptions& t, const ClusterOptions& c,
                         int64_t train_examples) {
  if (t.train_steps > 0) return t.train_steps;
  int64_t examples = train_examples;
  if (t.train_subset > 0) examples = std::min(examples, t.train_subset);
  examples *= t.dataset_repeat;
  const int64_t per_step = t.batch_size * (c.mode == SyncMode::kSync ? c.replicas_to_aggregate : 1);
  return std::max<int64_t>(
      1, static_cast<int64_t>(
             std::ceil(t.epochs * static_cast<double>(examples) / static_cast<double>(per_step))));
}

}  // namespace fulcrum::runtime
