#!/usr/bin/env bash
# Starts every task of a ClusterSpec on its own host (CloudLab, any ssh-reachable nodes) with
# the same flags, waits for them, then gathers every task's folder of the run directory back
# to this machine; the chief's report.json/report.html already hold every task's summary.
#
#   scripts/launch_ssh.sh [options] SPEC [flags for every task...]
#     --remote_dir DIR   the Fulcrum checkout on every node (default: this checkout's path)
#     --run_dir DIR      run directory on every node and here (default runs/<time>)
#     --exec CMD         run each task with CMD instead of ssh; "{host}" is replaced by the
#                        task's host (e.g. --exec "ip netns exec {host}" with emulated hosts,
#                        which share this machine's filesystem: nothing is copied or gathered)
#     --hosts FILE       task -> host map ("job:index": host) instead of the spec's hostnames
#     --ssh CMD          the ssh command (default "ssh -o BatchMode=yes")
#     --bin_dir DIR      where the binaries are on the nodes (default build/bin, relative to
#                        --remote_dir)
#
# A task's host is the host part of its spec address, or its entry in --hosts. Every task
# runs `cd REMOTE_DIR && build/bin/JOB --cluster_spec=SPEC --job_name=JOB --task_index=I
# --run_dir=RUN_DIR [--auth_token_file=RUN_DIR/launch/token] FLAGS...`, so the nodes need the
# same checkout (built) at REMOTE_DIR and the spec at the same path (it is copied there
# first). Logs: RUN_DIR/launch/<job>-<i>.log here. If a task fails, the others are stopped and
# its exit code is returned.
#
# Credentials: unless the flags carry their own (--auth_token_file, --tls_cert) or the opt-out
# --insecure, a fresh random token is made for the run in RUN_DIR/launch/token (mode 0600),
# copied to the same path on every node (mode 0600; not with --exec: the hosts share this
# filesystem) and every task gets --auth_token_file=RUN_DIR/launch/token: without credentials
# a task refuses a spec with non-loopback addresses (protected mode, docs/distributed.md).
# The token travels over ssh's stdin, never on a command line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
remote_dir=$ROOT run_dir="" exec_cmd="" hosts_file="" ssh_cmd="ssh -o BatchMode=yes"
bin_dir=build/bin
die() { echo "launch_ssh: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --remote_dir) remote_dir=${2:?}; shift 2 ;;
    --run_dir) run_dir=${2:?}; shift 2 ;;
    --exec) exec_cmd=${2:?}; shift 2 ;;
    --hosts) hosts_file=${2:?}; shift 2 ;;
    --ssh) ssh_cmd=${2:?}; shift 2 ;;
    --bin_dir) bin_dir=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) break ;;
  esac
done
(($# >= 1)) || die "usage: scripts/launch_ssh.sh [options] SPEC [flags...]"
spec=$(realpath -m "$1")
shift
[[ -r "$spec" ]] || die "cluster spec '$spec' not found"
[[ -z "$hosts_file" || -r "$hosts_file" ]] || die "host map '$hosts_file' not found"
run_dir=${run_dir:-$ROOT/runs/launch-$(date +%Y%m%d-%H%M%S)}
run_dir=$(realpath -m "$run_dir")

# Whether the flags carry credentials or the --insecure opt-out (Abseil's forms: --x=v, --x v,
# -x; --insecure=false, --noinsecure and the like count as absent).
has_credentials() {
  local flag
  for flag in "$@"; do
    case "$flag" in
      --auth_token_file|-auth_token_file|--tls_cert|-tls_cert) return 0 ;;
      --auth_token_file=*|-auth_token_file=*|--tls_cert=*|-tls_cert=*) return 0 ;;
      --insecure|-insecure) return 0 ;;
      --insecure=*|-insecure=*)
        case "${flag#*=}" in [Tt]|[Tt][Rr][Uu][Ee]|[Yy]|[Yy][Ee][Ss]|1) return 0 ;; esac ;;
    esac
  done
  return 1
}
token=""
has_credentials "$@" || token=$run_dir/launch/token

# "job index host" per task, from the spec (and the host map).
mapfile -t tasks < <(python3 - "$spec" "$hosts_file" <<'EOF'
import json, sys
spec = json.load(open(sys.argv[1]))
hosts = json.load(open(sys.argv[2])) if sys.argv[2] else {}
for job in ("ps", "worker", "chief"):
    for i, addr in enumerate(spec.get(job, [])):
        host = hosts.get("%s:%d" % (job, i)) or addr.rsplit(":", 1)[0].strip("[]")
        print(job, i, host)
EOF
) || die "'$spec' is not a cluster spec"
((${#tasks[@]} > 0)) || die "'$spec' lists no tasks"

# The command line that runs "$@" on host $1.
on_host() {
  local host=$1
  shift
  if [[ -n "$exec_cmd" ]]; then
    # shellcheck disable=SC2086
    ${exec_cmd//\{host\}/$host} "$@"
  else
    # shellcheck disable=SC2086
    $ssh_cmd "$host" "$(printf '%q ' "$@")"
  fi
}

mkdir -p "$run_dir/launch"
token_flag=()
if [[ -n "$token" ]]; then
  # 32 random bytes as 64 hex characters, written by a umask-077 subshell: mode 0600 from the
  # start, and never in an argument.
  rm -f "$token.tmp"
  (umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' > "$token.tmp" &&
    echo >> "$token.tmp") || die "cannot write the token '$token.tmp'"
  [[ $(wc -c < "$token.tmp") -eq 65 ]] || die "could not read 32 random bytes for the token"
  mv -f "$token.tmp" "$token"
  token_flag=(--auth_token_file="$token")
  echo "launch_ssh: made a token for this run in $token (mode 0600; every task gets" \
    "--auth_token_file; give --auth_token_file, --tls_cert or --insecure to choose)" >&2
fi
declare -A name_of=() live=()
stop_all() { for pid in "${!live[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done; }
trap 'echo "launch_ssh: interrupted, stopping every task" >&2; stop_all; wait; exit 130' INT TERM

if [[ -z "$exec_cmd" ]]; then  # every node gets the spec (and the token) at the same path
  declare -A copied=()
  for task in "${tasks[@]}"; do
    read -r _ _ host <<< "$task"
    [[ -n "${copied[$host]:-}" ]] && continue
    copied[$host]=1
    on_host "$host" mkdir -p "$(dirname "$spec")" "$run_dir/launch"
    # Through a temporary file: on a node that is this machine, `cat > SPEC < SPEC` would
    # empty it.
    q=$(printf '%q' "$spec")
    $ssh_cmd "$host" "cat > $q.launch-tmp && mv -f $q.launch-tmp $q" < "$spec"
    if [[ -n "$token" ]]; then  # the same way, private from its first byte
      q=$(printf '%q' "$token")
      $ssh_cmd "$host" "umask 077 && rm -f $q.launch-tmp && cat > $q.launch-tmp &&
        chmod 600 $q.launch-tmp && mv -f $q.launch-tmp $q" < "$token" ||
        die "could not copy the token to $host:$token"
    fi
  done
fi
for task in "${tasks[@]}"; do
  read -r job index host <<< "$task"
  on_host "$host" bash -c 'cd "$1" && shift && exec "$@"' _ "$remote_dir" \
    "$bin_dir/$job" --cluster_spec="$spec" --job_name="$job" --task_index="$index" \
    --run_dir="$run_dir" "${token_flag[@]}" "$@" > "$run_dir/launch/$job-$index.log" 2>&1 &
  live[$!]=1
  name_of[$!]="$job:$index@$host"
done
echo "launch_ssh: started ${#tasks[@]} task(s); logs in $run_dir/launch/" >&2

rc=0
stopping=0
ended() {  # pid code
  unset "live[$1]"
  if (($2 != 0)); then
    ((rc == 0)) && rc=$2
    # One SIGTERM per task: a second would end a task at once (base/signals.h), before the
    # chief has written the failed run's report.
    if ((stopping == 0)); then
      echo "launch_ssh: ${name_of[$1]} exited with code $2; stopping the others" >&2
      stopping=1
      stop_all
    else
      echo "launch_ssh: ${name_of[$1]} exited with code $2" >&2
    fi
  fi
}
while ((${#live[@]} > 0)); do
  finished="" code=0
  wait -n -p finished "${!live[@]}" 2> /dev/null || code=$?
  if [[ -n "${finished:-}" ]]; then
    ended "$finished" "$code"
    continue
  fi
  # When tasks end together bash may have collected one already, and `wait -n` then refuses
  # the whole list ("no such job"): take each task that is gone by its own `wait`.
  gone=0
  for pid in "${!live[@]}"; do
    if ! kill -0 "$pid" 2> /dev/null; then
      code=0
      wait "$pid" 2> /dev/null || code=$?
      ended "$pid" "$code"
      gone=1
    fi
  done
  ((gone)) || sleep 0.1
done

# Gather every task's folder (and the chief's report) back here, through a staging folder so
# a node that is this machine never overwrites a file while reading it. Hosts run by --exec
# share this machine's filesystem: there is nothing to gather.
if [[ -z "$exec_cmd" ]]; then
  for task in "${tasks[@]}"; do
    read -r job index host <<< "$task"
    stage="$run_dir/launch/gather-$job-$index"
    mkdir -p "$stage"
    extra=()
    [[ "$job" == chief ]] && extra=(report.json report.html)
    if on_host "$host" tar -C "$run_dir" -cf - --ignore-failed-read "$job-$index" "${extra[@]}" \
        2> /dev/null | tar -C "$stage" -xf - 2> /dev/null; then
      cp -a "$stage/." "$run_dir/"
    else
      echo "launch_ssh: could not gather $job-$index from $host" >&2
    fi
    rm -rf "$stage"
  done
fi
if [[ -r "$run_dir/report.json" ]]; then
  echo "launch_ssh: report in $run_dir/report.json and report.html" >&2
fi
exit "$rc"
