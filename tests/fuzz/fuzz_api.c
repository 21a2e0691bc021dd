/* fuzz_api.c - libFuzzer entry point for the dhisparse public API.
 * Build: cmake -S . -B build-fuzz -DDHS_FUZZ=ON -DDHS_CUDA=OFF -DCMAKE_C_COMPILER=clang
 *        cmake --build build-fuzz --target dhs_fuzz
 * Run:   scripts/fuzz.sh (see docs/TESTING.md). The decode and every check live
 * in fuzz_harness.c, shared with tests/core/test_fuzz_regress.c. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz/fuzz_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_run(data, size, NULL);
    return 0;
}
