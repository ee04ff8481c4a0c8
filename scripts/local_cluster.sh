#!/usr/bin/env bash
# Starts every task of a ClusterSpec on this machine: its ps tasks, workers and chief, each
# with the same flags (as a TensorFlow launch script does), each log line prefixed with the
# task's name. Waits for all of them; if one fails, stops the rest and exits with its code.
# Ctrl-C stops them all cleanly: each task runs in a process group of its own, so the
# terminal's SIGINT reaches only this script, which passes it on once to every task (the
# chief then ends the run and writes its report; a second Ctrl-C ends the tasks at once).
#
#   scripts/local_cluster.sh [--hosts HOSTS.json] [--restart N] SPEC [flags for every task...]
#   scripts/local_cluster.sh cluster_specs/local_1ps_2w.json --model=logreg --train_steps=1000
# Secured (docs/distributed.md#security; {task} is each task's own file, e.g. ps-0):
#   scripts/local_cluster.sh SPEC ... --tls_cert='certs/{task}.pem' --tls_key='certs/{task}.key' \
#     --tls_ca=certs/ca.pem --auth_token_file=certs/token
# --hosts (from scripts/make_spec.py) maps "job:index" to an emulated host of
# scripts/netns_hosts.sh; each task then runs inside it (`netns_hosts.sh exec HOST`: its network
# namespace and, with `up --cpus`, its CPU share; needs root).
# --restart N starts a task that dies (any exit code but 0 and 2) again with the same flags, up
# to N times per task: with --checkpoint_dir the chief restores a restarted ps, a restarted
# chief takes the running job over (docs/distributed.md#checkpoints-and-recovery).
# A spec with non-loopback addresses and no credentials in the flags gets a fresh token file
# for every task (--auth_token_file; protected mode refuses such a spec without one).
# Environment: BIN_DIR (default build/bin).
set -euo pipefail
hosts_file=""
restarts=0
while (($#)); do
  case "$1" in
    --hosts) hosts_file=${2:-}; shift 2 || shift ;;
    --hosts=*) hosts_file=${1#*=}; shift ;;
    --restart) restarts=${2:-}; shift 2 || shift ;;
    --restart=*) restarts=${1#*=}; shift ;;
    *) break ;;
  esac
done
if ! [[ "$restarts" =~ ^[0-9]+$ ]] || ((restarts > 1000)); then
  echo "local_cluster: --restart '$restarts': expected a count of restarts per task (0-1000)" >&2
  exit 2
fi
if (($# < 1)) || [[ "$1" == -* ]]; then
  echo "usage: scripts/local_cluster.sh [--hosts HOSTS.json] [--restart N] SPEC [flags...]" >&2
  exit 2
fi
spec=$1
shift
if [[ ! -r "$spec" ]]; then
  echo "local_cluster: cluster spec '$spec' not found" >&2
  exit 2
fi
SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN_DIR=${BIN_DIR:-$(cd "$SCRIPTS_DIR/.." && pwd)/build/bin}

# The tasks of the spec, "job index" per line. The binaries validate the spec themselves
# (exit 2 with the reason), so this only needs the job sizes.
mapfile -t tasks < <(python3 -c '
import json, sys
spec = json.load(open(sys.argv[1]))
for job in ("ps", "worker", "chief"):
    # TensorFlow 1.x names the chief "master".
    given = spec.get(job, spec.get("master", [])) if job == "chief" else spec.get(job, [])
    for i in range(len(given) if isinstance(spec, dict) else 0):
        print(job, i)
' "$spec" 2>/dev/null)
if ((${#tasks[@]} == 0)); then
  echo "local_cluster: '$spec' is not a cluster spec (JSON with chief, ps and worker lists)" >&2
  exit 2
fi

# job:index -> the emulated host (network namespace) it runs in.
declare -A host_of=()
if [[ -n "$hosts_file" ]]; then
  [[ -r "$hosts_file" ]] || { echo "local_cluster: host map '$hosts_file' not found" >&2; exit 2; }
  while read -r task host; do
    [[ -n "$task" ]] && host_of[$task]=$host
  done < <(python3 -c '
import json, sys
for task, host in json.load(open(sys.argv[1])).items():
    print(task, host)
' "$hosts_file" 2>/dev/null) || true
  for task in "${tasks[@]}"; do
    key="${task/ /:}"
    host=${host_of[$key]:-}
    [[ -n "$host" ]] || { echo "local_cluster: $hosts_file has no host for $key" >&2; exit 2; }
    ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$host" ||
      { echo "local_cluster: emulated host '$host' of $key does not exist (scripts/netns_hosts.sh up)" >&2; exit 2; }
  done
fi

# Protected mode: without credentials a task answers only loopback peers and refuses a spec
# with other addresses. For such a spec (emulated hosts, a node's own address) this script
# makes a token, readable only by this user, and hands it to every task: unless the flags
# already carry credentials or --insecure.
nonlocal_spec=$(python3 -c '
import ipaddress, json, sys
spec = json.load(open(sys.argv[1]))
hosts = [a.rsplit(":", 1)[0].strip("[]") for job in spec.values() if isinstance(job, list)
         for a in job if isinstance(a, str)]
def local(h):
    if h == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        return False
    return ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback)
print(0 if all(local(h) for h in hosts) else 1)
' "$spec" 2>/dev/null || echo 1)
token_dir=""
if ((nonlocal_spec)); then
  credentials=0
  for flag in "$@"; do
    case "$flag" in
      --auth_token_file|--auth_token_file=*|--tls_cert|--tls_cert=*|--insecure|--insecure=true|--insecure=1)
        credentials=1 ;;
    esac
  done
  if ((credentials == 0)); then
    token_dir=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/fulcrum-token.XXXXXX")
    trap 'rm -rf "$token_dir"' EXIT
    (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token_dir/token")
    set -- "$@" "--auth_token_file=$token_dir/token"
    echo "local_cluster: the spec has non-loopback addresses; every task gets a fresh token" \
      "($token_dir/token, removed at the end)" >&2
  fi
fi

declare -A name_of=()
declare -A live=()
# Every task (with its log filter and any netns wrapper) runs in a process group of its own:
# started with job control on (`set -m`), which is off again at once, so bash neither prints
# a "Terminated" line for each task it reaps nor gives the tasks an ignored SIGINT.
stop_all() {  # [signal]: to every task's process group, once per call
  for pid in "${!live[@]}"; do kill -"${1:-TERM}" -- "-$pid" 2>/dev/null || true; done
}
# A signal to this script is passed on to the tasks; they end their run (the chief writes the
# report) within their own deadlines, and are killed if they are not gone after 5 minutes.
# A second signal meanwhile (Ctrl-C again) reaches the tasks as a second one: they end at once.
killer=""
interrupted() {  # signal exit-code
  echo "local_cluster: interrupted ($1), stopping every task" >&2
  ((${#live[@]})) || exit "$2"  # (a bare `wait` below would wait for the killer too)
  stop_all "$1"
  if [[ -z "$killer" ]]; then
    set -m
    (sleep 300; stop_all KILL) &
    killer=$!
    set +m
  fi
  wait "${!live[@]}" 2>/dev/null || true
  kill -- "-$killer" 2>/dev/null || true  # never left behind to signal reused pids later
  exit "$2"
}
trap 'interrupted INT 130' INT
trap 'interrupted TERM 143' TERM

start_task() {  # job index flags...
  local job=$1 index=$2 in_host=()
  shift 2
  # The host's network namespace, and its CPU cgroup when it has one (netns_hosts.sh --cpus).
  [[ -n "$hosts_file" ]] && in_host=("$SCRIPTS_DIR/netns_hosts.sh" exec "${host_of[$job:$index]}" --)
  # The log filter ignores the signals: it ends when its task closes the pipe, so no late
  # line of a stopping task is lost.
  set -m
  "${in_host[@]}" "$BIN_DIR/$job" --cluster_spec="$spec" --job_name="$job" --task_index="$index" "$@" \
    </dev/null > >(trap '' INT TERM; exec sed -u "s/^/[$job:$index] /") 2>&1 &
  set +m
  live[$!]=1
  name_of[$!]="$job:$index"
}

for task in "${tasks[@]}"; do
  read -r job index <<<"$task"
  start_task "$job" "$index" "$@"
done

# --restart N: a task that dies (killed, crashed: any exit but 0 and 2, bad input) is started
# again with the same flags, up to N times per task, while the run goes on: a restarted ps is
# restored from the checkpoint by the chief (--checkpoint_dir), a restarted chief takes the
# job over, a restarted worker joins again.
declare -A restarted=()
stopping=0
rc=0
while ((${#live[@]} > 0)); do
  finished=""
  code=0
  # Without job control bash may already have reaped a task that ended (keeping its status):
  # wait -n then knows it no more ("no such job") and returns without it; wait PID still
  # gives its status.
  wait -n -p finished "${!live[@]}" 2>/dev/null || code=$?
  if [[ -z "${finished:-}" ]]; then
    code=0
    for pid in "${!live[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        finished=$pid
        wait "$pid" || code=$?
        break
      fi
    done
    [[ -z "$finished" ]] && { sleep 0.1; continue; }
  fi
  unset "live[$finished]"
  name=${name_of[$finished]}
  if ((code != 0 && code != 2 && stopping == 0 && ${restarted[$name]:-0} < restarts)); then
    restarted[$name]=$((${restarted[$name]:-0} + 1))
    echo "local_cluster: $name exited with code $code; restarting it" \
      "(restart ${restarted[$name]} of $restarts)" >&2
    sleep 1
    start_task "${name%%:*}" "${name##*:}" "$@"
    continue
  fi
  if ((code != 0)); then
    if ((rc == 0)); then rc=$code; fi
    # One SIGTERM per task: a second would end a task at once (base/signals.h), before the
    # chief has written the failed run's report.
    if ((stopping == 0)); then
      echo "local_cluster: $name exited with code $code; stopping the others" >&2
      stopping=1
      stop_all
    else
      echo "local_cluster: $name exited with code $code" >&2
    fi
  fi
done
exit "$rc"
