/* fuzz_harness.h - decode a byte string into a small dhisparse architecture,
 * configuration, CPU backend options and a sequence of public API calls, run
 * them against a shadow model and abort() on the first discrepancy.
 *
 * Shared by the libFuzzer entry point (tests/fuzz/fuzz_api.c, clang) and the
 * plain replay test (tests/core/test_fuzz_regress.c, gcc), which includes
 * fuzz_harness.c directly. See docs/TESTING.md.
 */
#ifndef DHS_FUZZ_HARNESS_H
#define DHS_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct fz_counts {
    uint64_t ops;          /* API calls issued (both twins count once) */
    uint64_t ok, errors;   /* calls answered DHS_OK / an error or DHS_WAIT */
    uint64_t faults;       /* calls that met an injected fault */
    uint64_t resolved;     /* locations read back and compared */
    uint64_t rounds;       /* rounds closed */
    uint64_t early_ends;   /* of which closed with dhs_round_end_early */
    uint64_t created;      /* contexts created */
    uint64_t shared;       /* requests opened on a shared prefix */
} fz_counts;

/* Runs one input. Returns 0 when every check held; on a discrepancy prints
   what differs (stderr) and calls abort(). Set the environment variable
   DHS_FUZZ_TRACE=1 to print every call and its status. `counts` may be NULL;
   it accumulates. */
int fz_run(const uint8_t *data, size_t size, fz_counts *counts);

#endif
