#!/usr/bin/env bash
# Starts one ps-lite job on loopback, as ps-lite's tests/local.sh does: 1 scheduler, S servers
# and W workers, each a process of the same binary told its role by DMLC_ROLE; waits for all.
# Every process runs under timeout(1); on exit (normal, error, signal) whatever is left is
# killed and reaped. Workers' stdout comes through; the other roles' output goes to stderr.
#
# Usage: bench/pslite/run.sh --servers=S --workers=W [--timeout=SECONDS] -- BINARY [ARGS...]
# Environment passed through (e.g. PS_VERBOSE, DMLC_PS_WATER_MARK, MALLOC_* tunables); set here:
# DMLC_NUM_SERVER, DMLC_NUM_WORKER, DMLC_ROLE, DMLC_PS_ROOT_URI=127.0.0.1, DMLC_PS_ROOT_PORT
# (a free port), DMLC_NODE_HOST=127.0.0.1 (servers and workers bind loopback, not the first
# non-loopback interface ps-lite would pick).
# Exit status: 0 when every process exited 0; otherwise the first failure's (124: timed out).
set -euo pipefail

servers=1 workers=1 timeout_s=120
die() { echo "pslite/run.sh: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --servers=*) servers="${1#*=}" ;;
    --workers=*) workers="${1#*=}" ;;
    --timeout=*) timeout_s="${1#*=}" ;;
    --) shift; break ;;
    *) die "unknown flag ${1%%=*}" ;;
  esac
  shift
done
(($# >= 1)) || die "no binary (usage: run.sh --servers=S --workers=W -- BINARY [ARGS...])"
[[ "$servers" =~ ^[1-9][0-9]*$ ]] || die "--servers: a positive integer, not '$servers'"
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || die "--workers: a positive integer, not '$workers'"
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || die "--timeout: whole seconds > 0, not '$timeout_s'"
[[ -x "$1" ]] || die "not an executable: $1"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export DMLC_NUM_SERVER="$servers" DMLC_NUM_WORKER="$workers"
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT="$port" DMLC_NODE_HOST=127.0.0.1

pids=()
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start() {  # role, then stdout target
  local role="$1"
  shift
  if [[ "$role" == worker ]]; then
    DMLC_ROLE="$role" timeout -k 5 "$timeout_s" "$@" &
  else
    DMLC_ROLE="$role" timeout -k 5 "$timeout_s" "$@" >&2 &
  fi
  pids+=("$!")
}
start scheduler "$@"
for ((i = 0; i < servers; ++i)); do start server "$@"; done
for ((i = 0; i < workers; ++i)); do start worker "$@"; done

rc=0
for pid in "${pids[@]}"; do
  status=0
  wait "$pid" || status=$?
  if ((status != 0 && rc == 0)); then rc=$status; fi
done
pids=()
exit "$rc"
