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

# Tests that exercise threads in this process: the pool, the PS shard under concurrent
# pushers through the in-process client, the ssp gate's waits, the sharded client's retries,
# the profiler under concurrent records, the coordinator's logic, the training loop and the
# heartbeat. Tests over real gRPC are left out: Debian's gRPC is not built with
# ThreadSanitizer, whose reports then name gRPC's own hand-offs between its threads (epoll,
# call objects) as races.
TSAN_TARGETS=(fulcrum_ops_test fulcrum_ps_contract_test fulcrum_ps_staleness_test
              fulcrum_runtime_fault_test fulcrum_profiler_test fulcrum_coordinator_test
              fulcrum_worker_train_loop_test fulcrum_worker_coordinator_client_test)
TSAN_TESTS='^ThreadPoolTest\.|^Transports/PsContractTest\..*/InProcess|ShardedVariables(Fault|Failure)Test\.'
TSAN_TESTS+='|^StalenessGateTest\.'
TSAN_TESTS+='|^ProfilerTest\.|^CoordinatorTest\.|^TrainLoopTest\.|^HeartbeatTest\.'

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
if ! cmake --build build-tsan -j "$JOBS" --target "${TSAN_TARGETS[@]}" > build-tsan/build.log 2>&1; then
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
