/*
 * dhs_cuda.h - CUDA-only entry points of dhisparse (see docs/CUDA.md).
 *
 * The CUDA backend (dhs_backend_cuda_create in dhs.h) owns two streams:
 *   - the *compute stream*: the resolver's recovery gathers run on it, and the
 *     engine must launch the attention that reads the returned locations on
 *     it (or order its own stream after it). A gather issued by dhs_resolve is
 *     visible to every later kernel on this stream; no host sync is needed.
 *   - the *side stream*: backups (device -> host) and population
 *     (host -> device). Each side copy first waits for the work already
 *     issued on the compute stream, then completes on its own.
 *
 * Example usage (engine side):
 *
 *   dhs_backend *be;
 *   if (dhs_backend_cuda_create(0, &be) != DHS_OK) ...;     // UNSUPPORTED: no device
 *   dhs_cuda_set_stream(be, (void *)my_stream);            // optional: use the engine's stream
 *   ... dhs_resolve(ctx, group, k, n, items);              // gathers queued on the stream
 *   cudaStream_t s = (cudaStream_t)dhs_cuda_stream(be);
 *   flash_mla_sparse_decode<<<..., s>>>(pool, loc, ...);   // reads pool[loc[i]]
 *
 * Every function accepts only a backend made by dhs_backend_cuda_create; given
 * another (or NULL) it returns NULL / DHS_ERR_INVALID_ARG. Built without
 * CUDA, they exist and return NULL / DHS_ERR_UNSUPPORTED.
 */
#ifndef DHS_CUDA_H
#define DHS_CUDA_H

#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The compute stream as a cudaStream_t (cast from void *). NULL when `be` is
   not a CUDA backend. */
void *dhs_cuda_stream(dhs_backend *be);

/* The side stream (backups, population) as a cudaStream_t. */
void *dhs_cuda_side_stream(dhs_backend *be);

/* Makes `stream` (a cudaStream_t of the backend's device, owned by the caller,
   which must keep it alive until it is replaced or the backend destroyed) the
   compute stream; NULL restores the backend's own stream. Work issued so far
   on the previous compute stream is ordered before later work on the new one
   (an event, no host sync). cudaStreamLegacy / cudaStreamPerThread are valid. */
dhs_status dhs_cuda_set_stream(dhs_backend *be, void *stream);

/* Upper bound on the thread blocks (256 threads, one warp per row) of one
   gather launch; 0 restores the default (4 per multiprocessor). */
dhs_status dhs_cuda_set_gather_blocks(dhs_backend *be, int32_t max_blocks);

/* Thread blocks (256 threads) of each copy on the split resolve's copy queue
   (dhs_resolve_device with DHS_RESOLVE_SPLIT); 0 restores the default (a quarter of the
   multiprocessors: 33 on an H200). Those copies run beside the compute
   stream's kernels: fewer blocks leave them more of each multiprocessor, and
   a few dozen already keep enough rows in flight for the link (at 100K,
   C = 20 on an H200 the step took 60.09 ms with 33 blocks, 66.87 ms
   with 132). */
dhs_status dhs_cuda_set_copy_queue_blocks(dhs_backend *be, int32_t blocks);

/* Profiling hook: fn(user, mark) is called on the host while the device
   resolver issues its kernels on the compute stream, so the caller can record
   a cudaEvent there and time each phase on the device:
     DHS_CUDA_MARK_PLAN  before the plan kernel of a dhs_resolve_device call
                         (and before the promotion kernel of dhs_group_done)
     DHS_CUDA_MARK_COPY  between the plan and the miss-copy kernel
     DHS_CUDA_MARK_END   after the last kernel of the call
   An event recorded between the plan and the copy kernel ends their
   programmatic overlap, so a profiled call is a little slower than an
   unprofiled one. fn must not call back into the library. NULL turns it off.
   Calls while a stream capture is open are the caller's to ignore (an event
   recorded there becomes a graph node). */
enum { DHS_CUDA_MARK_PLAN = 1, DHS_CUDA_MARK_COPY = 2, DHS_CUDA_MARK_END = 3 };
typedef void (*dhs_cuda_mark_fn)(void *user, int mark);
dhs_status dhs_cuda_set_marker(dhs_backend *be, dhs_cuda_mark_fn fn, void *user);

/* The last CUDA error (a cudaError_t value) a backend call failed with, 0 if
   none; DHS_ERR_BACKEND / DHS_ERR_DEVICE_NOMEM results carry it here. */
int dhs_cuda_last_error(const dhs_backend *be);

#ifdef __cplusplus
}
#endif
#endif
