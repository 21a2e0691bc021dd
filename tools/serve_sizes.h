/* serve_sizes.h - how `dhs bench serve` sizes one configuration (mode, C
 * sessions) under its device budget (cmd_bench_serve.c). `dhs serve-sim
 * --calibrate` simulates each measured configuration under the same split
 * (docs/SIM.md, Calibration), so both read it from here. */
#ifndef DHS_TOOLS_SERVE_SIZES_H
#define DHS_TOOLS_SERVE_SIZES_H

#include <stddef.h>
#include <stdint.h>

#include "dhs.h"
#include "model/model.h"
#include "model/run.h"

/* device bytes of the hierarchy for C sessions of `positions` (fixed: no history
   pages; the engine's index keys and draft ring per session on top) */
typedef struct sv_size {
    uint64_t resident_session;   /* rows + keys + ring of one resident session */
    uint64_t keys_session;       /* keys + ring (both storages keep them on the device) */
    uint64_t hier_fixed_lib;     /* the library's device bytes at C (history 0): M + resolver state */
    uint64_t host_session;       /* the full history on the host (payload rows) */
    uint64_t resolver;           /* the device resolver's state (outside M) */
    uint64_t fixed_M;            /* the library's pool M at C with no history (what fixed mode derives) */
    uint64_t staging, reserve;   /* of M: the staging arenas and the reserve */
    dhs_config lib;              /* the library's configuration at C (device_bytes: fixed_M) */
    int32_t sources;             /* payload sources sharing M */
} sv_size;

/* m: the model of base->model (created once by the caller); base: bench
   serve's run configuration with the context set. 0, or -1 with why. */
int bench_serve_sizes(const dhs_ref_model *m, const dhs_ref_run_cfg *base, int32_t C, sv_size *z, char *why, size_t wn);

/* The library's M of a hierarchy mode at C sessions (mode 1 fixed: derived,
   fixed_M; mode 2 adaptive: the whole budget less C sessions' index keys and
   the resolver state, the spare room holding imported history); 0 when C
   sessions' hot caches, tails, staging and keys do not fit the budget. */
uint64_t bench_serve_lib_bytes(const sv_size *z, int mode, int32_t C, uint64_t budget);

#endif
