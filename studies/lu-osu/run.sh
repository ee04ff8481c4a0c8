#!/usr/bin/env bash
# Lu et al. (OSU), TF-gRPC-Bench, rerun with Fulcrum's grpc_bench: point-to-point latency at
# the talk's sizes (32 B, 64 KiB, 1 MiB), bandwidth at the same sizes, and PS throughput
# (M servers x N clients) with the uniform, random and skew payload schemes, each over raw TCP
# (the limit), gRPC serialized (protobuf bytes fields) and gRPC ByteBuffer (non-serialized,
# as TensorFlow sends tensors), on loopback and across two emulated hosts at 1 and 10 Gbit/s
# (bench/grpc_bench_netns.sh); plus the talk's first figure, the distribution of payload sizes
# per RPC, from the profiler's per-RPC size histograms while training mnist_cnn and
# cifar10_cnn on a cluster of 1 ps + 2 workers (sync).
#
# Usage: studies/lu-osu/run.sh [--out=DIR] [--save] [--pairs=5] [--links=lo,1gbit,10gbit]
#          [--models=mnist_cnn,cifar10_cnn] [--steps=60]
#   --save   also copy the CSVs and plots into studies/lu-osu/results/
# One command for the whole study; each point (a link's benchmarks, a model's training) is
# recorded in OUT/points/ when it finishes, and the same command again reuses the finished
# points of the same settings (studies/lib/points.sh: a progress line per point with the time
# left; each record names its commit and binaries). Writes OUT/grpc_<link>.json|csv
# (grpc_bench's figures), OUT/payload/<model>/ (the training runs), OUT/lu_*.csv and plots.
# Needs root for the emulated hosts (loopback alone without). Exit code 2 on bad input.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN_DIR=${BIN_DIR:-$ROOT/build/bin}
out="$ROOT/build/studies/lu-osu" save=0 pairs=5 links=lo,1gbit,10gbit
models=mnist_cnn,cifar10_cnn steps=60
die() { echo "lu-osu: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --pairs=*) pairs="${arg#*=}" ;;
    --links=*) links="${arg#*=}" ;;
    --models=*) models="${arg#*=}" ;;
    --steps=*) steps="${arg#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[[ "$pairs" =~ ^[1-9][0-9]?$ ]] || die "--pairs=$pairs: expected 1-99"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps=$steps: expected a positive whole number"
IFS=, read -r -a link_list <<< "$links"
IFS=, read -r -a model_list <<< "$models"
for l in "${link_list[@]}"; do
  [[ "$l" =~ ^(lo|[0-9]+(m|g)bit)$ ]] || die "--links: '$l' is not lo or a rate like 1gbit"
  [[ "$l" == lo || $EUID -eq 0 ]] || die "--links=$l: the emulated hosts need root"
done
for b in grpc_bench ps worker chief; do
  [[ -x "$BIN_DIR/$b" ]] || die "$BIN_DIR/$b not found: build first (scripts/setup.sh)"
done
known=$("$BIN_DIR/worker" --help 2>&1 | tr -s ' \n' ' ' | sed -n 's/.*Model to train: \([^.]*\)\..*/\1/p')
for m in "${model_list[@]}"; do
  [[ ", $known," == *" $m,"* || "$known" == *" or $m" ]] || die "--models: unknown model '$m' (the worker knows: $known)"
done
mkdir -p "$out"
source "$ROOT/studies/lib/points.sh"
points_begin "$out" $((${#link_list[@]} + ${#model_list[@]})) lu-osu
points_estimate $((${#link_list[@]} * 40 * pairs + ${#model_list[@]} * 120))

# The talk's sizes, its payload schemes; the PS throughput's parameter sets by scheme.
bench=(--benchmarks=latency,bandwidth,ps_throughput --sizes=32,64K,1M --iovec=1
       --schemes=uniform-medium,random,skew --ps_schemes=uniform-medium,random,skew
       --ps_servers=1,2 --ps_clients=1,2 --pairs="$pairs")
for l in "${link_list[@]}"; do
  files=(--json="$out/grpc_$l.json" --csv="$out/grpc_$l.csv")
  if [[ "$l" == lo ]]; then
    point "grpc_$l" $((40 * pairs)) -- "$BIN_DIR/grpc_bench" "${bench[@]}" "${files[@]}"
  else
    point "grpc_$l" $((40 * pairs)) -- env GRPC_BENCH="$BIN_DIR/grpc_bench" GRPC_BENCH_PREFIX=lu \
      "$ROOT/bench/grpc_bench_netns.sh" "$l" "${bench[@]}" "${files[@]}"
  fi
done
# The payload sizes of real training: every RPC's size is in the tasks' summary.json
# (rpc_traffic[].sent_size_histogram / received_size_histogram).
for m in "${model_list[@]}"; do
  data=()
  [[ "$m" == cifar10_cnn ]] && data=(--dataset=synthetic --synthetic_shape=24,24,3 --synthetic_examples=2000)
  point "payload_$m" 120 "$out/payload/$m/report.json" -- fresh "$out/payload/$m" env BIN_DIR="$BIN_DIR" "$ROOT/scripts/local_cluster.sh" \
    "$ROOT/cluster_specs/local_1ps_2w.json" --model="$m" --mode=sync --batch_size=100 \
    --train_steps="$steps" --eval_every="$steps" "${data[@]}" --run_dir="$out/payload/$m"
done
points_end
points_sources > "$out/sources.txt"
/usr/bin/python3 "$ROOT/studies/tables.py" lu "$out" "$out"
if ((save)); then
  mkdir -p "$HERE/results"
  cp "$out"/lu_*.csv "$out"/lu_*.svg "$out/sources.txt" "$HERE/results/"
fi
