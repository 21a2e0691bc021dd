#!/usr/bin/env bash
# gpu_model.sh - the reference model computing on the GPU (model/refmodel.cu)
# at the real KV geometries, through the device hierarchy, against all-resident
# storage on the GPU (issue 11's must-show command). Builds the dhs tool and
# test_gpu_model with CMake (cJSON from a carried copy in build-cjson/ when the
# machine lacks libcjson-dev), runs test_gpu_model (GPU vs CPU model), then
#   dhs run --backend cuda --geometry G --sessions 32 --context 32768 --tokens 64
#           --spec 4 --compare resident --json
# for G = glm-5.3 and deepseek-v3.2 (and glm-5.3 with --verify sample). The
# budget forces reclaims: 16 request slots (sessions/2) and room for the
# imported history of --history 2 sessions, so later admissions reclaim the
# history of earlier ones. Prints identical / logit_mismatches / reclaims and
# the measured decode times of both storages (same run, same GPU kernels).
# Usage: bench/gpu_model.sh [--quick]   (--quick: 8 sessions x 8192; logs to $OUT)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
sessions=32 context=32768 tokens=64
[ "${1:-}" = --quick ] && { sessions=8; context=8192; tokens=16; }
. "$root/bench/gpu_lib.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
b="$root/build-gmodel"
model_build "$out/gmodel_build.log" dhs_tool test_gpu_model
rc=0
model_test 12
field() { python3 -c "import json,sys; d=json.load(open('$1')); v=d
for p in '$2'.split('.'): v=v.get(p, '?') if isinstance(v, dict) else '?'
print(v)"; }
printf '\n%-14s %-7s %-9s %-16s %-8s %-10s %-9s %-9s %-12s %s\n' geometry verify identical logit_mismatches reclaims census_host model_on hier_s resident_s total_s
for cfg in "glm-5.3 greedy" "deepseek-v3.2 greedy" "glm-5.3 sample"; do
  set -- $cfg
  j="$out/gmodel_$1_$2.json"
  timeout 1800 "$b/dhs" run --backend cuda --geometry "$1" --verify "$2" --sessions $sessions --context $context \
      --tokens $tokens --spec 4 --compare resident --json > "$j" 2> "$out/gmodel_$1_$2.err"
  r=$?
  printf '%-14s %-7s %-9s %-16s %-8s %-10s %-9s %-9s %-12s %s  rc=%d\n' "$1" "$2" "$(field "$j" identical)" \
    "$(field "$j" logit_mismatches)" "$(field "$j" reclaims)" "$(field "$j" census.host)" \
    "$(field "$j" throughput.model_on)" "$(field "$j" throughput.hier_decode_s)" \
    "$(field "$j" throughput.resident_decode_s)" "$(field "$j" throughput.total_s)" $r
  [ $r = 0 ] || { rc=1; tail -3 "$out/gmodel_$1_$2.err"; field "$j" error; }
done
exit $rc
