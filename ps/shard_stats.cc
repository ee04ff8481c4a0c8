// ps: a shard's figures (ps/shard.h: Stats, LocalStats), as the chief's polls, the ps's profiler
// and its summary read them.
#include "ps/shard.h"

namespace fulcrum::ps {

void Shard::Stats(pb::StatsResponse* response) {
  Touch();
  LocalStats(response);
}

void Shard::LocalStats(pb::StatsResponse* response) const {
  response->Clear();
  response->set_task_index(task_index_);
  response->set_stopped(stopped());
  response->set_leaving(leaving());
  response->set_checkpoints_enabled(!refuse_checkpoints_);
  response->set_backup_task(replicator_ != nullptr ? replicator_->backup_task() : -1);
  response->set_replication_lost(replication_lost());
  response->set_replica_forwards(replica_forwards_.load(std::memory_order_relaxed));
  response->set_replica_forward_us(replica_forward_ns_.load(std::memory_order_relaxed) / 1000);
  response->set_save_pending(snapshot_pending_.load(std::memory_order_acquire));
  {
    MutexLock lock(&waiting_mu_);
    int64_t waiting = 0;
    for (const auto& [task, count] : waiting_) waiting += count;
    response->set_requests_waiting(waiting);
  }
  if (const std::shared_ptr<Store> store = this->store(); store != nullptr) {
    response->set_initialized(true);
    response->set_run_id(store->definition.run_id());
    response->set_run_dir(store->definition.run_dir());
    response->set_mode(store->definition.mode());
    response->set_global_step(GlobalStep(*store));
    response->set_bytes_held(store->bytes_held);
    for (const Variable& var : store->variables) {
      pb::VariableStats* v = response->add_variables();
      v->set_name(var.def.name());
      v->set_bytes(static_cast<int64_t>(var.value.bytes()));
    }
    response->set_num_chunks(static_cast<int32_t>(store->chunks.size()));
    if (store->ssp != nullptr) {
      response->set_staleness(static_cast<int32_t>(store->ssp->staleness()));
      for (const int64_t clock : store->ssp->Clocks()) response->add_worker_clocks(clock);
      for (const int w : store->ssp->Released()) response->add_released_workers(w);
      response->set_ssp_wait_timeouts(store->ssp->timeouts());
    }
    if (store->straggler != nullptr) {
      const Straggler now = store->straggler->Current();
      pb::StragglerStats* st = response->mutable_straggler();
      st->set_worker(now.worker);
      st->set_held_back_ms(now.held_back_ms);
      st->set_since_step(now.since_step);
      st->set_steps_named(now.steps_named);
    }
  }
  const Counters& c = counters_;
  response->set_pushes_received(c.pushes_received.load(std::memory_order_relaxed));
  response->set_pushes_applied(c.pushes_applied.load(std::memory_order_relaxed));
  response->set_pushes_dropped(c.pushes_dropped.load(std::memory_order_relaxed));
  response->set_pushes_duplicate(c.pushes_duplicate.load(std::memory_order_relaxed));
  response->set_pushes_nonfinite(c.pushes_nonfinite.load(std::memory_order_relaxed));
  response->set_pushes_absurd(c.pushes_absurd.load(std::memory_order_relaxed));
  response->set_pushes_empty_refused(empty_pushes_.refused());
  response->set_steps_applied(c.steps_applied.load(std::memory_order_relaxed));
  response->set_pulls(c.pulls.load(std::memory_order_relaxed));
  response->set_bytes_pushed(c.bytes_pushed.load(std::memory_order_relaxed));
  response->set_bytes_pulled(c.bytes_pulled.load(std::memory_order_relaxed));
  response->set_pull_wait_timeouts(c.pull_wait_timeouts.load(std::memory_order_relaxed));
  response->set_apply_us(c.apply_ns.load(std::memory_order_relaxed) / 1000);
  response->set_wait_us(c.wait_ns.load(std::memory_order_relaxed) / 1000);
}

}  // namespace fulcrum::ps
