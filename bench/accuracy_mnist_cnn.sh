#!/usr/bin/env bash
# mnist_cnn's accuracy targets on Fashion-MNIST, 3 epochs, final test accuracy.
#   --against=cluster (default): single mode (batch 100) against the same global batch in a
#     1 ps + 2 workers sync cluster on loopback (batch 50 per worker, 3 epochs = 1800 global
#     steps), Adam lr 0.001 in both (the worker's summary.json, the chief's report.json).
#   --against=torch: single mode against PyTorch's same recipe (issue 26): momentum 0.9,
#     lr 0.01, batch 64, 3 epochs (2811 steps), Glorot-uniform kernels and zero biases, dropout
#     0.4, for seeds 1..--runs on both sides (bench/reference/train_reference.py
#     --model=mnist_cnn, given its best configuration: the OpenMP OpenBLAS with its AVX-512
#     kernels, the glibc settings, threads = --threads; docs/benchmarking.md). Prints each
#     run, each side's median and the difference of the medians in points.
#
# Usage: bench/accuracy_mnist_cnn.sh [--against=cluster|torch] [--runs=3] [--threads=2]
#          [--out=build/accuracy_mnist_cnn]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads=2 out="${ROOT}/build/accuracy_mnist_cnn" against=cluster runs=3
BENCH_NAME=accuracy_mnist_cnn
source "${ROOT}/bench/lib/options.sh"
parse_options "threads out against runs" "$@"
[[ "$against" =~ ^(cluster|torch)$ ]] ||
  { echo "accuracy_mnist_cnn: --against must be cluster or torch, not '$against'" >&2; exit 2; }
for v in threads runs; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] ||
    { echo "accuracy_mnist_cnn: --$v must be a positive integer, not '${!v}'" >&2; exit 2; }
done
[[ -x "${ROOT}/build/bin/worker" ]] || { echo "build first" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
accuracy() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['final_test_accuracy'])" "$1"; }

against_cluster() {
  local common=(--model=mnist_cnn --optimizer=adam --learning_rate=0.001 --epochs=3 --log_every=200)
  "${ROOT}/build/bin/worker" "${common[@]}" --batch_size=100 --threads="$threads" \
    --run_dir="$out/single" >"$out/single.log" 2>&1
  local single cluster spec="$out/spec.json"
  single="$(accuracy "$out/single/summary.json")"
  echo "single mode, batch 100, 3 epochs: test accuracy $single"
  /usr/bin/python3 "${ROOT}/bench/free_spec.py" "$spec" 1 2
  "${ROOT}/scripts/local_cluster.sh" "$spec" "${common[@]}" --batch_size=50 --mode=sync \
    --threads=1 --eval_every=600 --run_dir="$out/cluster" >"$out/cluster.log" 2>&1
  cluster="$(accuracy "$out/cluster/report.json")"
  echo "1 ps + 2 workers sync, batch 2 x 50, 3 epochs: test accuracy $cluster"
  /usr/bin/python3 -c "print('difference: %.2f points' % (100 * ($single - $cluster)))"
}

against_torch() {
  local recipe=(--model=mnist_cnn --optimizer=momentum --learning_rate=0.01 --batch_size=64
                --epochs=3 --threads="$threads" --log_every=500)
  local s f=() t=()
  for (( s = 1; s <= runs; ++s )); do
    "${ROOT}/build/bin/worker" "${recipe[@]}" --momentum=0.9 --seed="$s" \
      --run_dir="$out/fulcrum-$s" >"$out/fulcrum-$s.log" 2>&1 ||
      { tail -20 "$out/fulcrum-$s.log" >&2; exit 1; }
    f+=("$(accuracy "$out/fulcrum-$s/summary.json")")
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OMP_NUM_THREADS="$threads" \
      OPENBLAS_NUM_THREADS="$threads" OPENBLAS_CORETYPE=SkylakeX \
      MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000 \
      /usr/bin/python3 "${ROOT}/bench/reference/train_reference.py" "${recipe[@]}" --seed="$s" \
      --summary="$out/torch-$s.json" >"$out/torch-$s.log" 2>&1 ||
      { tail -20 "$out/torch-$s.log" >&2; exit 1; }
    t+=("$(accuracy "$out/torch-$s.json")")
    echo "seed $s: Fulcrum ${f[-1]}  PyTorch ${t[-1]}"
  done
  /usr/bin/python3 - "${#f[@]}" "${f[@]}" "${t[@]}" <<'PY'
import statistics, sys
n = int(sys.argv[1]); f = [float(v) for v in sys.argv[2:2 + n]]; t = [float(v) for v in sys.argv[2 + n:]]
mf, mt = statistics.median(f), statistics.median(t)
print(f"median of {n}: Fulcrum {mf:.4f} [{min(f):.4f}-{max(f):.4f}]  "
      f"PyTorch {mt:.4f} [{min(t):.4f}-{max(t):.4f}]  difference {100 * (mf - mt):+.2f} points")
PY
}

echo "loadavg before: $(cat /proc/loadavg)"
"against_${against}"
echo "loadavg after: $(cat /proc/loadavg)"
