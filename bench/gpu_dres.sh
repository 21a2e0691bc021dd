#!/usr/bin/env bash
# gpu_dres.sh - the device resolver on a GPU machine, in one go:
#   1. build (CMake, -DDHS_CUDA=ON, Release): test_dres_cuda, dres_bench (+ the
#      dhs tool when `dhs verify --resolver device` exists);
#   2. test_dres_cuda (CUDA kernels vs the C specification after every call);
#   3. compute-sanitizer memcheck / racecheck / synccheck on a reduced run;
#   4. dres_bench (ours vs the O(B) scan baseline vs the gather ceiling);
#   5. `dhs verify --backend cuda --resolver device` with the issue's flag sets,
#      if the tool has --resolver;
#   6. test_dres_graph: a GLM-like decode step (21 groups, 78 sources)
#      captured as a CUDA graph and replayed against eager calls;
#   7. (opt-in, DRES_STEPS="... pages") `dhs bench resolve --backend cuda
#      --host-pages all`: the scattered span on every host page kind the
#      machine allows (default, thp, 2m, 1g) side by side (docs/CUDA.md).
# A short table at the end. Logs under $OUT (default build-gdres/out).
# Knobs: DRES_TEST_SCALE (1), DRES_SAN_SCALE (0.005), DRES_RACE_SCALE (= SAN),
# DRES_BENCH_ARGS (""), DRES_STEPS ("test bench san verify graph"; run in the
# order test, san, bench, verify, graph), DRES_SEED (fixed 20261201), DRES_*_TIMEOUT.
# cJSON: when the machine lacks libcjson-dev, a copy in third_party/cjson
# ({include/cjson/cJSON.h, lib/libcjson.so*}) is used.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gdres/out}
bld=$root/build-gdres/b
mkdir -p "$out" "$bld"
export PATH=$PATH:/usr/local/cuda/bin
steps=${DRES_STEPS:-test bench san verify graph}
seed=${DRES_SEED:-20261201}
t_start=$(date +%s)
. "$root/bench/gpu_lib.sh"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/build.log" 2>&1
b=$bld
(model_build "$out/build.log" test_dres_cuda test_dres_graph dres_bench dhs_tool) >> "$out/build_step.log" 2>&1
brc=$?
bld=${DHS_GPU_BUILD:-$bld}
row build "rc=$brc ($(( $(date +%s) - t_start )) s)"
if [ $brc != 0 ]; then tail -40 "$out/build.log"; printf '%s\n' "${summary[@]}"; exit 1; fi
rc=0

if [[ " $steps " == *" test "* ]]; then
  t=$(date +%s)
  DHS_TEST_SEED=$seed DHS_TEST_SCALE=${DRES_TEST_SCALE:-1} timeout ${DRES_TEST_TIMEOUT:-200} "$bld/test_dres_cuda" > "$out/test_dres_cuda.log" 2>&1
  r=$?
  [ $r = 0 ] || rc=1
  row "test_dres_cuda (seed $seed)" "rc=$r $(grep -h 'configurations\|passed,' "$out/test_dres_cuda.log" | tr '\n' ' ') ($(( $(date +%s) - t )) s)"
  [ $r = 0 ] || tail -30 "$out/test_dres_cuda.log"
fi

if [[ " $steps " == *" san "* ]]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck synccheck; do
    t=$(date +%s)
    sc=${DRES_SAN_SCALE:-0.005}
    [ $tool = racecheck ] && sc=${DRES_RACE_SCALE:-$sc}
    DHS_TEST_SEED=$seed DHS_TEST_SCALE=$sc timeout ${DRES_SAN_TIMEOUT:-120} "$cs" --tool $tool --error-exitcode 3 --print-limit 20 \
      "$bld/test_dres_cuda" > "$out/san_one.log" 2>&1
    r=$?
    [ $r = 0 ] || rc=1
    row "compute-sanitizer $tool" "rc=$r $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY\|passed,' "$out/san_one.log" | tr '\n' ' ') ($(( $(date +%s) - t )) s)"
    { echo "=== $tool"; cat "$out/san_one.log"; } >> "$out/san.log"
    rm -f "$out/san_one.log"
  done
fi

if [[ " $steps " == *" bench "* ]]; then
  t=$(date +%s)
  timeout ${DRES_BENCH_TIMEOUT:-200} "$bld/dres_bench" --json-file "$out/dres_bench.json" ${DRES_BENCH_ARGS:-} > "$out/dres_bench.txt" 2>&1
  r=$?
  row "dres_bench" "rc=$r ($(( $(date +%s) - t )) s)"
  cat "$out/dres_bench.txt"
fi

if [[ " $steps " == *" verify "* ]]; then
  if cmake --build "$bld" -j"$(nproc)" --target dhs_tool >> "$out/build.log" 2>&1 &&
     "$bld/dhs" verify --help 2>&1 | grep -q -- '--resolver'; then
    for args in "--requests 16 --steps 120" "--requests 16 --steps 120 --pressure high --faults 0.01" \
                "--requests 16 --steps 40 --spec 8 --compress 4 --consumers glm" \
                "--requests 16 --steps 40 --spec 8 --compress 4 --consumers v41 --pressure high"; do
      j=$(timeout ${DRES_VERIFY_TIMEOUT:-120} "$bld/dhs" verify --backend cuda --resolver device --seed 11 $args --json 2>"$out/verify.err")
      r=$?
      [ $r = 0 ] || rc=1
      s=$(echo "$j" | grep -o '"entries": *[0-9]*\|"violations": *[0-9]*' | tr '\n' ' ')
      row "verify $args" "rc=$r $s"
    done
  else
    row "dhs verify --resolver device" "not available in this tree (skipped)"
  fi
fi
if [[ " $steps " == *" graph "* ]]; then
  t=$(date +%s)
  DHS_TEST_SEED=$seed timeout ${DRES_GRAPH_TIMEOUT:-200} "$bld/test_dres_graph" > "$out/test_dres_graph.log" 2>&1
  r=$?
  [ $r = 0 ] || rc=1
  row "test_dres_graph" "rc=$r $(grep -h 'rounds x\|host us\|captured round\|passed,' "$out/test_dres_graph.log" | tr '\n' ' ') ($(( $(date +%s) - t )) s)"
  [ $r = 0 ] || tail -20 "$out/test_dres_graph.log"
fi
if [[ " $steps " == *" pages "* ]]; then
  t=$(date +%s)
  if cmake --build "$bld" -j"$(nproc)" --target dhs_tool >> "$out/build.log" 2>&1; then
    timeout ${DRES_PAGES_TIMEOUT:-300} "$bld/dhs" bench resolve --backend cuda --host-pages all --batch 1,64,256 \
      --hot-rows 4096 --misses 300,2048 --queries 1 --json --output "$out/host_pages.json" 2> "$out/host_pages.txt"
    r=$?
  else
    r=build
  fi
  [ "$r" = 0 ] || rc=1
  row "bench resolve --host-pages all" "rc=$r ($(( $(date +%s) - t )) s)"
  grep -h '^#' "$out/host_pages.txt"
fi
row total "$(( $(date +%s) - t_start )) s"
printf '\n== gpu_dres summary ==\n'
printf '%s\n' "${summary[@]}"
exit $rc
