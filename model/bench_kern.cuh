/* bench_kern.cuh - what the model's kernel benchmarks (model/kern_bench.cu,
 * model/mla_bench.cu) share: random 656-byte rows and selections filled on the
 * device, the timing of a call (p50 between events, back-to-back mean) and of
 * a graph, and their common options and device opening. */
#ifndef DHS_MODEL_BENCH_KERN_CUH
#define DHS_MODEL_BENCH_KERN_CUH

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "bench_cuda.h"        /* CK */
#include "model/attn_row.cuh" /* G_ROW, G_NOPE */

static __device__ __forceinline__ uint64_t hmix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* rows: FP8 codes without the NaN codes (bit 3 clear), tile scales 2^-7,
   small bf16 RoPE values */
static __global__ void k_fill_rows(uint4 *pool, int64_t nvec, uint64_t seed)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nvec; j += (int64_t)gridDim.x * blockDim.x) {
        const int v = (int)(j % (G_ROW / 16));
        uint64_t a = hmix(seed + 2 * (uint64_t)j), b = hmix(seed + 2 * (uint64_t)j + 1);
        uint4 x;
        if (v < G_NOPE / 16) {
            x = make_uint4((uint32_t)a & 0x77777777u, (uint32_t)(a >> 32) & 0x77777777u, (uint32_t)b & 0x77777777u,
                           (uint32_t)(b >> 32) & 0x77777777u);
        } else if (v == G_NOPE / 16) {
            const uint32_t s = 0x3c000000u; /* 2^-7 */
            x = make_uint4(s, s, s, s);
        } else {
            const uint32_t m = 0x003f003fu, e = 0x3c003c00u; /* bf16 ~ 2^-7 .. 2^-6, either sign */
            x = make_uint4(((uint32_t)a & m) | e | ((uint32_t)a & 0x80008000u), ((uint32_t)(a >> 32) & m) | e,
                           ((uint32_t)b & m) | e | ((uint32_t)b & 0x80008000u), ((uint32_t)(b >> 32) & m) | e);
        }
        pool[j] = x;
    }
}

static __global__ void k_fill_sel(int32_t *aidx, int64_t n, int64_t ctx, uint64_t seed)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
        aidx[j] = (int32_t)(hmix(seed ^ (uint64_t)j * 0x9e3779b97f4a7c15ull) % (uint64_t)ctx);
}

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* p50 of single calls between events and the mean of a back-to-back stream, in us; call(arg, r) issues call r */
typedef void (*call_fn)(void *arg, int r);
static void time_calls(call_fn call, void *arg, int reps, cudaStream_t st, double *p50, double *b2b)
{
    for (int r = 0; r < 3; r++) call(arg, r);
    cudaEvent_t *ev = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * 2 * (size_t)reps);
    float *t = (float *)malloc(sizeof(float) * (size_t)reps);
    for (int r = 0; r < 2 * reps; r++) CK(cudaEventCreate(&ev[r]));
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(ev[2 * r], st));
        call(arg, r);
        CK(cudaEventRecord(ev[2 * r + 1], st));
    }
    CK(cudaStreamSynchronize(st));
    for (int r = 0; r < reps; r++) CK(cudaEventElapsedTime(&t[r], ev[2 * r], ev[2 * r + 1]));
    qsort(t, (size_t)reps, sizeof(float), cmp_f);
    *p50 = t[reps / 2] * 1e3;
    CK(cudaEventRecord(ev[0], st));
    for (int r = 0; r < reps; r++) call(arg, r);
    CK(cudaEventRecord(ev[1], st));
    CK(cudaEventSynchronize(ev[1]));
    float ms;
    CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    *b2b = ms * 1e3 / reps;
    for (int r = 0; r < 2 * reps; r++) CK(cudaEventDestroy(ev[r]));
    free(ev), free(t);
}

/* a comma-separated list of positive integers: their count (at most max), -1 on a malformed one */
static int parse_list(const char *s, int64_t *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 1) return -1;
        out[n++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

/* the options every kernel benchmark takes: argv[*i] is --contexts, --batch or --reps (its value consumed,
   *i advanced): 1; something else: 0; a malformed or missing value: -1 */
static int parse_common(int argc, char **argv, int *i, int64_t *ctxs, int *nctx, int64_t *batch, int *nb, int *reps)
{
    const char *a = argv[*i];
    const int known = !strcmp(a, "--contexts") || !strcmp(a, "--batch") || !strcmp(a, "--reps");
    if (!known) return 0;
    if (*i + 1 >= argc) return -1;
    const char *v = argv[++*i];
    if (!strcmp(a, "--contexts")) return (*nctx = parse_list(v, ctxs, 8)) < 1 ? -1 : 1;
    if (!strcmp(a, "--batch")) return (*nb = parse_list(v, batch, 8)) < 1 ? -1 : 1;
    *reps = atoi(v);
    return *reps < 5 || *reps > 100000 ? -1 : 1;
}

/* the contexts (min_ctx..2^31-1) and batches (..256) checked, then the device: 0 with a non-blocking stream
   in *st and the device's properties, else the exit status after a message on stderr */
static int bench_open(const char *name, const int64_t *ctxs, int nctx, int64_t min_ctx, const int64_t *batch, int nb,
                      cudaStream_t *st, cudaDeviceProp *prop)
{
    for (int i = 0; i < nctx; i++)
        if (ctxs[i] < min_ctx || ctxs[i] > INT32_MAX)
            return fprintf(stderr, "%s: context must be %lld..2^31-1\n", name, (long long)min_ctx), 2;
    for (int i = 0; i < nb; i++)
        if (batch[i] > 256) return fprintf(stderr, "%s: batch must be 1..256\n", name), 2;
    int dev = 0;
    if (cudaGetDeviceCount(&dev) != cudaSuccess || dev < 1) return fprintf(stderr, "%s: no CUDA device\n", name), 1;
    CK(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
    CK(cudaGetDeviceProperties(prop, 0));
    return 0;
}

/* instantiate a captured graph, launch it once, then the median of 5 timed launches in us; the graph
   and its instance are destroyed */
static double graph_replay_us(cudaStream_t st, cudaGraph_t graph)
{
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaGraphLaunch(exec, st));
    float gms[5];
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(exec, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&gms[r], e0, e1));
    }
    qsort(gms, 5, sizeof(float), cmp_f);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return gms[2] * 1e3;
}

#endif
