// The CSV sink on real files: WriteCsvFiles writes samples.csv and the job's steps.csv into a
// folder; the test reads them back byte for byte.
#include "profiler/csv_sink.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fulcrum::profiler {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CsvSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("fulcrum_csv_sink_test_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

InterfaceSample Nic(const std::string& name, uint64_t rx, uint64_t tx) {
  InterfaceSample i;
  i.name = name;
  i.loopback = name == "lo";
  i.rx_bytes = rx;
  i.tx_bytes = tx;
  i.rx_packets = rx / 100;
  i.tx_packets = tx / 100;
  i.rx_bytes_per_sec = static_cast<double>(rx) / 2;
  i.tx_bytes_per_sec = static_cast<double>(tx) / 2;
  return i;
}

// Two samples: a core and an interface appear in the second one, a figure is not finite.
std::vector<SystemSample> TwoSamples() {
  SystemSample a;
  a.seconds = 0;
  a.unix_micros = 1'700'000'000'000'000;
  a.cpu_percent = 0;
  a.cpu_seconds = 0.25;
  a.core_percent = {12.5};
  a.rss_bytes = 1000;
  a.peak_rss_bytes = 2000;
  a.interfaces = {Nic("lo", 0, 0)};
  SystemSample b = a;
  b.seconds = 0.5;
  b.unix_micros += 500'000;
  b.cpu_percent = NAN;
  b.cpu_seconds = 0.75;
  b.core_percent = {50, 100};
  b.interfaces = {Nic("lo", 400, 200), Nic("eth0", 1000, 100)};
  return {a, b};
}

TEST_F(CsvSinkTest, WorkerFiles) {
  StepRecord r;
  r.step = 1;
  r.global_step = 7;
  r.examples = 64;
  r.loss = 0.5;
  r.begin_unix_us = 1'700'000'000'000'000;
  r.wall_ms = 4.0;
  r.data_ms = 0.25;
  r.pull_ms = 0.5;
  r.forward_ms = 1.0;
  r.backward_ms = 1.5;
  r.push_ms = 0.5;
  r.sync_wait_ms = 0.25;
  StepRecord zero = r;
  zero.step = 2;
  zero.wall_ms = 0.0;
  ASSERT_TRUE(WriteCsvFiles(dir_.string(), "worker", TwoSamples(), {r, zero}, {}, {}).ok());
  EXPECT_EQ(ReadAll(dir_ / "samples.csv"),
            "time_s,unix_us,cpu_percent,cpu_seconds_total,rss_bytes,peak_rss_bytes,"
            "core0_percent,core1_percent,"
            "lo_rx_bytes,lo_tx_bytes,lo_rx_packets,lo_tx_packets,lo_rx_bytes_per_s,"
            "lo_tx_bytes_per_s,"
            "eth0_rx_bytes,eth0_tx_bytes,eth0_rx_packets,eth0_tx_packets,eth0_rx_bytes_per_s,"
            "eth0_tx_bytes_per_s\n"
            "0.000,1700000000000000,0.00,0.250,1000,2000,12.50,,0,0,0,0,0.0,0.0,,,,,,\n"
            "0.500,1700000000500000,,0.750,1000,2000,50.00,100.00,400,200,4,2,200.0,100.0,"
            "1000,100,10,1,500.0,50.0\n");
  EXPECT_EQ(ReadAll(dir_ / "steps.csv"),
            "step,global_step,examples,loss,begin_unix_us,wall_ms,data_ms,pull_ms,forward_ms,"
            "backward_ms,push_ms,sync_wait_ms,examples_per_sec\n"
            "1,7,64,0.500000,1700000000000000,4.000,0.250,0.500,1.000,1.500,0.500,0.250,16000.0\n"
            "2,7,64,0.500000,1700000000000000,0.000,0.250,0.500,1.000,1.500,0.500,0.250,0.0\n");
}

TEST_F(CsvSinkTest, PsFiles) {
  PsRecord r;
  r.unix_us = 1'700'000'000'000'000;
  r.global_step = 3;
  r.pushes_received = 10;
  r.pushes_applied = 8;
  r.pushes_dropped = 2;
  r.pulls = 5;
  r.bytes_pushed = 4096;
  r.bytes_pulled = 8192;
  r.apply_ms = 1.25;
  r.wait_ms = 7.5;
  ASSERT_TRUE(WriteCsvFiles(dir_.string(), "ps", {}, {}, {r}, {}).ok());
  EXPECT_EQ(ReadAll(dir_ / "progress.csv"),
            "unix_us,global_step,pushes_received,pushes_applied,pushes_dropped,pulls,"
            "bytes_pushed,bytes_pulled,apply_ms,wait_ms\n"
            "1700000000000000,3,10,8,2,5,4096,8192,1.250,7.500\n");
  // No samples: the header alone.
  EXPECT_EQ(ReadAll(dir_ / "samples.csv"),
            "time_s,unix_us,cpu_percent,cpu_seconds_total,rss_bytes,peak_rss_bytes\n");
}

TEST_F(CsvSinkTest, ChiefFilesLeaveAMissingAccuracyEmpty) {
  EvalRecord with, without;
  with.unix_us = 1;
  with.global_step = 100;
  with.accuracy = 0.91234;
  with.loss = 0.25;
  without.unix_us = 2;
  without.global_step = 200;
  without.loss = 0.125;
  ASSERT_TRUE(WriteCsvFiles(dir_.string(), "chief", {}, {}, {}, {with, without}).ok());
  EXPECT_EQ(ReadAll(dir_ / "evals.csv"),
            "unix_us,global_step,test_accuracy,test_loss\n"
            "1,100,0.91234,0.250000\n"
            "2,200,,0.125000\n");
}

TEST_F(CsvSinkTest, AFolderThatIsNotThereIsAnErrorNamingTheFile) {
  const absl::Status s = WriteCsvFiles((dir_ / "missing").string(), "worker", {}, {}, {}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("samples.csv"), std::string::npos) << s;
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST(CsvTextTest, EmptyRecordsGiveTheHeaderOnly) {
  EXPECT_EQ(WorkerStepsCsv({}).find('\n'), WorkerStepsCsv({}).size() - 1);
  EXPECT_EQ(PsStepsCsv({}).find('\n'), PsStepsCsv({}).size() - 1);
  EXPECT_EQ(EvalStepsCsv({}), "unix_us,global_step,test_accuracy,test_loss\n");
}

}  // namespace
}  // namespace fulcrum::profiler
