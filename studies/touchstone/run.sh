#!/usr/bin/env bash
# Touchstone, rerun with Fulcrum: softmax (logistic) regression on (Fashion-)MNIST, SGD lr
# 0.01, batch 256, 1000 steps, once as one process and once as a cluster of 1 ps + 2 workers,
# recording Touchstone's own keys for every task (Job Execution Time, Total CPU Usage, Total
# CPU usage per core, Total Memory used, Total bytes sent/received over network, System
# Information), which every Fulcrum task writes into its summary.json.
#
# On this machine: the cluster on loopback (cluster_specs/local_1ps_2w.json). On real nodes
# (--nodes=n1,n2,n3: ps + chief, worker 0, worker 1), laid out by scripts/make_spec.py --nodes
# and started by scripts/launch_ssh.sh.
#
# Usage: studies/touchstone/run.sh [--out=DIR] [--save] [--nodes=n1,n2,n3] [--ssh=CMD]
#          [--remote_dir=DIR]
#   --save   also copy the CSV and the plot into studies/touchstone/results/
# Writes OUT/single/, OUT/cluster/ (the runs), OUT/touchstone.csv (a row per task) and
# OUT/touchstone_cpu_memory.svg.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN_DIR=${BIN_DIR:-$ROOT/build/bin}
out="$ROOT/build/studies/touchstone" save=0 nodes="" launch=()
die() { echo "touchstone: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --nodes=*) nodes="${arg#*=}" ;;
    --ssh=*) launch+=(--ssh "${arg#*=}") ;;
    --remote_dir=*) launch+=(--remote_dir "${arg#*=}") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[[ -x "$BIN_DIR/worker" ]] || die "$BIN_DIR/worker not found: build first (scripts/setup.sh)"
flags=(--model=logreg --optimizer=sgd --learning_rate=0.01 --batch_size=256 --train_steps=1000)
rm -rf "$out/single" "$out/cluster"
mkdir -p "$out"
echo "touchstone: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN_DIR/worker" "${flags[@]}" --run_dir="$out/single" > "$out/single.log" 2>&1 ||
  die "the single run failed: see $out/single.log"
if [[ -z "$nodes" ]]; then
  BIN_DIR="$BIN_DIR" "$ROOT/scripts/local_cluster.sh" "$ROOT/cluster_specs/local_1ps_2w.json" \
    "${flags[@]}" --run_dir="$out/cluster" > "$out/cluster.log" 2>&1 ||
    die "the cluster failed: see $out/cluster.log"
else
  "$ROOT/scripts/make_spec.py" --layout ps-w-w --workers 2 --ps 1 --hosts 3 --nodes "$nodes" \
    --out "$out/spec" || die "cannot lay out 1 ps + 2 workers on --nodes=$nodes"
  "$ROOT/scripts/launch_ssh.sh" "${launch[@]}" --run_dir "$out/cluster" "$out/spec/spec.json" \
    "${flags[@]}" > "$out/cluster.log" 2>&1 || die "the cluster failed: see $out/cluster.log"
fi
echo "touchstone: done $(date -u +%FT%TZ)"
/usr/bin/python3 "$ROOT/studies/tables.py" touchstone "$out" "$out"
if ((save)); then
  mkdir -p "$HERE/results"
  cp "$out/touchstone.csv" "$out/touchstone_cpu_memory.svg" "$HERE/results/"
fi
