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
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

// The first `n` cells of every line of `csv`.
std::string FirstColumns(const std::string& csv, size_t n) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    cells.resize(std::min(cells.size(), n));
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

// The cell of `column` in data row `row` (0 = first sample) of `csv`; "<none>" if absent.
std::string Cell(const std::string& csv, const std::string& column, size_t row) {
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  auto it = std::find(header.begin(), header.end(), column);
  if (it == header.end() || row + 1 >= lines.size()) return "<none>";
  std::vector<std::string> cells = absl::StrSplit(lines[row + 1], ',');
  return cells.at(static_cast<size_t>(it - header.begin()));
}

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
  r.comm_wait_ms = 1.25;
  r.inflight_begin_ms = 3.25;
  r.inflight_ms = 0.75;
  StepRecord zero = r;
  zero.step = 2;
  zero.wall_ms = 0.0;
  ASSERT_TRUE(WriteCsvFiles(dir_.string(), "worker", TwoSamples(), {r, zero}, {}, {}).ok());
  // The columns that came first keep their names and places (the wider figures follow them).
  EXPECT_EQ(FirstColumns(ReadAll(dir_ / "samples.csv"), 20),
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
            "backward_ms,push_ms,sync_wait_ms,examples_per_sec,comm_wait_ms,inflight_begin_ms,"
            "inflight_ms,h2d_bytes,h2d_calls,d2h_bytes,d2h_calls,device_allocs\n"
            "1,7,64,0.500000,1700000000000000,4.000,0.250,0.500,1.000,1.500,0.500,0.250,16000.0,"
            "1.250,3.250,0.750,0,0,0,0,0\n"
            "2,7,64,0.500000,1700000000000000,0.000,0.250,0.500,1.000,1.500,0.500,0.250,0.0,"
            "1.250,3.250,0.750,0,0,0,0,0\n");
}

TEST(SamplesCsvTest, WiderFiguresByColumnName) {
  std::vector<SystemSample> samples = TwoSamples();
  SystemSample& b = samples[1];
  b.cpu_user_percent = 30.5;
  b.cpu_system_percent = 9.25;
  b.voluntary_switches = 40;
  b.io_write_bytes = 8192;
  b.io_write_bytes_per_sec = 4096;
  b.host.cpu_iowait_percent = 5;
  b.host.mem_used_bytes = 123456789;
  b.host.load15 = 0.5;
  b.host.tcp_retrans_segs = 3;
  b.host.disk_read_bytes_per_sec = 512;
  b.interfaces[1].rx_drops = 7;
  b.interfaces[1].tx_packets_per_sec = 12.25;
  b.threads = {{"fulcrum-compute", 4, 150.0, 10.0}, {"odd name,x", 1, 1.0, 0.0}};
  b.gpus = {{0, 87.0, 1 << 30, 4LL << 30, -1.0}};
  const std::string csv = SamplesCsv(samples);
  EXPECT_EQ(Cell(csv, "cpu_user_percent", 1), "30.50");
  EXPECT_EQ(Cell(csv, "cpu_system_percent", 1), "9.25");
  EXPECT_EQ(Cell(csv, "voluntary_switches", 1), "40");
  EXPECT_EQ(Cell(csv, "io_write_bytes", 1), "8192");
  EXPECT_EQ(Cell(csv, "io_write_bytes_per_s", 1), "4096.0");
  EXPECT_EQ(Cell(csv, "host_cpu_iowait_percent", 1), "5.00");
  EXPECT_EQ(Cell(csv, "host_mem_used_bytes", 1), "123456789");
  EXPECT_EQ(Cell(csv, "host_load15", 1), "0.50");
  EXPECT_EQ(Cell(csv, "host_tcp_retrans_segs", 1), "3");
  EXPECT_EQ(Cell(csv, "host_disk_read_bytes_per_s", 1), "512.0");
  EXPECT_EQ(Cell(csv, "eth0_rx_drops", 1), "7");
  EXPECT_EQ(Cell(csv, "eth0_tx_packets_per_s", 1), "12.2");  // %.1f rounds half to even
  EXPECT_EQ(Cell(csv, "eth0_rx_drops", 0), "");              // eth0 was not there yet
  EXPECT_EQ(Cell(csv, "thread_fulcrum-compute_count", 1), "4");
  EXPECT_EQ(Cell(csv, "thread_fulcrum-compute_user_percent", 1), "150.00");
  EXPECT_EQ(Cell(csv, "thread_odd_name_x_user_percent", 1), "1.00");  // a safe column name
  EXPECT_EQ(Cell(csv, "thread_fulcrum-compute_count", 0), "");
  EXPECT_EQ(Cell(csv, "gpu0_utilization_percent", 1), "87.0");
  EXPECT_EQ(Cell(csv, "gpu0_memory_used_bytes", 1), "1073741824");
  EXPECT_EQ(Cell(csv, "gpu0_power_watts", 1), "");  // not reported by the board
  // Every row has as many cells as the header.
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipEmpty())) {
    EXPECT_EQ(std::count(line.begin(), line.end(), ','),
              std::count(csv.begin(), csv.begin() + csv.find('\n'), ','));
  }
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
  EXPECT_EQ(FirstColumns(ReadAll(dir_ / "samples.csv"), 6),
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
