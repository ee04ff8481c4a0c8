#include "runtime/cluster/shard_defs.h"

#include "base/random.h"
#include "runtime/config/flags.h"
#include "runtime/frames/proto_convert.h"

namespace fulcrum::runtime {

pb::CreateVariablesRequest ShardDefinition(const Placement& placement,
                                           std::span<const VariableInfo> variables, int ps,
                                           const ShardDefOptions& options) {
  pb::CreateVariablesRequest request;
  request.set_run_id(options.run_id);
  request.set_run_dir(options.run_dir);
  request.set_task_index(ps);
  *request.mutable_optimizer() = OptimizerToProto(options.optimizer);
  request.set_mode(options.mode);
  request.set_replicas_to_aggregate(options.replicas_to_aggregate);
  if (options.mode == pb::MODE_SSP) {
    request.set_num_workers(options.num_workers);
    request.set_staleness(static_cast<int32_t>(options.staleness));
  }
  request.set_staleness_aware_lr(options.staleness_aware_lr);
  request.set_chunk_bytes(options.chunk_bytes);
  for (const PlacedVariable& v : placement.shards[static_cast<size_t>(ps)]) {
    const VariableInfo& source = variables[static_cast<size_t>(v.source)];
    pb::VariableDef* def = request.add_variables();
    def->set_name(v.name);
    def->set_source(source.name);
    for (const int64_t d : source.shape.dims()) def->add_full_shape(d);
    def->set_row_begin(v.row_begin);
    def->set_row_end(v.row_end);
    *def->mutable_initializer() = InitializerToProto(source.initializer);
    def->set_seed(VariableSeed(options.seed, source.name));
  }
  return request;
}

pb::Mode ModeToProto(SyncMode mode) {
  switch (mode) {
    case SyncMode::kSync:
      return pb::MODE_SYNC;
    case SyncMode::kSsp:
      return pb::MODE_SSP;
    case SyncMode::kAsync:
      break;
  }
  return pb::MODE_ASYNC;
}

SyncMode ModeFromProto(pb::Mode mode) {
  switch (mode) {
    case pb::MODE_SYNC:
      return SyncMode::kSync;
    case pb::MODE_SSP:
      return SyncMode::kSsp;
    default:
      return SyncMode::kAsync;
  }
}

const char* ModeName(pb::Mode mode) { return ModeName(ModeFromProto(mode)); }

}  // namespace fulcrum::runtime
