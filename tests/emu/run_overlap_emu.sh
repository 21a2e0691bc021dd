#!/usr/bin/env bash
# run_overlap_emu.sh - builds and runs overlap_emu_test: the CUDA kernels of
# dev/overlap/overlap.cu executed on the CPU (cuda_shim.h: a thread per CUDA
# thread) and compared bit for bit with the C reference. For machines without
# a GPU; slow (minutes: thousands of threads per launch), so not in CTest.
# Usage: tests/emu/run_overlap_emu.sh [random cases]   (DHS_TEST_SEED replays)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
b=${EMU_BUILD:-$root/build-emu}
mkdir -p "$b"
# the kernels without the launchers (which use <<< >>>); dynamic shared memory from the shim
awk '/^\/\* -+ launchers \*\//{exit} {print}' "$root/dev/overlap/overlap.cu" |
  sed 's|#include "dev/overlap/overlap.cuh"|#include "dev/overlap/overlap.h"|; s|extern __shared__ float ov_sm\[\];|float *ov_sm = emu_dyn;|' \
  > "$b/overlap_kernels.inc"
grep -q 'ov_sm = emu_dyn' "$b/overlap_kernels.inc" || { echo "run_overlap_emu.sh: overlap.cu changed shape" >&2; exit 1; }
inc="-I$root/include -I$root -I$root/src -I$root/tests -I$root/tests/common -I$root/tests/emu -I$b"
g++ -std=c++20 -O1 -ffp-contract=off -pthread $inc -c "$root/tests/emu/overlap_emu.cpp" -o "$b/overlap_emu.o"
g++ -std=c++20 -O1 -pthread $inc -c "$root/tests/emu/cuda_shim.cpp" -o "$b/cuda_shim.o"
for f in model/numerics.c dev/overlap/overlap.c tests/emu/overlap_emu_test.c; do
  gcc -std=c11 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L $inc -c "$root/$f" -o "$b/$(basename "$f" .c).o"
done
g++ -pthread "$b/overlap_emu_test.o" "$b/overlap_emu.o" "$b/cuda_shim.o" "$b/numerics.o" "$b/overlap.o" -o "$b/overlap_emu_test" -lm
"$b/overlap_emu_test" "$@"
