#include "bench/ps_bench_model.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "models/registry.h"
#include "ops/initializer.h"
#include "runtime/cluster/shard_defs.h"

namespace fulcrum::bench {
namespace {

constexpr uint64_t kSeed = 42;
constexpr int64_t kPartitionMinBytes = 256 << 10;  // runtime/config/flags.h default

}  // namespace

int64_t BenchModel::bytes() const {
  int64_t b = 0;
  for (const auto& v : variables) b += v.shape.num_elements() * 4;
  return b;
}

absl::StatusOr<BenchModel> MakeModel(const std::string& name) {
  BenchModel def;
  def.name = name;
  const auto var = [&](const std::string& n, int64_t rows) {
    def.variables.push_back({n, ops::Shape({rows, 1024}), ops::Initializer::Uniform(0.05f)});
  };
  if (name.rfind("syn", 0) == 0) {  // syn<N>mb: 8 equal variables, N MiB in all
    const int64_t mib = std::atoll(name.c_str() + 3);
    if (mib <= 0) return absl::InvalidArgumentError("bad synthetic model " + name);
    for (int i = 0; i < 8; ++i) var(absl::StrCat("v", i), mib * 32);
    return def;
  }
  if (name == "skew16") {  // one 12 MiB variable + 8 of 0.5 MiB
    var("big", 3072);
    for (int i = 0; i < 8; ++i) var(absl::StrCat("small", i), 128);
    return def;
  }
  models::ModelRegistry registry;
  if (absl::Status s = models::RegisterBuiltinModels(&registry); !s.ok()) return s;
  auto model = registry.Create(name, models::ModelConfig{});
  if (!model.ok()) return model.status();
  for (const models::VariableSpec& v : (*model)->variables()) {
    def.variables.push_back({v.name, v.shape, v.initializer});
  }
  return def;
}

absl::StatusOr<runtime::Placement> Place(const BenchModel& model, int num_ps,
                                         runtime::PlacementStrategy strategy) {
  return runtime::PlaceVariables(model.variables, num_ps, strategy, kPartitionMinBytes);
}

pb::CreateVariablesRequest Definition(const BenchModel& model, const runtime::Placement& placement,
                                      int ps, ops::OptimizerKind optimizer, int64_t chunk_bytes) {
  runtime::ShardDefOptions options;
  options.run_id = "ps_throughput";
  options.optimizer.kind = optimizer;
  options.optimizer.learning_rate = 1e-6f;
  options.mode = pb::MODE_ASYNC;
  options.chunk_bytes = chunk_bytes;
  options.seed = kSeed;
  return runtime::ShardDefinition(placement, model.variables, ps, options);
}

}  // namespace fulcrum::bench
