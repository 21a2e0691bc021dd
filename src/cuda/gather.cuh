/* gather.cuh - host launchers of the row-gather kernel family (gather.cu).
 *
 * One kernel moves n rows of row_bytes each, pair i copying
 * row_bytes from pairs[i].src to pairs[i].dst. Source and destination may be
 * device memory or mapped pinned host memory (UVA: a cudaHostAlloc'ed
 * pointer is a valid device pointer), so the same kernel serves
 *   - the resolver's recovery path (pinned host -> device pool, zero-copy),
 *   - backups (device -> pinned host) and population (host -> device),
 *   - device -> device moves (staging promotion).
 *
 * Convention: row_bytes is a multiple of 16 and every src/dst is 16-byte
 * aligned (DHS_ALIGN); the kernel moves 16-byte vectors. One warp per row;
 * each lane issues its 16-byte loads before its stores. The pairs array
 * itself must be readable by the device: device memory or mapped pinned host
 * memory (each block reads its pairs with one coalesced load per thread).
 * Pairs must not overlap each other's destinations.
 *
 * Plain C header: included by the C11 host code (cuda_backend.c) and by .cu.
 */
#ifndef DHS_CUDA_GATHER_CUH
#define DHS_CUDA_GATHER_CUH

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/backend.h"

#define DHS_GATHER_THREADS 256 /* threads per block: 8 warps, 8 rows in flight per block */
#define DHS_GATHER_WARPS (DHS_GATHER_THREADS / 32)

/* Grid for n rows: one warp per row, capped at max_blocks (> 0). */
int32_t dhs_cuda_gather_grid(int64_t n, int32_t max_blocks);

/* Launches the gather of n rows on stream s with `blocks` blocks of
   DHS_GATHER_THREADS threads. pairs: [n] {src,dst} readable by the device.
   Returns the launch status (cudaGetLastError after the launch). */
cudaError_t dhs_cuda_gather_launch(const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes,
                                   int32_t blocks, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
