#include "profiler/profiler.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "profiler/chrome_trace.h"
#include "spdlog/spdlog.h"

namespace fulcrum::profiler {
namespace {

namespace fs = std::filesystem;

// Steady-state figures drop the first steps (BENCHMARKING.md: warm-up, first connections).
constexpr size_t kWarmupSteps = 20;
// Bounds on what the trace and the summary's series keep, so a long run's memory and files
// stay small: the trace keeps the first steps and RPCs, the series is downsampled.
constexpr size_t kMaxTraceSteps = 20000;
constexpr size_t kMaxRpcSpans = 100000;
constexpr size_t kMaxSeriesPoints = 400;

// Chrome trace pids keep the tasks of a cluster apart when their traces are merged.
int TracePid(const std::string& job, int index) {
  if (job == "chief") return 1 + index;
  if (job == "ps") return 100 + index;
  return 200 + index;
}

std::string Fixed(double v, int digits = 3) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Indices of at most `max_points` rows spread evenly over [0, n), always the last one.
std::vector<size_t> Downsample(size_t n, size_t max_points) {
  std::vector<size_t> idx;
  if (n == 0) return idx;
  const size_t stride = (n + max_points - 1) / max_points;
  for (size_t i = 0; i < n; i += stride) idx.push_back(i);
  if (idx.back() != n - 1) idx.push_back(n - 1);
  return idx;
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double s = 0.0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

int64_t NowUnixMicros() { return absl::GetCurrentTimeNanos() / 1000; }

void ReportRpc(RpcObserver* observer, const std::string& peer, const char* method,
               int64_t begin_unix_us, const google::protobuf::Message& sent,
               const google::protobuf::Message& received) {
  if (observer == nullptr) return;
  RpcEvent e;
  e.peer = &peer;
  e.method = method;
  e.begin_unix_us = begin_unix_us;
  e.duration_us = NowUnixMicros() - begin_unix_us;
  e.bytes_sent = sent.ByteSizeLong();
  e.bytes_received = received.ByteSizeLong();
  observer->OnRpc(e);
}

std::string PeerName(const std::string& task_label) {
  std::string name = task_label;
  std::replace(name.begin(), name.end(), ':', '-');
  return name;
}

std::string HostName() {
  // A named network namespace (ip netns, /run/netns/NAME) is an emulated host: the same
  // inode as /proc/self/ns/net means this process runs inside it.
  struct stat self {};
  std::error_code ec;
  if (::stat("/proc/self/ns/net", &self) == 0 && fs::is_directory("/run/netns", ec)) {
    for (const auto& entry : fs::directory_iterator("/run/netns", ec)) {
      struct stat ns {};
      if (::stat(entry.path().c_str(), &ns) == 0 && ns.st_ino == self.st_ino &&
          ns.st_dev == self.st_dev) {
        return entry.path().filename().string();
      }
    }
  }
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

nlohmann::json SystemInformation() {
  nlohmann::json j;
  struct utsname u {};
  if (::uname(&u) == 0) {
    j["System"] = u.sysname;
    j["Node Name"] = u.nodename;
    j["Release"] = u.release;
    j["Version"] = u.version;
    j["Machine"] = u.machine;
  }
  // uname -p is "unknown" on most Linux systems; the CPU's model name says what it is.
  std::string processor = j.value("Machine", "");
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      if (const size_t colon = line.find(':'); colon != std::string::npos) {
        processor = line.substr(line.find_first_not_of(' ', colon + 1));
      }
      break;
    }
  }
  j["Processor"] = processor;
  return j;
}

Profiler::Profiler(const ProfilerOptions& options) : options_(options) {}

Profiler::~Profiler() {
  if (sampler_ != nullptr) sampler_->Stop();
}

absl::StatusOr<std::unique_ptr<Profiler>> Profiler::Start(const ProfilerOptions& options,
                                                          std::unique_ptr<ProcSource> source) {
  ProfilerOptions without_dir = options;
  without_dir.task_dir.clear();
  std::unique_ptr<Profiler> p(new Profiler(without_dir));
  if (!options.task_dir.empty()) FULCRUM_RETURN_IF_ERROR(p->SetTaskDir(options.task_dir));
  if (!options.enabled) return p;
  if (options.metrics_port >= 0) {
    FULCRUM_ASSIGN_OR_RETURN(p->exporter_, MetricsExporter::Start(options.job, options.task_index,
                                                                  options.metrics_port));
    spdlog::info("Prometheus metrics on port {} (/metrics)", p->exporter_->port());
  }
  if (source == nullptr) source = LiveProcSource();
  p->sampler_ = std::make_unique<Sampler>(std::move(source), options.interval);
  Profiler* raw = p.get();
  p->sampler_->SetListener([raw](const SystemSample& s) { raw->OnSample(s); });
  FULCRUM_RETURN_IF_ERROR(p->sampler_->Start());
  return p;
}

absl::Status Profiler::SetTaskDir(const std::string& task_dir) {
  std::lock_guard<std::mutex> tb_lock(tb_mu_);
  if (!options_.task_dir.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("profiler: task folder already set to ", options_.task_dir));
  }
  FULCRUM_RETURN_IF_ERROR(MakeDirs(task_dir, "task folder"));
  if (options_.enabled) {
    FULCRUM_ASSIGN_OR_RETURN(EventFileWriter writer, EventFileWriter::Create(task_dir));
    tb_ = std::make_unique<EventFileWriter>(std::move(writer));
  }
  options_.task_dir = task_dir;
  return absl::OkStatus();
}

int Profiler::metrics_port() const { return exporter_ != nullptr ? exporter_->port() : -1; }

void Profiler::OnRpc(const RpcEvent& e) {
  traffic_.Add(*e.peer, e.method, e.bytes_sent, e.bytes_received);
  if (!options_.enabled) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (rpc_spans_.size() < kMaxRpcSpans) {
    rpc_spans_.push_back({*e.peer, e.method, e.begin_unix_us, e.duration_us});
  } else {
    ++rpc_spans_dropped_;
  }
}

void Profiler::RecordStep(const StepRecord& r) {
  if (exporter_ != nullptr) {
    exporter_->OnStep(r.step, r.global_step, r.examples, r.loss,
                      r.wall_ms > 0 ? static_cast<double>(r.examples) * 1000.0 / r.wall_ms : 0.0);
  }
  std::lock_guard<std::mutex> lock(mu_);
  steps_.push_back(r);
}

void Profiler::RecordPs(const PsRecord& r) {
  if (exporter_ != nullptr) exporter_->OnPs(r.global_step, r.pushes_applied, r.pushes_dropped);
  std::lock_guard<std::mutex> lock(mu_);
  ps_records_.push_back(r);
}

void Profiler::RecordEval(const EvalRecord& r) {
  if (exporter_ != nullptr) exporter_->OnEval(r.global_step, r.accuracy, r.loss);
  std::lock_guard<std::mutex> lock(mu_);
  evals_.push_back(r);
}

std::vector<SystemSample> Profiler::Samples() const {
  return sampler_ != nullptr ? sampler_->Samples() : std::vector<SystemSample>{};
}

void Profiler::OnSample(const SystemSample& s) {
  if (exporter_ != nullptr) {
    exporter_->OnSample(s);
    exporter_->OnTraffic(traffic_.Snapshot());
  }
  std::lock_guard<std::mutex> tb_lock(tb_mu_);
  if (tb_ == nullptr) return;
  // The records since the last sample, copied so the training thread is not held up by the
  // file writes below.
  std::vector<StepRecord> steps;
  std::vector<PsRecord> ps;
  std::vector<EvalRecord> evals;
  {
    std::lock_guard<std::mutex> lock(mu_);
    steps.assign(steps_.begin() + static_cast<std::ptrdiff_t>(tb_steps_written_), steps_.end());
    ps.assign(ps_records_.begin() + static_cast<std::ptrdiff_t>(tb_ps_written_), ps_records_.end());
    evals.assign(evals_.begin() + static_cast<std::ptrdiff_t>(tb_evals_written_), evals_.end());
  }
  tb_steps_written_ += steps.size();
  tb_ps_written_ += ps.size();
  tb_evals_written_ += evals.size();
  absl::Status st;
  auto scalar = [&](const std::string& tag, int64_t step, double wall, double value) {
    if (st.ok()) st = tb_->WriteScalar(tag, step, wall, value);
  };
  for (const StepRecord& r : steps) {
    const double wall = static_cast<double>(r.begin_unix_us) * 1e-6 + r.wall_ms * 1e-3;
    scalar("train/loss", r.global_step, wall, r.loss);
    scalar("train/examples_per_sec", r.global_step, wall,
           r.wall_ms > 0 ? static_cast<double>(r.examples) * 1000.0 / r.wall_ms : 0.0);
    scalar("train/step_time_ms", r.global_step, wall, r.wall_ms);
  }
  for (const PsRecord& r : ps) {
    const double wall = static_cast<double>(r.unix_us) * 1e-6;
    scalar("ps/global_step", r.global_step, wall, static_cast<double>(r.global_step));
    scalar("ps/pushes_applied", r.global_step, wall, static_cast<double>(r.pushes_applied));
    scalar("ps/pushes_dropped", r.global_step, wall, static_cast<double>(r.pushes_dropped));
  }
  for (const EvalRecord& r : evals) {
    const double wall = static_cast<double>(r.unix_us) * 1e-6;
    if (r.accuracy >= 0) scalar("eval/accuracy", r.global_step, wall, r.accuracy);
    scalar("eval/loss", r.global_step, wall, r.loss);
  }
  const double wall = static_cast<double>(s.unix_micros) * 1e-6;
  const int64_t n = tb_sample_step_++;
  scalar("system/cpu_percent", n, wall, s.cpu_percent);
  scalar("system/rss_mb", n, wall, static_cast<double>(s.rss_bytes) / 1e6);
  for (const InterfaceSample& i : s.interfaces) {
    scalar(absl::StrCat("network/", i.name, "/rx_bytes_per_sec"), n, wall, i.rx_bytes_per_sec);
    scalar(absl::StrCat("network/", i.name, "/tx_bytes_per_sec"), n, wall, i.tx_bytes_per_sec);
  }
  if (st.ok()) st = tb_->Flush();
  if (!st.ok()) {
    spdlog::warn("TensorBoard events: {}; no more events are written", st.ToString());
    tb_.reset();
  }
}

absl::Status Profiler::WriteCsv() const {
  const std::filesystem::path dir(options_.task_dir);
  const std::vector<SystemSample> samples = Samples();
  // Interfaces can appear mid-run: the columns are every interface seen, in first-seen order.
  std::vector<std::string> ifaces;
  size_t cores = 0;
  for (const SystemSample& s : samples) {
    cores = std::max(cores, s.core_percent.size());
    for (const InterfaceSample& i : s.interfaces) {
      if (std::find(ifaces.begin(), ifaces.end(), i.name) == ifaces.end()) ifaces.push_back(i.name);
    }
  }
  std::string out = "time_s,unix_us,cpu_percent,cpu_seconds_total,rss_bytes,peak_rss_bytes";
  for (size_t c = 0; c < cores; ++c) absl::StrAppend(&out, ",core", c, "_percent");
  for (const std::string& i : ifaces) {
    absl::StrAppend(&out, ",", i, "_rx_bytes,", i, "_tx_bytes,", i, "_rx_packets,", i,
                    "_tx_packets,", i, "_rx_bytes_per_s,", i, "_tx_bytes_per_s");
  }
  out += "\n";
  for (const SystemSample& s : samples) {
    absl::StrAppend(&out, Fixed(s.seconds), ",", s.unix_micros, ",", Fixed(s.cpu_percent, 2), ",",
                    Fixed(s.cpu_seconds, 3), ",", s.rss_bytes, ",", s.peak_rss_bytes);
    for (size_t c = 0; c < cores; ++c) {
      absl::StrAppend(&out, ",", c < s.core_percent.size() ? Fixed(s.core_percent[c], 2) : "");
    }
    for (const std::string& name : ifaces) {
      auto it = std::find_if(s.interfaces.begin(), s.interfaces.end(),
                             [&](const InterfaceSample& i) { return i.name == name; });
      if (it == s.interfaces.end()) {
        out += ",,,,,,";
      } else {
        absl::StrAppend(&out, ",", it->rx_bytes, ",", it->tx_bytes, ",", it->rx_packets, ",",
                        it->tx_packets, ",", Fixed(it->rx_bytes_per_sec, 1), ",",
                        Fixed(it->tx_bytes_per_sec, 1));
      }
    }
    out += "\n";
  }
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(dir / "samples.csv", out));

  std::lock_guard<std::mutex> lock(mu_);
  if (options_.job == "worker") {
    out =
        "step,global_step,examples,loss,begin_unix_us,wall_ms,data_ms,pull_ms,forward_ms,"
        "backward_ms,push_ms,sync_wait_ms,examples_per_sec\n";
    for (const StepRecord& r : steps_) {
      absl::StrAppend(
          &out, r.step, ",", r.global_step, ",", r.examples, ",", Fixed(r.loss, 6), ",",
          r.begin_unix_us, ",", Fixed(r.wall_ms), ",", Fixed(r.data_ms), ",", Fixed(r.pull_ms), ",",
          Fixed(r.forward_ms), ",", Fixed(r.backward_ms), ",", Fixed(r.push_ms), ",",
          Fixed(r.sync_wait_ms), ",",
          Fixed(r.wall_ms > 0 ? static_cast<double>(r.examples) * 1000.0 / r.wall_ms : 0.0, 1),
          "\n");
    }
  } else if (options_.job == "ps") {
    out =
        "unix_us,global_step,pushes_received,pushes_applied,pushes_dropped,pulls,bytes_pushed,"
        "bytes_pulled,apply_ms,wait_ms\n";
    for (const PsRecord& r : ps_records_) {
      absl::StrAppend(&out, r.unix_us, ",", r.global_step, ",", r.pushes_received, ",",
                      r.pushes_applied, ",", r.pushes_dropped, ",", r.pulls, ",", r.bytes_pushed,
                      ",", r.bytes_pulled, ",", Fixed(r.apply_ms), ",", Fixed(r.wait_ms), "\n");
    }
  } else {
    out = "unix_us,global_step,test_accuracy,test_loss\n";
    for (const EvalRecord& r : evals_) {
      absl::StrAppend(&out, r.unix_us, ",", r.global_step, ",",
                      r.accuracy >= 0 ? Fixed(r.accuracy, 5) : "", ",", Fixed(r.loss, 6), "\n");
    }
  }
  return WriteFileAtomically(dir / "steps.csv", out);
}

absl::Status Profiler::WriteTrace() const {
  const std::string task = absl::StrCat(options_.job, "-", options_.task_index);
  ChromeTrace trace(TracePid(options_.job, options_.task_index), task);
  constexpr int kTrainTid = 1;
  trace.NameThread(kTrainTid, options_.job == "worker" ? "training" : "main");
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = std::min(steps_.size(), kMaxTraceSteps);
    for (size_t i = 0; i < n; ++i) {
      const StepRecord& r = steps_[i];
      const int64_t dur = std::llround(r.wall_ms * 1000.0);
      trace.Span("step", "step", kTrainTid, r.begin_unix_us, dur,
                 {{"step", static_cast<double>(r.step)},
                  {"global_step", static_cast<double>(r.global_step)},
                  {"loss", r.loss}});
      // Phases run one after another in this order inside the step.
      int64_t t = r.begin_unix_us;
      const std::pair<const char*, double> phases[] = {
          {"data", r.data_ms},         {"pull", r.pull_ms}, {"forward", r.forward_ms},
          {"backward", r.backward_ms}, {"push", r.push_ms}, {"sync_wait", r.sync_wait_ms}};
      for (const auto& [name, ms] : phases) {
        const int64_t d = std::llround(ms * 1000.0);
        if (d > 0) trace.Span(name, "phase", kTrainTid, t, d);
        t += d;
      }
    }
    // One track per peer: RPCs to different tasks overlap.
    std::map<std::string, int> peer_tid;
    for (const RpcSpan& s : rpc_spans_) {
      auto [it, inserted] = peer_tid.emplace(s.peer, 10 + static_cast<int>(peer_tid.size()));
      if (inserted) trace.NameThread(it->second, absl::StrCat("rpc ", s.peer));
      trace.Span(s.method, "rpc", it->second, s.begin_unix_us, s.duration_us);
    }
    for (const PsRecord& r : ps_records_) {
      trace.Counter("ps progress", r.unix_us,
                    {{"global_step", static_cast<double>(r.global_step)},
                     {"pushes_applied", static_cast<double>(r.pushes_applied)},
                     {"pushes_dropped", static_cast<double>(r.pushes_dropped)}});
    }
    for (const EvalRecord& r : evals_) {
      std::map<std::string, double> series = {{"test_loss", r.loss}};
      if (r.accuracy >= 0) series["test_accuracy"] = r.accuracy;
      trace.Counter("evaluation", r.unix_us, series);
    }
  }
  for (const SystemSample& s : Samples()) {
    trace.Counter("cpu_percent", s.unix_micros, {{"process", s.cpu_percent}});
    trace.Counter("memory_mb", s.unix_micros,
                  {{"rss", static_cast<double>(s.rss_bytes) / 1e6},
                   {"peak_rss", static_cast<double>(s.peak_rss_bytes) / 1e6}});
    for (const InterfaceSample& i : s.interfaces) {
      trace.Counter(absl::StrCat("net ", i.name, " bytes/s"), s.unix_micros,
                    {{"rx", i.rx_bytes_per_sec}, {"tx", i.tx_bytes_per_sec}});
    }
  }
  return trace.Write((std::filesystem::path(options_.task_dir) / "trace.json").string());
}

void Profiler::AddSummaryKeys(nlohmann::json* summary) const {
  nlohmann::json& j = *summary;
  const std::vector<SystemSample> samples = Samples();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
  j["Job Execution Time"] = elapsed;
  j["System Information"] = SystemInformation();
  if (!samples.empty()) {
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
  }
  uint64_t rx = 0, tx = 0, lo_rx = 0, lo_tx = 0;
  nlohmann::json ifaces = nlohmann::json::array();
  if (sampler_ != nullptr) {
    for (const InterfaceTotals& t : sampler_->Totals()) {
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
  }
  j["Total bytes sent over network"] = tx;
  j["Total bytes received over network"] = rx;
  j["network_interfaces"] = ifaces;
  j["network_loopback_bytes_sent"] = lo_tx;
  j["network_loopback_bytes_received"] = lo_rx;
  j["network_external_bytes_sent"] = tx - lo_tx;
  j["network_external_bytes_received"] = rx - lo_rx;

  nlohmann::json peers = nlohmann::json::array();
  std::map<std::string, std::array<uint64_t, 3>> by_peer;
  uint64_t app_sent = 0, app_received = 0, rpcs = 0;
  for (const RpcTrafficPoint& p : traffic_.Snapshot()) {
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
  nlohmann::json per_peer = nlohmann::json::array();
  for (const auto& [peer, agg] : by_peer) {
    per_peer.push_back(
        {{"peer", peer}, {"rpcs", agg[0]}, {"bytes_sent", agg[1]}, {"bytes_received", agg[2]}});
  }
  j["rpc_traffic"] = peers;
  j["peer_traffic"] = per_peer;
  j["app_bytes_sent"] = app_sent;
  j["app_bytes_received"] = app_received;
  j["rpcs"] = rpcs;

  std::lock_guard<std::mutex> lock(mu_);
  if (!steps_.empty()) {
    // Steady state: without the first kWarmupSteps when there are more.
    const size_t from = steps_.size() > kWarmupSteps ? kWarmupSteps : 0;
    std::vector<double> wall, rate;
    std::map<std::string, std::vector<double>> phase;
    double examples = 0.0, ms = 0.0;
    for (size_t i = from; i < steps_.size(); ++i) {
      const StepRecord& r = steps_[i];
      wall.push_back(r.wall_ms);
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
    j["profiled_steps"] = steps_.size();
    j["examples_per_sec_mean"] = ms > 0 ? examples * 1000.0 / ms : 0.0;
    j["examples_per_sec_p50"] = Percentile(rate, 0.5);
    j["step_time_p50_ms"] = Percentile(wall, 0.5);
    j["step_time_p99_ms"] = Percentile(wall, 0.99);
    nlohmann::json p50, mean;
    for (const auto& [name, v] : phase) {
      p50[name] = Percentile(v, 0.5);
      mean[name] = Mean(v);
    }
    j["step_phase_p50_ms"] = p50;
    j["step_phase_mean_ms"] = mean;
  }
  if (!ps_records_.empty()) {
    const PsRecord& last = ps_records_.back();
    j["apply_ms_total"] = last.apply_ms;
    j["request_wait_ms_total"] = last.wait_ms;
  }
  j["trace_rpc_spans_dropped"] = rpc_spans_dropped_;
  j["trace_steps_dropped"] = steps_.size() > kMaxTraceSteps ? steps_.size() - kMaxTraceSteps : 0;

  // Time series for the chief's report page, downsampled to a few hundred points.
  nlohmann::json series;
  if (!samples.empty()) {
    nlohmann::json s;
    std::vector<double> t, cpu, rss;
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> net;
    const std::vector<size_t> idx = Downsample(samples.size(), kMaxSeriesPoints);
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
    s["unix_s"] = t;
    s["cpu_percent"] = cpu;
    s["rss_bytes"] = rss;
    nlohmann::json n;
    for (auto& [name, v] : net) {
      v.first.resize(t.size(), 0.0);
      v.second.resize(t.size(), 0.0);
      n[name] = {{"rx_bytes_per_sec", v.first}, {"tx_bytes_per_sec", v.second}};
    }
    s["network"] = n;
    series["samples"] = s;
  }
  if (!steps_.empty()) {
    // Windows of consecutive steps: examples/sec over the window, mean loss.
    const size_t w = (steps_.size() + kMaxSeriesPoints - 1) / kMaxSeriesPoints;
    std::vector<double> t, rate, loss, gstep;
    for (size_t i = 0; i < steps_.size(); i += w) {
      const size_t end = std::min(steps_.size(), i + w);
      double ex = 0.0, ms = 0.0, l = 0.0;
      for (size_t k = i; k < end; ++k) {
        ex += static_cast<double>(steps_[k].examples);
        ms += steps_[k].wall_ms;
        l += steps_[k].loss;
      }
      const StepRecord& e = steps_[end - 1];
      t.push_back(static_cast<double>(e.begin_unix_us) * 1e-6 + e.wall_ms * 1e-3);
      rate.push_back(ms > 0 ? ex * 1000.0 / ms : 0.0);
      loss.push_back(l / static_cast<double>(end - i));
      gstep.push_back(static_cast<double>(e.global_step));
    }
    series["steps"] = {
        {"unix_s", t}, {"examples_per_sec", rate}, {"loss", loss}, {"global_step", gstep}};
  }
  j["series"] = series;
}

absl::Status Profiler::Finish(nlohmann::json* summary) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return absl::FailedPreconditionError("Profiler::Finish called twice");
    finished_ = true;
  }
  (*summary)["profile"] = options_.enabled ? "on" : "off";
  (*summary)["host"] = HostName();
  if (!options_.enabled) return absl::OkStatus();
  sampler_->Stop();  // its final sample also writes the last TensorBoard events
  {
    std::lock_guard<std::mutex> tb_lock(tb_mu_);
    if (tb_ != nullptr) {
      if (absl::Status s = tb_->Close(); !s.ok())
        spdlog::warn("TensorBoard events: {}", s.ToString());
      tb_.reset();
    }
  }
  AddSummaryKeys(summary);
  if (options_.task_dir.empty()) return absl::OkStatus();
  FULCRUM_RETURN_IF_ERROR(WriteCsv());
  return WriteTrace();
}

}  // namespace fulcrum::profiler
