/* overlap.cuh - launchers of the attention split around the miss copy
 * (overlap.cu; the C reference and the shapes: dev/overlap/overlap.h;
 * docs/FLASHOFFLOAD.md §3).
 *
 * Every launcher only enqueues kernels (and, for dhs_cuda_ov_attend, one
 * cudaStreamWaitEvent) on `st`: no host synchronisation, no allocation, so a
 * step is capturable into a CUDA graph. Buffers are device memory (base: a
 * device array of device pointers; rows may be anywhere the device can read).
 * Returns cudaErrorInvalidValue for a bad shape or set, else the launch status.
 *
 * Plain C header: included by C11 host code (tests) and by .cu. */
#ifndef DHS_CUDA_OVERLAP_CUH
#define DHS_CUDA_OVERLAP_CUH

#include <cuda_runtime_api.h>

#include "dev/overlap/overlap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the kernels' shared-memory attribute (> 48 KiB). Call once before
   capturing a graph; the launchers call it themselves otherwise. */
cudaError_t dhs_cuda_ov_init(void);

/* scores of set `which` (DHS_OV_ALL / HITS / MISSES) into a->scores */
cudaError_t dhs_cuda_ov_scores(const dhs_ov_shape *s, int which, const dhs_ov_args *a, cudaStream_t st);
/* the exact reduction over every valid entry (a->scores complete) into a->out */
cudaError_t dhs_cuda_ov_reduce(const dhs_ov_shape *s, const dhs_ov_args *a, cudaStream_t st);
/* fast mode: partials of set `which` (HITS / MISSES) into a->pm, pl, pacc */
cudaError_t dhs_cuda_ov_partial(const dhs_ov_shape *s, int which, const dhs_ov_args *a, cudaStream_t st);
/* fast mode: merge of the partials into a->out */
cudaError_t dhs_cuda_ov_merge(const dhs_ov_shape *s, const dhs_ov_args *a, cudaStream_t st);

/* One attention step on stream st. copy_done: an event recorded after the
   miss copy (on any stream), or NULL when the copy is already ordered before
   st's work.
     DHS_OV_WHOLE  wait(copy_done); scores(ALL); reduce          (copy-then-attend)
     DHS_OV_EXACT  scores(HITS); wait(copy_done); scores(MISSES); reduce
     DHS_OV_FAST   scores(HITS); partial(HITS); wait(copy_done);
                   scores(MISSES); partial(MISSES); merge
   EXACT's output is byte-identical to WHOLE's; FAST's within DHS_OV_FAST_TOL. */
cudaError_t dhs_cuda_ov_attend(const dhs_ov_shape *s, int mode, const dhs_ov_args *a, cudaEvent_t copy_done,
                               cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
