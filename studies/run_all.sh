#!/usr/bin/env bash
# Reruns the five seed studies in order (Touchstone, Lu/OSU, HKUST, CS744, Wang et al.: its
# CPU-share sweep, its parts under the study's compute-to-link ratio and its in-graph
# replication), each study's output into OUT/<study>/ and its log into OUT/<study>.log. Every
# study is resumable: the same command again reuses every finished run of the same settings,
# so an interrupted run_all.sh picks up where it stopped. --save refreshes studies/*/results/;
# other options (real nodes, repeats, parts) differ from study to study: give them to each
# study's script (see its --help). Needs root for the emulated hosts.
# What each costs on the 2-core development VM (measured):
# Touchstone 3 min, Lu/OSU 6 min, HKUST 54 min (144 runs), CS744 5 min without AlexNet and
# 2 hours 55 min for AlexNet's 27 runs (58-63 min per repeat of its 9 points), Wang et al.'s
# CPU-share sweep 68 min (48 runs of 50 steps at scale 1/4), its ratio parts 2 hours 18 min
# (wang-et-al/ratio.sh --help), its in-graph replication 2 min: about 4 hours 36 min without
# AlexNet, 7 hours 31 min with it.
#
# Usage: studies/run_all.sh [--out=DIR] [--save]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$HERE/../build/studies" pass=()
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) pass+=("$arg") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_all: error: unknown argument '$arg': run_all takes --out and --save; give" \
         "other options to each study's script (see its --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
# NAME=SCRIPT: each study's output folder and its script.
for study in touchstone=touchstone/run.sh lu-osu=lu-osu/run.sh hkust=hkust/run.sh \
    cs744=cs744/run.sh wang-et-al=wang-et-al/run.sh wang-ratio=wang-et-al/ratio.sh \
    wang-in-graph=wang-et-al/in_graph.sh; do
  name=${study%%=*} script="$HERE/${study#*=}"
  echo "run_all: $name ($(date -u +%T))"
  "$script" --out="$out/$name" "${pass[@]}" > "$out/$name.log" 2>&1 ||
    { echo "run_all: $name failed (exit $?): see $out/$name.log" >&2; exit 1; }
done
echo "run_all: done ($(date -u +%T)); logs in $out"
