/* publish.cu - the publish-list kernel (publish.cuh). */
#include <stdint.h>

#include "cuda/publish.cuh"

/* A round begin's descriptor and changed tables in one launch (backend.h publish_list): block b copies
 * pieces b, b + gridDim.x, ... Each piece is at most a few KiB, from mapped pinned host memory to device
 * memory. The sources are mirrors the host rewrites between rounds, so they are read with ld.global.cv
 * (fetched again, never served from a stale cached line), as is the list. Widest access the piece's
 * alignment allows: 16-byte vectors, else 4-byte words, else bytes. */
static __global__ void __launch_bounds__(DHS_PUBLISH_THREADS) dhs_publish_kernel(const uint64_t *list, int32_t n)
{
    __shared__ uint64_t piece[3];
    for (int32_t i = (int32_t)blockIdx.x; i < n; i += (int32_t)gridDim.x) {
        if (threadIdx.x < 3) piece[threadIdx.x] = __ldcv((const unsigned long long *)list + 3 * (int64_t)i + threadIdx.x);
        __syncthreads();
        const uint64_t dst = piece[0], src = piece[1], bytes = piece[2];
        __syncthreads(); /* piece is rewritten by the next iteration */
        const uint64_t any = dst | src | bytes;
        if ((any & 15u) == 0) {
            const uint4 *s = (const uint4 *)src;
            uint4 *d = (uint4 *)dst;
            for (uint64_t v = threadIdx.x; v < bytes / 16u; v += DHS_PUBLISH_THREADS) d[v] = __ldcv(s + v);
        } else if ((any & 3u) == 0) {
            const unsigned int *s = (const unsigned int *)src;
            unsigned int *d = (unsigned int *)dst;
            for (uint64_t v = threadIdx.x; v < bytes / 4u; v += DHS_PUBLISH_THREADS) d[v] = __ldcv(s + v);
        } else {
            const unsigned char *s = (const unsigned char *)src;
            unsigned char *d = (unsigned char *)dst;
            for (uint64_t v = threadIdx.x; v < bytes; v += DHS_PUBLISH_THREADS) d[v] = __ldcv(s + v);
        }
    }
}

extern "C" cudaError_t dhs_cuda_publish_launch(const dhs_pub *list, int32_t n, cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    if (!list) return cudaErrorInvalidValue;
    const int32_t blocks = n < DHS_PUBLISH_MAX_BLOCKS ? n : DHS_PUBLISH_MAX_BLOCKS;
    dhs_publish_kernel<<<(unsigned)blocks, DHS_PUBLISH_THREADS, 0, s>>>((const uint64_t *)list, n);
    return cudaGetLastError();
}
