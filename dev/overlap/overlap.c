/* overlap.c - C reference of the attention split around the miss copy
 * (overlap.h). The numerics are the reference model's own (numerics.c):
 * dhs_ref_row_decode, dhs_ref_dot_fma, dhs_ref_expf, and the attention's
 * fused sums (dhs_ref_axpy_fma, fmaf: one rounding per multiply-add, as
 * dhs_ref_attention); the order of every sum is the one
 * dev/overlap/overlap.cu uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "dev/overlap/overlap.h"

const char *dhs_ov_shape_check(const dhs_ov_shape *s)
{
    if (!s) return "no shape";
    if (s->nq < 0) return "nq < 0";
    if (s->nh < 1 || s->nh > DHS_OV_MAX_HEADS) return "nh outside 1..DHS_OV_MAX_HEADS";
    if (s->k < 1 || s->k > DHS_OV_MAX_K) return "k outside 1..DHS_OV_MAX_K";
    if (s->chunk < 1 || s->chunk > s->k) return "chunk outside 1..k";
    if (s->exp_portable != 0 && s->exp_portable != 1) return "exp_portable is 0 or 1";
    return NULL;
}

int32_t dhs_ov_chunks(const dhs_ov_shape *s) { return (s->k + s->chunk - 1) / s->chunk; }
int64_t dhs_ov_scores_len(const dhs_ov_shape *s) { return (int64_t)s->nq * s->nh * s->k; }
int64_t dhs_ov_pml_len(const dhs_ov_shape *s) { return (int64_t)s->nq * 2 * dhs_ov_chunks(s) * s->nh; }
int64_t dhs_ov_pacc_len(const dhs_ov_shape *s) { return dhs_ov_pml_len(s) * DHS_OV_DV; }

static const uint8_t *row_of(const dhs_ov_args *a, int32_t k, int32_t q, int32_t e)
{
    return a->base[q] + (int64_t)a->loc[(int64_t)q * k + e] * DHS_OV_ROW;
}

static float ov_exp(const dhs_ov_shape *s, float x) { return s->exp_portable ? dhs_ref_expf(x) : expf(x); }

void dhs_ov_scores_ref(const dhs_ov_shape *s, int which, const dhs_ov_args *a)
{
    float lat[DHS_OV_LAT];
    for (int32_t q = 0; q < s->nq; q++)
        for (int32_t e = 0; e < s->k; e++) {
            if (!dhs_ov_in_set(a, s->k, q, e, which)) continue;
            dhs_ref_row_decode(row_of(a, s->k, q, e), lat);
            for (int32_t h = 0; h < s->nh; h++) {
                const float *qh = a->q + ((int64_t)q * s->nh + h) * DHS_OV_LAT;
                a->scores[((int64_t)q * s->nh + h) * s->k + e] = dhs_ref_dot_fma(qh, lat, DHS_OV_LAT) * s->att_scale;
            }
        }
}

/* over the entries [e0, e1) of query q in set `which`, head h: m = max score,
   p[j] = exp(score - m) and l = sum p in entry order, acc[i] = fmaf(p,
   v[i], acc[i]) in entry order (unnormalised). Returns the number of entries (0: m = -inf,
   l = 0, acc = 0). rows: scratch [e1 - e0][512] decoded values. */
static int32_t partial(const dhs_ov_shape *s, const dhs_ov_args *a, int which, int32_t q, int32_t h, int32_t e0,
                       int32_t e1, float *p, int32_t *ent, float *m_out, float *l_out, float *acc)
{
    const float *sc = a->scores + ((int64_t)q * s->nh + h) * s->k;
    int32_t n = 0;
    float mx = -INFINITY, l = 0.0f;
    for (int32_t e = e0; e < e1; e++)
        if (dhs_ov_in_set(a, s->k, q, e, which)) {
            ent[n++] = e;
            if (sc[e] > mx) mx = sc[e];
        }
    for (int32_t i = 0; i < DHS_OV_DV; i++) acc[i] = 0.0f;
    if (n == 0) {
        *m_out = -INFINITY;
        *l_out = 0.0f;
        return 0;
    }
    for (int32_t j = 0; j < n; j++) {
        p[j] = ov_exp(s, sc[ent[j]] - mx);
        l += p[j];
    }
    float lat[DHS_OV_LAT];
    for (int32_t j = 0; j < n; j++) {
        dhs_ref_row_decode(row_of(a, s->k, q, ent[j]), lat);
        dhs_ref_axpy_fma(p[j], lat, acc, DHS_OV_DV);
    }
    *m_out = mx;
    *l_out = l;
    return n;
}

/* the scratch of partial() for n entries, one block: p[n] floats, then ent[n] */
static int scratch_alloc(int32_t n, float **p, int32_t **ent)
{
    *p = malloc((sizeof(float) + sizeof(int32_t)) * (size_t)n);
    *ent = *p ? (int32_t *)(*p + n) : NULL;
    return *p != NULL;
}

dhs_status dhs_ov_reduce_ref(const dhs_ov_shape *s, const dhs_ov_args *a)
{
    if (dhs_ov_shape_check(s)) return DHS_ERR_INVALID_ARG;
    float *p;
    int32_t *ent;
    if (!scratch_alloc(s->k, &p, &ent)) return DHS_ERR_NOMEM;
    for (int32_t q = 0; q < s->nq; q++)
        for (int32_t h = 0; h < s->nh; h++) {
            float *o = a->out + ((int64_t)q * s->nh + h) * DHS_OV_DV, m, l;
            if (partial(s, a, DHS_OV_ALL, q, h, 0, s->k, p, ent, &m, &l, o) == 0) continue; /* o = 0 */
            float inv = 1.0f / l;
            for (int32_t i = 0; i < DHS_OV_DV; i++) o[i] *= inv;
        }
    free(p); /* ent lies in the same block */
    return DHS_OK;
}

/* index of partial j of (query q, head h): j = set * C + chunk, set 0 = hits, 1 = misses
   (pm / pl [nq][2][C][nh], pacc the same with DHS_OV_DV floats each) */
static inline int64_t pidx(const dhs_ov_shape *s, int32_t C, int32_t q, int32_t j, int32_t h)
{
    return ((int64_t)q * 2 * C + j) * s->nh + h;
}

dhs_status dhs_ov_partial_ref(const dhs_ov_shape *s, int which, const dhs_ov_args *a)
{
    if (dhs_ov_shape_check(s) || (which != DHS_OV_HITS && which != DHS_OV_MISSES)) return DHS_ERR_INVALID_ARG;
    float *p;
    int32_t *ent;
    if (!scratch_alloc(s->chunk, &p, &ent)) return DHS_ERR_NOMEM;
    int32_t C = dhs_ov_chunks(s), set = which == DHS_OV_MISSES;
    for (int32_t q = 0; q < s->nq; q++)
        for (int32_t c = 0; c < C; c++) {
            int32_t e0 = c * s->chunk, e1 = e0 + s->chunk < s->k ? e0 + s->chunk : s->k;
            for (int32_t h = 0; h < s->nh; h++) {
                const int64_t pi = pidx(s, C, q, set * C + c, h);
                partial(s, a, which, q, h, e0, e1, p, ent, a->pm + pi, a->pl + pi, a->pacc + pi * DHS_OV_DV);
            }
        }
    free(p); /* ent lies in the same block */
    return DHS_OK;
}

dhs_status dhs_ov_merge_ref(const dhs_ov_shape *s, const dhs_ov_args *a)
{
    if (dhs_ov_shape_check(s)) return DHS_ERR_INVALID_ARG;
    int32_t C = dhs_ov_chunks(s);
    for (int32_t q = 0; q < s->nq; q++)
        for (int32_t h = 0; h < s->nh; h++) {
            float *o = a->out + ((int64_t)q * s->nh + h) * DHS_OV_DV;
            float M = -INFINITY, L = 0.0f;
            int any = 0;
            for (int32_t j = 0; j < 2 * C; j++) { /* (hits, 0..C-1), (misses, 0..C-1); l > 0 iff not empty */
                const int64_t pi = pidx(s, C, q, j, h);
                if (a->pl[pi] > 0.0f && a->pm[pi] > M) M = a->pm[pi];
                any |= a->pl[pi] > 0.0f;
            }
            for (int32_t i = 0; i < DHS_OV_DV; i++) o[i] = 0.0f;
            if (!any) continue;
            for (int32_t j = 0; j < 2 * C; j++) {
                const int64_t pi = pidx(s, C, q, j, h);
                if (!(a->pl[pi] > 0.0f)) continue;
                float w = ov_exp(s, a->pm[pi] - M);
                L = fmaf(w, a->pl[pi], L);
                dhs_ref_axpy_fma(w, a->pacc + pi * DHS_OV_DV, o, DHS_OV_DV);
            }
            float inv = 1.0f / L;
            for (int32_t i = 0; i < DHS_OV_DV; i++) o[i] *= inv;
        }
    return DHS_OK;
}

dhs_status dhs_ov_attend_ref(const dhs_ov_shape *s, const dhs_ov_args *a)
{
    if (dhs_ov_shape_check(s) || !a) return DHS_ERR_INVALID_ARG;
    dhs_ov_scores_ref(s, DHS_OV_ALL, a);
    return dhs_ov_reduce_ref(s, a);
}

dhs_status dhs_ov_overlap_ref(const dhs_ov_shape *s, int mode, const uint8_t *const *base_before,
                              const dhs_ov_args *a)
{
    if (dhs_ov_shape_check(s) || !a || !base_before) return DHS_ERR_INVALID_ARG;
    if (mode == DHS_OV_WHOLE) return dhs_ov_attend_ref(s, a);
    if (mode != DHS_OV_EXACT && mode != DHS_OV_FAST) return DHS_ERR_INVALID_ARG;
    dhs_ov_args before = *a;
    before.base = base_before;
    dhs_status st;
    /* phase A: only the hits' rows are read, through the pools as they are before the copy */
    dhs_ov_scores_ref(s, DHS_OV_HITS, &before);
    if (mode == DHS_OV_FAST && (st = dhs_ov_partial_ref(s, DHS_OV_HITS, &before)) != DHS_OK) return st;
    /* phase B: after the copy */
    dhs_ov_scores_ref(s, DHS_OV_MISSES, a);
    if (mode == DHS_OV_EXACT) return dhs_ov_reduce_ref(s, a);
    if ((st = dhs_ov_partial_ref(s, DHS_OV_MISSES, a)) != DHS_OK) return st;
    return dhs_ov_merge_ref(s, a);
}
