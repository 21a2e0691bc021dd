/* l2host_bench.cu - does the GPU's L2 keep rows read from mapped pinned host memory, and can a kernel
 * start their transfer early with an L2 prefetch? (An experiment for the resolver's copy: its misses are
 * known several dependent round trips before their destinations are; if an L2 prefetch issued when a
 * miss is found lands the row in L2, the copy that follows reads L2 instead of waiting on the link.)
 *
 * Rows of 656 bytes at random places of a pinned span (cudaHostAlloc, mapped), n rows per call; the copy
 * is one warp per row, 16-byte ld.global.nc.L1::no_allocate loads (as src/cuda/dres.cu), st.global.cg
 * stores. p50 µs over the repetitions, each with one event pair:
 *   cold      L2 flushed (a 256 MiB memset), then the copy
 *   again     the copy, then the same copy timed (does L2 keep host lines across kernels?)
 *   pf-line   L2 flushed, prefetch.global.L2 of every 32-byte sector of the rows (one kernel), then
 *             the copy timed
 *   pf-bulk   the same with one cp.async.bulk.prefetch.L2 per row
 *   in-kernel one kernel: every warp prefetches its rows (bulk) or not, waits DELAY ns (the plan's
 *             remaining work), then copies them: the copy phase timed by clock64 (max over warps, µs at
 *             the SM clock), no-prefetch / prefetch
 * and the same copy from a device buffer (cold) for scale.
 * Answer on an H200 (bench/RESULTS.md): no. A second copy of the same rows, or one after an L2 prefetch
 * kernel, took as long as a cold one (32 rows 6.0 against 6.1 µs, 2,048 rows 41.7 against 40.1); in one
 * kernel a prefetch 20 µs ahead saved 0.5 µs at 32 rows and 2.3 µs of 38.5 at 2,048. The plan kernel
 * issuing one cp.async.bulk.prefetch.L2 per miss and source right after its hit pass was 0.96-1.12x the
 * library's path with rows together and up to 1.76x slower with them scattered, so it was not merged.
 * Usage: l2host_bench [n_rows_list=32,2048,16384] [reps=15] [delay_ns=20000]
 * Build: the l2host_bench target (CUDA builds), or nvcc -O3 -arch=sm_90 -Ibench -Isrc dev/l2host_bench.cu
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "cuda/ldst.cuh"

#define ROW 656
#define VECS (ROW / 16)

static __device__ __forceinline__ void copy_row(const char *src, char *dst, int lane)
{
    uint4 a = make_uint4(0, 0, 0, 0), b = a;
    if (lane < VECS) a = dhs_ld_nc_v4((const uint4 *)(src + 16 * lane));
    if (lane + 32 < VECS) b = dhs_ld_nc_v4((const uint4 *)(src + 16 * (lane + 32)));
    if (lane < VECS) dhs_st_cg_v4((uint4 *)(dst + 16 * lane), a);
    if (lane + 32 < VECS) dhs_st_cg_v4((uint4 *)(dst + 16 * (lane + 32)), b);
}

__global__ void k_copy(const char *src, const int64_t *rows, int n, char *dst)
{
    const int lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
    for (int w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); w < n; w += nw)
        copy_row(src + rows[w] * (int64_t)ROW, dst + (int64_t)w * ROW, lane);
}

__global__ void k_pf(const char *src, const int64_t *rows, int n, int bulk)
{
    const int lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
    for (int w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); w < n; w += nw) {
        const char *p = src + rows[w] * (int64_t)ROW;
        if (bulk) {
            if (lane == 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(ROW) : "memory");
        } else if (lane * 32 < ROW) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p + 32 * lane));
        }
    }
}

/* in-kernel: prefetch (pf) or not, spin delay_ns, then copy; cyc[0] = max copy-phase cycles over warps */
__global__ void k_pf_copy(const char *src, const int64_t *rows, int n, char *dst, int pf, long long delay_ns,
                          unsigned long long *cyc)
{
    const int lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
    const int w0 = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (pf)
        for (int w = w0; w < n; w += nw)
            if (lane == 0)
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src + rows[w] * (int64_t)ROW), "r"(ROW)
                             : "memory");
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if ((long long)(t - t0) >= delay_ns) break;
    }
    const long long c0 = clock64();
    for (int w = w0; w < n; w += nw) copy_row(src + rows[w] * (int64_t)ROW, dst + (int64_t)w * ROW, lane);
    __syncwarp();
    if (lane == 0) atomicMax(cyc, (unsigned long long)(clock64() - c0));
}

static int cmpf(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static float p50(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmpf);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    int ns[8] = {32, 2048, 16384}, nn = 3;
    if (argc > 1) {
        nn = 0;
        for (char *t = strtok(argv[1], ","); t && nn < 8; t = strtok(NULL, ",")) ns[nn++] = atoi(t);
    }
    const int reps = argc > 2 ? atoi(argv[2]) : 15;
    const long long delay = argc > 3 ? atoll(argv[3]) : 20000;
    if (reps < 3 || reps > 1000) return fprintf(stderr, "reps in 3..1000\n"), 2;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    const size_t span = (size_t)2 << 30, nrows_span = span / ROW;
    char *host, *hdev, *dst, *flush, *dspan;
    CK(cudaHostAlloc((void **)&host, span, cudaHostAllocMapped));
    memset(host, 7, span);
    CK(cudaHostGetDevicePointer((void **)&hdev, host, 0));
    CK(cudaMalloc((void **)&dspan, span));
    CK(cudaMemset(dspan, 7, span));
    const size_t fl = (size_t)256 << 20;
    CK(cudaMalloc((void **)&flush, fl));
    int nmax = 0;
    for (int i = 0; i < nn; i++) nmax = ns[i] > nmax ? ns[i] : nmax;
    CK(cudaMalloc((void **)&dst, (size_t)nmax * ROW));
    int64_t *rows_h = (int64_t *)malloc((size_t)nmax * 8), *rows;
    CK(cudaMalloc((void **)&rows, (size_t)nmax * 8));
    unsigned long long *cyc;
    CK(cudaMalloc((void **)&cyc, 8));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int clk_khz = 0;
    CK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0));
    printf("device %s, %d SMs, L2 %d MiB, SM clock %d MHz; span 2 GiB pinned mapped; row %d B; delay %lld ns; "
           "p50 of %d\n",
           pr.name, pr.multiProcessorCount, pr.l2CacheSize >> 20, clk_khz / 1000, ROW, delay, reps);
    printf("%8s %9s %9s %9s %9s %9s | %9s %9s | %s\n", "rows", "cold", "again", "pf-line", "pf-bulk", "dev-cold",
           "in-k nopf", "in-k pf", "µs");
    srand(20261206);
    float *t = (float *)malloc(sizeof(float) * (size_t)reps);
    if (!rows_h || !t) return fprintf(stderr, "out of host memory\n"), 1;
    for (int i = 0; i < nn; i++) {
        const int n = ns[i];
        for (int r = 0; r < n; r++) rows_h[r] = (int64_t)(((uint64_t)rand() << 31 | (uint64_t)rand()) % nrows_span);
        CK(cudaMemcpy(rows, rows_h, (size_t)n * 8, cudaMemcpyHostToDevice));
        const int thr = 256, grid = (n + 7) / 8 < pr.multiProcessorCount * 8 ? (n + 7) / 8 : pr.multiProcessorCount * 8;
        float res[7];
        for (int m = 0; m < 7; m++) {
            for (int r = 0; r < reps; r++) {
                CK(cudaMemsetAsync(flush, r & 0xff, fl, st));
                if (m == 1) k_copy<<<grid, thr, 0, st>>>(hdev, rows, n, dst);
                if (m == 2 || m == 3) k_pf<<<grid, thr, 0, st>>>(hdev, rows, n, m == 3);
                if (m == 5 || m == 6) CK(cudaMemsetAsync(cyc, 0, 8, st));
                CK(cudaEventRecord(e0, st));
                if (m <= 3) k_copy<<<grid, thr, 0, st>>>(hdev, rows, n, dst);
                if (m == 4) k_copy<<<grid, thr, 0, st>>>(dspan, rows, n, dst);
                if (m >= 5) k_pf_copy<<<grid, thr, 0, st>>>(hdev, rows, n, dst, m == 6, delay, cyc);
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                CK(cudaGetLastError());
                if (m >= 5) {
                    unsigned long long c;
                    CK(cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost));
                    t[r] = (float)((double)c / (clk_khz * 1e-3));
                } else {
                    CK(cudaEventElapsedTime(&t[r], e0, e1));
                    t[r] *= 1000.f;
                }
            }
            res[m] = p50(t, reps);
        }
        printf("%8d %9.2f %9.2f %9.2f %9.2f %9.2f | %9.2f %9.2f | %.2f MB, cold %.1f GB/s\n", n, res[0], res[1],
               res[2], res[3], res[4], res[5], res[6], n * (double)ROW / 1e6, n * (double)ROW / (res[0] * 1e3));
    }
    CK(cudaFreeHost(host));
    CK(cudaFree(dspan));
    CK(cudaFree(flush));
    CK(cudaFree(dst));
    CK(cudaFree(rows));
    CK(cudaFree(cyc));
    free(rows_h);
    free(t);
    return 0;
}
