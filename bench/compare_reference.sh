#!/usr/bin/env bash
# Fulcrum's single-process worker against PyTorch (CPU), side by side in one run.
#
# Per model x batch x threads: one unreported warm-up run of each side, then N A/B pairs
# (Fulcrum, PyTorch, Fulcrum, PyTorch, ...; the thread counts interleave inside each pair).
# Each run trains ~--seconds of steady state (--train_steps is calibrated per side from
# its warm-up run) and skips the final test evaluation. Reported per (model, batch): each
# side's best-of-threads median examples/sec (steady state, first 20 steps dropped), the
# thread count that won, and the median and min-max of the pairwise ratios Fulcrum/PyTorch
# taken at each side's winning thread count. /proc/loadavg is printed before and after.
# PyTorch is set up as docs/benchmarking.md says ("give the peer its best"); its best figure
# is printed beside its known-good figure for the configuration (bench/peer_figures.py), and
# more than 15 % under it prints a WARNING banner on stderr and under the table (a
# configuration with no known-good figure says so).
#
# Usage: bench/compare_reference.sh [--models=logreg,mlp,autoencoder] [--batches=64,128,256]
#          [--threads=1,2] [--pairs=3] [--seconds=2.5] [--optimizer=sgd]
#          [--learning_rate=0.01] [--out=build/compare_reference.md] [--quick] [--keep]
#   --quick   batch 128 only and ~1 s runs (3 pairs) unless --batches/--seconds/--pairs say
#             otherwise: a smoke test, not a figure to quote.
#   --keep    keep the per-run folders (run logs and summary.json files).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORKER="${ROOT}/build/bin/worker"
REFERENCE="${ROOT}/bench/reference/train_reference.py"
PYTHON=/usr/bin/python3
DATA_DIR=/usr/share/datasets/fashion-mnist
OPENBLAS_OMP_DIR=/usr/lib/x86_64-linux-gnu/openblas-openmp

models="" batches="" threads_list="1,2" pairs="" seconds="" out="" quick=0 keep=0
optimizer=sgd learning_rate=0.01
BENCH_NAME=compare_reference
source "${ROOT}/bench/lib/options.sh"
parse_options "models batches threads=threads_list pairs seconds optimizer learning_rate out worker=WORKER quick! keep!" "$@"
if (( quick )); then
  : "${batches:=128}" "${seconds:=1.0}" "${pairs:=3}"
fi
: "${models:=logreg,mlp,autoencoder}" "${batches:=64,128,256}" "${pairs:=3}" "${seconds:=2.5}"
: "${out:=${ROOT}/build/compare_reference.md}"
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || die "--pairs must be a positive integer, got '$pairs'"
[[ -n "${models//,/}" ]] || die "--models must not be empty"
for m in ${models//,/ }; do
  [[ "$m" =~ ^(logreg|mlp|autoencoder)$ ]] || die "--models: unknown model '$m' (logreg, mlp, autoencoder)"
done
[[ -n "${batches//,/}" ]] || die "--batches must not be empty"
for v in ${batches//,/ }; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "--batches: expected positive integers, got '$v'"
done
[[ -n "${threads_list//,/}" ]] || die "--threads must not be empty"
for v in ${threads_list//,/ }; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "--threads: expected positive integers, got '$v'"
done
[[ "$seconds" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] && awk -v s="$seconds" 'BEGIN { exit !(s > 0) }' ||
  die "--seconds must be a positive number, got '$seconds'"
[[ "$optimizer" =~ ^(sgd|momentum|adam|adagrad)$ ]] ||
  die "--optimizer must be sgd, momentum, adam or adagrad, got '$optimizer'"
[[ "$learning_rate" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] ||
  die "--learning_rate must be a positive number, got '$learning_rate'"
(( pairs >= 3 )) || echo "compare_reference: note: fewer than 3 pairs; docs/benchmarking.md asks for at least 3" >&2

[[ -x "$WORKER" ]] || die "${WORKER#${ROOT}/} not found or not executable - run scripts/setup.sh first"
[[ -r "$REFERENCE" ]] || die "$REFERENCE missing"
[[ -r "$DATA_DIR/train-images-idx3-ubyte.gz" || -r "$DATA_DIR/train-images-idx3-ubyte" ]] ||
  die "Fashion-MNIST not found in $DATA_DIR (apt-get install dataset-fashion-mnist)"

# --- PyTorch as docs/benchmarking.md says: Debian python3-torch + the OpenMP build of OpenBLAS.
missing=()
for pkg in libopenblas0-openmp python3-torch; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if (( ${#missing[@]} )); then
  echo "compare_reference: installing ${missing[*]} (apt-get)" >&2
  SUDO=""; (( EUID == 0 )) || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    die "could not install ${missing[*]}"
fi
"$PYTHON" -c "import torch" 2>/dev/null || die "$PYTHON cannot import torch (python3-torch)"
[[ -d "$OPENBLAS_OMP_DIR" ]] || die "$OPENBLAS_OMP_DIR missing (libopenblas0-openmp)"

# glibc keeps large buffers instead of returning them every step: the same for both sides.
export MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000
unset OPENBLAS_CORETYPE  # chosen below (REF_OPENBLAS_CORETYPE overrides)
TORCH_LD_LIBRARY_PATH="${OPENBLAS_OMP_DIR}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"

# OPENBLAS_CORETYPE: docs/benchmarking.md notes that Debian's OpenBLAS picks its Haswell kernels
# on AVX-512 CPUs where SkylakeX is ~2x faster for SGEMM. On the 2-core AMD EPYC (Zen 4)
# machine this was written on (2026-11-22), OpenBLAS 0.3.21 already detects "Cooperlake" (the
# SkylakeX AVX-512 SGEMM kernels), and the default was the fastest for PyTorch: 4 interleaved
# 1-thread runs each, median ex/s default / SkylakeX / Haswell: mlp b128 62.9k / 56.7k / 55.1k,
# logreg b256 480k / 416k / 424k (raw SGEMM 1024^3 ~100 GFLOP/s either way; Zen 4 runs
# AVX-512 as 2x256-bit). So no OPENBLAS_CORETYPE is set there. Rule: force SkylakeX only when
# the CPU has AVX-512 and OpenBLAS would fall back to a non-AVX-512 kernel (Haswell, Zen, ...).
# REF_OPENBLAS_CORETYPE=<name> forces a core, REF_OPENBLAS_CORETYPE= (empty) forces none.
openblas_core() {
  env LD_LIBRARY_PATH="$TORCH_LD_LIBRARY_PATH" "$@" "$PYTHON" -c '
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null || echo unknown
}
detected_core="$(openblas_core)"
coretype="${REF_OPENBLAS_CORETYPE-}"
if [[ -z "${REF_OPENBLAS_CORETYPE+x}" ]] && grep -qw avx512f /proc/cpuinfo &&
   [[ ! "$detected_core" =~ ^(SkylakeX|Cooperlake|SapphireRapids)$ ]]; then
  coretype=SkylakeX
fi
if [[ -n "$coretype" ]]; then
  torch_core="$(openblas_core OPENBLAS_CORETYPE="$coretype")"
else
  torch_core="$detected_core"
fi
torch_version="$("$PYTHON" -c 'import torch; print(torch.__version__)')"

# --- Runs.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/compare_reference.XXXXXX")"
cleanup() { if (( keep )); then echo "compare_reference: runs kept in $WORK" >&2; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
RESULTS="$WORK/results.tsv"   # model batch threads side pair examples_per_sec steps
: >"$RESULTS"

# Rough 1-thread PyTorch rates (examples/sec) that size the warm-up runs only.
guess_rate() {
  case "$1" in
    logreg) echo $(( $2 >= 256 ? 500000 : ($2 >= 128 ? 350000 : 200000) )) ;;
    mlp) echo 60000 ;;
    *) echo 25000 ;;
  esac
}
steps_for() {  # steps_for RATE BATCH SECONDS -> 20 warm steps + SECONDS of steady state
  awk -v r="$1" -v b="$2" -v s="$3" 'BEGIN { n = int(20 + s * r / b + 0.5);
    if (n < 100) n = 100; if (n > 500000) n = 500000; print n }'
}
summary_rate() {
  "$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["examples_per_sec"])' "$1"
}

run_one() {  # run_one SIDE MODEL BATCH THREADS STEPS TAG -> prints examples/sec
  local side="$1" model="$2" batch="$3" threads="$4" steps="$5" tag="$6"
  local dir="$WORK/$side-$model-b$batch-t$threads-$tag"
  mkdir -p "$dir"
  local common=(--model="$model" --batch_size="$batch" --learning_rate="$learning_rate"
    --optimizer="$optimizer" --train_steps="$steps" --data_dir="$DATA_DIR" --dataset=mnist
    --run_dir="$dir" --seed=1 --threads="$threads" --log_every="$steps" --eval=false)
  local rc=0
  if [[ "$side" == fulcrum ]]; then
    env OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" \
      "$WORKER" "${common[@]}" >"$dir/log.txt" 2>&1 || rc=$?
  else
    env LD_LIBRARY_PATH="$TORCH_LD_LIBRARY_PATH" OMP_NUM_THREADS="$threads" \
      OPENBLAS_NUM_THREADS="$threads" ${coretype:+OPENBLAS_CORETYPE="$coretype"} \
      "$PYTHON" "$REFERENCE" "${common[@]}" >"$dir/log.txt" 2>&1 || rc=$?
  fi
  if (( rc != 0 )) || [[ ! -s "$dir/summary.json" ]]; then
    echo "compare_reference: $side run failed (exit $rc): $model batch $batch threads $threads" >&2
    tail -n 20 "$dir/log.txt" >&2
    exit 1
  fi
  summary_rate "$dir/summary.json"
}

load_before="$(cat /proc/loadavg)"
started="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "loadavg before: $load_before"
echo "PyTorch $torch_version, OpenBLAS core ${torch_core}${coretype:+ (OPENBLAS_CORETYPE=$coretype)}; $(nproc) CPUs"
declare -A steps_of
for model in ${models//,/ }; do
  for batch in ${batches//,/ }; do
    # Warm-up (not reported); calibrates each side's --train_steps to ~$seconds steady.
    for threads in ${threads_list//,/ }; do
      warm_steps="$(steps_for "$(guess_rate "$model" "$batch")" "$batch" 0.7)"
      for side in fulcrum pytorch; do
        rate="$(run_one "$side" "$model" "$batch" "$threads" "$warm_steps" warmup)"
        # A warm-up slowed by a load spike must not shrink the measured runs to nothing:
        # never go below a quarter of the steps the rough guess asks for.
        steps_of[$side-$threads]="$(awk -v a="$(steps_for "$rate" "$batch" "$seconds")" \
          -v b="$(steps_for "$(guess_rate "$model" "$batch")" "$batch" "$seconds")" \
          'BEGIN { b = int(b / 4); print (a > b ? a : b) }')"
        printf '  %-11s b%-4s t%s %-7s warm-up %12.0f ex/s -> %s steps\n' \
          "$model" "$batch" "$threads" "$side" "$rate" "${steps_of[$side-$threads]}"
      done
    done
    for (( p = 1; p <= pairs; p++ )); do
      for threads in ${threads_list//,/ }; do
        for side in fulcrum pytorch; do
          rate="$(run_one "$side" "$model" "$batch" "$threads" "${steps_of[$side-$threads]}" "p$p")"
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$batch" "$threads" "$side" "$p" \
            "$rate" "${steps_of[$side-$threads]}" >>"$RESULTS"
          printf '  %-11s b%-4s t%s %-7s pair %d %12.0f ex/s\n' "$model" "$batch" "$threads" \
            "$side" "$p" "$rate"
        done
      done
    done
  done
done
load_after="$(cat /proc/loadavg)"
echo "loadavg after:  $load_after"

# --- Report (medians and ratios in Python).
mkdir -p "$(dirname "$out")"
cmdline="bench/compare_reference.sh${*:+ $*}"
BANNERS="$WORK/banners.txt"
: >"$BANNERS"
"$PYTHON" - "$RESULTS" "$started" "$load_before" "$load_after" "$cmdline" \
  "$torch_version" "$torch_core${coretype:+ (OPENBLAS_CORETYPE=$coretype)}" "$(nproc)" \
  "$optimizer" "$learning_rate" "$seconds" "$ROOT/bench" "$BANNERS" >"$out" <<'PY'
import collections, statistics, sys
(path, started, load_before, load_after, cmdline, torch_version, core, ncpu,
 optimizer, lr, seconds, bench, banner_file) = sys.argv[1:]
sys.path.insert(0, bench)
import peer_figures
rate = {}                       # (model, batch, side, threads) -> {pair: ex/s}
order = []
for line in open(path):
    model, batch, threads, side, pair, r, steps = line.rstrip("\n").split("\t")
    key = (model, int(batch))
    if key not in order:
        order.append(key)
    rate.setdefault((model, int(batch), side, int(threads)), {})[int(pair)] = float(r)

def fmt(x):
    return f"{x / 1e3:,.1f}k" if x >= 1e4 else f"{x:,.0f}"

print(f"## Fulcrum worker vs PyTorch {torch_version} (CPU), single process\n")
print(f"- command: `{cmdline}`")
print(f"- date: {started}; {ncpu} CPUs; optimizer {optimizer}, lr {lr}, "
      f"~{seconds} s steady state per run, first 20 steps dropped, no final eval")
print(f"- PyTorch: /usr/bin/python3 bench/reference/train_reference.py, OpenBLAS (OpenMP) core "
      f"{core}, OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=threads, MALLOC_MMAP_THRESHOLD_/"
      f"MALLOC_TRIM_THRESHOLD_ set (Fulcrum gets the same MALLOC_* env)")
print(f"- loadavg before: `{load_before}`; after: `{load_after}`\n")
print("| model | batch | Fulcrum ex/s (median) | threads | PyTorch ex/s (median) | threads "
      "| Fulcrum/PyTorch (median of pairs) | ratio min–max | pairs | PyTorch known-good ex/s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
detail = []
banners = []
for model, batch in order:
    best = {}
    for side in ("fulcrum", "pytorch"):
        meds = {t: statistics.median(v.values()) for (m, b, s, t), v in rate.items()
                if (m, b, s) == (model, batch, side)}
        t_best = max(meds, key=meds.get)
        best[side] = (t_best, meds[t_best])
        detail.append((model, batch, side, meds))
    f_runs = rate[(model, batch, "fulcrum", best["fulcrum"][0])]
    p_runs = rate[(model, batch, "pytorch", best["pytorch"][0])]
    ratios = [f_runs[p] / p_runs[p] for p in sorted(f_runs) if p in p_runs]
    known = peer_figures.judge(
        "pytorch", model, batch, best["pytorch"][0], best["pytorch"][1],
        f"optimizer={optimizer}", torch_version,
        what=f"compare_reference: PyTorch {model} batch {batch}, {best['pytorch'][0]} "
             f"thread(s), optimizer {optimizer}")
    if known["banner"]:
        banners.append(known["banner"])
    print(f"| {model} | {batch} | {fmt(best['fulcrum'][1])} | {best['fulcrum'][0]} "
          f"| {fmt(best['pytorch'][1])} | {best['pytorch'][0]} "
          f"| **{statistics.median(ratios):.2f}×** | {min(ratios):.2f}–{max(ratios):.2f} "
          f"| {len(ratios)} | {known['cell']} |")
print("\nMedian examples/sec per thread count:\n")
threads = sorted({t for (_, _, _, t) in rate})
print("| model | batch | side | " + " | ".join(f"{t} thr" for t in threads) + " |")
print("|---|---:|---|" + "---:|" * len(threads))
for model, batch, side, meds in detail:
    cells = " | ".join(fmt(meds[t]) if t in meds else "–" for t in threads)
    print(f"| {model} | {batch} | {side} | {cells} |")
if banners:
    print("\n```\n" + "\n".join(banners) + "\n```")
with open(banner_file, "w") as f:
    f.write("".join(b + "\n" for b in banners))
PY
echo
cat "$out"
if [[ -s "$BANNERS" ]]; then echo >&2; cat "$BANNERS" >&2; fi
echo
echo "compare_reference: table written to ${out}"
