/* servesim.c - discrete-event serving simulator over the real core.
 * Model, modes and cost constants: servesim.h and docs/SIM.md. */
#include "sim/servesim.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dhs_spec_auto.h"
#include "util/rng.h"
#include "sim/util.h"

/* ------------------------------------------------------------- defaults */
const char *dhs_serve_mode_str(dhs_serve_mode m)
{
    switch (m) {
    case DHS_SERVE_RESIDENT: return "resident";
    case DHS_SERVE_FIXED: return "fixed";
    case DHS_SERVE_ADAPTIVE: return "adaptive";
    default: return "unknown";
    }
}

dhs_serve_cost dhs_serve_cost_default(void)
{
    dhs_serve_cost c;
    c.layers = 61;                 /* DeepSeek-V3.2: 61 layers, each with its own indexer (FACTS.md §1) */
    c.row_bytes = 656;             /* FP8 MLA row (FACTS.md §1, §2) */
    c.idx_bytes = 132;             /* 128 fp8 + 4 B scale per position and layer (FACTS.md §1) */
    c.base_us = 12000;             /* assumption: weights, experts, communication per step on one rank */
    c.token_us = 25;               /* assumption: compute per query token */
    c.attn_us = 0.8;               /* 2048 x 656 B = 1.34 MB at the 1.7 TB/s HBM gather of FACTS.md §4 */
    c.attn_layer_us = 0;           /* the batch-independent part: none unless calibrated (docs/SIM.md) */
    c.idx_us_per_ktok = 0.031;     /* 1000 x 132 B at the 4.28 TB/s HBM rate of FACTS.md §4 */
    c.idx_layer_us = 0;            /* the batch-independent part: none unless calibrated (docs/SIM.md) */
    c.pcie_gbps = 38;              /* zero-copy gather of 656-B rows, 2048 rows in 35 us (FACTS.md §4) */
    c.gather_us = 4;               /* 256 rows in 8.3 us = 4 us latency + 4.4 us at 38 GB/s (FACTS.md §4) */
    c.resolver_us = 5;             /* assumption: one device-resident resolver launch (3.3 us launch, FACTS.md §4) */
    c.resolver_ns_per_entry = 0.5; /* assumption: device hash/reverse-index lookups */
    c.draft_us = 800;              /* assumption: one MTP-layer draft forward per drafted position */
    c.prefill_us_per_token = 20;   /* assumption: a prefill instance at 50K prompt tokens/s (DeepSeek reports ~74K/node) */
    return c;
}

dhs_serve_config dhs_serve_config_default(void)
{
    dhs_serve_config c;
    memset(&c, 0, sizeof c);
    c.mode = DHS_SERVE_ADAPTIVE;
    c.dp_ranks = 1;
    c.placement = DHS_PLACE_ROUND_ROBIN;
    c.spec = 0;
    dhs_serve_parse_schedule("8@32,6@64,5@127,4", &c);
    c.accept_p = 0.7;
    c.k = 2048;
    c.hot_rows = 4096;
    c.page_rows = 64;
    c.tail_rows = 128;
    c.max_batch = 128;
    c.kv_gib = 40;
    c.idx_share = 0;
    c.stage_layers = 4;
    c.layer_pool_bytes = 0;
    c.idx_cap_bytes = 0;
    c.policy = DHS_POLICY_LRU;
    c.max_context = 131072;
    c.max_output = 4096;
    c.prefill_remote = 1;
    c.cost = dhs_serve_cost_default();
    c.loc = dhs_locality_default();
    return c;
}

int dhs_serve_parse_schedule(const char *s, dhs_serve_config *c)
{
    int32_t n = 0, kk[8], bb[8];
    const char *p = s;
    while (p && *p) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 1 || k > 256) return -1;
        long b = INT32_MAX;
        if (*end == '@') {
            p = end + 1;
            b = strtol(p, &end, 10);
            if (end == p || b < 1) return -1;
        }
        if (n >= 8 || (n > 0 && b <= bb[n - 1])) return -1;
        kk[n] = (int32_t)k;
        bb[n] = (int32_t)b;
        n++;
        p = end;
        if (*p == ',') p++;
        else if (*p) return -1;
        if (b == INT32_MAX && *p) return -1; /* the open-ended entry is last */
    }
    if (n == 0 || bb[n - 1] != INT32_MAX) return -1;
    c->n_sched = n;
    memcpy(c->sched_k, kk, sizeof kk);
    memcpy(c->sched_batch, bb, sizeof bb);
    return 0;
}

int32_t dhs_serve_block_width(const dhs_serve_config *c, int32_t batch)
{
    for (int32_t i = 0; i < c->n_sched; i++)
        if (batch <= c->sched_batch[i]) return c->sched_k[i];
    return c->n_sched ? c->sched_k[c->n_sched - 1] : 1;
}

static int32_t spec_kmax(const dhs_serve_config *c)
{
    if (!c->spec) return 1;
    int32_t m = 1;
    for (int32_t i = 0; i < c->n_sched; i++)
        if (c->sched_k[i] > m) m = c->sched_k[i];
    return m;
}

/* ------------------------------------------------------------- requests */
typedef struct sreq {
    struct sreq *next;     /* pending or queue list */
    double arrival, t_first, t_last;
    int64_t prompt, out;   /* positions, tokens */
    int64_t n;             /* committed positions */
    int64_t tokens;        /* generated */
    int admitted, joined, done;
    double ready;          /* prefill done and KV in place */
    dhs_req h;
    uint64_t rng_acc, sel_seed;
    double accept;         /* this request's acceptance probability */
    int32_t slot;          /* spec_auto: its controller slot from join to completion, else -1 */
    dhs_selreq *sel;       /* hierarchical modes: from join to completion */
} sreq;
/* (a request's rank is the rank_st its run goes through, and its placement
   prediction a function of its lengths, recomputed at completion: neither is
   stored, so per-request state is the single-rank simulator's) */

/* where requests come from, in arrival order: made one at a time */
typedef struct source {
    const dhs_serve_config *c;
    const dhs_serve_workload *w;
    dhs_serve_trace *tr;   /* TRACE */
    uint64_t arr_rng, len_rng;
    int64_t cmin, omin;
    double t;              /* Poisson clock */
    int32_t made, N;
    int64_t live, peak_live;
    uint64_t bytes, peak_bytes, sel_bytes;
} source;

/* request number S->made: lengths and arrival from their own streams (or the
   trace's next line); `arrival` is used by the closed loop */
static sreq *source_make(source *S, double arrival, char *err, size_t err_len)
{
    const dhs_serve_workload *w = S->w;
    const dhs_serve_config *c = S->c;
    sreq *q = calloc(1, sizeof *q);
    if (!q) { dhs_errf(err, err_len, "out of memory"); return NULL; }
    int64_t i = S->made;
    if (w->arrival == DHS_ARRIVAL_TRACE) {
        dhs_serve_req tq;
        int r = dhs_serve_trace_next(S->tr, &tq, err, err_len);
        if (r <= 0) {
            if (r == 0) dhs_errf(err, err_len, "request trace ended after %lld requests", (long long)i);
            free(q);
            return NULL;
        }
        q->prompt = tq.input_len;
        q->out = tq.output_len;
        q->arrival = tq.t_s / (w->time_scale > 0 ? w->time_scale : 1);
    } else {
        q->prompt = dhs_rng_range(&S->len_rng, S->cmin, w->context);
        q->out = dhs_rng_range(&S->len_rng, S->omin, w->output_len);
        if (w->arrival == DHS_ARRIVAL_POISSON) {
            S->t += -log(1 - dhs_rng_unit(&S->arr_rng)) / w->rate;
            q->arrival = S->t;
        } else {
            q->arrival = arrival;
        }
    }
    if (q->prompt > c->max_context) q->prompt = c->max_context;
    if (q->prompt < 1) q->prompt = 1;
    if (q->out > c->max_output) q->out = c->max_output;
    if (q->out < 1) q->out = 1;
    q->sel_seed = dhs_mix64(w->seed * 0x9e3779b97f4a7c15ull + (uint64_t)i * 2 + 1);
    q->rng_acc = dhs_mix64(w->seed * 0xc2b2ae3d27d4eb4full + (uint64_t)i * 2 + 2);
    q->accept = c->accept_p;
    if (c->accept_spread > 0) { /* its own draw: the acceptance stream of spread 0 is untouched */
        uint64_t a = dhs_mix64(q->rng_acc ^ 0x5851f42d4c957f2dull);
        q->accept += c->accept_spread * (2 * dhs_rng_unit(&a) - 1);
        q->accept = q->accept < 0 ? 0 : q->accept > 1 ? 1 : q->accept;
    }
    q->slot = -1;
    S->made++;
    S->live++;
    S->bytes += sizeof *q;
    if (S->live > S->peak_live) S->peak_live = S->live;
    if (S->bytes > S->peak_bytes) S->peak_bytes = S->bytes;
    return q;
}

static void source_drop_sel(source *S, sreq *q)
{
    if (!q->sel) return;
    dhs_selreq_free(q->sel);
    q->sel = NULL;
    S->bytes -= S->sel_bytes;
}

static void source_free(source *S, sreq *q)
{
    source_drop_sel(S, q);
    S->live--;
    S->bytes -= sizeof *q;
    free(q);
}

/* a FIFO of requests */
typedef struct rlist {
    sreq *head, *tail;
} rlist;

static void rl_push(rlist *l, sreq *q)
{
    q->next = NULL;
    if (l->tail) l->tail->next = q;
    else l->head = q;
    l->tail = q;
}

static sreq *rl_pop(rlist *l)
{
    sreq *q = l->head;
    if (q) {
        l->head = q->next;
        if (!l->head) l->tail = NULL;
        q->next = NULL;
    }
    return q;
}

/* ------------------------------------------------------------- statistics */
static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy.percentile (linear interpolation) of a sorted array */
static double pct(const double *v, int64_t n, double p)
{
    if (n <= 0) return 0;
    double idx = p / 100.0 * (double)(n - 1);
    int64_t lo = (int64_t)floor(idx), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (idx - (double)lo);
}

static void summarize(double *v, int64_t n, double *mean, double *median, double *p99)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    qsort(v, (size_t)n, sizeof(double), cmp_dbl);
    *mean = n ? s / (double)n : 0;
    *median = pct(v, n, 50);
    *p99 = pct(v, n, 99);
}

typedef struct dvec {
    double *v;
    int64_t n, cap;
} dvec;

static int dvec_push(dvec *d, double x)
{
    if (d->n == d->cap) {
        int64_t cap = d->cap ? 2 * d->cap : 1024;
        double *nv = realloc(d->v, sizeof(double) * (size_t)cap);
        if (!nv) return -1;
        d->v = nv;
        d->cap = cap;
    }
    d->v[d->n++] = x;
    return 0;
}

/* ------------------------------------------------------------- the core's context */
typedef struct hier {
    dhs_backend *be;
    dhs_ctx *ctx;
    uint64_t idx_cap, idx_used;
    uint64_t pool_bytes;
} hier;

/* max_len: the longest request of the run (prompt + output, clamped): the
   core sizes every request's row tables by max_rows, so a bound the run's
   requests can use, not the clamps, keeps per-request state small */
static dhs_config core_config(const dhs_serve_config *c, int64_t max_len)
{
    dhs_config d = dhs_config_default();
    int32_t km = spec_kmax(c);
    d.max_requests = c->max_batch;
    d.sel_k = c->k;
    d.spec_width = km;
    d.hot_rows = c->hot_rows;
    d.page_rows = c->page_rows;
    int32_t t = c->tail_rows > 2 * km ? c->tail_rows : 2 * km;
    d.tail_rows = (t + c->page_rows - 1) / c->page_rows * c->page_rows;
    d.max_rows = max_len + km + 1;
    d.resident_first = c->mode == DHS_SERVE_ADAPTIVE;
    d.policy = c->policy; /* placement only: the context lives on a payload-free backend */
    return d;
}

static dhs_arch core_arch(const dhs_serve_config *c)
{
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = (c->cost.row_bytes + 15u) & ~15u;
    a.index_key_bytes = c->cost.idx_bytes;
    return a;
}

/* the mean final length (prompt + output, clamped) of the run's requests;
   trace_mean: the trace's, from the pre-pass */
static double mean_len(const dhs_serve_workload *w, double trace_mean)
{
    if (w->arrival == DHS_ARRIVAL_TRACE) return trace_mean;
    int64_t cmin = w->context_min > 0 ? w->context_min : w->context / 2, omin = w->output_min > 0 ? w->output_min : (w->output_len + 1) / 2;
    return 0.5 * (double)(cmin + w->context) + 0.5 * (double)(omin + w->output_len);
}

static int hier_init(hier *H, const dhs_serve_config *c, const dhs_serve_workload *w, double trace_mean, int64_t max_len,
                     dhs_serve_result *r, char *err, size_t err_len)
{
    memset(H, 0, sizeof *H);
    const dhs_serve_cost *k = &c->cost;
    dhs_arch a = core_arch(c);
    dhs_config d = core_config(c, max_len);
    uint64_t row = a.sources[0].row_bytes, pb = (uint64_t)d.page_rows * row;
    double M = c->kv_gib * 1073741824.0;
    int32_t km = d.spec_width;
    /* staging: chi live layer groups, K_max * k rows per slot, when a round's union can exceed B */
    double stage = (int64_t)km * c->k > c->hot_rows ? (double)c->stage_layers * d.max_requests * km * c->k * (double)row : 0;
    double share = c->idx_share;
    if (share <= 0) {
        /* auto: index keys and required payload allocations run out at the same session count */
        double L = mean_len(w, trace_mean);
        double idx = L * k->layers * k->idx_bytes, req = (double)(d.hot_rows + d.tail_rows) * row * k->layers;
        share = idx / (idx + req);
    }
    double rest = M - stage;
    if (!c->layer_pool_bytes && rest <= 0) {
        dhs_errf(err, err_len, "KV budget %.1f GiB below the staging reservation %.1f GiB", c->kv_gib, stage / 1073741824.0);
        return -1;
    }
    H->idx_cap = c->idx_cap_bytes ? c->idx_cap_bytes : (uint64_t)(rest * share);
    double layer_pool = c->layer_pool_bytes ? (double)c->layer_pool_bytes : rest * (1 - share) / k->layers;
    /* arena pages the core takes (probe on a generous pool) */
    dhs_backend *be = NULL;
    dhs_ctx *probe = NULL;
    int64_t arena_up = (int64_t)((int64_t)d.max_requests * km * c->k / d.page_rows + 1);
    d.device_bytes = (uint64_t)(arena_up + 4 * (d.hot_rows + d.tail_rows) / d.page_rows + 16) * pb;
    const dhs_cpu_options po = {.payload_free = 1}; /* placement only: no bytes */
    dhs_status s = dhs_backend_cpu_create(&po, &be);
    if (s == DHS_OK) s = dhs_ctx_create(&a, &d, be, &probe);
    if (s != DHS_OK) { dhs_errf(err, err_len, "core context: %s", dhs_status_str(s)); dhs_backend_destroy(be); return -1; }
    dhs_mem m;
    dhs_get_mem(probe, &m);
    int64_t arena_pages = m.pages_total - m.pages_free;
    dhs_ctx_destroy(probe);
    d.device_bytes = (uint64_t)(arena_pages + (int64_t)(layer_pool / (double)pb)) * pb;
    H->pool_bytes = d.device_bytes;
    s = dhs_ctx_create(&a, &d, be, &H->ctx);
    if (s != DHS_OK) {
        dhs_errf(err, err_len, "core context (%.1f MiB per layer): %s; raise --kv-gib", layer_pool / 1048576.0, dhs_status_str(s));
        dhs_backend_destroy(be);
        return -1;
    }
    H->be = be;
    r->device_pool_bytes = H->pool_bytes;
    r->idx_budget_bytes = H->idx_cap;
    return 0;
}

static void hier_free(hier *H)
{
    dhs_ctx_destroy(H->ctx);
    dhs_backend_destroy(H->be);
}

/* ------------------------------------------------------------- placement */
const char *dhs_serve_placement_str(dhs_serve_placement p)
{
    switch (p) {
    case DHS_PLACE_ROUND_ROBIN: return "round-robin";
    case DHS_PLACE_LEAST_SESSIONS: return "least-sessions";
    case DHS_PLACE_MISS_AWARE: return "miss-aware";
    default: return "unknown";
    }
}

dhs_serve_pred dhs_serve_predict(const dhs_serve_config *c, int64_t prompt, int64_t output)
{
    const dhs_serve_cost *k = &c->cost;
    const dhs_locality *l = &c->loc;
    dhs_serve_pred p = {0, 0, 0};
    double L = (double)prompt + 0.5 * (double)output, pos = (double)(prompt + output);
    if (c->mode != DHS_SERVE_RESIDENT && L > c->k) {
        /* query 0's composition in the selection generator (tracegen.c select_base): sinks, the
           window, the on-clusters' rows up to k - tail_min*k, the random tail. A cluster's on share
           is its stationary one (topic_on / (topic_on + topic_off); 1 with both 0, as req_locality) */
        double on = l->topic_on + l->topic_off > 0 ? l->topic_on / (l->topic_on + l->topic_off) : 1.0;
        double win = l->window_full + (double)(l->window - l->window_full) * l->window_density;
        double clus = l->clusters * on * (2.0 * l->cluster_radius + 1) * l->cluster_density;
        double limit = c->k - l->tail_min * c->k, fixed = l->sinks + win + clus;
        double tail = c->k - (fixed < limit ? fixed : limit);
        /* clusters that switch topic per step land anywhere in the old history */
        double fresh = l->clusters * l->topic_switch * (2.0 * l->cluster_radius + 1) * l->cluster_density;
        double held = (double)c->hot_rows + c->tail_rows, out_share = held < L ? 1 - held / L : 0;
        p.misses = (tail + fresh) * out_share;
    }
    if (c->mode == DHS_SERVE_RESIDENT) p.bytes = pos * k->layers * (double)(k->row_bytes + k->idx_bytes);
    else p.bytes = pos * k->layers * k->idx_bytes + (double)(c->hot_rows + c->tail_rows) * k->row_bytes * k->layers;
    p.step_us = k->token_us + k->layers * (k->attn_us + k->idx_us_per_ktok * L / 1000.0 + p.misses * k->row_bytes / (k->pcie_gbps * 1000.0));
    return p;
}

/* one data-parallel rank: its own core context, queue, admitted requests and batch */
typedef struct rank_st {
    hier H;
    rlist queue;                  /* arrived and placed here, waiting for admission */
    sreq **run, **bat, **newly;   /* [max_batch] */
    int32_t n_run, nb, n_new;
    int32_t *Kv, *acc;            /* [max_batch] */
    double res_used;
    double dt;                    /* this step, us */
    uint64_t dH;                  /* this step's host rows */
    dhs_stats st0;
    /* spec_auto: the controller, its free slots (a stack) and the per-step buffers */
    dhs_spec_auto *sa;
    int32_t *free_slot, n_free, *slots, *cap;
    double *qus;
    /* placement state: live requests (placed, not done) and their predictions */
    int32_t live, placed, max_running;
    double pred_us, pred_bytes;
    /* statistics */
    uint64_t host_rows;
    double step_ms_sum;
} rank_st;

/* a request finished at time t on rank R: metrics, release its capacity; the
   closed loop issues the next request at that instant. The request itself is
   freed by the caller once it left the running set. */
static int complete(rank_st *R, const dhs_serve_config *c, source *S, sreq *q, int hierarchical, rlist *pending,
                    double t, dhs_serve_result *r, dvec *e2el, dvec *tpot, char *err, size_t err_len)
{
    const dhs_serve_cost *cost = &c->cost;
    q->done = 1;
    if (q->slot >= 0) {
        R->free_slot[R->n_free++] = q->slot;
        q->slot = -1;
    }
    if (dvec_push(e2el, (t - q->arrival) * 1e3)) goto nomem;
    if (tpot && q->out > 1 && dvec_push(tpot, (q->t_last - q->t_first) * 1e3 / (double)(q->out - 1))) goto nomem;
    r->total_input_tokens += q->prompt;
    r->total_output_tokens += q->out;
    if (hierarchical) {
        dhs_request_close(R->H.ctx, q->h); /* cannot fail for an open request outside a round */
        R->H.idx_used -= (uint64_t)((double)(q->prompt + q->out) * cost->layers * cost->idx_bytes);
    } else {
        R->res_used -= (double)(q->prompt + q->out) * cost->layers * (double)(cost->row_bytes + cost->idx_bytes);
    }
    dhs_serve_pred pr = dhs_serve_predict(c, q->prompt, q->out); /* what placement added */
    R->live--;
    R->pred_us -= pr.step_us;
    R->pred_bytes -= pr.bytes;
    source_drop_sel(S, q);
    if (S->w->arrival == DHS_ARRIVAL_CLOSED && S->made < S->N) {
        sreq *nq = source_make(S, t, err, err_len);
        if (!nq) return -1;
        rl_push(pending, nq);
    }
    return 0;
nomem:
    dhs_errf(err, err_len, "out of memory");
    return -1;
}

/* spec_auto: K of each request of R's batch from the controller, with the cost model's terms
   (servesim.h) as its fixed and per-query costs; the host copies are the controller's miss model
   (dhs_spec_auto_choose_round: host rows of a first and of a further query fitted to the rank's recent
   steps, each step's copy time fed back after it) */
static int choose_widths(rank_st *R, const dhs_serve_config *c, int hierarchical, char *err, size_t err_len)
{
    const dhs_serve_cost *cost = &c->cost;
    double fixed = cost->base_us + cost->layers * (cost->attn_layer_us + cost->idx_layer_us);
    if (hierarchical) fixed += cost->layers * (cost->resolver_us + cost->gather_us);
    for (int32_t i = 0; i < R->nb; i++) {
        const sreq *q = R->bat[i];
        int64_t left = q->out - q->tokens;
        R->slots[i] = q->slot;
        R->cap[i] = left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int32_t)left;
        double u = cost->token_us + cost->layers * (cost->attn_us + cost->idx_us_per_ktok * (double)q->n / 1000.0);
        if (hierarchical) u += cost->layers * cost->resolver_ns_per_entry * (double)c->k / 1000.0;
        fixed += u; /* its first query */
        R->qus[i] = u > 1e-9 ? u : 1e-9;
    }
    /* the staging holds spec_width * k rows per request (DESIGN §6): no width up to it overflows */
    dhs_status s = dhs_spec_auto_choose_round(R->sa, R->nb, R->slots, R->cap, R->qus, fixed, cost->draft_us, -1.0,
                                              R->Kv, NULL);
    if (s != DHS_OK) {
        dhs_errf(err, err_len, "dhs_spec_auto_choose: %s", dhs_status_str(s));
        return -1;
    }
    return 0;
}

/* the rank an arriving request goes to */
static int32_t place(const dhs_serve_config *c, const rank_st *rk, int32_t nr, const dhs_serve_pred *pr, uint64_t arrival_no, double budget)
{
    if (nr == 1) return 0;
    int32_t best = 0;
    switch (c->placement) {
    case DHS_PLACE_LEAST_SESSIONS:
        for (int32_t i = 1; i < nr; i++)
            if (rk[i].live < rk[best].live) best = i;
        return best;
    case DHS_PLACE_MISS_AWARE: {
        /* the least predicted step time among the ranks that take the request (bytes and slots);
           none does: the least predicted step time overall */
        int any_fit = 0;
        for (int32_t i = 0; i < nr; i++)
            any_fit |= rk[i].pred_bytes + pr->bytes <= budget && rk[i].live < c->max_batch;
        best = -1;
        for (int32_t i = 0; i < nr; i++) {
            int fit = rk[i].pred_bytes + pr->bytes <= budget && rk[i].live < c->max_batch;
            if (any_fit && !fit) continue;
            if (best < 0 || rk[i].pred_us < rk[best].pred_us ||
                (rk[i].pred_us == rk[best].pred_us && rk[i].pred_bytes < rk[best].pred_bytes))
                best = i;
        }
        return best;
    }
    default: return (int32_t)(arrival_no % (uint64_t)nr);
    }
}

/* The trace pre-pass: requests in the trace, and the mean and largest
   clamped final length of the first `limit` of them (0 = all). */
static int trace_prepass(const dhs_serve_config *c, const char *path, int32_t limit, int32_t *n_out, double *mean, int64_t *max_len,
                         char *err, size_t err_len)
{
    dhs_serve_trace *t;
    if (dhs_serve_trace_open(path, &t, err, err_len)) return -1;
    dhs_serve_req q;
    int32_t n = 0;
    double sum = 0;
    int rc;
    while ((rc = dhs_serve_trace_next(t, &q, err, err_len)) == 1) {
        if (limit <= 0 || n < limit) {
            int64_t p = q.input_len < c->max_context ? q.input_len : c->max_context;
            int64_t o = q.output_len < c->max_output ? q.output_len : c->max_output;
            if (p < 1) p = 1;
            if (o < 1) o = 1;
            sum += (double)(p + o);
            if (p + o > *max_len) *max_len = p + o;
        }
        if (n == INT32_MAX) { dhs_errf(err, err_len, "%s: too many requests", path); rc = -1; break; }
        n++;
    }
    dhs_serve_trace_close(t);
    if (rc < 0) return -1;
    if (n == 0) { dhs_errf(err, err_len, "%s: no requests", path); return -1; }
    int32_t used = limit > 0 && limit < n ? limit : n;
    *n_out = n;
    *mean = sum / used;
    return 0;
}

/* ------------------------------------------------------------- the run */
int dhs_serve_run(const dhs_serve_config *c, const dhs_serve_workload *w, dhs_serve_result *r, char *err, size_t err_len)
{
    memset(r, 0, sizeof *r);
    double w0 = dhs_wall_s();
    const dhs_serve_cost *cost = &c->cost;
    if (c->k < 1 || c->max_batch < 1 || c->hot_rows < c->page_rows || c->hot_rows % c->page_rows || cost->layers < 1 ||
        c->kv_gib <= 0 || !(c->accept_p >= 0 && c->accept_p <= 1) || !(c->accept_spread >= 0 && c->accept_spread <= 1) ||
        c->n_sched < 1) {
        dhs_errf(err, err_len, "invalid configuration");
        return -1;
    }
    if (c->dp_ranks < 1 || c->dp_ranks > DHS_SERVE_MAX_RANKS || (int)c->placement < 0 || c->placement >= DHS_PLACE_N_) {
        dhs_errf(err, err_len, "invalid data-parallel configuration (ranks 1..%d, placement 0..%d)", DHS_SERVE_MAX_RANKS, DHS_PLACE_N_ - 1);
        return -1;
    }
    int32_t N = w->n_requests;
    double trace_mean = 0;
    int64_t max_len = 0; /* the longest request: prompt + output, clamped */
    if (w->arrival == DHS_ARRIVAL_TRACE) {
        int32_t n_trace = 0;
        if (!w->trace_path) { dhs_errf(err, err_len, "no request trace"); return -1; }
        if (trace_prepass(c, w->trace_path, N, &n_trace, &trace_mean, &max_len, err, err_len)) return -1;
        if (N <= 0 || N > n_trace) N = n_trace;
    } else {
        int64_t p = w->context < c->max_context ? w->context : c->max_context, o = w->output_len < c->max_output ? w->output_len : c->max_output;
        max_len = (p > 1 ? p : 1) + (o > 1 ? o : 1);
    }
    if (N < 1) { dhs_errf(err, err_len, "no requests"); return -1; }
    if (w->arrival == DHS_ARRIVAL_POISSON && !(w->rate > 0)) { dhs_errf(err, err_len, "Poisson arrivals need a rate > 0"); return -1; }
    if (w->arrival == DHS_ARRIVAL_CLOSED && w->concurrency < 1) { dhs_errf(err, err_len, "closed loop needs a concurrency >= 1"); return -1; }
    int hierarchical = c->mode != DHS_SERVE_RESIDENT;
    int32_t KM = spec_kmax(c), NR = c->dp_ranks;
    int rc = -1;
    rank_st *rk = calloc((size_t)NR, sizeof *rk);
    dvec ttft = {0}, tpot = {0}, itl = {0}, e2el = {0}, stepv = {0};
    dhs_selgen *G = NULL;
    int32_t *sel = NULL, *loc = NULL;
    dhs_req *hs = NULL;
    dhs_resolve_item *items = NULL;
    rlist pending = {0};
    source S;
    memset(&S, 0, sizeof S);
    S.c = c;
    S.w = w;
    S.N = N;
    /* lengths and arrival times from their own streams */
    S.arr_rng = dhs_mix64(w->seed ^ 0xa076bc5d1f3e2a49ull);
    S.len_rng = dhs_mix64(w->seed ^ 0x3c6ef372fe94f82bull);
    S.cmin = w->context_min > 0 ? w->context_min : w->context / 2;
    S.omin = w->output_min > 0 ? w->output_min : (w->output_len + 1) / 2;
    if (!rk) goto nomem;
    for (int32_t ri = 0; ri < NR; ri++) {
        rank_st *R = &rk[ri];
        R->run = malloc(sizeof(sreq *) * (size_t)c->max_batch);
        R->bat = malloc(sizeof(sreq *) * (size_t)c->max_batch);
        R->newly = malloc(sizeof(sreq *) * (size_t)c->max_batch);
        R->Kv = malloc(sizeof(int32_t) * (size_t)c->max_batch);
        R->acc = malloc(sizeof(int32_t) * (size_t)c->max_batch);
        if (!R->run || !R->bat || !R->newly || !R->Kv || !R->acc) goto nomem;
        if (c->spec && c->spec_auto) {
            dhs_spec_auto_cfg sc = dhs_spec_auto_cfg_default(c->max_batch);
            sc.spec_max = KM;
            dhs_status s = dhs_spec_auto_create(&sc, &R->sa);
            if (s != DHS_OK) { dhs_errf(err, err_len, "dhs_spec_auto_create: %s", dhs_status_str(s)); goto out; }
            R->free_slot = malloc(sizeof(int32_t) * (size_t)c->max_batch);
            R->slots = malloc(sizeof(int32_t) * (size_t)c->max_batch);
            R->cap = malloc(sizeof(int32_t) * (size_t)c->max_batch);
            R->qus = malloc(sizeof(double) * (size_t)c->max_batch);
            if (!R->free_slot || !R->slots || !R->cap || !R->qus) goto nomem;
            for (int32_t i = 0; i < c->max_batch; i++) R->free_slot[i] = c->max_batch - 1 - i;
            R->n_free = c->max_batch;
        }
    }
    if (w->arrival == DHS_ARRIVAL_TRACE && dhs_serve_trace_open(w->trace_path, &S.tr, err, err_len)) goto out;
    if (hierarchical) {
        for (int32_t ri = 0; ri < NR; ri++)
            if (hier_init(&rk[ri].H, c, w, trace_mean, max_len, r, err, err_len)) goto out;
        dhs_tracegen_params gp = dhs_tracegen_default();
        gp.k = c->k;
        gp.spec = KM;
        gp.loc = c->loc;
        gp.lm = c->lm;
        char gerr[256];
        G = dhs_selgen_create(&gp, gerr, sizeof gerr);
        if (!G) { dhs_errf(err, err_len, "selection generator: %s", gerr); goto out; }
        S.sel_bytes = dhs_selreq_bytes(G);
        /* one rank resolves at a time: the selection buffers are shared */
        size_t nsel = (size_t)c->max_batch * (size_t)KM * (size_t)c->k;
        sel = malloc(sizeof(int32_t) * nsel);
        loc = malloc(sizeof(int32_t) * nsel);
        if (!sel || !loc) goto nomem;
    }
    hs = malloc(sizeof(dhs_req) * (size_t)c->max_batch);
    items = malloc(sizeof(dhs_resolve_item) * (size_t)c->max_batch);
    if (!hs || !items) goto nomem;
    /* the first arrivals: the closed loop's initial requests at t = 0, else
       one lookahead request (the next is made when it arrives) */
    if (w->arrival == DHS_ARRIVAL_CLOSED) {
        for (int32_t i = 0; i < w->concurrency && S.made < N; i++) {
            sreq *q = source_make(&S, 0, err, err_len);
            if (!q) goto out;
            rl_push(&pending, q);
        }
    } else {
        sreq *q = source_make(&S, 0, err, err_len);
        if (!q) goto out;
        rl_push(&pending, q);
    }
    double M = c->kv_gib * 1073741824.0;
    int32_t completed = 0;
    double now = 0, batch_sum = 0, step_sum = 0, acc_sum = 0, miss_max_sum = 0, miss_mean_sum = 0, rank_mean_sum = 0;
    uint64_t acc_n = 0, arrivals = 0;
    if (hierarchical)
        for (int32_t ri = 0; ri < NR; ri++) dhs_get_stats(rk[ri].H.ctx, &rk[ri].st0);
    /* pending: made, not yet arrived (arrival order). Each arrival is placed
       on a rank (dhs_serve_placement) and joins that rank's queue: arrived,
       waiting for admission; a rank's run[]: its admitted requests (slot and
       memory held); a request decodes once its prefill is done and its KV
       arrived (joined). */
    int remote = c->prefill_remote;
    while (completed < N) {
        while (pending.head && pending.head->arrival <= now) {
            sreq *q = rl_pop(&pending);
            dhs_serve_pred pr = dhs_serve_predict(c, q->prompt, q->out);
            rank_st *R = &rk[place(c, rk, NR, &pr, arrivals++, M)];
            R->live++;
            R->placed++;
            R->pred_us += pr.step_us;
            R->pred_bytes += pr.bytes;
            rl_push(&R->queue, q);
            if (w->arrival != DHS_ARRIVAL_CLOSED && S.made < N) {
                sreq *nq = source_make(&S, 0, err, err_len);
                if (!nq) goto out;
                rl_push(&pending, nq);
            }
        }
        /* admission, head of line, on each rank */
        int32_t n_running = 0, any_new = 0;
        double tp_max = 0;
        for (int32_t ri = 0; ri < NR; ri++) {
            rank_st *R = &rk[ri];
            hier *H = &R->H;
            R->n_new = 0;
            while (R->queue.head && R->n_run < c->max_batch) {
                sreq *q = R->queue.head;
                double pos = (double)(q->prompt + q->out);
                int ok;
                if (!hierarchical) {
                    double need = pos * cost->layers * (double)(cost->row_bytes + cost->idx_bytes);
                    ok = R->res_used + need <= M;
                    if (!ok && R->n_run == 0) {
                        dhs_errf(err, err_len, "request of %lld positions never fits %.1f GiB resident", (long long)(q->prompt + q->out), c->kv_gib);
                        goto out;
                    }
                    if (ok) R->res_used += need;
                } else {
                    uint64_t need = (uint64_t)(pos * cost->layers * cost->idx_bytes);
                    ok = H->idx_used + need <= H->idx_cap;
                    if (ok) {
                        dhs_status s = dhs_request_open(H->ctx, q->prompt + q->out, &q->h);
                        if (s == DHS_WAIT) ok = 0;
                        else if (s != DHS_OK) { dhs_errf(err, err_len, "dhs_request_open: %s", dhs_status_str(s)); goto out; }
                    }
                    if (!ok && R->n_run == 0) {
                        dhs_errf(err, err_len, "request of %lld positions never fits (index keys %.2f of %.2f GiB, or the pool)",
                            (long long)(q->prompt + q->out), (double)need / 1073741824.0, (double)H->idx_cap / 1073741824.0);
                        goto out;
                    }
                    if (ok) H->idx_used += need;
                }
                if (!ok) { r->waits++; break; }
                rl_pop(&R->queue);
                q->admitted = 1;
                q->ready = now + cost->prefill_us_per_token * (double)q->prompt * 1e-6; /* remote prefill */
                R->run[R->n_run++] = q;
                R->newly[R->n_new++] = q;
            }
            n_running += R->n_run;
            if (R->n_run > R->max_running) R->max_running = R->n_run;
            if (!remote && R->n_new) {
                double tp = 0;
                for (int32_t i = 0; i < R->n_new; i++) tp += cost->prefill_us_per_token * (double)R->newly[i]->prompt;
                if (tp > tp_max) tp_max = tp;
                any_new = 1;
            }
        }
        if (n_running > r->max_running) r->max_running = n_running;
        if (any_new) {
            /* local prefill: the admitted prompts run one after another on their rank and stall decoding
               (of the group: the ranks step together) */
            now += tp_max * 1e-6;
            for (int32_t ri = 0; ri < NR; ri++)
                for (int32_t i = 0; i < rk[ri].n_new; i++) rk[ri].newly[i]->ready = now;
        }
        /* join: prefill done, KV imported, first token out */
        for (int32_t ri = 0; ri < NR; ri++) {
            rank_st *R = &rk[ri];
            for (int32_t i = 0; i < R->n_run; i++) {
                sreq *q = R->run[i];
                if (q->joined || q->ready > now) continue;
                if (hierarchical) {
                    dhs_status s = dhs_request_import(R->H.ctx, q->h, q->prompt, NULL,
                                                      c->mode == DHS_SERVE_ADAPTIVE ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST);
                    if (s != DHS_OK) { dhs_errf(err, err_len, "dhs_request_import: %s", dhs_status_str(s)); goto out; }
                    q->sel = dhs_selreq_start(G, q->sel_seed, q->prompt);
                    if (!q->sel) goto nomem;
                    S.bytes += S.sel_bytes;
                    if (S.bytes > S.peak_bytes) S.peak_bytes = S.bytes;
                }
                q->joined = 1;
                if (R->sa) { /* a slot is free: requests in run[] are at most max_batch */
                    q->slot = R->free_slot[--R->n_free];
                    dhs_spec_auto_reset(R->sa, q->slot);
                }
                q->n = q->prompt;
                q->tokens = 1;
                q->t_first = q->t_last = q->ready;
                if (dvec_push(&ttft, (q->ready - q->arrival) * 1e3)) goto nomem;
            }
        }
        /* the decode batch: joined requests still generating; one-token requests complete */
        int32_t nb_all = 0;
        for (int32_t ri = 0; ri < NR; ri++) {
            rank_st *R = &rk[ri];
            int32_t j = 0;
            R->nb = 0;
            for (int32_t i = 0; i < R->n_run; i++) {
                sreq *q = R->run[i];
                if (q->joined && q->tokens >= q->out) {
                    if (complete(R, c, &S, q, hierarchical, &pending, q->t_last, r, &e2el, NULL, err, err_len)) {
                        for (int32_t i2 = i; i2 < R->n_run; i2++) R->run[j++] = R->run[i2]; /* each request once, for the cleanup */
                        R->n_run = j;
                        goto out;
                    }
                    completed++;
                    source_free(&S, q);
                    continue;
                }
                R->run[j++] = q;
                if (q->joined) R->bat[R->nb++] = q;
            }
            R->n_run = j;
            nb_all += R->nb;
        }
        if (nb_all == 0) {
            /* idle: jump to the next arrival or prefill completion */
            double t_next = INFINITY;
            if (pending.head) t_next = pending.head->arrival;
            for (int32_t ri = 0; ri < NR; ri++)
                for (int32_t i = 0; i < rk[ri].n_run; i++)
                    if (rk[ri].run[i]->ready < t_next) t_next = rk[ri].run[i]->ready;
            if (t_next == INFINITY) {
                if (completed < N) { dhs_errf(err, err_len, "simulation stalled with %d of %d requests done", completed, N); goto out; }
                break;
            }
            if (t_next > now) now = t_next;
            continue;
        }
        /* each rank's step; the group's step takes the longest */
        double dt = 0, rank_dt_sum = 0;
        uint64_t dH_max = 0, dH_sum = 0;
        for (int32_t ri = 0; ri < NR; ri++) {
            rank_st *R = &rk[ri];
            int32_t nb = R->nb, *Kv = R->Kv, *acc = R->acc;
            sreq **bat = R->bat;
            R->dt = 0;
            R->dH = 0;
            if (nb == 0) continue;
            int32_t Kb = c->spec ? dhs_serve_block_width(c, nb) : 1;
            double attn = 0;
            uint64_t dE = 0, dH = 0;
            int32_t kmax_step = 1;
            if (R->sa && choose_widths(R, c, hierarchical, err, err_len)) goto out;
            for (int32_t i = 0; i < nb; i++) {
                sreq *q = bat[i];
                int64_t left = q->out - q->tokens;
                if (!R->sa) Kv[i] = (int32_t)(Kb < left ? Kb : left);
                if (Kv[i] < 1) Kv[i] = 1;
                if (Kv[i] > kmax_step) kmax_step = Kv[i];
                attn += Kv[i] * (cost->attn_us + cost->idx_us_per_ktok * (double)q->n / 1000.0);
                int32_t a = 0;
                while (a < Kv[i] - 1 && dhs_rng_unit(&q->rng_acc) < q->accept) a++;
                acc[i] = a;
                if (R->sa) dhs_spec_auto_observe(R->sa, q->slot, Kv[i], a); /* valid by construction */
            }
            if (hierarchical) {
                dhs_ctx *ctx = R->H.ctx;
                for (int32_t i = 0; i < nb; i++) hs[i] = bat[i]->h;
                dhs_status s = dhs_round_begin(ctx, nb, hs, Kv);
                int64_t off = 0;
                for (int32_t i = 0; i < nb && s == DHS_OK; i++) {
                    sreq *q = bat[i];
                    s = dhs_write_rows(ctx, q->h, 0, q->n, Kv[i], NULL);
                    int32_t *qs = sel + off;
                    if (dhs_selgen_round(G, q->sel, q->n, Kv[i], qs)) goto nomem;
                    items[i] = (dhs_resolve_item){q->h, Kv[i], qs, loc + off};
                    off += (int64_t)Kv[i] * c->k;
                }
                dhs_stats a0, a1;
                dhs_get_stats(ctx, &a0);
                if (s == DHS_OK) s = dhs_resolve(ctx, 0, c->k, nb, items);
                if (s == DHS_OK) s = dhs_group_done(ctx, 0);
                if (s == DHS_OK) s = dhs_round_end(ctx, acc);
                if (s != DHS_OK) { dhs_errf(err, err_len, "decode step: %s", dhs_status_str(s)); goto out; }
                dhs_get_stats(ctx, &a1);
                dE = a1.entries - a0.entries;
                dH = a1.host_rows_copied - a0.host_rows_copied;
            }
            double qtok = 0;
            for (int32_t i = 0; i < nb; i++) qtok += Kv[i];
            double d = cost->base_us + cost->token_us * qtok + cost->layers * (cost->attn_layer_us + cost->idx_layer_us + attn);
            if (hierarchical) {
                d += cost->layers * (cost->resolver_us + cost->resolver_ns_per_entry * (double)dE / 1000.0);
                if (dH) d += cost->layers * (cost->gather_us + (double)dH * cost->row_bytes / (cost->pcie_gbps * 1000.0));
            }
            if (c->spec) d += cost->draft_us * (kmax_step - 1);
            if (R->sa && hierarchical) { /* the step's host rows (one layer) and their copy time, all layers */
                int32_t Q = 0;
                for (int32_t i = 0; i < nb; i++) Q += Kv[i];
                double copy_us = cost->layers * (double)dH * cost->row_bytes / (cost->pcie_gbps * 1000.0);
                dhs_spec_auto_observe_round(R->sa, nb, Q, (double)dH, copy_us); /* valid by construction */
            }
            R->dt = d;
            R->dH = dH;
            if (d > dt) dt = d;
        }
        for (int32_t ri = 0; ri < NR; ri++) {
            rank_st *R = &rk[ri];
            R->host_rows += R->dH;
            R->step_ms_sum += R->dt * 1e-3;
            rank_dt_sum += R->dt;
            dH_sum += R->dH;
            if (R->dH > dH_max) dH_max = R->dH;
        }
        miss_max_sum += (double)dH_max;
        miss_mean_sum += (double)dH_sum / NR;
        rank_mean_sum += rank_dt_sum / NR * 1e-3;
        now += dt * 1e-6;
        r->steps++;
        batch_sum += nb_all;
        step_sum += dt * 1e-3;
        if (dvec_push(&stepv, dt * 1e-3)) goto nomem;
        if (nb_all < DHS_SERVE_BATCH_HIST) {
            r->step_ms_sum[nb_all] += dt * 1e-3;
            r->step_n[nb_all]++;
        }
        /* tokens of the step; completions */
        for (int32_t ri = 0; ri < NR; ri++) {
            rank_st *R = &rk[ri];
            for (int32_t i = 0; i < R->nb; i++) {
                sreq *q = R->bat[i];
                q->tokens += R->acc[i] + 1;
                q->n += R->acc[i] + 1;
                acc_sum += R->acc[i] + 1;
                acc_n++;
                if (dvec_push(&itl, (now - q->t_last) * 1e3)) goto nomem;
                q->t_last = now;
                if (q->tokens < q->out) continue;
                if (complete(R, c, &S, q, hierarchical, &pending, now, r, &e2el, &tpot, err, err_len)) goto out;
                completed++;
            }
            int32_t j = 0;
            for (int32_t i = 0; i < R->n_run; i++) {
                if (R->run[i]->done) source_free(&S, R->run[i]);
                else R->run[j++] = R->run[i];
            }
            R->n_run = j;
        }
        if (c->progress && (r->steps & 1023) == 0) c->progress(c->progress_user, completed, N, now);
    }
    r->completed = completed;
    r->duration = now;
    r->request_throughput = now > 0 ? completed / now : 0;
    r->output_throughput = now > 0 ? (double)r->total_output_tokens / now : 0;
    r->total_token_throughput = now > 0 ? (double)(r->total_input_tokens + r->total_output_tokens) / now : 0;
    summarize(ttft.v, ttft.n, &r->mean_ttft_ms, &r->median_ttft_ms, &r->p99_ttft_ms);
    summarize(tpot.v, tpot.n, &r->mean_tpot_ms, &r->median_tpot_ms, &r->p99_tpot_ms);
    summarize(itl.v, itl.n, &r->mean_itl_ms, &r->median_itl_ms, &r->p99_itl_ms);
    summarize(e2el.v, e2el.n, &r->mean_e2el_ms, &r->median_e2el_ms, &r->p99_e2el_ms);
    {
        double mean_unused;
        summarize(stepv.v, stepv.n, &mean_unused, &r->p50_step_ms, &r->p99_step_ms);
    }
    r->mean_batch = r->steps ? batch_sum / (double)r->steps : 0;
    r->mean_step_ms = r->steps ? step_sum / (double)r->steps : 0;
    r->accept_length = acc_n ? acc_sum / (double)acc_n : 0;
    r->dp_ranks = NR;
    for (int32_t ri = 0; ri < NR; ri++) {
        rank_st *R = &rk[ri];
        r->rank_sessions[ri] = R->placed;
        r->rank_max_running[ri] = R->max_running;
        r->rank_misses_per_step[ri] = r->steps ? (double)R->host_rows / (double)r->steps : 0;
        r->rank_mean_step_ms[ri] = r->steps ? R->step_ms_sum / (double)r->steps : 0;
    }
    r->miss_max_per_step = r->steps ? miss_max_sum / (double)r->steps : 0;
    r->miss_mean_per_step = r->steps ? miss_mean_sum / (double)r->steps : 0;
    r->wait_share = step_sum > 0 ? 1 - rank_mean_sum / step_sum : 0;
    if (hierarchical) {
        for (int32_t ri = 0; ri < NR; ri++) {
            dhs_stats s1, *s0 = &rk[ri].st0;
            dhs_get_stats(rk[ri].H.ctx, &s1);
            r->entries += s1.entries - s0->entries;
            r->host_rows += s1.host_rows_copied - s0->host_rows_copied;
            r->census_direct += s1.census_direct - s0->census_direct;
            r->census_hot += s1.census_hot - s0->census_hot;
            r->census_host += s1.census_host - s0->census_host;
            r->reclaims += s1.reclaims - s0->reclaims;
            r->repopulated_pages += s1.repopulated_pages - s0->repopulated_pages;
        }
        r->host_rows_per_token = r->total_output_tokens ? (double)r->host_rows / (double)r->total_output_tokens : 0;
    }
    rc = 0;
    goto out;
nomem:
    dhs_errf(err, err_len, "out of memory");
out:
    r->peak_live_requests = S.peak_live;
    r->peak_request_bytes = S.peak_bytes;
    if (rk) {
        for (int32_t ri = 0; ri < NR; ri++) {
            rank_st *R = &rk[ri];
            for (int32_t i = 0; R->run && i < R->n_run; i++) source_free(&S, R->run[i]);
            for (sreq *q; (q = rl_pop(&R->queue));) source_free(&S, q);
            if (hierarchical && R->H.ctx) hier_free(&R->H);
            free(R->run);
            free(R->bat);
            free(R->newly);
            free(R->Kv);
            free(R->acc);
            dhs_spec_auto_destroy(R->sa);
            free(R->free_slot);
            free(R->slots);
            free(R->cap);
            free(R->qus);
        }
    }
    for (sreq *q; (q = rl_pop(&pending));) source_free(&S, q);
    free(rk);
    dhs_serve_trace_close(S.tr);
    dhs_selgen_free(G);
    free(ttft.v);
    free(tpot.v);
    free(itl.v);
    free(e2el.v);
    free(stepv.v);
    free(sel);
    free(loc);
    free(hs);
    free(items);
    r->wall_s = dhs_wall_s() - w0;
    return rc;
}

/* ------------------------------------------------------------- request traces */
/* splits a CSV line in place (quotes kept simple: no embedded quotes) */
#define TRACE_LEN_MAX ((int64_t)1 << 53)
/* a Mooncake length: whole, not negative (reported as such below) and at most 2^53 */
static int trace_len_ok(double v) { return isfinite(v) && v == floor(v) && v <= (double)TRACE_LEN_MAX; }

static int csv_split(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        if (*p == '"') {
            f[n++] = ++p;
            while (*p && *p != '"') p++;
            if (*p) *p++ = 0;
            while (*p && *p != ',') p++;
        } else {
            f[n++] = p;
            while (*p && *p != ',') p++;
        }
        if (!*p) break;
        *p++ = 0;
    }
    return n;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = 0;
}

struct dhs_serve_trace {
    FILE *f;
    char *path;
    char *line;
    size_t lcap;
    long lineno;
    int csv, col_t, col_in, col_out;
    int started;       /* a request was returned: t0 is set */
    double t0, t_prev; /* first and previous request's timestamp, s */
};

int dhs_serve_trace_open(const char *path, dhs_serve_trace **out, char *err, size_t err_len)
{
    *out = NULL;
    dhs_serve_trace *t = calloc(1, sizeof *t);
    if (!t) { dhs_errf(err, err_len, "out of memory"); return -1; }
    t->lcap = 1 << 16;
    t->line = malloc(t->lcap);
    t->path = malloc(strlen(path) + 1);
    if (!t->line || !t->path) {
        dhs_errf(err, err_len, "out of memory");
        dhs_serve_trace_close(t);
        return -1;
    }
    strcpy(t->path, path);
    t->csv = t->col_t = t->col_in = t->col_out = -1;
    t->f = fopen(path, "r");
    if (!t->f) {
        dhs_errf(err, err_len, "cannot open %s", path);
        dhs_serve_trace_close(t);
        return -1;
    }
    *out = t;
    return 0;
}

void dhs_serve_trace_close(dhs_serve_trace *t)
{
    if (!t) return;
    if (t->f) fclose(t->f);
    free(t->line);
    free(t->path);
    free(t);
}

int dhs_serve_trace_next(dhs_serve_trace *t, dhs_serve_req *out, char *err, size_t err_len)
{
    const char *path = t->path;
    while (fgets(t->line, (int)t->lcap, t->f)) {
        t->lineno++;
        size_t len = strlen(t->line);
        while (len == t->lcap - 1 && t->line[len - 1] != '\n') { /* a long line (Mooncake hash_ids) */
            char *nl = realloc(t->line, t->lcap * 2);
            if (!nl) { dhs_errf(err, err_len, "out of memory"); return -1; }
            t->line = nl;
            if (!fgets(t->line + len, (int)(t->lcap * 2 - len), t->f)) break;
            t->lcap *= 2;
            len = strlen(t->line);
        }
        char *line = t->line;
        chomp(line);
        if (!line[0]) continue;
        if (t->csv < 0) {
            t->csv = line[0] != '{';
            if (t->csv) {
                char *fld[64];
                int nf = csv_split(line, fld, 64);
                for (int i = 0; i < nf; i++) {
                    if (!strcmp(fld[i], "Timestamp")) t->col_t = i;
                    else if (!strcmp(fld[i], "Request tokens")) t->col_in = i;
                    else if (!strcmp(fld[i], "Response tokens")) t->col_out = i;
                }
                if (t->col_t < 0 || t->col_in < 0 || t->col_out < 0) {
                    dhs_errf(err, err_len, "%s: neither Mooncake JSONL nor BurstGPT CSV (header needs Timestamp, Request tokens, Response tokens)", path);
                    return -1;
                }
                continue;
            }
        }
        dhs_serve_req q;
        if (t->csv) {
            char *fld[64];
            int nf = csv_split(line, fld, 64);
            char *e1, *e2, *e3;
            if (nf <= t->col_t || nf <= t->col_in || nf <= t->col_out) { dhs_errf(err, err_len, "%s:%ld: too few fields", path, t->lineno); return -1; }
            q.t_s = strtod(fld[t->col_t], &e1);
            q.input_len = strtoll(fld[t->col_in], &e2, 10);
            q.output_len = strtoll(fld[t->col_out], &e3, 10);
            /* each field a whole number, nothing after it ("1000abc" is not 1000), lengths below 2^53 */
            static const char *const names[3] = {"Timestamp", "Request tokens", "Response tokens"};
            const int col[3] = {t->col_t, t->col_in, t->col_out};
            const int bad = e1 == fld[col[0]] || *e1 || !isfinite(q.t_s) ? 0
                            : e2 == fld[col[1]] || *e2 || q.input_len > TRACE_LEN_MAX ? 1
                            : e3 == fld[col[2]] || *e3 || q.output_len > TRACE_LEN_MAX ? 2 : -1;
            if (bad >= 0) {
                dhs_errf(err, err_len, "%s:%ld: %s '%s' is not a %s", path, t->lineno, names[bad], fld[col[bad]],
                         bad ? "whole number of tokens (at most 2^53)" : "finite number");
                return -1;
            }
        } else {
            cJSON *j = cJSON_Parse(line);
            const cJSON *ts = j ? cJSON_GetObjectItemCaseSensitive(j, "timestamp") : NULL;
            const cJSON *in = j ? cJSON_GetObjectItemCaseSensitive(j, "input_length") : NULL;
            const cJSON *ou = j ? cJSON_GetObjectItemCaseSensitive(j, "output_length") : NULL;
            if (!cJSON_IsNumber(ts) || !cJSON_IsNumber(in) || !cJSON_IsNumber(ou)) {
                cJSON_Delete(j);
                dhs_errf(err, err_len, "%s:%ld: a Mooncake line needs numeric timestamp, input_length, output_length", path, t->lineno);
                return -1;
            }
            /* lengths converted only when whole and in range (a cast of 1e300 is undefined) */
            const cJSON *bad = !isfinite(ts->valuedouble) ? ts : !trace_len_ok(in->valuedouble) ? in
                               : !trace_len_ok(ou->valuedouble) ? ou : NULL;
            if (bad) {
                dhs_errf(err, err_len, "%s:%ld: %s %.15g is not a %s", path, t->lineno, bad->string, bad->valuedouble,
                         bad == ts ? "finite number" : "whole number of tokens (at most 2^53)");
                cJSON_Delete(j);
                return -1;
            }
            q.t_s = ts->valuedouble / 1000.0; /* milliseconds */
            q.input_len = (int64_t)in->valuedouble;
            q.output_len = (int64_t)ou->valuedouble;
            cJSON_Delete(j);
        }
        if (q.t_s < 0 || q.input_len < 0 || q.output_len < 0) {
            dhs_errf(err, err_len, "%s:%ld: negative %s", path, t->lineno,
                     q.t_s < 0 ? "timestamp" : q.input_len < 0 ? "input length" : "output length");
            return -1;
        }
        if (q.input_len == 0 || q.output_len == 0) continue; /* failed requests (BurstGPT: 0 response tokens) */
        if (!t->started) {
            t->started = 1;
            t->t0 = t->t_prev = q.t_s;
        }
        if (q.t_s < t->t_prev) {
            dhs_errf(err, err_len, "%s:%ld: timestamp %.17g below the previous request's %.17g (a request trace is read in arrival order)",
                     path, t->lineno, q.t_s, t->t_prev);
            return -1;
        }
        t->t_prev = q.t_s;
        q.t_s -= t->t0;
        *out = q;
        return 1;
    }
    if (ferror(t->f)) { dhs_errf(err, err_len, "%s: read error", path); return -1; }
    return 0;
}

int dhs_serve_trace_count(const char *path, int32_t *n_out, char *err, size_t err_len)
{
    *n_out = 0;
    dhs_serve_trace *t;
    if (dhs_serve_trace_open(path, &t, err, err_len)) return -1;
    dhs_serve_req q;
    int64_t n = 0;
    int rc;
    while ((rc = dhs_serve_trace_next(t, &q, err, err_len)) == 1) n++;
    dhs_serve_trace_close(t);
    if (rc < 0) return -1;
    if (n == 0) { dhs_errf(err, err_len, "%s: no requests", path); return -1; }
    if (n > INT32_MAX) { dhs_errf(err, err_len, "%s: too many requests", path); return -1; }
    *n_out = (int32_t)n;
    return 0;
}

int dhs_serve_load_trace(const char *path, dhs_serve_req **out, int32_t *n_out, char *err, size_t err_len)
{
    *out = NULL;
    *n_out = 0;
    dhs_serve_trace *t;
    if (dhs_serve_trace_open(path, &t, err, err_len)) return -1;
    size_t cap = 1024, n = 0;
    dhs_serve_req *v = malloc(sizeof *v * cap), q;
    int rc = -1, r;
    if (!v) { dhs_errf(err, err_len, "out of memory"); goto done; }
    while ((r = dhs_serve_trace_next(t, &q, err, err_len)) == 1) {
        if (n == cap) {
            cap *= 2;
            dhs_serve_req *nv = realloc(v, sizeof *v * cap);
            if (!nv) { dhs_errf(err, err_len, "out of memory"); goto done; }
            v = nv;
        }
        if (n == INT32_MAX) { dhs_errf(err, err_len, "%s: too many requests", path); goto done; }
        v[n++] = q;
    }
    if (r < 0) goto done;
    if (n == 0) { dhs_errf(err, err_len, "%s: no requests", path); goto done; }
    *out = v;
    *n_out = (int32_t)n;
    v = NULL;
    rc = 0;
done:
    free(v);
    dhs_serve_trace_close(t);
    return rc;
}

int dhs_serve_equal_batch(const dhs_serve_result *const *runs, const dhs_serve_mode *modes, const int *spec, int n_runs,
                          uint64_t min_steps, dhs_serve_eqb *out, int max)
{
    double (*sum)[DHS_SERVE_BATCH_HIST] = calloc(DHS_SERVE_MODES_, sizeof(double[DHS_SERVE_BATCH_HIST]));
    uint64_t (*cnt)[DHS_SERVE_BATCH_HIST] = calloc(DHS_SERVE_MODES_, sizeof(uint64_t[DHS_SERVE_BATCH_HIST]));
    int rows = 0;
    if (!sum || !cnt) goto out;
    for (int i = 0; i < n_runs; i++) {
        if (spec[i]) continue;
        for (int b = 0; b < DHS_SERVE_BATCH_HIST; b++) {
            sum[modes[i]][b] += runs[i]->step_ms_sum[b];
            cnt[modes[i]][b] += runs[i]->step_n[b];
        }
    }
    for (int b = 1; b < DHS_SERVE_BATCH_HIST && rows < max; b++) {
        if (cnt[0][b] < min_steps) continue;
        int any = 0;
        for (int m = 1; m < DHS_SERVE_MODES_; m++) any |= cnt[m][b] >= min_steps;
        if (!any) continue;
        dhs_serve_eqb *e = &out[rows++];
        e->batch = b;
        for (int m = 0; m < DHS_SERVE_MODES_; m++) {
            e->ms[m] = cnt[m][b] >= min_steps ? sum[m][b] / (double)cnt[m][b] : -1.0;
            e->overhead[m] = e->ms[m] >= 0 && e->ms[0] > 0 ? e->ms[m] / e->ms[0] - 1 : 0.0;
        }
    }
out:
    free(sum);
    free(cnt);
    return rows;
}
