// AddClusterTables: per-task rows from the summaries, hosts that take the network figures of
// their busiest task (interfaces are shared in a namespace) but add CPU and memory, and
// cluster totals over hosts.
#include "chief/report.h"

#include <filesystem>
#include <fstream>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/subprocess.h"

namespace fulcrum::chief {
namespace {

nlohmann::json Summary(const char* job, int index, const char* host, double cpu, double rss,
                       double net_sent, double lo_sent) {
  return {{"job", job},
          {"task_index", index},
          {"host", host},
          {"profile", "on"},
          {"cpu_seconds", cpu / 100.0},
          {"cpu_percent_mean", cpu},
          {"cpu_percent_max", cpu * 1.5},
          {"peak_rss_bytes", rss},
          {"Total bytes sent over network", net_sent},
          {"Total bytes received over network", net_sent},
          {"network_loopback_bytes_sent", lo_sent},
          {"network_loopback_bytes_received", lo_sent},
          {"network_external_bytes_sent", net_sent - lo_sent},
          {"network_external_bytes_received", net_sent - lo_sent},
          {"app_bytes_sent", 10.0},
          {"app_bytes_received", 20.0},
          {"examples_per_sec", 1000.0},
          {"network_interfaces", {{{"name", "lo"}, {"rx_bytes", lo_sent}}}}};
}

TEST(ClusterTablesTest, TasksHostsAndTotals) {
  nlohmann::json r;
  r["chief"] = Summary("chief", 0, "h1", 5, 50e6, 1000, 900);
  r["ps"] = {Summary("ps", 0, "h1", 40, 30e6, 5000, 4000)};
  r["workers"] = {Summary("worker", 0, "h1", 90, 200e6, 4800, 3800),
                  Summary("worker", 1, "h2", 80, 210e6, 3000, 100)};
  AddClusterTables(&r);

  ASSERT_EQ(r["tasks"].size(), 4u);
  EXPECT_EQ(r["tasks"][0]["task"], "chief-0");
  EXPECT_EQ(r["tasks"][1]["task"], "ps-0");
  EXPECT_EQ(r["tasks"][3]["task"], "worker-1");
  EXPECT_EQ(r["tasks"][3]["host"], "h2");
  EXPECT_FALSE(r["tasks"][1].contains("examples_per_sec"));
  EXPECT_DOUBLE_EQ(r["tasks"][2]["examples_per_sec"].get<double>(), 1000.0);

  ASSERT_EQ(r["hosts"].size(), 2u);
  const nlohmann::json& h1 = r["hosts"][0];
  EXPECT_EQ(h1["host"], "h1");
  EXPECT_EQ(h1["tasks"], nlohmann::json({"chief-0", "ps-0", "worker-0"}));
  EXPECT_DOUBLE_EQ(h1["cpu_percent_mean"].get<double>(), 135.0);  // processes add up
  EXPECT_DOUBLE_EQ(h1["peak_rss_bytes"].get<double>(), 280e6);
  EXPECT_DOUBLE_EQ(h1["net_bytes_sent"].get<double>(), 5000.0);  // the busiest task, not a sum
  EXPECT_DOUBLE_EQ(h1["loopback_bytes_sent"].get<double>(), 4000.0);
  EXPECT_EQ(h1["interfaces_from"], "ps-0");

  const nlohmann::json& c = r["cluster"];
  EXPECT_EQ(c["tasks"], 4);
  EXPECT_EQ(c["hosts"], 2);
  EXPECT_DOUBLE_EQ(c["net_bytes_sent"].get<double>(), 8000.0);  // over hosts
  EXPECT_DOUBLE_EQ(c["external_bytes_sent"].get<double>(), 1000.0 + 2900.0);
  EXPECT_DOUBLE_EQ(c["cpu_percent_mean"].get<double>(), 215.0);
  EXPECT_DOUBLE_EQ(c["app_bytes_sent"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(c["workers_examples_per_sec"].get<double>(), 2000.0);
}

// Issue 30: with worker 0 as the chief (TensorFlow 1.x's layout) the chief's and worker 0's
// summaries come from one process (same host and pid): its CPU and memory count once on its
// host and in the cluster, each role's application bytes and examples/s still count.
TEST(ClusterTablesTest, AProcessPlayingTwoRolesCountsOnce) {
  nlohmann::json chief = Summary("chief", 0, "h1", 90, 200e6, 4800, 3800);
  nlohmann::json w0 = Summary("worker", 0, "h1", 90, 200e6, 4800, 3800);
  nlohmann::json ps = Summary("ps", 0, "h1", 40, 30e6, 5000, 4000);
  nlohmann::json w1 = Summary("worker", 1, "h1", 80, 210e6, 3000, 100);
  chief["pid"] = 101;
  w0["pid"] = 101;
  ps["pid"] = 102;
  w1["pid"] = 103;
  nlohmann::json r;
  r["chief"] = chief;
  r["ps"] = {ps};
  r["workers"] = {w0, w1};
  AddClusterTables(&r);

  ASSERT_EQ(r["tasks"].size(), 4u);
  EXPECT_EQ(r["tasks"][2]["task"], "worker-0");
  EXPECT_EQ(r["tasks"][2]["same_process_as"], "chief-0");
  EXPECT_FALSE(r["tasks"][0].contains("same_process_as"));
  EXPECT_FALSE(r["tasks"][3].contains("same_process_as"));
  const nlohmann::json& h1 = r["hosts"][0];
  EXPECT_DOUBLE_EQ(h1["cpu_percent_mean"].get<double>(), 90.0 + 40.0 + 80.0);
  EXPECT_DOUBLE_EQ(h1["peak_rss_bytes"].get<double>(), 200e6 + 30e6 + 210e6);
  const nlohmann::json& c = r["cluster"];
  EXPECT_EQ(c["tasks"], 4);
  EXPECT_EQ(c["processes"], 3);
  EXPECT_DOUBLE_EQ(c["cpu_percent_mean"].get<double>(), 210.0);
  EXPECT_DOUBLE_EQ(c["cpu_seconds"].get<double>(), 2.1);
  EXPECT_DOUBLE_EQ(c["peak_rss_bytes"].get<double>(), 440e6);
  EXPECT_DOUBLE_EQ(c["app_bytes_sent"].get<double>(), 40.0);  // every role's own RPCs
  EXPECT_DOUBLE_EQ(c["workers_examples_per_sec"].get<double>(), 2000.0);
}

// A process's machine and what the machine's sampler saw (profiler summary keys).
void OnMachine(nlohmann::json* s, const char* machine, double job_seconds, double idle_percent) {
  (*s)["System Information"] = {{"Node Name", machine}};
  (*s)["Job Execution Time"] = job_seconds;
  (*s)["Total CPU usage per core"] = {50.0, 50.0};
  (*s)["host_system"] = {{"cpu_idle_percent_mean", idle_percent},
                         {"cpu_iowait_percent_mean", 5.0},
                         {"load1_mean", 2.5}};
}

// report.json's machines: the processes grouped by machine (emulated hosts of one machine share
// it), each machine's busy CPUs over its longest-lived process's window, less the job's own CPU
// seconds over that window, is the other work beside the run; a process in two roles counts
// once; a machine whose processes sampled nothing has null figures.
TEST(ClusterTablesTest, MachinesSayHowMuchOtherWorkRanBesideTheJob) {
  nlohmann::json chief = Summary("chief", 0, "h1", 10, 50e6, 1000, 900);  // 10 % of a CPU
  nlohmann::json ps = Summary("ps", 0, "h1", 40, 30e6, 5000, 4000);
  nlohmann::json w0 = Summary("worker", 0, "h2", 90, 200e6, 4800, 3800);
  nlohmann::json w1 = Summary("worker", 1, "h3", 80, 210e6, 3000, 100);
  chief["pid"] = 1;
  ps["pid"] = 2;
  w0["pid"] = 3;
  w1["pid"] = 4;
  // ps-0 lived longest (10 s) on "vm", whose 2 cores were 5 % idle and 5 % iowait: 1.8 CPUs
  // busy, of which the job's are 0.5: ps-0's 40 % over its 10 s, and the chief's and worker 0's
  // whole cpu_seconds (0.1 and 0.9: they started while ps-0 was measured).
  OnMachine(&chief, "vm", 9.0, 80.0);
  OnMachine(&ps, "vm", 10.0, 5.0);
  OnMachine(&w0, "vm", 8.0, 90.0);
  w1["System Information"] = {{"Node Name", "node2"}};  // sampled no host figures
  nlohmann::json r;
  r["chief"] = chief;
  r["ps"] = {ps};
  r["workers"] = {w0, w1};
  AddClusterTables(&r);

  ASSERT_EQ(r["machines"].size(), 2u) << r["machines"].dump(2);
  const nlohmann::json& vm = r["machines"][0];
  EXPECT_EQ(vm["machine"], "vm");
  EXPECT_EQ(vm["tasks"], nlohmann::json({"chief-0", "ps-0", "worker-0"}));
  EXPECT_EQ(vm["measured_by"], "ps-0");
  EXPECT_DOUBLE_EQ(vm["cores"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(vm["window_seconds"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(vm["busy_cpus"].get<double>(), 1.8);
  EXPECT_NEAR(vm["job_cpus"].get<double>(), 0.5, 1e-12);
  EXPECT_NEAR(vm["other_cpus"].get<double>(), 1.8 - 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(vm["load1_mean"].get<double>(), 2.5);
  const nlohmann::json& node2 = r["machines"][1];
  EXPECT_EQ(node2["tasks"], nlohmann::json({"worker-1"}));
  EXPECT_TRUE(node2["other_cpus"].is_null()) << node2.dump();
  EXPECT_DOUBLE_EQ(r["cluster"]["other_cpus_max"].get<double>(), vm["other_cpus"].get<double>());

  // Worker 0 as the chief (one process, two summaries): its CPU counts once, and a job
  // busier than the machine's reading (sampling windows differ) is no negative other work.
  nlohmann::json both = Summary("worker", 0, "h1", 50, 200e6, 4800, 3800);  // half a CPU
  both["cpu_seconds"] = 7.0;  // 2 s of it before its profiler started: not over the window
  both["pid"] = 7;
  OnMachine(&both, "vm", 10.0, 95.0);  // 0 CPUs busy by the machine's count
  nlohmann::json as_chief = both;
  as_chief["job"] = "chief";
  nlohmann::json r2;
  r2["chief"] = as_chief;
  r2["workers"] = {both};
  AddClusterTables(&r2);
  ASSERT_EQ(r2["machines"].size(), 1u);
  EXPECT_EQ(r2["machines"][0]["tasks"], nlohmann::json({"chief-0"}));
  EXPECT_DOUBLE_EQ(r2["machines"][0]["job_cpus"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r2["machines"][0]["other_cpus"].get<double>(), 0.0);
}

// The chief's --refresh_report: a report.json an older chief wrote (no machines table) gets
// its tables recomputed from the summaries it holds, rewritten in place; the other keys stay.
// A path that holds no report exits 2 naming it, and a file that is not a JSON object is left.
TEST(ClusterTablesTest, RefreshReportAddsTheTablesOfANewerChief) {
  const std::filesystem::path dir = ::fulcrum::testing::FreshDir("refresh_report");
  nlohmann::json w0 = Summary("worker", 0, "h1", 50, 200e6, 4800, 3800);
  w0["pid"] = 9;
  OnMachine(&w0, "vm", 10.0, 5.0);
  nlohmann::json old = {{"run_id", "old"}, {"workers", {w0}}, {"examples_per_sec", 12.5}};
  std::ofstream(dir / "report.json") << old.dump(2);
  ::fulcrum::testing::RunResult r =
      ::fulcrum::testing::RunBinary("chief", {"--refresh_report=" + dir.string()}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir / "report.json");
  const nlohmann::json fresh = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(fresh.is_object());
  EXPECT_EQ(fresh["run_id"], "old");
  EXPECT_DOUBLE_EQ(fresh["examples_per_sec"].get<double>(), 12.5);
  ASSERT_EQ(fresh["machines"].size(), 1u) << fresh.dump(2);
  EXPECT_NEAR(fresh["machines"][0]["other_cpus"].get<double>(), 1.8 - 0.5, 1e-12);
  EXPECT_NEAR(fresh["cluster"]["other_cpus_max"].get<double>(), 1.8 - 0.5, 1e-12);

  r = ::fulcrum::testing::RunBinary("chief", {"--refresh_report=" + (dir / "nope").string()}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--refresh_report=" + (dir / "nope").string()), std::string::npos)
      << r.output;
  std::ofstream(dir / "bad.json") << "[1, 2]";
  r = ::fulcrum::testing::RunBinary("chief", {"--refresh_report=" + (dir / "bad.json").string()},
                                    60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is not a JSON object"), std::string::npos) << r.output;
  std::ifstream bad(dir / "bad.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(bad), {}), "[1, 2]");
}

// The ps tasks side by side (report.json's balance, read by the headline and report.html):
// each one's bytes, CPU time and applies and its share of the ps tasks' total.
TEST(ClusterTablesTest, BalanceRowsPutThePsTasksSideBySide) {
  nlohmann::json ps0 = Summary("ps", 0, "h1", 100, 30e6, 5000, 4000);  // cpu_seconds 1.0
  nlohmann::json ps1 = Summary("ps", 1, "h1", 300, 30e6, 5000, 4000);  // cpu_seconds 3.0
  ps0["pushes_applied"] = 100;
  ps1["pushes_applied"] = 300;
  ps1["app_bytes_sent"] = 70.0;  // 70 + 20 against ps0's 10 + 20
  nlohmann::json r;
  r["ps"] = {ps0, ps1};
  r["workers"] = {Summary("worker", 0, "h2", 90, 200e6, 4800, 3800)};
  AddClusterTables(&r);
  ASSERT_EQ(r["balance"].size(), 2u) << r["balance"].dump();
  const nlohmann::json& b0 = r["balance"][0];
  EXPECT_EQ(b0["task"], "ps-0");
  EXPECT_EQ(b0["index"], 0);
  EXPECT_DOUBLE_EQ(b0["bytes"].get<double>(), 30.0);
  EXPECT_DOUBLE_EQ(b0["bytes_share"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(b0["cpu_seconds_share"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(b0["applies"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(b0["applies_share"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(r["balance"][1]["bytes_share"].get<double>(), 0.75);
  // No ps, no rows.
  nlohmann::json single;
  single["workers"] = {Summary("worker", 0, "h2", 90, 200e6, 4800, 3800)};
  AddClusterTables(&single);
  EXPECT_TRUE(single["balance"].empty());
}

// Issue 13: a task row holds its process's figures only (it repeated the host's lo counter);
// the host row splits each interface class into Fulcrum's payload (bytes to peers on the same
// host went over lo, the rest over external interfaces) and the rest; the warm-up's bytes are
// apart; "traffic" has one directed row per (from, to, kind), counted by both ends.
TEST(ClusterTablesTest, HostTrafficSplitIntoFulcrumsAndOtherAndDirectedRows) {
  nlohmann::json ps = Summary("ps", 0, "h1", 40, 30e6, 5000, 4000);
  ps["peer_traffic"] = {{{"peer", "worker-0"}, {"bytes_sent", 1500}, {"bytes_received", 1000}},
                        {{"peer", "worker-1"}, {"bytes_sent", 700}, {"bytes_received", 400}}};
  ps["rpc_traffic"] = {
      {{"peer", "worker-0"}, {"method", "Ping"}, {"bytes_sent", 500}, {"bytes_received", 500}},
      {{"peer", "worker-0"}, {"method", "PushPull"}, {"bytes_sent", 1000}, {"bytes_received", 500}},
      {{"peer", "worker-1"}, {"method", "PushPull"}, {"bytes_sent", 700}, {"bytes_received", 400}}};
  nlohmann::json w0 = Summary("worker", 0, "h1", 90, 200e6, 4800, 3800);
  w0["peer_traffic"] = {{{"peer", "ps-0"}, {"bytes_sent", 1000}, {"bytes_received", 1500}}};
  w0["rpc_traffic"] = {
      {{"peer", "ps-0"}, {"method", "Ping"}, {"bytes_sent", 500}, {"bytes_received", 500}},
      {{"peer", "ps-0"}, {"method", "PushPull"}, {"bytes_sent", 500}, {"bytes_received", 1000}}};
  nlohmann::json r;
  r["ps"] = {ps};
  r["workers"] = {w0, Summary("worker", 1, "h2", 80, 210e6, 3000, 100)};
  AddClusterTables(&r);

  for (const nlohmann::json& t : r["tasks"]) {
    EXPECT_FALSE(t.contains("loopback_bytes_sent")) << t.dump();
    EXPECT_FALSE(t.contains("net_bytes_sent")) << t.dump();
  }
  EXPECT_DOUBLE_EQ(r["tasks"][1]["app_bytes_sent_warmup"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(r["cluster"]["app_bytes_sent_warmup"].get<double>(), 1000.0);

  const nlohmann::json& h1 = r["hosts"][0];
  // ps-0 and worker-0 share h1: their 1500 + 1000 bytes went over lo; ps-0's 700 to worker-1
  // (on h2) left over the external interfaces.
  EXPECT_DOUBLE_EQ(h1["fulcrum_loopback_bytes_sent"].get<double>(), 2500.0);
  EXPECT_DOUBLE_EQ(h1["fulcrum_external_bytes_sent"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(h1["loopback_bytes_sent"].get<double>(), 4000.0);  // ps-0 saw the most
  EXPECT_DOUBLE_EQ(h1["other_loopback_bytes_sent"].get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(h1["other_external_bytes_sent"].get<double>(), 1000.0 - 700.0);

  std::map<std::string, nlohmann::json> rows;
  for (const nlohmann::json& t : r["traffic"]) {
    rows[t["from"].get<std::string>() + ">" + t["to"].get<std::string>() + ":" +
         t["kind"].get<std::string>()] = t;
  }
  ASSERT_TRUE(rows.count("worker-0>ps-0:training")) << r["traffic"].dump(2);
  EXPECT_DOUBLE_EQ(rows["worker-0>ps-0:training"]["bytes_counted_by_sender"].get<double>(), 500);
  EXPECT_DOUBLE_EQ(rows["worker-0>ps-0:training"]["bytes_counted_by_receiver"].get<double>(), 500);
  EXPECT_DOUBLE_EQ(rows["ps-0>worker-0:training"]["bytes_counted_by_sender"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(rows["ps-0>worker-0:warm-up"]["bytes_counted_by_receiver"].get<double>(), 500);
  // worker-1 sent no traffic table: only the ps's count of its direction is there, the
  // other is null (not 0: nobody counted it).
  EXPECT_TRUE(rows["worker-1>ps-0:training"]["bytes_counted_by_sender"].is_null());
  EXPECT_DOUBLE_EQ(rows["worker-1>ps-0:training"]["bytes_counted_by_receiver"].get<double>(), 400);
}

// A vanished task's folder stands in for its summary only when written during this run.
// One end of a TCP connection as a summary's tcp_connections lists it.
nlohmann::json Connection(const char* local, const char* remote, double sent, double received,
                          double retransmits) {
  return {{"local", local},          {"remote", remote},           {"loopback", false},
          {"open", false},           {"bytes_sent", sent},         {"bytes_received", received},
          {"segs_out", sent / 1000}, {"segs_in", received / 1000}, {"segs_out_ipv6", 0},
          {"segs_in_ipv6", 0},       {"retransmits", retransmits}};
}

// Three layers per host: each connection direction counted by its more complete end, each
// application transfer by its more complete end, and the interfaces' payload net of headers.
TEST(ClusterTablesTest, LayersCountEachConnectionByItsMoreCompleteEnd) {
  nlohmann::json r;
  r["ps"] = {Summary("ps", 0, "h1", 5, 1e6, 0, 0)};
  r["workers"] = {Summary("worker", 0, "h2", 5, 1e6, 0, 0)};
  // The ps read its end last 200 kB before it closed; the worker read it whole.
  nlohmann::json& ps = r["ps"][0];
  ps["tcp_connections"] = {Connection("10.0.0.1:2222", "10.0.0.2:40000", 800e3, 1800e3, 0)};
  ps["tcp_sockets"]["external"] = Connection("", "", 800e3, 1800e3, 0);
  nlohmann::json& w = r["workers"][0];
  w["tcp_connections"] = {Connection("10.0.0.2:40000", "10.0.0.1:2222", 2000e3, 1000e3, 3)};
  w["tcp_sockets"]["external"] = Connection("", "", 2000e3, 1000e3, 3);
  // The worker counted its pushes (sent) and pulls; the ps counted its replies short.
  w["rpc_traffic"] = {
      {{"peer", "ps-0"}, {"method", "Push"}, {"bytes_sent", 1990e3}, {"bytes_received", 995e3}}};
  ps["rpc_traffic"] = {{{"peer", "worker-0"},
                        {"method", "Push"},
                        {"bytes_sent", 900e3},
                        {"bytes_received", 1990e3}}};
  // Host 2's eth0: 2000 kB out in 2000 packets of 66 B headers, 1000 kB in, in 1000.
  w["network_external_bytes_sent"] = 2000e3 + 2000 * 66;
  w["network_external_bytes_received"] = 1000e3 + 1000 * 66;
  w["Total bytes sent over network"] = 2000e3 + 2000 * 66;
  w["network_interfaces"] = {{{"name", "eth0"},
                              {"loopback", false},
                              {"tx_bytes", 2000e3 + 2000 * 66},
                              {"tx_packets", 2000},
                              {"rx_bytes", 1000e3 + 1000 * 66},
                              {"rx_packets", 1000}}};
  AddClusterTables(&r);
  const nlohmann::json& h2 = r["hosts"][1];
  ASSERT_EQ(h2["host"], "h2");
  const nlohmann::json& sent = h2["layers"]["external"]["sent"];
  EXPECT_EQ(sent["app_bytes"].get<double>(), 1990e3);
  EXPECT_EQ(sent["tcp_bytes"].get<double>(), 2000e3);
  EXPECT_EQ(sent["interface_payload_bytes"].get<double>(), 2000e3);
  EXPECT_NEAR(sent["protocol_overhead"].get<double>(), 10.0 / 1990, 1e-9);
  EXPECT_NEAR(sent["interface_vs_tcp"].get<double>(), 0.0, 1e-12);
  EXPECT_EQ(h2["layers"]["external"]["retransmits"].get<double>(), 3);
  // Host 1: its ps's short reading is made whole by the worker's end of the same connection.
  const nlohmann::json& h1 = r["hosts"][0];
  EXPECT_EQ(h1["layers"]["external"]["received"]["tcp_bytes"].get<double>(), 2000e3);
  EXPECT_EQ(h1["layers"]["external"]["sent"]["tcp_bytes"].get<double>(), 1000e3);
  EXPECT_EQ(h1["layers"]["external"]["sent"]["app_bytes"].get<double>(), 995e3);
  EXPECT_EQ(r["cluster"]["layers"]["external"]["sent"]["tcp_bytes"].get<double>(), 3000e3);
  EXPECT_EQ(r["cluster"]["layers"]["external"]["connections"].get<double>(), 2);
}

// Without any task's connections (profiling off, older summaries) there are no layers.
TEST(ClusterTablesTest, NoConnectionsNoLayers) {
  nlohmann::json r;
  r["workers"] = {Summary("worker", 0, "h1", 5, 1e6, 100, 100)};
  AddClusterTables(&r);
  EXPECT_TRUE(r["hosts"][0]["layers"].is_null());
  EXPECT_TRUE(r["cluster"]["layers"].is_null());
}

TEST(LeftSummaryTest, ThisRunsPartialSummaryIsMarkedAnEarlierRunsIsNot) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "fulcrum_left_summary" / "worker-1";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "summary.json") << R"({"job": "worker", "task_index": 1, "partial": true})";
  const absl::Time written = absl::Now();
  const nlohmann::json left = LeftSummary(dir, written - absl::Minutes(1));
  ASSERT_TRUE(left.is_object());
  EXPECT_EQ(left["vanished"], true);
  EXPECT_TRUE(LeftSummary(dir, written + absl::Minutes(1)).is_null());  // an earlier run's
  EXPECT_TRUE(LeftSummary(dir / "nothing", absl::InfinitePast()).is_null());
  std::ofstream(dir / "summary.json") << "{cut off";
  EXPECT_TRUE(LeftSummary(dir, absl::InfinitePast()).is_null());
}

TEST(ClusterTablesTest, MissingOrWrongTypedKeysCountAsZero) {
  nlohmann::json r;
  r["ps"] = {{{"job", "ps"}, {"task_index", "zero"}, {"cpu_percent_mean", "high"}}, 42};
  r["workers"] = "not a list";
  AddClusterTables(&r);
  ASSERT_EQ(r["tasks"].size(), 1u);  // the number is no summary
  EXPECT_EQ(r["tasks"][0]["host"], "unknown");
  EXPECT_DOUBLE_EQ(r["tasks"][0]["cpu_percent_mean"].get<double>(), 0.0);
  EXPECT_EQ(r["cluster"]["hosts"], 1);
}

}  // namespace
}  // namespace fulcrum::chief
