# bench/lib/options.sh: the command line of every bench/ shell driver, parsed one way. A
# driver sets its defaults, then
#   BENCH_NAME=compare_cnn
#   source "${ROOT}/bench/lib/options.sh"
#   parse_options "models batches threads=threads_list out keep!" "$@"
# Each word of the spec is an option: `name` (--name=V sets $name), `name=var` (--name=V sets
# $var) or `name!` (--name sets $name to 1). -h/--help prints the driver's header comment (its
# lines from the second up to `set -...`) and exits 0; any other argument exits 2 naming it.
# die MESSAGE exits 2 with "BENCH_NAME: error: MESSAGE".

die() {
  echo "${BENCH_NAME}: error: $*" >&2
  exit 2
}

usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

parse_options() {
  local spec="$1" arg key word name var value
  shift
  for arg in "$@"; do
    case "$arg" in -h | --help) usage; exit 0 ;; esac
    key="${arg#--}" key="${key%%=*}" var="" value=""
    for word in $spec; do
      name="${word%%[=!]*}"
      [[ "$name" == "$key" ]] || continue
      if [[ "$word" == *! ]]; then
        [[ "$arg" == "--$name" ]] && var="$name" value=1
      elif [[ "$arg" == "--$name="* ]]; then
        var="$name" value="${arg#*=}"
        [[ "$word" == *=* ]] && var="${word#*=}"
      fi
    done
    if [[ -z "$var" ]]; then
      usage >&2
      die "unknown argument '$arg' (see --help)"
    fi
    printf -v "$var" '%s' "$value"
  done
}
