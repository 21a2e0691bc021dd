/* sim.c - trace replay through the real core, the OPT oracle, SVG plots.
 * Semantics: sim.h and docs/SIM.md. */
#include "dhs_plan.h"
#include "sim/sim.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/util.h"

#include "core/policy.h"
#include "sim/policy_opt.h"

#define NONE32 UINT32_MAX

const char *dhs_sim_policy_str(int p)
{
    if (p == DHS_SIM_OPT) return "opt";
    return dhs_policy_str((dhs_policy)p);
}

int dhs_sim_policy_parse(const char *s, int *out)
{
    if (s && !strcmp(s, "opt")) { *out = DHS_SIM_OPT; return 0; }
    dhs_policy p;
    if (dhs_policy_parse(s, &p)) return -1;
    *out = (int)p;
    return 0;
}

static int32_t group_m(const dhs_trace_header *h, int32_t g) { return (int32_t)dhs_trace_group_m(h, g); }

/* ------------------------------------------------------------- scan */
void dhs_sim_trace_info_free(dhs_sim_trace_info *info)
{
    if (!info) return;
    free(info->final_positions);
    free(info->prefix);
    free(info->lifecycle);
    info->final_positions = NULL;
    info->prefix = NULL;
    info->lifecycle = NULL;
}

int dhs_sim_scan(const char *path, dhs_sim_trace_info *info, char *err, size_t err_len)
{
    memset(info, 0, sizeof *info);
    double t0 = dhs_wall_s();
    dhs_trace_reader *r;
    if (dhs_trace_reader_open(path, 0, &r, err, err_len) != DHS_TRACE_OK) return -1;
    info->hdr = *dhs_trace_reader_header(r);
    const dhs_trace_header *h = &info->hdr;
    info->n_requests = h->n_requests;
    for (int32_t g = 0; g < h->n_groups; g++)
        if (h->k[g] > info->max_k) info->max_k = h->k[g];
    info->final_positions = calloc((size_t)h->n_requests, sizeof(int64_t));
    info->prefix = calloc((size_t)h->n_requests, sizeof(int64_t));
    int64_t cap_life = 64;
    info->lifecycle = malloc(sizeof(int32_t) * (size_t)cap_life);
    if (!info->final_positions || !info->prefix || !info->lifecycle) {
        dhs_errf(err, err_len, "out of memory");
        goto fail;
    }
    dhs_trace_event ev;
    dhs_trace_status st;
    int32_t live = 0;
    while ((st = dhs_trace_next(r, &ev)) == DHS_TRACE_OK) {
        if (ev.kind == DHS_TRACE_EV_START || ev.kind == DHS_TRACE_EV_END) {
            if (info->n_life == cap_life) {
                cap_life *= 2;
                int32_t *nl = realloc(info->lifecycle, sizeof(int32_t) * (size_t)cap_life);
                if (!nl) { dhs_errf(err, err_len, "out of memory"); goto fail; }
                info->lifecycle = nl;
            }
            if (ev.kind == DHS_TRACE_EV_START) {
                info->lifecycle[info->n_life++] = 1 + (int32_t)ev.req;
                info->prefix[ev.req] = ev.prefix;
                if (ev.prefix > info->final_positions[ev.req]) info->final_positions[ev.req] = ev.prefix;
                if (++live > info->peak_live) info->peak_live = live;
            } else {
                info->lifecycle[info->n_life++] = -(1 + (int32_t)ev.req);
                live--;
            }
            continue;
        }
        info->rounds++;
        for (int32_t i = 0; i < ev.n_items; i++) {
            const dhs_trace_item *it = &ev.items[i];
            int64_t end = it->n_r + it->n_queries;
            if (end > info->final_positions[it->req]) info->final_positions[it->req] = end;
            info->items++;
            info->queries += (uint64_t)it->n_queries;
            info->tokens += (uint64_t)it->accepted + 1;
            for (int32_t g = 0; g < h->n_groups; g++) {
                int64_t n = (int64_t)it->n_queries * h->k[g];
                const int32_t *sel = it->sel[g];
                uint64_t pad = 0;
                for (int64_t e = 0; e < n; e++) pad += sel[e] < 0;
                info->entries += (uint64_t)n;
                info->selected_entries += (uint64_t)n - pad;
            }
        }
    }
    if (st != DHS_TRACE_EOF) {
        dhs_errf(err, err_len, "%s: %s", path, dhs_trace_reader_error(r));
        goto fail;
    }
    for (int32_t q = 0; q < h->n_requests; q++)
        if (info->final_positions[q] > info->max_positions) info->max_positions = info->final_positions[q];
    dhs_trace_reader_close(r);
    info->scan_s = dhs_wall_s() - t0;
    return 0;
fail:
    dhs_trace_reader_close(r);
    dhs_sim_trace_info_free(info);
    return -1;
}

static int64_t request_opt_pages(const dhs_sim_trace_info *info, int32_t req, int32_t p)
{
    const dhs_trace_header *h = &info->hdr;
    int64_t a = 0;
    for (int32_t s = 0; s < h->n_sources; s++) {
        int64_t m = h->sources[s].m;
        a += info->prefix[req] / m / p;
    }
    return a;
}

int64_t dhs_sim_peak_opt_pages(const dhs_sim_trace_info *info, int32_t page_rows)
{
    int64_t cur = 0, peak = 0;
    for (int64_t i = 0; i < info->n_life; i++) {
        int32_t v = info->lifecycle[i];
        int32_t req = (v > 0 ? v : -v) - 1;
        int64_t a = request_opt_pages(info, req, page_rows);
        cur += v > 0 ? a : -a;
        if (cur > peak) peak = cur;
    }
    return peak;
}

/* ------------------------------------------------------------- per-request arrays */
/* Per live request, group and row: `key` (pass 1: the request's last
   reference number of the row; replay: the next-reference number of the
   row's current reference) and `stamp` (round + 1 of the row's last
   reference), side by side so the oracle touches one cache line. */
typedef struct {
    uint32_t key, stamp;
} row_ref;

typedef struct {
    int live;
    dhs_req h;
    row_ref **ref;    /* [G][rows_g] */
    int64_t *rows;    /* [G] */
} rq_state;

static void rq_arrays_free(rq_state *q, int32_t G)
{
    if (q->ref)
        for (int32_t g = 0; g < G; g++) free(q->ref[g]);
    free(q->ref);
    free(q->rows);
    q->ref = NULL;
    q->rows = NULL;
}

static uint64_t rq_arrays_bytes(const rq_state *q, int32_t G)
{
    uint64_t b = 0;
    for (int32_t g = 0; q->rows && g < G; g++) b += sizeof(row_ref) * (uint64_t)q->rows[g];
    return b;
}

static int rq_arrays_alloc(rq_state *q, const dhs_sim_trace_info *info, int32_t req, uint64_t *bytes)
{
    const dhs_trace_header *h = &info->hdr;
    int32_t G = h->n_groups;
    q->ref = calloc((size_t)G, sizeof *q->ref);
    q->rows = calloc((size_t)G, sizeof *q->rows);
    if (!q->ref || !q->rows) return -1;
    for (int32_t g = 0; g < G; g++) {
        int64_t rows = info->final_positions[req] / group_m(h, g) + 2;
        q->rows[g] = rows;
        q->ref[g] = malloc(sizeof(row_ref) * (size_t)rows);
        if (!q->ref[g]) return -1;
        for (int64_t i = 0; i < rows; i++) q->ref[g][i] = (row_ref){NONE32, 0};
        if (bytes) *bytes += sizeof(row_ref) * (uint64_t)rows;
    }
    return 0;
}

/* ------------------------------------------------------------- OPT oracle */
struct dhs_sim_oracle {
    uint32_t *next; /* [nref] number of the next reference of the same (request, group, row), NONE32 = never */
    uint64_t nref, cap;
    uint64_t peak_bytes;
    double build_s;
};

uint64_t dhs_sim_oracle_refs(const dhs_sim_oracle *o) { return o ? o->nref : 0; }
uint64_t dhs_sim_oracle_bytes(const dhs_sim_oracle *o) { return o ? o->peak_bytes : 0; }
double dhs_sim_oracle_build_s(const dhs_sim_oracle *o) { return o ? o->build_s : 0; }

void dhs_sim_oracle_free(dhs_sim_oracle *o)
{
    if (!o) return;
    free(o->next);
    free(o);
}

int dhs_sim_oracle_build(const char *path, const dhs_sim_trace_info *info, dhs_sim_oracle **out, char *err,
                         size_t err_len)
{
    *out = NULL;
    double t0 = dhs_wall_s();
    const dhs_trace_header *h = &info->hdr;
    int32_t G = h->n_groups, N = info->n_requests;
    dhs_sim_oracle *o = calloc(1, sizeof *o);
    rq_state *rq = calloc((size_t)N, sizeof *rq);
    dhs_trace_reader *r = NULL;
    uint64_t live_bytes = 0, peak_live_bytes = 0;
    if (!o || !rq) { dhs_errf(err, err_len, "out of memory"); goto fail; }
    o->cap = info->selected_entries / 2 + 1024;
    o->next = malloc(sizeof(uint32_t) * o->cap);
    if (!o->next) { dhs_errf(err, err_len, "out of memory (OPT oracle)"); goto fail; }
    if (dhs_trace_reader_open(path, DHS_TRACE_READ_NO_ROW_CHECK, &r, err, err_len) != DHS_TRACE_OK) goto fail;
    dhs_trace_event ev;
    dhs_trace_status st;
    while ((st = dhs_trace_next(r, &ev)) == DHS_TRACE_OK) {
        if (ev.kind == DHS_TRACE_EV_START) {
            uint64_t b = 0;
            if (rq_arrays_alloc(&rq[ev.req], info, (int32_t)ev.req, &b)) { dhs_errf(err, err_len, "out of memory"); goto fail; }
            live_bytes += b;
            if (live_bytes > peak_live_bytes) peak_live_bytes = live_bytes;
            continue;
        }
        if (ev.kind == DHS_TRACE_EV_END) {
            for (int32_t g = 0; g < G; g++) live_bytes -= sizeof(row_ref) * (uint64_t)rq[ev.req].rows[g];
            rq_arrays_free(&rq[ev.req], G);
            continue;
        }
        uint32_t stamp = (uint32_t)(ev.round + 1);
        for (int32_t i = 0; i < ev.n_items; i++) {
            const dhs_trace_item *it = &ev.items[i];
            rq_state *q = &rq[it->req];
            for (int32_t g = 0; g < G; g++) {
                const int32_t *sel = it->sel[g];
                int64_t n = (int64_t)it->n_queries * h->k[g];
                row_ref *ref = q->ref[g];
                if (o->nref + (uint64_t)n > o->cap) {
                    uint64_t cap = o->cap * 2 + (uint64_t)n;
                    if (cap >= NONE32) cap = NONE32;
                    if (o->nref + (uint64_t)n > cap) {
                        dhs_errf(err, err_len, "trace too large for the OPT oracle (more than %u references)", NONE32 - 1);
                        goto fail;
                    }
                    uint32_t *nn = realloc(o->next, sizeof(uint32_t) * cap);
                    if (!nn) { dhs_errf(err, err_len, "out of memory (OPT oracle, %llu references)", (unsigned long long)cap); goto fail; }
                    o->next = nn;
                    o->cap = cap;
                }
                for (int64_t e = 0; e < n; e++) {
                    int32_t row = sel[e];
                    if (row < 0 || ref[row].stamp == stamp) continue;
                    ref[row].stamp = stamp;
                    uint32_t seq = (uint32_t)o->nref++;
                    if (ref[row].key != NONE32) o->next[ref[row].key] = seq;
                    ref[row].key = seq;
                    o->next[seq] = NONE32;
                }
            }
        }
    }
    if (st != DHS_TRACE_EOF) {
        dhs_errf(err, err_len, "%s: %s", path, dhs_trace_reader_error(r));
        goto fail;
    }
    dhs_trace_reader_close(r);
    for (int32_t q = 0; q < N; q++) rq_arrays_free(&rq[q], G);
    free(rq);
    o->peak_bytes = o->cap * sizeof(uint32_t) + peak_live_bytes;
    o->build_s = dhs_wall_s() - t0;
    *out = o;
    return 0;
fail:
    dhs_trace_reader_close(r);
    if (rq)
        for (int32_t q = 0; q < N; q++) rq_arrays_free(&rq[q], G);
    free(rq);
    dhs_sim_oracle_free(o);
    return -1;
}

/* ------------------------------------------------------------- sizing */
dhs_sim_config dhs_sim_config_default(void)
{
    dhs_sim_config c;
    memset(&c, 0, sizeof c);
    c.hot_rows = 4096;
    c.page_rows = 64;
    c.tail_rows = 0;
    c.opt_fit = 0.0;
    c.device_bytes = 0;
    c.import_flags = DHS_IMPORT_DEVICE;
    c.reclaim_order = DHS_RECLAIM_MOST_PAGES;
    c.repop_pages = 64;
    c.payload = 0;
    return c;
}

static void sim_arch(const dhs_sim_trace_info *info, dhs_arch *a)
{
    dhs_trace_header_to_arch(&info->hdr, a);
    /* the core wants 16-byte multiples (DHS_ALIGN); a trace may say less */
    for (int32_t s = 0; s < a->n_sources; s++) a->sources[s].row_bytes = (a->sources[s].row_bytes + 15u) & ~15u;
}

/* The hot cache a request can use: no request of the trace has more rows
   than its largest position count (rounded up to pages), so a larger B only
   costs per-request state (which the core sizes by B) and never changes a
   decision: no victim and no staging overflow is ever needed below it. With
   a pool size fixed by the caller the required bytes would change what
   optional history fits, so B is kept as given then. */
int32_t dhs_sim_effective_hot_rows(const dhs_sim_trace_info *info, const dhs_sim_config *c, int32_t B)
{
    int32_t p = c->page_rows > 0 ? c->page_rows : 1;
    int64_t cap = (info->max_positions + 1 + p - 1) / p * p;
    if (c->device_bytes || B <= cap || cap > INT32_MAX) return B;
    return (int32_t)cap;
}

int32_t dhs_sim_effective_hot(const dhs_sim_trace_info *info, const dhs_sim_config *c)
{
    return dhs_sim_effective_hot_rows(info, c, c->hot_rows);
}

static dhs_config sim_core_config(const dhs_sim_trace_info *info, const dhs_sim_config *c)
{
    dhs_config d = dhs_config_default();
    int32_t p = c->page_rows;
    d.max_requests = info->peak_live > 0 ? info->peak_live : 1;
    d.sel_k = info->max_k;
    d.spec_width = info->hdr.k_max;
    d.hot_rows = dhs_sim_effective_hot(info, c);
    for (int32_t g = 0; g < DHS_MAX_SOURCES; g++)
        d.group_hot_rows[g] = c->group_hot_rows[g] ? dhs_sim_effective_hot_rows(info, c, c->group_hot_rows[g]) : 0;
    d.page_rows = p;
    int32_t t = c->tail_rows;
    if (t <= 0) t = 2 * info->hdr.k_max > 128 ? 2 * info->hdr.k_max : 128;
    d.tail_rows = (t + p - 1) / p * p;
    d.max_rows = info->max_positions + 1;
    d.reclaim_order = c->reclaim_order;
    d.repop_pages = c->repop_pages;
    d.resident_first = 1;
    return d; /* payload or not: the backend's (sim_backend) */
}

/* Measures, on a payload-free probe context, the pages the staging arenas take
   (A) and the required pages one request takes (R), and the page size. */
static int probe_pages(const dhs_sim_trace_info *info, const dhs_sim_config *c, int64_t *arena_pages,
                       int64_t *req_pages, uint64_t *page_bytes, char *err, size_t err_len)
{
    dhs_arch a;
    sim_arch(info, &a);
    dhs_config d = sim_core_config(info, c);
    uint32_t stride = 16;
    int32_t max_nsrc = 1;
    int64_t req_up = 0;
    for (int32_t s = 0; s < a.n_sources; s++)
        if (a.sources[s].row_bytes > stride) stride = a.sources[s].row_bytes;
    for (int32_t g = 0; g < a.n_groups; g++) {
        int32_t ns = 0;
        for (int32_t s = 0; s < a.n_sources; s++) ns += a.sources[s].group == g;
        if (ns > max_nsrc) max_nsrc = ns;
        req_up += (int64_t)ns * ((d.group_hot_rows[g] ? d.group_hot_rows[g] : d.hot_rows) + d.tail_rows) / d.page_rows;
    }
    int64_t arena_up = (int64_t)max_nsrc * (((int64_t)d.max_requests * d.spec_width * d.sel_k + d.page_rows - 1) / d.page_rows);
    int64_t pages = arena_up + 2 * req_up + 16;
    uint64_t pb = (uint64_t)d.page_rows * stride;
    d.device_bytes = (uint64_t)pages * pb;
    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL;
    const dhs_cpu_options po = {.payload_free = 1}; /* a probe: placement only */
    dhs_status s = dhs_backend_cpu_create(&po, &be);
    if (s == DHS_OK) s = dhs_ctx_create(&a, &d, be, &ctx);
    if (s != DHS_OK) {
        dhs_errf(err, err_len, "cannot size the context: %s (hot %d, page %d, tail %d)", dhs_status_str(s), d.hot_rows,
            d.page_rows, d.tail_rows);
        dhs_backend_destroy(be);
        return -1;
    }
    dhs_mem m0, m1;
    dhs_get_mem(ctx, &m0);
    dhs_req h;
    s = dhs_request_open(ctx, 0, &h);
    dhs_get_mem(ctx, &m1);
    if (s == DHS_OK) dhs_request_close(ctx, h);
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
    if (s != DHS_OK) {
        dhs_errf(err, err_len, "cannot size the context: probe admission %s", dhs_status_str(s));
        return -1;
    }
    *arena_pages = m0.pages_total - m0.pages_free;
    *req_pages = m0.pages_free - m1.pages_free;
    *page_bytes = m0.pages_total ? m0.pool_bytes / (uint64_t)m0.pages_total : pb;
    return 0;
}

uint64_t dhs_sim_device_bytes(const dhs_sim_trace_info *info, const dhs_sim_config *c, char *err, size_t err_len)
{
    if (c->device_bytes) return c->device_bytes;
    int64_t A, R;
    uint64_t pb;
    if (probe_pages(info, c, &A, &R, &pb, err, err_len)) return 0;
    int32_t N = info->peak_live > 0 ? info->peak_live : 1;
    int64_t opt = (int64_t)ceil(c->opt_fit * (double)dhs_sim_peak_opt_pages(info, c->page_rows));
    return (uint64_t)(A + (int64_t)N * R + opt) * pb;
}

/* ------------------------------------------------------------- replay */
enum { RUN_PLAIN = 0, RUN_RECORD = 1, RUN_OPT = 2 };

typedef struct replay {
    const dhs_sim_trace_info *info;
    const dhs_sim_config *cfg;
    const dhs_trace_header *h;
    dhs_arch arch;
    int32_t G;
    int32_t *grp_nsrc;       /* [G] */
    int32_t **grp_src;       /* [G][nsrc] source ids */
    uint64_t *grp_row_bytes; /* [G] sum of the group's sources' row bytes */
    dhs_backend *be;
    dhs_ctx *ctx;
    rq_state *rq;            /* [n_requests] */
    int32_t *slot_req;       /* [max_requests] trace request in a core slot */
    int32_t max_slots;
    /* OPT */
    const dhs_sim_oracle *o; /* RUN_RECORD, RUN_OPT */
    dhs_policy_ops ops;      /* RUN_RECORD: LRU, RUN_OPT: OPT, each with oracle_fn as its key */
    int mode;
    const uint32_t *keys;    /* RUN_OPT: per reference, its next hot-path reference */
    uint64_t req_bytes;      /* live requests' arrays (OPT) */
    uint8_t *hot;            /* RUN_RECORD: per reference, 1 when the hot cache was asked about it */
    uint64_t cursor;
    uint32_t stamp_now;
    /* buffers */
    dhs_req *reqs;
    int32_t *K, *acc;
    dhs_resolve_item *items;
    int32_t *loc;
    uint8_t *import_buf, *block_buf;
    int64_t import_rows_cap;
    dhs_sim_result *res;
} replay;

static uint64_t oracle_fn(void *user, uint32_t req_id, int32_t group, int64_t row)
{
    replay *R = user;
    R->res->oracle_calls++;
    if ((int32_t)req_id >= R->max_slots || group < 0 || group >= R->G) return DHS_OPT_KEY_NEVER;
    int32_t tr = R->slot_req[req_id];
    if (tr < 0) return DHS_OPT_KEY_NEVER;
    rq_state *q = &R->rq[tr];
    if (row < 0 || row >= q->rows[group]) return DHS_OPT_KEY_NEVER;
    row_ref rr = q->ref[group][row];
    if (rr.stamp != R->stamp_now) {
        R->res->oracle_stale++;
        return DHS_OPT_KEY_NEVER;
    }
    if (R->mode == RUN_RECORD) { /* rr.key is the reference's own number */
        R->hot[rr.key] = 1;
        return 0;
    }
    uint32_t nx = rr.key;
    return nx == NONE32 ? DHS_OPT_KEY_NEVER : DHS_OPT_KEY_BASE + nx;
}

static void replay_free(replay *R)
{
    if (R->ctx) dhs_ctx_destroy(R->ctx);
    dhs_backend_destroy(R->be);
    if (R->rq)
        for (int32_t q = 0; q < R->info->n_requests; q++) rq_arrays_free(&R->rq[q], R->G);
    free(R->rq);
    if (R->grp_src)
        for (int32_t g = 0; g < R->G; g++) free(R->grp_src[g]);
    free(R->grp_src);
    free(R->grp_nsrc);
    free(R->grp_row_bytes);
    free(R->slot_req);
    free(R->reqs);
    free(R->K);
    free(R->acc);
    free(R->items);
    free(R->loc);
    free(R->import_buf);
    free(R->block_buf);
}

static void check_inv(replay *R)
{
    if (!R->cfg->check_invariants) return;
    char msg[200];
    if (dhs_check_invariants(R->ctx, msg, sizeof msg)) R->res->invariant_violations++;
}

static void *zalloc_aligned(size_t n)
{
    n = (n + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (p) memset(p, 0, n ? n : 64);
    return p;
}

/* One replay. RUN_PLAIN: `policy` alone. RUN_RECORD: LRU with a next-use
   callback that marks every reference the hot cache is asked about (hits and
   misses; direct entries never reach it) in `hot`. RUN_OPT: OPT with `keys`. */
static int replay_run(const char *path, const dhs_sim_trace_info *info, const dhs_sim_config *cfg, int policy,
                      const dhs_sim_oracle *oracle, int mode, const uint32_t *keys, uint8_t *hot, dhs_sim_result *res,
                      char *err, size_t err_len)
{
    memset(res, 0, sizeof *res);
    res->policy = policy;
    res->hot_rows = cfg->hot_rows;
    for (int32_t g = 0; g < DHS_MAX_SOURCES; g++) res->per_group |= cfg->group_hot_rows[g] != 0;
    replay R;
    memset(&R, 0, sizeof R);
    R.info = info;
    R.cfg = cfg;
    R.h = &info->hdr;
    R.res = res;
    R.mode = mode;
    R.o = mode != RUN_PLAIN ? oracle : NULL;
    R.keys = keys;
    R.hot = hot;
    const dhs_trace_header *h = R.h;
    int32_t G = R.G = h->n_groups;
    int rc = -1;
    dhs_trace_reader *rd = NULL;
    sim_arch(info, &R.arch);
    uint64_t dev = dhs_sim_device_bytes(info, cfg, err, err_len);
    if (!dev) return -1;
    res->device_bytes = dev;
    dhs_config d = sim_core_config(info, cfg);
    d.device_bytes = dev;
    d.policy = mode != RUN_PLAIN ? DHS_POLICY_LRU : (dhs_policy)policy;
    R.max_slots = d.max_requests;
    const dhs_cpu_options po = {.payload_free = !cfg->payload}; /* placement only unless asked for bytes */
    dhs_status s = dhs_backend_cpu_create(&po, &R.be);
    if (s == DHS_OK) s = dhs_ctx_create(&R.arch, &d, R.be, &R.ctx);
    if (s != DHS_OK) { dhs_errf(err, err_len, "dhs_ctx_create: %s", dhs_status_str(s)); goto out; }
    if (R.o) { /* the oracle answers every insert's and touch's key: OPT's next use, the recording LRU's ledger */
        R.ops = *(mode == RUN_OPT ? dhs_policy_opt() : dhs_policy_get(DHS_POLICY_LRU));
        R.ops.key = oracle_fn;
        if (dhs_ctx_set_policy_ops(R.ctx, &R.ops, &R) != DHS_OK) { dhs_errf(err, err_len, "cannot install the oracle's policy"); goto out; }
    }
    /* architecture tables */
    R.grp_nsrc = calloc((size_t)G, sizeof(int32_t));
    R.grp_src = calloc((size_t)G, sizeof(int32_t *));
    R.grp_row_bytes = calloc((size_t)G, sizeof(uint64_t));
    R.rq = calloc((size_t)info->n_requests, sizeof(rq_state));
    R.slot_req = malloc(sizeof(int32_t) * (size_t)R.max_slots);
    int32_t max_nsrc = 1;
    if (!R.grp_nsrc || !R.grp_src || !R.grp_row_bytes || !R.rq || !R.slot_req) goto nomem;
    for (int32_t i = 0; i < R.max_slots; i++) R.slot_req[i] = -1;
    for (int32_t g = 0; g < G; g++) {
        R.grp_src[g] = calloc((size_t)R.arch.n_sources, sizeof(int32_t));
        if (!R.grp_src[g]) goto nomem;
    }
    for (int32_t sidx = 0; sidx < R.arch.n_sources; sidx++) {
        int32_t g = R.arch.sources[sidx].group;
        R.grp_src[g][R.grp_nsrc[g]++] = sidx;
        R.grp_row_bytes[g] += h->sources[sidx].row_bytes;
        if (R.grp_nsrc[g] > max_nsrc) max_nsrc = R.grp_nsrc[g];
    }
    int32_t N = R.max_slots, KM = h->k_max;
    R.reqs = calloc((size_t)N, sizeof(dhs_req));
    R.K = calloc((size_t)N, sizeof(int32_t));
    R.acc = calloc((size_t)N, sizeof(int32_t));
    R.items = calloc((size_t)N, sizeof(dhs_resolve_item));
    R.loc = malloc(sizeof(int32_t) * (size_t)N * (size_t)max_nsrc * (size_t)KM * (size_t)info->max_k);
    if (!R.reqs || !R.K || !R.acc || !R.items || !R.loc) goto nomem;
    if (cfg->payload) {
        int64_t mx = 0;
        for (int32_t q = 0; q < info->n_requests; q++)
            if (info->prefix[q] > mx) mx = info->prefix[q];
        R.import_rows_cap = mx + 1;
        R.import_buf = zalloc_aligned((size_t)R.arch.n_sources * (size_t)R.import_rows_cap * 4096u);
        R.block_buf = zalloc_aligned((size_t)(KM + 2) * 4096u);
        for (int32_t sidx = 0; sidx < R.arch.n_sources; sidx++)
            if (R.arch.sources[sidx].row_bytes > 4096u) { dhs_errf(err, err_len, "payload replay: rows above 4096 B"); goto out; }
        if (!R.import_buf || !R.block_buf) goto nomem;
        /* distinct bytes per row so a payload run really moves data */
        for (size_t i = 0; i < (size_t)R.arch.n_sources * (size_t)R.import_rows_cap * 4096u; i += 4)
            memcpy(R.import_buf + i, &(uint32_t){(uint32_t)(i * 2654435761u)}, 4);
    }
    if (dhs_trace_reader_open(path, DHS_TRACE_READ_NO_ROW_CHECK, &rd, err, err_len) != DHS_TRACE_OK) goto out;
    double t0 = dhs_wall_s();
    dhs_trace_event ev;
    dhs_trace_status ts;
    while ((ts = dhs_trace_next(rd, &ev)) == DHS_TRACE_OK) {
        if (ev.kind == DHS_TRACE_EV_START) {
            rq_state *q = &R.rq[ev.req];
            s = dhs_request_open(R.ctx, info->final_positions[ev.req], &q->h);
            if (s != DHS_OK) {
                dhs_errf(err, err_len, "request %u: dhs_request_open: %s (device pool %llu bytes)", ev.req, dhs_status_str(s),
                    (unsigned long long)dev);
                goto out;
            }
            q->live = 1;
            R.slot_req[q->h.id] = (int32_t)ev.req;
            if (R.o && rq_arrays_alloc(q, info, (int32_t)ev.req, &R.req_bytes)) goto nomem;
            if (R.req_bytes > res->peak_request_bytes) res->peak_request_bytes = R.req_bytes;
            const void *rows[DHS_MAX_SOURCES];
            const void *const *rp = NULL;
            if (cfg->payload) {
                for (int32_t sidx = 0; sidx < R.arch.n_sources; sidx++)
                    rows[sidx] = R.import_buf + (size_t)sidx * (size_t)R.import_rows_cap * 4096u;
                rp = rows;
            }
            s = dhs_request_import(R.ctx, q->h, ev.prefix, rp, cfg->import_flags);
            if (s != DHS_OK) { dhs_errf(err, err_len, "request %u: dhs_request_import: %s", ev.req, dhs_status_str(s)); goto out; }
            dhs_mem mem;
            dhs_get_mem(R.ctx, &mem);
            if (mem.host_bytes_allocated > res->peak_host_bytes) res->peak_host_bytes = mem.host_bytes_allocated;
            if (mem.requests_open > res->peak_open_requests) res->peak_open_requests = mem.requests_open;
            check_inv(&R);
            continue;
        }
        if (ev.kind == DHS_TRACE_EV_END) {
            rq_state *q = &R.rq[ev.req];
            s = dhs_request_close(R.ctx, q->h);
            if (s != DHS_OK) { dhs_errf(err, err_len, "request %u: dhs_request_close: %s", ev.req, dhs_status_str(s)); goto out; }
            R.slot_req[q->h.id] = -1;
            q->live = 0;
            R.req_bytes -= rq_arrays_bytes(q, G);
            rq_arrays_free(q, G);
            check_inv(&R);
            continue;
        }
        /* ROUND */
        int32_t n = ev.n_items;
        if (n > N) { dhs_errf(err, err_len, "round %llu: %d requests, more than the %d slots", (unsigned long long)ev.round, n, N); goto out; }
        for (int32_t i = 0; i < n; i++) {
            R.reqs[i] = R.rq[ev.items[i].req].h;
            R.K[i] = ev.items[i].n_queries;
            R.acc[i] = ev.items[i].accepted;
        }
        s = dhs_round_begin(R.ctx, n, R.reqs, R.K);
        if (s != DHS_OK) { dhs_errf(err, err_len, "round %llu: dhs_round_begin: %s", (unsigned long long)ev.round, dhs_status_str(s)); goto out; }
        for (int32_t i = 0; i < n; i++) {
            const dhs_trace_item *it = &ev.items[i];
            for (int32_t sidx = 0; sidx < R.arch.n_sources; sidx++) {
                int64_t m = R.arch.sources[sidx].m;
                int64_t lo = it->n_r / m, hi = (it->n_r + it->n_queries + m - 1) / m;
                s = dhs_write_rows(R.ctx, R.reqs[i], sidx, lo, (int32_t)(hi - lo), cfg->payload ? R.block_buf : NULL);
                if (s != DHS_OK) {
                    dhs_errf(err, err_len, "round %llu request %u: dhs_write_rows: %s", (unsigned long long)ev.round, it->req,
                        dhs_status_str(s));
                    goto out;
                }
            }
        }
        if (R.o) {
            /* the references of this round, numbered as in the oracle's pass */
            uint32_t stamp = R.stamp_now = (uint32_t)(ev.round + 1);
            for (int32_t i = 0; i < n; i++) {
                const dhs_trace_item *it = &ev.items[i];
                rq_state *q = &R.rq[it->req];
                for (int32_t g = 0; g < G; g++) {
                    const int32_t *sel = it->sel[g];
                    int64_t ne = (int64_t)it->n_queries * h->k[g];
                    row_ref *ref = q->ref[g];
                    const uint32_t *keys = R.keys;
                    uint64_t cur = R.cursor, nref = R.o->nref;
                    int rec = mode == RUN_RECORD;
                    for (int64_t e = 0; e < ne; e++) {
                        int32_t row = sel[e];
                        if (row < 0 || ref[row].stamp == stamp) continue;
                        uint32_t v = cur >= nref ? NONE32 : rec ? (uint32_t)cur : keys[cur];
                        ref[row] = (row_ref){v, stamp};
                        cur++;
                    }
                    R.cursor = cur;
                }
            }
        }
        for (int32_t g = 0; g < G; g++) {
            int32_t k = h->k[g];
            int64_t off = 0;
            for (int32_t i = 0; i < n; i++) {
                R.items[i] = (dhs_resolve_item){R.reqs[i], R.K[i], ev.items[i].sel[g], R.loc + off};
                off += (int64_t)R.grp_nsrc[g] * R.K[i] * k;
            }
            dhs_stats before;
            dhs_get_stats(R.ctx, &before);
            s = dhs_resolve(R.ctx, g, k, n, R.items);
            if (s != DHS_OK) {
                dhs_errf(err, err_len, "round %llu group %d: dhs_resolve: %s", (unsigned long long)ev.round, g, dhs_status_str(s));
                goto out;
            }
            dhs_stats after;
            dhs_get_stats(R.ctx, &after);
            res->host_bytes += (after.distinct_misses - before.distinct_misses) * R.grp_row_bytes[g];
            /* the group's consumers are done: staged rows are promoted, its
               staging arenas serve the next group (DESIGN §6) */
            s = dhs_group_done(R.ctx, g);
            if (s != DHS_OK) {
                dhs_errf(err, err_len, "round %llu group %d: dhs_group_done: %s", (unsigned long long)ev.round, g, dhs_status_str(s));
                goto out;
            }
        }
        if (cfg->progress && (ev.round & 1023) == 0) cfg->progress(cfg->progress_user, ev.round, info->rounds);
        s = dhs_round_end(R.ctx, R.acc);
        if (s != DHS_OK) { dhs_errf(err, err_len, "round %llu: dhs_round_end: %s", (unsigned long long)ev.round, dhs_status_str(s)); goto out; }
        check_inv(&R);
    }
    if (ts != DHS_TRACE_EOF) { dhs_errf(err, err_len, "%s: %s", path, dhs_trace_reader_error(rd)); goto out; }
    dhs_sync(R.ctx);
    res->replay_s = dhs_wall_s() - t0;
    if (R.o && R.cursor != R.o->nref) {
        dhs_errf(err, err_len, "OPT oracle out of step: %llu references replayed, %llu numbered",
            (unsigned long long)R.cursor, (unsigned long long)R.o->nref);
        goto out;
    }
    dhs_get_stats(R.ctx, &res->st);
    res->selected_entries = info->selected_entries;
    res->tokens = info->tokens;
    res->host_rows = res->st.host_rows_copied;
    {
        const dhs_stats *st = &res->st;
        double ent = (double)st->entries, hotpath = (double)(st->census_hot + st->census_host);
        res->host_rows_per_token = info->tokens ? (double)res->host_rows / (double)info->tokens : 0;
        res->miss_ratio = hotpath > 0 ? (double)st->census_host / hotpath : 0;
        res->hit_rate = hotpath > 0 ? (double)st->census_hot / hotpath : 0;
        res->direct_share = ent > 0 ? (double)st->census_direct / ent : 0;
        res->hot_share = ent > 0 ? (double)st->census_hot / ent : 0;
        res->host_share = ent > 0 ? (double)st->census_host / ent : 0;
        res->mentries_per_s = res->replay_s > 0 ? (double)info->selected_entries / res->replay_s / 1e6 : 0;
    }
    rc = 0;
    goto out;
nomem:
    dhs_errf(err, err_len, "out of memory");
out:
    dhs_trace_reader_close(rd);
    replay_free(&R);
    return rc;
}

int dhs_sim_replay(const char *path, const dhs_sim_trace_info *info, const dhs_sim_config *cfg, int policy,
                   const dhs_sim_oracle *oracle, dhs_sim_result *res, char *err, size_t err_len)
{
    memset(res, 0, sizeof *res);
    res->policy = policy;
    res->hot_rows = cfg->hot_rows;
    if (policy < 0 || policy >= DHS_SIM_POLICIES) { dhs_errf(err, err_len, "unknown policy %d", policy); return -1; }
    if (policy == DHS_SIM_OPT && !oracle) { dhs_errf(err, err_len, "OPT needs the next-use oracle"); return -1; }
    if (cfg->page_rows < 1 || cfg->hot_rows < cfg->page_rows || cfg->hot_rows % cfg->page_rows) {
        dhs_errf(err, err_len, "hot-cache rows %d must be a positive multiple of the page rows %d", cfg->hot_rows, cfg->page_rows);
        return -1;
    }
    for (int32_t g = 0; g < DHS_MAX_SOURCES; g++) {
        const int32_t b = cfg->group_hot_rows[g];
        if (!b) continue;
        if (g >= info->hdr.n_groups || b < cfg->page_rows || b % cfg->page_rows) {
            dhs_errf(err, err_len, "group %d hot-cache rows %d: the trace has %d groups, sizes are positive multiples of the "
                     "page rows %d", g, b, info->hdr.n_groups, cfg->page_rows);
            return -1;
        }
    }
    if (policy != DHS_SIM_OPT) return replay_run(path, info, cfg, policy, NULL, RUN_PLAIN, NULL, NULL, res, err, err_len);
    /* OPT. Which references reach the hot cache (not served from the tail or
       ready optional pages) does not depend on the replacement policy: page
       states follow admissions, reclaim and refill, which see only page
       counts. A recording replay finds them; each reference's key is then the
       number of its (request, group, row)'s next *hot-path* reference. Keying
       on the next selection instead would keep rows whose next use is served
       directly, with a stale key, forever. */
    uint64_t n = oracle->nref;
    uint8_t *hot = calloc(n ? n : 1, 1);
    uint32_t *nh = malloc(sizeof(uint32_t) * (n ? n : 1));
    int rc = -1;
    dhs_sim_result rec;
    if (!hot || !nh) { dhs_errf(err, err_len, "out of memory (OPT hot-path keys)"); goto done; }
    if (replay_run(path, info, cfg, policy, oracle, RUN_RECORD, NULL, hot, &rec, err, err_len)) goto done;
    if (rec.oracle_stale) { dhs_errf(err, err_len, "OPT recording pass: %llu calls outside the round", (unsigned long long)rec.oracle_stale); goto done; }
    uint64_t n_hot = 0;
    for (uint64_t i = n; i-- > 0;) {
        uint32_t nx = oracle->next[i];
        nh[i] = nx == NONE32 ? NONE32 : hot[nx] ? nx : nh[nx];
        n_hot += hot[i];
    }
    rc = replay_run(path, info, cfg, policy, oracle, RUN_OPT, nh, NULL, res, err, err_len);
    /* the premise: both replays sent the same entries to the hot cache */
    if (rc == 0 && (res->st.census_direct != rec.st.census_direct || res->st.staging_rows != rec.st.staging_rows))
        res->opt_fallback_unknown += res->st.census_direct > rec.st.census_direct ? res->st.census_direct - rec.st.census_direct
                                                                                   : rec.st.census_direct - res->st.census_direct + 1;
    res->opt_record_s = rec.replay_s;
    res->opt_hot_refs = n_hot;
    res->opt_refs = n;
done:
    free(hot);
    free(nh);
    return rc;
}

/* ------------------------------------------------------------- SVG */
static double nice_step(double range, int target)
{
    double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

static void svg_text_escape(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

int dhs_plot_svg(const char *path, const char *title, const char *xlabel, const char *ylabel,
                 const dhs_plot_series *series, int n_series, int log2x)
{
    static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                   "#bcbd22", "#17becf"};
    const double W = 760, H = 470, L = 80, Rm = 190, T = 40, Bm = 60;
    double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < series[s].n; i++) {
            double x = series[s].x[i], y = series[s].y[i];
            if (!isfinite(x) || !isfinite(y) || (log2x && x <= 0)) continue;
            if (log2x) x = log2(x);
            if (x < x0) x0 = x;
            if (x > x1) x1 = x;
            if (y < y0) y0 = y;
            if (y > y1) y1 = y;
        }
    if (!(x1 >= x0)) { x0 = 0; x1 = 1; }
    if (!(y1 > y0)) y1 = y0 + 1;
    if (x1 == x0) { x0 -= 0.5; x1 += 0.5; }
    double ys = nice_step(y1 - y0, 6);
    y1 = ceil(y1 / ys) * ys;
    y0 = floor(y0 / ys) * ys;
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    double pw = W - L - Rm, ph = H - T - Bm;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (T + ph - ((y) - y0) / (y1 - y0) * ph)
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">", L + pw / 2);
    svg_text_escape(f, title);
    fprintf(f, "</text>\n");
    /* grid and ticks */
    for (double y = y0; y <= y1 + ys / 2; y += ys) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>", L, PY(y), L + pw, PY(y));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, PY(y) + 4, fabs(y) < ys / 1e6 ? 0.0 : y);
    }
    if (log2x) {
        for (double x = ceil(x0); x <= x1 + 1e-9; x += 1) {
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>", PX(x), T, PX(x), T + ph);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(x), T + ph + 16, pow(2, x));
        }
    } else {
        double xs = nice_step(x1 - x0, 6);
        for (double x = ceil(x0 / xs) * xs; x <= x1 + xs / 1e6; x += xs) {
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>", PX(x), T, PX(x), T + ph);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(x), T + ph + 16, x);
        }
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n", L, T, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", L + pw / 2, H - 18);
    svg_text_escape(f, xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(18,%.1f) rotate(-90)\" text-anchor=\"middle\">", T + ph / 2);
    svg_text_escape(f, ylabel);
    fprintf(f, "</text>\n");
    for (int s = 0; s < n_series; s++) {
        const char *c = colors[s % 10];
        const char *dash = s >= 10 ? " stroke-dasharray=\"5,3\"" : "";
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", c, dash);
        for (int i = 0; i < series[s].n; i++) {
            double x = series[s].x[i], y = series[s].y[i];
            if (!isfinite(x) || !isfinite(y) || (log2x && x <= 0)) continue;
            if (log2x) x = log2(x);
            fprintf(f, "%.1f,%.1f ", PX(x), PY(y));
        }
        fprintf(f, "\"/>\n");
        for (int i = 0; i < series[s].n; i++) {
            double x = series[s].x[i], y = series[s].y[i];
            if (!isfinite(x) || !isfinite(y) || (log2x && x <= 0)) continue;
            if (log2x) x = log2(x);
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>", PX(x), PY(y), c);
        }
        double ly = T + 14 + 18 * s;
        fprintf(f, "\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>", L + pw + 12, ly,
                L + pw + 36, ly, c, dash);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", L + pw + 42, ly + 4);
        svg_text_escape(f, series[s].name);
        fprintf(f, "</text>\n");
    }
#undef PX
#undef PY
    fprintf(f, "</svg>\n");
    return fclose(f) ? -1 : 0;
}

/* ------------------------------------------------------------- analysis */
const dhs_sim_result *dhs_sim_find(const dhs_sim_result *res, int n_res, int policy, int32_t hot_rows)
{
    for (int i = 0; i < n_res; i++)
        if (res[i].policy == policy && res[i].hot_rows == hot_rows && !res[i].per_group) return &res[i];
    return NULL;
}

int dhs_sim_policy_vs_capacity(const dhs_sim_result *res, int n_res, int32_t hot_rows, dhs_sim_pvc *out)
{
    const dhs_sim_result *lru = dhs_sim_find(res, n_res, DHS_POLICY_LRU, hot_rows);
    if (!lru) return -1;
    const dhs_sim_result *best = NULL;
    for (int i = 0; i < n_res; i++)
        if (res[i].hot_rows == hot_rows && !res[i].per_group && res[i].policy != DHS_SIM_OPT && (!best || res[i].host_rows < best->host_rows))
            best = &res[i];
    const dhs_sim_result *opt = dhs_sim_find(res, n_res, DHS_SIM_OPT, hot_rows);
    const dhs_sim_result *dbl = hot_rows <= INT32_MAX / 2 ? dhs_sim_find(res, n_res, DHS_POLICY_LRU, 2 * hot_rows) : NULL;
    double lr = (double)lru->host_rows;
    out->hot_rows = hot_rows;
    out->lru_host_rows = lru->host_rows;
    out->best_online = best->policy;
    out->best_online_cut_vs_lru = lr > 0 ? 1 - (double)best->host_rows / lr : 0.0;
    out->opt_cut_vs_lru = !opt ? -1 : lr > 0 ? 1 - (double)opt->host_rows / lr : 0.0;
    out->lru_cut_by_doubling = !dbl ? -1 : lr > 0 ? 1 - (double)dbl->host_rows / lr : 0.0;
    return 0;
}
