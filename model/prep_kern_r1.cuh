/* prep_kern_r1.cuh - the previous per-query projection kernels (one block per
 * query, each output's whole dot product g_dot in one thread over weights read
 * straight from global memory: about 80 us per layer for the attention prep
 * + out at C = 2 on the H200),
 * kept only so that kern_bench can time them beside the kernels of
 * prep_kern.cuh in the same process and check that both give the same bits.
 * Not used by the model. */
#ifndef DHS_MODEL_PREP_KERN_R1_CUH
#define DHS_MODEL_PREP_KERN_R1_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "model/prep_kern.cuh" /* g_dims, g_layer, g_iqs and the numerics (g_dot, g_fp8_*) */

#define ATT_THREADS_R1 512

/* rmsnorm of x (d floats, shared) into xn (shared); one thread sums */
static __device__ void g_rmsnorm_r1(const float *x, float *xn, int d, float *s_r)
{
    if (threadIdx.x == 0) {
        float ss = g_dot(x, x, d);
        *s_r = __fdiv_rn(1.0f, __fsqrt_rn(fa(__fdiv_rn(ss, (float)d), 1e-6f)));
    }
    __syncthreads();
    float r = *s_r;
    for (int i = threadIdx.x; i < d; i += blockDim.x) xn[i] = fm(x[i], r);
    __syncthreads();
}

/* rows (+ keys) of layer l: block per query, 256 threads */
static __global__ void k_rows_r1(g_dims g, g_layer w, int producer, const int64_t *pos, const float *cs, const float *x,
                       float *xn_out, uint8_t *const *rowdst, uint8_t *stage, void *const *kcodes,
                       float *const *kscales)
{
    __shared__ float xn[G_MAX_D], lat[G_LAT], key[G_MAX_ID], sc[4], s_r, ksc;
    int q = blockIdx.x;
    int64_t t = pos[q];
    if (t < 0) return;
    const float *xq = x + (int64_t)q * g.d;
    g_rmsnorm_r1(xq, xn, g.d, &s_r);
    for (int i = threadIdx.x; i < g.d; i += blockDim.x) xn_out[(int64_t)q * g.d + i] = xn[i];
    for (int o = threadIdx.x; o < G_LAT; o += blockDim.x)
        lat[o] = o < G_NOPE ? g_dot(w.wdkv + (int64_t)o * g.d, xn, g.d) : g_dot(w.wkr + (int64_t)(o - G_NOPE) * g.d, xn, g.d);
    __syncthreads();
    const float *c = cs + (int64_t)q * 64;
    for (int i = threadIdx.x; i < 32; i += blockDim.x) {
        float a = lat[G_NOPE + i], b = lat[G_NOPE + 32 + i];
        lat[G_NOPE + i] = fs(fm(a, c[i]), fm(b, c[32 + i]));
        lat[G_NOPE + 32 + i] = fa(fm(a, c[32 + i]), fm(b, c[i]));
    }
    __syncthreads();
    if (threadIdx.x < 4) sc[threadIdx.x] = g_fp8_scale(lat + threadIdx.x * 128, 128);
    __syncthreads();
    uint8_t *dst = rowdst ? rowdst[q] : stage + (int64_t)q * G_ROW;
    for (int i = threadIdx.x; i < G_NOPE; i += blockDim.x) dst[i] = g_fp8_enc(__fdiv_rn(lat[i], sc[i / 128]));
    if (threadIdx.x < 4) ((float *)(dst + G_NOPE))[threadIdx.x] = sc[threadIdx.x];
    for (int i = threadIdx.x; i < 64; i += blockDim.x) ((uint16_t *)(dst + G_NOPE + 16))[i] = g_bf16_enc(lat[G_NOPE + i]);
    if (!producer) return;
    for (int o = threadIdx.x; o < g.D; o += blockDim.x) key[o] = g_dot(w.wik + (int64_t)o * g.d, xn, g.d);
    __syncthreads();
    size_t off = (size_t)((t / 8) * g.D * 8 + t % 8);
    if (g.key_fp8) {
        if (threadIdx.x == 0) ksc = g_fp8_scale(key, g.D);
        __syncthreads();
        uint8_t *codes = (uint8_t *)kcodes[q];
        for (int i = threadIdx.x; i < g.D; i += blockDim.x) codes[off + (size_t)i * 8] = g_fp8_enc(__fdiv_rn(key[i], ksc));
        if (threadIdx.x == 0) kscales[q][t] = ksc;
    } else {
        float *kf = (float *)kcodes[q];
        for (int i = threadIdx.x; i < g.D; i += blockDim.x) kf[off + (size_t)i * 8] = key[i];
    }
}

/* indexer queries and head weights: block per query */
static __global__ void k_iq_r1(g_dims g, g_layer w, const int64_t *pos, const float *xn, float *iq, float *iw, g_iqs z)
{
    int q = blockIdx.x;
    if (pos[q] < 0) return;
    if (z.on) { /* q[o] = (a u[o] + b z_t[o]) + d z_{t-1}[o], each product and sum rounded, as the CPU */
        const int64_t t = pos[q];
        for (int o = threadIdx.x; o < g.H * g.D; o += blockDim.x)
            iq[(int64_t)q * g.H * g.D + o] = fa(fa(fm(z.a, dhs_iq_unit(z.seed, z.l, -1, o)), fm(z.b, dhs_iq_unit(z.seed, z.l, t, o))),
                                                fm(z.d, dhs_iq_unit(z.seed, z.l, t - 1, o)));
        for (int h = threadIdx.x; h < g.H; h += blockDim.x) iw[(int64_t)q * g.H + h] = z.w;
        return;
    }
    const float *x = xn + (int64_t)q * g.d;
    for (int o = threadIdx.x; o < g.H * g.D; o += blockDim.x) iq[(int64_t)q * g.H * g.D + o] = g_dot(w.wiq + (int64_t)o * g.d, x, g.d);
    for (int h = threadIdx.x; h < g.H; h += blockDim.x) iw[(int64_t)q * g.H + h] = fm(g_dot(w.wiw + (int64_t)h * g.d, x, g.d), g.wscale);
}

/* queries [nh][576] (RoPE on the last 64) into aq; the valid locations in
   entry order (-1 skipped) into aidx, their count into anv (-1: no query) */
static __global__ void __launch_bounds__(ATT_THREADS_R1) k_att_prep_r1(g_dims g, g_layer w, const int64_t *pos, const float *cs,
                                                          const float *xn_g, const int32_t *loc, float *aq,
                                                          int32_t *aidx, int32_t *anv)
{
    __shared__ float xn[G_MAX_D];
    __shared__ int cnt[ATT_THREADS_R1];
    int q = blockIdx.x, tid = threadIdx.x;
    if (pos[q] < 0) {
        if (tid == 0) anv[q] = -1;
        return;
    }
    for (int i = tid; i < g.d; i += blockDim.x) xn[i] = xn_g[(int64_t)q * g.d + i];
    __syncthreads();
    float *qv = aq + (int64_t)q * g.nh * G_LAT;
    for (int oi = tid; oi < g.nh * G_LAT; oi += blockDim.x) {
        int h = oi / G_LAT, r = oi % G_LAT;
        qv[oi] = r < G_NOPE ? g_dot(w.wq + ((int64_t)h * G_NOPE + r) * g.d, xn, g.d)
                            : g_dot(w.wqr + ((int64_t)h * 64 + (r - G_NOPE)) * g.d, xn, g.d);
    }
    __syncthreads(); /* global writes of this block, read back below by other threads */
    const float *c = cs + (int64_t)q * 64;
    for (int i = tid; i < g.nh * 32; i += blockDim.x) {
        float *qr = qv + (i / 32) * G_LAT + G_NOPE;
        int j = i % 32;
        float a = qr[j], b = qr[32 + j];
        qr[j] = fs(fm(a, c[j]), fm(b, c[32 + j]));
        qr[32 + j] = fa(fm(a, c[32 + j]), fm(b, c[j]));
    }
    const int32_t *lq = loc + (int64_t)q * g.k;
    int chunk = (g.k + ATT_THREADS_R1 - 1) / ATT_THREADS_R1;
    int c0 = tid * chunk, c1 = c0 + chunk < g.k ? c0 + chunk : g.k, my = 0;
    for (int e = c0; e < c1; e++) my += lq[e] >= 0;
    cnt[tid] = my;
    __syncthreads();
    for (int off = 1; off < ATT_THREADS_R1; off <<= 1) {
        int add = tid >= off ? cnt[tid - off] : 0;
        __syncthreads();
        cnt[tid] += add;
        __syncthreads();
    }
    int wpos = cnt[tid] - my;
    int32_t *iq = aidx + (int64_t)q * g.k;
    for (int e = c0; e < c1; e++)
        if (lq[e] >= 0) iq[wpos++] = lq[e];
    if (tid == 0) anv[q] = cnt[ATT_THREADS_R1 - 1];
}

/* block per query: per head v = wuv o, then x += alpha wo v (when any entry was
   valid), then the MLP */
static __global__ void __launch_bounds__(ATT_THREADS_R1) k_att_out_r1(g_dims g, g_layer w, const int32_t *anv, const float *ao,
                                                         float *x_g)
{
    __shared__ float o[G_NOPE];
    __shared__ float v[G_MAX_HEADS * G_MAX_DV];
    __shared__ float xs[G_MAX_D], xn[G_MAX_D];
    __shared__ float hid[G_MAX_HID];
    __shared__ float red[ATT_THREADS_R1];
    __shared__ float s_r;
    int q = blockIdx.x, tid = threadIdx.x;
    int nv = anv[q];
    if (nv < 0) return; /* no query in this slot */
    for (int i = tid; i < g.d; i += blockDim.x) xs[i] = x_g[(int64_t)q * g.d + i];
    __syncthreads();
    if (nv > 0) {
        for (int h = 0; h < g.nh; h++) {
            for (int i = tid; i < G_NOPE; i += blockDim.x) o[i] = ao[((int64_t)q * g.nh + h) * G_NOPE + i];
            __syncthreads();
            for (int j = tid; j < g.dv; j += blockDim.x)
                v[h * g.dv + j] = g_dot(w.wuv + ((int64_t)h * g.dv + j) * G_NOPE, o, G_NOPE);
            __syncthreads();
        }
        for (int i = tid; i < g.d; i += blockDim.x) red[i] = g_dot(w.wo + (int64_t)i * g.nh * g.dv, v, g.nh * g.dv);
        __syncthreads();
        for (int i = tid; i < g.d; i += blockDim.x) xs[i] = fa(xs[i], fm(g.alpha, red[i]));
        __syncthreads();
    }
    /* MLP */
    g_rmsnorm_r1(xs, xn, g.d, &s_r);
    for (int j = tid; j < g.hid; j += blockDim.x) {
        float hv = g_dot(w.w1 + (int64_t)j * g.d, xn, g.d);
        hid[j] = hv > 0.0f ? hv : 0.0f;
    }
    __syncthreads();
    for (int i = tid; i < g.d; i += blockDim.x) {
        float tv = g_dot(w.w2 + (int64_t)i * g.hid, hid, g.hid);
        x_g[(int64_t)q * g.d + i] = fa(xs[i], fm(g.alpha, tv));
    }
}

static __global__ void k_logits_r1(g_dims g, const float *w_out, const int64_t *pos, const float *x_g, float *logits)
{
    __shared__ float xs[G_MAX_D], xn[G_MAX_D], s_r;
    int q = blockIdx.x;
    if (pos[q] < 0) return;
    for (int i = threadIdx.x; i < g.d; i += blockDim.x) xs[i] = x_g[(int64_t)q * g.d + i];
    __syncthreads();
    g_rmsnorm_r1(xs, xn, g.d, &s_r);
    for (int vv = threadIdx.x; vv < g.V; vv += blockDim.x)
        logits[(int64_t)q * g.V + vv] = fm(g_dot(w_out + (int64_t)vv * g.d, xn, g.d), g.logit_scale);
}

/* the previous launches: one block per query */
static cudaError_t pk_launch_rows_r1(cudaStream_t st, int nq, const g_dims *g, const g_layer *w, int producer,
                                     const int64_t *pos, const float *cs, const float *x, float *xn,
                                     uint8_t *const *rowdst, uint8_t *stage, void *const *kc, float *const *ks)
{
    k_rows_r1<<<nq, 256, 0, st>>>(*g, *w, producer, pos, cs, x, xn, rowdst, stage, kc, ks);
    return cudaGetLastError();
}

static cudaError_t pk_launch_iq_r1(cudaStream_t st, int nq, const g_dims *g, const g_layer *w, const int64_t *pos,
                                   const float *xn, float *iq, float *iw, g_iqs z)
{
    k_iq_r1<<<nq, 256, 0, st>>>(*g, *w, pos, xn, iq, iw, z);
    return cudaGetLastError();
}

static cudaError_t pk_launch_prep_r1(cudaStream_t st, int nq, const g_dims *g, const g_layer *w, const int64_t *pos,
                                     const float *cs, const float *xn, const int32_t *loc, float *aq, int32_t *aidx,
                                     int32_t *anv)
{
    k_att_prep_r1<<<nq, ATT_THREADS_R1, 0, st>>>(*g, *w, pos, cs, xn, loc, aq, aidx, anv);
    return cudaGetLastError();
}

static cudaError_t pk_launch_out_r1(cudaStream_t st, int nq, const g_dims *g, const g_layer *w, const int32_t *anv,
                                    const float *ao, float *x)
{
    k_att_out_r1<<<nq, ATT_THREADS_R1, 0, st>>>(*g, *w, anv, ao, x);
    return cudaGetLastError();
}

static cudaError_t pk_launch_logits_r1(cudaStream_t st, int nq, const g_dims *g, const float *w_out, const int64_t *pos,
                                       const float *x, float *logits)
{
    k_logits_r1<<<nq, 256, 0, st>>>(*g, w_out, pos, x, logits);
    return cudaGetLastError();
}

#endif
