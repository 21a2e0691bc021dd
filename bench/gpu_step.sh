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
# Then, for glm-5.3, the three steps again with --topk-impl fused (the
# library's fused top-k dhs_cuda_topk_fused_n instead of the model's k_topk,
# docs/MODEL.md "Top-k"): rows "host+fused" etc., whose tokens_digest must be
# the model top-k's too (same selections); and "graph+split" with
# --topk-impl split (dhs_cuda_topk_split_n, many blocks per query), the same.
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
model_build "$out/gstep_build.log" dhs_tool test_gpu_model
rc=0
model_test 8
field() { python3 -c "import json,sys; d=json.load(open('$1')); v=d
for p in '$2'.split('.'): v=v.get(p, '?') if isinstance(v, dict) else '?'
print(round(v, 1) if isinstance(v, float) else v)" 2>/dev/null || echo '?'; }
printf '\n%-14s %-12s %-9s %-6s %-8s %-16s %-8s %-10s %-7s %s\n' geometry step identical logit reclaims tokens_digest hier_s resident_s total_s \
  "hier host us/round: control launch wait (captures)"
for g in glm-5.3 deepseek-v3.2; do
  d0=
  steps="host device graph"
  [ $g = glm-5.3 ] && steps="$steps host+fused device+fused graph+fused graph+split"
  for sf in $steps; do
    s=${sf%+*}
    ti=model
    [ $sf != $s ] && ti=${sf#*+}
    j="$out/gstep_${g}_$sf.json"
    timeout 1800 "$b/dhs" run --backend cuda --geometry "$g" --sessions $sessions --context $context --tokens $tokens \
        --spec 4 --compare resident --step $s --topk-impl $ti --json > "$j" 2> "$out/gstep_${g}_$sf.err"
    r=$?
    dg=$(field "$j" tokens_digest)
    u="-"
    [ $s != host ] && u="$(field "$j" throughput.step_host_us_per_round.hier.control) $(field "$j" throughput.step_host_us_per_round.hier.launch) $(field "$j" throughput.step_host_us_per_round.hier.wait) ($(field "$j" throughput.step_host_us_per_round.hier.captures))"
    printf '%-14s %-12s %-9s %-6s %-8s %-16s %-8s %-10s %-7s %s  rc=%d\n' "$g" $sf "$(field "$j" identical)" \
      "$(field "$j" logit_mismatches)" "$(field "$j" reclaims)" "$dg" "$(field "$j" throughput.hier_decode_s)" \
      "$(field "$j" throughput.resident_decode_s)" "$(field "$j" throughput.total_s)" "$u" $r
    [ $r = 0 ] || { rc=1; tail -3 "$out/gstep_${g}_$sf.err"; }
    [ "$(field "$j" identical)" = True ] || rc=1
    [ $ti != model ] && [ "$(field "$j" config.topk_impl)" != $ti ] && { echo "  $g $sf: the run did not use the $ti top-k"; rc=1; }
    [ -z "$d0" ] && d0=$dg
    [ "$dg" = "$d0" ] || { echo "  $g --step $s --topk-impl $ti: tokens_digest $dg differs from --step host's $d0"; rc=1; }
  done
done
exit $rc
