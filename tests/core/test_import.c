/* test_import.c - the two-phase host import (dhs_request_import_begin /
 * _commit / _abort) on the CPU backend.
 *
 * A transport receives a request's prefill rows straight into the host
 * tier: begin hands out where each source's rows go, commit completes the
 * import as dhs_request_import(DHS_IMPORT_HOST or _DEVICE, the begin's flag) does, abort leaves the
 * request as if no import had happened. Checked here, with the invariant
 * checker after every call:
 *   - begin + fill + commit equals dhs_request_import(HOST) of the same rows:
 *     identical stats, memory figures and pool bytes, every row read back;
 *     with DEVICE the same (the same leading pages on the device, the same
 *     pool bytes, at least one optional page placed)
 *     (two groups, rows narrower than the pool stride, a compressed group
 *     with an incomplete last row), on the host and the device resolver;
 *   - nothing of an open import is visible: 0 positions, dhs_round_begin
 *     naming it answers DHS_ERR_STATE and changes nothing, other requests'
 *     rounds run meanwhile, and begin/commit inside an open round;
 *   - abort restores everything observable (stats, memory, pool bytes) and
 *     the request can be imported again, by either call, at another length;
 *   - every misuse answers its status and changes nothing;
 *   - close during an open import frees its host backing;
 *   - injected faults: a host-allocation failure in begin, a copy failure in
 *     commit (the import stays open, commit retried), a copy failure in
 *     dhs_request_import(HOST) (nothing remains, not even host memory).
 */
#include "test_help.h"

#define KSEL 16

static dhs_config small_cfg(void)
{
    dhs_config c = dhs_config_default();
    c.max_requests = 4;
    c.sel_k = KSEL;
    c.spec_width = 2;
    c.hot_rows = 32;
    c.page_rows = 8;
    c.tail_rows = 24;
    c.max_rows = 2048;
    c.device_bytes = 600ull * 8 * 64;
    c.repop_pages = 8;
    return c;
}

/* Writes the request's prefill rows (version 0) where begin said, rows row_stride apart. */
static void fill_host_rows(th_env *e, int slot, int64_t n, void *const *host_rows)
{
    for (int32_t s = 0; s < e->arch.n_sources; s++) {
        uint32_t rb = e->arch.sources[s].row_bytes;
        int64_t m = e->arch.sources[s].m, nr = (n + m - 1) / m;
        CHECKF((nr == 0) == (host_rows[s] == NULL), "source %d: %lld rows, pointer %p", s, (long long)nr, host_rows[s]);
        if (!host_rows[s]) continue;
        CHECK((uintptr_t)host_rows[s] % DHS_ALIGN == 0);
        for (int64_t row = 0; row < nr; row++)
            th_fill_row((uint8_t *)host_rows[s] + (size_t)row * e->stride, rb, e->rq[slot].uid, s, row, 0);
    }
}

/* Garbage in the rows a begin handed out (a half-received, then aborted, transfer). */
static void scribble(th_env *e, int64_t n, void *const *host_rows)
{
    for (int32_t s = 0; s < e->arch.n_sources; s++) {
        int64_t m = e->arch.sources[s].m, nr = (n + m - 1) / m;
        if (host_rows[s]) memset(host_rows[s], 0xA5, (size_t)(nr / 2 + 1) * e->stride);
    }
}

static dhs_status two_phase_flags(th_env *e, int slot, int64_t n, unsigned flags)
{
    void *hr[DHS_MAX_SOURCES];
    dhs_status s = dhs_request_import_begin(e->ctx, e->rq[slot].h, n, flags, hr);
    CHECK_INV(e->ctx);
    if (s != DHS_OK) return s;
    fill_host_rows(e, slot, n, hr);
    s = dhs_request_import_commit(e->ctx, e->rq[slot].h);
    CHECK_INV(e->ctx);
    if (s == DHS_OK) e->rq[slot].n = n;
    return s;
}

static dhs_status two_phase(th_env *e, int slot, int64_t n) { return two_phase_flags(e, slot, n, DHS_IMPORT_HOST); }

static void check_same(const th_env *a, const th_env *b, const char *when)
{
    th_snap x = {0}, y = {0};
    th_snap_take(a, &x);
    th_snap_take(b, &y);
    const char *d = th_snap_diff(&x, &y);
    CHECKF(d == NULL, "%s: plain import and two phases differ in %s", when, d);
    th_snap_free(&x);
    th_snap_free(&y);
}

/* ------------------------------------------------------------ equivalence with dhs_request_import(flags) */
static void test_equivalence(int resolver, unsigned flags)
{
    dhs_arch arch = th_arch_two_groups(4); /* 64 / 48 B rows in group 0, 32 B rows with m = 4 in group 1 */
    dhs_config cfg = small_cfg();
    if (resolver == DHS_RESOLVER_DEVICE) {
        cfg.resolver = DHS_RESOLVER_DEVICE;
        cfg.policy = DHS_POLICY_CLOCK;
    }
    /* lengths: empty, under a page, a page and a partial one with an incomplete compressed row, many pages */
    const int64_t lens[] = {0, 5, 8 * 4 + 3, 8 * 4 * 9 + 2, 1000};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        th_env a, b;
        CHECK_ST(th_env_init(&a, &arch, &cfg, NULL), DHS_OK);
        CHECK_ST(th_env_init(&b, &arch, &cfg, NULL), DHS_OK);
        CHECK_ST(th_open(&a, 0, n + 40), DHS_OK);
        CHECK_ST(th_open(&b, 0, n + 40), DHS_OK);
        CHECK_ST(th_import(&a, 0, n, flags), DHS_OK);
        CHECK_INV(a.ctx);
        CHECK_ST(two_phase_flags(&b, 0, n, flags), DHS_OK);
        check_same(&a, &b, "after the import");
        if (flags == DHS_IMPORT_DEVICE && n >= 8 * 4 * 9) { /* the leading pages went to the device at once */
            dhs_mem mem;
            CHECK_ST(dhs_get_mem(b.ctx, &mem), DHS_OK);
            CHECKF(mem.optional_bytes > 0, "n %lld: a device import placed no optional page", (long long)n);
        }
        int64_t pos = -1;
        CHECK_ST(dhs_request_positions(b.ctx, b.rq[0].h, &pos), DHS_OK);
        CHECK(pos == n);
        /* every row back through resolve rounds (repopulation runs in them) */
        long lost_a = th_sweep(&a, 0, KSEL), lost_b = th_sweep(&b, 0, KSEL);
        CHECKF(lost_a == 0 && lost_b == 0, "n %lld resolver %d: %ld / %ld rows wrong", (long long)n, resolver, lost_a, lost_b);
        check_same(&a, &b, "after the read-back");
        /* imported once: both calls refuse a second import */
        void *hr[DHS_MAX_SOURCES];
        CHECK_ST(dhs_request_import_begin(b.ctx, b.rq[0].h, 1, DHS_IMPORT_HOST, hr), DHS_ERR_STATE);
        th_env_free(&a);
        th_env_free(&b);
    }
}

/* ------------------------------------------------------------ nothing of an open import is visible */
static void test_invisible(void)
{
    dhs_arch arch = th_arch_two_groups(4);
    dhs_config cfg = small_cfg();
    th_env e;
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 300), DHS_OK);
    CHECK_ST(th_open(&e, 1, 300), DHS_OK);
    CHECK_ST(th_import(&e, 1, 120, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    const int64_t n = 203;
    void *hr[DHS_MAX_SOURCES];
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[0].h, n, DHS_IMPORT_HOST, hr), DHS_OK);
    CHECK_INV(e.ctx);
    int64_t pos = -1;
    CHECK_ST(dhs_request_positions(e.ctx, e.rq[0].h, &pos), DHS_OK);
    CHECK(pos == 0);
    /* half of the rows arrived */
    for (int32_t s = 0; s < arch.n_sources; s++)
        for (int64_t row = 0; row < 20; row++)
            th_fill_row((uint8_t *)hr[s] + (size_t)row * e.stride, arch.sources[s].row_bytes, e.rq[0].uid, s, row, 0);
    /* a round naming it, alone or with another request, is refused and changes nothing */
    th_snap before = {0}, after = {0};
    th_snap_take(&e, &before);
    int32_t K1[2] = {1, 1};
    dhs_req both[2] = {e.rq[1].h, e.rq[0].h};
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, K1), DHS_ERR_STATE);
    CHECK_ST(dhs_round_begin(e.ctx, 2, both, K1), DHS_ERR_STATE);
    /* a second begin, a plain import: refused */
    void *hr2[DHS_MAX_SOURCES];
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[0].h, n, DHS_IMPORT_HOST, hr2), DHS_ERR_STATE);
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[0].h, 10, DHS_IMPORT_HOST, hr2), DHS_ERR_STATE);
    CHECK_ST(th_import(&e, 0, n, DHS_IMPORT_HOST), DHS_ERR_STATE);
    CHECK_ST(th_import(&e, 0, n, DHS_IMPORT_DEVICE), DHS_ERR_STATE);
    /* calls that need a round answer as for any request outside it */
    int32_t loc[KSEL * 2];
    CHECK_ST(dhs_tail_locations(e.ctx, e.rq[0].h, 0, 0, 1, loc), DHS_ERR_NOT_IN_ROUND);
    th_snap_take(&e, &after);
    const char *d = th_snap_diff(&before, &after);
    CHECKF(d == NULL, "refused calls during an open import changed %s", d);
    CHECK_INV(e.ctx);
    /* the other request decodes meanwhile (housekeeping and repopulation run) */
    long lost = th_sweep(&e, 1, KSEL);
    CHECK(lost == 0);
    CHECK_ST(dhs_request_positions(e.ctx, e.rq[0].h, &pos), DHS_OK);
    CHECK(pos == 0);
    /* the rest arrives; the commit happens inside another request's round */
    fill_host_rows(&e, 0, n, hr);
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[1].h, K1), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_write_block(&e, 1, 1), DHS_OK);
    CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[0].h), DHS_OK);
    e.rq[0].n = n;
    CHECK_INV(e.ctx);
    int32_t acc = 0;
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    e.rq[1].n += 1;
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[0].h), DHS_ERR_STATE);
    CHECK_ST(dhs_request_import_abort(e.ctx, e.rq[0].h), DHS_ERR_STATE);
    CHECK(th_sweep(&e, 0, KSEL) == 0);
    CHECK(th_sweep(&e, 1, KSEL) == 0);
    /* a begin inside another request's round: also valid, and that round still commits */
    CHECK_ST(th_open(&e, 2, 64), DHS_OK);
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[1].h, K1), DHS_OK);
    CHECK_ST(th_write_block(&e, 1, 1), DHS_OK);
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[2].h, 50, DHS_IMPORT_HOST, hr), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    e.rq[1].n += 1;
    CHECK_INV(e.ctx);
    fill_host_rows(&e, 2, 50, hr);
    CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[2].h), DHS_OK);
    e.rq[2].n = 50;
    CHECK_INV(e.ctx);
    CHECK(th_sweep(&e, 2, KSEL) == 0);
    th_snap_free(&before);
    th_snap_free(&after);
    th_env_free(&e);
}

/* ------------------------------------------------------------ abort, then retry */
static void test_abort_retry(void)
{
    dhs_arch arch = th_arch_two_groups(4);
    dhs_config cfg = small_cfg();
    th_env e;
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 100), DHS_OK);
    th_snap fresh = {0}, now = {0};
    th_snap_take(&e, &fresh);
    dhs_mem m0, m1;
    dhs_get_mem(e.ctx, &m0);
    /* longer than expected, then shorter: each begin pins max(n, expected) rows */
    const int64_t tries[] = {700, 37, 0};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        void *hr[DHS_MAX_SOURCES];
        CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[0].h, tries[i], DHS_IMPORT_HOST, hr), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_get_mem(e.ctx, &m1);
        CHECKF(m1.host_bytes_allocated > m0.host_bytes_allocated, "begin of %lld positions pinned nothing",
               (long long)tries[i]);
        scribble(&e, tries[i], hr);
        CHECK_ST(dhs_request_import_abort(e.ctx, e.rq[0].h), DHS_OK);
        CHECK_INV(e.ctx);
        th_snap_take(&e, &now);
        const char *d = th_snap_diff(&fresh, &now);
        CHECKF(d == NULL, "abort after a begin of %lld positions left %s changed", (long long)tries[i], d);
        CHECK_ST(dhs_request_import_abort(e.ctx, e.rq[0].h), DHS_ERR_STATE);
        CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[0].h), DHS_ERR_STATE);
    }
    /* the retry: two phases at another length, every row right (no aborted byte survives) */
    CHECK_ST(two_phase(&e, 0, 333), DHS_OK);
    CHECK(th_sweep(&e, 0, KSEL) == 0);
    /* abort, then the plain call on another request */
    CHECK_ST(th_open(&e, 1, 0), DHS_OK);
    void *hr[DHS_MAX_SOURCES];
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[1].h, 500, DHS_IMPORT_HOST, hr), DHS_OK);
    scribble(&e, 500, hr);
    CHECK_ST(dhs_request_import_abort(e.ctx, e.rq[1].h), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 1, 260, DHS_IMPORT_DEVICE), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK(th_sweep(&e, 1, KSEL) == 0);
    th_snap_free(&fresh);
    th_snap_free(&now);
    th_env_free(&e);
}

/* ------------------------------------------------------------ statuses of misuse */
static void test_misuse(void)
{
    dhs_arch arch = th_arch_two_groups(4);
    dhs_config cfg = small_cfg();
    th_env e;
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 100), DHS_OK);
    CHECK_ST(th_open(&e, 1, 100), DHS_OK);
    CHECK_ST(th_import(&e, 1, 30, DHS_IMPORT_HOST), DHS_OK);
    CHECK_ST(th_open(&e, 2, 10), DHS_OK);
    dhs_req closed = e.rq[2].h;
    CHECK_ST(th_close(&e, 2), DHS_OK);
    dhs_req never = {(uint32_t)cfg.max_requests, 1}, gen0 = {0, 0};
    void *hr[DHS_MAX_SOURCES];
    th_snap before = {0}, after = {0};
    th_snap_take(&e, &before);
    dhs_req r = e.rq[0].h;
    CHECK_ST(dhs_request_import_begin(NULL, r, 10, DHS_IMPORT_HOST, hr), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_request_import_begin(e.ctx, r, 10, DHS_IMPORT_HOST, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_request_import_begin(e.ctx, r, 10, 0, hr), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_request_import_begin(e.ctx, r, 10, DHS_IMPORT_HOST | DHS_IMPORT_DEVICE, hr), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_request_import_begin(e.ctx, r, -1, DHS_IMPORT_HOST, hr), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_request_import_begin(e.ctx, r, cfg.max_rows + 1, DHS_IMPORT_HOST, hr), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_request_import_begin(e.ctx, r, INT64_MAX, DHS_IMPORT_HOST, hr), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_request_import_begin(e.ctx, closed, 10, DHS_IMPORT_HOST, hr), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_import_begin(e.ctx, never, 10, DHS_IMPORT_HOST, hr), DHS_ERR_UNKNOWN_REQUEST);
    CHECK_ST(dhs_request_import_begin(e.ctx, gen0, 10, DHS_IMPORT_HOST, hr), DHS_ERR_UNKNOWN_REQUEST);
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[1].h, 10, DHS_IMPORT_HOST, hr), DHS_ERR_STATE); /* imported */
    CHECK_ST(dhs_request_import_commit(NULL, r), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_request_import_abort(NULL, r), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_request_import_commit(e.ctx, r), DHS_ERR_STATE);
    CHECK_ST(dhs_request_import_abort(e.ctx, r), DHS_ERR_STATE);
    CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[1].h), DHS_ERR_STATE);
    CHECK_ST(dhs_request_import_abort(e.ctx, e.rq[1].h), DHS_ERR_STATE);
    CHECK_ST(dhs_request_import_commit(e.ctx, closed), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_import_abort(e.ctx, closed), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_import_commit(e.ctx, never), DHS_ERR_UNKNOWN_REQUEST);
    CHECK_ST(dhs_request_import_abort(e.ctx, never), DHS_ERR_UNKNOWN_REQUEST);
    /* a request in the open round */
    int32_t K1 = 1;
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K1), DHS_OK);
    th_snap_take(&e, &before);
    CHECK_ST(dhs_request_import_begin(e.ctx, r, 10, DHS_IMPORT_HOST, hr), DHS_ERR_STATE);
    th_snap_take(&e, &after);
    const char *d = th_snap_diff(&before, &after);
    CHECKF(d == NULL, "refused begin in the round changed %s", d);
    CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
    int32_t acc = 0;
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    e.rq[0].n = 1;
    /* after its first round */
    CHECK_ST(dhs_request_import_begin(e.ctx, r, 10, DHS_IMPORT_HOST, hr), DHS_ERR_STATE);
    CHECK_INV(e.ctx);
    th_snap_free(&before);
    th_snap_free(&after);
    th_env_free(&e);
}

/* ------------------------------------------------------------ close during an open import */
static void test_close_open(void)
{
    dhs_arch arch = th_arch_two_groups(4);
    dhs_config cfg = small_cfg();
    th_env e;
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    th_snap empty = {0}, now = {0};
    th_snap_take(&e, &empty);
    CHECK_ST(th_open(&e, 0, 100), DHS_OK);
    void *hr[DHS_MAX_SOURCES];
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[0].h, 900, DHS_IMPORT_HOST, hr), DHS_OK);
    scribble(&e, 900, hr);
    dhs_req h = e.rq[0].h;
    CHECK_ST(th_close(&e, 0), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_mem a, b;
    dhs_get_mem(e.ctx, &a);
    b = empty.mem;
    CHECKF(a.host_bytes_allocated == b.host_bytes_allocated && a.device_bytes_allocated == b.device_bytes_allocated &&
               a.requests_open == 0 && a.pages_free == b.pages_free,
           "after close: host %llu (was %llu), pages free %lld (was %lld)", (unsigned long long)a.host_bytes_allocated,
           (unsigned long long)b.host_bytes_allocated, (long long)a.pages_free, (long long)b.pages_free);
    CHECK_ST(dhs_request_import_commit(e.ctx, h), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_import_abort(e.ctx, h), DHS_ERR_CLOSED);
    /* the slot serves a new request normally; destroying a context with an import open frees it too
       (the sanitizer build's leak check sees it) */
    CHECK_ST(th_open(&e, 0, 100), DHS_OK);
    CHECK_ST(two_phase(&e, 0, 77), DHS_OK);
    CHECK(th_sweep(&e, 0, KSEL) == 0);
    CHECK_ST(th_open(&e, 1, 100), DHS_OK);
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[1].h, 90, DHS_IMPORT_HOST, hr), DHS_OK);
    CHECK_INV(e.ctx);
    th_snap_free(&empty);
    th_snap_free(&now);
    th_env_free(&e);
}

/* ------------------------------------------------------------ faults */
static void test_faults(void)
{
    dhs_arch arch = th_arch_two_groups(4);
    dhs_config cfg = small_cfg();
    th_env e;
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 100), DHS_OK);
    void *hr[DHS_MAX_SOURCES];
    th_snap before = {0}, after = {0};
    /* begin: the nth pinned allocation fails, for every n that can: nothing taken */
    for (uint64_t nth = 1; nth <= 3; nth++) {
        th_snap_take(&e, &before);
        dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, nth);
        uint64_t f0 = dhs_backend_faults_injected(e.be);
        dhs_status s = dhs_request_import_begin(e.ctx, e.rq[0].h, 300, DHS_IMPORT_HOST, hr);
        dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, 0);
        CHECK_INV(e.ctx);
        CHECK(dhs_backend_faults_injected(e.be) == f0 + 1);
        CHECK_ST(s, DHS_ERR_NOMEM);
        th_snap_take(&e, &after);
        const char *d = th_snap_diff(&before, &after);
        CHECKF(d == NULL, "failed begin (allocation %llu) changed %s", (unsigned long long)nth, d);
        CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[0].h), DHS_ERR_STATE);
    }
    /* commit: a ring copy fails; the import stays open and invisible, the commit is retried */
    const int64_t n = 8 * 4 * 5 + 7; /* a partial page in both groups: the commit copies into the ring */
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[0].h, n, DHS_IMPORT_HOST, hr), DHS_OK);
    fill_host_rows(&e, 0, n, hr);
    for (uint64_t nth = 1; nth <= 2; nth++) {
        dhs_backend_fault_at(e.be, DHS_FAULT_COPY, nth);
        CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[0].h), DHS_ERR_BACKEND);
        dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 0);
        CHECK_INV(e.ctx);
        int64_t pos = -1;
        CHECK_ST(dhs_request_positions(e.ctx, e.rq[0].h, &pos), DHS_OK);
        CHECK(pos == 0);
        int32_t K1 = 1;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K1), DHS_ERR_STATE);
    }
    CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[0].h), DHS_OK);
    e.rq[0].n = n;
    CHECK_INV(e.ctx);
    CHECK(th_sweep(&e, 0, KSEL) == 0);
    /* a failed commit, then abort: as if nothing happened */
    CHECK_ST(th_open(&e, 1, 0), DHS_OK);
    th_snap_take(&e, &before);
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[1].h, n, DHS_IMPORT_HOST, hr), DHS_OK);
    dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 1);
    CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[1].h), DHS_ERR_BACKEND);
    dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 0);
    CHECK_ST(dhs_request_import_abort(e.ctx, e.rq[1].h), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_mem a, b;
    th_snap_take(&e, &after);
    a = before.mem;
    b = after.mem;
    CHECKF(a.host_bytes_allocated == b.host_bytes_allocated && a.pages_free == b.pages_free,
           "failed commit + abort: host bytes %llu -> %llu", (unsigned long long)a.host_bytes_allocated,
           (unsigned long long)b.host_bytes_allocated);
    /* the plain HOST import: a failed copy leaves nothing, host memory included */
    for (uint64_t nth = 1; nth <= 3; nth++) {
        th_snap_take(&e, &before);
        dhs_backend_fault_at(e.be, DHS_FAULT_COPY, nth);
        dhs_status s = th_import(&e, 1, n, DHS_IMPORT_HOST);
        dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 0);
        CHECK_ST(s, DHS_ERR_BACKEND);
        CHECK_INV(e.ctx);
        th_snap_take(&e, &after);
        CHECKF(before.mem.host_bytes_allocated == after.mem.host_bytes_allocated,
               "failed import (copy %llu): host bytes %llu -> %llu", (unsigned long long)nth,
               (unsigned long long)before.mem.host_bytes_allocated, (unsigned long long)after.mem.host_bytes_allocated);
    }
    CHECK_ST(th_import(&e, 1, n, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK(th_sweep(&e, 1, KSEL) == 0);
    th_snap_free(&before);
    th_snap_free(&after);
    th_env_free(&e);
}

/* ------------------------------------------------------------ payload-free */
static void test_payload_free(void)
{
    dhs_arch arch = th_arch_two_groups(4);
    dhs_config cfg = small_cfg();
    const dhs_cpu_options pf = {.payload_free = 1};
    th_env e;
    CHECK_ST(th_env_init(&e, &arch, &cfg, &pf), DHS_OK);
    CHECK_ST(th_open(&e, 0, 100), DHS_OK);
    void *hr[DHS_MAX_SOURCES];
    for (int32_t s = 0; s < arch.n_sources; s++) hr[s] = (void *)&e;
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[0].h, 150, DHS_IMPORT_HOST, hr), DHS_OK);
    for (int32_t s = 0; s < arch.n_sources; s++) CHECK(hr[s] == NULL);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_request_import_commit(e.ctx, e.rq[0].h), DHS_OK);
    CHECK_INV(e.ctx);
    int64_t pos = -1;
    CHECK_ST(dhs_request_positions(e.ctx, e.rq[0].h, &pos), DHS_OK);
    CHECK(pos == 150);
    th_env_free(&e);
    /* DHS_IMPORT_DEVICE: the same placement as on a payload backend (the same pages on the device, the same
       stats and pool accounting) */
    th_env a, b;
    CHECK_ST(th_env_init(&a, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(th_env_init(&b, &arch, &cfg, &pf), DHS_OK);
    CHECK_ST(th_open(&a, 0, 400), DHS_OK);
    CHECK_ST(th_open(&b, 0, 400), DHS_OK);
    CHECK_ST(two_phase_flags(&a, 0, 300, DHS_IMPORT_DEVICE), DHS_OK);
    CHECK_ST(dhs_request_import_begin(b.ctx, b.rq[0].h, 300, DHS_IMPORT_DEVICE, hr), DHS_OK);
    CHECK_ST(dhs_request_import_commit(b.ctx, b.rq[0].h), DHS_OK);
    CHECK_INV(b.ctx);
    dhs_stats sa, sb;
    dhs_mem ma, mb;
    CHECK_ST(dhs_get_stats(a.ctx, &sa), DHS_OK);
    CHECK_ST(dhs_get_stats(b.ctx, &sb), DHS_OK);
    CHECK_ST(dhs_get_mem(a.ctx, &ma), DHS_OK);
    CHECK_ST(dhs_get_mem(b.ctx, &mb), DHS_OK);
    CHECK(!memcmp(&sa, &sb, sizeof sa));
    CHECKF(ma.optional_bytes > 0 && ma.optional_bytes == mb.optional_bytes && ma.pages_free == mb.pages_free,
           "device import, payload and payload-free: optional bytes %llu / %llu, free pages %lld / %lld",
           (unsigned long long)ma.optional_bytes, (unsigned long long)mb.optional_bytes, (long long)ma.pages_free,
           (long long)mb.pages_free);
    th_env_free(&a);
    th_env_free(&b);
}

int main(void)
{
    test_equivalence(DHS_RESOLVER_HOST, DHS_IMPORT_HOST);
    test_equivalence(DHS_RESOLVER_DEVICE, DHS_IMPORT_HOST);
    test_equivalence(DHS_RESOLVER_HOST, DHS_IMPORT_DEVICE);
    test_equivalence(DHS_RESOLVER_DEVICE, DHS_IMPORT_DEVICE);
    test_invisible();
    test_abort_retry();
    test_misuse();
    test_close_open();
    test_faults();
    test_payload_free();
    return th_summary();
}
