/* span_bench.cu - does reading the rows of one miss's sources from adjacent host addresses make the
 * zero-copy miss copy faster where the rows are scattered over a large pinned span? (An experiment for
 * the host layout: a group's sources are selected together, so every miss reads one row of each of the
 * group's nsrc sources at the same position. Today each source's host rows are its own chunks, so those
 * nsrc rows lie far apart; interleaved by position they would be nsrc x 656 adjacent bytes. Scattered
 * reads over many GiB reach about half the rate of compact ones on the lent machines, which huge pages
 * did not change: if the cost is one address translation per page touched, adjacent rows share it.)
 *
 * A pinned mapped span of up to SPAN_MAX GiB (cudaHostAlloc, 1 GiB chunks), m misses per call, each miss
 * nsrc rows of 656 B:
 *   sep  the nsrc rows of a miss at independent random places of the span (per-source chunks)
 *   adj  the nsrc rows of a miss adjacent, at one random place (interleaved by position)
 *   one  one row per miss (nsrc = 1: the same misses, 1/nsrc of the bytes)
 * The copy is the library's: one warp per row, 16-byte ld.global.nc.L1::no_allocate loads, st.global.cg
 * stores, the rows of a miss in consecutive warps (the resolver's pair order, miss i source si at
 * i * nsrc + si). Every repetition draws new places (a translation cached by a previous repetition would
 * flatter the figure). p50 of the repetitions, each between one event pair.
 * Usage: span_bench [spans_gib=1,8,32,64] [misses=512,5120] [nsrc=4] [reps=10]
 * Build: the span_bench target (CUDA builds), or nvcc -O3 -arch=sm_90 -Ibench -Isrc dev/span_bench.cu
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "cuda/ldst.cuh"

#define ROW 656
#define VECS (ROW / 16)
#define CHUNK ((size_t)1 << 30)
#define ROWS_PER_CHUNK (CHUNK / ROW)

__global__ void k_copy(const char *const *chunks, const int64_t *rows, int n, char *dst)
{
    const int lane = threadIdx.x & 31, nw = gridDim.x * (blockDim.x >> 5);
    for (int w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); w < n; w += nw) {
        const int64_t r = rows[w];
        const char *src = chunks[r / (int64_t)ROWS_PER_CHUNK] + (r % (int64_t)ROWS_PER_CHUNK) * (int64_t)ROW;
        char *d = dst + (int64_t)w * ROW;
        uint4 a = make_uint4(0, 0, 0, 0), b = a;
        if (lane < VECS) a = dhs_ld_nc_v4((const uint4 *)(src + 16 * lane));
        if (lane + 32 < VECS) b = dhs_ld_nc_v4((const uint4 *)(src + 16 * (lane + 32)));
        if (lane < VECS) dhs_st_cg_v4((uint4 *)(d + 16 * lane), a);
        if (lane + 32 < VECS) dhs_st_cg_v4((uint4 *)(d + 16 * (lane + 32)), b);
    }
}

static int cmpf(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng = 20261206;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int parse(char *s, int *v, int max)
{
    int n = 0;
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ",")) v[n++] = atoi(t);
    return n;
}

int main(int argc, char **argv)
{
    int spans[8] = {1, 8, 32, 64}, ns = 4, ms[8] = {512, 5120}, nm = 2;
    if (argc > 1) ns = parse(argv[1], spans, 8);
    if (argc > 2) nm = parse(argv[2], ms, 8);
    const int nsrc = argc > 3 ? atoi(argv[3]) : 4, reps = argc > 4 ? atoi(argv[4]) : 10;
    if (nsrc < 1 || nsrc > 16 || reps < 3 || reps > 100) return fprintf(stderr, "nsrc 1..16, reps 3..100\n"), 2;
    int smax = 0, mmax = 0;
    for (int i = 0; i < ns; i++) {
        if (spans[i] < 1 || spans[i] > 96) return fprintf(stderr, "spans 1..96 GiB\n"), 2;
        smax = spans[i] > smax ? spans[i] : smax;
    }
    for (int i = 0; i < nm; i++) {
        if (ms[i] < 1 || ms[i] > 100000) return fprintf(stderr, "misses 1..100000\n"), 2;
        mmax = ms[i] > mmax ? ms[i] : mmax;
    }
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    char **ch_h = (char **)calloc((size_t)smax, sizeof(char *)), **ch;
    int have = 0;
    for (; have < smax; have++) {
        char *p = NULL, *dp = NULL;
        if (cudaHostAlloc((void **)&p, CHUNK, cudaHostAllocMapped) != cudaSuccess) break;
        CK(cudaHostGetDevicePointer((void **)&dp, p, 0));
        memset(p, 7, 4096); /* the pages are resident once pinned */
        ch_h[have] = dp;
    }
    (void)cudaGetLastError();
    printf("device %s, %d SMs; pinned %d GiB in 1 GiB chunks (asked %d); row %d B, nsrc %d; p50 of %d, new places "
           "every repetition\n",
           pr.name, pr.multiProcessorCount, have, smax, ROW, nsrc, reps);
    if (have < 1) return fprintf(stderr, "no pinned memory\n"), 1;
    CK(cudaMalloc((void **)&ch, sizeof(char *) * (size_t)have));
    CK(cudaMemcpy(ch, ch_h, sizeof(char *) * (size_t)have, cudaMemcpyHostToDevice));
    const size_t nrows_max = (size_t)mmax * nsrc;
    int64_t *rows_h = (int64_t *)malloc(sizeof(int64_t) * nrows_max * reps), *rows;
    char *dst;
    CK(cudaMalloc((void **)&rows, sizeof(int64_t) * nrows_max * reps));
    CK(cudaMalloc((void **)&dst, nrows_max * ROW));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *t = (float *)malloc(sizeof(float) * (size_t)reps);
    if (!rows_h || !t) return fprintf(stderr, "out of host memory\n"), 1;
    printf("%8s %8s %8s | %10s %7s | %10s %7s | %10s %7s | %s\n", "span GiB", "misses", "rows", "sep us", "GB/s",
           "adj us", "GB/s", "one us", "GB/s", "adj / sep time");
    for (int si = 0; si < ns; si++) {
        const int S = spans[si] <= have ? spans[si] : have;
        const int64_t span_rows = (int64_t)S * (int64_t)ROWS_PER_CHUNK;
        for (int mi = 0; mi < nm; mi++) {
            const int m = ms[mi];
            float res[3];
            for (int mode = 0; mode < 3; mode++) {
                const int per = mode == 2 ? 1 : nsrc, n = m * per;
                for (int r = 0; r < reps; r++) {
                    int64_t *R = rows_h + (size_t)r * nrows_max;
                    for (int i = 0; i < m; i++) {
                        /* adj: nsrc rows inside one chunk, starting at a multiple of nsrc */
                        const int64_t base = (int64_t)(next() % (uint64_t)(span_rows / per)) * per;
                        for (int j = 0; j < per; j++)
                            R[(size_t)i * per + j] = mode == 1 ? base + j : (int64_t)(next() % (uint64_t)span_rows);
                        if (mode == 1 && (base % (int64_t)ROWS_PER_CHUNK) + per > (int64_t)ROWS_PER_CHUNK)
                            for (int j = 0; j < per; j++) R[(size_t)i * per + j] = base - per + j; /* stay in the chunk */
                    }
                }
                CK(cudaMemcpy(rows, rows_h, sizeof(int64_t) * nrows_max * reps, cudaMemcpyHostToDevice));
                const int thr = 256, grid = (n + 7) / 8 < pr.multiProcessorCount * 8 ? (n + 7) / 8 : pr.multiProcessorCount * 8;
                k_copy<<<grid, thr, 0, st>>>(ch, rows, n, dst); /* warm */
                CK(cudaStreamSynchronize(st));
                for (int r = 0; r < reps; r++) {
                    CK(cudaEventRecord(e0, st));
                    k_copy<<<grid, thr, 0, st>>>(ch, rows + (size_t)r * nrows_max, n, dst);
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    CK(cudaGetLastError());
                    CK(cudaEventElapsedTime(&t[r], e0, e1));
                    t[r] *= 1000.f;
                }
                qsort(t, (size_t)reps, sizeof *t, cmpf);
                res[mode] = t[reps / 2];
            }
            const double b4 = (double)m * nsrc * ROW, b1 = (double)m * ROW;
            printf("%8d %8d %8d | %10.2f %7.1f | %10.2f %7.1f | %10.2f %7.1f | %.3f\n", S, m, m * nsrc, res[0],
                   b4 / (res[0] * 1e3), res[1], b4 / (res[1] * 1e3), res[2], b1 / (res[2] * 1e3), res[1] / res[0]);
        }
    }
    for (int i = 0; i < have; i++) CK(cudaFreeHost(ch_h[i]));
    CK(cudaFree(ch));
    CK(cudaFree(rows));
    CK(cudaFree(dst));
    free(ch_h);
    free(rows_h);
    free(t);
    return 0;
}
