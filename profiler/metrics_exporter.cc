#include "profiler/metrics_exporter.h"

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace fulcrum::profiler {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;

// Civetweb reads "host:port"; an IPv6 literal needs brackets or its colons would be taken for
// the port separator.
std::string ListenSpec(const std::string& bind_address, int port) {
  const bool ipv6 = bind_address.find(':') != std::string::npos && bind_address.front() != '[';
  return ipv6 ? absl::StrCat("[", bind_address, "]:", port) : absl::StrCat(bind_address, ":", port);
}

// prometheus-cpp counters can only grow by an increment, while our sources report totals: the
// step from the published value to the new total is what we add. A smaller total (a restarted
// source, a reordered call) is ignored, so a scraper never sees a counter go back, which it
// would read as a reset.
void AdvanceTo(Counter& counter, double total) {
  const double published = counter.Value();
  if (total > published) counter.Increment(total - published);
}

}  // namespace

// Counts the scrapes of /metrics (the Exposer asks every registered collectable at each
// scrape); it contributes no metric of its own.
class ScrapeCounter final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    {
      MutexLock lock(&mu_);
      ++scrapes_;
    }
    scraped_.SignalAll();
    return {};
  }
  int64_t scrapes() const {
    MutexLock lock(&mu_);
    return scrapes_;
  }
  // True once scrapes() exceeds `seen`; false at `deadline`.
  bool WaitForMore(int64_t seen, absl::Time deadline) const {
    MutexLock lock(&mu_);
    while (scrapes_ <= seen) {
      if (!scraped_.WaitUntil(&mu_, deadline) && scrapes_ <= seen) return false;
    }
    return true;
  }

 private:
  mutable Mutex mu_;
  mutable CondVar scraped_;
  mutable int64_t scrapes_ ABSL_GUARDED_BY(mu_) = 0;
};

struct MetricsExporter::Impl {
  explicit Impl(prometheus::Labels constant_labels)
      : constant(std::move(constant_labels)),
        registry(std::make_shared<prometheus::Registry>()),
        cpu_seconds(Counters("process_cpu_seconds_total",
                             "Total user and system CPU time spent in seconds.")),
        rss(Gauges("process_resident_memory_bytes", "Resident memory size in bytes.")),
        peak_rss(Gauges("process_resident_memory_max_bytes",
                        "Peak resident memory size (VmHWM) in bytes.")),
        core_utilization(Gauges("fulcrum_cpu_core_utilization_ratio",
                                "Busy share of each CPU core over the last sampling interval.")),
        net_rx_bytes(Counters("fulcrum_network_receive_bytes_total",
                              "Bytes received per network interface since the sampler started.")),
        net_tx_bytes(
            Counters("fulcrum_network_transmit_bytes_total",
                     "Bytes transmitted per network interface since the sampler started.")),
        net_rx_packets(
            Counters("fulcrum_network_receive_packets_total",
                     "Packets received per network interface since the sampler started.")),
        net_tx_packets(
            Counters("fulcrum_network_transmit_packets_total",
                     "Packets transmitted per network interface since the sampler started.")),
        rpc_sent(Counters("fulcrum_rpc_sent_bytes_total",
                          "Application bytes sent per peer and RPC method.")),
        rpc_received(Counters("fulcrum_rpc_received_bytes_total",
                              "Application bytes received per peer and RPC method.")),
        rpcs(Counters("fulcrum_rpcs_total", "RPCs issued per peer and RPC method.")),
        examples_per_second(Gauges("fulcrum_step_examples_per_second",
                                   "Training throughput of the last step in examples per second.")),
        steps(Counters("fulcrum_steps_total", "Training steps run by this task.")),
        examples(Counters("fulcrum_examples_total", "Training examples processed by this task.")),
        step_loss(Gauges("fulcrum_step_loss", "Training loss of the last step.")),
        global_step(Gauges("fulcrum_global_step", "Last global step seen by this task.")),
        pushes_applied(Counters("fulcrum_ps_pushes_applied_total",
                                "Gradient pushes applied by this parameter server.")),
        pushes_dropped(Counters("fulcrum_ps_pushes_dropped_total",
                                "Stale gradient pushes dropped by this parameter server.")),
        test_accuracy(
            Gauges("fulcrum_test_accuracy", "Accuracy of the last evaluation on the test set.")),
        test_loss(Gauges("fulcrum_test_loss", "Loss of the last evaluation on the test set.")) {}

  Family<Counter>& Counters(const std::string& name, const std::string& help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(*registry);
  }
  Family<Gauge>& Gauges(const std::string& name, const std::string& help) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(*registry);
  }

  // The families of the wider figures, registered at their first update (by name).
  Family<Gauge>& LazyGauges(const std::string& name, const std::string& help)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = lazy_gauges.find(name);
    if (it == lazy_gauges.end()) it = lazy_gauges.emplace(name, &Gauges(name, help)).first;
    return *it->second;
  }
  Family<Counter>& LazyCounters(const std::string& name, const std::string& help)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = lazy_counters.find(name);
    if (it == lazy_counters.end()) it = lazy_counters.emplace(name, &Counters(name, help)).first;
    return *it->second;
  }
  void SetGauge(const std::string& name, const std::string& help, prometheus::Labels labels,
                double value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    LazyGauges(name, help).Add(With(std::move(labels))).Set(value);
  }
  void AdvanceCounter(const std::string& name, const std::string& help, prometheus::Labels labels,
                      double total) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    AdvanceTo(LazyCounters(name, help).Add(With(std::move(labels))), total);
  }
  // The wider figures of a sample (OnSample, with mu held).
  void PublishProcessBreadth(const SystemSample& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void PublishHost(const HostSample& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void PublishNetErrors(const SystemSample& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void PublishGpus(const SystemSample& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // task_type and task_index go into every series' own labels rather than the family's
  // constant labels: prometheus-cpp prints constant labels first, and merged into one sorted
  // map the labels come out in the canonical sorted order
  // ({device="lo",task_index="1",task_type="worker"}) that scrapers and greps expect. Not
  // "job" (Prometheus sets its own job label and renames a target's to exported_job).
  prometheus::Labels With(prometheus::Labels labels) const {
    labels.insert(constant.begin(), constant.end());
    return labels;
  }

  const prometheus::Labels constant;  // task_type, task_index
  // Declared before the metrics and the exposer so it is destroyed after both: the families
  // live in it, and the exposer only holds a weak pointer to it.
  std::shared_ptr<prometheus::Registry> registry;
  // The metrics: updated with mu held (see mu).
  Family<Counter>& cpu_seconds ABSL_GUARDED_BY(mu);
  Family<Gauge>& rss ABSL_GUARDED_BY(mu);
  Family<Gauge>& peak_rss ABSL_GUARDED_BY(mu);
  Family<Gauge>& core_utilization ABSL_GUARDED_BY(mu);
  Family<Counter>& net_rx_bytes ABSL_GUARDED_BY(mu);
  Family<Counter>& net_tx_bytes ABSL_GUARDED_BY(mu);
  Family<Counter>& net_rx_packets ABSL_GUARDED_BY(mu);
  Family<Counter>& net_tx_packets ABSL_GUARDED_BY(mu);
  Family<Counter>& rpc_sent ABSL_GUARDED_BY(mu);
  Family<Counter>& rpc_received ABSL_GUARDED_BY(mu);
  Family<Counter>& rpcs ABSL_GUARDED_BY(mu);
  Family<Gauge>& examples_per_second ABSL_GUARDED_BY(mu);
  Family<Counter>& steps ABSL_GUARDED_BY(mu);
  Family<Counter>& examples ABSL_GUARDED_BY(mu);
  Family<Gauge>& step_loss ABSL_GUARDED_BY(mu);
  Family<Gauge>& global_step ABSL_GUARDED_BY(mu);
  Family<Counter>& pushes_applied ABSL_GUARDED_BY(mu);
  Family<Counter>& pushes_dropped ABSL_GUARDED_BY(mu);
  Family<Gauge>& test_accuracy ABSL_GUARDED_BY(mu);
  Family<Gauge>& test_loss ABSL_GUARDED_BY(mu);
  std::map<std::string, Family<Gauge>*> lazy_gauges ABSL_GUARDED_BY(mu);
  std::map<std::string, Family<Counter>*> lazy_counters ABSL_GUARDED_BY(mu);

  // Each metric is thread-safe on its own, but "read the published value, add the difference"
  // is not: two callers could both add the same difference. One lock makes each update atomic.
  Mutex mu;

  // Declared last so it is destroyed first: the server stops before the metrics go away.
  std::shared_ptr<ScrapeCounter> scrape_counter = std::make_shared<ScrapeCounter>();
  std::unique_ptr<prometheus::Exposer> exposer;
};

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(
    const std::string& job, int task_index, int port, const std::string& bind_address) {
  if (job.empty()) return absl::InvalidArgumentError("metrics exporter: empty job name");
  if (task_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics exporter: negative task index ", task_index));
  }
  if (port < 0 || port > 65535 || bind_address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics exporter: bad listen address '", bind_address, "' port ", port));
  }
  const std::string spec = ListenSpec(bind_address, port);
  // prometheus-cpp reports failure by throwing (civetweb cannot bind, a bad option); this is
  // the module's edge, so every exception becomes a Status here and none reaches the caller.
  try {
    auto impl = std::make_unique<Impl>(
        prometheus::Labels{{"task_type", job}, {"task_index", std::to_string(task_index)}});
    impl->exposer = std::make_unique<prometheus::Exposer>(spec, /*num_threads=*/2);
    impl->exposer->RegisterCollectable(impl->registry);
    impl->exposer->RegisterCollectable(impl->scrape_counter);
    if (impl->exposer->GetListeningPorts().empty()) {
      return absl::UnavailableError(absl::StrCat("metrics exporter: not listening on ", spec));
    }
    return std::unique_ptr<MetricsExporter>(new MetricsExporter(std::move(impl)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics exporter: cannot listen on ", spec, ": ", e.what()));
  }
}

MetricsExporter::MetricsExporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsExporter::~MetricsExporter() = default;

int MetricsExporter::port() const { return impl_->exposer->GetListeningPorts().front(); }

int64_t MetricsExporter::scrapes() const { return impl_->scrape_counter->scrapes(); }

bool MetricsExporter::WaitForNextScrape(absl::Duration timeout) {
  const int64_t seen = impl_->scrape_counter->scrapes();
  return impl_->scrape_counter->WaitForMore(seen, absl::Now() + timeout);
}

// A series is created on its first update (Family::Add returns the existing one after that), so
// each task publishes only what its role feeds: no test accuracy of 0 on a worker.
// Family::Add only throws for invalid or reserved label names; ours are fixed literals
// that prometheus-cpp accepts, so these methods cannot throw.
void MetricsExporter::OnSample(const SystemSample& sample) {
  MutexLock lock(&impl_->mu);
  AdvanceTo(impl_->cpu_seconds.Add(impl_->constant), sample.cpu_seconds);
  impl_->rss.Add(impl_->constant).Set(static_cast<double>(sample.rss_bytes));
  impl_->peak_rss.Add(impl_->constant).Set(static_cast<double>(sample.peak_rss_bytes));
  for (size_t core = 0; core < sample.core_percent.size(); ++core) {
    impl_->core_utilization.Add(impl_->With({{"core", std::to_string(core)}}))
        .Set(sample.core_percent[core] / 100.0);
  }
  // An interface that vanished keeps its series at the last total: a counter that disappears
  // and comes back would look like a reset to rate().
  for (const InterfaceSample& nic : sample.interfaces) {
    const prometheus::Labels device = impl_->With({{"device", nic.name}});
    AdvanceTo(impl_->net_rx_bytes.Add(device), static_cast<double>(nic.rx_bytes));
    AdvanceTo(impl_->net_tx_bytes.Add(device), static_cast<double>(nic.tx_bytes));
    AdvanceTo(impl_->net_rx_packets.Add(device), static_cast<double>(nic.rx_packets));
    AdvanceTo(impl_->net_tx_packets.Add(device), static_cast<double>(nic.tx_packets));
  }
  impl_->PublishProcessBreadth(sample);
  impl_->PublishHost(sample.host);
  impl_->PublishNetErrors(sample);
  impl_->PublishGpus(sample);
}

void MetricsExporter::Impl::PublishProcessBreadth(const SystemSample& s) {
  const std::string cpu_help =
      "Process CPU share over the last sampling interval by mode (1 = one core).";
  SetGauge("fulcrum_process_cpu_ratio", cpu_help, {{"mode", "user"}}, s.cpu_user_percent / 100.0);
  SetGauge("fulcrum_process_cpu_ratio", cpu_help, {{"mode", "system"}},
           s.cpu_system_percent / 100.0);
  const std::string cs_help =
      "Context switches of the process's main thread since the sampler started.";
  AdvanceCounter("fulcrum_process_context_switches_total", cs_help, {{"kind", "voluntary"}},
                 static_cast<double>(s.voluntary_switches));
  AdvanceCounter("fulcrum_process_context_switches_total", cs_help, {{"kind", "nonvoluntary"}},
                 static_cast<double>(s.nonvoluntary_switches));
  const std::string io_help =
      "Bytes the process read from / wrote to storage since the sampler started.";
  AdvanceCounter("fulcrum_process_io_bytes_total", io_help, {{"direction", "read"}},
                 static_cast<double>(s.io_read_bytes));
  AdvanceCounter("fulcrum_process_io_bytes_total", io_help, {{"direction", "write"}},
                 static_cast<double>(s.io_write_bytes));
  const std::string thread_help =
      "CPU share of the process's threads of one name over the last sampling interval (1 = one "
      "core).";
  for (const ThreadSample& t : s.threads) {
    SetGauge("fulcrum_thread_cpu_ratio", thread_help, {{"thread", t.name}, {"mode", "user"}},
             t.user_percent / 100.0);
    SetGauge("fulcrum_thread_cpu_ratio", thread_help, {{"thread", t.name}, {"mode", "system"}},
             t.system_percent / 100.0);
  }
}

void MetricsExporter::Impl::PublishHost(const HostSample& h) {
  const std::string cpu_help =
      "Host CPU share by mode over the last sampling interval (1 = all cores).";
  const std::pair<const char*, double> modes[] = {{"user", h.cpu_user_percent},
                                                  {"system", h.cpu_system_percent},
                                                  {"iowait", h.cpu_iowait_percent},
                                                  {"idle", h.cpu_idle_percent}};
  for (const auto& [mode, v] : modes)
    SetGauge("fulcrum_host_cpu_ratio", cpu_help, {{"mode", mode}}, v / 100.0);
  const std::pair<const char*, int64_t> memory[] = {
      {"total", h.mem_total_bytes},   {"used", h.mem_used_bytes},
      {"free", h.mem_free_bytes},     {"available", h.mem_available_bytes},
      {"cached", h.mem_cached_bytes}, {"buffers", h.mem_buffers_bytes}};
  for (const auto& [kind, v] : memory) {
    SetGauge("fulcrum_host_memory_bytes",
             "Host memory by kind (/proc/meminfo; used as sar's kbmemused).", {{"kind", kind}},
             static_cast<double>(v));
  }
  const std::pair<const char*, double> load[] = {
      {"1m", h.load1}, {"5m", h.load5}, {"15m", h.load15}};
  for (const auto& [window, v] : load)
    SetGauge("fulcrum_host_load", "Host load average.", {{"window", window}}, v);
  AdvanceCounter("fulcrum_host_context_switches_total",
                 "Host context switches since the sampler started.", {},
                 static_cast<double>(h.context_switches));
  const std::string tcp_help = "TCP segments of the network namespace since the sampler started.";
  AdvanceCounter("fulcrum_tcp_segments_total", tcp_help, {{"kind", "in"}},
                 static_cast<double>(h.tcp_in_segs));
  AdvanceCounter("fulcrum_tcp_segments_total", tcp_help, {{"kind", "out"}},
                 static_cast<double>(h.tcp_out_segs));
  AdvanceCounter("fulcrum_tcp_segments_total", tcp_help, {{"kind", "retrans"}},
                 static_cast<double>(h.tcp_retrans_segs));
  const std::string disk_help =
      "Bytes read from / written to the host's whole disks since the sampler started.";
  AdvanceCounter("fulcrum_host_disk_bytes_total", disk_help, {{"direction", "read"}},
                 static_cast<double>(h.disk_read_bytes));
  AdvanceCounter("fulcrum_host_disk_bytes_total", disk_help, {{"direction", "write"}},
                 static_cast<double>(h.disk_write_bytes));
}

void MetricsExporter::Impl::PublishNetErrors(const SystemSample& s) {
  for (const InterfaceSample& nic : s.interfaces) {
    const std::pair<const char*, uint64_t> counts[] = {
        {"fulcrum_network_receive_errors_total", nic.rx_errors},
        {"fulcrum_network_transmit_errors_total", nic.tx_errors},
        {"fulcrum_network_receive_drops_total", nic.rx_drops},
        {"fulcrum_network_transmit_drops_total", nic.tx_drops}};
    for (const auto& [name, v] : counts) {
      AdvanceCounter(name, "Per network interface since the sampler started (/proc/net/dev).",
                     {{"device", nic.name}}, static_cast<double>(v));
    }
  }
}

void MetricsExporter::Impl::PublishGpus(const SystemSample& s) {
  for (const GpuReading& g : s.gpus) {
    const prometheus::Labels gpu = {{"gpu", std::to_string(g.index)}};
    SetGauge("fulcrum_gpu_utilization_ratio", "Share of time a GPU kernel ran (NVML).", gpu,
             g.utilization_percent / 100.0);
    SetGauge("fulcrum_gpu_memory_used_bytes", "GPU memory in use (NVML).", gpu,
             static_cast<double>(g.memory_used_bytes));
    if (g.power_watts >= 0)
      SetGauge("fulcrum_gpu_power_watts", "GPU board power (NVML).", gpu, g.power_watts);
  }
}

void MetricsExporter::OnTraffic(const std::vector<RpcTrafficPoint>& traffic) {
  MutexLock lock(&impl_->mu);
  for (const RpcTrafficPoint& point : traffic) {
    const prometheus::Labels labels = impl_->With({{"peer", point.peer}, {"method", point.method}});
    AdvanceTo(impl_->rpcs.Add(labels), static_cast<double>(point.rpcs));
    AdvanceTo(impl_->rpc_sent.Add(labels), static_cast<double>(point.bytes_sent));
    AdvanceTo(impl_->rpc_received.Add(labels), static_cast<double>(point.bytes_received));
  }
}

void MetricsExporter::OnStep(int64_t /*local_step*/, int64_t global_step, int64_t examples,
                             double loss, double examples_per_second) {
  MutexLock lock(&impl_->mu);
  // One call per step, so the call count is the step count whether local_step starts at 0 or 1.
  impl_->steps.Add(impl_->constant).Increment();
  impl_->examples.Add(impl_->constant)
      .Increment(static_cast<double>(std::max<int64_t>(0, examples)));
  impl_->global_step.Add(impl_->constant).Set(static_cast<double>(global_step));
  impl_->step_loss.Add(impl_->constant).Set(loss);
  impl_->examples_per_second.Add(impl_->constant).Set(examples_per_second);
}

void MetricsExporter::OnPs(int64_t global_step, int64_t pushes_applied, int64_t pushes_dropped) {
  MutexLock lock(&impl_->mu);
  impl_->global_step.Add(impl_->constant).Set(static_cast<double>(global_step));
  AdvanceTo(impl_->pushes_applied.Add(impl_->constant), static_cast<double>(pushes_applied));
  AdvanceTo(impl_->pushes_dropped.Add(impl_->constant), static_cast<double>(pushes_dropped));
}

void MetricsExporter::OnWatchdog(const std::string& task, double stuck_seconds) {
  MutexLock lock(&impl_->mu);
  impl_->SetGauge("fulcrum_watchdog_stuck_seconds",
                  "Seconds the chief's watchdog has seen this task not move (0: it moves).",
                  {{"stuck_task", task}}, stuck_seconds);
}

void MetricsExporter::OnStraggler(int worker, double held_back_ms) {
  MutexLock lock(&impl_->mu);
  impl_->SetGauge("fulcrum_ps_straggler_worker",
                  "The worker whose gradients hold this ps's sync steps back (-1: none).", {},
                  static_cast<double>(worker));
  impl_->SetGauge("fulcrum_ps_straggler_held_back_ms",
                  "How long the straggler's gradients came after the other workers' (median).", {},
                  held_back_ms);
}

void MetricsExporter::OnEval(int64_t global_step, double accuracy, double loss) {
  MutexLock lock(&impl_->mu);
  impl_->global_step.Add(impl_->constant).Set(static_cast<double>(global_step));
  impl_->test_accuracy.Add(impl_->constant).Set(accuracy);
  impl_->test_loss.Add(impl_->constant).Set(loss);
}

}  // namespace fulcrum::profiler
