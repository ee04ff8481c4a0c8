// report.html: one self-contained page with a chart per view and the tables; every string
// escaped, nothing fetched from the network, and no report (empty, wrongly typed, absurd
// values) can make rendering throw or hang.
#include "chief/report_html.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::chief {
namespace {

using Json = nlohmann::json;

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// The <svg>...</svg> whose title is `title`, or "" when there is none.
std::string Chart(const std::string& html, const std::string& title) {
  const size_t at = html.find("<title>" + title);
  if (at == std::string::npos) return "";
  const size_t begin = html.rfind("<svg", at), end = html.find("</svg>", at);
  return end == std::string::npos ? "" : html.substr(begin, end + 6 - begin);
}

Json Samples(double t0, double cpu, double rss, double eth0) {
  return {{"unix_s", {t0, t0 + 0.5, t0 + 1.0}},
          {"cpu_percent", {0.0, cpu, cpu / 2}},
          {"rss_bytes", {1e7, rss, rss}},
          {"network",
           {{"lo", {{"rx_bytes_per_sec", {0, 2e6, 1e6}}, {"tx_bytes_per_sec", {0, 2e6, 1e6}}}},
            {"eth0", {{"rx_bytes_per_sec", {0, eth0, eth0}}, {"tx_bytes_per_sec", {0, eth0, 0}}}},
            {"docker0", {{"rx_bytes_per_sec", {0, 0, 0}}, {"tx_bytes_per_sec", {0, 0, 0}}}}}}};
}

Json Worker(int index, const char* host, double t0) {
  return {{"job", "worker"},
          {"task_index", index},
          {"host", host},
          {"series",
           {{"steps",
             {{"unix_s", {t0 + 0.2, t0 + 0.6, t0 + 1.0}},
              {"examples_per_sec", {1000.0, 1200.0, 1100.0}},
              {"loss", {2.0, 1.0, 0.5}},
              {"global_step", {10, 20, 30}}}},
            {"samples", Samples(t0, 90, 2e8, 5e5)}}},
          {"peer_traffic",
           {{{"peer", "ps-0"}, {"rpcs", 40}, {"bytes_sent", 12.3e6}, {"bytes_received", 4e6}},
            {{"peer", "chief-0"}, {"rpcs", 2}, {"bytes_sent", 300}, {"bytes_received", 90}}}},
          {"step_phase_mean_ms",
           {{"data", 0.1},
            {"pull", 0.4},
            {"forward", 1.0},
            {"backward", 2.0},
            {"push", 0.5},
            {"sync_wait", 0.2}}},
          {"step_time_p50_ms", 4.1},
          {"step_time_p99_ms", 9.5},
          {"System Information", {{"Processor", "AMD EPYC"}, {"Machine", "x86_64"}}}};
}

Json Task(const char* name, const char* host, double rss) {
  return {{"task", name},          {"host", host},        {"cpu_percent_mean", 42.34},
          {"peak_rss_bytes", rss}, {"app_bytes_sent", 1}, {"examples_per_sec", 153234.0}};
}

// A run of chief-0, ps-0 and worker-0 on node1 and worker-1 on node2, shaped as the chief
// writes it (docs/profiler.md).
Json Report() {
  Json r;
  r["run_id"] = "logreg-20261123";
  r["model"] = "logreg";
  r["dataset"] = "mnist";
  r["mode"] = "sync";
  r["num_ps"] = 1;
  r["num_workers"] = 2;
  r["learning_rate"] = 0.029999999329447746;
  r["final_test_accuracy"] = 0.8123;
  r["time_to_target_accuracy_seconds"] = nullptr;
  r["train_seconds"] = 12.3456;
  r["global_step"] = 1000;
  r["stop_reason"] = "reached train_steps 1000 <&>";
  r["evals"] = {
      {{"global_step", 500}, {"seconds", 6.0}, {"test_accuracy", 0.7}, {"test_loss", 0.9}},
      {{"global_step", 1000}, {"seconds", 12.0}, {"test_accuracy", 0.81}, {"test_loss", 0.6}}};
  r["workers"] = {Worker(0, "node1", 1000.3), Worker(1, "node2", 1000.1)};
  r["ps"] = {{{"job", "ps"},
              {"task_index", 0},
              {"host", "node1"},
              {"series", {{"samples", Samples(1000.0, 30, 5e7, 5e5)}}}}};
  r["chief"] = {{"job", "chief"},
                {"task_index", 0},
                {"host", "node1"},
                {"series", {{"samples", Samples(1000.2, 5, 3e7, 0)}}}};
  r["tasks"] = {Task("chief-0", "node1", 3e7), Task("ps-0", "node1", 5e7),
                Task("worker-0", "node1", 12.3e6), Task("worker-1", "node2", 2e8)};
  r["hosts"] = {{{"host", "node1"},
                 {"tasks", {"chief-0", "ps-0", "worker-0"}},
                 {"interfaces_from", "ps-0"},
                 {"interfaces", {{{"name", "eth0"}, {"rx_bytes", 2e6}, {"tx_bytes", 3e6}}}}}};
  r["cluster"] = {{"tasks", 4}, {"hosts", 2}, {"external_bytes_sent", 1.5e9}};
  r["placement_table"] = {{{"variable", "dense/kernel"}, {"ps", 0}, {"bytes", 31360}}};
  return r;
}

TEST(ReportHtmlTest, OnePageWithEveryChartAndTable) {
  const std::string html = RenderReportHtml(Report());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  // Throughput, loss, evaluations, phases, CPU, memory, a network chart per host, traffic.
  EXPECT_EQ(Count(html, "<svg"), 9u);
  EXPECT_EQ(Count(html, "</svg>"), 9u);
  for (const char* text : {"chief-0", "ps-0", "worker-0", "worker-1", "node1", "node2",
                           "dense/kernel", "logreg-20261123", "mnist", "0.8123"}) {
    EXPECT_NE(html.find(text), std::string::npos) << text;
  }
  for (const char* title :
       {"Examples/sec per worker", "Training loss per worker", "Chief&#39;s evaluations",
        "Process CPU per task", "Resident memory (RSS) per task", "Application bytes",
        "Mean step time of each worker by phase"}) {
    EXPECT_NE(Chart(html, title), "") << title;
  }
}

TEST(ReportHtmlTest, ALinePerTaskAndSeries) {
  const std::string html = RenderReportHtml(Report());
  const std::string rate = Chart(html, "Examples/sec per worker");
  EXPECT_EQ(Count(rate, "<polyline"), 2u);
  EXPECT_NE(rate.find("<title>worker-0</title>"), std::string::npos);
  EXPECT_NE(rate.find("<title>worker-1</title>"), std::string::npos);
  EXPECT_EQ(Count(Chart(html, "Training loss per worker"), "<polyline"), 2u);
  EXPECT_EQ(Count(Chart(html, "Process CPU per task"), "<polyline"), 4u);  // chief, ps, 2 workers
  EXPECT_EQ(Count(Chart(html, "Resident memory (RSS) per task"), "<polyline"), 4u);
  EXPECT_EQ(Count(Chart(html, "Chief&#39;s evaluations"), "<polyline"), 2u);  // accuracy, loss
  // Axes carry units; x is seconds since the earliest sample (the ps's, at 1000.0).
  const std::string mem = Chart(html, "Resident memory (RSS) per task");
  EXPECT_NE(mem.find(">200 MB<"), std::string::npos);
  EXPECT_NE(mem.find("seconds since start"), std::string::npos);
  EXPECT_NE(Chart(html, "Process CPU per task").find(">100%<"), std::string::npos);
}

TEST(ReportHtmlTest, ANetworkChartPerHostWithLoopbackAndExternalApart) {
  const std::string html = RenderReportHtml(Report());
  // node1: the task the hosts table names; node2 (not in the table): its only task.
  const std::string node1 = Chart(html, "Network of host node1 (as seen by ps-0)");
  const std::string node2 = Chart(html, "Network of host node2 (as seen by worker-1)");
  ASSERT_NE(node1, "");
  ASSERT_NE(node2, "");
  for (const std::string& chart : {node1, node2}) {
    EXPECT_EQ(Count(chart, "<polyline"), 4u);  // rx and tx of lo and eth0
    EXPECT_NE(chart.find("lo (loopback) rx"), std::string::npos);
    EXPECT_NE(chart.find("eth0 (external) tx"), std::string::npos);
    EXPECT_NE(chart.find("idle: docker0"), std::string::npos);
    EXPECT_NE(chart.find("MB/s<"), std::string::npos);
  }
  EXPECT_EQ(html.find("Network of host node1 (as seen by chief-0)"), std::string::npos);
}

TEST(ReportHtmlTest, BarsForPeersAndPhases) {
  const std::string html = RenderReportHtml(Report());
  const std::string peers = Chart(html, "Application bytes");
  EXPECT_NE(peers.find("worker-0 \u2192 ps-0"), std::string::npos);
  EXPECT_NE(peers.find("worker-1 \u2192 chief-0"), std::string::npos);
  EXPECT_NE(peers.find("12.3 MB / 4.0 MB"), std::string::npos);
  EXPECT_EQ(Count(peers, "<rect x="), 4u * 2u + 2u);  // sent, received per row; legend
  const std::string phases = Chart(html, "Mean step time of each worker by phase");
  EXPECT_EQ(Count(phases, "<rect x="), 2u * 6u + 6u);
  EXPECT_NE(phases.find("4.2 ms (p50 4.1 ms, p99 9.5 ms)"), std::string::npos);
}

TEST(ReportHtmlTest, TablesInHumanUnits) {
  const std::string html = RenderReportHtml(Report());
  for (const char* text :
       {"<td>12.3 MB</td>", "<td>200.0 MB</td>", "<td>1.5 GB</td>", "<td>42.3%</td>",
        "<td>153.2k</td>", "<td>12.35 s</td>", "<td>0.03</td>", "<td>31.4 KB</td>",
        "<td>time_to_target_accuracy_seconds</td><td>n/a</td>", "eth0 2.0 MB in / 3.0 MB out",
        "AMD EPYC"}) {
    EXPECT_NE(html.find(text), std::string::npos) << text;
  }
}

TEST(ReportHtmlTest, EscapesStringsAndFetchesNothing) {
  Json r = Report();
  r["tasks"][3]["task"] = "<script>alert(1)</script>";
  r["workers"][1]["host"] = "a\"b'c";
  const std::string html = RenderReportHtml(r);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("reached train_steps 1000 &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(html.find("a&quot;b&#39;c"), std::string::npos);
  // The only URL is the SVG namespace; nothing is loaded from anywhere.
  EXPECT_EQ(Count(html, "http://"), Count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find(" href="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(ReportHtmlTest, EmptyReportsRender) {
  for (const Json& r : {Json::object(), Json(), Json::array(), Json("text")}) {
    std::string html;
    ASSERT_NO_THROW(html = RenderReportHtml(r));
    EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_NE(html.find("no data"), std::string::npos);  // the charts say so, not the fallback
    EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  }
}

TEST(ReportHtmlTest, WronglyTypedAndAbsurdReportsRender) {
  Json bad = Report();
  bad["final_test_accuracy"] = "high";
  bad["evals"] = {{{"global_step", 1e17}, {"test_accuracy", 0.5}},  // a step as big as a
                  {{"global_step", 1e17}, {"test_accuracy", 0.6}},  // double counts
                  "none"};
  bad["workers"][0]["series"] = nullptr;
  bad["workers"][1]["task_index"] = 1e300;
  bad["workers"][1]["series"]["steps"]["loss"] = {"a", nullptr, 3};
  bad["workers"][1]["series"]["steps"]["examples_per_sec"] = {1e308, -1e308, 0};
  bad["workers"][1]["series"]["samples"]["network"] = 5;
  bad["ps"][0]["series"]["samples"]["network"]["lo"] = "x";
  bad["ps"][0]["peer_traffic"] = {{{"peer", {1, 2}}, {"bytes_sent", "many"}}};
  bad["chief"]["series"]["samples"]["unix_s"] = {"now", 1000.3};
  bad["chief"]["step_phase_mean_ms"] = {{"data", "slow"}};
  bad["model"] = {{"name", "\xff\xfe"}};  // invalid UTF-8 would make dump() throw
  bad["tasks"] = {1, "two", nullptr, {{"task", 3}}};
  bad["hosts"] = {{{"host", 7}, {"tasks", "all"}, {"interfaces", {{{"rx_bytes", "x"}}}}}};
  bad["cluster"] = {{"tasks", "four"}};
  bad["placement_table"] = {{{"variable", nullptr}, {"ps", {0}}}};
  std::string html;
  ASSERT_NO_THROW(html = RenderReportHtml(bad));
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  EXPECT_NE(html.find("Examples/sec per worker"), std::string::npos);  // not the fallback page
  EXPECT_NE(html.find("<td>final_test_accuracy</td><td>high</td>"), std::string::npos);
  EXPECT_NE(html.find("final test accuracy</span><b>n/a"), std::string::npos);
  EXPECT_EQ(html.find("nan"), std::string::npos);
}

}  // namespace
}  // namespace fulcrum::chief
