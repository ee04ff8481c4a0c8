// AddClusterTables: per-task rows from the summaries, hosts that take the network figures of
// their busiest task (interfaces are shared in a namespace) but add CPU and memory, and
// cluster totals over hosts.
#include "chief/report.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

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
  EXPECT_DOUBLE_EQ(c["examples_per_sec"].get<double>(), 2000.0);
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
