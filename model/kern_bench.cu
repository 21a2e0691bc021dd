/* kern_bench.cu - the GPU model's KV kernels against their floors, in one
 * process (bench/gpu.sh kernels).
 *
 * Attention: the split-K sparse MLA decode attention of model/attn_kern.cuh
 * (k_att_part + k_att_combine, exactly the model's launch) over k = 2048
 * located FP8 rows (656 bytes) per query, at each (context, C): C queries of
 * one session each, rows at random positions of the session's own context.
 *   time   p50 over the reps of one call between two CUDA events, and the
 *          mean of a back-to-back stream of calls; also each kernel alone,
 *          and 78 calls (a glm-5.3 step's layers) captured in one CUDA graph
 *          and replayed, as the model's graph step issues them
 *   floor  max(bytes / HBM, FLOPs / tensor peak): bytes = C x k x 656 (every
 *          row read once), HBM = a 1 GiB device-to-device copy in this
 *          process (read + write bytes per second); FLOPs = C x k x heads x
 *          (2 x 576 + 2 x 512); the tensor peak is stated (H200 SXM dense
 *          BF16, 989 TFLOP/s), not measured: the FLOP floor is far below
 *          the byte floor at this geometry
 *   ratio  time / floor
 * Each call reads a different "layer" (its own rows and selection) so that
 * the reps do not find the rows in L2: layers x C x k x 656 >= 192 MB.
 *
 * The first split-K kernel (attn_kern_r1.cuh: table decoding, one thread per
 * score lane, a serial merge) runs in the same process on the same rows as
 * the baseline ("attn-r1" rows) and must give the same bits.
 *
 * The five-kernel attention this replaces is not built here; its figures are
 * in bench/RESULTS.md (about 12,000 us per 78-layer step at 100K, C = 2,
 * about 153 us per layer, flat in C).
 *
 * Indexer scores (the model's launch_scores: k_scores_fp8 at the real
 * geometries' 4 x 128 FP8 keys) over every position of the context, floor
 * = keys read + scores written; top-k (the model's k_topk, and the library's
 * fused dhs_cuda_topk_fused_n, one block per query, and its split form
 * dhs_cuda_topk_split_n, many blocks per query, checked equal to it here) of
 * those scores, floor = the scores read once. Calls rotate over enough
 * layers of keys / scores to leave L2.
 *
 * Usage: kern_bench [--contexts N,N] [--batch C,C] [--heads H] [--reps R] [--attention-only] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "bench_cuda.h"
#include "dev/topk_spec.h"
#include "model/attn_kern.cuh"
#include "model/attn_kern_r1.cuh" /* the first split-K kernel, timed beside it */
#include "model/gpu.h"
#include "model/model.h"

#define TENSOR_PEAK 989e12 /* H200 SXM dense BF16 FLOP/s, stated */
#define STEP_LAYERS 78     /* glm-5.3 */

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
__global__ void k_fill_rows(uint4 *pool, int64_t nvec, uint64_t seed)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nvec; j += (int64_t)gridDim.x * blockDim.x) {
        const int v = (int)(j % ATT_RV);
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

__global__ void k_fill_sel(int32_t *aidx, int64_t n, int64_t ctx, uint64_t seed)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
        aidx[j] = (int32_t)(hmix(seed ^ (uint64_t)j * 0x9e3779b97f4a7c15ull) % (uint64_t)ctx);
}

__global__ void k_fill_f(float *x, int64_t n, uint64_t seed)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
        x[j] = (float)(int64_t)(hmix(seed + (uint64_t)j) % 2001) * 1e-3f - 1.0f;
}

__global__ void k_fill_codes(uint32_t *x, int64_t n, uint64_t seed)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
        x[j] = (uint32_t)hmix(seed + (uint64_t)j) & 0x77777777u; /* no NaN code */
}

__global__ void k_fill_pow2(float *x, int64_t n)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
        x[j] = ldexpf(1.0f, -7 - (int)(hmix((uint64_t)j) & 1));
}

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

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static double worst_ratio;

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

static void print_row(const char *name, int64_t ctx, int C, double bytes, double flops, double p50, double b2b,
                      double hbm_gbs, int track)
{
    const double fb = bytes / (hbm_gbs * 1e9) * 1e6, ff = flops / TENSOR_PEAK * 1e6;
    const double floor = fb > ff ? fb : ff;
    printf("%-10s %7lld %3d %8.2f %8.1f %8.1f %8.2f %8.3f %7.2f %7.2f\n", name, (long long)ctx, C, bytes / 1e6, p50,
           b2b, fb, ff, p50 / floor, b2b / floor);
    if (track && b2b / floor > worst_ratio) worst_ratio = b2b / floor;
}

/* ------------------------------------------------------------ indexer scores and top-k */
#define IDX_H 4   /* the real geometries' indexer: 4 heads x 128, FP8 keys + a 4-byte scale (132 B) */
#define IDX_D 128

#define SEL_SPLIT 100 /* sel_state.which: dhs_cuda_topk_split_n (the others: dhs_ref_gpu_select_kernel's) */
typedef struct sel_state {
    int C, NL, NS, which;
    int64_t ctx;
    const int64_t *pos;
    const float *iq, *iw, *lut;
    void **kc;   /* device [NL][C] */
    float **ks;  /* device [NL][C] */
    float *scores; /* [NS][C][ctx] */
    int32_t *sel, *nanc;
    void *ws; /* the split top-k's workspace */
    size_t ws_bytes;
    cudaStream_t st;
} sel_state;

static void sel_call(void *arg, int r)
{
    sel_state *s = (sel_state *)arg;
    const int ls = r % s->NS, lk = ls % s->NL;
    if (s->which == SEL_SPLIT) { /* the split top-k */
        int rc = dhs_cuda_topk_split_n(s->scores + (size_t)ls * s->C * s->ctx, s->ctx, s->C, s->ctx, s->pos, 1, ATT_MAXK, NULL,
                                       0, s->sel, NULL, s->nanc, s->ws, s->ws_bytes, s->st);
        if (rc != 0) {
            fprintf(stderr, "kern_bench: dhs_cuda_topk_split_n: %d\n", rc);
            exit(1);
        }
        return;
    }
    dhs_status e = dhs_ref_gpu_select_kernel(s->st, s->which, s->C, IDX_H, IDX_D, ATT_MAXK, s->ctx, s->pos, s->iq, s->iw,
                                             s->kc + (size_t)lk * s->C, s->ks + (size_t)lk * s->C, s->lut,
                                             s->scores + (size_t)ls * s->C * s->ctx, s->sel, s->nanc);
    if (e != DHS_OK) {
        fprintf(stderr, "kern_bench: dhs_ref_gpu_select_kernel(%d): %d\n", s->which, (int)e);
        exit(1);
    }
}

/* C queries; spec > 1: C / spec sessions of spec queries each sharing their keys (speculative
   positions of one request), scores only, grouped (the model's launch) and each query alone */
static void bench_select(int64_t ctx, int C, int spec, int reps, double hbm_gbs, const float *d_lut, cudaStream_t st)
{
    const int S = C / spec;
    const double key_bytes = (double)S * ctx * (IDX_D + 4), sc_bytes = (double)C * ctx * 4;
    sel_state s;
    memset(&s, 0, sizeof s);
    s.C = C, s.ctx = ctx, s.lut = d_lut, s.st = st;
    s.NL = (int)((192e6 + key_bytes - 1) / key_bytes);
    if (s.NL < 4) s.NL = 4;
    s.NS = (int)((192e6 + sc_bytes - 1) / sc_bytes);
    if (s.NS < s.NL) s.NS = s.NL;
    const int64_t groups = (ctx + 7) / 8;
    const size_t code_bytes = (size_t)groups * 8 * IDX_D; /* per (layer, query) */
    uint8_t *codes;
    float *scales;
    CK(cudaMalloc((void **)&codes, code_bytes * (size_t)s.NL * S));
    CK(cudaMalloc((void **)&scales, sizeof(float) * (size_t)ctx * s.NL * S));
    k_fill_codes<<<1024, 256, 0, st>>>((uint32_t *)codes, (int64_t)(code_bytes / 4) * s.NL * S, 4242u);
    k_fill_pow2<<<1024, 256, 0, st>>>(scales, (int64_t)ctx * s.NL * S);
    CK(cudaGetLastError());
    void **hkc = (void **)malloc(sizeof(void *) * (size_t)s.NL * C);
    float **hks = (float **)malloc(sizeof(float *) * (size_t)s.NL * C);
    for (int64_t j = 0; j < (int64_t)s.NL * C; j++) { /* layer j / C, query j % C: its session's keys */
        const int64_t ks = (j / C) * S + (j % C) / spec;
        hkc[j] = codes + (size_t)ks * code_bytes;
        hks[j] = scales + (size_t)ks * ctx;
    }
    CK(cudaMalloc((void **)&s.kc, sizeof(void *) * (size_t)s.NL * C));
    CK(cudaMalloc((void **)&s.ks, sizeof(float *) * (size_t)s.NL * C));
    CK(cudaMemcpy(s.kc, hkc, sizeof(void *) * (size_t)s.NL * C, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s.ks, hks, sizeof(float *) * (size_t)s.NL * C, cudaMemcpyHostToDevice));
    int64_t *hpos = (int64_t *)malloc(sizeof(int64_t) * (size_t)C), *pos;
    for (int q = 0; q < C; q++) hpos[q] = ctx - 1;
    CK(cudaMalloc((void **)&pos, sizeof(int64_t) * (size_t)C));
    CK(cudaMemcpy(pos, hpos, sizeof(int64_t) * (size_t)C, cudaMemcpyHostToDevice));
    s.pos = pos;
    float *iq, *iw;
    CK(cudaMalloc((void **)&iq, sizeof(float) * (size_t)C * IDX_H * IDX_D));
    CK(cudaMalloc((void **)&iw, sizeof(float) * (size_t)C * IDX_H));
    k_fill_f<<<64, 256, 0, st>>>(iq, (int64_t)C * IDX_H * IDX_D, 5u);
    k_fill_f<<<64, 256, 0, st>>>(iw, (int64_t)C * IDX_H, 6u);
    CK(cudaGetLastError());
    s.iq = iq, s.iw = iw;
    CK(cudaMalloc((void **)&s.scores, sizeof(float) * (size_t)s.NS * C * ctx));
    CK(cudaMalloc((void **)&s.sel, sizeof(int32_t) * (size_t)C * ATT_MAXK));
    CK(cudaMalloc((void **)&s.nanc, sizeof(int32_t) * (size_t)C));
    double p50, b2b;
    s.which = DHS_REF_GPU_SCORES;
    for (int r = 0; r < s.NS; r++) sel_call(&s, r); /* every score buffer written once */
    time_calls(sel_call, &s, reps, st, &p50, &b2b);
    print_row(spec > 1 ? "indexer4" : "indexer", ctx, C, key_bytes + sc_bytes, 2.0 * C * ctx * IDX_H * IDX_D, p50, b2b,
              hbm_gbs, 0);
    if (spec > 1) { /* the same scores with every query reading its keys alone: first the same bits */
        const size_t scb = sizeof(float) * (size_t)C * ctx;
        float *h1 = (float *)malloc(scb), *h2 = (float *)malloc(scb);
        CK(cudaMemcpyAsync(h1, s.scores, scb, cudaMemcpyDeviceToHost, st)); /* buffer 0, grouped */
        CK(cudaMemsetAsync(s.scores, 0x5a, scb, st));
        s.which = DHS_REF_GPU_SCORES_ALONE;
        sel_call(&s, 0);
        CK(cudaMemcpyAsync(h2, s.scores, scb, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        if (memcmp(h1, h2, scb)) {
            fprintf(stderr, "kern_bench: grouped indexer scores differ from each query alone (context %lld, C %d)\n",
                    (long long)ctx, C);
            exit(1);
        }
        free(h1), free(h2);
        time_calls(sel_call, &s, reps, st, &p50, &b2b);
        print_row("indexer4-1", ctx, C, key_bytes + sc_bytes, 2.0 * C * ctx * IDX_H * IDX_D, p50, b2b, hbm_gbs, 0);
        goto out;
    }
    { /* the top-ks (spec 1 only) */
        s.which = DHS_REF_GPU_TOPK;
        time_calls(sel_call, &s, reps, st, &p50, &b2b);
        print_row("topk", ctx, C, sc_bytes, 0, p50, b2b, hbm_gbs, 0);
        s.which = DHS_REF_GPU_TOPK_FUSED;
        time_calls(sel_call, &s, reps, st, &p50, &b2b);
        print_row("topk-fused", ctx, C, sc_bytes, 0, p50, b2b, hbm_gbs, 0);
        /* the split form: first the same selection as the fused kernel on one score buffer */
        s.ws_bytes = dhs_cuda_topk_split_ws(C);
        CK(cudaMalloc(&s.ws, s.ws_bytes));
        CK(cudaMemset(s.ws, 0, s.ws_bytes));
        const size_t selb = sizeof(int32_t) * (size_t)C * ATT_MAXK;
        int32_t *h1 = (int32_t *)malloc(selb), *h2 = (int32_t *)malloc(selb);
        s.which = DHS_REF_GPU_TOPK_FUSED;
        sel_call(&s, 1);
        CK(cudaMemcpyAsync(h1, s.sel, selb, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        s.which = SEL_SPLIT;
        for (int rep = 0; rep < 2; rep++) {
            CK(cudaMemsetAsync(s.sel, 0x5a, selb, st));
            sel_call(&s, 1);
            CK(cudaMemcpyAsync(h2, s.sel, selb, cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            if (memcmp(h1, h2, selb)) {
                fprintf(stderr, "kern_bench: split top-k differs from the fused one (context %lld, C %d, call %d)\n",
                        (long long)ctx, C, rep);
                exit(1);
            }
        }
        free(h1), free(h2);
        time_calls(sel_call, &s, reps, st, &p50, &b2b);
        print_row("topk-split", ctx, C, sc_bytes, 0, p50, b2b, hbm_gbs, 0);
    }
out:
    CK(cudaStreamSynchronize(st));
    void *bufs[] = {codes, scales, s.kc, s.ks, pos, iq, iw, s.scores, s.sel, s.nanc, s.ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CK(cudaFree(bufs[i]));
    free(hkc), free(hks), free(hpos);
}

typedef struct att_state {
    int C, NL, nh, k, which; /* 0: the model's launch (one kernel, last chunk merges), 1: k_att_part then
                                k_att_combine, 2: k_att_combine alone */
    int r1;                  /* the first kernels (attn_kern_r1.cuh) instead */
    int32_t *cnt;
    const uint8_t *const *base;
    const float *aq;
    const int32_t *aidx, *anv;
    const float *lut;
    float *pm, *ps, *po, *ao;
    cudaStream_t st;
} att_state;

static void att_call(void *arg, int r)
{
    att_state *a = (att_state *)arg;
    const int l = r % a->NL;
    const uint8_t *const *base = a->base + (size_t)l * a->C;
    const int32_t *aidx = a->aidx + (size_t)l * a->C * a->k;
    if (a->which <= 1 && a->r1) {
        CK(att_launch_r1(a->st, a->C, a->nh, a->k, 1.0f / 24.0f, 1, base, a->aq, aidx, a->anv, a->lut, a->pm, a->ps,
                         a->po, a->which == 0 ? a->cnt : NULL, a->ao));
    } else if (a->which <= 1) {
        CK(att_launch(a->st, a->C, a->nh, a->k, 1.0f / 24.0f, 1, base, a->aq, aidx, a->anv, a->lut, a->pm, a->ps, a->po,
                      a->which == 0 ? a->cnt : NULL, a->ao));
    } else if (a->r1) {
        k_att_combine_r1<<<a->C * a->nh, G_NOPE, 0, a->st>>>(a->nh, a->k, 1, a->anv, a->pm, a->ps, a->po, a->ao);
        CK(cudaGetLastError());
    } else {
        k_att_combine<<<a->C * a->nh, ATT_PT, 0, a->st>>>(a->nh, a->k, 1, a->anv, a->pm, a->ps, a->po, a->ao);
        CK(cudaGetLastError());
    }
}

/* one (context, C): prints a table row */
static void bench_attention(int64_t ctx, int C, int nh, int reps, double hbm_gbs, const float *d_lut, cudaStream_t st)
{
    const int k = ATT_MAXK;
    const double row_bytes = (double)C * k * G_ROW;
    int NL = (int)((192e6 + row_bytes - 1) / row_bytes);
    if (NL < 4) NL = 4;
    const int64_t pool_rows = (int64_t)NL * C * ctx;
    uint8_t *pool;
    CK(cudaMalloc((void **)&pool, (size_t)pool_rows * G_ROW));
    CK(cudaMemsetAsync(pool, 0, 16, st));
    k_fill_rows<<<1024, 256, 0, st>>>((uint4 *)pool, pool_rows * ATT_RV, 12345u + (uint64_t)ctx * 31 + (uint64_t)C);
    CK(cudaGetLastError());
    int32_t *aidx, *anv;
    CK(cudaMalloc((void **)&aidx, sizeof(int32_t) * (size_t)NL * C * k));
    k_fill_sel<<<256, 256, 0, st>>>(aidx, (int64_t)NL * C * k, ctx, 777u + (uint64_t)C);
    CK(cudaGetLastError());
    int32_t *hnv = (int32_t *)malloc(sizeof(int32_t) * (size_t)C);
    for (int q = 0; q < C; q++) hnv[q] = k;
    CK(cudaMalloc((void **)&anv, sizeof(int32_t) * (size_t)C));
    CK(cudaMemcpy(anv, hnv, sizeof(int32_t) * (size_t)C, cudaMemcpyHostToDevice));
    /* layer l, query q: rows of pool block (l C + q) */
    const uint8_t **hb = (const uint8_t **)malloc(sizeof(void *) * (size_t)NL * C), **base;
    for (int l = 0; l < NL; l++)
        for (int q = 0; q < C; q++) hb[(size_t)l * C + q] = pool + ((int64_t)l * C + q) * ctx * G_ROW;
    CK(cudaMalloc((void **)&base, sizeof(void *) * (size_t)NL * C));
    CK(cudaMemcpy(base, hb, sizeof(void *) * (size_t)NL * C, cudaMemcpyHostToDevice));
    float *aq, *pm, *ps, *po, *ao;
    const size_t npart = (size_t)C * att_chunks(k) * nh;
    CK(cudaMalloc((void **)&aq, sizeof(float) * (size_t)C * nh * G_LAT));
    k_fill_f<<<64, 256, 0, st>>>(aq, (int64_t)C * nh * G_LAT, 99u);
    CK(cudaGetLastError());
    CK(cudaMalloc((void **)&pm, sizeof(float) * npart));
    CK(cudaMalloc((void **)&ps, sizeof(float) * npart));
    CK(cudaMalloc((void **)&po, sizeof(float) * npart * G_NOPE));
    CK(cudaMalloc((void **)&ao, sizeof(float) * (size_t)C * nh * G_NOPE));
    CK(cudaStreamSynchronize(st));
    int32_t *cnt;
    CK(cudaMalloc((void **)&cnt, sizeof(int32_t) * (size_t)C));
    CK(cudaMemset(cnt, 0, sizeof(int32_t) * (size_t)C));
    att_state a = {C, NL, nh, k, 0, 0, cnt, base, aq, aidx, anv, d_lut, pm, ps, po, ao, st};
    /* the two merges and the first kernels give the same bits (a check, not a test: test_att_kern is the test) */
    const size_t nao = (size_t)C * nh * G_NOPE;
    float *h1 = (float *)malloc(nao * 4), *h2 = (float *)malloc(nao * 4);
    static const int chk[][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}}; /* which, r1 */
    for (int v = 0; v < 4; v++) {
        a.which = chk[v][0], a.r1 = chk[v][1];
        CK(cudaMemsetAsync(ao, 0, nao * 4, st));
        att_call(&a, 0);
        CK(cudaMemcpyAsync(v ? h2 : h1, ao, nao * 4, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        if (v && memcmp(h1, h2, nao * 4)) {
            fprintf(stderr, "kern_bench: attention variant %d%s differs from the model's launch (context %lld, C %d)\n",
                    chk[v][0], chk[v][1] ? " (first kernels)" : "", (long long)ctx, C);
            exit(1);
        }
    }
    free(h1), free(h2);
    const double flops = (double)C * k * nh * (2.0 * G_LAT + 2.0 * G_NOPE);
    const double fb = row_bytes / (hbm_gbs * 1e9) * 1e6;
    for (int r1 = 0; r1 < 2; r1++) { /* the kernels of attn_kern.cuh, then the first ones */
        double p50, b2b, p50p, b2bp, p50c, b2bc;
        a.r1 = r1;
        a.which = 0;
        time_calls(att_call, &a, reps, st, &p50, &b2b);
        a.which = 1;
        time_calls(att_call, &a, reps, st, &p50p, &b2bp);
        a.which = 2;
        time_calls(att_call, &a, reps, st, &p50c, &b2bc);
        /* a step's attention as the graph step issues it: STEP_LAYERS calls captured once, replayed */
        a.which = 0;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int l = 0; l < STEP_LAYERS; l++) att_call(&a, l);
        CK(cudaStreamEndCapture(st, &graph));
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
        const double graph_us = gms[2] * 1e3;
        print_row(r1 ? "attn-r1" : "attention", ctx, C, row_bytes, flops, p50, b2b, hbm_gbs, !r1);
        printf("  two kernels (part + combine) p50 %.1f b2b %.1f; combine alone p50 %.1f b2b %.1f; %d layers in one "
               "graph %.0f us (%.1f per layer) against a floor of %.1f us (%.2fx)\n",
               p50p, b2bp, p50c, b2bc, STEP_LAYERS, graph_us, graph_us / STEP_LAYERS, fb * STEP_LAYERS,
               graph_us / (fb * STEP_LAYERS));
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(graph));
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
    }
    free(hb), free(hnv);
    void *bufs[] = {pool, aidx, anv, base, aq, pm, ps, po, ao, cnt};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CK(cudaFree(bufs[i]));
}

static void usage(FILE *f)
{
    fprintf(f, "usage: kern_bench [--contexts N,N,...] [--batch C,C,...] [--heads 1|2] [--reps R] [--attention-only]\n"
               "  The GPU model's split-K sparse attention against its floor, max(bytes / HBM, FLOPs / tensor\n"
               "  peak), with HBM measured by a device-to-device copy in the same process; then the indexer\n"
               "  scores and the top-k (the model's, the library's fused and its split form) against reading\n"
               "  their bytes once.\n"
               "  Defaults: --contexts 100000,32768 --batch 2,8,20 --heads 1 --reps 200\n");
}

int main(int argc, char **argv)
{
    int64_t ctxs[8] = {100000, 32768}, batch[8] = {2, 8, 20};
    int nctx = 2, nb = 3, nh = 1, reps = 200, no_select = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--contexts") && i + 1 < argc) {
            if ((nctx = parse_list(argv[++i], ctxs, 8)) < 1) return usage(stderr), 2;
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            if ((nb = parse_list(argv[++i], batch, 8)) < 1) return usage(stderr), 2;
        } else if (!strcmp(argv[i], "--heads") && i + 1 < argc) {
            nh = atoi(argv[++i]);
            if (nh < 1 || nh > ATT_MAXH) return usage(stderr), 2;
        } else if (!strcmp(argv[i], "--attention-only")) {
            no_select = 1;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 5 || reps > 100000) return usage(stderr), 2;
        } else {
            usage(stderr);
            return 2;
        }
    }
    for (int i = 0; i < nctx; i++)
        if (ctxs[i] < ATT_MAXK || ctxs[i] > INT32_MAX) return fprintf(stderr, "kern_bench: context must be 2048..2^31-1\n"), 2;
    for (int i = 0; i < nb; i++)
        if (batch[i] > 256) return fprintf(stderr, "kern_bench: batch must be 1..256\n"), 2;
    int dev = 0;
    if (cudaGetDeviceCount(&dev) != cudaSuccess || dev < 1) {
        fprintf(stderr, "kern_bench: no CUDA device\n");
        return 1;
    }
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const double hbm = bench_d2d_gbs(st);
    float *d_lut;
    CK(cudaMalloc((void **)&d_lut, 256 * sizeof(float)));
    CK(cudaMemcpy(d_lut, dhs_ref_fp8_table(), 256 * sizeof(float), cudaMemcpyHostToDevice));
    printf("device: %s, %d SMs; HBM (1 GiB D2D copy, read + write): %.0f GB/s; tensor peak (stated): %.0f TFLOP/s\n",
           prop.name, prop.multiProcessorCount, hbm, TENSOR_PEAK / 1e12);
    printf("attention: k = %d rows x %d B per query, %d head(s), chunk %d, %d reps; times in us\n", ATT_MAXK, G_ROW, nh,
           ATT_CH, reps);
    printf("indexer: %d heads x %d, FP8 keys (%d B per position), scores of every position 0..context-1;\n"
           "  floor bytes = keys read + scores written. topk: k_topk (the model's), topk-fused: the library's\n"
           "  dhs_cuda_topk_fused_n (one block per query), topk-split: dhs_cuda_topk_split_n (many blocks per\n"
           "  query; same output, checked); floor bytes = the scores read once. indexer4: C/4 sessions of 4\n"
           "  queries sharing their keys (speculative positions), keys read once per session (the model's\n"
           "  launch); indexer4-1: the same with each query reading the keys alone (before the grouping)\n",
           IDX_H, IDX_D, IDX_D + 4);
    printf("kernel     context   C       MB      p50      b2b  floor_B  floor_F p50/fl  b2b/fl\n");
    for (int i = 0; i < nctx; i++)
        for (int j = 0; j < nb; j++) {
            bench_attention(ctxs[i], (int)batch[j], nh, reps, hbm, d_lut, st);
            if (!no_select) bench_select(ctxs[i], (int)batch[j], 1, reps, hbm, d_lut, st);
            if (!no_select) bench_select(ctxs[i], 4 * (int)batch[j], 4, reps, hbm, d_lut, st);
        }
    printf("previous five-kernel attention (bench/RESULTS.md): ~153 us per layer, ~12,000 us per 78-layer step\n");
    printf("kern_bench: attention worst b2b/floor %.2f (bars: 2x at C >= 8, 3x at C = 2)\n", worst_ratio);
    CK(cudaFree(d_lut));
    CK(cudaStreamDestroy(st));
    return 0;
}
