#!/usr/bin/env bash
# Installs the Debian packages Fulcrum needs that are missing (apt-get update runs once, only
# when something must be installed), then configures and builds into build/.
# Idempotent; fast when nothing is missing and the build is up to date: an existing build
# folder is not configured again (CMake does that itself when a CMakeLists.txt changed), and
# its -Werror setting is kept unless CI=true asks for it, so that a run after the tests does
# not rebuild everything with other flags (that took 11 minutes on 2 cores).
#
#   scripts/setup.sh [--no-build] [--target NAME]... [-- extra cmake -D options]
# --target builds only the named targets (e.g. ps, worker, chief) instead of everything.
# Environment: BUILD_DIR (default build), JOBS (default nproc), CI=true turns on -Werror.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
  cmake make g++ clang pkg-config ccache python3
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev openssl
  libeigen3-dev libopenblas-dev libxsmm-dev libdnnl-dev libabsl-dev libspdlog-dev nlohmann-json3-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
  prometheus-cpp-dev prometheus
  sysstat
  python3-matplotlib
  munge slurmctld slurmd slurm-client
)

build=1
cmake_args=()
targets=()
while (($#)); do
  case "$1" in
    --no-build) build=0 ;;
    --target)
      if (($# < 2)); then echo "setup.sh: --target needs a target name" >&2; exit 2; fi
      targets+=(--target "$2"); shift ;;
    --) shift; cmake_args+=("$@"); break ;;
    *) echo "setup.sh: unknown argument '$1' (use --no-build, --target NAME or -- CMAKE_ARGS...)" >&2; exit 2 ;;
  esac
  shift
done

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} Debian packages present"
fi

((build)) || exit 0
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cache="$BUILD_DIR/CMakeCache.txt"
werror=()
if [[ "${CI:-}" == "true" ]]; then
  werror=(-DFULCRUM_WERROR=ON)
elif [[ ! -f "$cache" ]]; then
  werror=(-DFULCRUM_WERROR=OFF)
fi
if [[ ! -f "$cache" ]] || ((${#cmake_args[@]})) ||
  { ((${#werror[@]})) && ! grep -q "^FULCRUM_WERROR:BOOL=ON$" "$cache"; }; then
  mkdir -p "$BUILD_DIR"
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${werror[@]}" \
    "${cmake_args[@]}" > "$BUILD_DIR/configure.log" 2>&1 || {
    cat "$BUILD_DIR/configure.log" >&2
    echo "setup: cmake configure failed" >&2
    exit 1
  }
  grep -E "^-- Fulcrum:" "$BUILD_DIR/configure.log" || true
else
  echo "setup: $BUILD_DIR already configured (-Werror $(grep -q '^FULCRUM_WERROR:BOOL=ON$' "$cache" && echo on || echo off))"
fi
cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
built=()
for ((i = 1; i < ${#targets[@]}; i += 2)); do built+=("${targets[i]}"); done
echo "setup: built ${built[*]:-everything} in $BUILD_DIR"
