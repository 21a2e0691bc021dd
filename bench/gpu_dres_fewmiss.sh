#!/usr/bin/env bash
# gpu_dres_fewmiss.sh - the device resolver's few-miss path on a GPU machine:
#   1. build (CMake, -DDHS_CUDA=ON, Release): dhs_tool, test_dres_cuda, test_dres_graph;
#   2. test_dres_cuda and test_dres_graph (kernels vs the C specification);
#   3. `dhs bench resolve --backend cuda --layout compact --queries 1 --breakdown` over
#      batch 1/8/64/256 x hot 2048/4096/16384/65536 x misses 0/32/300/2048;
#   4. with DRES_BASE_CU=<file> (a dres.cu of another tree): the same grid with that file built in
#      its place, side by side (the tree's file is restored afterwards).
# Logs under $OUT (default build-fewmiss/out).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-fewmiss/out}
b=$root/build-fewmiss/b
mkdir -p "$out" "$b"
export PATH=$PATH:/usr/local/cuda/bin
. "$root/bench/gpu_lib.sh"
# a cJSON built beside the tree (CJSON_DIR, default ../build-cjson) when gpu_lib.sh found none
cjd=${CJSON_DIR:-$root/../build-cjson}
if [ ${#cj[@]} = 0 ] && [ ! -f /usr/include/cjson/cJSON.h ] && [ -d "$cjd" ]; then
  cj=(-DCJSON_INCLUDE_DIR="$cjd/include" -DCJSON_LIBRARY="$cjd/lib/libcjson.so")
  export LD_LIBRARY_PATH="$cjd/lib:${LD_LIBRARY_PATH:-}"
fi
model_build "$out/build.log" dhs_tool test_dres_cuda test_dres_graph
rc=0
for t in test_dres_cuda test_dres_graph; do
  t1=$(date +%s)
  DHS_TEST_SEED=${DRES_SEED:-20261201} timeout 200 "$b/$t" > "$out/$t.log" 2>&1
  r=$?
  [ $r = 0 ] || rc=1
  echo "$t: rc=$r ($(( $(date +%s) - t1 )) s) $(grep -h 'configurations\|passed\|failed\|FAIL' "$out/$t.log" | tail -3 | tr '\n' ' ')"
  [ $r = 0 ] || tail -20 "$out/$t.log"
done
dhs=$(find "$b" -maxdepth 2 -name dhs -type f -perm -u+x | head -1)
grid() {
  "$dhs" bench resolve --backend cuda --layout compact --queries 1 --breakdown --reps ${DRES_REPS:-100} \
    --batch 1,8,64,256 --hot 2048,4096,16384,65536 --misses 0,32,300,2048 > "$1" 2>&1
  echo "grid $1: rc=$?"
}
t1=$(date +%s)
grid "$out/grid_new.txt"
echo "grid: $(( $(date +%s) - t1 )) s"
if [ -n "${DRES_BASE_CU:-}" ]; then
  cp "$root/src/cuda/dres.cu" "$out/dres_new.cu.keep"
  cp "$DRES_BASE_CU" "$root/src/cuda/dres.cu"
  cmake --build "$b" -j"$(nproc)" --target dhs_tool >> "$out/build_base.log" 2>&1 && grid "$out/grid_base.txt"
  cp "$out/dres_new.cu.keep" "$root/src/cuda/dres.cu"
  rm -f "$out/dres_new.cu.keep"
fi
# short table: p50 of ours, new vs base where both ran
awk '$1=="comp"{k=$3" "$4" "$5; v=$8; if (FILENAME ~ /base/) base[k]=v; else { nw[k]=v; ord[++n]=k } }
     END{ printf "%-18s %9s %9s\n", "batch B M", "new", "base"; for (i=1;i<=n;i++) printf "%-18s %9s %9s\n", ord[i], nw[ord[i]], (ord[i] in base ? base[ord[i]] : "-") }' \
  "$out/grid_new.txt" $( [ -f "$out/grid_base.txt" ] && echo "$out/grid_base.txt" )
grep -h "floor" "$out/grid_new.txt" | head -2
exit $rc
