#!/usr/bin/env bash
# Builds ps-lite (github.com/dmlc/ps-lite) and bench/pslite/pslite_bench from a local copy of
# ps-lite's sources: nothing is downloaded from GitHub (ps-lite's own Makefile and CMakeLists
# would fetch ZeroMQ and protobuf; bench/pslite/CMakeLists.txt uses Debian's instead).
# Opt-in: never part of Fulcrum's default build, tests or CI.
#
# Usage: bench/pslite/build.sh [--source=PATH] [--rev=REV] [--build_dir=DIR] [--no_apt]
#   --source=PATH  ps-lite's sources: a git repository (bare or not; `git archive REV` is
#                  exported) or a plain source tree (copied). Default: $PSLITE_SOURCE, else the
#                  copy already in bench/pslite/third_party/ps-lite.
#   --rev=REV      the revision exported from a git source (default HEAD).
#   --build_dir    default bench/pslite/build.
#   --no_apt       do not apt-get install missing build packages (libzmq3-dev, libprotobuf-dev,
#                  protobuf-compiler, pkg-config, cmake, g++); fail instead.
# The sources go to bench/pslite/third_party/ps-lite (ignored by git) with SOURCE.txt saying
# where from and which commit. ps-lite is Apache-2.0; its LICENSE travels with the copy.
# Ends with ps-lite's own test_kv_app (1 server, 2 workers on loopback) as a smoke test.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEST="${HERE}/third_party/ps-lite"
source_path="${PSLITE_SOURCE:-}" rev=HEAD build_dir="${HERE}/build" apt=1
die() { echo "pslite/build.sh: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --source=*) source_path="${arg#*=}" ;;
    --rev=*) rev="${arg#*=}" ;;
    --build_dir=*) build_dir="${arg#*=}" ;;
    --no_apt) apt=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown flag ${arg%%=*}" ;;
  esac
done

# ---- build packages (Debian) ---------------------------------------------------------------
need=()
for pkg in libzmq3-dev libprotobuf-dev protobuf-compiler pkg-config cmake g++; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  if ((apt == 0)); then
    echo "pslite/build.sh: missing packages: ${need[*]} (apt-get install ${need[*]})" >&2
    exit 1
  fi
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  echo "pslite/build.sh: installing ${need[*]}"
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need[@]}" ||
    { "${sudo_cmd[@]}" apt-get update && "${sudo_cmd[@]}" apt-get install -y \
        --no-install-recommends "${need[@]}"; }
fi

# ---- sources ---------------------------------------------------------------------------------
if [[ -n "$source_path" ]]; then
  [[ -d "$source_path" ]] || die "--source: no such directory: $source_path"
  rm -rf "$DEST"
  mkdir -p "$DEST"
  if git --git-dir="$source_path" rev-parse --verify -q "${rev}^{commit}" >/dev/null 2>&1 ||
     git -C "$source_path" rev-parse --verify -q "${rev}^{commit}" >/dev/null 2>&1; then
    if git --git-dir="$source_path" rev-parse --verify -q "${rev}^{commit}" >/dev/null 2>&1; then
      git_cmd=(git --git-dir="$source_path")
    else
      git_cmd=(git -C "$source_path")
    fi
    commit="$("${git_cmd[@]}" rev-parse "${rev}^{commit}")"
    "${git_cmd[@]}" archive --format=tar "$commit" | tar -x -C "$DEST"
    printf 'ps-lite from %s (git archive), commit %s (%s)\n' "$source_path" "$commit" \
      "$("${git_cmd[@]}" log -1 --format=%ci "$commit")" >"${DEST}/SOURCE.txt"
  elif [[ -f "${source_path}/src/van.cc" ]]; then
    cp -a "${source_path}/." "$DEST/"
    rm -rf "${DEST}/.git"
    printf 'ps-lite copied from the tree %s\n' "$source_path" >"${DEST}/SOURCE.txt"
  else
    die "--source: $source_path is neither a git repository with ${rev} nor a ps-lite tree"
  fi
elif [[ ! -f "${DEST}/src/van.cc" ]]; then
  die "no ps-lite sources: give --source=PATH (a ps-lite git mirror or tree) or PSLITE_SOURCE"
fi
[[ -f "${DEST}/src/van.cc" && -f "${DEST}/src/meta.proto" ]] ||
  die "${DEST} does not look like ps-lite (src/van.cc, src/meta.proto missing)"
echo "pslite/build.sh: $(cat "${DEST}/SOURCE.txt" 2>/dev/null || echo "sources in ${DEST}")"

# ---- build -----------------------------------------------------------------------------------
cmake -S "$HERE" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" -j"$(nproc)"

# ---- smoke test: ps-lite's own test_kv_app ---------------------------------------------------
"${HERE}/run.sh" --servers=1 --workers=2 --timeout=60 -- "${build_dir}/pslite_test_kv_app"
echo "pslite/build.sh: built ${build_dir}/pslite_bench (test_kv_app passed)"
