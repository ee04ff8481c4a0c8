#include "profiler/csv_sink.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

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

}  // namespace

std::string SamplesCsv(absl::Span<const SystemSample> samples) {
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
    AppendSampleCells(s, cores, ifaces, &out);
    out += "\n";
  }
  return out;
}

std::string WorkerStepsCsv(absl::Span<const StepRecord> steps) {
  std::string out =
      "step,global_step,examples,loss,begin_unix_us,wall_ms,data_ms,pull_ms,forward_ms,"
      "backward_ms,push_ms,sync_wait_ms,examples_per_sec\n";
  for (const StepRecord& r : steps) {
    absl::StrAppend(&out, r.step, ",", r.global_step, ",", r.examples, ",", Fixed(r.loss, 6), ",",
                    r.begin_unix_us, ",", Fixed(r.wall_ms), ",", Fixed(r.data_ms), ",",
                    Fixed(r.pull_ms), ",", Fixed(r.forward_ms), ",", Fixed(r.backward_ms), ",",
                    Fixed(r.push_ms), ",", Fixed(r.sync_wait_ms), ",", Fixed(ExamplesPerSec(r), 1),
                    "\n");
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
