#!/usr/bin/env bash
# gpu_overlap.sh - hit attention overlapped with the miss copy (issue 14,
# docs/FLASHOFFLOAD.md §3) on a GPU machine, in one go:
#   1. build test_overlap_cuda and overlap_bench with CMake (bench/gpu_lib.sh
#      model_build: cJSON from the system or carried in third_party/cjson /
#      build-cjson; bench/gpu.sh's build when DHS_GPU_BUILD names it);
#   2. test_overlap_cuda (GPU exact == CPU whole bitwise, fast within the
#      bound, graph capture) and the CPU test_overlap when CMake built it;
#   3. overlap_bench (batch 1, 8, 64 x misses 32, 300, 2048; k 2048, 16 heads);
#   4. test_gpu_model when CMake built it (refmodel.cu's k_attend now uses
#      the shared attn_row.cuh: GPU model == CPU model; OV_MODEL=0 skips);
#   5. compute-sanitizer memcheck and racecheck on a reduced test run (when
#      compute-sanitizer exists; OV_SAN=0 skips), last: the figures are in
#      by then. Expected well under 10 minutes (timeouts: test 180 s, bench
#      240 s, test_gpu_model 200 s, each sanitizer 120 s); OV_SAN=0
#      OV_MODEL=0 for the shortest run.
# A short table at the end. Logs and overlap.json under $OUT (default
# build-ov/out). Usage: bench/gpu_overlap.sh [--quick]   (OV_SEED, OV_BENCH_ARGS)
set -uo pipefail
ROW_W=${ROW_W:-44}
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=$root/build-ov
out=${OUT:-$bdir/out}
mkdir -p "$out" "$bdir"
quick=""
[ "${1:-}" = "--quick" ] && quick=--quick
export PATH=$PATH:/usr/local/cuda/bin
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
seed=${OV_SEED:-20261201}
t0=$(date +%s)
. "$root/bench/gpu_lib.sh"
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  else
    echo "gpu: nvidia-smi not found"
  fi
  "$nvcc" --version | tail -1
  git -C "$root" describe --always --dirty 2>/dev/null | sed 's/^/commit: /'
} | tee "$out/env.txt"

# the CMake build (bench/gpu.sh's when DHS_GPU_BUILD names it)
rm -f "$bdir/test_overlap" "$bdir/test_overlap_cuda" "$bdir/overlap_bench" "$bdir/test_gpu_model"
b=$bdir/cmake
model_build "$out/build.log" test_overlap_cuda test_overlap overlap_bench test_gpu_model
cp "$b/test_overlap_cuda" "$b/test_overlap" "$b/overlap_bench" "$b/test_gpu_model" "$bdir/"
row build "ok ($(( $(date +%s) - t0 )) s)"

verdict() { case $1 in 0) echo ok ;; 77) echo "SKIPPED (no GPU)" ;; 124) echo "TIMED OUT" ;; *) echo "FAILED (exit $1)" ;; esac; }
rc=0
t=$(date +%s)
DHS_TEST_SEED=$seed timeout ${OV_TEST_TIMEOUT:-180} "$bdir/test_overlap_cuda" > "$out/test_overlap_cuda.log" 2>&1
r=$?; [ $r = 0 ] || rc=1
row "test_overlap_cuda (seed $seed)" "$(verdict $r): $(grep -h 'cases:\|passed,' "$out/test_overlap_cuda.log" | tr '\n' ' ')($(( $(date +%s) - t )) s)"
grep -h "GPU fast vs whole" "$out/test_overlap_cuda.log"
[ $r = 0 ] || grep -m 20 "CHECK failed\|error" "$out/test_overlap_cuda.log"
if [ -x "$bdir/test_overlap" ]; then
  DHS_TEST_SEED=$seed timeout 300 "$bdir/test_overlap" > "$out/test_overlap.log" 2>&1
  r=$?; [ $r = 0 ] || rc=1
  row "test_overlap (CPU, seed $seed)" "$(verdict $r): $(grep -h 'passed,' "$out/test_overlap.log")"
fi

t=$(date +%s)
timeout ${OV_BENCH_TIMEOUT:-240} "$bdir/overlap_bench" $quick --json "$out/overlap.json" ${OV_BENCH_ARGS:-} > "$out/overlap_bench.log" 2>&1
r=$?; [ $r = 0 ] || rc=1
row "overlap_bench" "$(verdict $r) ($(( $(date +%s) - t )) s)"
echo
echo "== hit attention overlapped with the miss copy (p50 us) =="
sed -n '/^device/,$p' "$out/overlap_bench.log"
[ $r = 0 ] || tail -5 "$out/overlap_bench.log"
echo
# refmodel.cu's k_attend now computes through attn_row.cuh: the GPU model must still equal the CPU model
if [ "${OV_MODEL:-1}" = 1 ] && [ -x "$bdir/test_gpu_model" ]; then
  t=$(date +%s)
  DHS_TEST_SEED=$seed timeout ${OV_MODEL_TIMEOUT:-200} "$bdir/test_gpu_model" > "$out/test_gpu_model.log" 2>&1
  r=$?; [ $r = 0 ] || rc=1
  row "test_gpu_model (k_attend via attn_row.cuh)" "$(verdict $r): $(grep -h 'passed,' "$out/test_gpu_model.log") ($(( $(date +%s) - t )) s)"
  [ $r = 0 ] || tail -12 "$out/test_gpu_model.log"
elif [ "${OV_MODEL:-1}" = 1 ]; then
  row "test_gpu_model" "not built"
fi

if [ "${OV_SAN:-1}" = 1 ]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ -x "$cs" ]; then
    for tool in memcheck racecheck; do
      t=$(date +%s)
      DHS_TEST_SEED=$seed DHS_TEST_SCALE=0.01 timeout ${OV_SAN_TIMEOUT:-120} "$cs" --tool $tool --error-exitcode 3 \
        --print-limit 20 "$bdir/test_overlap_cuda" > "$out/san_$tool.log" 2>&1
      r=$?; [ $r = 0 ] || rc=1
      row "compute-sanitizer $tool" "$(verdict $r): $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY\|passed,' "$out/san_$tool.log" | tr '\n' ' ')($(( $(date +%s) - t )) s)"
    done
  else
    row "compute-sanitizer" "not found, skipped"
  fi
fi

echo
printf '%s\n' "${summary[@]}"
echo "total: $(( $(date +%s) - t0 )) s; logs in $out"
exit $rc
