#include "profiler/metrics_exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::profiler {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct HttpResponse {
  int status = 0;
  std::string body;
};

// A plain HTTP/1.0 GET over a POSIX socket, so the test needs no HTTP client library and the
// exporter is exercised exactly as a Prometheus server scrapes it.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  timeval timeout{};
  timeout.tv_sec = 10;  // a hung server fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, ": ", error));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return absl::UnavailableError("send failed");
    }
    sent += static_cast<size_t>(n);
  }
  // Read until the body is complete by its Content-Length: civetweb lingers before closing
  // the connection, so waiting for EOF would add seconds to every scrape.
  std::string raw;
  char buffer[4096];
  size_t header_end = std::string::npos;
  size_t expected_size = std::string::npos;
  while (raw.size() < expected_size) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    }
    raw.append(buffer, static_cast<size_t>(n));
    if (header_end == std::string::npos &&
        (header_end = raw.find("\r\n\r\n")) != std::string::npos) {
      const std::string headers = absl::AsciiStrToLower(raw.substr(0, header_end));
      const size_t length_at = headers.find("\r\ncontent-length:");
      size_t length = 0;
      if (length_at != std::string::npos &&
          std::sscanf(headers.c_str() + length_at, "\r\ncontent-length: %zu", &length) == 1) {
        expected_size = header_end + 4 + length;
      }
    }
  }
  ::close(fd);
  if (header_end == std::string::npos) return absl::DataLossError("no HTTP header end: " + raw);
  HttpResponse response;
  // "HTTP/1.1 200 OK"
  if (std::sscanf(raw.c_str(), "HTTP/%*d.%*d %d", &response.status) != 1) {
    return absl::DataLossError("bad status line: " + raw.substr(0, raw.find("\r\n")));
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

bool HasLine(const std::string& body, absl::string_view line) {
  for (absl::string_view l : absl::StrSplit(body, '\n')) {
    if (l == line) return true;
  }
  return false;
}

// Two interfaces and two cores, as a sampler on a worker host would report them.
SystemSample MakeSample(uint64_t lo_tx_bytes) {
  SystemSample sample;
  sample.seconds = 2.0;
  sample.cpu_seconds = 12.5;
  sample.cpu_percent = 150.0;
  sample.core_percent = {25.0, 75.0};
  sample.rss_bytes = 1048576;
  sample.peak_rss_bytes = 2097152;
  InterfaceSample lo;
  lo.name = "lo";
  lo.loopback = true;
  lo.rx_bytes = lo_tx_bytes;
  lo.tx_bytes = lo_tx_bytes;
  lo.rx_packets = 10;
  lo.tx_packets = 10;
  InterfaceSample eth0;
  eth0.name = "eth0";
  eth0.rx_bytes = 5000;
  eth0.tx_bytes = 7000;
  eth0.rx_packets = 50;
  eth0.tx_packets = 70;
  eth0.rx_drops = 3;
  eth0.tx_errors = 1;
  sample.interfaces = {lo, eth0};
  sample.cpu_user_percent = 120.0;
  sample.cpu_system_percent = 30.0;
  sample.voluntary_switches = 42;
  sample.io_write_bytes = 8192;
  sample.threads = {{"fulcrum-compute", 2, 100.0, 25.0}};
  sample.host.cpu_iowait_percent = 5.0;
  sample.host.mem_available_bytes = 4096;
  sample.host.load5 = 1.5;
  sample.host.context_switches = 900;
  sample.host.tcp_retrans_segs = 4;
  sample.host.disk_read_bytes = 512;
  sample.gpus = {{0, 50.0, 1024, 4096, 75.0}};
  return sample;
}

// Feeds one of every kind of figure the exporter publishes.
void FeedEverything(MetricsExporter& exporter) {
  exporter.OnSample(MakeSample(1000));
  exporter.OnTraffic({{"ps-0", "PushPull", 3, 4096, 8192}, {"ps-1", "Pull", 2, 128, 256}});
  exporter.OnStep(/*local_step=*/1, /*global_step=*/7, /*examples=*/64, /*loss=*/0.5,
                  /*examples_per_second=*/320.0);
  exporter.OnPs(/*global_step=*/7, /*pushes_applied=*/20, /*pushes_dropped=*/2);
  exporter.OnEval(/*global_step=*/7, /*accuracy=*/0.875, /*loss=*/0.25);
}

std::string Scrape(const MetricsExporter& exporter) {
  absl::StatusOr<HttpResponse> response = HttpGet(exporter.port(), "/metrics");
  EXPECT_TRUE(response.ok()) << response.status();
  if (!response.ok()) return "";
  EXPECT_EQ(response->status, 200) << response->body;
  return response->body;
}

TEST(MetricsExporterTest, ServesEveryMetricWithConstantLabelsOverHttp) {
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
      MetricsExporter::Start("worker", 1, /*port=*/0, "127.0.0.1");
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  ASSERT_GT((*exporter)->port(), 0);
  FeedEverything(**exporter);

  const std::string body = Scrape(**exporter);
  const std::vector<std::string> expected = {
      R"(process_cpu_seconds_total{task_index="1",task_type="worker"} 12.5)",
      R"(process_resident_memory_bytes{task_index="1",task_type="worker"} 1048576)",
      R"(process_resident_memory_max_bytes{task_index="1",task_type="worker"} 2097152)",
      R"(fulcrum_cpu_core_utilization_ratio{core="0",task_index="1",task_type="worker"} 0.25)",
      R"(fulcrum_cpu_core_utilization_ratio{core="1",task_index="1",task_type="worker"} 0.75)",
      R"(fulcrum_network_transmit_bytes_total{device="lo",task_index="1",task_type="worker"} 1000)",
      R"(fulcrum_network_receive_bytes_total{device="lo",task_index="1",task_type="worker"} 1000)",
      R"(fulcrum_network_transmit_bytes_total{device="eth0",task_index="1",task_type="worker"} 7000)",
      R"(fulcrum_network_receive_bytes_total{device="eth0",task_index="1",task_type="worker"} 5000)",
      R"(fulcrum_network_transmit_packets_total{device="eth0",task_index="1",task_type="worker"} 70)",
      R"(fulcrum_network_receive_packets_total{device="eth0",task_index="1",task_type="worker"} 50)",
      R"(fulcrum_rpcs_total{method="PushPull",peer="ps-0",task_index="1",task_type="worker"} 3)",
      R"(fulcrum_rpc_sent_bytes_total{method="PushPull",peer="ps-0",task_index="1",task_type="worker"} 4096)",
      R"(fulcrum_rpc_received_bytes_total{method="PushPull",peer="ps-0",task_index="1",task_type="worker"} 8192)",
      R"(fulcrum_rpc_sent_bytes_total{method="Pull",peer="ps-1",task_index="1",task_type="worker"} 128)",
      R"(fulcrum_steps_total{task_index="1",task_type="worker"} 1)",
      R"(fulcrum_examples_total{task_index="1",task_type="worker"} 64)",
      R"(fulcrum_step_loss{task_index="1",task_type="worker"} 0.5)",
      R"(fulcrum_step_examples_per_second{task_index="1",task_type="worker"} 320)",
      R"(fulcrum_global_step{task_index="1",task_type="worker"} 7)",
      R"(fulcrum_ps_pushes_applied_total{task_index="1",task_type="worker"} 20)",
      R"(fulcrum_ps_pushes_dropped_total{task_index="1",task_type="worker"} 2)",
      R"(fulcrum_test_accuracy{task_index="1",task_type="worker"} 0.875)",
      R"(fulcrum_test_loss{task_index="1",task_type="worker"} 0.25)",
      R"(fulcrum_process_cpu_ratio{mode="user",task_index="1",task_type="worker"} 1.2)",
      R"(fulcrum_process_cpu_ratio{mode="system",task_index="1",task_type="worker"} 0.3)",
      R"(fulcrum_thread_cpu_ratio{mode="user",task_index="1",task_type="worker",thread="fulcrum-compute"} 1)",
      R"(fulcrum_thread_cpu_ratio{mode="system",task_index="1",task_type="worker",thread="fulcrum-compute"} 0.25)",
      R"(fulcrum_process_context_switches_total{kind="voluntary",task_index="1",task_type="worker"} 42)",
      R"(fulcrum_process_io_bytes_total{direction="write",task_index="1",task_type="worker"} 8192)",
      R"(fulcrum_host_cpu_ratio{mode="iowait",task_index="1",task_type="worker"} 0.05)",
      R"(fulcrum_host_memory_bytes{kind="available",task_index="1",task_type="worker"} 4096)",
      R"(fulcrum_host_load{task_index="1",task_type="worker",window="5m"} 1.5)",
      R"(fulcrum_host_context_switches_total{task_index="1",task_type="worker"} 900)",
      R"(fulcrum_tcp_segments_total{kind="retrans",task_index="1",task_type="worker"} 4)",
      R"(fulcrum_host_disk_bytes_total{direction="read",task_index="1",task_type="worker"} 512)",
      R"(fulcrum_network_receive_drops_total{device="eth0",task_index="1",task_type="worker"} 3)",
      R"(fulcrum_network_transmit_errors_total{device="eth0",task_index="1",task_type="worker"} 1)",
      R"(fulcrum_gpu_utilization_ratio{gpu="0",task_index="1",task_type="worker"} 0.5)",
      R"(fulcrum_gpu_memory_used_bytes{gpu="0",task_index="1",task_type="worker"} 1024)",
      R"(fulcrum_gpu_power_watts{gpu="0",task_index="1",task_type="worker"} 75)",
      "# TYPE fulcrum_host_disk_bytes_total counter",
      "# TYPE fulcrum_network_transmit_bytes_total counter",
      "# TYPE process_resident_memory_bytes gauge",
  };
  for (const std::string& line : expected) {
    EXPECT_TRUE(HasLine(body, line)) << "missing line: " << line << "\nin:\n" << body;
  }
}

TEST(MetricsExporterTest, StepsAndExamplesAccumulateOverCalls) {
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
      MetricsExporter::Start("worker", 0, /*port=*/0, "127.0.0.1");
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  for (int step = 1; step <= 3; ++step) (*exporter)->OnStep(step, 10 + step, 32, 1.0, 100.0);
  const std::string body = Scrape(**exporter);
  // A worker publishes no PS or evaluation series it was never fed.
  EXPECT_THAT(body, Not(HasSubstr("fulcrum_ps_pushes_applied_total{"))) << body;
  EXPECT_THAT(body, Not(HasSubstr("fulcrum_test_accuracy{"))) << body;
  EXPECT_TRUE(HasLine(body, R"(fulcrum_steps_total{task_index="0",task_type="worker"} 3)")) << body;
  EXPECT_TRUE(HasLine(body, R"(fulcrum_examples_total{task_index="0",task_type="worker"} 96)"))
      << body;
  EXPECT_TRUE(HasLine(body, R"(fulcrum_global_step{task_index="0",task_type="worker"} 13)"))
      << body;
}

TEST(MetricsExporterTest, CountersNeverDecrease) {
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
      MetricsExporter::Start("ps", 0, /*port=*/0, "127.0.0.1");
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const char* kLoTx =
      R"(fulcrum_network_transmit_bytes_total{device="lo",task_index="0",task_type="ps"} )";
  const char* kApplied = R"(fulcrum_ps_pushes_applied_total{task_index="0",task_type="ps"} )";
  const char* kSent =
      R"(fulcrum_rpc_sent_bytes_total{method="Pull",peer="worker-0",task_index="0",task_type="ps"} )";

  (*exporter)->OnSample(MakeSample(1000));
  (*exporter)->OnPs(5, 10, 0);
  (*exporter)->OnTraffic({{"worker-0", "Pull", 4, 900, 100}});
  // Smaller totals (e.g. a restarted source) must not pull the published counters back.
  (*exporter)->OnSample(MakeSample(400));
  (*exporter)->OnPs(6, 3, 0);
  (*exporter)->OnTraffic({{"worker-0", "Pull", 1, 200, 50}});
  std::string body = Scrape(**exporter);
  EXPECT_TRUE(HasLine(body, absl::StrCat(kLoTx, "1000"))) << body;
  EXPECT_TRUE(HasLine(body, absl::StrCat(kApplied, "10"))) << body;
  EXPECT_TRUE(HasLine(body, absl::StrCat(kSent, "900"))) << body;

  // Larger totals are published exactly, not added to the old ones.
  (*exporter)->OnSample(MakeSample(1500));
  (*exporter)->OnPs(7, 12, 0);
  (*exporter)->OnTraffic({{"worker-0", "Pull", 5, 1000, 120}});
  body = Scrape(**exporter);
  EXPECT_TRUE(HasLine(body, absl::StrCat(kLoTx, "1500"))) << body;
  EXPECT_TRUE(HasLine(body, absl::StrCat(kApplied, "12"))) << body;
  EXPECT_TRUE(HasLine(body, absl::StrCat(kSent, "1000"))) << body;
}

TEST(MetricsExporterTest, UsedPortIsUnavailableNamingTheAddress) {
  absl::StatusOr<std::unique_ptr<MetricsExporter>> first =
      MetricsExporter::Start("worker", 0, /*port=*/0, "127.0.0.1");
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  absl::StatusOr<std::unique_ptr<MetricsExporter>> second =
      MetricsExporter::Start("worker", 1, port, "127.0.0.1");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(absl::StrCat("127.0.0.1:", port)));
  // The first exporter is unharmed by the failed attempt.
  (*first)->OnStep(1, 1, 32, 1.0, 10.0);
  EXPECT_THAT(Scrape(**first), HasSubstr("fulcrum_steps_total"));
}

TEST(MetricsExporterTest, RejectsBadArguments) {
  EXPECT_EQ(MetricsExporter::Start("", 0, 0, "127.0.0.1").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsExporter::Start("ps", -1, 0, "127.0.0.1").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsExporter::Start("ps", 0, 70000, "127.0.0.1").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The listening socket's local address in the kernel's table, as /proc/net/tcp writes it
// ("0100007F" is 127.0.0.1, "00000000" every interface); empty when no socket listens on it.
std::string ListeningAddress(int port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  const std::string suffix = absl::StrCat(":", absl::Hex(port, absl::kZeroPad4));
  while (std::getline(in, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() > 3 && fields[3] == "0A" &&
        absl::EndsWith(fields[1], absl::AsciiStrToUpper(suffix))) {
      return fields[1].substr(0, fields[1].find(':'));
    }
  }
  return "";
}

// The endpoint listens where it is told, 127.0.0.1 here, not on every interface (issue 12:
// it bound 0.0.0.0, reachable from anywhere on nodes with public addresses).
TEST(MetricsExporterTest, ListensOnlyOnTheGivenAddress) {
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
      MetricsExporter::Start("chief", 0, /*port=*/0, "127.0.0.1");
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  EXPECT_EQ(ListeningAddress((*exporter)->port()), "0100007F");
  (*exporter)->OnEval(100, 0.9, 0.3);
  EXPECT_TRUE(HasLine(Scrape(**exporter),
                      R"(fulcrum_test_accuracy{task_index="0",task_type="chief"} 0.9)"));
  absl::StatusOr<std::unique_ptr<MetricsExporter>> everywhere =
      MetricsExporter::Start("chief", 0, /*port=*/0, "0.0.0.0");
  ASSERT_TRUE(everywhere.ok()) << everywhere.status();
  EXPECT_EQ(ListeningAddress((*everywhere)->port()), "00000000");
}

std::string FindPromtool() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/promtool");
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// promtool both parses the exposition format and lints it (counter names, units, help texts);
// a lint finding makes it exit non-zero, so this pins the names to Prometheus's conventions.
TEST(MetricsExporterTest, PromtoolAcceptsTheBody) {
  const std::string promtool = FindPromtool();
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not found: install Debian's 'prometheus' package";
  }
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
      MetricsExporter::Start("worker", 1, /*port=*/0, "127.0.0.1");
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  FeedEverything(**exporter);
  const std::string body = Scrape(**exporter);
  ASSERT_FALSE(body.empty());

  const std::string file = absl::StrCat(::testing::TempDir(), "/metrics_", ::getpid(), ".txt");
  {
    std::ofstream out(file, std::ios::binary);
    out << body;
    ASSERT_TRUE(out.good()) << file;
  }
  const std::string command = absl::StrCat(promtool, " check metrics < '", file, "' 2>&1");
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  std::string output;
  char buffer[1024];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  std::remove(file.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << command;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "promtool said:\n" << output << "\nbody:\n" << body;
}

}  // namespace

// docs/grafana-dashboard.json queries only what the exporter serves: every metric name in its
// PromQL is in a live endpoint's body and every label it selects or groups by is one the
// series carry (so a renamed metric or label breaks this test, not the user's dashboard).
TEST(MetricsExporterTest, TheGrafanaDashboardAsksOnlyForServedMetricsAndLabels) {
  std::ifstream in(std::string(FULCRUM_SOURCE_DIR) + "/docs/grafana-dashboard.json");
  ASSERT_TRUE(in.good()) << "docs/grafana-dashboard.json";
  const nlohmann::json dashboard = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(dashboard.is_object()) << "docs/grafana-dashboard.json does not parse";
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
      MetricsExporter::Start("worker", 1, /*port=*/0, "127.0.0.1");
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  FeedEverything(**exporter);
  const std::string body = Scrape(**exporter);
  const std::set<std::string> labels = {"task_type", "task_index", "device",
                                        "core",      "peer",       "method"};
  const std::regex metric(R"(\b((?:fulcrum|process)_[a-z_]+)\b)");
  const std::regex selected(R"(([a-z_]+)\s*=)");
  const std::regex grouped(R"(by \(([^)]*)\))");
  int exprs = 0;
  for (const nlohmann::json& panel : dashboard["panels"]) {
    for (const nlohmann::json& target : panel["targets"]) {
      const std::string expr = target["expr"].get<std::string>();
      ++exprs;
      for (std::sregex_iterator m(expr.begin(), expr.end(), metric), end; m != end; ++m) {
        EXPECT_THAT(body, HasSubstr((*m)[1].str() + "{"))
            << "not served: " << (*m)[1] << " in " << expr;
      }
      for (std::sregex_iterator m(expr.begin(), expr.end(), selected), end; m != end; ++m) {
        EXPECT_TRUE(labels.contains((*m)[1].str()))
            << "no such label: " << (*m)[1] << " in " << expr;
      }
      for (std::sregex_iterator m(expr.begin(), expr.end(), grouped), end; m != end; ++m) {
        for (const absl::string_view name : absl::StrSplit((*m)[1].str(), ',')) {
          EXPECT_TRUE(labels.contains(std::string(absl::StripAsciiWhitespace(name))))
              << "no such label: " << name << " in " << expr;
        }
      }
    }
  }
  EXPECT_GE(exprs, 10);
}

// --metrics_linger_secs: an ending task waits for one more scrape, and no longer than asked.
TEST(MetricsExporterTest, WaitForNextScrapeEndsAtTheScrapeOrTheTimeout) {
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
      MetricsExporter::Start("ps", 0, /*port=*/0, "127.0.0.1");
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const absl::Time start = absl::Now();
  EXPECT_FALSE((*exporter)->WaitForNextScrape(absl::Milliseconds(300)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  const int64_t before = (*exporter)->scrapes();
  std::thread scraper([&] {
    absl::SleepFor(absl::Milliseconds(200));
    Scrape(**exporter);
  });
  EXPECT_TRUE((*exporter)->WaitForNextScrape(absl::Seconds(60)));
  scraper.join();
  EXPECT_EQ((*exporter)->scrapes(), before + 1);
}

}  // namespace fulcrum::profiler
