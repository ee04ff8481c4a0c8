#include "profiler/monitor.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "profiler/csv_sink.h"
#include "profiler/host_info.h"
#include "profiler/nvml.h"
#include "profiler/proc_stats.h"
#include "profiler/sampler.h"
#include "profiler/summary.h"
#include "spdlog/spdlog.h"

namespace fulcrum::profiler {
namespace {

// A watched process: its sampler, and its name when it was first seen.
struct Watched {
  int pid = 0;
  std::string command;
  std::unique_ptr<Sampler> sampler;
  bool running = true;
};

// Whether /proc/PID is a live process (a zombie has exited: its figures are final).
bool Alive(int pid) {
  auto text = PidProcSource(pid)->Read("self/stat");
  if (!text.ok()) return false;
  const size_t close = text->rfind(')');
  return close != std::string::npos && close + 2 < text->size() && (*text)[close + 2] != 'Z' &&
         (*text)[close + 2] != 'X';
}

std::string CommandOf(int pid) {
  auto text = PidProcSource(pid)->Read("self/comm");
  if (!text.ok()) return "";
  std::string name = *text;
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

absl::Status Validate(const MonitorOptions& o) {
  if (o.pids.empty()) return absl::InvalidArgumentError("--watch_pids: no pid given");
  for (int pid : o.pids) {
    if (!Alive(pid)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--watch_pids: no running process ", pid, " (no /proc/", pid, ")"));
    }
  }
  if (o.run_dir.empty()) return absl::InvalidArgumentError("--run_dir: must name a folder");
  if (o.interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--interval_ms: must be positive");
  }
  if (o.max_duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--max_seconds: must be positive");
  }
  return absl::OkStatus();
}

// Writes one watched process's samples.csv and summary.json (each atomically).
absl::Status WriteFiles(const MonitorOptions& o, const Watched& w, absl::Time start, bool final) {
  const std::filesystem::path dir = std::filesystem::path(o.run_dir) / absl::StrCat("pid-", w.pid);
  FULCRUM_RETURN_IF_ERROR(MakeDirs(dir, "monitor folder"));
  const std::vector<SystemSample> samples = w.sampler->Samples();
  const std::vector<InterfaceTotals> totals = w.sampler->Totals();
  SummaryInput in;
  in.job_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  in.system_information = SystemInformation();
  in.samples = samples;
  in.interfaces = totals;
  nlohmann::json summary = SummaryKeys(in);
  summary["pid"] = w.pid;
  summary["command"] = w.command;
  summary["host"] = HostName();
  summary["monitor"] = true;
  if (!final) summary["partial"] = true;
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(dir / "samples.csv", SamplesCsv(samples)));
  return WriteFileAtomically(dir / "summary.json", summary.dump(2) + "\n");
}

absl::Status WriteAll(const MonitorOptions& o, const std::vector<Watched>& watched,
                      absl::Time start, bool final) {
  for (const Watched& w : watched) FULCRUM_RETURN_IF_ERROR(WriteFiles(o, w, start, final));
  return absl::OkStatus();
}

// Stops the samplers of processes that have exited; true while any still runs.
bool StopExited(std::vector<Watched>* watched) {
  bool any = false;
  for (Watched& w : *watched) {
    if (w.running && !Alive(w.pid)) {
      spdlog::info("monitor: process {} ({}) has exited", w.pid, w.command);
      w.sampler->Stop();
      w.running = false;
    }
    any = any || w.running;
  }
  return any;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParsePidList(const std::string& text) {
  std::vector<int> pids;
  std::set<int> seen;
  for (absl::string_view token : absl::StrSplit(text, ',')) {
    int pid = 0;
    if (!absl::SimpleAtoi(token, &pid) || pid <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--watch_pids=", text, ": '", token, "' is not a positive process id"));
    }
    if (!seen.insert(pid).second) {
      return absl::InvalidArgumentError(absl::StrCat("--watch_pids=", text, ": ", pid, " twice"));
    }
    pids.push_back(pid);
  }
  return pids;
}

absl::Status RunMonitor(const MonitorOptions& o, const std::function<bool()>& stop_requested) {
  FULCRUM_RETURN_IF_ERROR(Validate(o));
  FULCRUM_RETURN_IF_ERROR(MakeDirs(o.run_dir, "--run_dir"));
  const absl::Time start = absl::Now();
  std::vector<Watched> watched;
  std::unique_ptr<NvmlGpus> gpus = LoadGpusOrSayWhyNot();
  for (int pid : o.pids) {
    Watched w{pid, CommandOf(pid), std::make_unique<Sampler>(PidProcSource(pid), o.interval)};
    if (gpus != nullptr) w.sampler->SetGpus(std::move(gpus));  // host-wide: the first pid's
    FULCRUM_RETURN_IF_ERROR(w.sampler->Start());
    watched.push_back(std::move(w));
  }
  const absl::Time deadline = start + o.max_duration;
  absl::Time next_flush = start + o.flush_interval;
  const absl::Duration poll = std::min(o.interval, absl::Milliseconds(100));
  while (StopExited(&watched) && !stop_requested() && absl::Now() < deadline) {
    absl::SleepFor(poll);
    if (o.flush_interval > absl::ZeroDuration() && absl::Now() >= next_flush) {
      FULCRUM_RETURN_IF_ERROR(WriteAll(o, watched, start, /*final=*/false));
      next_flush += o.flush_interval;
    }
  }
  for (Watched& w : watched) w.sampler->Stop();
  return WriteAll(o, watched, start, /*final=*/true);
}

}  // namespace fulcrum::profiler
