#!/usr/bin/env bash
# Is scaled emulation faithful? The scaling efficiency of an N-worker job, measured on emulated
# hosts at scale 1 and at scale 1/F (scripts/netns_hosts.sh up --cpus C --rate R --scale F:
# every host's CPU share and link rate divided by F), should agree: if it does, clusters of
# more hosts than this machine has cores can be emulated at a reduced scale with the same
# compute-to-communication ratio (issue 15; docs/sweeps.md).
#
# Layout PS-W-W on N+1 hosts (host 1: ps and chief; hosts 2..N+1: one worker each), async, 1
# thread per task. For each link rate and scale: the cluster with 1 worker, then with N
# (--pairs times, interleaved); efficiency = examples/s with N workers / (N x with 1 worker),
# examples/s = report.json's workers_examples_per_sec. Prints a markdown table with the
# medians and the ratio efficiency(scale 1/F) / efficiency(scale 1) per rate, plus
# /proc/loadavg before and after. Needs root; the hosts are removed on every way out.
#
# Usage: bench/scaled_emulation.sh [--cpus=0.4] [--scale=4] [--rates=1gbit,10gbit]
#          [--model=cifar10_cnn] [--batch_size=32] [--steps=120] [--pairs=3]
#          [--cpu_period_us=10000] [--workers=2] [--scales=1,F] [--prefix=se]
#          [--extra="--dataset=synthetic --synthetic_shape=24,24,3"]
#          [--out=build/scaled_emulation.md]
#   --cpus   CPU share of every host at scale 1 (N+1 hosts: at most nproc / (N+1))
#   --extra  flags for every task (the default: cifar10_cnn on synthetic 24x24x3 images)
#   --scales the scales to run (default 1 and F; "F" alone for the N-worker efficiency at 1/F)
#   --steps  global steps of each run at scale 1; at scale 1/F the run takes ~F times longer
#   --cpu_period_us  the cgroups' quota period (netns_hosts.sh --cpu_period_us)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cpus=0.4 scale=4 rates=1gbit,10gbit model=cifar10_cnn batch=32 steps=120 pairs=3 prefix=se
period_us=10000 workers=2 scales="" extra="--dataset=synthetic --synthetic_shape=24,24,3"
out="${ROOT}/build/scaled_emulation.md"
BENCH_NAME=scaled_emulation
source "${ROOT}/bench/lib/options.sh"
parse_options "cpus scale rates model batch_size=batch steps pairs prefix cpu_period_us=period_us workers scales extra out" "$@"
for v in $batch $steps $pairs $workers; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "expected a positive integer, got '$v'"
done
((EUID == 0)) || die "needs root (network namespaces and cgroups)"
read -r -a extra_flags <<< "$extra"
[[ -x "$ROOT/build/bin/ps" ]] || die "build/bin/ps not found: build first (scripts/quickstart.sh)"

work=$(mktemp -d "${TMPDIR:-/tmp}/scaled_emulation.XXXXXX")
cleanup() {
  "$ROOT/scripts/netns_hosts.sh" down --prefix "$prefix" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
results="$work/results.tsv"
: > "$results"

# run RATE SCALE WORKERS PAIR: appends "rate scale workers pair ex_per_sec" to $results.
run() {
  local rate=$1 s=$2 w=$3 p=$4 dir="$work/r-$1-$2-$3-$4"
  mkdir -p "$dir"
  "$ROOT/scripts/make_spec.py" --layout ps-w-w --workers "$w" --ps 1 --hosts $((workers + 1)) \
    --prefix "$prefix" --out "$dir" > /dev/null
  # Runs at scale 1/F take ~F times longer: the same global steps, a longer deadline.
  if ! timeout $((120 * ${s%.*} + 120)) "$ROOT/scripts/local_cluster.sh" --hosts "$dir/hosts.json" \
      "$dir/spec.json" --model="$model" --batch_size="$batch" --mode=async --threads=1 \
      --train_steps="$steps" --eval_every=0 --eval=false --log_every=100000 \
      --startup_timeout=120 "${extra_flags[@]}" --run_dir="$dir/run" > "$dir/cluster.log" 2>&1; then
    tail -n 5 "$dir/cluster.log" >&2
    die "the cluster failed (rate $rate, scale 1/$s, $w worker(s))"
  fi
  local ex
  ex=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workers_examples_per_sec"])' \
    "$dir/run/report.json")
  echo -e "$rate\t$s\t$w\t$p\t$ex" >> "$results"
  printf '  rate %-7s scale 1/%-3s %s worker(s) pair %s: %9.0f ex/s\n' "$rate" "$s" "$w" "$p" "$ex" >&2
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "scaled_emulation: $model batch $batch, $steps steps, hosts of $cpus CPU at scale 1," \
  "scale 1/$scale, rates $rates, $pairs pair(s), cgroup period $period_us us; load $load_before" >&2
[[ -n "$scales" ]] || scales="1,$scale"
for rate in ${rates//,/ }; do
  for s in ${scales//,/ }; do
    "$ROOT/scripts/netns_hosts.sh" down --prefix "$prefix" > /dev/null 2>&1 || true
    "$ROOT/scripts/netns_hosts.sh" up $((workers + 1)) --cpus "$cpus" --scale "$s" --rate "$rate" \
      --cpu_period_us "$period_us" --prefix "$prefix" >&2
    for ((p = 1; p <= pairs; p++)); do
      run "$rate" "$s" 1 "$p"
      run "$rate" "$s" "$workers" "$p"
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

mkdir -p "$(dirname "$out")"
python3 - "$results" "$scale" "$cpus" "$model" "$batch" "$steps" "$pairs" "$load_before" \
    "$load_after" "$period_us" "$workers" "$scales" "$extra" <<'EOF' | tee "$out"
import statistics as st, sys
from collections import defaultdict
res, F, cpus, model, B, steps, P, lb, la, period, N, scales, extra = sys.argv[1:]
N = int(N)
scales = scales.split(",")
ex = defaultdict(dict)  # (rate, scale, workers) -> {pair: ex/s}
for line in open(res):
    rate, s, w, p, v = line.rstrip("\n").split("\t")
    ex[(rate, s, int(w))][int(p)] = float(v)
print("PS-W-W on %d emulated hosts (ps + chief, then one worker each), %s batch %s (%s), async, "
      "%s steps, 1 thread per task; hosts of %s CPU at scale 1, divided with the link rate by "
      "the scale's F (cgroup quota period %s us); %s pair(s); efficiency = ex/s with %d "
      "workers / (%d x with 1), per pair; load %s -> %s.\n" % (
          N + 1, model, B, extra, steps, cpus, period, P, N, N, lb, la))
print("| rate (scale 1) | scale | 1 worker ex/s | %d workers ex/s | efficiency, median (min-max) |" % N)
print("| --- | --- | ---: | ---: | --- |")
eff = {}
for rate in dict.fromkeys(k[0] for k in ex):
    for s in scales:
        one, many = ex[(rate, s, 1)], ex[(rate, s, N)]
        e = [many[p] / (N * one[p]) for p in one if p in many]
        eff[(rate, s)] = st.median(e)
        print("| %s | 1/%s | %.0f | %.0f | %.3f (%.3f-%.3f) |" % (
            rate, s, st.median(one.values()), st.median(many.values()), st.median(e), min(e),
            max(e)))
print()
if "1" in scales and len(scales) > 1:
    for rate in dict.fromkeys(k[0] for k in ex):
        for s in scales:
            if s == "1":
                continue
            r = eff[(rate, s)] / eff[(rate, "1")]
            print("%s: efficiency at scale 1/%s / at scale 1 = %.3f (faithful within 10%%: %s)" % (
                rate, s, r, "yes" if abs(r - 1) <= 0.10 else "no"))
EOF
echo "scaled_emulation: table written to ${out#"${ROOT}"/}" >&2
