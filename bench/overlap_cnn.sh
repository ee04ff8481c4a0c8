#!/usr/bin/env bash
# The overlapped schedule (--overlap) against the sequential one on emulated hosts: 1 ps and 2
# workers of cifar10_cnn (24x24 crops of synthetic 32x32x3 images), sync mode, one compute
# thread per task, each task on its own host of scripts/netns_hosts.sh (--rate per link; the
# ps and the chief share host 1). For each pair and chunk size the sequential and the
# overlapped cluster run back to back; beside them, in the same pair, the two limits the
# issue holds the step to: compute only (the single-process worker, same batch, alone and two
# at once, as the cluster's two workers share this machine's cores) and communication only
# (the sequential cluster at batch 1, whose step is the push-pull of the whole model). Figures
# are steady-state step_time_p50_ms (steps after the first 20), the mean of the two workers;
# the table gives each figure's median over the pairs and the overlapped / sequential ratio
# per pair. /proc/loadavg is printed before every pair and at the end. Needs root (network
# namespaces); the hosts are taken down on exit.
#
# Usage: bench/overlap_cnn.sh [--batch=32] [--chunks=262144,2097152] [--pairs=3] [--steps=50]
#          [--rate=1gbit] [--prefix=ovb] [--out=build/overlap_cnn]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/build/bin"
batch=32 chunks=262144,2097152 pairs=3 steps=50 rate=1gbit prefix=ovb
out="${ROOT}/build/overlap_cnn"
BENCH_NAME=overlap_cnn
source "${ROOT}/bench/lib/options.sh"
parse_options "batch chunks pairs steps rate prefix out" "$@"
for b in worker ps chief; do [[ -x "$BIN/$b" ]] || die "$BIN/$b is missing: build first"; done
((EUID == 0)) || die "needs root (network namespaces)"
[[ "$steps" -ge 25 ]] || die "--steps=$steps: at least 25 (20 warm-up steps are dropped)"

rm -rf "$out"
mkdir -p "$out"
"$ROOT/scripts/netns_hosts.sh" up 3 --rate "$rate" --prefix "$prefix"
trap '"$ROOT/scripts/netns_hosts.sh" down --prefix "$prefix"' EXIT
python3 "$ROOT/scripts/make_spec.py" --layout ps-w-w --workers 2 --ps 1 --hosts 3 \
  --prefix "$prefix" --out "$out/spec" > /dev/null

MODEL=(--model=cifar10_cnn --dataset=synthetic --synthetic_shape=32,32,3
       --synthetic_examples=20000 --input_pipeline=cifar10 --threads=1 --eval=false
       --log_every=100000)
single() {  # single RUN BATCH
  "$BIN/worker" "${MODEL[@]}" --batch_size="$2" --train_steps="$steps" \
    --run_dir="$out/$1" > "$out/$1.log" 2>&1
}
cluster() {  # cluster RUN BATCH CHUNK OVERLAP
  "$ROOT/scripts/local_cluster.sh" --hosts "$out/spec/hosts.json" "$out/spec/spec.json" \
    "${MODEL[@]}" --batch_size="$2" --train_steps="$steps" --mode=sync --eval_every=0 \
    --rpc_chunk_bytes="$3" --overlap="$4" --run_dir="$out/$1" > "$out/$1.log" 2>&1 ||
    die "the cluster run $1 failed: see $out/$1.log"
}
for ((p = 1; p <= pairs; p++)); do
  echo "pair $p: load $(cat /proc/loadavg)"
  single "p${p}_compute" "$batch"
  single "p${p}_compute2a" "$batch" & single "p${p}_compute2b" "$batch"; wait
  for chunk in ${chunks//,/ }; do
    cluster "p${p}_c${chunk}_sequential" "$batch" "$chunk" false
    cluster "p${p}_c${chunk}_overlapped" "$batch" "$chunk" true
    cluster "p${p}_c${chunk}_communication" 1 "$chunk" false
  done
done
echo "end: load $(cat /proc/loadavg)"

python3 - "$out" "$pairs" "$chunks" "$batch" <<'PY'
import json, os, statistics, sys
out, pairs, chunks, batch = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]

def p50(run, tasks):
    return statistics.mean(json.load(open(os.path.join(out, run, t, "summary.json")))
                           ["step_time_p50_ms"] for t in tasks)

def keys(run, key):
    return statistics.mean(json.load(open(os.path.join(out, run, f"worker-{w}", "summary.json")))
                           [key] for w in (0, 1))

workers = ["worker-0", "worker-1"]
compute = [p50(f"p{p}_compute", [""]) for p in range(1, pairs + 1)]
compute2 = [p50(f"p{p}_compute2a", [""]) / 2 + p50(f"p{p}_compute2b", [""]) / 2
            for p in range(1, pairs + 1)]
med = statistics.median
print(f"\ncifar10_cnn, batch {batch}, 1 ps + 2 workers sync, {pairs} pair(s); step_time_p50_ms, "
      "median over the pairs (per-pair values in brackets)\n")
print("| chunk bytes | sequential | overlapped | overlapped / sequential | comm wait seq / ovl "
      "| compute only (1 / 2 at once) | communication only | overlapped / max(compute, comm) |")
print("| ---: | ---: | ---: | --- | --- | --- | ---: | --- |")
for c in chunks:
    seq = [p50(f"p{p}_c{c}_sequential", workers) for p in range(1, pairs + 1)]
    ovl = [p50(f"p{p}_c{c}_overlapped", workers) for p in range(1, pairs + 1)]
    comm = [p50(f"p{p}_c{c}_communication", workers) for p in range(1, pairs + 1)]
    wait_s = med([keys(f"p{p}_c{c}_sequential", "comm_wait_mean_ms") for p in range(1, pairs + 1)])
    wait_o = med([keys(f"p{p}_c{c}_overlapped", "comm_wait_mean_ms") for p in range(1, pairs + 1)])
    ratio = [o / s for o, s in zip(ovl, seq)]
    bound1 = [o / max(a, m) for o, a, m in zip(ovl, compute, comm)]
    bound2 = [o / max(a, m) for o, a, m in zip(ovl, compute2, comm)]
    fmt = lambda v: "/".join(f"{x:.0f}" for x in v)
    print(f"| {c} | {med(seq):.0f} [{fmt(seq)}] | {med(ovl):.0f} [{fmt(ovl)}] | "
          f"{med(ratio):.2f} [{'/'.join(f'{x:.2f}' for x in ratio)}] | "
          f"{wait_s:.0f} / {wait_o:.0f} | {med(compute):.0f} / {med(compute2):.0f} | "
          f"{med(comm):.0f} [{fmt(comm)}] | {med(bound1):.2f} (1) / {med(bound2):.2f} (2 at once) |")
PY
