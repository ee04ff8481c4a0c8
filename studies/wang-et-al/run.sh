#!/usr/bin/env bash
# Wang et al., rerun with Fulcrum: examples/s of sync training against the number of workers
# (1, 2, 4, 8) with 1 and 2 ps, on 1 and 10 Gbit/s links, against the ideal linear speed-up
# (their Figures 10 and 11). The study's CIFAR-10 CNN is models' cifar10_cnn (TensorFlow's
# CIFAR-10 tutorial network, 1.07 M parameters) on synthetic 24x24x3 images (no CIFAR-10 files
# here; throughput does not depend on the pixels), batch 100 per worker.
#
# On this machine: PS-W-W with a host per task (ps 0 and the chief on host 1, ps 1 on host 2,
# one host per worker: 10 hosts for 8 workers + 2 ps), every host a scaled one
# (scripts/netns_hosts.sh --cpus 0.6 --scale 4: 0.15 CPU and 1/4 of the link rate each), so
# that 10 hosts fit on 2 cores with the compute-to-communication ratio of hosts of 0.6 CPU on
# the named links. On real nodes (--nodes), the same sweep runs one task per node through
# scripts/launch_ssh.sh, on whatever links the nodes have.
#
# Usage: studies/wang-et-al/run.sh [--out=DIR] [--save] [--steps=30] [--scale=4] [--cpus=0.6]
#          [--workers=1,2,4,8] [--ps=1,2] [--batch_sizes=100]
#          [--nodes=n1,n2,... | --nodes_file=F] [--ssh=CMD] [--remote_dir=DIR]
#   --save   also copy the CSV and the plot into studies/wang-et-al/results/
#   --nodes  real machines, host i = the i-th name (ps 0 + chief, ps 1, then the workers)
# Writes OUT/sweep/ (bench/sweep.py's runs, results.csv, index.html), OUT/wang.csv and
# OUT/wang_throughput.svg. Needs root on emulated hosts; exit code 2 on bad input.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
out="$ROOT/build/studies/wang-et-al" save=0 steps=30 scale=4 cpus=0.6 workers=1,2,4,8 ps=1,2
batches=100 where=()
die() { echo "wang-et-al: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --steps=*) steps="${arg#*=}" ;;
    --scale=*) scale="${arg#*=}" ;;
    --cpus=*) cpus="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --ps=*) ps="${arg#*=}" ;;
    --batch_sizes=*) batches="${arg#*=}" ;;
    --nodes=*|--nodes_file=*|--ssh=*|--remote_dir=*) where+=("$arg") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
if ((${#where[@]})); then
  links=()  # real nodes: their own links, no CPU shares
else
  links=("--rates=1gbit,10gbit" --cpus="$cpus" --scales="$scale")
fi
mkdir -p "$out"
echo "wang-et-al: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$ROOT/bench/sweep.py" --layouts=ps-w-w --hosts=per_task --workers="$workers" \
  --ps="$ps" --batch_sizes="$batches" --modes=sync --model=cifar10_cnn --steps="$steps" \
  --eval_every="$steps" \
  "${links[@]}" "${where[@]}" --extra="--dataset=synthetic --synthetic_shape=24,24,3 --synthetic_examples=2000" \
  --out="$out/sweep" --prefix=stw
echo "wang-et-al: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$ROOT/studies/tables.py" wang "$out/sweep/results.csv" "$out"
if ((save)); then
  mkdir -p "$HERE/results"
  cp "$out/wang.csv" "$out/wang_throughput.svg" "$HERE/results/"
  cp "$out/sweep/results.csv" "$HERE/results/sweep_results.csv"
fi
