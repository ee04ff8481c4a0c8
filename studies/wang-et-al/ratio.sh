#!/usr/bin/env bash
# Wang et al. under the study's compute-to-link ratio, every part in one command: run.sh
# --host_examples_per_sec=427 (a host computes what one K40m GPU computes of the CIFAR-10
# tutorial CNN, beside its link; see README.md), 50 steps per run, 3 runs per point, 1 ps and
# 1 Gbit/s unless a part says otherwise. The parts, each into its folder of OUT:
#   main     batch 100 and 200 with 1, 2, 3, 4 and 8 workers, batch 400 with 1-4 (OUT/)
#   b400_w8  batch 400 with 1 and 8 workers on 3200 synthetic examples, so that each of 8
#            shards holds a batch (OUT/b400_w8/, with OUT/'s measured examples_per_cpu.txt)
#   ps2      1 and 2 ps with 1-4 workers at batch 100 (OUT/; the 1-ps runs are main's)
#   10gbit   10 Gbit/s links with 1, 2, 3, 4 and 8 workers at batch 100 (OUT/)
#   scale1   faithfulness: 1 and 2 workers at scale 1 against main's scale 1/2 (OUT/scale1/)
#   scale3   8 workers with 1 and 2 ps (and 1 worker) at scale 1/3, where 10 hosts can have
#            the ratio; scale 1/2 cannot give it to 10 (OUT/scale3/)
# Every part is resumable as run.sh is: the same command again reuses each finished run.
# Costs here: main 68 min (batch 100: 16, 200: 24, 400: 28), b400_w8 17, ps2 13 (its 2-ps
# runs), 10gbit 14, scale1 3, scale3 23; about 2 hours 18 min in all.
#
# Usage: studies/wang-et-al/ratio.sh [--out=DIR] [--save]
#          [--parts=main,b400_w8,ps2,10gbit,scale1,scale3]
#   --save   also copy each part's table (wang.csv), its runs (sweep/runs.csv) and its ratio
#            check (parts in a folder of their own) into studies/wang-et-al/results/ as
#            wang_ratio_PART.csv, sweep_ratio_PART_runs.csv and ratio_check_PART.txt (main:
#            no _PART; its plot as wang_ratio_throughput.svg)
# Needs root for the emulated hosts; exit code 2 on bad input, 1 when a part's runs failed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
out="$ROOT/build/studies/wang-ratio" save=0 parts=main,b400_w8,ps2,10gbit,scale1,scale3
die() { echo "wang-ratio: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --parts=*) parts="${arg#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
IFS=, read -r -a wanted <<< "$parts"
((${#wanted[@]})) || die "--parts is empty"
for p in "${wanted[@]}"; do
  [[ "$p" =~ ^(main|b400_w8|ps2|10gbit|scale1|scale3)$ ]] ||
    die "--parts: unknown part '$p' (main, b400_w8, ps2, 10gbit, scale1, scale3)"
done
has() { [[ ",$parts," == *",$1,"* ]]; }
ratio=(--host_examples_per_sec=427 --scale=2 --repeats=3 --steps=50 --ps=1 --rates=1gbit
       --batch_sizes=100)
failed=()
# sweep DIR run.sh-args...: one run.sh sweep under the ratio into DIR (after the common
# settings, so the part's own override them); a failed run is noted, bad input stops all.
sweep() {
  local dir=$1 code=0
  shift
  echo "wang-ratio: run.sh --out=$dir $* ($(date -u +%T))"
  "$HERE/run.sh" --out="$dir" "${ratio[@]}" "$@" || code=$?
  ((code != 2)) || exit 2
  ((code == 0)) || failed+=("$dir")
}
# keep PART DIR [CHECK]: with --save, the part's table and runs (DIR/wang.csv,
# DIR/sweep/runs.csv) and the ratio check of the hosts it ran on (CHECK: main's, and that of
# a part in a folder of its own) into results/.
keep() {
  ((save)) || return 0
  local part=$1 dir=$2 check=${3:-} sfx="_$1"
  [[ "$part" == main ]] && sfx=""
  cp "$dir/wang.csv" "$HERE/results/wang_ratio$sfx.csv"
  cp "$dir/sweep/runs.csv" "$HERE/results/sweep_ratio${sfx}_runs.csv"
  [[ -z "$check" ]] || cp "$check" "$HERE/results/ratio_check$sfx.txt"
}
# append_csv INTO FROM: FROM's rows appended to INTO's, by column name (two sweeps' CSVs may
# differ in their columns: one written before a column was added).
append_csv() {
  /usr/bin/python3 - "$1" "$2" << 'EOF'
import csv, sys
fields, rows = [], []
for path in sys.argv[1:]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        fields += [c for c in reader.fieldnames if c not in fields]
        rows += list(reader)
with open(sys.argv[1], "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
EOF
}
mkdir -p "$out" "$HERE/results"
if has main; then
  # Batch 400 with 8 workers needs more examples than the others' 2000 (b400_w8): two sweeps,
  # one table of both (their runs and results appended into OUT/main/sweep/).
  merged="$out/main/sweep"
  mkdir -p "$merged"
  sweep "$out" --workers=1,2,3,4,8 --batch_sizes=100,200
  cp "$out/sweep/runs.csv" "$out/sweep/results.csv" "$merged/"
  sweep "$out" --workers=1,2,3,4 --batch_sizes=400
  append_csv "$merged/runs.csv" "$out/sweep/runs.csv"
  append_csv "$merged/results.csv" "$out/sweep/results.csv"
  /usr/bin/python3 "$ROOT/studies/tables.py" wang "$merged/results.csv" "$out/main"
  keep main "$out/main" "$out/ratio_check.txt"
  ((!save)) || cp "$out/main/wang_throughput.svg" "$HERE/results/wang_ratio_throughput.svg"
fi
if has b400_w8; then
  # The same hosts as main's: its measured CPU (run.sh reuses OUT/examples_per_cpu.txt).
  mkdir -p "$out/b400_w8"
  [[ -s "$out/b400_w8/examples_per_cpu.txt" || ! -s "$out/examples_per_cpu.txt" ]] ||
    cp "$out/examples_per_cpu.txt" "$out/b400_w8/"
  sweep "$out/b400_w8" --workers=1,8 --batch_sizes=400 --synthetic_examples=3200
  keep b400_w8 "$out/b400_w8" "$out/b400_w8/ratio_check.txt"
fi
if has ps2; then
  sweep "$out" --workers=1,2,3,4 --ps=1,2
  keep ps2 "$out"
fi
if has 10gbit; then
  sweep "$out" --workers=1,2,3,4,8 --rates=10gbit
  keep 10gbit "$out"
fi
if has scale1; then
  sweep "$out/scale1" --workers=1,2 --scale=1
  keep scale1 "$out/scale1" "$out/scale1/ratio_check.txt"
fi
if has scale3; then
  sweep "$out/scale3" --workers=1,8 --ps=1,2 --scale=3
  keep scale3 "$out/scale3" "$out/scale3/ratio_check.txt"
fi
if ((${#failed[@]})); then
  echo "wang-ratio: runs failed in ${failed[*]} (see each sweep/runs.csv); the same command" \
    "again reruns them" >&2
  exit 1
fi
echo "wang-ratio: done ($(date -u +%T))"
