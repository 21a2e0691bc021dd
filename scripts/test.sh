#!/usr/bin/env bash
# The test suite, in two tiers (docs/TESTING.md):
#   scripts/test.sh          the CI tier (.ci/run; about 10 minutes on 2 cores):
#     - a normal build running every CTest test of every label (core, model,
#       sim, dev, cli; cuda skips without a GPU; consumer_install: install + an
#       out-of-tree consumer through CMake and pkg-config);
#     - the README's demo and embedding/pkg-config/Python commands as written;
#     - the Python bindings' pytest suite against the normal build's libdhs.so;
#     - the core alone built and installed without cJSON and consumed;
#     - an ASan+UBSan build running every `core` test (the fuzz regression
#       corpus included);
#     - 60 s of libFuzzer on the public API.
#   scripts/test.sh --full   the same, then what the CI tier leaves out: every
#     other label under ASan+UBSan (the model at real geometry, the simulators,
#     the CLI scripts, the dev experiments) and the CPU emulation of the overlap
#     kernels (tests/emu).
# Usage: scripts/test.sh [--full]   (env JOBS=N to set build parallelism,
# PYTHON=... to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
case "${1:-}" in
  "") ;;
  --full) full=1 ;;
  -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "scripts/test.sh: unknown argument '$1' (--full or nothing)" >&2; exit 2 ;;
esac
JOBS=${JOBS:-2}
t0=$(date +%s)
step() { echo "== test.sh: $* ($(( $(date +%s) - t0 )) s)"; }
scripts/deps.sh
step "normal build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDHS_WERROR=ON -DDHS_BUILD_TOOLS=ON -DDHS_BUILD_TESTS=ON >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"

step "README's main job with --json: stdout is the JSON result alone"
demo_out=$(mktemp)
scripts/demo.sh --sessions 2 --context 512 --tokens 4 --json -q >"$demo_out" 2>/dev/null
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["identical"] is True, d["identical"]' "$demo_out" ||
  { echo "test.sh: scripts/demo.sh --json did not write one JSON object with identical true on stdout:" >&2; head -c 400 "$demo_out" >&2; exit 1; }
rm -f "$demo_out"

step "README's embedding, pkg-config and Python commands, as written (scratch prefix)"
bash tests/readme_commands.sh

step "python bindings (pytest) against build/libdhs.so"
py=${PYTHON:-}
if [ -z "$py" ]; then
  for c in python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import numpy, pytest' 2>/dev/null; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "test.sh: no python3 with numpy and pytest (scripts/deps.sh installs them)" >&2; exit 1; }
log=$(mktemp)
set +e
DHS_LIBRARY="$PWD/build/libdhs.so" "$py" -m pytest python -q -rs -p no:cacheprovider 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
summary=$(tail -n 1 "$log"); rm -f "$log"
if [ "$rc" -eq 5 ]; then echo "test.sh: pytest collected no tests" >&2; exit 1; fi
[ "$rc" -eq 0 ] || { echo "test.sh: pytest failed (exit $rc)" >&2; exit "$rc"; }
passed=$(echo "$summary" | sed -n 's/.*[^0-9]\([0-9][0-9]*\) passed.*/\1/p; s/^\([0-9][0-9]*\) passed.*/\1/p' | head -n 1)
if [ -z "$passed" ] || [ "$passed" -eq 0 ]; then
  echo "test.sh: pytest passed no test ('$summary'): skips alone do not pass the suite" >&2; exit 1
fi

step "core alone: no cJSON, no CUDA; install and consume"
JOBS=$JOBS bash tests/consumer/run.sh

step "sanitizer build: the core tests under ASan+UBSan"
cmake -S . -B build-san -DDHS_SANITIZE=ON -DDHS_CUDA=OFF -DDHS_WERROR=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-san -j"$JOBS"
san() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    DHS_TEST_SCALE=${DHS_SAN_SCALE:-1} ctest --test-dir build-san --output-on-failure -j"$JOBS" "$@"
}
san -L core
step "API fuzzer, 60 s"
# libFuzzer (ASan+UBSan, fixed seed) on the committed corpus; a crash fails CI
# (docs/TESTING.md). The corpus and the crash regressions also replay in both
# builds above (test_fuzz_regress).
scripts/fuzz.sh --ci
if [ "$full" -eq 1 ]; then
  step "--full: every other label under ASan+UBSan"
  san -LE core
  step "--full: the overlap kernels emulated on the CPU (tests/emu)"
  EMU_BUILD=build-emu bash tests/emu/run_overlap_emu.sh
fi
step "all passed"
