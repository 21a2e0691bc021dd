/* test_sel_kern.c - the GPU model's selection kernels against the CPU model's
 * arithmetic: the indexer scores (dhs_ref_gpu_select_kernel, the model's
 * launch, where queries that share their keys are scored by one block) and the
 * top-ks of those scores (the model's k_topk, the library's fused
 * dhs_cuda_topk_fused_n and its split form dhs_cuda_topk_split_n) against
 * dhs_ref_topk, the CPU model's heap (higher score first, ties to the lower
 * position, -0 == +0).
 *
 * Random batches: runs of 1..7 consecutive queries share one session's FP8
 * keys (the model's layout, random codes and power-of-two scales; runs longer
 * than the kernel's group of 4 included), each query at its own last position
 * (-1: no query, left alone), contexts of 1..70000 positions, 4 indexer heads
 * of 128 or 64 dimensions. Ties: a query with zero head weights scores 0
 * everywhere (every candidate ties), and one with weights of one sign and
 * ReLU-clipped sums gives exact zeros among positive scores. Checks: every
 * score bit-equal to the CPU order (per head the sum over i ascending, unfused
 * multiply-add, heads summed in order, times the position's scale) and to the
 * same kernel with each query alone; every selection equal to dhs_ref_topk
 * entry for entry; untouched outputs of absent queries and past each query's
 * position; the same bits from the previous scores kernel (k_scores_fp8)
 * and from the new one with register staging (DHS_REF_GPU_SCORES_SYNC).
 * Edge cases (scores only): contexts of 1..5, 9, 258, 1023, 4099 positions,
 * NaN key codes, a query element above 2^119 and subnormal ones, key codes
 * 8 bytes off a 16-byte boundary.
 *
 * Exits 77 (CTest SKIP_RETURN_CODE) without CUDA or without a device. */
#include <math.h>
#include <stdio.h>

#include "test_help.h"

#ifndef DHS_HAVE_CUDA
TH_MAIN_WITHOUT_CUDA
#else
#include <cuda_runtime_api.h>

#include "dev/topk_spec.h"
#include "model/gpu.h"
#include "model/model.h"

#define CK(x) TH_CUDA_CK(x)
#define MAXQ 24
#define H 4
#define K_MAX 2048
#define SENT 0x7fbadbadu

typedef struct sess_keys {
    uint8_t *codes; /* host [(P+7)/8][D][8] */
    float *scales;  /* host [P] */
    void *d_codes, *d_alloc; /* d_codes: d_alloc, or 8 bytes into it (edges) */
    float *d_scales;
} sess_keys;

/* the CPU model's score of position s (dhs_ref_index_scores' order) */
static float cpu_score(const float *iq, const float *iw, const sess_keys *k, int D, int64_t s, const float *lut)
{
    float acc[H] = {0, 0, 0, 0};
    for (int i = 0; i < D; i++) {
        float kv = lut[k->codes[((s / 8) * D + i) * 8 + s % 8]];
        for (int h = 0; h < H; h++) acc[h] = fmaf(iq[h * D + i], kv, acc[h]); /* one fused step, in order */
    }
    float sc = 0.0f;
    for (int h = 0; h < H; h++) sc += iw[h] * (acc[h] > 0.0f ? acc[h] : 0.0f);
    return sc * k->scales[s];
}

/* edges: NaN codes among the keys, a query with one element above 2^119 (the kernel keeps such a query
   unscaled) and one with subnormal elements, key codes at addresses 8 bytes off a 16-byte boundary (the
   byte-wise staging); scores only (the top-ks are checked on the other cases) */
static int64_t run_case(uint64_t *rng, int D, int64_t P, int nq, int32_t k, const float *d_lut, void *ws, size_t ws_bytes,
                        int *ncmp_sel, int edges)
{
    const float *lut = dhs_ref_fp8_table();
    sess_keys sk[MAXQ];
    int sess_of[MAXQ], ns = 0;
    int64_t pos[MAXQ];
    /* runs of queries sharing a session */
    for (int q = 0; q < nq;) {
        int len = 1 + (int)dhs_rng_below(rng, 7);
        int64_t t0 = (int64_t)dhs_rng_below(rng, (uint64_t)P);
        for (int j = 0; j < len && q < nq; j++, q++) {
            sess_of[q] = ns;
            int64_t t = t0 + j < P ? t0 + j : P - 1;
            pos[q] = dhs_rng_below(rng, 8) == 0 ? -1 : (dhs_rng_below(rng, 3) == 0 ? (int64_t)dhs_rng_below(rng, (uint64_t)P) : t);
        }
        ns++;
    }
    const int64_t groups = (P + 7) / 8;
    const size_t cb = (size_t)groups * 8 * (size_t)D;
    void *h_kc[MAXQ];
    float *h_ks[MAXQ];
    for (int i = 0; i < ns; i++) {
        sk[i].codes = th_alloc(cb);
        sk[i].scales = th_alloc(sizeof(float) * (size_t)P);
        for (size_t b = 0; b < cb; b++) {
            uint8_t c = (uint8_t)dhs_rng_below(rng, 256);
            sk[i].codes[b] = (c & 0x7f) == 0x7f && !(edges && dhs_rng_below(rng, 4) == 0) ? 0 : c; /* NaN codes: edges */
        }
        for (int64_t s = 0; s < P; s++) sk[i].scales[s] = ldexpf(1.0f, (int)dhs_rng_below(rng, 16) - 12);
        CK(cudaMalloc(&sk[i].d_alloc, cb + 8));
        sk[i].d_codes = (uint8_t *)sk[i].d_alloc + (edges && i % 2 ? 8 : 0);
        CK(cudaMalloc((void **)&sk[i].d_scales, sizeof(float) * (size_t)P));
        CK(cudaMemcpy(sk[i].d_codes, sk[i].codes, cb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(sk[i].d_scales, sk[i].scales, sizeof(float) * (size_t)P, cudaMemcpyHostToDevice));
    }
    for (int q = 0; q < nq; q++) {
        h_kc[q] = sk[sess_of[q]].d_codes;
        h_ks[q] = sk[sess_of[q]].d_scales;
    }
    float *iq = th_alloc(sizeof(float) * (size_t)nq * H * D), iw[MAXQ * H];
    for (int i = 0; i < nq * H * D; i++) iq[i] = th_unif(rng);
    if (edges) {
        const int qb = (int)dhs_rng_below(rng, (uint64_t)nq), qs = (int)dhs_rng_below(rng, (uint64_t)nq);
        /* above 2^119 (the products stay finite: codes are below 2^9) */
        iq[(size_t)qb * H * D + dhs_rng_below(rng, (uint64_t)(H * D))] = ldexpf(dhs_rng_below(rng, 2) ? 1.01f : -1.01f, 119);
        for (int i = 0; i < H * D; i += 3) iq[(size_t)qs * H * D + i] = ldexpf(th_unif(rng), -128); /* subnormals */
    }
    for (int q = 0; q < nq; q++) {
        const int kind = (int)dhs_rng_below(rng, 4); /* 0: all-zero weights (every score ties at 0); 1: positive */
        for (int h = 0; h < H; h++) iw[q * H + h] = kind == 0 ? 0.0f : kind == 1 ? fabsf(th_unif(rng)) : th_unif(rng);
    }
    /* device buffers */
    void **d_kc;
    float **d_ks, *d_iq, *d_iw, *d_sc, *d_sc1, *d_scp;
    int64_t *d_pos;
    int32_t *d_sel, *d_nan;
    const size_t scb = sizeof(float) * (size_t)nq * (size_t)P, selb = sizeof(int32_t) * (size_t)nq * (size_t)k;
    CK(cudaMalloc((void **)&d_kc, sizeof(void *) * (size_t)nq));
    CK(cudaMalloc((void **)&d_ks, sizeof(float *) * (size_t)nq));
    CK(cudaMalloc((void **)&d_iq, sizeof(float) * (size_t)nq * H * D));
    CK(cudaMalloc((void **)&d_iw, sizeof(float) * (size_t)nq * H));
    CK(cudaMalloc((void **)&d_pos, sizeof(int64_t) * (size_t)nq));
    CK(cudaMalloc((void **)&d_sc, scb));
    CK(cudaMalloc((void **)&d_sc1, scb));
    CK(cudaMalloc((void **)&d_scp, scb));
    CK(cudaMalloc((void **)&d_sel, selb));
    CK(cudaMalloc((void **)&d_nan, sizeof(int32_t) * (size_t)nq));
    CK(cudaMemcpy(d_kc, h_kc, sizeof(void *) * (size_t)nq, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_ks, h_ks, sizeof(float *) * (size_t)nq, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_iq, iq, sizeof(float) * (size_t)nq * H * D, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_iw, iw, sizeof(float) * (size_t)nq * H, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_pos, pos, sizeof(int64_t) * (size_t)nq, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_sc, 0xff, scb));
    CK(cudaMemset(d_sc1, 0xff, scb));
    CK(cudaMemset(d_scp, 0xff, scb));
    CHECK_ST(dhs_ref_gpu_select_kernel(NULL, DHS_REF_GPU_SCORES, nq, H, D, k, P, d_pos, d_iq, d_iw, d_kc, d_ks, d_lut, d_sc,
                                       NULL, NULL),
             DHS_OK);
    CHECK_ST(dhs_ref_gpu_select_kernel(NULL, DHS_REF_GPU_SCORES_ALONE, nq, H, D, k, P, d_pos, d_iq, d_iw, d_kc, d_ks, d_lut,
                                       d_sc1, NULL, NULL),
             DHS_OK);
    CHECK_ST(dhs_ref_gpu_select_kernel(NULL, DHS_REF_GPU_SCORES_PREV, nq, H, D, k, P, d_pos, d_iq, d_iw, d_kc, d_ks, d_lut,
                                       d_scp, NULL, NULL),
             DHS_OK);
    CK(cudaDeviceSynchronize());
    float *sc = th_alloc(scb), *sc1 = th_alloc(scb), *scp = th_alloc(scb), *ref = th_alloc(scb);
    CK(cudaMemcpy(sc, d_sc, scb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sc1, d_sc1, scb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(scp, d_scp, scb, cudaMemcpyDeviceToHost));
    /* the previous kernel: the same bits everywhere (written and untouched alike) */
    CHECKF(memcmp(sc, scp, scb) == 0, "scores D %d P %lld nq %d edges %d: differ from the previous kernel's", D,
           (long long)P, nq, edges);
    /* the register-staged form of the new kernel: the same */
    CK(cudaMemset(d_scp, 0xff, scb));
    CHECK_ST(dhs_ref_gpu_select_kernel(NULL, DHS_REF_GPU_SCORES_SYNC, nq, H, D, k, P, d_pos, d_iq, d_iw, d_kc, d_ks, d_lut,
                                       d_scp, NULL, NULL),
             DHS_OK);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(scp, d_scp, scb, cudaMemcpyDeviceToHost));
    CHECKF(memcmp(sc, scp, scb) == 0, "scores D %d P %lld nq %d edges %d: differ from the register-staged kernel's", D,
           (long long)P, nq, edges);
    int64_t cmp = 0, bad = -1, bad1 = -1, untouched = -1;
    for (int q = 0; q < nq; q++) /* positions past the query's (all, for an absent one): not written */
        for (int64_t s = pos[q] + 1; s < P && untouched < 0; s++) {
            uint32_t u;
            memcpy(&u, &sc[(size_t)q * (size_t)P + (size_t)s], 4);
            if (u != 0xffffffffu) untouched = (int64_t)q * P + s;
        }
    CHECKF(untouched < 0, "scores D %d P %lld: query %lld position %lld past the query's %lld written", D, (long long)P,
           (long long)(untouched < 0 ? 0 : untouched / P), (long long)(untouched < 0 ? 0 : untouched % P),
           (long long)(untouched < 0 ? 0 : pos[untouched / P]));
    for (int q = 0; q < nq; q++)
        for (int64_t s = 0; s <= pos[q]; s++) {
            const size_t o = (size_t)q * (size_t)P + (size_t)s;
            ref[o] = cpu_score(iq + (size_t)q * H * D, iw + q * H, &sk[sess_of[q]], D, s, lut);
            if (bad < 0 && memcmp(&sc[o], &ref[o], 4)) bad = (int64_t)o;
            if (bad1 < 0 && memcmp(&sc1[o], &sc[o], 4)) bad1 = (int64_t)o;
            cmp++;
        }
    CHECKF(bad < 0, "scores D %d P %lld nq %d: query %lld position %lld: gpu %.9g, cpu %.9g", D, (long long)P, nq,
           (long long)(bad < 0 ? 0 : bad / P), (long long)(bad < 0 ? 0 : bad % P), bad < 0 ? 0.0 : sc[bad],
           bad < 0 ? 0.0 : ref[bad]);
    CHECKF(bad1 < 0, "scores D %d P %lld: query %lld position %lld: grouped %.9g, alone %.9g", D, (long long)P,
           (long long)(bad1 < 0 ? 0 : bad1 / P), (long long)(bad1 < 0 ? 0 : bad1 % P), bad1 < 0 ? 0.0 : sc[bad1],
           bad1 < 0 ? 0.0 : sc1[bad1]);
    /* the top-ks of the GPU's scores against dhs_ref_topk of the CPU's (equal, checked above) */
    int32_t *want = th_alloc(selb), *got = th_alloc(selb);
    const int impls = edges ? 0 : 4;
    uint64_t *heap = th_alloc(sizeof(uint64_t) * (size_t)k);
    for (int q = 0; q < nq; q++)
        if (pos[q] >= 0) dhs_ref_topk(ref + (size_t)q * (size_t)P, pos[q] + 1, k, want + (size_t)q * k, heap);
    for (int impl = 0; impl < impls; impl++) { /* k_topk, fused, split (twice: the workspace it left) */
        CK(cudaMemset(d_sel, 0x7f, selb));
        if (impl == 0 || impl == 1)
            CHECK_ST(dhs_ref_gpu_select_kernel(NULL, impl == 0 ? DHS_REF_GPU_TOPK : DHS_REF_GPU_TOPK_FUSED, nq, H, D, k, P,
                                               d_pos, d_iq, d_iw, d_kc, d_ks, d_lut, d_sc, d_sel, d_nan),
                     DHS_OK);
        else
            CHECK(dhs_cuda_topk_split_n(d_sc, P, nq, P, d_pos, 1, k, NULL, 0, d_sel, NULL, d_nan, ws, ws_bytes, NULL) == 0);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got, d_sel, selb, cudaMemcpyDeviceToHost));
        int64_t b = -1;
        for (int q = 0; q < nq && b < 0; q++)
            for (int32_t i = 0; i < k; i++) {
                const size_t o = (size_t)q * k + (size_t)i;
                const int32_t w = pos[q] >= 0 ? want[o] : 0x7f7f7f7f; /* absent: untouched */
                if (got[o] != w) {
                    b = (int64_t)o;
                    break;
                }
            }
        CHECKF(b < 0, "top-k %s D %d P %lld nq %d k %d: query %lld (pos %lld) entry %lld: %d, cpu %d",
               impl == 0 ? "k_topk" : impl == 1 ? "fused" : "split", D, (long long)P, nq, k, (long long)(b < 0 ? 0 : b / k),
               (long long)(b < 0 ? 0 : pos[b / k]), (long long)(b < 0 ? 0 : b % k), b < 0 ? 0 : got[b],
               b < 0 ? 0 : (pos[b / k] >= 0 ? want[b] : 0x7f7f7f7f));
        (*ncmp_sel)++;
    }
    for (int i = 0; i < ns; i++) {
        cudaFree(sk[i].d_alloc);
        cudaFree(sk[i].d_scales);
        free(sk[i].codes);
        free(sk[i].scales);
    }
    void *bufs[] = {d_kc, d_ks, d_iq, d_iw, d_pos, d_sc, d_sc1, d_scp, d_sel, d_nan};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    free(iq), free(sc), free(sc1), free(scp), free(ref), free(want), free(got), free(heap);
    return cmp;
}

int main(void)
{
    TH_SKIP_WITHOUT_DEVICE();
    uint64_t rng = th_seed("test_sel_kern");
    float *d_lut;
    CK(cudaMalloc((void **)&d_lut, sizeof(float) * 256));
    CK(cudaMemcpy(d_lut, dhs_ref_fp8_table(), sizeof(float) * 256, cudaMemcpyHostToDevice));
    const size_t ws_bytes = dhs_cuda_topk_split_ws(MAXQ);
    void *ws;
    CK(cudaMalloc(&ws, ws_bytes));
    CK(cudaMemset(ws, 0, ws_bytes));
    static const int64_t Ps[] = {1, 7, 255, 256, 257, 2048, 2049, 5000, 70000};
    /* edge cases: tiny contexts, contexts not a multiple of a thread's 4 positions or a block's 256 */
    static const int64_t Pe[] = {1, 2, 3, 4, 5, 9, 258, 1023, 4099};
    const int ncases = th_scale() < 0.5 ? 12 : 40;
    int64_t scores = 0;
    int topks = 0, cases = 0;
    for (int c = 0; c < ncases; c++) {
        const int D = c % 3 == 2 ? 64 : 128;
        const int64_t P = Ps[c < 9 ? c : (int)dhs_rng_below(&rng, 9)];
        const int nq = 1 + (int)dhs_rng_below(&rng, MAXQ);
        const int32_t k = dhs_rng_below(&rng, 2) ? K_MAX : 1 + (int32_t)dhs_rng_below(&rng, K_MAX);
        scores += run_case(&rng, D, P, nq, k, d_lut, ws, ws_bytes, &topks, 0);
        cases++;
    }
    for (int c = 0; c < 2 * 9; c++) { /* the edges, at both dimensions */
        const int nq = 1 + (int)dhs_rng_below(&rng, MAXQ);
        scores += run_case(&rng, c % 2 ? 64 : 128, Pe[c / 2], nq, 1 + (int32_t)dhs_rng_below(&rng, K_MAX), d_lut, ws,
                           ws_bytes, &topks, 1);
        cases++;
    }
    cudaFree(ws);
    cudaFree(d_lut);
    printf("test_sel_kern: %d cases, %lld scores bit-equal to the CPU order, %d top-k runs equal to dhs_ref_topk\n", cases,
           (long long)scores, topks);
    CHECK(scores > 10000);
    return th_summary();
}
#endif
