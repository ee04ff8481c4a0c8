#!/usr/bin/env bash
# Starts every task of a ClusterSpec on this machine: its ps tasks, workers and chief, each
# with the same flags (as a TensorFlow launch script does), each log line prefixed with the
# task's name. Waits for all of them; if one fails, stops the rest and exits with its code.
# Ctrl-C stops them all.
#
#   scripts/local_cluster.sh SPEC [flags for every task...]
#   scripts/local_cluster.sh cluster_specs/local_1ps_2w.json --model=logreg --train_steps=1000
# Environment: BIN_DIR (default build/bin).
set -euo pipefail
if (($# < 1)) || [[ "$1" == -* ]]; then
  echo "usage: scripts/local_cluster.sh SPEC [flags...]" >&2
  exit 2
fi
spec=$1
shift
if [[ ! -r "$spec" ]]; then
  echo "local_cluster: cluster spec '$spec' not found" >&2
  exit 2
fi
BIN_DIR=${BIN_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/bin}

# The tasks of the spec, "job index" per line. The binaries validate the spec themselves
# (exit 2 with the reason), so this only needs the job sizes.
mapfile -t tasks < <(python3 -c '
import json, sys
spec = json.load(open(sys.argv[1]))
for job in ("ps", "worker", "chief"):
    for i in range(len(spec.get(job, []) if isinstance(spec, dict) else [])):
        print(job, i)
' "$spec" 2>/dev/null)
if ((${#tasks[@]} == 0)); then
  echo "local_cluster: '$spec' is not a cluster spec (JSON with chief, ps and worker lists)" >&2
  exit 2
fi

declare -A name_of=()
declare -A live=()
stop_all() {
  for pid in "${!live[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
}
trap 'echo "local_cluster: interrupted, stopping every task" >&2; stop_all; wait; exit 130' INT TERM

for task in "${tasks[@]}"; do
  read -r job index <<<"$task"
  "$BIN_DIR/$job" --cluster_spec="$spec" --job_name="$job" --task_index="$index" "$@" \
    > >(sed -u "s/^/[$job:$index] /") 2>&1 &
  live[$!]=1
  name_of[$!]="$job:$index"
done

rc=0
while ((${#live[@]} > 0)); do
  finished=""
  code=0
  wait -n -p finished "${!live[@]}" || code=$?
  [[ -z "$finished" ]] && break
  unset "live[$finished]"
  if ((code != 0)); then
    echo "local_cluster: ${name_of[$finished]} exited with code $code; stopping the others" >&2
    if ((rc == 0)); then rc=$code; fi
    stop_all
  fi
done
exit "$rc"
