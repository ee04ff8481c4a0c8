#!/usr/bin/env bash
# grpc_bench across two emulated hosts: makes them (scripts/netns_hosts.sh up 2 --rate RATE),
# runs build/bin/grpc_bench --netns=PREFIX with the servers in PREFIX-h1 and the clients in
# PREFIX-h2, and removes the hosts again on every way out (trap).
#
#   bench/grpc_bench_netns.sh RATE [grpc_bench flags...]     # RATE: 1gbit, 10gbit, none
#   GRPC_BENCH=path/to/grpc_bench GRPC_BENCH_PREFIX=gb bench/grpc_bench_netns.sh 10gbit ...
#
# Needs root (network namespaces, veth, tc): without it, it says so and exits 0 (skipped).
# Exit code: grpc_bench's (2 for a bad argument here).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${GRPC_BENCH:-$ROOT/build/bin/grpc_bench}
PREFIX=${GRPC_BENCH_PREFIX:-gb}

(($# >= 1)) || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
rate=$1
shift
if ((EUID != 0)); then
  echo "grpc_bench_netns: needs root (network namespaces); skipped" >&2
  exit 0
fi
[[ -x "$BIN" ]] || { echo "grpc_bench_netns: $BIN not built (cmake --build build --target grpc_bench)" >&2; exit 2; }

"$ROOT/scripts/netns_hosts.sh" up 2 --rate "$rate" --prefix "$PREFIX"
trap '"$ROOT/scripts/netns_hosts.sh" down --prefix "$PREFIX"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rc=0
"$BIN" --netns="$PREFIX" "$@" || rc=$?
exit "$rc"
