#include "runtime/flags.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/exit_code.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/wire_frame.h"

ABSL_FLAG(
    std::string, model, "logreg",
    "Model to train: logreg, mlp, autoencoder, mnist_cnn, cifar10_cnn, alexnet, vgg16 or stn.");
ABSL_FLAG(double, model_width, 1.0, "Multiplier on every hidden layer width (model size knob).");
ABSL_FLAG(int64_t, batch_size, 128, "Examples per training step (per worker).");
ABSL_FLAG(double, learning_rate, 0.01, "Optimizer learning rate.");
ABSL_FLAG(std::string, optimizer, "sgd", "Optimizer: sgd, momentum, adam, adagrad or rmsprop.");
ABSL_FLAG(double, momentum, 0.9, "Momentum coefficient of the momentum optimizer.");
ABSL_FLAG(double, rmsprop_decay, 0.9, "RMSProp: decay of the mean square (TF 1.x default 0.9).");
ABSL_FLAG(double, rmsprop_momentum, 0.0, "RMSProp: momentum (TF 1.x default 0).");
ABSL_FLAG(double, rmsprop_epsilon, 1e-10, "RMSProp: epsilon (TF 1.x default 1e-10).");
ABSL_FLAG(double, learning_rate_decay_rate, 1.0,
          "Exponential learning-rate decay: lr * rate^(step / learning_rate_decay_steps).");
ABSL_FLAG(int64_t, learning_rate_decay_steps, 0,
          "Updates per decay period of the learning rate (0 = no decay).");
ABSL_FLAG(bool, learning_rate_decay_staircase, false,
          "Decay the learning rate in whole periods (floor of step / decay_steps).");
ABSL_FLAG(std::string, weight_decay, "model",
          "L2 weight decay: 'model' (each variable's own, as the model declares it: the "
          "CIFAR-10 tutorial's 0.004 on its fully connected kernels) or a number applied to "
          "every kernel (0 = none).");
ABSL_FLAG(std::string, input_pipeline, "plain",
          "Input pipeline: plain, or cifar10 (the CIFAR-10 tutorial's: random --crop_size crop, "
          "horizontal flip, random brightness and contrast, and per-image standardisation in "
          "training; centre crop and standardisation at evaluation).");
ABSL_FLAG(int32_t, crop_size, 24, "Crop height and width of --input_pipeline=cifar10.");
ABSL_FLAG(int64_t, train_steps, 0, "Training steps to run (give this or --epochs).");
ABSL_FLAG(double, epochs, 0, "Passes over the training shard (give this or --train_steps).");
ABSL_FLAG(std::string, dataset, "mnist",
          "Dataset format: mnist (IDX files, e.g. Fashion-MNIST), cifar10 (binary), synthetic.");
ABSL_FLAG(std::string, data_dir, "",
          "Folder of the dataset files (mnist default: /usr/share/datasets/fashion-mnist).");
ABSL_FLAG(std::string, run_dir, "",
          "Run directory for summary.json and logs (default: runs/<model>-<time>).");
ABSL_FLAG(bool, overwrite, false,
          "Replace the records of a finished run in --run_dir (report.json, final summaries); "
          "without it such a folder is refused.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of variable initialisation and data shuffling.");
ABSL_FLAG(int32_t, threads, 1, "Compute threads per process.");
ABSL_FLAG(std::string, conv_algo, "auto",
          "Convolution algorithm on the CPU: auto (each layer shape timed on im2col and oneDNN "
          "at its first step, the faster kept; the report's conv_kernels say which), im2col or "
          "onednn.");
ABSL_FLAG(int64_t, log_every, 100, "Print a progress line every this many steps.");
ABSL_FLAG(bool, eval, true, "Evaluate on the test set at the end of training.");
ABSL_FLAG(int64_t, eval_batch_size, 1000, "Examples per evaluation batch.");
ABSL_FLAG(int64_t, train_subset, 0, "Use only the first N training examples (0 = all).");
ABSL_FLAG(int64_t, dataset_repeat, 1, "Repeat the training set this many times per epoch.");
ABSL_FLAG(int64_t, synthetic_examples, 60000, "Training examples of the synthetic dataset.");
ABSL_FLAG(std::string, synthetic_shape, "28,28,1",
          "Example shape of the synthetic dataset: height,width,channels (NHWC).");
ABSL_FLAG(int32_t, synthetic_classes, 10, "Classes of the synthetic dataset.");

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
ABSL_FLAG(int32_t, task_index, -1, "This task's index within its job (default: TF_CONFIG's or 0).");
ABSL_FLAG(std::string, mode, "async",
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
ABSL_FLAG(std::string, async_pull, "at_step_start",
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
ABSL_FLAG(std::string, placement, "round_robin",
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
ABSL_FLAG(std::string, nonfinite, "error",
          "What a ps does with a pushed gradient holding a NaN or an Inf: error (refuse it, the "
          "pusher fails) or skip (apply nothing, count it in pushes_nonfinite).");
ABSL_FLAG(int64_t, rpc_chunk_bytes, 2 << 20,
          "Largest piece of a shard sent in one RPC (pieces go out in parallel).");
ABSL_FLAG(std::string, wire_dtype, "f32",
          "How gradients and values travel between workers and ps tasks: f32 (exact, sent from "
          "the tensors without a copy), bf16 or fp16 (16-bit, half the bytes, each value rounded "
          "to nearest even; the ps keeps float32).");
ABSL_FLAG(std::string, data_plane, "auto",
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
          "Seconds a ps waits without hearing from the chief before it exits.");
ABSL_FLAG(double, watchdog_secs, 30,
          "The watchdog (the chief's; in single mode the worker's own) names a task that has not "
          "moved for max(5 x the median step, this many seconds), and what it waits for.");
ABSL_FLAG(int64_t, eval_every, 100,
          "The chief evaluates on the test set every this many global steps (0 = at the end).");
ABSL_FLAG(double, target_accuracy, 0,
          "Stop once the chief's test accuracy reaches this (0 = train --train_steps).");

// Security flags (runtime/security.h).
ABSL_FLAG(std::string, tls_cert, "",
          "Mutual TLS: this task's certificate (PEM) whose common name is the task name "
          "(\"ps:0\"); \"{task}\" in the path stands for the task's folder name (ps-0). "
          "Needs --tls_key and --tls_ca; scripts/make_certs.sh makes them.");
ABSL_FLAG(std::string, tls_key, "", "Mutual TLS: the private key (PEM) of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "Mutual TLS: the CA certificate (PEM) every task's certificate must be signed by.");
ABSL_FLAG(std::string, auth_token_file, "",
          "A file (mode 600) holding a shared secret of at least 16 printable characters: every "
          "call carries it and every server refuses a call without it.");
ABSL_FLAG(bool, insecure, false,
          "Without credentials, let any peer call this task (default: protected mode, in which "
          "a task without --auth_token_file or TLS refuses non-loopback cluster specs and "
          "answers only loopback peers). Not with --auth_token_file or --tls_cert.");

// Profiler flags.
ABSL_FLAG(std::string, profile, "on",
          "on: sample CPU, memory and network and write steps.csv, samples.csv, trace.json and "
          "TensorBoard events into the task's folder; off: only summary.json's run figures.");
ABSL_FLAG(int64_t, profile_interval_ms, 500, "Milliseconds between two profiler samples.");
ABSL_FLAG(double, metrics_linger_secs, 0,
          "With --metrics_port: at the end the endpoint stays up until Prometheus scrapes it once "
          "more (at most this many seconds), so the final figures are recorded (0: it closes with "
          "the task).");
ABSL_FLAG(double, profile_flush_secs, 5,
          "Seconds between two rewrites of the task's records (steps.csv, samples.csv, "
          "trace.json and a partial summary.json), so that a task killed or crashed leaves them "
          "up to then (0: written only at the end).");
ABSL_FLAG(std::string, metrics_bind, "",
          "Address the Prometheus endpoint listens on: empty = the task's own host from the "
          "cluster spec (127.0.0.1 in single mode); 0.0.0.0 = every interface.");
ABSL_FLAG(int32_t, metrics_port, -1,
          "Prometheus endpoint (/metrics): -1 = none, 0 = any free port, P = P plus the task's "
          "position in the cluster spec (chief, ps..., worker...).");

namespace fulcrum::runtime {
namespace {

SecurityFlags SecurityFlagsFromFlags() {
  return SecurityFlags{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                       absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_auth_token_file),
                       absl::GetFlag(FLAGS_insecure)};
}

// The largest --learning_rate taken.
constexpr double kMaxLearningRate = 1000;

// The program's name (argv[0] without its folder) for messages, and whether
// ParseFlagsOrExit is inside Abseil's parser (main() only, before any thread starts).
absl::string_view g_program = "fulcrum";
bool g_parsing = false;
// What Abseil wrote to std::cerr while parsing (owned by ParseFlagsOrExit's frame).
std::ostringstream* g_held_errors = nullptr;

void ShowHeldErrorsAtExit() {
  if (g_parsing && g_held_errors != nullptr) std::fputs(g_held_errors->str().c_str(), stderr);
}

[[noreturn]] void FailFlag(absl::string_view message) {
  const std::string program(g_program);
  std::fprintf(stderr, "%s: %s\n", program.c_str(), std::string(message).c_str());
  std::fprintf(stderr, "%s: run with --help for the list of flags\n", program.c_str());
  std::fflush(nullptr);
  // Abseil's parser may be on the stack holding its locks: leave without running destructors.
  std::_Exit(kExitBadInput);
}

// Abseil's fatal parse errors in our words where they are terse; the rest as Abseil says them.
std::string DescribeParseError(absl::string_view message) {
  absl::string_view rest = message;
  if (absl::ConsumePrefix(&rest, "Unknown command line flag '") &&
      absl::ConsumeSuffix(&rest, "'")) {
    return absl::StrCat("unknown flag --", rest);
  }
  rest = message;
  if (absl::ConsumePrefix(&rest, "Can't open flagfile ")) {
    return absl::StrCat("--flagfile=", rest, ": cannot open the file");
  }
  return std::string(message);
}

void OnFatalParseError(absl::string_view message) {
  if (g_parsing) FailFlag(DescribeParseError(message));
}

// This file as the compiler named it, and as the usage config names it (from the source root).
constexpr absl::string_view kThisFile = __FILE__;
constexpr absl::string_view kThisFileFromRoot = "runtime/flags.cc";

// Flag files from the source root, whatever path the compiler saw (absolute, or relative to
// the build folder under ccache's base_dir): "runtime/flags.cc", "absl/flags/parse.cc".
std::string NormalizeFlagFile(absl::string_view file) {
  absl::string_view root = kThisFile;
  if (absl::ConsumeSuffix(&root, kThisFileFromRoot)) absl::ConsumePrefix(&file, root);
  while (absl::ConsumePrefix(&file, "/") || absl::ConsumePrefix(&file, "./") ||
         absl::ConsumePrefix(&file, "../")) {
  }
  return std::string(file);
}

// --help lists the flags defined here and in runtime's other *_flags.cc files (each defined
// beside the code that reads it), fulcrum_monitor's own, and Abseil's --flagfile, --fromenv,
// --tryfromenv and --undefok (Abseil's default lists only flags defined in <program>.cc or
// <program>_main.cc).
bool ListedByHelp(absl::string_view normalized_file) {
  return normalized_file == kThisFileFromRoot || normalized_file == "absl/flags/parse.cc" ||
         normalized_file == "monitor/main.cc" ||
         (absl::StartsWith(normalized_file, "runtime/") &&
          absl::EndsWith(normalized_file, "_flags.cc"));
}

absl::Status Positive(absl::string_view flag, double value) {
  if (!(value > 0) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", value, ": must be a positive number"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& text) {
  std::vector<int64_t> dims;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--synthetic_shape=", text, ": expected positive integers separated by commas"));
    }
    dims.push_back(d);
  }
  return dims;
}

}  // namespace

void ParseFlagsOrExit(int argc, char** argv, absl::string_view usage) {
  if (argc > 0) {
    const absl::string_view path = argv[0];
    const size_t slash = path.rfind('/');
    g_program = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  }
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = ListedByHelp;
  config.contains_helpshort_flags = ListedByHelp;
  config.contains_helppackage_flags = ListedByHelp;
  config.normalize_filename = NormalizeFlagFile;
  // Abseil's default says "Debug build" by its own NDEBUG; Fulcrum has no release numbers.
  config.version_string = [] { return absl::StrCat(g_program, " (Fulcrum)\n"); };
  absl::SetFlagsUsageConfig(config);
  std::vector<char*> positional;
  {
    // Abseil prints "ERROR: ..." to std::cerr before calling the fatal-error hook, which
    // prints the same thing in our words; hold its copy back, and give anything else back.
    // Should Abseil exit without calling the hook, the atexit handler shows its text.
    std::ostringstream held;
    g_held_errors = &held;
    std::atexit(ShowHeldErrorsAtExit);
    std::streambuf* const cerr_buffer = std::cerr.rdbuf(held.rdbuf());
    g_parsing = true;
    positional = absl::flags_internal::ParseCommandLineImpl(
        argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
        absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
        absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
    g_parsing = false;
    g_held_errors = nullptr;
    std::cerr.rdbuf(cerr_buffer);
    std::cerr << held.str();
  }
  // --help and friends: Abseil returns 1 for a help page; asking for help is no failure.
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) != -1) {
    std::cout.flush();
    std::exit(kExitOk);
  }
  if (positional.size() > 1) {
    FailFlag(absl::StrCat("unexpected argument '", positional[1],
                          "' (flags are --name=value; a bool flag is --name or --noname)"));
  }
}

int ReportBadFlags(const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", std::string(g_program).c_str(),
               std::string(status.message()).c_str());
  return kExitBadInput;
}

namespace {

// --train_steps and --epochs into `o`: exactly one of them positive. A task that does not
// train (`trains` false: the ps) may leave both unset; it gets a placeholder of one step.
constexpr double kMaxEpochs = 1e9;

absl::Status ReadTrainLength(bool trains, TrainingOptions* o) {
  o->train_steps = absl::GetFlag(FLAGS_train_steps);
  o->epochs = absl::GetFlag(FLAGS_epochs);
  if (o->train_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train_steps=", o->train_steps, ": must not be negative"));
  }
  if (o->epochs < 0 || !std::isfinite(o->epochs)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--epochs=", o->epochs, ": must not be negative"));
  }
  // So that epochs x examples / batch stays far inside an int64 step count.
  if (o->epochs > kMaxEpochs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--epochs=", o->epochs, ": at most ", kMaxEpochs, " passes"));
  }
  if (!trains && o->train_steps == 0 && o->epochs == 0) {
    o->train_steps = 1;
    return absl::OkStatus();
  }
  if ((o->train_steps > 0) == (o->epochs > 0)) {
    return absl::InvalidArgumentError(
        "give exactly one of --train_steps and --epochs (a positive value)");
  }
  return absl::OkStatus();
}

// --rmsprop_* and --learning_rate_decay_* into `c`.
absl::Status ReadOptimizerExtras(ops::OptimizerConfig* c) {
  const double decay = absl::GetFlag(FLAGS_rmsprop_decay);
  if (!(decay >= 0 && decay < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rmsprop_decay=", decay, ": must be in [0, 1)"));
  }
  c->rmsprop_decay = static_cast<float>(decay);
  const double rms_momentum = absl::GetFlag(FLAGS_rmsprop_momentum);
  if (!(rms_momentum >= 0 && rms_momentum < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rmsprop_momentum=", rms_momentum, ": must be in [0, 1)"));
  }
  c->rmsprop_momentum = static_cast<float>(rms_momentum);
  const double epsilon = absl::GetFlag(FLAGS_rmsprop_epsilon);
  FULCRUM_RETURN_IF_ERROR(Positive("rmsprop_epsilon", epsilon));
  c->rmsprop_epsilon = static_cast<float>(epsilon);
  const double rate = absl::GetFlag(FLAGS_learning_rate_decay_rate);
  if (!(rate > 0 && rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate_decay_rate=", rate, ": must be in (0, 1]"));
  }
  c->lr_decay_rate = static_cast<float>(rate);
  c->lr_decay_steps = absl::GetFlag(FLAGS_learning_rate_decay_steps);
  if (c->lr_decay_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate_decay_steps=", c->lr_decay_steps, ": must not be negative"));
  }
  c->lr_decay_staircase = absl::GetFlag(FLAGS_learning_rate_decay_staircase);
  return absl::OkStatus();
}

// --weight_decay, --input_pipeline, --crop_size, --device and --devices into `o`.
absl::Status ReadModelExtras(TrainingOptions* o) {
  const std::string wd = absl::GetFlag(FLAGS_weight_decay);
  if (wd != "model") {
    double value = 0;
    if (!absl::SimpleAtod(wd, &value) || !(value >= 0) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--weight_decay=", wd, ": expected 'model' or a non-negative number"));
    }
    o->weight_decay = value;
  }
  o->input_pipeline = absl::GetFlag(FLAGS_input_pipeline);
  if (o->input_pipeline != "plain" && o->input_pipeline != "cifar10") {
    return absl::InvalidArgumentError(
        absl::StrCat("--input_pipeline=", o->input_pipeline, ": expected plain or cifar10"));
  }
  o->crop_size = absl::GetFlag(FLAGS_crop_size);
  if (o->crop_size < 1 || o->crop_size > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--crop_size=", o->crop_size, ": must be between 1 and 4096"));
  }
  return DeviceFromFlags(*o);
}

absl::StatusOr<TrainingOptions> ReadTrainingOptions(bool trains) {
  TrainingOptions o;
  // -1 is "not given" (TF_CONFIG's index, or 0); any other negative index is a typo.
  if (const int index = absl::GetFlag(FLAGS_task_index); index < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task_index=", index, ": must not be negative"));
  }
  o.model = absl::GetFlag(FLAGS_model);
  o.model_width = absl::GetFlag(FLAGS_model_width);
  FULCRUM_RETURN_IF_ERROR(Positive("model_width", o.model_width));
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  FULCRUM_RETURN_IF_ERROR(Positive("batch_size", static_cast<double>(o.batch_size)));
  FULCRUM_ASSIGN_OR_RETURN(o.optimizer.kind,
                           ops::ParseOptimizerKind(absl::GetFlag(FLAGS_optimizer)));
  const double lr = absl::GetFlag(FLAGS_learning_rate);
  FULCRUM_RETURN_IF_ERROR(Positive("learning_rate", lr));
  // Issue 12: 1e30 trained to a loss of 6.9e30 and exited 0. No optimizer here is useful past
  // this; a larger value is a typo.
  if (lr > kMaxLearningRate) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate=", lr, ": at most ", kMaxLearningRate, " (a typo?)"));
  }
  o.optimizer.learning_rate = static_cast<float>(lr);
  const double momentum = absl::GetFlag(FLAGS_momentum);
  if (!(momentum >= 0 && momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--momentum=", momentum, ": must be in [0, 1)"));
  }
  o.optimizer.momentum = static_cast<float>(momentum);
  FULCRUM_RETURN_IF_ERROR(ReadOptimizerExtras(&o.optimizer));
  FULCRUM_RETURN_IF_ERROR(ReadTrainLength(trains, &o));
  o.dataset = absl::GetFlag(FLAGS_dataset);
  if (o.dataset != "mnist" && o.dataset != "cifar10" && o.dataset != "synthetic") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dataset=", o.dataset, ": expected one of mnist, cifar10, synthetic"));
  }
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (o.data_dir.empty() && o.dataset == "mnist") o.data_dir = data::kDefaultMnistDir;
  if (o.data_dir.empty() && o.dataset == "cifar10") {
    return absl::InvalidArgumentError(
        "--dataset=cifar10 needs --data_dir (the folder of "
        "data_batch_*.bin and test_batch.bin)");
  }
  o.run_dir = absl::GetFlag(FLAGS_run_dir);
  o.overwrite = absl::GetFlag(FLAGS_overwrite);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.threads = absl::GetFlag(FLAGS_threads);
  if (o.threads < 1 || o.threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads=", o.threads, ": must be between 1 and 256"));
  }
  FULCRUM_ASSIGN_OR_RETURN(o.conv_algo, ops::ParseConvAlgo(absl::GetFlag(FLAGS_conv_algo)));
  o.log_every = absl::GetFlag(FLAGS_log_every);
  FULCRUM_RETURN_IF_ERROR(Positive("log_every", static_cast<double>(o.log_every)));
  o.eval = absl::GetFlag(FLAGS_eval);
  o.eval_batch_size = absl::GetFlag(FLAGS_eval_batch_size);
  FULCRUM_RETURN_IF_ERROR(Positive("eval_batch_size", static_cast<double>(o.eval_batch_size)));
  o.train_subset = absl::GetFlag(FLAGS_train_subset);
  if (o.train_subset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train_subset=", o.train_subset, ": must not be negative"));
  }
  o.dataset_repeat = absl::GetFlag(FLAGS_dataset_repeat);
  FULCRUM_RETURN_IF_ERROR(Positive("dataset_repeat", static_cast<double>(o.dataset_repeat)));
  o.synthetic_examples = absl::GetFlag(FLAGS_synthetic_examples);
  FULCRUM_RETURN_IF_ERROR(
      Positive("synthetic_examples", static_cast<double>(o.synthetic_examples)));
  FULCRUM_ASSIGN_OR_RETURN(o.synthetic_shape, ParseShape(absl::GetFlag(FLAGS_synthetic_shape)));
  o.synthetic_classes = absl::GetFlag(FLAGS_synthetic_classes);
  if (o.synthetic_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--synthetic_classes=", o.synthetic_classes, ": must be at least 2"));
  }
  FULCRUM_RETURN_IF_ERROR(ReadModelExtras(&o));
  return o;
}

}  // namespace

namespace {

absl::StatusOr<absl::Duration> Seconds(absl::string_view flag, double value) {
  FULCRUM_RETURN_IF_ERROR(Positive(flag, value));
  return absl::Seconds(value);
}

}  // namespace

absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags() {
  FULCRUM_ASSIGN_OR_RETURN(TrainingOptions o, ReadTrainingOptions(true));
  // Single mode's own watchdog (a cluster's is the chief's: ClusterOptions::watchdog_min).
  FULCRUM_ASSIGN_OR_RETURN(o.watchdog_min,
                           Seconds("watchdog_secs", absl::GetFlag(FLAGS_watchdog_secs)));
  return o;
}

data::SourceOptions DataSource(const TrainingOptions& o) {
  data::SourceOptions s;
  s.kind = o.dataset;
  s.dir = o.data_dir;
  s.synthetic_examples = o.synthetic_examples;
  s.synthetic_shape = o.synthetic_shape;
  s.synthetic_classes = o.synthetic_classes;
  s.seed = o.seed;
  return s;
}

double ExactDecimal(float value) {
  if (!std::isfinite(value)) return static_cast<double>(value);
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, static_cast<double>(value));
    if (std::strtof(text, nullptr) == value) return std::strtod(text, nullptr);
  }
  return static_cast<double>(value);  // 9 significant digits always read back
}

void AddTrainingSettings(const TrainingOptions& o, nlohmann::json* j) {
  const ops::OptimizerConfig& c = o.optimizer;
  (*j)["learning_rate_decay"] = c.lr_decay_steps > 0 && c.lr_decay_rate != 1.0f
                                    ? nlohmann::json{{"rate", ExactDecimal(c.lr_decay_rate)},
                                                     {"steps", c.lr_decay_steps},
                                                     {"staircase", c.lr_decay_staircase}}
                                    : nlohmann::json(nullptr);
  if (c.kind == ops::OptimizerKind::kRmsProp) {
    (*j)["rmsprop"] = {{"decay", ExactDecimal(c.rmsprop_decay)},
                       {"momentum", ExactDecimal(c.rmsprop_momentum)},
                       {"epsilon", ExactDecimal(c.rmsprop_epsilon)}};
  }
  (*j)["weight_decay"] = o.weight_decay ? nlohmann::json(*o.weight_decay) : nlohmann::json("model");
  (*j)["input_pipeline"] = o.input_pipeline;
  (*j)["crop_size"] =
      o.input_pipeline == "plain" ? nlohmann::json(nullptr) : nlohmann::json(o.crop_size);
}

absl::StatusOr<ProfileFlags> ProfileFlagsFromFlags() {
  ProfileFlags f;
  const std::string profile = absl::GetFlag(FLAGS_profile);
  if (profile == "on") {
    f.enabled = true;
  } else if (profile == "off") {
    f.enabled = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--profile=", profile, ": expected on or off"));
  }
  const int64_t ms = absl::GetFlag(FLAGS_profile_interval_ms);
  if (ms < 10 || ms > 3600000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--profile_interval_ms=", ms, ": must be between 10 and 3600000"));
  }
  f.interval = absl::Milliseconds(ms);
  const double flush = absl::GetFlag(FLAGS_profile_flush_secs);
  if (!(flush >= 0 && flush <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--profile_flush_secs=", flush, ": must be in [0, 86400]"));
  }
  f.flush_interval = absl::Seconds(flush);
  const double linger = absl::GetFlag(FLAGS_metrics_linger_secs);
  if (!(linger >= 0 && linger <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_linger_secs=", linger, ": must be in [0, 3600]"));
  }
  f.metrics_linger = absl::Seconds(linger);
  f.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  f.metrics_bind = absl::GetFlag(FLAGS_metrics_bind);
  if (!f.metrics_bind.empty()) {
    // The endpoint has no credentials of its own: beyond loopback only when the task has some
    // (the operator secured the cluster) or --insecure. Without TLS files the check reads none.
    const SecurityFlags security = SecurityFlagsFromFlags();
    const bool credentials = !security.tls_cert.empty() || !security.auth_token_file.empty();
    if (!credentials && !security.insecure) {
      FULCRUM_RETURN_IF_ERROR(
          TransportSecurity().CheckReachableOnlyLocally("--metrics_bind", f.metrics_bind));
    }
  }
  if (f.metrics_port < -1 || f.metrics_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port=", f.metrics_port, ": must be -1 (off), 0 (any) or a port 1-65535"));
  }
  return f;
}

namespace {

// `host` as a numeric IPv4 address for the HTTP server to bind (a spec may name hosts): the
// first address getaddrinfo gives, or `host` itself when it is numeric or does not resolve
// (the exporter then fails naming it).
std::string NumericHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return host;
  char text[INET_ADDRSTRLEN] = {};
  const auto* in = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  const bool ok = inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr;
  freeaddrinfo(found);
  return ok ? std::string(text) : host;
}

}  // namespace

profiler::ProfilerOptions ProfilerOptionsFor(const ProfileFlags& flags, const ClusterSpec* cluster,
                                             const std::string& job, int task_index,
                                             const std::string& task_dir) {
  profiler::ProfilerOptions o;
  o.enabled = flags.enabled;
  o.interval = flags.interval;
  o.flush_interval = flags.flush_interval;
  o.metrics_linger = flags.metrics_linger;
  o.job = job;
  o.task_index = task_index;
  o.task_dir = task_dir;
  o.metrics_port = flags.metrics_port;
  o.metrics_bind = flags.metrics_bind;
  if (o.metrics_bind.empty() && cluster != nullptr) {
    // The task's own host from the spec (its address without the port).
    if (task_index >= 0 && task_index < cluster->num_tasks(job)) {
      const std::string& address = cluster->address(job, task_index);
      o.metrics_bind = NumericHost(address.substr(0, address.rfind(':')));
    }
  }
  if (o.metrics_bind.empty()) o.metrics_bind = "127.0.0.1";
  if (flags.metrics_port > 0 && cluster != nullptr) {
    int position = 0;
    for (const char* j : {kChiefJob, kPsJob, kWorkerJob}) {
      if (job == j) {
        position += task_index;
        break;
      }
      position += cluster->num_tasks(j);
    }
    o.metrics_port = flags.metrics_port + position;
  }
  return o;
}

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

}  // namespace

bool ClusterRequested() {
  const char* tf_config = std::getenv("TF_CONFIG");
  return !absl::GetFlag(FLAGS_cluster_spec).empty() || !HostsFlagsGiven().empty() ||
         (tf_config != nullptr && *tf_config);
}

absl::StatusOr<ClusterOptions> ClusterOptionsFromFlags(absl::string_view default_job) {
  ClusterOptions o;
  FULCRUM_ASSIGN_OR_RETURN(o.task, ResolveTaskFromFlags(default_job));
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "sync") {
    o.mode = SyncMode::kSync;
  } else if (mode == "async") {
    o.mode = SyncMode::kAsync;
  } else if (mode == "ssp") {
    o.mode = SyncMode::kSsp;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode=", mode, ": expected sync, async or ssp"));
  }
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
  const std::string async_pull = absl::GetFlag(FLAGS_async_pull);
  if (async_pull != "at_step_start" && async_pull != "with_push" && async_pull != "before_step") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--async_pull=", async_pull, ": expected at_step_start, with_push or before_step"));
  }
  o.pull_before_step = async_pull == "before_step";
  o.reads_at_step_start = async_pull == "at_step_start";
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
  FULCRUM_ASSIGN_OR_RETURN(o.placement, ParsePlacementStrategy(absl::GetFlag(FLAGS_placement)));
  o.partition_min_bytes = absl::GetFlag(FLAGS_partition_min_bytes);
  FULCRUM_RETURN_IF_ERROR(
      Positive("partition_min_bytes", static_cast<double>(o.partition_min_bytes)));
  o.overlap = absl::GetFlag(FLAGS_overlap);
  o.chunk_bytes = absl::GetFlag(FLAGS_rpc_chunk_bytes);
  if (o.chunk_bytes < 4 || o.chunk_bytes > (64 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rpc_chunk_bytes=", o.chunk_bytes, ": must be between 4 and 67108864"));
  }
  if (absl::StatusOr<pb::WireDtype> dtype = ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype));
      dtype.ok()) {
    o.wire_dtype = *dtype;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--wire_dtype=", absl::GetFlag(FLAGS_wire_dtype),
                                                   ": ", dtype.status().message()));
  }
  const std::string data_plane = absl::GetFlag(FLAGS_data_plane);
  if (data_plane != "grpc" && data_plane != "tcp" && data_plane != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_plane=", data_plane, ": expected auto, grpc or tcp"));
  }
  o.tcp_data_plane = data_plane == "tcp";  // auto: decided with the security flags below
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
  const std::string nonfinite = absl::GetFlag(FLAGS_nonfinite);
  if (nonfinite != "error" && nonfinite != "skip") {
    return absl::InvalidArgumentError(
        absl::StrCat("--nonfinite=", nonfinite, ": expected error or skip"));
  }
  o.nonfinite_skip = nonfinite == "skip";
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
  const SecurityFlags security = SecurityFlagsFromFlags();
  FULCRUM_ASSIGN_OR_RETURN(
      o.security, TransportSecurity::Load(security, o.task.task_name(), o.task.dir_name()));
  FULCRUM_RETURN_IF_ERROR(o.security.CheckSpecReachableOnlyLocally(o.task.cluster));
  FULCRUM_RETURN_IF_ERROR(ReplicationFromFlags(o));
  if (data_plane == "auto") o.tcp_data_plane = !o.security.tls();
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
      "\ninput_pipeline=", t.input_pipeline, "\ncrop_size=", t.crop_size,
      "\ntrain_steps=", t.train_steps, "\nepochs=", t.epochs, "\ndataset=", t.dataset,
      "\ntrain_subset=", t.train_subset, "\ndataset_repeat=", t.dataset_repeat, "\nseed=", t.seed,
      "\nmode=", ModeName(c.mode), "\nstaleness=", c.staleness,
      "\nreplicas_to_aggregate=", c.replicas_to_aggregate, "\nasync_pull=", AsyncPullName(c),
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

// Abseil calls this hook (declared in absl/flags/usage_config.h) on each fatal command-line
// error, just before it would print the usage and exit with code 1. Inside ParseFlagsOrExit
// the error exits with code 2 (bad input), stated in our words; elsewhere Abseil goes on.
extern "C" void ABSL_INTERNAL_C_SYMBOL(AbslInternalReportFatalUsageError)(
    absl::string_view message) {
  fulcrum::runtime::OnFatalParseError(message);
}
