#!/usr/bin/env bash
# Reruns the four seed studies in order (Touchstone, HKUST, CS744, Wang et al.; about 40
# minutes on the 2-core development VM, most of it Wang et al.'s 8-worker sweep), each
# study's output into OUT/<study>/ and its log into OUT/<study>.log. Extra arguments go to
# every study's run.sh (e.g. --save to refresh studies/*/results/, or --nodes=... for real
# machines; see each run.sh --help). Needs root for the emulated hosts.
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
for study in touchstone hkust cs744 wang-et-al; do
  echo "run_all: $study ($(date -u +%T))"
  "$HERE/$study/run.sh" --out="$out/$study" "${pass[@]}" > "$out/$study.log" 2>&1 ||
    { echo "run_all: $study failed (exit $?): see $out/$study.log" >&2; exit 1; }
done
echo "run_all: done ($(date -u +%T)); logs in $out"
