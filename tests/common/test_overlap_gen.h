/* test_overlap_gen.h - random and adversarial attention steps for
 * test_overlap.c (CPU) and test_overlap_cuda.c (GPU).
 *
 * A step: nq queries; query q owns a pool of rows_hit hit rows followed by
 * rows_miss staging rows (where the copy puts the misses). `after` holds the
 * pools once the copy ended; `before` is the same except that every staging
 * row is poisoned (0x7f bytes: FP8 NaN codes), so a phase A that read a miss
 * row would produce NaN. Rows are real model rows (dhs_ref_row_encode of
 * random latents with a per-row magnitude). */
#ifndef DHS_TEST_OVERLAP_GEN_H
#define DHS_TEST_OVERLAP_GEN_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "dev/overlap/overlap.h"
#include "util/rng.h"

typedef enum ovg_kind {
    OVG_RANDOM,     /* random miss fraction, some padding */
    OVG_ALL_HITS,   /* no miss */
    OVG_ALL_MISSES, /* every valid entry a miss */
    OVG_PAD,        /* mostly -1, some queries all -1 */
    OVG_REPEAT,     /* entries repeat a few rows (hits and misses) */
    OVG_LARGE,      /* scores spread over +-1000s: exp underflows, partial maxima far apart */
    OVG_TIES,       /* every row the same: all scores equal */
    OVG_KINDS
} ovg_kind;

static const char *const ovg_kind_name[OVG_KINDS] = {"random", "all-hits", "all-misses", "padding",
                                                     "repeated", "large-range", "ties"};

typedef struct ovg_case {
    dhs_ov_shape s;
    int64_t rows_hit, rows_miss, pool_rows;
    uint8_t *after, *before;          /* [nq][pool_rows][656] */
    const uint8_t **base_after, **base_before;
    float *q;                         /* [nq][nh][576] */
    int32_t *loc;                     /* [nq][k] */
    uint8_t *miss;                    /* [nq][k] */
    float *vmax;                      /* [nq] max |latent| of the valid rows (0: none) */
    int32_t *nvalid;                  /* [nq] entries with loc >= 0 */
    int64_t n_miss_rows;              /* staging rows used (copied) over the step */
    int32_t *miss_rows;               /* [n_miss_rows] global row index (q * pool_rows + row) to copy */
    void (*free_rows)(void *);        /* frees `after` (NULL: free) */
} ovg_case;

static inline float ovg_unif(uint64_t *r) { return (float)(dhs_rng_next(r) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }

static inline void ovg_free(ovg_case *c)
{
    if (c->free_rows) c->free_rows(c->after);
    else free(c->after);
    free(c->before);
    free(c->base_after);
    free(c->base_before);
    free(c->q);
    free(c->loc);
    free(c->miss);
    free(c->vmax);
    free(c->nvalid);
    free(c->miss_rows);
    memset(c, 0, sizeof *c);
}

/* 0 on success; alloc_rows / free_rows: when not NULL they allocate and free
   `after` (the GPU test puts it in mapped pinned memory: the host history) */
static inline int ovg_make(ovg_case *c, ovg_kind kind, int32_t nq, int32_t nh, int32_t k, int32_t chunk, uint64_t *rng,
                           void *(*alloc_rows)(size_t bytes), void (*free_rows)(void *))
{
    memset(c, 0, sizeof *c);
    c->free_rows = alloc_rows ? free_rows : NULL;
    c->s = (dhs_ov_shape){nq, nh, k, chunk, 1.0f / sqrtf((float)DHS_REF_LAT), 1};
    c->rows_hit = k < 16 ? 16 : k;
    c->rows_miss = k < 3 ? 3 : k; /* >= the 3 rows OVG_REPEAT reuses */
    c->pool_rows = c->rows_hit + c->rows_miss;
    size_t pool_bytes = (size_t)nq * (size_t)c->pool_rows * DHS_OV_ROW;
    c->after = alloc_rows ? alloc_rows(pool_bytes) : malloc(pool_bytes);
    c->before = malloc(pool_bytes);
    c->base_after = malloc(sizeof(void *) * (size_t)nq);
    c->base_before = malloc(sizeof(void *) * (size_t)nq);
    c->q = malloc(sizeof(float) * (size_t)nq * (size_t)nh * DHS_OV_LAT);
    c->loc = malloc(sizeof(int32_t) * (size_t)nq * (size_t)k);
    c->miss = malloc((size_t)nq * (size_t)k);
    c->vmax = calloc((size_t)nq, sizeof(float));
    c->nvalid = calloc((size_t)nq, sizeof(int32_t));
    c->miss_rows = malloc(sizeof(int32_t) * (size_t)nq * (size_t)k);
    if (!c->after || !c->before || !c->base_after || !c->base_before || !c->q || !c->loc || !c->miss || !c->vmax || !c->nvalid ||
        !c->miss_rows)
        return -1;
    float lat[DHS_OV_LAT];
    for (int32_t q = 0; q < nq; q++) {
        uint8_t *pool = c->after + (size_t)q * (size_t)c->pool_rows * DHS_OV_ROW;
        c->base_after[q] = pool;
        c->base_before[q] = c->before + (size_t)q * (size_t)c->pool_rows * DHS_OV_ROW;
        for (int64_t r = 0; r < c->pool_rows; r++) {
            if (kind == OVG_TIES && r > 0) {
                memcpy(pool + r * DHS_OV_ROW, pool, DHS_OV_ROW);
                continue;
            }
            float mag = ldexpf(1.0f, (int)dhs_rng_below(rng, 7) - 3);
            for (int i = 0; i < DHS_OV_LAT; i++) lat[i] = ovg_unif(rng) * mag;
            dhs_ref_row_encode(lat, pool + r * DHS_OV_ROW);
        }
        /* queries */
        float qs = kind == OVG_LARGE ? 3000.0f : (float)(1 << (2 * dhs_rng_below(rng, 3))) * 0.5f;
        for (int64_t i = 0; i < (int64_t)nh * DHS_OV_LAT; i++) c->q[(int64_t)q * nh * DHS_OV_LAT + i] = ovg_unif(rng) * qs;
        /* entries */
        double fmiss = kind == OVG_ALL_HITS ? 0.0 : kind == OVG_ALL_MISSES ? 1.0 : (double)dhs_rng_below(rng, 1001) / 1000.0;
        double fpad = 0.0;
        if (kind == OVG_PAD) fpad = dhs_rng_below(rng, 4) == 0 ? 1.0 : 0.5 + (double)dhs_rng_below(rng, 501) / 1000.0;
        else if (dhs_rng_below(rng, 4) == 0) fpad = (double)dhs_rng_below(rng, 301) / 1000.0;
        int64_t next_stage = 0;
        int32_t rep_hit[3], rep_miss[3];
        for (int j = 0; j < 3; j++) {
            rep_hit[j] = (int32_t)dhs_rng_below(rng, c->rows_hit);
            rep_miss[j] = (int32_t)(c->rows_hit + j);
        }
        uint8_t *used = calloc((size_t)c->rows_miss, 1);
        if (!used) return -1;
        for (int32_t e = 0; e < k; e++) {
            int64_t i = (int64_t)q * k + e;
            double u = (double)dhs_rng_below(rng, 1000000) / 1000000.0;
            double v = (double)dhs_rng_below(rng, 1000000) / 1000000.0;
            if (u < fpad) {
                c->loc[i] = -1;
                c->miss[i] = (uint8_t)dhs_rng_below(rng, 2); /* ignored for padding */
                continue;
            }
            int m = v < fmiss;
            c->miss[i] = (uint8_t)(m ? 1 + dhs_rng_below(rng, 255) : 0);
            if (kind == OVG_REPEAT) c->loc[i] = m ? rep_miss[dhs_rng_below(rng, 3)] : rep_hit[dhs_rng_below(rng, 3)];
            else if (m) c->loc[i] = (int32_t)(c->rows_hit + next_stage++);
            else c->loc[i] = (int32_t)dhs_rng_below(rng, c->rows_hit);
            if (m && !used[c->loc[i] - c->rows_hit]) {
                used[c->loc[i] - c->rows_hit] = 1;
                c->miss_rows[c->n_miss_rows++] = (int32_t)((int64_t)q * c->pool_rows + c->loc[i]);
            }
            c->nvalid[q]++;
            float dl[DHS_OV_LAT];
            dhs_ref_row_decode(pool + (int64_t)c->loc[i] * DHS_OV_ROW, dl);
            for (int t = 0; t < DHS_OV_DV; t++)
                if (fabsf(dl[t]) > c->vmax[q]) c->vmax[q] = fabsf(dl[t]);
        }
        free(used);
    }
    /* before: the same pools, staging rows poisoned */
    memcpy(c->before, c->after, pool_bytes);
    for (int32_t q = 0; q < nq; q++)
        memset(c->before + ((size_t)q * (size_t)c->pool_rows + (size_t)c->rows_hit) * DHS_OV_ROW, 0x7f,
               (size_t)c->rows_miss * DHS_OV_ROW);
    return 0;
}

/* the single-pass attention the overlap's whole and exact modes follow: rows
   decoded in selection order (-1 skipped), scores (dhs_ref_dot_fma), max,
   exp, sum and weighted sum in entry order (o[i] = fmaf(p, v[i], o[i]), the
   attention's fused steps), times 1/sum. out [nq][nh][512]. The model's attention
   (dhs_ref_attention) now runs split-K in chunks of DHS_REF_ATT_CHUNK; with
   nv <= DHS_REF_ATT_CHUNK the two are the same bits (test_model checks it),
   above they differ in the last bits until the overlap adopts the chunks. */
static inline void ovg_model_attention(const ovg_case *c, float *out)
{
    const dhs_ov_shape *s = &c->s;
    float *rows = malloc(sizeof(float) * (size_t)s->k * DHS_OV_LAT), *att = malloc(sizeof(float) * (size_t)s->k);
    if (!rows || !att) abort();
    for (int32_t q = 0; q < s->nq; q++) {
        int32_t nv = 0;
        for (int32_t e = 0; e < s->k; e++) {
            int32_t r = c->loc[(int64_t)q * s->k + e];
            if (r < 0) continue;
            dhs_ref_row_decode(c->base_after[q] + (size_t)r * DHS_OV_ROW, rows + (int64_t)nv * DHS_OV_LAT);
            nv++;
        }
        for (int32_t h = 0; h < s->nh; h++) {
            float *o = out + ((int64_t)q * s->nh + h) * DHS_OV_DV;
            for (int32_t i = 0; i < DHS_OV_DV; i++) o[i] = 0.0f;
            if (nv == 0) continue;
            const float *qh = c->q + ((int64_t)q * s->nh + h) * DHS_OV_LAT;
            const float scale = 1.0f / sqrtf((float)DHS_REF_LAT);
            float mx = -INFINITY, sum = 0.0f;
            for (int32_t e = 0; e < nv; e++) {
                att[e] = dhs_ref_dot_fma(qh, rows + (int64_t)e * DHS_OV_LAT, DHS_OV_LAT) * scale;
                if (att[e] > mx) mx = att[e];
            }
            for (int32_t e = 0; e < nv; e++) {
                att[e] = dhs_ref_expf(att[e] - mx);
                sum += att[e];
            }
            for (int32_t e = 0; e < nv; e++)
                for (int32_t i = 0; i < DHS_OV_DV; i++) o[i] = fmaf(att[e], rows[(int64_t)e * DHS_OV_LAT + i], o[i]);
            float inv = 1.0f / sum;
            for (int32_t i = 0; i < DHS_OV_DV; i++) o[i] *= inv;
        }
    }
    free(rows);
    free(att);
}

/* fast vs exact: max over values of |f - x| / vmax[q], of that over the
   documented bound dhs_ov_fast_tol(n), max |f - x|, and max |f - x| / |x| over
   |x| >= 1e-3 vmax[q] */
typedef struct ovg_err {
    double norm, of_bound, abs, rel;
    int64_t over; /* values beyond the bound */
} ovg_err;

static inline void ovg_compare_fast(const ovg_case *c, const float *fast, const float *exact, ovg_err *e)
{
    const dhs_ov_shape *s = &c->s;
    for (int32_t q = 0; q < s->nq; q++)
        for (int64_t i = 0; i < (int64_t)s->nh * DHS_OV_DV; i++) {
            int64_t j = (int64_t)q * s->nh * DHS_OV_DV + i;
            double d = fabs((double)fast[j] - (double)exact[j]);
            if (!(d == d)) d = INFINITY; /* NaN counts as unbounded */
            double nv = c->vmax[q] > 0 ? d / c->vmax[q] : (d > 0 ? INFINITY : 0.0);
            double ob = nv / dhs_ov_fast_tol(c->nvalid[q]);
            if (nv > e->norm) e->norm = nv;
            if (ob > e->of_bound) e->of_bound = ob;
            if (d > e->abs) e->abs = d;
            if (fabs(exact[j]) >= 1e-3 * c->vmax[q] && exact[j] != 0.0f && d / fabs(exact[j]) > e->rel)
                e->rel = d / fabs(exact[j]);
            if (!(ob <= 1.0)) e->over++;
        }
}

static inline void ovg_err_max(ovg_err *g, const ovg_err *e)
{
    if (e->norm > g->norm) g->norm = e->norm;
    if (e->of_bound > g->of_bound) g->of_bound = e->of_bound;
    if (e->abs > g->abs) g->abs = e->abs;
    if (e->rel > g->rel) g->rel = e->rel;
    g->over += e->over;
}

#endif
