/* test_regress.c - regression tests for the defects an outside black-box
 * test against include/dhs.h found. Each test failed before its fix.
 *
 *  1. I1: dhs_write_rows with a huge first_row (first_row + n_rows overflows)
 *     is refused with DHS_ERR_ROW_RANGE and changes nothing, at every tail
 *     position; committed rows keep their bytes (tail and host copy).
 *  2. I2: the producer writes part of its block, resolves, then writes the
 *     rest: no write may land on a tail row whose location was handed out in
 *     the round or whose host copy is incomplete. Crafted (offset exactly the
 *     tail length) and randomised (split writes, late copies in random order,
 *     FOLLOW sources, m = 4).
 *  3. One row, one location per round: dhs_sync between two resolves of one
 *     round (a tail backup or a population completing) does not move a row.
 *  4. Stale handles: every handle of an older generation answers
 *     DHS_ERR_CLOSED, whether its slot is free or reused; handles that never
 *     existed answer DHS_ERR_UNKNOWN_REQUEST.
 *  5. payload_free decides exactly as a payload context: the same random call
 *     sequence with late copies in random order on both, every status,
 *     location, stat and memory figure compared after every call.
 *  6. Documented corner statuses: a copy fault in dhs_write_rows and in a
 *     DHS_IMPORT_HOST import (DHS_ERR_BACKEND), n_items = 0, round_end(NULL)
 *     after an empty round, a zero-position import, resolve after group_done.
 */
#include <limits.h>

#include "test_help.h"

static uint64_t g_seed;

static dhs_arch one_group(void)
{
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = 64;
    return a;
}

/* tail_rows = 2 * k_max: the smallest tail the configuration allows */
static dhs_config tight_cfg(void)
{
    dhs_config c = dhs_config_default();
    c.max_requests = 4;
    c.sel_k = 8;
    c.spec_width = 4;
    c.hot_rows = 16;
    c.tail_rows = 8;
    c.page_rows = 4;
    c.max_rows = 600;
    c.device_bytes = 600ull * 4 * 64;
    c.repop_pages = 0;
    return c;
}

/* request 0 resolves the 8 entries of `sel` (K = 1, group 0) into l1, dhs_sync,
   then again into l2: every row must keep its location within the round and
   both vectors must hold the selected rows */
static void resolve_sync_resolve(th_env *e, const int32_t *sel, int32_t *l1, int32_t *l2, const char *what)
{
    dhs_resolve_item it1 = {e->rq[0].h, 1, sel, l1}, it2 = {e->rq[0].h, 1, sel, l2};
    CHECK_ST(dhs_resolve(e->ctx, 0, 8, 1, &it1), DHS_OK);
    CHECK_ST(dhs_sync(e->ctx), DHS_OK);
    CHECK_ST(dhs_resolve(e->ctx, 0, 8, 1, &it2), DHS_OK);
    int diff = 0;
    for (int i = 0; i < 8; i++) diff += l1[i] != l2[i];
    CHECKF(diff == 0, "%s moved %d rows to new locations within the round", what, diff);
    CHECK(th_check_item(e, 0, 0, 1, 8, sel, l1) == 0 && th_check_item(e, 0, 0, 1, 8, sel, l2) == 0);
}

/* one round of request `slot` alone: K queries, block written, accepted `acc` */
static void plain_round(th_env *e, int slot, int32_t K, int32_t acc)
{
    CHECK_ST(dhs_round_begin(e->ctx, 1, &e->rq[slot].h, &K), DHS_OK);
    CHECK_ST(th_write_block(e, slot, K), DHS_OK);
    CHECK_ST(dhs_round_end(e->ctx, &acc), DHS_OK);
    e->rq[slot].n += acc + 1;
    CHECK_INV(e->ctx);
}

/* ------------------------------------------------------------ 1 */
static void test_write_rows_overflow(void)
{
    const int64_t firsts[] = {INT64_MAX, INT64_MAX - 1, INT64_MAX - 2, INT64_MAX - 3, INT64_MAX - 7, INT64_MAX - 8,
                              INT64_MAX - 15, INT64_MAX - 16, INT64_MAX / 2, INT64_MIN, INT64_MIN + 1, -1, (int64_t)INT32_MAX,
                              (int64_t)INT32_MAX + 1, (int64_t)UINT32_MAX};
    const int32_t ns[] = {1, 4, 8, 9, 16, INT32_MAX};
    long bad_status = 0, changed = 0;
    /* every tail position: rounds advance the frontier one row at a time */
    for (int shift = 0; shift < 9; shift++) {
        th_env e;
        dhs_arch a = one_group();
        dhs_config c = tight_cfg();
        dhs_cpu_options o = {.async_delay = 5}; /* backups stay in flight */
        CHECK_ST(th_env_init(&e, &a, &c, &o), DHS_OK);
        CHECK_ST(th_open(&e, 0, 100), DHS_OK);
        CHECK_ST(th_import(&e, 0, 20, DHS_IMPORT_HOST), DHS_OK);
        for (int i = 0; i < shift; i++) plain_round(&e, 0, 1, 0);
        plain_round(&e, 0, 4, 3); /* committed rows whose backup is in flight */
        int32_t K = 4;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
        for (size_t i = 0; i < sizeof firsts / sizeof firsts[0]; i++)
            for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
                th_snap s0 = {0}, s1 = {0};
                th_snap_take(&e, &s0);
                dhs_status st = dhs_write_rows(e.ctx, e.rq[0].h, 0, firsts[i], ns[j], e.buf);
                th_snap_take(&e, &s1);
                const char *d = th_snap_diff(&s0, &s1);
                if (st != DHS_ERR_ROW_RANGE) {
                    if (bad_status++ < 5)
                        printf("shift %d: write_rows(first %lld, n %d) returned %s, want row-range\n", shift,
                               (long long)firsts[i], ns[j], dhs_status_str(st));
                }
                if (d) {
                    if (changed++ < 5) printf("shift %d: write_rows(first %lld, n %d) changed %s\n", shift, (long long)firsts[i], ns[j], d);
                }
                th_snap_free(&s0);
                th_snap_free(&s1);
            }
        CHECK_INV(e.ctx);
        CHECK_ST(th_write_block(&e, 0, 4), DHS_OK);
        int32_t acc = 3;
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        e.rq[0].n += 4;
        CHECK_ST(dhs_sync(e.ctx), DHS_OK);
        CHECK_INV(e.ctx);
        CHECKF(th_sweep(&e, 0, 8) == 0, "shift %d: committed rows lost", shift);
        th_env_free(&e);
    }
    CHECKF(bad_status == 0, "%ld overflowing writes not refused with DHS_ERR_ROW_RANGE", bad_status);
    CHECKF(changed == 0, "%ld overflowing writes changed state", changed);
}

/* ------------------------------------------------------------ 2 crafted */
/* Writes rows [first, first + n) of every source of group g with new versions. */
static dhs_status write_part(th_env *e, int slot, int32_t g, int64_t first, int32_t n)
{
    th_req *r = &e->rq[slot];
    for (int64_t row = first; row < first + n; row++) r->ver[g][row]++;
    for (int32_t s = 0; s < e->arch.n_sources; s++) {
        if (e->arch.sources[s].group != g) continue;
        uint32_t rb = e->arch.sources[s].row_bytes;
        for (int64_t row = first; row < first + n; row++)
            th_fill_row(e->buf + (size_t)(row - first) * rb, rb, r->uid, s, row, r->ver[g][row]);
        dhs_status st = dhs_write_rows(e->ctx, r->h, s, first, n, e->buf);
        if (st != DHS_OK) {
            for (int64_t row = first; row < first + n; row++) r->ver[g][row]--;
            return st;
        }
    }
    return DHS_OK;
}

static void test_split_write_crafted(void)
{
    th_env e;
    dhs_arch a = one_group();
    dhs_config c = tight_cfg();
    dhs_cpu_options o = {.async_delay = 100}; /* backups complete only when waited for */
    CHECK_ST(th_env_init(&e, &a, &c, &o), DHS_OK);
    CHECK_ST(th_open(&e, 0, 100), DHS_OK);
    CHECK_ST(th_import(&e, 0, 40, DHS_IMPORT_HOST), DHS_OK);
    plain_round(&e, 0, 4, 3); /* rows 40..43 committed, backup in flight */
    plain_round(&e, 0, 2, 0); /* row 44 committed: 5 rows wait for their host copy */
    int32_t K = 4;
    /* the block's end (49) is past 40 + tail_rows: round_begin waits for the backup; a copy fault
       in it is retried within the call */
    dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 1);
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
    CHECK(dhs_backend_faults_injected(e.be) == 1);
    CHECK_INV(e.ctx);
    CHECK_ST(write_part(&e, 0, 0, 45, 1), DHS_OK); /* part of the block */
    CHECK_INV(e.ctx);
    int32_t sel[4 * 8], loc[4 * 8];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 8; i++) sel[j * 8 + i] = i < 6 ? 40 + i : -1;
    dhs_resolve_item it = {e.rq[0].h, 4, sel, loc};
    CHECK_ST(dhs_resolve(e.ctx, 0, 8, 1, &it), DHS_OK);
    CHECK(th_check_item(&e, 0, 0, 4, 8, sel, loc) == 0);
    /* the rest of the block: 46..48; 48 is 40 + tail_rows */
    CHECK_ST(write_part(&e, 0, 0, 46, 3), DHS_OK);
    CHECK_INV(e.ctx);
    long bad = th_check_item(&e, 0, 0, 4, 8, sel, loc);
    CHECKF(bad == 0, "%ld locations handed out this round were overwritten by the rest of the block", bad);
    int32_t acc = 3;
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    e.rq[0].n += 4;
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    CHECK(th_sweep(&e, 0, 8) == 0);
    th_env_free(&e);
}

/* ------------------------------------------------------------ 2 + 3 randomised */
static dhs_arch two_groups(void) { return th_arch_two_groups(4); }

typedef struct live_loc {
    int32_t slot, g, src;
    int64_t row;
    int32_t loc;
} live_loc;

#define MAX_LIVE 8192

typedef struct round_book {
    live_loc l[MAX_LIVE];
    int n;
} round_book;

/* records (row -> location) of one resolve; 0 when consistent with what the round handed out before */
static long book_add(round_book *b, int slot, int32_t g, const th_env *e, int32_t K, int32_t k, const int32_t *sel, const int32_t *loc)
{
    long moved = 0;
    for (int32_t i = 0; i < e->nsrc_of[g]; i++) {
        int32_t s = th_src(e, g, i);
        for (int64_t x = 0; x < (int64_t)K * k; x++) {
            if (sel[x] < 0) continue;
            int32_t l = loc[(int64_t)i * K * k + x];
            int found = 0;
            for (int y = 0; y < b->n && !found; y++) {
                live_loc *q = &b->l[y];
                if (q->slot == slot && q->g == g && q->src == s && q->row == sel[x]) {
                    found = 1;
                    if (q->loc != l) moved++;
                }
            }
            if (!found && b->n < MAX_LIVE) b->l[b->n++] = (live_loc){slot, g, s, sel[x], l};
        }
    }
    return moved;
}

/* live locations that no longer hold their row's current bytes */
static long book_check(const round_book *b, const th_env *e)
{
    long bad = 0;
    for (int y = 0; y < b->n; y++) {
        const live_loc *q = &b->l[y];
        const th_req *r = &e->rq[q->slot];
        if (!th_loc_holds(e->ctx, q->src, e->arch.sources[q->src].row_bytes, q->loc, r->uid, q->row, r->ver[q->g][q->row])) bad++;
    }
    return bad;
}

static void book_drop_group(round_book *b, int32_t g)
{
    int j = 0;
    for (int y = 0; y < b->n; y++)
        if (b->l[y].g != g) b->l[j++] = b->l[y];
    b->n = j;
}

static void test_split_write_random(void)
{
    uint64_t rng = g_seed ^ 0x2222;
    long rounds_total = (long)(300 * th_scale()) + 80;
    long overwritten = 0, moved = 0, failures = 0, wrote_after_resolve = 0;
    static round_book book;
    for (int env_i = 0; env_i < 4; env_i++) {
        th_env e;
        dhs_arch a = two_groups();
        dhs_config c = tight_cfg();
        c.tail_rows = env_i & 1 ? 8 : 12;
        c.hot_rows = 16;
        c.repop_pages = 2;
        c.max_rows = 1000;
        c.device_bytes = 2000ull * 4 * 64;
        dhs_cpu_options o = {.async_delay = 1 + (int32_t)dhs_rng_below(&rng, 4), .random_order = env_i >= 2, .seed = rng};
        CHECK_ST(th_env_init(&e, &a, &c, &o), DHS_OK);
        for (int s = 0; s < 3; s++) {
            CHECK_ST(th_open(&e, s, 900), DHS_OK);
            CHECK_ST(th_import(&e, s, 24 + 37 * s, s == 1 ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST), DHS_OK);
        }
        for (long rd = 0; rd < rounds_total / 4; rd++) {
            dhs_req h[3];
            int32_t K[3], acc[3];
            for (int s = 0; s < 3; s++) {
                h[s] = e.rq[s].h;
                K[s] = 1 + (int32_t)dhs_rng_below(&rng, c.spec_width);
                acc[s] = (int32_t)dhs_rng_below(&rng, K[s]);
            }
            if (e.rq[0].n + 8 > c.max_rows) break;
            CHECK_ST(dhs_round_begin(e.ctx, 3, h, K), DHS_OK);
            book.n = 0;
            /* per request and group: rows of the block, written in up to three parts with resolves between */
            int64_t lo[3][2], hi[3][2], done[3][2];
            for (int s = 0; s < 3; s++)
                for (int g = 0; g < 2; g++) {
                    lo[s][g] = e.rq[s].n / e.m_of[g];
                    hi[s][g] = (e.rq[s].n + K[s] + e.m_of[g] - 1) / e.m_of[g];
                    done[s][g] = lo[s][g];
                }
            for (int step = 0; step < 8; step++) {
                int s = (int)dhs_rng_below(&rng, 3), g = (int)dhs_rng_below(&rng, 2);
                int action = (int)dhs_rng_below(&rng, 5);
                if (action <= 1 && done[s][g] < hi[s][g]) {
                    int32_t n = 1 + (int32_t)dhs_rng_below(&rng, hi[s][g] - done[s][g]);
                    dhs_status st = write_part(&e, s, g, done[s][g], n);
                    if (st != DHS_OK) { failures++; printf("write_part: %s\n", dhs_status_str(st)); }
                    else done[s][g] += n;
                    if (book.n) wrote_after_resolve++;
                } else if (action == 2) {
                    /* selection: committed rows and the block rows written so far that the query sees */
                    int32_t k = 8;
                    int32_t sel[4 * 8], loc[2 * 4 * 8];
                    int64_t m = e.m_of[g];
                    for (int32_t j = 0; j < K[s]; j++)
                        for (int32_t i = 0; i < k; i++) {
                            int64_t vis_rows = (e.rq[s].n + j + 1) / m; /* complete rows the query sees */
                            if (vis_rows > done[s][g]) vis_rows = done[s][g];
                            int64_t pick = vis_rows > 0 ? vis_rows - 1 - dhs_rng_below(&rng, vis_rows < 14 ? vis_rows : 14) : -1;
                            sel[j * k + i] = (i % 5 == 4) ? -1 : (int32_t)pick;
                        }
                    dhs_resolve_item it = {h[s], K[s], sel, loc};
                    dhs_status st = dhs_resolve(e.ctx, g, k, 1, &it);
                    if (st != DHS_OK) { failures++; printf("resolve: %s\n", dhs_status_str(st)); continue; }
                    overwritten += th_check_item(&e, s, g, K[s], k, sel, loc);
                    moved += book_add(&book, s, g, &e, K[s], k, sel, loc);
                } else if (action == 3) {
                    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
                } else {
                    /* the group's consumers are issued: its locations end here */
                    CHECK_ST(dhs_group_done(e.ctx, g), DHS_OK);
                    book_drop_group(&book, g);
                }
                overwritten += book_check(&book, &e);
                CHECK_INV(e.ctx);
            }
            for (int s = 0; s < 3; s++)
                for (int g = 0; g < 2; g++)
                    if (done[s][g] < hi[s][g]) {
                        dhs_status st = write_part(&e, s, g, done[s][g], (int32_t)(hi[s][g] - done[s][g]));
                        if (st != DHS_OK) failures++;
                        overwritten += book_check(&book, &e);
                    }
            CHECK_ST(dhs_round_end(e.ctx, acc), DHS_OK);
            for (int s = 0; s < 3; s++) e.rq[s].n += acc[s] + 1;
            CHECK_INV(e.ctx);
        }
        CHECK_ST(dhs_sync(e.ctx), DHS_OK);
        for (int s = 0; s < 3; s++) CHECKF(th_sweep(&e, s, 8) == 0, "env %d request %d lost rows", env_i, s);
        th_env_free(&e);
    }
    printf("split writes: %ld writes after a resolve in the round\n", wrote_after_resolve);
    CHECK(wrote_after_resolve > 20);
    CHECKF(failures == 0, "%ld legal calls refused", failures);
    CHECKF(overwritten == 0, "%ld live locations overwritten within their round", overwritten);
    CHECKF(moved == 0, "%ld rows got a second location within one round", moved);
}

/* ------------------------------------------------------------ 3 crafted */
static void test_sync_keeps_locations(void)
{
    /* (a) a tail backup completes at dhs_sync between two resolves */
    {
        th_env e;
        dhs_arch a = one_group();
        dhs_config c = tight_cfg();
        c.tail_rows = 16;
        dhs_cpu_options o = {.async_delay = 100};
        CHECK_ST(th_env_init(&e, &a, &c, &o), DHS_OK);
        CHECK_ST(th_open(&e, 0, 100), DHS_OK);
        CHECK_ST(th_import(&e, 0, 40, DHS_IMPORT_HOST), DHS_OK);
        plain_round(&e, 0, 4, 3);
        int32_t K = 1;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
        CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
        int32_t sel[8] = {40, 41, 42, 43, 44, 3, -1, 7}, l1[8], l2[8];
        resolve_sync_resolve(&e, sel, l1, l2, "dhs_sync");
        int32_t acc = 0;
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        e.rq[0].n++;
        CHECK_INV(e.ctx);
        th_env_free(&e);
    }
    /* (b) a population completes at dhs_sync between two resolves */
    {
        th_env e;
        dhs_arch a = one_group();
        dhs_config c = tight_cfg();
        c.repop_pages = 8;
        dhs_cpu_options o = {.async_delay = 100};
        CHECK_ST(th_env_init(&e, &a, &c, &o), DHS_OK);
        CHECK_ST(th_open(&e, 0, 100), DHS_OK);
        CHECK_ST(th_import(&e, 0, 40, DHS_IMPORT_HOST), DHS_OK); /* pages populated by housekeeping */
        int32_t K = 1;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK); /* populations in flight */
        CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
        int32_t sel[8] = {0, 1, 2, 5, 9, 12, 30, 31}, l1[8], l2[8]; /* pages 0..7: the first repop_pages */
        dhs_resolve_item it1 = {e.rq[0].h, 1, sel, l1};
        resolve_sync_resolve(&e, sel, l1, l2, "a population completing at dhs_sync");
        int32_t acc = 0;
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        e.rq[0].n++;
        /* at the round boundary the populated pages are published */
        CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
        CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
        dhs_stats st0, st1;
        dhs_get_stats(e.ctx, &st0);
        CHECK_ST(dhs_resolve(e.ctx, 0, 8, 1, &it1), DHS_OK);
        dhs_get_stats(e.ctx, &st1);
        CHECKF(st1.census_direct - st0.census_direct == 8, "populated pages not direct after the round boundary (%llu)",
               (unsigned long long)(st1.census_direct - st0.census_direct));
        CHECK(th_check_item(&e, 0, 0, 1, 8, sel, l1) == 0);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        e.rq[0].n++;
        CHECK_INV(e.ctx);
        th_env_free(&e);
    }
}

/* ------------------------------------------------------------ 4 */
static void test_stale_handles(void)
{
    th_env e;
    dhs_arch a = one_group();
    dhs_config c = tight_cfg();
    CHECK_ST(th_env_init(&e, &a, &c, NULL), DHS_OK);
    dhs_ctx *ctx = e.ctx;
    dhs_req g1, g2, g3;
    CHECK_ST(dhs_request_open(ctx, 10, &g1), DHS_OK);
    CHECK_ST(dhs_request_close(ctx, g1), DHS_OK);
    CHECK_ST(dhs_request_open(ctx, 10, &g2), DHS_OK);
    CHECK(g2.id == g1.id && g2.gen != g1.gen);
    /* slot reused by a newer generation */
    int64_t n;
    CHECK_ST(dhs_request_positions(ctx, g1, &n), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_close(ctx, g2), DHS_OK);
    /* slot free again, two generations ago and one generation ago */
    dhs_req wrongs[] = {g1, g2};
    for (int w = 0; w < 2; w++) {
        dhs_req r = wrongs[w];
        int32_t K = 1, sel = 0, loc = 0;
        dhs_resolve_item it = {r, 1, &sel, &loc};
        CHECK_ST(dhs_request_positions(ctx, r, &n), DHS_ERR_CLOSED);
        CHECK_ST(dhs_request_close(ctx, r), DHS_ERR_CLOSED);
        CHECK_ST(dhs_request_import(ctx, r, 0, NULL, DHS_IMPORT_HOST), DHS_ERR_CLOSED);
        CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_ERR_CLOSED);
        CHECK_ST(dhs_round_begin(ctx, 0, NULL, NULL), DHS_OK);
        CHECK_ST(dhs_write_rows(ctx, r, 0, 0, 1, e.buf), DHS_ERR_CLOSED);
        CHECK_ST(dhs_resolve(ctx, 0, 1, 1, &it), DHS_ERR_CLOSED);
        CHECK_ST(dhs_round_end(ctx, NULL), DHS_OK);
    }
    CHECK_ST(dhs_request_open(ctx, 10, &g3), DHS_OK);
    CHECK(g3.id == g1.id);
    CHECK_ST(dhs_request_positions(ctx, g1, &n), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_positions(ctx, g2, &n), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_positions(ctx, g3, &n), DHS_OK);
    /* never existed */
    dhs_req never_slot = {2, 1}, gen0 = {g3.id, 0}, future = {g3.id, g3.gen + 1}, out_of_range = {(uint32_t)c.max_requests, 1},
            huge = {UINT32_MAX, UINT32_MAX}, never_gen = {2, UINT32_MAX};
    dhs_req unk[] = {never_slot, gen0, future, out_of_range, huge, never_gen};
    for (size_t i = 0; i < sizeof unk / sizeof unk[0]; i++) {
        CHECK_ST(dhs_request_positions(ctx, unk[i], &n), DHS_ERR_UNKNOWN_REQUEST);
        CHECK_ST(dhs_request_close(ctx, unk[i]), DHS_ERR_UNKNOWN_REQUEST);
    }
    CHECK_ST(dhs_request_close(ctx, g3), DHS_OK);
    CHECK_ST(dhs_request_positions(ctx, future, &n), DHS_ERR_UNKNOWN_REQUEST);
    CHECK_ST(dhs_request_positions(ctx, g3, &n), DHS_ERR_CLOSED);
    CHECK_INV(ctx);
    th_env_free(&e);
}

/* ------------------------------------------------------------ 5 */
typedef struct twin {
    th_env p, f; /* payload, payload_free */
    long diffs, calls;
    uint64_t rng;
    int in_round;
    int32_t K[TH_MAX_REQ];
    int in_rnd[TH_MAX_REQ];
    int imported[TH_MAX_REQ];
} twin;

static int mem_same(const dhs_mem *a, const dhs_mem *b)
{
    /* device_bytes_allocated and host_bytes_allocated report bytes actually held: a payload-free
       context holds no pool and no host rows (documented); every other figure must match */
    return a->pool_bytes == b->pool_bytes && a->required_bytes == b->required_bytes && a->optional_bytes == b->optional_bytes && a->reserve_bytes == b->reserve_bytes &&
           a->pages_total == b->pages_total && a->pages_free == b->pages_free && a->requests_open == b->requests_open;
}

static void twin_cmp(twin *t, const char *what, dhs_status sp, dhs_status sf)
{
    t->calls++;
    dhs_stats a, b;
    dhs_mem ma, mb;
    dhs_get_stats(t->p.ctx, &a);
    dhs_get_stats(t->f.ctx, &b);
    dhs_get_mem(t->p.ctx, &ma);
    dhs_get_mem(t->f.ctx, &mb);
    const char *d = NULL;
    if (sp != sf) d = "status";
    else if (memcmp(&a, &b, sizeof a)) d = "stats";
    else if (!mem_same(&ma, &mb)) d = "mem";
    for (int i = 0; i < TH_MAX_REQ && !d; i++) {
        int64_t np = -1, nf = -1;
        dhs_status a1 = t->p.rq[i].uid ? dhs_request_positions(t->p.ctx, t->p.rq[i].h, &np) : DHS_OK;
        dhs_status b1 = t->f.rq[i].uid ? dhs_request_positions(t->f.ctx, t->f.rq[i].h, &nf) : DHS_OK;
        if (a1 != b1 || np != nf) d = "positions";
    }
    if (d) {
        if (t->diffs++ < 5) {
            printf("payload vs payload_free: call %ld (%s): %s differ (status %s / %s)\n", t->calls, what, d, dhs_status_str(sp),
                   dhs_status_str(sf));
            if (!strcmp(d, "stats"))
                printf("  repopulated %llu/%llu direct %llu/%llu hot %llu/%llu host %llu/%llu backups %llu/%llu\n",
                       (unsigned long long)a.repopulated_pages, (unsigned long long)b.repopulated_pages,
                       (unsigned long long)a.census_direct, (unsigned long long)b.census_direct, (unsigned long long)a.census_hot,
                       (unsigned long long)b.census_hot, (unsigned long long)a.census_host, (unsigned long long)b.census_host,
                       (unsigned long long)a.backup_rows, (unsigned long long)b.backup_rows);
        }
    }
    CHECK_INV(t->p.ctx);
    CHECK_INV(t->f.ctx);
}

static void twin_step(twin *t)
{
    uint64_t *rng = &t->rng;
    th_env *P = &t->p, *F = &t->f;
    int slot = (int)dhs_rng_below(rng, 5);
    int op = (int)dhs_rng_below(rng, 10);
    if (!t->in_round) {
        if (op == 0 && !P->rq[slot].open) {
            int64_t exp = 50 + dhs_rng_below(rng, 300);
            dhs_status a = th_open(P, slot, exp), b = th_open(F, slot, exp);
            F->rq[slot].uid = P->rq[slot].uid;
            t->imported[slot] = 0;
            twin_cmp(t, "open", a, b);
            if (a == DHS_OK && dhs_rng_below(rng, 4) != 0) {
                int64_t n = dhs_rng_below(rng, exp + 1);
                unsigned fl = dhs_rng_below(rng, 2) ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST;
                a = th_import(P, slot, n, fl);
                b = th_import(F, slot, n, fl);
                t->imported[slot] = 1;
                twin_cmp(t, "import (at open)", a, b);
            }
        } else if (op == 1 && P->rq[slot].open && !t->imported[slot]) {
            int64_t n = dhs_rng_below(rng, 200);
            unsigned fl = dhs_rng_below(rng, 2) ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST;
            dhs_status a = th_import(P, slot, n, fl), b = th_import(F, slot, n, fl);
            if (a == DHS_OK) t->imported[slot] = 1;
            twin_cmp(t, "import", a, b);
        } else if (op == 2 && P->rq[slot].open && dhs_rng_below(rng, 2) == 0) {
            dhs_status a = th_close(P, slot), b = th_close(F, slot);
            twin_cmp(t, "close", a, b);
        } else if (op == 3) {
            twin_cmp(t, "sync", dhs_sync(P->ctx), dhs_sync(F->ctx));
        } else {
            dhs_req h[TH_MAX_REQ];
            int32_t K[TH_MAX_REQ];
            int n = 0, idx[TH_MAX_REQ];
            for (int i = 0; i < 5; i++)
                if (P->rq[i].open && P->rq[i].n + 8 < P->cfg.max_rows && dhs_rng_below(rng, 4) != 0) {
                    h[n] = P->rq[i].h;
                    K[n] = 1 + (int32_t)dhs_rng_below(rng, P->cfg.spec_width);
                    idx[n] = i;
                    n++;
                }
            dhs_status a = dhs_round_begin(P->ctx, n, h, K), b = dhs_round_begin(F->ctx, n, h, K);
            twin_cmp(t, "round_begin", a, b);
            if (a == DHS_OK) {
                t->in_round = 1;
                memset(t->in_rnd, 0, sizeof t->in_rnd);
                for (int i = 0; i < n; i++) {
                    t->in_rnd[idx[i]] = 1;
                    t->K[idx[i]] = K[i];
                    t->imported[idx[i]] = 1;
                }
                /* write every block now (so round_end can commit), sometimes rewrite part later */
                for (int i = 0; i < 5; i++)
                    if (t->in_rnd[i]) {
                        dhs_status wa = th_write_block(P, i, t->K[i]), wb = th_write_block(F, i, t->K[i]);
                        for (int g = 0; g < F->arch.n_groups; g++)
                            memcpy(F->rq[i].ver[g], P->rq[i].ver[g], sizeof(uint32_t) * (size_t)F->rows_cap);
                        twin_cmp(t, "write", wa, wb);
                    }
            }
        }
        return;
    }
    /* in a round */
    if (op <= 3) {
        int32_t g = (int32_t)dhs_rng_below(rng, P->arch.n_groups), k = 8;
        int32_t sel[TH_MAX_REQ][4 * 8], lp[TH_MAX_REQ][2 * 4 * 8], lf[TH_MAX_REQ][2 * 4 * 8];
        dhs_resolve_item ip[TH_MAX_REQ], jf[TH_MAX_REQ];
        int n = 0, idx[TH_MAX_REQ];
        for (int i = 0; i < 5; i++) {
            if (!t->in_rnd[i] || dhs_rng_below(rng, 3) == 0) continue;
            int64_t m = P->m_of[g];
            for (int32_t j = 0; j < t->K[i]; j++)
                for (int32_t x = 0; x < k; x++) {
                    int64_t vis = (P->rq[i].n + j + 1) / m;
                    sel[n][j * k + x] = vis > 0 && x % 7 != 6 ? (int32_t)dhs_rng_below(rng, vis) : -1;
                }
            ip[n] = (dhs_resolve_item){P->rq[i].h, t->K[i], sel[n], lp[n]};
            jf[n] = (dhs_resolve_item){F->rq[i].h, t->K[i], sel[n], lf[n]};
            idx[n] = i;
            n++;
        }
        dhs_status a = dhs_resolve(P->ctx, g, k, n, ip), b = dhs_resolve(F->ctx, g, k, n, jf);
        twin_cmp(t, "resolve", a, b);
        if (a == DHS_OK && b == DHS_OK)
            for (int i = 0; i < n; i++) {
                int64_t cnt = (int64_t)P->nsrc_of[g] * ip[i].n_queries * k;
                if (memcmp(lp[i], lf[i], sizeof(int32_t) * (size_t)cnt)) {
                    if (t->diffs++ < 5) printf("payload vs payload_free: call %ld: locations differ\n", t->calls);
                }
                if (th_check_item(P, idx[i], g, ip[i].n_queries, k, sel[i], lp[i]) != 0) {
                    if (t->diffs++ < 5) printf("payload context: wrong bytes at call %ld\n", t->calls);
                }
            }
    } else if (op == 4) {
        int32_t g = (int32_t)dhs_rng_below(rng, P->arch.n_groups);
        twin_cmp(t, "group_done", dhs_group_done(P->ctx, g), dhs_group_done(F->ctx, g));
    } else if (op == 5) {
        twin_cmp(t, "sync (round)", dhs_sync(P->ctx), dhs_sync(F->ctx));
    } else if (op == 6 && t->in_rnd[slot]) {
        dhs_status a = th_write_block(P, slot, t->K[slot]), b = th_write_block(F, slot, t->K[slot]);
        for (int g = 0; g < F->arch.n_groups; g++) memcpy(F->rq[slot].ver[g], P->rq[slot].ver[g], sizeof(uint32_t) * (size_t)F->rows_cap);
        twin_cmp(t, "rewrite", a, b);
    } else if (op == 7 && !P->rq[slot].open) {
        dhs_status a = th_open(P, slot, 100), b = th_open(F, slot, 100);
        F->rq[slot].uid = P->rq[slot].uid;
        t->imported[slot] = 0;
        twin_cmp(t, "open (round)", a, b);
    } else {
        int32_t acc[TH_MAX_REQ];
        int n = 0;
        for (int i = 0; i < 5; i++)
            if (t->in_rnd[i]) acc[n++] = (int32_t)dhs_rng_below(rng, t->K[i]);
        dhs_status a = dhs_round_end(P->ctx, acc), b = dhs_round_end(F->ctx, acc);
        twin_cmp(t, "round_end", a, b);
        if (a == DHS_OK) {
            n = 0;
            for (int i = 0; i < 5; i++)
                if (t->in_rnd[i]) {
                    P->rq[i].n += acc[n] + 1;
                    F->rq[i].n += acc[n] + 1;
                    n++;
                }
            t->in_round = 0;
        }
    }
}

static void test_payload_free_twin(void)
{
    long steps = (long)(4000 * th_scale()) + 1000;
    long total_diffs = 0;
    uint64_t rounds = 0, repop = 0, backups = 0;
    for (int v = 0; v < 4; v++) {
        static twin t;
        memset(&t, 0, sizeof t);
        t.rng = g_seed ^ (0x5555ull * (uint64_t)(v + 1));
        dhs_arch a = two_groups();
        dhs_config c = tight_cfg();
        c.max_requests = 6;
        c.tail_rows = 12;
        c.hot_rows = 16;
        c.repop_pages = 3;
        c.max_rows = 1200;
        c.device_bytes = (v & 1 ? 260ull : 900ull) * 4 * 64; /* small pool: reclaim and waits */
        c.policy = (dhs_policy)(v % DHS_POLICY_COUNT_);
        dhs_cpu_options o = {.async_delay = 1 + v, .random_order = 1, .seed = g_seed + (uint64_t)v};
        CHECK_ST(th_env_init(&t.p, &a, &c, &o), DHS_OK);
        o.payload_free = 1; /* the twin: the same options on a backend that moves no bytes */
        CHECK_ST(th_env_init(&t.f, &a, &c, &o), DHS_OK);
        for (long i = 0; i < steps && t.diffs == 0; i++) twin_step(&t);
        dhs_stats sp, sf;
        dhs_get_stats(t.p.ctx, &sp);
        dhs_get_stats(t.f.ctx, &sf);
        printf("twin %d: %ld calls, %llu rounds, %llu repopulated pages, %llu reclaims, %llu backup rows, %ld differences\n", v, t.calls,
               (unsigned long long)sp.rounds, (unsigned long long)sp.repopulated_pages, (unsigned long long)sp.reclaims,
               (unsigned long long)sp.backup_rows, t.diffs);
        rounds += sp.rounds;
        repop += sp.repopulated_pages;
        backups += sp.backup_rows;
        total_diffs += t.diffs;
        th_env_free(&t.p);
        th_env_free(&t.f);
    }
    /* the sequences exercised what differs in timing: rounds, late backups and late populations */
    CHECKF(rounds > 80 && repop > 0 && backups > 0, "twin coverage: %llu rounds, %llu repopulated pages, %llu backup rows",
           (unsigned long long)rounds, (unsigned long long)repop, (unsigned long long)backups);
    CHECKF(total_diffs == 0, "payload and payload_free contexts diverged (%ld)", total_diffs);
}

/* ------------------------------------------------------------ 6 */
static void test_corner_statuses(void)
{
    dhs_arch a = one_group();
    dhs_config c = tight_cfg();
    /* a copy fault in a plain write: DHS_ERR_BACKEND, the rows count as unwritten, a retry works */
    {
        th_env e;
        CHECK_ST(th_env_init(&e, &a, &c, NULL), DHS_OK);
        CHECK_ST(th_open(&e, 0, 100), DHS_OK);
        CHECK_ST(th_import(&e, 0, 30, DHS_IMPORT_HOST), DHS_OK);
        int32_t K = 2;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
        dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 1);
        CHECK_ST(write_part(&e, 0, 0, 30, 2), DHS_ERR_BACKEND);
        CHECK(dhs_backend_faults_injected(e.be) == 1);
        int32_t sel[2] = {30, 3}, loc[2];
        dhs_resolve_item it = {e.rq[0].h, 1, sel, loc};
        it.n_queries = 2;
        int32_t sel2[4] = {30, 3, 31, -1}, loc2[4];
        it.sel = sel2;
        it.loc = loc2;
        CHECK_ST(dhs_resolve(e.ctx, 0, 2, 1, &it), DHS_ERR_ROW_RANGE); /* not written */
        int32_t acc = 1;
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_ERR_STATE);
        CHECK_ST(write_part(&e, 0, 0, 30, 2), DHS_OK);
        CHECK_ST(dhs_resolve(e.ctx, 0, 2, 1, &it), DHS_OK);
        CHECK(th_check_item(&e, 0, 0, 2, 2, sel2, loc2) == 0);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        e.rq[0].n += 2;
        CHECK_INV(e.ctx);
        /* a copy fault in a DHS_IMPORT_HOST import: DHS_ERR_BACKEND, then the retry works */
        CHECK_ST(th_open(&e, 1, 100), DHS_OK);
        dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 1);
        CHECK_ST(th_import(&e, 1, 50, DHS_IMPORT_HOST), DHS_ERR_BACKEND);
        CHECK_INV(e.ctx);
        CHECK_ST(th_import(&e, 1, 50, DHS_IMPORT_HOST), DHS_OK);
        CHECK(th_sweep(&e, 1, 8) == 0);
        CHECK(th_sweep(&e, 0, 8) == 0);
        th_env_free(&e);
    }
    th_env e;
    CHECK_ST(th_env_init(&e, &a, &c, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 100), DHS_OK);
    /* a zero-position import: DHS_OK, rows may be NULL; it counts as the import */
    CHECK_ST(dhs_request_import(e.ctx, e.rq[0].h, 0, NULL, DHS_IMPORT_HOST), DHS_OK);
    CHECK_ST(dhs_request_import(e.ctx, e.rq[0].h, 0, NULL, DHS_IMPORT_HOST), DHS_ERR_STATE);
    CHECK_ST(th_import(&e, 0, 10, DHS_IMPORT_DEVICE), DHS_ERR_STATE);
    int64_t n = -1;
    CHECK(dhs_request_positions(e.ctx, e.rq[0].h, &n) == DHS_OK && n == 0);
    /* round_end(NULL) after an empty round: DHS_OK, counts a round */
    dhs_stats s0, s1;
    dhs_get_stats(e.ctx, &s0);
    CHECK_ST(dhs_round_begin(e.ctx, 0, NULL, NULL), DHS_OK);
    CHECK_ST(dhs_round_end(e.ctx, NULL), DHS_OK);
    dhs_get_stats(e.ctx, &s1);
    CHECK(s1.rounds == s0.rounds + 1);
    /* the request starts from position 0 */
    int32_t K = 3;
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
    CHECK_ST(th_write_block(&e, 0, 3), DHS_OK);
    /* n_items = 0: DHS_OK and nothing changes (items may be NULL) */
    {
        th_snap b0 = {0}, b1 = {0};
        th_snap_take(&e, &b0);
        CHECK_ST(dhs_resolve(e.ctx, 0, 8, 0, NULL), DHS_OK);
        dhs_resolve_item dummy = {e.rq[0].h, 3, NULL, NULL};
        CHECK_ST(dhs_resolve(e.ctx, 0, 8, 0, &dummy), DHS_OK);
        th_snap_take(&e, &b1);
        const char *d = th_snap_diff(&b0, &b1);
        CHECKF(d == NULL, "resolve with n_items = 0 changed %s", d ? d : "");
        th_snap_free(&b0);
        th_snap_free(&b1);
        /* the usual argument checks still come first */
        CHECK_ST(dhs_resolve(e.ctx, 0, 0, 0, NULL), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_resolve(e.ctx, 0, 9, 0, NULL), DHS_ERR_K_TOO_LARGE);
        CHECK_ST(dhs_resolve(e.ctx, 1, 8, 0, NULL), DHS_ERR_UNKNOWN_SOURCE);
    }
    /* resolve after dhs_group_done in the same round: DHS_OK, fresh valid locations */
    int32_t sel[3 * 8], loc[3 * 8], loc2[3 * 8];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 8; i++) sel[j * 8 + i] = i <= j ? i : -1;
    dhs_resolve_item it = {e.rq[0].h, 3, sel, loc};
    CHECK_ST(dhs_resolve(e.ctx, 0, 8, 1, &it), DHS_OK);
    CHECK(th_check_item(&e, 0, 0, 3, 8, sel, loc) == 0);
    CHECK_ST(dhs_group_done(e.ctx, 0), DHS_OK);
    CHECK_ST(dhs_group_done(e.ctx, 0), DHS_OK); /* twice: nothing left to release */
    it.loc = loc2;
    CHECK_ST(dhs_resolve(e.ctx, 0, 8, 1, &it), DHS_OK);
    CHECK(th_check_item(&e, 0, 0, 3, 8, sel, loc2) == 0);
    int32_t acc = 2;
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    e.rq[0].n += 3;
    CHECK_INV(e.ctx);
    CHECK(th_sweep(&e, 0, 8) == 0);
    th_env_free(&e);
}

/* `test_regress NAME` runs one test (for bisecting); no argument runs all */
int main(int argc, char **argv)
{
    static const struct { const char *name; void (*fn)(void); } tests[] = {
        {"overflow", test_write_rows_overflow},   {"split", test_split_write_crafted},
        {"split_random", test_split_write_random}, {"sync", test_sync_keeps_locations},
        {"handles", test_stale_handles},          {"twin", test_payload_free_twin},
        {"corners", test_corner_statuses},
    };
    double t0 = th_now();
    g_seed = th_seed("test_regress");
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (argc < 2 || !strcmp(argv[1], tests[i].name)) tests[i].fn();
    printf("test_regress: %.2f s\n", th_now() - t0);
    return th_summary();
}
