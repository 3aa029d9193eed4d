#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/README.md) with clang in ./build-fuzz and
# runs each as a ctest test (label `fuzz`): its corpus, then mutations for
# PVC_FUZZ_SECONDS (default 20) with a fixed seed. Any crash, leak, timeout or
# sanitizer report fails the run. .ci/run calls this after the normal pass.
#   tools/fuzz.sh                          build and run every fuzzer
#   PVC_FUZZ_SECONDS=300 tools/fuzz.sh     longer runs
#   PVC_FUZZ_ONLY=domain_xml tools/fuzz.sh one fuzzer (a ctest regex on the name)
#   PVC_CMAKE_ARGS='-DCMAKE_CXX_COMPILER_LAUNCHER=ccache' tools/fuzz.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install-deps.sh"
build=${PVC_BUILD_DIR:-$root/build-fuzz}
seconds=${PVC_FUZZ_SECONDS:-20}
# Line tables (-g1) for the reports' file:line; -O1 compiles about as fast as
# -O0 and runs the fuzzers several times faster.
extra=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1 -O1" "-DCMAKE_C_FLAGS_DEBUG=-g1 -O1"
       -DPVC_BUILD_TESTS=OFF -DPVC_BUILD_BENCH=OFF -DPVC_BUILD_FUZZ=ON "-DPVC_FUZZ_SECONDS=$seconds")
# shellcheck disable=SC2206 # word splitting of the extra arguments is wanted
extra+=(${PVC_CMAKE_ARGS:-})
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${extra[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target pvc-fuzzers
cd "$build"
args=(--output-on-failure -L fuzz -j"$(nproc)")
[ -n "${PVC_FUZZ_ONLY:-}" ] && args+=(-R "${PVC_FUZZ_ONLY}")
ctest "${args[@]}"
