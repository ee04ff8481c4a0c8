#!/usr/bin/env bash
# The HKUST evaluation, rerun with Fulcrum: the three placements PS-W-W, PW-PW and PW-W of
# 2 workers and 1-2 ps on 2 hosts (their 2 machines), each beside the single-machine
# baseline (the worker alone, no ps), training both of the study's models, sync, batch 128
# per worker, Adam 0.001, at two dataset sizes (Fashion-MNIST's 60000 training images, and
# the first 15000); per host: CPU, loopback and external bytes in and out, and the loss:
#  - the autoencoder (784-256-128-256-784, sigmoid, MSE), --steps global steps, at two model
#    sizes (--model_width 1 and 2), into OUT/sweep/;
#  - the spatial transformer network, `stn`, and the seed's deeper variant of it, `stn_deep`
#    (its model size: one more conv + pool block, not width), --stn_steps global steps (the
#    STN computes about 10x longer per example than the autoencoder here), into OUT/sweep_stn/.
# Every point --repeats times (3); the CSVs give the median and the spread.
#
# On this machine: 2 emulated hosts on 1 Gbit/s links (scripts/netns_hosts.sh). On real nodes
# (--nodes=n1,n2): the same sweeps through scripts/launch_ssh.sh.
#
# Usage: studies/hkust/run.sh [--out=DIR] [--save] [--steps=300] [--stn_steps=60] [--repeats=3]
#          [--parts=autoencoder,stn] [--nodes=n1,n2 | --nodes_file=F] [--ssh=CMD]
#          [--remote_dir=DIR]
#   --save   also copy the CSVs and the plots into studies/hkust/results/
# One command; bench/sweep.py reuses every finished run of the same settings when the same
# command runs again (a progress line per run with the time left; runs.csv names each run's
# commit and binaries), except a run that ran beside more than 0.5 CPUs of other work, which it
# runs again (--rerun_busy; runs.csv's other_cpus). Writes OUT/sweep*/ (bench/sweep.py),
# OUT/hkust*.csv (a row per run and host) and OUT/hkust*_external_bytes.svg. Needs root on
# emulated hosts; exit code 2 on bad input.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
out="$ROOT/build/studies/hkust" save=0 steps=300 stn_steps=60 repeats=3 parts=autoencoder,stn
where=()
die() { echo "hkust: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --steps=*) steps="${arg#*=}" ;;
    --repeats=*) repeats="${arg#*=}" ;;
    --stn_steps=*) stn_steps="${arg#*=}" ;;
    --parts=*) parts="${arg#*=}" ;;
    --nodes=*|--nodes_file=*|--ssh=*|--remote_dir=*) where+=("$arg") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[[ "$parts" =~ ^(autoencoder|stn)(,(autoencoder|stn))*$ ]] || die "--parts=$parts: autoencoder and/or stn"
links=("--rates=1gbit")
((${#where[@]})) && links=()
mkdir -p "$out"
common=(--layouts=ps-w-w,pw-pw,pw-w --workers=2 --ps=1,2 --batch_sizes=128 --modes=sync
        --datasets=full,subset15000 --optimizers=adam --repeats="$repeats"
        --single_baseline --rerun_busy "${links[@]}" "${where[@]}" --extra=--learning_rate=0.001)
echo "hkust: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
# A sweep with failed runs (exit 1) still gets its tables; the study then exits 1.
sweep_code=0
sweep() {
  local code=0
  /usr/bin/python3 "$ROOT/bench/sweep.py" "$@" || code=$?
  ((code <= 1)) || exit "$code"  # bad input (2): nothing ran
  ((code == 0)) || sweep_code=$code
}
if [[ ",$parts," == *,autoencoder,* ]]; then
  sweep "${common[@]}" --steps="$steps" --model=autoencoder --widths=1,2 --out="$out/sweep" --prefix=sth
  /usr/bin/python3 "$ROOT/studies/tables.py" hkust "$out/sweep" "$out"
fi
if [[ ",$parts," == *,stn,* ]]; then
  sweep "${common[@]}" --steps="$stn_steps" --models=stn,stn_deep --widths=1 --out="$out/sweep_stn" \
    --prefix=sts
  /usr/bin/python3 "$ROOT/studies/tables.py" hkust "$out/sweep_stn" "$out" stn
fi
echo "hkust: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
if ((save)); then
  mkdir -p "$HERE/results"
  for f in hkust.csv hkust_external_bytes.svg hkust_stn.csv hkust_stn_external_bytes.svg; do
    if [[ -f "$out/$f" ]]; then cp "$out/$f" "$HERE/results/"; fi
  done
  if [[ -f "$out/sweep/results.csv" ]]; then cp "$out/sweep/results.csv" "$HERE/results/sweep_results.csv"; fi
  if [[ -f "$out/sweep_stn/results.csv" ]]; then
    cp "$out/sweep_stn/results.csv" "$HERE/results/sweep_stn_results.csv"
  fi
fi
if ((sweep_code)); then
  echo "hkust: some runs failed (see the sweeps' runs.csv); the same command again reruns them" >&2
  exit 1
fi
