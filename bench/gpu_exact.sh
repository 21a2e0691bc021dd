#!/usr/bin/env bash
# gpu_exact.sh - exactness of the reference model with the hierarchy on the
# GPU: builds the dhs tool with the CUDA backend (CMake; cJSON from a carried
# copy in build-cjson/ when the machine lacks libcjson-dev) and runs
# `dhs run --backend cuda --check` for each layout and policy, compared with
# all-resident storage. Usage: bench/gpu_exact.sh   (logs to $OUT when set)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
. "$root/bench/gpu_lib.sh"
cmake -S "$root" -B "$root/build-gcuda" -DDHS_CUDA=ON -DDHS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release "${cj[@]}" \
  > "$out/exact_build.log" 2>&1 && cmake --build "$root/build-gcuda" -j"$(nproc)" --target dhs_tool >> "$out/exact_build.log" 2>&1 \
  || { tail -30 "$out/exact_build.log"; echo "BUILD FAILED"; exit 1; }
rc=0
printf '%-10s %-6s %-6s %s\n' layout policy seed result
for cfg in "own lru 1" "own lfu 9" "own clock 4" "follow fifo 5" "follow lfu 6" "compressed lru 7" "compressed lfu 8"; do
  set -- $cfg
  j=$("$root/build-gcuda/dhs" run --backend cuda --check --layout "$1" --policy "$2" --seed "$3" \
        --sessions 8 --context 2048 --tokens 24 --json 2>"$out/exact_$1_$2.err")
  r=$?
  echo "$j" > "$out/exact_$1_$2.json"
  s=$(echo "$j" | grep -o '"identical":[a-z]*\|"logit_mismatches":[0-9]*\|"reclaims":[0-9]*\|"staging_rows":[0-9]*' | tr '\n' ' ')
  printf '%-10s %-6s %-6s rc=%d %s\n' "$1" "$2" "$3" "$r" "$s"
  [ $r = 0 ] || { rc=1; tail -3 "$out/exact_$1_$2.err"; }
done
# the randomised harness with the hierarchy on the GPU: every located row is
# read back from device memory and compared with its original bytes
printf '\n%-52s %s\n' "dhs verify --backend cuda" result
for args in "--requests 16 --steps 120" "--requests 16 --steps 120 --pressure high --faults 0.01" \
            "--requests 16 --steps 40 --spec 8 --compress 4 --consumers glm" \
            "--requests 16 --steps 40 --spec 8 --compress 4 --consumers v41 --pressure high"; do
  j=$(timeout 240 "$root/build-gcuda/dhs" verify --backend cuda --seed 11 $args --json 2>"$out/verify.err")
  r=$?
  s=$(echo "$j" | grep -o '"entries": *[0-9]*\|"violations": *[0-9]*\|"waits": *[0-9]*\|"reclaims": *[0-9]*\|"staging_rows_peak": *[0-9]*\|"faults_injected": *[0-9]*' | tr '\n' ' ')
  printf '%-52s rc=%d %s\n' "$args" "$r" "$s"
  [ $r = 0 ] || { rc=1; tail -3 "$out/verify.err"; }
done
exit $rc
