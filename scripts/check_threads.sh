#!/usr/bin/env bash
# Lock checks, run by scripts/test.sh before the main suite:
#  1. the `thread-safety` preset: a clang build of every target, in which any finding of
#     -Wthread-safety (an unannotated access to an ABSL_GUARDED_BY member, a missing lock,
#     a lock held on return) is a compile error;
#  2. the `tsan` preset: the concurrency tests built with ThreadSanitizer and run.
#
#   scripts/check_threads.sh [--no-tsan]
# Environment: JOBS (default nproc). Exit 0 when both pass; the failing step's output otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tsan=1
while (($#)); do
  case "$1" in
    --no-tsan) tsan=0 ;;
    *) echo "check_threads.sh: unknown argument '$1' (use --no-tsan)" >&2; exit 2 ;;
  esac
  shift
done
JOBS=${JOBS:-$(nproc)}

# Tests that exercise threads: the pool, the PS under concurrent pushers, the sharded
# client's retries, the profiler under concurrent records, the coordinator, the training loop.
TSAN_TARGETS=(fulcrum_ops_test fulcrum_ps_contract_test fulcrum_runtime_sharded_variables_test
              fulcrum_profiler_test fulcrum_chief_coordinator_test fulcrum_worker_train_loop_test)
TSAN_TESTS='ThreadPool|Concurrent|Retry|Fault|Profiler\.|Coordinator|TrainLoop'

configure() {  # preset, build dir
  mkdir -p "$2"
  if ! cmake --preset "$1" > "$2/configure.log" 2>&1; then
    cat "$2/configure.log" >&2
    echo "check_threads: cmake --preset $1 failed" >&2
    exit 1
  fi
}

echo "check_threads: clang -Wthread-safety build (preset thread-safety, build-tsa/)"
configure thread-safety build-tsa
if ! cmake --build build-tsa -j "$JOBS" > build-tsa/build.log 2>&1; then
  grep -E "error|warning" build-tsa/build.log | head -50 >&2
  echo "check_threads: the thread-safety build failed (full log: build-tsa/build.log)" >&2
  exit 1
fi
echo "check_threads: thread-safety build clean ($(grep -c "warning: .*thread-safety" build-tsa/build.log || true) findings)"

((tsan)) || exit 0
echo "check_threads: ThreadSanitizer build of the concurrency tests (preset tsan, build-tsan/)"
configure tsan build-tsan
existing=()
for t in "${TSAN_TARGETS[@]}"; do
  if cmake --build build-tsan --target help | grep -q "^\.\.\. $t\$"; then existing+=("$t"); fi
done
if ! cmake --build build-tsan -j "$JOBS" --target "${existing[@]}" > build-tsan/build.log 2>&1; then
  tail -50 build-tsan/build.log >&2
  echo "check_threads: the ThreadSanitizer build failed (full log: build-tsan/build.log)" >&2
  exit 1
fi
# halt_on_error: a race fails the test that found it.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build-tsan -R "$TSAN_TESTS" --output-on-failure --timeout 600 -j 2 \
  > build-tsan/ctest.log 2>&1 || {
  cat build-tsan/ctest.log >&2
  echo "check_threads: a ThreadSanitizer test failed" >&2
  exit 1
}
echo "check_threads: ThreadSanitizer: $(grep -E "tests passed" build-tsan/ctest.log)"
