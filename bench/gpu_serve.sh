#!/usr/bin/env bash
# gpu_serve.sh - `dhs bench serve` on a GPU machine (issue 11's serving figures, docs/SERVE.md): the
# reference model at GLM-5.3 KV geometry under a 12 GiB device KV budget, resident against the hierarchy.
# Each configuration's record lands in FILE.partial as it ends (a run cut short keeps them).
# Builds the dhs tool with CMake (cJSON carried in third_party/cjson or build-cjson when the machine lacks
# libcjson-dev, bench/gpu_lib.sh), checks the graph step once (identical to resident), then
#   1. context 100000, resident + adaptive at concurrency 1, 2 (equal batch) and each mode's capacity
#   2. context 100000, fixed hot cache, concurrency 2 and its capacity
#   2b. context 100000, resident + adaptive at C = 2 with --topk-impl model (the model's k_topk against
#       1., which runs the default split top-k)
#   3. context 32768, all modes (when time is left)
# each with --json and --plot into $OUT, and prints one line per configuration and the summary; then
# `dhs serve-sim --calibrate` on the 100K file (simulated vs measured).
# Env: SERVE_HOST_GIB (pinned host budget for the histories, default 96 of the 128 GiB such a box has),
# SERVE_TOKENS (default 16), SERVE_WAVES (sessions per slot, default 1: one wave, the prompts are 100K),
# SERVE_LIMIT_S (the whole script's time, default 560).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
host_gib=${SERVE_HOST_GIB:-96} tokens=${SERVE_TOKENS:-16} waves=${SERVE_WAVES:-1} limit=${SERVE_LIMIT_S:-560}
T0=$(date +%s)
. "$root/bench/gpu_lib.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
b="$root/build-gmodel"
model_build "$out/gserve_build.log" dhs_tool
free -g | sed -n 2p | sed 's/^/host memory (GiB): /'
rc=0
"$b/dhs" run --backend cuda --geometry glm-5.3 --sessions 4 --context 8192 --tokens 8 --spec 4 --compare resident \
    --step graph --topk-impl model --json > "$out/gserve_sanity.json" 2> "$out/gserve_sanity.err" || rc=1
python3 -c "import json; d=json.load(open('$out/gserve_sanity.json')); print('graph step sanity: identical', d['identical'], \
'logit_mismatches', d['logit_mismatches'], 'tokens_digest', d['tokens_digest']); assert d['identical']" || rc=1
# the same with the library's fused top-k in both engines: identical, and the same tokens
"$b/dhs" run --backend cuda --geometry glm-5.3 --sessions 4 --context 8192 --tokens 8 --spec 4 --compare resident \
    --step graph --topk-impl fused --json > "$out/gserve_fused.json" 2> "$out/gserve_fused.err" || rc=1
python3 -c "import json; d=json.load(open('$out/gserve_fused.json')); m=json.load(open('$out/gserve_sanity.json')); \
print('fused top-k: identical', d['identical'], 'logit_mismatches', d['logit_mismatches'], 'tokens_digest', d['tokens_digest'], \
'same tokens as the model top-k', d['tokens_digest'] == m['tokens_digest'], 'decode s resident/hier', \
d['throughput']['resident_decode_s'], d['throughput']['hier_decode_s'], 'vs model top-k', m['throughput']['resident_decode_s'], \
m['throughput']['hier_decode_s']); assert d['identical'] and d['tokens_digest'] == m['tokens_digest']" || rc=1
tab() { python3 - "$1" <<'PY'
import json, os, sys
p = sys.argv[1]
if os.path.getsize(p) == 0 and os.path.exists(p + ".partial"):  # cut short: the records so far
    print("(cut short: %s.partial)" % p)
    p += ".partial"
d = json.load(open(p))
print("HBM %.0f GB/s (D2D read + write: the attention roofline)" % d.get("hbm_gbps", 0))
for r in d["records"]:
    if "skipped" in r:
        print("%-9s %7d %3d  %s" % (r["mode"], r["context"], r["max_concurrency"], r["skipped"]))
        continue
    s = r.get("step_us") or {}
    f = lambda k: "%.0f" % s[k] if k in s else "-"
    print("%-9s %7d %3d held %3d  tok/s %8.1f  TPOT p50 %7.2f p99 %7.2f ms  step %7.2f ms  waits %3d  host rows/tok %8.1f"
          "  PCIe %5.2f GB/s  reclaims %3d | us: indexer %s topk %s resolve %s copy %s attention %s (roofline %.0f) other %s"
          " | s: histories %.1f (%d at once) starts %.1f (imports %.3f per session, %.2f GB/s; keys %.1f) decode %.1f"
          % (r["mode"], r["context"], r["max_concurrency"], r["sessions_held"], r["output_throughput"], r["median_tpot_ms"],
             r["p99_tpot_ms"], r["step_mean_ms"], r["admission_waits"], r["host_rows_per_token"], r["pcie_gbps"],
             r["reclaims"], f("indexer"), f("topk"), f("resolve"), f("miss_copy"), f("attention"),
             r.get("attention_roofline_us", 0), f("other"), r["prefill_s"], r["histories_at_once"], r["start_s"],
             r.get("import_s_per_session", 0), r.get("import_gbps", 0), r.get("keys_s", 0), r["decode_s"]))
    if r.get("repopulated_pages"):
        print("          repopulated %d pages; optional device pages peaked at %.2f GiB after %d of %d decode rounds"
              % (r["repopulated_pages"], r.get("optional_bytes_peak", 0) / 2**30, r.get("optional_fill_rounds", 0),
                 r["decode_rounds"]))
    h = r.get("step_host")
    if h:
        print("          host us per round: control %.0f launch %.0f wait %.0f outside the step %.0f (draft %.0f, round_begin %.0f,"
              " round_end %.0f); %d graph captures (%.1f ms)"
              % (h["control_us"], h["launch_us"], h["wait_us"], h["outside_step_us"], h["draft_us"], h["round_begin_us"],
                 h["round_end_us"], h["graph_captures"], h["capture_ms"]))
for s in d.get("summary", []):
    print("summary:", json.dumps(s))
PY
}
serve() { # name, then bench serve flags
  local name=$1; shift
  local left=$(( limit - ($(date +%s) - T0) ))
  [ $left -gt 60 ] || { echo "== $name: skipped (time)"; return; }
  echo "== $name (timeout $left s)"
  timeout $left "$b/dhs" bench serve --backend cuda --geometry glm-5.3 --host-budget-gib "$host_gib" --tokens "$tokens" \
      --waves "$waves" --json --output "$out/gserve_$name.json" --plot "$out/gserve_$name.svg" "$@" 2> "$out/gserve_$name.err"
  local r=$?
  echo "rc=$r, $(( $(date +%s) - T0 )) s so far"
  grep -v ": round " "$out/gserve_$name.err" | tail -4
  [ -s "$out/gserve_$name.json" ] || [ -s "$out/gserve_$name.json.partial" ] && tab "$out/gserve_$name.json"
  [ $r = 0 ] || rc=1
}
serve 100k --context 100000 --modes resident,adaptive --concurrency 1,2 --and-capacity
serve 100k_fixed --context 100000 --modes fixed --concurrency 2 --and-capacity
# the model's own k_topk at k = 2048 over 100K candidates: its top-k phase against the default split
# top-k's in the 100k records
serve 100k_model_topk --context 100000 --modes resident,adaptive --concurrency 2 --topk-impl model
serve 32k --context 32768
# serve-sim calibrated from the measured 100K sweep, simulated vs measured side by side (docs/SIM.md)
if [ -s "$out/gserve_100k.json" ]; then
  "$b/dhs" serve-sim --calibrate "$out/gserve_100k.json" > "$out/gserve_calibrate.txt" 2>&1 || rc=1
  tail -20 "$out/gserve_calibrate.txt"
fi
exit $rc
