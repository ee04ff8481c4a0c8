#!/usr/bin/env bash
# Sets up what is missing, builds, and runs the whole test suite with CTest.
#   scripts/test.sh [extra ctest arguments, e.g. -R Kernels or -L integration]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
# Each integration test trains with 2 threads; two tests at a time fill the 2-core machines.
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 -j 2 "$@"
