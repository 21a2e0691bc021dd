/* test_residency.c - load-adaptive residency (DESIGN §3) as a property test.
 *
 * Random event sequences - admissions, imports (DEVICE / HOST, and the two
 * phases begin .. commit / abort of a host import, left open across other
 * events: rounds naming the importing request must be refused), decode rounds
 * (block writes, resolves of two groups with speculation, REINDEX, group_done,
 * acceptance), spot checks of whole histories, closes and injected faults -
 * run on the CPU backend with async_delay 0..4, in order and in random order,
 * under every replacement policy and reclaim order. After every API call the
 * invariants I1-I4 are checked (dhs_check_invariants, and M_req + M_opt +
 * M_res <= M from dhs_get_mem); the bytes at every returned location are
 * compared with the model; every committed row of a request is read back
 * before it closes (no loss). The pool is small enough that admissions must
 * reclaim, some must wait (DHS_WAIT changes nothing: dhs_get_mem identical),
 * and freed pages are repopulated; the test requires each to have happened.
 *
 * Some opens are sessions on a shared prefix of a live request
 * (dhs_request_open_shared): the model gives their prefix rows the parent's
 * bytes, and the parent may close first.
 *
 * Crafted scenarios: the three reclaim orders take different victims; an
 * admission while a round is open leaves that round's locations valid.
 *
 * Scale: 200,000 top-level events in the normal build; DHS_TEST_SCALE
 * multiplies, and sanitizer builds run 0.1 of it (see th_scale).
 * Soak: DHS_SOAK_EVENTS=N runs at least N events instead (phases of 10,000
 * across rotating seeds and configurations), printing events/s and seeds;
 * see docs/TESTING.md.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include "test_help.h"

static uint64_t g_seed;

#define NREQ 5
#define KSEL 16
#define KMAX 3

typedef struct {
    long events, api_calls, rounds, opens, waits, imports, closes, faults_armed, fault_hits, sweeps, mid_round;
    long begins, commits, aborts, refused_rounds, closed_open;
    long shares, share_waits; /* requests opened on a shared prefix, and shared opens that waited */
    long wrong_bytes, lost_rows, inv_fail, mem_fail, wait_changed, unexpected;
    uint64_t reclaims, repopulated, retired, admissions;
} rstats;

typedef struct {
    th_env e;
    uint64_t rng;
    rstats *rs;
    int stage[NREQ];            /* 0 free, 1 opened (not imported), 2 live, 3 two-phase import open */
    void *hr[NREQ][DHS_MAX_SOURCES]; /* stage 3: where begin said the rows go */
    int64_t imp_n[NREQ];        /* stage 3: positions of the open import */
    int armed;                  /* a fault is armed for the next calls */
} rt;

static void inv(rt *t, const char *after)
{
    char msg[256];
    t->rs->api_calls++;
    if (dhs_check_invariants(t->e.ctx, msg, sizeof msg)) {
        if (t->rs->inv_fail++ < 5) printf("invariants after %s: %s\n", after, msg);
    }
    dhs_mem m;
    dhs_get_mem(t->e.ctx, &m);
    if (m.required_bytes + m.optional_bytes + m.reserve_bytes > m.pool_bytes) {
        if (t->rs->mem_fail++ < 5)
            printf("I4 after %s: M_req %llu + M_opt %llu + M_res %llu > M %llu\n", after, (unsigned long long)m.required_bytes,
                   (unsigned long long)m.optional_bytes, (unsigned long long)m.reserve_bytes, (unsigned long long)m.pool_bytes);
    }
}

static int is_fault(dhs_status s) { return s == DHS_ERR_NOMEM || s == DHS_ERR_DEVICE_NOMEM || s == DHS_ERR_BACKEND; }

static void disarm(rt *t)
{
    for (int k = 0; k < DHS_FAULT_COUNT_; k++) dhs_backend_fault_at(t->e.be, (dhs_fault_kind)k, 0);
    t->armed = 0;
}

static void unexpected(rt *t, const char *what, dhs_status s)
{
    if (t->rs->unexpected++ < 10) printf("unexpected: %s returned %s\n", what, dhs_status_str(s));
}

/* A call that may meet an armed fault: a fault status is followed by a check, a disarm and one retry. */
#define CALL(t, s, what, expr)                                       \
    do {                                                             \
        s = (expr);                                                  \
        inv((t), what);                                              \
        if (is_fault(s)) {                                           \
            (t)->rs->fault_hits++;                                   \
            disarm(t);                                               \
            s = (expr);                                              \
            inv((t), what " (retry)");                               \
        }                                                            \
    } while (0)

static int mem_same(const dhs_mem *a, const dhs_mem *b)
{
    return a->pool_bytes == b->pool_bytes && a->required_bytes == b->required_bytes && a->optional_bytes == b->optional_bytes && a->reserve_bytes == b->reserve_bytes &&
           a->device_bytes_allocated == b->device_bytes_allocated && a->host_bytes_allocated == b->host_bytes_allocated &&
           a->pages_total == b->pages_total && a->pages_free == b->pages_free && a->requests_open == b->requests_open;
}

static void ev_open(rt *t, int q)
{
    dhs_mem m0, m1;
    dhs_get_mem(t->e.ctx, &m0);
    int64_t expect = 40 + dhs_rng_below(&t->rng, 300);
    dhs_status s;
    CALL(t, s, "open", th_open(&t->e, q, expect));
    t->rs->opens++;
    if (s == DHS_WAIT) {
        t->rs->waits++;
        dhs_get_mem(t->e.ctx, &m1);
        if (!mem_same(&m0, &m1)) {
            if (t->rs->wait_changed++ < 5)
                printf("DHS_WAIT changed memory: M_req %llu -> %llu, M_opt %llu -> %llu, free %lld -> %lld, open %d -> %d\n",
                       (unsigned long long)m0.required_bytes, (unsigned long long)m1.required_bytes, (unsigned long long)m0.optional_bytes,
                       (unsigned long long)m1.optional_bytes, (long long)m0.pages_free, (long long)m1.pages_free, m0.requests_open,
                       m1.requests_open);
        }
        return;
    }
    if (s != DHS_OK) { unexpected(t, "open", s); return; }
    t->stage[q] = 1;
}

/* Writes rows [0, ceil(n / m)) of every source of request q where begin said (version 0, or garbage
   for a transfer that will be aborted); rows are the pool stride apart. */
static void fill_open_import(rt *t, int q, int garbage)
{
    th_env *e = &t->e;
    for (int32_t src = 0; src < e->arch.n_sources; src++) {
        int64_t m = e->arch.sources[src].m, nr = (t->imp_n[q] + m - 1) / m;
        for (int64_t row = 0; row < nr && t->hr[q][src]; row++) {
            uint8_t *p = (uint8_t *)t->hr[q][src] + (size_t)row * e->stride;
            if (garbage) memset(p, 0xC3, e->arch.sources[src].row_bytes);
            else th_fill_row(p, e->arch.sources[src].row_bytes, e->rq[q].uid, src, row, 0);
        }
    }
}

/* Completes (commit, after the rows arrived) or aborts request q's open two-phase import. */
static void ev_finish(rt *t, int q)
{
    dhs_status s;
    if (dhs_rng_below(&t->rng, 4) == 0) {
        fill_open_import(t, q, 1);
        CALL(t, s, "import_abort", dhs_request_import_abort(t->e.ctx, t->e.rq[q].h));
        if (s != DHS_OK) { unexpected(t, "import_abort", s); return; }
        t->rs->aborts++;
        t->stage[q] = 1;
        return;
    }
    fill_open_import(t, q, 0);
    CALL(t, s, "import_commit", dhs_request_import_commit(t->e.ctx, t->e.rq[q].h));
    if (s != DHS_OK) { unexpected(t, "import_commit", s); return; }
    t->rs->commits++;
    t->e.rq[q].n = t->imp_n[q];
    t->stage[q] = 2;
}

static void ev_import(rt *t, int q)
{
    int64_t n = dhs_rng_below(&t->rng, 10) == 0 ? 0 : 1 + dhs_rng_below(&t->rng, 300);
    unsigned flags = dhs_rng_below(&t->rng, 10) < 6 ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST;
    dhs_status s;
    if (dhs_rng_below(&t->rng, 10) < 3) { /* two phases; left open until a later event on the slot */
        CALL(t, s, "import_begin", dhs_request_import_begin(t->e.ctx, t->e.rq[q].h, n, DHS_IMPORT_HOST, t->hr[q]));
        t->rs->begins++;
        if (s != DHS_OK) { unexpected(t, "import_begin", s); return; }
        t->imp_n[q] = n;
        t->stage[q] = 3;
        if (n > 0) fill_open_import(t, q, 1); /* half-received bytes are never visible */
        if (dhs_rng_below(&t->rng, 2)) ev_finish(t, q);
        return;
    }
    CALL(t, s, "import", th_import(&t->e, q, n, flags));
    t->rs->imports++;
    if (s != DHS_OK) { unexpected(t, "import", s); return; }
    t->stage[q] = 2;
}

/* A session on a shared prefix: request q (free slot) opened on a prefix of a live request, ending on
   a row of group 1 (m = 4) or at all of the parent's positions */
static void ev_share(rt *t, int q)
{
    int p = -1;
    for (int i = 0, s0 = (int)dhs_rng_below(&t->rng, NREQ); i < NREQ && p < 0; i++)
        if (t->stage[(s0 + i) % NREQ] == 2 && (s0 + i) % NREQ != q) p = (s0 + i) % NREQ;
    if (p < 0) { ev_open(t, q); return; }
    const int64_t pn = t->e.rq[p].n;
    int64_t P = dhs_rng_below(&t->rng, 3) == 0 ? pn : dhs_rng_below(&t->rng, pn + 1) & ~(int64_t)3;
    int64_t expect = P + dhs_rng_below(&t->rng, 200);
    if (expect > t->e.cfg.max_rows) expect = t->e.cfg.max_rows;
    dhs_mem m0, m1;
    dhs_get_mem(t->e.ctx, &m0);
    dhs_status s;
    CALL(t, s, "open_shared", th_open_shared(&t->e, q, p, P, expect));
    if (s == DHS_WAIT) {
        t->rs->share_waits++;
        dhs_get_mem(t->e.ctx, &m1);
        if (!mem_same(&m0, &m1) && t->rs->wait_changed++ < 5) printf("DHS_WAIT of a shared open changed memory\n");
        return;
    }
    if (s != DHS_OK) { unexpected(t, "open_shared", s); return; }
    t->rs->shares++;
    t->stage[q] = 2;
}

static void ev_close(rt *t, int q, int sweep)
{
    if (sweep) {
        disarm(t); /* the read-back itself runs without faults */
        long lost = th_sweep(&t->e, q, KSEL);
        inv(t, "sweep");
        t->rs->lost_rows += lost;
        t->rs->sweeps++;
        if (lost && t->rs->lost_rows == lost) printf("request slot %d: %ld rows lost\n", q, lost);
    }
    dhs_status s;
    CALL(t, s, "close", th_close(&t->e, q));
    if (s != DHS_OK) unexpected(t, "close", s);
    t->stage[q] = 0;
    t->rs->closes++;
}

/* random visible selection of query j (rows of a group with m positions per row) */
static void gen_sel(rt *t, const th_req *r, int64_t m, int32_t j, int32_t *out)
{
    int64_t vis = (r->n + j + 1) / m;
    for (int32_t i = 0; i < KSEL; i++) {
        int64_t x = dhs_rng_below(&t->rng, 16);
        if (vis <= 0 || x == 0) out[i] = -1;
        else if (x < 5) out[i] = (int32_t)(vis - 1 - dhs_rng_below(&t->rng, vis < 10 ? vis : 10));
        else if (x < 7 && i > 0) out[i] = out[dhs_rng_below(&t->rng, i)];
        else if (x < 11) out[i] = (int32_t)dhs_rng_below(&t->rng, vis < 24 ? vis : 24); /* a reused set */
        else out[i] = (int32_t)dhs_rng_below(&t->rng, vis);
    }
}

static void ev_round(rt *t)
{
    int32_t slots[NREQ], K[NREQ], n = 0;
    dhs_req h[NREQ];
    for (int q = 0; q < NREQ; q++)
        if (t->stage[q] == 2 && dhs_rng_below(&t->rng, 5) != 0 && t->e.rq[q].n + KMAX + 2 * KSEL < t->e.cfg.max_rows) {
            slots[n] = q;
            h[n] = t->e.rq[q].h;
            K[n] = 1 + (int32_t)dhs_rng_below(&t->rng, KMAX);
            n++;
        }
    t->rs->rounds++;
    dhs_status s;
    for (int q = 0; q < NREQ && n < NREQ; q++)
        if (t->stage[q] == 3 && dhs_rng_below(&t->rng, 3) == 0) { /* a request with an import open: refused */
            h[n] = t->e.rq[q].h;
            K[n] = 1;
            s = dhs_round_begin(t->e.ctx, n + 1, h, K);
            inv(t, "round_begin (importing)");
            if (s != DHS_ERR_STATE) unexpected(t, "round_begin naming an open import", s);
            if (s == DHS_OK) { /* keep the harness consistent: end the round it should not have opened */
                int32_t acc0[NREQ] = {0};
                dhs_round_end(t->e.ctx, acc0);
                return;
            }
            t->rs->refused_rounds++;
            break;
        }
    CALL(t, s, "round_begin", dhs_round_begin(t->e.ctx, n, h, K));
    if (s != DHS_OK) { unexpected(t, "round_begin", s); return; }
    for (int i = 0; i < n; i++) {
        CALL(t, s, "write_rows", th_write_block(&t->e, slots[i], K[i]));
        if (s != DHS_OK) unexpected(t, "write_rows", s);
    }
    static int32_t sel[2][NREQ][KMAX * KSEL], loc[2][NREQ][2 * KMAX * KSEL];
    for (int32_t g = 0; g < 2 && n > 0; g++) {
        int64_t m = t->e.m_of[g];
        int calls = g == 0 ? 1 + (int)dhs_rng_below(&t->rng, 2) : 1; /* group 0: OWN, sometimes REINDEX */
        for (int c = 0; c < calls; c++) {
            dhs_resolve_item items[NREQ];
            for (int i = 0; i < n; i++) {
                th_req *r = &t->e.rq[slots[i]];
                for (int32_t j = 0; j < K[i]; j++) gen_sel(t, r, m, j, sel[c][i] + j * KSEL);
                items[i] = (dhs_resolve_item){r->h, K[i], sel[c][i], loc[c][i]};
            }
            CALL(t, s, "resolve", dhs_resolve(t->e.ctx, g, KSEL, n, items));
            if (s != DHS_OK) { unexpected(t, "resolve", s); continue; }
            for (int cc = 0; cc <= c; cc++) /* a REINDEX keeps the earlier call's locations valid */
                for (int i = 0; i < n; i++) t->rs->wrong_bytes += th_check_item(&t->e, slots[i], g, K[i], KSEL, sel[cc][i], loc[cc][i]);
        }
        if (g == 0) {
            CALL(t, s, "group_done", dhs_group_done(t->e.ctx, 0));
            if (s != DHS_OK) unexpected(t, "group_done", s);
        }
    }
    /* sometimes a request outside the round arrives, imports or leaves while the round is open; the
       round's group-1 locations (its consumers may still run) must keep their bytes */
    if (n > 0 && dhs_rng_below(&t->rng, 8) == 0) {
        int q = (int)dhs_rng_below(&t->rng, NREQ), in = 0;
        for (int i = 0; i < n; i++) in |= slots[i] == q;
        if (!in) {
            if (t->stage[q] == 0) ev_open(t, q);
            if (t->stage[q] == 1) ev_import(t, q);
            else if (t->stage[q] == 3) ev_finish(t, q);
            else if (t->stage[q] == 2 && dhs_rng_below(&t->rng, 2)) ev_close(t, q, 0);
            t->rs->mid_round++;
            for (int i = 0; i < n; i++) t->rs->wrong_bytes += th_check_item(&t->e, slots[i], 1, K[i], KSEL, sel[0][i], loc[0][i]);
        }
    }
    int32_t acc[NREQ];
    for (int i = 0; i < n; i++) acc[i] = (int32_t)dhs_rng_below(&t->rng, K[i]);
    CALL(t, s, "round_end", dhs_round_end(t->e.ctx, acc));
    if (s != DHS_OK) { unexpected(t, "round_end", s); return; }
    for (int i = 0; i < n; i++) t->e.rq[slots[i]].n += acc[i] + 1;
}

/* spot check: k random committed rows of one request, from anywhere in its history */
static void ev_spot(rt *t, int q)
{
    th_req *r = &t->e.rq[q];
    if (r->n + 2 >= t->e.cfg.max_rows) return;
    int32_t one = 1, acc = 0;
    dhs_status s;
    CALL(t, s, "round_begin", dhs_round_begin(t->e.ctx, 1, &r->h, &one));
    if (s != DHS_OK) { unexpected(t, "spot round_begin", s); return; }
    CALL(t, s, "write_rows", th_write_block(&t->e, q, 1));
    for (int32_t g = 0; g < 2; g++) {
        int64_t rows = r->n / t->e.m_of[g];
        int32_t sel[KSEL], loc[2 * KSEL];
        for (int i = 0; i < KSEL; i++) sel[i] = rows > 0 ? (int32_t)dhs_rng_below(&t->rng, rows) : -1;
        dhs_resolve_item it = {r->h, 1, sel, loc};
        CALL(t, s, "resolve", dhs_resolve(t->e.ctx, g, KSEL, 1, &it));
        if (s != DHS_OK) { unexpected(t, "spot resolve", s); continue; }
        t->rs->lost_rows += th_check_item(&t->e, q, g, 1, KSEL, sel, loc);
    }
    CALL(t, s, "round_end", dhs_round_end(t->e.ctx, &acc));
    if (s == DHS_OK) r->n++;
}

static void run_phase(rstats *rs, long events, int async_delay, int random_order, dhs_policy pol, dhs_reclaim_order ord, uint64_t seed)
{
    rt t;
    memset(&t, 0, sizeof t);
    t.rs = rs;
    t.rng = seed;
    /* group 0: two sources (OWN + FOLLOW), m = 1; group 1: one source, m = 4 (OWN + REINDEX declared) */
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 2;
    a.n_sources = 3;
    a.sources[0] = (dhs_source_desc){32, 1, 0};
    a.sources[1] = (dhs_source_desc){16, 1, 0};
    a.sources[2] = (dhs_source_desc){32, 4, 1};
    a.n_consumers = 5;
    a.consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a.consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 1, 0};
    a.consumers[2] = (dhs_consumer_desc){DHS_CONSUMER_REINDEX, 0, 0};
    a.consumers[3] = (dhs_consumer_desc){DHS_CONSUMER_REUSE, 0, 0};
    a.consumers[4] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 2, 1};
    dhs_config c = dhs_config_default();
    c.max_requests = NREQ;
    c.sel_k = KSEL;
    c.spec_width = KMAX;
    c.hot_rows = 24;
    c.tail_rows = 16;
    c.page_rows = 8;
    c.max_rows = 420;
    c.policy = pol;
    c.reclaim_order = ord;
    c.repop_pages = 1 + (int32_t)(seed % 5);
    /* staging: 2 arenas x ceil(5 x 96 / 8) = 120 pages; a request needs (24+16)/8 x 3 = 15 pages.
       Room for the arenas, a reserve of 2 pages, 3 requests' required pages and 24 optional pages:
       admitting a 4th request reclaims, a 5th usually waits. */
    int64_t pages = 120 + 2 + 3 * 15 + 24;
    c.device_bytes = (uint64_t)pages * 8 * 32;
    c.reserve_bytes = 2ull * 8 * 32;
    dhs_cpu_options o = {.async_delay = async_delay, .random_order = random_order, .seed = seed};
    if (th_env_init(&t.e, &a, &c, &o) != DHS_OK) {
        printf("phase: ctx_create failed\n");
        th_failed++;
        return;
    }
    inv(&t, "create");
    for (long ev = 0; ev < events; ev++) {
        rs->events++;
        int64_t x = dhs_rng_below(&t.rng, 100);
        int q = (int)dhs_rng_below(&t.rng, NREQ);
        if (x < 3 && !t.armed) {
            /* arm a fault for the next call(s); a fault status is retried once by CALL */
            dhs_backend_fault_at(t.e.be, (dhs_fault_kind)dhs_rng_below(&t.rng, DHS_FAULT_COUNT_), 1 + (uint64_t)dhs_rng_below(&t.rng, 3));
            t.armed = 1;
            rs->faults_armed++;
        } else if (x < 12) {
            if (t.stage[q] == 0 && dhs_rng_below(&t.rng, 3) == 0) ev_share(&t, q);
            else if (t.stage[q] == 0) ev_open(&t, q);
            else if (t.stage[q] == 1) ev_import(&t, q);
            else if (t.stage[q] == 3) ev_finish(&t, q);
            else ev_round(&t);
        } else if (x < 15) {
            if (t.stage[q] == 2) ev_close(&t, q, dhs_rng_below(&t.rng, 3) == 0);
            else if (t.stage[q] == 3) { /* close with the import open */
                ev_close(&t, q, 0);
                rs->closed_open++;
            }
            else if (t.stage[q] == 1) ev_import(&t, q);
            else ev_open(&t, q);
        } else if (x < 19) {
            if (t.stage[q] == 2) ev_spot(&t, q);
            else ev_round(&t);
        } else {
            ev_round(&t);
        }
        /* requests near their end of history close (after a full read-back) */
        for (int i = 0; i < NREQ; i++)
            if (t.stage[i] == 2 && t.e.rq[i].n + KMAX + 2 * KSEL + 8 >= c.max_rows) ev_close(&t, i, 1);
        if (rs->inv_fail + rs->wrong_bytes + rs->lost_rows + rs->unexpected > 50) break;
    }
    disarm(&t);
    for (int i = 0; i < NREQ; i++)
        if (t.stage[i] == 2) ev_close(&t, i, 1);
        else if (t.stage[i] == 1 || t.stage[i] == 3) ev_close(&t, i, 0);
    CHECK_ST(dhs_sync(t.e.ctx), DHS_OK);
    inv(&t, "sync");
    dhs_mem m;
    dhs_get_mem(t.e.ctx, &m);
    CHECKF(m.requests_open == 0 && m.optional_bytes == 0 && m.required_bytes == 120ull * 8 * 32, "memory held after every close: M_req %llu M_opt %llu",
           (unsigned long long)m.required_bytes, (unsigned long long)m.optional_bytes);
    dhs_stats st;
    dhs_get_stats(t.e.ctx, &st);
    rs->reclaims += st.reclaims;
    rs->repopulated += st.repopulated_pages;
    rs->retired += st.retired_pages;
    rs->admissions += st.admissions;
    CHECKF(st.host_rows_copied == st.distinct_misses, "host_rows_copied %llu != distinct_misses %llu",
           (unsigned long long)st.host_rows_copied, (unsigned long long)st.distinct_misses);
    th_env_free(&t.e);
}

/* Soak mode: DHS_SOAK_EVENTS=N (N > 0) replaces the CI size with at least N events, run as phases of
   SOAK_PHASE_EVENTS events each; phase ph uses seed dhs_mix64(seed + ph) and rotates async delay (0..4),
   in/random order, policy and reclaim order exactly as the CI phases do, so the same DHS_TEST_SEED
   and N replay the same run. Progress (events, events/s, phase seed) is printed about every 30 s.
   DHS_SOAK_JOBS=J (J > 1) forks J worker processes; worker j runs phases j, j+J, j+2J, ... and sends
   its counters back through a pipe, so the phases, their seeds and the totals are those of the serial
   run (only the order in which phases run differs); a worker that dies counts as a failure.
   DHS_SOAK_PHASES=A:B runs only phases A <= ph < B of that run (a long soak split over machines or
   resumed: the pieces' totals add up to the whole run's). */
#define SOAK_PHASE_EVENTS 10000L
#define SOAK_MAX_JOBS 256

static long soak_events(void)
{
    const char *e = getenv("DHS_SOAK_EVENTS");
    if (!e || !*e) return 0;
    double v = strtod(e, NULL); /* accepts 1e8 */
    return v > 0 ? (long)v : 0;
}

static int soak_jobs(void)
{
    const char *e = getenv("DHS_SOAK_JOBS");
    long v = e && *e ? strtol(e, NULL, 10) : 1;
    return v < 1 ? 1 : v > SOAK_MAX_JOBS ? SOAK_MAX_JOBS : (int)v;
}

/* What a soak worker sends back: its counters, failed phases and harness failures. */
typedef struct {
    rstats rs;
    long failed_phases, th_failed;
} soak_result;

static void rstats_add(rstats *a, const rstats *b)
{
    a->events += b->events, a->api_calls += b->api_calls, a->rounds += b->rounds, a->opens += b->opens;
    a->waits += b->waits, a->imports += b->imports, a->closes += b->closes, a->faults_armed += b->faults_armed;
    a->fault_hits += b->fault_hits, a->sweeps += b->sweeps, a->mid_round += b->mid_round;
    a->begins += b->begins, a->commits += b->commits, a->aborts += b->aborts;
    a->refused_rounds += b->refused_rounds, a->closed_open += b->closed_open;
    a->shares += b->shares, a->share_waits += b->share_waits;
    a->wrong_bytes += b->wrong_bytes, a->lost_rows += b->lost_rows, a->inv_fail += b->inv_fail;
    a->mem_fail += b->mem_fail, a->wait_changed += b->wait_changed, a->unexpected += b->unexpected;
    a->reclaims += b->reclaims, a->repopulated += b->repopulated, a->retired += b->retired;
    a->admissions += b->admissions;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) return -1;
        c += w, n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) return -1;
        c += r, n -= (size_t)r;
    }
    return 0;
}

/* Runs phases first, first+step, ... < end; returns the number of failed phases. */
static long soak_phases(rstats *rs, int first, int step, int end, long per_phase, long total, int progress)
{
    double t0 = th_now(), last = t0;
    long failed_phases = 0;
    for (int ph = first; ph < end; ph += step) {
        int delay = ph % 5, rnd = (ph / 5) % 2;
        dhs_policy pol = (dhs_policy)(ph % DHS_POLICY_COUNT_);
        dhs_reclaim_order ord = (dhs_reclaim_order)((ph / 2) % DHS_RECLAIM_COUNT_);
        uint64_t seed = dhs_mix64(g_seed + (uint64_t)ph);
        long bad0 = rs->inv_fail + rs->mem_fail + rs->wrong_bytes + rs->lost_rows + rs->unexpected + rs->wait_changed;
        long th0 = th_failed;
        run_phase(rs, per_phase, delay, rnd, pol, ord, seed);
        long bad1 = rs->inv_fail + rs->mem_fail + rs->wrong_bytes + rs->lost_rows + rs->unexpected + rs->wait_changed;
        if (bad1 != bad0 || th_failed != th0) {
            failed_phases++;
            printf("phase %d FAILED: seed %llu (delay %d, random order %d, policy %s, reclaim %s): %ld new failures\n", ph,
                   (unsigned long long)seed, delay, rnd, dhs_policy_str(pol), dhs_reclaim_order_str(ord),
                   bad1 - bad0 + th_failed - th0);
            fflush(stdout);
        }
        double now = th_now();
        if (progress && (now - last >= 30.0 || ph + step >= end)) {
            printf("soak%s: %ld/%ld events, %.0f events/s, %.0f s, phase %d seed %llu, %ld failed phases\n",
                   step > 1 ? " (worker 0)" : "", rs->events, step > 1 ? (total + step - 1) / step : total,
                   (double)rs->events / (now - t0), now - t0, ph, (unsigned long long)seed, failed_phases);
            fflush(stdout);
            last = now;
        }
    }
    return failed_phases;
}

/* Forks jobs workers over the phases and sums what they send back into rs; returns failed phases
   (a worker that died or sent nothing counts as one failed phase and is named). */
static long soak_parallel(rstats *rs, int jobs, int lo, int end, long per_phase, long total)
{
    int fds[SOAK_MAX_JOBS];
    pid_t pids[SOAK_MAX_JOBS];
    long failed = 0;
    fflush(stdout);
    for (int j = 0; j < jobs; j++) {
        int p[2];
        if (pipe(p) != 0) {
            printf("soak: pipe failed for worker %d\n", j);
            return failed + (jobs - j);
        }
        pid_t pid = fork();
        if (pid < 0) {
            printf("soak: fork failed for worker %d\n", j);
            close(p[0]), close(p[1]);
            return failed + (jobs - j);
        }
        if (pid == 0) {
            close(p[0]);
            soak_result r;
            memset(&r, 0, sizeof r);
            long th0 = th_failed;
            r.failed_phases = soak_phases(&r.rs, lo + j, jobs, end, per_phase, total, j == 0);
            r.th_failed = th_failed - th0;
            fflush(stdout);
            _exit(write_all(p[1], &r, sizeof r) == 0 ? 0 : 3);
        }
        close(p[1]);
        fds[j] = p[0], pids[j] = pid;
    }
    for (int j = 0; j < jobs; j++) {
        soak_result r;
        int ok = read_all(fds[j], &r, sizeof r) == 0;
        close(fds[j]);
        int st = 0;
        waitpid(pids[j], &st, 0);
        if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("soak: worker %d (phases %d, %d+%d, ...) died or sent nothing (status %d)\n", j, lo + j, lo + j, jobs, st);
            failed++;
            continue;
        }
        rstats_add(rs, &r.rs);
        failed += r.failed_phases;
        th_failed += r.th_failed;
    }
    return failed;
}

static void test_random_events(double scale)
{
    rstats rs;
    memset(&rs, 0, sizeof rs);
    long total = (long)(200000 * scale);
    if (total < 5000) total = 5000;
    long soak = soak_events();
    int phases = 20;
    if (soak > 0) {
        total = soak;
        phases = (int)((soak + SOAK_PHASE_EVENTS - 1) / SOAK_PHASE_EVENTS);
        if (phases < 20) phases = 20;
        printf("soak: %ld events in %d phases of %ld, base seed %llu, phase seed = dhs_mix64(base + phase)\n", total, phases,
               (total + phases - 1) / phases, (unsigned long long)g_seed);
        fflush(stdout);
    }
    long per_phase = (total + phases - 1) / phases;
    if (soak <= 0) per_phase = total / phases;
    int lo = 0, hi = phases;
    const char *pr = getenv("DHS_SOAK_PHASES");
    if (soak > 0 && pr && *pr) {
        char *end = NULL;
        long a = strtol(pr, &end, 10), z = end && *end == ':' ? strtol(end + 1, NULL, 10) : -1;
        CHECKF(a >= 0 && a < z && z <= phases, "DHS_SOAK_PHASES=%s is not A:B with 0 <= A < B <= %d", pr, phases);
        if (a >= 0 && a < z && z <= phases) lo = (int)a, hi = (int)z;
        total = per_phase * (hi - lo);
        printf("soak: phases %d <= ph < %d of the %d-phase run (%ld events)\n", lo, hi, phases, total);
    }
    int jobs = soak > 0 ? soak_jobs() : 1;
    if (jobs > hi - lo) jobs = hi - lo;
    if (jobs > 1) printf("soak: %d worker processes, worker j runs phases %d+j, %d+j+%d, ...\n", jobs, lo, lo, jobs);
    double t0 = th_now();
    long failed_phases = jobs > 1 ? soak_parallel(&rs, jobs, lo, hi, per_phase, total)
                                  : soak_phases(&rs, lo, 1, hi, per_phase, total, soak > 0);
    if (soak > 0) printf("soak: %ld failed phases\n", failed_phases);
    CHECKF(failed_phases == 0, "%ld soak phases failed", failed_phases);
    double dt = th_now() - t0;
    printf("residency: %ld events (%ld API calls, each followed by the invariant check), %ld rounds, %ld opens "
           "(%ld waits), %ld imports, %ld closes (%ld full read-backs), %ld arrivals/departures inside a round, "
           "%ld faults armed (%ld hit), %.1f s, %.0f events/s, seed %llu\n",
           rs.events, rs.api_calls, rs.rounds, rs.opens, rs.waits, rs.imports, rs.closes, rs.sweeps, rs.mid_round, rs.faults_armed,
           rs.fault_hits, dt, dt > 0 ? (double)rs.events / dt : 0.0, (unsigned long long)g_seed);
    printf("residency: two-phase imports: %ld begun, %ld committed, %ld aborted, %ld closed open, %ld rounds "
           "naming an open import refused\n",
           rs.begins, rs.commits, rs.aborts, rs.closed_open, rs.refused_rounds);
    printf("residency: %ld requests opened on a shared prefix (%ld shared opens waited)\n", rs.shares, rs.share_waits);
    printf("residency: admissions %llu, reclaims %llu, repopulated pages %llu, retired pages %llu\n",
           (unsigned long long)rs.admissions, (unsigned long long)rs.reclaims, (unsigned long long)rs.repopulated,
           (unsigned long long)rs.retired);
    CHECKF(rs.events >= total, "only %ld of %ld events ran (stopped on failures)", rs.events, total);
    CHECKF(rs.inv_fail == 0, "%ld invariant violations", rs.inv_fail);
    CHECKF(rs.mem_fail == 0, "%ld times M_req + M_opt + M_res > M", rs.mem_fail);
    CHECKF(rs.wrong_bytes == 0, "%ld locations with wrong bytes", rs.wrong_bytes);
    CHECKF(rs.lost_rows == 0, "%ld committed rows lost", rs.lost_rows);
    CHECKF(rs.unexpected == 0, "%ld unexpected statuses", rs.unexpected);
    CHECKF(rs.wait_changed == 0, "%ld DHS_WAIT answers changed dhs_get_mem", rs.wait_changed);
    CHECKF(rs.reclaims > 0, "no reclaim happened");
    CHECKF(rs.waits > 0, "no admission waited");
    CHECKF(rs.repopulated > 0, "no page was repopulated");
    CHECKF(rs.fault_hits > 0, "no injected fault was met");
    CHECKF(rs.commits > 0 && rs.aborts > 0 && rs.closed_open > 0 && rs.refused_rounds > 0,
           "two-phase imports: %ld committed, %ld aborted, %ld closed open, %ld refused rounds", rs.commits, rs.aborts,
           rs.closed_open, rs.refused_rounds);
    CHECKF(rs.shares > 0, "no request opened on a shared prefix");
    CHECKF(rs.sweeps > 0, "no full read-back");
    CHECKF(rs.mid_round > 0, "no admission inside a round");
}

/* ------------------------------------------------------------ reclaim orders */
/* A (oldest, 20 optional pages), B (most, 30), C (newest, 10) hold the pool; D's admission needs 4
   pages: exactly one whole request is reclaimed, chosen by the order. Each request then reads its
   imported rows: the victim's come from host, the others' stay direct. */
static int reclaim_victim(dhs_reclaim_order ord)
{
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = 64;
    dhs_config c = dhs_config_default();
    c.max_requests = 4;
    c.sel_k = 16;
    c.spec_width = 1;
    c.hot_rows = 32;
    c.tail_rows = 16;
    c.page_rows = 8;
    c.max_rows = 1000;
    c.repop_pages = 0; /* what is reclaimed stays on host */
    c.reclaim_order = ord;
    c.device_bytes = (3ull * 6 + 60 + 2) * 8 * 64;
    th_env e;
    CHECK_ST(th_env_init(&e, &a, &c, NULL), DHS_OK);
    const int64_t len[3] = {160, 240, 80};
    for (int q = 0; q < 3; q++) {
        CHECK_ST(th_open(&e, q, 600), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_import(&e, q, len[q], DHS_IMPORT_DEVICE), DHS_OK);
        CHECK_INV(e.ctx);
    }
    dhs_mem m;
    dhs_get_mem(e.ctx, &m);
    CHECK(m.pages_free == 2 && m.optional_bytes == 60ull * 8 * 64);
    dhs_stats s0, s1;
    dhs_get_stats(e.ctx, &s0);
    CHECK_ST(th_open(&e, 3, 100), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_get_stats(e.ctx, &s1);
    CHECK(s1.reclaims - s0.reclaims == 1);
    int victim = -1, victims = 0;
    for (int q = 0; q < 3; q++) {
        th_req *r = &e.rq[q];
        int32_t one = 1, acc = 0, sel[16], loc[16];
        CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_write_block(&e, q, 1), DHS_OK);
        CHECK_INV(e.ctx);
        for (int i = 0; i < 16; i++) sel[i] = (int32_t)(i * (len[q] / 16));
        dhs_resolve_item it = {r->h, 1, sel, loc};
        dhs_get_stats(e.ctx, &s0);
        CHECK_ST(dhs_resolve(e.ctx, 0, 16, 1, &it), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_get_stats(e.ctx, &s1);
        CHECK(th_check_item(&e, q, 0, 1, 16, sel, loc) == 0);
        uint64_t direct = s1.census_direct - s0.census_direct;
        if (direct == 0) { victim = q; victims++; }
        else CHECKF(direct == 16, "request %d: %llu of 16 imported rows direct", q, (unsigned long long)direct);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        CHECK_INV(e.ctx);
        r->n++;
        CHECK_INV(e.ctx);
    }
    CHECKF(victims == 1, "%d requests lost their optional pages", victims);
    for (int q = 0; q < 4; q++) CHECK(th_sweep(&e, q, 16) == 0);
    th_env_free(&e);
    return victim;
}

static void test_reclaim_orders(void)
{
    int most = reclaim_victim(DHS_RECLAIM_MOST_PAGES);
    int oldest = reclaim_victim(DHS_RECLAIM_OLDEST);
    int newest = reclaim_victim(DHS_RECLAIM_NEWEST);
    CHECKF(most == 1, "most-pages reclaimed request %d, want B (1)", most);
    CHECKF(oldest == 0, "oldest reclaimed request %d, want A (0)", oldest);
    CHECKF(newest == 2, "newest reclaimed request %d, want C (2)", newest);
    printf("reclaim victims: most-pages %c, oldest %c, newest %c\n", 'A' + most, 'A' + oldest, 'A' + newest);
}

/* ------------------------------------------------------------ admission during an open round */
/* Request A is in the open round and holds locations in its optional pages; an admission in the
   middle of the round must not hand those pages to anyone before the round's readers finished. */
static void test_admission_during_round(int async_delay)
{
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = 64;
    dhs_config c = dhs_config_default();
    c.max_requests = 3;
    c.sel_k = 16;
    c.spec_width = 1;
    c.hot_rows = 32;
    c.tail_rows = 16;
    c.page_rows = 8;
    c.max_rows = 1000;
    c.repop_pages = 0;
    c.device_bytes = (6ull + 24 + 2) * 8 * 64; /* A: 6 required + 24 optional pages; 2 free; B needs 6 */
    dhs_cpu_options o = {.async_delay = async_delay};
    th_env e;
    CHECK_ST(th_env_init(&e, &a, &c, &o), DHS_OK);
    CHECK_ST(th_open(&e, 0, 600), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 0, 192, DHS_IMPORT_DEVICE), DHS_OK); /* 24 optional pages */
    CHECK_INV(e.ctx);
    th_req *r = &e.rq[0];
    int32_t one = 1, acc = 0, sel[16], loc[16];
    CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
    CHECK_INV(e.ctx);
    for (int i = 0; i < 16; i++) sel[i] = i * 12;
    dhs_resolve_item it = {r->h, 1, sel, loc};
    CHECK_ST(dhs_resolve(e.ctx, 0, 16, 1, &it), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK(th_check_item(&e, 0, 0, 1, 16, sel, loc) == 0);
    /* mid-round: B arrives and imports its prefill */
    dhs_status s = th_open(&e, 1, 300);
    CHECK_INV(e.ctx);
    CHECKF(s == DHS_OK || s == DHS_WAIT || s == DHS_ERR_STATE, "mid-round open: %s", dhs_status_str(s));
    if (s == DHS_OK) {
        CHECK_ST(th_import(&e, 1, 192, DHS_IMPORT_DEVICE), DHS_OK);
        CHECK_INV(e.ctx);
    }
    /* A's attention of this round (later layers, the REUSE consumer) still reads A's rows */
    long wrong = th_check_item(&e, 0, 0, 1, 16, sel, loc);
    CHECKF(wrong == 0, "async_delay %d: %ld of A's locations of the open round were handed to the new request (admission: %s)",
           async_delay, wrong, dhs_status_str(s));
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    CHECK_INV(e.ctx);
    r->n++;
    CHECK_INV(e.ctx);
    if (s != DHS_OK) { /* admitted between rounds */
        CHECK_ST(th_open(&e, 1, 300), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_import(&e, 1, 192, DHS_IMPORT_DEVICE), DHS_OK);
        CHECK_INV(e.ctx);
    }
    CHECK(th_sweep(&e, 0, 16) == 0 && th_sweep(&e, 1, 16) == 0);
    CHECK_INV(e.ctx);
    th_env_free(&e);
}

/* ------------------------------------------------------------ the host-row cache */
/* dhs_config.host_cache_bytes: a closed request's host rows are kept (counted in host_bytes_allocated
   and host_bytes_cached) and the next import takes them instead of allocating; every row reads back
   exactly from reused memory; the limit holds; a failed host allocation drops the cache and retries;
   with 0 nothing is kept. The history lives in host memory only (DHS_IMPORT_HOST, no device room for
   optional pages), so every sweep reads rows recovered from the reused memory. */
/* the host-row cache cases' context: two request slots, three sources of 64-byte rows, room on the device for
   the requests' hot caches and tails only (no history), so every imported row lives on the host */
static dhs_status host_cache_env(th_env *e, dhs_arch *a, dhs_config *c, uint64_t limit)
{
    *e = (th_env){0}; /* e->ctx NULL until th_env_init succeeds */
    *a = th_arch_two_groups(1);
    *c = dhs_config_default();
    c->max_requests = 2;
    c->sel_k = 16;
    c->spec_width = 1;
    c->hot_rows = 16;
    c->tail_rows = 16;
    c->page_rows = 8;
    c->max_rows = 5000;
    c->repop_pages = 0;
    c->resident_first = 0;
    c->host_cache_bytes = limit;
    dhs_sizes z;
    dhs_status st = dhs_config_sizes(a, c, &z);
    if (st != DHS_OK) return st;
    c->device_bytes = z.min_device_bytes + z.request_bytes;
    return th_env_init(e, a, c, NULL);
}

static void host_cache_case(uint64_t limit, int64_t rows_a, int64_t rows_b, int fault)
{
    dhs_arch a;
    dhs_config c;
    th_env e;
    CHECK_ST(host_cache_env(&e, &a, &c, limit), DHS_OK);
    if (!e.ctx) return;
    dhs_mem m0, m1, m2, m3;
    CHECK_ST(dhs_get_mem(e.ctx, &m0), DHS_OK);
    CHECK(m0.host_bytes_cached == 0);
    CHECK_ST(th_open(&e, 0, rows_a), DHS_OK);
    CHECK_ST(th_import(&e, 0, rows_a, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    CHECKF(th_sweep(&e, 0, 16) == 0, "limit %llu: request A's rows", (unsigned long long)limit);
    CHECK_ST(dhs_get_mem(e.ctx, &m1), DHS_OK);
    CHECK_ST(th_close(&e, 0), DHS_OK);
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_get_mem(e.ctx, &m2), DHS_OK);
    CHECKF(m2.host_bytes_cached <= limit, "cached %llu over the limit %llu", (unsigned long long)m2.host_bytes_cached,
           (unsigned long long)limit);
    /* A's imported host rows (3 sources, row stride 64, 1,024-row chunks) were freed or cached at close,
       and what is cached is still counted as held */
    const uint64_t a_rows = 3ull * (uint64_t)((rows_a + 1023) / 1024) * 1024u * 64u;
    CHECKF(m2.host_bytes_allocated >= m0.host_bytes_allocated + m2.host_bytes_cached,
           "after close: %llu host bytes held, below %llu at creation + %llu cached", (unsigned long long)m2.host_bytes_allocated,
           (unsigned long long)m0.host_bytes_allocated, (unsigned long long)m2.host_bytes_cached);
    CHECKF(m1.host_bytes_allocated - m2.host_bytes_allocated + m2.host_bytes_cached >= a_rows,
           "close released %llu and cached %llu host bytes, less than A's %llu bytes of rows",
           (unsigned long long)(m1.host_bytes_allocated - m2.host_bytes_allocated), (unsigned long long)m2.host_bytes_cached,
           (unsigned long long)a_rows);
    if (limit == 0) CHECK(m2.host_bytes_cached == 0);
    if (limit >= a_rows) CHECKF(m2.host_bytes_cached >= a_rows, "limit %llu >= A's %llu bytes of rows: %llu kept",
                                (unsigned long long)limit, (unsigned long long)a_rows, (unsigned long long)m2.host_bytes_cached);
    /* B reuses A's host rows where they fit (B no longer than A): its import allocates none */
    CHECK_ST(th_open(&e, 1, rows_b), DHS_OK);
    /* the import's first allocation is its first source's host rows: the cache cannot serve a longer B */
    if (fault) dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, 1);
    CHECK_ST(th_import(&e, 1, rows_b, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_get_mem(e.ctx, &m3), DHS_OK);
    if (fault) {
        CHECKF(dhs_backend_faults_injected(e.be) == 1 && m3.host_bytes_cached == 0,
               "a failed host allocation drops the cache: %llu faults met, %llu cached",
               (unsigned long long)dhs_backend_faults_injected(e.be), (unsigned long long)m3.host_bytes_cached);
        dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, 0);
    } else if (limit >= a_rows && rows_b <= rows_a) {
        CHECKF(m3.host_bytes_allocated <= m2.host_bytes_allocated + (m1.host_bytes_allocated - m0.host_bytes_allocated) / 2,
               "B's import allocated host rows although A's were cached: %llu -> %llu host bytes",
               (unsigned long long)m2.host_bytes_allocated, (unsigned long long)m3.host_bytes_allocated);
        CHECKF(m3.host_bytes_cached < m2.host_bytes_cached, "B took nothing from the cache (%llu cached before, %llu after)",
               (unsigned long long)m2.host_bytes_cached, (unsigned long long)m3.host_bytes_cached);
    }
    long lost = th_sweep(&e, 1, 16);
    CHECKF(lost == 0, "limit %llu, rows %lld then %lld, fault %d: %ld of B's rows read back wrong from reused host memory",
           (unsigned long long)limit, (long long)rows_a, (long long)rows_b, fault, lost);
    CHECK_ST(th_close(&e, 1), DHS_OK);
    CHECK_INV(e.ctx);
    printf("host cache: limit %llu, rows %lld then %lld%s: cached after A %llu, B's import grew host bytes by %lld\n",
           (unsigned long long)limit, (long long)rows_a, (long long)rows_b, fault ? ", fault" : "",
           (unsigned long long)m2.host_bytes_cached, (long long)(m3.host_bytes_allocated - m2.host_bytes_allocated));
    th_env_free(&e); /* frees the cache too: ASan's leak check sees it */
}

/* dhs_host_cache_fill: spans pinned ahead of the imports. Bad arguments and a failed allocation add
   nothing (host bytes and the cache exactly as before); filled spans count in host_bytes_allocated and
   host_bytes_cached; an import of rows that fit takes them and allocates no host rows of its own, its rows
   read back exactly from them; at close they return to the cache. */
static void test_host_cache_fill(void)
{
    const int64_t rows = 3000;
    const uint64_t span = (uint64_t)((rows + 1023) / 1024) * 1024u * 64u; /* 3 chunks of 1,024 rows x 64 B */
    dhs_arch a;
    dhs_config c;
    th_env e;
    CHECK_ST(host_cache_env(&e, &a, &c, 4 * span), DHS_OK); /* room for four spans */
    if (!e.ctx) return;
    dhs_mem m0, m;
    CHECK_ST(dhs_get_mem(e.ctx, &m0), DHS_OK);
    /* refused, nothing changed */
    const struct { int64_t rows; int32_t count; const char *why; } bad[] = {
        {0, 1, "rows 0"}, {-5, 1, "rows < 0"}, {rows, -1, "count < 0"}, {c.max_rows + 2, 1, "rows past a group's max_rows + 1"},
        {rows, 5, "five spans over a four-span limit"}, {1, INT32_MAX, "more spans than slots"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(dhs_host_cache_fill(e.ctx, bad[i].rows, bad[i].count) == DHS_ERR_INVALID_ARG, "%s: not refused", bad[i].why);
        CHECK_ST(dhs_get_mem(e.ctx, &m), DHS_OK);
        CHECKF(m.host_bytes_allocated == m0.host_bytes_allocated && m.host_bytes_cached == 0,
               "%s: host bytes %llu -> %llu, cached %llu", bad[i].why, (unsigned long long)m0.host_bytes_allocated,
               (unsigned long long)m.host_bytes_allocated, (unsigned long long)m.host_bytes_cached);
    }
    CHECK(dhs_host_cache_fill(NULL, rows, 1) == DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_host_cache_fill(e.ctx, rows, 0), DHS_OK);
    /* the second allocation fails: the first span goes back too */
    dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, 2);
    CHECK_ST(dhs_host_cache_fill(e.ctx, rows, 3), DHS_ERR_NOMEM);
    dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, 0);
    CHECK_ST(dhs_get_mem(e.ctx, &m), DHS_OK);
    CHECKF(m.host_bytes_allocated == m0.host_bytes_allocated && m.host_bytes_cached == 0,
           "a failed fill kept %llu host bytes (%llu cached)", (unsigned long long)(m.host_bytes_allocated - m0.host_bytes_allocated),
           (unsigned long long)m.host_bytes_cached);
    CHECK_INV(e.ctx);
    /* one span per source */
    CHECK_ST(dhs_host_cache_fill(e.ctx, rows, 3), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_mem m1;
    CHECK_ST(dhs_get_mem(e.ctx, &m1), DHS_OK);
    CHECKF(m1.host_bytes_cached == 3 * span && m1.host_bytes_allocated == m0.host_bytes_allocated + 3 * span,
           "filled: cached %llu, host bytes +%llu, want %llu both", (unsigned long long)m1.host_bytes_cached,
           (unsigned long long)(m1.host_bytes_allocated - m0.host_bytes_allocated), (unsigned long long)(3 * span));
    /* the import takes them: no host rows of its own */
    CHECK_ST(th_open(&e, 0, rows), DHS_OK);
    CHECK_ST(th_import(&e, 0, rows, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_mem m2;
    CHECK_ST(dhs_get_mem(e.ctx, &m2), DHS_OK);
    CHECKF(m2.host_bytes_cached == 0, "the import left %llu bytes of filled spans unused", (unsigned long long)m2.host_bytes_cached);
    CHECKF(m2.host_bytes_allocated < m1.host_bytes_allocated + span,
           "the import allocated host rows although the cache held them: %llu -> %llu host bytes",
           (unsigned long long)m1.host_bytes_allocated, (unsigned long long)m2.host_bytes_allocated);
    long lost = th_sweep(&e, 0, 16);
    CHECKF(lost == 0, "%ld rows read back wrong from filled spans", lost);
    CHECK_ST(th_close(&e, 0), DHS_OK);
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_get_mem(e.ctx, &m), DHS_OK);
    CHECKF(m.host_bytes_cached >= 3 * span && m.host_bytes_cached <= c.host_cache_bytes,
           "at close %llu cached, want the %llu filled back (at most the limit %llu)", (unsigned long long)m.host_bytes_cached,
           (unsigned long long)(3 * span), (unsigned long long)c.host_cache_bytes);
    printf("host cache fill: 3 spans of %llu bytes; import grew host bytes by %lld; %llu cached after close\n",
           (unsigned long long)span, (long long)(m2.host_bytes_allocated - m1.host_bytes_allocated),
           (unsigned long long)m.host_bytes_cached);
    th_env_free(&e);
}

static void test_host_cache(void)
{
    host_cache_case(0, 3000, 3000, 0);            /* off: nothing kept */
    host_cache_case(1ull << 30, 3000, 3000, 0);   /* on: B reuses all of A's rows */
    host_cache_case(1ull << 30, 3000, 1000, 0);   /* B shorter: takes spans larger than it needs */
    host_cache_case(1ull << 30, 1000, 3000, 0);   /* B longer: the cache cannot serve it, it allocates */
    host_cache_case(100000, 3000, 3000, 0);       /* a limit below one request's rows: some spans kept */
    host_cache_case(1ull << 30, 1000, 3000, 1);   /* the allocation fails once: cache dropped, retried */
}

int main(void)
{
    g_seed = th_seed("test_residency");
    double t0 = th_now();
    test_reclaim_orders();
    test_admission_during_round(0);
    test_admission_during_round(2);
    test_host_cache();
    test_host_cache_fill();
    test_random_events(th_scale());
    printf("test_residency: %.2f s\n", th_now() - t0);
    return th_summary();
}
