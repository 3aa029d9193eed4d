#!/usr/bin/env bash
# Builds pvc and runs every test (ctest: unit, integration, e2e).
# Installs what it needs from Debian first (tools/install-deps.sh).
#   tools/test.sh                  Release-with-debug-info build in ./build
#   PVC_SANITIZE=1 tools/test.sh   AddressSanitizer + UndefinedBehaviorSanitizer build in ./build-asan
#   PVC_TEST_LABELS=unit tools/test.sh   only tests with that ctest label
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install-deps.sh"
if [ "${PVC_SANITIZE:-0}" = 1 ]; then
    build=${PVC_BUILD_DIR:-$root/build-asan}
    extra=(-DPVC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
    # Python and the JVM are not instrumented; leaks inside them are not ours.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
    build=${PVC_BUILD_DIR:-$root/build}
    extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi
cmake -S "$root" -B "$build" "${extra[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
args=(--output-on-failure --timeout 900)
[ -n "${PVC_TEST_LABELS:-}" ] && args+=(-L "$PVC_TEST_LABELS")
exec ctest "${args[@]}"
