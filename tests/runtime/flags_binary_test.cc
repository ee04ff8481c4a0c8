// The command line of the real ps, worker and chief binaries, parsed by Abseil's parser
// (runtime::ParseFlagsOrExit): --help lists every flag and exits 0; --flagfile and --fromenv
// set flags; a missing flagfile, an unknown flag, a value that does not parse or a stray
// positional argument exits 2 naming what is wrong. Training runs are tiny (synthetic data,
// a few steps, no evaluation, no profiler) so each takes well under a second.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/subprocess.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;

using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::RunBinary;
using ::fulcrum::testing::RunResult;
using ::fulcrum::testing::RunShell;

// Flags of a single-mode worker run that takes a moment: synthetic data, no evaluation.
const std::vector<std::string>& TinyRunFlags() {
  static const auto* const flags =
      new std::vector<std::string>{"--dataset=synthetic", "--synthetic_examples=256",
                                   "--batch_size=32",     "--eval=false",
                                   "--profile=off",       "--threads=1",
                                   "--log_every=1"};
  return *flags;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

nlohmann::json ReadSummary(const fs::path& run_dir) {
  std::ifstream in(run_dir / "summary.json");
  EXPECT_TRUE(in.good()) << "no summary.json in " << run_dir;
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Exit code 2 and one line "<program>: ..." naming every needle.
void ExpectBadInput(const std::string& program, const RunResult& r,
                    const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, program + ": ")) << r.output;
  for (const auto& needle : needles) {
    EXPECT_TRUE(Contains(r.output, needle)) << "missing '" << needle << "' in\n" << r.output;
  }
}

TEST(FlagsBinaryTest, HelpListsEveryFlagWithItsHelpTextAndExitsZero) {
  for (const char* binary : {"ps", "worker", "chief"}) {
    SCOPED_TRACE(binary);
    const RunResult r = RunBinary(binary, {"--help"}, 60);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_FALSE(Contains(r.output, "No flags matched")) << r.output;
    // The usage text, then each flag with its help text.
    EXPECT_TRUE(Contains(r.output, "Fulcrum ")) << r.output;
    EXPECT_TRUE(Contains(r.output, "--cluster_spec (ClusterSpec JSON file")) << r.output;
    for (const char* flag :
         {"--model (", "--train_steps (", "--job_name (", "--task_index (", "--mode (",
          "--profile (", "--metrics_port (", "--flagfile (", "--fromenv (",
          // Flags defined beside the code that reads them (runtime/*_flags.cc).
          "--device (", "--devices (", "--tf32 (", "--prefetch (", "--replicate_shards ("}) {
      EXPECT_TRUE(Contains(r.output, flag)) << flag << " missing in\n" << r.output;
    }
  }
}

TEST(FlagsBinaryTest, HelpfullAndHelpMatchExitZero) {
  const RunResult full = RunBinary("ps", {"--helpfull"}, 60);
  EXPECT_EQ(full.exit_code, 0) << full.output;
  EXPECT_TRUE(Contains(full.output, "--cluster_spec")) << full.output;
  const RunResult match = RunBinary("worker", {"--help=learning_rate"}, 60);
  EXPECT_EQ(match.exit_code, 0) << match.output;
  EXPECT_TRUE(Contains(match.output, "--learning_rate")) << match.output;
  EXPECT_FALSE(Contains(match.output, "--placement")) << match.output;
}

TEST(FlagsBinaryTest, FlagfileSetsTheModel) {
  const fs::path dir = FreshDir("flags_flagfile");
  const fs::path flagfile = dir / "mlp.flags";
  std::ofstream(flagfile) << "# a tiny mlp run\n--model=mlp\n--train_steps=3\n";
  const fs::path run_dir = dir / "run";
  const RunResult r = RunBinary(
      "worker",
      Concat({"--flagfile=" + flagfile.string(), "--run_dir=" + run_dir.string()}, TinyRunFlags()),
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json s = ReadSummary(run_dir);
  EXPECT_EQ(s["model"], "mlp") << s.dump();
  EXPECT_EQ(s["steps"], 3) << s.dump();
}

TEST(FlagsBinaryTest, CommandLineAfterTheFlagfileWins) {
  const fs::path dir = FreshDir("flags_flagfile_order");
  const fs::path flagfile = dir / "run.flags";
  std::ofstream(flagfile) << "--model=mlp\n--train_steps=3\n";
  const fs::path run_dir = dir / "run";
  const RunResult r = RunBinary("worker",
                                Concat({"--flagfile=" + flagfile.string(), "--train_steps=2",
                                        "--run_dir=" + run_dir.string()},
                                       TinyRunFlags()),
                                120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json s = ReadSummary(run_dir);
  EXPECT_EQ(s["model"], "mlp") << s.dump();
  EXPECT_EQ(s["steps"], 2) << s.dump();
}

TEST(FlagsBinaryTest, FromenvReadsFlagsFromTheEnvironment) {
  const fs::path run_dir = FreshDir("flags_fromenv") / "run";
  const RunResult r =
      RunShell(absl::StrCat("env FLAGS_model=mlp FLAGS_train_steps=2 ", FULCRUM_BIN_DIR,
                            "/worker --fromenv=model,train_steps --run_dir=", run_dir.string(), " ",
                            absl::StrJoin(TinyRunFlags(), " ")),
               120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json s = ReadSummary(run_dir);
  EXPECT_EQ(s["model"], "mlp") << s.dump();
  EXPECT_EQ(s["steps"], 2) << s.dump();
}

TEST(FlagsBinaryTest, SeparateValuesAndBoolNegationStillParse) {
  const fs::path run_dir = FreshDir("flags_forms") / "run";
  const RunResult r =
      RunBinary("worker",
                {"--model", "mlp", "--train_steps", "2", "-batch_size=16", "--noeval",
                 "--profile=off", "--dataset=synthetic", "--synthetic_examples=64", "--threads=1",
                 "--run_dir=" + run_dir.string()},
                120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json s = ReadSummary(run_dir);
  EXPECT_EQ(s["model"], "mlp") << s.dump();
  EXPECT_EQ(s["batch_size"], 16) << s.dump();
  EXPECT_TRUE(s["final_test_accuracy"].is_null()) << s.dump();  // --noeval
}

TEST(FlagsBinaryTest, MissingFlagfileExitsTwoNamingTheFile) {
  const std::string missing = (FreshDir("flags_missing") / "no_such.flags").string();
  for (const char* binary : {"ps", "worker", "chief"}) {
    SCOPED_TRACE(binary);
    ExpectBadInput(binary, RunBinary(binary, {"--flagfile=" + missing, "--train_steps=1"}, 60),
                   {"--flagfile=" + missing, "cannot open"});
  }
}

TEST(FlagsBinaryTest, UnknownFlagExitsTwoNamingIt) {
  ExpectBadInput("worker", RunBinary("worker", {"--train_steps=1", "--no_such_flag=3"}, 60),
                 {"unknown flag --no_such_flag"});
  ExpectBadInput("ps", RunBinary("ps", {"--bogus"}, 60), {"unknown flag --bogus"});
  // The same inside a flagfile.
  const fs::path flagfile = FreshDir("flags_unknown") / "bad.flags";
  std::ofstream(flagfile) << "--train_steps=1\n--modle=mlp\n";
  ExpectBadInput("chief", RunBinary("chief", {"--flagfile=" + flagfile.string()}, 60),
                 {"unknown flag --modle"});
}

TEST(FlagsBinaryTest, ValueThatDoesNotParseExitsTwoNamingTheFlag) {
  ExpectBadInput("worker", RunBinary("worker", {"--train_steps=ten"}, 60), {"train_steps", "ten"});
  ExpectBadInput("worker", RunBinary("worker", {"--eval=maybe", "--train_steps=1"}, 60),
                 {"eval", "maybe"});
  ExpectBadInput("ps", RunBinary("ps", {"--task_index"}, 60), {"task_index"});
  ExpectBadInput("worker", RunBinary("worker", {"--overlap=maybe", "--train_steps=1"}, 60),
                 {"overlap", "maybe"});
}

TEST(FlagsBinaryTest, StrayPositionalArgumentExitsTwoNamingIt) {
  ExpectBadInput("worker", RunBinary("worker", {"--train_steps=1", "mlp"}, 60),
                 {"unexpected argument 'mlp'"});
  // "--eval false": a bool flag takes no separate value, so "false" is a stray argument.
  ExpectBadInput("worker", RunBinary("worker", {"--train_steps=1", "--eval", "false"}, 60),
                 {"unexpected argument 'false'"});
  ExpectBadInput("chief", RunBinary("chief", {"--", "--train_steps=1"}, 60),
                 {"unexpected argument '--train_steps=1'"});
}

TEST(FlagsBinaryTest, FromenvWithAnUnsetVariableExitsTwoNamingIt) {
  const RunResult r = RunShell(absl::StrCat("env -u FLAGS_model ", FULCRUM_BIN_DIR,
                                            "/worker --train_steps=1 --fromenv=model"),
                               60);
  ExpectBadInput("worker", r, {"FLAGS_model"});
}

TEST(FlagsBinaryTest, ValidationErrorsAfterParsingStillExitTwo) {
  ExpectBadInput("worker", RunBinary("worker", {"--train_steps=1", "--batch_size=0"}, 60),
                 {"--batch_size=0"});
  ExpectBadInput("ps", RunBinary("ps", {"--batch_size=0"}, 60), {"--batch_size=0"});
}

// --staleness belongs to --mode=ssp: elsewhere, or negative, every role exits 2 naming it.
TEST(FlagsBinaryTest, StalenessWithoutSspOrNegativeExitsTwoNamingIt) {
  const fs::path dir = FreshDir("flags_staleness");
  const std::string spec = (dir / "spec.json").string();
  std::ofstream(spec) << R"({"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                             "worker": ["127.0.0.1:3"]})";
  for (const char* role : {"ps", "worker", "chief"}) {
    ExpectBadInput(
        role,
        RunBinary(role,
                  {"--cluster_spec=" + spec, "--train_steps=1", "--mode=async", "--staleness=1"},
                  60),
        {"--staleness=1", "--mode=ssp"});
  }
  ExpectBadInput("ps",
                 RunBinary("ps", {"--cluster_spec=" + spec, "--mode=ssp", "--staleness=-2"}, 60),
                 {"--staleness=-2"});
}

// A single-mode worker owns its --run_dir: a folder holding a finished run is refused (exit 2,
// naming the folder, its report.json and --overwrite) and its records stay; --overwrite
// replaces them.
TEST(FlagsBinaryTest, ReusedRunDirIsRefusedUnlessOverwrite) {
  const fs::path run_dir = FreshDir("flags_reused_run_dir") / "run";
  const std::vector<std::string> first =
      Concat({"--model=mlp", "--train_steps=2", "--run_dir=" + run_dir.string()}, TinyRunFlags());
  ASSERT_EQ(RunBinary("worker", first, 120).exit_code, 0);
  std::ifstream in(run_dir / "summary.json");
  const std::string before((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(before.empty());

  const RunResult again = RunBinary(
      "worker",
      Concat({"--model=mlp", "--train_steps=3", "--run_dir=" + run_dir.string()}, TinyRunFlags()),
      120);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  for (const std::string& needle :
       {"--run_dir=" + run_dir.string(), std::string("report.json"),
        std::string("already holds a finished run"), std::string("--overwrite")}) {
    EXPECT_TRUE(Contains(again.output, needle)) << needle << "\n" << again.output;
  }
  std::ifstream after_in(run_dir / "summary.json");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(after_in)), {}), before);

  const RunResult replaced = RunBinary(
      "worker",
      Concat({"--model=mlp", "--train_steps=3", "--overwrite", "--run_dir=" + run_dir.string()},
             TinyRunFlags()),
      120);
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_EQ(ReadSummary(run_dir)["steps"], 3);
}

// TensorFlow 1.x's host flags instead of --cluster_spec (issue 13): both at once, or a
// malformed entry, exits 2 naming the flags / the flag and the entry, before any socket opens.
TEST(FlagsBinaryTest, HostFlagsAndClusterSpecTogetherExitTwoNamingBoth) {
  const fs::path spec = FreshDir("flags_hosts_both") / "spec.json";
  std::ofstream(spec) << R"({"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                             "worker": ["127.0.0.1:3"]})";
  for (const char* binary : {"ps", "worker", "chief"}) {
    SCOPED_TRACE(binary);
    const RunResult r =
        RunBinary(binary,
                  {"--cluster_spec=" + spec.string(), "--ps_hosts=127.0.0.1:2",
                   "--worker_hosts=127.0.0.1:3", "--chief_hosts=127.0.0.1:1", "--train_steps=1"},
                  60);
    ExpectBadInput(binary, r, {"--cluster_spec=" + spec.string(), "--ps_hosts", "--worker_hosts"});
    EXPECT_FALSE(Contains(r.output, "listening")) << r.output;
  }
}

TEST(FlagsBinaryTest, MalformedHostEntryExitsTwoNamingTheFlagAndTheEntry) {
  for (const char* binary : {"ps", "worker", "chief"}) {
    SCOPED_TRACE(binary);
    ExpectBadInput(
        binary,
        RunBinary(binary,
                  {"--ps_hosts=127.0.0.1:2", "--worker_hosts=127.0.0.1:3,localhost",
                   "--chief_hosts=127.0.0.1:1", "--train_steps=1"},
                  60),
        {"--worker_hosts=127.0.0.1:3,localhost", "entry 1", "\"localhost\"", "missing port"});
    ExpectBadInput(binary,
                   RunBinary(binary,
                             {"--ps_hosts=127.0.0.1:70000", "--worker_hosts=127.0.0.1:3",
                              "--chief_hosts=127.0.0.1:1", "--train_steps=1"},
                             60),
                   {"--ps_hosts=127.0.0.1:70000", "entry 0", "out of range"});
  }
  // A worker given only a host flag is a cluster task, not a single-mode run.
  ExpectBadInput("worker",
                 RunBinary("worker", {"--worker_hosts=127.0.0.1:3", "--train_steps=1"}, 60),
                 {"no --ps_hosts"});
}

}  // namespace
}  // namespace fulcrum
