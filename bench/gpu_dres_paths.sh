#!/usr/bin/env bash
# gpu_dres_paths.sh - the device resolver's two plan paths side by side, in one process, on a GPU machine:
#   1. build (CMake, -DDHS_CUDA=ON, Release) dhs_tool, test_dres_cuda, test_dres_graph; in the background a
#      second build with -DDHS_DRES_PHASE_TIMING=ON (dhs_tool only, build-paths/ph);
#   2. test_dres_cuda (DHS_TEST_SCALE, default 0.3: every fourth configuration on the block-wide path, the
#      others on the few-miss path) and test_dres_graph (scale 0.1): kernels against the C specification;
#   3. `dhs bench resolve --backend cuda --layout compact --queries 1 --plan-path both` over batch 1/8/64/256
#      x B 2048/4096/16384/32768/65536 x misses 0/32/300/2048: every configuration timed with the few-miss
#      path (few) and with the block-wide path only (block), same selections, same process;
#   3b. the same with --plan-path fused (the few-miss path copying its own rows) at misses 0 and 32;
#   4. the phase-timing build: `--breakdown --plan-path both` on a small grid: plan kernel alone, copy
#      kernel alone, and the plan kernel's phase boundaries (mean us from its start, block 0);
#   5. a table: p50 few / block / HiSparse (bench/data/hisparse_grid.txt, the peer's 2026-12-03 figures on an
#      H200) and the ratios; the geometric mean of few/block; the configurations where few > 0.8x HiSparse.
# Usage: bash bench/gpu_dres_paths.sh   (env: OUT log dir, default build-paths/out; DRES_REPS 100;
#        DHS_TEST_SCALE 0.3; DRES_SEED 20261201)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-paths/out}
b=$root/build-paths/b
ph=$root/build-paths/ph
mkdir -p "$out" "$b" "$ph"
export PATH=$PATH:/usr/local/cuda/bin
. "$root/bench/gpu_lib.sh"
cjd=${CJSON_DIR:-$root/../build-cjson}
if [ ${#cj[@]} = 0 ] && [ ! -f /usr/include/cjson/cJSON.h ] && [ -d "$cjd" ]; then
  cj=(-DCJSON_INCLUDE_DIR="$cjd/include" -DCJSON_LIBRARY="$cjd/lib/libcjson.so")
  export LD_LIBRARY_PATH="$cjd/lib:${LD_LIBRARY_PATH:-}"
fi
t0=$(date +%s)
model_build "$out/build.log" dhs_tool test_dres_cuda test_dres_graph
( cmake -S "$root" -B "$ph" -DDHS_CUDA=ON -DDHS_BUILD_TESTS=OFF -DDHS_DRES_PHASE_TIMING=ON -DCMAKE_BUILD_TYPE=Release \
    "${cj[@]}" > "$out/build_ph.log" 2>&1 && cmake --build "$ph" -j"$(nproc)" --target dhs_tool >> "$out/build_ph.log" 2>&1
  echo $? > "$out/build_ph.rc" ) &
phb=$!
rc=0
for t in test_dres_cuda test_dres_graph; do
  t1=$(date +%s)
  sc=${DHS_TEST_SCALE:-0.3}
  [ $t = test_dres_graph ] && sc=0.1
  DHS_TEST_SCALE=$sc DHS_TEST_SEED=${DRES_SEED:-20261201} timeout 240 "$b/$t" > "$out/$t.log" 2>&1
  r=$?
  [ $r = 0 ] || rc=1
  echo "$t (scale $sc): rc=$r ($(( $(date +%s) - t1 )) s) $(grep -h 'configurations\|plan paths\|passed\|failed\|FAIL' "$out/$t.log" | tail -4 | tr '\n' ' ')"
  [ $r = 0 ] || tail -20 "$out/$t.log"
done
dhs=$(find "$b" -maxdepth 2 -name dhs -type f -perm -u+x | head -1)
t1=$(date +%s)
"$dhs" bench resolve --backend cuda --layout compact --queries 1 --plan-path both --reps "${DRES_REPS:-100}" -q \
  --batch 1,8,64,256 --hot 2048,4096,16384,32768,65536 --misses 0,32,300,2048 > "$out/grid.txt" 2>&1
echo "grid: rc=$? ($(( $(date +%s) - t1 )) s)"
t1=$(date +%s)
"$dhs" bench resolve --backend cuda --layout compact --queries 1 --plan-path fused --reps "${DRES_REPS:-100}" -q \
  --batch 1,8,64,256 --hot 2048,4096,16384,32768,65536 --misses 0,32 > "$out/grid_fused.txt" 2>&1
echo "grid fused (misses 0, 32): rc=$? ($(( $(date +%s) - t1 )) s)"
wait $phb
dph=$(find "$ph" -maxdepth 2 -name dhs -type f -perm -u+x | head -1)
if [ "$(cat "$out/build_ph.rc" 2>/dev/null)" = 0 ] && [ -n "$dph" ]; then
  t1=$(date +%s)
  "$dph" bench resolve --backend cuda --layout compact --queries 1 --plan-path all --breakdown --reps 50 -q \
    --batch 1,64 --hot 2048,4096,65536 --misses 0,32,300,2048 > "$out/phases.txt" 2>&1
  echo "phases: rc=$? ($(( $(date +%s) - t1 )) s)"
else
  echo "phase-timing build FAILED"; tail -20 "$out/build_ph.log"; rc=1
fi
grep -h "floor" "$out/grid.txt" | head -1
echo "# p50 us per call (eager, each with the floor above); few = the few-miss path where a request fits it, block = the"
echo "# block-wide path only; HiSparse = bench/data/hisparse_grid.txt; ceil = the gather of the same rows; R/call = per call"
echo "# in a 16-call graph (M = 0)"
awk 'FNR==1 { f++ }
     f==1 && $1 !~ /^#/ && NF==4 { hs[$1" "$2" "$3] = $4; next }
     f>=2 && $1=="comp" { k=$3" "$4" "$5; p=$NF; v[k" "p]=$8; if (p=="few") { ord[++n]=k; ce[k]=$15; rc[k]=$(NF-2) } }
     END {
       printf "%5s %6s %5s | %8s %8s %6s | %8s %6s | %8s %6s | %8s %8s\n", "batch", "B", "M", "few", "block", "f/b", "HiSp", "f/HiSp", "fused", "fu/HiS", "ceil", "R/call"
       lg=0; m=0; over=""; no=0; nh=0
       for (i=1;i<=n;i++) { k=ord[i]; split(k, q, " "); a=v[k" few"]; bb=v[k" block"]; h=(k in hs)?hs[k]:""
         r=(bb>0)?a/bb:0; if (r>0) { lg+=log(r); m++ }
         rh=(h!="")?sprintf("%6.2f",a/h):"     -"; if (h!="") { nh++; if (a/h>0.8) { no++; over=over" ["k"]" } }
         fu=(k" fused" in v)?v[k" fused"]:""; fh=(fu!="" && h!="")?sprintf("%6.2f",fu/h):"     -"
         if (fu!="" && h!="") { nfh++; if (fu/h>0.8) nfo++ }
         printf "%5s %6s %5s | %8.2f %8.2f %6.3f | %8s %s | %8s %s | %8s %8s\n", q[1], q[2], q[3], a, bb, r, (h!=""?h:"n/a"), rh, (fu!=""?fu:"-"), fh, ce[k], rc[k] }
       if (m) printf "geomean few/block over %d configurations: %.3f\n", m, exp(lg/m)
       printf "few > 0.8x HiSparse in %d of %d comparable configurations:%s\n", no, nh, over
       if (nfh) printf "fused > 0.8x HiSparse in %d of %d comparable configurations with misses 0, 32\n", nfo, nfh }' \
  "$root/bench/data/hisparse_grid.txt" "$out/grid.txt" "$out/grid_fused.txt"
echo "# phases (phase-timing build; mean us from the plan kernel's start; columns: init hits claims|dedupe ranks victims pairs locs end)"
grep -h "^# breakdown\|^# phases" "$out/phases.txt" 2>/dev/null | grep -v "^# phases:" | head -80
echo "total $(( $(date +%s) - t0 )) s; logs in $out"
exit $rc
