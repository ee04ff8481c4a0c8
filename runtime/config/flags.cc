#include "runtime/config/flags.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
#include "runtime/config/flags_internal.h"
#include "runtime/frames/wire_frame.h"

ABSL_FLAG(
    std::string, model, "logreg",
    "Model to train: logreg, mlp, autoencoder, mnist_cnn, cifar10_cnn, alexnet, vgg16, stn or "
    "stn_deep.");
ABSL_FLAG(double, model_width, 1.0, "Multiplier on every hidden layer width (model size knob).");
ABSL_FLAG(int64_t, batch_size, 128, "Examples per training step (per worker).");
ABSL_FLAG(double, learning_rate, 0.01, "Optimizer learning rate.");
ABSL_FLAG(fulcrum::ops::OptimizerKind, optimizer, fulcrum::ops::OptimizerKind::kSgd,
          "Optimizer: sgd, momentum, adam, adagrad or rmsprop.");
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
ABSL_FLAG(fulcrum::data::PipelineKind, input_pipeline, fulcrum::data::PipelineKind::kPlain,
          "Input pipeline: plain, or cifar10 (the CIFAR-10 tutorial's: random --crop_size crop, "
          "horizontal flip, random brightness and contrast, and per-image standardisation in "
          "training; centre crop and standardisation at evaluation).");
ABSL_FLAG(int32_t, crop_size, 24, "Crop height and width of --input_pipeline=cifar10.");
ABSL_FLAG(int64_t, train_steps, 0, "Training steps to run (give this or --epochs).");
ABSL_FLAG(double, epochs, 0, "Passes over the training shard (give this or --train_steps).");
ABSL_FLAG(fulcrum::data::DatasetKind, dataset, fulcrum::data::DatasetKind::kMnist,
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
ABSL_FLAG(fulcrum::ops::ConvAlgo, conv_algo, fulcrum::ops::ConvAlgo::kAuto,
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

ABSL_FLAG(int32_t, task_index, -1, "This task's index within its job (default: TF_CONFIG's or 0).");
ABSL_FLAG(double, watchdog_secs, 30,
          "The watchdog (the chief's; in single mode the worker's own) names a task that has not "
          "moved for max(5 x the median step, this many seconds), and what it waits for.");

// Security flags (runtime/grpc/security.h).
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

namespace fulcrum::runtime {

namespace flags_internal {

SecurityFlags SecurityFlagsFromFlags() {
  return SecurityFlags{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                       absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_auth_token_file),
                       absl::GetFlag(FLAGS_insecure)};
}

absl::Status Positive(absl::string_view flag, double value) {
  if (!(value > 0) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", value, ": must be a positive number"));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> Seconds(absl::string_view flag, double value) {
  FULCRUM_RETURN_IF_ERROR(Positive(flag, value));
  return absl::Seconds(value);
}

}  // namespace flags_internal

using flags_internal::Positive;
using flags_internal::Seconds;
using flags_internal::SecurityFlagsFromFlags;

namespace {

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
  // A value the flag's type refuses: "Illegal value 'x' specified for flag 'mode'; why".
  if (absl::ConsumePrefix(&rest, "Illegal value '")) {
    const size_t value_end = rest.find("' specified for flag '");
    if (value_end != absl::string_view::npos) {
      const absl::string_view value = rest.substr(0, value_end);
      absl::string_view tail = rest.substr(value_end + std::strlen("' specified for flag '"));
      const size_t name_end = tail.find('\'');
      if (name_end != absl::string_view::npos) {
        absl::string_view why = tail.substr(name_end + 1);
        absl::ConsumePrefix(&why, ";");
        absl::ConsumePrefix(&why, " ");
        return absl::StrCat("--", tail.substr(0, name_end), "=", value, ": ",
                            why.empty() ? "not a valid value" : why);
      }
    }
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
constexpr absl::string_view kThisFileFromRoot = "runtime/config/flags.cc";

// Flag files from the source root, whatever path the compiler saw (absolute, or relative to
// the build folder under ccache's base_dir): "runtime/config/flags.cc", "absl/flags/parse.cc".
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
  o->crop_size = absl::GetFlag(FLAGS_crop_size);
  if (o->crop_size < 1 || o->crop_size > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--crop_size=", o->crop_size, ": must be between 1 and 4096"));
  }
  return DeviceFromFlags(*o);
}

}  // namespace

namespace flags_internal {

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
  o.optimizer.kind = absl::GetFlag(FLAGS_optimizer);
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
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (o.data_dir.empty() && o.dataset == data::DatasetKind::kMnist) {
    o.data_dir = data::kDefaultMnistDir;
  }
  if (o.data_dir.empty() && o.dataset == data::DatasetKind::kCifar10) {
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
  o.conv_algo = absl::GetFlag(FLAGS_conv_algo);
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

}  // namespace flags_internal

using flags_internal::ReadTrainingOptions;

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
  (*j)["input_pipeline"] = data::PipelineName(o.input_pipeline);
  (*j)["crop_size"] = o.input_pipeline == data::PipelineKind::kPlain ? nlohmann::json(nullptr)
                                                                     : nlohmann::json(o.crop_size);
}

}  // namespace fulcrum::runtime

// Abseil calls this hook (declared in absl/flags/usage_config.h) on each fatal command-line
// error, just before it would print the usage and exit with code 1. Inside ParseFlagsOrExit
// the error exits with code 2 (bad input), stated in our words; elsewhere Abseil goes on.
extern "C" void ABSL_INTERNAL_C_SYMBOL(AbslInternalReportFatalUsageError)(
    absl::string_view message) {
  fulcrum::runtime::OnFatalParseError(message);
}
