#!/usr/bin/env bash
# Stands in for `ssh HOST COMMAND` in tests: runs COMMAND here with bash, ignoring HOST and
# any ssh options before it, so scripts/launch_ssh.sh's ssh path (quoting, copying the spec,
# gathering the run directory back) runs without an ssh server.
while [[ "${1:-}" == -* ]]; do
  case "$1" in -o|-p|-i|-l) shift 2 ;; *) shift ;; esac
done
(($# >= 2)) || { echo "fake_ssh: usage: fake_ssh.sh [options] HOST COMMAND" >&2; exit 255; }
shift  # the host
exec bash -c "$1"
