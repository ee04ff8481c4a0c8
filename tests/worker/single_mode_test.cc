// Single-mode training as a user runs it: the real worker binary as a child process, on the
// real Fashion-MNIST files of the Debian package, reading the summary.json it writes.
// One compute thread each: CTest runs two of these at once on the 2-core machines.
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

nlohmann::json ReadSummary(const fs::path& run_dir) {
  std::ifstream in(run_dir / "summary.json");
  EXPECT_TRUE(in.good()) << "no summary.json in " << run_dir;
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SingleModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(kFashionMnist) / "train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
    }
  }
};

// SIGTERM (and Ctrl-C's SIGINT) stop a run cleanly: it ends after the step in progress,
// writes summary.json (with the steps it ran and why it stopped) and the step records, and
// exits 128 + the signal, as a shell reports an interrupted command.
TEST_F(SingleModeTest, SigtermStopsCleanlyWithTheRecordsWritten) {
  for (const char* signal : {"TERM", "INT"}) {
    SCOPED_TRACE(signal);
    const fs::path dir = FreshDir(absl::StrCat("worker_sig", signal));
    const std::string log = (dir / "worker.log").string();
    const std::string worker = absl::StrCat(FULCRUM_BIN_DIR, "/worker");
    // In the background, wait until step 50 is logged, signal it, report its exit code.
    const RunResult r = ::fulcrum::testing::RunShell(absl::StrCat(
        "sh -c '", worker, " --model=mlp --train_steps=100000000 --log_every=50 --threads=1",
        " --run_dir=", (dir / "run").string(), " > ", log, " 2>&1 & p=$!;",
        " for i in $(seq 600); do grep -q step.50/ ", log, " && break; sleep 0.1; done;", " kill -",
        signal, " $p; wait $p; echo exit=$?'"));
    const int expected = std::string(signal) == "TERM" ? 143 : 130;
    EXPECT_NE(r.output.find(absl::StrCat("exit=", expected)), std::string::npos)
        << r.output << ReadLog(log);
    const nlohmann::json summary = ReadSummary(dir / "run");
    ASSERT_TRUE(summary.is_object()) << ReadLog(log);
    EXPECT_EQ(summary.value("stop_reason", ""), absl::StrCat("interrupted by SIG", signal));
    EXPECT_GE(summary.value("steps", 0), 50);
    EXPECT_LT(summary.value("steps", 0), 100000000);
    EXPECT_TRUE(fs::exists(dir / "run" / "steps.csv")) << ReadLog(log);
  }
}

// Ctrl-C in a terminal signals the whole process group of the command: a single-mode run in a
// process group of its own (setsid) gets SIGINT through its group and ends as cleanly.
TEST_F(SingleModeTest, CtrlCToItsProcessGroupStopsCleanly) {
  const fs::path dir = FreshDir("worker_group_sigint");
  const std::string log = (dir / "worker.log").string();
  const std::string worker = absl::StrCat(FULCRUM_BIN_DIR, "/worker");
  const RunResult r = ::fulcrum::testing::RunShell(absl::StrCat(
      "sh -c 'setsid ", worker, " --model=mlp --train_steps=100000000 --log_every=50 --threads=1",
      " --run_dir=", (dir / "run").string(), " > ", log, " 2>&1 & p=$!;",
      " for i in $(seq 600); do grep -q step.50/ ", log, " && break; sleep 0.1; done;",
      " kill -INT -$p; wait $p; echo exit=$?'"));
  EXPECT_NE(r.output.find("exit=130"), std::string::npos) << r.output << ReadLog(log);
  const nlohmann::json summary = ReadSummary(dir / "run");
  ASSERT_TRUE(summary.is_object()) << ReadLog(log);
  EXPECT_EQ(summary.value("stop_reason", ""), "interrupted by SIGINT");
  EXPECT_FALSE(summary.contains("partial")) << summary.dump(2);
  EXPECT_TRUE(fs::exists(dir / "run" / "steps.csv")) << ReadLog(log);
  EXPECT_TRUE(fs::exists(dir / "run" / "report.json")) << ReadLog(log);
}

// SIGKILL cannot be caught: what survives is what the profiler rewrote while the run went on
// (--profile_flush_secs): steps.csv, samples.csv and trace.json up to the last rewrite, and a
// summary.json marked partial (issue 13: a killed run kept only its TensorBoard file). A run
// that ends normally has no "partial" key.
TEST_F(SingleModeTest, SigkillLeavesTheRecordsUpToTheLastFlush) {
  const fs::path dir = FreshDir("worker_sigkill");
  const std::string log = (dir / "worker.log").string();
  const std::string worker = absl::StrCat(FULCRUM_BIN_DIR, "/worker");
  const RunResult r = ::fulcrum::testing::RunShell(absl::StrCat(
      "sh -c '", worker, " --model=mlp --train_steps=100000000 --log_every=50 --threads=1",
      " --profile_flush_secs=1 --profile_interval_ms=100 --run_dir=", (dir / "run").string(), " > ",
      log, " 2>&1 & p=$!;", " for i in $(seq 600); do grep -q step.50/ ", log,
      " && break; sleep 0.1; done;", " for i in $(seq 600); do test -f ",
      (dir / "run" / "trace.json").string(), " && break; sleep 0.1; done;",
      " kill -KILL $p; wait $p; echo exit=$?'"));
  EXPECT_NE(r.output.find("exit=137"), std::string::npos) << r.output << ReadLog(log);
  const nlohmann::json summary = ReadSummary(dir / "run");
  ASSERT_TRUE(summary.is_object()) << ReadLog(log);
  EXPECT_EQ(summary.value("partial", false), true) << summary.dump(2);
  EXPECT_EQ(summary.value("job", ""), "worker");
  auto lines = [](const fs::path& path) {
    std::ifstream in(path);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  // Killed once trace.json was rewritten (every 6 flushes at most: profiler::kTraceFlushFactor):
  // a header and at least the 50 logged steps; samples every 100 ms for over 6 s.
  EXPECT_GT(lines(dir / "run" / "steps.csv"), 50) << ReadLog(log);
  EXPECT_GT(lines(dir / "run" / "samples.csv"), 10) << ReadLog(log);
  std::ifstream trace(dir / "run" / "trace.json");
  const nlohmann::json events = nlohmann::json::parse(trace, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(events.is_discarded()) << "trace.json does not parse";

  // The same run ending on its own: the final summary replaces the partial one.
  const fs::path done = FreshDir("worker_flush_done");
  const RunResult ok = RunBinary(
      "worker", {"--model=logreg", "--train_steps=300", "--threads=1", "--profile_flush_secs=0.2",
                 "--profile_interval_ms=50", absl::StrCat("--run_dir=", done.string())});
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  const nlohmann::json final_summary = ReadSummary(done);
  EXPECT_FALSE(final_summary.contains("partial")) << final_summary.dump(2);
  EXPECT_EQ(final_summary.value("steps", 0), 300);
  // A single run gets the cluster run's report too (issue 13): report.json with the worker as
  // its one task, and report.html drawn from it.
  std::ifstream report_in(done / "report.json");
  const nlohmann::json report = nlohmann::json::parse(report_in, nullptr, false);
  ASSERT_TRUE(report.is_object()) << ok.output;
  EXPECT_EQ(report.value("single_mode", false), true);
  EXPECT_EQ(report.value("model", ""), "logreg");
  ASSERT_EQ(report["tasks"].size(), 1u) << report["tasks"].dump(2);
  EXPECT_EQ(report["tasks"][0]["task"], "worker-0");
  EXPECT_GT(report["tasks"][0]["cpu_seconds"].get<double>(), 0.0);
  EXPECT_TRUE(fs::exists(done / "report.html")) << ok.output;
}

// report.json's machines: a run with two CPU-bound loops beside it (real processes, started
// before it and killed after) says the machine spent CPUs on other work, in report.json and in
// the cluster's other_cpus_max the sweeps read. Two loops, so that even a one-core machine
// gives them over half a CPU.
TEST_F(SingleModeTest, ReportSaysOtherWorkRanBesideTheRun) {
  const fs::path dir = FreshDir("worker_beside_other_work");
  const std::string worker = absl::StrCat(FULCRUM_BIN_DIR, "/worker");
  const RunResult r = ::fulcrum::testing::RunShell(absl::StrCat(
      "sh -c 'p=; for i in 1 2; do timeout 300 sh -c \"while :; do :; done\" & p=\"$p $!\"; "
      "done; ",
      worker, " --model=logreg --train_steps=8000 --threads=1 --profile_interval_ms=50 --run_dir=",
      (dir / "run").string(), " > ", (dir / "worker.log").string(),
      " 2>&1; echo exit=$?; kill $p'"));
  ASSERT_NE(r.output.find("exit=0"), std::string::npos)
      << r.output << ReadLog((dir / "worker.log").string());
  std::ifstream in(dir / "run" / "report.json");
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object());
  ASSERT_EQ(report["machines"].size(), 1u) << report["machines"].dump(2);
  const nlohmann::json& m = report["machines"][0];
  EXPECT_EQ(m["tasks"], nlohmann::json({"worker-0"}));
  EXPECT_EQ(m["measured_by"], "worker-0");
  ASSERT_TRUE(m["other_cpus"].is_number()) << m.dump(2);
  EXPECT_GT(m["other_cpus"].get<double>(), 0.5) << m.dump(2);
  EXPECT_GT(m["job_cpus"].get<double>(), 0.0) << m.dump(2);
  EXPECT_LE(m["busy_cpus"].get<double>(), m["cores"].get<double>() + 1e-9) << m.dump(2);
  EXPECT_DOUBLE_EQ(report["cluster"]["other_cpus_max"].get<double>(),
                   m["other_cpus"].get<double>());
}

// The worker's /metrics endpoint serves (it failed with "null context when constructing
// CivetServer" while the worker linked cuBLAS: cuBLASLt's 94 KiB of static TLS no longer fit
// in civetweb's 100 KiB thread stacks, so pthread_create refused them; the CUDA backend is now
// a plugin loaded only for a GPU, ops/cuda_plugin.h). Scraped while the run lingers.
TEST_F(SingleModeTest, MetricsEndpointServesTheWorkersSeries) {
  const fs::path dir = FreshDir("worker_metrics");
  const fs::path script = dir / "scrape.sh";
  std::ofstream(script) << R"sh(log="$2/worker.log"
"$1" --model=logreg --train_steps=200 --threads=1 --metrics_port=0 --metrics_linger_secs=60 \
  --run_dir="$2/run" > "$log" 2>&1 &
p=$!
for i in $(seq 600); do grep -q "stays up until scraped" "$log" || ! kill -0 $p 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*Prometheus metrics on port \([0-9]*\).*/\1/p' "$log")
python3 -c "import sys, urllib.request
sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=10).read().decode())"
wait $p
echo exit=$?
cat "$log"
)sh";
  const RunResult r = ::fulcrum::testing::RunShell(
      absl::StrCat("sh ", script.string(), " ", FULCRUM_BIN_DIR, "/worker ", dir.string()));
  EXPECT_NE(r.output.find(R"(process_resident_memory_bytes{task_index="0",task_type="worker"})"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("exit=0"), std::string::npos) << r.output;
}

// The Touchstone / CS744 settings: SGD lr 0.01, batch 256, 1000 steps. PyTorch with the same
// settings reaches 0.76 on this data.
TEST_F(SingleModeTest, LogregTouchstoneSettingsReach75Percent) {
  const fs::path dir = FreshDir("worker_logreg_touchstone");
  RunResult r = RunBinary(
      "worker", {"--model=logreg", "--optimizer=sgd", "--learning_rate=0.01", "--batch_size=256",
                 "--train_steps=1000", "--threads=1", "--run_dir=" + dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = ReadSummary(dir);
  for (const char* key : {"model", "batch_size", "steps", "final_test_accuracy", "final_test_loss",
                          "examples_per_sec", "wall_seconds"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s["model"], "logreg");
  EXPECT_EQ(s["batch_size"], 256);
  EXPECT_EQ(s["steps"], 1000);
  EXPECT_GE(s["final_test_accuracy"].get<double>(), 0.75) << r.output;
  EXPECT_GT(s["examples_per_sec"].get<double>(), 0.0);
  // Progress lines: step, loss and examples/sec every --log_every steps.
  EXPECT_NE(r.output.find("step 100/1000 loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("final test accuracy"), std::string::npos);
}

TEST_F(SingleModeTest, LogregTunedReaches82PercentIn5Epochs) {
  const fs::path dir = FreshDir("worker_logreg_tuned");
  RunResult r = RunBinary(
      "worker", {"--model=logreg", "--optimizer=sgd", "--learning_rate=0.1", "--batch_size=64",
                 "--epochs=5", "--threads=1", "--run_dir=" + dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = ReadSummary(dir);
  EXPECT_LE(s["epochs"].get<double>(), 5.0 + 1e-9);
  EXPECT_GE(s["final_test_accuracy"].get<double>(), 0.82) << r.output;
}

TEST_F(SingleModeTest, MlpReaches85PercentIn3Epochs) {
  const fs::path dir = FreshDir("worker_mlp");
  RunResult r = RunBinary(
      "worker", {"--model=mlp", "--optimizer=adam", "--learning_rate=0.001", "--batch_size=128",
                 "--epochs=3", "--threads=1", "--run_dir=" + dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = ReadSummary(dir);
  EXPECT_LE(s["epochs"].get<double>(), 3.0 + 1e-9);
  EXPECT_GE(s["final_test_accuracy"].get<double>(), 0.85) << r.output;
}

// A run that diverges without a NaN (mlp at learning rate 100: loss ~40 from the first
// steps, 0.10 accuracy, once a success) ends failed within 100 steps, naming the cause.
TEST_F(SingleModeTest, ADivergedRunEndsFailedNamingTheCause) {
  const fs::path dir = FreshDir("worker_diverged");
  RunResult r = RunBinary("worker", {"--model=mlp", "--learning_rate=100", "--train_steps=1000",
                                     "--threads=1", "--run_dir=" + dir.string()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the model diverged at step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("learning rate is probably too high"), std::string::npos) << r.output;
  const size_t at = r.output.find("the model diverged at step ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LE(std::atoll(r.output.c_str() + at + std::strlen("the model diverged at step ")), 100)
      << r.output;
}

// In-graph replication: the same run on two CPU replicas (each half of every batch, one
// thread each) learns as well, and the summary names the devices.
TEST_F(SingleModeTest, LogregOnTwoCpuReplicasMatchesOneDevice) {
  const fs::path dir = FreshDir("worker_logreg_replicas");
  RunResult r = RunBinary("worker", {"--model=logreg", "--optimizer=sgd", "--learning_rate=0.01",
                                     "--batch_size=256", "--train_steps=1000", "--threads=2",
                                     "--devices=cpu:0,cpu:1", "--run_dir=" + dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = ReadSummary(dir);
  EXPECT_EQ(s["devices"], nlohmann::json::array({"cpu:0", "cpu:1"}));
  // The same 0.75 bar as one device with these settings (the gradients are the same up to
  // float rounding, so the runs match closely).
  EXPECT_GE(s["final_test_accuracy"].get<double>(), 0.75) << r.output;
}

TEST_F(SingleModeTest, AutoencoderTestMseFallsBelow003) {
  const fs::path dir = FreshDir("worker_autoencoder");
  RunResult r = RunBinary(
      "worker", {"--model=autoencoder", "--optimizer=adam", "--learning_rate=0.002",
                 "--batch_size=64", "--epochs=3", "--threads=1", "--run_dir=" + dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json s = ReadSummary(dir);
  EXPECT_TRUE(s["final_test_accuracy"].is_null());
  EXPECT_LT(s["final_test_loss"].get<double>(), 0.03) << r.output;
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// Single mode's watchdog: a step that takes longer than max(5 x the median step,
// --watchdog_secs) is named in the log and kept in summary.json. A whole-batch mlp step on
// 20,000 synthetic examples takes far longer than --watchdog_secs=0.2 here (no median yet at
// the first step), so the first step is named; it moves again when the step ends.
TEST(SingleModeWatchdogTest, AStepLongerThanTheThresholdIsNamedInTheLogAndTheSummary) {
  const fs::path dir = FreshDir("worker_watchdog");
  const RunResult r =
      RunBinary("worker", {"--model=mlp", "--dataset=synthetic", "--synthetic_examples=20000",
                           "--batch_size=20000", "--train_steps=3", "--threads=1", "--eval=false",
                           "--watchdog_secs=0.2", "--run_dir=" + (dir / "run").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("watchdog: worker:0 stuck at local step 0"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("watchdog: worker:0 moves again"), std::string::npos) << r.output;
  const nlohmann::json summary = ReadSummary(dir / "run");
  ASSERT_TRUE(summary.is_object()) << r.output;
  const nlohmann::json& episodes = summary["watchdog"]["episodes"];
  ASSERT_FALSE(episodes.empty()) << summary["watchdog"].dump(2);
  EXPECT_EQ(episodes[0]["task"], "worker:0");
  EXPECT_NE(episodes[0]["what"].get<std::string>().find("in its own computation"),
            std::string::npos)
      << episodes[0].dump();
  EXPECT_EQ(episodes[0]["ongoing"], false);
  EXPECT_GE(summary["watchdog"]["threshold_seconds"].get<double>(), 0.2);
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// A GPU worker's copy accounting, checked without a GPU (issue 28): single mode on the arena
// device (host memory posing as one, every copy across counted) keeps the variables there, so
// after the first step a step copies its batch in and its loss out and allocates nothing; the
// summary and steps.csv say so.
TEST(SingleModeDeviceTest, TheArenaDeviceCountsOnlyTheBatchInAndTheLossOut) {
  const std::filesystem::path dir = FreshDir("worker_arena");
  const RunResult r =
      RunBinary("worker", {"--model=mnist_cnn", "--dataset=synthetic", "--synthetic_examples=512",
                           "--batch_size=32", "--train_steps=12", "--threads=1", "--device=arena",
                           "--run_dir=" + dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("variables, gradients and optimizer slots live on arena"),
            std::string::npos)
      << r.output;
  const nlohmann::json s = ReadSummary(dir);
  const nlohmann::json& most = s["device_copies"]["max_per_step_after_first"];
  EXPECT_EQ(most["allocations"], 0) << s["device_copies"].dump();
  EXPECT_EQ(most["h2d_bytes"], 32 * 28 * 28 * 4 + 32 * 4) << s["device_copies"].dump();
  EXPECT_LE(most["d2h_bytes"].get<int64_t>(), 64) << s["device_copies"].dump();
  EXPECT_EQ(s["devices"], nlohmann::json::array({"arena"}));
  EXPECT_EQ(s["tf32"], false);
  std::ifstream csv(dir / "steps.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find(",h2d_bytes,h2d_calls,d2h_bytes,d2h_calls,device_allocs"),
            std::string::npos)
      << header;
}

}  // namespace
}  // namespace fulcrum
