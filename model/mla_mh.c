/* mla_mh.c - the CPU specification of the multi-head sparse MLA decode
 * attention (model/mla_mh.h has the algorithm), its split plan and argument
 * check, and, without CUDA, the GPU launcher's stub. The GPU kernel
 * (model/mla_mh.cu) computes the same algorithm with tensor cores (what differs:
 * the header, dhs_mla_mh_attend).
 *
 * The build does not contract (C11 without GNU extensions: -ffp-contract=off),
 * so every step below is one IEEE float operation in the written order. */
#include "model/mla_mh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

_Static_assert(DHS_MLA_ROW_BYTES == DHS_REF_ROW_BYTES, "row format");
_Static_assert(DHS_MLA_DQK == DHS_REF_LAT && DHS_MLA_DV == DHS_REF_NOPE, "row format");

dhs_status dhs_mla_mh_check(const dhs_mla_mh_desc *d)
{
    if (!d) return DHS_ERR_INVALID_ARG;
    if (d->nq < 0) return DHS_ERR_INVALID_ARG;
    if (d->n_heads != DHS_MLA_HG && d->n_heads != 2 * DHS_MLA_HG) return DHS_ERR_INVALID_ARG;
    if (d->k < 1 || d->k > DHS_MLA_MAXK) return DHS_ERR_INVALID_ARG;
    if (d->splits < 1 || d->splits > DHS_MLA_MAX_SPLITS) return DHS_ERR_INVALID_ARG;
    if (!isfinite(d->sm_scale) || !(d->sm_scale > 0.0f)) return DHS_ERR_INVALID_ARG;
    if (d->cluster < 0 || d->cluster > DHS_MLA_MAX_CLUSTER) return DHS_ERR_INVALID_ARG;
    if (d->cluster >= 2 && d->splits % d->cluster) return DHS_ERR_INVALID_ARG;
    return DHS_OK;
}

/* partials per query: the splits', or the clusters' (1 with one cluster per query, which then needs no
   workspace: dhs_mla_mh_part_bytes) */
static int32_t partials_per_query(const dhs_mla_mh_desc *d)
{
    return d->cluster >= 2 ? d->splits / d->cluster : d->splits;
}

int32_t dhs_mla_mh_splits(int32_t nq, int32_t n_heads, int32_t k, int32_t n_sm)
{
    if (nq <= 0 || n_heads <= 0 || k <= 0 || n_sm <= 0) return 1;
    const int64_t groups = ((int64_t)n_heads + DHS_MLA_HG - 1) / DHS_MLA_HG;
    const int64_t blocks = (int64_t)nq * groups; /* blocks of one split */
    const int64_t nt = ((int64_t)k + DHS_MLA_TILE - 1) / DHS_MLA_TILE;
    int64_t fit = (int64_t)n_sm / blocks; /* the most splits that stay in one wave (one block per SM) */
    if (fit > nt) fit = nt;
    if (fit > DHS_MLA_MAX_SPLITS) fit = DHS_MLA_MAX_SPLITS;
    if (fit < 1) fit = 1;
    const int64_t per = (nt + fit - 1) / fit; /* the longest split's tiles */
    return (int32_t)((nt + per - 1) / per);   /* the fewest splits with that longest split */
}

void dhs_mla_mh_plan(int32_t nq, int32_t n_heads, int32_t k, int32_t n_sm, const int32_t *fit, int32_t *splits,
                     int32_t *cluster)
{
    int32_t bs = dhs_mla_mh_splits(nq, n_heads, k, n_sm), bc = 0;
    if (fit && nq > 0 && n_heads > 0 && k > 0 && n_sm > 0) {
        const int64_t groups = ((int64_t)n_heads + DHS_MLA_HG - 1) / DHS_MLA_HG;
        const int64_t nt = ((int64_t)k + DHS_MLA_TILE - 1) / DHS_MLA_TILE;
        const int64_t smax = nt < DHS_MLA_MAX_SPLITS ? nt : DHS_MLA_MAX_SPLITS;
        int64_t best_per = (nt + bs - 1) / bs, best_s = 0, best_cs = 0, best_over = 0; /* to beat: the base plan */
        for (int64_t cs = 2; cs <= DHS_MLA_MAX_CLUSTER; cs++) {
            if (fit[cs] <= 0) continue;
            for (int64_t np = 1; cs * np <= smax && (int64_t)nq * groups * np <= fit[cs]; np++) {
                const int64_t S = cs * np, per = (nt + S - 1) / S, over = np > DHS_MLA_PART_FEW ? np : 0;
                /* fewer tiles, then no more than DHS_MLA_PART_FEW partials per query (else fewer), then
                   the smaller cluster, then fewer splits: the candidates come in the order of the last
                   two keys (cs, then np, upwards), so a later one wins only on the first two (the first
                   one: on no more tiles than the base plan) */
                const int better = !best_cs ? per <= best_per : per != best_per ? per < best_per : over < best_over;
                if (better) best_per = per, best_s = S, best_cs = cs, best_over = over;
            }
        }
        if (best_cs) bs = (int32_t)best_s, bc = (int32_t)best_cs;
    }
    if (splits) *splits = bs;
    if (cluster) *cluster = bc;
}

uint64_t dhs_mla_mh_part_bytes(const dhs_mla_mh_desc *d)
{
    if (dhs_mla_mh_check(d) != DHS_OK) return 0;
    if (d->cluster >= 2 && d->cluster == d->splits) return 0;
    return (uint64_t)d->nq * (uint64_t)partials_per_query(d) * (uint64_t)d->n_heads * (uint64_t)(DHS_MLA_DV + 2) *
           4u;
}

/* the decoded key/value row: dhs_ref_row_decode (the model's E4M3 table times
   the tile scale, in fp32), the 512 latent values then rounded to bf16 */
static void row_kv(const uint8_t *row, float *kv)
{
    dhs_ref_row_decode(row, kv);
    for (int j = 0; j < DHS_MLA_DV; j++) kv[j] = dhs_ref_bf16_decode(dhs_ref_bf16_encode(kv[j]));
}

/* one split of one head: rows [r0, r1) of the decoded rows K; writes (m, l, o) */
static void split_partial(const float *qh, const float *K, int32_t r0, int32_t r1, float c, float *m_out, float *l_out,
                          float *o)
{
    float m = -INFINITY, l = 0.0f;
    float sc[DHS_MLA_TILE], acc[DHS_MLA_DV];
    for (int j = 0; j < DHS_MLA_DV; j++) o[j] = 0.0f;
    for (int32_t t = r0; t < r1; t += DHS_MLA_TILE) {
        const int32_t n = r1 - t < DHS_MLA_TILE ? r1 - t : DHS_MLA_TILE;
        float tmax = -INFINITY;
        for (int32_t i = 0; i < n; i++) {
            sc[i] = dhs_ref_dot(qh, K + (int64_t)(t + i) * DHS_MLA_DQK, DHS_MLA_DQK) * c;
            tmax = fmaxf(tmax, sc[i]);
        }
        const float m_new = fmaxf(m, tmax);
        const float mu = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = m == -INFINITY ? 0.0f : exp2f(m - mu);
        float psum = 0.0f;
        for (int j = 0; j < DHS_MLA_DV; j++) acc[j] = 0.0f;
        for (int32_t i = 0; i < n; i++) {
            const float p = dhs_ref_bf16_decode(dhs_ref_bf16_encode(exp2f(sc[i] - mu)));
            const float *v = K + (int64_t)(t + i) * DHS_MLA_DQK;
            psum = psum + p;
            for (int j = 0; j < DHS_MLA_DV; j++) acc[j] = acc[j] + p * v[j];
        }
        l = l * alpha + psum;
        for (int j = 0; j < DHS_MLA_DV; j++) o[j] = o[j] * alpha + acc[j];
        m = m_new;
    }
    *m_out = m;
    *l_out = l;
}

/* combines n partials (o[512], m, l) at part, part + st (DV + 2) floats, ... (st: the stride in
   partials) into (o, *M, *L) in their order (the algorithm's combine); o may be the first partial's o */
static void combine(float *part, int32_t n, int32_t stride, float *o, float *M_out, float *L_out)
{
    const size_t st = (size_t)stride * (DHS_MLA_DV + 2);
    float M = -INFINITY;
    for (int32_t s = 0; s < n; s++) M = fmaxf(M, part[s * st + DHS_MLA_DV]);
    float L = 0.0f, acc[DHS_MLA_DV];
    for (int j = 0; j < DHS_MLA_DV; j++) acc[j] = 0.0f;
    for (int32_t s = 0; s < n; s++) {
        const float *ps = part + s * st;
        const float ms = ps[DHS_MLA_DV];
        const float w = ms == -INFINITY ? 0.0f : exp2f(ms - M);
        L = L + w * ps[DHS_MLA_DV + 1];
        for (int j = 0; j < DHS_MLA_DV; j++) acc[j] = acc[j] + w * ps[j];
    }
    memcpy(o, acc, sizeof acc);
    *M_out = M;
    *L_out = L;
}

dhs_status dhs_mla_mh_ref(const dhs_mla_mh_desc *d, const uint16_t *q, const uint8_t *const *base,
                          const int32_t *loc, const int32_t *nv, float *out)
{
    if (dhs_mla_mh_check(d) != DHS_OK) return DHS_ERR_INVALID_ARG;
    if (!q || !base || !loc || !nv || !out) return DHS_ERR_INVALID_ARG;
    const int32_t nq = d->nq, nh = d->n_heads, k = d->k, S = d->splits;
    /* every argument is checked before anything is written */
    for (int32_t qi = 0; qi < nq; qi++) {
        const int32_t n = nv[qi];
        if (n <= 0) continue;
        if (n > k || !base[qi]) return DHS_ERR_INVALID_ARG;
        for (int32_t e = 0; e < n; e++)
            if (loc[(int64_t)qi * k + e] < 0) return DHS_ERR_INVALID_ARG;
    }
    if (nq == 0) return DHS_OK;
    /* scratch: the decoded rows of one query, Q of one head, the partials of the splits */
    const size_t nfl = (size_t)k * DHS_MLA_DQK + DHS_MLA_DQK + (size_t)S * (DHS_MLA_DV + 2);
    float *buf = malloc(sizeof(float) * nfl);
    if (!buf) return DHS_ERR_NOMEM;
    float *K = buf, *qh = K + (size_t)k * DHS_MLA_DQK, *part = qh + DHS_MLA_DQK;
    const float c = d->sm_scale * DHS_MLA_LOG2E;
    for (int32_t qi = 0; qi < nq; qi++) {
        const int32_t n = nv[qi];
        if (n <= 0) continue;
        for (int32_t e = 0; e < n; e++)
            row_kv(base[qi] + (int64_t)loc[(int64_t)qi * k + e] * DHS_MLA_ROW_BYTES, K + (int64_t)e * DHS_MLA_DQK);
        for (int32_t h = 0; h < nh; h++) {
            const uint16_t *qs = q + ((int64_t)qi * nh + h) * DHS_MLA_DQK;
            for (int j = 0; j < DHS_MLA_DQK; j++) qh[j] = dhs_ref_bf16_decode(qs[j]);
            /* partial of split s: part[s*(DV+2)]: o[512], m, l */
            for (int32_t s = 0; s < S; s++) {
                int32_t t0, t1;
                dhs_mla_mh_split_tiles(n, S, s, &t0, &t1);
                int32_t r0 = t0 * DHS_MLA_TILE, r1 = t1 * DHS_MLA_TILE;
                if (r1 > n) r1 = n;
                if (r0 > r1) r0 = r1;
                float *ps = part + (size_t)s * (DHS_MLA_DV + 2);
                split_partial(qh, K, r0, r1, c, &ps[DHS_MLA_DV], &ps[DHS_MLA_DV + 1], ps);
            }
            /* with clusters: the partials of each cluster's splits combined into the cluster's (in place
               of its first split's), then those; without, or with one cluster: all of them at once */
            float *o = out + ((int64_t)qi * nh + h) * DHS_MLA_DV;
            const int32_t cs = d->cluster >= 2 && d->cluster < S ? d->cluster : 1;
            if (cs > 1)
                for (int32_t s = 0; s < S; s += cs) {
                    float *pc = part + (size_t)s * (DHS_MLA_DV + 2);
                    combine(pc, cs, 1, pc, &pc[DHS_MLA_DV], &pc[DHS_MLA_DV + 1]);
                }
            float M, L;
            combine(part, S / cs, cs, o, &M, &L);
            for (int j = 0; j < DHS_MLA_DV; j++) o[j] = o[j] / L;
        }
    }
    free(buf);
    return DHS_OK;
}

#ifndef DHS_HAVE_CUDA
dhs_status dhs_mla_mh_attend(const dhs_mla_mh_desc *d, const uint16_t *q, const uint8_t *const *base,
                             const int32_t *loc, const int32_t *nv, float *part, float *out, void *stream)
{
    (void)d, (void)q, (void)base, (void)loc, (void)nv, (void)part, (void)out, (void)stream;
    return DHS_ERR_UNSUPPORTED;
}

dhs_status dhs_mla_mh_attend_kernel(const dhs_mla_mh_desc *d, int variant, const uint16_t *q,
                                    const uint8_t *const *base, const int32_t *loc, const int32_t *nv, float *part,
                                    float *out, void *stream)
{
    (void)variant;
    return dhs_mla_mh_attend(d, q, base, loc, nv, part, out, stream);
}

dhs_status dhs_mla_mh_cluster_fit(int32_t fit[DHS_MLA_MAX_CLUSTER + 1])
{
    if (!fit) return DHS_ERR_INVALID_ARG;
    for (int c = 0; c <= DHS_MLA_MAX_CLUSTER; c++) fit[c] = 0;
    return DHS_ERR_UNSUPPORTED;
}
#endif
