#include "profiler/csv_sink.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/status_macros.h"

namespace fulcrum::profiler {
namespace {

// A figure with `digits` decimals; an empty cell for NaN and infinities (CSV readers take
// "nan" as text).
std::string Fixed(double v, int digits = 3) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

double ExamplesPerSec(const StepRecord& r) {
  return r.wall_ms > 0 ? static_cast<double>(r.examples) * 1000.0 / r.wall_ms : 0.0;
}

// One sample's cells after the fixed columns: `cores` core columns, then six per interface.
void AppendSampleCells(const SystemSample& s, size_t cores, const std::vector<std::string>& ifaces,
                       std::string* out) {
  for (size_t c = 0; c < cores; ++c) {
    absl::StrAppend(out, ",", c < s.core_percent.size() ? Fixed(s.core_percent[c], 2) : "");
  }
  for (const std::string& name : ifaces) {
    auto it = std::find_if(s.interfaces.begin(), s.interfaces.end(),
                           [&](const InterfaceSample& i) { return i.name == name; });
    if (it == s.interfaces.end()) {
      *out += ",,,,,,";
      continue;
    }
    absl::StrAppend(out, ",", it->rx_bytes, ",", it->tx_bytes, ",", it->rx_packets, ",",
                    it->tx_packets, ",", Fixed(it->rx_bytes_per_sec, 1), ",",
                    Fixed(it->tx_bytes_per_sec, 1));
  }
}

// The columns after the interface groups, one value each, in this order (docs/profiler.md).
struct FixedColumn {
  const char* name;
  std::string (*cell)(const SystemSample&);
};

template <typename T>
std::string Count(T v) {
  return absl::StrCat(v);
}

#define FULCRUM_COLUMN(name, expr)                   \
  {                                                  \
    name, [](const SystemSample& s) { return expr; } \
  }
const FixedColumn kBreadthColumns[] = {
    FULCRUM_COLUMN("cpu_user_percent", Fixed(s.cpu_user_percent, 2)),
    FULCRUM_COLUMN("cpu_system_percent", Fixed(s.cpu_system_percent, 2)),
    FULCRUM_COLUMN("voluntary_switches", Count(s.voluntary_switches)),
    FULCRUM_COLUMN("nonvoluntary_switches", Count(s.nonvoluntary_switches)),
    FULCRUM_COLUMN("voluntary_switches_per_s", Fixed(s.voluntary_switches_per_sec, 1)),
    FULCRUM_COLUMN("nonvoluntary_switches_per_s", Fixed(s.nonvoluntary_switches_per_sec, 1)),
    FULCRUM_COLUMN("io_read_bytes", Count(s.io_read_bytes)),
    FULCRUM_COLUMN("io_write_bytes", Count(s.io_write_bytes)),
    FULCRUM_COLUMN("io_read_bytes_per_s", Fixed(s.io_read_bytes_per_sec, 1)),
    FULCRUM_COLUMN("io_write_bytes_per_s", Fixed(s.io_write_bytes_per_sec, 1)),
    FULCRUM_COLUMN("host_cpu_user_percent", Fixed(s.host.cpu_user_percent, 2)),
    FULCRUM_COLUMN("host_cpu_system_percent", Fixed(s.host.cpu_system_percent, 2)),
    FULCRUM_COLUMN("host_cpu_iowait_percent", Fixed(s.host.cpu_iowait_percent, 2)),
    FULCRUM_COLUMN("host_cpu_idle_percent", Fixed(s.host.cpu_idle_percent, 2)),
    FULCRUM_COLUMN("host_mem_total_bytes", Count(s.host.mem_total_bytes)),
    FULCRUM_COLUMN("host_mem_used_bytes", Count(s.host.mem_used_bytes)),
    FULCRUM_COLUMN("host_mem_free_bytes", Count(s.host.mem_free_bytes)),
    FULCRUM_COLUMN("host_mem_available_bytes", Count(s.host.mem_available_bytes)),
    FULCRUM_COLUMN("host_mem_cached_bytes", Count(s.host.mem_cached_bytes)),
    FULCRUM_COLUMN("host_mem_buffers_bytes", Count(s.host.mem_buffers_bytes)),
    FULCRUM_COLUMN("host_load1", Fixed(s.host.load1, 2)),
    FULCRUM_COLUMN("host_load5", Fixed(s.host.load5, 2)),
    FULCRUM_COLUMN("host_load15", Fixed(s.host.load15, 2)),
    FULCRUM_COLUMN("host_context_switches", Count(s.host.context_switches)),
    FULCRUM_COLUMN("host_context_switches_per_s", Fixed(s.host.context_switches_per_sec, 1)),
    FULCRUM_COLUMN("host_tcp_in_segs", Count(s.host.tcp_in_segs)),
    FULCRUM_COLUMN("host_tcp_out_segs", Count(s.host.tcp_out_segs)),
    FULCRUM_COLUMN("host_tcp_retrans_segs", Count(s.host.tcp_retrans_segs)),
    FULCRUM_COLUMN("host_tcp_in_segs_per_s", Fixed(s.host.tcp_in_segs_per_sec, 1)),
    FULCRUM_COLUMN("host_tcp_out_segs_per_s", Fixed(s.host.tcp_out_segs_per_sec, 1)),
    FULCRUM_COLUMN("host_tcp_retrans_segs_per_s", Fixed(s.host.tcp_retrans_segs_per_sec, 1)),
    FULCRUM_COLUMN("host_disk_read_bytes", Count(s.host.disk_read_bytes)),
    FULCRUM_COLUMN("host_disk_write_bytes", Count(s.host.disk_write_bytes)),
    FULCRUM_COLUMN("host_disk_read_bytes_per_s", Fixed(s.host.disk_read_bytes_per_sec, 1)),
    FULCRUM_COLUMN("host_disk_write_bytes_per_s", Fixed(s.host.disk_write_bytes_per_sec, 1)),
};
#undef FULCRUM_COLUMN

// A thread name as a column-name part: characters other than [A-Za-z0-9_.-] become '_'
// (a comm may hold spaces, commas, anything).
std::string ColumnSafe(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      c = '_';
    }
  }
  return out;
}

// What the variable-width column groups are: every core, interface, thread name and GPU seen.
struct Layout {
  size_t cores = 0;
  std::vector<std::string> ifaces;
  std::vector<std::string> threads;
  int gpus = 0;
};

template <typename T>
void AddSeen(const T& value, std::vector<T>* seen) {
  if (std::find(seen->begin(), seen->end(), value) == seen->end()) seen->push_back(value);
}

Layout LayoutOf(absl::Span<const SystemSample> samples) {
  Layout l;
  for (const SystemSample& s : samples) {
    l.cores = std::max(l.cores, s.core_percent.size());
    for (const InterfaceSample& i : s.interfaces) AddSeen(i.name, &l.ifaces);
    for (const ThreadSample& t : s.threads) AddSeen(t.name, &l.threads);
    for (const GpuReading& g : s.gpus) l.gpus = std::max(l.gpus, g.index + 1);
  }
  return l;
}

std::string Header(const Layout& l) {
  std::string out = "time_s,unix_us,cpu_percent,cpu_seconds_total,rss_bytes,peak_rss_bytes";
  for (size_t c = 0; c < l.cores; ++c) absl::StrAppend(&out, ",core", c, "_percent");
  for (const std::string& i : l.ifaces) {
    absl::StrAppend(&out, ",", i, "_rx_bytes,", i, "_tx_bytes,", i, "_rx_packets,", i,
                    "_tx_packets,", i, "_rx_bytes_per_s,", i, "_tx_bytes_per_s");
  }
  for (const FixedColumn& c : kBreadthColumns) absl::StrAppend(&out, ",", c.name);
  for (const std::string& i : l.ifaces) {
    absl::StrAppend(&out, ",", i, "_rx_packets_per_s,", i, "_tx_packets_per_s,", i, "_rx_errors,",
                    i, "_tx_errors,", i, "_rx_drops,", i, "_tx_drops");
  }
  for (const std::string& t : l.threads) {
    const std::string n = ColumnSafe(t);
    absl::StrAppend(&out, ",thread_", n, "_count,thread_", n, "_user_percent,thread_", n,
                    "_system_percent");
  }
  for (int g = 0; g < l.gpus; ++g) {
    absl::StrAppend(&out, ",gpu", g, "_utilization_percent,gpu", g, "_memory_used_bytes,gpu", g,
                    "_memory_total_bytes,gpu", g, "_power_watts");
  }
  return out + "\n";
}

// The cells after the first interface groups: the fixed breadth columns, then the interface
// extras, threads and GPUs (empty cells where a sample lacks one).
void AppendBreadthCells(const SystemSample& s, const Layout& l, std::string* out) {
  for (const FixedColumn& c : kBreadthColumns) absl::StrAppend(out, ",", c.cell(s));
  for (const std::string& name : l.ifaces) {
    auto it = std::find_if(s.interfaces.begin(), s.interfaces.end(),
                           [&](const InterfaceSample& i) { return i.name == name; });
    if (it == s.interfaces.end()) {
      *out += ",,,,,,";
      continue;
    }
    absl::StrAppend(out, ",", Fixed(it->rx_packets_per_sec, 1), ",",
                    Fixed(it->tx_packets_per_sec, 1), ",", it->rx_errors, ",", it->tx_errors, ",",
                    it->rx_drops, ",", it->tx_drops);
  }
  for (const std::string& name : l.threads) {
    auto it = std::find_if(s.threads.begin(), s.threads.end(),
                           [&](const ThreadSample& t) { return t.name == name; });
    if (it == s.threads.end()) {
      *out += ",,,";
      continue;
    }
    absl::StrAppend(out, ",", it->threads, ",", Fixed(it->user_percent, 2), ",",
                    Fixed(it->system_percent, 2));
  }
  for (int g = 0; g < l.gpus; ++g) {
    auto it = std::find_if(s.gpus.begin(), s.gpus.end(),
                           [&](const GpuReading& r) { return r.index == g; });
    if (it == s.gpus.end()) {
      *out += ",,,,";
      continue;
    }
    absl::StrAppend(out, ",", Fixed(it->utilization_percent, 1), ",", it->memory_used_bytes, ",",
                    it->memory_total_bytes, ",",
                    it->power_watts >= 0 ? Fixed(it->power_watts, 1) : "");
  }
}

}  // namespace

std::string SamplesCsv(absl::Span<const SystemSample> samples) {
  const Layout layout = LayoutOf(samples);
  std::string out = Header(layout);
  for (const SystemSample& s : samples) {
    absl::StrAppend(&out, Fixed(s.seconds), ",", s.unix_micros, ",", Fixed(s.cpu_percent, 2), ",",
                    Fixed(s.cpu_seconds, 3), ",", s.rss_bytes, ",", s.peak_rss_bytes);
    AppendSampleCells(s, layout.cores, layout.ifaces, &out);
    AppendBreadthCells(s, layout, &out);
    out += "\n";
  }
  return out;
}

std::string WorkerStepsCsv(absl::Span<const StepRecord> steps) {
  std::string out =
      "step,global_step,examples,loss,begin_unix_us,wall_ms,data_ms,pull_ms,forward_ms,"
      "backward_ms,push_ms,sync_wait_ms,examples_per_sec,comm_wait_ms,inflight_begin_ms,"
      "inflight_ms,h2d_bytes,h2d_calls,d2h_bytes,d2h_calls,device_allocs\n";
  for (const StepRecord& r : steps) {
    absl::StrAppend(&out, r.step, ",", r.global_step, ",", r.examples, ",", Fixed(r.loss, 6), ",",
                    r.begin_unix_us, ",", Fixed(r.wall_ms), ",", Fixed(r.data_ms), ",",
                    Fixed(r.pull_ms), ",", Fixed(r.forward_ms), ",", Fixed(r.backward_ms), ",",
                    Fixed(r.push_ms), ",", Fixed(r.sync_wait_ms), ",", Fixed(ExamplesPerSec(r), 1),
                    ",", Fixed(r.comm_wait_ms), ",", Fixed(r.inflight_begin_ms), ",",
                    Fixed(r.inflight_ms), ",", r.h2d_bytes, ",", r.h2d_calls, ",", r.d2h_bytes, ",",
                    r.d2h_calls, ",", r.device_allocs, "\n");
  }
  return out;
}

std::string PsStepsCsv(absl::Span<const PsRecord> records) {
  std::string out =
      "unix_us,global_step,pushes_received,pushes_applied,pushes_dropped,pulls,bytes_pushed,"
      "bytes_pulled,apply_ms,wait_ms\n";
  for (const PsRecord& r : records) {
    absl::StrAppend(&out, r.unix_us, ",", r.global_step, ",", r.pushes_received, ",",
                    r.pushes_applied, ",", r.pushes_dropped, ",", r.pulls, ",", r.bytes_pushed, ",",
                    r.bytes_pulled, ",", Fixed(r.apply_ms), ",", Fixed(r.wait_ms), "\n");
  }
  return out;
}

std::string EvalStepsCsv(absl::Span<const EvalRecord> evals) {
  std::string out = "unix_us,global_step,test_accuracy,test_loss\n";
  for (const EvalRecord& r : evals) {
    absl::StrAppend(&out, r.unix_us, ",", r.global_step, ",",
                    r.accuracy >= 0 ? Fixed(r.accuracy, 5) : "", ",", Fixed(r.loss, 6), "\n");
  }
  return out;
}

absl::Status WriteCsvFiles(const std::string& dir, const std::string& job,
                           absl::Span<const SystemSample> samples,
                           absl::Span<const StepRecord> steps,
                           absl::Span<const PsRecord> ps_records,
                           absl::Span<const EvalRecord> evals) {
  const std::filesystem::path folder(dir);
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(folder / "samples.csv", SamplesCsv(samples)));
  std::string text;
  if (job == "worker") {
    text = WorkerStepsCsv(steps);
  } else if (job == "ps") {
    text = PsStepsCsv(ps_records);
  } else {
    text = EvalStepsCsv(evals);
  }
  return WriteFileAtomically(folder / RecordsCsvName(job), text);
}

const char* RecordsCsvName(const std::string& job) {
  if (job == "worker") return "steps.csv";
  if (job == "ps") return "progress.csv";
  return "evals.csv";
}

}  // namespace fulcrum::profiler
