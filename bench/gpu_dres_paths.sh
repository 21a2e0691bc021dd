#!/usr/bin/env bash
# gpu_dres_paths.sh - the device resolver's plan kernel, new against old, in one process, on a GPU machine:
#   1. build (CMake, -DDHS_CUDA=ON, Release) dhs_tool, test_dres_cuda, test_dres_graph; in the background a
#      second build with -DDHS_DRES_PHASE_TIMING=ON (dhs_tool only, build-paths/ph);
#   2. test_dres_cuda (DHS_TEST_SCALE, default 0.1: every fourth configuration on the block-wide variant,
#      the others on the library's) and test_dres_graph (scale 0.05): kernels against the C specification;
#   3. `dhs bench resolve --backend cuda --layout compact --queries 1 --plan-path both` over batch 1/8/64/256
#      x B 2048/4096/16384/32768/65536 x misses 0/32/300/2048: every configuration timed with the library's
#      plan kernel (new: its hit pass and the few-miss path) and with the block-only variant (old: the hit
#      pass and miss path of the base tree), same selections, same process;
#   3b. only with DRES_COPYK=1: --plan-path copy (the few-miss path leaving its rows to the copy kernel)
#       at misses 0 and 32;
#   3c. the no-miss configurations again with --fresh-rounds (every call a round's first: its hits take the
#       protecting atomics), per call in a graph in the table's R/fresh column;
#   4. the phase-timing build: `--breakdown --plan-path both` on a small grid: plan kernel alone, copy
#      kernel alone, and the plan kernel's phase boundaries (mean us from its start, block 0);
#   5. on stdout: the table p50 new / old / HiSparse (bench/data/hisparse_grid.txt, the peer's 2026-12-03
#      figures on an H200) with the ratios, the geometric means, the configurations where new > 0.8x
#      HiSparse, and the phase lines. Every log goes into ONE file, $OUT/dres_paths_logs.tgz, when OUT is
#      set (a device run returns few files); the logs themselves are in build-paths/out.
# Usage: bash bench/gpu_dres_paths.sh   (env: OUT; DRES_REPS 30; DHS_TEST_SCALE 0.1; DRES_SEED 20261201;
#        DRES_COPYK 0). Expected under 3 minutes on an H200 host with 16 cores.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-paths/out
rm -rf "$out"
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
  sc=${DHS_TEST_SCALE:-0.1}
  [ $t = test_dres_graph ] && sc=0.05
  DHS_TEST_SCALE=$sc DHS_TEST_SEED=${DRES_SEED:-20261201} timeout 240 "$b/$t" > "$out/$t.log" 2>&1
  r=$?
  [ $r = 0 ] || rc=1
  echo "$t (scale $sc): rc=$r ($(( $(date +%s) - t1 )) s) $(grep -h 'configurations\|plan paths\|passed\|failed\|FAIL' "$out/$t.log" | tail -4 | tr '\n' ' ')"
  [ $r = 0 ] || tail -20 "$out/$t.log"
done
dhs=$(find "$b" -maxdepth 2 -name dhs -type f -perm -u+x | head -1)
t1=$(date +%s)
"$dhs" bench resolve --backend cuda --layout compact --queries 1 --plan-path both --reps "${DRES_REPS:-30}" -q \
  --batch 1,8,64,256 --hot 2048,4096,16384,32768,65536 --misses 0,32,300,2048 > "$out/grid.txt" 2>&1
echo "grid: rc=$? ($(( $(date +%s) - t1 )) s)"
if [ "${DRES_COPYK:-0}" = 1 ]; then
  t1=$(date +%s)
  "$dhs" bench resolve --backend cuda --layout compact --queries 1 --plan-path copy --reps "${DRES_REPS:-30}" -q \
    --batch 1,8,64,256 --hot 2048,4096,16384,32768,65536 --misses 0,32 > "$out/grid_copyk.txt" 2>&1
  echo "grid copy (misses 0, 32): rc=$? ($(( $(date +%s) - t1 )) s)"
else
  : > "$out/grid_copyk.txt"
fi
t1=$(date +%s) # without misses, every call a round's first (hits protected by atomics, as in a decode step)
"$dhs" bench resolve --backend cuda --layout compact --queries 1 --reps "${DRES_REPS:-30}" -q --fresh-rounds \
  --batch 1,8,64,256 --hot 2048,4096,16384,32768,65536 --misses 0 > "$out/grid_fresh.txt" 2>&1
echo "grid --fresh-rounds (misses 0): rc=$? ($(( $(date +%s) - t1 )) s)"
wait $phb
dph=$(find "$ph" -maxdepth 2 -name dhs -type f -perm -u+x | head -1)
if [ "$(cat "$out/build_ph.rc" 2>/dev/null)" = 0 ] && [ -n "$dph" ]; then
  t1=$(date +%s)
  "$dph" bench resolve --backend cuda --layout compact --queries 1 --plan-path both --breakdown --reps 30 -q \
    --batch 1,64 --hot 2048,65536 --misses 0,32,2048 > "$out/phases.txt" 2>&1
  echo "phases: rc=$? ($(( $(date +%s) - t1 )) s)"
else
  echo "phase-timing build FAILED"; tail -20 "$out/build_ph.log"; rc=1
fi
grep -h "floor" "$out/grid.txt" | head -1
echo "# p50 us per call (eager, each with the floor above); new = the library's plan kernel (its hit pass, the"
echo "# few-miss path where a request fits it), old = the block-only variant (the base tree's hit pass and miss"
echo "# path); HiSp = bench/data/hisparse_grid.txt; R/call = per call in a 16-call graph (M = 0, new);"
echo "# R/fresh = the same with --fresh-rounds (every call a round's first, its hits protected by atomics)"
awk 'FNR==1 { f++ }
     f==1 && $1 !~ /^#/ && NF==4 { hs[$1" "$2" "$3] = $4; next }
     FILENAME ~ /grid_fresh[.]txt$/ { if ($1=="comp") fr[$3" "$4" "$5] = $(NF-2); next }
     f>=2 && $1=="comp" { k=$3" "$4" "$5; p=$NF; v[k" "p]=$8; if (p=="few") { ord[++n]=k; rc[k]=$(NF-2) } }
     END {
       printf "%5s %6s %5s | %8s %8s %7s | %8s %7s %7s | %8s %8s %8s\n", "batch", "B", "M", "new", "old", "new/old", "HiSp", "new/HiS", "old/HiS", "copy", "R/call", "R/fresh"
       lg=0; m=0; lh=0; mh=0; lo=0; over=""; no=0; nh=0; oo=0
       for (i=1;i<=n;i++) { k=ord[i]; split(k, q, " "); a=v[k" few"]; bb=v[k" block"]; h=(k in hs)?hs[k]:""
         r=(bb>0)?a/bb:0; if (r>0) { lg+=log(r); m++ }
         rh="      -"; ro="      -"
         if (h!="") { nh++; rh=sprintf("%7.3f",a/h); lh+=log(a/h); mh++; if (a/h>0.8) { no++; over=over" ["k"]" }
                      if (bb>0) { ro=sprintf("%7.3f",bb/h); lo+=log(bb/h); if (bb/h>0.8) oo++ } }
         fu=(k" copy" in v)?sprintf("%8.2f",v[k" copy"]):"       -"
         printf "%5s %6s %5s | %8.2f %8.2f %7.3f | %8s %s %s | %s %8s %8s\n", q[1], q[2], q[3], a, bb, r, (h!=""?h:"n/a"), rh, ro, fu, rc[k], (k in fr)?fr[k]:"-" }
       if (m) printf "geomean new/old over %d configurations: %.3f\n", m, exp(lg/m)
       if (mh) printf "geomean over the %d comparable configurations: new/HiSparse %.3f, old/HiSparse %.3f\n", mh, exp(lh/mh), exp(lo/mh)
       printf "new > 0.8x HiSparse in %d of %d comparable configurations (old: %d):%s\n", no, nh, oo, over }' \
  "$root/bench/data/hisparse_grid.txt" "$out/grid.txt" "$out/grid_copyk.txt" "$out/grid_fresh.txt"
echo "# phases (phase-timing build; mean us from the plan kernel's start, block 0; path few = new, block = old;"
echo "# columns: init hits claims|dedupe ranks victims pairs locs end; new's init includes the loads it moved there)"
grep -h "^# breakdown\|^# phases" "$out/phases.txt" 2>/dev/null | grep -v "^# phases:" | sed 's/^# //' | head -40
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT" && tar czf "$OUT/dres_paths_logs.tgz" -C "$out" . && echo "logs: $OUT/dres_paths_logs.tgz"
fi
echo "total $(( $(date +%s) - t0 )) s; logs in $out"
exit $rc
