#!/usr/bin/env bash
# Does losing a ps cost accuracy? For each seed, the same sync job twice on loopback (2 ps + 2
# workers, --eval_every=500): undisturbed, and with ps:0 SIGKILLed as soon as the chief logs its
# first evaluation. --recovery=failover (the default): both runs with --replicate_shards, and
# ps:0's replica on ps:1 takes over. --recovery=restore: both runs with checkpoints every 100
# steps, ps:0 is started again 1 s after the kill and the chief restores every ps from the
# newest checkpoint (a rollback of up to 100 steps). Prints, per seed, both final test
# accuracies, their difference and the step training went on from, then the mean difference
# and how many disturbed runs ended higher, lower or identical. A failover that came between
# two steps leaves the run bit-identical; one that caught a step in flight makes the workers
# redo that step on other batches.
#
# Usage: bench/failover_accuracy.sh [--recovery=failover|restore] [--seeds=10] [--model=mlp]
#          [--steps=3000] [--dataset=synthetic] [--out=build/failover_accuracy.md]
# Environment: BIN_DIR (default build/bin), RUN_TIMEOUT (s per run, default 300).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${BIN_DIR:-$ROOT/build/bin}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
recovery=failover seeds=10 model=mlp steps=3000 dataset=synthetic out="$ROOT/build/failover_accuracy.md"
BENCH_NAME=failover_accuracy
source "${ROOT}/bench/lib/options.sh"
parse_options "recovery seeds model steps dataset out" "$@"
for v in $seeds $steps; do [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "expected a positive integer, got '$v'"; done
[[ "$recovery" =~ ^(failover|restore)$ ]] || die "--recovery must be failover or restore"
(( steps > 1000 )) || die "--steps must be over 1000 (the kill comes after the evaluation at 500)"
for b in ps worker chief; do [[ -x "$BIN_DIR/$b" ]] || die "$BIN_DIR/$b not found: build first"; done

work="$(mktemp -d "${TMPDIR:-/tmp}/failover_accuracy.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
results="$work/results.tsv"
: > "$results"

# run SEED KIND: one job (KIND calm or kill); appends "seed kind accuracy promoted_step".
run() {
  local seed=$1 kind=$2 dir="$work/$1-$2"
  mkdir -p "$dir"
  python3 "$ROOT/bench/free_spec.py" "$dir/spec.json" 2 2
  local flags=(--cluster_spec="$dir/spec.json" --model="$model" --dataset="$dataset" --mode=sync
    --train_steps="$steps" --eval_every=500 --threads=1 --profile=off
    --seed="$seed" --run_dir="$dir/run")
  if [[ "$recovery" == failover ]]; then
    flags+=(--replicate_shards)
  else
    flags+=(--checkpoint_dir="$dir/ckpt" --checkpoint_every_steps=100 --checkpoint_every_secs=0
      --recovery_timeout=60)
  fi
  pids=()
  local ps0
  for i in 0 1; do
    "$BIN_DIR/ps" --job_name=ps --task_index=$i "${flags[@]}" > "$dir/ps$i.log" 2>&1 &
    pids+=($!)
    (( i == 0 )) && ps0=$!
  done
  for i in 0 1; do
    "$BIN_DIR/worker" --job_name=worker --task_index=$i "${flags[@]}" > "$dir/w$i.log" 2>&1 &
    pids+=($!)
  done
  timeout "$RUN_TIMEOUT" "$BIN_DIR/chief" --job_name=chief --task_index=0 "${flags[@]}" \
    > "$dir/chief.log" 2>&1 &
  local chief=$!
  if [[ "$kind" == kill ]]; then
    for _ in $(seq 1 3000); do grep -q "eval at" "$dir/chief.log" && break; sleep 0.1; done
    kill -9 "$ps0"
    if [[ "$recovery" == restore ]]; then
      sleep 1
      "$BIN_DIR/ps" --job_name=ps --task_index=0 "${flags[@]}" > "$dir/ps0.restart.log" 2>&1 &
      pids+=($!)
    fi
  fi
  wait "$chief" || { tail -n 5 "$dir/chief.log" >&2; die "the $kind run of seed $seed failed"; }
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  python3 - "$dir/run/report.json" "$seed" "$kind" >> "$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = (r["replication"] or {}).get("promotions") or r["ps_recoveries"]
step = (p[0].get("global_step", p[0].get("restored_step"))) if p else ""
print("%s\t%s\t%s\t%s" % (sys.argv[2], sys.argv[3], r["final_test_accuracy"], step))
PY
  printf '  seed %s %-4s: accuracy %s\n' "$seed" "$kind" "$(tail -n 1 "$results" | cut -f3)" >&2
}

t0=$(date +%s)
echo "failover_accuracy: --recovery=$recovery, $model on $dataset, sync, 2 ps + 2 workers," \
  "$steps steps, seeds 1-$seeds" >&2
for ((s = 1; s <= seeds; s++)); do
  run "$s" calm
  run "$s" kill
done
elapsed=$(( $(date +%s) - t0 ))
mkdir -p "$(dirname "$out")"
python3 - "$results" "$model" "$dataset" "$steps" "$elapsed" "$recovery" <<'EOF2' | tee "$out"
import statistics as st, sys
res, model, dataset, steps, elapsed, recovery = sys.argv[1:]
runs = {}
for line in open(res):
    seed, kind, acc, step = line.rstrip("\n").split("\t")
    runs.setdefault(int(seed), {})[kind] = (float(acc), step)
how = ("its replica took over (--replicate_shards)" if recovery == "failover" else
       "restarted 1 s later and every ps restored from the newest checkpoint (every 100 steps)")
print("ps:0 lost: %s on %s, sync, 2 ps + 2 workers, %s steps; ps:0 SIGKILLed after the first "
      "evaluation (step 500), %s; %s s.\n" % (model, dataset, steps, how, elapsed))
print("| seed | undisturbed | ps:0 killed | difference (points) | training went on from step |")
print("| ---: | ---: | ---: | ---: | ---: |")
diffs = []
for seed in sorted(runs):
    calm, kill = runs[seed]["calm"][0], runs[seed]["kill"][0]
    diffs.append(100 * (kill - calm))
    print("| %d | %.4f | %.4f | %+.2f | %s |" % (seed, calm, kill, diffs[-1], runs[seed]["kill"][1]))
print("\nMean difference %+.2f points (median %+.2f); disturbed higher %d, lower %d, identical %d."
      % (st.mean(diffs), st.median(diffs), sum(d > 0 for d in diffs), sum(d < 0 for d in diffs),
         sum(d == 0 for d in diffs)))
EOF2
