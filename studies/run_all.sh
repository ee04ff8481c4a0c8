#!/usr/bin/env bash
# Reruns the five seed studies in order (Touchstone, Lu/OSU, HKUST, CS744, Wang et al. and
# its in-graph replication), each study's output into OUT/<study>/ and its log into
# OUT/<study>.log. Every study is resumable: the same command again reuses every finished run
# of the same settings, so an interrupted run_all.sh picks up where it stopped. Extra
# arguments go to every study's script (e.g. --save to refresh studies/*/results/, or
# --nodes=... for real machines; see each run.sh --help). Needs root for the emulated hosts.
# What each costs on the 2-core development VM (measured, or estimated where said):
# Touchstone 3 min, Lu/OSU 6 min, CS744 5 min without AlexNet (its --parts=alexnet: 58-63 min
# per repeat of its 9 points, 2 hours 55 min for 3), HKUST 54 min (144 runs), Wang et al.'s default sweep about 100 min
# (estimated: 48 runs of 50 steps at scale 1/4), its in-graph replication 2 min.
#
# Usage: studies/run_all.sh [--out=DIR] [run.sh options...]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$HERE/../build/studies" pass=()
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pass+=("$arg") ;;
  esac
done
mkdir -p "$out"
for study in touchstone lu-osu hkust cs744 wang-et-al wang-et-al/in_graph.sh; do
  script="$HERE/$study/run.sh" name=$study
  [[ "$study" == *.sh ]] && script="$HERE/$study" name=wang-in-graph
  echo "run_all: $name ($(date -u +%T))"
  "$script" --out="$out/$name" "${pass[@]}" > "$out/$name.log" 2>&1 ||
    { echo "run_all: $name failed (exit $?): see $out/$name.log" >&2; exit 1; }
done
echo "run_all: done ($(date -u +%T)); logs in $out"
