#!/usr/bin/env bash
# API fuzzer (libFuzzer + ASan + UBSan, clang). See docs/TESTING.md.
#   scripts/fuzz.sh [--ci]            build, then 60 s on a copy of tests/fuzz/corpus with a fixed
#                                     seed; exits non-zero on a crash (scripts/test.sh runs this)
#   scripts/fuzz.sh --long [HOURS]    HOURS (default 8, fractions allowed) with WORKERS forked workers
#                                     (default 1), going on after crashes; new corpus, crashes and
#                                     fuzz.log go to $DHS_FUZZ_DIR (default build-fuzz/long), never
#                                     into the committed corpus. RUNS=N instead stops after N executions
#                                     (one process, stops at the first crash); ASAN=0 builds without
#                                     AddressSanitizer (UBSan and the harness's oracles stay; ~1.8x faster)
#   scripts/fuzz.sh --coverage        line coverage of src/core over the committed corpus (llvm-cov)
#   scripts/fuzz.sh --repro FILE      rerun one input with the call trace (DHS_FUZZ_TRACE=1)
# Env: WORKERS, RUNS, ASAN (long mode), SEED (default 1), SECS (CI run length, default 60), JOBS (build, default 2),
#      FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:---ci}
JOBS=${JOBS:-2}
SEED=${SEED:-1}
scripts/deps.sh --fuzz
CC_FUZZ=$(command -v clang || command -v clang-14)
build() { # dir, extra cmake flags
  cmake -S . -B "$1" -DDHS_FUZZ=ON -DDHS_CUDA=OFF -DDHS_BUILD_TESTS=OFF -DCMAKE_C_COMPILER="$CC_FUZZ" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDHS_FUZZ_ASAN=ON "${@:2}" >/dev/null
  cmake --build "$1" -j"$JOBS" --target dhs_fuzz
}
llvm_tool() { command -v "$1" || command -v "$1-14" || ls /usr/lib/llvm-*/bin/"$1" 2>/dev/null | tail -1; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
case "$mode" in
--ci)
  build build-fuzz
  work=$(mktemp -d "${TMPDIR:-/tmp}/dhs-fuzz.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  cp tests/fuzz/corpus/* "$work/"
  mkdir -p build-fuzz/crashes
  echo "fuzz: ${SECS:-60} s, seed $SEED, corpus tests/fuzz/corpus ($(ls "$work" | wc -l) inputs)"
  # a crash leaves build-fuzz/crashes/crash-* and fails this script (full log: build-fuzz/ci-fuzz.log)
  set +e
  build-fuzz/dhs_fuzz -seed="$SEED" -max_total_time="${SECS:-60}" -max_len=1024 -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/ ${FUZZ_ARGS:-} "$work" >build-fuzz/ci-fuzz.log 2>&1
  rc=$?
  set -e
  grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)|^"|Recommended dictionary|End of recommended' build-fuzz/ci-fuzz.log || true
  [ "$rc" -eq 0 ] || echo "fuzz: FAILED (exit $rc); reproduce with scripts/fuzz.sh --repro build-fuzz/crashes/crash-*" >&2
  exit "$rc"
  ;;
--long)
  hours=${2:-8}
  dir=${DHS_FUZZ_DIR:-build-fuzz/long}
  bdir=build-fuzz
  if [ "${ASAN:-1}" = 0 ]; then bdir=build-fuzz-fast; build "$bdir" -DDHS_FUZZ_ASAN=OFF; else build "$bdir"; fi
  mkdir -p "$dir/corpus" "$dir/crashes"
  cp -n tests/fuzz/corpus/* "$dir/corpus/"
  w=${WORKERS:-1}
  cp "$bdir/dhs_fuzz" "$dir/dhs_fuzz" # a rebuild does not change the binary under a running campaign
  cd "$dir"
  if [ -n "${RUNS:-}" ]; then
    echo "fuzz: $RUNS executions (ASAN=${ASAN:-1}), corpus $dir/corpus, crashes $dir/crashes, log $dir/fuzz.log"
    nice ./dhs_fuzz -seed="$SEED" -runs="$RUNS" -max_len=1024 -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix=crashes/ ${FUZZ_ARGS:-} corpus 2>&1 | tee -a fuzz.log
    exit "${PIPESTATUS[0]}"
  fi
  echo "fuzz: $hours h, $w worker(s), corpus $dir/corpus, crashes $dir/crashes, logs $dir/fuzz-*.log"
  # fork mode: a crash is saved under crashes/ and fuzzing goes on with the next child
  nice ./dhs_fuzz -seed="$SEED" -max_total_time="$(awk "BEGIN{print int($hours * 3600)}")" -max_len=1024 -timeout=60 \
    -rss_limit_mb=2048 -print_final_stats=1 -fork="$w" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -artifact_prefix=crashes/ ${FUZZ_ARGS:-} corpus 2>&1 | tee -a fuzz.log
  ;;
--coverage)
  build build-fuzz-cov -DDHS_FUZZ_COVERAGE=ON
  prof=build-fuzz-cov/prof
  rm -rf "$prof" && mkdir -p "$prof"
  LLVM_PROFILE_FILE="$prof/%p.profraw" build-fuzz-cov/dhs_fuzz -runs=0 tests/fuzz/corpus ${DHS_FUZZ_DIR:+$DHS_FUZZ_DIR/corpus} >/dev/null 2>&1
  "$(llvm_tool llvm-profdata)" merge -sparse "$prof"/*.profraw -o "$prof/all.profdata"
  "$(llvm_tool llvm-cov)" report build-fuzz-cov/dhs_fuzz -instr-profile="$prof/all.profdata" src/core src/cpu
  "$(llvm_tool llvm-cov)" show build-fuzz-cov/dhs_fuzz -instr-profile="$prof/all.profdata" -format=html \
    -output-dir=build-fuzz-cov/html src/core src/cpu >/dev/null
  echo "per-line report: build-fuzz-cov/html/index.html"
  ;;
--repro)
  build build-fuzz
  DHS_FUZZ_TRACE=1 build-fuzz/dhs_fuzz "$2"
  ;;
*)
  sed -n '2,/^set -euo/p' "$0" | grep '^#'

  exit 2
  ;;
esac
