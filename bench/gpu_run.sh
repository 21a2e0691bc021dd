#!/usr/bin/env bash
# gpu_run.sh - one GPU session: build (no CMake), test_cuda, gpu_bench, and
# optionally test_cuda under compute-sanitizer. Logs go to $OUT (or build-gpu/out).
# Usage: bench/gpu_run.sh [--quick] [--thp] [--sanitize] [--no-bench]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
quick="" thp="" sanitize=0 bench=1
for a in "$@"; do
  case $a in
    --quick) quick=--quick ;;
    --thp) thp=--thp ;;
    --sanitize) sanitize=1 ;;
    --no-bench) bench=0 ;;
    *) echo "usage: $0 [--quick] [--thp] [--sanitize] [--no-bench]" >&2; exit 2 ;;
  esac
done
export PATH=$PATH:/usr/local/cuda/bin
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  nvcc --version | tail -1
  gcc --version | head -1
} | tee "$out/env.txt"

t0=$(date +%s)
if ! "$root/bench/gpu_build.sh" "$root/build-gpu" > "$out/build.log" 2>&1; then
  cat "$out/build.log"; echo "BUILD FAILED"; exit 1
fi
echo "build: ok ($(( $(date +%s) - t0 )) s)"

rc_test=0
"$root/build-gpu/test_cuda" 2>&1 | tee "$out/test_cuda.log" || rc_test=$?
if [ "$rc_test" = 77 ]; then echo "test_cuda: SKIPPED (exit 77: no CUDA device or no CUDA build)"; else echo "test_cuda: exit ${rc_test}"; fi

rc_bench=0
if [ $bench = 1 ]; then
  "$root/build-gpu/gpu_bench" $quick $thp > "$out/gpu_bench.log" 2> "$out/gpu_bench.err"
  rc_bench=$?
  echo "gpu_bench: exit $rc_bench"
fi

rc_san=0
if [ $sanitize = 1 ] && command -v compute-sanitizer >/dev/null; then
  timeout 240 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
    "$root/build-gpu/test_cuda" > "$out/sanitizer.log" 2>&1
  rc_san=$?
  echo "compute-sanitizer memcheck test_cuda: exit $rc_san (124 = timed out)"
  tail -3 "$out/sanitizer.log"
fi

# the tables last: the caller sees the end of the output
if [ $bench = 1 ]; then
  cat "$out/gpu_bench.err" >&2
  cat "$out/gpu_bench.log"
fi
[ "$rc_test" = 0 ] && [ "$rc_bench" = 0 ] && [ "$rc_san" = 0 ]
