/* attn_kern_r2.cuh - the previous split-K attention (k_att_part_r2: rows
 * decoded per head and again for the values, one IEEE multiply and add per
 * step), in two forms: FMA = false, the numerics before the attention's sums
 * were fused (docs/MODEL.md "Attention order"; its bits are NOT the CPU
 * model's any more: kern_bench only times it), and FMA = true, every
 * multiply-accumulate fused as the CPU model's dhs_ref_attention does: the
 * same bits as attn_kern.cuh's kernels (kern_bench compares them), and the
 * model's kernel from ATT_R2F_MIN queries a launch (model/refmodel.cu).
 *
 * Its description, as it was the model's kernel:
 *
 * the reference model's sparse MLA decode attention on the
 * GPU, split-K over the located rows (refmodel.cu runs it between k_att_prep
 * and k_att_out; model/kern_bench.cu times it against its HBM floor).
 *
 * Input per query q: its queries aq[q][nh][576] (RoPE applied), its valid
 * locations aidx[q][0..nv) in entry order (-1 already dropped), nv = anv[q]
 * (<= 0: nothing to do, ao is left alone), and its rows at base[q] + loc * 656.
 *
 *   k_att_part_r2     grid (nq, ceil(k / ATT_CH)), ATT_R2_PT threads: chunk c holds
 *                  valid entries [c ATT_CH, c ATT_CH + n). The chunk's rows
 *                  are read from HBM once for all heads (16-byte loads, all in
 *                  flight) into shared memory; each (entry, head) score is the
 *                  8-lane dot of attn_row.cuh (4 threads, 2 lanes each), codes
 *                  decoded by bit placement (att_raw_r2), not the FP8 table, in
 *                  the common case; per head the chunk max mc, the
 *                  exps p = exp(s - mc), their sum in entry order and the
 *                  unnormalised values oc[i] = sum_e p_e v_e[i] in entry order
 *                  go to the partials pm / ps / po.
 *                  With a counter (the model's path) the query's last chunk
 *                  to finish (integer atomic; __threadfence before counting)
 *                  then merges the partials itself, as k_att_combine_r2 does.
 *   k_att_combine_r2  grid (nq * nh), ATT_R2_PT threads (2 values each): M = max mc,
 *                  w_c = exp(mc - M), S = sum_c w_c sc, A = sum_c w_c oc[i] in
 *                  chunk order, ao = A * (1 / S). The same bits as the merge
 *                  inside k_att_part_r2 (kern_bench compares them).
 *
 * The order is the CPU model's (dhs_ref_attend_mlp, DHS_REF_ATT_CHUNK): one
 * IEEE operation per step, so with exp_portable the bits are the CPU's and do
 * not depend on the batch, the grid, the order blocks finish in or where the
 * rows live. No float atomics.
 * Bytes read per query: nv x 656 (the rows) + the partials, which stay in L2.
 * Row offsets: (int64_t)loc * 656. */
#ifndef DHS_CUDA_ATTN_KERN_R2_CUH
#define DHS_CUDA_ATTN_KERN_R2_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "model/attn_kern.cuh" /* ATT_CH, ATT_MAXH, ATT_MAXK, ATT_MAXC, att_chunks, the partials' layout */

/* one multiply-accumulate step: acc + a b, fused (FMA: the model's attention numerics since the
   sums were fused, docs/MODEL.md "Attention order") or one IEEE multiply then one add (before) */
#define ATT_R2_MAC(a, b, acc) (FMA ? ff((a), (b), (acc)) : fa((acc), fm((a), (b))))
#define ATT_R2_PT 256                                          /* k_att_part_r2 threads */
#define ATT_R2_VPT ((ATT_CH * ATT_RV + ATT_R2_PT - 1) / ATT_R2_PT) /* row vectors per thread */

static_assert(ATT_CH == 32, "k_att_part_r2's softmax warp handles one chunk of 32 entries");
static_assert(ATT_R2_PT == ATT_PT && ATT_R2_VPT == ATT_VPT, "att_chunk_load (attn_kern.cuh): the same threads and vectors");
static_assert(ATT_MAXH * 4 * ATT_CH <= ATT_R2_PT && 4 * ATT_CH % 32 == 0, "score tasks: 4 threads per (entry, head), whole warps");
static_assert(ATT_MAXC % 32 == 0, "the merge's max: whole warps of chunk maxima");
static_assert(G_ROW % 16 == 0, "rows are 16-byte vectors");


/* FP8 E4M3 without the table: the byte's sign and its 7 exponent-mantissa
   bits placed at f32 bits 31 and 26..20 are the code's value times 2^-120,
   exactly, subnormal codes included (an f32 denormal then; no flush to zero
   in this build). Times ts 2^120 (exact: a scaling by a power of two while it
   does not overflow) the one rounding is that of lut[code] * ts, so the bits
   are fm(lut[code], ts). Codes 0x7f / 0xff (NaN) and scales with
   ts 2^120 >= 2^128 take the table. */
#define ATT_R2_P120 1.329227995784916e36f /* 2^120 */
static __device__ __forceinline__ float att_raw_r2(uint32_t w, int k) /* byte k of w (k constant) */
{
    const uint32_t t = w << (24 - 8 * k);
    return __uint_as_float((t & 0x80000000u) | ((t >> 4) & 0x07f00000u));
}
/* nonzero if a byte of w is a NaN code */
static __device__ __forceinline__ uint32_t att_nan4_r2(uint32_t w) { return ((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u; }
/* ts 2^120 if the folded product is exact, else 0 (the table's way) */
static __device__ __forceinline__ float att_fold_r2(float ts)
{
    const float f = fm(ts, ATT_R2_P120);
    return fabsf(f) <= 3.40282347e38f ? f : 0.0f;
}

/* the merge of query q, head h, by the block's ATT_R2_PT threads: M = max mc
   (every chunk's max loaded by one thread, then a tree: order-free), w_c =
   exp(mc - M), S = sum_c w_c sc and A = sum_c w_c oc[i] in chunk order (each
   thread 2 values; its loads issued ATT_R2_MB chunks at a time, not one
   dependent load per chunk, the first batch with the maxima), ao = A * (1 / S). */
#define ATT_R2_MB 16
static_assert(ATT_MAXC <= ATT_R2_PT && ATT_MAXC % ATT_R2_MB == 0, "one thread per chunk in the max");
template <bool FMA>
static __device__ __forceinline__ void att_merge_r2(int q, int h, int nh, int k, int nc, int portable, const float *pm,
                                                 const float *ps, const float *po, float *ao)
{
    __shared__ float wc[ATT_MAXC], lc[ATT_MAXC], wm[ATT_R2_PT / 32];
    const int tid = threadIdx.x, lane = tid & 31;
    const int64_t p0 = (int64_t)q * att_chunks(k) * nh + h; /* chunk j: p0 + j nh */
    __syncthreads(); /* wc, lc, wm free (a previous head) */
    /* the first ATT_R2_MB chunks' partials do not depend on the max: in flight with the maxima */
    const float *o0 = po + p0 * G_NOPE + 2 * tid;
    float2 o[ATT_R2_MB];
#pragma unroll
    for (int u = 0; u < ATT_R2_MB; u++)
        if (u < nc) o[u] = __ldcg((const float2 *)(o0 + (int64_t)u * nh * G_NOPE));
    float mj = -__int_as_float(0x7f800000), lj = 0.0f;
    if (tid < nc) {
        mj = __ldcg(&pm[p0 + (int64_t)tid * nh]);
        lj = __ldcg(&ps[p0 + (int64_t)tid * nh]);
    }
    float m = mj;
    for (int off = 16; off > 0; off >>= 1) {
        const float x = __shfl_xor_sync(0xffffffffu, m, off);
        m = (x > m || m != m) ? x : m;
    }
    if (lane == 0) wm[tid >> 5] = m;
    __syncthreads();
    float M = wm[0];
#pragma unroll
    for (int u = 1; u < ATT_MAXC / 32; u++) M = (wm[u] > M || M != M) ? wm[u] : M;
    if (tid < ATT_MAXC) {
        wc[tid] = tid < nc ? g_expf(fs(mj, M), portable) : 0.0f;
        lc[tid] = lj;
    }
    __syncthreads();
    float S = 0.0f, A0 = 0.0f, A1 = 0.0f;
    for (int j0 = 0; j0 < nc; j0 += ATT_R2_MB) {
        if (j0 > 0) {
#pragma unroll
            for (int u = 0; u < ATT_R2_MB; u++)
                if (j0 + u < nc) o[u] = __ldcg((const float2 *)(o0 + (int64_t)(j0 + u) * nh * G_NOPE));
        }
#pragma unroll
        for (int u = 0; u < ATT_R2_MB; u++)
            if (j0 + u < nc) {
                const float wj = wc[j0 + u];
                S = ATT_R2_MAC(wj, lc[j0 + u], S);
                A0 = ATT_R2_MAC(wj, o[u].x, A0);
                A1 = ATT_R2_MAC(wj, o[u].y, A1);
            }
    }
    const float inv = __fdiv_rn(1.0f, S);
    *(float2 *)&ao[((int64_t)q * nh + h) * G_NOPE + 2 * tid] = make_float2(fm(A0, inv), fm(A1, inv));
}

/* lanes 2 qq, 2 qq + 1 of g_row_score for one row and head (one 16-bit word
   of codes and one float2 of q per 8 values). FAST (no NaN code in the row):
   decoding by att_raw_r2 with the folded tile scales tf; else the table's. */
template <bool FAST, bool FMA>
static __device__ __forceinline__ void att_lanes2_r2(const uint8_t *row, const float *qh, const float *lut,
                                                  const float *tf, int qq, float *r0, float *r1)
{
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int tile = 0; tile < G_NOPE / 128; tile++) {
        const float ts = ((const float *)(row + G_NOPE))[tile], f = tf[tile];
#pragma unroll 8
        for (int j = 0; j < 16; j++) {
            const int i = tile * 128 + 8 * j + 2 * qq;
            const uint32_t w = *(const uint16_t *)(row + i);
            const float2 qv = *(const float2 *)(qh + i);
            float v0, v1;
            if (FAST) {
                v0 = fm(att_raw_r2(w, 0), f), v1 = fm(att_raw_r2(w, 1), f);
            } else {
                v0 = fm(lut[w & 255u], ts), v1 = fm(lut[w >> 8], ts);
            }
            a0 = ATT_R2_MAC(qv.x, v0, a0);
            a1 = ATT_R2_MAC(qv.y, v1, a1);
        }
    }
    const uint32_t *rope = (const uint32_t *)(row + G_NOPE + 16); /* bf16 pairs */
#pragma unroll
    for (int j = 0; j < (G_LAT - G_NOPE) / 8; j++) {
        const int i = 8 * j + 2 * qq; /* rope index */
        const uint32_t bw = rope[i / 2];
        const float2 qv = *(const float2 *)(qh + G_NOPE + i);
        a0 = ATT_R2_MAC(qv.x, __uint_as_float(bw << 16), a0);
        a1 = ATT_R2_MAC(qv.y, __uint_as_float(bw & 0xffff0000u), a1);
    }
    *r0 = a0, *r1 = a1;
}

/* scores: 4 threads per (entry, head), thread qq holds lanes 2 qq, 2 qq + 1 of g_row_score, then
   ((0+1)+(2+3))+((4+5)+(6+7)) by two shuffles (an IEEE add is commutative: the partner's order does not
   matter). Values: thread t keeps values 2t, 2t + 1 of every head, entry order, decoding a 16-bit word per
   entry. Decoding by att_raw_r2: no table lookup (random banks) unless the row has a NaN code (the row's 4
   score threads look at 128 bytes each first) or a tile scale >= 2^8.
   4 blocks per SM: 64 registers, no spill (sm_90, ptxas --resource-usage); 28 KB of shared memory each */
template <bool FMA>
static __global__ void __launch_bounds__(ATT_R2_PT, 4) k_att_part_r2(int nh, int k, float att_scale, int portable,
                                                     const uint8_t *const *base, const float *aq,
                                                     const int32_t *aidx, const int32_t *anv, const float *lut_g,
                                                     float *pm, float *ps, float *po, int32_t *cnt, float *ao)
{
    __shared__ __align__(16) uint8_t rows[ATT_CH][G_ROW];
    __shared__ __align__(16) float qs[ATT_MAXH][G_LAT];
    __shared__ float lut[256];
    __shared__ float sc[ATT_MAXH][ATT_CH];
    __shared__ float p[ATT_MAXH][ATT_CH];
    __shared__ float tfs[ATT_CH][G_NOPE / 128]; /* folded tile scale, 0: decode by the table */
    const int q = blockIdx.x, c = blockIdx.y, tid = threadIdx.x;
    /* the chunk's locations and rows (att_chunk_load, attn_kern.cuh) */
    uint4 r[ATT_VPT];
    int nv;
    const int n = att_chunk_load(q, c, k, aidx, anv, base, r, &nv);
    if (n <= 0) return; /* no valid entry in this chunk (or no query) */
    for (int i = tid; i < 256; i += ATT_R2_PT) lut[i] = lut_g[i];
    for (int i = tid; i < nh * G_LAT; i += ATT_R2_PT) qs[i / G_LAT][i % G_LAT] = aq[(int64_t)q * nh * G_LAT + i];
#pragma unroll
    for (int u = 0; u < ATT_R2_VPT; u++) {
        const int j = tid + u * ATT_R2_PT, e = j / ATT_RV;
        if (e < n) ((uint4 *)rows[e])[j % ATT_RV] = r[u];
    }
    __syncthreads();
    /* scores: thread (h, e, qq), whole warps (128 threads per head) */
    if (tid < nh * 4 * ATT_CH) {
        const int qq = tid & 3, e = (tid >> 2) % ATT_CH, h = tid / (4 * ATT_CH);
        float a0 = 0.0f, a1 = 0.0f;
        uint32_t nan = 0;
        const uint8_t *row = rows[e];
        float tf[G_NOPE / 128];
        bool fast = true;
        if (e < n) {
#pragma unroll
            for (int tile = 0; tile < G_NOPE / 128; tile++) {
                tf[tile] = att_fold_r2(((const float *)(row + G_NOPE))[tile]);
                fast = fast && tf[tile] != 0.0f;
            }
            /* NaN codes: thread qq looks at 16-byte vectors qq, qq + 4, ... of the codes */
#pragma unroll
            for (int u = 0; u < G_NOPE / 64; u++) {
                const uint4 x = ((const uint4 *)row)[4 * u + qq];
                nan |= att_nan4_r2(x.x) | att_nan4_r2(x.y) | att_nan4_r2(x.z) | att_nan4_r2(x.w);
            }
        }
        nan |= __shfl_xor_sync(0xffffffffu, nan, 1); /* the row's 4 threads agree */
        nan |= __shfl_xor_sync(0xffffffffu, nan, 2);
        fast = fast && !nan;
        if (e < n) {
            if (fast)
                att_lanes2_r2<true, FMA>(row, qs[h], lut, tf, qq, &a0, &a1);
            else
                att_lanes2_r2<false, FMA>(row, qs[h], lut, tf, qq, &a0, &a1);
            /* the value pass's decoding of tile qq: folded scale, or 0 for the table */
            if (h == 0) tfs[e][qq] = fast ? att_fold_r2(((const float *)(row + G_NOPE))[qq]) : 0.0f;
        }
        float s = fa(a0, a1);
        s = fa(s, __shfl_xor_sync(0xffffffffu, s, 1));
        s = fa(s, __shfl_xor_sync(0xffffffffu, s, 2));
        if (qq == 0 && e < n) sc[h][e] = fm(s, att_scale);
    }
    __syncthreads();
    /* softmax of the chunk: warp h for head h (att_chunk_softmax, attn_kern.cuh) */
    att_chunk_softmax(q, c, k, nh, n, portable, sc, p, pm, ps);
    __syncthreads();
    /* unnormalised values: thread t holds values 2t, 2t + 1 of every head, entry order */
    static_assert(2 * ATT_R2_PT == G_NOPE, "two values per thread");
    {
        const int i = 2 * tid, tile = i / 128;
        static_assert(ATT_MAXH == 2, "two heads' accumulators");
        float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* [head][value] */
#pragma unroll 4
        for (int e = 0; e < n; e++) {
            const uint32_t cc = *(const uint16_t *)&rows[e][i];
            const float tf = tfs[e][tile]; /* the same for the whole warp */
            float v0, v1;
            if (tf != 0.0f) {
                v0 = fm(att_raw_r2(cc, 0), tf), v1 = fm(att_raw_r2(cc, 1), tf);
            } else {
                const float ts = ((const float *)(rows[e] + G_NOPE))[tile];
                v0 = fm(lut[cc & 255u], ts), v1 = fm(lut[cc >> 8], ts);
            }
            const float p0 = p[0][e];
            a00 = ATT_R2_MAC(p0, v0, a00);
            a01 = ATT_R2_MAC(p0, v1, a01);
            if (nh > 1) {
                const float p1 = p[1][e];
                a10 = ATT_R2_MAC(p1, v0, a10);
                a11 = ATT_R2_MAC(p1, v1, a11);
            }
        }
        const int64_t pi = ((int64_t)q * att_chunks(k) + c) * nh;
        *(float2 *)&po[pi * G_NOPE + i] = make_float2(a00, a01);
        if (nh > 1) *(float2 *)&po[(pi + 1) * G_NOPE + i] = make_float2(a10, a11);
    }
    if (!cnt) return; /* k_att_combine_r2 merges */
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
    for (int h = 0; h < nh; h++) att_merge_r2<FMA>(q, h, nh, k, nc, portable, pm, ps, po, ao);
}

/* the merge as its own kernel: block (q, h), ATT_R2_PT threads; the same bits */
template <bool FMA>
static __global__ void __launch_bounds__(ATT_R2_PT) k_att_combine_r2(int nh, int k, int portable, const int32_t *anv,
                                                        const float *pm, const float *ps, const float *po,
                                                        float *ao)
{
    const int q = blockIdx.x / nh, h = blockIdx.x % nh;
    const int nv = anv[q];
    if (nv <= 0) return;
    att_merge_r2<FMA>(q, h, nh, k, (nv + ATT_CH - 1) / ATT_CH, portable, pm, ps, po, ao);
}

/* the attention on st; partials pm, ps [nq][att_chunks(k)][nh], po [...][512].
   cnt (int32 [nq], zero before the first launch, left zero by each): one
   launch, the last chunk of each query merges (the model's path); cnt NULL:
   k_att_part_r2 then k_att_combine_r2, the same bits */
static inline cudaError_t att_launch_r2(cudaStream_t st, int nq, int nh, int k, float att_scale, int portable,
                                     const uint8_t *const *base, const float *aq, const int32_t *aidx,
                                     const int32_t *anv, const float *lut, float *pm, float *ps, float *po,
                                     int32_t *cnt, float *ao, int fma)
{
    if (nq < 1) return cudaSuccess;
    if (nh < 1 || nh > ATT_MAXH || k < 1 || k > ATT_MAXK) return cudaErrorInvalidValue;
    if (fma)
        k_att_part_r2<true><<<dim3(nq, att_chunks(k)), ATT_R2_PT, 0, st>>>(nh, k, att_scale, portable, base, aq, aidx, anv,
                                                                          lut, pm, ps, po, cnt, ao);
    else
        k_att_part_r2<false><<<dim3(nq, att_chunks(k)), ATT_R2_PT, 0, st>>>(nh, k, att_scale, portable, base, aq, aidx, anv, lut, pm,
                                                          ps, po, cnt, ao);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || cnt) return e;
    if (fma)
        k_att_combine_r2<true><<<nq * nh, ATT_R2_PT, 0, st>>>(nh, k, portable, anv, pm, ps, po, ao);
    else
        k_att_combine_r2<false><<<nq * nh, ATT_R2_PT, 0, st>>>(nh, k, portable, anv, pm, ps, po, ao);
    return cudaGetLastError();
}

#endif
