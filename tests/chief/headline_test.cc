// HeadlineLines: the block a run ends with, from report.json's figures as AddClusterTables
// leaves them: the total examples/sec, each worker's, the step split, each ps's share of the
// bytes, CPU and applies, bytes per interface and the report's path; missing figures are said
// missing, not made up.
#include "chief/headline.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "chief/report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::chief {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

nlohmann::json Worker(int index, double rate, double pull_ms) {
  return {{"job", "worker"},
          {"task_index", index},
          {"host", "h1"},
          {"pid", 200 + index},
          {"examples_per_sec", rate},
          {"step_phase_mean_ms",
           {{"data", 1.0},
            {"pull", pull_ms},
            {"forward", 3.0},
            {"backward", 4.0},
            {"push", 0.5},
            {"sync_wait", 0.5}}}};
}

nlohmann::json Ps(int index, double bytes, double cpu_seconds, double applied) {
  return {{"job", "ps"},
          {"task_index", index},
          {"host", "h1"},
          {"pid", 100 + index},
          {"app_bytes_sent", bytes / 2},
          {"app_bytes_received", bytes / 2},
          {"cpu_seconds", cpu_seconds},
          {"pushes_applied", applied},
          {"network_interfaces",
           {{{"name", "lo"}, {"tx_bytes", 2.5e9}, {"rx_bytes", 2.5e9}},
            {{"name", "eth0"}, {"tx_bytes", 0}, {"rx_bytes", 0}}}},
          {"Total bytes sent over network", 2.5e9},
          {"Total bytes received over network", 2.5e9}};
}

TEST(HeadlineTest, OneBlockWithEveryFigure) {
  nlohmann::json r;
  r["run_id"] = "run-7";
  r["stop_reason"] = "reached train_steps 1000";
  r["examples_per_sec"] = 12345.6;
  r["train_seconds"] = 20.75;
  r["workers_examples_per_sec"] = 13000.0;
  r["workers"] = {Worker(0, 6600.0, 2.0), Worker(1, 6400.0, 4.0)};
  r["ps"] = {Ps(0, 3e9, 3.0, 2000), Ps(1, 1e9, 1.0, 1000)};
  AddClusterTables(&r);
  const std::vector<std::string> lines = HeadlineLines(r, "/runs/run-7/report.html");
  const std::string text = absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines.front(), HasSubstr("run run-7: reached train_steps 1000"));
  EXPECT_THAT(text, HasSubstr("total examples/sec: 12345.6 (examples of the applied updates "
                              "over 20.75 s of training)"));
  EXPECT_THAT(text, HasSubstr("worker:0 6600 + worker:1 6400 = 13000"));
  // The workers' mean of each phase, and their sum.
  EXPECT_THAT(text, HasSubstr("data 1.00 | pull 3.00 | forward 3.00 | backward 4.00 | push 0.50 "
                              "| sync_wait 0.50 = 12.00 ms"));
  EXPECT_THAT(text, HasSubstr("ps:0  bytes 3.00 GB (75%)  cpu 3.00 s (75%)  applies 2000"));
  EXPECT_THAT(text, HasSubstr("ps:1  bytes 1.00 GB (25%)  cpu 1.00 s (25%)  applies 1000"));
  EXPECT_THAT(text, HasSubstr("h1 lo: sent 2.50 GB, received 2.50 GB"));
  EXPECT_THAT(text, Not(HasSubstr("eth0")));  // no bytes: left out
  EXPECT_THAT(lines.back(), HasSubstr("report: /runs/run-7/report.html"));
}

// Each machine's CPUs over the run (report.json's machines): the job's and other work's.
TEST(HeadlineTest, EachMachineSaysHowMuchOtherWorkRanBeside) {
  nlohmann::json r;
  r["run_id"] = "run-10";
  nlohmann::json w = Worker(0, 100.0, 1.0);
  w["cpu_percent_mean"] = 40.0;
  w["Job Execution Time"] = 10.0;
  w["System Information"] = {{"Node Name", "vm"}};
  w["Total CPU usage per core"] = {90.0, 90.0};
  w["host_system"] = {{"cpu_idle_percent_mean", 10.0}, {"load1_mean", 3.5}};
  r["workers"] = {w};
  AddClusterTables(&r);
  const std::string text = absl::StrJoin(HeadlineLines(r, "report.html"), "\n");
  EXPECT_THAT(text, HasSubstr("machine vm (2 cores): 1.80 CPUs busy over 10.0 s, the job's 0.40, "
                              "other work 1.40 (load 3.5)"));
}

TEST(HeadlineTest, AFailedRunWithoutRecordsSaysSo) {
  nlohmann::json r;
  r["run_id"] = "run-8";
  r["failed"] = true;
  r["stop_reason"] = "ps:0 is unreachable";
  AddClusterTables(&r);
  const std::string text = absl::StrJoin(HeadlineLines(r, "report.html"), "\n");
  EXPECT_THAT(text, HasSubstr("run run-8 FAILED: ps:0 is unreachable"));
  EXPECT_THAT(text, HasSubstr("examples/sec per worker (steady state): no worker summaries"));
  EXPECT_THAT(text, HasSubstr("no step records"));
  EXPECT_THAT(text, HasSubstr("bytes per interface: none recorded"));
  EXPECT_THAT(text, Not(HasSubstr("three layers")));  // no connections read
}

// The cluster's bytes at three layers, from the connections the tasks read (chief/layers.h).
TEST(HeadlineTest, BytesAtThreeLayersWithTheRetransmits) {
  nlohmann::json r;
  r["run_id"] = "run-9";
  nlohmann::json w = Worker(0, 100.0, 1.0);
  nlohmann::json p = Ps(0, 2e9, 1.0, 10);
  w["rpc_traffic"] = {
      {{"peer", "ps-0"}, {"method", "PushPull"}, {"bytes_sent", 1e9}, {"bytes_received", 1e9}}};
  auto end = [](const char* local, const char* remote, double retransmits) {
    return nlohmann::json{{"local", local},       {"remote", remote},          {"loopback", true},
                          {"bytes_sent", 1.01e9}, {"bytes_received", 1.01e9},  {"segs_out", 25000},
                          {"segs_in", 25000},     {"retransmits", retransmits}};
  };
  w["tcp_connections"] = {end("127.0.0.1:5000", "127.0.0.1:2222", 4)};
  p["tcp_connections"] = {end("127.0.0.1:2222", "127.0.0.1:5000", 1)};
  // lo: both directions of the one connection, 2.02 GB of payload in 50,000 packets.
  p["network_interfaces"] = {{{"name", "lo"},
                              {"loopback", true},
                              {"tx_bytes", 2.02e9 + 50000 * 52},
                              {"tx_packets", 50000},
                              {"rx_bytes", 2.02e9 + 50000 * 52},
                              {"rx_packets", 50000}}};
  p["network_loopback_bytes_sent"] = 2.02e9 + 50000 * 52;
  r["workers"] = {w};
  r["ps"] = {p};
  AddClusterTables(&r);
  const std::string text = absl::StrJoin(HeadlineLines(r, "report.html"), "\n");
  EXPECT_THAT(text, HasSubstr("bytes sent at three layers:\n  loopback: app 2.00 GB, tcp 2.02 GB "
                              "(protocol +1.00%), interface payload 2.02 GB (vs tcp +0.00%); "
                              "5 retransmits"));
  EXPECT_THAT(text, Not(HasSubstr("external:")));
}

}  // namespace
}  // namespace fulcrum::chief
