/* tracestats.c - statistics of a selection trace (tracestats.h). */
#include "sim/tracestats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
