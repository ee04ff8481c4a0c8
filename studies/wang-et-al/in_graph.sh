#!/usr/bin/env bash
# Wang et al. §3.4, in-graph replication, measured on CPUs: the worker alone training the
# study's CIFAR-10 CNN (cifar10_cnn, synthetic 24x24x3 images) at the study's batch sizes
# (100, 200, 400), once as two replicas (--devices=cpu:0,cpu:1: each replica computes the
# gradient of half the batch, the two averaged before one update) and once as one device with
# the same two threads (--threads=2), --repeats times each, --steps steps (the first 20 are
# left out of examples/s as warm-up).
#
# Usage: studies/wang-et-al/in_graph.sh [--out=DIR] [--save] [--steps=50] [--repeats=3]
#          [--batch_sizes=100,200,400]
#   --save   also copy the CSV into studies/wang-et-al/results/
# One command; each run is a point recorded in OUT/points/ when it finishes, and the same
# command again reuses the finished ones of the same settings (studies/lib/points.sh).
# Writes OUT/runs/<point>/ and OUT/in_graph.csv. Exit code 2 on bad input.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN_DIR=${BIN_DIR:-$ROOT/build/bin}
out="$ROOT/build/studies/wang-in-graph" save=0 steps=50 repeats=3 batches=100,200,400
die() { echo "in_graph: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --steps=*) steps="${arg#*=}" ;;
    --repeats=*) repeats="${arg#*=}" ;;
    --batch_sizes=*) batches="${arg#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
for v in steps repeats; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "--$v=${!v}: expected a positive whole number"
done
[[ "$batches" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--batch_sizes=$batches: expected numbers like 100,200"
((steps > 20)) || die "--steps=$steps: examples/s leaves out the first 20 steps; give more"
[[ -x "$BIN_DIR/worker" ]] || die "$BIN_DIR/worker not found: build first (scripts/setup.sh)"
IFS=, read -r -a batch_list <<< "$batches"
mkdir -p "$out/runs"
source "$ROOT/studies/lib/points.sh"
points_begin "$out" $((2 * ${#batch_list[@]} * repeats)) in_graph
points_estimate $((2 * ${#batch_list[@]} * repeats * 30))
common=(--model=cifar10_cnn --dataset=synthetic --synthetic_shape=24,24,3
        --synthetic_examples=2000 --train_steps="$steps" --log_every=100000 --eval=false)
declare -A how=([replicas]="--devices=cpu:0,cpu:1 --threads=2" [one_device]="--threads=2")
for ((r = 1; r <= repeats; r++)); do
  for b in "${batch_list[@]}"; do
    for kind in replicas one_device; do
      name="${kind}_b${b}_r$r"
      # shellcheck disable=SC2086  # the kind's flags are words
      point "$name" 30 "$out/runs/$name/report.json" -- fresh "$out/runs/$name" "$BIN_DIR/worker" "${common[@]}" \
        --batch_size="$b" ${how[$kind]} --run_dir="$out/runs/$name"
    done
  done
done
points_end
points_sources > "$out/sources.txt"
/usr/bin/python3 "$ROOT/studies/tables.py" in_graph "$out" "$out"
if ((save)); then
  mkdir -p "$HERE/results"
  cp "$out/in_graph.csv" "$HERE/results/in_graph.csv"
  cp "$out/sources.txt" "$HERE/results/in_graph_sources.txt"
fi
