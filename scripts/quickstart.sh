#!/usr/bin/env bash
# Sets up what is missing, builds, then runs the main job on this machine: single-process
# training of softmax regression on Fashion-MNIST with the Touchstone settings (SGD, lr 0.01,
# batch 256, 1000 steps), printing per-step progress and the final test accuracy.
#   scripts/quickstart.sh [extra worker flags, e.g. --model=mlp --optimizer=adam --epochs=3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
run_dir=runs/quickstart-$(date +%Y%m%d-%H%M%S)
build/bin/worker --model=logreg --optimizer=sgd --learning_rate=0.01 --batch_size=256 \
  --train_steps=1000 --log_every=100 --threads="$(nproc)" --run_dir="$run_dir" "$@"
echo "quickstart: summary of the run in $run_dir/summary.json:"
cat "$run_dir/summary.json"
