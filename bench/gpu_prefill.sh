#!/usr/bin/env bash
# gpu_prefill.sh - the GPU model's prefill through R streamed layer buffers (issue 14, docs/FLASHOFFLOAD.md §2
# "The GPU model's prefill"). Builds test_lsprefill_cuda with CMake (cJSON as bench/gpu_lib.sh finds it), runs it
# (history, keys and logits against the CPU model's full-residency prefill, byte for byte), then its bench mode:
# full residency (R = L + 1) against R = 4 at the same chunk and at 2x and 4x the chunk, time to the logits and
# device bytes, the streamed histories compared with full residency's.
# Env: PREFILL_BENCH (space-separated geometry,positions,chunk; default "glm-5.3,32768,2048 glm-5.3,100000,4096"),
# PREFILL_LIMIT_S (the whole script, default 540). Logs to $OUT.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s) limit=${PREFILL_LIMIT_S:-540}
. "$root/bench/gpu_lib.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
b="$root/build-gmodel"
model_build "$out/gprefill_build.log" test_lsprefill_cuda
rc=0
timeout $(( limit - ($(date +%s) - T0) )) "$b/test_lsprefill_cuda" > "$out/test_lsprefill_cuda.log" 2>&1
r=$?
grep -E "identical|passed|FAIL" "$out/test_lsprefill_cuda.log" | tail -14
echo "test_lsprefill_cuda: rc=$r ($(( $(date +%s) - T0 )) s so far; 77 = skipped)"
[ $r = 0 ] || rc=1
for spec in ${PREFILL_BENCH:-glm-5.3,32768,2048 glm-5.3,100000,4096}; do
  left=$(( limit - ($(date +%s) - T0) ))
  [ $left -gt 30 ] || { echo "bench $spec: skipped (time)"; continue; }
  DHS_LSP_BENCH=$spec timeout $left "$b/test_lsprefill_cuda" > "$out/gprefill_$spec.log" 2>&1
  r=$?
  grep -E "^bench|FAIL" "$out/gprefill_$spec.log"
  echo "bench $spec: rc=$r ($(( $(date +%s) - T0 )) s so far)"
  [ $r = 0 ] || rc=1
done
exit $rc
