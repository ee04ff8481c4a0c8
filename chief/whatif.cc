#include "chief/whatif.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "chief/json_fields.h"
#include "chief/report.h"
#include "ops/tensor.h"
#include "runtime/cluster/placement.h"

namespace fulcrum::chief {
namespace {

// What one cluster looks like to the model.
struct Cluster {
  int workers = 0;
  int ps = 0;
  runtime::PlacementStrategy strategy = runtime::PlacementStrategy::kRoundRobin;
  double wire_factor = 1.0;  // bytes on the wire per float32 byte (0.5: bf16, fp16)
  double link_bits = 0.0;    // per direction; 0: unknown
  double burst_bytes = 0.0;  // at the rate's start
  // Sync: a step's pushes all arrive before its values go back, so a link carries one
  // direction and then the other; async workers keep both directions busy at once.
  bool sync = false;
};

// The run's records the model reads.
struct Run {
  Cluster cluster;
  double batch = 0;
  double examples_per_sec = 0;
  double step_ms = 0;                            // workers x batch / examples_per_sec
  double compute_ms = 0;                         // the workers' mean data + forward + backward
  std::vector<runtime::VariableInfo> variables;  // as float32 tensors of their bytes
  int64_t partition_min_bytes = 256 << 10;
  std::map<std::string, std::string> host_of;  // "worker-0" -> host
  double ps_cpu_seconds = 0;                   // all ps tasks
  double rounds = 0;                           // pushes applied / workers
  double host_cpus = 1.0;
};

// The model variables of the placement table, in the model's order (each row's "source"; an
// older report without it: the table's order), slices "<name>/part_<i>" merged back.
std::vector<runtime::VariableInfo> Variables(const nlohmann::json& table) {
  std::map<std::string, int64_t> bytes;
  std::map<std::string, double> order;  // name -> source (or first row)
  for (const nlohmann::json& row : table) {
    if (!row.is_object()) continue;
    std::string name = Str(row, "variable");
    if (auto cut = name.rfind("/part_"); cut != std::string::npos) name.resize(cut);
    order.try_emplace(name, Num(row, "source", static_cast<double>(order.size())));
    bytes[name] += static_cast<int64_t>(Num(row, "bytes"));
  }
  std::vector<std::pair<double, std::string>> sorted;
  for (const auto& [name, source] : order) sorted.emplace_back(source, name);
  std::sort(sorted.begin(), sorted.end());
  std::vector<runtime::VariableInfo> out;
  for (const auto& [source, name] : sorted) {
    out.push_back({name, ops::Shape({std::max<int64_t>(1, bytes[name] / 4)})});
  }
  return out;
}

double WireFactor(const std::string& dtype) { return dtype == "bf16" || dtype == "fp16" ? 0.5 : 1; }

absl::Status Missing(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat("what-if needs ", what));
}

// The workers' mean compute per step, from their step phases.
absl::StatusOr<double> ComputeMs(const nlohmann::json& workers) {
  double sum = 0;
  int n = 0;
  for (const nlohmann::json& w : workers.is_array() ? workers : nlohmann::json::array()) {
    const nlohmann::json phases =
        w.is_object() ? w.value("step_phase_mean_ms", nlohmann::json()) : nlohmann::json();
    if (!phases.is_object()) continue;
    sum += Num(phases, "data") + Num(phases, "forward") + Num(phases, "backward");
    ++n;
  }
  if (n == 0) {
    return Missing(
        "the workers' step phases (step_phase_mean_ms in their summaries): the run was not "
        "profiled (--profile=off) or no worker summary reached the chief");
  }
  return sum / n;
}

double ModelBytes(const Run& run) {
  double bytes = 0;
  for (const auto& v : run.variables) bytes += 4.0 * static_cast<double>(v.shape.num_elements());
  return bytes;
}

absl::StatusOr<Run> ReadRun(const nlohmann::json& r, const WhatIfOptions& options) {
  Run run;
  const nlohmann::json ps = r.value("ps", nlohmann::json());
  if (!ps.is_array() || ps.empty() || Num(r, "num_ps") < 1) {
    return Missing("ps tasks (report.json has no ps summaries: a single-mode run?)");
  }
  const nlohmann::json table = r.value("placement_table", nlohmann::json());
  if (!table.is_array() || table.empty()) return Missing("the placement table (placement_table)");
  run.cluster.workers = static_cast<int>(Num(r, "num_workers"));
  run.cluster.ps = static_cast<int>(Num(r, "num_ps"));
  std::string error;
  if (!runtime::AbslParseFlag(Str(r, "placement"), &run.cluster.strategy, &error)) {
    return Missing(absl::StrCat("a known placement (report.json's placement: ", error, ")"));
  }
  run.cluster.wire_factor = WireFactor(Str(r, "wire_dtype"));
  run.cluster.sync = Str(r, "mode") == "sync";
  run.cluster.link_bits = options.link_bits_per_sec;
  run.cluster.burst_bytes = options.link_burst_bytes;
  run.batch = Num(r, "batch_size");
  // The workers' steady-state rates (warm-up left out), as their step phases are.
  run.examples_per_sec = Num(r, "workers_examples_per_sec");
  if (run.cluster.workers < 1 || run.batch <= 0 || run.examples_per_sec <= 0) {
    return Missing(
        "the run's throughput (num_workers, batch_size and workers_examples_per_sec > 0)");
  }
  run.step_ms = 1000.0 * run.cluster.workers * run.batch / run.examples_per_sec;
  auto compute = ComputeMs(r.value("workers", nlohmann::json::array()));
  if (!compute.ok()) return compute.status();
  run.compute_ms = *compute;
  run.variables = Variables(table);
  if (ModelBytes(run) <= 0) return Missing("the placement table's variables and their bytes");
  for (const nlohmann::json& s : ps) {
    if (!s.is_object() || !s.contains("cpu_seconds")) {
      return Missing("every ps task's CPU time (cpu_seconds: the run was not profiled?)");
    }
    run.ps_cpu_seconds += Num(s, "cpu_seconds");
  }
  run.rounds = Num(r, "pushes_applied") / run.cluster.workers;
  if (run.rounds <= 0) return Missing("applied pushes (pushes_applied > 0)");
  const nlohmann::json hosts = r.value("hosts", nlohmann::json::array());
  for (const nlohmann::json& h : hosts.is_array() ? hosts : nlohmann::json::array()) {
    const nlohmann::json tasks = h.is_object() ? h.value("tasks", nlohmann::json()) : nullptr;
    if (!tasks.is_array()) continue;
    for (const nlohmann::json& t : tasks) {
      if (t.is_string()) run.host_of[t.get<std::string>()] = Str(h, "host");
    }
  }
  run.host_cpus = options.host_cpus > 0 ? options.host_cpus : 1.0;
  return run;
}

// The host of a task; one a run did not have gets a host of its own.
std::string HostOf(const Run& run, const std::string& task) {
  auto it = run.host_of.find(task);
  return it != run.host_of.end() ? it->second : "new:" + task;
}

// Each ps's share of the model's bytes under `c`'s placement.
absl::StatusOr<std::vector<double>> Shares(const Run& run, const Cluster& c) {
  auto placement =
      runtime::PlaceVariables(run.variables, c.ps, c.strategy, run.partition_min_bytes);
  if (!placement.ok()) return placement.status();
  FULCRUM_RETURN_IF_ERROR(runtime::CheckEveryPsHoldsSomething(*placement, run.partition_min_bytes));
  double total = 0;
  std::vector<double> shares;
  for (int p = 0; p < c.ps; ++p) {
    shares.push_back(static_cast<double>(placement->shard_bytes(p)));
    total += shares.back();
  }
  for (double& s : shares) s = total > 0 ? s / total : 0;
  return shares;
}

// The shared resources' time per step under `c`, in ms.
struct Resources {
  double link_ms = 0;   // on a step's critical path: the bytes beyond the links' bursts
  double bound_ms = 0;  // the busiest link's bytes at its rate: no step is shorter
  double ps_ms = 0;     // the busiest ps's CPU
  double critical() const { return std::max(link_ms, ps_ms); }
};

absl::StatusOr<Resources> ResourceMs(const Run& run, const Cluster& c) {
  auto shares = Shares(run, c);
  if (!shares.ok()) return shares.status();
  const double wire_bytes = ModelBytes(run) * c.wire_factor;  // each way, per worker step
  std::map<std::string, double> out;                          // bytes per step per host
  for (int w = 0; w < c.workers; ++w) {
    const std::string wh = HostOf(run, absl::StrCat("worker-", w));
    for (int p = 0; p < c.ps; ++p) {
      const std::string ph = HostOf(run, absl::StrCat("ps-", p));
      if (wh == ph) continue;                // over loopback
      out[wh] += (*shares)[p] * wire_bytes;  // its push out (its pull reply in: the same)
      out[ph] += (*shares)[p] * wire_bytes;  // the reply out (the push in)
    }
  }
  Resources r;
  if (c.link_bits > 0) {
    for (const auto& [host, bytes] : out) {
      // A step's bytes beyond the burst wait for the rate, one direction after the other in
      // sync (the pushes are in before the values go back), both at once in async.
      const double excess = std::max(0.0, bytes - c.burst_bytes) * (c.sync ? 2 : 1);
      r.link_ms = std::max(r.link_ms, 8000.0 * excess / c.link_bits);
      r.bound_ms = std::max(r.bound_ms, 8000.0 * bytes / c.link_bits);
    }
  }
  // The ps tasks' CPU per round of pushes, per float32 value they handle, at the run's
  // figures. Per value, not per wire byte: a 16-bit wire halves the bytes a ps copies but adds
  // the conversion of every value (checked: bench/whatif_check.py, docs/profiler.md).
  const double run_bytes = run.cluster.workers * ModelBytes(run);
  const double cpu_per_byte = run.ps_cpu_seconds / run.rounds / run_bytes;
  for (int p = 0; p < c.ps; ++p) {
    const double cpu = cpu_per_byte * c.workers * (*shares)[p] * ModelBytes(run);
    r.ps_ms = std::max(r.ps_ms, 1000.0 * cpu / run.host_cpus);
  }
  return r;
}

}  // namespace

namespace {

// The run's communication split: the fixed part, and the share of the busiest resource's time
// the steps do wait for (1 unless the overlap hides some).
struct Calibration {
  double fixed_ms = 0;
  double exposed = 1;
  double resource_ms = 0;
};

Calibration Calibrate(const Run& run, double resource_ms) {
  Calibration cal;
  cal.resource_ms = resource_ms;
  const double comm_ms = std::max(0.0, run.step_ms - run.compute_ms);
  if (comm_ms >= resource_ms) {
    cal.fixed_ms = comm_ms - resource_ms;
  } else {
    cal.exposed = comm_ms / resource_ms;
  }
  return cal;
}

struct Scenario {
  std::string name;
  std::string change;
  Cluster cluster;
  std::string skip;  // why it cannot be predicted; empty: it can
};

std::vector<Scenario> Scenarios(const Run& run) {
  const Cluster& c = run.cluster;
  std::vector<Scenario> out;
  Cluster more_ps = c;
  more_ps.ps += 1;
  out.push_back(
      {"one_more_ps", absl::StrCat("--ps ", c.ps + 1, " (on a host of its own)"), more_ps, ""});
  const std::string no_rate = c.link_bits > 0 ? "" : "the link rate is not known (--link_rate)";
  Cluster fast = c, slow = c;
  fast.link_bits *= 2;
  slow.link_bits /= 2;
  out.push_back({"link_2x", "links at twice the rate", fast, no_rate});
  out.push_back({"link_half", "links at half the rate", slow, no_rate});
  Cluster bf16 = c;
  bf16.wire_factor = 0.5;
  out.push_back({"wire_bf16", "--wire_dtype=bf16", bf16,
                 c.wire_factor < 1 ? "the run already sends 16-bit values" : ""});
  for (auto s : {runtime::PlacementStrategy::kRoundRobin, runtime::PlacementStrategy::kGreedy,
                 runtime::PlacementStrategy::kPartition}) {
    if (s == c.strategy) continue;
    Cluster placed = c;
    placed.strategy = s;
    out.push_back({absl::StrCat("placement_", runtime::PlacementName(s)),
                   absl::StrCat("--placement=", runtime::PlacementName(s)), placed,
                   c.ps < 2 ? "one ps: every placement puts everything on it" : ""});
  }
  Cluster twice = c;
  twice.workers *= 2;
  out.push_back({"workers_2x",
                 absl::StrCat("--workers ", 2 * c.workers, " (each on a host of its own)"), twice,
                 ""});
  return out;
}

}  // namespace

absl::StatusOr<nlohmann::json> PredictWhatIf(const nlohmann::json& report,
                                             const WhatIfOptions& options) {
  if (!report.is_object()) return Missing("a report.json object");
  auto run = ReadRun(report, options);
  if (!run.ok()) return run.status();
  auto base = ResourceMs(*run, run->cluster);
  if (!base.ok()) return base.status();
  const Calibration cal = Calibrate(*run, base->critical());
  nlohmann::json out;
  out["run"] = {
      {"step_ms", run->step_ms},
      {"compute_ms", run->compute_ms},
      {"link_ms", base->link_ms},
      {"link_bound_ms", base->bound_ms},
      {"ps_cpu_ms", base->ps_ms},
      {"fixed_ms", cal.fixed_ms},
      {"exposed", cal.exposed},
      {"examples_per_sec", run->examples_per_sec},
      {"link_bits_per_sec",
       run->cluster.link_bits > 0 ? nlohmann::json(run->cluster.link_bits) : nlohmann::json()},
      {"link_burst_bytes", run->cluster.burst_bytes},
      {"host_cpus", run->host_cpus}};
  out["scenarios"] = nlohmann::json::array();
  out["skipped"] = nlohmann::json::array();
  nlohmann::json best;
  for (const Scenario& s : Scenarios(*run)) {
    if (!s.skip.empty()) {
      out["skipped"].push_back({{"name", s.name}, {"why", s.skip}});
      continue;
    }
    auto t = ResourceMs(*run, s.cluster);
    if (!t.ok()) {  // e.g. a placement that leaves a ps empty: the run would be refused
      out["skipped"].push_back({{"name", s.name}, {"why", t.status().message()}});
      continue;
    }
    const double step =
        std::max(run->compute_ms + cal.fixed_ms + cal.exposed * t->critical(), t->bound_ms);
    const double rate = 1000.0 * s.cluster.workers * run->batch / step;
    nlohmann::json row = {{"name", s.name},
                          {"change", s.change},
                          {"step_time_ms", step},
                          {"examples_per_sec", rate},
                          {"speedup", rate / run->examples_per_sec}};
    if (best.is_null() || row["speedup"].get<double>() > best["speedup"].get<double>()) best = row;
    out["scenarios"].push_back(std::move(row));
  }
  // A change helps when it gains more than the model's resolution (a few percent).
  out["most_useful"] =
      !best.is_null() && best["speedup"].get<double>() > 1.03 ? best["name"] : nlohmann::json();
  return out;
}

std::vector<std::string> WhatIfLines(const nlohmann::json& w) {
  std::vector<std::string> lines;
  if (!w.is_object()) return lines;
  if (w.contains("error")) return {absl::StrCat("what-if: none (", Str(w, "error"), ")")};
  const nlohmann::json run = w.value("run", nlohmann::json());
  lines.push_back(absl::StrFormat(
      "what-if (from this run: step %.2f ms = compute %.2f + fixed %.2f + exposed share %.2f of "
      "link %.2f / ps CPU %.2f ms):",
      Num(run, "step_ms"), Num(run, "compute_ms"), Num(run, "fixed_ms"), Num(run, "exposed"),
      Num(run, "link_ms"), Num(run, "ps_cpu_ms")));
  for (const nlohmann::json& s : w.value("scenarios", nlohmann::json::array())) {
    lines.push_back(absl::StrFormat("  %-22s %10.0f examples/s  step %8.2f ms  x%.2f",
                                    Str(s, "name"), Num(s, "examples_per_sec"),
                                    Num(s, "step_time_ms"), Num(s, "speedup")));
  }
  for (const nlohmann::json& s : w.value("skipped", nlohmann::json::array())) {
    lines.push_back(absl::StrFormat("  %-22s not predicted: %s", Str(s, "name"), Str(s, "why")));
  }
  const nlohmann::json best = w.value("most_useful", nlohmann::json());
  lines.push_back(best.is_string() ? "  most useful change: " + best.get<std::string>()
                                   : std::string("  most useful change: none gains over 3%"));
  return lines;
}

absl::Status PrintWhatIf(const std::filesystem::path& path, const WhatIfOptions& options,
                         bool json) {
  FULCRUM_ASSIGN_OR_RETURN(const auto read, ReadReport("--whatif", path));
  const auto& [file, report] = read;
  absl::StatusOr<nlohmann::json> w = PredictWhatIf(report, options);
  if (!w.ok()) {
    return absl::Status(w.status().code(), absl::StrCat(file.string(), ": ", w.status().message()));
  }
  if (json) {
    std::printf("%s\n", w->dump(2).c_str());
  } else {
    for (const std::string& line : WhatIfLines(*w)) std::printf("%s\n", line.c_str());
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::chief
