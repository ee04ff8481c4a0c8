#!/usr/bin/env bash
# Installs the Debian packages Fulcrum needs that are missing (apt-get update runs once, only
# when something must be installed), then configures and builds into build/.
# Idempotent; fast when nothing is missing and the build is up to date.
#
#   scripts/setup.sh [--no-build] [-- extra cmake -D options]
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
while (($#)); do
  case "$1" in
    --no-build) build=0 ;;
    --) shift; cmake_args+=("$@"); break ;;
    *) echo "setup.sh: unknown argument '$1' (use --no-build or -- CMAKE_ARGS...)" >&2; exit 2 ;;
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
werror=OFF
if [[ "${CI:-}" == "true" ]]; then werror=ON; fi
mkdir -p "$BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DFULCRUM_WERROR="$werror" \
  "${cmake_args[@]}" > "$BUILD_DIR/configure.log" 2>&1 || {
  cat "$BUILD_DIR/configure.log" >&2
  echo "setup: cmake configure failed" >&2
  exit 1
}
grep -E "^-- Fulcrum:" "$BUILD_DIR/configure.log" || true
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "setup: built $BUILD_DIR/bin/{ps,worker,chief}"
