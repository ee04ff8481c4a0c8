#!/usr/bin/env bash
# Emulated hosts on one machine: N Linux network namespaces ("hosts"), each with its own lo
# and a veth link (eth0 inside the host) to one bridge, addresses 198.18.0.1 ... 198.18.0.N
# (198.18.0.0/15 is reserved for network benchmarks, RFC 2544), optional tc shaping of each
# host's link. Tasks on one host talk over its lo; across hosts over eth0, so the profiler's
# per-interface figures split as on real nodes. Run a task inside a host with
# `ip netns exec <prefix>-h<i> COMMAND` (scripts/local_cluster.sh --hosts does it).
#
#   scripts/netns_hosts.sh up N [--rate 1gbit|10gbit|none] [--delay 0.1ms] [--prefix fh]
#   scripts/netns_hosts.sh down [--prefix fh]     # removes exactly what `up` made
#   scripts/netns_hosts.sh status [--prefix fh]
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

(($# >= 1)) || { usage >&2; exit 2; }
cmd=$1
shift
n=0 rate=none delay="" prefix=fh
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
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$prefix" =~ ^[a-z][a-z0-9]{0,5}$ ]] || die "--prefix must be 1-6 lowercase letters/digits, got '$prefix'"
[[ "$rate" =~ ^(none|[0-9]+(k|m|g)?bit)$ ]] || die "--rate must be like 1gbit, 10gbit, 100mbit or none, got '$rate'"
[[ -z "$delay" || "$delay" =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] || die "--delay must be like 0.1ms, got '$delay'"

need_root() {
  if ((EUID != 0)); then die "needs root (network namespaces, veth, bridge, tc): run as root"; fi
  command -v ip > /dev/null || die "'ip' (iproute2) not found"
}

bridge="${prefix}-br0"
state="$STATE_DIR/$prefix.state"

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
      esac
    done < <(tac "$state")
    rm -f "$state"
  fi
  # Anything with our prefix that a crash left unrecorded.
  for name in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^${prefix}-h[0-9]+$" || true); do
    ip netns del "$name" 2> /dev/null || true
  done
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
  done
  trap - ERR
  echo "netns_hosts: $n host(s) up: ${prefix}-h1..${prefix}-h$n at 198.18.0.1..198.18.0.$n" \
    "(rate $rate${delay:+, delay $delay}); state in $state"
}

status() {
  local i=0 ns
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^${prefix}-h[0-9]+$" | sort -V); do
    i=$((i + 1))
    printf '%s %s %s\n' "$ns" "$(ip -n "$ns" -4 -o addr show dev eth0 2> /dev/null | awk '{print $4}')" \
      "$(ip netns exec "$ns" tc qdisc show dev eth0 2> /dev/null | head -1)"
  done
  ((i > 0)) || echo "netns_hosts: no hosts with prefix '$prefix'"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) usage >&2; die "unknown command '$cmd' (up, down or status)" ;;
esac
