#!/usr/bin/env bash
# Installs what is missing, builds the ps, worker and chief binaries where they are not up to
# date, then runs the main job on this machine: a local cluster of 1 ps + 2 workers + chief
# (cluster_specs/local_1ps_2w.json, ports 2222-2225) training softmax regression on
# Fashion-MNIST with synchronous SGD (lr 0.01, batch 256 per worker, 1000 global steps),
# showing every task's progress and then the chief's report (report.json, report.html) with
# what the built-in profiler measured per task.
#   scripts/quickstart.sh [extra flags for every task, e.g. --mode=async --model=mlp]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh --target ps --target worker --target chief
run_dir=runs/quickstart-$(date +%Y%m%d-%H%M%S)
scripts/local_cluster.sh cluster_specs/local_1ps_2w.json --model=logreg --optimizer=sgd \
  --learning_rate=0.01 --batch_size=256 --train_steps=1000 --mode=sync --eval_every=200 \
  --log_every=200 --run_dir="$run_dir" "$@"
echo "quickstart: the chief's report is $run_dir/report.json (page: $run_dir/report.html); its summary:"
python3 - "$run_dir/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for key in ("mode", "model", "num_ps", "num_workers", "global_step", "final_test_accuracy",
            "final_test_loss", "examples_per_sec", "train_seconds", "wall_seconds",
            "pushes_received", "pushes_applied", "pushes_dropped", "stop_reason"):
    print(f"  {key}: {r.get(key)}")
print("  per task (profiler):")
for t in r.get("tasks", []):
    print("    %-9s CPU %5.1f%% mean, peak RSS %6.1f MB, app bytes sent %8.1f MB, received %8.1f MB"
          % (t["task"], t["cpu_percent_mean"], t["peak_rss_bytes"] / 1e6,
             t["app_bytes_sent"] / 1e6, t["app_bytes_received"] / 1e6))
PY
