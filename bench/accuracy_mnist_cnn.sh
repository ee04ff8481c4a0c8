#!/usr/bin/env bash
# The accuracy target of mnist_cnn on Fashion-MNIST: 3 epochs in single mode (batch 100), then
# the same global batch in a 1 ps + 2 workers sync cluster on loopback (batch 50 per worker,
# 3 epochs = 1800 global steps), Adam lr 0.001 in both. Prints each run's final test accuracy
# (the worker's summary.json, the chief's report.json) and the difference in points.
#
# Usage: bench/accuracy_mnist_cnn.sh [--threads=2] [--out=build/accuracy_mnist_cnn]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads=2 out="${ROOT}/build/accuracy_mnist_cnn"
for arg in "$@"; do
  case "$arg" in
    --threads=*) threads="${arg#*=}" ;;
    --out=*) out="${arg#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "accuracy_mnist_cnn: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
[[ -x "${ROOT}/build/bin/worker" ]] || { echo "build first" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
common=(--model=mnist_cnn --optimizer=adam --learning_rate=0.001 --epochs=3 --log_every=200)

echo "loadavg before: $(cat /proc/loadavg)"
"${ROOT}/build/bin/worker" "${common[@]}" --batch_size=100 --threads="$threads" \
  --run_dir="$out/single" >"$out/single.log" 2>&1
single="$(/usr/bin/python3 -c "import json; print(json.load(open('$out/single/summary.json'))['final_test_accuracy'])")"
echo "single mode, batch 100, 3 epochs: test accuracy $single"

spec="$out/spec.json"
/usr/bin/python3 - "$spec" <<'PY'
import json, socket, sys
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
json.dump({"chief": [f"127.0.0.1:{port()}"], "ps": [f"127.0.0.1:{port()}"],
           "worker": [f"127.0.0.1:{port()}", f"127.0.0.1:{port()}"]}, open(sys.argv[1], "w"))
PY
"${ROOT}/scripts/local_cluster.sh" "$spec" "${common[@]}" --batch_size=50 --mode=sync \
  --threads=1 --eval_every=600 --run_dir="$out/cluster" >"$out/cluster.log" 2>&1
cluster="$(/usr/bin/python3 -c "import json; print(json.load(open('$out/cluster/report.json'))['final_test_accuracy'])")"
echo "1 ps + 2 workers sync, batch 2 x 50, 3 epochs: test accuracy $cluster"
/usr/bin/python3 -c "print('difference: %.2f points' % (100 * ($single - $cluster)))"
echo "loadavg after: $(cat /proc/loadavg)"
