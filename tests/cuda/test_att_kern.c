/* test_att_kern.c - the GPU model's split-K sparse attention (model/attn_kern.cuh below 6 queries a
 * launch, model/attn_kern_r2.cuh's fused kernel from 6: both through dhs_ref_gpu_attn) against the CPU
 * model's (dhs_ref_attention, model.c),
 * on random batches: 1..20 queries, 1..2 heads, k in 1..2048, real 656-byte rows
 * (dhs_ref_row_encode of random latents, magnitudes 2^-3..2^3, and cases with
 * 2^-30..2^29: tile scales from 2^-22 up past 2^8, and subnormal codes; and
 * cases with NaN latents, i.e. NaN codes, which the hardware's e4m3
 * conversion turns into NaN; outputs that are NaN on the CPU must be NaN on
 * the GPU), locations with
 * -1 at random places, partial valid counts, queries with nv = 0 and slots
 * with no query (anv = -1), repeated rows, score ranges wide enough that whole
 * chunks underflow against the maximum.
 *   - with exp_portable: every output bit equals the CPU model's;
 *   - every output is within 1e-3 x vmax of a double-precision softmax over
 *     the same decoded rows and scores (an error both models share is caught);
 *   - the same query alone (batch of 1) gives the same bits as in the batch,
 *     and the two-kernel merge (k_att_merge) the same bits as the merge by
 *     each query's last chunk; the chunk counters are left at zero;
 *   - outputs of queries with nv <= 0 are left untouched (a sentinel);
 *   - exp_portable 0 (the device's expf): within the tolerance;
 *   - argument errors.
 * Exits 77 (CTest SKIP_RETURN_CODE) when built without CUDA or when no device
 * is present: it never passes without running. Prints its seed. */
#include <math.h>
#include <stdio.h>

#include "test_help.h"

#ifndef DHS_HAVE_CUDA
TH_MAIN_WITHOUT_CUDA
#else
#include <cuda_runtime_api.h>

#include "model/gpu.h"
#include "model/model.h"

#define CK(x) TH_CUDA_CK(x)
#define MAXQ 20
#define SENT 0x7fbadbadu /* a NaN pattern: an output left alone keeps it */

static float *d_lut;
static double worst_rel; /* max |gpu - double| / vmax seen */
static int nan_outputs;   /* (query, head) outputs the CPU made NaN (NaN codes): must be > 0 */

/* the softmax in double over the decoded rows and the float scores (so the
   tolerance covers only the softmax and its split-K merge), for head q */
static void ref_double(const float *q, const float *rows, int32_t nv, float scale, double *o)
{
    double *s = malloc(sizeof(double) * (size_t)nv), mx = -INFINITY, sum = 0;
    for (int32_t e = 0; e < nv; e++) {
        s[e] = dhs_ref_dot_fma(q, rows + (int64_t)e * DHS_REF_LAT, DHS_REF_LAT) * scale; /* the float score */
        if (s[e] > mx) mx = s[e];
    }
    for (int i = 0; i < DHS_REF_NOPE; i++) o[i] = 0;
    for (int32_t e = 0; e < nv; e++) {
        double p = exp(s[e] - mx);
        sum += p;
        for (int i = 0; i < DHS_REF_NOPE; i++) o[i] += p * rows[(int64_t)e * DHS_REF_LAT + i];
    }
    for (int i = 0; i < DHS_REF_NOPE; i++) o[i] /= sum;
    free(s);
}

/* one batch: nq queries, nh heads, k entries; pvalid: chance of a valid entry
   (per query, from a list); qmag: query magnitude (large: chunks underflow);
   row magnitudes 2^(rlo .. rlo + rspan - 1); nanrows: 1 row in 8 has a NaN latent */
static void run_case_r(int32_t nq, int32_t nh, int32_t k, int portable, float qmag, int rlo, int rspan, int nanrows,
                       uint64_t *rng)
{
    const float scale = 1.0f / sqrtf((float)DHS_REF_LAT);
    const int32_t nc = dhs_ref_gpu_attn_chunks(k);
    int32_t pool_rows[MAXQ], anv[MAXQ];
    int64_t pool_off[MAXQ], total = 0;
    for (int32_t q = 0; q < nq; q++) {
        pool_rows[q] = 1 + (int32_t)dhs_rng_below(rng, (int64_t)k * 2 + 16);
        pool_off[q] = total;
        total += pool_rows[q];
    }
    uint8_t *pool = malloc((size_t)total * DHS_REF_ROW_BYTES);
    float lat[DHS_REF_LAT];
    for (int64_t r = 0; r < total; r++) {
        float mag = ldexpf(1.0f, (int)dhs_rng_below(rng, rspan) + rlo);
        for (int i = 0; i < DHS_REF_LAT; i++) lat[i] = th_unif(rng) * mag;
        if (nanrows && dhs_rng_below(rng, 8) == 0) lat[dhs_rng_below(rng, DHS_REF_NOPE)] = NAN;
        dhs_ref_row_encode(lat, pool + r * DHS_REF_ROW_BYTES);
    }
    float *aq = malloc(sizeof(float) * (size_t)nq * nh * DHS_REF_LAT);
    for (int64_t i = 0; i < (int64_t)nq * nh * DHS_REF_LAT; i++) aq[i] = th_unif(rng) * qmag;
    int32_t *loc = malloc(sizeof(int32_t) * (size_t)nq * k), *aidx = malloc(sizeof(int32_t) * (size_t)nq * k);
    static const int pv[] = {100, 100, 90, 50, 3, 0};
    for (int32_t q = 0; q < nq; q++) {
        int p = pv[dhs_rng_below(rng, 6)];
        int tail = dhs_rng_below(rng, 3) == 0; /* -1 only after the valid ones, as the top-k pads */
        int32_t kv = tail ? (int32_t)dhs_rng_below(rng, (int64_t)k + 1) : k, n = 0;
        for (int32_t e = 0; e < k; e++) {
            int valid = e < kv && (int)dhs_rng_below(rng, 100) < p;
            loc[(int64_t)q * k + e] = valid ? (int32_t)dhs_rng_below(rng, pool_rows[q]) : -1;
            if (valid) aidx[(int64_t)q * k + n++] = loc[(int64_t)q * k + e];
        }
        for (int32_t e = n; e < k; e++) aidx[(int64_t)q * k + e] = -1;
        anv[q] = dhs_rng_below(rng, 12) == 0 ? -1 : n; /* -1: no query in this slot */
    }
    /* device */
    uint8_t *d_pool;
    const uint8_t **d_base, *hb[MAXQ];
    float *d_aq, *d_pm, *d_ps, *d_po, *d_ao;
    int32_t *d_aidx, *d_anv, *d_cnt;
    const size_t nout = (size_t)nq * nh * DHS_REF_NOPE, npart = (size_t)nq * nc * nh;
    CK(cudaMalloc((void **)&d_pool, (size_t)total * DHS_REF_ROW_BYTES));
    CK(cudaMalloc((void **)&d_base, sizeof(void *) * (size_t)nq));
    CK(cudaMalloc((void **)&d_aq, sizeof(float) * (size_t)nq * nh * DHS_REF_LAT));
    CK(cudaMalloc((void **)&d_aidx, sizeof(int32_t) * (size_t)nq * k));
    CK(cudaMalloc((void **)&d_anv, sizeof(int32_t) * (size_t)nq));
    CK(cudaMalloc((void **)&d_pm, sizeof(float) * npart));
    CK(cudaMalloc((void **)&d_ps, sizeof(float) * npart));
    CK(cudaMalloc((void **)&d_po, sizeof(float) * npart * DHS_REF_NOPE));
    CK(cudaMalloc((void **)&d_ao, sizeof(float) * nout));
    CK(cudaMalloc((void **)&d_cnt, sizeof(int32_t) * (size_t)nq));
    CK(cudaMemset(d_cnt, 0, sizeof(int32_t) * (size_t)nq));
    for (int32_t q = 0; q < nq; q++) hb[q] = d_pool + pool_off[q] * DHS_REF_ROW_BYTES;
    CK(cudaMemcpy(d_pool, pool, (size_t)total * DHS_REF_ROW_BYTES, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_base, hb, sizeof(void *) * (size_t)nq, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_aq, aq, sizeof(float) * (size_t)nq * nh * DHS_REF_LAT, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_aidx, aidx, sizeof(int32_t) * (size_t)nq * k, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_anv, anv, sizeof(int32_t) * (size_t)nq, cudaMemcpyHostToDevice));
    uint32_t *sent = malloc(nout * 4);
    for (size_t i = 0; i < nout; i++) sent[i] = SENT;
    CK(cudaMemcpy(d_ao, sent, nout * 4, cudaMemcpyHostToDevice));
    /* the model's path: one launch, the last chunk of each query merges */
    CHECK_ST(dhs_ref_gpu_attn(NULL, nq, nh, k, scale, portable, d_base, d_aq, d_aidx, d_anv, d_lut, d_pm, d_ps, d_po,
                              d_cnt, d_ao),
             DHS_OK);
    float *ao = malloc(nout * 4), *ao2 = malloc(nout * 4);
    CK(cudaMemcpy(ao, d_ao, nout * 4, cudaMemcpyDeviceToHost));
    int32_t cnt[MAXQ];
    CK(cudaMemcpy(cnt, d_cnt, sizeof(int32_t) * (size_t)nq, cudaMemcpyDeviceToHost));
    int zero = 1;
    for (int32_t q = 0; q < nq; q++) zero &= cnt[q] == 0;
    CHECKF(zero, "chunk counters not left at zero (nq %d, k %d)", (int)nq, (int)k);
    /* the two-kernel path (k_att_merge): the same bits */
    CK(cudaMemcpy(d_ao, sent, nout * 4, cudaMemcpyHostToDevice));
    CHECK_ST(dhs_ref_gpu_attn(NULL, nq, nh, k, scale, portable, d_base, d_aq, d_aidx, d_anv, d_lut, d_pm, d_ps, d_po,
                              NULL, d_ao),
             DHS_OK);
    CK(cudaMemcpy(ao2, d_ao, nout * 4, cudaMemcpyDeviceToHost));
    CHECKF(!memcmp(ao, ao2, nout * 4), "k_att_merge differs from the merge in k_att_part (nq %d, k %d)", (int)nq,
           (int)k);
    /* query 0 alone: the same bits */
    CK(cudaMemcpy(d_ao, sent, nout * 4, cudaMemcpyHostToDevice));
    CHECK_ST(dhs_ref_gpu_attn(NULL, 1, nh, k, scale, portable, d_base, d_aq, d_aidx, d_anv, d_lut, d_pm, d_ps, d_po,
                              d_cnt, d_ao),
             DHS_OK);
    float *ao1 = malloc((size_t)nh * DHS_REF_NOPE * 4);
    CK(cudaMemcpy(ao1, d_ao, (size_t)nh * DHS_REF_NOPE * 4, cudaMemcpyDeviceToHost));
    CHECKF(!memcmp(ao1, ao, (size_t)nh * DHS_REF_NOPE * 4), "query 0 alone differs from the batch (nq %d, k %d)",
           (int)nq, (int)k);
    /* the CPU model */
    float *rows = malloc(sizeof(float) * (size_t)k * DHS_REF_LAT), *o = malloc(4 * DHS_REF_NOPE);
    float *att = malloc(4 * (size_t)k), *oc = malloc(4 * DHS_REF_NOPE);
    double *od = malloc(8 * DHS_REF_NOPE);
    for (int32_t q = 0; q < nq; q++) {
        for (int32_t h = 0; h < nh; h++) {
            const float *g = ao + ((size_t)q * nh + h) * DHS_REF_NOPE;
            if (anv[q] <= 0) {
                int same = 1;
                for (int i = 0; i < DHS_REF_NOPE; i++) same &= th_fbits(g[i]) == SENT;
                CHECKF(same, "q %d (nv %d): output written", (int)q, (int)anv[q]);
                continue;
            }
            const int32_t nv = anv[q];
            for (int32_t e = 0; e < nv; e++)
                dhs_ref_row_decode(pool + (pool_off[q] + aidx[(int64_t)q * k + e]) * DHS_REF_ROW_BYTES,
                                   rows + (int64_t)e * DHS_REF_LAT);
            const float *qh = aq + ((size_t)q * nh + h) * DHS_REF_LAT;
            float vmax = 0;
            for (int32_t e = 0; e < nv; e++)
                for (int i = 0; i < DHS_REF_NOPE; i++)
                    if (fabsf(rows[(int64_t)e * DHS_REF_LAT + i]) > vmax) vmax = fabsf(rows[(int64_t)e * DHS_REF_LAT + i]);
            int cpu_nan = 0; /* the CPU model's output has NaNs (NaN codes selected) */
            if (portable) {
                dhs_ref_attention(qh, rows, nv, scale, 1, o, att, oc);
                for (int i = 0; i < DHS_REF_NOPE; i++) cpu_nan |= o[i] != o[i];
                int bad = -1; /* the same bits; a NaN only as a NaN (its payload is the hardware's) */
                for (int i = 0; i < DHS_REF_NOPE && bad < 0; i++)
                    if (th_fbits(o[i]) != th_fbits(g[i]) && !(o[i] != o[i] && g[i] != g[i])) bad = i;
                CHECKF(bad < 0, "q %d h %d nv %d k %d: value %d gpu %.9g cpu %.9g", (int)q, (int)h, (int)nv, (int)k,
                       bad, bad < 0 ? 0.0 : (double)g[bad], bad < 0 ? 0.0 : (double)o[bad]);
                if (cpu_nan) nan_outputs++;
            }
            if (cpu_nan) continue; /* the double softmax is NaN too */
            ref_double(qh, rows, nv, scale, od);
            double dmax = 0;
            for (int i = 0; i < DHS_REF_NOPE; i++)
                if (fabs(g[i] - od[i]) > dmax || g[i] != g[i]) dmax = g[i] != g[i] ? INFINITY : fabs(g[i] - od[i]);
            if (vmax > 0 && dmax / vmax > worst_rel) worst_rel = dmax / vmax;
            CHECKF(dmax <= 1e-3 * vmax, "q %d h %d nv %d k %d: |gpu - double| %g > 1e-3 x vmax %g", (int)q, (int)h,
                   (int)nv, (int)k, dmax, (double)vmax);
        }
    }
    free(rows), free(o), free(att), free(oc), free(od), free(ao), free(ao1), free(ao2), free(sent);
    free(pool), free(aq), free(loc), free(aidx);
    CK(cudaFree(d_pool));
    CK(cudaFree(d_base));
    CK(cudaFree(d_aq));
    CK(cudaFree(d_aidx));
    CK(cudaFree(d_anv));
    CK(cudaFree(d_pm));
    CK(cudaFree(d_ps));
    CK(cudaFree(d_po));
    CK(cudaFree(d_ao));
    CK(cudaFree(d_cnt));
}

static void run_case(int32_t nq, int32_t nh, int32_t k, int portable, float qmag, uint64_t *rng)
{
    run_case_r(nq, nh, k, portable, qmag, -3, 7, 0, rng);
}

int main(void)
{
    TH_SKIP_WITHOUT_DEVICE();
    uint64_t rng = th_seed("test_att_kern");
    CK(cudaMalloc((void **)&d_lut, 256 * sizeof(float)));
    CK(cudaMemcpy(d_lut, dhs_ref_fp8_table(), 256 * sizeof(float), cudaMemcpyHostToDevice));
    /* argument errors: nothing launched */
    float *z = NULL;
    CHECK_ST(dhs_ref_gpu_attn(NULL, 1, 3, 64, 1.0f, 1, NULL, z, NULL, NULL, d_lut, z, z, z, NULL, z), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ref_gpu_attn(NULL, 1, 1, 0, 1.0f, 1, NULL, z, NULL, NULL, d_lut, z, z, z, NULL, z), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ref_gpu_attn(NULL, 1, 1, 2049, 1.0f, 1, NULL, z, NULL, NULL, d_lut, z, z, z, NULL, z), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ref_gpu_attn(NULL, 0, 1, 64, 1.0f, 1, NULL, z, NULL, NULL, d_lut, z, z, z, NULL, z), DHS_OK);
    CHECK(dhs_ref_gpu_attn_chunks(2048) == 2048 / DHS_REF_ATT_CHUNK && dhs_ref_gpu_attn_chunks(1) == 1);
    /* a reduced run (DHS_TEST_SCALE < 0.5: compute-sanitizer) keeps k 2048 with fewer queries */
    int cases = 0, small = th_scale() < 0.5;
    /* the model's size: k 2048, batches 2, 8, 20 */
    run_case(2, 1, 2048, 1, 1.0f, &rng), cases++;
    run_case(small ? 2 : 8, 2, 2048, 1, 1.0f, &rng), cases++;
    if (!small) run_case(20, 1, 2048, 1, 4.0f, &rng), cases++;
    /* wide score ranges: chunks whose exps underflow against the maximum */
    run_case(small ? 1 : 4, 2, 2048, 1, 60.0f, &rng), cases++;
    run_case(small ? 1 : 4, 1, 300, 1, 200.0f, &rng), cases++;
    static const int32_t ks[] = {1, 2, 31, 32, 33, 63, 64, 65, 100, 1000, 2047, 2048};
    int n_rand = (int)(40 * th_scale()) + 8;
    for (int i = 0; i < n_rand; i++, cases++) {
        int32_t k = ks[dhs_rng_below(&rng, (int64_t)(sizeof ks / sizeof ks[0]))];
        int32_t nq = 1 + (int32_t)dhs_rng_below(&rng, small ? 4 : MAXQ);
        int32_t nh = 1 + (int32_t)dhs_rng_below(&rng, 2);
        float qmag = ldexpf(1.0f, (int)dhs_rng_below(&rng, 8) - 2);
        run_case(nq, nh, k, 1, qmag, &rng);
    }
    /* tile scales past 2^8 and tiny ones (the table's decoding, and the folded one at its edges); from 6
       queries a launch the model's other kernel (k_att_part_r2<FMA>, refmodel.cu ATT_R2F_MIN), so both
       kernels take every case below even in a reduced run */
    run_case_r(small ? 2 : 3, 2, 2048, 1, 1.0f, -30, 60, 0, &rng), cases++;
    run_case_r(6, 2, 2048, 1, 1.0f, -30, 60, 0, &rng), cases++;
    run_case_r(small ? 6 : 8, 1, 1000, 1, 0.25f, 10, 20, 0, &rng), cases++;
    /* NaN codes: NaN outputs where the CPU's are NaN, the other queries' bits unchanged */
    run_case_r(3, 2, 64, 1, 1.0f, -3, 7, 1, &rng), cases++;
    run_case_r(small ? 6 : 8, 2, 64, 1, 1.0f, -3, 7, 1, &rng), cases++;
    run_case_r(small ? 6 : 8, 1, 300, 1, 1.0f, -3, 7, 1, &rng), cases++;
    run_case(small ? 6 : 12, 1, 2048, 1, 1.0f, &rng), cases++;
    CHECKF(nan_outputs > 0, "no NaN code reached an output (nan_outputs %d)", nan_outputs);
    /* the device's expf: within the tolerance */
    for (int i = 0; i < (small ? 1 : 3); i++, cases++) run_case(1 + 6 * i, 1 + i % 2, 2048, 0, 2.0f, &rng);
    printf("cases: %d; max |gpu - double softmax| / vmax: %.3g (bound 1e-3); NaN outputs %d\n", cases, worst_rel,
           nan_outputs);
    CK(cudaFree(d_lut));
    return th_summary();
}
#endif
