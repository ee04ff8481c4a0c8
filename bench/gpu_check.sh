#!/usr/bin/env bash
# The GPU checks of the CUDA backend, run on a lent GPU machine over bench/gpu_bundle.sh's
# archive (that machine has the driver, CUDA's libraries and PyTorch, none of Debian's):
#   1. fulcrum_ops_cuda_test and fulcrum_backend_conformance_test (every op and every model's
#      training step on the GPU against the CPU kernels);
#   2. ops_bench's forward+backward per model and batch on GPU 0 (BM_ModelStepGpu);
#   3. the worker's full single-mode training step on --device=gpu:0 beside PyTorch on the same
#      GPU (cnn_reference.py --device=cuda, its default TF32 convolutions and with
#      --strict_fp32, the arithmetic Fulcrum uses), batch 128, for the CNNs; Fulcrum with
#      --tf32=off (strict fp32) against PyTorch's strict fp32 and with --tf32=on against its
#      default; then (copies) each run's copy accounting (summary.json device_copies: per step
#      after the first, host-to-device and device-to-host bytes and device allocations) and
#      its NVML figures (GPU utilisation, memory peak, power).
#   4. (diag) the cuBLAS test three times over, and under compute-sanitizer's memcheck and
#      initcheck; where the full step of a large model goes: --threads 1 against 16 (the
#      optimizer once ran on the host; on the device now, the two should match), its
#      summary.json kept;
#   5. (cluster) 1 ps + 2 workers sharing GPU 0, sync, through scripts/local_cluster.sh;
#   6. (accuracy) mnist_cnn on Fashion-MNIST (the bundle's copy), 3 epochs, single mode and
#      a 1 ps + 2 workers sync cluster with the same global batch (bench/accuracy_mnist_cnn.sh's
#      settings).
#   7. (studies) the seed studies' GPU runs (issue 31): Touchstone's CPU-vs-GPU logistic
#      regression (SGD 0.01, batch 256, 1000 steps, the worker alone on --device=cpu and on
#      gpu:0, Touchstone's keys of each into studies_touchstone_{cpu,gpu}.json) and Wang et
#      al.'s batch sweep on one GPU (cifar10_cnn, synthetic 24x24x3, batch 100/200/400, 120
#      steps: the single-GPU examples/s that studies/wang-et-al/run.sh
#      --host_examples_per_sec takes as the study's hardware), as a table in gpu_results.md.
# Each step has its own deadline and a failure does not stop the next. Writes gpu_check.log,
# ops_bench_gpu.json, gpu_results.md and the diag section's summary into --out.
#
# --quick: what fits in 7 minutes of a lent GPU (tests, step + copies at 40 steps, cluster,
# accuracy for 1 epoch; no bench, no diag), for the early and the final run of a session.
#
# Usage: bench/gpu_check.sh [--quick] [--bundle=gpu_bundle/bundle.tar.xz] [--out=DIR] [--steps=N]
#                           [--models=cifar10_cnn,alexnet,...]
#                           [--sections=tests,bench,step,copies,diag,cluster,accuracy,studies]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="${ROOT}/gpu_bundle/bundle.tar.xz" out="${OUT:-${ROOT}/build/gpu_check}" steps=120
models=cifar10_cnn,alexnet,mnist_cnn,vgg16 sections=tests,bench,step,copies,diag,cluster,accuracy,studies
epochs=3
quick=0
BENCH_NAME=gpu_check
source "${ROOT}/bench/lib/options.sh"
parse_options "bundle out steps models sections quick!" "$@"
if ((quick)); then steps=40 epochs=1 sections=tests,step,copies,cluster,accuracy,studies; fi
[[ -f "$bundle" ]] || die "$bundle is missing (make it with bench/gpu_bundle.sh)"
[[ "$steps" =~ ^[0-9]+$ && "$steps" -ge 40 ]] || die "--steps=$steps: a whole number, at least 40"
mkdir -p "$out"
log="$out/gpu_check.log" results="$out/gpu_results.md"
exec > >(tee -a "$log") 2>&1

fb="$(mktemp -d)"
trap 'rm -rf "$fb"' EXIT
tar -C "$fb" -xJf "$bundle" || die "cannot unpack $bundle"
libdir_of() {  # the folder of the first copy of library $1 on this machine
  local f
  f="$(find /usr /opt -xdev -name "$1" 2>/dev/null | head -1)"
  [[ -n "$f" ]] && dirname "$f"
}
cuda_path=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
  d="$(libdir_of "$lib")" || die "no $lib on this machine"
  echo "gpu_check: $lib from $d"
  cuda_path="${cuda_path:+$cuda_path:}$d"
done
fulcrum_env() { LD_LIBRARY_PATH="$fb/lib:$cuda_path" "$@"; }
want() { [[ ",$sections," == *",$1,"* ]]; }

echo "== $(date -u +%FT%TZ) $(uname -r)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
fulcrum_env ldd "$fb/bin/libfulcrum_cuda.so" | grep -E "not found|cud|cublas" || true

if want tests; then
  echo "== 1. tests"
  fulcrum_env timeout 120 "$fb/bin/fulcrum_ops_cuda_test"; echo "ops_cuda_test rc=$?"
  fulcrum_env timeout 180 "$fb/bin/fulcrum_backend_conformance_test"; echo "conformance_test rc=$?"
fi

if want bench; then
  echo "== 2. ops_bench BM_ModelStepGpu"
  fulcrum_env timeout 200 "$fb/bin/ops_bench" --benchmark_filter='BM_ModelStepGpu/model:[0-9]/batch:(1|10|100|128|400)/' \
    --benchmark_min_time=0.2 --benchmark_out="$out/ops_bench_gpu.json" --benchmark_out_format=json
  echo "ops_bench rc=$?"
fi

shape_of() {
  case "$1" in
    mnist_cnn) echo 28,28,1 ;; cifar10_cnn) echo 24,24,3 ;; alexnet) echo 227,227,3 ;; vgg16) echo 32,32,3 ;;
    *) echo "" ;;
  esac
}
step_section() {
echo "== 3. full training step, batch 128, $steps steps"
json_field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])" "$1" 2>/dev/null; }
{
  echo "| model | batch | Fulcrum ex/s (--tf32=off) | PyTorch ex/s (strict fp32) | Fulcrum / PyTorch, fp32 | Fulcrum ex/s (--tf32=on) | PyTorch ex/s (default, TF32 conv) | Fulcrum / PyTorch, TF32 |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$results"
IFS=, read -r -a model_list <<<"$models"
for m in "${model_list[@]}"; do
  shape="$(shape_of "$m")"
  [[ -n "$shape" ]] || { echo "gpu_check: no PyTorch counterpart for $m; skipped"; continue; }
  for tf32 in off on; do
    fulcrum_env timeout 120 "$fb/bin/worker" --device=gpu:0 --tf32="$tf32" --model="$m" \
      --dataset=synthetic --synthetic_shape="$shape" --synthetic_examples=512 --batch_size=128 \
      --train_steps="$steps" --learning_rate=0.01 --noeval --log_every=100000 \
      --run_dir="$fb/run-$m-tf32$tf32"
    echo "worker $m --tf32=$tf32 rc=$?"
  done
  ex() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['examples_per_sec'])" "$1/summary.json" 2>/dev/null || echo nan; }
  f="$(ex "$fb/run-$m-tf32off")" f32="$(ex "$fb/run-$m-tf32on")"
  t="$(timeout 120 python3 "$ROOT/bench/reference/cnn_reference.py" --device=cuda --model="$m" --batch=128 --steps="$steps" --channels_last | tee /dev/stderr | json_field examples_per_sec || echo nan)"
  s="$(timeout 120 python3 "$ROOT/bench/reference/cnn_reference.py" --device=cuda --strict_fp32 --model="$m" --batch=128 --steps="$steps" --channels_last | tee /dev/stderr | json_field examples_per_sec || echo nan)"
  python3 - "$m" "$f" "$s" "$f32" "$t" >>"$results" <<'PY'
import sys
m, f, s, f32, t = sys.argv[1], *(float(v) if v not in ("", "nan") else float("nan") for v in sys.argv[2:])
print(f"| {m} | 128 | {f:.0f} | {s:.0f} | {f / s:.2f} | {f32:.0f} | {t:.0f} | {f32 / t:.2f} |")
PY
done
cat "$results"
}
want step && step_section

# The copy accounting and NVML figures of the step section's --tf32=off runs.
copies_section() {
  echo "== 3b. copies per step after the first, and NVML"
  {
    echo
    echo "| model | h2d bytes/step | d2h bytes/step | device allocations/step | h2d total | GPU util mean % | GPU memory peak MiB | power mean W |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
  } >>"$results"
  IFS=, read -r -a model_list <<<"$models"
  for m in "${model_list[@]}"; do
    python3 - "$m" "$fb/run-$m-tf32off/summary.json" >>"$results" <<'PY'
import json, sys
m, path = sys.argv[1], sys.argv[2]
try:
    j = json.load(open(path))
except OSError:
    print(f"| {m} | (no summary) | | | | | | |"); sys.exit()
c = j.get("device_copies", {}); most = c.get("max_per_step_after_first", {}); total = c.get("total", {})
g = (j.get("gpu_usage") or [{}])[0]
print(f"| {m} | {most.get('h2d_bytes')} | {most.get('d2h_bytes')} | {most.get('allocations')} | "
      f"{total.get('h2d_bytes')} | {g.get('utilization_percent_mean', float('nan')):.0f} | "
      f"{g.get('memory_used_bytes_peak', 0) / 2**20:.0f} | {g.get('power_watts_mean', float('nan')):.0f} |")
PY
  done
  tail -n $((${#model_list[@]} + 3)) "$results"
}
want step && want copies && copies_section

if want diag; then
  echo "== 4. diagnostics"
  fulcrum_env timeout 60 "$fb/bin/fulcrum_ops_cuda_test" --gtest_filter='CublasTest.*' --gtest_repeat=3
  echo "cublas repeat rc=$?"
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck initcheck; do
      fulcrum_env timeout 90 compute-sanitizer --tool "$tool" "$fb/bin/fulcrum_ops_cuda_test" \
        --gtest_filter='CublasTest.*'
      echo "compute-sanitizer $tool rc=$?"
    done
  fi
  for m in alexnet vgg16; do
    for t in 1 16; do
      fulcrum_env timeout 120 "$fb/bin/worker" --device=gpu:0 --model="$m" --dataset=synthetic \
        --synthetic_shape="$(shape_of "$m")" --synthetic_examples=512 --batch_size=128 \
        --train_steps=60 --threads="$t" --learning_rate=0.01 --noeval --log_every=100000 \
        --run_dir="$fb/diag-$m-$t" 2>&1 | grep -E "steady state|error"
      [[ "$t" == 1 ]] && cp "$fb/diag-$m-$t/summary.json" "$out/summary_${m}_gpu_threads1.json" 2>/dev/null
    done
  done
fi

free_spec() { python3 "$ROOT/bench/free_spec.py" "$1" 1 2; }  # 1 ps + 2 workers, free ports
report_field() {  # file key: the key at the top of the JSON file, else under "cluster"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); k=sys.argv[2]; print(j.get(k, j.get('cluster', {}).get(k)))" "$1" "$2" 2>/dev/null
}

if want cluster; then
  echo "== 5. 1 ps + 2 workers on GPU 0, sync, cifar10_cnn batch 128"
  free_spec "$fb/spec.json"
  BIN_DIR="$fb/bin" fulcrum_env timeout 150 "$ROOT/scripts/local_cluster.sh" "$fb/spec.json" \
    --device=gpu:0 --model=cifar10_cnn --dataset=synthetic --synthetic_shape=24,24,3 \
    --synthetic_examples=512 --batch_size=128 --train_steps=300 --mode=sync --noeval \
    --log_every=100000 --run_dir="$fb/cluster" >"$fb/cluster.log" 2>&1
  echo "cluster rc=$?"; grep -E "examples/sec|error" "$fb/cluster.log" | tail -8
  echo "cluster examples/sec (report.json): $(report_field "$fb/cluster/report.json" examples_per_sec)"
fi

if want accuracy; then
  echo "== 6. mnist_cnn on Fashion-MNIST, $epochs epoch(s), Adam 0.001"
  data="$(dirname "$bundle")/fashion-mnist"
  common=(--device=gpu:0 --model=mnist_cnn --data_dir="$data" --optimizer=adam --learning_rate=0.001 --epochs="$epochs" --log_every=200)
  start=$(date +%s.%N)
  fulcrum_env timeout 150 "$fb/bin/worker" "${common[@]}" --batch_size=100 --run_dir="$fb/acc-single" >"$fb/acc-single.log" 2>&1
  echo "single rc=$? wall $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
  echo "single mode, batch 100: test accuracy $(report_field "$fb/acc-single/summary.json" final_test_accuracy)"
  free_spec "$fb/spec2.json"
  start=$(date +%s.%N)
  BIN_DIR="$fb/bin" fulcrum_env timeout 240 "$ROOT/scripts/local_cluster.sh" "$fb/spec2.json" "${common[@]}" \
    --batch_size=50 --mode=sync --eval_every=600 --run_dir="$fb/acc-cluster" >"$fb/acc-cluster.log" 2>&1
  echo "cluster rc=$? wall $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
  echo "1 ps + 2 workers sync, batch 2 x 50: test accuracy $(report_field "$fb/acc-cluster/report.json" final_test_accuracy)"
  tail -3 "$fb/acc-cluster.log"
fi
if want studies; then
  echo "== 7. the studies' GPU runs: Touchstone CPU vs GPU, Wang et al.'s batch sweep on one GPU"
  { echo; echo "| run | device | batch | examples/s | Job Execution Time (s) | Total CPU Usage (%) |"
    echo "| --- | --- | --- | --- | --- | --- |"; } >>"$results"
  for dev in cpu gpu:0; do
    fulcrum_env timeout 120 "$fb/bin/worker" --device="$dev" --model=logreg --optimizer=sgd \
      --learning_rate=0.01 --batch_size=256 --train_steps=1000 --data_dir="$(dirname "$bundle")/fashion-mnist" \
      --log_every=100000 --run_dir="$fb/touchstone-${dev%%:*}" >/dev/null 2>&1
    echo "touchstone logreg --device=$dev rc=$?"
    python3 - "$fb/touchstone-${dev%%:*}/summary.json" "$out/studies_touchstone_${dev%%:*}.json" \
      "Touchstone logreg" "$dev" >>"$results" <<'PY'
import json, sys
src, dst, run, dev = sys.argv[1:5]
keys = ["Job Execution Time", "Total CPU Usage", "Total CPU usage per core", "Total Memory used",
        "Total bytes sent over network", "Total bytes received over network", "System Information"]
try:
    s = json.load(open(src))
except OSError:
    print(f"| {run} | {dev} | 256 | (no summary) | | |"); sys.exit()
json.dump({k: s.get(k) for k in keys}, open(dst, "w"), indent=1)
print(f"| {run} | {dev} | 256 | {s.get('examples_per_sec', 0):.0f} | {s.get('Job Execution Time', 0):.2f} | {s.get('Total CPU Usage', 0):.0f} |")
PY
  done
  for b in 100 200 400; do
    fulcrum_env timeout 120 "$fb/bin/worker" --device=gpu:0 --model=cifar10_cnn --dataset=synthetic \
      --synthetic_shape=24,24,3 --synthetic_examples=2000 --batch_size="$b" --train_steps=120 \
      --noeval --log_every=100000 --run_dir="$fb/wang-b$b" >/dev/null 2>&1
    echo "wang cifar10_cnn gpu:0 batch $b rc=$?"
    echo "| Wang cifar10_cnn | gpu:0 | $b | $(report_field "$fb/wang-b$b/summary.json" examples_per_sec) | $(report_field "$fb/wang-b$b/summary.json" 'Job Execution Time') | |" >>"$results"
  done
  tail -n 8 "$results"
fi
echo "== done $(date -u +%FT%TZ)"
