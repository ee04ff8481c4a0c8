#include "profiler/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "profiler/csv_sink.h"
#include "profiler/summary.h"
#include "spdlog/spdlog.h"

namespace fulcrum::profiler {
namespace {

double ExamplesPerSec(const StepRecord& r) {
  return r.wall_ms > 0 ? static_cast<double>(r.examples) * 1000.0 / r.wall_ms : 0.0;
}

// The elements of `all` from `from` on (those not yet written to TensorBoard).
template <typename T>
std::vector<T> Since(const std::vector<T>& all, size_t from) {
  return std::vector<T>(all.begin() + static_cast<std::ptrdiff_t>(from), all.end());
}

// TensorBoard scalars of the records since the last sample; stops at the first error.
absl::Status WriteRecordScalars(const std::vector<StepRecord>& steps,
                                const std::vector<PsRecord>& ps,
                                const std::vector<EvalRecord>& evals, EventFileWriter* tb) {
  absl::Status st;
  auto scalar = [&](const std::string& tag, int64_t step, double wall, double value) {
    if (st.ok()) st = tb->WriteScalar(tag, step, wall, value);
  };
  for (const StepRecord& r : steps) {
    const double wall = static_cast<double>(r.begin_unix_us) * 1e-6 + r.wall_ms * 1e-3;
    scalar("train/loss", r.global_step, wall, r.loss);
    scalar("train/examples_per_sec", r.global_step, wall, ExamplesPerSec(r));
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
  return st;
}

// The wider figures of a sample as TensorBoard scalars (docs/profiler.md lists the tags).
absl::Status WriteBreadthScalars(const SystemSample& s, int64_t step, EventFileWriter* tb) {
  absl::Status st;
  auto scalar = [&](const std::string& tag, double value) {
    if (st.ok()) st = tb->WriteScalar(tag, step, static_cast<double>(s.unix_micros) * 1e-6, value);
  };
  const HostSample& h = s.host;
  scalar("system/cpu_user_percent", s.cpu_user_percent);
  scalar("system/cpu_system_percent", s.cpu_system_percent);
  scalar("system/io_read_mb_per_sec", s.io_read_bytes_per_sec / 1e6);
  scalar("system/io_write_mb_per_sec", s.io_write_bytes_per_sec / 1e6);
  scalar("system/voluntary_switches_per_sec", s.voluntary_switches_per_sec);
  scalar("system/nonvoluntary_switches_per_sec", s.nonvoluntary_switches_per_sec);
  for (size_t c = 0; c < s.core_percent.size(); ++c) {
    scalar(absl::StrCat("system/core/", c, "_percent"), s.core_percent[c]);
  }
  for (const ThreadSample& t : s.threads) {
    scalar(absl::StrCat("system/thread/", t.name, "/cpu_percent"), t.cpu_percent());
  }
  scalar("system/host/cpu_user_percent", h.cpu_user_percent);
  scalar("system/host/cpu_system_percent", h.cpu_system_percent);
  scalar("system/host/cpu_iowait_percent", h.cpu_iowait_percent);
  scalar("system/host/mem_used_mb", static_cast<double>(h.mem_used_bytes) / 1e6);
  scalar("system/host/mem_available_mb", static_cast<double>(h.mem_available_bytes) / 1e6);
  scalar("system/host/mem_cached_mb", static_cast<double>(h.mem_cached_bytes) / 1e6);
  scalar("system/host/load1", h.load1);
  scalar("system/host/context_switches_per_sec", h.context_switches_per_sec);
  scalar("system/host/tcp_retrans_segs_per_sec", h.tcp_retrans_segs_per_sec);
  scalar("system/host/disk_read_mb_per_sec", h.disk_read_bytes_per_sec / 1e6);
  scalar("system/host/disk_write_mb_per_sec", h.disk_write_bytes_per_sec / 1e6);
  for (const GpuReading& g : s.gpus) {
    scalar(absl::StrCat("system/gpu/", g.index, "/utilization_percent"), g.utilization_percent);
    scalar(absl::StrCat("system/gpu/", g.index, "/memory_used_mb"),
           static_cast<double>(g.memory_used_bytes) / 1e6);
    if (g.power_watts >= 0)
      scalar(absl::StrCat("system/gpu/", g.index, "/power_watts"), g.power_watts);
  }
  return st;
}

// TensorBoard scalars of one sample, at x = `global_step` (the newest the records know), the
// axis of the train/, ps/ and eval/ series too.
absl::Status WriteSampleScalars(const SystemSample& s, int64_t global_step, EventFileWriter* tb) {
  const int64_t n = global_step;
  absl::Status st;
  auto scalar = [&](const std::string& tag, double value) {
    if (st.ok()) st = tb->WriteScalar(tag, n, static_cast<double>(s.unix_micros) * 1e-6, value);
  };
  scalar("system/cpu_percent", s.cpu_percent);
  scalar("system/rss_mb", static_cast<double>(s.rss_bytes) / 1e6);
  for (const InterfaceSample& i : s.interfaces) {
    scalar(absl::StrCat("network/", i.name, "/rx_bytes_per_sec"), i.rx_bytes_per_sec);
    scalar(absl::StrCat("network/", i.name, "/tx_bytes_per_sec"), i.tx_bytes_per_sec);
    scalar(absl::StrCat("network/", i.name, "/rx_packets_per_sec"), i.rx_packets_per_sec);
    scalar(absl::StrCat("network/", i.name, "/tx_packets_per_sec"), i.tx_packets_per_sec);
  }
  if (st.ok()) st = WriteBreadthScalars(s, global_step, tb);
  return st;
}

}  // namespace

Profiler::Profiler(const ProfilerOptions& options) : options_(options) {}

Profiler::~Profiler() {
  if (sampler_ != nullptr) sampler_->Stop();  // its final sample publishes the final figures
  if (exporter_ != nullptr && options_.metrics_linger > absl::ZeroDuration()) {
    spdlog::info(
        "metrics: /metrics on port {} stays up until scraped once more (at most {}, "
        "--metrics_linger_secs)",
        exporter_->port(), absl::FormatDuration(options_.metrics_linger));
    if (!exporter_->WaitForNextScrape(options_.metrics_linger)) {
      spdlog::info("metrics: not scraped within {}; closing",
                   absl::FormatDuration(options_.metrics_linger));
    }
  }
}

absl::StatusOr<std::unique_ptr<Profiler>> Profiler::Start(const ProfilerOptions& options,
                                                          std::unique_ptr<ProcSource> source) {
  std::unique_ptr<Profiler> p(new Profiler(options));
  if (!options.task_dir.empty()) FULCRUM_RETURN_IF_ERROR(p->SetTaskDir(options.task_dir));
  if (!options.enabled) return p;
  if (options.metrics_port >= 0) {
    FULCRUM_ASSIGN_OR_RETURN(
        p->exporter_, MetricsExporter::Start(options.job, options.task_index, options.metrics_port,
                                             options.metrics_bind));
    spdlog::info("Prometheus metrics on port {} (/metrics)", p->exporter_->port());
  }
  const bool live = source == nullptr;
  if (live) source = LiveProcSource();
  p->sampler_ = std::make_unique<Sampler>(std::move(source), options.interval);
  if (live) {
    p->sampler_->SetGpus(LoadGpusOrSayWhyNot());
    p->sampler_->SetSocketReader(&ReadOwnTcpSockets);
  }
  Profiler* raw = p.get();
  p->sampler_->SetListener([raw](const SystemSample& s) { raw->OnSample(s); });
  FULCRUM_RETURN_IF_ERROR(p->sampler_->Start());
  return p;
}

absl::Status Profiler::SetTaskDir(const std::string& task_dir) {
  MutexLock tb_lock(&tb_mu_);
  if (!task_dir_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("profiler: task folder already set to ", task_dir_));
  }
  FULCRUM_RETURN_IF_ERROR(MakeDirs(task_dir, "task folder"));
  if (options_.enabled) {
    FULCRUM_ASSIGN_OR_RETURN(EventFileWriter writer, EventFileWriter::Create(task_dir));
    tb_ = std::make_unique<EventFileWriter>(std::move(writer));
    WritePendingGraph();
  }
  task_dir_ = task_dir;
  return absl::OkStatus();
}

void Profiler::SetGraph(std::string graph_def) {
  if (!options_.enabled) return;
  MutexLock tb_lock(&tb_mu_);
  if (tb_graph_set_) return;
  tb_graph_set_ = true;
  tb_graph_ = std::move(graph_def);
  if (tb_ != nullptr) WritePendingGraph();
}

void Profiler::WritePendingGraph() {
  if (tb_graph_.empty()) return;
  absl::Status st =
      tb_->WriteGraph(tb_graph_, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  // Flushed at once: a TensorBoard reading the live file shows the graph before any sample.
  if (st.ok()) st = tb_->Flush();
  tb_graph_.clear();
  if (!st.ok()) {
    spdlog::warn("TensorBoard events: {}; no more events are written", st.ToString());
    tb_.reset();
  }
}

std::string Profiler::task_dir() const {
  MutexLock tb_lock(&tb_mu_);
  return task_dir_;
}

int Profiler::metrics_port() const { return exporter_ != nullptr ? exporter_->port() : -1; }

void Profiler::OnRpc(const RpcEvent& e) {
  traffic_.Add(*e.peer, e.method, e.bytes_sent, e.bytes_received);
  if (!options_.enabled) return;
  MutexLock lock(&mu_);
  if (rpc_spans_.size() < kMaxRpcSpans) {
    rpc_spans_.push_back({*e.peer, e.method, e.begin_unix_us, e.duration_us});
  } else {
    ++rpc_spans_dropped_;
  }
}

void Profiler::RecordStep(const StepRecord& r) {
  if (exporter_ != nullptr) {
    exporter_->OnStep(r.step, r.global_step, r.examples, r.loss, ExamplesPerSec(r));
  }
  MutexLock lock(&mu_);
  steps_.push_back(r);
}

void Profiler::RecordPs(const PsRecord& r) {
  if (exporter_ != nullptr) {
    exporter_->OnPs(r.global_step, r.pushes_applied, r.pushes_dropped);
    exporter_->OnStraggler(r.straggler_worker, r.straggler_held_back_ms);
  }
  MutexLock lock(&mu_);
  ps_records_.push_back(r);
}

void Profiler::RecordWatchdog(const std::string& task, double stuck_seconds) {
  if (exporter_ != nullptr) exporter_->OnWatchdog(task, stuck_seconds);
}

void Profiler::RecordEval(const EvalRecord& r) {
  if (exporter_ != nullptr) exporter_->OnEval(r.global_step, r.accuracy, r.loss);
  MutexLock lock(&mu_);
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
  MutexLock tb_lock(&tb_mu_);
  if (tb_ != nullptr) WriteTensorBoard(s);
  if (!task_dir_.empty() && options_.flush_interval > absl::ZeroDuration() &&
      RewriteDue(absl::Now(), last_flush_, flush_cost_, options_.flush_interval)) {
    FlushRecords();
  }
}

bool RewriteDue(absl::Time now, absl::Time last, absl::Duration cost, absl::Duration interval) {
  return now - last >= std::max(interval, cost * kRewriteCostRatio);
}

void Profiler::FlushRecords() {
  const absl::Time begin = absl::Now();
  const bool trace_due = RewriteDue(begin, last_trace_flush_, trace_flush_cost_,
                                    options_.flush_interval * kTraceFlushFactor);
  TraceInput records;
  int64_t rpc_spans_dropped = 0;
  if (!TakeRecords(&records, &rpc_spans_dropped, /*copy=*/true, /*rpc_spans=*/trace_due)) {
    return;  // Finish is on
  }
  records.samples = Samples();
  nlohmann::json partial = {{"job", options_.job}, {"task_index", options_.task_index},
                            {"partial", true},     {"profile", "on"},
                            {"host", HostName()},  {"pid", static_cast<int64_t>(getpid())}};
  partial.update(ProfileKeys(records, rpc_spans_dropped));
  const std::filesystem::path dir(task_dir_);
  absl::Status s = WriteCsvFiles(task_dir_, records.job, records.samples, records.steps,
                                 records.ps_records, records.evals);
  if (s.ok()) s = WriteFileAtomically(dir / "summary.json", partial.dump(2) + "\n");
  last_flush_ = absl::Now();
  flush_cost_ = last_flush_ - begin;
  if (s.ok() && trace_due) {
    s = WriteTrace(records, (dir / "trace.json").string());
    last_trace_flush_ = absl::Now();
    trace_flush_cost_ = last_trace_flush_ - last_flush_;
  }
  if (!s.ok() && !flush_failed_) {
    spdlog::warn("profiler: the records so far could not be written: {}", s.ToString());
  }
  flush_failed_ = !s.ok();
}

void Profiler::WriteTensorBoard(const SystemSample& s) {
  // The records since the last sample, copied so the training thread is not held up by the
  // file writes below.
  std::vector<StepRecord> steps;
  std::vector<PsRecord> ps;
  std::vector<EvalRecord> evals;
  {
    MutexLock lock(&mu_);
    steps = Since(steps_, tb_steps_written_);
    ps = Since(ps_records_, tb_ps_written_);
    evals = Since(evals_, tb_evals_written_);
  }
  tb_steps_written_ += steps.size();
  tb_ps_written_ += ps.size();
  tb_evals_written_ += evals.size();
  for (const StepRecord& r : steps) tb_global_step_ = std::max(tb_global_step_, r.global_step);
  for (const PsRecord& r : ps) tb_global_step_ = std::max(tb_global_step_, r.global_step);
  for (const EvalRecord& r : evals) tb_global_step_ = std::max(tb_global_step_, r.global_step);
  absl::Status st = WriteRecordScalars(steps, ps, evals, tb_.get());
  if (st.ok()) st = WriteSampleScalars(s, tb_global_step_, tb_.get());
  if (st.ok()) st = tb_->Flush();
  if (!st.ok()) {
    spdlog::warn("TensorBoard events: {}; no more events are written", st.ToString());
    tb_.reset();
  }
}

std::string Profiler::CloseTensorBoard() {
  MutexLock tb_lock(&tb_mu_);
  if (tb_ != nullptr) {
    if (absl::Status s = tb_->Close(); !s.ok())
      spdlog::warn("TensorBoard events: {}", s.ToString());
    tb_.reset();
  }
  return task_dir_;
}

bool Profiler::TakeRecords(TraceInput* records, int64_t* rpc_spans_dropped, bool copy,
                           bool rpc_spans) {
  records->job = options_.job;
  records->task_index = options_.task_index;
  MutexLock lock(&mu_);
  if (copy) {
    if (finished_) return false;
    records->steps = steps_;
    if (rpc_spans) records->rpc_spans = rpc_spans_;
    records->ps_records = ps_records_;
    records->evals = evals_;
  } else {
    records->steps = std::move(steps_);
    records->rpc_spans = std::move(rpc_spans_);
    records->ps_records = std::move(ps_records_);
    records->evals = std::move(evals_);
  }
  *rpc_spans_dropped = rpc_spans_dropped_;
  return true;
}

nlohmann::json Profiler::ProfileKeys(const TraceInput& records, int64_t rpc_spans_dropped) const {
  const std::vector<InterfaceTotals> interfaces =
      sampler_ != nullptr ? sampler_->Totals() : std::vector<InterfaceTotals>{};
  const std::vector<ConnectionTotals> connections =
      sampler_ != nullptr ? sampler_->Connections() : std::vector<ConnectionTotals>{};
  const std::vector<RpcTrafficPoint> traffic = traffic_.Snapshot();
  SummaryInput in;
  in.job_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  in.system_information = SystemInformation();
  in.samples = records.samples;
  in.interfaces = interfaces;
  in.connections = connections;
  in.traffic = traffic;
  in.steps = records.steps;
  in.ps_records = records.ps_records;
  in.trace_rpc_spans_dropped = rpc_spans_dropped;
  in.trace_steps_dropped = records.steps.size() > kMaxTraceSteps
                               ? static_cast<int64_t>(records.steps.size() - kMaxTraceSteps)
                               : 0;
  return SummaryKeys(in);
}

std::string FewSamplesWarning(size_t samples, absl::Duration interval) {
  if (samples >= kFewSamples) return "";
  // The interval that would have given kFewSamples over the same time, at least 10 ms.
  const int64_t ms = absl::ToInt64Milliseconds(interval);
  const int64_t better =
      std::max<int64_t>(10, ms * static_cast<int64_t>(std::max<size_t>(samples, 1)) /
                                static_cast<int64_t>(kFewSamples));
  return absl::StrCat("only ", samples, " system samples at --profile_interval_ms=", ms,
                      ": the CPU, memory and network series of this run say little; run "
                      "longer or sample more often (e.g. --profile_interval_ms=",
                      better, ")");
}

absl::Status Profiler::Finish(nlohmann::json* summary) {
  {
    MutexLock lock(&mu_);
    if (finished_) return absl::FailedPreconditionError("Profiler::Finish called twice");
    finished_ = true;
  }
  // The host and process id tell a reader which tasks share a process (worker 0 as the chief).
  nlohmann::json keys = {{"profile", options_.enabled ? "on" : "off"},
                         {"host", HostName()},
                         {"pid", static_cast<int64_t>(getpid())}};
  std::string task_dir;
  TraceInput records;
  if (options_.enabled) {
    sampler_->Stop();  // its final sample also writes the last TensorBoard events
    task_dir = CloseTensorBoard();
    int64_t rpc_spans_dropped = 0;
    TakeRecords(&records, &rpc_spans_dropped);
    records.samples = Samples();
    keys.update(ProfileKeys(records, rpc_spans_dropped));
    if (const std::string w = FewSamplesWarning(records.samples.size(), options_.interval);
        !w.empty()) {
      spdlog::log(options_.warn_few_samples ? spdlog::level::warn : spdlog::level::debug,
                  "profiler: {}", w);
      keys["sampling_warning"] = w;
    }
  }
  if (const std::vector<std::string> both = MergeNewKeys(keys, summary); !both.empty()) {
    spdlog::error("summary keys written by both the task and its profiler (the task's kept): {}",
                  absl::StrJoin(both, ", "));
  }
  if (task_dir.empty()) return absl::OkStatus();
  FULCRUM_RETURN_IF_ERROR(WriteCsvFiles(task_dir, records.job, records.samples, records.steps,
                                        records.ps_records, records.evals));
  return WriteTrace(records, (std::filesystem::path(task_dir) / "trace.json").string());
}

}  // namespace fulcrum::profiler
