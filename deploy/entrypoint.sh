#!/usr/bin/env bash
# The container's entrypoint (Dockerfile): picks this pod's task and runs the ps, worker or
# chief binary with the arguments given (the same flags for every task, as in
# scripts/local_cluster.sh). Three ways, tried in this order:
#
#   1. explicit:    entrypoint.sh ps|worker|chief [flags...]
#      runs that binary as it is (single mode: `worker --model=logreg ...`; or with
#      --cluster_spec / --ps_hosts ... / TF_CONFIG given by you).
#   2. TF_CONFIG:   set (Kubeflow's TFJob sets it in every pod): the binary named by its
#      task.type ("master" is the chief). The binaries read TF_CONFIG themselves (cluster and
#      task; runtime/cluster/cluster_spec.cc), so no spec flag is passed.
#   3. StatefulSet: the job and index come from the pod's hostname, NAME-JOB-INDEX
#      (`fulcrum-worker-1`: job worker, index 1, StatefulSet NAME-JOB behind the headless
#      Service NAME-JOB), and the cluster from the replica counts:
#        FULCRUM_PS_REPLICAS, FULCRUM_WORKER_REPLICAS   required, 1-10000
#        FULCRUM_CHIEF_REPLICAS                        0 or 1 (default 1; 0: worker 0 is the chief)
#        FULCRUM_PORT                                  default 2222
#        FULCRUM_NAMESPACE (or POD_NAMESPACE, or the service account's namespace file)
#        FULCRUM_CLUSTER_DOMAIN                        default cluster.local
#        FULCRUM_ADDRESS_PATTERN   each task's host:port, default
#          {name}-{job}-{index}.{name}-{job}.{namespace}.svc.{domain}:{port}
#          (the stable DNS name a StatefulSet pod gets from its headless Service)
#        FULCRUM_PORT_STRIDE       default 0; task k of the spec (chief, ps..., workers...)
#          gets port FULCRUM_PORT + k * stride: every pod on one host (the test) with
#          FULCRUM_ADDRESS_PATTERN=127.0.0.1:{port} and a stride of 1
#      The binary gets --chief_hosts/--ps_hosts/--worker_hosts, --job_name and --task_index.
#
# Credentials. Without them a task refuses a spec with non-loopback addresses (protected mode,
# docs/distributed.md#security), so in ways 2 and 3 the entrypoint adds
# --auth_token_file=<the token> from a Kubernetes Secret mounted as a file, FULCRUM_TOKEN_FILE
# (default /etc/fulcrum/token/token: the Secret fulcrum-token's key `token`, as deploy/*.yaml
# mount it), made once per namespace with
#   kubectl create secret generic fulcrum-token --from-literal=token="$(openssl rand -hex 32)"
# A Secret file is group-readable when the pod has an fsGroup (the kubelet adds g+r whatever
# defaultMode says) and the binary refuses a token readable by group or others: the entrypoint
# then passes a private copy (mode 0600, in a fresh folder under TMPDIR, default /tmp).
# Without the file it exits 2 saying how to make the Secret, unless FULCRUM_INSECURE=1: then
# the binary gets the opt-out --insecure (any peer may call the tasks; FULCRUM_INSECURE=1 with
# the file mounted exits 2). Args that carry --auth_token_file, --tls_cert or --insecure get
# nothing added. Way 1 adds the token too when the file is there, and needs none.
#
# Before it starts the binary, the entrypoint waits (FULCRUM_RESOLVE_TIMEOUT seconds, default
# 120) until the task's own host name resolves: a task listens on its spec address, and a
# headless Service's DNS record appears only after the pod is running.
# Other settings: FULCRUM_BIN_DIR (where ps, worker and chief are; default /opt/fulcrum/bin),
# FULCRUM_POD_NAME (instead of the hostname), FULCRUM_DRY_RUN=1 (print the command, run
# nothing), FULCRUM_IDLE_AFTER_SUCCESS=1 (a StatefulSet restarts every container that exits:
# after the task exits 0 the entrypoint idles until the pod is deleted, so a finished run is
# not started again; SIGTERM/SIGINT are passed to the task meanwhile).
# Bad input exits 2 with one line naming the problem, before anything is started.
set -euo pipefail

BIN_DIR=${FULCRUM_BIN_DIR:-/opt/fulcrum/bin}
ME="fulcrum-entrypoint"

die() {
  echo "$ME: $*" >&2
  exit 2
}
log() { echo "$ME: $*" >&2; }

# An integer setting: its value (decimal, no sign or leading zeros) within [min, max].
int_setting() {  # name value min max
  local name=$1 value=$2 min=$3 max=$4
  if ! [[ "$value" =~ ^(0|[1-9][0-9]{0,5})$ ]] || ((value < min || value > max)); then
    die "$name='$value': expected a whole number from $min to $max"
  fi
  echo "$value"
}

# Waits until the host of `address` (host:port, [v6]:port) resolves, then returns; after
# FULCRUM_RESOLVE_TIMEOUT seconds it gives up quietly (the binary then names the problem).
wait_for_name() {  # address
  local address=$1 host timeout waited=0
  host=${address%:*}
  host=${host#[}
  host=${host%]}
  timeout=$(int_setting FULCRUM_RESOLVE_TIMEOUT "${FULCRUM_RESOLVE_TIMEOUT:-120}" 0 86400)
  command -v getent >/dev/null || return 0
  until getent hosts "$host" >/dev/null 2>&1; do
    if ((waited == 0)); then log "waiting for $host to resolve (up to ${timeout}s)"; fi
    if ((waited >= timeout)); then
      log "$host does not resolve after ${timeout}s; starting anyway"
      return 0
    fi
    sleep 1
    waited=$((waited + 1))
  done
  if ((waited > 0)); then log "$host resolves after ${waited}s"; fi
}

# Whether the args carry credentials of their own (--auth_token_file, --tls_cert, in Abseil's
# forms --x=v, --x v, -x): "credentials"; else the opt-out --insecure (not --insecure=false):
# "insecure"; else "".
flags_credentials() {  # args...
  local arg kind=""
  for arg in "$@"; do
    case "$arg" in
      --auth_token_file | --auth_token_file=* | -auth_token_file | -auth_token_file=* | \
        --tls_cert | --tls_cert=* | -tls_cert | -tls_cert=*)
        echo credentials
        return ;;
      --insecure | -insecure) kind=insecure ;;
      --insecure=* | -insecure=*)
        case "${arg#*=}" in
          [Tt] | [Tt][Rr][Uu][Ee] | [Yy] | [Yy][Ee][Ss] | 1) kind=insecure ;;
        esac ;;
    esac
  done
  echo "$kind"
}

# The path of a token file the binary accepts: `src` itself when only its owner may read it,
# else a private copy (mode 0600; a Secret mounted with an fsGroup is group-readable).
private_token() {  # src
  local src=$1 mode dir
  [[ -r "$src" ]] ||
    die "cannot read the token $src as uid $(id -u)" \
      "(mode $(stat -L -c '%a, owner %u:%g' "$src")):" \
      "give the pod a securityContext.fsGroup (deploy/*.yaml use 10001): the kubelet makes the" \
      "Secret's files readable by that group"
  mode=$(stat -L -c %a "$src")
  if (((8#$mode & 8#077) == 0)); then
    echo "$src"
    return
  fi
  dir=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/fulcrum-token.XXXXXX") ||
    die "cannot make a folder for a private copy of the token $src in ${TMPDIR:-/tmp}"
  (umask 077 && cat "$src" >"$dir/token") || die "cannot copy the token $src to $dir/token"
  log "the token $src is mode $mode (readable by group or others, as a Secret mounted with" \
    "an fsGroup is): the task reads a private copy, $dir/token (mode 0600)"
  echo "$dir/token"
}

# Sets cred_args to what the binary gets on top of the args (see "Credentials" above).
cred_args=()
credentials() {  # required(0|1) args...
  local required=$1 token_file=${FULCRUM_TOKEN_FILE:-/etc/fulcrum/token/token} kind insecure path
  shift
  insecure=$(int_setting FULCRUM_INSECURE "${FULCRUM_INSECURE:-0}" 0 1)
  kind=$(flags_credentials "$@")
  if [[ "$kind" == credentials ]]; then
    ((insecure == 0)) ||
      die "FULCRUM_INSECURE=1 and credentials (--auth_token_file or --tls_cert) among the args:" \
        "choose one (--insecure cannot go with them)"
    return 0
  fi
  [[ "$kind" == insecure ]] && return 0
  if [[ -e "$token_file" ]]; then
    ((insecure == 0)) ||
      die "FULCRUM_INSECURE=1 but a token is mounted at $token_file: remove one (--insecure" \
        "cannot go with a token)"
    path=$(private_token "$token_file")
    cred_args=("--auth_token_file=$path")
  elif ((insecure)); then
    log "FULCRUM_INSECURE=1: no credentials, any peer may call this task (--insecure)"
    cred_args=(--insecure)
  elif ((required)); then
    die "no token at $token_file (FULCRUM_TOKEN_FILE): the tasks need a shared secret (protected" \
      "mode). Make the Secret once per namespace: kubectl create secret generic fulcrum-token" \
      "--from-literal=token=\"\$(openssl rand -hex 32)\" (deploy/*.yaml mount it there); or set" \
      "FULCRUM_INSECURE=1 to run without authentication (--insecure)"
  fi
}

binary_for() {  # job
  local path="$BIN_DIR/$1"
  [[ -x "$path" ]] || die "no executable $path (FULCRUM_BIN_DIR='$BIN_DIR')"
  echo "$path"
}

# Runs the command: exec (the task becomes the container's main process), or with
# FULCRUM_IDLE_AFTER_SUCCESS=1 as a child whose exit 0 is followed by idling until SIGTERM.
run() {  # task-name command...
  local task=$1
  shift
  if [[ "${FULCRUM_DRY_RUN:-0}" == 1 ]]; then
    local arg line=""
    for arg in "$@"; do
      if ! [[ "$arg" =~ ^[-A-Za-z0-9_./:=,@+%]+$ ]]; then arg=$(printf '%q' "$arg"); fi
      line+=${line:+ }$arg
    done
    echo "$line"
    exit 0
  fi
  if [[ "${FULCRUM_IDLE_AFTER_SUCCESS:-0}" != 1 ]]; then
    exec "$@"
  fi
  local child="" got_signal=0 status rc=""
  trap 'got_signal=1; kill -TERM "$child" 2>/dev/null || true' TERM
  trap 'got_signal=1; kill -INT "$child" 2>/dev/null || true' INT
  "$@" &
  child=$!
  # wait returns early (> 128) when a trapped signal arrives: wait again for the task's own
  # status; 127 once that status was already collected.
  while :; do
    got_signal=0
    status=0
    wait "$child" || status=$?
    if ((status == 127)) && [[ -n "$rc" ]]; then break; fi
    rc=$status
    ((got_signal)) || break
  done
  trap - TERM INT
  if ((rc != 0)); then
    log "$task exited with code $rc"
    exit "$rc"
  fi
  log "$task exited 0; idling until the pod is deleted (FULCRUM_IDLE_AFTER_SUCCESS=1)"
  local idle=""
  sleep infinity &
  idle=$!
  trap 'kill "$idle" 2>/dev/null || true; exit 0' TERM INT
  wait "$idle" || true
  exit 0
}

# 1. explicit job.
if (($# > 0)) && [[ "$1" == ps || "$1" == worker || "$1" == chief ]]; then
  job=$1
  shift
  bin=$(binary_for "$job")
  credentials 0 "$@"
  run "$job" "$bin" "${cred_args[@]}" "$@"
fi

# 2. TF_CONFIG (TFJob).
if [[ -n "${TF_CONFIG:-}" ]]; then
  python=/usr/bin/python3
  [[ -x "$python" ]] || python=$(command -v python3 || true)
  [[ -n "$python" ]] || die "TF_CONFIG is set but no python3 is installed to read it"
  # type <TAB> index <TAB> own address (empty when the spec does not have it; the binary
  # then names the problem, exit 2).
  parsed=$("$python" - <<'EOF'
import json, os, sys
def fail(why):
    print("fulcrum-entrypoint: TF_CONFIG: " + why, file=sys.stderr)
    sys.exit(2)
try:
    config = json.loads(os.environ["TF_CONFIG"])
except ValueError as e:
    fail("not valid JSON: %s" % e)
if not isinstance(config, dict):
    fail("must be a JSON object like "
         "{\"cluster\": {...}, \"task\": {\"type\": \"worker\", \"index\": 0}}")
task = config.get("task")
if not isinstance(task, dict) or not isinstance(task.get("type"), str) or not task["type"]:
    fail("no task.type: expected "
         "\"task\": {\"type\": \"chief\" | \"ps\" | \"worker\", \"index\": N}")
index = task.get("index", 0)
if isinstance(index, bool) or not isinstance(index, int) or index < 0:
    fail("task.index must be a non-negative integer, got %s" % json.dumps(index))
cluster = config.get("cluster")
address = ""
if isinstance(cluster, dict):
    tasks = cluster.get(task["type"])
    if isinstance(tasks, list) and index < len(tasks) and isinstance(tasks[index], str):
        address = tasks[index]
print("%s\t%d\t%s" % (task["type"], index, address))
EOF
  ) || exit 2
  IFS=$'\t' read -r type index address <<<"$parsed"
  case "$type" in
    chief | master) job=chief ;;
    ps | worker) job=$type ;;
    *) die "TF_CONFIG task.type '$type': Fulcrum runs chief (or master), ps and worker tasks" \
      "(a TFJob's Chief, PS and Worker replicas)" ;;
  esac
  bin=$(binary_for "$job")
  credentials 1 "$@"
  log "TF_CONFIG: $type:$index${address:+ at $address}"
  if [[ -n "$address" && "${FULCRUM_DRY_RUN:-0}" != 1 ]]; then wait_for_name "$address"; fi
  run "$job:$index" "$bin" "${cred_args[@]}" "$@"
fi

# 3. StatefulSet: NAME-JOB-INDEX.
pod=${FULCRUM_POD_NAME:-${HOSTNAME:-$(hostname 2>/dev/null || true)}}
re='^([a-z0-9]([-a-z0-9]*[a-z0-9])?)-(chief|ps|worker)-(0|[1-9][0-9]*)$'
if ! [[ "$pod" =~ $re ]]; then
  die "hostname '$pod' is not NAME-JOB-INDEX (JOB chief, ps or worker: a StatefulSet pod" \
    "like fulcrum-worker-1), TF_CONFIG is not set, and no job (ps, worker or chief) is" \
    "given as the first argument"
fi
name=${BASH_REMATCH[1]}
job=${BASH_REMATCH[3]}
index=${BASH_REMATCH[4]}
[[ -n "${FULCRUM_PS_REPLICAS:-}" ]] ||
  die "FULCRUM_PS_REPLICAS is not set (the ps StatefulSet's replicas)"
[[ -n "${FULCRUM_WORKER_REPLICAS:-}" ]] ||
  die "FULCRUM_WORKER_REPLICAS is not set (the worker StatefulSet's replicas)"
declare -A replicas=()
# (Assigned one by one: a failed $(...) inside declare would not stop the script.)
replicas[chief]=$(int_setting FULCRUM_CHIEF_REPLICAS "${FULCRUM_CHIEF_REPLICAS:-1}" 0 1)
replicas[ps]=$(int_setting FULCRUM_PS_REPLICAS "$FULCRUM_PS_REPLICAS" 1 10000)
replicas[worker]=$(int_setting FULCRUM_WORKER_REPLICAS "$FULCRUM_WORKER_REPLICAS" 1 10000)
if ((${#index} > 6 || index >= replicas[$job])); then
  upper=${job^^}
  if ((replicas[$job] == 0)); then
    die "hostname '$pod': job $job has no task (FULCRUM_${upper}_REPLICAS=0: worker 0 is the chief)"
  fi
  die "hostname '$pod': $job index $index is beyond FULCRUM_${upper}_REPLICAS=${replicas[$job]}" \
    "($job 0..$((replicas[$job] - 1)))"
fi
port=$(int_setting FULCRUM_PORT "${FULCRUM_PORT:-2222}" 1 65535)
stride=$(int_setting FULCRUM_PORT_STRIDE "${FULCRUM_PORT_STRIDE:-0}" 0 1000)
domain=${FULCRUM_CLUSTER_DOMAIN:-cluster.local}
default_pattern='{name}-{job}-{index}.{name}-{job}.{namespace}.svc.{domain}:{port}'
pattern=${FULCRUM_ADDRESS_PATTERN:-$default_pattern}
namespace=${FULCRUM_NAMESPACE:-${POD_NAMESPACE:-}}
sa_namespace=/var/run/secrets/kubernetes.io/serviceaccount/namespace
if [[ -z "$namespace" && -r "$sa_namespace" ]]; then namespace=$(<"$sa_namespace"); fi
if [[ "$pattern" == *'{namespace}'* && -z "$namespace" ]]; then
  die "no namespace: set FULCRUM_NAMESPACE or POD_NAMESPACE (the downward API's metadata.namespace)"
fi
[[ "$pattern" == *'{port}'* ]] || die "FULCRUM_ADDRESS_PATTERN='$pattern' has no {port}"

# Every task's address, in the spec's order (chief, ps..., workers...).
declare -A hosts=()
position=0
for j in chief ps worker; do
  list=""
  for ((i = 0; i < replicas[$j]; i++)); do
    p=$((port + position * stride))
    ((p <= 65535)) ||
      die "FULCRUM_PORT=$port + $position * FULCRUM_PORT_STRIDE=$stride is beyond 65535"
    a=$pattern
    a=${a//'{name}'/$name}
    a=${a//'{job}'/$j}
    a=${a//'{index}'/$i}
    a=${a//'{namespace}'/$namespace}
    a=${a//'{domain}'/$domain}
    a=${a//'{port}'/$p}
    list+=${list:+,}$a
    if [[ "$j" == "$job" && "$i" == "$index" ]]; then own=$a; fi
    position=$((position + 1))
  done
  hosts[$j]=$list
done

bin=$(binary_for "$job")
args=("$bin")
if ((replicas[chief] > 0)); then args+=("--chief_hosts=${hosts[chief]}"); fi
args+=("--ps_hosts=${hosts[ps]}" "--worker_hosts=${hosts[worker]}"
  "--job_name=$job" "--task_index=$index")
credentials 1 "$@"
log "$pod: $job:$index of $name (chief ${replicas[chief]}, ps ${replicas[ps]}," \
  "worker ${replicas[worker]}) at $own"
if [[ "${FULCRUM_DRY_RUN:-0}" != 1 ]]; then wait_for_name "$own"; fi
run "$job:$index" "${args[@]}" "${cred_args[@]}" "$@"
