/* verify.c - the randomised exactness harness behind `dhs verify`.
 *
 * Row bytes are a pure function of (request uid, source, row, version): the
 * harness never stores payload, it recomputes what every location must hold.
 * A row's version changes each time the engine rewrites it (rejected
 * speculative positions, incomplete compressed rows), so a stale copy shows.
 */
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"
#include "sim/util.h"
#include "sim/verify.h"

/* ------------------------------------------------------------- rng: util/rng.h */

static void row_bytes_of(uint8_t *out, uint32_t nbytes, uint64_t uid, int32_t src, int64_t row, uint32_t ver)
{
    uint64_t h = dhs_mix64(uid * 0x100000001b3ull ^ dhs_mix64((uint64_t)src << 40 ^ (uint64_t)row) ^ ((uint64_t)ver << 20));
    for (uint32_t i = 0; i < nbytes; i += 8) {
        uint64_t w = dhs_mix64(h + i);
        memcpy(out + i, &w, 8);
    }
}

/* ------------------------------------------------------------- state */
typedef struct {
    int open;
    dhs_req h;
    uint64_t uid;
    int64_t life;
    uint32_t **ver;     /* [group][max_rows_g] */
    int64_t topic[4];   /* recurring topical centres per request */
} vreq;

typedef struct {
    int32_t kind; /* dhs_consumer_kind */
    int32_t group;
} vcons;

typedef struct {
    const verify_opts *o;
    verify_result *res;
    dhs_arch arch;
    dhs_config cfg;
    dhs_backend *be;
    dhs_ctx *ctx;
    uint64_t rng;
    vreq *rq;
    vcons cons[16];
    int n_cons;
    int32_t *grp_m;
    int64_t *grp_rows;
    uint64_t next_uid;
    uint8_t *buf, *buf2;
    /* per round: selections and locations of each group's last call */
    int32_t **sel, **loc;    /* [group] [N][K][k] / [N][nsrc][K][k] */
    int32_t *psel, *ploc;    /* copies of an earlier consumer's vectors */
    int32_t *round_slots;
    int32_t *round_K;
    int32_t n_round;
    int32_t step;
} vstate;

static void violation(vstate *v, const char *what)
{
    if (v->res->violations++ == 0) snprintf(v->res->first_violation, sizeof v->res->first_violation, "%s", what);
}

static void check(vstate *v, const char *after)
{
    if (!v->o->check_every) return;
    char msg[200];
    v->res->checks++;
    if (dhs_check_invariants(v->ctx, msg, sizeof msg)) {
        char buf[256];
        snprintf(buf, sizeof buf, "after %s: %s", after, msg);
        violation(v, buf);
    }
}

static int is_fault_status(dhs_status s)
{
    return s == DHS_ERR_NOMEM || s == DHS_ERR_DEVICE_NOMEM || s == DHS_ERR_BACKEND;
}

static void maybe_fault(vstate *v)
{
    if (v->o->faults <= 0 || dhs_rng_unit(&v->rng) >= v->o->faults) return;
    dhs_backend_fault_at(v->be, (dhs_fault_kind)dhs_rng_below(&v->rng, DHS_FAULT_COUNT_), 1 + (uint64_t)dhs_rng_below(&v->rng, 3));
}

static void disarm(vstate *v)
{
    for (int k = 0; k < DHS_FAULT_COUNT_; k++) dhs_backend_fault_at(v->be, (dhs_fault_kind)k, 0);
}

static void unexpected(vstate *v, const char *call, dhs_status s)
{
    char buf[200];
    snprintf(buf, sizeof buf, "%s returned %d (%s)", call, (int)s, dhs_status_str(s));
    v->res->wrong_status++;
    violation(v, buf);
}

/* ------------------------------------------------------------- layout */
static void build_arch(vstate *v)
{
    const verify_opts *o = v->o;
    dhs_arch *a = &v->arch;
    memset(a, 0, sizeof *a);
    a->index_key_bytes = 132;
    int ns = 0, ng = 0;
    v->n_cons = 0;
#define SRC(g, m) (a->sources[ns] = (dhs_source_desc){(uint32_t)o->row_bytes, (uint32_t)(m), (g)}, ns++)
#define CONS(kind, g, s) (a->consumers[a->n_consumers++] = (dhs_consumer_desc){(kind), (s), (g)}, \
                          v->cons[v->n_cons++] = (vcons){(kind), (g)})
    switch (o->layout) {
    case VERIFY_LAYOUT_OWN:
        SRC(0, 1); CONS(DHS_CONSUMER_OWN, 0, 0); ng = 1;
        break;
    case VERIFY_LAYOUT_GLM: /* two producers, each followed by payload layers of their own */
        SRC(0, 1); SRC(0, 1); SRC(0, 1);
        CONS(DHS_CONSUMER_OWN, 0, 0); CONS(DHS_CONSUMER_FOLLOW, 0, 1); CONS(DHS_CONSUMER_FOLLOW, 0, 2);
        SRC(1, 1); SRC(1, 1);
        CONS(DHS_CONSUMER_OWN, 1, 3); CONS(DHS_CONSUMER_FOLLOW, 1, 4);
        ng = 2;
        break;
    case VERIFY_LAYOUT_V41: /* shared sources: own, reuse, reindex consumers */
        SRC(0, 1);
        CONS(DHS_CONSUMER_OWN, 0, 0); CONS(DHS_CONSUMER_REUSE, 0, 0); CONS(DHS_CONSUMER_REINDEX, 0, 0);
        SRC(1, o->compress > 1 ? o->compress : 4);
        CONS(DHS_CONSUMER_OWN, 1, 1); CONS(DHS_CONSUMER_REINDEX, 1, 1); CONS(DHS_CONSUMER_REUSE, 1, 1);
        ng = 2;
        break;
    }
    if (o->compress > 1 && o->layout != VERIFY_LAYOUT_V41) {
        SRC(ng, o->compress);
        CONS(DHS_CONSUMER_OWN, ng, ns - 1);
        CONS(DHS_CONSUMER_REINDEX, ng, ns - 1);
        ng++;
    }
    a->n_groups = ng;
    a->n_sources = ns;
#undef SRC
#undef CONS
}

static int32_t grp_nsrc(const vstate *v, int32_t g)
{
    int32_t n = 0;
    for (int s = 0; s < v->arch.n_sources; s++) n += v->arch.sources[s].group == g;
    return n;
}

/* ------------------------------------------------------------- requests */
static void close_request(vstate *v, int32_t slot);

static int open_request(vstate *v, int32_t slot)
{
    vreq *r = &v->rq[slot];
    int64_t prefix = dhs_rng_below(&v->rng, v->o->max_prefix + 1);
    dhs_status s;
    maybe_fault(v);
    s = dhs_request_open(v->ctx, prefix, &r->h);
    check(v, "request_open");
    if (is_fault_status(s)) {
        disarm(v);
        s = dhs_request_open(v->ctx, prefix, &r->h);
        check(v, "request_open retry");
    }
    if (s == DHS_WAIT) return 0;
    if (s != DHS_OK) { unexpected(v, "dhs_request_open", s); return 0; }
    r->open = 1;
    r->uid = ++v->next_uid;
    r->life = 10 + dhs_rng_below(&v->rng, 4 * (v->o->steps / 4 + 10));
    for (int t = 0; t < 4; t++) r->topic[t] = dhs_rng_below(&v->rng, prefix + 1);
    for (int32_t g = 0; g < v->arch.n_groups; g++) memset(r->ver[g], 0, sizeof(uint32_t) * (size_t)v->grp_rows[g]);
    /* import the prefix: rows of every source */
    const void *rows[DHS_MAX_SOURCES];
    size_t off = 0;
    for (int32_t src = 0; src < v->arch.n_sources; src++) {
        int64_t m = v->arch.sources[src].m, nr = (prefix + m - 1) / m;
        rows[src] = v->buf + off;
        for (int64_t row = 0; row < nr; row++) row_bytes_of(v->buf + off + (uint64_t)row * v->o->row_bytes, (uint32_t)v->o->row_bytes, r->uid, src, row, 0);
        off += (size_t)nr * (size_t)v->o->row_bytes;
    }
    unsigned flag = dhs_rng_below(&v->rng, 10) < 7 ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST;
    maybe_fault(v);
    s = dhs_request_import(v->ctx, r->h, prefix, rows, flag);
    check(v, "request_import");
    if (is_fault_status(s)) {
        disarm(v);
        s = dhs_request_import(v->ctx, r->h, prefix, rows, flag);
        check(v, "request_import retry");
    }
    if (s != DHS_OK) { unexpected(v, "dhs_request_import", s); close_request(v, slot); return 0; }
    return 1;
}

/* one query's selection with locality: sinks, local window, topical sets
   with drift, random tail, duplicates, -1 padding */
static void gen_selection(vstate *v, vreq *r, int32_t g, int64_t n, int32_t j, int32_t *out)
{
    int32_t k = v->o->k;
    int64_t m = v->grp_m[g], vis = (n + j + 1) / m;
    for (int32_t i = 0; i < k; i++) {
        if (vis <= 0) { out[i] = -1; continue; }
        int64_t x = dhs_rng_below(&v->rng, 100), row;
        if (x < 4) row = -1;
        else if (x < 9) row = dhs_rng_below(&v->rng, vis < 4 ? vis : 4);
        else if (x < 40) row = vis - 1 - dhs_rng_below(&v->rng, vis < 48 ? vis : 48);
        else if (x < 80) {
            int t = (int)dhs_rng_below(&v->rng, 4);
            row = (r->topic[t] / m + dhs_rng_below(&v->rng, 40)) % vis;
        } else if (x < 95) row = dhs_rng_below(&v->rng, vis);
        else row = i > 0 ? out[dhs_rng_below(&v->rng, i)] : -1;
        out[i] = (int32_t)row;
    }
    if (dhs_rng_below(&v->rng, 20) == 0) r->topic[dhs_rng_below(&v->rng, 4)] = dhs_rng_below(&v->rng, n + 1); /* drift */
}

typedef struct { int32_t row, loc; } rowloc;

static int cmp_rowloc(const void *a, const void *b)
{
    const rowloc *x = a, *y = b;
    if (x->row != y->row) return x->row < y->row ? -1 : 1;
    return (x->loc > y->loc) - (x->loc < y->loc);
}

/* checks one group's locations of the current round against the row bytes;
   sel_all/loc_all default to the group's latest call */
static void check_locations_of(vstate *v, int32_t g, const int32_t *sel_all, const int32_t *loc_all, const char *when)
{
    int32_t k = v->o->k, nsrc = grp_nsrc(v, g);
    for (int32_t i = 0; i < v->n_round; i++) {
        vreq *r = &v->rq[v->round_slots[i]];
        int32_t K = v->round_K[i];
        const int32_t *sel = sel_all + (int64_t)i * v->o->spec * k;
        const int32_t *loc = loc_all + (int64_t)i * nsrc * v->o->spec * k;
        /* every query selecting a row gets the same location */
        static rowloc pairs[8 * 4096];
        int64_t np = 0;
        for (int64_t e = 0; e < (int64_t)K * k && np < 8 * 4096; e++)
            if (sel[e] >= 0) pairs[np++] = (rowloc){sel[e], loc[e]};
        qsort(pairs, (size_t)np, sizeof *pairs, cmp_rowloc);
        for (int64_t e = 1; e < np; e++)
            if (pairs[e].row == pairs[e - 1].row && pairs[e].loc != pairs[e - 1].loc)
                violation(v, "one row got two locations within a request's round");
        int si = 0;
        for (int32_t src = 0; src < v->arch.n_sources; src++) {
            if (v->arch.sources[src].group != g) continue;
            const int32_t *l = loc + (int64_t)si * K * k;
            for (int64_t e = 0; e < (int64_t)K * k; e++) {
                int32_t row = sel[e];
                if (row < 0) {
                    if (l[e] != -1) { v->res->wrong_bytes++; violation(v, "padding -1 did not map to -1"); }
                    continue;
                }
                v->res->st.entries++; /* entries checked (overwritten by the library's count at the end) */
                if (dhs_read_location(v->ctx, src, l[e], v->buf2) != DHS_OK) { violation(v, "unreadable location"); continue; }
                row_bytes_of(v->buf, (uint32_t)v->o->row_bytes, r->uid, src, row, r->ver[g][row]);
                if (memcmp(v->buf, v->buf2, (size_t)v->o->row_bytes)) {
                    char b[200];
                    snprintf(b, sizeof b, "I2 (%s): request uid %llu source %d row %d at location %d holds wrong bytes", when,
                             (unsigned long long)r->uid, src, row, l[e]);
                    v->res->wrong_bytes++;
                    violation(v, b);
                }
            }
            si++;
        }
    }
}

static void check_locations(vstate *v, int32_t g, const char *when)
{
    check_locations_of(v, g, v->sel[g], v->loc[g], when);
}

static dhs_status resolve_group(vstate *v, int32_t g)
{
    int32_t k = v->o->k, nsrc = grp_nsrc(v, g);
    dhs_resolve_item items[1024];
    for (int32_t i = 0; i < v->n_round; i++) {
        vreq *r = &v->rq[v->round_slots[i]];
        int64_t n;
        dhs_request_positions(v->ctx, r->h, &n);
        int32_t *sel = v->sel[g] + (int64_t)i * v->o->spec * k;
        for (int32_t j = 0; j < v->round_K[i]; j++) gen_selection(v, r, g, n, j, sel + (int64_t)j * k);
        items[i] = (dhs_resolve_item){r->h, v->round_K[i], sel, v->loc[g] + (int64_t)i * nsrc * v->o->spec * k};
    }
    maybe_fault(v);
    dhs_status s = dhs_resolve(v->ctx, g, k, v->n_round, items);
    check(v, "resolve");
    if (is_fault_status(s)) {
        disarm(v);
        s = dhs_resolve(v->ctx, g, k, v->n_round, items);
        check(v, "resolve retry");
    }
    if (s == DHS_OK && v->o->corrupt_at_step && v->step == v->o->corrupt_at_step && v->n_round > 0) {
        /* deliberate damage: the byte check below must catch it */
        for (int64_t e = 0; e < (int64_t)v->round_K[0] * k; e++)
            if (items[0].loc[e] >= 0) {
                int32_t src0 = 0;
                while (v->arch.sources[src0].group != g) src0++;
                uint32_t stride = 0;
                for (int i = 0; i < v->arch.n_sources; i++)
                    if (v->arch.sources[i].row_bytes > stride) stride = v->arch.sources[i].row_bytes;
                ((uint8_t *)dhs_source_pool(v->ctx, src0))[(uint64_t)items[0].loc[e] * stride] ^= 0x40;
                break;
            }
    }
    if (s != DHS_OK) unexpected(v, "dhs_resolve", s);
    else check_locations(v, g, "after resolve");
    return s;
}

/* writes the current block's rows of every source (new versions) */
static void write_block(vstate *v, vreq *r, int32_t K)
{
    int64_t n;
    dhs_request_positions(v->ctx, r->h, &n);
    for (int32_t g = 0; g < v->arch.n_groups; g++) {
        int64_t m = v->grp_m[g], lo = n / m, hi = (n + K + m - 1) / m;
        for (int64_t row = lo; row < hi; row++) r->ver[g][row]++;
        for (int32_t src = 0; src < v->arch.n_sources; src++) {
            if (v->arch.sources[src].group != g) continue;
            for (int64_t row = lo; row < hi; row++)
                row_bytes_of(v->buf + (uint64_t)(row - lo) * v->o->row_bytes, (uint32_t)v->o->row_bytes, r->uid, src, row, r->ver[g][row]);
            maybe_fault(v);
            dhs_status s = dhs_write_rows(v->ctx, r->h, src, lo, (int32_t)(hi - lo), v->buf);
            if (is_fault_status(s)) {
                disarm(v);
                s = dhs_write_rows(v->ctx, r->h, src, lo, (int32_t)(hi - lo), v->buf);
            }
            check(v, "write_rows");
            if (s != DHS_OK) unexpected(v, "dhs_write_rows", s);
        }
    }
}

static void run_round(vstate *v, const int32_t *slots, int32_t n, int full_check)
{
    dhs_req reqs[1024];
    v->n_round = n;
    for (int32_t i = 0; i < n; i++) {
        v->round_slots[i] = slots[i];
        v->round_K[i] = 1 + (int32_t)dhs_rng_below(&v->rng, v->o->spec);
        reqs[i] = v->rq[slots[i]].h;
    }
    dhs_status s = dhs_round_begin(v->ctx, n, reqs, v->round_K);
    if (is_fault_status(s)) { /* device resolver: an armed copy fault may hit the tail-ring backup there */
        check(v, "round_begin fault");
        disarm(v);
        s = dhs_round_begin(v->ctx, n, reqs, v->round_K);
    }
    check(v, "round_begin");
    if (s != DHS_OK) { unexpected(v, "dhs_round_begin", s); return; }
    for (int32_t i = 0; i < n; i++) write_block(v, &v->rq[slots[i]], v->round_K[i]);
    int32_t last_group = -1;
    for (int c = 0; c < v->n_cons; c++) {
        const vcons *cs = &v->cons[c];
        if (cs->kind == DHS_CONSUMER_FOLLOW) continue; /* served by the producer's call */
        if (cs->kind == DHS_CONSUMER_REUSE) { check_locations(v, cs->group, "reuse"); continue; }
        if (last_group >= 0 && last_group != cs->group) {
            check_locations(v, last_group, "group end");
            maybe_fault(v);
            dhs_status s2 = dhs_group_done(v->ctx, last_group);
            if (is_fault_status(s2)) {
                check(v, "group_done fault");
                disarm(v);
                s2 = dhs_group_done(v->ctx, last_group);
            }
            if (s2 != DHS_OK) unexpected(v, "dhs_group_done", s2);
            check(v, "group_done");
        }
        if (cs->kind == DHS_CONSUMER_REINDEX) {
            /* the earlier consumer's locations must stay valid after the reindex */
            int32_t ns = grp_nsrc(v, cs->group);
            size_t nsel = (size_t)v->o->requests * v->o->spec * v->o->k;
            memcpy(v->psel, v->sel[cs->group], nsel * sizeof(int32_t));
            memcpy(v->ploc, v->loc[cs->group], nsel * (size_t)ns * sizeof(int32_t));
            resolve_group(v, cs->group);
            check_locations_of(v, cs->group, v->psel, v->ploc, "earlier consumer after reindex");
            last_group = cs->group;
            continue;
        }
        resolve_group(v, cs->group);
        last_group = cs->group;
    }
    (void)full_check;
    int32_t acc[1024];
    for (int32_t i = 0; i < n; i++) acc[i] = (int32_t)dhs_rng_below(&v->rng, v->round_K[i]);
    const int early = v->o->round_end == 1 || (v->o->round_end == 2 && dhs_rng_below(&v->rng, 2));
    s = early ? dhs_round_end_early(v->ctx, acc) : dhs_round_end(v->ctx, acc);
    check(v, "round_end");
    if (s != DHS_OK) unexpected(v, early ? "dhs_round_end_early" : "dhs_round_end", s);
    else v->res->early_ends += (uint64_t)early;
}

/* before closing: every committed row must still be recoverable (no loss) */
static void sweep_request(vstate *v, int32_t slot)
{
    vreq *r = &v->rq[slot];
    int32_t k = v->o->k;
    for (int32_t g = 0; g < v->arch.n_groups; g++) {
        int64_t n;
        dhs_request_positions(v->ctx, r->h, &n);
        int64_t rows = n / v->grp_m[g];
        for (int64_t base = 0; base < rows; base += k) {
            int32_t one = 1;
            dhs_status sb = dhs_round_begin(v->ctx, 1, &r->h, &one);
            if (is_fault_status(sb)) {
                disarm(v);
                sb = dhs_round_begin(v->ctx, 1, &r->h, &one);
            }
            if (sb != DHS_OK) { violation(v, "sweep round_begin"); return; }
            v->n_round = 1;
            v->round_slots[0] = slot;
            v->round_K[0] = 1;
            write_block(v, r, 1);
            int32_t *sel = v->sel[g];
            for (int32_t i = 0; i < k; i++) sel[i] = base + i < rows ? (int32_t)(base + i) : -1;
            dhs_resolve_item it = {r->h, 1, sel, v->loc[g]};
            dhs_status s = dhs_resolve(v->ctx, g, k, 1, &it);
            if (is_fault_status(s)) {
                disarm(v);
                s = dhs_resolve(v->ctx, g, k, 1, &it);
            }
            if (s != DHS_OK) unexpected(v, "sweep dhs_resolve", s);
            else {
                uint64_t before = v->res->wrong_bytes;
                check_locations(v, g, "sweep");
                v->res->lost_rows += v->res->wrong_bytes - before;
            }
            int32_t acc = 0;
            if (dhs_round_end(v->ctx, &acc) != DHS_OK) violation(v, "sweep round_end");
            check(v, "sweep");
        }
    }
}

static void close_request(vstate *v, int32_t slot)
{
    vreq *r = &v->rq[slot];
    dhs_status s = dhs_request_close(v->ctx, r->h);
    check(v, "request_close");
    if (s != DHS_OK) unexpected(v, "dhs_request_close", s);
    /* a closed handle is refused */
    int64_t n;
    if (dhs_request_positions(v->ctx, r->h, &n) == DHS_OK) violation(v, "closed handle still accepted");
    r->open = 0;
}

verify_opts verify_opts_default(void)
{
    verify_opts o;
    memset(&o, 0, sizeof o);
    o.requests = 32;
    o.steps = 300;
    o.seed = 1;
    o.k = 64;
    o.hot_rows = 128;
    o.page_rows = 16;
    o.row_bytes = 64;
    o.max_prefix = 1500;
    o.spec = 1;
    o.compress = 1;
    o.layout = VERIFY_LAYOUT_OWN;
    o.policy = DHS_POLICY_LRU;
    o.reclaim_order = DHS_RECLAIM_MOST_PAGES;
    o.check_every = 1;
    return o;
}

int verify_run(const verify_opts *o, verify_result *res)
{
    memset(res, 0, sizeof *res);
    vstate v;
    memset(&v, 0, sizeof v);
    v.o = o;
    v.res = res;
    v.rng = dhs_mix64(o->seed ^ 0xd1b54a32d192ed03ull);
    if (o->requests < 1 || o->requests > 1024 || o->k < 1 || o->spec < 1 || o->row_bytes % 16 || o->row_bytes < 16)
        return -1;
    build_arch(&v);
    dhs_cpu_options co = {.async_delay = o->async_delay, .random_order = o->random_order, .seed = o->seed};
    if ((o->use_cuda ? dhs_backend_cuda_create(0, &v.be) : dhs_backend_cpu_create(&co, &v.be)) != DHS_OK) return -1;
    if (o->use_cuda && o->corrupt_at_step) { dhs_backend_destroy(v.be); return -1; } /* pool is device memory */
    dhs_config c = dhs_config_default();
    c.max_requests = o->requests;
    c.sel_k = o->k;
    c.spec_width = o->spec;
    c.hot_rows = o->hot_rows;
    c.page_rows = o->page_rows;
    c.tail_rows = o->page_rows * ((4 * o->spec + 2 * o->k / 4 + o->page_rows - 1) / o->page_rows + 1);
    c.max_rows = o->max_prefix + (int64_t)(o->steps + 4 * (o->steps / 4 + 10) + 64) * o->spec + 64;
    c.policy = o->resolver == DHS_RESOLVER_DEVICE ? DHS_POLICY_CLOCK : o->policy;
    c.resolver = o->resolver;
    c.reclaim_order = o->reclaim_order;
    c.repop_pages = 8;
    int32_t ng = v.arch.n_groups;
    v.grp_m = calloc((size_t)ng, sizeof *v.grp_m);
    v.grp_rows = calloc((size_t)ng, sizeof *v.grp_rows);
    int64_t opt_pages = 0;
    for (int32_t g = 0; g < ng; g++) {
        int32_t ns = grp_nsrc(&v, g);
        for (int s = 0; s < v.arch.n_sources; s++)
            if (v.arch.sources[s].group == g) v.grp_m[g] = (int32_t)v.arch.sources[s].m;
        v.grp_rows[g] = c.max_rows / v.grp_m[g] + 2;
        opt_pages += (int64_t)ns * (o->max_prefix / v.grp_m[g]) / c.page_rows;
    }
    /* the library says what it reserves; the budget adds room for requests
       and history: all of it at low pressure, little at high pressure */
    c.reserve_bytes = o->pressure ? (uint64_t)c.page_rows * o->row_bytes * 4 : 0;
    dhs_sizes z;
    if (dhs_config_sizes(&v.arch, &c, &z) != DHS_OK) { dhs_backend_destroy(v.be); free(v.grp_m); free(v.grp_rows); return -1; }
    uint64_t opt_bytes = (uint64_t)opt_pages * z.page_bytes, fixed = z.staging_bytes + z.reserve_bytes;
    c.device_bytes = o->pressure ? fixed + z.request_bytes * (uint64_t)(o->requests / 2 > 2 ? o->requests / 2 : 2) + opt_bytes
                                 : fixed + (z.request_bytes + opt_bytes) * (uint64_t)o->requests + 64 * z.page_bytes;
    v.cfg = c;
    dhs_status s = dhs_ctx_create(&v.arch, &c, v.be, &v.ctx);
    if (s != DHS_OK) { dhs_backend_destroy(v.be); free(v.grp_m); free(v.grp_rows); return -1; }
    int64_t max_rows_any = c.max_rows + 64;
    v.buf = aligned_alloc(64, (size_t)(max_rows_any * v.arch.n_sources + 64) * (size_t)o->row_bytes);
    v.buf2 = aligned_alloc(64, (size_t)o->row_bytes * 2 + 64);
    v.rq = calloc((size_t)o->requests, sizeof *v.rq);
    v.sel = calloc((size_t)ng, sizeof *v.sel);
    v.loc = calloc((size_t)ng, sizeof *v.loc);
    v.round_slots = calloc((size_t)o->requests, sizeof(int32_t));
    v.round_K = calloc((size_t)o->requests, sizeof(int32_t));
    v.psel = calloc((size_t)o->requests * o->spec * o->k, sizeof(int32_t));
    v.ploc = calloc((size_t)o->requests * o->spec * o->k * DHS_MAX_SOURCES, sizeof(int32_t));
    for (int32_t g = 0; g < ng; g++) {
        v.sel[g] = calloc((size_t)o->requests * o->spec * o->k, sizeof(int32_t));
        v.loc[g] = calloc((size_t)o->requests * o->spec * o->k * grp_nsrc(&v, g), sizeof(int32_t));
    }
    for (int32_t i = 0; i < o->requests; i++) {
        v.rq[i].ver = calloc((size_t)ng, sizeof(uint32_t *));
        for (int32_t g = 0; g < ng; g++) v.rq[i].ver[g] = calloc((size_t)v.grp_rows[g], sizeof(uint32_t));
    }
    int32_t *slots = calloc((size_t)o->requests, sizeof(int32_t));
    double t_progress = dhs_wall_s();
    for (int32_t step = 0; step < o->steps; step++) {
        v.step = step;
        /* progress: 1 a line rewritten in place (a terminal), 2 a line every 5 s */
        if (o->progress == 1 && step % 20 == 0) fprintf(stderr, "\rverify: step %d/%d", step, o->steps);
        if (o->progress == 2 && dhs_wall_s() - t_progress >= 5.0) {
            t_progress = dhs_wall_s();
            fprintf(stderr, "verify: step %d/%d\n", step, o->steps);
        }
        /* arrivals: every free slot tries to admit a new request */
        for (int32_t i = 0; i < o->requests; i++)
            if (!v.rq[i].open && dhs_rng_below(&v.rng, 3) == 0) open_request(&v, i);
        int32_t n = 0;
        for (int32_t i = 0; i < o->requests; i++)
            if (v.rq[i].open && dhs_rng_below(&v.rng, 10) != 0) slots[n++] = i;
        run_round(&v, slots, n, 0);
        /* departures */
        for (int32_t i = 0; i < o->requests; i++) {
            if (!v.rq[i].open || --v.rq[i].life > 0) continue;
            sweep_request(&v, i);
            close_request(&v, i);
        }
        if (res->violations > 50) break;
    }
    if (o->progress == 1) fprintf(stderr, "\rverify: done%20s\n", "");
    for (int32_t i = 0; i < o->requests; i++)
        if (v.rq[i].open) { sweep_request(&v, i); close_request(&v, i); }
    dhs_sync(v.ctx);
    check(&v, "sync");
    uint64_t checked = res->st.entries;
    dhs_get_stats(v.ctx, &res->st);
    (void)checked;
    res->faults_injected = dhs_backend_faults_injected(v.be);
    if (res->st.host_rows_copied != res->st.distinct_misses) violation(&v, "host_rows_copied != distinct_misses");
    dhs_mem mem;
    dhs_get_mem(v.ctx, &mem);
    if (mem.requests_open != 0 || mem.optional_bytes != 0) violation(&v, "memory still held after every request closed");
    dhs_ctx_destroy(v.ctx);
    dhs_backend_destroy(v.be);
    for (int32_t i = 0; i < o->requests; i++) {
        for (int32_t g = 0; g < ng; g++) free(v.rq[i].ver[g]);
        free(v.rq[i].ver);
    }
    for (int32_t g = 0; g < ng; g++) { free(v.sel[g]); free(v.loc[g]); }
    free(v.sel); free(v.loc); free(v.psel); free(v.ploc); free(v.rq); free(v.buf); free(v.buf2); free(slots);
    free(v.round_slots); free(v.round_K); free(v.grp_m); free(v.grp_rows);
    return res->violations ? 1 : 0;
}

void verify_print_json(FILE *f, const verify_opts *o, const verify_result *r)
{
    const dhs_stats *s = &r->st;
    static const char *layouts[] = {"own", "glm", "v41"};
    fprintf(f,
            "{\"seed\": %llu, \"backend\": \"%s\", \"resolver\": \"%s\", \"layout\": \"%s\", \"policy\": \"%s\", \"requests\": %d, \"steps\": %d, "
            "\"k\": %d, \"hot_rows\": %d, \"spec\": %d, \"compress\": %d, \"pressure\": \"%s\", \"async_delay\": %d, \"faults\": %g,\n"
            " \"round_end\": \"%s\", \"early_ends\": %llu,\n"
            " \"entries\": %llu, \"violations\": %llu, \"census\": {\"direct\": %llu, \"hot\": %llu, \"host\": %llu},\n"
            " \"distinct_misses\": %llu, \"host_rows_copied\": %llu, \"invariant_checks\": %llu, \"wrong_bytes\": %llu,\n"
            " \"admissions\": %llu, \"waits\": %llu, \"reclaims\": %llu, \"reclaimed_pages\": %llu, \"repopulated_pages\": %llu,\n"
            " \"retired_pages\": %llu, \"faults_injected\": %llu, \"lost_rows\": %llu, \"rounds\": %llu, \"accepted\": %llu,\n"
            " \"rejected_rows\": %llu, \"staging_rows\": %llu, \"staging_rows_peak\": %llu, \"backup_rows\": %llu,\n"
            " \"first_violation\": \"%s\"}\n",
            (unsigned long long)o->seed, o->use_cuda ? "cuda" : "cpu", dhs_resolver_str(o->resolver), layouts[o->layout],
            dhs_policy_str(o->resolver == DHS_RESOLVER_DEVICE ? DHS_POLICY_CLOCK : o->policy), o->requests, o->steps, o->k,
            o->hot_rows, o->spec, o->compress, o->pressure ? "high" : "low", o->async_delay, o->faults,
            o->round_end == 1 ? "early" : o->round_end == 2 ? "mixed" : "wait", (unsigned long long)r->early_ends,
            (unsigned long long)s->entries, (unsigned long long)r->violations, (unsigned long long)s->census_direct,
            (unsigned long long)s->census_hot, (unsigned long long)s->census_host, (unsigned long long)s->distinct_misses,
            (unsigned long long)s->host_rows_copied, (unsigned long long)r->checks, (unsigned long long)r->wrong_bytes,
            (unsigned long long)s->admissions, (unsigned long long)s->waits, (unsigned long long)s->reclaims,
            (unsigned long long)s->reclaimed_pages, (unsigned long long)s->repopulated_pages,
            (unsigned long long)s->retired_pages, (unsigned long long)r->faults_injected, (unsigned long long)r->lost_rows,
            (unsigned long long)s->rounds, (unsigned long long)s->accepted, (unsigned long long)s->rejected_rows,
            (unsigned long long)s->staging_rows, (unsigned long long)s->staging_rows_peak, (unsigned long long)s->backup_rows,
            r->first_violation);
}
