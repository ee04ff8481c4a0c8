# studies/lib/points.sh: the points of a study's run.sh, resumable (sourced, not run).
#
#   source "$ROOT/studies/lib/points.sh"
#   points_begin OUT TOTAL STUDY      # OUT/points/ keeps one record per finished point
#   point NAME ESTIMATE_S [REPORT] -- COMMAND [ARGS...]
#   points_end
#
# `point` runs COMMAND unless OUT/points/NAME.json records that it finished with the same
# command (its settings) before: then it is reused and says so, with the commit it ran
# from. A point recorded with another command is run again. Each point prints a progress line
# "[i/N] NAME: ok in S s, N left, about M min" (the time left: the points still to run's
# estimates, scaled by how long the points timed so far took against their estimates, those
# run now and those reused from their records; the estimates alone until one is timed).
# Every record names the commit (`git describe --always --dirty`) and a hash of the
# binaries the point started (taken again per point: a rebuild during a study shows in the
# records), so that results gathered across restarts never mix sources silently: points_end
# prints a warning naming any other source, and points_sources prints "NAME commit binaries"
# lines for a study's CSV.
# COMMAND's output goes to OUT/points/NAME.log; a failed point stops the study (exit 1),
# naming its log; the finished ones stay recorded.
# REPORT, where given, is the report.json the point's run writes: its cluster.other_cpus_max
# (the CPUs the machine spent on other work beside the run, docs/profiler.md) goes into the
# record as other_cpus. A point above POINTS_MAX_OTHER_CPUS (default 0.5) says so when it ends,
# points_end names every such record, and the next start runs it again instead of reusing it
# (as bench/sweep.py --rerun_busy does): its figures are not to be quoted.

_pt_out="" _pt_total=0 _pt_study="" _pt_done=0 _pt_est_left=0 _pt_timed_s=0 _pt_timed_est=0
_pt_commit="" _pt_binaries="" _pt_bins="" _pt_root="" _pt_paths=() _pt_names=()

# The hash of the ps, worker and chief binaries as they are now (12 hex digits).
# A missing one hashes as empty (the study's own check names it).
_pt_bin_hash() {
  { cat "$_pt_bins/ps" "$_pt_bins/worker" "$_pt_bins/chief" 2> /dev/null || true; } | sha256sum | cut -c1-12
}

points_begin() {
  _pt_out=$1/points _pt_total=$2 _pt_study=$3 _pt_done=0 _pt_timed_s=0 _pt_timed_est=0
  _pt_est_left=0
  mkdir -p "$_pt_out"
  _pt_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  _pt_bins=${BIN_DIR:-$_pt_root/build/bin}
  _pt_commit=$(git -C "$_pt_root" describe --always --dirty 2> /dev/null || echo unknown)
  _pt_binaries=$(_pt_bin_hash)
  # The folders a point's words name, each as given and as it resolves, and the placeholder
  # the settings hash writes for them (the study's folder before the checkout it may be in).
  _pt_paths=("$1" "$(realpath -m "$1")" "$_pt_bins" "$(realpath -m "$_pt_bins")"
             "$_pt_root" "$(realpath -m "$_pt_root")")
  _pt_names=(OUT OUT BIN BIN ROOT ROOT)
  echo "$_pt_study: $(date -u +%FT%TZ), commit $_pt_commit, binaries $_pt_binaries," \
    "load $(cut -d' ' -f1-3 /proc/loadavg), $_pt_total point(s)"
}

# The settings of a point: its command line, one word per line, hashed, with the study's
# folder, the binaries' folder and the checkout written as OUT, BIN and ROOT wherever a word
# starts with one or names one after "=", "," or ":". Another spelling of --out or BIN_DIR
# (relative, absolute, through a link) or a moved checkout is then the same settings: the
# binaries themselves are told apart by their hash in every record.
_pt_hash() {
  local w i p n s words=()
  for w in "$@"; do
    for i in "${!_pt_paths[@]}"; do
      p=${_pt_paths[i]} n=${_pt_names[i]}
      [[ -n "$p" && "$p" != / ]] || continue
      [[ "$w" == "$p" || "$w" == "$p"/* ]] && w=$n${w#"$p"}
      for s in = , :; do
        w=${w//"$s$p/"/"$s$n/"} w=${w//"$s$p$s"/"$s$n$s"}
        [[ "$w" != *"$s$p" ]] || w=${w%"$s$p"}$s$n
      done
    done
    words+=("$w")
  done
  printf '%s\n' "${words[@]}" | sha256sum | cut -c1-12
}
# The hash of the words as given, as records written before the placeholders hold it.
_pt_hash_as_given() { printf '%s\n' "$@" | sha256sum | cut -c1-12; }

_pt_timed() {  # a point of estimate $1 took $2 s (run now, or as its record says)
  _pt_est_left=$((_pt_est_left > $1 ? _pt_est_left - $1 : 0))
  ((${2:-0} > 0 && $1 > 0)) || return 0
  _pt_timed_s=$((_pt_timed_s + $2)) _pt_timed_est=$((_pt_timed_est + $1))
}

_pt_left() {  # the time left after this point, in words
  local left=$((_pt_total - _pt_done))
  ((left > 0)) || { echo "none left"; return; }
  if ((_pt_timed_est > 0)); then
    echo "$left left, about $(((_pt_est_left * _pt_timed_s / _pt_timed_est + 59) / 60)) min"
  else
    echo "$left left, about $(((_pt_est_left + 59) / 60)) min (estimated)"
  fi
}

# _pt_busy OTHER: whether OTHER (a record's other_cpus; "" or null when unknown) is above the
# limit (bench/sweep_provenance.py's MAX_OTHER_CPUS unless POINTS_MAX_OTHER_CPUS says).
_pt_busy() {
  [[ "$1" =~ ^[0-9.]+$ ]] && awk -v o="$1" -v m="${POINTS_MAX_OTHER_CPUS:-0.5}" 'BEGIN { exit !(o > m) }'
}

# _pt_other REPORT: its cluster.other_cpus_max as "0.12", or null.
_pt_other() {
  [[ -n "$1" ]] || { echo null; return; }
  /usr/bin/python3 "$_pt_root/bench/sweep_provenance.py" other_cpus "$1" 2> /dev/null || echo null
}

# _pt_upgrade RECORD AS_GIVEN HASH: a record written before the placeholders, of the same
# words, takes the hash of today's (atomically), so that it is reused under any spelling.
_pt_upgrade() {
  [[ -f "$1" && "$2" != "$3" ]] && grep -q "\"settings\": \"$2\"" "$1" || return 0
  sed "s/\"settings\": \"$2\"/\"settings\": \"$3\"/" "$1" > "$1.tmp" && mv "$1.tmp" "$1"
}

point() {
  local name=$1 est=$2 report="" hash record begun code=0 seconds binaries other
  shift 2
  if [[ $# -gt 0 && "$1" != -- ]]; then report=$1; shift; fi
  [[ "${1:-}" == -- ]] && shift
  hash=$(_pt_hash "$@")
  record="$_pt_out/$name.json"
  _pt_done=$((_pt_done + 1))
  _pt_upgrade "$record" "$(_pt_hash_as_given "$@")" "$hash"
  if [[ -f "$record" ]] && grep -q "\"settings\": \"$hash\"" "$record"; then
    other=$(sed -n 's/.*"other_cpus": \([0-9.]*\).*/\1/p' "$record")
    if ! _pt_busy "$other"; then
      _pt_timed "$est" "$(sed -n 's/.*"seconds": \([0-9]*\).*/\1/p' "$record")"
      echo "$_pt_study: [$_pt_done/$_pt_total] $name: from an earlier start (commit" \
        "$(sed -n 's/.*"commit": "\([^"]*\)".*/\1/p' "$record")), $(_pt_left)"
      return 0
    fi
    echo "$_pt_study: $name ran beside $other CPUs of other work before: running it again"
  elif [[ -f "$record" ]]; then
    echo "$_pt_study: $name ran before with other settings: running it again"
  fi
  rm -f "$record"
  begun=$(date +%s)
  binaries=$(_pt_bin_hash)
  if [[ "$binaries" != "$_pt_binaries" ]]; then
    echo "$_pt_study: the binaries changed during the study ($_pt_binaries, now $binaries):" \
      "each point's record names the ones it ran"
    _pt_binaries=$binaries
  fi
  "$@" > "$_pt_out/$name.log" 2>&1 || code=$?
  seconds=$(($(date +%s) - begun))
  if ((code != 0)); then
    echo "$_pt_study: [$_pt_done/$_pt_total] $name: failed (exit $code) in $seconds s:" \
      "see $_pt_out/$name.log" >&2
    exit 1
  fi
  other=$(_pt_other "$report")
  printf '{"name": "%s", "commit": "%s", "binaries": "%s", "settings": "%s", "seconds": %d, "other_cpus": %s, "finished": "%s"}\n' \
    "$name" "$_pt_commit" "$_pt_binaries" "$hash" "$seconds" "$other" "$(date -u +%FT%TZ)" > "$record.tmp"
  mv "$record.tmp" "$record"
  _pt_timed "$est" "$seconds"
  local beside=""
  _pt_busy "$other" && beside=" beside $other CPUs of other work (not to be quoted; rerun on a quiet machine),"
  echo "$_pt_study: [$_pt_done/$_pt_total] $name: ok in $seconds s,$beside $(_pt_left)"
}

# Before the first point: the estimate of the whole study (the sum of the points' estimates).
points_estimate() { _pt_est_left=$1; echo "$_pt_study: about $((($1 + 59) / 60)) min if nothing is reused"; }

# "NAME COMMIT BINARIES" of every recorded point, for a study's CSV.
points_sources() {
  local f
  for f in "$_pt_out"/*.json; do
    [[ -f "$f" ]] || continue
    sed -n 's/.*"name": "\([^"]*\)", "commit": "\([^"]*\)", "binaries": "\([^"]*\)".*/\1 \2 \3/p' "$f"
  done
}

points_end() {
  local other
  other=$(points_sources | awk -v c="$_pt_commit" -v b="$_pt_binaries" '$2 != c || $3 != b' |
    awk '{print $2 "/" $3}' | sort -u | tr '\n' ' ')
  [[ -z "$other" ]] ||
    echo "$_pt_study: warning: points from other sources than this start's ($_pt_commit/$_pt_binaries): $other(see OUT/points/*.json)"
  local f busy="" n=0 o
  for f in "$_pt_out"/*.json; do
    [[ -f "$f" ]] || continue
    o=$(sed -n 's/.*"other_cpus": \([0-9.]*\).*/\1/p' "$f")
    _pt_busy "$o" || continue
    busy+=" $(basename "$f" .json) ($o)" n=$((n + 1))
  done
  ((n == 0)) || echo "$_pt_study: warning: $n point(s) ran beside more than" \
    "${POINTS_MAX_OTHER_CPUS:-0.5} CPUs of other work:$busy; the same command again runs them again"
  echo "$_pt_study: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# fresh DIR COMMAND...: runs COMMAND after removing DIR (a run folder a rerun point must not
# resume from: a worker resumes from a checkpoint it finds there).
fresh() { rm -rf "$1"; shift; "$@"; }
