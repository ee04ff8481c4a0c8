#!/usr/bin/env bash
# A cluster against one process on the same cores: 1 ps + W workers + chief
# (scripts/local_cluster.sh, every worker --threads=1) training a model in async mode, beside
# the single-process worker training it alone with --threads=W, in interleaved rounds:
# single, then the cluster once per --data_planes entry, --pairs times. Figure: examples/s of
# the chief's report.json (the cluster: all workers together) and each cluster run's ratio to
# the single-process run of the same round; medians and min–max over the rounds.
#
# Usage: bench/cluster_vs_single.sh [--model=mlp] [--batch_size=256] [--optimizer=adam]
#          [--learning_rate=0.001] [--train_steps=6000] [--workers=2] [--pairs=3]
#          [--data_planes=grpc,tcp] [--timeout=600]
#   --train_steps  global steps of each run (the single process runs as many).
# Needs: cmake --build build (ps, worker, chief). Exit: 0; 2 bad flag; 1 a run failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${BIN_DIR:-${ROOT}/build/bin}"
model=mlp batch=256 optimizer=adam lr=0.001 steps=6000 workers=2 pairs=3 planes=grpc,tcp
timeout_s=600
BENCH_NAME=cluster_vs_single
source "${ROOT}/bench/lib/options.sh"
parse_options "model batch_size=batch optimizer learning_rate=lr train_steps=steps workers pairs data_planes=planes timeout=timeout_s" "$@"
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || die "--workers: a positive integer, not '$workers'"
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || die "--pairs: a positive integer, not '$pairs'"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--train_steps: a positive integer, not '$steps'"
[[ "$planes" =~ ^(grpc|tcp)(,(grpc|tcp))*$ ]] || die "--data_planes: grpc and/or tcp, not '$planes'"
for b in ps worker chief; do
  [[ -x "${BIN_DIR}/$b" ]] || { echo "cluster_vs_single: no ${BIN_DIR}/$b" >&2; exit 1; }
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cluster_vs_single.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# Ports free a moment ago (the kernel's picks, released before the tasks bind them).
read -r -a ports <<<"$(python3 -c "
import socket
s=[socket.socket() for _ in range($((workers + 2)))]
[x.bind(('127.0.0.1',0)) for x in s]
print(' '.join(str(x.getsockname()[1]) for x in s))")"
python3 - "$workers" "${ports[@]}" >"${WORK}/spec.json" <<'EOF'
import json, sys
w = int(sys.argv[1])
a = ["127.0.0.1:%s" % p for p in sys.argv[2:]]
print(json.dumps({"chief": [a[0]], "ps": [a[1]], "worker": a[2:2 + w]}))
EOF
common=(--model="$model" --batch_size="$batch" --optimizer="$optimizer" --learning_rate="$lr"
  --train_steps="$steps" --eval_every=0 --profile=off)
rate() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['examples_per_sec'])" "$1"; }

echo "cluster_vs_single: $(date -u '+%F %T UTC'); model=$model batch=$batch optimizer=$optimizer steps=$steps workers=$workers pairs=$pairs; load $(cut -d' ' -f1-3 /proc/loadavg)"
IFS=, read -r -a plane_list <<<"$planes"
results="${WORK}/results.txt"
for ((r = 1; r <= pairs; ++r)); do
  dir="${WORK}/single-$r"
  timeout -k 5 "$timeout_s" "${BIN_DIR}/worker" "${common[@]}" --threads="$workers" \
    --run_dir="$dir" >"${WORK}/single-$r.log" 2>&1 ||
    { echo "cluster_vs_single: single run failed:" >&2; tail -5 "${WORK}/single-$r.log" >&2; exit 1; }
  single=$(rate "$dir/report.json")
  line="round $r: single ${single}"
  for plane in "${plane_list[@]}"; do
    dir="${WORK}/${plane}-$r"
    timeout -k 5 "$timeout_s" "${ROOT}/scripts/local_cluster.sh" "${WORK}/spec.json" "${common[@]}" \
      --mode=async --threads=1 --data_plane="$plane" --run_dir="$dir" >"${WORK}/${plane}-$r.log" 2>&1 ||
      { echo "cluster_vs_single: $plane cluster failed:" >&2; tail -5 "${WORK}/${plane}-$r.log" >&2; exit 1; }
    got=$(rate "$dir/report.json")
    echo "$plane $got $single" >>"$results"
    line+=", cluster/$plane ${got}"
  done
  echo "$line"
done
python3 - "$results" "$workers" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
w = sys.argv[2]
print("\n| run | examples/s, median | ÷ single process (%s threads), median (min–max) |" % w)
print("|---|---:|---|")
single = [float(r[2]) for r in rows if r[0] == rows[0][0]]
print("| single process, --threads=%s | %.0f | 1 |" % (w, statistics.median(single)))
for plane in dict.fromkeys(r[0] for r in rows):
    got = [float(r[1]) for r in rows if r[0] == plane]
    ratio = [float(r[1]) / float(r[2]) for r in rows if r[0] == plane]
    print("| 1 ps + %s workers, --data_plane=%s | %.0f | %.2f (%.2f–%.2f) |" % (
        w, plane, statistics.median(got), statistics.median(ratio), min(ratio), max(ratio)))
EOF
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
