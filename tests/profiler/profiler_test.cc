// Profiler: every sink is written from the same records. A profiler over recorded /proc files
// (a folder the test writes) gets known steps, RPCs and evaluations; the test reads back
// steps.csv, samples.csv, trace.json, the TensorBoard file (CRCs checked) and the summary.
#include "profiler/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "profiler/tfevents.h"
#include "proto/tensorboard.pb.h"

namespace fulcrum::profiler {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A /proc snapshot: process ticks, two cores, RSS, lo and eth0 counters.
void WriteProc(const fs::path& dir, uint64_t ticks, uint64_t lo_bytes, uint64_t eth_bytes) {
  WriteText(dir / "self/stat",
            absl::StrCat("4242 (worker) S 1 4242 4242 0 -1 4194560 100 0 0 0 ", ticks, " ",
                         ticks / 2, " 0 0 20 0 8 0 100 1000000 2000 18446744073709551615\n"));
  WriteText(dir / "stat",
            absl::StrCat("cpu  200 0 100 1000 0 0 0 0 0 0\n", "cpu0 100 0 50 500 0 0 0 0 0 0\n",
                         "cpu1 100 0 50 500 0 0 0 0 0 0\n", "intr 1\n"));
  WriteText(dir / "self/status",
            "Name:\tworker\nVmPeak:\t  300000 kB\nVmHWM:\t   20000 kB\nVmRSS:\t   10000 kB\n");
  WriteText(
      dir / "net/dev",
      absl::StrCat("Inter-|   Receive                                                |  Transmit\n",
                   " face |bytes    packets errs drop fifo frame compressed multicast|bytes    "
                   "packets errs drop fifo colls carrier compressed\n",
                   "    lo: ", lo_bytes, " 10 0 0 0 0 0 0 ", lo_bytes, " 10 0 0 0 0 0 0\n",
                   "  eth0: ", eth_bytes, " 20 0 0 0 0 0 0 ", eth_bytes / 2, " 5 0 0 0 0 0 0\n"));
}

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            absl::StrCat("fulcrum_profiler_test_", ::getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    WriteProc(root_ / "proc", 1000, 5000, 7000);
  }
  void TearDown() override { fs::remove_all(root_); }

  ProfilerOptions Options(bool enabled) {
    ProfilerOptions o;
    o.enabled = enabled;
    o.interval = absl::Milliseconds(20);
    o.job = "worker";
    o.task_index = 1;
    o.task_dir = (root_ / "run" / "worker-1").string();
    return o;
  }

  fs::path root_;
};

// A PushPull RPC with `peer` as the runtime reports it.
RpcEvent Rpc(const std::string& peer, int64_t i, int64_t duration_us, uint64_t sent,
             uint64_t received) {
  RpcEvent e;
  e.peer = &peer;
  e.method = "PushPull";
  e.begin_unix_us = 1'700'000'000'000'000 + i;
  e.duration_us = duration_us;
  e.bytes_sent = sent;
  e.bytes_received = received;
  return e;
}

StepRecord Step(int64_t i) {
  StepRecord r;
  r.step = i;
  r.global_step = 2 * i;
  r.examples = 128;
  r.loss = 1.0 / static_cast<double>(i);
  r.begin_unix_us = 1'700'000'000'000'000 + i * 10'000;
  r.data_ms = 0.5;
  r.forward_ms = 2.0;
  r.backward_ms = 3.0;
  r.push_ms = 1.5;
  r.sync_wait_ms = 1.0;
  r.wall_ms = 8.0;
  return r;
}

TEST_F(ProfilerTest, EverySinkReadsTheSameRecords) {
  auto prof = Profiler::Start(Options(true), DirProcSource((root_ / "proc").string()));
  ASSERT_TRUE(prof.ok()) << prof.status();
  constexpr int kSteps = 30;
  for (int i = 1; i <= kSteps; ++i) (*prof)->RecordStep(Step(i));
  const std::string peer = "ps-0";
  for (int i = 0; i < 5; ++i) (*prof)->OnRpc(Rpc(peer, i, 100, 1000, 2000));
  // Traffic seen by the kernel between the baseline and the final sample.
  WriteProc(root_ / "proc", 1100, 5000 + 4096, 7000 + 1000);
  nlohmann::json summary;
  ASSERT_TRUE((*prof)->Finish(&summary).ok());
  const fs::path dir = root_ / "run" / "worker-1";

  // steps.csv: a header and one row per step, in order, with the recorded phases.
  const std::vector<std::string> lines =
      absl::StrSplit(ReadAll(dir / "steps.csv"), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kSteps + 1));
  EXPECT_EQ(lines[0],
            "step,global_step,examples,loss,begin_unix_us,wall_ms,data_ms,pull_ms,forward_ms,"
            "backward_ms,push_ms,sync_wait_ms,examples_per_sec,comm_wait_ms,inflight_begin_ms,"
            "inflight_ms,h2d_bytes,h2d_calls,d2h_bytes,d2h_calls,device_allocs");
  EXPECT_EQ(lines[3],
            "3,6,128,0.333333,1700000000030000,8.000,0.500,0.000,2.000,3.000,1.500,1.000,16000.0,"
            "0.000,0.000,0.000,0,0,0,0,0");

  // samples.csv: the baseline and at least the final sample, with both interfaces.
  const std::vector<std::string> samples =
      absl::StrSplit(ReadAll(dir / "samples.csv"), '\n', absl::SkipEmpty());
  ASSERT_GE(samples.size(), 3u);
  EXPECT_NE(samples[0].find("lo_tx_bytes"), std::string::npos) << samples[0];
  EXPECT_NE(samples[0].find("eth0_rx_bytes"), std::string::npos) << samples[0];
  EXPECT_NE(samples[0].find("core1_percent"), std::string::npos) << samples[0];

  // trace.json: one "step" span and five phase spans per step (pull is 0), RPC spans.
  const nlohmann::json trace = nlohmann::json::parse(ReadAll(dir / "trace.json"));
  int steps = 0, phases = 0, rpcs = 0, counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "step") ++steps;
    if (e["ph"] == "X" && e["cat"] == "phase") ++phases;
    if (e["ph"] == "b" && e["cat"] == "rpc") ++rpcs;  // async spans: RPCs overlap
    if (e["ph"] == "C") ++counters;
  }
  EXPECT_EQ(steps, kSteps);
  EXPECT_EQ(phases, 5 * kSteps);
  EXPECT_EQ(rpcs, 5);
  EXPECT_GT(counters, 0);

  // TensorBoard: the file_version record, then the step scalars and the system scalars.
  std::vector<fs::path> events;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      events.push_back(entry.path());
    }
  }
  ASSERT_EQ(events.size(), 1u);
  auto records = ReadTfRecords(ReadAll(events[0]));
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_FALSE(records->empty());
  pb::tensorboard::Event first;
  ASSERT_TRUE(first.ParseFromString((*records)[0]));
  EXPECT_EQ(first.file_version(), "brain.Event:2");
  int loss = 0, cpu = 0;
  int64_t max_train_step = 0, last_cpu_step = -1;
  std::set<std::string> tags;
  for (size_t i = 1; i < records->size(); ++i) {
    pb::tensorboard::Event e;
    ASSERT_TRUE(e.ParseFromString((*records)[i]));
    for (const auto& v : e.summary().value()) {
      tags.insert(v.tag());
      if (v.tag() == "train/loss") {
        ++loss;
        EXPECT_FLOAT_EQ(v.simple_value(), static_cast<float>(1.0 / (e.step() / 2)));
        max_train_step = std::max(max_train_step, e.step());
      }
      if (v.tag() == "system/cpu_percent") {
        ++cpu;
        // Samples are on the global-step axis of the train/ series (not numbered apart).
        EXPECT_GE(e.step(), last_cpu_step);
        last_cpu_step = e.step();
      }
    }
  }
  EXPECT_EQ(loss, kSteps);
  EXPECT_GE(cpu, 2);
  // The wider figures have their system/ series too (docs/profiler.md lists them).
  for (const char* tag :
       {"system/cpu_user_percent", "system/cpu_system_percent", "system/core/0_percent",
        "system/core/1_percent", "system/host/cpu_user_percent", "system/host/mem_used_mb",
        "system/host/load1", "system/host/disk_write_mb_per_sec"}) {
    EXPECT_EQ(tags.count(tag), 1u) << tag;
  }
  // The final sample, taken after the last step was recorded, sits at its global step.
  EXPECT_EQ(last_cpu_step, max_train_step);

  // Summary: Touchstone's keys and ours, from the same records.
  for (const char* key : {"Job Execution Time", "Total CPU Usage", "Total CPU usage per core",
                          "Total Memory used", "Total bytes sent over network",
                          "Total bytes received over network", "System Information"}) {
    EXPECT_TRUE(summary.contains(key)) << key;
  }
  for (const char* key : {"System", "Node Name", "Release", "Version", "Machine", "Processor"}) {
    EXPECT_TRUE(summary["System Information"].contains(key)) << key;
  }
  EXPECT_EQ(summary["profile"], "on");
  EXPECT_EQ(summary["Total Memory used"], 20000 * 1024);
  EXPECT_EQ(summary["Total bytes sent over network"], 4096 + 500);
  EXPECT_EQ(summary["Total bytes received over network"], 4096 + 1000);
  EXPECT_EQ(summary["network_loopback_bytes_sent"], 4096);
  EXPECT_EQ(summary["network_external_bytes_received"], 1000);
  EXPECT_EQ(summary["Total CPU usage per core"].size(), 2u);
  EXPECT_EQ(summary["app_bytes_sent"], 5000);
  EXPECT_EQ(summary["app_bytes_received"], 10000);
  ASSERT_EQ(summary["peer_traffic"].size(), 1u);
  EXPECT_EQ(summary["peer_traffic"][0]["peer"], "ps-0");
  EXPECT_EQ(summary["peer_traffic"][0]["rpcs"], 5);
  // Step-time percentiles are the worker's run statistics: the profiler leaves them out.
  EXPECT_FALSE(summary.contains("step_time_p50_ms"));
  EXPECT_FALSE(summary.contains("step_time_p99_ms"));
  EXPECT_DOUBLE_EQ(summary["step_phase_p50_ms"]["backward"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(summary["examples_per_sec_within_steps"].get<double>(), 16000.0);
  EXPECT_DOUBLE_EQ(summary["step_phase_mean_ms"]["sync_wait"].get<double>(), 1.0);
  EXPECT_EQ(summary["series"]["steps"]["loss"].size(), static_cast<size_t>(kSteps));
}

// Records arrive from the training thread and from RPC threads while the sampler thread
// writes TensorBoard events every few milliseconds: nothing is lost or counted twice.
TEST_F(ProfilerTest, RecordsFromManyThreadsWhileSampling) {
  ProfilerOptions o = Options(true);
  o.interval = absl::Milliseconds(10);
  auto prof = Profiler::Start(o, DirProcSource((root_ / "proc").string()));
  ASSERT_TRUE(prof.ok()) << prof.status();
  constexpr int kSteps = 2000, kRpcThreads = 3, kRpcs = 3000;
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    for (int i = 1; i <= kSteps; ++i) (*prof)->RecordStep(Step(i));
  });
  for (int t = 0; t < kRpcThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string peer = absl::StrCat("ps-", t);
      for (int i = 0; i < kRpcs; ++i) (*prof)->OnRpc(Rpc(peer, i, 5, 3, 4));
    });
  }
  for (auto& th : threads) th.join();
  nlohmann::json summary;
  ASSERT_TRUE((*prof)->Finish(&summary).ok());
  EXPECT_EQ(summary["profiled_steps"], kSteps);
  EXPECT_EQ(summary["rpcs"], kRpcThreads * kRpcs);
  EXPECT_EQ(summary["app_bytes_received"], 4 * kRpcThreads * kRpcs);
  const std::string steps = ReadAll(root_ / "run" / "worker-1" / "steps.csv");
  EXPECT_EQ(std::count(steps.begin(), steps.end(), '\n'), kSteps + 1);
  // Every step reached TensorBoard exactly once, whichever sample wrote it.
  std::vector<fs::path> events;
  for (const auto& entry : fs::directory_iterator(root_ / "run" / "worker-1")) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      events.push_back(entry.path());
    }
  }
  ASSERT_EQ(events.size(), 1u);
  auto records = ReadTfRecords(ReadAll(events[0]));
  ASSERT_TRUE(records.ok()) << records.status();
  int loss = 0;
  for (const std::string& r : *records) {
    pb::tensorboard::Event e;
    ASSERT_TRUE(e.ParseFromString(r));
    for (const auto& v : e.summary().value()) loss += v.tag() == "train/loss" ? 1 : 0;
  }
  EXPECT_EQ(loss, kSteps);
}

// Each summary key has one writer: a key the task wrote before Finish keeps the task's value.
TEST_F(ProfilerTest, TheTasksOwnKeysAreKept) {
  auto prof = Profiler::Start(Options(true), DirProcSource((root_ / "proc").string()));
  ASSERT_TRUE(prof.ok()) << prof.status();
  const std::string peer = "ps-0";
  (*prof)->OnRpc(Rpc(peer, 0, 100, 1000, 2000));
  nlohmann::json summary = {{"step_time_p50_ms", 8.5}, {"rpcs", "the task's"}};
  ASSERT_TRUE((*prof)->Finish(&summary).ok());
  EXPECT_EQ(summary["step_time_p50_ms"], 8.5);
  EXPECT_EQ(summary["rpcs"], "the task's");
  EXPECT_EQ(summary["app_bytes_sent"], 1000);
}

TEST_F(ProfilerTest, OffWritesNoFilesAndOnlyRunFigures) {
  auto prof = Profiler::Start(Options(false), DirProcSource((root_ / "proc").string()));
  ASSERT_TRUE(prof.ok()) << prof.status();
  (*prof)->SetGraph("graph bytes");
  (*prof)->RecordStep(Step(1));
  nlohmann::json summary = {{"examples_per_sec", 1.0}};
  ASSERT_TRUE((*prof)->Finish(&summary).ok());
  EXPECT_EQ(summary["profile"], "off");
  EXPECT_FALSE(summary.contains("Total CPU Usage"));
  EXPECT_FALSE(summary.contains("series"));
  const fs::path dir = root_ / "run" / "worker-1";
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST_F(ProfilerTest, UnreadableProcIsAnErrorAtStart) {
  auto prof = Profiler::Start(Options(true), DirProcSource((root_ / "missing").string()));
  ASSERT_FALSE(prof.ok());
  EXPECT_NE(prof.status().message().find("missing"), std::string::npos) << prof.status();
}

TEST_F(ProfilerTest, TaskDirIsSetOnce) {
  ProfilerOptions o = Options(true);
  o.task_dir.clear();
  auto prof = Profiler::Start(o, DirProcSource((root_ / "proc").string()));
  ASSERT_TRUE(prof.ok()) << prof.status();
  ASSERT_TRUE((*prof)->SetTaskDir((root_ / "later").string()).ok());
  EXPECT_EQ((*prof)->SetTaskDir((root_ / "again").string()).code(),
            absl::StatusCode::kFailedPrecondition);
  nlohmann::json summary;
  ASSERT_TRUE((*prof)->Finish(&summary).ok());
  EXPECT_TRUE(fs::exists(root_ / "later" / "trace.json"));
  EXPECT_EQ((*prof)->Finish(&summary).code(), absl::StatusCode::kFailedPrecondition);
}

// The graph events of the TensorBoard file in `dir` (there must be one file).
std::vector<pb::tensorboard::Event> GraphEvents(const fs::path& dir) {
  std::vector<pb::tensorboard::Event> graphs;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    ++files;
    auto records = ReadTfRecords(ReadAll(entry.path()));
    EXPECT_TRUE(records.ok()) << records.status();
    if (!records.ok()) continue;
    for (const std::string& record : *records) {
      pb::tensorboard::Event e;
      EXPECT_TRUE(e.ParseFromString(record));
      if (e.what_case() == pb::tensorboard::Event::kGraphDef) graphs.push_back(e);
    }
  }
  EXPECT_EQ(files, 1) << dir;
  return graphs;
}

// The graph goes into the events file once, at step 0, whether it is known before the task's
// folder (a cluster worker learns the folder from the chief) or after (single mode, the chief);
// a second graph is ignored.
TEST_F(ProfilerTest, TheGraphIsWrittenOnceWheneverItIsKnown) {
  for (const bool graph_first : {true, false}) {
    SCOPED_TRACE(graph_first ? "graph before the folder" : "folder before the graph");
    ProfilerOptions o = Options(true);
    o.task_dir.clear();
    auto prof = Profiler::Start(o, DirProcSource((root_ / "proc").string()));
    ASSERT_TRUE(prof.ok()) << prof.status();
    const fs::path dir = root_ / (graph_first ? "graph_first" : "dir_first");
    if (!graph_first) {
      ASSERT_TRUE((*prof)->SetTaskDir(dir.string()).ok());
    }
    (*prof)->SetGraph("graph bytes");
    (*prof)->SetGraph("a second graph");
    if (graph_first) {
      ASSERT_TRUE((*prof)->SetTaskDir(dir.string()).ok());
    }
    (*prof)->RecordStep(Step(1));
    nlohmann::json summary;
    ASSERT_TRUE((*prof)->Finish(&summary).ok());
    const std::vector<pb::tensorboard::Event> graphs = GraphEvents(dir);
    ASSERT_EQ(graphs.size(), 1u);
    EXPECT_EQ(graphs[0].graph_def(), "graph bytes");
    EXPECT_EQ(graphs[0].step(), 0);
    EXPECT_GT(graphs[0].wall_time(), 1.6e9);
  }
}

// The periodic rewrite keeps to 1 % of the sampler's thread: a part that took 1.4 s to write
// (trace.json of a long run) waits 140 s, not the 5 s flush interval; a cheap one keeps the
// interval.
TEST(RewriteDueTest, ExpensiveRewritesWaitAHundredTimesTheirCost) {
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  const absl::Duration interval = absl::Seconds(5);
  EXPECT_FALSE(RewriteDue(t0 + absl::Seconds(4), t0, absl::Milliseconds(10), interval));
  EXPECT_TRUE(RewriteDue(t0 + absl::Seconds(5), t0, absl::Milliseconds(10), interval));
  EXPECT_FALSE(RewriteDue(t0 + absl::Seconds(139), t0, absl::Milliseconds(1400), interval));
  EXPECT_TRUE(RewriteDue(t0 + absl::Seconds(140), t0, absl::Milliseconds(1400), interval));
}

// A short run's few samples are said (issue 13: 500 ms sampling gave a short run 2-3 points
// without a word), with an interval that would have given enough.
TEST(FewSamplesWarningTest, BelowTenSamplesTheWarningNamesTheFlagAndABetterInterval) {
  const std::string w = FewSamplesWarning(3, absl::Milliseconds(500));
  EXPECT_NE(w.find("only 3 system samples at --profile_interval_ms=500"), std::string::npos) << w;
  EXPECT_NE(w.find("--profile_interval_ms=150"), std::string::npos) << w;
  EXPECT_NE(FewSamplesWarning(0, absl::Milliseconds(500)).find("--profile_interval_ms=50)"),
            std::string::npos);
  EXPECT_NE(FewSamplesWarning(1, absl::Milliseconds(20)).find("--profile_interval_ms=10)"),
            std::string::npos);
  EXPECT_EQ(FewSamplesWarning(kFewSamples, absl::Milliseconds(500)), "");
}

}  // namespace
}  // namespace fulcrum::profiler
