/* attn_kern.cuh - the reference model's sparse MLA decode attention on the
 * GPU, split-K over the located rows (refmodel.cu runs it between k_att_prep
 * and k_att_out; model/kern_bench.cu times it against its HBM floor and
 * against the previous kernel, attn_kern_r2.cuh).
 *
 * Input per query q: its queries aq[q][nh][576] (RoPE applied), its valid
 * locations aidx[q][0..nv) in entry order (-1 already dropped), nv = anv[q]
 * (<= 0: nothing to do, ao is left alone), and its rows at base[q] + loc * 656.
 *
 *   k_att_part     grid (nq, ceil(k / ATT_CH)), ATT_PT threads: chunk c holds
 *                  valid entries [c ATT_CH, c ATT_CH + n). The chunk's rows
 *                  are read from HBM once (16-byte loads, all in flight) and
 *                  DECODED ONCE into shared memory as f32 (the FP8 codes by
 *                  the hardware's e4m3x2 -> f16x2 conversion, exact, then
 *                  times the tile scale: the CPU's lut[code] * scale; the
 *                  bf16 RoPE values by a shift), shared by both heads and by
 *                  the score and value passes. Scores: 2 threads per
 *                  (entry, head), each 4 of the 8 lanes of dhs_ref_dot_fma
 *                  (one fma per step, float4 loads), the lane tree by a
 *                  shuffle. Per head the chunk max mc, the exps
 *                  p = exp(s - mc), their sum in entry order and the
 *                  unnormalised values oc[i] = fma(p_e, v_e[i], oc[i]) in
 *                  entry order (each thread 2 values of both heads) go to the
 *                  partials pm / ps / po.
 *                  With a counter the query's last chunk to finish (integer
 *                  atomic; __threadfence before counting) then merges the
 *                  partials itself, as k_att_merge does (8 warps, 64 values
 *                  each).
 *   k_att_merge    grid (nq * nh * ATT_MSL), one warp: values
 *                  [64 s, 64 s + 64) of (q, h): M = max mc, w_c = exp(mc - M),
 *                  S = fma(w_c, sc, S), A = fma(w_c, oc[i], A) in chunk order,
 *                  ao = A * (1 / S). Many blocks per query: the partials
 *                  (64 chunks x 2 heads x 2 KB at k 2048) are read from L2 by
 *                  many SMs, not one.
 *
 * The order is the CPU model's (dhs_ref_attention, DHS_REF_ATT_CHUNK,
 * docs/MODEL.md "Attention order"): one IEEE operation per step (a fused
 * multiply-add where the CPU calls fmaf), so with exp_portable the bits are
 * the CPU's and do not depend on the batch, the grid, the order blocks finish
 * in or where the rows live. No float atomics.
 * Bytes read per query: nv x 656 (the rows) + the partials, which stay in L2.
 * Row offsets: (int64_t)loc * 656. */
#ifndef DHS_CUDA_ATTN_KERN_CUH
#define DHS_CUDA_ATTN_KERN_CUH

#include <stdint.h>

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "model/attn_row.cuh"
#include "model/model.h" /* DHS_REF_ATT_CHUNK */

#define ATT_CH DHS_REF_ATT_CHUNK /* valid entries per chunk */
#define ATT_PT 256               /* k_att_part threads */
#define ATT_MAXH 2               /* heads per query */
#define ATT_MAXK 2048            /* entries per query */
#define ATT_MAXC (ATT_MAXK / ATT_CH)
#define ATT_RV (G_ROW / 16)                              /* 16-byte vectors per row: 41 */
#define ATT_VPT ((ATT_CH * ATT_RV + ATT_PT - 1) / ATT_PT) /* row vectors per thread */
#define ATT_DS (G_LAT + 8) /* decoded row stride in floats: 584 = 8 mod 32, 4 rows of 8 floats on 32 banks */
#define ATT_MSL 8          /* merge slices per head: 64 values each, one warp */
#define ATT_MB 32          /* chunk partials in flight per merge lane: 2 batches at k 2048 */
/* dynamic shared memory of k_att_part: dec [ATT_CH][ATT_DS], qs [ATT_MAXH][576],
   sc, p [ATT_MAXH][ATT_CH], tsc [ATT_CH][4]; the merge reuses dec */
#define ATT_SM_DEC 0
#define ATT_SM_Q (ATT_SM_DEC + ATT_CH * ATT_DS)
#define ATT_SM_SC (ATT_SM_Q + ATT_MAXH * G_LAT)
#define ATT_SM_P (ATT_SM_SC + ATT_MAXH * ATT_CH)
#define ATT_SM_TS (ATT_SM_P + ATT_MAXH * ATT_CH)
#define ATT_SMEM ((ATT_SM_TS + ATT_CH * 4) * (int)sizeof(float)) /* 80,384 bytes: 2 blocks per SM */

static_assert(ATT_CH == 32, "k_att_part's softmax warp handles one chunk of 32 entries");
static_assert(ATT_MAXH * 2 * ATT_CH <= ATT_PT, "score tasks: 2 threads per (entry, head)");
static_assert(2 * ATT_PT == G_NOPE, "values: two per thread");
static_assert(ATT_MAXC == 64 && ATT_MAXC % ATT_MB == 0, "the merge's max: two chunk maxima per lane");
static_assert(ATT_MSL * 64 == G_NOPE && ATT_MSL * 32 == ATT_PT, "merge slices: one warp of k_att_part each");
static_assert(G_ROW % 16 == 0 && G_NOPE % 16 == 0 && ATT_DS % 4 == 0, "rows are 16-byte vectors");
static_assert(ATT_SM_DEC + ATT_MSL * 2 * ATT_MAXC <= ATT_SM_Q, "the merge's scratch fits in dec");

/* number of chunks of a query with k entries (the partials' stride) */
static inline __host__ __device__ int att_chunks(int k) { return (k + ATT_CH - 1) / ATT_CH; }

/* two FP8 E4M3 codes (the low byte first) times the tile scale ts: the
   conversion to f16 and then f32 is exact (every E4M3 value, subnormals
   included, is an f16; NaN codes give NaN), so the one rounding is that of
   lut[code] * ts, as dhs_ref_row_decode */
static __device__ __forceinline__ float2 att_dec2(uint32_t w16, float ts)
{
    const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)w16, __NV_E4M3);
    const float2 f = __half22float2(__half2(hr));
    return make_float2(fm(f.x, ts), fm(f.y, ts));
}

/* the merge of values [64 sl, 64 sl + 64) of query q, head h, by one warp
   (lane: 2 values): M = max mc (two chunk maxima per lane, then a tree:
   order-free), w_c = exp(mc - M), S = fma(w_c, sc, S) and A = fma(w_c, oc,
   A) in chunk order (the loads issued ATT_MB chunks at a time, the first
   batch with the maxima), ao = A * (1 / S). wl: 2 ATT_MAXC floats of this
   warp's shared scratch. */
static __device__ __forceinline__ void att_merge_warp(int q, int h, int sl, int nh, int k, int nc, int portable,
                                                      const float *pm, const float *ps, const float *po, float *ao,
                                                      float *wl)
{
    const int lane = threadIdx.x & 31;
    const int64_t p0 = (int64_t)q * att_chunks(k) * nh + h; /* chunk j: p0 + j nh */
    const float *o0 = po + p0 * G_NOPE + 64 * sl + 2 * lane;
    float2 o[ATT_MB];
#pragma unroll
    for (int u = 0; u < ATT_MB; u++)
        if (u < nc) o[u] = __ldcg((const float2 *)(o0 + (int64_t)u * nh * G_NOPE));
    float mj[2], lj[2];
#pragma unroll
    for (int t = 0; t < 2; t++) {
        const int j = lane + 32 * t;
        mj[t] = j < nc ? __ldcg(&pm[p0 + (int64_t)j * nh]) : -__int_as_float(0x7f800000);
        lj[t] = j < nc ? __ldcg(&ps[p0 + (int64_t)j * nh]) : 0.0f;
    }
    float m = (mj[1] > mj[0] || mj[0] != mj[0]) ? mj[1] : mj[0];
    for (int off = 16; off > 0; off >>= 1) {
        const float x = __shfl_xor_sync(0xffffffffu, m, off);
        m = (x > m || m != m) ? x : m; /* NaN ignored, as the CPU's > */
    }
    __syncwarp(); /* wl free (a previous head) */
#pragma unroll
    for (int t = 0; t < 2; t++) {
        const int j = lane + 32 * t;
        wl[j] = j < nc ? g_expf(fs(mj[t], m), portable) : 0.0f;
        wl[ATT_MAXC + j] = lj[t];
    }
    __syncwarp();
    float S = 0.0f, A0 = 0.0f, A1 = 0.0f;
    for (int j0 = 0; j0 < nc; j0 += ATT_MB) {
        if (j0 > 0) {
#pragma unroll
            for (int u = 0; u < ATT_MB; u++)
                if (j0 + u < nc) o[u] = __ldcg((const float2 *)(o0 + (int64_t)(j0 + u) * nh * G_NOPE));
        }
#pragma unroll
        for (int u = 0; u < ATT_MB; u++)
            if (j0 + u < nc) {
                const float wj = wl[j0 + u];
                S = ff(wj, wl[ATT_MAXC + j0 + u], S);
                A0 = ff(wj, o[u].x, A0);
                A1 = ff(wj, o[u].y, A1);
            }
    }
    const float inv = __fdiv_rn(1.0f, S);
    *(float2 *)&ao[((int64_t)q * nh + h) * G_NOPE + 64 * sl + 2 * lane] = make_float2(fm(A0, inv), fm(A1, inv));
}

/* Chunk c of query q, by ATT_PT threads: its locations loaded together with the valid count nv (*nv_out),
   then, when the chunk holds n > 0 valid entries, thread tid's 16-byte vectors j = tid + u ATT_PT of its
   rows (entry j / ATT_RV, vector j % ATT_RV) into r, every load issued before any use. Returns n (0: no
   valid entry: nothing loaded). Shared by both split-K kernels (attn_kern_r2.cuh). */
static __device__ __forceinline__ int att_chunk_load(int q, int c, int k, const int32_t *aidx, const int32_t *anv,
                                                     const uint8_t *const *base, uint4 (&r)[ATT_VPT], int *nv_out)
{
    const int tid = threadIdx.x, e0 = c * ATT_CH;
    const int32_t *iq = aidx + (int64_t)q * k + e0;
    int32_t loc[ATT_VPT];
#pragma unroll
    for (int u = 0; u < ATT_VPT; u++) {
        const int j = tid + u * ATT_PT, e = j / ATT_RV;
        loc[u] = (e < ATT_CH && e0 + e < k) ? __ldg(&iq[e]) : -1;
    }
    const int nv = anv[q];
    *nv_out = nv;
    if (nv <= e0) return 0;
    const int n = nv - e0 < ATT_CH ? nv - e0 : ATT_CH;
    const uint8_t *b0 = base[q];
#pragma unroll
    for (int u = 0; u < ATT_VPT; u++) {
        const int j = tid + u * ATT_PT, e = j / ATT_RV;
        if (e < n) r[u] = __ldg((const uint4 *)(b0 + (int64_t)loc[u] * G_ROW) + j % ATT_RV);
    }
    return n;
}

/* the softmax of chunk c of query q, by warp h for head h (h < nh): the chunk's max mc of the scores
   sc[h][0..n) (order-free; NaN ignored, as the CPU's >), p[h][e] = exp(s - mc) (0 past n), and their sum in
   entry order; mc and the sum go to the partials pm / ps. Shared by both split-K kernels
   (attn_kern_r2.cuh), so their exps and sums are the same operations. */
static __device__ __forceinline__ void att_chunk_softmax(int q, int c, int k, int nh, int n, int portable,
                                                         float (*sc)[ATT_CH], float (*p)[ATT_CH], float *pm,
                                                         float *ps)
{
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (w < nh) {
        float s = lane < n ? sc[w][lane] : -__int_as_float(0x7f800000);
        float m = s;
        for (int off = 16; off > 0; off >>= 1) {
            float o = __shfl_xor_sync(0xffffffffu, m, off);
            m = (o > m || m != m) ? o : m; /* NaN ignored, as the CPU's > */
        }
        p[w][lane] = lane < n ? g_expf(fs(s, m), portable) : 0.0f;
        __syncwarp();
        if (lane == 0) {
            float sum = 0.0f; /* + 0.0f past n: the same bits (sum >= +0) */
#pragma unroll
            for (int e = 0; e < ATT_CH; e++) sum = fa(sum, p[w][e]);
            const int64_t pi = ((int64_t)q * att_chunks(k) + c) * nh + w;
            pm[pi] = m;
            ps[pi] = sum;
        }
    }
}

/* 2 blocks per SM (80 KB of shared memory each): at most 128 registers (124), no spill (sm_90, ptxas --resource-usage) */
static __global__ void __launch_bounds__(ATT_PT, 2) k_att_part(int nh, int k, float att_scale, int portable,
                                                     const uint8_t *const *base, const float *aq,
                                                     const int32_t *aidx, const int32_t *anv, float *pm, float *ps,
                                                     float *po, int32_t *cnt, float *ao)
{
    extern __shared__ __align__(16) float att_sm[];
    float(*dec)[ATT_DS] = (float(*)[ATT_DS])(att_sm + ATT_SM_DEC);
    float(*qs)[G_LAT] = (float(*)[G_LAT])(att_sm + ATT_SM_Q);
    float(*sc)[ATT_CH] = (float(*)[ATT_CH])(att_sm + ATT_SM_SC);
    float(*p)[ATT_CH] = (float(*)[ATT_CH])(att_sm + ATT_SM_P);
    float(*tsc)[4] = (float(*)[4])(att_sm + ATT_SM_TS);
    const int q = blockIdx.x, c = blockIdx.y, tid = threadIdx.x;
    /* the chunk's locations and rows (att_chunk_load) */
    uint4 r[ATT_VPT];
    int nv;
    const int n = att_chunk_load(q, c, k, aidx, anv, base, r, &nv);
    if (n <= 0) return; /* no valid entry in this chunk (or no query) */
    {
        const float4 *aq4 = (const float4 *)(aq + (int64_t)q * nh * G_LAT);
        for (int i = tid; i < nh * G_LAT / 4; i += ATT_PT) ((float4 *)qs)[i] = __ldg(aq4 + i);
    }
    /* the tile scales first (16-byte vector 32 of a row) */
#pragma unroll
    for (int u = 0; u < ATT_VPT; u++) {
        const int j = tid + u * ATT_PT, e = j / ATT_RV;
        if (e < n && j % ATT_RV == G_NOPE / 16) *(uint4 *)tsc[e] = r[u];
    }
    __syncthreads();
    /* decode once: vectors 0..31 the codes (16 each), 33..40 the RoPE values (8 each); rows past n: codes 0 */
#pragma unroll
    for (int u = 0; u < ATT_VPT; u++) {
        const int j = tid + u * ATT_PT, e = j / ATT_RV, v = j % ATT_RV;
        if (e >= ATT_CH) continue;
        if (v < G_NOPE / 16) {
            float4 *d = (float4 *)&dec[e][16 * v];
            if (e < n) {
                const float ts = tsc[e][v / 8];
                const uint32_t w[4] = {r[u].x, r[u].y, r[u].z, r[u].w};
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    const float2 a = att_dec2(w[m] & 0xffffu, ts), b = att_dec2(w[m] >> 16, ts);
                    d[m] = make_float4(a.x, a.y, b.x, b.y);
                }
            } else {
#pragma unroll
                for (int m = 0; m < 4; m++) d[m] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        } else if (v > G_NOPE / 16 && e < n) {
            float4 *d = (float4 *)&dec[e][G_NOPE + 8 * (v - G_NOPE / 16 - 1)];
            d[0] = make_float4(__uint_as_float(r[u].x << 16), __uint_as_float(r[u].x & 0xffff0000u),
                               __uint_as_float(r[u].y << 16), __uint_as_float(r[u].y & 0xffff0000u));
            d[1] = make_float4(__uint_as_float(r[u].z << 16), __uint_as_float(r[u].z & 0xffff0000u),
                               __uint_as_float(r[u].w << 16), __uint_as_float(r[u].w & 0xffff0000u));
        }
    }
    __syncthreads();
    /* scores: thread (h, e, half), half holding lanes 4 half .. 4 half + 3 of dhs_ref_dot_fma
       (element 8 j + 4 half + m in lane 4 half + m), then (0+1)+(2+3) and (4+5)+(6+7) summed by a
       shuffle (an IEEE add is commutative: both threads get the same bits) */
    if (tid < nh * 2 * ATT_CH) {
        const int hf = tid & 1, e = (tid >> 1) % ATT_CH, h = tid / (2 * ATT_CH);
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        if (e < n) {
            const float *dr = dec[e] + 4 * hf, *qh = qs[h] + 4 * hf;
#pragma unroll 8
            for (int j = 0; j < G_LAT / 8; j++) {
                const float4 d = *(const float4 *)(dr + 8 * j), x = *(const float4 *)(qh + 8 * j);
                a0 = ff(x.x, d.x, a0);
                a1 = ff(x.y, d.y, a1);
                a2 = ff(x.z, d.z, a2);
                a3 = ff(x.w, d.w, a3);
            }
        }
        float s = fa(fa(a0, a1), fa(a2, a3));
        s = fa(s, __shfl_xor_sync(0xffffffffu, s, 1));
        if (hf == 0 && e < n) sc[h][e] = fm(s, att_scale);
    }
    __syncthreads();
    /* softmax of the chunk: warp h for head h (att_chunk_softmax) */
    att_chunk_softmax(q, c, k, nh, n, portable, sc, p, pm, ps);
    __syncthreads();
    /* unnormalised values: thread t holds values 2t, 2t + 1 of both heads, entry order, 4 entries
       at a time; entries n .. (n + 3) & ~3 have p = 0 and decoded values 0, and fma(0, 0, a) = a
       exactly (a is never -0: it starts at +0 and an exact zero sum rounds to +0) */
    {
        const int i = 2 * tid;
        static_assert(ATT_MAXH == 2, "two heads' accumulators");
        float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* [head][value] */
        const int n4 = (n + 3) & ~3;
        for (int e = 0; e < n4; e += 4) {
            const float4 p0 = *(const float4 *)&p[0][e], p1 = *(const float4 *)&p[1][e];
            const float pa[4] = {p0.x, p0.y, p0.z, p0.w}, pb[4] = {p1.x, p1.y, p1.z, p1.w};
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const float2 v = *(const float2 *)&dec[e + m][i];
                a00 = ff(pa[m], v.x, a00);
                a01 = ff(pa[m], v.y, a01);
                a10 = ff(pb[m], v.x, a10); /* nh = 1: p[1] unset, the result not stored */
                a11 = ff(pb[m], v.y, a11);
            }
        }
        const int64_t pi = ((int64_t)q * att_chunks(k) + c) * nh;
        *(float2 *)&po[pi * G_NOPE + i] = make_float2(a00, a01);
        if (nh > 1) *(float2 *)&po[(pi + 1) * G_NOPE + i] = make_float2(a10, a11);
    }
    if (!cnt) return; /* k_att_merge merges */
    /* the query's last chunk to finish merges all of them, in chunk order (the
       arrival order only picks which block does it; the bits are the same) */
    __shared__ int s_last;
    __threadfence(); /* this block's partials visible device-wide before it counts */
    __syncthreads();
    const int nc = (nv + ATT_CH - 1) / ATT_CH;
    if (tid == 0) s_last = atomicAdd(&cnt[q], 1) == nc - 1;
    __syncthreads();
    if (!s_last) return;
    if (tid == 0) cnt[q] = 0; /* ready for the next launch */
    __threadfence();
    const int w = tid >> 5; /* warp w merges values 64 w .. 64 w + 63 */
    for (int h = 0; h < nh; h++)
        att_merge_warp(q, h, w, nh, k, nc, portable, pm, ps, po, ao, att_sm + ATT_SM_DEC + w * 2 * ATT_MAXC);
}

/* the merge as its own kernel: block (q, h, slice), one warp; the same bits */
static __global__ void __launch_bounds__(32) k_att_merge(int nh, int k, int portable, const int32_t *anv,
                                                      const float *pm, const float *ps, const float *po, float *ao)
{
    __shared__ float wl[2 * ATT_MAXC];
    const int sl = blockIdx.x % ATT_MSL, qh = blockIdx.x / ATT_MSL;
    const int q = qh / nh, h = qh % nh;
    const int nv = anv[q];
    if (nv <= 0) return;
    att_merge_warp(q, h, sl, nh, k, (nv + ATT_CH - 1) / ATT_CH, portable, pm, ps, po, ao, wl);
}

/* k_att_part's shared memory limit, set once per device (80 KB > the 48 KB default) */
static inline cudaError_t att_prepare(void)
{
    static int done[64];
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev >= 0 && dev < 64 && done[dev]) return cudaSuccess;
    e = cudaFuncSetAttribute(k_att_part, cudaFuncAttributeMaxDynamicSharedMemorySize, ATT_SMEM);
    if (e == cudaSuccess && dev >= 0 && dev < 64) done[dev] = 1;
    return e;
}

/* the attention on st; partials pm, ps [nq][att_chunks(k)][nh], po [...][512].
   cnt (int32 [nq], zero before the first launch, left zero by each): one
   launch, the last chunk of each query merges; cnt NULL: k_att_part then
   k_att_merge (many blocks per query), the same bits. lut: unused (the
   kernel decodes by the hardware's conversion), kept for the callers. */
static inline cudaError_t att_launch(cudaStream_t st, int nq, int nh, int k, float att_scale, int portable,
                                     const uint8_t *const *base, const float *aq, const int32_t *aidx,
                                     const int32_t *anv, const float *lut, float *pm, float *ps, float *po,
                                     int32_t *cnt, float *ao)
{
    (void)lut;
    if (nq < 1) return cudaSuccess;
    if (nh < 1 || nh > ATT_MAXH || k < 1 || k > ATT_MAXK) return cudaErrorInvalidValue;
    cudaError_t e = att_prepare();
    if (e != cudaSuccess) return e;
    k_att_part<<<dim3(nq, att_chunks(k)), ATT_PT, ATT_SMEM, st>>>(nh, k, att_scale, portable, base, aq, aidx, anv, pm,
                                                                 ps, po, cnt, ao);
    e = cudaGetLastError();
    if (e != cudaSuccess || cnt) return e;
    k_att_merge<<<nq * nh * ATT_MSL, 32, 0, st>>>(nh, k, portable, anv, pm, ps, po, ao);
    return cudaGetLastError();
}

#endif
