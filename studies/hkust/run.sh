#!/usr/bin/env bash
# The HKUST evaluation, rerun with Fulcrum: the three placements PS-W-W, PW-PW and PW-W of
# 2 workers and 1-2 ps on 2 hosts (their 2 machines), training the autoencoder
# (784-256-128-256-784, sigmoid, MSE, Adam 0.001, sync, batch 128 per worker) at two model
# sizes (--model_width 1 and 2) and two dataset sizes (Fashion-MNIST's 60000 training images,
# and the first 15000), 300 global steps; per host: CPU, loopback and external bytes in and
# out, and the loss.
#
# On this machine: 2 emulated hosts on 1 Gbit/s links (scripts/netns_hosts.sh). On real nodes
# (--nodes=n1,n2): the same sweep through scripts/launch_ssh.sh.
#
# Usage: studies/hkust/run.sh [--out=DIR] [--save] [--steps=300]
#          [--nodes=n1,n2 | --nodes_file=F] [--ssh=CMD] [--remote_dir=DIR]
#   --save   also copy the CSV and the plot into studies/hkust/results/
# Writes OUT/sweep/ (bench/sweep.py), OUT/hkust.csv (a row per run and host) and
# OUT/hkust_external_bytes.svg. Needs root on emulated hosts; exit code 2 on bad input.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
out="$ROOT/build/studies/hkust" save=0 steps=300 where=()
die() { echo "hkust: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --steps=*) steps="${arg#*=}" ;;
    --nodes=*|--nodes_file=*|--ssh=*|--remote_dir=*) where+=("$arg") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
links=("--rates=1gbit")
((${#where[@]})) && links=()
mkdir -p "$out"
echo "hkust: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$ROOT/bench/sweep.py" --layouts=ps-w-w,pw-pw,pw-w --workers=2 --ps=1,2 \
  --batch_sizes=128 --modes=sync --model=autoencoder --widths=1,2 --datasets=full,subset15000 \
  --optimizers=adam --steps="$steps" "${links[@]}" "${where[@]}" \
  --extra="--learning_rate=0.001" --out="$out/sweep" --prefix=sth
echo "hkust: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$ROOT/studies/tables.py" hkust "$out/sweep" "$out"
if ((save)); then
  mkdir -p "$HERE/results"
  cp "$out/hkust.csv" "$out/hkust_external_bytes.svg" "$HERE/results/"
  cp "$out/sweep/results.csv" "$HERE/results/sweep_results.csv"
fi
