#!/usr/bin/env bash
# gpu_round_end.sh - the round's host path on a GPU machine, this tree against an older one (BASE), A B A B:
#   1. build (Release, CUDA) this tree's dhs_tool, control_bench and the GPU tests that cover the round's
#      control plane (test_cuda: publish_list; test_dres_api_cuda, test_dres_cuda, test_dres_graph), and
#      BASE's dhs_tool and control_bench when BASE names a source tree (e.g. `git archive <commit> | tar -x -C
#      DIR`);
#   2. the tests (DHS_TEST_SCALE 0.3) and `dhs verify --backend cuda --resolver device` with early and mixed
#      round ends;
#   3. `control_bench --backend cuda --resolver device --stagger --publish both` at C = 16 and 64 (the round
#      begin with one copy per piece against the publish list, in one process), and this tree's
#      `--overlap 2000` (early ends waited for round by round against the overlapped schedule: the
#      compute stream's idle time between two 2 ms steps, measured with events);
#   4. `dhs bench serve` at 8K, C = 64 (24 GiB, the deployment's weights, dsv32-swe locality, 140 tokens so
#      that pages complete) with `--round-end wait`, `early` and (this tree) `ahead`, this tree and BASE alternating,
#      twice; one line per run: exposed host us per round by part (tail / head / control), the library's
#      round begin (housekeeping / tail room / publish) and end (its device wait), tokens digest.
# Usage: BASE=/path/to/old/tree bash bench/gpu_round_end.sh   (env: OUT for the logs, SERVE_REPS 2;
#        SERVE_CONTEXT 8192, SERVE_C 64, SERVE_GIB 24, SERVE_ENDS "wait early" (this tree adds ahead, and
#        BASE too with BASE_AHEAD=1; SERVE_ENDS=" ": ahead only);
#        ONLY_SERVE=1: no tests, no control_bench; MODEL_TESTS=1: test_gpu_model and the graph step's
#        resident-against-hierarchical run first)
# Expected about 8 minutes on an H200 host with 16 cores (two builds in parallel, about 30 s).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/gpu_lib.sh"
out=${OUT:-$root/build-round-end}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)"
bld() { # SRC DIR TARGETS...
  local s=$1 d=$2; shift 2
  cmake -S "$s" -B "$d" -DDHS_CUDA=ON -DDHS_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release "${cj[@]}" > "$d.log" 2>&1 &&
    cmake --build "$d" -j"$(nproc)" --target "$@" >> "$d.log" 2>&1 || { tail -20 "$d.log"; echo "BUILD FAILED $d"; }
}
mkdir -p "$out/b"
mt=(); [ -n "${MODEL_TESTS:-}" ] && mt=(test_gpu_model)
if [ -n "${ONLY_SERVE:-}" ]; then bld "$root" "$out/b/new" dhs_tool "${mt[@]}" &
else bld "$root" "$out/b/new" dhs_tool control_bench test_cuda test_dres_api_cuda test_dres_cuda test_dres_graph "${mt[@]}" &
fi
trees=new
if [ -n "${BASE:-}" ] && [ -d "$BASE" ]; then
  bld "$BASE" "$out/b/base" dhs_tool control_bench &
  trees="new base"
fi
wait
el "builds done ($trees)"
rc=0
# MODEL_TESTS=1: the GPU model against the CPU model, and resident against hierarchical on the graph step
if [ -n "${MODEL_TESTS:-}" ]; then
  t1=$(date +%s)
  DHS_TEST_SEED=${DHS_TEST_SEED:-20261206} DHS_TEST_SCALE=0.3 timeout 200 "$out/b/new/test_gpu_model" > "$out/test_gpu_model.log" 2>&1
  r=$?
  [ $r = 0 ] || rc=1
  echo "## test_gpu_model rc=$r ($(( $(date +%s) - t1 )) s) $(grep -h 'passed,\|passed\b' "$out/test_gpu_model.log" | tail -1)"
  [ $r = 0 ] || grep -m 10 "FAIL\|failed" "$out/test_gpu_model.log"
  timeout 120 "$out/b/new/dhs" run --backend cuda --step graph --geometry glm-5.3 --sessions 4 --context 8192 --tokens 8 \
    --spec 4 --compare resident --json > "$out/run_exact.json" 2> "$out/run_exact.err"
  r=$?
  [ $r = 0 ] || rc=1
  echo "## dhs run --step graph --compare resident rc=$r $(grep -o '"identical": *[a-z]*\|"logit_mismatches": *[0-9]*\|"tokens_digest": *"[0-9a-f]*"' "$out/run_exact.json" | tr '\n' ' ')"
fi
[ -n "${ONLY_SERVE:-}" ] || {
for t in test_cuda test_dres_api_cuda test_dres_cuda test_dres_graph; do
  t1=$(date +%s)
  DHS_TEST_SEED=${DHS_TEST_SEED:-20261206} DHS_TEST_SCALE=0.3 timeout 200 "$out/b/new/$t" > "$out/$t.log" 2>&1
  r=$?
  [ $r = 0 ] || rc=1
  echo "## $t rc=$r ($(( $(date +%s) - t1 )) s) $(grep -h 'publish_list\|passed,\|passed\b\|FAIL' "$out/$t.log" | tail -2 | tr '\n' ' ')"
  [ $r = 0 ] || tail -15 "$out/$t.log"
done
for va in "--requests 32 --steps 300 --seed 8 --round-end early" \
          "--requests 16 --steps 200 --pressure high --faults 0.02 --seed 3 --round-end mixed"; do
  timeout 120 "$out/b/new/dhs" verify --backend cuda --resolver device $va --json > "$out/verify.json" 2> "$out/verify.err"
  r=$?
  [ $r = 0 ] || rc=1
  echo "## verify $va rc=$r $(grep -o '"entries": *[0-9]*\|"violations": *[0-9]*\|"early_ends": *[0-9]*' "$out/verify.json" | tr '\n' ' ')"
done
el "tests done"
for v in $trees; do
  timeout 200 "$out/b/$v/control_bench" --backend cuda --resolver device --concurrency 16,64 --context 1024 \
    --history-on-device 0.3 --rounds 100 --mode per-page --stagger --publish both > "$out/cb_$v.txt" 2>&1
  echo "## control_bench $v rc=$?"
  grep -E "per-page|ratio|begin in calls" "$out/cb_$v.txt"
done
# the overlapped schedule: round t + 1 begun, its control plane issued and its step launched before the
# wait for step t (a 2 ms spinning step), against the same early ends waited for round by round
timeout 200 "$out/b/new/control_bench" --backend cuda --resolver device --concurrency 16,64 --context 1024 \
  --history-on-device 0.3 --rounds 100 --stagger --overlap 2000 > "$out/cb_overlap.txt" 2>&1
echo "## control_bench --overlap 2000 rc=$?"
grep -E "early|overlap|ratio|gap_us|begin in calls" "$out/cb_overlap.txt"
el "control_bench done"
}
S="bench serve --backend cuda --geometry glm-5.3 --modes adaptive --waves 1 --tokens 140 --deployment glm-5.3-8xh200
   --locality dsv32-swe --host-cache-fill --context ${SERVE_CONTEXT:-8192} --concurrency ${SERVE_C:-64}
   --device-budget-gib ${SERVE_GIB:-24} --json"
summ() {
  python3 - "$1" "$2" <<'PY'
import json, sys
name, f = sys.argv[1], sys.argv[2]
try:
    j = json.load(open(f))
except Exception as e:
    print("%-16s unreadable: %s" % (name, e)); sys.exit(0)
for r in j.get("records", []):
    sh = r.get("step_host") or {}; hp = r.get("host_parts_us") or {}; lh = r.get("lib_host_us") or {}
    print("%-16s tok/s %7.1f step %5.2f ms | exposed %6.1f: tail %6.1f head %6.1f control %5.1f | begin %5.1f "
          "(housekeeping %4.1f tail room %4.1f publish %4.1f device %4.1f) end %5.1f | early %s ahead %s | %s" % (
          name, r.get("output_throughput", 0), r.get("step_mean_ms", 0), sh.get("exposed_us", 0), hp.get("tail", 0),
          hp.get("head", 0), hp.get("control", 0), sh.get("round_begin_us", 0), lh.get("housekeeping", 0),
          lh.get("tail_room", 0), lh.get("publish", 0), lh.get("device", 0), sh.get("round_end_us", 0),
          sh.get("early_ends", "-"), sh.get("ahead_rounds", "-"), r.get("tokens_digest")))
    if "tail_meter" in hp:
        print("%-16s   tail: logits %.1f meter %.1f verify %.1f end %.1f | control: inputs %.1f tables %.1f upload %.1f"
              " (copy %.1f event %.1f) | between %.1f prelaunch %.1f" % ("", hp["tail_logits"], hp["tail_meter"],
              hp["tail_verify"], hp["tail_end"], hp["control_inputs"], hp["control_tables"], hp["control_upload"],
              hp.get("control_upload_copy", -1), hp.get("control_upload_event", -1), hp.get("between", 0),
              hp.get("prelaunch", 0)))
PY
}
for k in $(seq 1 "${SERVE_REPS:-2}"); do
  order="$trees"; [ $((k % 2)) = 0 ] && order=$(echo $trees | tr ' ' '\n' | tac | tr '\n' ' ')
  for v in $order; do
    # ahead: this tree, and BASE too with BASE_AHEAD=1 (a BASE before f544efc has no --round-end ahead)
    ends=${SERVE_ENDS:-wait early}; { [ "$v" = new ] || [ -n "${BASE_AHEAD:-}" ]; } && ends="$ends ahead"
    for re in $ends; do
      f="$out/serve_${v}_${re}_$k.json"
      timeout "${SERVE_TIMEOUT:-150}" "$out/b/$v/dhs" $S --round-end $re --output "$f" > "$out/serve_${v}_${re}_$k.log" 2>&1
      r=$?
      [ $r = 0 ] || { echo "## serve $v $re #$k rc=$r"; tail -3 "$out/serve_${v}_${re}_$k.log"; }
      summ "$v $re #$k" "$f"
    done
  done
done
el "serve done"
exit $rc
