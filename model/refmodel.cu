/* refmodel.cu - the reference DSA model's target pass on the GPU (see
 * model/gpu.h): rows + FP8 keys, indexer scores, top-k, sparse attention +
 * MLP, logits. C-style CUDA, extern "C" launchers.
 *
 * Determinism: every sum runs in the CPU model's order
 * (docs/MODEL.md "Determinism") with one IEEE operation per step
 * (__fmul_rn / __fadd_rn / __fdiv_rn / __fsqrt_rn: nvcc may not contract
 * them into FMAs), max reductions are order-free, top-k histograms count with
 * atomics (counts do not depend on order) and the selection is then sorted by
 * its distinct 64-bit keys. So the same inputs give the same bits whatever the
 * batch or where the rows live, and with exp_portable the CPU model's bits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "dev/topk_spec.h"  /* the library's fused top-k (dhs_cuda_topk_fused_n): topk = fused */
#include "model/attn_row.cuh" /* fm/fa/fs, g_expf, the row score: shared with overlap.cu */
#include "model/attn_kern.cuh" /* the split-K attention: shared with model/kern_bench.cu */
#include "model/attn_kern_r2.cuh" /* its fused form, the same bits: the model's kernel from ATT_R2F_MIN queries */

/* The two split-K attentions give the same bits (kern_bench and test_att_kern check): k_att_part
   (each chunk's rows decoded once into shared memory, 80 KB and 2 blocks per SM) is the faster at
   a few queries (1.06-1.13x at 2 and 4), k_att_part_r2<FMA> (decoded per use, 28 KB and 4 blocks per SM)
   from 8 (1.16x at 8, 1.24x at 20)
   a launch on the H200 (bench/RESULTS.md); the choice changes no bit. */
#define ATT_R2F_MIN 6
static inline cudaError_t att_launch_model(cudaStream_t st, int nq, int nh, int k, float att_scale, int portable,
                                           const uint8_t *const *base, const float *aq, const int32_t *aidx,
                                           const int32_t *anv, const float *lut, float *pm, float *ps, float *po,
                                           int32_t *cnt, float *ao)
{
    if (nq >= ATT_R2F_MIN)
        return att_launch_r2(st, nq, nh, k, att_scale, portable, base, aq, aidx, anv, lut, pm, ps, po, cnt, ao, 1);
    return att_launch(st, nq, nh, k, att_scale, portable, base, aq, aidx, anv, lut, pm, ps, po, cnt, ao);
}
#include "model/fp8_f16.h"    /* FP8 codes to half bits without a table: the indexer scores */
#include "model/gpu.h"
#include "model/prep_kern.cuh" /* the per-query projections (rows, indexer query, attention prep/out, logits) */
extern "C" {
#include "sim/util.h" /* dhs_wall_s: the upload's host time */
}
static_assert(G_MAX_TOPK <= ATT_MAXK && G_MAX_HEADS <= ATT_MAXH, "attn_kern.cuh holds the model's k and heads");

/* ------------------------------------------------------------------ numerics */
__device__ __forceinline__ uint64_t g_topk_key(float score, uint32_t s)
{
    uint32_t u = __float_as_uint(score == 0.0f ? 0.0f : score);
    uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)ord << 32) | (uint64_t)(0xffffffffu - s);
}

/* ------------------------------------------------------------------ kernels */
__global__ void k_embed(const float *emb, const int32_t *tok, const int64_t *pos, float *x, int d)
{
    int q = blockIdx.x;
    if (pos[q] < 0) return;
    for (int i = threadIdx.x; i < d; i += blockDim.x) x[(int64_t)q * d + i] = emb[(int64_t)tok[q] * d + i];
}

/* scores of query blockIdx.x over positions blockIdx.y*256 + tid */
__global__ void k_scores(g_dims g, const int64_t *pos, const float *iq, const float *iw, void *const *kcodes,
                         float *const *kscales, const float *lut_g, float *scores)
{
    __shared__ float sq[G_MAX_IH * G_MAX_ID], sw[G_MAX_IH], lut[256];
    int q = blockIdx.x;
    int64_t t = pos[q];
    if (t < 0) return;
    for (int i = threadIdx.x; i < g.H * g.D; i += blockDim.x) sq[i] = iq[(int64_t)q * g.H * g.D + i];
    for (int i = threadIdx.x; i < g.H; i += blockDim.x) sw[i] = iw[(int64_t)q * g.H + i];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) lut[i] = lut_g[i];
    __syncthreads();
    int64_t s = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (s > t) return; /* candidates 0..t */
    float acc[G_MAX_IH];
    for (int h = 0; h < g.H; h++) acc[h] = 0.0f;
    size_t base = (size_t)((s / 8) * g.D * 8 + s % 8);
    const uint8_t *codes = (const uint8_t *)kcodes[q];
    const float *kf = (const float *)kcodes[q];
    for (int i = 0; i < g.D; i++) {
        float kv = g.key_fp8 ? lut[codes[base + (size_t)i * 8]] : kf[base + (size_t)i * 8];
        for (int h = 0; h < g.H; h++) acc[h] = ff(sq[h * g.D + i], kv, acc[h]);
    }
    float sc = 0.0f;
    for (int h = 0; h < g.H; h++) sc = fa(sc, fm(sw[h], acc[h] > 0.0f ? acc[h] : 0.0f));
    if (g.key_fp8) sc = fm(sc, kscales[q][s]);
    scores[(int64_t)q * g.maxpos + s] = sc;
}

/* The same scores for FP8 keys and H indexer heads (compile time), D <= 128 and D % 16 == 0: the block's
   32 groups of 8 positions (32 KB of codes, contiguous) are loaded once with 16-byte loads and transposed
   into shared memory position-major, so each thread reads its position's codes 4 at a time instead of
   one byte load per dimension from global memory (k_scores: ~17x the HBM roofline at 100K on the H200), and
   the query 4 dimensions at a time. Queries that share their keys (the same kcodes and kscales: one
   session's speculative positions, consecutive in the batch) are scored by one block, up to SC_MAXQ of
   them: the keys are read from HBM once per such group, not once per query. Block blockIdx.x = q leads
   when q starts a run of equal key pointers or sits SC_MAXQ queries into one (group = 1: every query
   alone, the order before the grouping; kern_bench times both); the other blocks return at once. Per
   query and head the sum still runs over i in order with the same unfused multiply and add:
   bit-identical to k_scores and to the CPU model. */
#define SC_POS 256
#define SC_MAXD 128
#define SC_MAXQ 4
#define SC_STRIDE (SC_MAXD + 4) /* bytes per position: consecutive positions start 33 words apart */
template <int H>
__global__ void __launch_bounds__(SC_POS) k_scores_fp8(g_dims g, const int64_t *pos, const float *iq, const float *iw,
                                                      void *const *kcodes, float *const *kscales, const float *lut_g,
                                                      float *scores, int group, int nq)
{
    __shared__ __align__(16) float sq[SC_MAXQ * H * SC_MAXD];
    __shared__ float sw[SC_MAXQ * H], lut[256];
    __shared__ __align__(16) uint8_t kc[SC_POS * SC_STRIDE];
    const int q = blockIdx.x, tid = threadIdx.x, D = g.D;
    const void *mykc = kcodes[q];
    const float *myks = kscales[q];
    /* the group this block leads (the same answer in every thread: uniform returns) */
    int r0 = q;
    if (group > 1)
        while (r0 > 0 && kcodes[r0 - 1] == mykc && kscales[r0 - 1] == myks) r0--;
    if ((q - r0) % group) return; /* a member of an earlier block's group */
    int m = 1;
    while (m < group && q + m < nq && kcodes[q + m] == mykc && kscales[q + m] == myks) m++;
    int64_t tmax = -1;
    for (int j = 0; j < m; j++) tmax = pos[q + j] > tmax ? pos[q + j] : tmax;
    const int64_t s0 = (int64_t)blockIdx.y * SC_POS;
    if (tmax < 0 || s0 > tmax) return; /* uniform over the block */
    for (int i = tid; i < m * H * D; i += SC_POS) sq[i] = iq[(int64_t)q * H * D + i]; /* queries q.. are contiguous */
    for (int i = tid; i < m * H; i += SC_POS) sw[i] = iw[(int64_t)q * H + i];
    for (int i = tid; i < 256; i += SC_POS) lut[i] = lut_g[i];
    /* groups of 8 positions [g0, g0 + ng) hold every position of the block any query sees: ((s / 8) * D
       + i) * 8 + s % 8 is the byte of dimension i of position s */
    const uint8_t *codes = (const uint8_t *)mykc;
    const int64_t g0 = s0 / 8, glast = tmax / 8;
    const int ng = glast - g0 + 1 < SC_POS / 8 ? (int)(glast - g0 + 1) : SC_POS / 8;
    const uint8_t *src = codes + g0 * D * 8;
    const int per_group = D / 2; /* 16-byte vectors: 2 dimensions x 8 positions each */
    if (((uintptr_t)src & 15) == 0) {
        for (int v = tid; v < ng * per_group; v += SC_POS) {
            const uint4 x = __ldg((const uint4 *)src + v);
            const uint32_t w[4] = {x.x, x.y, x.z, x.w};
            const int gl = v / per_group, i0 = 2 * (v % per_group);
#pragma unroll
            for (int e = 0; e < 16; e++)
                kc[(gl * 8 + (e & 7)) * SC_STRIDE + i0 + (e >> 3)] = (uint8_t)(w[e >> 2] >> (8 * (e & 3)));
        }
    } else {
        for (int v = tid; v < ng * D * 8; v += SC_POS) {
            const int gl = v / (D * 8), r = v % (D * 8);
            kc[(gl * 8 + (r & 7)) * SC_STRIDE + (r >> 3)] = src[v];
        }
    }
    __syncthreads();
    const int64_t s = s0 + tid;
    if (s > tmax) return; /* candidates 0..t of each query */
    const uint8_t *mine = kc + tid * SC_STRIDE;
    const float ksc = myks[s];
#pragma unroll 1
    for (int j = 0; j < m; j++) {
        if (s > pos[q + j]) continue;
        const float *sqj = sq + j * H * D;
        float acc[H];
#pragma unroll
        for (int h = 0; h < H; h++) acc[h] = 0.0f;
        for (int i = 0; i < D; i += 4) {
            const uint32_t c4 = *(const uint32_t *)(mine + i);
            const float k0 = lut[c4 & 255u], k1 = lut[(c4 >> 8) & 255u], k2 = lut[(c4 >> 16) & 255u], k3 = lut[c4 >> 24];
#pragma unroll
            for (int h = 0; h < H; h++) {
                const float4 qv = *(const float4 *)&sqj[h * D + i];
                acc[h] = ff(qv.x, k0, acc[h]);
                acc[h] = ff(qv.y, k1, acc[h]);
                acc[h] = ff(qv.z, k2, acc[h]);
                acc[h] = ff(qv.w, k3, acc[h]);
            }
        }
        float sc = 0.0f;
#pragma unroll
        for (int h = 0; h < H; h++) sc = fa(sc, fm(sw[j * H + h], acc[h] > 0.0f ? acc[h] : 0.0f));
        scores[(int64_t)(q + j) * g.maxpos + s] = fm(sc, ksc);
    }
}

/* The scores of k_scores_fp8 (bit for bit), faster: there each of the 256 threads decodes its position
   through a shared table (a random-bank load per code), after a byte-by-byte transpose into shared memory,
   and the block holds 256 threads for 32 KB of codes; at 100K that ran at 3.5-5x the HBM floor. Here:
   - the block's groups of 8 positions are copied with 16-byte loads (8 in flight per thread) and 16-byte
     shared stores, only the two middle words of each vector swapped, so that a thread reading 8 bytes
     gets dimensions i and i + 1 of 4 positions; a group takes 16 bytes more than its codes, so the 16
     groups of a warp fall in distinct banks;
   - a thread scores 4 positions (16 independent sums: 4 positions x 4 heads), 64 threads per block;
   - codes decode without a table (model/fp8_f16.h): the half bits of 4 codes cost 5 integer operations,
     then 4 half-to-float conversions; the value is the code's times 2^-8, so the query is stored times
     2^8 (exact while |q| < 2^120: a block with a larger query keeps it unscaled and scales the keys
     instead), and a NaN code, which that path decodes finite, is flagged per position: its sums are
     NaN on the CPU whatever the other terms, so they are set to NaN before the head sum;
   - the query sits in shared memory dimension-major: one 16-byte broadcast load gives the 4 heads; the
     queries of a group (the same keys) take turns in it, so a block needs 35.3 KB and 6 fit on an SM.
   Per query, head and position the sum still runs over i in order with one unfused multiply and add,
   then the head sum and the scale as before. */
#define SV_POS SC_POS            /* positions per block: the grid launch_scores' callers compute */
#define SV_T (SV_POS / 4)        /* threads per block: 4 positions each */
#define SV_GB (SC_MAXD * 8 + 16) /* shared bytes per group of 8 positions */
static_assert(SV_POS % 32 == 0 && (SV_GB / 4) % 32 == 4, "a warp's 16 groups start 4 banks apart");
static_assert(SV_T >= 4, "the head weights are loaded by threads 0..3");

/* dimensions d0..d1-1 of the 4 positions at mine added to acc (in order); ASY: the group's bytes as in
   global memory (dimension i of the 4 positions at i * 8), else the two middle words of each 16 bytes
   swapped (dimensions i and i + 1 at i * 8, 8 bytes) */
template <bool BIG, bool ASY>
static __device__ __forceinline__ uint32_t sv_dot4(const uint8_t *mine, const float *sqj, int d0, int d1, float acc[4][4],
                                                   int cb = 0)
{
    uint32_t nan = 0;
#pragma unroll 4
    for (int i = d0; i < d1; i += 2) {
        uint2 c; /* dimension i, then i + 1, of the 4 positions (their codes at (i - cb) * 8: cb the first
                    dimension held, 0 but in k_scores_fp8r's chunks) */
        const int ci = i - cb;
        if (ASY) c = make_uint2(*(const uint32_t *)(mine + ci * 8), *(const uint32_t *)(mine + ci * 8 + 8));
        else c = *(const uint2 *)(mine + ci * 8);
        nan |= dhs_fp8_nan_mask(c.x) | dhs_fp8_nan_mask(c.y);
        float k[2][4];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            uint32_t h02, h13;
            dhs_fp8x4_to_f16(e ? c.y : c.x, &h02, &h13);
            k[e][0] = __half2float(__ushort_as_half((unsigned short)(h02 & 0xffffu)));
            k[e][1] = __half2float(__ushort_as_half((unsigned short)(h13 & 0xffffu)));
            k[e][2] = __half2float(__ushort_as_half((unsigned short)(h02 >> 16)));
            k[e][3] = __half2float(__ushort_as_half((unsigned short)(h13 >> 16)));
            if (BIG)
#pragma unroll
                for (int p = 0; p < 4; p++) k[e][p] = fm(k[e][p], 256.0f);
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float4 qv = *(const float4 *)&sqj[(i + e) * 4];
#pragma unroll
            for (int p = 0; p < 4; p++) {
                acc[p][0] = ff(qv.x, k[e][p], acc[p][0]);
                acc[p][1] = ff(qv.y, k[e][p], acc[p][1]);
                acc[p][2] = ff(qv.z, k[e][p], acc[p][2]);
                acc[p][3] = ff(qv.w, k[e][p], acc[p][3]);
            }
        }
    }
    return nan;
}

/* query row qr of iq ([h][d], 4 heads) into sq ([d][h]) and its head weights into sw, by every thread of the
   block; returns, in every thread, whether a value is too large to scale (big: |x| > 2^119, not infinite),
   else the values are multiplied by 2^8 (each thread its own elements again: the caller's next barrier
   publishes them) */
static __device__ __forceinline__ int sv_load_query(float *sq, float *sw, const float *iq, const float *iw, int64_t qr,
                                                    int D)
{
    const int tid = threadIdx.x;
    const float big_q = __int_as_float(0x7b000000); /* 2^119 */
    int big = 0;
    for (int i = tid; i < 4 * D; i += SV_T) {
        const float x = iq[qr * 4 * D + i];
        big |= fabsf(x) > big_q && fabsf(x) != __int_as_float(0x7f800000);
        sq[(i % D) * 4 + i / D] = x;
    }
    if (tid < 4) sw[tid] = iw[qr * 4 + tid];
    big = __syncthreads_or(big);
    if (!big)
        for (int i = tid; i < 4 * D; i += SV_T) sq[(i % D) * 4 + i / D] = fm(sq[(i % D) * 4 + i / D], 256.0f);
    return big;
}

/* the 4 positions' scores from their head sums (NaN where a code was, as on the CPU), to dst (positions
   s..s+3, those <= t) */
static __device__ __forceinline__ void sv_store4(float acc[4][4], uint32_t nan, const float *sw, const float ksc[4],
                                                 float *dst, int64_t s, int64_t t)
{
    float out[4];
#pragma unroll
    for (int p = 0; p < 4; p++) {
        if (nan & (0x80u << (8 * p)))
#pragma unroll
            for (int h = 0; h < 4; h++) acc[p][h] = __int_as_float(0x7fc00000);
        float sc = 0.0f;
#pragma unroll
        for (int h = 0; h < 4; h++) sc = fa(sc, fm(sw[h], acc[p][h] > 0.0f ? acc[p][h] : 0.0f));
        out[p] = fm(sc, ksc[p]);
    }
    if (s + 3 <= t && ((uintptr_t)dst & 15) == 0)
        *(float4 *)dst = make_float4(out[0], out[1], out[2], out[3]);
    else
#pragma unroll
        for (int p = 0; p < 4; p++)
            if (s + p <= t) dst[p] = out[p];
}

#define SV_GBA (SC_MAXD * 8 + 8) /* the same for ASY: groups 2 banks apart, for 4-byte reads */
static_assert((SV_GBA / 4) % 32 == 2 && SV_GBA * (SV_POS / 8) <= SV_GB * (SV_POS / 8), "ASY layout");

static __device__ __forceinline__ void sv_cp8(void *dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
static __device__ __forceinline__ void sv_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void sv_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ASY (the default): the codes come in by cp.async, the first half of the dimensions and the second as
   two groups, so the block sums the first half while the second is in flight (at 100K x 2 queries the
   blocks all fit in one wave and would otherwise load, then compute, all at once); the query is loaded
   while the first half arrives. !ASY: the 16-byte register staging above, then the sums. Same bits. */
template <bool ASY>
__global__ void __launch_bounds__(SV_T) k_scores_fp8v(g_dims g, const int64_t *pos, const float *iq, const float *iw,
                                                     void *const *kcodes, float *const *kscales, float *scores,
                                                     int group, int nq)
{
    enum { H = 4 };
    /* one query at a time (35.3 KB in all: 6 blocks per SM, so that 100K x 2 queries fit in one wave) */
    __shared__ __align__(16) float sq[SC_MAXD * H]; /* [i][h], times 2^8 unless big */
    __shared__ float sw[H];
    __shared__ __align__(16) uint8_t kc[(SV_POS / 8) * SV_GB];
    const int q = blockIdx.x, tid = threadIdx.x, D = g.D;
    const void *mykc = kcodes[q];
    const float *myks = kscales[q];
    /* the group this block leads, as in k_scores_fp8 (uniform returns) */
    int r0 = q;
    if (group > 1)
        while (r0 > 0 && kcodes[r0 - 1] == mykc && kscales[r0 - 1] == myks) r0--;
    if ((q - r0) % group) return;
    int m = 1;
    while (m < group && q + m < nq && kcodes[q + m] == mykc && kscales[q + m] == myks) m++;
    int64_t tmax = -1;
    for (int j = 0; j < m; j++) tmax = pos[q + j] > tmax ? pos[q + j] : tmax;
    const int64_t s0 = (int64_t)blockIdx.y * SV_POS;
    if (tmax < 0 || s0 > tmax) return;
    const uint8_t *codes = (const uint8_t *)mykc;
    const int64_t g0 = s0 / 8, glast = tmax / 8;
    const int ng = glast - g0 + 1 < SV_POS / 8 ? (int)(glast - g0 + 1) : SV_POS / 8;
    const uint8_t *src = codes + g0 * D * 8;
    const int GB = ASY ? SV_GBA : SV_GB;
    if (ASY && ((uintptr_t)src & 7) == 0) { /* 8-byte pieces: dimension d of a group's 8 positions */
        const int hd = D / 2, np = ng * hd;
        for (int v = tid; v < np; v += SV_T) {
            const int gl = v / hd, d = v % hd;
            sv_cp8(kc + gl * SV_GBA + d * 8, src + ((int64_t)gl * D + d) * 8);
        }
        sv_commit();
        for (int v = tid; v < np; v += SV_T) {
            const int gl = v / hd, d = hd + v % hd;
            sv_cp8(kc + gl * SV_GBA + d * 8, src + ((int64_t)gl * D + d) * 8);
        }
        sv_commit();
    } else if (ASY) {
        for (int v = tid; v < ng * D * 8; v += SV_T) kc[(v / (D * 8)) * SV_GBA + v % (D * 8)] = src[v];
    } else if (((uintptr_t)src & 15) == 0) {
        const int per_group = D / 2, nv = ng * per_group; /* 16-byte vectors: 2 dimensions x 8 positions */
        for (int v0 = tid; v0 < nv; v0 += 8 * SV_T) {
            uint4 x[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                if (v0 + u * SV_T < nv) x[u] = __ldg((const uint4 *)src + v0 + u * SV_T);
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int v = v0 + u * SV_T;
                if (v < nv)
                    *(uint4 *)(kc + (v / per_group) * SV_GB + (v % per_group) * 16) =
                        make_uint4(x[u].x, x[u].z, x[u].y, x[u].w);
            }
        }
    } else {
        for (int v = tid; v < ng * D * 8; v += SV_T) {
            const int gl = v / (D * 8), r = v % (D * 8), w = (r & 15) >> 2;
            kc[gl * SV_GB + (r >> 4) * 16 + (w == 1 ? 2 : w == 2 ? 1 : w) * 4 + (r & 3)] = src[v];
        }
    }
    const int64_t s = s0 + tid * 4;
    const uint8_t *mine = kc + (tid >> 1) * GB + (tid & 1) * (ASY ? 4 : 8);
    float ksc[4];
#pragma unroll
    for (int p = 0; p < 4; p++) ksc[p] = s + p <= tmax ? myks[s + p] : 0.0f;
#pragma unroll 1
    for (int j = 0; j < m; j++) {
        /* query j into shared memory (every thread reaches the barriers: no return before the end) */
        if (j) __syncthreads(); /* the previous query's sums are done with sq and sw */
        const int big = sv_load_query(sq, sw, iq, iw, q + j, D);
        if (ASY && j == 0) sv_wait<1>(); /* this thread's copies of the first half */
        __syncthreads();                  /* the query and, at j = 0, the keys (ASY: their first half) */
        const int64_t t = pos[q + j];
        float acc[4][4];
#pragma unroll
        for (int p = 0; p < 4; p++)
#pragma unroll
            for (int h = 0; h < 4; h++) acc[p][h] = 0.0f;
        const int dh = ASY ? D / 2 : D;
        uint32_t nan = 0;
        if (s <= t) /* candidates 0..t */
            nan = big ? sv_dot4<true, ASY>(mine, sq, 0, dh, acc) : sv_dot4<false, ASY>(mine, sq, 0, dh, acc);
        if (ASY && j == 0) {
            sv_wait<0>();
            __syncthreads(); /* the second half */
        }
        if (s > t) continue;
        if (ASY) nan |= big ? sv_dot4<true, ASY>(mine, sq, dh, D, acc) : sv_dot4<false, ASY>(mine, sq, dh, D, acc);
        sv_store4(acc, nan, sw, ksc, scores + (int64_t)(q + j) * g.maxpos + s, s, t);
    }
}

/* k_scores_fp8v<true>'s scores (the same bits) for blocks of one query (launch_scores with group 1: the
   model's step when no session has more than one query), with the codes streamed through a ring of two
   chunks of D / SVR_NCH dimensions instead of held whole. ncu at 100K, C = 20 found k_scores_fp8v limited by
   its warps (six 2-warp blocks an SM, 35.3 KB of shared memory each: 18.75 % occupancy, no eligible warp in a
   third of the cycles); here a block takes 2 KB of query and 2 x 32 groups x (D / 4 x 8 + 8) bytes of codes
   (18.9 KB at D = 128), so twice as many blocks fit. Chunk c + 2 is copied (cp.async, one group a chunk)
   while chunk c + 1 is summed; the sums still run over the dimensions in order, chunk after chunk. */
#define SVR_NCH 4
#define SVR_GB (SC_MAXD / SVR_NCH * 8 + 8) /* bytes per group of 8 positions in a chunk at D = SC_MAXD */
static_assert((SVR_GB / 4) % 32 == 2, "a warp's 16 groups 2 banks apart");

/* chunk c of the block's ng groups into buf (DC dimensions from c * DC); one cp.async group, empty where
   the codes are not 8-byte aligned (copied byte by byte, visible after the next barrier) */
static __device__ __forceinline__ void svr_issue(uint8_t *buf, const uint8_t *src, int ng, int D, int DC, int GB, int c,
                                                 bool al)
{
    const int d0 = c * DC;
    if (al)
        for (int v = threadIdx.x; v < ng * DC; v += SV_T) {
            const int gl = v / DC, d = v % DC;
            sv_cp8(buf + gl * GB + d * 8, src + ((int64_t)gl * D + d0 + d) * 8);
        }
    else
        for (int v = threadIdx.x; v < ng * DC * 8; v += SV_T) {
            const int gl = v / (DC * 8), r = v % (DC * 8);
            buf[gl * GB + r] = src[((int64_t)gl * D + d0) * 8 + r];
        }
    sv_commit();
}

__global__ void __launch_bounds__(SV_T) k_scores_fp8r(g_dims g, const int64_t *pos, const float *iq, const float *iw,
                                                     void *const *kcodes, float *const *kscales, float *scores)
{
    enum { H = 4 };
    __shared__ __align__(16) float sq[SC_MAXD * H]; /* [i][h], times 2^8 unless big */
    __shared__ float sw[H];
    __shared__ __align__(16) uint8_t kc[2][(SV_POS / 8) * SVR_GB];
    const int q = blockIdx.x, tid = threadIdx.x, D = g.D, DC = D / SVR_NCH, GB = DC * 8 + 8;
    const int64_t t = pos[q], s0 = (int64_t)blockIdx.y * SV_POS;
    if (t < 0 || s0 > t) return; /* uniform over the block */
    const uint8_t *codes = (const uint8_t *)kcodes[q];
    const float *myks = kscales[q];
    const int64_t g0 = s0 / 8, glast = t / 8;
    const int ng = glast - g0 + 1 < SV_POS / 8 ? (int)(glast - g0 + 1) : SV_POS / 8;
    const uint8_t *src = codes + g0 * D * 8;
    const bool al = ((uintptr_t)src & 7) == 0;
    svr_issue(kc[0], src, ng, D, DC, GB, 0, al);
    svr_issue(kc[1], src, ng, D, DC, GB, 1, al);
    const int big = sv_load_query(sq, sw, iq, iw, q, D); /* while the first chunks arrive */
    const int64_t s = s0 + tid * 4;
    float ksc[4];
#pragma unroll
    for (int p = 0; p < 4; p++) ksc[p] = s + p <= t ? myks[s + p] : 0.0f;
    float acc[4][4];
#pragma unroll
    for (int p = 0; p < 4; p++)
#pragma unroll
        for (int h = 0; h < 4; h++) acc[p][h] = 0.0f;
    uint32_t nan = 0;
    for (int c = 0; c < SVR_NCH; c++) {
        sv_wait<1>();    /* this thread's copies of chunk c (one group a chunk is committed after it) */
        __syncthreads(); /* everyone's, and at c = 0 the scaled query */
        if (s <= t) {
            const uint8_t *mine = kc[c & 1] + (tid >> 1) * GB + (tid & 1) * 4;
            nan |= big ? sv_dot4<true, true>(mine, sq, c * DC, (c + 1) * DC, acc, c * DC)
                       : sv_dot4<false, true>(mine, sq, c * DC, (c + 1) * DC, acc, c * DC);
        }
        __syncthreads(); /* chunk c's buffer read by everyone */
        if (c + 2 < SVR_NCH) svr_issue(kc[c & 1], src, ng, D, DC, GB, c + 2, al);
        else sv_commit(); /* an empty group keeps the count */
    }
    if (s > t) return; /* candidates 0..t */
    sv_store4(acc, nan, sw, ksc, scores + (int64_t)q * g.maxpos + s, s, t);
}

/* 1 when the environment sets name to something other than "" or "0" (read once into *cache, -1 before) */
static int env_flag(const char *name, int *cache)
{
    if (*cache < 0) {
        const char *e = getenv(name);
        *cache = e && e[0] && strcmp(e, "0") != 0;
    }
    return *cache;
}

/* DHS_REF_SCORES_PREV=1 in the environment: the model launches k_scores_fp8 instead (read once) */
static int scores_prev(void)
{
    static int prev = -1;
    return env_flag("DHS_REF_SCORES_PREV", &prev);
}

/* DHS_REF_SCORES_SYNC=1: k_scores_fp8v<false> (register staging) instead of <true> (cp.async halves) */
static int scores_sync(void)
{
    static int sync = -1;
    return env_flag("DHS_REF_SCORES_SYNC", &sync);
}

/* DHS_REF_SCORES_WHOLE=1: blocks of one query also hold their codes whole (k_scores_fp8v) */
static int scores_whole(void)
{
    static int whole = -1;
    return env_flag("DHS_REF_SCORES_WHOLE", &whole);
}

/* the indexer scores of one layer on stream st: the fast kernel where it applies; group: queries sharing
   their keys scored together, at most this many (1: each alone, by k_scores_fp8r) */
static cudaError_t launch_scores(const g_dims *d, dim3 grid, cudaStream_t st, const int64_t *pos, const float *iq,
                                 const float *iw, void *const *kc, float *const *ks, const float *lut, float *scores,
                                 int group = SC_MAXQ, int prev = -1) /* prev: -1 the environment's choice,
                                                                        0 k_scores_fp8v<true>, 1 k_scores_fp8,
                                                                        2 k_scores_fp8v<false> */
{
    if (prev < 0) prev = scores_prev() ? 1 : scores_sync() ? 2 : 0;
    const bool fast = d->key_fp8 && d->H == 4 && d->D % 16 == 0 && d->D <= SC_MAXD;
    if (fast && prev == 0 && group == 1 && !scores_whole())
        k_scores_fp8r<<<grid, SV_T, 0, st>>>(*d, pos, iq, iw, kc, ks, scores);
    else if (fast && prev == 1)
        k_scores_fp8<4><<<grid, SC_POS, 0, st>>>(*d, pos, iq, iw, kc, ks, lut, scores, group, (int)grid.x);
    else if (fast && prev == 2)
        k_scores_fp8v<false><<<grid, SV_T, 0, st>>>(*d, pos, iq, iw, kc, ks, scores, group, (int)grid.x);
    else if (fast)
        k_scores_fp8v<true><<<grid, SV_T, 0, st>>>(*d, pos, iq, iw, kc, ks, scores, group, (int)grid.x);
    else
        k_scores<<<grid, 256, 0, st>>>(*d, pos, iq, iw, kc, ks, lut, scores);
    return cudaGetLastError();
}

/* top-k of query blockIdx.x: radix select of the k-th largest 64-bit key
   (score order, then lower position), then the selected keys sorted
   descending. 1024 threads. */
__global__ void k_topk(g_dims g, const int64_t *pos, const float *scores, int32_t *sel)
{
    __shared__ unsigned int hist[256];
    __shared__ uint64_t buf[G_MAX_TOPK];
    __shared__ uint64_t s_prefix, s_mask;
    __shared__ int s_rem, s_cnt;
    int q = blockIdx.x;
    int64_t t = pos[q];
    if (t < 0) return;
    int64_t n = t + 1;
    int kk = n < g.k ? (int)n : g.k;
    const float *sc = scores + (int64_t)q * g.maxpos;
    if (threadIdx.x == 0) {
        s_prefix = 0;
        s_mask = 0;
        s_rem = kk;
        s_cnt = 0;
    }
    __syncthreads();
    if (n > g.k) {
        for (int shift = 56; shift >= 0; shift -= 8) {
            for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
            __syncthreads();
            uint64_t prefix = s_prefix, mask = s_mask;
            for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
                uint64_t key = g_topk_key(sc[s], (uint32_t)s);
                if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255], 1u);
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                int cum = 0;
                for (int dg = 255; dg >= 0; dg--) {
                    if (cum + (int)hist[dg] >= s_rem) {
                        s_prefix |= (uint64_t)dg << shift;
                        s_mask |= (uint64_t)255 << shift;
                        s_rem -= cum;
                        break;
                    }
                    cum += (int)hist[dg];
                }
            }
            __syncthreads();
        }
    }
    uint64_t T = n > g.k ? s_prefix : 0;
    for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
        uint64_t key = g_topk_key(sc[s], (uint32_t)s);
        if (key >= T) {
            int slot = atomicAdd(&s_cnt, 1);
            if (slot < G_MAX_TOPK) buf[slot] = key;
        }
    }
    __syncthreads();
    int P = 1;
    while (P < kk) P <<= 1;
    for (int i = s_cnt + (int)threadIdx.x; i < P; i += blockDim.x) buf[i] = 0; /* below every real key */
    __syncthreads();
    for (int size = 2; size <= P; size <<= 1)
        for (int stride = size / 2; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < P; i += blockDim.x) {
                int j = i ^ stride;
                if (j > i) {
                    uint64_t a = buf[i], b = buf[j];
                    int desc = (i & size) == 0;
                    if (desc ? a < b : a > b) {
                        buf[i] = b;
                        buf[j] = a;
                    }
                }
            }
            __syncthreads();
        }
    int32_t *out = sel + (int64_t)q * g.k;
    for (int j = threadIdx.x; j < g.k; j += blockDim.x)
        out[j] = j < kk ? (int32_t)(0xffffffffu - (uint32_t)buf[j]) : -1;
}

/* attention over the located rows + MLP: k_att_prep (queries, RoPE,
   compaction; prep_kern.cuh), the split-K attention of attn_kern.cuh
   (k_att_part: each row read once for all heads, and the query's last chunk
   merges all chunks in chunk order), k_att_out (wuv, wo, MLP;
   prep_kern.cuh). Every value runs in the CPU model's order
   (dhs_ref_attend_mlp, DHS_REF_ATT_CHUNK), so the bits do not depend on the
   batch or where the rows live. The scratch (aq, aidx, anv, apm, aps, apo,
   acnt, ao) is the model's, sized at create for maxq queries. */

/* ------------------------------------------------------------------ host side */
struct dhs_ref_gpu {
    g_dims dims;
    int L, maxq;
    int score_group; /* launch_scores' group: 1 where no batch item has more than one query (desc k_max 1) */
    int producer[DHS_REF_MAX_LAYERS];
    g_layer lw[DHS_REF_MAX_LAYERS];
    dhs_ref_iq_synth iqs;  /* the locality device (iqs.on == 0: off) */
    const float *emb, *w_out, *lut;
    void (*rope_cs)(int64_t, float *, float *);
    cudaStream_t st;
    int own_stream;
    cudaStream_t qs[2];    /* dhs_ref_gpu_queues: load (queue 1) and write-back (queue 2) streams */
    cudaEvent_t *qev;      /* [n_qev] events, one per schedule event */
    int64_t n_qev;
    int nq;
    int32_t *tok;
    int64_t *pos, *pos_h;
    float *cs, *cs_h;
    float *x, *xn, *iq, *iw, *scores, *logits;
    uint8_t *stage;
    int32_t *sel, *loc;
    float *aq, *ao;       /* attention scratch: queries [maxq][nh][576], outputs [maxq][nh][512] */
    float *apm, *aps, *apo; /* split-K partials (attn_kern.cuh): [maxq][chunks][nh] max, sum; [...][512] values */
    int32_t *acnt;          /* [maxq] chunks done per query (zero between launches) */
    int32_t *aidx, *anv;            /* [maxq][k] valid locations in entry order, [maxq] their count */
    int fused;        /* desc.topk_fused: selection by dhs_cuda_topk_fused_n instead of k_topk */
    int32_t *nanc;    /* fused: device [L][maxq] NaN counts of each producer's selection */
    int split;        /* desc.topk_fused == 2: dhs_cuda_topk_split_n (many blocks per query) */
    void *tws;        /* split: its workspace (dhs_cuda_topk_split_ws(maxq) bytes, zero between calls) */
    size_t tws_bytes;
    int32_t *nanc_h;  /* fused: pinned mirror (device step: copied back with the logits) */
    void **ptrs;      /* [4][maxq] device pointer tables: rowdst, kcodes, kscales, base */
    void **ptrs_h;    /* pinned host mirror */
    int64_t max_t;    /* largest pos of the round */
    /* device step (model/gpu.h "device step"): the round's inputs in fixed buffers */
    void **tab;       /* device [4][L][maxq]: rowdst, base, kcodes, kscales */
    void **tab_h;     /* pinned host mirror */
    int32_t *tok_h;   /* pinned [maxq] */
    uint8_t *inb, *inb_h; /* one device block and its pinned mirror: pos [maxq] | tok [maxq] | cs [maxq][64] at
                             inb_cs (g->pos, tok, cs and their mirrors point into them): a step's inputs go up
                             in one copy (each copy call costs the serving host several us) */
    size_t inb_cs;
    float *logits_h;  /* pinned [maxq][V] */
    /* compact tables (dhs_ref_gpu_step_compact): rowdst computed on the device from base and rloc */
    int compact, rows_at_pos, n_rsrc;
    int32_t *lsrc;    /* device [L]: layer -> source (index into rloc) */
    int32_t *rloc;    /* device [n_rsrc][maxq] row locations */
    int32_t *rloc_h;  /* pinned mirror */
    int rloc_dev;     /* 1: the library writes rloc on the device (dhs_ref_gpu_step_rloc_device) */
    cudaEvent_t up_ev;/* after the last upload from the pinned mirrors */
    int up_pending;
    double up_copy_s, up_event_s; /* the last upload's host time: its copy calls, its event record */
    /* the inputs block read by the step itself (k_inputs, the step's first kernel) from the pinned
       mirror through its device address, instead of a cudaMemcpyAsync the host issues: that one call
       cost the serving host 40-45 us of the 109-142 us between two steps at 32K (bench/RESULTS.md).
       in_pending: an upload's step may still read the mirror (cleared by dhs_ref_gpu_step_wait) */
    const uint8_t *inb_hd;
    size_t in_bytes;
    int in_pending;
    uint64_t in_waits; /* dhs_ref_gpu_step_inputs calls that waited for a step (dhs_ref_gpu_step_counts) */
    int32_t *probe_par; /* dhs_ref_gpu_probe_copy / _flip: the device-side buffer bit (with the step's buffers) */
    cudaGraphExec_t exec;
    int exec_nq;      /* nq the graph was captured with */
    int capturing;
    /* profiling marks (dhs_ref_gpu_prof_*): events recorded on st, each tagged with
       the phase of the interval it opens */
    cudaEvent_t *prof_ev;
    int32_t *prof_ph;
    /* deployment weights (dhs_ref_gpu_weights_alloc): a buffer the step streams through, far larger
       than the L2, so each read is HBM traffic as a real model's weights are */
    uint4 *wbuf;
    uint64_t wvecs, woff; /* its 16-byte vectors; where the next read starts */
    uint32_t *wsink;      /* written only if the impossible happens: keeps the loads */
    int wblocks;
    int prof_cap, prof_n, prof_lost, prof_armed;
    char err[200];
};

static dhs_status fail(dhs_ref_gpu *g, const char *what, cudaError_t e)
{
    if (g) snprintf(g->err, sizeof g->err, "%s: %s", what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? DHS_ERR_DEVICE_NOMEM : DHS_ERR_BACKEND;
}

#define CK(call, what)                                \
    do {                                              \
        cudaError_t e_ = (call);                      \
        if (e_ != cudaSuccess) return fail(g, what, e_); \
    } while (0)

extern "C" int dhs_ref_gpu_available(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

extern "C" const char *dhs_ref_gpu_error(const dhs_ref_gpu *g) { return g ? g->err : "no GPU model"; }

static dhs_status up(dhs_ref_gpu *g, const float *h, int64_t n, const float **dev)
{
    *dev = NULL;
    if (!h) return DHS_OK;
    float *p;
    CK(cudaMalloc((void **)&p, sizeof(float) * (size_t)n), "cudaMalloc weights");
    *dev = p;
    CK(cudaMemcpy(p, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice), "upload weights");
    return DHS_OK;
}

extern "C" void dhs_ref_gpu_destroy(dhs_ref_gpu *g)
{
    if (!g) return;
    if (g->st) cudaStreamSynchronize(g->st);
    for (int l = 0; l < DHS_REF_MAX_LAYERS; l++) {
        const float *p[11] = {g->lw[l].wdkv, g->lw[l].wkr, g->lw[l].wq, g->lw[l].wqr, g->lw[l].wuv, g->lw[l].wo,
                              g->lw[l].w1, g->lw[l].w2, g->lw[l].wik, g->lw[l].wiq, g->lw[l].wiw};
        for (int i = 0; i < 11; i++) cudaFree((void *)p[i]);
    }
    cudaFree(g->wbuf);
    cudaFree(g->wsink);
    cudaFree((void *)g->emb);
    cudaFree((void *)g->w_out);
    cudaFree((void *)g->lut);
    cudaFree(g->inb);
    cudaFree(g->x);
    cudaFree(g->xn);
    cudaFree(g->iq);
    cudaFree(g->iw);
    cudaFree(g->scores);
    cudaFree(g->logits);
    cudaFree(g->stage);
    cudaFree(g->sel);
    cudaFree(g->loc);
    cudaFree(g->nanc);
    cudaFree(g->tws);
    cudaFreeHost(g->nanc_h);
    cudaFree(g->ptrs);
    cudaFree(g->aq);
    cudaFree(g->apm);
    cudaFree(g->aps);
    cudaFree(g->apo);
    cudaFree(g->acnt);
    cudaFree(g->ao);
    cudaFree(g->aidx);
    cudaFree(g->anv);
    cudaFreeHost(g->ptrs_h);
    cudaFreeHost(g->inb_h);
    if (g->probe_par) cudaFree(g->probe_par);
    cudaFree(g->tab);
    cudaFreeHost(g->tab_h);
    cudaFree(g->lsrc);
    cudaFree(g->rloc);
    cudaFreeHost(g->rloc_h);
    cudaFreeHost(g->logits_h);
    if (g->up_ev) cudaEventDestroy(g->up_ev);
    for (int i = 0; i < g->prof_cap; i++) cudaEventDestroy(g->prof_ev[i]);
    free(g->prof_ev);
    free(g->prof_ph);
    if (g->exec) cudaGraphExecDestroy(g->exec);
    for (int64_t i = 0; i < g->n_qev; i++)
        if (g->qev[i]) cudaEventDestroy(g->qev[i]);
    free(g->qev);
    for (int i = 0; i < 2; i++)
        if (g->qs[i]) cudaStreamDestroy(g->qs[i]);
    if (g->own_stream && g->st) cudaStreamDestroy(g->st);
    free(g);
}

extern "C" dhs_status dhs_ref_gpu_create(const dhs_ref_gpu_desc *d, void *stream, dhs_ref_gpu **out)
{
    if (!d || !out || d->max_queries < 1 || d->max_positions < 1 || !d->fp8_lut || !d->rope_cs) return DHS_ERR_INVALID_ARG;
    *out = NULL;
    if (d->topk > G_MAX_TOPK || d->n_heads > G_MAX_HEADS || d->d_model > G_MAX_D || d->mlp_hidden > G_MAX_HID ||
        d->d_v > G_MAX_DV || d->idx_heads > G_MAX_IH || d->idx_dim > G_MAX_ID || d->n_heads * d->d_v > G_MAX_D)
        return DHS_ERR_UNSUPPORTED;
    if (!dhs_ref_gpu_available()) return DHS_ERR_UNSUPPORTED;
    dhs_ref_gpu *g = (dhs_ref_gpu *)calloc(1, sizeof *g);
    if (!g) return DHS_ERR_NOMEM;
    g_dims *m = &g->dims;
    m->V = d->vocab;
    m->d = d->d_model;
    m->nh = d->n_heads;
    m->dv = d->d_v;
    m->hid = d->mlp_hidden;
    m->H = d->idx_heads;
    m->D = d->idx_dim;
    m->k = d->topk;
    m->alpha = d->alpha;
    m->logit_scale = d->logit_scale;
    m->wscale = d->idx_wscale;
    m->att_scale = d->att_scale;
    m->exp_portable = d->exp_portable;
    m->key_fp8 = d->key_fp8;
    if (d->iq_synth) g->iqs = *d->iq_synth;
    m->maxpos = d->max_positions;
    g->L = d->n_layers;
    g->maxq = d->max_queries;
    g->score_group = d->k_max == 1 ? 1 : SC_MAXQ;
    g->fused = d->topk_fused != 0;
    g->split = d->topk_fused == 2;
    dhs_status st = DHS_OK;
    int dd = d->d_model, nh = d->n_heads;
    const float *p;
#define UP(h, n, dst)                               \
    do {                                            \
        if ((st = up(g, (h), (n), &p)) != DHS_OK) goto bad; \
        dst = p;                                    \
    } while (0)
    UP(d->emb, (int64_t)d->vocab * dd, g->emb);
    UP(d->w_out, (int64_t)d->vocab * dd, g->w_out);
    UP(d->fp8_lut, 256, g->lut);
    g->rope_cs = d->rope_cs;
    for (int l = 0; l < d->n_layers; l++) {
        const dhs_ref_layer_weights *w = &d->layer[l];
        g_layer *o = &g->lw[l];
        g->producer[l] = d->producer[l];
        UP(w->wdkv, (int64_t)G_NOPE * dd, o->wdkv);
        UP(w->wkr, (int64_t)64 * dd, o->wkr);
        UP(w->wq, (int64_t)nh * G_NOPE * dd, o->wq);
        UP(w->wqr, (int64_t)nh * 64 * dd, o->wqr);
        UP(w->wuv, (int64_t)nh * d->d_v * G_NOPE, o->wuv);
        UP(w->wo, (int64_t)dd * nh * d->d_v, o->wo);
        UP(w->w1, (int64_t)d->mlp_hidden * dd, o->w1);
        UP(w->w2, (int64_t)dd * d->mlp_hidden, o->w2);
        if (d->producer[l]) {
            UP(w->wik, (int64_t)d->idx_dim * dd, o->wik);
            UP(w->wiq, (int64_t)d->idx_heads * d->idx_dim * dd, o->wiq);
            UP(w->wiw, (int64_t)d->idx_heads * dd, o->wiw);
        }
    }
#undef UP
    {
        size_t Q = (size_t)d->max_queries;
        cudaError_t e = cudaSuccess;
#define AL(ptr, bytes)                                              \
    if (e == cudaSuccess) e = cudaMalloc((void **)&(ptr), (bytes));
        g->inb_cs = (Q * (sizeof(int64_t) + sizeof(int32_t)) + 255) & ~(size_t)255;
        const size_t inb = g->inb_cs + Q * 64 * sizeof(float);
        AL(g->inb, inb);
        if (e == cudaSuccess) e = cudaMallocHost((void **)&g->inb_h, inb);
        if (e == cudaSuccess) {
            g->pos = (int64_t *)(void *)g->inb;
            g->tok = (int32_t *)(void *)(g->inb + Q * sizeof(int64_t));
            g->cs = (float *)(void *)(g->inb + g->inb_cs);
            g->pos_h = (int64_t *)(void *)g->inb_h;
            g->tok_h = (int32_t *)(void *)(g->inb_h + Q * sizeof(int64_t));
            g->cs_h = (float *)(void *)(g->inb_h + g->inb_cs);
            void *hd = NULL;
            if (cudaHostGetDevicePointer(&hd, g->inb_h, 0) == cudaSuccess) g->inb_hd = (const uint8_t *)hd;
            else (void)cudaGetLastError(); /* no mapped address: the copy call instead */
        }
        AL(g->x, Q * (size_t)dd * sizeof(float));
        AL(g->xn, Q * (size_t)dd * sizeof(float));
        AL(g->iq, Q * (size_t)(d->idx_heads * d->idx_dim) * sizeof(float));
        AL(g->iw, Q * (size_t)d->idx_heads * sizeof(float));
        AL(g->scores, Q * (size_t)d->max_positions * sizeof(float));
        AL(g->logits, Q * (size_t)d->vocab * sizeof(float));
        AL(g->stage, Q * G_ROW);
        AL(g->sel, Q * (size_t)d->topk * sizeof(int32_t));
        AL(g->loc, Q * (size_t)d->topk * sizeof(int32_t));
        AL(g->ptrs, 4 * Q * sizeof(void *));
        AL(g->aq, Q * (size_t)d->n_heads * G_LAT * sizeof(float));
        const size_t pch = Q * (size_t)att_chunks(d->topk) * (size_t)d->n_heads; /* partials */
        AL(g->apm, pch * sizeof(float));
        AL(g->aps, pch * sizeof(float));
        AL(g->apo, pch * G_NOPE * sizeof(float));
        AL(g->acnt, Q * sizeof(int32_t));
        if (e == cudaSuccess) e = cudaMemset(g->acnt, 0, Q * sizeof(int32_t));
        AL(g->ao, Q * (size_t)d->n_heads * G_NOPE * sizeof(float));
        AL(g->aidx, Q * (size_t)d->topk * sizeof(int32_t));
        AL(g->anv, Q * sizeof(int32_t));
        AL(g->probe_par, sizeof(int32_t));
        if (e == cudaSuccess) e = cudaMemset(g->probe_par, 0, sizeof(int32_t));
#undef AL
        if (e == cudaSuccess) e = cudaMallocHost((void **)&g->ptrs_h, 4 * Q * sizeof(void *));
        /* device step: pointer tables of every layer, pinned mirrors, the logits' landing place */
        const size_t tab = 4 * (size_t)d->n_layers * Q * sizeof(void *);
        if (e == cudaSuccess) e = cudaMalloc((void **)&g->tab, tab);
        if (e == cudaSuccess) e = cudaMallocHost((void **)&g->tab_h, tab);
        if (e == cudaSuccess) e = cudaMallocHost((void **)&g->logits_h, Q * (size_t)d->vocab * sizeof(float));
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&g->up_ev, cudaEventDisableTiming);
        if (e == cudaSuccess) memset(g->tab_h, 0, tab);
        if (g->fused) { /* zero: layers that never select (and unused slots) report no NaN */
            const size_t nb = (size_t)d->n_layers * Q * sizeof(int32_t);
            if (e == cudaSuccess) e = cudaMalloc((void **)&g->nanc, nb);
            if (e == cudaSuccess) e = cudaMemset(g->nanc, 0, nb);
            if (g->split) { /* zero once: every call leaves it zero */
                g->tws_bytes = dhs_cuda_topk_split_ws(Q);
                if (e == cudaSuccess) e = cudaMalloc(&g->tws, g->tws_bytes);
                if (e == cudaSuccess) e = cudaMemset(g->tws, 0, g->tws_bytes);
            }
            if (e == cudaSuccess) e = cudaDeviceSynchronize(); /* done before any kernel of the engine's stream
                                                                  (non-blocking: not ordered after the legacy one) */
            if (e == cudaSuccess) e = cudaMallocHost((void **)&g->nanc_h, nb);
            if (e == cudaSuccess) memset(g->nanc_h, 0, nb);
        }
        if (e != cudaSuccess) {
            st = fail(g, "cudaMalloc buffers", e);
            goto bad;
        }
        if (stream) {
            g->st = (cudaStream_t)stream;
        } else {
            if ((e = cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking)) != cudaSuccess) {
                st = fail(g, "cudaStreamCreate", e);
                goto bad;
            }
            g->own_stream = 1;
        }
    }
    *out = g;
    return DHS_OK;
bad:
    dhs_ref_gpu_destroy(g);
    return st;
}

extern "C" dhs_status dhs_ref_gpu_alloc(dhs_ref_gpu *g, uint64_t bytes, void **dev)
{
    CK(cudaMalloc(dev, bytes ? bytes : 16), "cudaMalloc");
    return DHS_OK;
}

extern "C" void dhs_ref_gpu_free(dhs_ref_gpu *g, void *dev)
{
    if (g && g->st) cudaStreamSynchronize(g->st); /* no kernel of this stream still reads it */
    cudaFree(dev);
}

extern "C" dhs_status dhs_ref_gpu_host_alloc(dhs_ref_gpu *g, uint64_t bytes, void **host)
{
    CK(cudaMallocHost(host, bytes ? bytes : 16), "cudaMallocHost");
    return DHS_OK;
}

extern "C" void dhs_ref_gpu_host_free(dhs_ref_gpu *g, void *host)
{
    (void)g;
    cudaFreeHost(host);
}

/* ---- queues for the streamed prefill (model/lsprefill.c) */
static cudaStream_t queue_stream(dhs_ref_gpu *g, int32_t q) { return q == 0 ? g->st : g->qs[q - 1]; }

extern "C" dhs_status dhs_ref_gpu_queues(dhs_ref_gpu *g, int64_t n_events)
{
    if (!g || n_events < 0 || g->qev) return DHS_ERR_INVALID_ARG;
    for (int i = 0; i < 2; i++)
        if (!g->qs[i]) CK(cudaStreamCreateWithFlags(&g->qs[i], cudaStreamNonBlocking), "cudaStreamCreate");
    g->qev = (cudaEvent_t *)calloc((size_t)(n_events ? n_events : 1), sizeof(cudaEvent_t));
    if (!g->qev) return DHS_ERR_NOMEM;
    g->n_qev = n_events;
    for (int64_t i = 0; i < n_events; i++) CK(cudaEventCreateWithFlags(&g->qev[i], cudaEventDisableTiming), "cudaEventCreate");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_queue_copy(dhs_ref_gpu *g, int32_t queue, void *dst, const void *src, uint64_t bytes)
{
    if (!g || queue < 0 || queue > 2 || (queue && !g->qs[queue - 1])) return DHS_ERR_INVALID_ARG;
    if (bytes) CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, queue_stream(g, queue)), "queue copy");
    return DHS_OK;
}

/* the probe's copy into dst[*par] (4-byte elements: the meter's selections) and the bit's toggle */
__global__ void k_probe_copy(int32_t *dst0, int32_t *dst1, const int32_t *par, const int32_t *src, uint64_t n)
{
    int32_t *dst = *par ? dst1 : dst0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

__global__ void k_probe_flip(int32_t *par) { *par ^= 1; }

extern "C" dhs_status dhs_ref_gpu_probe_copy(dhs_ref_gpu *g, void *dst0, void *dst1, const void *src, uint64_t bytes)
{
    if (!g || !dst0 || !dst1 || !src || (bytes & 3u)) return DHS_ERR_INVALID_ARG;
    if (!g->probe_par) return DHS_ERR_STATE; /* no device step buffers */
    const uint64_t n = bytes / 4;
    if (n == 0) return DHS_OK;
    const unsigned blocks = (unsigned)((n + 255) / 256 < 32 ? (n + 255) / 256 : 32);
    k_probe_copy<<<blocks, 256, 0, g->st>>>((int32_t *)dst0, (int32_t *)dst1, g->probe_par, (const int32_t *)src, n);
    CK(cudaGetLastError(), "k_probe_copy");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_probe_flip(dhs_ref_gpu *g)
{
    if (!g || !g->probe_par) return DHS_ERR_STATE;
    k_probe_flip<<<1, 1, 0, g->st>>>(g->probe_par);
    CK(cudaGetLastError(), "k_probe_flip");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_queue_record(dhs_ref_gpu *g, int32_t queue, int64_t ev)
{
    if (!g || queue < 0 || queue > 2 || (queue && !g->qs[queue - 1]) || ev < 0 || ev >= g->n_qev) return DHS_ERR_INVALID_ARG;
    CK(cudaEventRecord(g->qev[ev], queue_stream(g, queue)), "queue record");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_queue_wait(dhs_ref_gpu *g, int32_t queue, int64_t ev)
{
    if (!g || queue < 0 || queue > 2 || (queue && !g->qs[queue - 1]) || ev < 0 || ev >= g->n_qev) return DHS_ERR_INVALID_ARG;
    CK(cudaStreamWaitEvent(queue_stream(g, queue), g->qev[ev], 0), "queue wait");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_queues_sync(dhs_ref_gpu *g)
{
    if (!g) return DHS_ERR_INVALID_ARG;
    for (int32_t q = 0; q < 3; q++)
        if (q == 0 || g->qs[q - 1]) CK(cudaStreamSynchronize(queue_stream(g, q)), "queue sync");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_upload(dhs_ref_gpu *g, void *dev, const void *host, uint64_t bytes)
{
    CK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, g->st), "upload");
    CK(cudaStreamSynchronize(g->st), "upload sync"); /* the host buffer may go away */
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_memset(dhs_ref_gpu *g, void *dev, int value, uint64_t bytes)
{
    CK(cudaMemsetAsync(dev, value, bytes, g->st), "memset");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_begin(dhs_ref_gpu *g, int32_t nq, const int32_t *tokens, const int64_t *pos)
{
    if (nq < 1 || nq > g->maxq) return DHS_ERR_INVALID_ARG;
    g->nq = nq;
    g->max_t = -1;
    CK(cudaStreamSynchronize(g->st), "sync"); /* the pinned mirrors are free again */
    for (int q = 0; q < nq; q++) {
        g->pos_h[q] = pos[q];
        if (pos[q] > g->max_t) g->max_t = pos[q];
        if (pos[q] >= 0) g->rope_cs(pos[q], g->cs_h + (int64_t)q * 64, g->cs_h + (int64_t)q * 64 + 32);
    }
    if (g->max_t >= g->dims.maxpos) return DHS_ERR_ROW_RANGE;
    CK(cudaMemcpyAsync(g->tok, tokens, sizeof(int32_t) * (size_t)nq, cudaMemcpyHostToDevice, g->st), "tokens");
    CK(cudaMemcpyAsync(g->pos, g->pos_h, sizeof(int64_t) * (size_t)nq, cudaMemcpyHostToDevice, g->st), "positions");
    CK(cudaMemcpyAsync(g->cs, g->cs_h, sizeof(float) * 64 * (size_t)nq, cudaMemcpyHostToDevice, g->st), "rope");
    CK(cudaStreamSynchronize(g->st), "begin sync"); /* tokens is the caller's pageable memory */
    k_embed<<<nq, 64, 0, g->st>>>(g->emb, g->tok, g->pos, g->x, g->dims.d);
    CK(cudaGetLastError(), "k_embed");
    return DHS_OK;
}

/* copies host pointer table `which` (0 rowdst, 1 kcodes, 2 kscales, 3 base) */
static dhs_status put_ptrs(dhs_ref_gpu *g, int which, const void *const *p, void ***dev)
{
    void **h = g->ptrs_h + (size_t)which * g->maxq;
    *dev = g->ptrs + (size_t)which * g->maxq;
    CK(cudaStreamSynchronize(g->st), "sync"); /* an earlier copy from this mirror is done */
    for (int q = 0; q < g->nq; q++) h[q] = (void *)p[q];
    CK(cudaMemcpyAsync(*dev, h, sizeof(void *) * (size_t)g->nq, cudaMemcpyHostToDevice, g->st), "pointer table");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_rows(dhs_ref_gpu *g, int32_t l, void *const *rowdst, void *const *kcodes,
                                       void *const *kscales, uint8_t *rows_host)
{
    if (l < 0 || l >= g->L) return DHS_ERR_INVALID_ARG;
    void **rd = NULL, **kc = NULL, **ks = NULL;
    dhs_status st;
    if (rowdst && (st = put_ptrs(g, 0, rowdst, &rd)) != DHS_OK) return st;
    if (g->producer[l]) {
        if ((st = put_ptrs(g, 1, kcodes, &kc)) != DHS_OK) return st;
        if ((st = put_ptrs(g, 2, kscales, &ks)) != DHS_OK) return st;
    }
    CK(pk_launch_rows(g->st, g->nq, &g->dims, &g->lw[l], g->producer[l], g->pos, g->cs, g->x, g->xn, (uint8_t *const *)rd,
                      g->stage, kc, (float *const *)ks),
       "k_rows");
    if (rows_host) {
        CK(cudaMemcpyAsync(rows_host, g->stage, (size_t)g->nq * G_ROW, cudaMemcpyDeviceToHost, g->st), "rows back");
        CK(cudaStreamSynchronize(g->st), "rows sync");
    }
    return DHS_OK;
}

/* the selection of every valid query over its positions 0..pos[q] into g->sel:
   k_topk, or (fused) the library's kernel (split: its many-blocks-per-query
   form, the same output) with per-query counts pos[q] + 1 over
   the same scores buffer (a query with pos < 0 is skipped by both: its sel row
   is left as it was). Launch only. */
static g_iqs iqs_of(const dhs_ref_gpu *g, int32_t l)
{
    g_iqs z = {g->iqs.on, l, g->iqs.seed, g->iqs.a[l], g->iqs.b[l], g->iqs.d[l], g->iqs.w};
    return z;
}

static dhs_status launch_topk(dhs_ref_gpu *g, int32_t l, const dhs_topk_pages *pg = NULL)
{
    if (pg) { /* the split top-k with the page-table lookup (dhs_ref_gpu_step_select_pages) */
        if (!g->fused || !g->split) {
            snprintf(g->err, sizeof g->err, "page-table locations need the split top-k (topk_fused 2)");
            return DHS_ERR_UNSUPPORTED;
        }
        const int rc = dhs_cuda_topk_split_pages(g->scores, g->dims.maxpos, g->nq, g->dims.maxpos, g->pos, 1, g->dims.k, pg,
                                                 g->sel, g->nanc + (size_t)l * g->maxq, g->tws, g->tws_bytes, g->st);
        if (rc < 0) {
            snprintf(g->err, sizeof g->err, "dhs_cuda_topk_split_pages: bad arguments (k %d, sources %d)", g->dims.k, pg->nsrc);
            return DHS_ERR_INVALID_ARG;
        }
        CK((cudaError_t)rc, "dhs_cuda_topk_split_pages");
        return DHS_OK;
    }
    if (!g->fused) {
        k_topk<<<g->nq, 1024, 0, g->st>>>(g->dims, g->pos, g->scores, g->sel);
        CK(cudaGetLastError(), "k_topk");
        return DHS_OK;
    }
    int rc = g->split ? dhs_cuda_topk_split_n(g->scores, g->dims.maxpos, g->nq, g->dims.maxpos, g->pos, 1, g->dims.k, NULL, 0,
                                              g->sel, NULL, g->nanc + (size_t)l * g->maxq, g->tws, g->tws_bytes, g->st)
                      : dhs_cuda_topk_fused_n(g->scores, g->dims.maxpos, g->nq, g->dims.maxpos, g->pos, 1, g->dims.k, NULL, 0,
                                              g->sel, NULL, g->nanc + (size_t)l * g->maxq, g->st);
    if (rc < 0) {
        snprintf(g->err, sizeof g->err, "%s: bad arguments (k %d, positions %lld)",
                 g->split ? "dhs_cuda_topk_split_n" : "dhs_cuda_topk_fused_n", g->dims.k, (long long)g->dims.maxpos);
        return DHS_ERR_INVALID_ARG;
    }
    CK((cudaError_t)rc, g->split ? "dhs_cuda_topk_split_n" : "dhs_cuda_topk_fused_n");
    return DHS_OK;
}

/* fused: layers [l0, l1)'s NaN counts (host mirror) of the round's queries.
   The fused kernel rejects NaN (its rows are -1), where k_topk would rank a
   NaN above +inf: a NaN score is an error of the pass, never a silent
   difference. */
static dhs_status check_nan(dhs_ref_gpu *g, int32_t l0, int32_t l1)
{
    for (int32_t l = l0; l < l1; l++) {
        if (!g->producer[l]) continue;
        const int32_t *c = g->nanc_h + (size_t)l * g->maxq;
        for (int q = 0; q < g->nq; q++)
            if (c[q] != 0) {
                snprintf(g->err, sizeof g->err,
                         "fused top-k: %d NaN index score(s) in layer %d, query %d (position %lld): rejected", c[q], l, q,
                         (long long)g->pos_h[q]);
                return DHS_ERR_INVALID_ARG;
            }
    }
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_select(dhs_ref_gpu *g, int32_t l, void *const *kcodes, void *const *kscales,
                                         int32_t *sel_host)
{
    if (l < 0 || l >= g->L || !g->producer[l]) return DHS_ERR_INVALID_ARG;
    void **kc, **ks;
    dhs_status st;
    if ((st = put_ptrs(g, 1, kcodes, &kc)) != DHS_OK) return st;
    if ((st = put_ptrs(g, 2, kscales, &ks)) != DHS_OK) return st;
    CK(pk_launch_iq(g->st, g->nq, &g->dims, &g->lw[l], g->pos, g->xn, g->iq, g->iw, iqs_of(g, l)), "k_iq");
    dim3 grid((unsigned)g->nq, (unsigned)((g->max_t + 1 + 255) / 256));
    CK(launch_scores(&g->dims, grid, g->st, g->pos, g->iq, g->iw, kc, (float *const *)ks, g->lut, g->scores, g->score_group),
       "k_scores");
    if ((st = launch_topk(g, l)) != DHS_OK) return st;
    if (sel_host)
        CK(cudaMemcpyAsync(sel_host, g->sel, sizeof(int32_t) * (size_t)g->nq * (size_t)g->dims.k, cudaMemcpyDeviceToHost,
                           g->st),
           "selections back");
    if (g->fused) /* the NaN counts, checked now: the per-call path synchronises anyway */
        CK(cudaMemcpyAsync(g->nanc_h + (size_t)l * g->maxq, g->nanc + (size_t)l * g->maxq, sizeof(int32_t) * (size_t)g->nq,
                           cudaMemcpyDeviceToHost, g->st),
           "NaN counts back");
    if (sel_host || g->fused) CK(cudaStreamSynchronize(g->st), "select sync");
    return g->fused ? check_nan(g, l, l + 1) : DHS_OK;
}

/* the five attention kernels of layer l over the located rows (base: device
   [nq] pool bases, loc: device [nq][k] locations, -1 skipped) */
/* deployment weights: n vectors of the buffer from vector `off` (wrapping at nv), read with 16-byte
   loads; the XOR of everything read is compared with a value the pattern never produces, so the
   loads cannot be dropped */
__global__ void __launch_bounds__(256) k_weights(const uint4 *__restrict__ w, uint64_t nv, uint64_t off, uint64_t n,
                                                 uint32_t *sink)
{
    uint32_t acc = 0;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            uint64_t j = i + u * stride;
            uint64_t k = off + j;
            if (k >= nv) k -= nv;
            v[u] = j < n ? __ldcs(w + k) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 4; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc; /* the buffer is zero: never */
}

extern "C" dhs_status dhs_ref_gpu_weights_alloc(dhs_ref_gpu *g, uint64_t bytes)
{
    if (!g || g->capturing) return DHS_ERR_INVALID_ARG;
    cudaFree(g->wbuf);
    g->wbuf = NULL;
    g->wvecs = g->woff = 0;
    if (bytes == 0) return DHS_OK;
    uint64_t nv = (bytes + 15) / 16;
    CK(cudaMalloc((void **)&g->wbuf, nv * 16), "cudaMalloc deployment weights");
    CK(cudaMemsetAsync(g->wbuf, 0, nv * 16, g->st), "memset deployment weights");
    if (!g->wsink) CK(cudaMalloc((void **)&g->wsink, sizeof(uint32_t)), "cudaMalloc weight sink");
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev), "cudaGetDevice");
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
    g->wblocks = 4 * (sms > 0 ? sms : 1);
    g->wvecs = nv;
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_step_weights(dhs_ref_gpu *g, uint64_t bytes)
{
    if (!g) return DHS_ERR_INVALID_ARG;
    uint64_t n = (bytes + 15) / 16;
    if (n == 0) return DHS_OK;
    if (!g->wbuf || n > g->wvecs) return DHS_ERR_INVALID_ARG;
    k_weights<<<g->wblocks, 256, 0, g->st>>>(g->wbuf, g->wvecs, g->woff, n, g->wsink);
    CK(cudaGetLastError(), "k_weights");
    g->woff = (g->woff + n) % g->wvecs;
    return DHS_OK;
}

static dhs_status launch_attend(dhs_ref_gpu *g, int32_t l, const uint8_t *const *base, const int32_t *loc)
{
    const g_dims *m = &g->dims;
    CK(pk_launch_prep(g->st, g->nq, m, &g->lw[l], g->pos, g->cs, g->xn, loc, g->aq, g->aidx, g->anv), "k_att_prep");
    CK(att_launch_model(g->st, g->nq, m->nh, m->k, m->att_scale, m->exp_portable, base, g->aq, g->aidx, g->anv, g->lut,
                  g->apm, g->aps, g->apo, g->acnt, g->ao),
       "k_att_part");
    CK(pk_launch_out(g->st, g->nq, m, &g->lw[l], g->anv, g->ao, g->x), "k_att_out");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_attend(dhs_ref_gpu *g, int32_t l, const void *const *base, const int32_t *loc_host)
{
    if (l < 0 || l >= g->L) return DHS_ERR_INVALID_ARG;
    void **bd;
    dhs_status st;
    if ((st = put_ptrs(g, 3, base, &bd)) != DHS_OK) return st;
    const int32_t *loc = g->sel;
    if (loc_host) {
        CK(cudaMemcpyAsync(g->loc, loc_host, sizeof(int32_t) * (size_t)g->nq * (size_t)g->dims.k, cudaMemcpyHostToDevice,
                           g->st),
           "locations");
        CK(cudaStreamSynchronize(g->st), "locations sync"); /* loc_host is pageable, caller-owned */
        loc = g->loc;
    }
    return launch_attend(g, l, (const uint8_t *const *)bd, loc);
}

extern "C" dhs_status dhs_ref_gpu_logits(dhs_ref_gpu *g, float *logits_host)
{
    CK(pk_launch_logits(g->st, g->nq, &g->dims, g->w_out, g->pos, g->x, g->logits), "k_logits");
    CK(cudaMemcpyAsync(logits_host, g->logits, sizeof(float) * (size_t)g->nq * (size_t)g->dims.V, cudaMemcpyDeviceToHost,
                       g->st),
       "logits back");
    CK(cudaStreamSynchronize(g->st), "logits sync");
    return DHS_OK;
}

/* ------------------------------------------------------------------ device step */
static void **tab_at(dhs_ref_gpu *g, int which, int32_t l)
{
    return g->tab + ((size_t)which * (size_t)g->L + (size_t)l) * (size_t)g->maxq;
}

extern "C" dhs_status dhs_ref_gpu_step_inputs(dhs_ref_gpu *g, dhs_ref_gpu_step_in *in)
{
    if (!g || !in) return DHS_ERR_INVALID_ARG;
    if (g->capturing) return DHS_ERR_STATE;
    if (g->up_pending) { /* the previous upload has read the pinned mirrors */
        CK(cudaEventSynchronize(g->up_ev), "step inputs wait");
        g->up_pending = 0;
    }
    if (g->in_pending) { /* a step still reads the inputs block: the engine waits for it first */
        CK(cudaStreamSynchronize(g->st), "step inputs wait (the step)");
        g->in_pending = 0;
        g->in_waits++;
    }
    const size_t LQ = (size_t)g->L * (size_t)g->maxq;
    in->tokens = g->tok_h;
    in->pos = g->pos_h;
    in->rowdst = g->tab_h;
    in->base = g->tab_h + LQ;
    in->kcodes = g->tab_h + 2 * LQ;
    in->kscales = g->tab_h + 3 * LQ;
    in->rope = g->cs_h;
    in->stride = g->maxq;
    in->rloc = g->rloc_h;
    return DHS_OK;
}

/* compact tables: row destinations of every layer's queries from the (resident) bases and the
   positions or the row locations; one thread per (layer, query), 64-bit byte offsets */
__global__ void k_rowdst(void **tab, int32_t L, int32_t maxq, int32_t nq, const int64_t *pos, const int32_t *lsrc,
                         const int32_t *rloc, int rows_at_pos)
{
    const int32_t q = blockIdx.x * blockDim.x + threadIdx.x, l = blockIdx.y;
    if (q >= nq || l >= L) return;
    const size_t LQ = (size_t)L * (size_t)maxq, at = (size_t)l * (size_t)maxq + (size_t)q;
    const int64_t t = pos[q];
    if (t < 0) {
        tab[at] = NULL;
        return;
    }
    const int64_t r = rows_at_pos ? t : (int64_t)rloc[(size_t)lsrc[l] * (size_t)maxq + (size_t)q];
    tab[at] = (uint8_t *)tab[LQ + at] + r * (int64_t)G_ROW;
}

extern "C" dhs_status dhs_ref_gpu_step_compact(dhs_ref_gpu *g, const int32_t *layer_src, int32_t n_src, int rows_at_pos)
{
    if (!g || g->capturing || g->compact) return DHS_ERR_STATE;
    if (!layer_src || n_src < 1) return DHS_ERR_INVALID_ARG;
    for (int l = 0; l < g->L; l++)
        if (layer_src[l] < 0 || layer_src[l] >= n_src) return DHS_ERR_INVALID_ARG;
    CK(cudaMalloc((void **)&g->lsrc, sizeof(int32_t) * (size_t)g->L), "cudaMalloc layer sources");
    CK(cudaMemcpy(g->lsrc, layer_src, sizeof(int32_t) * (size_t)g->L, cudaMemcpyHostToDevice), "layer sources");
    const size_t rb = sizeof(int32_t) * (size_t)n_src * (size_t)g->maxq;
    if (!rows_at_pos) {
        CK(cudaMalloc((void **)&g->rloc, rb), "cudaMalloc row locations");
        CK(cudaMallocHost((void **)&g->rloc_h, rb), "cudaMallocHost row locations");
        memset(g->rloc_h, 0xff, rb);
    }
    g->n_rsrc = n_src;
    g->rows_at_pos = rows_at_pos != 0;
    g->compact = 1;
    return DHS_OK;
}

extern "C" int32_t *dhs_ref_gpu_step_rloc_device(dhs_ref_gpu *g)
{
    if (!g || !g->compact || g->rows_at_pos || g->capturing) return NULL;
    g->rloc_dev = 1;
    return g->rloc;
}

extern "C" dhs_status dhs_ref_gpu_step_tables(dhs_ref_gpu *g, int32_t q0, int32_t n)
{
    if (!g || !g->compact || g->capturing) return DHS_ERR_STATE;
    if (q0 < 0 || n < 1 || q0 + n > g->maxq) return DHS_ERR_INVALID_ARG;
    /* columns q0 .. q0+n-1 of the base, kcodes and kscales rows of every layer: one 2D copy */
    const size_t pitch = sizeof(void *) * (size_t)g->maxq, LQ = (size_t)g->L * (size_t)g->maxq;
    CK(cudaMemcpy2DAsync(g->tab + LQ + (size_t)q0, pitch, g->tab_h + LQ + (size_t)q0, pitch, sizeof(void *) * (size_t)n,
                         3 * (size_t)g->L, cudaMemcpyHostToDevice, g->st),
       "step tables");
    CK(cudaEventRecord(g->up_ev, g->st), "step tables event");
    g->up_pending = 1;
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_step_upload(dhs_ref_gpu *g, int32_t nq)
{
    if (!g || nq < 1 || nq > g->maxq) return DHS_ERR_INVALID_ARG;
    if (g->capturing) return DHS_ERR_STATE;
    g->nq = nq;
    g->max_t = -1;
    for (int q = 0; q < nq; q++) /* the RoPE values are the engine's (in.rope) */
        if (g->pos_h[q] > g->max_t) g->max_t = g->pos_h[q];
    if (g->max_t >= g->dims.maxpos) return DHS_ERR_ROW_RANGE;
    /* positions, tokens and the first nq RoPE rows: one block, read by the step's first kernel from the
       mirror's device address (k_inputs), else one copy */
    const double u0 = dhs_wall_s();
    g->in_bytes = g->inb_cs + sizeof(float) * 64 * (size_t)nq;
    int copied = 0;
    if (g->inb_hd)
        g->in_pending = 1;
    else {
        CK(cudaMemcpyAsync(g->inb, g->inb_h, g->in_bytes, cudaMemcpyHostToDevice, g->st), "step inputs");
        copied = 1;
    }
    if (g->compact) { /* the row locations; the tables are on the device (dhs_ref_gpu_step_tables) */
        const size_t rp = sizeof(int32_t) * (size_t)g->maxq;
        if (!g->rows_at_pos && !g->rloc_dev) {
            CK(cudaMemcpy2DAsync(g->rloc, rp, g->rloc_h, rp, sizeof(int32_t) * (size_t)nq, (size_t)g->n_rsrc,
                                 cudaMemcpyHostToDevice, g->st),
               "step row locations");
            copied = 1;
        }
    } else { /* the first nq entries of every [table][layer] row: one 2D copy */
        const size_t pitch = sizeof(void *) * (size_t)g->maxq;
        CK(cudaMemcpy2DAsync(g->tab, pitch, g->tab_h, pitch, sizeof(void *) * (size_t)nq, 4 * (size_t)g->L,
                             cudaMemcpyHostToDevice, g->st),
           "step pointer tables");
        copied = 1;
    }
    const double u1 = dhs_wall_s();
    g->up_copy_s = u1 - u0;
    g->up_event_s = 0;
    if (copied) { /* the copies' event: the next dhs_ref_gpu_step_inputs waits for it */
        CK(cudaEventRecord(g->up_ev, g->st), "step upload event");
        g->up_event_s = dhs_wall_s() - u1;
        g->up_pending = 1;
    }
    return DHS_OK;
}

extern "C" int32_t dhs_ref_gpu_step_stride(const dhs_ref_gpu *g) { return g ? g->maxq : 0; }

extern "C" void dhs_ref_gpu_step_counts(const dhs_ref_gpu *g, uint64_t *inputs_waits, int *inputs_in_step)
{
    *inputs_waits = g ? g->in_waits : 0;
    *inputs_in_step = g && g->inb_hd ? 1 : 0;
}

extern "C" void dhs_ref_gpu_upload_times(const dhs_ref_gpu *g, double *copy_s, double *event_s)
{
    *copy_s = g ? g->up_copy_s : 0.0;
    *event_s = g ? g->up_event_s : 0.0;
}

/* the step's inputs block from the pinned mirror (its device address) into device memory: the step's
   first kernel, so the host issues no copy for it (uncached loads: the host rewrites the mirror between
   two steps) */
__global__ void k_inputs(uint4 *__restrict__ dst, const uint4 *src, size_t n16)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __ldcv(src + i);
}

extern "C" dhs_status dhs_ref_gpu_step_embed(dhs_ref_gpu *g)
{
    if (g->inb_hd) { /* the inputs block (dhs_ref_gpu_step_upload): 16-byte multiples (inb_cs is 256-aligned) */
        const size_t n16 = g->in_bytes / 16;
        const unsigned blocks = (unsigned)((n16 + 255) / 256 < 64 ? (n16 + 255) / 256 : 64);
        k_inputs<<<blocks ? blocks : 1, 256, 0, g->st>>>((uint4 *)(void *)g->inb, (const uint4 *)(const void *)g->inb_hd, n16);
        CK(cudaGetLastError(), "k_inputs");
    }
    if (g->compact) { /* every layer's row destinations (compact tables) */
        dim3 grid((unsigned)((g->nq + 127) / 128), (unsigned)g->L);
        k_rowdst<<<grid, 128, 0, g->st>>>(g->tab, g->L, g->maxq, g->nq, g->pos, g->lsrc, g->rloc, g->rows_at_pos);
        CK(cudaGetLastError(), "k_rowdst");
    }
    k_embed<<<g->nq, 64, 0, g->st>>>(g->emb, g->tok, g->pos, g->x, g->dims.d);
    CK(cudaGetLastError(), "k_embed");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_step_rows(dhs_ref_gpu *g, int32_t l)
{
    if (l < 0 || l >= g->L) return DHS_ERR_INVALID_ARG;
    int p = g->producer[l];
    CK(pk_launch_rows(g->st, g->nq, &g->dims, &g->lw[l], p, g->pos, g->cs, g->x, g->xn, (uint8_t *const *)tab_at(g, 0, l),
                      g->stage, p ? tab_at(g, 2, l) : NULL, p ? (float *const *)tab_at(g, 3, l) : NULL),
       "k_rows");
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_step_select(dhs_ref_gpu *g, int32_t l) { return dhs_ref_gpu_step_select_pages(g, l, NULL); }

extern "C" dhs_status dhs_ref_gpu_step_select_pages(dhs_ref_gpu *g, int32_t l, const dhs_topk_pages *pg)
{
    if (l < 0 || l >= g->L || !g->producer[l]) return DHS_ERR_INVALID_ARG;
    CK(pk_launch_iq(g->st, g->nq, &g->dims, &g->lw[l], g->pos, g->xn, g->iq, g->iw, iqs_of(g, l)), "k_iq");
    /* every position a query may see (blocks past a query's position return at once): the
       grid does not depend on the round, so a captured step stays valid as positions grow */
    dim3 grid((unsigned)g->nq, (unsigned)((g->dims.maxpos + 255) / 256));
    CK(launch_scores(&g->dims, grid, g->st, g->pos, g->iq, g->iw, tab_at(g, 2, l), (float *const *)tab_at(g, 3, l),
                     g->lut, g->scores, g->score_group),
       "k_scores");
    dhs_ref_gpu_prof_mark(g, DHS_REF_PH_TOPK);
    return launch_topk(g, l, pg); /* fused: NaN counts come back with the logits (step_logits / step_wait) */
}

extern "C" int32_t *dhs_ref_gpu_step_sel(dhs_ref_gpu *g) { return g ? g->sel : NULL; }

extern "C" dhs_status dhs_ref_gpu_step_attend(dhs_ref_gpu *g, int32_t l, const int32_t *loc_dev)
{
    if (l < 0 || l >= g->L) return DHS_ERR_INVALID_ARG;
    return launch_attend(g, l, (const uint8_t *const *)tab_at(g, 1, l), loc_dev ? loc_dev : g->sel);
}

extern "C" dhs_status dhs_ref_gpu_step_logits(dhs_ref_gpu *g)
{
    CK(pk_launch_logits(g->st, g->nq, &g->dims, g->w_out, g->pos, g->x, g->logits), "k_logits");
    CK(cudaMemcpyAsync(g->logits_h, g->logits, sizeof(float) * (size_t)g->nq * (size_t)g->dims.V, cudaMemcpyDeviceToHost,
                       g->st),
       "step logits back");
    if (g->fused) { /* every layer's NaN counts of the nq queries: one 2D copy, checked by step_wait */
        const size_t pitch = sizeof(int32_t) * (size_t)g->maxq;
        CK(cudaMemcpy2DAsync(g->nanc_h, pitch, g->nanc, pitch, sizeof(int32_t) * (size_t)g->nq, (size_t)g->L,
                             cudaMemcpyDeviceToHost, g->st),
           "step NaN counts back");
    }
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_step_wait(dhs_ref_gpu *g, const float **logits)
{
    if (g->capturing) return DHS_ERR_STATE;
    CK(cudaStreamSynchronize(g->st), "step sync");
    g->up_pending = 0;
    g->in_pending = 0;
    if (g->fused) {
        dhs_status st = check_nan(g, 0, g->L);
        if (st != DHS_OK) return st;
    }
    if (logits) *logits = g->logits_h;
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_capture_begin(dhs_ref_gpu *g)
{
    if (!g || g->capturing) return DHS_ERR_STATE;
    CK(cudaStreamBeginCapture(g->st, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    g->capturing = 1;
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_capture_end(dhs_ref_gpu *g, int keep)
{
    if (!g || !g->capturing) return DHS_ERR_STATE;
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(g->st, &graph);
    g->capturing = 0;
    if (g->exec) { /* the previous step's graph: its last launch completed (step_wait) */
        cudaGraphExecDestroy(g->exec);
        g->exec = NULL;
        g->exec_nq = 0;
    }
    if (e != cudaSuccess || !keep) {
        if (graph) cudaGraphDestroy(graph);
        return e != cudaSuccess ? fail(g, "cudaStreamEndCapture", e) : DHS_OK;
    }
    e = cudaGraphInstantiate(&g->exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        g->exec = NULL;
        return fail(g, "cudaGraphInstantiate", e);
    }
    g->exec_nq = g->nq;
    return DHS_OK;
}

extern "C" int32_t dhs_ref_gpu_graph_queries(const dhs_ref_gpu *g) { return g && g->exec ? g->exec_nq : 0; }

extern "C" dhs_status dhs_ref_gpu_graph_launch(dhs_ref_gpu *g)
{
    if (!g || !g->exec || g->exec_nq != g->nq || g->capturing) return DHS_ERR_STATE;
    CK(cudaGraphLaunch(g->exec, g->st), "cudaGraphLaunch");
    return DHS_OK;
}

/* ---- profiling marks (gpu.h): one event per mark, recorded on the model's
   stream; dhs_ref_gpu_prof_collect sums the intervals between consecutive
   marks by the phase of the mark that opens them. Never inside a capture. */
extern "C" dhs_status dhs_ref_gpu_prof_enable(dhs_ref_gpu *g, int32_t max_marks)
{
    if (!g || max_marks < 0 || g->capturing) return DHS_ERR_INVALID_ARG;
    if (g->prof_cap) CK(cudaStreamSynchronize(g->st), "prof sync");
    for (int i = 0; i < g->prof_cap; i++) cudaEventDestroy(g->prof_ev[i]);
    free(g->prof_ev);
    free(g->prof_ph);
    g->prof_ev = NULL;
    g->prof_ph = NULL;
    g->prof_cap = g->prof_n = g->prof_lost = 0;
    if (!max_marks) return DHS_OK;
    g->prof_ev = (cudaEvent_t *)calloc((size_t)max_marks, sizeof(cudaEvent_t));
    g->prof_ph = (int32_t *)calloc((size_t)max_marks, sizeof(int32_t));
    if (!g->prof_ev || !g->prof_ph) {
        free(g->prof_ev);
        free(g->prof_ph);
        g->prof_ev = NULL;
        g->prof_ph = NULL;
        return DHS_ERR_NOMEM;
    }
    for (; g->prof_cap < max_marks; g->prof_cap++) {
        cudaError_t e = cudaEventCreate(&g->prof_ev[g->prof_cap]);
        if (e != cudaSuccess) {
            dhs_ref_gpu_prof_enable(g, 0);
            return fail(g, "cudaEventCreate", e);
        }
    }
    return DHS_OK;
}

extern "C" dhs_status dhs_ref_gpu_prof_begin(dhs_ref_gpu *g)
{
    if (!g || !g->prof_cap || g->capturing) return DHS_ERR_STATE;
    g->prof_n = g->prof_lost = 0;
    g->prof_armed = 1;
    return DHS_OK;
}

extern "C" void dhs_ref_gpu_prof_mark(dhs_ref_gpu *g, int32_t phase)
{
    if (!g || !g->prof_armed || g->capturing) return;
    if (g->prof_n >= g->prof_cap || cudaEventRecord(g->prof_ev[g->prof_n], g->st) != cudaSuccess) {
        g->prof_lost++;
        return;
    }
    g->prof_ph[g->prof_n++] = phase;
}

extern "C" dhs_status dhs_ref_gpu_prof_collect(dhs_ref_gpu *g, double *us, int32_t n_phases)
{
    if (!g || !us || n_phases < 1) return DHS_ERR_INVALID_ARG;
    g->prof_armed = 0;
    if (g->prof_lost) {
        g->prof_n = g->prof_lost = 0;
        return DHS_ERR_STATE;
    }
    if (g->prof_n) CK(cudaEventSynchronize(g->prof_ev[g->prof_n - 1]), "prof sync");
    for (int i = 0; i + 1 < g->prof_n; i++) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, g->prof_ev[i], g->prof_ev[i + 1]), "cudaEventElapsedTime");
        if (g->prof_ph[i] >= 0 && g->prof_ph[i] < n_phases) us[g->prof_ph[i]] += 1000.0 * (double)ms;
    }
    g->prof_n = 0;
    return DHS_OK;
}

/* HBM bandwidth (read + write) of a device-to-device copy of `bytes`: the
   roofline the attention kernel is compared with (dhs bench serve). Median of
   5 timed copies after one warm-up; 0 on any error. */
extern "C" int32_t dhs_ref_gpu_attn_chunks(int32_t k) { return att_chunks(k); }

extern "C" dhs_status dhs_ref_gpu_attn(void *stream, int32_t nq, int32_t nh, int32_t k, float att_scale,
                                       int32_t exp_portable, const uint8_t *const *base_dev, const float *aq_dev,
                                       const int32_t *aidx_dev, const int32_t *anv_dev, const float *lut_dev,
                                       float *pm_dev, float *ps_dev, float *po_dev, int32_t *cnt_dev, float *ao_dev)
{
    if (nq < 0 || nh < 1 || nh > ATT_MAXH || k < 1 || k > ATT_MAXK) return DHS_ERR_INVALID_ARG;
    cudaError_t e = att_launch_model((cudaStream_t)stream, nq, nh, k, att_scale, exp_portable, base_dev, aq_dev, aidx_dev,
                                     anv_dev, lut_dev, pm_dev, ps_dev, po_dev, cnt_dev, ao_dev);
    return e == cudaSuccess ? DHS_OK : DHS_ERR_BACKEND;
}

extern "C" dhs_status dhs_ref_gpu_select_kernel(void *stream, int32_t which, int32_t nq, int32_t idx_heads,
                                                int32_t idx_dim, int32_t k, int64_t max_positions,
                                                const int64_t *pos_dev, const float *iq_dev, const float *iw_dev,
                                                void *const *kcodes_dev, float *const *kscales_dev,
                                                const float *lut_dev, float *scores_dev, int32_t *sel_dev,
                                                int32_t *nanc_dev)
{
    if (which < 0 || which > 5 || nq < 0 || idx_heads < 1 || idx_heads > G_MAX_IH || idx_dim < 1 ||
        idx_dim > G_MAX_ID || idx_dim % 8 || k < 1 || k > G_MAX_TOPK || max_positions < 1 || max_positions > INT32_MAX)
        return DHS_ERR_INVALID_ARG;
    if (nq == 0) return DHS_OK;
    g_dims d;
    memset(&d, 0, sizeof d);
    d.H = idx_heads;
    d.D = idx_dim;
    d.k = k;
    d.key_fp8 = 1;
    d.maxpos = max_positions;
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e;
    if (which == DHS_REF_GPU_SCORES || which == DHS_REF_GPU_SCORES_ALONE || which == DHS_REF_GPU_SCORES_PREV ||
        which == DHS_REF_GPU_SCORES_SYNC) {
        dim3 grid((unsigned)nq, (unsigned)((max_positions + 255) / 256));
        e = launch_scores(&d, grid, st, pos_dev, iq_dev, iw_dev, kcodes_dev, kscales_dev, lut_dev, scores_dev,
                          which == DHS_REF_GPU_SCORES_ALONE ? 1 : SC_MAXQ,
                          which == DHS_REF_GPU_SCORES_PREV ? 1 : which == DHS_REF_GPU_SCORES_SYNC ? 2 : -1);
    } else if (which == DHS_REF_GPU_TOPK) {
        k_topk<<<nq, 1024, 0, st>>>(d, pos_dev, scores_dev, sel_dev);
        e = cudaGetLastError();
    } else {
        int rc = dhs_cuda_topk_fused_n(scores_dev, max_positions, nq, max_positions, pos_dev, 1, k, NULL, 0, sel_dev,
                                       NULL, nanc_dev, st);
        if (rc < 0) return DHS_ERR_INVALID_ARG;
        e = (cudaError_t)rc;
    }
    return e == cudaSuccess ? DHS_OK : DHS_ERR_BACKEND;
}

extern "C" double dhs_ref_gpu_hbm_gbps(uint64_t bytes)
{
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double t[5] = {0}, r = 0;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
        goto out;
    if (cudaMemset(a, 1, bytes) != cudaSuccess || cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess) goto out;
    for (int i = 0; i < 5; i++) {
        float ms = 0;
        if (cudaEventRecord(e0) != cudaSuccess || cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess ||
            cudaEventRecord(e1) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess || ms <= 0)
            goto out;
        t[i] = ms;
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    }
    r = 2.0 * (double)bytes / (t[2] * 1e-3) / 1e9;
out:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    (void)cudaGetLastError();
    return r;
}
