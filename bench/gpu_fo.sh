#!/usr/bin/env bash
# gpu_fo.sh - FlashOffloading pieces on the GPU: builds test_topk_cuda,
# topk_bench and lstream_bench, runs them (lstream_bench twice more in its
# --ttft mode, prompts of 64K and 128K rows), prints short tables (full logs and
# JSON under $OUT, default build-fo/out). Meant to run unattended on the H200
# in well under 4 minutes.
#
# Build: CMake with CUDA (targets test_topk_cuda topk_bench lstream_bench in
# build-fo/cmake, cJSON carried when the machine lacks it: bench/gpu_lib.sh
# model_build; bench/gpu.sh's build when DHS_GPU_BUILD names it).
# FO_TTFT_PROMPTS="ROWS ..." sets the TTFT prompts (--quick: 16384).
# Usage: bench/gpu_fo.sh [--quick]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=$root/build-fo
out=${OUT:-$bdir/out}
mkdir -p "$out"
quick=""
[ "${1:-}" = "--quick" ] && quick=--quick
export PATH=$PATH:/usr/local/cuda/bin
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
. "$root/bench/gpu_lib.sh" # model_build
t0=$(date +%s)
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  else
    echo "gpu: nvidia-smi not found"
  fi
  "$nvcc" --version | tail -1
} | tee "$out/env.txt"

# the CMake build (bench/gpu.sh's when DHS_GPU_BUILD names it)
b=$bdir/cmake
model_build "$out/build.log" test_topk_cuda topk_bench lstream_bench
cp "$b/test_topk_cuda" "$b/topk_bench" "$b/lstream_bench" "$bdir/"

verdict() { case $1 in 0) echo ok ;; 77) echo "SKIPPED (no GPU)" ;; 124) echo "TIMED OUT" ;; *) echo "FAILED (exit $1)" ;; esac; }
rc_t=0 rc_k=0 rc_l=0
timeout 90 "$bdir/test_topk_cuda" > "$out/test_topk_cuda.log" 2>&1 || rc_t=$?
echo "test_topk_cuda: $(verdict $rc_t) $(grep -E 'seed|cases|passed' "$out/test_topk_cuda.log" | tr '\n' ' ')"
[ $rc_t = 0 ] || grep -m 20 "CHECK failed\|error" "$out/test_topk_cuda.log"
timeout 60 "$bdir/topk_bench" $quick --json "$out/topk.json" > "$out/topk_bench.log" 2>&1 || rc_k=$?
echo "topk_bench: $(verdict $rc_k)"
timeout 60 "$bdir/lstream_bench" $quick --json "$out/lstream.json" > "$out/lstream_bench.log" 2>&1 || rc_l=$?
echo "lstream_bench: $(verdict $rc_l)"
# time to first token: full residency vs R = 4 at the same chunk vs R = 4 at the
# larger chunk the freed memory allows (FO_TTFT_PROMPTS: prompt rows, one run each)
prompts=${FO_TTFT_PROMPTS:-$([ -n "$quick" ] && echo 16384 || echo "65536 131072")}
rc_tt=0
for p in $prompts; do
  r=0
  timeout 240 "$bdir/lstream_bench" --ttft $quick --prompt "$p" --json "$out/lstream_ttft_$p.json" > "$out/lstream_ttft_$p.log" 2>&1 || r=$?
  echo "lstream_bench --ttft --prompt $p: $(verdict $r)"
  [ $r = 0 ] || rc_tt=$r
done
echo
echo "== fused top-k + lookup (k = 2048) =="
sed -n '/^device/p;/^ *n /,/^$/p' "$out/topk_bench.log" | sed '/^$/d'
grep -m 3 "MISMATCH\|error\|failed" "$out/topk_bench.log"
echo
echo "== layer-streamed prefill =="
grep -E "^(exactness|model|peak)" "$out/lstream_bench.log"
sed -n '/^ *work /,/^$/p' "$out/lstream_bench.log" | sed '/^$/d'
grep -m 3 "MISMATCH\|error\|failed" "$out/lstream_bench.log"
for p in $prompts; do
  echo
  echo "== time to first token, prompt $p rows (layer-streamed prefill) =="
  grep -m 1 "^exactness" "$out/lstream_ttft_$p.log"
  sed -n '/^TTFT/,/^case:/p' "$out/lstream_ttft_$p.log" | grep -v '^JSON\|^case:\|^$'
  grep -m 3 "MISMATCH\|error\|failed\|ttft:" "$out/lstream_ttft_$p.log"
done
echo "total: $(( $(date +%s) - t0 )) s"
[ $rc_t = 0 ] && [ $rc_k = 0 ] && [ $rc_l = 0 ] && [ $rc_tt = 0 ]
