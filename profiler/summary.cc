#include "profiler/summary.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "base/stats.h"

namespace fulcrum::profiler {
namespace {

using nlohmann::json;

json SampleSeries(absl::Span<const SystemSample> samples, size_t max_points) {
  std::vector<double> t, cpu, rss;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> net;
  const std::vector<size_t> idx = Downsample(samples.size(), max_points);
  for (size_t k = 0; k < idx.size(); ++k) {
    const SystemSample& x = samples[idx[k]];
    t.push_back(static_cast<double>(x.unix_micros) * 1e-6);
    cpu.push_back(x.cpu_percent);
    rss.push_back(static_cast<double>(x.rss_bytes));
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
  return {{"unix_s", t}, {"cpu_percent", cpu}, {"rss_bytes", rss}, {"network", n}};
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

}  // namespace

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
                      {"tx_packets", t.tx_packets}});
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

json TrafficKeys(absl::Span<const RpcTrafficPoint> traffic) {
  json peers = json::array();
  std::map<std::string, std::array<uint64_t, 3>> by_peer;  // rpcs, sent, received
  uint64_t app_sent = 0, app_received = 0, rpcs = 0;
  for (const RpcTrafficPoint& p : traffic) {
    peers.push_back({{"peer", p.peer},
                     {"method", p.method},
                     {"rpcs", p.rpcs},
                     {"bytes_sent", p.bytes_sent},
                     {"bytes_received", p.bytes_received}});
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
  std::vector<double> rate;
  std::map<std::string, std::vector<double>> phase;
  double examples = 0.0, ms = 0.0;
  for (size_t i = SteadyStateBegin(steps.size()); i < steps.size(); ++i) {
    const StepRecord& r = steps[i];
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
  return j;
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
       {CpuMemoryKeys(input.samples), NetworkKeys(input.interfaces), TrafficKeys(input.traffic),
        StepKeys(input.steps), PsKeys(input.ps_records)}) {
    j.update(part);
  }
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
