// ps::Shard's CreateVariables: the definition checked whole (every variable, the memory it
// needs, counted without overflow) before anything is allocated, then the variables
// initialised as single-process training initialises them, their slots, and the chunks.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/malloc.h"
#include "base/status_macros.h"
#include "ops/initializer.h"
#include "ps/request_checks.h"
#include "ps/shard.h"
#include "runtime/cluster/shard_defs.h"
#include "runtime/frames/proto_convert.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ps {
namespace {

// InvalidArgument "ps:0: CreateVariables: <parts>".
template <typename... Parts>
absl::Status Bad(const std::string& name, const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": CreateVariables: ", parts...));
}

// The request's mode checked; sync mode's settings into *sync and *replicas.
absl::Status ReadMode(const std::string& name, const pb::CreateVariablesRequest& request,
                      bool* sync, int* replicas) {
  switch (request.mode()) {
    case pb::MODE_ASYNC:
      return absl::OkStatus();
    case pb::MODE_SYNC:
      if (request.replicas_to_aggregate() < 1) {
        return Bad(name, "replicas_to_aggregate=", request.replicas_to_aggregate(),
                   ": sync mode needs at least 1");
      }
      if (request.staleness_aware_lr()) {
        return Bad(name, "staleness_aware_lr is for async and ssp modes: nothing is stale in sync");
      }
      *sync = true;
      *replicas = request.replicas_to_aggregate();
      return absl::OkStatus();
    case pb::MODE_SSP:
      if (request.num_workers() < 1 || request.num_workers() > kMaxSspWorkers) {
        return Bad(name, "num_workers=", request.num_workers(), ": ssp mode needs 1 to ",
                   kMaxSspWorkers);
      }
      if (request.staleness() < 0) {
        return Bad(name, "staleness=", request.staleness(), ": must not be negative");
      }
      return absl::OkStatus();
    default:
      return Bad(name, "mode ", static_cast<int>(request.mode()), ": expected async, sync or ssp");
  }
}

// Every variable's definition checked, and the memory this ps would hold counted, before
// anything is allocated; their initializers into *inits.
absl::Status CheckVariables(const std::string& name, const pb::CreateVariablesRequest& request,
                            size_t num_slots, bool sync, std::vector<ops::Initializer>* inits) {
  absl::flat_hash_set<std::string> names;
  int64_t total_elements = 0;          // of the whole source variables, for the limit
  double held = 0, largest_whole = 0;  // elements this ps keeps; the largest initialised whole
  for (const pb::VariableDef& def : request.variables()) {
    const std::string what = absl::StrCat("variable '", def.name(), "'");
    if (def.name().empty()) return Bad(name, "a variable has no name");
    if (!names.insert(def.name()).second) return Bad(name, what, " is defined twice");
    if (def.full_shape().empty()) return Bad(name, what, ": full_shape has no dimensions");
    const ops::Shape full(std::vector<int64_t>(def.full_shape().begin(), def.full_shape().end()));
    if (absl::Status s = ops::ValidateShape(full, what); !s.ok()) return Bad(name, s.message());
    if (def.row_begin() < 0 || def.row_begin() >= def.row_end() || def.row_end() > full.dim(0)) {
      return Bad(name, what, ": rows [", def.row_begin(), ", ", def.row_end(),
                 ") are not a non-empty range inside the ", full.dim(0), " rows of ",
                 full.ToString());
    }
    // Each variable is at most kMaxTensorElements (ValidateShape), so the running sum cannot
    // wrap before it passes the limit.
    total_elements += full.num_elements();
    held += static_cast<double>(full.num_elements()) / static_cast<double>(full.dim(0)) *
            static_cast<double>(def.row_end() - def.row_begin());
    largest_whole = std::max(largest_whole, static_cast<double>(full.num_elements()));
    if (total_elements > ops::kMaxTensorElements) {
      return Bad(name, "the variables hold more than ", ops::kMaxTensorElements,
                 " elements in all (at ", what, ")");
    }
    auto init = runtime::InitializerFromProto(def.initializer());
    if (!init.ok()) return Bad(name, what, ": ", init.status().message());
    inits->push_back(*init);
  }
  if (absl::Status s =
          CheckDefinitionFits(held, largest_whole, num_slots, sync, request.chunk_bytes());
      !s.ok()) {
    return Bad(name, s.message());
  }
  return absl::OkStatus();
}

}  // namespace

ops::Shape Shard::SliceShape(const pb::VariableDef& def) {
  std::vector<int64_t> dims(def.full_shape().begin(), def.full_shape().end());
  dims[0] = def.row_end() - def.row_begin();
  return ops::Shape(std::move(dims));
}

absl::Status Shard::InitializeVariables(const pb::CreateVariablesRequest& request,
                                        const std::vector<ops::Initializer>& inits,
                                        Store* store) const {
  const size_t num_slots = ops::SlotNames(store->optimizer.kind).size();
  for (int i = 0; i < request.variables_size(); ++i) {
    const pb::VariableDef& def = request.variables(i);
    // The whole source variable, then its rows: the bits single-process training has.
    const ops::Shape full(std::vector<int64_t>(def.full_shape().begin(), def.full_shape().end()));
    ops::Tensor whole = ops::Tensor::Zeros(full);
    if (absl::Status s = ops::Initialize(inits[static_cast<size_t>(i)], def.seed(), &whole);
        !s.ok()) {
      return Bad(name_, "variable '", def.name(), "': ", s.message());
    }
    Variable var;
    var.def = def;
    var.value = ops::Tensor::Zeros(SliceShape(def));
    const ops::Tensor rows = whole.Rows(def.row_begin(), def.row_end());
    std::copy(rows.flat().begin(), rows.flat().end(), var.value.flat().begin());
    for (size_t s = 0; s < num_slots; ++s) {
      var.slots.push_back(ops::Tensor::Filled(
          var.value.shape(), ops::SlotInitialValue(store->optimizer, static_cast<int>(s))));
    }
    store->bytes_held += static_cast<int64_t>(var.value.bytes());
    store->variables.push_back(std::move(var));
  }
  return absl::OkStatus();
}

absl::Status Shard::MakeChunks(const pb::CreateVariablesRequest& request, Store* store) const {
  std::vector<int64_t> elements;
  for (const Variable& var : store->variables) elements.push_back(var.value.num_elements());
  for (runtime::Chunk& plan : runtime::PlanChunks(elements, request.chunk_bytes())) {
    auto chunk = std::make_unique<ChunkState>();
    if (store->sync) {
      MutexLock lock(&chunk->mu);  // not shared yet; the lock keeps the analysis exact
      chunk->accum.assign(static_cast<size_t>(plan.num_elements), 0.0f);
    }
    chunk->plan = std::move(plan);
    chunk->index = store->chunks.size();
    store->chunks.push_back(std::move(chunk));
  }
  if (request.mode() == pb::MODE_SSP) {
    const double clocks = static_cast<double>(store->chunks.size()) * request.num_workers();
    if (absl::Status s = CheckFitsInMemory(clocks * sizeof(int64_t), "the ssp clocks"); !s.ok()) {
      return Bad(name_, s.message());
    }
    store->ssp = std::make_unique<StalenessGate>(
        name_, request.num_workers(), static_cast<int>(store->chunks.size()), request.staleness());
  }
  if (store->sync && store->replicas >= 2) {
    store->straggler = std::make_unique<StragglerDetector>(
        name_, static_cast<int64_t>(store->replicas) * static_cast<int64_t>(store->chunks.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Shard::Store>> Shard::BuildStore(
    const pb::CreateVariablesRequest& request) {
  if (request.task_index() != task_index_) {
    return Bad(name_, "the request is for ps:", request.task_index(), " but this server is ",
               name_);
  }
  if (request.variables().empty()) return Bad(name_, "no variables");
  if (request.chunk_bytes() <= 0) {
    return Bad(name_, "chunk_bytes=", request.chunk_bytes(), ": must be positive");
  }
  auto store = std::make_shared<Store>();
  store->definition = request;
  store->staleness_aware_lr = request.staleness_aware_lr();
  FULCRUM_RETURN_IF_ERROR(ReadMode(name_, request, &store->sync, &store->replicas));
  auto optimizer = runtime::OptimizerFromProto(request.optimizer());
  if (!optimizer.ok()) return Bad(name_, optimizer.status().message());
  store->optimizer = *optimizer;
  std::vector<ops::Initializer> inits;
  FULCRUM_RETURN_IF_ERROR(CheckVariables(
      name_, request, ops::SlotNames(store->optimizer.kind).size(), store->sync, &inits));
  FULCRUM_RETURN_IF_ERROR(InitializeVariables(request, inits, store.get()));
  FULCRUM_RETURN_IF_ERROR(MakeChunks(request, store.get()));
  store->held.store(request.hold_for_restore(), std::memory_order_release);
  return store;
}

absl::Status Shard::CreateVariables(const pb::CreateVariablesRequest& request,
                                    pb::CreateVariablesResponse* response) {
  Touch();
  MutexLock lock(&store_mu_);
  if (store_ != nullptr) {
    const pb::CreateVariablesRequest& have = store_->definition;
    if (have.run_id() != request.run_id() ||
        have.SerializeAsString() != request.SerializeAsString()) {
      return absl::FailedPreconditionError(absl::StrCat(
          name_, " already holds the variables of run '", have.run_id(),
          "'; a different CreateVariables (run '", request.run_id(), "') cannot replace them"));
    }
  } else {
    FULCRUM_ASSIGN_OR_RETURN(store_, BuildStore(request));
    spdlog::info("{} holds {} variables, {} bytes, in {} chunks ({} mode, optimizer {}{})", name_,
                 store_->variables.size(), store_->bytes_held, store_->chunks.size(),
                 runtime::ModeName(request.mode()), ops::OptimizerName(store_->optimizer.kind),
                 store_->staleness_aware_lr ? ", staleness-aware learning rate" : "");
  }
  response->set_bytes_held(store_->bytes_held);
  response->set_num_chunks(static_cast<int32_t>(store_->chunks.size()));
  return absl::OkStatus();
}

}  // namespace fulcrum::ps
