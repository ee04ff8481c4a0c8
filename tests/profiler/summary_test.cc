// The summary keys as pure functions: known samples, interface totals, traffic and step
// records in, the keys and values docs/profiler.md promises out. No thread, clock or file.
#include "profiler/summary.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "profiler/histogram.h"
#include "profiler/traffic.h"

namespace fulcrum::profiler {
namespace {

using nlohmann::json;

SystemSample Sample(double seconds, double cpu_seconds, double cpu_percent,
                    std::vector<double> cores, int64_t rss, int64_t peak) {
  SystemSample s;
  s.seconds = seconds;
  s.unix_micros = 1'700'000'000'000'000 + static_cast<int64_t>(seconds * 1e6);
  s.cpu_seconds = cpu_seconds;
  s.cpu_percent = cpu_percent;
  s.core_percent = std::move(cores);
  s.rss_bytes = rss;
  s.peak_rss_bytes = peak;
  return s;
}

InterfaceSample Nic(const std::string& name, double rx_per_sec, double tx_per_sec) {
  InterfaceSample i;
  i.name = name;
  i.loopback = name == "lo";
  i.rx_bytes_per_sec = rx_per_sec;
  i.tx_bytes_per_sec = tx_per_sec;
  return i;
}

// A step of `wall_ms` with `examples` examples, its phases in the ratio 1:0:2:3:1:1 of wall/8.
StepRecord Step(int64_t i, double wall_ms, int64_t examples = 100) {
  StepRecord r;
  r.step = i;
  r.global_step = 10 * i;
  r.examples = examples;
  r.loss = static_cast<double>(i);
  r.begin_unix_us = 1'700'000'000'000'000 + i * 1'000'000;
  r.wall_ms = wall_ms;
  r.data_ms = wall_ms / 8;
  r.forward_ms = 2 * wall_ms / 8;
  r.backward_ms = 3 * wall_ms / 8;
  r.push_ms = wall_ms / 8;
  r.sync_wait_ms = wall_ms / 8;
  return r;
}

std::set<std::string> Keys(const json& j) {
  std::set<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.insert(key);
  return keys;
}

TEST(CpuMemoryKeysTest, IntervalMeansWeightEachIntervalByItsLength) {
  // Intervals of 1 s and 2 s; the first sample (the baseline) has no interval of its own.
  const std::vector<SystemSample> samples = {
      Sample(0, 1.0, 999.0, {0, 0}, 50, 60),
      Sample(1, 1.5, 50.0, {10, 20}, 100, 150),
      Sample(3, 3.5, 100.0, {40, 50}, 400, 500),
  };
  const json j = CpuMemoryKeys(samples);
  EXPECT_DOUBLE_EQ(j["Total CPU Usage"].get<double>(), 2.5 / 3 * 100);
  EXPECT_DOUBLE_EQ(j["cpu_percent_mean"].get<double>(), 2.5 / 3 * 100);
  EXPECT_DOUBLE_EQ(j["cpu_percent_max"].get<double>(), 100.0);  // not the baseline's 999
  EXPECT_DOUBLE_EQ(j["cpu_seconds"].get<double>(), 3.5);
  ASSERT_EQ(j["Total CPU usage per core"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["Total CPU usage per core"][0].get<double>(), (10 * 1 + 40 * 2) / 3.0);
  EXPECT_DOUBLE_EQ(j["Total CPU usage per core"][1].get<double>(), (20 * 1 + 50 * 2) / 3.0);
  EXPECT_DOUBLE_EQ(j["rss_bytes_mean"].get<double>(), (100 * 1 + 400 * 2) / 3.0);
  EXPECT_EQ(j["peak_rss_bytes"], 500);
  EXPECT_EQ(j["Total Memory used"], 500);
}

TEST(CpuMemoryKeysTest, OneSampleHasNoIntervalAndNoSamplesNoKeys) {
  const json one = CpuMemoryKeys({Sample(0, 2.0, 0.0, {5}, 70, 80)});
  EXPECT_DOUBLE_EQ(one["Total CPU Usage"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(one["rss_bytes_mean"].get<double>(), 70.0);
  EXPECT_DOUBLE_EQ(one["Total CPU usage per core"][0].get<double>(), 0.0);
  const json none = CpuMemoryKeys({});
  EXPECT_TRUE(none.is_object());
  EXPECT_TRUE(none.empty());
}

TEST(NetworkKeysTest, LoopbackAndExternalApart) {
  std::vector<InterfaceTotals> totals(2);
  totals[0] = {"lo", true, 4000, 4000, 40, 40};
  totals[1] = {"eth0", false, 1000, 300, 10, 3};
  const json j = NetworkKeys(totals);
  EXPECT_EQ(j["Total bytes sent over network"], 4300);
  EXPECT_EQ(j["Total bytes received over network"], 5000);
  EXPECT_EQ(j["network_loopback_bytes_sent"], 4000);
  EXPECT_EQ(j["network_loopback_bytes_received"], 4000);
  EXPECT_EQ(j["network_external_bytes_sent"], 300);
  EXPECT_EQ(j["network_external_bytes_received"], 1000);
  ASSERT_EQ(j["network_interfaces"].size(), 2u);
  EXPECT_EQ(j["network_interfaces"][1], json({{"name", "eth0"},
                                              {"loopback", false},
                                              {"rx_bytes", 1000},
                                              {"tx_bytes", 300},
                                              {"rx_packets", 10},
                                              {"tx_packets", 3},
                                              {"rx_errors", 0},
                                              {"tx_errors", 0},
                                              {"rx_drops", 0},
                                              {"tx_drops", 0}}));

  const json none = NetworkKeys({});
  EXPECT_EQ(none["Total bytes sent over network"], 0);
  EXPECT_EQ(none["network_external_bytes_received"], 0);
  EXPECT_TRUE(none["network_interfaces"].is_array());
  EXPECT_TRUE(none["network_interfaces"].empty());
}

TEST(TrafficKeysTest, PerMethodPerPeerAndTotals) {
  const std::vector<RpcTrafficPoint> traffic = {
      {"ps-0", "Pull", 2, 20, 2000},
      {"ps-0", "PushPull", 10, 5000, 5000},
      {"chief-0", "Heartbeat", 3, 30, 12},
  };
  const json j = TrafficKeys(traffic);
  EXPECT_EQ(j["rpc_traffic"].size(), 3u);
  json row = j["rpc_traffic"][2];
  row.erase("sent_size_histogram");
  row.erase("received_size_histogram");
  EXPECT_EQ(row, json({{"peer", "chief-0"},
                       {"method", "Heartbeat"},
                       {"rpcs", 3},
                       {"bytes_sent", 30},
                       {"bytes_received", 12}}));
  // One row per peer, sorted by peer.
  ASSERT_EQ(j["peer_traffic"].size(), 2u);
  EXPECT_EQ(j["peer_traffic"][0]["peer"], "chief-0");
  EXPECT_EQ(j["peer_traffic"][1],
            json({{"peer", "ps-0"}, {"rpcs", 12}, {"bytes_sent", 5020}, {"bytes_received", 7000}}));
  EXPECT_EQ(j["app_bytes_sent"], 5050);
  EXPECT_EQ(j["app_bytes_received"], 7012);
  EXPECT_EQ(j["rpcs"], 15);

  const json none = TrafficKeys({});
  EXPECT_EQ(none["rpcs"], 0);
  EXPECT_TRUE(none["peer_traffic"].empty());
}

TEST(HistogramTest, Log2BucketsFromTheFirstUpperBound) {
  EXPECT_EQ(Log2Bucket(0, 64, 22), 0);
  EXPECT_EQ(Log2Bucket(63.9, 64, 22), 0);
  EXPECT_EQ(Log2Bucket(64, 64, 22), 1);
  EXPECT_EQ(Log2Bucket(127, 64, 22), 1);
  EXPECT_EQ(Log2Bucket(128, 64, 22), 2);
  EXPECT_EQ(Log2Bucket(1e12, 64, 22), 21);  // the open last bucket
  EXPECT_EQ(Log2Bucket(std::nan(""), 64, 22), 0);
  const json h = HistogramJson(std::vector<int64_t>{1, 2, 3}, 64);
  EXPECT_EQ(h, json({{"upper", {64.0, 128.0, nullptr}}, {"counts", {1, 2, 3}}}));
}

// The OSU talk's payload distribution: every RPC counted by its size, per peer and method and
// per direction.
TEST(TrafficKeysTest, EachRpcsPayloadSizeIsCountedPerPeerAndMethod) {
  TrafficCounters counters;
  counters.Add("ps-0", "PushPull", 10, 3 << 20);
  counters.Add("ps-0", "PushPull", 100, 3 << 20);
  counters.Add("ps-0", "PushPull", 100, uint64_t{1} << 40);
  counters.Add("ps-0", "Pull", 70, 70);
  const json j = TrafficKeys(counters.Snapshot());
  ASSERT_EQ(j["rpc_traffic"].size(), 2u);
  const json& push_pull = j["rpc_traffic"][1];
  ASSERT_EQ(push_pull["method"], "PushPull");
  std::vector<int64_t> sent(kPayloadBuckets, 0), received(kPayloadBuckets, 0);
  sent[0] = 1;                        // 10 B
  sent[1] = 2;                        // 100 B: [64, 128)
  received[16] = 2;                   // 3 MiB: [2 MiB, 4 MiB)
  received[kPayloadBuckets - 1] = 1;  // 1 TiB: the open last bucket
  EXPECT_EQ(push_pull["sent_size_histogram"]["counts"], json(sent));
  EXPECT_EQ(push_pull["received_size_histogram"]["counts"], json(received));
  EXPECT_EQ(push_pull["sent_size_histogram"]["upper"][16], 4194304.0);
  EXPECT_TRUE(push_pull["sent_size_histogram"]["upper"][kPayloadBuckets - 1].is_null());
}

TEST(StepKeysTest, SteadyStateLeavesOutTheWarmUpSteps) {
  // 20 slow warm-up steps (100 ms), then 5 steady ones (10 ms, 20 ms for the last).
  std::vector<StepRecord> steps;
  for (int i = 1; i <= kWarmupSteps; ++i) steps.push_back(Step(i, 100.0));
  for (int i = 1; i <= 4; ++i) steps.push_back(Step(kWarmupSteps + i, 10.0));
  steps.push_back(Step(kWarmupSteps + 5, 20.0));
  const json j = StepKeys(steps);
  EXPECT_EQ(j["profiled_steps"], kWarmupSteps + 5);  // every recorded step
  EXPECT_DOUBLE_EQ(j["examples_per_sec_within_steps"].get<double>(), 500 * 1000.0 / 60.0);
  EXPECT_DOUBLE_EQ(j["examples_per_sec_of_median_step"].get<double>(), 10000.0);
  // The steady steps by time: 10 ms in [8, 16), 20 ms in [16, 32); the warm-up left out.
  std::vector<int64_t> times(kStepTimeBuckets, 0);
  times[6] = 4;
  times[7] = 1;
  EXPECT_EQ(j["step_time_histogram_ms"]["counts"], json(times));
  EXPECT_EQ(j["step_time_histogram_ms"]["upper"][6], 16.0);
  EXPECT_DOUBLE_EQ(j["step_phase_p50_ms"]["backward"].get<double>(), 3 * 10.0 / 8);
  EXPECT_DOUBLE_EQ(j["step_phase_mean_ms"]["forward"].get<double>(), 2 * 12.0 / 8);
  EXPECT_DOUBLE_EQ(j["step_phase_mean_ms"]["pull"].get<double>(), 0.0);
  EXPECT_EQ(Keys(j["step_phase_mean_ms"]),
            std::set<std::string>({"data", "pull", "forward", "backward", "push", "sync_wait"}));
  // Step-time percentiles are the worker's run statistics, not the profiler's.
  EXPECT_FALSE(j.contains("step_time_p50_ms"));
  EXPECT_FALSE(j.contains("step_time_p99_ms"));
}

// The communication keys: the waits and the time in flight over the steady state, and the
// share of the time in flight that was not waited through.
TEST(StepKeysTest, CommunicationWaitsAgainstTheTimeInFlight) {
  std::vector<StepRecord> steps;
  for (int i = 1; i <= 4; ++i) {
    StepRecord r = Step(i, 10.0);
    r.comm_wait_ms = i == 4 ? 5.0 : 1.0;  // mean 2, median 1
    r.inflight_ms = 8.0;
    steps.push_back(r);
  }
  const json j = StepKeys(steps);
  EXPECT_DOUBLE_EQ(j["comm_wait_p50_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["comm_wait_mean_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["comm_inflight_mean_ms"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(j["comm_hidden_fraction"].get<double>(), 0.75);
  // Waiting longer than the transfers were in flight hides nothing; nothing in flight is 0.
  for (StepRecord& r : steps) r.comm_wait_ms = 20.0;
  EXPECT_DOUBLE_EQ(StepKeys(steps)["comm_hidden_fraction"].get<double>(), 0.0);
  const json single = StepKeys({Step(1, 10.0)});
  EXPECT_DOUBLE_EQ(single["comm_hidden_fraction"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(single["comm_inflight_mean_ms"].get<double>(), 0.0);
}

TEST(StepKeysTest, ShortRunsKeepEveryStep) {
  std::vector<StepRecord> steps = {Step(1, 100.0), Step(2, 10.0), Step(3, 10.0)};
  const json j = StepKeys(steps);
  EXPECT_EQ(j["profiled_steps"], 3);
  EXPECT_DOUBLE_EQ(j["examples_per_sec_within_steps"].get<double>(), 300 * 1000.0 / 120.0);
  EXPECT_DOUBLE_EQ(j["step_phase_mean_ms"]["data"].get<double>(), 120.0 / 8 / 3);
}

TEST(StepKeysTest, ZeroWallTimeHasNoRateAndNoStepsNoKeys) {
  const json j = StepKeys({Step(1, 0.0), Step(2, 10.0)});
  EXPECT_DOUBLE_EQ(j["examples_per_sec_of_median_step"].get<double>(), 10000.0);
  EXPECT_DOUBLE_EQ(j["examples_per_sec_within_steps"].get<double>(), 200 * 1000.0 / 10.0);
  EXPECT_TRUE(StepKeys({}).empty());
  EXPECT_DOUBLE_EQ(StepKeys({Step(1, 0.0)})["examples_per_sec_within_steps"].get<double>(), 0.0);
}

TEST(PsKeysTest, TotalsOfTheLastRecord) {
  PsRecord a, b;
  a.apply_ms = 1.5;
  a.wait_ms = 2.5;
  b.apply_ms = 10.0;
  b.wait_ms = 20.0;
  const json j = PsKeys({a, b});
  EXPECT_DOUBLE_EQ(j["apply_ms_total"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["request_wait_ms_total"].get<double>(), 20.0);
  EXPECT_TRUE(PsKeys({}).empty());
}

TEST(DownsampleTest, EvenlySpreadAndAlwaysTheLast) {
  EXPECT_TRUE(Downsample(0, 4).empty());
  EXPECT_EQ(Downsample(3, 4), std::vector<size_t>({0, 1, 2}));
  EXPECT_EQ(Downsample(10, 4), std::vector<size_t>({0, 3, 6, 9}));
  EXPECT_EQ(Downsample(11, 4), std::vector<size_t>({0, 3, 6, 9, 10}));
}

TEST(SeriesKeysTest, SamplesPadAnInterfaceThatAppearedLate) {
  std::vector<SystemSample> samples = {Sample(0, 0, 10, {}, 100, 100),
                                       Sample(1, 0, 20, {}, 200, 200),
                                       Sample(2, 0, 30, {}, 300, 300)};
  samples[0].interfaces = {Nic("lo", 1, 2)};
  samples[1].interfaces = {Nic("lo", 3, 4), Nic("eth0", 5, 6)};
  samples[2].interfaces = {Nic("lo", 7, 8)};  // eth0 vanished
  const json j = SeriesKeys(samples, {});
  EXPECT_FALSE(j.contains("steps"));
  const json& s = j["samples"];
  EXPECT_EQ(s["cpu_percent"], json({10.0, 20.0, 30.0}));
  EXPECT_EQ(s["rss_bytes"], json({100.0, 200.0, 300.0}));
  EXPECT_DOUBLE_EQ(s["unix_s"][1].get<double>(), 1'700'000'001.0);
  EXPECT_EQ(s["network"]["lo"]["tx_bytes_per_sec"], json({2.0, 4.0, 8.0}));
  EXPECT_EQ(s["network"]["eth0"]["rx_bytes_per_sec"], json({0.0, 5.0, 0.0}));
  EXPECT_TRUE(s.contains("host_mem_used_bytes"));
  EXPECT_TRUE(s.contains("host_load1"));
}

TEST(SeriesKeysTest, StepsInWindowsOfConsecutiveSteps) {
  std::vector<StepRecord> steps;
  for (int i = 1; i <= 5; ++i) steps.push_back(Step(i, 10.0 * i));
  const json j = SeriesKeys({}, steps, /*max_points=*/2);  // windows of 3: steps 1-3, 4-5
  EXPECT_FALSE(j.contains("samples"));
  const json& s = j["steps"];
  EXPECT_EQ(s["global_step"], json({30.0, 50.0}));
  EXPECT_EQ(s["loss"], json({2.0, 4.5}));
  EXPECT_DOUBLE_EQ(s["examples_per_sec"][0].get<double>(), 300 * 1000.0 / 60.0);
  EXPECT_DOUBLE_EQ(s["examples_per_sec"][1].get<double>(), 200 * 1000.0 / 90.0);
  EXPECT_DOUBLE_EQ(s["unix_s"][1].get<double>(), 1'700'000'005.0 + 0.05);
  EXPECT_TRUE(SeriesKeys({}, {}).is_null());
}

TEST(SeriesKeysTest, LongRunsAreDownsampled) {
  std::vector<SystemSample> samples;
  for (int i = 0; i < 1000; ++i) samples.push_back(Sample(i, 0, 0, {}, 0, 0));
  std::vector<StepRecord> steps;
  for (int i = 1; i <= 1000; ++i) steps.push_back(Step(i, 1.0));
  const json j = SeriesKeys(samples, steps);
  EXPECT_LE(j["samples"]["unix_s"].size(), kMaxSeriesPoints + 1);
  EXPECT_LE(j["steps"]["loss"].size(), kMaxSeriesPoints);
  EXPECT_EQ(j["steps"]["global_step"].back(), 10000.0);  // the last window ends the run
}

// The documented key set (docs/profiler.md), nothing more: a key added or dropped here must
// be added to or dropped from the docs too.
TEST(SummaryKeysTest, EveryDocumentedKeyAndNoOther) {
  SummaryInput in;
  in.job_seconds = 12.5;
  in.system_information = {{"System", "Linux"}};
  const std::vector<SystemSample> samples = {Sample(0, 0, 0, {1}, 1, 1),
                                             Sample(1, 1, 100, {2}, 2, 2)};
  const std::vector<StepRecord> steps = {Step(1, 10.0)};
  const std::vector<PsRecord> ps(1);
  in.samples = samples;
  in.steps = steps;
  in.ps_records = ps;
  in.trace_steps_dropped = 3;
  in.trace_rpc_spans_dropped = 4;
  const json j = SummaryKeys(in);
  EXPECT_EQ(Keys(j), std::set<std::string>({"Job Execution Time",
                                            "System Information",
                                            "Total CPU Usage",
                                            "Total CPU usage per core",
                                            "Total Memory used",
                                            "Total bytes sent over network",
                                            "Total bytes received over network",
                                            "cpu_percent_mean",
                                            "cpu_percent_max",
                                            "cpu_seconds",
                                            "rss_bytes_mean",
                                            "peak_rss_bytes",
                                            "network_interfaces",
                                            "network_loopback_bytes_sent",
                                            "network_loopback_bytes_received",
                                            "network_external_bytes_sent",
                                            "network_external_bytes_received",
                                            "rpc_traffic",
                                            "peer_traffic",
                                            "app_bytes_sent",
                                            "app_bytes_received",
                                            "rpcs",
                                            "profiled_steps",
                                            "examples_per_sec_within_steps",
                                            "examples_per_sec_of_median_step",
                                            "step_phase_p50_ms",
                                            "step_phase_mean_ms",
                                            "step_time_histogram_ms",
                                            "comm_wait_p50_ms",
                                            "comm_wait_mean_ms",
                                            "comm_inflight_mean_ms",
                                            "comm_hidden_fraction",
                                            "apply_ms_total",
                                            "request_wait_ms_total",
                                            "trace_steps_dropped",
                                            "trace_rpc_spans_dropped",
                                            "cpu_user_percent_mean",
                                            "cpu_system_percent_mean",
                                            "context_switches",
                                            "io_read_bytes_total",
                                            "io_write_bytes_total",
                                            "thread_cpu",
                                            "host_system",
                                            "gpu_usage",
                                            "device_copies",
                                            "series"}));
  EXPECT_DOUBLE_EQ(j["Job Execution Time"].get<double>(), 12.5);
  EXPECT_EQ(j["System Information"]["System"], "Linux");
  EXPECT_EQ(j["trace_steps_dropped"], 3);
  EXPECT_EQ(j["trace_rpc_spans_dropped"], 4);
}

TEST(BreadthKeysTest, MeansPeaksAndTotals) {
  std::vector<SystemSample> samples = {Sample(0, 0, 0, {}, 1, 1), Sample(1, 0, 0, {}, 1, 1),
                                       Sample(4, 0, 0, {}, 1, 1)};
  // Interval 1 (1 s) and interval 2 (3 s): means weight 1:3.
  samples[1].cpu_user_percent = 40;
  samples[2].cpu_user_percent = 80;
  samples[1].host.cpu_iowait_percent = 8;
  samples[1].host.load1 = 3;
  samples[2].host.load1 = 1;
  for (SystemSample& s : samples) s.host.mem_total_bytes = 1000;
  samples[0].host.mem_used_bytes = 100;
  samples[1].host.mem_used_bytes = 500;
  samples[2].host.mem_used_bytes = 300;
  samples[2].host.tcp_out_segs = 1000;
  samples[2].host.tcp_retrans_segs = 10;
  samples[2].host.disk_write_bytes = 4096;
  samples[2].voluntary_switches = 80;
  samples[2].io_read_bytes = 7;
  samples[1].threads = {{"pool", 2, 100, 20}};
  samples[2].threads = {{"pool", 4, 20, 0}, {"late", 1, 8, 0}};
  samples[1].gpus = {{0, 50, 10, 100, 200}};
  samples[2].gpus = {{0, 100, 30, 100, 300}};
  const json j = BreadthKeys(samples);
  EXPECT_DOUBLE_EQ(j["cpu_user_percent_mean"].get<double>(), 70.0);
  EXPECT_EQ(j["context_switches"]["voluntary_total"], 80);
  EXPECT_DOUBLE_EQ(j["context_switches"]["voluntary_per_sec_mean"].get<double>(), 20.0);
  EXPECT_EQ(j["io_read_bytes_total"], 7);
  const json& h = j["host_system"];
  EXPECT_DOUBLE_EQ(h["cpu_iowait_percent_mean"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(h["load1_mean"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(h["load1_max"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(h["mem_used_bytes_mean"].get<double>(), 350.0);
  EXPECT_DOUBLE_EQ(h["mem_used_bytes_peak"].get<double>(), 500.0);
  EXPECT_EQ(h["mem_total_bytes"], 1000);
  EXPECT_EQ(h["tcp_retrans_segs_total"], 10);
  EXPECT_DOUBLE_EQ(h["tcp_retrans_percent"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(h["disk_write_bytes_per_sec_mean"].get<double>(), 1024.0);
  ASSERT_EQ(j["thread_cpu"].size(), 2u);
  const json& late = j["thread_cpu"][0];  // by name
  EXPECT_EQ(late["name"], "late");
  EXPECT_DOUBLE_EQ(late["cpu_percent_mean"].get<double>(), 6.0);  // 0 for 1 s, 8 for 3 s
  const json& pool = j["thread_cpu"][1];
  EXPECT_EQ(pool["threads_max"], 4);
  EXPECT_DOUBLE_EQ(pool["user_percent_mean"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(pool["system_percent_mean"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(pool["cpu_percent_max"].get<double>(), 120.0);
  ASSERT_EQ(j["gpu_usage"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["gpu_usage"][0]["utilization_percent_mean"].get<double>(), 75.0);
  EXPECT_EQ(j["gpu_usage"][0]["memory_used_bytes_peak"], 30);
  EXPECT_DOUBLE_EQ(j["gpu_usage"][0]["power_watts_mean"].get<double>(), 250.0);
  EXPECT_TRUE(BreadthKeys({}).empty());
}

TEST(SummaryKeysTest, NothingRecordedStillHasTheTotals) {
  const json j = SummaryKeys(SummaryInput{});
  EXPECT_FALSE(j.contains("Total CPU Usage"));
  EXPECT_FALSE(j.contains("profiled_steps"));
  EXPECT_FALSE(j.contains("apply_ms_total"));
  EXPECT_EQ(j["Total bytes sent over network"], 0);
  EXPECT_EQ(j["rpcs"], 0);
  EXPECT_TRUE(j["series"].is_null());
}

TEST(MergeNewKeysTest, TheCallersKeysAreKeptAndReported) {
  json summary = {{"examples_per_sec", 1.0}, {"rpcs", 7}};
  const std::vector<std::string> both =
      MergeNewKeys({{"rpcs", 99}, {"app_bytes_sent", 5}}, &summary);
  EXPECT_EQ(both, std::vector<std::string>({"rpcs"}));
  EXPECT_EQ(summary["rpcs"], 7);
  EXPECT_EQ(summary["app_bytes_sent"], 5);
  EXPECT_EQ(summary["examples_per_sec"], 1.0);

  json empty;
  EXPECT_TRUE(MergeNewKeys({{"profile", "off"}}, &empty).empty());
  EXPECT_EQ(empty, json({{"profile", "off"}}));
}

}  // namespace
}  // namespace fulcrum::profiler
