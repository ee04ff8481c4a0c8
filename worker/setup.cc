#include "worker/setup.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "models/graph_def.h"
#include "models/registry.h"
#include "spdlog/spdlog.h"

namespace fulcrum::worker {

data::PipelineOptions PipelineFor(const runtime::TrainingOptions& t) {
  data::PipelineOptions pipeline;
  pipeline.kind = t.input_pipeline;
  pipeline.crop_size = t.crop_size;
  return pipeline;
}

absl::StatusOr<models::ModelConfig> ModelConfigFor(const runtime::TrainingOptions& t,
                                                   const data::Dataset& data) {
  FULCRUM_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                           data::PipelineExampleShape(data, PipelineFor(t)));
  int64_t size = 1;
  for (int64_t d : shape) size *= d;
  return models::ModelConfig{.input_size = size,
                             .num_classes = data.num_classes,
                             .width = t.model_width,
                             .input_shape = std::move(shape)};
}

absl::StatusOr<std::unique_ptr<models::Model>> BuildModel(const runtime::TrainingOptions& t,
                                                          const data::Dataset& train,
                                                          ops::ThreadPool* pool, int worker_index) {
  FULCRUM_ASSIGN_OR_RETURN(const models::ModelConfig config, ModelConfigFor(t, train));
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model,
                           models::CreateBuiltinModel(t.model, config, pool));
  model->set_seed(DeriveSeed(t.seed, NameHash(absl::StrCat("worker/", worker_index))));
  model->set_weight_decay_override(t.weight_decay);
  model->set_conv_algo(t.conv_algo);
  return model;
}

void SetModelGraph(const models::Model& model, const runtime::Placement* placement,
                   const std::string& device, profiler::Profiler* profiler) {
  absl::StatusOr<pb::tensorflow::GraphDef> graph =
      models::BuildGraphDef(model, models::OnPsTasks(placement, device));
  if (!graph.ok()) {
    spdlog::warn("TensorBoard graph: {}; the events file has none", graph.status().ToString());
    return;
  }
  profiler->SetGraph(graph->SerializeAsString());
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
  options.pipeline = PipelineFor(t);
  return options;
}

nlohmann::json KernelsJson(const std::vector<ops::KernelChoice>& choices) {
  auto direction = [](const ops::KernelChoice::Direction& d) {
    nlohmann::json j = {{"algo", d.algo}, {"onednn_impl", d.impl}};
    j["own_ms"] = d.own_ms >= 0 ? nlohmann::json(d.own_ms) : nlohmann::json();
    j["onednn_ms"] = d.onednn_ms >= 0 ? nlohmann::json(d.onednn_ms) : nlohmann::json();
    return j;
  };
  nlohmann::json out = nlohmann::json::array();
  for (const ops::KernelChoice& c : choices) {
    out.push_back({{"op", c.op},
                   {"layers", c.layers},
                   {"shape", c.shape},
                   {"forward_gflop", c.forward_gflop},
                   {"forward", direction(c.forward)},
                   {"backward_data", direction(c.backward_data)},
                   {"backward_filter", direction(c.backward_filter)},
                   {"filter_reorders", c.reorders},
                   {"filter_reorder_ms", c.reorder_ms},
                   {"onednn_unavailable", c.fallback}});
  }
  return out;
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
