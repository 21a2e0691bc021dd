#!/usr/bin/env bash
# gpu.sh - every GPU check and benchmark on the one CMake build. Run it on a
# machine with a CUDA GPU (the lent H200 runs it over a copy of the tree):
#
#   bench/gpu.sh SUITE [SUITE ...]
#
# It configures and builds build-gpu once (CUDA on, Release, sm_90, tests,
# cJSON carried in third_party/cjson or build-cjson when the machine lacks
# libcjson-dev: bench/gpu_lib.sh), then runs each suite and ends with one
# table: suite, status, seconds, the suite's own summary line. Logs and JSON
# go to $OUT (default build-gpu/out).
#
# Suites (quick unless noted; each prints the figures it measured):
#   test      ctest -L cuda (every GPU test: kernels against the C
#             specification, the GPU model against the CPU model) and the
#             core tests on the CUDA build
#   exact     dhs run --backend cuda --check per layout and policy, compared
#             with all-resident storage; dhs verify --backend cuda
#   resolve   dhs bench resolve --backend cuda --breakdown over batch 1/8/64/256
#             x B 2048/4096/16384/65536 x misses 0/32/300/2048 (ratios against
#             the in-process baseline and the gather ceiling)
#   gather    gpu_bench: the host->device gather against cudaMemcpy of the
#             same span (the link ceilings)
#   import    import_bench: a GLM-5.3 100K history (78 x 100000 x 656 B)
#             imported into a CUDA context, host rows freed at close against
#             kept for reuse (host_cache_bytes), next to memcpy and
#             cudaHostAlloc of the same bytes
#   fo        test_topk_cuda, topk_bench, lstream_bench (the dev/ pieces)
#   overlap   test_overlap_cuda, overlap_bench
#   prefill   test_lsprefill_cuda (the streamed prefill against full residency)
#   step      dhs run --step host|device|graph, and --deployment, identical
#             to resident
#   kernels   kern_bench: the GPU model's split-K attention against its floor
#             (bytes / HBM measured here, FLOPs / tensor peak) at 100K and 32K,
#             C = 2, 8, 20; the indexer scores and top-k; the per-query
#             projections against the previous kernels (checked bit-equal);
#             test_mla_mh_cuda and mla_bench: the multi-head tensor-core
#             attention against the CPU spec and its roofline
#   serve     dhs bench serve at 100K (GLM-5.3 geometry), resident and
#             adaptive, C = 1, 2 (minutes)
#   sanitize  compute-sanitizer memcheck/racecheck/synccheck on reduced runs
#             of test_dres_cuda, test_dres_api_cuda and test_att_kern (minutes)
#   all       every suite above in this order
# The longer campaigns (bench/gpu_serve.sh, gpu_volume.sh, gpu_dres.sh,
# gpu_dres_fewmiss.sh, gpu_overlap.sh) take the same build when DHS_GPU_BUILD
# names it (gpu.sh exports it).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/gpu_lib.sh"
export PATH=$PATH:/usr/local/cuda/bin
b=${DHS_GPU_BUILD:-$root/build-gpu}
out=${OUT:-$b/out}
mkdir -p "$out"
[ $# -gt 0 ] || { awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
case "$1" in -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
suites=("$@")
[ "${suites[0]}" = all ] && suites=(test exact resolve gather import fo overlap prefill step kernels serve sanitize)
for s in "${suites[@]}"; do
  case $s in test|exact|resolve|gather|import|fo|overlap|prefill|step|kernels|serve|sanitize) ;;
    *) echo "gpu.sh: unknown suite '$s' (bench/gpu.sh --help)" >&2; exit 2 ;;
  esac
done

T0=$(date +%s)
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$root" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  nvcc --version 2>/dev/null | tail -1
} | tee "$out/env.txt"
if [ -z "${DHS_GPU_BUILD_DONE:-}" ]; then
  cmake -S "$root" -B "$b" -DDHS_CUDA=ON -DDHS_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      "${cj[@]}" > "$out/build.log" 2>&1 && cmake --build "$b" -j"$(nproc)" >> "$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log"; echo "BUILD FAILED"; exit 1; }
  echo "build: $(( $(date +%s) - T0 )) s"
fi
export DHS_GPU_BUILD=$b DHS_GPU_BUILD_DONE=1

table=()
status() { case $1 in 0) echo ok ;; 77) echo skipped ;; 124|137) echo "timed out" ;; *) echo "FAILED ($1)" ;; esac; }
# run NAME SECONDS CMD...: CMD's output to $out/NAME.log; rc kept in $r
run() { local name=$1 t=$2; shift 2; timeout "$t" "$@" > "$out/$name.log" 2>&1; r=$?; }
# json_get FILE EXPR: a Python expression over d = the file's JSON (prints "-" when it cannot)
json_get() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null || echo -; }

suite_test() {
  ctest --test-dir "$b" -L 'cuda|core' --output-on-failure -j4 --timeout 600 > "$out/ctest.log" 2>&1
  local rc=$?
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|Total Test" "$out/ctest.log" | sed 's/^ *//'
  sum=$(grep -E "tests passed" "$out/ctest.log" | tail -1)
  return $rc
}
suite_exact() {
  local rc=0 r
  printf '%-10s %-6s %-4s %s\n' layout policy seed result
  for cfg in "own lru 1" "own lfu 9" "own clock 4" "follow fifo 5" "follow lfu 6" "compressed lru 7" "compressed lfu 8"; do
    set -- $cfg
    run "exact_$1_$2" 300 "$b/dhs" run --backend cuda --check --layout "$1" --policy "$2" --seed "$3" \
        --sessions 8 --context 2048 --tokens 24 --json -q
    printf '%-10s %-6s %-4s rc=%d identical=%s logit_mismatches=%s\n' "$1" "$2" "$3" "$r" \
      "$(json_get "$out/exact_$1_$2.log" 'd["identical"]')" "$(json_get "$out/exact_$1_$2.log" 'd["logit_mismatches"]')"
    [ $r = 0 ] || rc=1
  done
  for args in "--requests 16 --steps 120" "--requests 16 --steps 120 --pressure high --faults 0.01" \
              "--requests 16 --steps 40 --spec 8 --compress 4 --consumers glm" \
              "--requests 32 --steps 200 --resolver device"; do
    run verify 300 "$b/dhs" verify --backend cuda --seed 11 $args --json -q
    printf 'verify %-50s rc=%d violations=%s entries=%s\n' "$args" "$r" \
      "$(json_get "$out/verify.log" 'd.get("violations")')" "$(json_get "$out/verify.log" 'd.get("entries")')"
    [ $r = 0 ] || rc=1
  done
  sum="7 layouts/policies + 4 verify runs"
  return $rc
}
suite_resolve() {
  run resolve 540 "$b/dhs" bench resolve --backend cuda --layout compact --queries 1 --breakdown \
      --batch 1,8,64,256 --hot-rows 2048,4096,16384,65536 --misses 0,32,300,2048
  cat "$out/resolve.log" | grep -v "^{" | tail -80
  sum="grid batch x B x misses"
  return $r
}
suite_gather() {
  run gather 300 "$b/gpu_bench" --quick
  tail -30 "$out/gather.log"
  sum=$(grep -m1 -i "ceiling\|GB/s" "$out/gather.log")
  return $r
}
suite_import() {
  run import 400 "$b/import_bench" --backend cuda --rows "${IMPORT_ROWS:-100000}" --sessions 3
  cat "$out/import.log"
  sum=$(grep -m1 "HOST import, session 1" "$out/import.log" | sed 's/  */ /g')
  return $r
}
suite_fo() {
  local rc=0
  for t in test_topk_cuda topk_bench lstream_bench; do
    run "$t" 240 "$b/$t" $([ "$t" = test_topk_cuda ] || echo --quick)
    echo "$t: $(status $r)"; tail -12 "$out/$t.log"
    [ $r = 0 ] || rc=1
  done
  sum="top-k, layer streaming"
  return $rc
}
suite_overlap() {
  local rc=0
  for t in test_overlap_cuda overlap_bench; do
    run "$t" 300 "$b/$t" $([ "$t" = overlap_bench ] && echo --quick)
    echo "$t: $(status $r)"; tail -12 "$out/$t.log"
    [ $r = 0 ] || rc=1
  done
  sum="hit attention overlapped with the miss copy"
  return $rc
}
suite_prefill() {
  run prefill 300 "$b/test_lsprefill_cuda"
  tail -15 "$out/prefill.log"
  sum=$(tail -1 "$out/prefill.log")
  return $r
}
suite_step() {
  local rc=0
  for st in host device graph; do
    run "step_$st" 300 "$b/dhs" run --backend cuda --geometry glm-5.3 --sessions 4 --context 8192 --tokens 8 --spec 4 \
        --compare resident --step "$st" --json -q
    printf 'step %-6s rc=%d identical=%s tokens_digest=%s decode s resident/hier=%s/%s\n' "$st" "$r" \
      "$(json_get "$out/step_$st.log" 'd["identical"]')" "$(json_get "$out/step_$st.log" 'd["tokens_digest"]')" \
      "$(json_get "$out/step_$st.log" 'd["throughput"]["resident_decode_s"]')" "$(json_get "$out/step_$st.log" 'd["throughput"]["hier_decode_s"]')"
    [ $r = 0 ] || rc=1
  done
  run step_deploy 300 "$b/dhs" run --backend cuda --geometry glm-5.3 --sessions 4 --context 8192 --tokens 8 --spec 4 \
      --compare resident --step graph --deployment glm-5.3-8xh200 --json -q
  printf 'step graph + deployment glm-5.3-8xh200 rc=%d identical=%s tokens_digest=%s\n' "$r" \
    "$(json_get "$out/step_deploy.log" 'd["identical"]')" "$(json_get "$out/step_deploy.log" 'd["tokens_digest"]')"
  [ $r = 0 ] || rc=1
  sum="host, device, graph steps identical to resident"
  return $rc
}
suite_kernels() {
  local rc=0
  run kernels 300 "$b/kern_bench"
  [ $r = 0 ] || rc=1
  cat "$out/kernels.log"
  run mla_test 120 "$b/test_mla_mh_cuda"
  [ $r = 0 ] || rc=1
  grep -v "^case" "$out/mla_test.log" | tail -3
  run mla 240 "$b/mla_bench"
  [ $r = 0 ] || rc=1
  grep "^mla" "$out/mla.log"
  sum="$(grep -m1 "^kern_bench:" "$out/kernels.log"); $(grep -m1 "variant 0" "$out/mla.log")"
  return $rc
}
suite_serve() {
  run serve 590 "$b/dhs" bench serve --backend cuda --geometry glm-5.3 --context 100000 --modes resident,adaptive \
      --concurrency 1,2 --tokens 32 --json --output "$out/serve.json"
  grep -v ": round " "$out/serve.log" | tail -25
  sum=$(json_get "$out/serve.json" '"; ".join(json.dumps(s) for s in d.get("summary", []))')
  return $r
}
suite_sanitize() {
  local rc=0
  for tool in memcheck racecheck synccheck; do
    DHS_TEST_SCALE=0.05 run "san_$tool" 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$b/test_dres_cuda"
    echo "compute-sanitizer $tool test_dres_cuda: $(status $r) $(grep -m1 'ERROR SUMMARY' "$out/san_$tool.log")"
    [ $r = 0 ] || rc=1
  done
  for tool in memcheck racecheck; do
    DHS_TEST_SCALE=0.05 run "san_att_$tool" 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$b/test_att_kern"
    echo "compute-sanitizer $tool test_att_kern: $(status $r) $(grep -m1 'ERROR SUMMARY' "$out/san_att_$tool.log")"
    [ $r = 0 ] || rc=1
  done
  run san_api 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$b/test_dres_api_cuda"
  echo "compute-sanitizer memcheck test_dres_api_cuda: $(status $r) $(grep -m1 'ERROR SUMMARY' "$out/san_api.log")"
  [ $r = 0 ] || rc=1
  sum="memcheck, racecheck, synccheck"
  return $rc
}

rc=0
for s in "${suites[@]}"; do
  t=$(date +%s)
  echo
  echo "== $s"
  sum=""
  "suite_$s"
  sr=$?
  table+=("$(printf '%-9s %-12s %5d s  %s' "$s" "$(status $sr)" $(( $(date +%s) - t )) "$sum")")
  [ $sr = 0 ] || [ $sr = 77 ] || rc=1
done
echo
echo "== summary ($(( $(date +%s) - T0 )) s; logs in $out)"
printf '%s\n' "${table[@]}"
exit $rc
