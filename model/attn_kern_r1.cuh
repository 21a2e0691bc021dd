/* attn_kern_r1.cuh - the first split-K attention (k_att_part_r1: 8 lanes per
 * (entry, head) reading bytes through the FP8 table, 2 values per thread; the
 * last chunk merges with one thread walking the chunk maxima and every thread
 * loading the partials one chunk at a time), kept only so that kern_bench can
 * time it beside the kernels of attn_kern.cuh in the same process. The same
 * partials layout and the same bits as attn_kern.cuh (kern_bench checks).
 * Not used by the model. */
#ifndef DHS_CUDA_ATTN_KERN_R1_CUH
#define DHS_CUDA_ATTN_KERN_R1_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "model/attn_kern.cuh" /* the constants, att_chunks and the partials' layout */

#define ATT_R1_PT 256 /* k_att_part_r1 threads */
#define ATT_R1_VPT ((ATT_CH * ATT_RV + ATT_R1_PT - 1) / ATT_R1_PT) /* row vectors per thread */

/* 5 blocks per SM: 48 registers, no spill (sm_90, ptxas --resource-usage); 27 KB of shared memory each */
static __global__ void __launch_bounds__(ATT_R1_PT, 5) k_att_part_r1(int nh, int k, float att_scale, int portable,
                                                     const uint8_t *const *base, const float *aq,
                                                     const int32_t *aidx, const int32_t *anv, const float *lut_g,
                                                     float *pm, float *ps, float *po, int32_t *cnt, float *ao)
{
    __shared__ __align__(16) uint8_t rows[ATT_CH][G_ROW];
    __shared__ float qs[ATT_MAXH][G_LAT];
    __shared__ float lut[256];
    __shared__ float sc[ATT_MAXH][ATT_CH];
    __shared__ float p[ATT_MAXH][ATT_CH];
    const int q = blockIdx.x, c = blockIdx.y, tid = threadIdx.x;
    const int nv = anv[q], e0 = c * ATT_CH;
    if (nv <= e0) return; /* no valid entry in this chunk (or no query) */
    const int n = nv - e0 < ATT_CH ? nv - e0 : ATT_CH;
    const uint8_t *b0 = base[q];
    const int32_t *iq = aidx + (int64_t)q * k + e0;
    /* the chunk's rows: every load issued before any store */
    uint4 r[ATT_R1_VPT];
#pragma unroll
    for (int u = 0; u < ATT_R1_VPT; u++) {
        int j = tid + u * ATT_R1_PT, e = j / ATT_RV;
        if (e < n) r[u] = ((const uint4 *)(b0 + (int64_t)iq[e] * G_ROW))[j % ATT_RV];
    }
    for (int i = tid; i < 256; i += ATT_R1_PT) lut[i] = lut_g[i];
    for (int i = tid; i < nh * G_LAT; i += ATT_R1_PT) qs[i / G_LAT][i % G_LAT] = aq[(int64_t)q * nh * G_LAT + i];
#pragma unroll
    for (int u = 0; u < ATT_R1_VPT; u++) {
        int j = tid + u * ATT_R1_PT, e = j / ATT_RV;
        if (e < n) ((uint4 *)rows[e])[j % ATT_RV] = r[u];
    }
    __syncthreads();
    /* scores: 8 threads per (entry, head), lane l sums values l, l+8, ...;
       combined ((0+1)+(2+3))+((4+5)+(6+7)) as g_row_score */
    for (int t = tid; t < nh * ATT_CH * 8; t += ATT_R1_PT) { /* whole warps: ATT_CH * 8 = 256 */
        const int l = t & 7, e = (t >> 3) % ATT_CH, h = (t >> 3) / ATT_CH;
        float acc = 0.0f;
        if (e < n) { /* g_row_val's operations, the tile scale hoisted */
            const uint8_t *row = rows[e];
            const float *qh = qs[h];
#pragma unroll
            for (int tile = 0; tile < G_NOPE / 128; tile++) {
                const float ts = ((const float *)(row + G_NOPE))[tile];
#pragma unroll 4
                for (int i = tile * 128 + l; i < tile * 128 + 128; i += 8) acc = fa(acc, fm(qh[i], fm(lut[row[i]], ts)));
            }
            const uint16_t *rope = (const uint16_t *)(row + G_NOPE + 16);
#pragma unroll
            for (int i = G_NOPE + l; i < G_LAT; i += 8)
                acc = fa(acc, fm(qh[i], __uint_as_float((uint32_t)rope[i - G_NOPE] << 16)));
        }
        float s = fa(acc, __shfl_down_sync(0xffffffffu, acc, 1));
        s = fa(s, __shfl_down_sync(0xffffffffu, s, 2));
        s = fa(s, __shfl_down_sync(0xffffffffu, s, 4));
        if (l == 0 && e < n) sc[h][e] = fm(s, att_scale);
    }
    __syncthreads();
    /* softmax of the chunk: warp h for head h; the max is order-free, the sum in entry order */
    const int w = tid >> 5, lane = tid & 31;
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
            float sum = 0.0f;
            for (int e = 0; e < n; e++) sum = fa(sum, p[w][e]);
            const int64_t pi = ((int64_t)q * att_chunks(k) + c) * nh + w;
            pm[pi] = m;
            ps[pi] = sum;
        }
    }
    __syncthreads();
    /* unnormalised values: thread t holds values 2t, 2t + 1 of every head, entry order */
    static_assert(2 * ATT_R1_PT == G_NOPE, "two values per thread");
    {
        const int i = 2 * tid, tile = i / 128;
        static_assert(ATT_MAXH == 2, "two heads' accumulators");
        float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* [head][value] */
        for (int e = 0; e < n; e++) {
            const uint16_t cc = *(const uint16_t *)&rows[e][i];
            const float ts = ((const float *)(rows[e] + G_NOPE))[tile];
            const float v0 = fm(lut[cc & 255u], ts), v1 = fm(lut[cc >> 8], ts);
            a00 = fa(a00, fm(p[0][e], v0));
            a01 = fa(a01, fm(p[0][e], v1));
            if (nh > 1) {
                a10 = fa(a10, fm(p[1][e], v0));
                a11 = fa(a11, fm(p[1][e], v1));
            }
        }
        const int64_t pi = ((int64_t)q * att_chunks(k) + c) * nh;
        *(float2 *)&po[pi * G_NOPE + i] = make_float2(a00, a01);
        if (nh > 1) *(float2 *)&po[(pi + 1) * G_NOPE + i] = make_float2(a10, a11);
    }
    if (!cnt) return; /* k_att_combine_r1 merges */
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
    float *wc = sc[0], *lc = p[0]; /* reused: ATT_MAXH x ATT_CH >= ATT_MAXC floats each */
    static_assert(ATT_MAXH * ATT_CH >= ATT_MAXC, "merge weights fit the score buffers");
    __shared__ float s_m;
    for (int h = 0; h < nh; h++) {
        const int64_t p0 = (int64_t)q * att_chunks(k) * nh + h; /* chunk j: p0 + j nh */
        __syncthreads();                                           /* wc, lc free */
        if (tid == 0) {                                            /* order-free */
            float M = __ldcg(&pm[p0]);
            for (int j = 1; j < nc; j++) {
                const float v = __ldcg(&pm[p0 + (int64_t)j * nh]);
                if (v > M) M = v;
            }
            s_m = M;
        }
        __syncthreads();
        if (tid < nc) {
            wc[tid] = g_expf(fs(__ldcg(&pm[p0 + (int64_t)tid * nh]), s_m), portable);
            lc[tid] = __ldcg(&ps[p0 + (int64_t)tid * nh]);
        }
        __syncthreads();
        float S = 0.0f, A0 = 0.0f, A1 = 0.0f;
        for (int j = 0; j < nc; j++) {
            S = fa(S, fm(wc[j], lc[j]));
            const float2 o = __ldcg((const float2 *)&po[(p0 + (int64_t)j * nh) * G_NOPE + 2 * tid]);
            A0 = fa(A0, fm(wc[j], o.x));
            A1 = fa(A1, fm(wc[j], o.y));
        }
        const float inv = __fdiv_rn(1.0f, S);
        *(float2 *)&ao[((int64_t)q * nh + h) * G_NOPE + 2 * tid] = make_float2(fm(A0, inv), fm(A1, inv));
    }
}

static __global__ void __launch_bounds__(G_NOPE) k_att_combine_r1(int nh, int k, int portable, const int32_t *anv,
                                                        const float *pm, const float *ps, const float *po,
                                                        float *ao)
{
    __shared__ float wc[ATT_MAXC], sc[ATT_MAXC];
    __shared__ float s_m;
    const int q = blockIdx.x / nh, h = blockIdx.x % nh, i = threadIdx.x;
    const int nv = anv[q];
    if (nv <= 0) return;
    const int nc = (nv + ATT_CH - 1) / ATT_CH;
    const int64_t p0 = (int64_t)q * att_chunks(k) * nh + h; /* chunk c: p0 + c nh */
    if (i == 0) { /* order-free */
        float M = pm[p0];
        for (int c = 1; c < nc; c++)
            if (pm[p0 + (int64_t)c * nh] > M) M = pm[p0 + (int64_t)c * nh];
        s_m = M;
    }
    __syncthreads();
    if (i < nc) {
        wc[i] = g_expf(fs(pm[p0 + (int64_t)i * nh], s_m), portable);
        sc[i] = ps[p0 + (int64_t)i * nh];
    }
    __syncthreads();
    float S = 0.0f, A = 0.0f;
    for (int c = 0; c < nc; c++) {
        S = fa(S, fm(wc[c], sc[c]));
        A = fa(A, fm(wc[c], po[(p0 + (int64_t)c * nh) * G_NOPE + i]));
    }
    ao[((int64_t)q * nh + h) * G_NOPE + i] = fm(A, __fdiv_rn(1.0f, S));
}

/* the attention on st; partials pm, ps [nq][att_chunks(k)][nh], po [...][512].
   cnt (int32 [nq], zero before the first launch, left zero by each): one
   launch, the last chunk of each query merges (the model's path); cnt NULL:
   k_att_part_r1 then k_att_combine_r1, the same bits */
static inline cudaError_t att_launch_r1(cudaStream_t st, int nq, int nh, int k, float att_scale, int portable,
                                     const uint8_t *const *base, const float *aq, const int32_t *aidx,
                                     const int32_t *anv, const float *lut, float *pm, float *ps, float *po,
                                     int32_t *cnt, float *ao)
{
    if (nq < 1) return cudaSuccess;
    if (nh < 1 || nh > ATT_MAXH || k < 1 || k > ATT_MAXK) return cudaErrorInvalidValue;
    k_att_part_r1<<<dim3(nq, att_chunks(k)), ATT_R1_PT, 0, st>>>(nh, k, att_scale, portable, base, aq, aidx, anv, lut, pm,
                                                          ps, po, cnt, ao);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || cnt) return e;
    k_att_combine_r1<<<nq * nh, G_NOPE, 0, st>>>(nh, k, portable, anv, pm, ps, po, ao);
    return cudaGetLastError();
}

#endif
