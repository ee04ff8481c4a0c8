#!/usr/bin/env bash
# What the built-in profiler (or, with --feature=checkpoint, checkpointing; --feature=replication,
# --replicate_shards) costs: the same local cluster run with the feature on and off,
# alternately (on off on off ...), after one unreported warm-up pair. --feature=profile:
# --profile=on vs off. --feature=checkpoint: both --profile=off, the "on" runs with
# --checkpoint_dir (a fresh folder per run) and --checkpoint_every_secs=N (--checkpoint_secs,
# default 30; issue 27's target: >= 0.965, i.e. <= 3.5 %). --feature=replication: both
# --profile=off, the "on" runs with --replicate_shards (needs --ps >= 2; issue 27's target on
# emulated 10 Gbit/s hosts: >= 0.90). --feature=prefetch: both --profile=off, the "off" runs
# with --noprefetch (each batch gathered at its step's start instead of on the loader thread).
# --rate=10gbit|1gbit runs every task on an emulated host
# of its own (scripts/netns_hosts.sh, layout ps-w-w, --hosts per_task; needs root) with its
# link shaped to that rate; without it every task runs on loopback. The figure
# per run is report.json's workers_examples_per_sec (the sum of the workers' steady-state
# rates, first 20 steps dropped); the table gives the median of each side and the median
# (min-max) of the pairwise ratios on/off. Target: >= 0.98. /proc/loadavg before and after.
#
# Usage: bench/profiler_overhead.sh [--feature=profile|checkpoint|replication|prefetch]
#          [--checkpoint_secs=30] [--rate=10gbit]
#          [--pairs=5] [--model=logreg] [--ps=1] [--workers=2]
#          [--mode=async] [--batch_size=256] [--steps=3000] [--interval_ms=500]
#          [--extra="--metrics_port=0"] [--out=build/profiler_overhead.md]
# Environment: BIN_DIR (default build/bin), RUN_TIMEOUT (s per run, default 300).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${BIN_DIR:-$ROOT/build/bin}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
pairs=5 model=logreg num_ps=1 workers=2 mode=async batch=256 steps=3000 interval=500 extra=""
feature=profile ckpt_secs=30 rate=""
out="$ROOT/build/profiler_overhead.md"
BENCH_NAME=profiler_overhead
source "${ROOT}/bench/lib/options.sh"
parse_options "feature checkpoint_secs=ckpt_secs rate pairs model ps=num_ps workers mode batch_size=batch steps interval_ms=interval extra out" "$@"
[[ "$feature" =~ ^(profile|checkpoint|replication|prefetch)$ ]] ||
  die "--feature must be profile, checkpoint, replication or prefetch"
[[ -z "$rate" || "$rate" =~ ^(1gbit|10gbit)$ ]] || die "--rate must be 1gbit or 10gbit"
[[ "$feature" != replication ]] || (( num_ps >= 2 )) ||
  die "--feature=replication needs --ps=2 or more (a shard's replica lives on another ps)"
for v in $pairs $num_ps $workers $batch $steps $interval $ckpt_secs; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "expected a positive integer, got '$v'"
done
[[ "$mode" =~ ^(sync|async)$ ]] || die "--mode must be sync or async"
for b in ps worker chief; do [[ -x "$BIN_DIR/$b" ]] || die "$BIN_DIR/$b not found: build first"; done

work="$(mktemp -d "${TMPDIR:-/tmp}/profiler_overhead.XXXXXX")"
prefix="po$(( $$ % 10000 ))"
cleanup() {
  if [[ -n "$rate" ]]; then
    "$ROOT/scripts/netns_hosts.sh" down --prefix "$prefix" > /dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
hosts_flag=()
if [[ -n "$rate" ]]; then
  # Every ps and worker on an emulated host of its own, the chief beside ps 0.
  python3 "$ROOT/scripts/make_spec.py" --layout ps-w-w --workers "$workers" --ps "$num_ps" \
    --hosts per_task --prefix "$prefix" --base_port 25100 --out "$work/hosts" > /dev/null
  "$ROOT/scripts/netns_hosts.sh" up $((num_ps + workers)) --rate "$rate" --prefix "$prefix" \
    > /dev/null
  hosts_flag=(--hosts "$work/hosts/hosts.json")
fi
# A private copy of the binaries: a rebuild during the run cannot change them half-way.
mkdir -p "$work/bin"
cp "$BIN_DIR/ps" "$BIN_DIR/worker" "$BIN_DIR/chief" "$work/bin/"
results="$work/results.tsv"
: > "$results"

# run PROFILE N: one cluster run; appends "profile pair ex/s" to the results.
run() {
  local side=$1 n=$2 dir="$work/r$1-$2" profile=off feature_flags=()
  mkdir -p "$dir"
  if [[ "$feature" == profile ]]; then
    profile=$side
  elif [[ "$feature" == prefetch ]]; then
    [[ "$side" == off ]] && feature_flags=(--noprefetch)
  elif [[ "$side" == on && "$feature" == checkpoint ]]; then
    feature_flags=(--checkpoint_dir="$dir/ckpt" --checkpoint_every_secs="$ckpt_secs")
  elif [[ "$side" == on ]]; then
    feature_flags=(--replicate_shards)
  fi
  if [[ -n "$rate" ]]; then
    cp "$work/hosts/spec.json" "$dir/spec.json"
  else
    python3 "$ROOT/bench/free_spec.py" "$dir/spec.json" "$num_ps" "$workers"
  fi
  # shellcheck disable=SC2086
  if ! BIN_DIR="$work/bin" timeout "$RUN_TIMEOUT" "$ROOT/scripts/local_cluster.sh" \
      "${hosts_flag[@]}" "$dir/spec.json" --model="$model" --batch_size="$batch" --train_steps="$steps" \
      --mode="$mode" --threads=1 --eval_every=0 --log_every=100000 \
      --profile="$profile" --profile_interval_ms="$interval" "${feature_flags[@]}" $extra \
      --run_dir="$dir/run" > "$dir/cluster.log" 2>&1; then
    tail -n 20 "$dir/cluster.log" >&2
    die "the $side run failed (log above)"
  fi
  local rate
  rate=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workers_examples_per_sec"])' \
    "$dir/run/report.json")
  local saves=""
  [[ -d "$dir/ckpt" ]] && saves=" ($(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("checkpoint") or {}).get("saves"))' \
    "$dir/run/report.json") checkpoints saved)"
  (( n > 0 )) && echo -e "$side\t$n\t$rate" >> "$results"
  printf '  %-3s %s: %10.0f ex/s%s\n' "$side" "${n/#0/warm-up}" "$rate" "$saves" >&2
  rm -rf "$dir"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
echo "profiler_overhead: --feature=$feature; $model $mode, $num_ps ps + $workers workers, batch $batch, $steps steps," \
  "$pairs pairs; load before: $load_before" >&2
run on 0
run off 0
for ((p = 1; p <= pairs; p++)); do
  run on "$p"
  run off "$p"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(( $(date +%s) - t0 ))

mkdir -p "$(dirname "$out")"
python3 - "$results" "$model" "$mode" "$num_ps" "$workers" "$batch" "$steps" "$interval" \
    "$load_before" "$load_after" "$elapsed" "$extra" "$feature" "$ckpt_secs" "${rate:-loopback}" \
    <<'EOF' | tee "$out"
import statistics as st, sys
(res, model, mode, nps, nw, batch, steps, interval, lb, la, elapsed, extra, feature, secs,
 rate) = sys.argv[1:]
runs = {"on": {}, "off": {}}
for line in open(res):
    side, p, value = line.split("\t")
    runs[side][int(p)] = float(value)
ratios = [runs["on"][p] / runs["off"][p] for p in runs["on"] if p in runs["off"]]
what = {"profile": "Profiler overhead",
        "checkpoint": "Checkpoint overhead (--checkpoint_every_secs=%s)" % secs,
        "replication": "Replication overhead (--replicate_shards)",
        "prefetch": "Batch prefetching (--prefetch)"}[feature]
where = ("loopback" if rate == "loopback"
         else "every task on an emulated host of its own, links at " + rate)
print("%s: %s %s, %s ps + %s workers (%s), batch %s, %s steps, interval %s ms%s; "
      "%d pairs (on, off alternating) after a warm-up pair; workers' summed steady-state "
      "examples/sec from report.json. Load %s -> %s; %s s.\n"
      % (what, model, mode, nps, nw, where, batch, steps, interval, (", " + extra) if extra else "",
         len(ratios), lb, la, elapsed))
print("| %s on ex/s (median) | %s off ex/s (median) | on/off median | min-max |"
      % (feature, feature))
print("| ---: | ---: | ---: | --- |")
print("| %.0f | %.0f | %.3f | %.3f-%.3f |" % (st.median(runs["on"].values()),
      st.median(runs["off"].values()), st.median(ratios), min(ratios), max(ratios)))
EOF
