// worker: the set-up single mode and cluster workers share: the model the flags name, built
// for the dataset's examples and its graph for TensorBoard; the batcher options of a worker's
// shard; the summary.json written last, with the run statistics and the profiler's keys.
// Thread-safety: pure functions (WriteSummary writes one file).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "models/model.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "ops/cpu/thread_pool.h"
#include "profiler/profiler.h"
#include "runtime/cluster/placement.h"
#include "runtime/config/flags.h"
#include "worker/run_stats.h"

namespace fulcrum::worker {

// The input pipeline --input_pipeline and --crop_size describe.
data::PipelineOptions PipelineFor(const runtime::TrainingOptions& t);

// What the model is built for: `data`'s examples as the input pipeline delivers them (shape
// and size), its classes, --model_width. InvalidArgument (naming the flag) when the pipeline
// does not fit the examples (see data::PipelineExampleShape).
absl::StatusOr<models::ModelConfig> ModelConfigFor(const runtime::TrainingOptions& t,
                                                   const data::Dataset& data);

// The model --model names (width --model_width) for `train`'s examples and classes, its
// kernels on `pool` (not owned; may be null), its random layers seeded from --seed and
// `worker_index`, --weight_decay in force. InvalidArgument for an unknown model or one that
// does not fit the examples (or a pipeline that does not fit them).
absl::StatusOr<std::unique_ptr<models::Model>> BuildModel(const runtime::TrainingOptions& t,
                                                          const data::Dataset& train,
                                                          ops::ThreadPool* pool,
                                                          int worker_index = 0);

// Hands `profiler` the graph of `model` (models/graph_def.h) for TensorBoard's graph tab: the
// layers on `device` (this task's TensorFlow device string, "/job:worker/task:1"), the
// variables where `placement` puts them (null: on `device` too). A graph that cannot be built
// is logged, not returned: the run goes on without it.
void SetModelGraph(const models::Model& model, const runtime::Placement* placement,
                   const std::string& device, profiler::Profiler* profiler);

// The batcher of worker `worker_index` of `num_workers` (single mode: 0 of 1), with the
// training transform of the input pipeline.
data::BatcherOptions BatcherOptionsFor(const runtime::TrainingOptions& t, int worker_index,
                                       int num_workers);

// The kernels record of a summary: per convolution, pooling and LRN shape, the layers that run
// it, the algorithm of each direction with both measured times (auto mode), and oneDNN's filter
// reorders (count, total ms).
nlohmann::json KernelsJson(const std::vector<ops::KernelChoice>& choices);

// Finishes `profiler` (its sinks and keys go into *summary), adds `stats` (the run figures'
// only writer) and writes *summary to `path` atomically. Returns the text written.
absl::StatusOr<std::string> WriteSummary(profiler::Profiler* profiler, const RunStats& stats,
                                         nlohmann::json* summary,
                                         const std::filesystem::path& path);

}  // namespace fulcrum::worker
