// chief: the run's records (chief/chief.h): report.json and report.html from every task's
// summary (chief/report.h), and run_trace.json, every task's trace merged.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "chief/chief.h"
#include "chief/headline.h"
#include "chief/report.h"
#include "chief/report_html.h"
#include "chief/whatif.h"
#include "profiler/trace_merge.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {
namespace {

// <run_dir>/run_trace.json: every task's trace.json the chief can read there, merged
// (profiler/trace_merge.h). Tasks whose trace is elsewhere (another host's run directory)
// are logged; the run does not fail for its trace.
void WriteRunTrace(const runtime::ClusterSpec& cluster, const std::filesystem::path& run_dir) {
  std::vector<profiler::TraceTask> tasks;
  for (const auto& [job, addresses] : cluster.jobs()) {
    for (int i = 0; i < static_cast<int>(addresses.size()); ++i) tasks.push_back({job, i});
  }
  // Without a chief job, worker 0 runs chief:0 (TensorFlow 1.x's layout), with its own folder;
  // first, as in a spec with a chief.
  if (!cluster.has_chief_job()) tasks.insert(tasks.begin(), {runtime::kChiefJob, 0});
  const std::filesystem::path out = run_dir / "run_trace.json";
  absl::StatusOr<profiler::TraceMergeResult> merged =
      profiler::MergeRunTrace(run_dir.string(), tasks, out.string());
  if (!merged.ok()) {
    spdlog::warn("{} not written: {}", out.string(), merged.status().ToString());
    return;
  }
  for (const auto& [task, why] : merged->missing) {
    spdlog::warn("{}: no trace of {} ({}/trace.json: {})", out.string(), task, task, why);
  }
  spdlog::info("run trace: {} ({} of {} task(s), {} events)", out.string(), merged->merged.size(),
               tasks.size(), merged->events);
}

// Sync mode: each ps's verdict at the end on who held the steps back (ps/straggler.h), one
// row per ps that judged (null worker: none named).
nlohmann::json StragglerRows(const nlohmann::json& ps) {
  nlohmann::json rows = nlohmann::json::array();
  for (const nlohmann::json& s : ps) {
    if (!s.contains("straggler") || !s["straggler"].is_object()) continue;
    nlohmann::json row = s["straggler"];
    row["ps"] = absl::StrCat("ps:", s.value("task_index", 0));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

nlohmann::json Chief::ReplicationJson() const {
  if (!c_.replicate_shards) return nullptr;
  nlohmann::json replicas = nlohmann::json::array();
  for (int p = 0; p < placement_.num_ps(); ++p) {
    replicas.push_back({{"shard", absl::StrCat("ps:", p)},
                        {"backup", absl::StrCat("ps:", (p + 1) % placement_.num_ps())},
                        {"promoted", ps_ != nullptr && ps_->promoted(p)}});
  }
  return {{"replicas", std::move(replicas)},
          {"promotions", recovery_ != nullptr ? recovery_->promotions() : nlohmann::json::array()}};
}

void Chief::AddResultJson(nlohmann::json* out) const {
  nlohmann::json& j = *out;
  const bool sync = c_.mode == runtime::SyncMode::kSync;
  // A failed run has no final evaluation (and maybe none at all).
  j["failed"] = failed_;
  // Its evaluations so far stay in `evals`; none of them is the final one.
  const std::vector<Eval>& done = evaluator_->evals();
  const Eval last = done.empty() ? Eval{} : done.back();
  const bool final_eval = !done.empty() && !failed_;
  j["global_step"] = final_eval ? nlohmann::json(last.global_step) : nlohmann::json(nullptr);
  j["final_test_accuracy"] =
      final_eval && last.accuracy ? nlohmann::json(*last.accuracy) : nlohmann::json(nullptr);
  j["final_test_loss"] = final_eval ? nlohmann::json(last.loss) : nlohmann::json(nullptr);
  j["target_accuracy"] =
      c_.target_accuracy > 0 ? nlohmann::json(c_.target_accuracy) : nlohmann::json(nullptr);
  j["time_to_target_accuracy_seconds"] = evaluator_->time_to_target()
                                             ? nlohmann::json(*evaluator_->time_to_target())
                                             : nlohmann::json(nullptr);
  const double train_seconds = absl::ToDoubleSeconds(train_end_ - train_start_);
  j["train_seconds"] = train_seconds;
  j["wall_seconds"] = absl::ToDoubleSeconds(absl::Now() - process_start_);
  // Examples the applied updates of this run consumed (a resumed run counts from the step it
  // resumed at): one batch per async step, replicas_to_aggregate batches per sync step.
  const int64_t per_step = t_.batch_size * (sync ? c_.replicas_to_aggregate : 1);
  j["examples_per_sec"] =
      train_seconds > 0
          ? static_cast<double>((last.global_step - start_step_) * per_step) / train_seconds
          : 0.0;
  nlohmann::json evals = nlohmann::json::array();
  for (const Eval& e : done) {
    evals.push_back(
        {{"global_step", e.global_step},
         {"seconds", e.seconds},
         {"test_accuracy", e.accuracy ? nlohmann::json(*e.accuracy) : nlohmann::json(nullptr)},
         {"test_loss", e.loss}});
  }
  j["evals"] = evals;
}

nlohmann::json Chief::CheckpointJson() const {
  if (c_.checkpoint_dir.empty()) return nullptr;
  return {{"dir", c_.checkpoint_dir},
          {"saves", checkpointer_ ? checkpointer_->saves() : 0},
          {"last_step", checkpointer_ && checkpointer_->last_saved_step() >= 0
                            ? nlohmann::json(checkpointer_->last_saved_step())
                            : nlohmann::json(nullptr)},
          {"resumed_from", restored_ ? nlohmann::json(restored_->folder) : nlohmann::json(nullptr)},
          {"resumed_from_step",
           restored_ ? nlohmann::json(restored_->global_step) : nlohmann::json(nullptr)},
          {"refused", restored_ ? restored_->refused : std::vector<std::string>()},
          {"errors", checkpoint_errors_}};
}

nlohmann::json Chief::RunJson(const std::string& stop_reason) const {
  nlohmann::json j;
  const int num_workers = c_.task.cluster.num_tasks(runtime::kWorkerJob);
  const bool sync = c_.mode == runtime::SyncMode::kSync;
  j["run_id"] = run_id_;
  j["mode"] = runtime::ModeName(c_.mode);
  j["async_pull"] = runtime::AsyncPullName(c_);
  j["staleness_aware_lr"] = c_.staleness_aware_lr;
  j["model"] = t_.model;
  j["dataset"] = data::DatasetName(t_.dataset);
  j["optimizer"] = ops::OptimizerName(t_.optimizer.kind);
  j["learning_rate"] = runtime::ExactDecimal(t_.optimizer.learning_rate);
  runtime::AddTrainingSettings(t_, &j);
  j["num_parameters"] = evaluator_->model().num_parameters();
  j["batch_size"] = t_.batch_size;
  j["seed"] = t_.seed;
  j["placement"] = runtime::PlacementName(c_.placement);
  j["wire_dtype"] = runtime::WireDtypeName(c_.wire_dtype);
  j["num_ps"] = placement_.num_ps();
  j["num_workers"] = num_workers;
  j["replicas_to_aggregate"] =
      sync ? nlohmann::json(c_.replicas_to_aggregate) : nlohmann::json(nullptr);
  j["staleness"] =
      c_.mode == runtime::SyncMode::kSsp ? nlohmann::json(c_.staleness) : nlohmann::json(nullptr);
  // ssp: workers the ps tasks were told not to wait for any more (done, failed or lost).
  j["ssp_released_workers"] =
      c_.mode == runtime::SyncMode::kSsp
          ? nlohmann::json(std::vector<int>(roster_.released().begin(), roster_.released().end()))
          : nlohmann::json(nullptr);
  j["train_steps"] = train_steps_;
  j["stop_reason"] = stop_reason;
  // Workers that went silent past --heartbeat_timeout while the run went on without them.
  j["watchdog"] = watchdog_report_;
  j["workers_lost"] = std::vector<int>(roster_.lost().begin(), roster_.lost().end());
  // Each time ps tasks restarted and every ps went back to a checkpoint.
  j["ps_recoveries"] = recovery_ != nullptr ? recovery_->recoveries() : nlohmann::json::array();
  // --replicate_shards: where each shard's replica lives and each promotion (a ps lost).
  j["replication"] = ReplicationJson();
  // A chief restarted during the run took it over at this step.
  j["adopted"] = adopted_
                     ? nlohmann::json{{"run_id", adopted_->run_id}, {"at_step", adopted_->at_step}}
                     : nlohmann::json(nullptr);
  AddResultJson(&j);
  nlohmann::json placement = nlohmann::json::array();
  for (const auto& shard : placement_.shards) {
    for (const auto& v : shard) {
      placement.push_back(
          {{"variable", v.name}, {"ps", v.ps}, {"bytes", v.bytes()}, {"source", v.source}});
    }
  }
  j["placement_table"] = placement;
  j["checkpoint"] = CheckpointJson();
  j["placement_imbalance"] = placement_.imbalance();
  return j;
}

void Chief::AddWhatIf(nlohmann::json* report) const {
  absl::StatusOr<nlohmann::json> what = PredictWhatIf(*report, c_.hosts);
  (*report)["whatif"] = what.ok() ? *what : nlohmann::json{{"error", what.status().message()}};
}

absl::Status Chief::WriteReport(const std::string& stop_reason) {
  nlohmann::json j = RunJson(stop_reason);
  // The chief's own summary: the run figures and its profile.
  nlohmann::json own = j;
  own["job"] = c_.task.job_name;
  own["task_index"] = c_.task.task_index;
  FULCRUM_RETURN_IF_ERROR(prof_->Finish(&own));
  FULCRUM_RETURN_IF_ERROR(
      WriteFileAtomically(run_dir_ / c_.task.dir_name() / "summary.json", own.dump(2) + "\n"));

  nlohmann::json ps = nlohmann::json::array();
  int64_t received = 0, applied = 0, dropped = 0;
  // A task that sent no summary is named in "vanished_tasks"; what it left on disk, if the
  // chief can read its folder, stands in for its summary.
  std::vector<std::string> vanished;
  const absl::Time since = adopted_ ? absl::InfinitePast() : process_start_;
  auto left = [&](const std::string& job, int index) {
    vanished.push_back(absl::StrCat(job, ":", index));
    return LeftSummary(run_dir_ / absl::StrCat(job, "-", index), since);
  };
  for (size_t p = 0; p < ps_summaries_.size(); ++p) {
    nlohmann::json s = nlohmann::json::parse(ps_summaries_[p], nullptr, false);
    if (s.is_discarded() || !s.is_object()) {
      s = left("ps", static_cast<int>(p));
      spdlog::warn("no summary from ps:{}{}", p,
                   s.is_null() ? "" : "; its records on disk stand in");
      if (s.is_null()) continue;
    }
    received += s.value("pushes_received", int64_t{0});
    applied += s.value("pushes_applied", int64_t{0});
    dropped += s.value("pushes_dropped", int64_t{0});
    ps.push_back(std::move(s));
  }
  j["ps"] = ps;
  j["stragglers"] = StragglerRows(ps);
  j["pushes_received"] = received;
  j["pushes_applied"] = applied;
  j["pushes_dropped"] = dropped;
  nlohmann::json workers = nlohmann::json::array();
  double worker_rate = 0.0;
  const std::map<int, std::string> sent = coordinator_->summaries();
  for (const auto& [index, text] : sent) {
    nlohmann::json w = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (w.is_discarded()) continue;
    if (w.contains("examples_per_sec") && w["examples_per_sec"].is_number()) {
      worker_rate += w["examples_per_sec"].get<double>();
    }
    workers.push_back(std::move(w));
  }
  for (int w = 0; w < c_.task.cluster.num_tasks(runtime::kWorkerJob); ++w) {
    if (sent.count(w) != 0) continue;
    nlohmann::json s = left("worker", w);
    if (!s.is_null()) workers.push_back(std::move(s));
  }
  j["vanished_tasks"] = vanished;
  j["workers"] = workers;
  j["workers_examples_per_sec"] = worker_rate;  // sum of the workers' steady-state rates
  j["chief"] = own;
  AddClusterTables(&j);
  AddWhatIf(&j);
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(run_dir_ / "report.json", j.dump(2) + "\n"));
  // report.html is a view of report.json (chief/report_html.h): a run whose page cannot be
  // drawn still succeeded, and report.json keeps every figure.
  if (absl::Status html = WriteReportHtml(run_dir_ / "report.json", run_dir_ / "report.html");
      !html.ok()) {
    spdlog::warn("report.html not written ({}); report.json has every figure", html.ToString());
  }
  if (prof_->enabled()) WriteRunTrace(c_.task.cluster, run_dir_);
  // The run's headline, last in the chief's log.
  for (const std::string& line : HeadlineLines(j, (run_dir_ / "report.html").string())) {
    spdlog::info("{}", line);
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::chief
