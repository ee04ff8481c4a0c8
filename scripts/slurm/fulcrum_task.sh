#!/usr/bin/env bash
# One Fulcrum task of a Slurm job: `srun` runs this script once per Slurm task (see
# scripts/slurm/fulcrum.sbatch, which does that for you). Every task builds the same
# ClusterSpec from Slurm's environment, then execs build/bin/chief, ps or worker with
# --cluster_spec, --job_name, --task_index, --run_dir and your flags.
#
#   srun [srun options] scripts/slurm/fulcrum_task.sh [options] [-- flags for every task...]
#   srun -n 4 scripts/slurm/fulcrum_task.sh --ps 1 -- --model=logreg --train_steps=1000
#     --ps P           ps tasks (default 1)
#     --workers W      workers (default: every task left after the chief and the ps tasks);
#                      the allocation must then hold exactly 1 + P + W tasks
#     --base_port N    the port of a node's first task; the task with local rank L on its
#                      node (SLURM_LOCALID) listens on N + L (default 2222)
#     --run_dir DIR    the run directory for every task (default
#                      $SLURM_SUBMIT_DIR/runs/slurm-$SLURM_JOB_ID); a --run_dir among the
#                      flags after -- is used instead
#     --bin_dir DIR    where ps, worker and chief are (default: BIN_DIR, else build/bin of
#                      this checkout)
#     --plan           print the layout and the spec, check them, make the job's token (below),
#                      start nothing (the sbatch script runs this once before srun, so bad
#                      input fails the job at once)
#
# The mapping, the same in every task (Slurm task = SLURM_PROCID, 0 .. ntasks-1):
#   task 0 = chief:0, tasks 1 .. P = ps:0 .. ps:P-1, tasks P+1 .. P+W = worker:0 .. worker:W-1.
# A task's address is HOST:PORT, HOST = its node's name from SLURM_STEP_NODELIST (else
# SLURM_JOB_NODELIST), expanded with `scontrol show hostnames`; which node runs which task
# follows SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE, e.g. "2(x3),1") and the
# distribution (SLURM_DISTRIBUTION: block, Slurm's default, or cyclic). PORT = --base_port +
# the task's local rank on its node, so several tasks share a node. Each task checks that the
# node and local rank computed for it are its own (SLURMD_NODENAME, SLURM_LOCALID). The spec
# is written (atomically, the same bytes from every task) to RUN_DIR/cluster_spec.json.
#
# On a real cluster: the checkout, built, must be at the same path on every node (a shared
# filesystem, or the same path everywhere), and RUN_DIR should be on shared storage so the
# chief's report.json, report.html and run_trace.json see every task's folder (each task
# writes its own folder on its own node; report.json holds every task's summary either way).
#
# Credentials: unless the flags after -- carry their own (--auth_token_file, --tls_cert) or
# the opt-out --insecure, every task gets --auth_token_file=RUN_DIR/launch/token, a random
# token (mode 0600) made for the job: by --plan (a fresh one each time; fulcrum.sbatch runs it
# before srun), else by Slurm task 0 when it is missing. Without credentials a task refuses a
# spec with non-loopback addresses (protected mode, docs/distributed.md). Every task must see
# the file, so RUN_DIR must be on a filesystem all the nodes share; a task that does not see
# it within 120 s exits 2 saying so.
# Node names must resolve to addresses the other nodes reach, and the ports --base_port ..
# --base_port + (tasks per node - 1) must be free on every node (two jobs sharing a node
# need different --base_port values).
#
# Exit code 2, with a line naming the problem, for bad input: not running under srun (no
# SLURM_PROCID / SLURM_STEP_ID), an unknown option, an allocation with too few (or, with
# --workers, too many) tasks for the layout, a missing binary, a task distribution other than
# block or cyclic, a --cluster_spec, --job_name, --task_index or --*_hosts flag after -- (the
# launcher sets them), a job's token that does not reach every node. Otherwise the exit code
# is the binary's (docs/distributed.md#exit-codes). Guide: docs/slurm.md.
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
procid_name=${SLURM_PROCID:+Slurm task $SLURM_PROCID: }
die() { echo "fulcrum_task: $procid_name$*" >&2; exit 2; }

num_ps=1 num_workers="" base_port=2222 run_dir="" bin_dir=${BIN_DIR:-$ROOT/build/bin} plan=0
while (($#)); do
  case "$1" in
    --ps|--workers|--base_port|--run_dir|--bin_dir)
      (($# >= 2)) || die "option $1 needs a value (see --help)"
      case "$1" in
        --ps) num_ps=$2 ;;
        --workers) num_workers=$2 ;;
        --base_port) base_port=$2 ;;
        --run_dir) run_dir=$2 ;;
        --bin_dir) bin_dir=$2 ;;
      esac
      shift 2 ;;
    --ps=*) num_ps=${1#*=}; shift ;;
    --workers=*) num_workers=${1#*=}; shift ;;
    --base_port=*) base_port=${1#*=}; shift ;;
    --run_dir=*) run_dir=${1#*=}; shift ;;
    --bin_dir=*) bin_dir=${1#*=}; shift ;;
    --plan) plan=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (the flags for the tasks go after --; see --help)" ;;
  esac
done
flags=("$@")
((plan)) && procid_name=""  # --plan checks the whole job, not one task

# --- Slurm's environment -------------------------------------------------------------------
[[ -n "${SLURM_JOB_ID:-}" && -n "${SLURM_PROCID:-}" ]] ||
  die "not running under Slurm (no SLURM_PROCID): submit scripts/slurm/fulcrum.sbatch with" \
    "sbatch, or run this script with srun inside an allocation"
if ((plan == 0)) && [[ -z "${SLURM_STEP_ID:-}" ]]; then
  die "not started by srun (no SLURM_STEP_ID): a batch script must run it as" \
    "'srun $0 ...', once per Slurm task"
fi
procid=$SLURM_PROCID
nodelist=${SLURM_STEP_NODELIST:-${SLURM_JOB_NODELIST:-}}
tasks_per_node=${SLURM_STEP_TASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-}}
[[ -n "$nodelist" ]] || die "neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set"
[[ -n "$tasks_per_node" ]] || die "neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set"
command -v scontrol > /dev/null || die "scontrol not found (it expands the node list)"
hostnames=$(scontrol show hostnames "$nodelist") ||
  die "'scontrol show hostnames $nodelist' failed (is SLURM_CONF or /etc/slurm/slurm.conf there?)"
mapfile -t nodes <<< "$hostnames"
((${#nodes[@]} > 0)) || die "the node list '$nodelist' expands to no node"

# "2(x3),1" -> 2 2 2 1: Slurm task count of each node, in node-list order.
counts=()
IFS=, read -r -a items <<< "$tasks_per_node"
for item in "${items[@]}"; do
  if [[ "$item" =~ ^([0-9]+)(\(x([0-9]+)\))?$ ]]; then
    for ((r = 0; r < ${BASH_REMATCH[3]:-1}; r++)); do counts+=("${BASH_REMATCH[1]}"); done
  else
    die "cannot read the tasks per node '$tasks_per_node'"
  fi
done
((${#counts[@]} == ${#nodes[@]})) ||
  die "tasks per node '$tasks_per_node' gives ${#counts[@]} node(s) but the node list" \
    "'$nodelist' has ${#nodes[@]}"
ntasks=0
for c in "${counts[@]}"; do ntasks=$((ntasks + c)); done
given_ntasks=${SLURM_STEP_NUM_TASKS:-${SLURM_NTASKS:-$ntasks}}
((given_ntasks == ntasks)) ||
  die "the tasks per node '$tasks_per_node' add up to $ntasks tasks, but Slurm says $given_ntasks"

# Node and local rank of every Slurm task, as Slurm places them.
distribution=${SLURM_DISTRIBUTION:-block}
distribution=${distribution%%[:,]*}
[[ "$distribution" == '*' ]] && distribution=block  # "*": Slurm's default
node_of=() local_of=()
case "$distribution" in
  block)
    p=0
    for i in "${!nodes[@]}"; do
      for ((l = 0; l < counts[i]; l++, p++)); do node_of[p]=${nodes[i]}; local_of[p]=$l; done
    done ;;
  cyclic)
    p=0
    for ((round = 0; p < ntasks; round++)); do
      for i in "${!nodes[@]}"; do
        if ((round < counts[i])); then node_of[p]=${nodes[i]}; local_of[p]=$round; p=$((p + 1)); fi
      done
    done ;;
  *) die "task distribution '$SLURM_DISTRIBUTION' is not supported: use block (Slurm's default) or cyclic" ;;
esac

# --- the layout ----------------------------------------------------------------------------
# (No leading zeros: bash arithmetic would read them as octal.)
[[ "$num_ps" =~ ^[1-9][0-9]{0,5}$ ]] || die "--ps '$num_ps': expected a count of ps tasks, 1 or more"
if [[ -n "$num_workers" ]]; then
  [[ "$num_workers" =~ ^[1-9][0-9]{0,5}$ ]] ||
    die "--workers '$num_workers': expected a count of workers, 1 or more"
  need=$((1 + num_ps + num_workers))
  ((ntasks >= need)) ||
    die "the allocation has $ntasks Slurm task(s), too few for 1 chief + $num_ps ps +" \
      "$num_workers worker(s) = $need: submit with --ntasks=$need"
  ((ntasks == need)) ||
    die "the allocation has $ntasks Slurm tasks, more than 1 chief + $num_ps ps +" \
      "$num_workers worker(s) = $need: submit with --ntasks=$need, or leave --workers out to" \
      "make every other task a worker"
else
  need=$((1 + num_ps + 1))
  ((ntasks >= need)) ||
    die "the allocation has $ntasks Slurm task(s), too few for 1 chief + $num_ps ps + at" \
      "least 1 worker = $need: submit with --ntasks=$need or more"
  num_workers=$((ntasks - 1 - num_ps))
fi
max_local=0
for l in "${local_of[@]}"; do
  if ((l > max_local)); then max_local=$l; fi
done
if ! [[ "$base_port" =~ ^[1-9][0-9]{0,4}$ ]] || ((base_port + max_local > 65535)); then
  die "--base_port '$base_port': expected a port such that --base_port + $max_local" \
    "(the highest local rank) is at most 65535"
fi

job_of() {  # Slurm task -> "job index"
  local p=$1
  if ((p == 0)); then echo "chief 0"
  elif ((p <= num_ps)); then echo "ps $((p - 1))"
  else echo "worker $((p - 1 - num_ps))"
  fi
}
address_of() { echo "${node_of[$1]}:$((base_port + local_of[$1]))"; }
json_list() {  # first last -> ["host:port", ...]
  local out="" p
  for ((p = $1; p <= $2; p++)); do out+="${out:+, }\"$(address_of "$p")\""; done
  echo "[$out]"
}
workers_json=$(json_list $((num_ps + 1)) $((num_ps + num_workers)))
spec_json="{\"chief\": $(json_list 0 0), \"ps\": $(json_list 1 "$num_ps"), \"worker\": $workers_json}"

for binary in chief ps worker; do
  [[ -x "$bin_dir/$binary" ]] ||
    die "$bin_dir/$binary not found or not executable: build the checkout (scripts/setup.sh)" \
      "at the same path on every node, or give --bin_dir"
done

# The run directory: from the flags if they name one, else --run_dir, else one per job.
# Credentials: whether the flags carry some or the --insecure opt-out (Abseil's forms: --x=v,
# --x v, -x; --insecure=false, --noinsecure and the like count as absent).
flag_run_dir="" credentials=0
for ((i = 0; i < ${#flags[@]}; i++)); do
  case "${flags[i]}" in
    --auth_token_file|--auth_token_file=*|-auth_token_file|-auth_token_file=*|\
    --tls_cert|--tls_cert=*|-tls_cert|-tls_cert=*|--insecure|-insecure)
      credentials=1 ;;
    --insecure=*|-insecure=*)
      case "${flags[i]#*=}" in [Tt]|[Tt][Rr][Uu][Ee]|[Yy]|[Yy][Ee][Ss]|1) credentials=1 ;; esac ;;
    --cluster_spec|--cluster_spec=*|--job_name|--job_name=*|--task_index|--task_index=*|\
    --ps_hosts*|--worker_hosts*|--chief_hosts*|--master_hosts*)
      die "${flags[i]%%=*} among the flags: the launcher gives every task its spec, job and" \
        "index (see --help)" ;;
    --run_dir=*) flag_run_dir=${flags[i]#*=} ;;
    --run_dir) flag_run_dir=${flags[i + 1]:-} ;;
  esac
done
if [[ -n "$flag_run_dir" ]]; then
  [[ -z "$run_dir" || "$run_dir" == "$flag_run_dir" ]] ||
    die "two run directories: --run_dir '$run_dir' before -- and '$flag_run_dir' after it"
  run_dir=$flag_run_dir
fi
run_dir=${run_dir:-${SLURM_SUBMIT_DIR:-$PWD}/runs/slurm-$SLURM_JOB_ID}
run_dir=$(realpath -m "$run_dir")
token=""
((credentials)) || token=$run_dir/launch/token

# Writes a fresh token (32 random bytes as 64 hex characters and a newline) to $1, mode 0600
# from the start (a umask-077 subshell) and never in an argument.
write_token() {
  (umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' > "$1" && echo >> "$1") &&
    [[ $(wc -c < "$1") -eq 65 ]]
}

if ((plan)); then
  per_node=""
  for i in "${!nodes[@]}"; do per_node+="${per_node:+, }${nodes[i]}: ${counts[i]}"; done
  echo "fulcrum_task: Slurm job $SLURM_JOB_ID: $ntasks task(s) on ${#nodes[@]} node(s)" \
    "($per_node), distribution $distribution"
  for ((p = 0; p < ntasks; p++)); do
    read -r job index <<< "$(job_of "$p")"
    printf '  Slurm task %-3d -> %-10s %s\n' "$p" "$job:$index" "$(address_of "$p")"
  done
  echo "  spec: $spec_json"
  echo "  run dir: $run_dir"
  if [[ -n "$token" ]]; then  # made last: bad input above leaves nothing behind
    mkdir -p "$run_dir/launch" || die "cannot create '$run_dir/launch'"
    rm -f "$token.tmp"
    write_token "$token.tmp" || die "cannot write the token '$token.tmp'"
    mv -f "$token.tmp" "$token"
    echo "  token: $token (made for this job, mode 0600: every task gets --auth_token_file;" \
      "give --auth_token_file, --tls_cert or --insecure after -- to choose)"
  else
    echo "  credentials: from the flags"
  fi
  exit 0
fi

# --- this task -----------------------------------------------------------------------------
((procid >= 0 && procid < ntasks)) || die "SLURM_PROCID $procid is outside the $ntasks tasks"
if [[ -n "${SLURMD_NODENAME:-}" && "$SLURMD_NODENAME" != "${node_of[procid]}" ]] ||
   [[ -n "${SLURM_LOCALID:-}" && "$SLURM_LOCALID" != "${local_of[procid]}" ]]; then
  die "Slurm placed this task on ${SLURMD_NODENAME:-?} as local task ${SLURM_LOCALID:-?}," \
    "not on ${node_of[procid]} as local task ${local_of[procid]} as the '$distribution'" \
    "distribution of '$tasks_per_node' over '$nodelist' says: use srun's default" \
    "distribution (block)"
fi
read -r job index <<< "$(job_of "$procid")"
procid_name="Slurm task $procid ($job:$index): "

mkdir -p "$run_dir" || die "cannot create the run directory '$run_dir'"
spec="$run_dir/cluster_spec.json"
tmp=$(mktemp "$run_dir/.cluster_spec.json.XXXXXX") || die "cannot write into '$run_dir'"
printf '%s\n' "$spec_json" > "$tmp"
mv -f "$tmp" "$spec"

# The job's token: made by --plan; else task 0 makes it when missing (a hard link: the first
# one stays, so every task reads the same bytes) and the others wait until they see it.
token_flag=()
if [[ -n "$token" ]]; then
  if [[ ! -e "$token" ]] && ((procid == 0)); then
    mkdir -p "$run_dir/launch" || die "cannot create '$run_dir/launch'"
    tmp=$(mktemp "$run_dir/launch/.token.XXXXXX") || die "cannot write into '$run_dir/launch'"
    write_token "$tmp" || { rm -f "$tmp"; die "cannot write the token '$tmp'"; }
    ln "$tmp" "$token" 2> /dev/null || true
    rm -f "$tmp"
  fi
  for ((waited = 0; waited < 1200; waited++)); do
    [[ -e "$token" ]] && break
    sleep 0.1
  done
  [[ -e "$token" ]] ||
    die "the job's token $token is not on ${node_of[procid]} after 120 s: the run directory" \
      "must be on a filesystem every node shares (--run_dir), or give --auth_token_file (the" \
      "same file on every node), --tls_cert or --insecure after --"
  token_flag=(--auth_token_file="$token")
fi

run_dir_flag=(--run_dir="$run_dir")
[[ -n "$flag_run_dir" ]] && run_dir_flag=()
token_note=${token:+, token $token}
echo "fulcrum_task: Slurm task $procid of $ntasks on ${node_of[procid]} (local rank" \
  "${local_of[procid]}) -> $job:$index at $(address_of "$procid"), spec $spec$token_note" >&2
exec "$bin_dir/$job" --cluster_spec="$spec" --job_name="$job" --task_index="$index" \
  "${run_dir_flag[@]}" "${token_flag[@]}" "${flags[@]}"
