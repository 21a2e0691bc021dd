/* dres.cuh - host launchers of the device resolver kernels (dres.cu), the
 * CUDA side of the specification in core/dres_spec.h.
 *
 * Every launcher enqueues on stream s with a fixed grid (CUDA-graph
 * capturable), allocates nothing and never synchronises the host:
 *   - resolve: the plan kernel (one block per round position, grid N =
 *     st->N; a programmatic dependent of the kernel before it on s, which it
 *     waits for before reading anything) then the copy kernel (a persistent
 *     grid of copy_blocks blocks that reads npairs[] from device memory; one
 *     block that only stores the error word when payload == 0), launched as
 *     a programmatic dependent; it returns after the error store when the
 *     plan's last block published that no block left pairs (scratch);
 *     st->plan_flags (dres_spec.h) picks the plan's miss path;
 *   - promote: the promotion kernel (one block per round position) then the
 *     copy kernel for the arena -> hot pairs;
 *   - reset: one request slot's hot state back to empty;
 *   - copy: the copy kernel alone (moves every pair of the last call).
 * `st` is a host copy of the state descriptor whose pointers are device
 * memory; `rd`, `sel` and `loc` are device memory. `scratch` is
 * dhs_dres_scratch_bytes() of device memory initialised once with
 * dhs_dres_scratch_init (it carries the first-error key of a call from the
 * plan kernel's blocks to the copy kernel, which stores it into st->err and
 * resets it; without payload the copy kernel runs as one block for that;
 * and the plan blocks' ticket and the copy kernel's skip flag).
 *
 * Plain C header: included by cuda_backend.c and by .cu files.
 */
#ifndef DHS_CUDA_DRES_CUH
#define DHS_CUDA_DRES_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/dres_spec.h"

#ifndef DHS_DRES_THREADS
#define DHS_DRES_THREADS 1024    /* plan / promote kernel block (512 or 1024) */
#endif
#define DHS_DRES_MAX_ENTRIES 16384 /* k_max * max_k of one request, at most */
#define DHS_DRES_COPY_THREADS 256 /* copy kernel block: 8 warps, one row each */
#define DHS_DRES_COPY_BLOCKS_PER_SM 4 /* the resolve copy kernel's grid per SM (the backend's default) */

size_t dhs_dres_scratch_bytes(void);

/* Phase timestamps of the plan kernel (benchmarks only): in a build with DRES_PHASE_TIMING (CMake
   -DDHS_DRES_PHASE_TIMING=ON), thread 0 of block 0 of every plan kernel adds the clock64 time from its
   start to each block-wide boundary it passes, per path (0: the block-wide miss path or no miss,
   1: the few-miss path). This synchronises the device, then gives per boundary i < DHS_DRES_PHASES the
   calls that passed it and their mean microseconds from the start (cycles converted with globaltimer);
   reset != 0 zeroes the sums afterwards. Boundaries: 0 start, 1 shared init, 2 hits (pass 1 done),
   3 claims (block) / distinct misses + window masks (few), 4 ranks + dmiss (block), 5 victims, 6 copy
   list (block), 7 misses' locations + stats, 8 end. cudaErrorNotSupported without the macro. */
#define DHS_DRES_PHASES 9
cudaError_t dhs_dres_phase_read(int path, int reset, double *mean_us, unsigned long long *calls);

/* Benchmarks only: the preferred shared-memory carveout of every resolver kernel
   (cudaFuncAttributePreferredSharedMemoryCarveout: percent 0..100 of the SM's unified L1 / shared storage,
   or -1 for the driver's default), process-wide until set again. Whether the plan kernel's block and the
   copy kernel's blocks (launched beside it as programmatic dependents) can share an SM, and whether the SM
   must change its configuration between the two, may depend on it. cudaErrorInvalidValue outside -1..100. */
cudaError_t dhs_dres_set_carveout(int percent);
/* Tests: the direct kernel's grid (DRES_MODE_DIRECT) at most per_sm blocks per SM (1..64), each block taking
   as many 256-entry tiles of its request as that needs; 0: one block per request (every tile in one block);
   -1: the library's (4). Process-wide. cudaErrorInvalidValue outside -1..64. */
cudaError_t dhs_dres_set_direct_blocks(int per_sm);
cudaError_t dhs_dres_scratch_init(void *scratch, cudaStream_t s);

cudaError_t dhs_dres_resolve_launch(const dres_state *st, const dres_round *rd, int32_t k, const int32_t *sel,
                                    int32_t *loc, int payload, void *scratch, int32_t copy_blocks, cudaStream_t s);
/* The split resolve's copy queue (DHS_RESOLVE_SPLIT): sources 1..nsrc-1
   are copied on `queue` with `blocks` blocks each, after source 0's copy on
   the compute stream (recorded in ev[0]); ev[si] is recorded after source
   si's copy. ev has nsrc entries. */
typedef struct dhs_dres_split {
    cudaStream_t queue;
    cudaEvent_t *ev;
    int32_t blocks;
} dhs_dres_split;
/* the same with a profiling hook: mark(user, DHS_CUDA_MARK_COPY) between the plan and the copy launch;
   split: NULL, or copy sources >= 1 on split->queue (with payload and nsrc > 1); direct (DRES_MODE_DIRECT):
   the direct kernel alone (blocks of 256 entries of one request; a valid entry not served directly is an
   error, nothing is copied; its last block stores the call's first error), split ignored */
cudaError_t dhs_dres_resolve_launch_mark(const dres_state *st, const dres_round *rd, int32_t k, const int32_t *sel,
                                         int32_t *loc, int payload, void *scratch, int32_t copy_blocks, cudaStream_t s,
                                         void (*mark)(void *, int), void *user, const dhs_dres_split *split,
                                         int direct);
cudaError_t dhs_dres_promote_launch(const dres_state *st, const dres_round *rd, int payload, int32_t copy_blocks,
                                    cudaStream_t s);
/* dhs_dres_promote_launch of every group in two launches: st_dev is the [G] state array in device memory,
   st_host the same states on the host (N and row_stride are read from it) */
/* the round's tail locations of every group (grid.y), source and round position: one thread per
   (source, position), dres_tail_loc_one */
cudaError_t dhs_dres_tail_locs_launch(const dres_state *st_dev, int32_t G, int32_t nsrc_max, int32_t n_round,
                                      const dres_round *rd, int32_t req_stride, int64_t src_stride, int32_t *loc,
                                      cudaStream_t s);
/* the round's page tables of every group (grid.y): one block per (source, position) (grid.x), its threads
   over the pages, dres_page_table_one */
cudaError_t dhs_dres_page_tables_launch(const dres_state *st_dev, int32_t G, int32_t nsrc_max, int32_t n_round,
                                        const dres_round *rd, int32_t page_stride, int64_t src_stride, int32_t *tab,
                                        cudaStream_t s);
cudaError_t dhs_dres_promote_all_launch(const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                        const dres_round *rd, int payload, int32_t copy_blocks, cudaStream_t s);
cudaError_t dhs_dres_reset_launch(const dres_state *st, int32_t slot, cudaStream_t s);
cudaError_t dhs_dres_copy_launch(const dres_state *st, int32_t copy_blocks, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
