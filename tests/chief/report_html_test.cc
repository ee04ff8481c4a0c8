// report.html: one self-contained page with a chart per view and the tables; every string
// escaped, nothing fetched from the network, and no report (empty, wrongly typed) can make
// rendering throw.
#include "chief/report_html.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::chief {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

nlohmann::json WorkerSummary(int index, const char* host) {
  return {
      {"job", "worker"},
      {"task_index", index},
      {"host", host},
      {"series",
       {{"steps",
         {{"unix_s", {100.0, 101.0, 102.0}},
          {"examples_per_sec", {1000.0, 1200.0, 1100.0}},
          {"loss", {2.0, 1.0, 0.5}}}},
        {"samples",
         {{"unix_s", {100.0, 101.5}},
          {"cpu_percent", {50.0, 90.0}},
          {"rss_bytes", {1e8, 2e8}},
          {"network",
           {{"lo", {{"rx_bytes_per_sec", {1e6, 2e6}}, {"tx_bytes_per_sec", {1e6, 2e6}}}},
            {"eth0", {{"rx_bytes_per_sec", {0, 5e5}}, {"tx_bytes_per_sec", {0, 4e5}}}}}}}}}},
      {"peer_traffic", {{{"peer", "ps-0"}, {"bytes_sent", 12.3e6}, {"bytes_received", 4e6}}}},
      {"step_phase_mean_ms",
       {{"data", 0.1}, {"forward", 1.0}, {"backward", 2.0}, {"push", 0.5}, {"sync_wait", 0.2}}}};
}

nlohmann::json Report() {
  nlohmann::json r;
  r["run_id"] = "logreg-20261123";
  r["model"] = "logreg";
  r["mode"] = "sync";
  r["num_ps"] = 1;
  r["num_workers"] = 2;
  r["final_test_accuracy"] = 0.8123;
  r["global_step"] = 1000;
  r["stop_reason"] = "reached train_steps 1000 <&>";
  r["evals"] = {{{"global_step", 500}, {"test_accuracy", 0.7}, {"test_loss", 0.9}},
                {{"global_step", 1000}, {"test_accuracy", 0.81}, {"test_loss", 0.6}}};
  r["workers"] = {WorkerSummary(0, "node1"), WorkerSummary(1, "node2")};
  r["ps"] = {{{"job", "ps"}, {"task_index", 0}, {"host", "node1"}}};
  r["chief"] = {{"job", "chief"}, {"task_index", 0}, {"host", "node1"}};
  r["tasks"] = {{{"task", "worker-0"}, {"host", "node1"}, {"peak_rss_bytes", 2e8}},
                {{"task", "<script>alert(1)</script>"}, {"host", "node2"}}};
  r["hosts"] = {{{"host", "node1"}, {"tasks", {"chief-0", "ps-0", "worker-0"}}}};
  r["cluster"] = {{"tasks", 4}, {"hosts", 2}, {"external_bytes_sent", 1.5e9}};
  r["placement_table"] = {{{"variable", "dense/kernel"}, {"ps", 0}, {"bytes", 31360}}};
  return r;
}

TEST(ReportHtmlTest, OnePageWithEveryViewAndTable) {
  const std::string html = RenderReportHtml(Report());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  // Throughput, CPU, memory, loss, evaluations, a network chart per host, traffic, phases.
  EXPECT_EQ(Count(html, "<svg"), 9u);
  for (const char* text :
       {"Examples/sec per worker", "Process CPU per task", "Resident memory", "Training loss",
        "evaluations", "Interfaces of host node1", "Interfaces of host node2",
        "Application traffic per peer", "Mean step time by phase", "worker-0", "worker-1", "ps-0",
        "lo (loopback) rx", "eth0 (external) tx", "12.3 MB", "1.5 GB", "0.8123", "dense/kernel"}) {
    EXPECT_NE(html.find(text), std::string::npos) << text;
  }
  // A polyline per worker in the throughput and loss charts, plus CPU, memory, evals, network.
  EXPECT_GE(Count(html, "<polyline"), 2u + 2u + 2u + 2u + 2u + 8u);
}

TEST(ReportHtmlTest, EscapesStringsAndFetchesNothing) {
  const std::string html = RenderReportHtml(Report());
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("reached train_steps 1000 &lt;&amp;&gt;"), std::string::npos);
  // The only URL is the SVG namespace.
  EXPECT_EQ(Count(html, "http://"), Count(html, "http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
}

TEST(ReportHtmlTest, EmptyAndWronglyTypedReportsRender) {
  EXPECT_NE(RenderReportHtml(nlohmann::json::object()).find("</html>"), std::string::npos);
  EXPECT_NE(RenderReportHtml(nlohmann::json()).find("</html>"), std::string::npos);
  nlohmann::json bad = Report();
  bad["final_test_accuracy"] = "high";
  bad["evals"] = "none";
  bad["workers"][0]["series"] = nullptr;
  bad["workers"][1]["series"]["steps"]["loss"] = {"a", nullptr, 3};
  bad["workers"][1]["series"]["samples"]["network"] = 5;
  bad["tasks"] = {1, "two", nullptr};
  bad["cluster"] = {{"tasks", "four"}};
  std::string html;
  ASSERT_NO_THROW(html = RenderReportHtml(bad));
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  EXPECT_NE(html.find("n/a"), std::string::npos);  // the accuracy that is not a number
}

}  // namespace
}  // namespace fulcrum::chief
