/* publish.cuh - host launcher of the publish-list kernel (publish.cu).
 *
 * The device resolver's round begin publishes its round descriptor and the
 * changed tables of its requests: a list of pieces {dst, src, bytes} (backend.h
 * dhs_pub), each from mapped pinned host memory to device memory. One kernel
 * launch copies the whole list, where a cudaMemcpyAsync per piece cost the
 * host 3.5-3.9 us each and a round begin made up to 54 of them at C = 64.
 *
 * Plain C header: included by the C11 host code (cuda_backend.c) and by .cu.
 */
#ifndef DHS_CUDA_PUBLISH_CUH
#define DHS_CUDA_PUBLISH_CUH

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/backend.h"

#define DHS_PUBLISH_THREADS 128    /* threads per block of the publish kernel: a 2 KiB piece in one pass */
#define DHS_PUBLISH_MAX_BLOCKS 1024 /* blocks of one publish launch at most */

/* Launches the copy of a publish list (backend.h dhs_pub: n pieces {dst, src, bytes}) on stream s: one
   block per piece, up to DHS_PUBLISH_MAX_BLOCKS. The list and the sources: mapped pinned host memory;
   destinations: device memory, not overlapping. Returns the launch status. */
cudaError_t dhs_cuda_publish_launch(const dhs_pub *list, int32_t n, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
