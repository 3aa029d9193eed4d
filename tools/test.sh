#!/usr/bin/env bash
# Builds pvc and runs every test (ctest: unit, integration, e2e).
# Installs what it needs from Debian first (tools/install-deps.sh).
#   tools/test.sh                  Release-with-debug-info build in ./build
#   PVC_SANITIZE=1 tools/test.sh   AddressSanitizer + UndefinedBehaviorSanitizer build in ./build-asan
#                                  (PVC_SANITIZE=address is the same)
#   PVC_SANITIZE=thread tools/test.sh   ThreadSanitizer build in ./build-tsan
#   PVC_TEST_LABELS=unit tools/test.sh   only tests with that ctest label (a regex:
#                                  'unit|integration'); only their targets are built
#   PVC_TEST_JOBS=1 tools/test.sh  unit and integration tests one at a time (default
#                                  4, under ThreadSanitizer 2; a test that computes
#                                  counts twice; e2e tests always run alone, last)
#   PVC_CMAKE_ARGS='-DCMAKE_CXX_COMPILER_LAUNCHER=ccache' tools/test.sh
#                                  extra cmake configure arguments (split on spaces;
#                                  a developer's compiler cache, CI needs none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install-deps.sh"
# Debug information: line tables only (-g1), enough for every backtrace and
# sanitizer report with file:line; full -g costs a third of the build's time
# (PVC_DEBUG_FLAGS=-g for a build to debug in).
flags=${PVC_DEBUG_FLAGS:--g1}
case "$(echo "${PVC_SANITIZE:-0}" | tr A-Z a-z)" in
0|off|"")
    build=${PVC_BUILD_DIR:-$root/build}
    extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags -O2 -DNDEBUG"
           "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$flags -O2 -DNDEBUG")
    ;;
1|on|address)
    build=${PVC_BUILD_DIR:-$root/build-asan}
    # -O1: the tests run faster than at -O0 and it compiles as fast.
    extra=(-DPVC_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=$flags -O1"
           "-DCMAKE_C_FLAGS_DEBUG=$flags -O1")
    # Python and the JVM are not instrumented; leaks inside them are not ours.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    ;;
thread)
    build=${PVC_BUILD_DIR:-$root/build-tsan}
    # Optimised: ThreadSanitizer already slows every memory access 5-15 times.
    # -O1 compiles about twice as fast as -O2 and runs about as fast under TSan.
    extra=(-DPVC_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags -O1"
           "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$flags -O1")
    # A report fails the test (exit code 66); tools/tsan.supp names only
    # third-party code, each entry with its reason.
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0:exitcode=66:second_deadlock_stack=1:suppressions=$root/tools/tsan.supp}
    # GLib's slice allocator (used by libvirt) hands memory between threads
    # through its own futex locks, invisible to TSan; plain malloc is not.
    export G_SLICE=always-malloc
    ;;
*)
    echo "PVC_SANITIZE=$PVC_SANITIZE: expected 1, address or thread" >&2
    exit 2
    ;;
esac
labels=${PVC_TEST_LABELS:-}
# Build only what the selected labels run: the e2e tests only when e2e is
# selected, the benchmarks (not tests) only in the full run.
if [ -z "$labels" ] || echo e2e | grep -Eq "$labels"; then
    extra+=(-DPVC_BUILD_E2E=ON)
else
    extra+=(-DPVC_BUILD_E2E=OFF)
fi
if [ -z "$labels" ]; then
    extra+=(-DPVC_BUILD_BENCH=ON)
else
    extra+=(-DPVC_BUILD_BENCH=OFF)
fi
# shellcheck disable=SC2206 # word splitting of the extra arguments is wanted
extra+=(${PVC_CMAKE_ARGS:-})
cmake -S "$root" -B "$build" "${extra[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
args=(--output-on-failure --timeout 900)
[ -n "$labels" ] && args+=(-L "$labels")
# Unit and integration tests run PVC_TEST_JOBS at a time: each starts its own
# ZooKeeper on free loopback ports and its own BMCs, so they are independent.
# Most of them wait on real time (keepalive deadlines, sessions, daemons
# starting and stopping): measured on 2 cores, each used a fifth of a core or
# less over its run (the Ceph and compiler runs included), so 4 run at once
# by default; 2 kept the cores mostly idle. A test that computes is
# registered with COMPUTES (PROCESSORS 2, cmake/PvcHelpers.cmake): it counts
# as two of the 4 (health_memory_test: a third of a core here, more under
# ASan). Under ThreadSanitizer every test computes 5-15 times more: 2 at once.
# The e2e tests share one namespace lab and assert tight timing on real
# guests: they run afterwards, alone.
jobs=${PVC_TEST_JOBS:-4}
if [ -z "${PVC_TEST_JOBS:-}" ] && [ "$(echo "${PVC_SANITIZE:-0}" | tr A-Z a-z)" = thread ]; then
    jobs=2
fi
status=0
ctest "${args[@]}" -j"$jobs" -LE e2e || status=$?
if [ -z "$labels" ] || echo e2e | grep -Eq "$labels"; then
    ctest "${args[@]}" -L e2e || status=$?
fi
exit $status
