#!/usr/bin/env bash
# Sets up what is missing, builds, and runs the whole test suite with CTest.
# Before the suite it runs the lock checks (scripts/check_threads.sh: the clang
# -Wthread-safety build and the ThreadSanitizer tests); FULCRUM_SKIP_THREAD_CHECKS=1 skips them.
#   scripts/test.sh [extra ctest arguments, e.g. -R Kernels or -L integration]
# The soak test (label soak, ~4 minutes) runs only when asked: scripts/test.sh -L soak
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
if [[ "${FULCRUM_SKIP_THREAD_CHECKS:-0}" != 1 ]]; then
  scripts/check_threads.sh
fi
BUILD_DIR=${BUILD_DIR:-build}
# Each integration test trains with 2 threads; two tests at a time fill the 2-core machines.
# Without arguments the soak test is left out (-LE soak); any -L/-R argument chooses instead.
selection=(-LE soak)
for arg in "$@"; do
  case "$arg" in -L | -R | -L* | -R* | --label-regex* | --tests-regex*) selection=() ;; esac
done
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j 2 "${selection[@]}" "$@"
