#include "profiler/summary.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "base/stats.h"
#include "profiler/histogram.h"

namespace fulcrum::profiler {
namespace {

using nlohmann::json;

json SampleSeries(absl::Span<const SystemSample> samples, size_t max_points) {
  std::vector<double> t, cpu, rss, host_cpu, host_mem, load1;
  std::vector<std::vector<double>> cores;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> net;
  const std::vector<size_t> idx = Downsample(samples.size(), max_points);
  for (size_t k = 0; k < idx.size(); ++k) {
    const SystemSample& x = samples[idx[k]];
    t.push_back(static_cast<double>(x.unix_micros) * 1e-6);
    cpu.push_back(x.cpu_percent);
    rss.push_back(static_cast<double>(x.rss_bytes));
    host_cpu.push_back(100.0 - x.host.cpu_idle_percent - x.host.cpu_iowait_percent);
    host_mem.push_back(static_cast<double>(x.host.mem_used_bytes));
    load1.push_back(x.host.load1);
    if (cores.size() < x.core_percent.size()) cores.resize(x.core_percent.size());
    for (size_t c = 0; c < cores.size(); ++c) {
      cores[c].resize(k, 0.0);  // a core that came online late reads 0 before
      cores[c].push_back(c < x.core_percent.size() ? x.core_percent[c] : 0.0);
    }
    for (const InterfaceSample& i : x.interfaces) {
      auto& [rxs, txs] = net[i.name];
      // An interface that appeared late has no points before: pad with zeros.
      rxs.resize(k, 0.0);
      txs.resize(k, 0.0);
      rxs.push_back(i.rx_bytes_per_sec);
      txs.push_back(i.tx_bytes_per_sec);
    }
  }
  json n;
  for (auto& [name, v] : net) {
    v.first.resize(t.size(), 0.0);
    v.second.resize(t.size(), 0.0);
    n[name] = {{"rx_bytes_per_sec", v.first}, {"tx_bytes_per_sec", v.second}};
  }
  return {{"unix_s", t},
          {"cpu_percent", cpu},
          {"rss_bytes", rss},
          {"network", n},
          {"core_percent", cores},
          {"host_cpu_busy_percent", host_cpu},
          {"host_mem_used_bytes", host_mem},
          {"host_load1", load1}};
}

// Windows of consecutive steps: examples/sec over the window, mean loss.
json StepSeries(absl::Span<const StepRecord> steps, size_t max_points) {
  const size_t w = (steps.size() + max_points - 1) / max_points;
  std::vector<double> t, rate, loss, gstep;
  for (size_t i = 0; i < steps.size(); i += w) {
    const size_t end = std::min(steps.size(), i + w);
    double ex = 0.0, ms = 0.0, l = 0.0;
    for (size_t k = i; k < end; ++k) {
      ex += static_cast<double>(steps[k].examples);
      ms += steps[k].wall_ms;
      l += steps[k].loss;
    }
    const StepRecord& e = steps[end - 1];
    t.push_back(static_cast<double>(e.begin_unix_us) * 1e-6 + e.wall_ms * 1e-3);
    rate.push_back(ms > 0 ? ex * 1000.0 / ms : 0.0);
    loss.push_back(l / static_cast<double>(end - i));
    gstep.push_back(static_cast<double>(e.global_step));
  }
  return {{"unix_s", t}, {"examples_per_sec", rate}, {"loss", loss}, {"global_step", gstep}};
}

// The mean of `get` over the sampled time, each sample standing for the interval ending at it
// (the baseline sample has none); 0 for fewer than two samples.
template <typename Get>
double IntervalMean(absl::Span<const SystemSample> samples, Get get) {
  double sum = 0.0, weight = 0.0;
  for (size_t i = 1; i < samples.size(); ++i) {
    const double dt = samples[i].seconds - samples[i - 1].seconds;
    sum += static_cast<double>(get(samples[i])) * dt;
    weight += dt;
  }
  return weight > 0 ? sum / weight : 0.0;
}

// The largest of `get` over the samples after the baseline (rates are 0 there); 0 for none.
template <typename Get>
double IntervalMax(absl::Span<const SystemSample> samples, Get get) {
  double best = 0.0;
  for (size_t i = 1; i < samples.size(); ++i)
    best = std::max(best, static_cast<double>(get(samples[i])));
  return best;
}

// The smallest of a level (memory) over every sample.
template <typename Get>
double LevelMin(absl::Span<const SystemSample> samples, Get get) {
  double best = static_cast<double>(get(samples.front()));
  for (const SystemSample& s : samples) best = std::min(best, static_cast<double>(get(s)));
  return best;
}

json HostCpuMemoryKeys(absl::Span<const SystemSample> samples) {
  const HostSample& last = samples.back().host;
  auto mean = [&](double HostSample::*f) {
    return IntervalMean(samples, [f](const SystemSample& s) { return s.host.*f; });
  };
  auto level_mean = [&](int64_t HostSample::*f) {
    return IntervalMean(samples, [f](const SystemSample& s) { return s.host.*f; });
  };
  json j;
  j["cpu_user_percent_mean"] = mean(&HostSample::cpu_user_percent);
  j["cpu_system_percent_mean"] = mean(&HostSample::cpu_system_percent);
  j["cpu_iowait_percent_mean"] = mean(&HostSample::cpu_iowait_percent);
  j["cpu_idle_percent_mean"] = mean(&HostSample::cpu_idle_percent);
  j["mem_total_bytes"] = last.mem_total_bytes;
  j["mem_used_bytes_mean"] = level_mean(&HostSample::mem_used_bytes);
  j["mem_used_bytes_peak"] =
      -LevelMin(samples, [](const SystemSample& s) { return -s.host.mem_used_bytes; });
  j["mem_free_bytes_min"] =
      LevelMin(samples, [](const SystemSample& s) { return s.host.mem_free_bytes; });
  j["mem_available_bytes_min"] =
      LevelMin(samples, [](const SystemSample& s) { return s.host.mem_available_bytes; });
  j["mem_cached_bytes_mean"] = level_mean(&HostSample::mem_cached_bytes);
  j["load1_mean"] = mean(&HostSample::load1);
  j["load1_max"] = IntervalMax(samples, [](const SystemSample& s) { return s.host.load1; });
  j["load5_last"] = last.load5;
  j["load15_last"] = last.load15;
  return j;
}

json HostCounterKeys(absl::Span<const SystemSample> samples) {
  const HostSample& last = samples.back().host;
  const double span = samples.back().seconds - samples.front().seconds;
  auto per_sec = [span](uint64_t total) {
    return span > 0 ? static_cast<double>(total) / span : 0.0;
  };
  json j;
  j["context_switches_total"] = last.context_switches;
  j["context_switches_per_sec_mean"] = per_sec(last.context_switches);
  j["tcp_in_segs_total"] = last.tcp_in_segs;
  j["tcp_out_segs_total"] = last.tcp_out_segs;
  j["tcp_retrans_segs_total"] = last.tcp_retrans_segs;
  // sar -n ETCP's retrans share: retransmitted of all segments sent.
  j["tcp_retrans_percent"] = last.tcp_out_segs > 0
                                 ? 100.0 * static_cast<double>(last.tcp_retrans_segs) /
                                       static_cast<double>(last.tcp_out_segs)
                                 : 0.0;
  j["disk_read_bytes_total"] = last.disk_read_bytes;
  j["disk_write_bytes_total"] = last.disk_write_bytes;
  j["disk_read_bytes_per_sec_mean"] = per_sec(last.disk_read_bytes);
  j["disk_write_bytes_per_sec_mean"] = per_sec(last.disk_write_bytes);
  return j;
}

// Per thread name: mean and peak CPU over the sampled time (a name absent from a sample
// counts 0 there) and the most threads seen with it.
json ThreadKeys(absl::Span<const SystemSample> samples) {
  std::map<std::string, std::array<double, 4>> acc;  // user*dt, system*dt, max cpu, max count
  double weight = 0.0;
  for (size_t i = 1; i < samples.size(); ++i) {
    const double dt = samples[i].seconds - samples[i - 1].seconds;
    weight += dt;
    for (const ThreadSample& t : samples[i].threads) {
      auto& a = acc[t.name];
      a[0] += t.user_percent * dt;
      a[1] += t.system_percent * dt;
      a[2] = std::max(a[2], t.cpu_percent());
      a[3] = std::max(a[3], static_cast<double>(t.threads));
    }
  }
  json threads = json::array();
  for (const auto& [name, a] : acc) {
    const double user = weight > 0 ? a[0] / weight : 0.0, system = weight > 0 ? a[1] / weight : 0.0;
    threads.push_back({{"name", name},
                       {"threads_max", static_cast<int64_t>(a[3])},
                       {"user_percent_mean", user},
                       {"system_percent_mean", system},
                       {"cpu_percent_mean", user + system},
                       {"cpu_percent_max", a[2]}});
  }
  return threads;
}

json GpuKeys(absl::Span<const SystemSample> samples) {
  std::map<int, std::array<double, 6>> acc;  // util sum, util max, mem peak, mem total, W sum, n
  for (const SystemSample& s : samples) {
    for (const GpuReading& g : s.gpus) {
      auto& a = acc[g.index];
      a[0] += g.utilization_percent;
      a[1] = std::max(a[1], g.utilization_percent);
      a[2] = std::max(a[2], static_cast<double>(g.memory_used_bytes));
      a[3] = static_cast<double>(g.memory_total_bytes);
      a[4] += g.power_watts;
      a[5] += 1;
    }
  }
  json gpus = json::array();
  for (const auto& [index, a] : acc) {
    gpus.push_back({{"index", index},
                    {"utilization_percent_mean", a[0] / a[5]},
                    {"utilization_percent_max", a[1]},
                    {"memory_used_bytes_peak", static_cast<int64_t>(a[2])},
                    {"memory_total_bytes", static_cast<int64_t>(a[3])},
                    {"power_watts_mean", a[4] / a[5]}});
  }
  return gpus;
}

}  // namespace

json BreadthKeys(absl::Span<const SystemSample> samples) {
  json j = json::object();
  if (samples.empty()) return j;
  const SystemSample& last = samples.back();
  const double span = last.seconds - samples.front().seconds;
  auto per_sec = [span](uint64_t total) {
    return span > 0 ? static_cast<double>(total) / span : 0.0;
  };
  j["cpu_user_percent_mean"] =
      IntervalMean(samples, [](const SystemSample& s) { return s.cpu_user_percent; });
  j["cpu_system_percent_mean"] =
      IntervalMean(samples, [](const SystemSample& s) { return s.cpu_system_percent; });
  j["context_switches"] = {{"voluntary_total", last.voluntary_switches},
                           {"nonvoluntary_total", last.nonvoluntary_switches},
                           {"voluntary_per_sec_mean", per_sec(last.voluntary_switches)},
                           {"nonvoluntary_per_sec_mean", per_sec(last.nonvoluntary_switches)}};
  j["io_read_bytes_total"] = last.io_read_bytes;
  j["io_write_bytes_total"] = last.io_write_bytes;
  j["thread_cpu"] = ThreadKeys(samples);
  json host = HostCpuMemoryKeys(samples);
  host.update(HostCounterKeys(samples));
  j["host_system"] = host;
  j["gpu_usage"] = GpuKeys(samples);
  return j;
}

std::vector<size_t> Downsample(size_t n, size_t max_points) {
  std::vector<size_t> idx;
  if (n == 0 || max_points == 0) return idx;
  const size_t stride = (n + max_points - 1) / max_points;
  for (size_t i = 0; i < n; i += stride) idx.push_back(i);
  if (idx.back() != n - 1) idx.push_back(n - 1);
  return idx;
}

json CpuMemoryKeys(absl::Span<const SystemSample> samples) {
  json j = json::object();
  if (samples.empty()) return j;
  const SystemSample& first = samples.front();
  const SystemSample& last = samples.back();
  const double span = last.seconds - first.seconds;
  const double cpu_mean = span > 0 ? (last.cpu_seconds - first.cpu_seconds) / span * 100.0 : 0.0;
  // Per-core means weight each interval by its length (the first sample has none).
  std::vector<double> core_sum(last.core_percent.size(), 0.0);
  double cpu_max = 0.0, weight = 0.0, rss_sum = 0.0;
  for (size_t i = 1; i < samples.size(); ++i) {
    const double dt = samples[i].seconds - samples[i - 1].seconds;
    for (size_t c = 0; c < core_sum.size() && c < samples[i].core_percent.size(); ++c) {
      core_sum[c] += samples[i].core_percent[c] * dt;
    }
    rss_sum += static_cast<double>(samples[i].rss_bytes) * dt;
    weight += dt;
    cpu_max = std::max(cpu_max, samples[i].cpu_percent);
  }
  std::vector<double> core_mean;
  for (double c : core_sum) core_mean.push_back(weight > 0 ? c / weight : 0.0);
  j["Total CPU Usage"] = cpu_mean;
  j["Total CPU usage per core"] = core_mean;
  j["Total Memory used"] = last.peak_rss_bytes;
  j["cpu_percent_mean"] = cpu_mean;
  j["cpu_percent_max"] = cpu_max;
  j["cpu_seconds"] = last.cpu_seconds;
  j["rss_bytes_mean"] = weight > 0 ? rss_sum / weight : static_cast<double>(last.rss_bytes);
  j["peak_rss_bytes"] = last.peak_rss_bytes;
  return j;
}

json NetworkKeys(absl::Span<const InterfaceTotals> interfaces) {
  uint64_t rx = 0, tx = 0, lo_rx = 0, lo_tx = 0;
  json ifaces = json::array();
  for (const InterfaceTotals& t : interfaces) {
    rx += t.rx_bytes;
    tx += t.tx_bytes;
    if (t.loopback) {
      lo_rx += t.rx_bytes;
      lo_tx += t.tx_bytes;
    }
    ifaces.push_back({{"name", t.name},
                      {"loopback", t.loopback},
                      {"rx_bytes", t.rx_bytes},
                      {"tx_bytes", t.tx_bytes},
                      {"rx_packets", t.rx_packets},
                      {"tx_packets", t.tx_packets},
                      {"rx_errors", t.rx_errors},
                      {"tx_errors", t.tx_errors},
                      {"rx_drops", t.rx_drops},
                      {"tx_drops", t.tx_drops}});
  }
  json j;
  j["Total bytes sent over network"] = tx;
  j["Total bytes received over network"] = rx;
  j["network_interfaces"] = ifaces;
  j["network_loopback_bytes_sent"] = lo_tx;
  j["network_loopback_bytes_received"] = lo_rx;
  j["network_external_bytes_sent"] = tx - lo_tx;
  j["network_external_bytes_received"] = rx - lo_rx;
  return j;
}

json SocketTotalsJson(const SocketTotals& t) {
  return {{"sockets", t.sockets},
          {"bytes_sent", t.bytes_sent},
          {"bytes_received", t.bytes_received},
          {"segs_out", t.segs_out},
          {"segs_in", t.segs_in},
          {"segs_out_ipv6", t.segs_out_ipv6},
          {"segs_in_ipv6", t.segs_in_ipv6},
          {"retransmits", t.retransmits}};
}

// The process's TCP connections (the layer between the application's bytes and the
// interfaces'), per path and one by one, at the last sample; nothing when the sampler did not
// read them.
json TcpKeys(absl::Span<const SystemSample> samples,
             absl::Span<const ConnectionTotals> connections) {
  json j = json::object();
  if (samples.empty() || !samples.back().has_tcp) return j;
  const SystemSample& last = samples.back();
  j["tcp_sockets"] = {{"loopback", SocketTotalsJson(last.tcp_loopback)},
                      {"external", SocketTotalsJson(last.tcp_external)}};
  j["tcp_retransmits"] = last.tcp_loopback.retransmits + last.tcp_external.retransmits;
  json list = json::array();
  for (const ConnectionTotals& c : connections) {
    json row = SocketTotalsJson(c.figures);
    row.erase("sockets");
    row["local"] = c.local;
    row["remote"] = c.remote;
    row["loopback"] = c.loopback;
    row["open"] = c.open;
    list.push_back(std::move(row));
  }
  j["tcp_connections"] = std::move(list);
  return j;
}

json TrafficKeys(absl::Span<const RpcTrafficPoint> traffic) {
  json peers = json::array();
  std::map<std::string, std::array<uint64_t, 3>> by_peer;  // rpcs, sent, received
  uint64_t app_sent = 0, app_received = 0, rpcs = 0;
  for (const RpcTrafficPoint& p : traffic) {
    peers.push_back(
        {{"peer", p.peer},
         {"method", p.method},
         {"rpcs", p.rpcs},
         {"bytes_sent", p.bytes_sent},
         {"bytes_received", p.bytes_received},
         {"sent_size_histogram", HistogramJson(p.sent_sizes, kPayloadFirstUpper)},
         {"received_size_histogram", HistogramJson(p.received_sizes, kPayloadFirstUpper)}});
    auto& agg = by_peer[p.peer];
    agg[0] += p.rpcs;
    agg[1] += p.bytes_sent;
    agg[2] += p.bytes_received;
    app_sent += p.bytes_sent;
    app_received += p.bytes_received;
    rpcs += p.rpcs;
  }
  json per_peer = json::array();
  for (const auto& [peer, agg] : by_peer) {
    per_peer.push_back(
        {{"peer", peer}, {"rpcs", agg[0]}, {"bytes_sent", agg[1]}, {"bytes_received", agg[2]}});
  }
  json j;
  j["rpc_traffic"] = peers;
  j["peer_traffic"] = per_peer;
  j["app_bytes_sent"] = app_sent;
  j["app_bytes_received"] = app_received;
  j["rpcs"] = rpcs;
  return j;
}

json StepKeys(absl::Span<const StepRecord> steps) {
  json j = json::object();
  if (steps.empty()) return j;
  std::vector<double> rate, comm_wait, inflight;
  std::map<std::string, std::vector<double>> phase;
  std::vector<int64_t> step_times(kStepTimeBuckets, 0);
  double examples = 0.0, ms = 0.0;
  for (size_t i = SteadyStateBegin(steps.size()); i < steps.size(); ++i) {
    const StepRecord& r = steps[i];
    ++step_times[static_cast<size_t>(
        Log2Bucket(r.wall_ms, kStepTimeFirstUpperMs, kStepTimeBuckets))];
    comm_wait.push_back(r.comm_wait_ms);
    inflight.push_back(r.inflight_ms);
    if (r.wall_ms > 0) rate.push_back(static_cast<double>(r.examples) * 1000.0 / r.wall_ms);
    examples += static_cast<double>(r.examples);
    ms += r.wall_ms;
    phase["data"].push_back(r.data_ms);
    phase["pull"].push_back(r.pull_ms);
    phase["forward"].push_back(r.forward_ms);
    phase["backward"].push_back(r.backward_ms);
    phase["push"].push_back(r.push_ms);
    phase["sync_wait"].push_back(r.sync_wait_ms);
  }
  j["profiled_steps"] = steps.size();
  j["examples_per_sec_within_steps"] = ms > 0 ? examples * 1000.0 / ms : 0.0;
  j["examples_per_sec_of_median_step"] = Percentile(rate, 0.5);
  json p50, mean;
  for (const auto& [name, v] : phase) {
    p50[name] = Percentile(v, 0.5);
    mean[name] = Mean(v);
  }
  j["step_phase_p50_ms"] = p50;
  j["step_phase_mean_ms"] = mean;
  j["step_time_histogram_ms"] = HistogramJson(step_times, kStepTimeFirstUpperMs);
  j["comm_wait_p50_ms"] = Percentile(comm_wait, 0.5);
  j["comm_wait_mean_ms"] = Mean(comm_wait);
  j["comm_inflight_mean_ms"] = Mean(inflight);
  // The share of the push-pulls' time in flight the training thread did not wait through.
  const double waited = Mean(comm_wait), moved = Mean(inflight);
  j["comm_hidden_fraction"] = moved > 0 ? std::clamp(1.0 - waited / moved, 0.0, 1.0) : 0.0;
  return j;
}

// The copy accounting: totals over every step, and the most any step after the first (the
// warm-up, which allocates the workspace) copied or allocated.
json DeviceCopyKeys(absl::Span<const StepRecord> steps) {
  json total = {
      {"h2d_bytes", 0}, {"h2d_calls", 0}, {"d2h_bytes", 0}, {"d2h_calls", 0}, {"allocations", 0}};
  json most = total;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& r = steps[i];
    const std::pair<const char*, int64_t> fields[] = {{"h2d_bytes", r.h2d_bytes},
                                                      {"h2d_calls", r.h2d_calls},
                                                      {"d2h_bytes", r.d2h_bytes},
                                                      {"d2h_calls", r.d2h_calls},
                                                      {"allocations", r.device_allocs}};
    for (const auto& [key, value] : fields) {
      total[key] = total[key].get<int64_t>() + value;
      if (i > 0) most[key] = std::max(most[key].get<int64_t>(), value);
    }
  }
  return {{"device_copies", {{"total", total}, {"max_per_step_after_first", most}}}};
}

json PsKeys(absl::Span<const PsRecord> records) {
  json j = json::object();
  if (records.empty()) return j;
  j["apply_ms_total"] = records.back().apply_ms;
  j["request_wait_ms_total"] = records.back().wait_ms;
  return j;
}

json SeriesKeys(absl::Span<const SystemSample> samples, absl::Span<const StepRecord> steps,
                size_t max_points) {
  json series;  // null when there is nothing to show
  if (!samples.empty()) series["samples"] = SampleSeries(samples, max_points);
  if (!steps.empty()) series["steps"] = StepSeries(steps, max_points);
  return series;
}

json SummaryKeys(const SummaryInput& input) {
  json j = json::object();
  j["Job Execution Time"] = input.job_seconds;
  j["System Information"] = input.system_information;
  for (const json& part :
       {CpuMemoryKeys(input.samples), BreadthKeys(input.samples), NetworkKeys(input.interfaces),
        TcpKeys(input.samples, input.connections), TrafficKeys(input.traffic),
        StepKeys(input.steps), PsKeys(input.ps_records)}) {
    j.update(part);
  }
  if (!input.steps.empty()) j.update(DeviceCopyKeys(input.steps));
  j["trace_rpc_spans_dropped"] = input.trace_rpc_spans_dropped;
  j["trace_steps_dropped"] = input.trace_steps_dropped;
  j["series"] = SeriesKeys(input.samples, input.steps);
  return j;
}

std::vector<std::string> MergeNewKeys(const json& keys, json* summary) {
  std::vector<std::string> collisions;
  for (const auto& [key, value] : keys.items()) {
    if (summary->contains(key)) {
      collisions.push_back(key);
      continue;
    }
    (*summary)[key] = value;
  }
  return collisions;
}

}  // namespace fulcrum::profiler
