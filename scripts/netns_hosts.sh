#!/usr/bin/env bash
# Emulated hosts on one machine: N Linux network namespaces ("hosts"), each with its own lo
# and a veth link (eth0 inside the host) to one bridge, addresses 198.18.0.1 ... 198.18.0.N
# (198.18.0.0/15 is reserved for network benchmarks, RFC 2544), optional tc shaping of each
# host's link. Tasks on one host talk over its lo; across hosts over eth0, so the profiler's
# per-interface figures split as on real nodes. Run a task inside a host with
# `scripts/netns_hosts.sh exec <prefix>-h<i> -- COMMAND` (its namespace and its CPU share;
# scripts/local_cluster.sh --hosts does it).
#
#   scripts/netns_hosts.sh up N [--rate 1gbit|10gbit|none] [--delay 0.1ms] [--cpus C]
#                               [--scale F] [--cpu_period_us 100000] [--prefix fh] [--check]
#                               [--host_examples_per_sec E --examples_per_cpu X]  (not with --cpus)
#   scripts/netns_hosts.sh exec HOST -- COMMAND [ARGS...]   # HOST: <prefix>-h<i>
#   scripts/netns_hosts.sh down [--prefix fh]     # removes exactly what `up` made
#   scripts/netns_hosts.sh status [--prefix fh]
#
# Scaled emulation: --cpus C gives each host its own CPU share, C CPUs (a decimal, e.g. 0.5),
# as a cgroup of the cpu controller (cgroup v2 cpu.max where the v2 hierarchy has it, else
# v1's cpu.cfs_quota_us / cpu.cfs_period_us; the quota is enforced per --cpu_period_us, 100 ms
# by default: a host that used its share waits for the next period). --scale F divides both the CPU
# share and the link rate by F, so that N hosts of a real cluster fit on this machine with
# the same compute-to-communication ratio (--cpus 4 --rate 10gbit --scale 8: 0.5 CPU and
# 1.25 Gbit/s per host). More CPU in all than the machine has (N x C / F > nproc) is refused,
# exit 2, before anything is made; `up ... --check` only checks the options (exit 0 or 2,
# nothing made, no root needed), as bench/sweep.py does for every set of hosts before its
# first run.
# A named compute-to-link ratio: --host_examples_per_sec E --examples_per_cpu X gives each host
# the CPU share that computes E examples/s (E / X CPUs, X: what one CPU of this machine
# computes for the model and batch, measured) beside its --rate link, so that the hosts
# have the ratio of a study's machines (e.g. a GPU that trains E examples/s on a 1 Gbit/s
# link), scaled by --scale as above. A ratio this machine cannot give (E / X x N / F CPUs in
# all, more than nproc) exits 2 naming the ratio asked, the highest possible at that scale
# and the scale that would give it. `exec` runs COMMAND inside HOST: in its CPU cgroup (when
# it has one), then in its network namespace (scripts/local_cluster.sh --hosts uses it); the
# command's children stay in the cgroup. `down` kills whatever still runs in a host's cgroup
# and removes it.
#
# `up` records what it creates in /run/fulcrum-netns/<prefix>.state before creating it, so
# `down` removes it all, also after a crash half-way through `up`. Needs root (CAP_NET_ADMIN):
# without it, it says so and exits 2. Shaping is on each host's eth0 egress, so a transfer
# between two hosts is limited to the rate in each direction: a token bucket filter (tbf)
# for --rate alone, netem for --delay (with the rate); a kernel without sch_netem (as on
# these development VMs) refuses --delay with a clear error.
set -euo pipefail

STATE_DIR=/run/fulcrum-netns
die() { echo "netns_hosts: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

# --host_examples_per_sec E --examples_per_cpu X: sets cpus to E / X (the host that computes E
# examples/s), or exits 2 naming what is wrong. Run after the other options are checked.
ratio_cpus() {
  local eps=$1 x=$2 machine most
  [[ -z "$eps" && -z "$x" ]] && return 0
  [[ -n "$eps" && -n "$x" ]] || die "--host_examples_per_sec and --examples_per_cpu go together"
  [[ -z "$cpus" ]] || die "give --cpus or --host_examples_per_sec, not both"
  [[ "$eps" =~ $decimal ]] && awk -v e="$eps" 'BEGIN { exit !(e > 0) }' ||
    die "--host_examples_per_sec must be a positive number of examples/s, got '$eps'"
  [[ "$x" =~ $decimal ]] && awk -v e="$x" 'BEGIN { exit !(e > 0) }' ||
    die "--examples_per_cpu must be a positive number of examples/s, got '$x'"
  [[ "$rate" != none ]] || die "--host_examples_per_sec is a ratio to the link: give --rate"
  cpus=$(awk -v e="$eps" -v x="$x" 'BEGIN { printf "%.6f", e / x }')
  [[ "$cmd" == up ]] || return 0
  machine=$(nproc --all)
  awk -v c="$cpus" -v n="$n" -v s="$scale" -v m="$machine" 'BEGIN { exit !(c * n / s <= m) }' &&
    return 0
  most=$(awk -v m="$machine" -v n="$n" -v s="$scale" -v x="$x" 'BEGIN { printf "%.1f", m / n * s * x }')
  die "the compute-to-link ratio asked, $eps examples/s per host beside a $rate link, needs $cpus CPUs per host ($eps / --examples_per_cpu $x); $n hosts at --scale $scale can have at most $(awk -v m="$machine" -v n="$n" -v s="$scale" 'BEGIN { printf "%.3f", m / n * s }') CPUs each on this machine's $machine: the highest ratio possible is $most examples/s per host beside $rate; --scale $(awk -v c="$cpus" -v n="$n" -v m="$machine" 'BEGIN { f = c * n / m; printf "%d", (f == int(f)) ? f : int(f) + 1 }') or more would give it"
}

(($# >= 1)) || { usage >&2; exit 2; }
cmd=$1
shift
n=0 rate=none delay="" prefix=fh cpus="" scale=1 period_us=100000 check=0 host_eps="" per_cpu=""
if [[ "$cmd" == exec ]]; then
  if (($# < 3)) || [[ "$2" != -- ]]; then die "usage: exec HOST -- COMMAND [ARGS...]"; fi
  exec_host=$1
  shift 2
  [[ "$exec_host" =~ ^([a-z][a-z0-9]{0,5})-h([1-9][0-9]*)$ ]] ||
    die "exec: the host must be <prefix>-h<i>, got '$exec_host'"
  prefix=${BASH_REMATCH[1]}
  set -- --prefix "$prefix" -- "$@"
fi
if [[ "$cmd" == up ]]; then
  (($# >= 1)) || die "up needs the number of hosts"
  n=$1
  shift
  [[ "$n" =~ ^[1-9][0-9]*$ ]] && ((n <= 250)) || die "the number of hosts must be 1-250, got '$n'"
fi
while (($#)); do
  case "$1" in
    --rate) rate=${2:-}; shift 2 ;;
    --rate=*) rate=${1#*=}; shift ;;
    --delay) delay=${2:-}; shift 2 ;;
    --delay=*) delay=${1#*=}; shift ;;
    --prefix) prefix=${2:-}; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --cpus) cpus=${2:-}; shift 2 ;;
    --cpus=*) cpus=${1#*=}; shift ;;
    --scale) scale=${2:-}; shift 2 ;;
    --scale=*) scale=${1#*=}; shift ;;
    --cpu_period_us) period_us=${2:-}; shift 2 ;;
    --cpu_period_us=*) period_us=${1#*=}; shift ;;
    --host_examples_per_sec) host_eps=${2:-}; shift 2 ;;
    --host_examples_per_sec=*) host_eps=${1#*=}; shift ;;
    --examples_per_cpu) per_cpu=${2:-}; shift 2 ;;
    --examples_per_cpu=*) per_cpu=${1#*=}; shift ;;
    --check) check=1; shift ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$prefix" =~ ^[a-z][a-z0-9]{0,5}$ ]] || die "--prefix must be 1-6 lowercase letters/digits, got '$prefix'"
[[ "$rate" =~ ^(none|[0-9]+(k|m|g)?bit)$ ]] || die "--rate must be like 1gbit, 10gbit, 100mbit or none, got '$rate'"
[[ -z "$delay" || "$delay" =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] || die "--delay must be like 0.1ms, got '$delay'"
decimal='^([0-9]+(\.[0-9]*)?|\.[0-9]+)$'
[[ -z "$cpus" || "$cpus" =~ $decimal ]] || die "--cpus must be a positive number of CPUs, got '$cpus'"
[[ "$scale" =~ $decimal ]] || die "--scale must be a number >= 1, got '$scale'"
[[ "$period_us" =~ ^[0-9]+$ ]] && ((period_us >= 1000 && period_us <= 1000000)) ||
  die "--cpu_period_us must be 1000-1000000 (microseconds), got '$period_us'"
awk -v s="$scale" 'BEGIN { exit !(s >= 1) }' || die "--scale must be a number >= 1, got '$scale'"
ratio_cpus "$host_eps" "$per_cpu"
# The CPU share of one host in microseconds per --cpu_period_us, after the scale.
quota_us=""
if [[ -n "$cpus" ]]; then
  quota_us=$(awk -v c="$cpus" -v s="$scale" -v p="$period_us" 'BEGIN { printf "%d", c / s * p + 0.5 }')
  ((quota_us >= 1000)) ||
    die "--cpus $cpus / --scale $scale is less than 1 ms per --cpu_period_us $period_us per host (the kernel's least quota)"
  if [[ "$cmd" == up ]]; then
    machine=$(nproc --all)
    awk -v n="$n" -v q="$quota_us" -v m="$machine" -v p="$period_us" 'BEGIN { exit !(n * q <= m * p) }' ||
      die "--cpus $cpus x $n hosts / --scale $scale = $(awk -v n="$n" -v q="$quota_us" \
        -v p="$period_us" 'BEGIN { printf "%.2f", n * q / p }') CPUs, more than this machine's $machine"
  fi
fi
if ((check)); then
  [[ "$cmd" == up ]] || die "--check goes with up"
  exit 0
fi

need_root() {
  if ((EUID != 0)); then die "needs root (network namespaces, veth, bridge, tc): run as root"; fi
  command -v ip > /dev/null || die "'ip' (iproute2) not found"
}

bridge="${prefix}-br0"
state="$STATE_DIR/$prefix.state"

# The cpu controller's hierarchy: "v2 DIR" (cpu.max) or "v1 DIR" (cpu.cfs_quota_us); empty
# when this machine has neither.
cpu_hierarchy() {
  local dir
  for dir in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    if [[ -r "$dir/cgroup.controllers" ]] && grep -qw cpu "$dir/cgroup.controllers"; then
      echo "v2 $dir"
      return
    fi
  done
  [[ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]] &&
    echo "v1 /sys/fs/cgroup/cpu"
  return 0
}

# Makes a host's CPU cgroup DIR with quota_us per period_us; the caller has recorded it.
# (The v2 path is written to the kernel's interface but was not run here: these VMs have v1.)
make_cgroup() {
  local version=$1 dir=$2 parent
  parent=$(dirname "$dir")
  mkdir "$dir"
  if [[ "$version" == v2 ]]; then
    # A v2 child has cpu.max only when its parent hands the cpu controller down.
    grep -qw cpu "$parent/cgroup.subtree_control" ||
      echo +cpu > "$parent/cgroup.subtree_control" ||
      die "cannot enable the cpu controller in $parent/cgroup.subtree_control"
    echo "$quota_us $period_us" > "$dir/cpu.max"
  else
    echo "$period_us" > "$dir/cpu.cfs_period_us"
    echo "$quota_us" > "$dir/cpu.cfs_quota_us"
  fi
}

# Kills what still runs in a cgroup (a task the caller left behind), then removes it.
remove_cgroup() {
  local dir=$1 pid
  [[ -d "$dir" ]] || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    while read -r pid; do kill -KILL "$pid" 2> /dev/null || true; done < "$dir/cgroup.procs"
    rmdir "$dir" 2> /dev/null && return 0
    sleep 0.1
  done
  echo "netns_hosts: could not remove cgroup $dir (processes: $(tr '\n' ' ' < "$dir/cgroup.procs"))" >&2
}

# Removes what the state file lists (namespaces delete their veth ends with them), then the
# bridge; tolerates pieces that are already gone.
down() {
  need_root
  local kind name
  if [[ -r "$state" ]]; then
    while read -r kind name; do
      case "$kind" in
        netns) ip netns del "$name" 2> /dev/null || true ;;
        link) ip link del "$name" 2> /dev/null || true ;;
        cgroup) remove_cgroup "$name" ;;
      esac
    done < <(tac "$state")
    rm -f "$state"
  fi
  # Anything with our prefix that a crash left unrecorded.
  for name in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^${prefix}-h[0-9]+$" || true); do
    ip netns del "$name" 2> /dev/null || true
  done
  local version root
  read -r version root <<< "$(cpu_hierarchy)"
  if [[ -n "$root" ]]; then
    for name in "$root"/fulcrum-"$prefix"-h*; do
      [[ -d "$name" ]] && remove_cgroup "$name"
    done
  fi
  ip link del "$bridge" 2> /dev/null || true
}

# Rate in bits/s of "1gbit", "100mbit", "500kbit", "1000bit".
rate_bits() {
  local v=${1%bit} mult=1
  case "$v" in
    *k) mult=1000; v=${v%k} ;;
    *m) mult=1000000; v=${v%m} ;;
    *g) mult=1000000000; v=${v%g} ;;
  esac
  echo $((v * mult))
}

# Shapes a host's eth0 egress: netem when a delay is asked (it also takes the rate), else a
# token bucket whose burst holds 1 ms at the rate (at least 64 KiB).
shape() {
  local ns=$1
  if [[ -n "$delay" ]]; then
    local netem=(delay "$delay")
    [[ "$rate" != none ]] && netem+=(rate "$rate")
    ip netns exec "$ns" tc qdisc add dev eth0 root netem "${netem[@]}" limit 100000 ||
      die "tc netem failed: --delay needs the sch_netem kernel module (check 'tc qdisc add ... netem')"
  elif [[ "$rate" != none ]]; then
    local burst=$(($(rate_bits "$rate") / 8 / 1000))
    ((burst >= 65536)) || burst=65536
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 20ms
  fi
}

up() {
  need_root
  if [[ -e "$state" ]] || ip link show "$bridge" > /dev/null 2>&1; then
    die "hosts with prefix '$prefix' exist already: run 'scripts/netns_hosts.sh down --prefix $prefix' first"
  fi
  local version="" root=""
  if [[ -n "$quota_us" ]]; then
    read -r version root <<< "$(cpu_hierarchy)"
    [[ -n "$root" ]] || die "--cpus: this machine has no cgroup cpu controller (v2 cpu.max or v1 cpu.cfs_quota_us)"
  fi
  if [[ "$rate" != none && "$scale" != 1 ]]; then
    rate="$(awk -v r="$(rate_bits "$rate")" -v s="$scale" 'BEGIN { printf "%.0f", r / s }')bit"
  fi
  mkdir -p "$STATE_DIR"
  : > "$state"
  trap 'echo "netns_hosts: up failed; removing what was made" >&2; down' ERR
  echo "link $bridge" >> "$state"
  ip link add "$bridge" type bridge
  ip link set "$bridge" up
  local i ns host_end br_end
  for ((i = 1; i <= n; i++)); do
    ns="${prefix}-h$i"
    br_end="${prefix}-h$i-br"
    host_end="${prefix}-h$i-e"
    echo "netns $ns" >> "$state"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    echo "link $br_end" >> "$state"
    ip link add "$host_end" type veth peer name "$br_end"
    ip link set "$host_end" netns "$ns"
    ip -n "$ns" link set "$host_end" name eth0
    ip -n "$ns" addr add "198.18.0.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip link set "$br_end" master "$bridge"
    ip link set "$br_end" up
    shape "$ns"
    if [[ -n "$quota_us" ]]; then
      echo "cgroup $root/fulcrum-$ns" >> "$state"
      make_cgroup "$version" "$root/fulcrum-$ns"
    fi
  done
  trap - ERR
  local share=""
  [[ -n "$quota_us" ]] && share=", $(awk -v q="$quota_us" -v p="$period_us" 'BEGIN { printf "%g", q / p }') CPU each (cgroup $version)"
  echo "netns_hosts: $n host(s) up: ${prefix}-h1..${prefix}-h$n at 198.18.0.1..198.18.0.$n" \
    "(rate $rate${delay:+, delay $delay}$share); state in $state"
}

# The CPU cgroup folder of host NS that `up` recorded, if it has one.
cgroup_of() {
  local kind name
  [[ -r "$state" ]] || return 0
  while read -r kind name; do
    if [[ "$kind" == cgroup && "$name" == */fulcrum-"$1" && -d "$name" ]]; then
      echo "$name"
      return 0
    fi
  done < "$state"
}

# " cpu <share>" of host NS when it has a CPU cgroup.
cpu_share() {
  local dir q p
  dir=$(cgroup_of "$1")
  [[ -n "$dir" ]] || return 0
  if [[ -r "$dir/cpu.max" ]]; then
    read -r q p < "$dir/cpu.max"
  else
    q=$(< "$dir/cpu.cfs_quota_us") p=$(< "$dir/cpu.cfs_period_us")
  fi
  awk -v q="$q" -v p="$p" 'BEGIN { printf " cpu %g", q / p }'
}

status() {
  local i=0 ns
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^${prefix}-h[0-9]+$" | sort -V); do
    i=$((i + 1))
    printf '%s %s %s%s\n' "$ns" "$(ip -n "$ns" -4 -o addr show dev eth0 2> /dev/null | awk '{print $4}')" \
      "$(ip netns exec "$ns" tc qdisc show dev eth0 2> /dev/null | head -1)" "$(cpu_share "$ns")"
  done
  ((i > 0)) || echo "netns_hosts: no hosts with prefix '$prefix'"
}

# Runs "$@" in host $exec_host: its CPU cgroup first (this shell joins it, the command
# inherits it), then its network namespace.
exec_in() {
  need_root
  ip netns list 2> /dev/null | awk '{print $1}' | grep -qx "$exec_host" ||
    die "exec: emulated host '$exec_host' does not exist (scripts/netns_hosts.sh up)"
  local dir
  dir=$(cgroup_of "$exec_host")
  if [[ -n "$dir" ]]; then
    echo $$ > "$dir/cgroup.procs" || die "exec: could not join cgroup $dir"
  fi
  exec ip netns exec "$exec_host" "$@"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  status) status ;;
  exec) exec_in "$@" ;;
  *) usage >&2; die "unknown command '$cmd' (up, exec, down or status)" ;;
esac
