/* overlap.cu - the reference model's sparse attention split around the miss
 * copy (overlap.cuh; C reference dev/overlap/overlap.c; docs/FLASHOFFLOAD.md §3).
 *
 * Kernels (C-style, extern "C" launchers):
 *   k_ov_scores   grid (nq, ceil(k/32)), 256 threads: 32 entries of one
 *                 query per block; the rows of the requested set are loaded
 *                 as 16-byte vectors (all in flight) and decoded once into
 *                 shared memory (g_row_val's operations), then every
 *                 (entry, head) score is the 576-long 8-lane dot of
 *                 attn_row.cuh (the operations of the k_att_* kernels / dhs_ref_dot_fma),
 *                 times att_scale. Blocks with no entry of the set exit.
 *   k_ov_reduce   grid (nq, chunks, 8), 288 threads: one chunk of entries
 *                 (exact: the whole k) x 64 of the 512 values. The set's
 *                 entries are compacted in entry order; max per head (order-
 *                 free); tiles of 128 entries: p = exp(s - max) and the
 *                 tile's 64 codes + scale per entry into shared (16-byte
 *                 loads), then warps 0-7 accumulate acc[i] = fma(p, v[i], acc[i]) in entry order
 *                 (each thread: one value i, 4 heads) while warp 8 sums p in
 *                 entry order (one lane per head). Exact: out = acc * (1/sum);
 *                 fast: the partial (max, sum, acc) is written.
 *   k_ov_merge    grid (nq * nh), 512 threads: the online-softmax merge of the
 *                 2*C partials in the order (hits 0..C-1), (misses 0..C-1).
 * Every floating-point operation is an explicit _rn intrinsic in the order of
 * the C reference, so with exp_portable the outputs equal it bit for bit.
 * Row offsets: (int64_t)loc * 656. */
#include <stdint.h>

#include "model/attn_row.cuh"
#include "dev/overlap/overlap.cuh"

#define OV_EB 32     /* entries per k_ov_scores block */
#define OV_QS 577    /* shared row stride in floats: heads / entries on distinct banks */
#define OV_ST 256    /* k_ov_scores threads */
#define OV_RT 288    /* k_ov_reduce threads: 256 accumulate + one summing warp */
#define OV_DB 64     /* values per k_ov_reduce block */
#define OV_TILE 128  /* entries per p tile */
#define OV_RV 41     /* 16-byte vectors per row (656 / 16) */
#define OV_VPT ((OV_EB * OV_RV + OV_ST - 1) / OV_ST) /* vectors per thread in k_ov_scores */
#define OV_CPT ((OV_TILE * (OV_DB / 16) + OV_RT - 1) / OV_RT) /* code vectors per thread per tile */
#define OV_PPT ((OV_TILE * DHS_OV_MAX_HEADS + OV_RT - 1) / OV_RT) /* p values per thread per tile */

static __device__ __forceinline__ int ov_in_set(const int32_t *loc, const uint8_t *miss, int64_t i, int which)
{
    if (loc[i] < 0) return 0;
    if (which == DHS_OV_ALL) return 1;
    int m = miss ? miss[i] != 0 : 0;
    return which == DHS_OV_MISSES ? m : !m;
}

static __device__ __forceinline__ float ov_comb8(const float *a)
{
    return fa(fa(fa(a[0], a[1]), fa(a[2], a[3])), fa(fa(a[4], a[5]), fa(a[6], a[7])));
}

__global__ void __launch_bounds__(OV_ST) k_ov_scores(dhs_ov_shape s, int which, const float *qg,
                                                     const uint8_t *const *base, const int32_t *loc,
                                                     const uint8_t *miss, const float *lut_g, float *scores)
{
    extern __shared__ float ov_sm[];
    float *lut = ov_sm;                  /* 256 */
    float *qs = ov_sm + 256;             /* [nh][OV_QS] */
    float *dec = qs + s.nh * OV_QS;      /* [OV_EB][OV_QS] */
    __shared__ int sel[OV_EB];
    __shared__ int64_t roff[OV_EB];
    const int q = blockIdx.x, e0 = blockIdx.y * OV_EB, tid = threadIdx.x;
    const int64_t lq = (int64_t)q * s.k;
    int in = 0;
    if (tid < OV_EB) {
        int e = e0 + tid;
        in = e < s.k && ov_in_set(loc, miss, lq + e, which);
        sel[tid] = in;
        roff[tid] = in ? (int64_t)loc[lq + e] * G_ROW : 0;
    }
    if (!__syncthreads_or(in)) return;
    for (int i = tid; i < 256; i += OV_ST) lut[i] = lut_g[i];
    const float *qq = qg + (int64_t)q * s.nh * G_LAT;
    for (int i = tid; i < s.nh * G_LAT; i += OV_ST) qs[(i / G_LAT) * OV_QS + i % G_LAT] = qq[i];
    __syncthreads();
    /* the rows, 16-byte vectors (41 per row: 32 of codes, 1 of scales, 8 of
       RoPE), every load of the block in flight before the first decode; the
       values are g_row_val's: fm(lut[code], tile scale) and bf16 << 16 */
    const uint8_t *b = base[q];
    {
        uint4 vb[OV_VPT];
        float vs[OV_VPT];
#pragma unroll
        for (int u = 0; u < OV_VPT; u++) {
            const int v = tid + u * OV_ST, j = v / OV_RV, c = v % OV_RV;
            vb[u] = make_uint4(0, 0, 0, 0);
            vs[u] = 0.0f;
            if (v < OV_EB * OV_RV && sel[j]) {
                const uint8_t *row = b + roff[j];
                vb[u] = *(const uint4 *)(row + c * 16);
                if (c < 32) vs[u] = ((const float *)(row + G_NOPE))[c / 8];
            }
        }
#pragma unroll
        for (int u = 0; u < OV_VPT; u++) {
            const int v = tid + u * OV_ST, j = v / OV_RV, c = v % OV_RV;
            if (v >= OV_EB * OV_RV || c == 32) continue; /* the scales' vector */
            float *dj = dec + j * OV_QS;
            const uint8_t *by = (const uint8_t *)&vb[u];
            if (c < 32) {
#pragma unroll
                for (int t = 0; t < 16; t++) dj[c * 16 + t] = sel[j] ? fm(lut[by[t]], vs[u]) : 0.0f;
            } else {
                const uint16_t *hv = (const uint16_t *)&vb[u];
#pragma unroll
                for (int t = 0; t < 8; t++) dj[G_NOPE + (c - 33) * 8 + t] = __uint_as_float((uint32_t)hv[t] << 16);
            }
        }
    }
    __syncthreads();
    /* thread: head h, entries j and j + 16 (the query value is loaded once for both) */
    for (int p = tid; p < (OV_EB / 2) * s.nh; p += OV_ST) {
        const int h = p % s.nh, j = p / s.nh;
        if (!sel[j] && !sel[j + OV_EB / 2]) continue;
        const float *qh = qs + h * OV_QS, *d0 = dec + j * OV_QS, *d1 = dec + (j + OV_EB / 2) * OV_QS;
        float a0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, a1[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int i = 0; i < G_LAT; i += 8)
#pragma unroll
            for (int l = 0; l < 8; l++) {
                float qv = qh[i + l];
                a0[l] = ff(qv, d0[i + l], a0[l]);
                a1[l] = ff(qv, d1[i + l], a1[l]);
            }
        float *sc = scores + ((int64_t)q * s.nh + h) * s.k + e0;
        if (sel[j]) sc[j] = fm(ov_comb8(a0), s.att_scale);
        if (sel[j + OV_EB / 2]) sc[j + OV_EB / 2] = fm(ov_comb8(a1), s.att_scale);
    }
}

/* final != 0: exact reduction (one chunk = k, set ALL) into out; else the
   partial of set `which` for chunk blockIdx.y */
__global__ void __launch_bounds__(OV_RT, 1) k_ov_reduce(dhs_ov_shape s, int which, int chunk, int final_,
                                                     const uint8_t *const *base, const int32_t *loc,
                                                     const uint8_t *miss, const float *scores, const float *lut_g,
                                                     float *out, float *pm, float *pl, float *pacc)
{
    __shared__ float lut[256];
    __shared__ int32_t le[DHS_OV_MAX_K];
    __shared__ int64_t lr[DHS_OV_MAX_K];
    __shared__ int cnt[OV_RT];
    __shared__ __align__(16) float p[OV_TILE][DHS_OV_MAX_HEADS];
    __shared__ __align__(16) uint8_t codes[OV_TILE][OV_DB]; /* the tile's codes of this block's 64 values */
    __shared__ float tscl[OV_TILE];                        /* and their tile scale */
    __shared__ float smax[DHS_OV_MAX_HEADS], ssum[DHS_OV_MAX_HEADS];
    const int q = blockIdx.x, c = blockIdx.y, ds = blockIdx.z, tid = threadIdx.x, nh = s.nh;
    const int64_t lq = (int64_t)q * s.k;
    const int e0 = c * chunk, e1 = e0 + chunk < s.k ? e0 + chunk : s.k, len = e1 - e0;
    /* the set's entries of the chunk in entry order: per-thread counts, scan, write */
    const int per = (len + OV_RT - 1) / OV_RT;
    const int c0 = e0 + tid * per, c1 = c0 + per < e1 ? c0 + per : e1;
    int my = 0;
    for (int e = c0; e < c1; e++) my += ov_in_set(loc, miss, lq + e, which);
    cnt[tid] = my;
    for (int i = tid; i < 256; i += OV_RT) lut[i] = lut_g[i];
    __syncthreads();
    for (int off = 1; off < OV_RT; off <<= 1) {
        int add = tid >= off ? cnt[tid - off] : 0;
        __syncthreads();
        cnt[tid] += add;
        __syncthreads();
    }
    const int n = cnt[OV_RT - 1];
    int w = cnt[tid] - my;
    for (int e = c0; e < c1; e++)
        if (ov_in_set(loc, miss, lq + e, which)) {
            le[w] = e;
            lr[w++] = (int64_t)loc[lq + e] * G_ROW;
        }
    const int d = ds * OV_DB + (tid & (OV_DB - 1)), hg = tid / OV_DB; /* hg 0..3 accumulate, 4 sums */
    const int set = which == DHS_OV_MISSES;
    const int64_t pi0 = (((int64_t)q * 2 + set) * gridDim.y + c) * nh; /* partial index of head 0 */
    if (n == 0) {                                                      /* uniform: n is shared */
        if (tid < 256)
#pragma unroll
            for (int hh = 0; hh < 4; hh++) {
                int h = hg * 4 + hh;
                if (h >= nh) continue;
                if (final_) out[((int64_t)q * nh + h) * G_NOPE + d] = 0.0f;
                else pacc[(pi0 + h) * G_NOPE + d] = 0.0f;
            }
        if (!final_ && ds == 0 && tid < nh) {
            pm[pi0 + tid] = -__int_as_float(0x7f800000);
            pl[pi0 + tid] = 0.0f;
        }
        return;
    }
    __syncthreads();
    /* max per head: warp w takes heads w, w + 9, ... (order-free) */
    const int warp = tid >> 5, lane = tid & 31;
    for (int h = warp; h < nh; h += OV_RT / 32) {
        const float *sc = scores + (lq * nh) + (int64_t)h * s.k;
        float m = -__int_as_float(0x7f800000);
        for (int j = lane; j < n; j += 32) {
            float v = sc[le[j]];
            if (v > m) m = v;
        }
        for (int off = 16; off > 0; off >>= 1) {
            float o = __shfl_xor_sync(0xffffffffu, m, off);
            if (o > m) m = o;
        }
        if (lane == 0) smax[h] = m;
    }
    __syncthreads();
    const uint8_t *b = base[q];
    float acc[4] = {0, 0, 0, 0}, lsum = 0.0f;
    for (int t0 = 0; t0 < n; t0 += OV_TILE) {
        const int tn = n - t0 < OV_TILE ? n - t0 : OV_TILE;
        /* the tile: 4 x 16 bytes of codes + 1 scale per entry, and the scores;
           every load issued before the first store / exp (registers) */
        {
            uint4 cv4[OV_CPT];
            float sv[OV_PPT], tv = 0.0f;
#pragma unroll
            for (int u = 0; u < OV_CPT; u++) {
                const int v = tid + u * OV_RT, jj = v / (OV_DB / 16), cv = v % (OV_DB / 16);
                if (jj < tn) cv4[u] = *(const uint4 *)(b + lr[t0 + jj] + ds * OV_DB + cv * 16);
            }
            if (tid < tn) tv = ((const float *)(b + lr[t0 + tid] + G_NOPE))[(ds * OV_DB) / 128];
#pragma unroll
            for (int u = 0; u < OV_PPT; u++) {
                const int i = tid + u * OV_RT, jj = i / DHS_OV_MAX_HEADS, h = i % DHS_OV_MAX_HEADS;
                sv[u] = jj < tn && h < nh ? scores[(lq * nh) + (int64_t)h * s.k + le[t0 + jj]] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < OV_CPT; u++) {
                const int v = tid + u * OV_RT, jj = v / (OV_DB / 16), cv = v % (OV_DB / 16);
                if (jj < tn) *(uint4 *)&codes[jj][cv * 16] = cv4[u];
            }
            if (tid < tn) tscl[tid] = tv;
#pragma unroll
            for (int u = 0; u < OV_PPT; u++) {
                const int i = tid + u * OV_RT, jj = i / DHS_OV_MAX_HEADS, h = i % DHS_OV_MAX_HEADS;
                if (jj < tn) p[jj][h] = h < nh ? g_expf(fs(sv[u], smax[h]), s.exp_portable) : 0.0f;
            }
        }
        __syncthreads();
        if (tid >= 256) { /* the summing warp: lane h, entry order */
            if (lane < nh)
                for (int jj = 0; jj < tn; jj++) lsum = fa(lsum, p[jj][lane]);
        } else {
            const int dl = tid & (OV_DB - 1);
#pragma unroll 4
            for (int jj = 0; jj < tn; jj++) { /* entry order */
                const float r = fm(lut[codes[jj][dl]], tscl[jj]); /* = g_row_val(row, d, lut) */
                const float4 pv = *(const float4 *)&p[jj][hg * 4];
                acc[0] = ff(pv.x, r, acc[0]);
                acc[1] = ff(pv.y, r, acc[1]);
                acc[2] = ff(pv.z, r, acc[2]);
                acc[3] = ff(pv.w, r, acc[3]);
            }
        }
        __syncthreads();
    }
    if (tid >= 256 && lane < nh) ssum[lane] = lsum;
    __syncthreads();
    if (tid < 256)
#pragma unroll
        for (int hh = 0; hh < 4; hh++) {
            int h = hg * 4 + hh;
            if (h >= nh) continue;
            if (final_) out[((int64_t)q * nh + h) * G_NOPE + d] = fm(acc[hh], __fdiv_rn(1.0f, ssum[h]));
            else pacc[(pi0 + h) * G_NOPE + d] = acc[hh];
        }
    if (!final_ && ds == 0 && tid < nh) {
        pm[pi0 + tid] = smax[tid];
        pl[pi0 + tid] = ssum[tid];
    }
}

__global__ void __launch_bounds__(G_NOPE) k_ov_merge(dhs_ov_shape s, int C, const float *pm, const float *pl,
                                                     const float *pacc, float *out)
{
    const int q = blockIdx.x / s.nh, h = blockIdx.x % s.nh, i = threadIdx.x;
    float M = -__int_as_float(0x7f800000), L = 0.0f, A = 0.0f;
    int any = 0;
    for (int j = 0; j < 2 * C; j++) { /* (hits, 0..C-1), (misses, 0..C-1); l > 0 iff not empty */
        int64_t pi = (((int64_t)q * 2 + j / C) * C + j % C) * s.nh + h;
        if (pl[pi] > 0.0f && pm[pi] > M) M = pm[pi];
        any |= pl[pi] > 0.0f;
    }
    float *o = out + ((int64_t)q * s.nh + h) * G_NOPE;
    if (!any) {
        o[i] = 0.0f;
        return;
    }
    for (int j = 0; j < 2 * C; j++) {
        int64_t pi = (((int64_t)q * 2 + j / C) * C + j % C) * s.nh + h;
        if (!(pl[pi] > 0.0f)) continue;
        float wj = g_expf(fs(pm[pi], M), s.exp_portable);
        L = ff(wj, pl[pi], L);
        A = ff(wj, pacc[pi * G_NOPE + i], A);
    }
    o[i] = fm(A, __fdiv_rn(1.0f, L));
}

/* ------------------------------------------------------------------ launchers */
static int ov_bad(const dhs_ov_shape *s)
{
    return !s || s->nq < 0 || s->nh < 1 || s->nh > DHS_OV_MAX_HEADS || s->k < 1 || s->k > DHS_OV_MAX_K ||
           s->chunk < 1 || s->chunk > s->k || (s->exp_portable != 0 && s->exp_portable != 1);
}

static size_t ov_scores_smem(int nh) { return sizeof(float) * (256 + (size_t)(nh + OV_EB) * OV_QS); }

static int ov_inited;

extern "C" cudaError_t dhs_cuda_ov_init(void)
{
    cudaError_t e = cudaFuncSetAttribute(k_ov_scores, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)ov_scores_smem(DHS_OV_MAX_HEADS));
    if (e == cudaSuccess) ov_inited = 1;
    return e;
}

extern "C" cudaError_t dhs_cuda_ov_scores(const dhs_ov_shape *s, int which, const dhs_ov_args *a, cudaStream_t st)
{
    if (ov_bad(s) || !a || which < DHS_OV_ALL || which > DHS_OV_MISSES) return cudaErrorInvalidValue;
    if (s->nq == 0) return cudaSuccess;
    if (!ov_inited) {
        cudaError_t e = dhs_cuda_ov_init();
        if (e != cudaSuccess) return e;
    }
    dim3 grid((unsigned)s->nq, (unsigned)((s->k + OV_EB - 1) / OV_EB));
    k_ov_scores<<<grid, OV_ST, ov_scores_smem(s->nh), st>>>(*s, which, a->q, a->base, a->loc, a->miss, a->lut,
                                                            a->scores);
    return cudaGetLastError();
}

extern "C" cudaError_t dhs_cuda_ov_reduce(const dhs_ov_shape *s, const dhs_ov_args *a, cudaStream_t st)
{
    if (ov_bad(s) || !a) return cudaErrorInvalidValue;
    if (s->nq == 0) return cudaSuccess;
    dim3 grid((unsigned)s->nq, 1, G_NOPE / OV_DB);
    k_ov_reduce<<<grid, OV_RT, 0, st>>>(*s, DHS_OV_ALL, s->k, 1, a->base, a->loc, a->miss, a->scores, a->lut, a->out,
                                        NULL, NULL, NULL);
    return cudaGetLastError();
}

extern "C" cudaError_t dhs_cuda_ov_partial(const dhs_ov_shape *s, int which, const dhs_ov_args *a, cudaStream_t st)
{
    if (ov_bad(s) || !a || (which != DHS_OV_HITS && which != DHS_OV_MISSES)) return cudaErrorInvalidValue;
    if (s->nq == 0) return cudaSuccess;
    dim3 grid((unsigned)s->nq, (unsigned)((s->k + s->chunk - 1) / s->chunk), G_NOPE / OV_DB);
    k_ov_reduce<<<grid, OV_RT, 0, st>>>(*s, which, s->chunk, 0, a->base, a->loc, a->miss, a->scores, a->lut, NULL,
                                        a->pm, a->pl, a->pacc);
    return cudaGetLastError();
}

extern "C" cudaError_t dhs_cuda_ov_merge(const dhs_ov_shape *s, const dhs_ov_args *a, cudaStream_t st)
{
    if (ov_bad(s) || !a) return cudaErrorInvalidValue;
    if (s->nq == 0) return cudaSuccess;
    int C = (s->k + s->chunk - 1) / s->chunk;
    k_ov_merge<<<(unsigned)(s->nq * s->nh), G_NOPE, 0, st>>>(*s, C, a->pm, a->pl, a->pacc, a->out);
    return cudaGetLastError();
}

extern "C" cudaError_t dhs_cuda_ov_attend(const dhs_ov_shape *s, int mode, const dhs_ov_args *a, cudaEvent_t copy_done,
                                          cudaStream_t st)
{
    if (ov_bad(s) || !a || mode < DHS_OV_WHOLE || mode > DHS_OV_FAST) return cudaErrorInvalidValue;
    cudaError_t e;
#define OV_TRY(x)                               \
    do {                                        \
        if ((e = (x)) != cudaSuccess) return e; \
    } while (0)
    if (mode == DHS_OV_WHOLE) {
        if (copy_done) OV_TRY(cudaStreamWaitEvent(st, copy_done, 0));
        OV_TRY(dhs_cuda_ov_scores(s, DHS_OV_ALL, a, st));
        return dhs_cuda_ov_reduce(s, a, st);
    }
    /* phase A: the hits, while the copy runs */
    OV_TRY(dhs_cuda_ov_scores(s, DHS_OV_HITS, a, st));
    if (mode == DHS_OV_FAST) OV_TRY(dhs_cuda_ov_partial(s, DHS_OV_HITS, a, st));
    /* phase B: after the copy */
    if (copy_done) OV_TRY(cudaStreamWaitEvent(st, copy_done, 0));
    OV_TRY(dhs_cuda_ov_scores(s, DHS_OV_MISSES, a, st));
    if (mode == DHS_OV_EXACT) return dhs_cuda_ov_reduce(s, a, st);
    OV_TRY(dhs_cuda_ov_partial(s, DHS_OV_MISSES, a, st));
    return dhs_cuda_ov_merge(s, a, st);
#undef OV_TRY
}
