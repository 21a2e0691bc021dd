#!/usr/bin/env bash
# Full test suite: a normal build and an ASan+UBSan build, each running every
# CTest test. Usage: scripts/test.sh   (env JOBS=N to set build parallelism)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"
cmake -S . -B build-san -DDHS_SANITIZE=ON -DDHS_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-san -j"$JOBS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  DHS_TEST_SCALE=${DHS_SAN_SCALE:-1} ctest --test-dir build-san --output-on-failure -j"$JOBS"
# API fuzzer: 60 s of libFuzzer (ASan+UBSan, fixed seed) on the committed corpus; a crash fails CI
# (docs/TESTING.md). The corpus and the crash regressions also replay in both builds above
# (test_fuzz_regress).
scripts/fuzz.sh --ci
