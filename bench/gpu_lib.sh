# gpu_lib.sh - sourced by the bench/gpu_*.sh scripts after they set $root.
# cj: the CMake flags for a carried cJSON ({include/cjson/cJSON.h, lib/libcjson.so*} in third_party/cjson
# or build-cjson) when the machine lacks libcjson-dev; that lib directory goes on LD_LIBRARY_PATH.
cj=()
if [ ! -f /usr/include/cjson/cJSON.h ]; then
  for d in "$root/third_party/cjson" "$root/build-cjson"; do
    if [ -d "$d" ]; then
      cj=(-DCJSON_INCLUDE_DIR="$d/include" -DCJSON_LIBRARY="$d/lib/libcjson.so")
      export LD_LIBRARY_PATH="$d/lib:${LD_LIBRARY_PATH:-}"
      break
    fi
  done
fi
# row LABEL TEXT: one line of the closing summary table (labels ROW_W wide), echoed as it happens
summary=()
row() { summary+=("$(printf "%-${ROW_W:-34}s %s" "$1" "$2")"); echo "## ${summary[-1]}"; }
# model_build LOG TARGET...: configures $b (CUDA, tests, Release, the carried cJSON) and builds the targets;
# on failure prints the log's tail and "BUILD FAILED" and exits 1 (gpu_model.sh, gpu_step.sh, gpu_serve.sh)
model_build() {
  local log=$1 t0
  shift
  t0=$(date +%s)
  if [ -n "${DHS_GPU_BUILD:-}" ]; then # bench/gpu.sh's build: every target already there
    b=$DHS_GPU_BUILD
    echo "build: $b (bench/gpu.sh)"
    return
  fi
  cmake -S "$root" -B "$b" -DDHS_CUDA=ON -DDHS_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release "${cj[@]}" > "$log" 2>&1 &&
    cmake --build "$b" -j"$(nproc)" --target "$@" >> "$log" 2>&1 || { tail -30 "$log"; echo "BUILD FAILED"; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
}
# model_test LINES: runs $b/test_gpu_model (log in $out), prints its last LINES lines and its status; sets rc=1 on failure
model_test() {
  local t0 r
  t0=$(date +%s)
  "$b/test_gpu_model" > "$out/test_gpu_model.log" 2>&1
  r=$?
  tail -"$1" "$out/test_gpu_model.log"
  echo "test_gpu_model: rc=$r ($(( $(date +%s) - t0 )) s; 77 = skipped)"
  [ $r = 0 ] || rc=1
}
