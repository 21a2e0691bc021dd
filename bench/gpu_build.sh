#!/usr/bin/env bash
# gpu_build.sh - builds libdhs (core + CPU + CUDA backends), test_cuda and
# gpu_bench with nvcc/gcc directly: no CMake, no cJSON (the device machine
# lacks libcjson-dev). Usage: bench/gpu_build.sh [build-dir]  (default build-gpu)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build-gpu}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda=$(cd "$(dirname "$nvcc")/.." && pwd)
cc=${CC:-gcc}
mkdir -p "$out/obj"
inc="-I$root/include -I$root/src -I$cuda/include"
cflags="-std=c11 -O2 -g -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -DDHS_HAVE_CUDA=1 $inc"
nvflags="-arch=sm_90 -O3 -g -DDHS_HAVE_CUDA=1 -D_POSIX_C_SOURCE=200809L -I$root/include -I$root/src -Xcompiler=-Wall,-Wextra,-Werror"
jobs=$(nproc 2>/dev/null || echo 4)

# library objects, in parallel
{
  for f in "$root"/src/core/*.c "$root"/src/cpu/*.c "$root"/src/cuda/*.c; do
    [ -e "$f" ] && echo "$cc $cflags -c $f -o $out/obj/$(basename "$f").o"
  done
  for f in "$root"/src/cuda/*.cu; do
    [ -e "$f" ] && echo "$nvcc $nvflags -c $f -o $out/obj/$(basename "$f").o"
  done
} | xargs -P "$jobs" -I{} sh -c '{}'
rm -f "$out/libdhs.a"
ar rcs "$out/libdhs.a" "$out"/obj/*.o

# the resolver part of the test and bench needs the core (dhs_ctx_create)
extra=""
if ! nm "$out/libdhs.a" 2>/dev/null | grep -c " T dhs_ctx_create$" >/dev/null; then
  extra="-DDHS_TEST_NO_CORE"
  echo "gpu_build: core not found in libdhs.a: resolver tests and benchmarks left out" >&2
fi
libs="-L$cuda/lib64 -L$cuda/targets/x86_64-linux/lib -lcudart -lstdc++ -lpthread -lm -ldl -lrt"
$cc $cflags $extra -I"$root/tests" "$root/tests/cuda/test_cuda.c" "$out/libdhs.a" $libs -o "$out/test_cuda"
$nvcc $nvflags $extra "$root/bench/gpu_bench.cu" "$out/libdhs.a" -o "$out/gpu_bench" -lpthread -lm
echo "gpu_build: built $out/test_cuda $out/gpu_bench"
