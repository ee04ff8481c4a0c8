// runtime: --replicate_shards, defined beside the code that reads it.
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "runtime/config/flags.h"

ABSL_FLAG(bool, replicate_shards, false,
          "Keep a replica of each ps task's shard on the next ps task (ps i on ps (i+1) mod n), "
          "updated after aggregation before each step shows; when a ps dies the chief promotes "
          "its replica and training goes on with no step lost (docs/distributed.md). Needs at "
          "least 2 ps tasks and --mode=sync or async; give every task the same value.");

namespace fulcrum::runtime {

absl::Status ReplicationFromFlags(ClusterOptions& o) {
  o.replicate_shards = absl::GetFlag(FLAGS_replicate_shards);
  if (!o.replicate_shards) return absl::OkStatus();
  const int ps = o.task.cluster.num_tasks(kPsJob);
  if (ps < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replicate_shards needs at least 2 ps tasks (a shard's replica lives on another ps); "
        "the cluster spec has ",
        ps));
  }
  if (o.mode == SyncMode::kSsp) {
    return absl::InvalidArgumentError(
        "--replicate_shards works with --mode=sync or async, not ssp (a promoted replica would "
        "not know the workers' clocks)");
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::runtime
