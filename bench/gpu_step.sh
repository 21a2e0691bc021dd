#!/usr/bin/env bash
# gpu_step.sh - the GPU model's decode step three ways (docs/MODEL.md "Device
# step"): --step host (per-layer host round trips), --step device (no host
# round trip inside the step: dhs_tail_locations + dhs_resolve_device) and
# --step graph (the device step captured as one CUDA graph, replayed per
# round). Builds the dhs tool and test_gpu_model with CMake (cJSON as in
# gpu_model.sh), runs test_gpu_model (which checks all three steps at small
# size), then for G = glm-5.3 and deepseek-v3.2 and each step
#   dhs run --backend cuda --geometry G --sessions S --context C --tokens T
#           --spec 4 --compare resident --step STEP --json
# and prints identical / logit_mismatches / reclaims / tokens_digest, the
# decode times of both storages and the device step's host us per round
# (control plane, launch, wait). The three steps must give the same
# tokens_digest (same kernels, same inputs); the script fails otherwise.
# Usage: bench/gpu_step.sh [--full]   (default 8 sessions x 8192, 16 tokens;
#        --full: 32 sessions x 32768, 64 tokens; logs to $OUT)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
sessions=8 context=8192 tokens=16
[ "${1:-}" = --full ] && { sessions=32; context=32768; tokens=64; }
. "$root/bench/gpu_lib.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
b="$root/build-gmodel"
t0=$(date +%s)
cmake -S "$root" -B "$b" -DDHS_CUDA=ON -DDHS_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release "${cj[@]}" > "$out/gstep_build.log" 2>&1 &&
  cmake --build "$b" -j"$(nproc)" --target dhs_tool test_gpu_model >> "$out/gstep_build.log" 2>&1 ||
  { tail -30 "$out/gstep_build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
rc=0
t0=$(date +%s)
"$b/test_gpu_model" > "$out/test_gpu_model.log" 2>&1
r=$?
tail -8 "$out/test_gpu_model.log"
echo "test_gpu_model: rc=$r ($(( $(date +%s) - t0 )) s; 77 = skipped)"
[ $r = 0 ] || rc=1
field() { python3 -c "import json,sys; d=json.load(open('$1')); v=d
for p in '$2'.split('.'): v=v.get(p, '?') if isinstance(v, dict) else '?'
print(round(v, 1) if isinstance(v, float) else v)" 2>/dev/null || echo '?'; }
printf '\n%-14s %-6s %-9s %-6s %-8s %-16s %-8s %-10s %-7s %s\n' geometry step identical logit reclaims tokens_digest hier_s resident_s total_s \
  "hier host us/round: control launch wait (captures)"
for g in glm-5.3 deepseek-v3.2; do
  d0=
  for s in host device graph; do
    j="$out/gstep_${g}_$s.json"
    timeout 1800 "$b/dhs" run --backend cuda --geometry "$g" --sessions $sessions --context $context --tokens $tokens \
        --spec 4 --compare resident --step $s --json > "$j" 2> "$out/gstep_${g}_$s.err"
    r=$?
    dg=$(field "$j" tokens_digest)
    u="-"
    [ $s != host ] && u="$(field "$j" throughput.step_host_us_per_round.hier.control) $(field "$j" throughput.step_host_us_per_round.hier.launch) $(field "$j" throughput.step_host_us_per_round.hier.wait) ($(field "$j" throughput.step_host_us_per_round.hier.captures))"
    printf '%-14s %-6s %-9s %-6s %-8s %-16s %-8s %-10s %-7s %s  rc=%d\n' "$g" $s "$(field "$j" identical)" \
      "$(field "$j" logit_mismatches)" "$(field "$j" reclaims)" "$dg" "$(field "$j" throughput.hier_decode_s)" \
      "$(field "$j" throughput.resident_decode_s)" "$(field "$j" throughput.total_s)" "$u" $r
    [ $r = 0 ] || { rc=1; tail -3 "$out/gstep_${g}_$s.err"; }
    [ "$(field "$j" identical)" = True ] || rc=1
    [ -z "$d0" ] && d0=$dg
    [ "$dg" = "$d0" ] || { echo "  $g --step $s: tokens_digest $dg differs from --step host's $d0"; rc=1; }
  done
done
exit $rc
