// chief: bringing the ps tasks back when one is lost. With --replicate_shards a lost ps's
// replica is promoted in its place (no step lost); with --checkpoint_dir the chief waits for
// the lost ps to answer again, recreates a restarted one's variables (held until restored)
// and restores every ps from the newest checkpoint. Each promotion and each recovery is kept
// for the report.
// Thread-safety: one thread, the chief's run loop.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "chief/checkpoints.h"
#include "chief/ps_tasks.h"
#include "nlohmann/json.hpp"
#include "proto/ps.pb.h"
#include "runtime/config/flags.h"

namespace fulcrum::chief {

class PsRecovery {
 public:
  // `ps` (not owned) is the chief's handle on the ps tasks; `shard_defs` (by ps index) what
  // each ps is created with, read when a restarted one is recreated.
  PsRecovery(const runtime::ClusterOptions& c, PsTasks& ps,
             const std::vector<pb::CreateVariablesRequest>& shard_defs)
      : c_(c), ps_(ps), shard_defs_(shard_defs) {}

  // --replicate_shards: ps p, lost (`cause`: dead, or leaving), is replaced by its replica,
  // promoted in its place. True when it was (training goes on with no step lost); false when
  // it cannot be (no replication, the backup is gone too, or already promoted).
  bool PromoteLost(const absl::Status& cause, int p);
  // A ps stopped answering (`cause`): waits up to --recovery_timeout for every ps to answer,
  // recreates the variables of a restarted one (held until restored) and restores every ps
  // from the newest checkpoint of `checkpointer`. OK once training can go on (also when no ps
  // had restarted: it was stalled); the error otherwise.
  absl::Status Restore(const absl::Status& cause, Checkpointer& checkpointer);

  // Each promotion and each recovery, for the report.
  const nlohmann::json& promotions() const { return promotions_; }
  const nlohmann::json& recoveries() const { return recoveries_; }

 private:
  const runtime::ClusterOptions& c_;
  PsTasks& ps_;
  const std::vector<pb::CreateVariablesRequest>& shard_defs_;
  nlohmann::json recoveries_ = nlohmann::json::array();
  nlohmann::json promotions_ = nlohmann::json::array();
};

}  // namespace fulcrum::chief
