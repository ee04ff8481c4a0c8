#!/usr/bin/env bash
# Touchstone, rerun with Fulcrum: softmax (logistic) regression on (Fashion-)MNIST, SGD lr
# 0.01, batch 256, 1000 steps, once as one process and once as a cluster of 1 ps + 2 workers,
# recording Touchstone's own keys for every task (Job Execution Time, Total CPU Usage, Total
# CPU usage per core, Total Memory used, Total bytes sent/received over network, System
# Information), which every Fulcrum task writes into its summary.json.
#
# On this machine: the cluster on loopback (cluster_specs/local_1ps_2w.json). On real nodes
# (--nodes=n1,n2,n3: ps + chief, worker 0, worker 1), laid out by scripts/make_spec.py --nodes
# and started by scripts/launch_ssh.sh.
#
# Touchstone's loop over a package of models: then every model the worker knows, each as its own
# process (the worker alone), SGD lr 0.01 with a batch and a step count per model that keep
# the loop within minutes on CPUs (below), each leaving OUT/models/<model>.json with
# Touchstone's seven keys and one table OUT/touchstone_models.csv.
#
# Usage: studies/touchstone/run.sh [--out=DIR] [--save] [--models=all|m1,m2,...]
#          [--nodes=n1,n2,n3] [--ssh=CMD] [--remote_dir=DIR]
#   --save   also copy the CSVs and the plot into studies/touchstone/results/
# One command for the study; each run is a point recorded in OUT/points/ when it finishes, and
# the same command again reuses the finished points of the same settings
# (studies/lib/points.sh: a progress line per point with the time left, each record naming
# its commit and binaries). Writes OUT/single/, OUT/cluster/, OUT/models/<model>/ (the runs),
# OUT/touchstone.csv (a row per task), OUT/touchstone_models.csv and
# OUT/touchstone_cpu_memory.svg.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN_DIR=${BIN_DIR:-$ROOT/build/bin}
out="$ROOT/build/studies/touchstone" save=0 nodes="" launch=() models=all
die() { echo "touchstone: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --nodes=*) nodes="${arg#*=}" ;;
    --models=*) models="${arg#*=}" ;;
    --ssh=*) launch+=(--ssh "${arg#*=}") ;;
    --remote_dir=*) launch+=(--remote_dir "${arg#*=}") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[[ -x "$BIN_DIR/worker" ]] || die "$BIN_DIR/worker not found: build first (scripts/setup.sh)"
flags=(--model=logreg --optimizer=sgd --learning_rate=0.01 --batch_size=256 --train_steps=1000)
known=$("$BIN_DIR/worker" --help 2>&1 | tr -s ' \n' ' ' | sed -n 's/.*Model to train: \([^.]*\)\..*/\1/p' |
  sed 's/ or /, /')
[[ -n "$known" ]] || die "cannot read the model list from $BIN_DIR/worker --help"
[[ "$models" == all ]] && models=${known//, /,}
IFS=, read -r -a model_list <<< "$models"
for m in "${model_list[@]}"; do
  [[ ", $known," == *" $m,"* ]] || die "--models: unknown model '$m' (the worker knows: $known)"
done
# Per model: its data and the batch and steps that keep one run under about a minute here.
model_flags() {
  case "$1" in
    logreg|mlp|autoencoder) echo "--batch_size=256 --train_steps=1000" ;;
    mnist_cnn|stn*) echo "--batch_size=128 --train_steps=100" ;;
    cifar10_cnn) echo "--batch_size=128 --train_steps=100 --dataset=synthetic --synthetic_shape=24,24,3 --synthetic_examples=2000" ;;
    vgg16) echo "--batch_size=32 --train_steps=30 --dataset=synthetic --synthetic_shape=32,32,3 --synthetic_examples=1000" ;;
    alexnet) echo "--batch_size=32 --train_steps=30 --dataset=synthetic --synthetic_shape=227,227,3 --synthetic_examples=256" ;;
    *) echo "--batch_size=64 --train_steps=50" ;;
  esac
}
mkdir -p "$out/models"
source "$ROOT/studies/lib/points.sh"
points_begin "$out" $((2 + ${#model_list[@]})) touchstone
points_estimate $((60 + 60 * ${#model_list[@]}))
point single 10 "$out/single/report.json" -- fresh "$out/single" "$BIN_DIR/worker" "${flags[@]}" --run_dir="$out/single"
if [[ -z "$nodes" ]]; then
  point cluster 30 "$out/cluster/report.json" -- fresh "$out/cluster" env BIN_DIR="$BIN_DIR" "$ROOT/scripts/local_cluster.sh" \
    "$ROOT/cluster_specs/local_1ps_2w.json" "${flags[@]}" --run_dir="$out/cluster"
else
  "$ROOT/scripts/make_spec.py" --layout ps-w-w --workers 2 --ps 1 --hosts 3 --nodes "$nodes" \
    --out "$out/spec" || die "cannot lay out 1 ps + 2 workers on --nodes=$nodes"
  point cluster 30 "$out/cluster/report.json" -- fresh "$out/cluster" "$ROOT/scripts/launch_ssh.sh" "${launch[@]}" --run_dir "$out/cluster" \
    "$out/spec/spec.json" "${flags[@]}"
fi
for m in "${model_list[@]}"; do
  # shellcheck disable=SC2046  # the model's flags are words
  point "model_$m" 60 "$out/models/$m/report.json" -- fresh "$out/models/$m" "$BIN_DIR/worker" --model="$m" --optimizer=sgd --learning_rate=0.01 \
    --log_every=100000 $(model_flags "$m") --run_dir="$out/models/$m"
done
points_end
points_sources > "$out/sources.txt"
/usr/bin/python3 "$ROOT/studies/tables.py" touchstone "$out" "$out"
if ((save)); then
  mkdir -p "$HERE/results"
  cp "$out/touchstone.csv" "$out/touchstone_models.csv" "$out/touchstone_cpu_memory.svg" \
    "$out/sources.txt" "$HERE/results/"
  mkdir -p "$HERE/results/models"
  cp "$out"/models/*.json "$HERE/results/models/"
fi
