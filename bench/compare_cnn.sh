#!/usr/bin/env bash
# Fulcrum's convolutional models against PyTorch (CPU) in the same run: a full training step
# (forward, loss, backward, SGD update) on data already in memory, examples/sec in steady
# state (first 20 steps dropped), Fulcrum's worker (synthetic data of the model's shape, four
# batches of it, at least 64 examples, so the dataset does not swell its memory figure;
# PyTorch reuses one batch;
# --profile=off, no final evaluation) beside bench/reference/cnn_reference.py (PyTorch's
# oneDNN convolutions, channels_last, the same layer list). For each model x batch x threads
# the two sides run alternately, --pairs times; the table gives each side's median and the
# ratio Fulcrum / PyTorch of the medians, and each side's peak resident memory (the largest
# over the pairs, read by /usr/bin/time's %M: the whole process, data and libraries
# included). /proc/loadavg is printed before and after.
#
# Models: mnist_cnn (28x28x1), cifar10_cnn (24x24x3), alexnet (227x227x3), vgg16 (32x32x3).
# Usage: bench/compare_cnn.sh [--models=mnist_cnn,cifar10_cnn] [--batches=1,10,100,400]
#          [--threads=2] [--pairs=1] [--steps=40] [--out=build/compare_cnn.md]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORKER="${ROOT}/build/bin/worker"
REFERENCE="${ROOT}/bench/reference/cnn_reference.py"
PYTHON=/usr/bin/python3
models=mnist_cnn,cifar10_cnn batches=1,10,100,400 threads_list=2 pairs=1 steps=40
out="${ROOT}/build/compare_cnn.md"
die() { echo "compare_cnn: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --models=*) models="${arg#*=}" ;;
    --batches=*) batches="${arg#*=}" ;;
    --threads=*) threads_list="${arg#*=}" ;;
    --pairs=*) pairs="${arg#*=}" ;;
    --steps=*) steps="${arg#*=}" ;;
    --out=*) out="${arg#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[[ -x "$WORKER" ]] || die "$WORKER is missing: build first (scripts/test.sh or cmake --build build)"
"$PYTHON" -c "import torch" 2>/dev/null || die "$PYTHON cannot import torch (apt-get install python3-torch)"
[[ "$steps" -ge 25 ]] || die "--steps=$steps: at least 25 (20 warm-up steps are dropped)"

shape_of() {
  case "$1" in
    mnist_cnn) echo 28,28,1 ;;
    cifar10_cnn) echo 24,24,3 ;;
    alexnet) echo 227,227,3 ;;
    vgg16) echo 32,32,3 ;;
    *) die "no PyTorch counterpart for model '$1' (mnist_cnn, cifar10_cnn, alexnet, vgg16)" ;;
  esac
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fulcrum_run() {  # model batch threads -> "examples/sec peak_rss_kib"
  local dir="$tmp/run-$RANDOM$RANDOM"
  /usr/bin/time -f '%M' -o "$dir.rss" "$WORKER" --model="$1" --dataset=synthetic --synthetic_shape="$(shape_of "$1")" \
    --synthetic_examples=$(( $2 * 4 > 64 ? $2 * 4 : 64 )) --batch_size="$2" \
    --threads="$3" --train_steps="$steps" --learning_rate=0.01 --profile=off --noeval \
    --log_every=100000 --run_dir="$dir" >"$dir.log" 2>&1 || { cat "$dir.log" >&2; die "worker failed"; }
  echo "$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['examples_per_sec'])" \
    "$dir/summary.json") $(tail -1 "$dir.rss")"
}
torch_run() {  # model batch threads -> "examples/sec peak_rss_kib"
  local rss="$tmp/torch-$RANDOM$RANDOM.rss"
  local eps
  eps="$(OMP_NUM_THREADS="$3" /usr/bin/time -f '%M' -o "$rss" "$PYTHON" "$REFERENCE" \
    --model="$1" --batch="$2" --threads="$3" --steps="$steps" --channels_last |
    "$PYTHON" -c "import json,sys; print(json.loads(sys.stdin.read())['examples_per_sec'])")"
  echo "$eps $(tail -1 "$rss")"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "loadavg before: $(cat /proc/loadavg)"
{
  echo "| model | batch | threads | Fulcrum ex/s | PyTorch ex/s | Fulcrum / PyTorch | Fulcrum peak RSS MiB | PyTorch peak RSS MiB | RSS Fulcrum / PyTorch |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$out"
IFS=, read -ra MODELS <<<"$models"
IFS=, read -ra BATCHES <<<"$batches"
IFS=, read -ra THREADS <<<"$threads_list"
for m in "${MODELS[@]}"; do
  shape_of "$m" >/dev/null
  for b in "${BATCHES[@]}"; do
    for t in "${THREADS[@]}"; do
      f=() p=() frss=0 prss=0
      for ((i = 0; i < pairs; i++)); do
        read -r eps rss <<<"$(fulcrum_run "$m" "$b" "$t")"
        f+=("$eps")
        if ((rss > frss)); then frss=$rss; fi
        read -r eps rss <<<"$(torch_run "$m" "$b" "$t")"
        p+=("$eps")
        if ((rss > prss)); then prss=$rss; fi
      done
      fm="$(median "${f[@]}")" pm="$(median "${p[@]}")"
      line="$(awk -v m="$m" -v b="$b" -v t="$t" -v f="$fm" -v p="$pm" -v fr="$frss" -v pr="$prss" \
        'BEGIN {printf "| %s | %d | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |", m, b, t, f, p, f / p, fr / 1024, pr / 1024, fr / pr}')"
      echo "$line" | tee -a "$out"
    done
  done
done
echo "loadavg after: $(cat /proc/loadavg)"
echo "table: $out"
