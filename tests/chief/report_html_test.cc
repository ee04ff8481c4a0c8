// report.html: the chief runs the real renderer (build/bin/render_report.py, copied there by
// the build) in a child process. The page has a chart per view and the tables, escapes
// every string and fetches nothing; a missing, failing or hanging renderer is an error that
// never touches report.json. The renderer's own cases: tests/chief/report_render_test.py.
#include "chief/report_html.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::chief {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Generous: the first matplotlib import on a fresh machine builds its font cache.
constexpr absl::Duration kTimeout = absl::Seconds(300);

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A new directory under the test's temporary directory, removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() : path_((fs::path(::testing::TempDir()) / "report_html_XXXXXX").string()) {
    std::string p = path_.string();
    EXPECT_NE(::mkdtemp(p.data()), nullptr);
    path_ = p;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const char* name) const { return path_ / name; }

 private:
  fs::path path_;
};

Json Samples(double t0, double cpu, double rss) {
  return {{"unix_s", {t0, t0 + 0.5, t0 + 1.0}},
          {"cpu_percent", {0.0, cpu, cpu / 2}},
          {"rss_bytes", {1e7, rss, rss}},
          {"network",
           {{"lo", {{"rx_bytes_per_sec", {0, 2e6, 1e6}}, {"tx_bytes_per_sec", {0, 2e6, 1e6}}}},
            {"eth0", {{"rx_bytes_per_sec", {0, 5e5, 5e5}}, {"tx_bytes_per_sec", {0, 5e5, 0}}}}}}};
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
            {"samples", Samples(t0, 90, 2e8)}}},
          {"peer_traffic", {{{"peer", "ps-0"}, {"bytes_sent", 12.3e6}, {"bytes_received", 4e6}}}},
          {"step_phase_mean_ms", {{"data", 0.1}, {"pull", 0.4}, {"forward", 1.0}}},
          {"step_time_p50_ms", 4.1},
          {"step_time_p99_ms", 9.5}};
}

// chief-0, ps-0 and worker-0 on node1, worker-1 on node2, shaped as the chief writes it
// (docs/profiler.md); worker-1's host name is hostile.
Json Report() {
  Json r;
  r["run_id"] = "logreg-20261123";
  r["model"] = "logreg";
  r["final_test_accuracy"] = 0.8123;
  r["stop_reason"] = "reached train_steps 1000 <&>";
  r["evals"] = {{{"global_step", 500}, {"test_accuracy", 0.7}, {"test_loss", 0.9}},
                {{"global_step", 1000}, {"test_accuracy", 0.81}, {"test_loss", 0.6}}};
  r["workers"] = {Worker(0, "node1", 1000.3), Worker(1, "node2", 1000.1)};
  r["ps"] = {{{"job", "ps"},
              {"task_index", 0},
              {"host", "node1"},
              {"series", {{"samples", Samples(1000.0, 30, 5e7)}}}}};
  r["chief"] = {{"job", "chief"},
                {"task_index", 0},
                {"host", "node1"},
                {"series", {{"samples", Samples(1000.2, 5, 3e7)}}}};
  r["tasks"] = {{{"task", "worker-0"}, {"host", "node1"}, {"peak_rss_bytes", 12.3e6}},
                {{"task", "<script>alert(1)</script>"}, {"host", "node2"}}};
  r["hosts"] = {
      {{"host", "node1"}, {"tasks", {"chief-0", "ps-0", "worker-0"}}, {"interfaces_from", "ps-0"}}};
  r["placement_table"] = {{{"variable", "dense/kernel"}, {"ps", 0}, {"bytes", 31360}}};
  r["traffic"] = {{{"from", "worker-0"},
                   {"to", "ps-0"},
                   {"kind", "training"},
                   {"bytes_counted_by_sender", 12.3e6},
                   {"bytes_counted_by_receiver", 12.3e6}}};
  return r;
}

TEST(WriteReportHtmlTest, DrawsEveryChartFromReportJson) {
  const ScratchDir dir;
  const std::string json = Report().dump(2);
  Write(dir / "report.json", json);
  const absl::Status status = WriteReportHtml(dir / "report.json", dir / "report.html", kTimeout);
  ASSERT_TRUE(status.ok()) << status;
  const std::string html = Read(dir / "report.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // Throughput, loss, evaluations, phases, CPU, memory, a network chart per host, peers.
  EXPECT_EQ(Count(html, "<svg"), 9u) << html.substr(0, 2000);
  EXPECT_EQ(Count(html, "</svg>"), 9u);
  for (const char* text :
       {"<title>Examples/s per worker", "<title>Network of host node1 (as seen by ps-0)",
        "<title>Network of host node2 (as seen by worker-1)", "eth0 (external) tx",
        "lo (loopback, rx = tx)", ">200 MB<", "dense/kernel", "<td>12.3 MB</td>",
        "reached train_steps 1000 &lt;&amp;&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;"}) {
    EXPECT_NE(html.find(text), std::string::npos) << text;
  }
  // Self-contained: no script, nothing loaded; the only URLs are SVG namespace names.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(Count(html, "http://"),
            Count(html, "xmlns=\"http://www.w3.org/2000/svg\"") +
                Count(html, "xmlns:xlink=\"http://www.w3.org/1999/xlink\""));
  EXPECT_EQ(Count(html, "href=\""), Count(html, "href=\"#"));
  EXPECT_EQ(Read(dir / "report.json"), json);  // read, never written
  EXPECT_FALSE(fs::exists(dir / "report.html.tmp"));
}

TEST(WriteReportHtmlTest, WronglyTypedReportsStillGetAPage) {
  Json bad = Report();
  bad["final_test_accuracy"] = "high";
  bad["evals"] = "none";
  bad["workers"][0]["series"] = nullptr;
  bad["workers"][1]["series"]["steps"]["loss"] = {"a", nullptr, 3};
  bad["workers"][1]["series"]["samples"]["network"] = 5;
  bad["tasks"] = {1, "two", nullptr, {{"task", 3}}};
  bad["hosts"] = {{{"host", 7}, {"tasks", "all"}}};
  for (const Json& r : {bad, Json::object(), Json::array(), Json("text"), Json()}) {
    const ScratchDir dir;
    Write(dir / "report.json", r.dump());
    const absl::Status status = WriteReportHtml(dir / "report.json", dir / "report.html", kTimeout);
    ASSERT_TRUE(status.ok()) << status << " for " << r.dump().substr(0, 200);
    const std::string html = Read(dir / "report.html");
    EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
    EXPECT_EQ(html.find("could not be drawn"), std::string::npos);  // not the fallback page
  }
}

TEST(WriteReportHtmlTest, AMissingRendererIsAnErrorAndReportJsonStays) {
  const ScratchDir dir;
  Write(dir / "report.json", "{}");
  ReportRenderer renderer = DefaultReportRenderer();
  renderer.script = dir / "no_such_renderer.py";
  absl::Status status =
      WriteReportHtml(dir / "report.json", dir / "report.html", kTimeout, renderer);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("no_such_renderer.py"), absl::string_view::npos) << status;

  renderer = DefaultReportRenderer();
  renderer.interpreter = dir / "no_such_python";
  status = WriteReportHtml(dir / "report.json", dir / "report.html", kTimeout, renderer);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("no_such_python"), absl::string_view::npos) << status;
  EXPECT_EQ(Read(dir / "report.json"), "{}");
  EXPECT_FALSE(fs::exists(dir / "report.html"));
}

TEST(WriteReportHtmlTest, AFailingRendererReportsWhyAndKeepsTheOldPage) {
  const ScratchDir dir;
  Write(dir / "report.json", "{ not json");
  Write(dir / "report.html", "old page");
  const absl::Status status = WriteReportHtml(dir / "report.json", dir / "report.html", kTimeout);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("exited with status 1"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("cannot read"), absl::string_view::npos) << status;
  EXPECT_EQ(Read(dir / "report.json"), "{ not json");
  EXPECT_EQ(Read(dir / "report.html"), "old page");
}

// A renderer that never ends is killed at the deadline; no half-written page is left.
TEST(WriteReportHtmlTest, AHangingRendererIsKilledAtTheDeadline) {
  const ScratchDir dir;
  Write(dir / "report.json", "{}");
  Write(dir / "hang.py",
        "import sys, time\nopen(sys.argv[2] + '.tmp', 'w').write('half')\ntime.sleep(3600)\n");
  ReportRenderer renderer = DefaultReportRenderer();
  renderer.script = dir / "hang.py";
  const absl::Status status =
      WriteReportHtml(dir / "report.json", dir / "report.html", absl::Seconds(2), renderer);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_FALSE(fs::exists(dir / "report.html"));
  EXPECT_FALSE(fs::exists(dir / "report.html.tmp"));
  EXPECT_EQ(Read(dir / "report.json"), "{}");
}

}  // namespace
}  // namespace fulcrum::chief
