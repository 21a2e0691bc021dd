/* spec_auto.c - speculation width chosen online (include/dhs_spec_auto.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "dhs_spec_auto.h"

#define SPEC_AUTO_MAX 64

typedef struct inc {
    double ratio;  /* gain / cost */
    double gain;   /* a^K: the expected token of query K + 1 */
    int32_t i, K;  /* request index, width it raises from */
} inc;

struct dhs_spec_auto {
    dhs_spec_auto_cfg cfg;
    double *acc, *tries; /* decayed counts of accepted drafts and of drafts decided */
    inc *buf;            /* max_slots * (spec_max - 1) increments */
    int32_t *mark;       /* max_slots: slots seen in one choose call (distinctness) */
    double *q;           /* max_slots: query costs with the copies charged */
    /* the miss model (dhs_spec_auto_observe_round): decayed least-squares sums, x1 = requests,
       x2 = further queries, y = host rows; decayed measured copy time and its rows */
    double s11, s12, s22, s1y, s2y;
    double copy_us, copy_rows, row_us_prior;
};

dhs_spec_auto_cfg dhs_spec_auto_cfg_default(int32_t max_slots)
{
    dhs_spec_auto_cfg c = {.max_slots = max_slots, .spec_max = 8, .prior_accept = 0.6, .prior_weight = 4, .decay = 0.95};
    return c;
}

static int cfg_ok(const dhs_spec_auto_cfg *c)
{
    return c && c->max_slots >= 1 && c->max_slots <= (1 << 24) && c->spec_max >= 1 && c->spec_max <= SPEC_AUTO_MAX &&
           c->prior_accept >= 0 && c->prior_accept <= 1 && c->prior_weight >= 0 && c->prior_weight <= 1e9 &&
           c->decay > 0 && c->decay <= 1;
}

dhs_status dhs_spec_auto_create(const dhs_spec_auto_cfg *cfg, dhs_spec_auto **out)
{
    if (!out || !cfg_ok(cfg)) return DHS_ERR_INVALID_ARG;
    dhs_spec_auto *sa = calloc(1, sizeof *sa);
    if (!sa) return DHS_ERR_NOMEM;
    sa->cfg = *cfg;
    size_t n = (size_t)cfg->max_slots, incs = n * (size_t)(cfg->spec_max > 1 ? cfg->spec_max - 1 : 1);
    sa->acc = calloc(n, sizeof *sa->acc);
    sa->tries = calloc(n, sizeof *sa->tries);
    sa->buf = malloc(incs * sizeof *sa->buf);
    sa->mark = calloc(n, sizeof *sa->mark);
    sa->q = calloc(n, sizeof *sa->q);
    if (!sa->acc || !sa->tries || !sa->buf || !sa->mark || !sa->q) {
        dhs_spec_auto_destroy(sa);
        return DHS_ERR_NOMEM;
    }
    *out = sa;
    return DHS_OK;
}

void dhs_spec_auto_destroy(dhs_spec_auto *sa)
{
    if (!sa) return;
    free(sa->acc);
    free(sa->tries);
    free(sa->buf);
    free(sa->mark);
    free(sa->q);
    free(sa);
}

dhs_status dhs_spec_auto_reset(dhs_spec_auto *sa, int32_t slot)
{
    if (!sa || slot < 0 || slot >= sa->cfg.max_slots) return DHS_ERR_INVALID_ARG;
    sa->acc[slot] = sa->tries[slot] = 0;
    return DHS_OK;
}

dhs_status dhs_spec_auto_observe(dhs_spec_auto *sa, int32_t slot, int32_t K, int32_t accepted)
{
    if (!sa || slot < 0 || slot >= sa->cfg.max_slots || K < 1 || K > sa->cfg.spec_max || accepted < 0 ||
        accepted > K - 1)
        return DHS_ERR_INVALID_ARG;
    if (K == 1) return DHS_OK; /* no draft: nothing learnt */
    /* in-order acceptance: `accepted` drafts passed, and one more was decided (rejected) unless all passed */
    double decided = (double)accepted + (accepted < K - 1 ? 1.0 : 0.0);
    sa->acc[slot] = sa->cfg.decay * sa->acc[slot] + (double)accepted;
    sa->tries[slot] = sa->cfg.decay * sa->tries[slot] + decided;
    return DHS_OK;
}

static double estimate(const dhs_spec_auto *sa, int32_t slot)
{
    double w = sa->cfg.prior_weight, den = sa->tries[slot] + w;
    if (den <= 0) return sa->cfg.prior_accept;
    double a = (sa->acc[slot] + sa->cfg.prior_accept * w) / den;
    return a < 0 ? 0 : a > 1 ? 1 : a;
}

dhs_status dhs_spec_auto_estimate(const dhs_spec_auto *sa, int32_t slot, double *accept)
{
    if (!sa || !accept || slot < 0 || slot >= sa->cfg.max_slots) return DHS_ERR_INVALID_ARG;
    *accept = estimate(sa, slot);
    return DHS_OK;
}

/* ratio descending; then request, then width ascending (a request's increments stay in width order) */
static int inc_cmp(const void *pa, const void *pb)
{
    const inc *a = pa, *b = pb;
    if (a->ratio != b->ratio) return a->ratio > b->ratio ? -1 : 1;
    if (a->i != b->i) return a->i < b->i ? -1 : 1;
    return (a->K > b->K) - (a->K < b->K);
}

/* The best ratio with every K capped at W and draft cost draft_us * (W - 1); counts[i] (when not NULL)
   gets the increments taken of request i. */
static double best_for_width(const inc *v, size_t nv, int32_t n, const double *query_us, double fixed_us,
                             double draft_us, int32_t W, int64_t max_inc, int32_t *counts)
{
    double T = n, S = fixed_us + draft_us * (W - 1);
    int64_t taken = 0;
    if (counts)
        for (int32_t i = 0; i < n; i++) counts[i] = 0;
    for (size_t j = 0; j < nv && taken < max_inc; j++) {
        if (v[j].K >= W) continue; /* raises a request past W */
        double c = query_us[v[j].i];
        if (!(v[j].gain * S > T * c)) break; /* no later increment raises the ratio either */
        T += v[j].gain;
        S += c;
        taken++;
        if (counts) counts[v[j].i]++;
    }
    return T / S;
}

/* choose with each query's cost query_us[i] + extra_us, fixed_us + n * first_us and at most max_inc
   increments in all */
static dhs_status choose(dhs_spec_auto *sa, int32_t n, const int32_t *slots, const int32_t *cap,
                         const double *query_us, double fixed_us, double draft_us, double first_us, double extra_us,
                         int64_t max_inc, int32_t *K, double *tokens_per_us)
{
    if (!sa || n < 1 || n > sa->cfg.max_slots || !slots || !query_us || !K || !(fixed_us > 0) ||
        !(draft_us >= 0) || !isfinite(fixed_us) || !isfinite(draft_us))
        return DHS_ERR_INVALID_ARG;
    int32_t bad = 0, i = 0;
    for (; i < n && !bad; i++) {
        int32_t s = slots[i];
        if (s < 0 || s >= sa->cfg.max_slots || sa->mark[s] || (cap && cap[i] < 1) || !(query_us[i] > 0) ||
            !isfinite(query_us[i]))
            bad = 1;
        else
            sa->mark[s] = 1;
    }
    for (int32_t j = 0; j < i; j++) /* undo the marks (the slot that failed was not marked) */
        if (slots[j] >= 0 && slots[j] < sa->cfg.max_slots) sa->mark[slots[j]] = 0;
    if (bad) return DHS_ERR_INVALID_ARG;
    for (i = 0; i < n; i++) sa->q[i] = query_us[i] + extra_us;
    query_us = sa->q;
    fixed_us += first_us * n;

    const int32_t M = sa->cfg.spec_max;
    size_t nv = 0;
    for (i = 0; i < n; i++) {
        int32_t c = cap && cap[i] < M ? cap[i] : M;
        double a = estimate(sa, slots[i]), g = 1;
        for (int32_t k = 1; k < c; k++) {
            g *= a; /* a^k: query k + 1's expected token */
            sa->buf[nv++] = (inc){g / query_us[i], g, i, k};
        }
    }
    qsort(sa->buf, nv, sizeof *sa->buf, inc_cmp);
    int32_t bestW = 1;
    double best = -1;
    for (int32_t W = 1; W <= M; W++) {
        double r = best_for_width(sa->buf, nv, n, query_us, fixed_us, draft_us, W, max_inc, NULL);
        if (r > best) { /* strictly better: the narrower width wins ties */
            best = r;
            bestW = W;
        }
    }
    best = best_for_width(sa->buf, nv, n, query_us, fixed_us, draft_us, bestW, max_inc, K);
    for (i = 0; i < n; i++) K[i] += 1;
    if (tokens_per_us) *tokens_per_us = best;
    return DHS_OK;
}

dhs_status dhs_spec_auto_choose(dhs_spec_auto *sa, int32_t n, const int32_t *slots, const int32_t *cap,
                                const double *query_us, double fixed_us, double draft_us, int32_t *K,
                                double *tokens_per_us)
{
    return choose(sa, n, slots, cap, query_us, fixed_us, draft_us, 0, 0, INT64_MAX, K, tokens_per_us);
}

dhs_status dhs_spec_auto_observe_round(dhs_spec_auto *sa, int32_t requests, int32_t queries, double host_rows,
                                       double copy_us)
{
    if (!sa || requests < 1 || queries < requests || !(host_rows >= 0) || !isfinite(host_rows) || isnan(copy_us) ||
        isinf(copy_us))
        return DHS_ERR_INVALID_ARG;
    const double d = sa->cfg.decay, x1 = requests, x2 = (double)queries - requests, y = host_rows;
    sa->s11 = d * sa->s11 + x1 * x1;
    sa->s12 = d * sa->s12 + x1 * x2;
    sa->s22 = d * sa->s22 + x2 * x2;
    sa->s1y = d * sa->s1y + x1 * y;
    sa->s2y = d * sa->s2y + x2 * y;
    if (copy_us >= 0 && host_rows > 0) { /* a round without copies says nothing about their price */
        sa->copy_us = d * sa->copy_us + copy_us;
        sa->copy_rows = d * sa->copy_rows + host_rows;
    }
    return DHS_OK;
}

dhs_status dhs_spec_auto_set_row_us(dhs_spec_auto *sa, double row_us)
{
    if (!sa || !(row_us >= 0) || !isfinite(row_us)) return DHS_ERR_INVALID_ARG;
    sa->row_us_prior = row_us;
    return DHS_OK;
}

dhs_status dhs_spec_auto_miss_model(const dhs_spec_auto *sa, double *first_rows, double *extra_rows, double *row_us)
{
    if (!sa) return DHS_ERR_INVALID_ARG;
    /* ridge: a tiny one on the first query's coefficient (defined before any round), 1 on the further
       queries' (their rows count as 0 until rounds of different widths show otherwise) */
    double a11 = sa->s11 + 1e-3, a22 = sa->s22 + 1, det = a11 * a22 - sa->s12 * sa->s12, f = 0, e = 0;
    if (det > 0) {
        f = (a22 * sa->s1y - sa->s12 * sa->s2y) / det;
        e = (a11 * sa->s2y - sa->s12 * sa->s1y) / det;
    }
    if (first_rows) *first_rows = f > 0 ? f : 0;
    if (extra_rows) *extra_rows = e > 0 ? e : 0;
    if (row_us) *row_us = sa->copy_rows > 0 ? sa->copy_us / sa->copy_rows : sa->row_us_prior;
    return DHS_OK;
}

dhs_status dhs_spec_auto_choose_round(dhs_spec_auto *sa, int32_t n, const int32_t *slots, const int32_t *cap,
                                      const double *query_us, double fixed_us, double draft_us, double room_rows,
                                      int32_t *K, double *tokens_per_us)
{
    if (!sa || isnan(room_rows) || isinf(room_rows)) return DHS_ERR_INVALID_ARG;
    double first, extra, row_us;
    dhs_spec_auto_miss_model(sa, &first, &extra, &row_us);
    int64_t max_inc = INT64_MAX;
    if (room_rows >= 0 && extra > 0) {
        double m = floor(room_rows / extra);
        max_inc = m < 9e18 ? (int64_t)m : INT64_MAX;
    }
    return choose(sa, n, slots, cap, query_us, fixed_us, draft_us, first * row_us, extra * row_us, max_inc, K,
                  tokens_per_us);
}
