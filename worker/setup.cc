#include "worker/setup.h"

#include "base/files.h"
#include "base/status_macros.h"
#include "models/registry.h"

namespace fulcrum::worker {

absl::StatusOr<std::unique_ptr<models::Model>> BuildModel(const runtime::TrainingOptions& t,
                                                          const data::Dataset& train,
                                                          ops::ThreadPool* pool) {
  return models::CreateBuiltinModel(t.model,
                                    {.input_size = train.example_size(),
                                     .num_classes = train.num_classes,
                                     .width = t.model_width},
                                    pool);
}

data::BatcherOptions BatcherOptionsFor(const runtime::TrainingOptions& t, int worker_index,
                                       int num_workers) {
  data::BatcherOptions options;
  options.batch_size = t.batch_size;
  options.worker_index = worker_index;
  options.num_workers = num_workers;
  options.seed = t.seed;
  options.subset = t.train_subset;
  options.repeat = t.dataset_repeat;
  return options;
}

absl::StatusOr<std::string> WriteSummary(profiler::Profiler* profiler, const RunStats& stats,
                                         nlohmann::json* summary,
                                         const std::filesystem::path& path) {
  FULCRUM_RETURN_IF_ERROR(profiler->Finish(summary));
  // After Finish: the run figures are this worker's to write, whatever the profiler adds.
  WriteRunStats(stats, summary);
  std::string text = summary->dump(2) + "\n";
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(path, text));
  return text;
}

}  // namespace fulcrum::worker
