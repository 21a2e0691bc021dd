/* test_regress.c - regression tests for the defects of issue 9 (an outside
 * black-box test against include/dhs.h). Each test failed before its fix.
 *
 *  1. I1: dhs_write_rows with a huge first_row (first_row + n_rows overflows)
 *     is refused with DHS_ERR_ROW_RANGE and changes nothing, at every tail
 *     position; committed rows keep their bytes (tail and host copy).
 *  2. I2: the producer writes part of its block, resolves, then writes the
 *     rest: no write may land on a tail row whose location was handed out in
 *     the round or whose host copy is incomplete. Crafted (offset exactly the
 *     tail length) and randomised (split writes, late copies in random order,
 *     FOLLOW sources, m = 4).
 *  4. Stale handles: every handle of an older generation answers
 *     DHS_ERR_CLOSED, whether its slot is free or reused; handles that never
 *     existed answer DHS_ERR_UNKNOWN_REQUEST.
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
    c.max_k = 8;
    c.k_max = 4;
    c.hot_rows = 16;
    c.tail_rows = 8;
    c.page_rows = 4;
    c.max_rows = 600;
    c.device_bytes = 600ull * 4 * 64;
    c.repop_pages = 0;
    return c;
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
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
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

/* `test_regress NAME` runs one test (for bisecting); no argument runs all */
int main(int argc, char **argv)
{
    static const struct { const char *name; void (*fn)(void); } tests[] = {
        {"overflow", test_write_rows_overflow}, {"split", test_split_write_crafted},
        {"handles", test_stale_handles},
    };
    double t0 = th_now();
    g_seed = th_seed("test_regress");
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (argc < 2 || !strcmp(argv[1], tests[i].name)) tests[i].fn();
    printf("test_regress: %.2f s\n", th_now() - t0);
    return th_summary();
}
