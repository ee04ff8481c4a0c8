#!/usr/bin/env bash
# Reruns the five seed studies in order (Touchstone, Lu/OSU, HKUST, CS744, Wang et al.: its
# CPU-share sweep, its parts under the study's compute-to-link ratio and its in-graph
# replication), each study's output into OUT/<study>/ and its log into OUT/<study>.log. Every
# study is resumable: the same command again reuses every finished run of the same settings,
# so an interrupted run_all.sh picks up where it stopped. --save refreshes studies/*/results/;
# other options (real nodes, repeats, parts) differ from study to study: give them to each
# study's script (see its --help). Needs root for the emulated hosts.
# What each costs on the 2-core development VM (measured from the studies' logs, in minutes):
# touchstone 3, lu-osu 6, hkust 54 (144 runs), cs744 5 without AlexNet, alexnet (CS744's
# Tables 5-6) 175 (27 runs, 58-63 min per repeat of its 9 points), wang-et-al (the CPU-share
# sweep) 68 (48 runs of 50 steps at scale 1/4), wang-ratio 138 (wang-et-al/ratio.sh --help),
# wang-in-graph 2: about 7 hours 31 min in all, 4 hours 36 min without alexnet, and
# 3 hours 28 min also without wang-et-al (whose Figs. 10-11 wang-ratio reruns on the
# study's hardware, emulated).
#
# Usage: studies/run_all.sh [--out=DIR] [--save] [--without=NAME[,NAME...]]
#   --without  leave out these (the names above), e.g. --without=alexnet,wang-et-al
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$HERE/../build/studies" pass=() without=""
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) pass+=("$arg") ;;
    --without=*) without="${arg#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_all: error: unknown argument '$arg': run_all takes --out, --save and" \
         "--without; give other options to each study's script (see its --help)" >&2; exit 2 ;;
  esac
done
# NAME=SCRIPT in the order they run, and what each costs here in minutes (as above).
studies=(touchstone=touchstone/run.sh lu-osu=lu-osu/run.sh hkust=hkust/run.sh
         cs744=cs744/run.sh wang-et-al=wang-et-al/run.sh wang-ratio=wang-et-al/ratio.sh
         wang-in-graph=wang-et-al/in_graph.sh)
declare -A minutes=([touchstone]=3 [lu-osu]=6 [hkust]=54 [cs744]=5 [alexnet]=175
                    [wang-et-al]=68 [wang-ratio]=138 [wang-in-graph]=2)
declare -A left_out=()
IFS=, read -ra names <<< "$without"
for n in "${names[@]}"; do
  [[ -n "${minutes[$n]:-}" ]] || { echo "run_all: error: --without: unknown name '$n' (one of:" \
    "$(printf '%s\n' "${!minutes[@]}" | sort | tr '\n' ' ')" | sed 's/ $/)/' >&2; exit 2; }
  left_out[$n]=1
done
[[ -z "${left_out[cs744]:-}" ]] || left_out[alexnet]=1  # AlexNet is a part of CS744's
total=0
for n in "${!minutes[@]}"; do [[ -n "${left_out[$n]:-}" ]] || total=$((total + minutes[$n])); done
mkdir -p "$out"
echo "run_all: about $((total / 60)) h $((total % 60)) min on the 2-core VM if nothing is reused" \
  "(${without:+without $without, }$(date -u +%T))"
for study in "${studies[@]}"; do
  name=${study%%=*} script="$HERE/${study#*=}" args=(--out="$out/$name" "${pass[@]}")
  [[ -z "${left_out[$name]:-}" ]] || continue
  cost=${minutes[$name]}
  if [[ "$name" == cs744 ]]; then
    if [[ -n "${left_out[alexnet]:-}" ]]; then
      args+=(--parts=tables34,figs6_10)
    else
      cost=$((cost + minutes[alexnet]))
    fi
  fi
  echo "run_all: $name, about $cost min, about $((total / 60)) h $((total % 60)) min left in all ($(date -u +%T))"
  "$script" "${args[@]}" > "$out/$name.log" 2>&1 ||
    { echo "run_all: $name failed (exit $?): see $out/$name.log" >&2; exit 1; }
  total=$((total - cost))
done
echo "run_all: done ($(date -u +%T)); logs in $out"
