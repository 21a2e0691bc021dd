#!/usr/bin/env bash
# gpu_volume.sh - issue 9's volume runs and the CUDA sanitizers, on a many-core GPU machine, in one go.
#   1. build (CMake, Release, -DDHS_CUDA=ON): test_residency and every CUDA test;
#   2. soak (background): DHS_SOAK_EVENTS=$SOAK_EVENTS build/test_residency with DHS_SOAK_JOBS=$SOAK_JOBS
#      worker processes (same phases, seeds and totals as the serial run; docs/TESTING.md section 5);
#   3. sanitizers (foreground, while the soak runs): compute-sanitizer memcheck, racecheck and synccheck
#      over every CUDA test at DHS_TEST_SCALE=$SAN_SCALE; the three tools run side by side, each over the
#      tests in turn, $SAN_TIMEOUT s per test;
#   4. fuzz: $FUZZ_BIN (a dhs_fuzz built by scripts/fuzz.sh; ASan and libFuzzer are linked in, so a binary
#      built on another Linux machine runs here) with $FUZZ_WORKERS workers (-jobs = -workers) for
#      $FUZZ_SECS s each on the corpus in $FUZZ_CORPUS; the executions of all workers are summed from
#      their final stats. Steps run in the order soak+san, then fuzz, or as VOL_STEPS says.
# Knobs: VOL_STEPS ("soak san fuzz"), SOAK_EVENTS (1e8), SOAK_JOBS (nproc - 3), SOAK_SEED (20261201),
#   SAN_SCALE (0.002), SAN_TIMEOUT (100), SAN_TESTS (every CUDA test), SAN_TOOLS (all three), SAN_PAR=1
#   (every (tool, test) pair in its own process at once), DHS_SOAK_PHASES (passed through), FUZZ_BIN, FUZZ_CORPUS,
#   FUZZ_WORKERS (nproc - 1), FUZZ_SECS (300), FUZZ_SEED (1), FUZZ_BG=1 (fuzz in the background from the
#   start instead of after the soak; VOL_WAIT=1 then waits for it at the end).
# Logs and a summary under $OUT (default build-vol/out). cJSON: a copy in third_party/cjson is used
# when the machine lacks libcjson-dev.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-vol/out}
bld=$root/build-vol/b
mkdir -p "$out" "$bld"
export PATH=$PATH:/usr/local/cuda/bin
steps=${VOL_STEPS:-soak san fuzz}
np=$(nproc)
t_start=$(date +%s)
ROW_W=30
. "$root/bench/gpu_lib.sh"
has() { [[ " $steps " == *" $1 "* ]]; }

cuda_tests=${SAN_TESTS:-test_cuda test_dres_cuda test_dres_graph test_topk_cuda test_gpu_model}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)'; } \
  > "$out/machine.txt" 2>&1
row machine "$(tr '\n' ';' < "$out/machine.txt" | tr -s ' ')"
if has soak || has san; then
  b=$bld
  (model_build "$out/build.log" test_residency $cuda_tests) > "$out/build_step.log" 2>&1
  brc=$?
  bld=${DHS_GPU_BUILD:-$bld}
  row build "rc=$brc ($(( $(date +%s) - t_start )) s)"
  if [ $brc != 0 ]; then tail -40 "$out/build.log"; printf '%s\n' "${summary[@]}"; exit 1; fi
fi
rc=0

fuzz_run() { # workers secs -> prints "execs crashes"
  local w=$1 secs=$2 fb=${FUZZ_BIN:-$root/build-fuzz/dhs_fuzz} dir=$out/fuzz
  mkdir -p "$dir/crashes" "$dir/logs"
  local corpus=${FUZZ_CORPUS:-$root/tests/fuzz/corpus}
  mkdir -p "$dir/corpus" && cp -n "$corpus"/* "$dir/corpus/" 2>/dev/null
  ( cd "$dir/logs" && ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "$fb" -seed="${FUZZ_SEED:-1}" -jobs="$w" -workers="$w" -max_total_time="$secs" -max_len=1024 -timeout=60 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/crashes/" "$dir/corpus" > "$dir/fuzz.log" 2>&1 )
  local execs crashes
  execs=$(cat "$dir"/logs/fuzz-*.log 2>/dev/null | awk '/stat::number_of_executed_units/ {s += $2} END {print s + 0}')
  crashes=$(ls "$dir/crashes" | wc -l)
  echo "$execs $crashes"
}

fuzz_pid=
if has fuzz && [ "${FUZZ_BG:-0}" = 1 ]; then
  t_fz=$(date +%s)
  fuzz_run "${FUZZ_WORKERS:-$((np - 1))}" "${FUZZ_SECS:-300}" > "$out/fuzz.result" &
  fuzz_pid=$!
fi

soak_pid=
if has soak; then
  t_soak=$(date +%s)
  DHS_TEST_SEED=${SOAK_SEED:-20261201} DHS_SOAK_EVENTS=${SOAK_EVENTS:-1e8} DHS_SOAK_JOBS=${SOAK_JOBS:-$((np - 3))} \
    "$bld/test_residency" > "$out/soak.log" 2>&1 &
  soak_pid=$!
fi

if has san; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  san_pids=()
  tools=${SAN_TOOLS:-memcheck racecheck synccheck}
  san_one() { # tool test -> one result line
    local t0 r
    t0=$(date +%s)
    DHS_TEST_SEED=20261201 DHS_TEST_SCALE=${SAN_SCALE:-0.002} timeout "${SAN_TIMEOUT:-100}" "$cs" --tool "$1" \
      --error-exitcode 3 --print-limit 20 "$bld/$2" > "$out/san_${1}_$2.log" 2>&1
    r=$?
    echo "$1 $2 rc=$r $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY\|passed,' "$out/san_${1}_$2.log" | tr '\n' ' ')($(( $(date +%s) - t0 )) s)"
  }
  for tool in $tools; do
    if [ "${SAN_PAR:-0}" = 1 ]; then # every (tool, test) its own process
      for t in $cuda_tests; do
        san_one $tool $t > "$out/san_${tool}_$t.result" &
        san_pids+=($!)
      done
    else
      ( for t in $cuda_tests; do san_one $tool $t; done > "$out/san_$tool.result" ) &
      san_pids+=($!)
    fi
  done
  wait "${san_pids[@]}"
  for tool in $tools; do
    while read -r line; do
      set -- $line
      row "$1 $2" "${*:3}"
      [ "$3" = rc=0 ] || rc=1
    done < <(cat "$out/san_$tool.result" "$out"/san_${tool}_*.result 2>/dev/null)
  done
fi

if [ -n "$soak_pid" ]; then
  wait "$soak_pid"
  r=$?
  [ $r = 0 ] || rc=1
  row "soak (${SOAK_JOBS:-$((np - 3))} jobs)" "rc=$r $(grep -h '^residency: [0-9]* events' "$out/soak.log" | grep -o '^residency: [0-9]* events\|[0-9.]* s, [0-9]* events/s' | tr '\n' ' ') $(grep -h 'failed phases$' "$out/soak.log" | tail -1) ($(( $(date +%s) - t_soak )) s)"
  grep -h '^residency:\|passed,' "$out/soak.log"
  [ $r = 0 ] || tail -30 "$out/soak.log"
fi

if has fuzz; then
  if [ -z "$fuzz_pid" ]; then
    t_fz=$(date +%s)
    fuzz_run "${FUZZ_WORKERS:-$((np - 1))}" "${FUZZ_SECS:-300}" > "$out/fuzz.result"
  elif [ "${VOL_WAIT:-1}" = 1 ]; then
    wait "$fuzz_pid"
  fi
  if [ -s "$out/fuzz.result" ]; then
    read -r execs crashes < "$out/fuzz.result"
    [ "$crashes" = 0 ] || rc=1
    row "fuzz (${FUZZ_WORKERS:-$((np - 1))} workers)" "executions $execs, crash/leak/timeout artifacts $crashes, corpus $(ls "$out/fuzz/corpus" | wc -l) ($(( $(date +%s) - t_fz )) s)"
    grep -h '^#[0-9]*.*DONE\|cov:' "$out"/fuzz/logs/fuzz-0.log 2>/dev/null | tail -1
  fi
fi
row total "$(( $(date +%s) - t_start )) s"
printf '\n== gpu_volume summary ==\n'
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $rc
