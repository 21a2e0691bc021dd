/* tracestats.c - statistics of a selection trace (tracestats.h). */
#include "sim/tracestats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/tracegen.h"
#include "sim/util.h"

/* growable uint32 array, zero-filled */
typedef struct u32v { uint32_t *v; int64_t n; } u32v;

static int u32v_need(u32v *a, int64_t n)
{
    if (n <= a->n) return 1;
    int64_t cap = a->n ? a->n : 1024;
    while (cap < n) cap *= 2;
    uint32_t *v = realloc(a->v, (size_t)cap * sizeof *v);
    if (!v) return 0;
    memset(v + a->n, 0, (size_t)(cap - a->n) * sizeof *v);
    a->v = v;
    a->n = cap;
    return 1;
}

typedef struct info_acc {
    uint64_t requests, ended;
    uint64_t sel;                /* non-padding entries */
    uint64_t pad, dup;
    uint64_t unions;             /* sum over item x group of |U| */
    uint64_t unions_later;       /* the same, over items that are not the request's first */
    uint64_t first_touch, reuse_n, prev_hits;
    double reuse_sum;
    uint64_t spec_hits, spec_total, prod_hits, prod_total;
    uint64_t unsorted_queries;
    uint64_t accepted_sum;
    double prefix_sum;
    int64_t max_positions;
} info_acc;


dhs_trace_status dhs_trace_stats_compute(const char *path, dhs_trace_stats *out, char *err, size_t errlen,
                                         void (*progress)(void *user, uint64_t rounds), void *user)
{
    memset(out, 0, sizeof *out);
    dhs_trace_reader *r;
    dhs_trace_status st = dhs_trace_reader_open(path, 0, &r, err, errlen);
    if (st) return st;
    uint64_t n_ev = 0;
    const dhs_trace_header *h = dhs_trace_reader_header(r);
    const int32_t NG = h->n_groups, NR = h->n_requests;
    u32v *last = calloc((size_t)NR * (size_t)NG, sizeof *last); /* [req][group] round stamp + 1 per row */
    uint32_t *rr = calloc((size_t)NR, sizeof *rr);               /* request-rounds seen per request */
    u32v qmark = {0}, m0 = {0}, pm = {0};
    uint32_t qep = 0, ep0 = 0, pep = 0;
    info_acc A;
    memset(&A, 0, sizeof A);
    if (!last || !rr) {
        dhs_errf(err, errlen, "out of memory");
        st = DHS_TRACE_ERR_NOMEM;
        goto out;
    }
    double t_read = 0.0, t0 = dhs_wall_s();
    dhs_trace_event ev;
    for (;;) {
        double a = dhs_wall_s();
        st = dhs_trace_next(r, &ev);
        t_read += dhs_wall_s() - a;
        if (st != DHS_TRACE_OK) break;
        if (ev.kind == DHS_TRACE_EV_START) {
            A.requests++;
            A.prefix_sum += (double)ev.prefix;
            if (ev.prefix > A.max_positions) A.max_positions = ev.prefix;
            continue;
        }
        if (ev.kind == DHS_TRACE_EV_END) {
            A.ended++;
            for (int32_t g = 0; g < NG; g++) {
                u32v *l = &last[(size_t)ev.req * (size_t)NG + (size_t)g];
                free(l->v);
                l->v = NULL;
                l->n = 0;
            }
            continue;
        }
        if (progress && (++n_ev & 1023) == 0) progress(user, dhs_trace_reader_totals(r)->rounds);
        for (int32_t i = 0; i < ev.n_items; i++) {
            const dhs_trace_item *it = &ev.items[i];
            uint32_t cur = ++rr[it->req];
            int64_t npos = it->n_r + it->accepted + 1;
            if (npos > A.max_positions) A.max_positions = npos;
            A.accepted_sum += (uint64_t)it->accepted;
            int32_t K = it->n_queries;
            for (int32_t g = 0; g < NG; g++) {
                const int32_t k = h->k[g];
                u32v *l = &last[(size_t)it->req * (size_t)NG + (size_t)g];
                int64_t vis = (it->n_r + K) / (int64_t)dhs_trace_group_m(h, g) + 1;
                if (!u32v_need(l, vis) || !u32v_need(&qmark, vis) || !u32v_need(&m0, vis) || !u32v_need(&pm, vis)) {
                    dhs_errf(err, errlen, "out of memory");
                    st = DHS_TRACE_ERR_NOMEM;
                    goto out;
                }
                uint64_t un = 0;
                for (int32_t j = 0; j < K; j++) {
                    const int32_t *q = it->sel[g] + (size_t)j * (size_t)k;
                    qep++;
                    int unsorted = 0;
                    int32_t prevrow = -1;
                    int seen_pad = 0;
                    for (int32_t x = 0; x < k; x++) {
                        int32_t e = q[x];
                        if (e < 0) {
                            A.pad++;
                            seen_pad = 1;
                            continue;
                        }
                        if (seen_pad || e <= prevrow) unsorted = 1;
                        prevrow = e;
                        A.sel++;
                        if (qmark.v[e] == qep) A.dup++;
                        qmark.v[e] = qep;
                        if (l->v[e] != cur) {
                            if (l->v[e] == 0) A.first_touch++;
                            else {
                                uint32_t d = cur - l->v[e];
                                A.reuse_sum += d;
                                A.reuse_n++;
                                if (d == 1) A.prev_hits++;
                            }
                            l->v[e] = cur;
                            un++;
                        }
                    }
                    A.unsorted_queries += (uint64_t)unsorted;
                    /* speculative queries against query 0 */
                    if (j == 0) {
                        ep0++;
                        for (int32_t x = 0; x < k; x++)
                            if (q[x] >= 0) m0.v[q[x]] = ep0;
                    } else {
                        for (int32_t x = 0; x < k; x++)
                            if (q[x] >= 0) {
                                A.spec_total++;
                                A.spec_hits += m0.v[q[x]] == ep0;
                            }
                    }
                    /* adjacent producers, same query */
                    if (g > 0) {
                        const int32_t kp = h->k[g - 1];
                        const int32_t *pq = it->sel[g - 1] + (size_t)j * (size_t)kp;
                        pep++;
                        for (int32_t x = 0; x < kp; x++)
                            if (pq[x] >= 0 && pq[x] < vis) pm.v[pq[x]] = pep;
                        for (int32_t x = 0; x < k; x++)
                            if (q[x] >= 0) {
                                A.prod_total++;
                                A.prod_hits += pm.v[q[x]] == pep;
                            }
                    }
                }
                A.unions += un;
                if (cur > 1) A.unions_later += un;
            }
        }
    }
    double t_total = dhs_wall_s() - t0;
    if (st != DHS_TRACE_EOF) {
        dhs_errf(err, errlen, "%s", dhs_trace_reader_error(r));
        goto out;
    }
    st = DHS_TRACE_OK;
    {
        const dhs_trace_totals *T = dhs_trace_reader_totals(r);
        double ig = (double)T->items * (double)NG;
        out->hdr = *h;
        out->totals = *T;
        out->bytes = dhs_trace_reader_offset(r);
        out->requests = A.requests;
        out->ended = A.ended;
        out->selected = A.sel;
        out->padding = A.pad;
        out->duplicates = A.dup;
        out->unsorted_queries = A.unsorted_queries;
        out->distinct_rows = A.first_touch;
        out->padding_share = T->entries ? (double)A.pad / (double)T->entries : 0.0;
        out->prev_round_overlap = A.unions_later ? (double)A.prev_hits / (double)A.unions_later : NAN;
        out->mean_reuse_distance = A.reuse_n ? A.reuse_sum / (double)A.reuse_n : NAN;
        out->first_touch_share = A.unions ? (double)A.first_touch / (double)A.unions : NAN;
        out->spec_overlap = A.spec_total ? (double)A.spec_hits / (double)A.spec_total : NAN;
        out->producer_overlap = A.prod_total ? (double)A.prod_hits / (double)A.prod_total : NAN;
        out->mean_union_rows = ig > 0 ? (double)A.unions / ig : 0.0;
        out->mean_new_rows = ig > 0 ? (double)A.first_touch / ig : 0.0;
        out->mean_accepted = T->items ? (double)A.accepted_sum / (double)T->items : 0.0;
        out->mean_prefix = A.requests ? A.prefix_sum / (double)A.requests : 0.0;
        out->max_positions = A.max_positions;
        out->read_s = t_read;
        out->total_s = t_total;
    }
out:
    if (last)
        for (size_t i = 0; i < (size_t)NR * (size_t)NG; i++) free(last[i].v);
    free(last);
    free(rr);
    free(qmark.v);
    free(m0.v);
    free(pm.v);
    dhs_trace_reader_close(r);
    return st;
}

/* ---------------------------------------------------------------- locality */
#include <cjson/cJSON.h>

/* one request and group: last query-0 round per row, LRU state per B */
typedef struct lru_q { int32_t row; uint32_t seq; } lru_q;
typedef struct loc_rg {
    u32v last0;      /* round stamp (1-based) of the row's last query-0 selection */
    u32v seq;        /* access number of the row's last access (0 never) */
    uint8_t *res;    /* [rows][n_b] resident flags */
    int64_t res_n;   /* rows allocated in res */
    lru_q *q;        /* accesses in order */
    int64_t qn, qcap, front[DHS_TRACE_LOC_MAX_B], cnt[DHS_TRACE_LOC_MAX_B];
    uint32_t next_seq;
    uint32_t round;  /* query-0 rounds seen */
    int last_full;   /* the previous round's query 0 had no padding */
} loc_rg;

static void loc_rg_free(loc_rg *x)
{
    free(x->last0.v);
    free(x->seq.v);
    free(x->res);
    free(x->q);
    memset(x, 0, sizeof *x);
}

static int loc_rg_need(loc_rg *x, int64_t rows, int32_t nb)
{
    if (!u32v_need(&x->last0, rows) || !u32v_need(&x->seq, rows)) return 0;
    if (rows > x->res_n) {
        int64_t cap = x->res_n ? x->res_n : 1024;
        while (cap < rows) cap *= 2;
        uint8_t *r = realloc(x->res, (size_t)cap * (size_t)nb);
        if (!r) return 0;
        memset(r + (size_t)x->res_n * (size_t)nb, 0, (size_t)(cap - x->res_n) * (size_t)nb);
        x->res = r;
        x->res_n = cap;
    }
    return 1;
}

/* one access of `row`; hits[b] incremented where resident. 0 out of memory. */
static int lru_access(loc_rg *x, int32_t row, const int64_t *B, int32_t nb, uint64_t *hits)
{
    if (x->qn == x->qcap) { /* drop entries every front has passed, else grow */
        int64_t mn = x->qn;
        for (int32_t b = 0; b < nb; b++)
            if (x->front[b] < mn) mn = x->front[b];
        if (mn > x->qn / 2) {
            memmove(x->q, x->q + mn, (size_t)(x->qn - mn) * sizeof *x->q);
            x->qn -= mn;
            for (int32_t b = 0; b < nb; b++) x->front[b] -= mn;
        } else {
            int64_t cap = x->qcap ? x->qcap * 2 : 4096;
            lru_q *nq = realloc(x->q, (size_t)cap * sizeof *nq);
            if (!nq) return 0;
            x->q = nq;
            x->qcap = cap;
        }
    }
    uint32_t s = ++x->next_seq;
    x->seq.v[row] = s;
    x->q[x->qn++] = (lru_q){row, s};
    uint8_t *rr = x->res + (size_t)row * (size_t)nb;
    for (int32_t b = 0; b < nb; b++) {
        if (rr[b]) hits[b]++;
        else {
            rr[b] = 1;
            x->cnt[b]++;
        }
        while (x->cnt[b] > B[b]) { /* evict the least recently used */
            lru_q e = x->q[x->front[b]++];
            if (x->seq.v[e.row] == e.seq && x->res[(size_t)e.row * (size_t)nb + (size_t)b]) {
                x->res[(size_t)e.row * (size_t)nb + (size_t)b] = 0;
                x->cnt[b]--;
            }
        }
    }
    return 1;
}

/* the model a generated trace records (meta "locality"), as a
   dhs_locality_model with one layer per group; 0 when none */
static int loc_model(const char *meta, dhs_trace_loc_stats *o, dhs_locality_model *lm)
{
    memset(lm, 0, sizeof *lm);
    cJSON *m = cJSON_Parse(meta);
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(m, "locality");
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(l, "preset");
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(l, "alpha");
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(l, "alpha_exp");
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(l, "ref_context");
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(l, "ref_k");
    int n = cJSON_GetArraySize(al);
    if (cJSON_IsString(pr) && cJSON_IsArray(al) && cJSON_IsArray(ex) && cJSON_GetArraySize(ex) == n && n >= 1 &&
        n <= DHS_LOCALITY_MAX_LAYERS && cJSON_IsNumber(rc) && rc->valuedouble >= 1 && cJSON_IsNumber(rk) &&
        rk->valuedouble >= 1) {
        o->has_target = 1;
        snprintf(o->preset, sizeof o->preset, "%s", pr->valuestring);
        lm->n_layers = n;
        lm->ref_context = (int64_t)rc->valuedouble;
        lm->ref_k = (int32_t)rk->valuedouble;
        for (int g = 0; g < n; g++) {
            const cJSON *a = cJSON_GetArrayItem(al, g), *e = cJSON_GetArrayItem(ex, g);
            lm->alpha[g] = cJSON_IsNumber(a) ? a->valuedouble : 0.0;
            lm->alpha_exp[g] = cJSON_IsNumber(e) && e->valuedouble == 1 ? 1 : 0;
        }
    }
    cJSON_Delete(m);
    return o->has_target;
}

dhs_trace_status dhs_trace_loc_stats_compute(const char *path, const int64_t *B, int32_t nb, dhs_trace_loc_stats *out,
                                             char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (nb < 1 || nb > DHS_TRACE_LOC_MAX_B) {
        dhs_errf(err, errlen, "1..%d cache sizes", DHS_TRACE_LOC_MAX_B);
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    for (int32_t b = 0; b < nb; b++)
        if (B[b] < 1) {
            dhs_errf(err, errlen, "cache sizes must be >= 1 row");
            return DHS_TRACE_ERR_INVALID_ARG;
        }
    dhs_trace_reader *r;
    dhs_trace_status st = dhs_trace_reader_open(path, 0, &r, err, errlen);
    if (st) return st;
    const dhs_trace_header *h = dhs_trace_reader_header(r);
    const int32_t NG = h->n_groups, NR = h->n_requests;
    loc_rg *rg = calloc((size_t)NR * (size_t)NG, sizeof *rg);
    u32v mark = {0};
    uint32_t mep = 0;
    uint64_t a_hits[DHS_TRACE_MAX_GROUPS] = {0}, a_tot[DHS_TRACE_MAX_GROUPS] = {0};
    double a_rand[DHS_TRACE_MAX_GROUPS] = {0};
    uint64_t c_hits[DHS_TRACE_MAX_GROUPS] = {0}, c_tot[DHS_TRACE_MAX_GROUPS] = {0};
    uint64_t acc[DHS_TRACE_MAX_GROUPS] = {0};
    double a_tgt[DHS_TRACE_MAX_GROUPS] = {0};
    dhs_locality_model lm;
    int has_model = loc_model(h->meta, out, &lm);
    uint64_t hits[DHS_TRACE_MAX_GROUPS][DHS_TRACE_LOC_MAX_B];
    memset(hits, 0, sizeof hits);
    if (!rg) {
        dhs_errf(err, errlen, "out of memory");
        st = DHS_TRACE_ERR_NOMEM;
        goto out;
    }
    dhs_trace_event ev;
    for (;;) {
        st = dhs_trace_next(r, &ev);
        if (st != DHS_TRACE_OK) break;
        if (ev.kind == DHS_TRACE_EV_END)
            for (int32_t g = 0; g < NG; g++) loc_rg_free(&rg[(size_t)ev.req * (size_t)NG + (size_t)g]);
        if (ev.kind != DHS_TRACE_EV_ROUND) continue;
        for (int32_t i = 0; i < ev.n_items; i++) {
            const dhs_trace_item *it = &ev.items[i];
            out->request_rounds++;
            for (int32_t g = 0; g < NG; g++) {
                const int32_t k = h->k[g];
                loc_rg *x = &rg[(size_t)it->req * (size_t)NG + (size_t)g];
                int64_t vis = (it->n_r + it->n_queries) / (int64_t)dhs_trace_group_m(h, g) + 1;
                if (!loc_rg_need(x, vis, nb) || !u32v_need(&mark, vis)) {
                    dhs_errf(err, errlen, "out of memory");
                    st = DHS_TRACE_ERR_NOMEM;
                    goto out;
                }
                const int32_t *q0 = it->sel[g];
                int full = 1;
                uint64_t ov = 0;
                uint32_t cur = ++x->round;
                for (int32_t e = 0; e < k; e++) {
                    if (q0[e] < 0) {
                        full = 0;
                        continue;
                    }
                    ov += x->last0.v[q0[e]] == cur - 1 && cur > 1;
                }
                if (full && x->last_full) {
                    a_hits[g] += ov;
                    a_tot[g] += (uint64_t)k;
                    int64_t V0 = (it->n_r + 1) / (int64_t)dhs_trace_group_m(h, g);
                    a_rand[g] += V0 > 0 ? (double)k / (double)V0 : 0.0;
                    if (has_model) a_tgt[g] += dhs_locality_alpha(&lm, g, V0, k);
                    out->alpha_n[g]++;
                }
                for (int32_t e = 0; e < k; e++)
                    if (q0[e] >= 0) x->last0.v[q0[e]] = cur;
                x->last_full = full;
                if (g > 0) { /* against group g-1's query 0 */
                    const int32_t kp = h->k[g - 1];
                    const int32_t *pq = it->sel[g - 1];
                    mep++;
                    for (int32_t e = 0; e < kp; e++)
                        if (pq[e] >= 0 && pq[e] < vis) mark.v[pq[e]] = mep;
                    for (int32_t e = 0; e < k; e++)
                        if (q0[e] >= 0) {
                            c_tot[g]++;
                            c_hits[g] += mark.v[q0[e]] == mep;
                        }
                }
                for (int32_t j = 0; j < it->n_queries; j++) {
                    const int32_t *q = it->sel[g] + (size_t)j * (size_t)k;
                    for (int32_t e = 0; e < k; e++) {
                        if (q[e] < 0) continue;
                        acc[g]++;
                        if (!lru_access(x, q[e], B, nb, hits[g])) {
                            dhs_errf(err, errlen, "out of memory");
                            st = DHS_TRACE_ERR_NOMEM;
                            goto out;
                        }
                    }
                }
            }
        }
    }
    if (st != DHS_TRACE_EOF) {
        dhs_errf(err, errlen, "%s", dhs_trace_reader_error(r));
        goto out;
    }
    st = DHS_TRACE_OK;
    out->n_groups = NG;
    out->n_b = nb;
    uint64_t all_acc = 0, all_hits[DHS_TRACE_LOC_MAX_B] = {0};
    for (int32_t b = 0; b < nb; b++) out->B[b] = B[b];
    for (int32_t g = 0; g < NG; g++) {
        out->alpha[g] = a_tot[g] ? (double)a_hits[g] / (double)a_tot[g] : NAN;
        out->random_alpha[g] = out->alpha_n[g] ? a_rand[g] / (double)out->alpha_n[g] : NAN;
        out->alpha_target[g] = has_model && out->alpha_n[g] ? a_tgt[g] / (double)out->alpha_n[g] : NAN;
        out->cross[g] = c_tot[g] ? (double)c_hits[g] / (double)c_tot[g] : NAN;
        all_acc += acc[g];
        for (int32_t b = 0; b < nb; b++) {
            out->hit[g][b] = acc[g] ? (double)hits[g][b] / (double)acc[g] : NAN;
            all_hits[b] += hits[g][b];
        }
    }
    for (int32_t b = 0; b < nb; b++) out->hit_all[b] = all_acc ? (double)all_hits[b] / (double)all_acc : NAN;
out:
    if (rg)
        for (size_t i = 0; i < (size_t)NR * (size_t)NG; i++) loc_rg_free(&rg[i]);
    free(rg);
    free(mark.v);
    dhs_trace_reader_close(r);
    return st;
}

/* ------------------------------------------------------------ per-group sizing */
int dhs_trace_hot_split_compute(const dhs_trace_loc_stats *S, int64_t budget, int64_t min_rows, dhs_trace_hot_split *out,
                                char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const int32_t NG = S->n_groups;
    if (min_rows < 0 || budget < 0 || NG < 1 || NG > DHS_TRACE_MAX_GROUPS) {
        dhs_errf(err, errlen, "bad sizing input (budget %lld, floor %lld, %d groups)", (long long)budget,
                 (long long)min_rows, NG);
        return -1;
    }
    if (budget / NG < min_rows) {
        dhs_errf(err, errlen, "a budget of %lld rows cannot give each of %d groups its %lld rows", (long long)budget, NG,
                 (long long)min_rows);
        return -1;
    }
    /* levels: 0 = min_rows, i >= 1 = the i-th smallest size of S above it */
    int32_t ord[DHS_TRACE_LOC_MAX_B], nl = 0, base = -1;
    for (int32_t b = 0; b < S->n_b; b++) {
        if (S->B[b] == min_rows) base = b;
        if (S->B[b] <= min_rows) continue;
        int dup = 0;
        for (int32_t i = 0; i < nl; i++) dup |= S->B[ord[i]] == S->B[b];
        if (!dup) ord[nl++] = b;
    }
    for (int32_t i = 1; i < nl; i++)
        for (int32_t j = i; j > 0 && S->B[ord[j]] < S->B[ord[j - 1]]; j--) {
            int32_t x = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = x;
        }
#define HITL(g, i)                                                                                                   \
    ((i) == 0 ? (base < 0 || isnan(S->hit[g][base]) ? 0.0 : S->hit[g][base])                                         \
              : (isnan(S->hit[g][ord[(i) - 1]]) ? 0.0 : S->hit[g][ord[(i) - 1]]))
#define BL(i) ((i) == 0 ? min_rows : S->B[ord[(i) - 1]])
    int32_t even = 0, lev[DHS_TRACE_MAX_GROUPS];
    for (int32_t i = 1; i <= nl; i++)
        if (BL(i) <= budget / NG) even = i;
    out->budget = budget;
    out->min_rows = min_rows;
    out->even_rows = BL(even);
    int64_t used = (int64_t)NG * min_rows;
    for (int32_t g = 0; g < NG; g++) {
        lev[g] = 0;
        out->even_hit += HITL(g, even) / NG;
    }
    for (;;) { /* the upgrade with the most hit per row that fits */
        int32_t bg = -1, bi = 0;
        double best = 0;
        for (int32_t g = 0; g < NG; g++)
            for (int32_t i = lev[g] + 1; i <= nl; i++) {
                int64_t d = BL(i) - BL(lev[g]);
                double r = (HITL(g, i) - HITL(g, lev[g])) / (double)d;
                if (used + d <= budget && r > best) {
                    best = r;
                    bg = g;
                    bi = i;
                }
            }
        if (bg < 0) break;
        used += BL(bi) - BL(lev[bg]);
        lev[bg] = bi;
    }
    out->used = used;
    for (int32_t g = 0; g < NG; g++) {
        out->rows[g] = BL(lev[g]);
        out->sized_hit += HITL(g, lev[g]) / NG;
    }
#undef HITL
#undef BL
    return 0;
}

dhs_trace_status dhs_trace_hot_plan(const char *path, int64_t B, int32_t page_rows, dhs_trace_loc_stats *S,
                                    dhs_trace_hot_split *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (page_rows < 1 || B < page_rows || B % page_rows || B > (INT64_C(1) << 30)) {
        dhs_errf(err, errlen, "hot rows %lld must be a positive multiple of the page rows %d (at most 2^30)", (long long)B,
                 page_rows);
        return DHS_TRACE_ERR_INVALID_ARG;
    }
    int64_t lv[DHS_TRACE_LOC_MAX_B], want[5] = {page_rows, B / 2, B, 2 * B, 4 * B};
    int32_t nb = 0;
    for (int i = 0; i < 5; i++) {
        int64_t v = want[i] / page_rows * page_rows;
        int dup = v < page_rows;
        for (int32_t j = 0; j < nb; j++) dup |= lv[j] == v;
        if (!dup) lv[nb++] = v;
    }
    dhs_trace_loc_stats *own = S ? S : malloc(sizeof *own);
    if (!own) {
        dhs_errf(err, errlen, "out of memory");
        return DHS_TRACE_ERR_NOMEM;
    }
    dhs_trace_status st = dhs_trace_loc_stats_compute(path, lv, nb, own, err, errlen);
    if (st == DHS_TRACE_OK && dhs_trace_hot_split_compute(own, (int64_t)own->n_groups * B, page_rows, out, err, errlen))
        st = DHS_TRACE_ERR_INVALID_ARG;
    if (!S) free(own);
    return st;
}
