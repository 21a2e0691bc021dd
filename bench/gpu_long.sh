#!/usr/bin/env bash
# gpu_long.sh - long contexts on a GPU machine (docs/SERVE.md "Long contexts"): `dhs bench serve` at 262144,
# 524288 and 1048576 positions, GLM-5.3 KV geometry (78 sources of 656-byte rows; a 1M session's history is
# 53.7 GB), --deployment glm-5.3-8xh200, graph step:
#   adaptive  the hierarchy under the 12 GiB device budget, as many sessions as host memory allows
#             (LONG_HOST_GIB), capped at 4 / 2 / 1;
#   resident  every row on the device, on a larger device budget (LONG_RES_GIB): the reference tokens, at the
#             same concurrency, where it fits (under 12 GiB resident holds none of these contexts);
# each mode in its own process (so that its peak RSS is its own), the tokens compared by digest (a session's
# tokens depend only on its prompt and history). Per run: sessions held, TPOT p50/p99, tok/s, step, peak RSS,
# the hierarchy's host bytes, histories and imports in s; a table at the end. Each run's JSON in $OUT.
# Env: OUT (output dir), LONG_HOST_GIB (host budget for the histories, default 100 of the box's 128 GiB),
# LONG_RES_GIB (resident's device budget, default 100), LONG_TOKENS (default 8), LONG_LIMIT_S (the whole
# script, default 530), LONG_CONTEXTS (default "262144 524288 1048576"), LONG_C256 / LONG_C512 (the
# concurrency cap at 256K / 512K, default 4 / 2), LONG_TWICE (0: no --history-copies twice run).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
host_gib=${LONG_HOST_GIB:-100} res_gib=${LONG_RES_GIB:-100} tokens=${LONG_TOKENS:-8} limit=${LONG_LIMIT_S:-530}
contexts=${LONG_CONTEXTS:-"262144 524288 1048576"}
T0=$(date +%s)
. "$root/bench/gpu_lib.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
b="$root/build-gmodel"
model_build "$out/glong_build.log" dhs_tool
free -g | sed -n 2p | sed 's/^/host memory (GiB): /'
rc=0
ROW_W=40
# run NAME MODE C CONTEXT [extra flags]: one bench serve process; prints its record
run() {
  local name=$1 mode=$2 C=$3 L=$4
  shift 4
  local left=$(( limit - ($(date +%s) - T0) ))
  [ $left -gt 45 ] || { echo "== $name: skipped (time)"; row "$name" "skipped (time)"; return 1; }
  echo "== $name: $mode, context $L, C = $C (timeout $left s)"
  timeout $left "$b/dhs" bench serve --backend cuda --geometry glm-5.3 --deployment glm-5.3-8xh200 --context "$L" \
      --modes "$mode" --concurrency "$C" --waves 1 --tokens "$tokens" --host-budget-gib "$host_gib" \
      --resident-budget-gib "$res_gib" --json --output "$out/glong_$name.json" "$@" 2> "$out/glong_$name.err"
  local r=$?
  echo "rc=$r, $(( $(date +%s) - T0 )) s so far"
  grep "host memory\|holds no session" "$out/glong_$name.err" | grep -v ": round " | tail -2
  [ $r = 0 ] || { rc=1; tail -3 "$out/glong_$name.err"; }
  local recs
  recs=$(python3 - "$out/glong_$name.json" <<'PY'
import json, os, sys
p = sys.argv[1]
if (not os.path.exists(p) or os.path.getsize(p) == 0) and os.path.exists(p + ".partial"):
    p += ".partial"
d = json.load(open(p))
for s in d.get("summary", []):
    print("capacity: resident %d (under its budget), hierarchy %d on the device, host memory caps it at %d"
          % (s["resident_capacity"], s["hier_device_capacity"], s["host_capacity"]))
for r in d["records"]:
    if "skipped" in r:
        line = "%s C=%d: %s" % (r["mode"], r["max_concurrency"], r["skipped"])
    else:
        line = ("%s C=%d held %d: TPOT p50 %.2f p99 %.2f ms, %.1f tok/s, step %.2f ms, peak RSS %.2f GiB, host rows %.2f GiB,"
                " histories %.1f s, imports %.1f s, host rows/token %.0f, PCIe %.2f GB/s, tokens %s"
                % (r["mode"], r["max_concurrency"], r["sessions_held"], r["median_tpot_ms"], r["p99_tpot_ms"],
                   r["output_throughput"], r["step_mean_ms"], r["peak_rss_bytes"] / 2**30, r.get("host_bytes_peak", 0) / 2**30,
                   r["prefill_s"], r["start_s"], r["host_rows_per_token"], r["pcie_gbps"], r["tokens_digest"]))
    print("REC " + line)
PY
  ) || { rc=1; row "$name" "no record (rc $r)"; return 1; }
  echo "$recs" | grep -v '^REC '
  while IFS= read -r l; do row "$name" "${l#REC }"; done < <(echo "$recs" | grep '^REC ')
}
digest() { python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['records'][0]; print(r.get('tokens_digest', '-'))" "$1" 2>/dev/null || echo -; }
for L in $contexts; do
  case $L in 262144) C=${LONG_C256:-4} ;; 524288) C=${LONG_C512:-2} ;; *) C=1 ;; esac
  # as many as host memory allows (the history's bytes held once), at most C
  cap=$(python3 -c "print(int($host_gib * 2**30 // (78 * ($L + $tokens) * 656)))")
  [ "$cap" -lt "$C" ] && C=$cap
  if [ "$C" -lt 1 ]; then
    echo "== context $L: host memory ($host_gib GiB) holds no session"
    row "context $L" "host memory holds no session"
    continue
  fi
  run "${L}_adaptive" adaptive "$C" "$L"
  run "${L}_resident" resident "$C" "$L"
  da=$(digest "$out/glong_${L}_adaptive.json") dr=$(digest "$out/glong_${L}_resident.json")
  if [ "$da" != - ] && [ "$da" = "$dr" ]; then
    row "context $L C=$C tokens" "identical to resident (digest $da)"
  elif [ "$dr" = - ]; then
    row "context $L C=$C tokens" "no resident reference (adaptive digest $da)"
  else
    row "context $L C=$C tokens" "DIFFER: adaptive $da, resident $dr"
    rc=1
  fi
done
# before/after: the 256K hierarchy with the history through the prefill's buffers (held twice while importing)
if [[ " $contexts " == *" 262144 "* ]] && [ "${LONG_TWICE:-1}" = 1 ]; then
  C=$(python3 -c "print(min(4, int($host_gib * 2**30 // (2 * 78 * (262144 + $tokens) * 656))))")
  [ "$C" -ge 1 ] && run 262144_adaptive_twice adaptive "$C" 262144 --history-copies twice
fi
echo
echo "summary ($(( $(date +%s) - T0 )) s):"
printf '%s\n' "${summary[@]}"
exit $rc
