#!/usr/bin/env bash
# Fulcrum's convolutional models against PyTorch (CPU) and TensorFlow (CPU) in the same run:
# a full training step (forward, loss, backward, momentum-SGD update) on data already in
# memory, examples/sec in steady state (first 20 steps dropped, median step time of the rest).
#   Fulcrum:    build/bin/worker single mode (synthetic data of the model's shape, four batches
#               of it, at least 64 examples, so the dataset does not swell its memory figure;
#               --profile=off, no final evaluation).
#   PyTorch:    bench/reference/cnn_reference.py with /usr/bin/python3 (Debian's python3-torch),
#               one batch reused, given its best configuration (docs/benchmarking.md, where the
#               cost of each missing setting is measured): the OpenMP OpenBLAS
#               (libopenblas0-openmp) first on LD_LIBRARY_PATH with its AVX-512 kernels
#               (OPENBLAS_CORETYPE=SkylakeX where OpenBLAS 0.3.21 does not know the CPU and
#               falls back to SSE3 ones), OMP_NUM_THREADS = OPENBLAS_NUM_THREADS =
#               torch.set_num_threads = threads, MALLOC_MMAP_THRESHOLD_=2000000000
#               MALLOC_TRIM_THRESHOLD_=4000000000, and per model the faster memory format
#               measured here (--torch_format=auto). Without these it ran at a third to a half
#               of its rate.
#   TensorFlow: bench/reference/tf_cnn_reference.py from build/tf-venv (tensorflow-cpu from
#               PyPI, created on first use by bench/compare_tf_ps.sh --setup_only): one
#               tf.compat.v1 graph session, intra/inter-op threads = threads, its default
#               oneDNN kernels, the batch held in a graph variable, the same glibc settings.
# Models as models/cnn_zoo.cc defines them (weight decay and dropout included on every side):
# mnist_cnn (28x28x1), cifar10_cnn (24x24x3), alexnet (227x227x3), vgg16 (32x32x3).
#
# One unreported warm-up run of each side first; then for each model x batch x threads the
# sides run interleaved (Fulcrum, PyTorch, TF, Fulcrum, PyTorch, TF, ...), --pairs rounds. The
# table gives each side's median, the ratios Fulcrum / peer of the medians (with the min-max
# of the per-round ratios in brackets), each side's peak resident memory (the largest over the
# rounds, /usr/bin/time's %M: the whole process, data and libraries included), and each peer's
# known-good figure on this machine kind (bench/peer_figures.py). A peer more than 15 % under
# its known-good figure gets a WARNING banner on stderr and under the table; a configuration
# with no known-good figure says so. /proc/loadavg is printed before and after; figures taken
# while the load is above 1.5 are for checking that things run, not for docs.
#
# Usage: bench/compare_cnn.sh [--models=mnist_cnn,cifar10_cnn] [--batches=1,10,100,400]
#          [--threads=2] [--pairs=3] [--steps=40] [--peers=torch,tf]
#          [--optimizer=momentum] [--dropout=1] [--torch_format=auto]
#          [--out=build/compare_cnn.md]
#   --peers         which peers run beside Fulcrum: torch, tf or torch,tf (default both).
#   --optimizer     momentum (0.9, default; the known-good figures' setting) or sgd, every side.
#   --dropout=0     the peers without their dropout layers (Fulcrum keeps its own: a cost
#                   check, not a like-for-like figure; the table says so).
#   --torch_format  auto (default: channels_last for mnist_cnn, cifar10_cnn and alexnet,
#                   contiguous NCHW for vgg16, as measured on this machine kind; see
#                   docs/benchmarking.md), channels_last or contiguous.
# Environment: VENV (default build/tf-venv), REF_OPENBLAS_CORETYPE (PyTorch's OpenBLAS core:
#   unset = SkylakeX where needed, a name forces it, empty forces none).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORKER="${ROOT}/build/bin/worker"
TORCH_REF="${ROOT}/bench/reference/cnn_reference.py"
TF_REF="${ROOT}/bench/reference/tf_cnn_reference.py"
FIGURES="${ROOT}/bench/peer_figures.py"
PYTHON=/usr/bin/python3
VENV="${VENV:-${ROOT}/build/tf-venv}"
OPENBLAS_OMP_DIR=/usr/lib/x86_64-linux-gnu/openblas-openmp
MALLOC_ENV=(MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000)
models=mnist_cnn,cifar10_cnn batches=1,10,100,400 threads_list=2 pairs=3 steps=40
peers=torch,tf optimizer=momentum dropout=1 torch_format=auto
out="${ROOT}/build/compare_cnn.md"
BENCH_NAME=compare_cnn
source "${ROOT}/bench/lib/options.sh"
parse_options "models batches threads=threads_list pairs steps peers optimizer dropout torch_format out" "$@"

shape_of() {
  case "$1" in
    mnist_cnn) echo 28,28,1 ;;
    cifar10_cnn) echo 24,24,3 ;;
    alexnet) echo 227,227,3 ;;
    vgg16) echo 32,32,3 ;;
    *) return 1 ;;
  esac
}
positive_list() {  # NAME VALUE: a comma-separated list of positive integers
  [[ -n "$2" ]] || die "$1 must not be empty"
  local v
  for v in ${2//,/ }; do [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "$1: expected positive integers, got '$v'"; done
}
[[ -n "${models//,/}" ]] || die "--models must not be empty"
for m in ${models//,/ }; do
  shape_of "$m" >/dev/null || die "--models: unknown model '$m' (mnist_cnn, cifar10_cnn, alexnet, vgg16)"
done
positive_list --batches "$batches"
positive_list --threads "$threads_list"
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || die "--pairs: expected a positive integer, got '$pairs'"
[[ "$steps" =~ ^[0-9]+$ && "$steps" -ge 25 ]] || die "--steps=$steps: at least 25 (20 warm-up steps are dropped)"
[[ "$optimizer" =~ ^(momentum|sgd)$ ]] || die "--optimizer must be momentum or sgd, got '$optimizer'"
[[ "$dropout" =~ ^[01]$ ]] || die "--dropout must be 0 or 1, got '$dropout'"
[[ "$torch_format" =~ ^(auto|channels_last|contiguous)$ ]] ||
  die "--torch_format must be auto, channels_last or contiguous, got '$torch_format'"
run_torch=0 run_tf=0
[[ -n "${peers//,/}" ]] || die "--peers must not be empty (torch, tf or torch,tf)"
for p in ${peers//,/ }; do
  case "$p" in
    torch) run_torch=1 ;;
    tf) run_tf=1 ;;
    *) die "--peers: unknown peer '$p' (torch, tf)" ;;
  esac
done
(( pairs >= 3 )) || echo "compare_cnn: note: fewer than 3 pairs; docs/benchmarking.md asks for at least 3" >&2

[[ -x "$WORKER" ]] || die "$WORKER is missing: build first (scripts/test.sh or cmake --build build)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (apt-get install time)"
if (( run_torch )); then
  missing=()
  for pkg in libopenblas0-openmp python3-torch; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if (( ${#missing[@]} )); then
    echo "compare_cnn: installing ${missing[*]} (apt-get)" >&2
    SUDO=""; (( EUID == 0 )) || SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
      die "could not install ${missing[*]}"
  fi
  "$PYTHON" -c "import torch" 2>/dev/null || die "$PYTHON cannot import torch (apt-get install python3-torch)"
  [[ -d "$OPENBLAS_OMP_DIR" ]] || die "$OPENBLAS_OMP_DIR missing (libopenblas0-openmp)"
  TORCH_VERSION="$("$PYTHON" -c 'import torch; print(torch.__version__)')"
  # OpenBLAS's kernels for torch's fully connected layers: Debian's OpenBLAS 0.3.21 does not
  # know recent AVX-512 CPUs and falls back to old kernels (SSE3 "Prescott" on this machine
  # kind), so, as compare_reference.sh does, force its AVX-512 (SkylakeX) kernels where the CPU
  # has AVX-512 and OpenBLAS picked none of its AVX-512 cores. REF_OPENBLAS_CORETYPE=<name>
  # forces a core, REF_OPENBLAS_CORETYPE= (empty) none.
  openblas_core() {  # [env arguments] -> the core OpenBLAS (OpenMP build) runs
    env "$@" LD_LIBRARY_PATH="$OPENBLAS_OMP_DIR" "$PYTHON" -c '
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null || echo unknown
  }
  detected_core="$(openblas_core -u OPENBLAS_CORETYPE)"
  coretype="${REF_OPENBLAS_CORETYPE-}"
  if [[ -z "${REF_OPENBLAS_CORETYPE+x}" ]] && grep -qw avx512f /proc/cpuinfo &&
     [[ ! "$detected_core" =~ ^(SkylakeX|Cooperlake|SapphireRapids)$ ]]; then
    coretype=SkylakeX
  fi
  torch_core="$(openblas_core -u OPENBLAS_CORETYPE ${coretype:+OPENBLAS_CORETYPE="$coretype"})"
fi
if (( run_tf )); then
  if ! { [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import tensorflow" 2>/dev/null; }; then
    VENV="$VENV" "$ROOT/bench/compare_tf_ps.sh" --setup_only >&2 || die "could not set up $VENV"
  fi
  TF_VERSION="$(TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)"
fi

# PyTorch's memory format per model, measured on this machine kind (docs/benchmarking.md).
torch_format_of() {
  if [[ "$torch_format" != auto ]]; then echo "$torch_format"; return; fi
  case "$1" in
    vgg16) echo contiguous ;;
    *) echo channels_last ;;
  esac
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# A private copy of the worker, so a rebuild of build/ during the run cannot change it.
cp "$WORKER" "$tmp/worker"
json_field() { "$PYTHON" -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])" "$1"; }
fail() {  # side log
  echo "compare_cnn: $1 run failed; its output:" >&2
  tail -n 20 "$2" >&2
  exit 1
}
fulcrum_run() {  # model batch threads -> "examples/sec peak_rss_kib"
  local dir="$tmp/run-$RANDOM$RANDOM"
  local opt=(--optimizer="$optimizer")
  [[ "$optimizer" == momentum ]] && opt+=(--momentum=0.9)
  /usr/bin/time -f '%M' -o "$dir.rss" "$tmp/worker" --model="$1" --dataset=synthetic \
    --synthetic_shape="$(shape_of "$1")" --synthetic_examples=$(( $2 * 4 > 64 ? $2 * 4 : 64 )) \
    --batch_size="$2" --threads="$3" --train_steps="$4" --learning_rate=0.01 "${opt[@]}" \
    --profile=off --noeval --log_every=100000 --run_dir="$dir" >"$dir.log" 2>&1 || fail Fulcrum "$dir.log"
  echo "$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['examples_per_sec'])" \
    "$dir/summary.json") $(tail -1 "$dir.rss")"
}
torch_run() {  # model batch threads steps -> "examples/sec peak_rss_kib"
  local f="$tmp/torch-$RANDOM$RANDOM" fmt=()
  [[ "$(torch_format_of "$1")" == channels_last ]] && fmt=(--channels_last)
  env -u OPENBLAS_CORETYPE LD_LIBRARY_PATH="${OPENBLAS_OMP_DIR}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}" \
    OMP_NUM_THREADS="$3" OPENBLAS_NUM_THREADS="$3" "${MALLOC_ENV[@]}" \
    ${coretype:+OPENBLAS_CORETYPE="$coretype"} \
    /usr/bin/time -f '%M' -o "$f.rss" "$PYTHON" "$TORCH_REF" --model="$1" --batch="$2" \
    --threads="$3" --steps="$4" --dropout="$dropout" \
    --momentum="$([[ "$optimizer" == momentum ]] && echo 0.9 || echo 0)" "${fmt[@]}" \
    >"$f.out" 2>"$f.log" || { cat "$f.out" >>"$f.log"; fail PyTorch "$f.log"; }
  if grep -q "not given its best configuration" "$f.log"; then cat "$f.log" >&2; fi
  echo "$(json_field examples_per_sec <"$f.out") $(tail -1 "$f.rss")"
}
tf_run() {  # model batch threads steps -> "examples/sec peak_rss_kib"
  local f="$tmp/tf-$RANDOM$RANDOM"
  env TF_CPP_MIN_LOG_LEVEL=2 "${MALLOC_ENV[@]}" \
    /usr/bin/time -f '%M' -o "$f.rss" "$VENV/bin/python" "$TF_REF" --model="$1" --batch="$2" \
    --threads="$3" --steps="$4" --dropout="$dropout" --optimizer="$optimizer" \
    >"$f.out" 2>"$f.log" || { cat "$f.out" >>"$f.log"; fail TensorFlow "$f.log"; }
  echo "$(json_field examples_per_sec <"$f.out") $(tail -1 "$f.rss")"
}

IFS=, read -ra MODELS <<<"$models"
IFS=, read -ra BATCHES <<<"$batches"
IFS=, read -ra THREADS <<<"$threads_list"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date -u '+%Y-%m-%d %H:%M UTC')"
echo "compare_cnn: loadavg before: $load_before"
echo "compare_cnn: Fulcrum $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') (worker copied from build/bin)${TORCH_VERSION:+, PyTorch $TORCH_VERSION (OpenBLAS core $torch_core${coretype:+, OPENBLAS_CORETYPE=$coretype})}${TF_VERSION:+, TensorFlow $TF_VERSION}; $(nproc) CPUs ($("$PYTHON" "$FIGURES" machine))"
# Warm-up (unreported): one short run of each side on the first configuration.
fulcrum_run "${MODELS[0]}" "${BATCHES[0]}" "${THREADS[0]}" 25 >/dev/null
(( run_torch )) && torch_run "${MODELS[0]}" "${BATCHES[0]}" "${THREADS[0]}" 25 >/dev/null
(( run_tf )) && tf_run "${MODELS[0]}" "${BATCHES[0]}" "${THREADS[0]}" 25 >/dev/null
results="$tmp/results.tsv"   # model batch threads side round examples/sec peak_rss_kib
: >"$results"
for m in "${MODELS[@]}"; do
  for b in "${BATCHES[@]}"; do
    for t in "${THREADS[@]}"; do
      for ((i = 1; i <= pairs; i++)); do
        sides=(fulcrum)
        (( run_torch )) && sides+=(torch)
        (( run_tf )) && sides+=(tf)
        for side in "${sides[@]}"; do
          read -r eps rss <<<"$("${side}_run" "$m" "$b" "$t" "$steps")"
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$b" "$t" "$side" "$i" "$eps" "$rss" >>"$results"
          printf '  %-11s b%-4s t%s %-7s round %d %9.1f ex/s  %5.0f MiB\n' "$m" "$b" "$t" "$side" \
            "$i" "$eps" "$(( rss / 1024 ))" >&2
        done
      done
    done
  done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "compare_cnn: loadavg after: $load_after"

mkdir -p "$(dirname "$out")"
banners="$tmp/banners.txt"; : >"$banners"
"$PYTHON" - "$results" "$banners" "$ROOT/bench" "$started" "$load_before" "$load_after" \
    "bench/compare_cnn.sh${*:+ $*}" "$optimizer" "$dropout" "${TORCH_VERSION:-}" \
    "${TF_VERSION:-}" "$run_torch" "$run_tf" "$steps" "$torch_format" \
    "${torch_core:-}${coretype:+ (OPENBLAS_CORETYPE=$coretype)}" <<'PY' >"$out"
import statistics as st, sys
(res, banners, bench, started, lb, la, cmd, optimizer, dropout, torch_v, tf_v, run_torch, run_tf,
 steps, torch_format, torch_core) = sys.argv[1:]
sys.path.insert(0, bench)
import peer_figures
runs, order = {}, []
for line in open(res):
    m, b, t, side, i, eps, rss = line.rstrip("\n").split("\t")
    key = (m, int(b), int(t))
    if key not in order:
        order.append(key)
    runs.setdefault(key + (side,), {})[int(i)] = (float(eps), int(rss))
peers = [p for p, on in (("torch", run_torch), ("tf", run_tf)) if on == "1"]
name = {"fulcrum": "Fulcrum", "torch": "PyTorch", "tf": "TF"}
fig_peer = {"torch": "pytorch", "tf": "tf"}
version = {"torch": torch_v, "tf": tf_v}
variant = "dropout=%s,optimizer=%s" % (dropout, optimizer)
print("## Fulcrum vs %s, single process, full training step\n" % " and ".join(
    {"torch": "PyTorch %s" % torch_v, "tf": "TensorFlow %s" % tf_v}[p] for p in peers))
print("- command: `%s`" % cmd)
print("- date: %s; machine kind: %s; %s steps per run, first 20 dropped, median step time"
      % (started, peer_figures.machine_kind(), steps))
print("- optimizer: %s (every side); dropout: %s"
      % ("momentum 0.9, lr 0.01" if optimizer == "momentum" else "SGD, lr 0.01",
         "on (every side)" if dropout == "1" else "peers without dropout, Fulcrum with it "
         "(not like for like)"))
if "torch" in peers:
    print("- PyTorch: OpenMP OpenBLAS core %s, OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=threads, "
          "glibc MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_, memory format %s"
          % (torch_core, torch_format))
if "tf" in peers:
    print("- TensorFlow: tf.compat.v1 graph session, intra/inter-op threads = threads, "
          "oneDNN default, glibc MALLOC_* as PyTorch")
print("- loadavg before: `%s`; after: `%s`%s\n" % (lb, la, "" if max(
    float(lb.split()[0]), float(la.split()[0])) <= 1.5 else
    " - **load above 1.5: these figures check that things run; do not quote them**"))
cols = ["model", "batch", "threads", "Fulcrum ex/s"] + ["%s ex/s" % name[p] for p in peers]
cols += ["Fulcrum / %s [min–max]" % name[p] for p in peers]
cols += ["Fulcrum peak RSS MiB"] + ["%s peak RSS MiB" % name[p] for p in peers]
cols += ["%s known-good ex/s" % name[p] for p in peers]
print("| " + " | ".join(cols) + " |")
print("|" + "---|" * 3 + "---:|" * (len(cols) - 3))
out_banners = []
for key in order:
    m, b, t = key
    med, rss, r = {}, {}, {}
    for side in ["fulcrum"] + peers:
        r[side] = runs.get(key + (side,), {})
        med[side] = st.median(v[0] for v in r[side].values())
        rss[side] = max(v[1] for v in r[side].values()) / 1024
    cells = [m, str(b), str(t), "%.1f" % med["fulcrum"]] + ["%.1f" % med[p] for p in peers]
    for p in peers:
        per = [r["fulcrum"][i][0] / r[p][i][0] for i in r["fulcrum"] if i in r[p]]
        cells.append("%.2f [%.2f–%.2f]" % (med["fulcrum"] / med[p], min(per), max(per)))
    cells += ["%.0f" % rss["fulcrum"]] + ["%.0f" % rss[p] for p in peers]
    for p in peers:
        v = peer_figures.judge(fig_peer[p], m, b, t, med[p], variant, version[p],
                               what="compare_cnn: %s %s batch %d, %d thread%s (%s)" % (
                                   name[p], m, b, t, "" if t == 1 else "s", variant))
        cells.append(v["cell"])
        if v["banner"]:
            out_banners.append(v["banner"])
    print("| " + " | ".join(cells) + " |")
if out_banners:
    print("\n```")
    print("\n".join(out_banners))
    print("```")
with open(banners, "w") as f:
    f.write("\n".join(out_banners) + ("\n" if out_banners else ""))
PY
cat "$out"
if [[ -s "$banners" ]]; then
  echo >&2
  cat "$banners" >&2
fi
echo "compare_cnn: table written to ${out#"${ROOT}"/}"
