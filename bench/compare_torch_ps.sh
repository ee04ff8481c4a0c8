#!/usr/bin/env bash
# The same parameter-server job in PyTorch (torch.distributed.rpc: one PS process holding the
# parameters and a torch.optim optimizer, N trainer processes; bench/reference/torch_rpc_ps.py)
# and in Fulcrum (build/bin/ps, worker, chief via scripts/local_cluster.sh), side by side on
# this machine, alternating per model x mode.
#
# Layout: PyTorch 1 ps + W trainers; Fulcrum 1 ps + W workers + a chief process (coordinates
# and evaluates, does not train). Both: Fashion-MNIST, per-worker contiguous shards, the same
# model, per-worker batch, optimizer, learning rate and number of global steps, and mode
# (sync: W gradients averaged per step, applied once; async: each gradient applied on arrival).
# Reported per side: the sum over workers of steady-state examples/sec (each worker's local
# steps after its first 20), the final test accuracy, and the mean staleness of the applied
# gradients in async mode (updates applied between the read of the values a gradient was
# computed at and its own apply: PyTorch's ps logs it per push; Fulcrum's workers count it,
# staleness_mean in their summary.json).
#
# Per (model, mode): one unreported warm-up run of each side, then N pairs (PyTorch, Fulcrum,
# thread counts interleaved inside a pair); pair p runs both sides with seed --seed + p - 1
# (initial values, shuffles), so the accuracy columns span seeds as well as timings. Each side's figure is the median at its best thread
# count; the ratio column is the median and min-max of the pairwise ratios Fulcrum/PyTorch at
# those thread counts. /proc/loadavg before and after each (model, mode) block. PyTorch runs
# from build/torch-venv (created on first use: Debian's python3 -m venv + pip install torch).
# PyTorch gets its best configuration (docs/benchmarking.md): OMP/MKL/OPENBLAS_NUM_THREADS =
# torch threads, glibc MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000, and
# for the CNNs the trainers in channels_last memory format (--channels_last: the faster one for
# the pip wheel on this machine kind in a quick interleaved check on a busy machine, one
# thread, batch 64; not a quoted figure).
# The pip wheel bundles MKL and oneDNN, so compare_cnn.sh's OpenMP OpenBLAS and
# OPENBLAS_CORETYPE settings (for Debian's python3-torch) do not apply.
# PyTorch's best figure is printed beside its known-good figure for the configuration
# (bench/peer_figures.py); more than 15 % under it prints a WARNING banner on stderr and under
# the table, and a configuration with no known-good figure says so.
#
# Usage: bench/compare_torch_ps.sh [--models=logreg,mlp[,mnist_cnn,cifar10_cnn]]
#          [--modes=sync,async] [--threads=1] [--pairs=3] [--workers=2] [--batch_size=128]
#          [--logreg_steps=2000] [--mlp_steps=0] [--cnn_steps=150]
#          [--exchange=auto|fetch_push|push_fetch] [--fulcrum_flags='...'] [--torch_flags='...']
#          [--seed=1]
#          [--out=build/compare_torch_ps.md] [--keep] [--setup_only]
#   logreg: 784->10, SGD lr 0.03.   mlp: 784-256-128-10 ReLU, momentum 0.9, lr 0.05.
#   mnist_cnn: conv5x5x32-pool-conv5x5x64-pool-fc1024-dropout0.4-fc (3.3 M parameters, 13 MB
#              a push), momentum 0.9 lr 0.01, --cnn_steps global steps (a step is ~100x an
#              mlp's: use a smaller --batch_size, e.g. 64).
#   cifar10_cnn: TensorFlow's CIFAR-10 tutorial graph (models/cnn_zoo.cc: conv-pool-LRN-conv-
#              LRN-pool-fc384-fc192-fc, weight decay 0.004 on the fc384/fc192 kernels) on the
#              28x28x1 Fashion-MNIST images as compare_tf_ps.sh runs it, momentum 0.9 lr 0.01,
#              --cnn_steps global steps. PyTorch's side: bench/reference/cnn_reference.py's
#              classes with cnn_zoo.cc's initializers, the weight decay in its PS optimizer.
#   --mlp_steps=0 (default): one epoch of pushes (--epochs=1: 469 global steps async, 235 sync
#                 at batch 128 and 2 workers), the setting of issue 14.
#   --cnn_steps   global steps of mnist_cnn and cifar10_cnn (default 150).
#   --exchange    the PyTorch trainers' loop: fetch_push (get_params RPC, compute, push RPC),
#                 push_fetch (one RPC: the push answers with the new parameters), or auto
#                 (default): push_fetch in sync mode (the same step, one RPC less: the peer's
#                 faster loop) and fetch_push in async mode (the plain loop; push_fetch is
#                 faster there too but its gradients are staler: docs/distributed.md).
#   --fulcrum_flags  extra flags for every Fulcrum task (e.g. --async_pull=before_step).
#   --torch_flags    extra flags for bench/reference/torch_rpc_ps.py (e.g. --staleness_aware_lr).
#   --keep        keep the per-run folders (logs, summaries, report.json) under $TMPDIR.
#   --setup_only  only create the PyTorch virtual environment.
# Environment: TORCH_PIP_SPEC (default torch), VENV (default build/torch-venv), VENV_PYTHON
#   (default /usr/bin/python3, Debian's), RUN_TIMEOUT (s per run, default 300).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH_SCRIPT="${ROOT}/bench/reference/torch_rpc_ps.py"
VENV="${VENV:-${ROOT}/build/torch-venv}"
VENV_PYTHON="${VENV_PYTHON:-/usr/bin/python3}"
TORCH_PIP_SPEC="${TORCH_PIP_SPEC:-torch}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
DATA_DIR=/usr/share/datasets/fashion-mnist

models=logreg,mlp modes=sync,async threads_list=1 pairs=3 workers=2 batch=128
logreg_steps=2000 mlp_steps=0 cnn_steps=150 exchange=auto fulcrum_flags="" torch_flags="" seed=1
out="${ROOT}/build/compare_torch_ps.md" keep=0 setup_only=0
BENCH_NAME=compare_torch_ps
source "${ROOT}/bench/lib/options.sh"
parse_options "models modes threads=threads_list pairs workers batch_size=batch logreg_steps mlp_steps cnn_steps exchange fulcrum_flags torch_flags seed out keep! setup_only!" "$@"
for m in ${models//,/ }; do
  [[ "$m" =~ ^(logreg|mlp|mnist_cnn|cifar10_cnn)$ ]] ||
    die "unknown model '$m' (logreg, mlp, mnist_cnn, cifar10_cnn)"
done
for m in ${modes//,/ }; do [[ "$m" =~ ^(sync|async)$ ]] || die "unknown mode '$m'"; done
[[ -n "${models//,/}" && -n "${modes//,/}" ]] || die "--models and --modes must not be empty"
[[ "$exchange" =~ ^(auto|fetch_push|push_fetch)$ ]] ||
  die "--exchange must be auto, fetch_push or push_fetch"
for v in $pairs $workers $batch $logreg_steps $cnn_steps ${threads_list//,/ }; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "expected a positive integer, got '$v'"
done
[[ "$mlp_steps" =~ ^[0-9]+$ ]] || die "--mlp_steps must be 0 (one epoch) or a positive integer"
[[ "$seed" =~ ^[0-9]+$ ]] || die "--seed must be a non-negative integer"
[[ "$RUN_TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "RUN_TIMEOUT must be a positive integer"
(( pairs >= 3 )) || echo "compare_torch_ps: note: fewer than 3 pairs; docs/benchmarking.md asks for at least 3" >&2

# --- The PyTorch virtual environment (idempotent).
setup_venv() {
  if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import torch.distributed.rpc" 2>/dev/null; then
    return 0
  fi
  [[ -x "$VENV_PYTHON" ]] || die "$VENV_PYTHON not found (set VENV_PYTHON)"
  if ! "$VENV_PYTHON" -c "import ensurepip, venv" 2>/dev/null; then
    echo "compare_torch_ps: installing python3-venv (apt-get)" >&2
    SUDO=""; (( EUID == 0 )) || SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3-venv >&2 ||
      die "could not install python3-venv"
  fi
  echo "compare_torch_ps: creating $VENV with $TORCH_PIP_SPEC (pip, PyPI; several GB)" >&2
  rm -rf "$VENV"
  "$VENV_PYTHON" -m venv "$VENV" || die "python3 -m venv $VENV failed"
  "$VENV/bin/pip" install -q --upgrade pip >&2 || die "pip upgrade failed"
  "$VENV/bin/pip" install -q "$TORCH_PIP_SPEC" numpy >&2 || die "pip install $TORCH_PIP_SPEC failed"
  "$VENV/bin/python" -c "import torch.distributed.rpc" 2>/dev/null ||
    die "the venv cannot import torch.distributed.rpc"
}
setup_venv
TORCH_VERSION=$("$VENV/bin/python" -c "import torch; print(torch.__version__)" 2>/dev/null)
(( setup_only )) && { echo "compare_torch_ps: $VENV ready (PyTorch $TORCH_VERSION)"; exit 0; }

[[ -r "$TORCH_SCRIPT" ]] || die "$TORCH_SCRIPT missing"
for b in ps worker chief; do
  [[ -x "$ROOT/build/bin/$b" ]] || die "build/bin/$b not found - build the project first"
done
[[ -r "$DATA_DIR/train-images-idx3-ubyte.gz" ]] || die "Fashion-MNIST not found in $DATA_DIR"

work="$(mktemp -d "${TMPDIR:-/tmp}/compare_torch_ps.XXXXXX")"
cleanup() {
  local pid
  for pid in $(jobs -p); do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $(jobs -p); do wait "$pid" 2>/dev/null || true; done
  (( keep )) || rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "compare_torch_ps: interrupted" >&2; exit 130' INT TERM
# A private copy of the Fulcrum binaries: a rebuild of build/ during the run cannot change them.
mkdir -p "$work/bin"
cp "$ROOT/build/bin/ps" "$ROOT/build/bin/worker" "$ROOT/build/bin/chief" "$work/bin/"
results="$work/results.tsv"
: > "$results"

model_flags() {  # model -> flags shared by both sides
  case "$1" in
    logreg) echo "--model=logreg --optimizer=sgd --learning_rate=0.03 --train_steps=$logreg_steps" ;;
    mlp) echo "--model=mlp --optimizer=momentum --momentum=0.9 --learning_rate=0.05" \
              "$( (( mlp_steps > 0 )) && echo "--train_steps=$mlp_steps" || echo "--epochs=1")" ;;
    mnist_cnn|cifar10_cnn)
      echo "--model=$1 --optimizer=momentum --momentum=0.9 --learning_rate=0.01 --train_steps=$cnn_steps" ;;
  esac
}

torch_model_flags() {  # model -> flags of the PyTorch side only (its best configuration)
  case "$1" in
    mnist_cnn|cifar10_cnn) echo "--channels_last" ;;
  esac
}

exchange_for() {  # mode -> the PyTorch trainers' loop
  if [[ "$exchange" != auto ]]; then echo "$exchange"
  elif [[ "$1" == sync ]]; then echo push_fetch
  else echo fetch_push; fi
}

# run_torch MODEL MODE THREADS DIR SEED: sets result="ex_per_sec accuracy staleness"
run_torch() {
  local model=$1 mode=$2 t=$3 dir=$4 s=$5
  mkdir -p "$dir"
  # docs/benchmarking.md: matched threads, glibc kept from returning buffers every step.
  # shellcheck disable=SC2046,SC2086  # the model flags and torch_flags are lists of flags
  if ! OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t \
      MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000 \
      timeout "$RUN_TIMEOUT" "$VENV/bin/python" "$TORCH_SCRIPT" $(model_flags "$model") \
      $(torch_model_flags "$model") --batch_size="$batch" --mode="$mode" --workers="$workers" --threads="$t" \
      --exchange="$(exchange_for "$mode")" --seed="$s" --timeout="$RUN_TIMEOUT" $torch_flags \
      --run_dir="$dir/run" > "$dir/launcher.log" 2>&1; then
    echo "compare_torch_ps: PyTorch run failed; logs in $dir:" >&2
    tail -n 5 "$dir/launcher.log" "$dir"/run/*.log >&2 || true
    keep=1; exit 1
  fi
  result=$(python3 - "$dir/run/report.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["workers_examples_per_sec"], r["final_test_accuracy"], r["staleness_mean"])
EOF
) || die "no report.json in $dir/run"
}

# run_fulcrum MODEL MODE THREADS DIR SEED: sets result="ex_per_sec accuracy staleness"
run_fulcrum() {
  local model=$1 mode=$2 t=$3 dir=$4 s=$5
  mkdir -p "$dir"
  python3 "$ROOT/bench/free_spec.py" "$dir/spec.json" 1 "$workers"
  # shellcheck disable=SC2046,SC2086  # model_flags and fulcrum_flags are lists of flags
  if ! BIN_DIR="$work/bin" timeout "$RUN_TIMEOUT" "$ROOT/scripts/local_cluster.sh" "$dir/spec.json" \
      $(model_flags "$model") --batch_size="$batch" --mode="$mode" --threads="$t" \
      --seed="$s" --eval_every=0 --log_every=100000 $fulcrum_flags --run_dir="$dir/run" \
      > "$dir/cluster.log" 2>&1; then
    echo "compare_torch_ps: Fulcrum run failed; log in $dir/cluster.log:" >&2
    tail -n 5 "$dir/cluster.log" >&2
    keep=1; exit 1
  fi
  result=$(python3 - "$dir/run/report.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
# Each worker's mean staleness (its summary; null in sync), weighted by its steps.
w = [(s["staleness_mean"], s["local_steps"]) for s in r["workers"]
     if s.get("staleness_mean") is not None]
stale = sum(m * n for m, n in w) / sum(n for _, n in w) if w else 0.0
print(r["workers_examples_per_sec"], r["final_test_accuracy"], stale)
EOF
) || die "no report.json in $dir/run"
}

record() {  # model mode side threads pair (uses $result = "ex acc stale")
  local ex acc stale
  read -r ex acc stale <<< "$result"
  echo -e "$1\t$2\t$3\t$4\t$5\t$ex\t$acc\t$stale" >> "$results"
  printf '  %-6s %-5s %-7s t=%s pair %s: %10.0f ex/s  acc %s  staleness %.2f\n' "$1" "$2" "$3" \
    "$4" "$5" "$ex" "$acc" "$stale" >&2
}

echo "compare_torch_ps: PyTorch $TORCH_VERSION ($VENV, --exchange=$exchange ${torch_flags}), Fulcrum $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') (binaries copied from build/bin) ${fulcrum_flags}, $(nproc) cores" >&2
loads="$work/loads.tsv"; : > "$loads"
t_start=$(date +%s)
n=0
for model in ${models//,/ }; do
  for mode in ${modes//,/ }; do
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "compare_torch_ps: $model $mode - load before: $load_before" >&2
    t0=${threads_list%%,*}
    run_torch "$model" "$mode" "$t0" "$work/r$((++n))" "$seed"  # warm-up, unreported
    run_fulcrum "$model" "$mode" "$t0" "$work/r$((++n))" "$seed"
    for ((p = 1; p <= pairs; p++)); do
      for t in ${threads_list//,/ }; do
        run_torch "$model" "$mode" "$t" "$work/r$((++n))" $((seed + p - 1))
        record "$model" "$mode" torch "$t" "$p"
        run_fulcrum "$model" "$mode" "$t" "$work/r$((++n))" $((seed + p - 1))
        record "$model" "$mode" fulcrum "$t" "$p"
      done
    done
    load_after=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "compare_torch_ps: $model $mode - load after: $load_after" >&2
    echo -e "$model\t$mode\t$load_before\t$load_after" >> "$loads"
  done
done
elapsed=$(( $(date +%s) - t_start ))

mkdir -p "$(dirname "$out")"
python3 - "$results" "$loads" "$TORCH_VERSION" "$workers" "$batch" "$pairs" "$exchange" \
    "$elapsed" "$logreg_steps" "$mlp_steps" "$cnn_steps" "$fulcrum_flags" "$torch_flags" "$ROOT/bench" \
    <<'EOF' | tee "$out"
import statistics as st, sys
from collections import defaultdict
res, loads, tv, W, B, P, exchange, elapsed, lsteps, msteps, csteps, fflags, tflags, bench = \
    sys.argv[1:]
sys.path.insert(0, bench)
import peer_figures
runs = defaultdict(dict)          # (model, mode, side, threads) -> {pair: (ex, acc, stale)}
for line in open(res):
    model, mode, side, t, p, ex, acc, stale = line.rstrip("\n").split("\t")
    runs[(model, mode, side, int(t))][int(p)] = (float(ex), float(acc), float(stale))
load = {(l.split("\t")[0], l.split("\t")[1]): l.rstrip("\n").split("\t")[2:] for l in open(loads)}
desc = {"logreg": "logreg 784-10, SGD lr 0.03, %s steps" % lsteps,
        "mlp": "mlp 784-256-128-10, momentum 0.9 lr 0.05, %s" %
               ("%s steps" % msteps if msteps != "0" else "1 epoch of pushes"),
        "mnist_cnn": "mnist_cnn (3.3 M parameters), momentum 0.9 lr 0.01, %s steps" % csteps,
        "cifar10_cnn": "cifar10_cnn (28x28x1 input), momentum 0.9 lr 0.01, %s steps" % csteps}
print("Parameter-server job, 1 ps + %s workers, batch %s per worker, Fashion-MNIST; PyTorch %s "
      "(torch.distributed.rpc, TensorPipe, --exchange=%s%s%s) vs Fulcrum%s; %s pairs after a warm-up; "
      "examples/sec = sum of the workers' steady-state rates (first 20 steps dropped), median at "
      "each side's best thread count (t=N). Ratio = Fulcrum/PyTorch, median [min-max] of the "
      "pairwise ratios. Accuracy and staleness (async: mean updates by others between a "
      "gradient's read and its apply): medians, with [min-max] for accuracy. Bench time %d s.\n"
      % (W, B, tv, exchange, ": push_fetch in sync, fetch_push in async" if exchange == "auto"
         else "", (" " + tflags) if tflags else "", (" " + fflags) if fflags else "", P,
         int(elapsed)))
print("| config | mode | PyTorch ex/s | Fulcrum ex/s | Fulcrum/PyTorch | PyTorch acc | Fulcrum acc "
      "| PyTorch staleness | Fulcrum staleness | load before -> after | PyTorch known-good ex/s |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
banners = []
for (model, mode) in load:
    best = {}
    for side in ("torch", "fulcrum"):
        best[side] = max((st.median(v[0] for v in runs[k].values()), k[3]) for k in runs
                         if k[:3] == (model, mode, side))
    rt = runs[(model, mode, "torch", best["torch"][1])]
    rf = runs[(model, mode, "fulcrum", best["fulcrum"][1])]
    ratios = [rf[p][0] / rt[p][0] for p in rt if p in rf]
    acc = lambda r: "%.4f [%.4f-%.4f]" % (st.median(v[1] for v in r.values()),
                                          min(v[1] for v in r.values()), max(v[1] for v in r.values()))
    stale = lambda r: "%.2f" % st.median(v[2] for v in r.values()) if mode == "async" else "-"
    ex = exchange if exchange != "auto" else ("push_fetch" if mode == "sync" else "fetch_push")
    variant = "mode=%s,workers=%s,exchange=%s" % (mode, W, ex)
    if msteps != "0" and model == "mlp":
        variant += ",steps=%s" % msteps
    if model in ("mnist_cnn", "cifar10_cnn"):
        variant += ",steps=%s,channels_last=1" % csteps
    if tflags:
        variant += ",torch_flags=%s" % tflags.replace(",", ";")
    known = peer_figures.judge(
        "pytorch-rpc-ps", model, int(B), best["torch"][1], best["torch"][0], variant, tv,
        what="compare_torch_ps: PyTorch RPC PS %s %s, %s workers, batch %s, %d thread%s, %s" % (
            model, mode, W, B, best["torch"][1], "" if best["torch"][1] == 1 else "s", ex))
    if known["banner"]:
        banners.append(known["banner"])
        print(known["banner"], file=sys.stderr)
    print("| %s | %s | %.0f (t=%d) | %.0f (t=%d) | %.2fx [%.2f-%.2f] | %s | %s | %s | %s | %s -> %s | %s |"
          % (desc[model], mode, best["torch"][0], best["torch"][1], best["fulcrum"][0],
             best["fulcrum"][1], st.median(ratios), min(ratios), max(ratios), acc(rt), acc(rf),
             stale(rt), stale(rf), load[(model, mode)][0], load[(model, mode)][1], known["cell"]))
if banners:
    print("\n```\n%s\n```" % "\n".join(banners))
EOF
echo "compare_torch_ps: table written to ${out#"${ROOT}"/}" >&2
(( keep )) && echo "compare_torch_ps: run folders kept in ${work#"${ROOT}"/}" >&2
exit 0
