#!/usr/bin/env bash
# gpu_mla.sh - the reference model's multi-head sparse MLA attention (model/mla_mh.h, docs/MODEL.md
# "Multi-head attention on tensor cores") on the GPU, in one call: builds test_mla_mh_cuda and mla_bench with
# CMake (cJSON as in gpu_model.sh), runs the kernel's test (every variant against the default launch bit for
# bit, the default against the CPU specification within 8e-3 x vmax), the test under compute-sanitizer's
# synccheck (and racecheck with RACECHECK=1: slow, minutes), then mla_bench (each kernel against its roofline,
# measured in the same process) and prints the plan's rows: C, heads, splits/cluster, graph us per layer and
# graph / floor for the one-role kernel (variant 0) and the overlapped default (variant 3), and the
# benchmark's summary lines. Fails when the test, synccheck or the benchmark's bit check fails.
# Usage: bench/gpu_mla.sh [--contexts N,N]   (default 100000,32768; logs to $OUT)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
contexts=100000,32768
[ "${1:-}" = --contexts ] && contexts=${2:?--contexts N,N}
. "$root/bench/gpu_lib.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
b="$root/build-gmodel"
model_build "$out/mla_build.log" test_mla_mh_cuda mla_bench
rc=0
seed=${DHS_TEST_SEED:-20261206}
DHS_TEST_SEED=$seed DHS_TEST_SCALE=${DHS_TEST_SCALE:-0.3} "$b/test_mla_mh_cuda" > "$out/test_mla_mh_cuda.log" 2>&1 || rc=1
echo "test_mla_mh_cuda (seed $seed): $(tail -1 "$out/test_mla_mh_cuda.log")"
DHS_TEST_SEED=$seed DHS_TEST_SCALE=0.02 compute-sanitizer --tool synccheck "$b/test_mla_mh_cuda" > "$out/synccheck.log" 2>&1 || rc=1
echo "synccheck: $(grep -E 'ERROR SUMMARY' "$out/synccheck.log" | tail -1)"
if [ "${RACECHECK:-0}" = 1 ]; then
  DHS_TEST_SEED=$seed DHS_TEST_SCALE=0.01 compute-sanitizer --tool racecheck --racecheck-report hazard "$b/test_mla_mh_cuda" \
    > "$out/racecheck.log" 2>&1 || rc=1
  echo "racecheck: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck.log" | tail -1)"
fi
"$b/mla_bench" --contexts "$contexts" --reps 20 > "$out/mla_bench.txt" 2>&1 || rc=1
grep -E '^device' "$out/mla_bench.txt"
printf '%-8s %3s %5s %-7s %-18s %s\n' context C heads spl/cl "variant 0 (x floor)" "variant 3, default (x floor)"
awk '$1 == "plan/0" { v0[$2" "$3" "$4] = sprintf("%6.1f (%5.2f)", $9, $14); s[$2" "$3" "$4] = $5 }
     $1 == "plan/3" { k = $2" "$3" "$4; split(k, f, " "); printf "%-8s %3s %5s %-7s %-18s %6.1f (%5.2f)\n", f[1], f[2], f[3], s[k], v0[k], $9, $14 }' \
  "$out/mla_bench.txt"
grep -E '^mla_bench' "$out/mla_bench.txt"
[ $rc = 0 ] && echo "gpu_mla: ok" || echo "gpu_mla: FAILED (logs in $out)"
exit $rc
