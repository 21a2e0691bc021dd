/* test_api.c - the public API's contract on bad input and under faults.
 *
 *  1. The bad-input table: every public call validates its arguments. Each bad
 *     call returns its own status and changes no state: stats, memory figures,
 *     positions of every request, the bytes of the whole device pool and the
 *     invariant checker's verdict are compared before and after.
 *  2. Isolation (I3): two requests with different row contents; every location
 *     handed to one reads its own bytes, never the other's, even after a
 *     stream of refused calls.
 *  3. Configuration and architecture validation, field by field (including
 *     values that overflow 32-bit arithmetic).
 *  4. Status strings, NULL-safe calls.
 *  5. Fault injection: for open, import, resolve, group_done, round_end,
 *     round_begin and ctx_create, every host-allocation, device-allocation and
 *     copy fault point in turn: the call fails with that fault's status (or,
 *     where documented, absorbs it), invariants hold, no row is lost, a retry
 *     succeeds; no byte stays accounted after destroy.
 */
#include <limits.h>

#include "dhs_plan.h"
#include "core/backend.h" /* white-box: the backend's byte accounting */
#include "test_help.h"

/* ------------------------------------------------------------ fixture */
static dhs_arch api_arch(void) { return th_arch_two_groups(4); }

static dhs_config api_cfg(void)
{
    dhs_config c = dhs_config_default();
    c.max_requests = 6;
    c.sel_k = 16;
    c.spec_width = 4;
    c.hot_rows = 32;
    c.tail_rows = 16;
    c.page_rows = 8;
    c.max_rows = 600;
    c.device_bytes = 700ull * 8 * 64;
    c.repop_pages = 4;
    return c;
}

#define K_SEL 16
enum { A = 0, B = 1, C = 2, D = 3, E = 4 };

static int seen_status[32];

static int mem_eq(const dhs_mem *a, const dhs_mem *b)
{
    return a->pool_bytes == b->pool_bytes && a->required_bytes == b->required_bytes && a->optional_bytes == b->optional_bytes && a->reserve_bytes == b->reserve_bytes &&
           a->device_bytes_allocated == b->device_bytes_allocated && a->host_bytes_allocated == b->host_bytes_allocated &&
           a->pages_total == b->pages_total && a->pages_free == b->pages_free && a->requests_open == b->requests_open;
}

/* a bad call: its status, and no observable change */
#define BAD(e, call, want)                                                                         \
    do {                                                                                           \
        th_snap b0_ = {0}, b1_ = {0};                                                              \
        th_snap_take((e), &b0_);                                                                   \
        CHECK_ST(call, want);                                                                      \
        th_snap_take((e), &b1_);                                                                   \
        const char *d_ = th_snap_diff(&b0_, &b1_);                                                 \
        CHECKF(d_ == NULL && mem_eq(&b0_.mem, &b1_.mem), "%s changed state (%s)", #call, d_ ? d_ : "mem"); \
        CHECK_INV((e)->ctx);                                                                       \
        if ((want) < 0 && -(int)(want) < 32) seen_status[-(int)(want)] = 1;                        \
        th_snap_free(&b0_);                                                                        \
        th_snap_free(&b1_);                                                                        \
    } while (0)

/* ------------------------------------------------------------ 1 + 2: the bad-input table */
static void test_bad_input_table(void)
{
    th_env e;
    dhs_arch arch = api_arch();
    dhs_config cfg = api_cfg();
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    dhs_ctx *ctx = e.ctx;
    CHECK_ST(th_open(&e, A, 100), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, A, 100, DHS_IMPORT_DEVICE), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_open(&e, B, 200), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, B, 200, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_open(&e, C, 50), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, C, 50, DHS_IMPORT_DEVICE), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_close(&e, C), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_open(&e, D, 10), DHS_OK); /* opened, not imported */
    CHECK_INV(e.ctx);
    CHECK_ST(th_open(&e, E, cfg.max_rows), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, E, cfg.max_rows - 2, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(ctx);
    const dhs_req ra = e.rq[A].h, rb = e.rq[B].h, rc = e.rq[C].h, rd = e.rq[D].h, re = e.rq[E].h;
    const dhs_req bogus = {99, 1}, never = {5, 0}, never2 = {5, 3}, future = {ra.id, ra.gen + 5};
    uint8_t *rowbuf = th_alloc(64 * 64);
    const void *rows3[3] = {rowbuf, rowbuf, rowbuf};
    const void *rows_null1[3] = {rowbuf, NULL, rowbuf};
    const void *rows_mis[3] = {rowbuf, rowbuf, rowbuf + 8};
    int64_t n;

    /* ---- no round open */
    BAD(&e, dhs_request_open(NULL, 10, &e.rq[5].h), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_open(ctx, 10, NULL), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_open(ctx, -1, &e.rq[5].h), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_request_open(ctx, cfg.max_rows + 1, &e.rq[5].h), DHS_ERR_ROW_RANGE);

    BAD(&e, dhs_request_open(ctx, INT64_MIN, &e.rq[5].h), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_request_open(ctx, INT64_MAX, &e.rq[5].h), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_request_open(ctx, (int64_t)INT32_MAX + 1, &e.rq[5].h), DHS_ERR_ROW_RANGE);

    BAD(&e, dhs_request_import(NULL, rd, 10, rows3, DHS_IMPORT_HOST), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_import(ctx, rd, INT64_MIN, rows3, DHS_IMPORT_HOST), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_request_import(ctx, rd, INT64_MAX, rows3, DHS_IMPORT_HOST), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_request_import(ctx, rd, (int64_t)UINT32_MAX + 10, rows3, DHS_IMPORT_DEVICE), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_request_import(ctx, rd, 10, rows3, UINT_MAX), DHS_ERR_INVALID_ARG);
    {   /* handles with extreme fields */
        const dhs_req hx[] = {{UINT32_MAX, 1}, {UINT32_MAX, UINT32_MAX}, {ra.id, UINT32_MAX}, {0x80000000u, 1}};
        for (size_t i = 0; i < sizeof hx / sizeof hx[0]; i++) {
            BAD(&e, dhs_request_import(ctx, hx[i], 10, rows3, DHS_IMPORT_HOST), DHS_ERR_UNKNOWN_REQUEST);
            BAD(&e, dhs_request_close(ctx, hx[i]), DHS_ERR_UNKNOWN_REQUEST);
            BAD(&e, dhs_request_positions(ctx, hx[i], &n), DHS_ERR_UNKNOWN_REQUEST);
        }
    }
    BAD(&e, dhs_request_import(ctx, bogus, 10, rows3, DHS_IMPORT_HOST), DHS_ERR_UNKNOWN_REQUEST);
    BAD(&e, dhs_request_import(ctx, never, 10, rows3, DHS_IMPORT_HOST), DHS_ERR_UNKNOWN_REQUEST);
    BAD(&e, dhs_request_import(ctx, never2, 10, rows3, DHS_IMPORT_HOST), DHS_ERR_UNKNOWN_REQUEST);
    BAD(&e, dhs_request_import(ctx, future, 10, rows3, DHS_IMPORT_HOST), DHS_ERR_UNKNOWN_REQUEST);
    BAD(&e, dhs_request_import(ctx, rc, 10, rows3, DHS_IMPORT_HOST), DHS_ERR_CLOSED);
    BAD(&e, dhs_request_import(ctx, ra, 10, rows3, DHS_IMPORT_HOST), DHS_ERR_STATE); /* import twice */
    BAD(&e, dhs_request_import(ctx, rd, 10, rows3, 0), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_import(ctx, rd, 10, rows3, DHS_IMPORT_DEVICE | DHS_IMPORT_HOST), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_import(ctx, rd, 10, rows3, 4), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_import(ctx, rd, 10, rows3, DHS_IMPORT_DEVICE | 0x100u), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_import(ctx, rd, -1, rows3, DHS_IMPORT_HOST), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_request_import(ctx, rd, cfg.max_rows + 1, rows3, DHS_IMPORT_HOST), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_request_import(ctx, rd, 10, NULL, DHS_IMPORT_HOST), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_import(ctx, rd, 10, rows_null1, DHS_IMPORT_DEVICE), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_import(ctx, rd, 10, rows_mis, DHS_IMPORT_DEVICE), DHS_ERR_MISALIGNED);

    BAD(&e, dhs_request_close(NULL, ra), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_close(ctx, bogus), DHS_ERR_UNKNOWN_REQUEST);
    BAD(&e, dhs_request_close(ctx, never), DHS_ERR_UNKNOWN_REQUEST);
    BAD(&e, dhs_request_close(ctx, rc), DHS_ERR_CLOSED);
    BAD(&e, dhs_request_positions(ctx, ra, NULL), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_positions(NULL, ra, &n), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_request_positions(ctx, bogus, &n), DHS_ERR_UNKNOWN_REQUEST);
    BAD(&e, dhs_request_positions(ctx, rc, &n), DHS_ERR_CLOSED);

    dhs_req two[2] = {ra, rb}, dup[2] = {ra, ra}, withc[2] = {ra, rc}, withbogus[2] = {ra, bogus};
    int32_t K2[2] = {2, 1}, K0[2] = {0, 1}, K5[2] = {5, 1}, Kneg[2] = {-1, 1};
    BAD(&e, dhs_round_begin(NULL, 2, two, K2), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, -1, two, K2), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, cfg.max_requests + 1, two, K2), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, 2, NULL, K2), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, 2, two, NULL), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, 2, two, K0), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, 2, two, Kneg), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, 2, two, K5), DHS_ERR_TOO_MANY_QUERIES);
    BAD(&e, dhs_round_begin(ctx, 2, dup, K2), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, 2, withc, K2), DHS_ERR_CLOSED);
    BAD(&e, dhs_round_begin(ctx, 2, withbogus, K2), DHS_ERR_UNKNOWN_REQUEST);
    int32_t K4 = 4;
    BAD(&e, dhs_round_begin(ctx, 1, &re, &K4), DHS_ERR_ROW_RANGE); /* 598 + 4 > max_rows */
    int32_t Kmin[2] = {INT32_MIN, 1}, Kmax[2] = {INT32_MAX, 1}, Kmax2[2] = {1, INT32_MAX};
    BAD(&e, dhs_round_begin(ctx, INT32_MIN, two, K2), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, INT32_MAX, two, K2), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, 2, two, Kmin), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_begin(ctx, 2, two, Kmax), DHS_ERR_TOO_MANY_QUERIES);
    BAD(&e, dhs_round_begin(ctx, 2, two, Kmax2), DHS_ERR_TOO_MANY_QUERIES);

    BAD(&e, dhs_write_rows(NULL, ra, 0, 100, 1, rowbuf), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_write_rows(ctx, ra, 0, 100, 1, rowbuf), DHS_ERR_NOT_IN_ROUND);
    BAD(&e, dhs_write_rows(ctx, ra, 3, 100, 1, rowbuf), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_write_rows(ctx, ra, -1, 100, 1, rowbuf), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_write_rows(ctx, rc, 0, 50, 1, rowbuf), DHS_ERR_CLOSED);
    BAD(&e, dhs_write_rows(ctx, bogus, 0, 50, 1, rowbuf), DHS_ERR_UNKNOWN_REQUEST);
    BAD(&e, dhs_write_rows(ctx, ra, INT32_MIN, 100, 1, rowbuf), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_write_rows(ctx, ra, INT32_MAX, 100, 1, rowbuf), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_write_rows(ctx, ra, 0, INT64_MAX - 2, 4, rowbuf), DHS_ERR_NOT_IN_ROUND);

    int32_t sel[4 * K_SEL], loc[3 * 4 * K_SEL];
    for (int i = 0; i < 4 * K_SEL; i++) sel[i] = i % 3 == 0 ? -1 : i;
    dhs_resolve_item ia = {ra, 2, sel, loc};
    BAD(&e, dhs_resolve(NULL, 0, K_SEL, 1, &ia), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &ia), DHS_ERR_NOT_IN_ROUND); /* no round open */
    BAD(&e, dhs_resolve(ctx, 2, K_SEL, 1, &ia), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_resolve(ctx, -1, K_SEL, 1, &ia), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_resolve(ctx, INT32_MIN, K_SEL, 1, &ia), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_resolve(ctx, INT32_MAX, K_SEL, 1, &ia), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 0, NULL), DHS_ERR_NOT_IN_ROUND);
    BAD(&e, dhs_group_done(NULL, 0), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_group_done(ctx, INT32_MIN), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_group_done(ctx, INT32_MAX), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_group_done(ctx, -1), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_group_done(ctx, 0), DHS_ERR_STATE);
    BAD(&e, dhs_group_done(ctx, 5), DHS_ERR_UNKNOWN_SOURCE);
    int32_t acc2[2] = {0, 0};
    BAD(&e, dhs_round_end(NULL, acc2), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_round_end(ctx, acc2), DHS_ERR_STATE);
    BAD(&e, dhs_round_end(ctx, NULL), DHS_ERR_STATE);
    BAD(&e, dhs_sync(NULL), DHS_ERR_INVALID_ARG);

    uint8_t out[64] __attribute__((aligned(16)));
    int64_t pool_rows = dhs_source_pool_rows(ctx, 0);
    BAD(&e, dhs_read_location(NULL, 0, 0, out), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_read_location(ctx, 0, 0, NULL), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_read_location(ctx, 3, 0, out), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_read_location(ctx, 0, -1, out), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_read_location(ctx, 0, (int32_t)pool_rows, out), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_read_location(ctx, 0, INT32_MIN, out), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_read_location(ctx, 0, INT32_MAX, out), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_read_location(ctx, INT32_MIN, 0, out), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_read_location(ctx, INT32_MAX, 0, out), DHS_ERR_UNKNOWN_SOURCE);
    CHECK(dhs_source_pool(ctx, INT32_MIN) == NULL && dhs_source_pool(ctx, INT32_MAX) == NULL);
    CHECK(dhs_source_pool_rows(ctx, INT32_MIN) == 0 && dhs_source_pool_rows(ctx, INT32_MAX) == 0);
    CHECK(pool_rows > 0 && dhs_source_pool_rows(ctx, 3) == 0 && dhs_source_pool(ctx, 3) == NULL && dhs_source_pool(ctx, -1) == NULL);
    CHECK(dhs_source_pool(ctx, 0) == dhs_source_pool(ctx, 2)); /* one pool */

    /* ---- a round: A verifies 3 queries, B one; A's block written, B's not yet */
    dhs_req rab[2] = {ra, rb};
    int32_t Kab[2] = {3, 1};
    CHECK_ST(dhs_round_begin(ctx, 2, rab, Kab), DHS_OK);
    CHECK_INV(ctx);
    CHECK_ST(th_write_block(&e, A, 3), DHS_OK);
    CHECK_INV(ctx);
    /* a valid resolve for A first (misses, duplicates, padding, the block's rows) */
    int32_t selA[3 * K_SEL], locA[2 * 3 * K_SEL], selA1[3 * K_SEL], locA1[3 * K_SEL];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < K_SEL; i++) {
            int32_t v = (int32_t)((i * 7 + j * 13) % (100 + j + 1));
            selA[j * K_SEL + i] = i == 0 ? -1 : i == 1 ? 100 + j : i == 2 ? selA[j * K_SEL + 1] : v;
        }
    dhs_resolve_item itA = {ra, 3, selA, locA};
    CHECK_ST(dhs_resolve(ctx, 0, K_SEL, 1, &itA), DHS_OK);
    CHECK_INV(ctx);
    CHECK(th_check_item(&e, A, 0, 3, K_SEL, selA, locA) == 0);
    /* group 1 (m = 4): A's complete rows are 0..24 (positions < 100); row 25 is in the block */
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < K_SEL; i++) selA1[j * K_SEL + i] = i == 0 ? -1 : (int32_t)((i * 5 + j) % 25);
    dhs_resolve_item itA1 = {ra, 3, selA1, locA1};
    CHECK_ST(dhs_resolve(ctx, 1, K_SEL, 1, &itA1), DHS_OK);
    CHECK_INV(ctx);
    CHECK(th_check_item(&e, A, 1, 3, K_SEL, selA1, locA1) == 0);
    CHECK_INV(ctx);

    BAD(&e, dhs_round_begin(ctx, 2, rab, Kab), DHS_ERR_STATE);
    BAD(&e, dhs_write_rows(ctx, ra, 0, 99, 1, rowbuf), DHS_ERR_ROW_RANGE);   /* committed row */
    BAD(&e, dhs_write_rows(ctx, ra, 0, 100, 4, rowbuf), DHS_ERR_ROW_RANGE);  /* past the block */
    BAD(&e, dhs_write_rows(ctx, ra, 0, 103, 1, rowbuf), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_write_rows(ctx, ra, 2, 24, 1, rowbuf), DHS_ERR_ROW_RANGE);   /* m = 4: row 24 complete */
    BAD(&e, dhs_write_rows(ctx, ra, 2, 26, 1, rowbuf), DHS_ERR_ROW_RANGE);
    BAD(&e, dhs_write_rows(ctx, ra, 0, 100, -1, rowbuf), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_write_rows(ctx, ra, 0, 100, 1, NULL), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_write_rows(ctx, ra, 0, 100, 1, rowbuf + 8), DHS_ERR_MISALIGNED);
    BAD(&e, dhs_write_rows(ctx, rd, 0, 0, 1, rowbuf), DHS_ERR_NOT_IN_ROUND);
    BAD(&e, dhs_write_rows(ctx, rc, 0, 50, 1, rowbuf), DHS_ERR_CLOSED);
    BAD(&e, dhs_write_rows(ctx, ra, 7, 100, 1, rowbuf), DHS_ERR_UNKNOWN_SOURCE);
    /* extreme rows and counts: no sum overflows (the block is rows 100..102) */
    {
        const int64_t fr[] = {INT64_MIN, INT64_MIN + 1, -1, 0, (int64_t)INT32_MAX, (int64_t)UINT32_MAX, INT64_MAX / 2,
                              INT64_MAX - 16, INT64_MAX - 2, INT64_MAX - 1, INT64_MAX};
        const int32_t nr[] = {1, 4, 16, INT32_MAX};
        for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++)
            for (size_t j = 0; j < sizeof nr / sizeof nr[0]; j++) {
                BAD(&e, dhs_write_rows(ctx, ra, 0, fr[i], nr[j], rowbuf), DHS_ERR_ROW_RANGE);
                BAD(&e, dhs_write_rows(ctx, ra, 2, fr[i], nr[j], rowbuf), DHS_ERR_ROW_RANGE);
            }
        BAD(&e, dhs_write_rows(ctx, ra, 0, 100, INT32_MAX, rowbuf), DHS_ERR_ROW_RANGE);
        BAD(&e, dhs_write_rows(ctx, ra, 0, 104, 0, rowbuf), DHS_ERR_ROW_RANGE);
        BAD(&e, dhs_write_rows(ctx, ra, 0, 103, 0, rowbuf), DHS_OK); /* an empty range at the block's end */
        BAD(&e, dhs_write_rows(ctx, ra, 0, 100, INT32_MIN, rowbuf), DHS_ERR_INVALID_ARG);
        BAD(&e, dhs_write_rows(ctx, ra, 0, INT64_MAX, INT32_MIN, rowbuf), DHS_ERR_INVALID_ARG);
    }

    int32_t s2[4 * K_SEL], l2[3 * 4 * K_SEL];
#define SEL_A_WITH(j, i, v) (memcpy(s2, selA, sizeof selA), s2[(j) * K_SEL + (i)] = (v), (dhs_resolve_item){ra, 3, s2, l2})
    dhs_resolve_item it;
    it = (dhs_resolve_item){ra, 3, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL + 1, 1, &it), DHS_ERR_K_TOO_LARGE);
    BAD(&e, dhs_resolve(ctx, 0, 0, 1, &it), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, -1, &it), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, cfg.max_requests + 1, &it), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, NULL), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_resolve(ctx, 0, INT32_MIN, 1, &it), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_resolve(ctx, 0, INT32_MAX, 1, &it), DHS_ERR_K_TOO_LARGE);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, INT32_MIN, &it), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, INT32_MAX, &it), DHS_ERR_INVALID_ARG);
    BAD(&e, dhs_resolve(ctx, INT32_MIN, K_SEL, 1, &it), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_resolve(ctx, INT32_MAX, K_SEL, 1, &it), DHS_ERR_UNKNOWN_SOURCE);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 0, NULL), DHS_OK); /* n_items = 0: nothing changes */
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 0, &it), DHS_OK);
    it = (dhs_resolve_item){ra, INT32_MIN, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_INVALID_ARG);
    it = (dhs_resolve_item){ra, INT32_MAX, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_TOO_MANY_QUERIES);
    it = (dhs_resolve_item){ra, 0, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_INVALID_ARG);
    it = (dhs_resolve_item){ra, 3, selA, l2};
    BAD(&e, dhs_resolve(ctx, 3, K_SEL, 1, &it), DHS_ERR_UNKNOWN_SOURCE);
    it = (dhs_resolve_item){rd, 1, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_NOT_IN_ROUND);
    it = (dhs_resolve_item){rc, 1, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_CLOSED);
    it = (dhs_resolve_item){bogus, 1, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_UNKNOWN_REQUEST);
    it = (dhs_resolve_item){ra, 5, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_TOO_MANY_QUERIES);
    it = (dhs_resolve_item){ra, 2, selA, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_INVALID_ARG); /* not the round's K */
    it = (dhs_resolve_item){ra, 3, NULL, l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_INVALID_ARG);
    it = (dhs_resolve_item){ra, 3, selA, NULL};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_INVALID_ARG);
    it = (dhs_resolve_item){ra, 3, (const int32_t *)((const char *)s2 + 2), l2};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_MISALIGNED);
    it = (dhs_resolve_item){ra, 3, selA, (int32_t *)((char *)l2 + 1)};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_MISALIGNED);
    it = SEL_A_WITH(0, 5, -2);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_ROW_RANGE);
    it = SEL_A_WITH(2, 15, INT32_MIN);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_ROW_RANGE);
    it = SEL_A_WITH(0, 5, 101); /* query 0 sees positions 0..100 */
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_NOT_VISIBLE);
    it = SEL_A_WITH(1, 5, 102);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_NOT_VISIBLE);
    it = SEL_A_WITH(2, 5, 103);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_NOT_VISIBLE);
    it = SEL_A_WITH(1, 9, 150); /* a row only B has */
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_NOT_VISIBLE);
    it = SEL_A_WITH(0, 9, INT32_MAX);
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &it), DHS_ERR_NOT_VISIBLE);
    memcpy(s2, selA1, sizeof selA1);
    s2[2 * K_SEL + 3] = 25; /* m = 4: row 25 (positions 100..103) is incomplete for every query */
    it = (dhs_resolve_item){ra, 3, s2, l2};
    BAD(&e, dhs_resolve(ctx, 1, K_SEL, 1, &it), DHS_ERR_NOT_VISIBLE);
    s2[2 * K_SEL + 3] = 24; /* row 24 is complete: the same call succeeds (checked below, not here) */
    /* B's block is not written: its own row 200 is visible to its query but not there yet */
    int32_t selB[K_SEL], locB[2 * K_SEL];
    for (int i = 0; i < K_SEL; i++) selB[i] = i == 4 ? 200 : 120 + i * 3;
    dhs_resolve_item itB = {rb, 1, selB, locB};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 1, &itB), DHS_ERR_ROW_RANGE);
    /* a good item then a bad one: nothing of the good one happens (no copies, no cache change) */
    int32_t fresh[3 * K_SEL];
    for (int i = 0; i < 3 * K_SEL; i++) fresh[i] = 30 + i % 60; /* misses A has not fetched */
    dhs_resolve_item pair[2] = {{ra, 3, fresh, l2}, itB};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 2, pair), DHS_ERR_ROW_RANGE);
    dhs_resolve_item twice[2] = {{ra, 3, fresh, l2}, {ra, 3, fresh, l2}};
    BAD(&e, dhs_resolve(ctx, 0, K_SEL, 2, twice), DHS_ERR_INVALID_ARG);

    int32_t accAB[2];
    accAB[0] = -1; accAB[1] = 0;
    BAD(&e, dhs_round_end(ctx, accAB), DHS_ERR_ACCEPTED_RANGE);
    accAB[0] = 3; accAB[1] = 0;
    BAD(&e, dhs_round_end(ctx, accAB), DHS_ERR_ACCEPTED_RANGE);
    accAB[0] = 0; accAB[1] = 1;
    BAD(&e, dhs_round_end(ctx, accAB), DHS_ERR_ACCEPTED_RANGE);
    accAB[0] = INT32_MIN; accAB[1] = 0;
    BAD(&e, dhs_round_end(ctx, accAB), DHS_ERR_ACCEPTED_RANGE);
    accAB[0] = INT32_MAX; accAB[1] = 0;
    BAD(&e, dhs_round_end(ctx, accAB), DHS_ERR_ACCEPTED_RANGE);
    accAB[0] = 0; accAB[1] = INT32_MAX;
    BAD(&e, dhs_round_end(ctx, accAB), DHS_ERR_ACCEPTED_RANGE);
    accAB[0] = 0; accAB[1] = INT32_MIN;
    BAD(&e, dhs_round_end(ctx, accAB), DHS_ERR_ACCEPTED_RANGE);
    BAD(&e, dhs_round_end(ctx, NULL), DHS_ERR_INVALID_ARG);
    accAB[0] = 2; accAB[1] = 0;
    BAD(&e, dhs_round_end(ctx, accAB), DHS_ERR_STATE); /* B's committed row was never written */
    BAD(&e, dhs_request_close(ctx, ra), DHS_ERR_STATE); /* in the open round */
    BAD(&e, dhs_request_import(ctx, ra, 10, rows3, DHS_IMPORT_HOST), DHS_ERR_STATE);
    BAD(&e, dhs_group_done(ctx, 9), DHS_ERR_UNKNOWN_SOURCE);

    /* after all that: B writes and resolves; every location still reads its own request's bytes */
    CHECK_ST(th_write_block(&e, B, 1), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_resolve(ctx, 0, K_SEL, 1, &itB), DHS_OK);
    CHECK_INV(ctx);
    CHECK(th_check_item(&e, B, 0, 1, K_SEL, selB, locB) == 0);
    CHECK(th_check_item(&e, A, 0, 3, K_SEL, selA, locA) == 0);
    CHECK(th_check_item(&e, A, 1, 3, K_SEL, selA1, locA1) == 0);
    /* I3: no location of A is a location of B (either source) */
    int shared = 0;
    for (int x = 0; x < 2 * 3 * K_SEL; x++)
        for (int y = 0; y < 2 * K_SEL; y++)
            if (locA[x] >= 0 && locA[x] == locB[y]) shared++;
    CHECK(shared == 0);
    /* the FOLLOW source gets its own rows: same plan, different locations */
    int same = 0;
    for (int x = 0; x < 3 * K_SEL; x++) same += selA[x] >= 0 && locA[x] == locA[3 * K_SEL + x];
    CHECK(same == 0);
    accAB[0] = 2; accAB[1] = 0;
    CHECK_ST(dhs_round_end(ctx, accAB), DHS_OK);
    CHECK_INV(ctx);
    e.rq[A].n += 3;
    e.rq[B].n += 1;
    CHECK_INV(ctx);
    CHECK(dhs_request_positions(ctx, ra, &n) == DHS_OK && n == 103);
    CHECK(dhs_request_positions(ctx, rb, &n) == DHS_OK && n == 201);
    /* D can still be imported after all the refused attempts */
    CHECK_ST(th_import(&e, D, 10, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(ctx);
    CHECK(th_sweep(&e, A, K_SEL) == 0);
    CHECK(th_sweep(&e, B, K_SEL) == 0);
    CHECK(th_sweep(&e, D, K_SEL) == 0);
    CHECK_INV(ctx);
    /* a closed handle stays refused after its slot is reused by a new request (generations) */
    CHECK_ST(th_close(&e, D), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_request_positions(ctx, rd, &n), DHS_ERR_CLOSED);
    CHECK(rd.id == rc.id && rd.gen != rc.gen); /* D took closed C's slot, a new generation */
    CHECK_ST(th_open(&e, 5, 5), DHS_OK);        /* the lowest free slot again: a third generation */
    CHECK_INV(e.ctx);
    CHECK(e.rq[5].h.id == rd.id && e.rq[5].h.gen != rd.gen && e.rq[5].h.gen != rc.gen);
    CHECK_ST(dhs_request_close(ctx, rc), DHS_ERR_CLOSED);
    CHECK_INV(ctx);
    CHECK_ST(dhs_request_close(ctx, rd), DHS_ERR_CLOSED);
    CHECK_INV(ctx);
    CHECK_ST(dhs_request_positions(ctx, rd, &n), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_positions(ctx, e.rq[5].h, &n), DHS_OK);
    CHECK_INV(ctx);
    free(rowbuf);
    th_env_free(&e);
    int expect[] = {DHS_ERR_INVALID_ARG, DHS_ERR_MISALIGNED, DHS_ERR_UNKNOWN_REQUEST, DHS_ERR_UNKNOWN_SOURCE,
                    DHS_ERR_ROW_RANGE, DHS_ERR_NOT_VISIBLE, DHS_ERR_K_TOO_LARGE, DHS_ERR_TOO_MANY_QUERIES,
                    DHS_ERR_STATE, DHS_ERR_ACCEPTED_RANGE, DHS_ERR_NOT_IN_ROUND, DHS_ERR_CLOSED};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        CHECKF(seen_status[-expect[i]], "status %s never exercised", dhs_status_str((dhs_status)expect[i]));
}

/* ------------------------------------------------------------ 3: config and arch validation */
static void create_fails(const char *what, const dhs_arch *arch, const dhs_config *cfg, dhs_status want1, dhs_status want2)
{
    dhs_backend *be;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    dhs_ctx *ctx = (dhs_ctx *)(uintptr_t)1;
    dhs_status s = dhs_ctx_create(arch, cfg, be, &ctx);
    CHECKF(s == want1 || s == want2, "%s: dhs_ctx_create returned %s", what, dhs_status_str(s));
    CHECKF(ctx == NULL, "%s: *out not cleared", what);
    CHECKF(be->host_bytes == 0 && be->dev_bytes == 0, "%s: %llu host / %llu device bytes left accounted", what,
           (unsigned long long)be->host_bytes, (unsigned long long)be->dev_bytes);
    if (s == DHS_OK) dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
}

static void test_config_validation(void)
{
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = 64;
    dhs_config base = api_cfg();
    base.device_bytes = 1000ull * 8 * 64;
    {
        dhs_backend *be;
        dhs_ctx *ctx;
        CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
        CHECK_ST(dhs_ctx_create(&a, &base, be, &ctx), DHS_OK);
        dhs_ctx_destroy(ctx);
        CHECK(be->host_bytes == 0 && be->dev_bytes == 0);
        CHECK_ST(dhs_ctx_create(NULL, &base, be, &ctx), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_ctx_create(&a, NULL, be, &ctx), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_ctx_create(&a, &base, NULL, &ctx), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_ctx_create(&a, &base, be, NULL), DHS_ERR_INVALID_ARG);
        dhs_backend_destroy(be);
        dhs_backend *be2 = (dhs_backend *)(uintptr_t)1;
        dhs_cpu_options bad = {.async_delay = -1};
        CHECK_ST(dhs_backend_cpu_create(&bad, &be2), DHS_ERR_INVALID_ARG);
        CHECK(be2 == NULL);
        CHECK_ST(dhs_backend_cpu_create(NULL, NULL), DHS_ERR_INVALID_ARG);
    }
#define CFG_BAD(field, value, w1, w2)                                      \
    do {                                                                   \
        dhs_config c_ = base;                                              \
        c_.field = value;                                                  \
        create_fails(#field " = " #value, &a, &c_, w1, w2);                \
    } while (0)
    const dhs_status INV = DHS_ERR_INVALID_ARG, BIG = DHS_ERR_TOO_LARGE;
    CFG_BAD(max_requests, 0, INV, INV);
    CFG_BAD(max_requests, -3, INV, INV);
    CFG_BAD(max_requests, (1 << 20) + 1, INV, INV);
    CFG_BAD(copy_threads, -1, INV, INV);
    CFG_BAD(copy_threads, INT32_MIN, INV, INV);
    CFG_BAD(sel_k, 0, INV, INV);
    CFG_BAD(sel_k, -1, INV, INV);
    CFG_BAD(sel_k, (1 << 24) + 1, INV, INV);
    CFG_BAD(spec_width, 0, INV, INV);
    CFG_BAD(spec_width, -2, INV, INV);
    CFG_BAD(spec_width, INT32_MAX, INV, BIG);     /* 2 * k_max must not overflow */
    CFG_BAD(spec_width, 9, INV, INV);             /* tail_rows 16 < 2 * k_max */
    CFG_BAD(hot_rows, 0, INV, INV);
    CFG_BAD(hot_rows, -8, INV, INV);
    CFG_BAD(hot_rows, 4, INV, INV);          /* below page_rows */
    CFG_BAD(hot_rows, 36, INV, INV);         /* not a multiple of page_rows */
    CFG_BAD(hot_rows, INT32_MAX - 7, INV, BIG); /* hot + tail must not overflow */
    CFG_BAD(tail_rows, 0, INV, INV);
    CFG_BAD(tail_rows, 12, INV, INV);
    CFG_BAD(tail_rows, INT32_MAX - 7, INV, BIG);
    CFG_BAD(page_rows, 0, INV, INV);
    CFG_BAD(page_rows, -8, INV, INV);
    CFG_BAD(page_rows, 64, INV, INV);        /* hot 32 < page 64 */
    CFG_BAD(max_rows, 0, INV, INV);
    CFG_BAD(max_rows, -5, INV, INV);
    CFG_BAD(max_rows, INT64_MAX, INV, BIG);  /* (max_rows + m - 1) must not overflow */
    CFG_BAD(device_bytes, 0, BIG, BIG);
    CFG_BAD(device_bytes, 50ull * 8 * 64, BIG, BIG); /* below the staging arena (48 pages) + one request (6) */
    CFG_BAD(device_bytes, (uint64_t)1 << 62, INV, BIG);
    CFG_BAD(reserve_bytes, 1000ull * 8 * 64, BIG, BIG);
    CFG_BAD(repop_pages, -1, INV, INV);
    CFG_BAD(policy, (dhs_policy)-1, INV, INV);
    CFG_BAD(policy, DHS_POLICY_COUNT_, INV, INV);
    CFG_BAD(reclaim_order, (dhs_reclaim_order)-1, INV, INV);
    CFG_BAD(reclaim_order, DHS_RECLAIM_COUNT_, INV, INV);
    {   /* k_max * max_k must not overflow the staging arithmetic */
        dhs_config c = base;
        c.spec_width = 1 << 10;
        c.sel_k = 1 << 22;
        c.tail_rows = 1 << 11;
        create_fails("k_max * max_k = 2^32", &a, &c, INV, BIG);
    }
    /* extreme values of every integer field: dhs_ctx_create answers its status, leaves nothing
       allocated, and dhs_config_sizes answers without overflowing (and leaves *out alone on error) */
#define CFG_EXT(field, value, want_create, want_sizes)                                                  \
    do {                                                                                              \
        dhs_config c_ = base;                                                                         \
        c_.field = value;                                                                             \
        if ((want_create) == DHS_OK) {                                                                \
            dhs_backend *be_;                                                                         \
            dhs_ctx *x_ = NULL;                                                                       \
            CHECK_ST(dhs_backend_cpu_create(NULL, &be_), DHS_OK);                                     \
            CHECK_ST(dhs_ctx_create(&a, &c_, be_, &x_), DHS_OK);                                      \
            CHECK_INV(x_);                                                                            \
            dhs_ctx_destroy(x_);                                                                      \
            CHECK(be_->host_bytes == 0 && be_->dev_bytes == 0);                                       \
            dhs_backend_destroy(be_);                                                                 \
        } else {                                                                                      \
            create_fails(#field " = " #value, &a, &c_, want_create, want_create);                     \
        }                                                                                             \
        dhs_sizes z_;                                                                                 \
        memset(&z_, 0x3c, sizeof z_);                                                                 \
        dhs_sizes z0_ = z_;                                                                           \
        dhs_status zs_ = dhs_config_sizes(&a, &c_, &z_);                                              \
        CHECKF(zs_ == (want_sizes), "dhs_config_sizes(" #field " = " #value ") returned %s", dhs_status_str(zs_)); \
        if (zs_ != DHS_OK) CHECKF(!memcmp(&z_, &z0_, sizeof z_), "dhs_config_sizes(" #field ") wrote *out on error"); \
    } while (0)
    const dhs_status OK = DHS_OK;
    CFG_EXT(max_requests, INT32_MIN, INV, INV);
    CFG_EXT(max_requests, INT32_MAX, INV, INV);
    CFG_EXT(sel_k, INT32_MIN, INV, INV);
    CFG_EXT(sel_k, INT32_MAX, INV, INV);
    CFG_EXT(spec_width, INT32_MIN, INV, INV);
    CFG_EXT(hot_rows, INT32_MIN, INV, INV);
    CFG_EXT(hot_rows, INT32_MAX, INV, INV);
    CFG_EXT(tail_rows, INT32_MIN, INV, INV);
    CFG_EXT(tail_rows, INT32_MAX, INV, INV);
    CFG_EXT(page_rows, INT32_MIN, INV, INV);
    CFG_EXT(page_rows, INT32_MAX, INV, INV);
    CFG_EXT(page_rows, -1, INV, INV);
    CFG_EXT(max_rows, INT64_MIN, INV, INV);
    CFG_EXT(max_rows, INT64_MAX, INV, INV);
    CFG_EXT(max_rows, (int64_t)INT32_MAX + 1, INV, INV);
    CFG_EXT(max_rows, -1, INV, INV);
    CFG_EXT(device_bytes, UINT64_MAX, INV, OK);      /* more pool rows than 2^31-1 */
    CFG_EXT(device_bytes, 1, BIG, OK);               /* below one page */
    CFG_EXT(reserve_bytes, UINT64_MAX, BIG, BIG);    /* rounding up to pages must not wrap to 0 */
    CFG_EXT(reserve_bytes, UINT64_MAX - 511, BIG, BIG); /* whole pages, but the sum with staging passes 2^64 */
    CFG_EXT(reserve_bytes, (uint64_t)INT64_MAX + 1, BIG, OK);
    CFG_EXT(staging_arenas, INT32_MAX, BIG, OK);     /* 2^31-1 arenas: cannot fit */
    CFG_EXT(repop_pages, INT32_MIN, INV, INV);
    CFG_EXT(policy, (dhs_policy)INT32_MAX, INV, INV);
    CFG_EXT(policy, (dhs_policy)INT32_MIN, INV, INV);
    CFG_EXT(reclaim_order, (dhs_reclaim_order)INT32_MAX, INV, INV);
    CFG_EXT(reclaim_order, (dhs_reclaim_order)INT32_MIN, INV, INV);
    /* valid extremes */
    CFG_EXT(staging_arenas, INT32_MIN, OK, OK);      /* negative: no staging */
    CFG_EXT(repop_pages, INT32_MAX, OK, OK);
    CFG_EXT(resident_first, INT32_MIN, OK, OK);
    CFG_EXT(decoded_optional, INT32_MIN, OK, OK);
    {   /* the largest rows and pages: the byte figures pass 2^64, never wrap */
        dhs_arch wide = api_arch();
        wide.sources[0].row_bytes = 0xFFFFFFF0u;
        CHECK_ST(dhs_arch_validate(&wide), DHS_OK);
        dhs_config c = base;
        c.page_rows = 1 << 30;
        c.hot_rows = 1 << 30;
        c.tail_rows = 1 << 30;
        c.sel_k = 1;
        c.spec_width = 1;
        c.max_requests = 1;
        dhs_sizes z;
        CHECK_ST(dhs_config_sizes(&wide, &c, &z), DHS_ERR_TOO_LARGE); /* 3 sources x 2 pages x 2^62 B */
        create_fails("row_bytes 2^32-16, page_rows 2^30", &wide, &c, BIG, BIG);
        c.device_bytes = UINT64_MAX;
        create_fails("... with device_bytes 2^64-1", &wide, &c, BIG, BIG);
        wide.n_sources = 1;
        wide.n_groups = 1;
        wide.n_consumers = 1;
        CHECK_ST(dhs_config_sizes(&wide, &c, &z), DHS_OK); /* one source: 2 x 2^62 B fits 64 bits */
        CHECK(z.page_bytes == (uint64_t)0xFFFFFFF0u << 30 && z.request_bytes == 2 * z.page_bytes && z.staging_bytes == 0);
        c.reserve_bytes = UINT64_MAX;
        CHECK_ST(dhs_config_sizes(&wide, &c, &z), DHS_ERR_TOO_LARGE);
        c.reserve_bytes = 0;
        c.staging_arenas = 1;
        CHECK_ST(dhs_config_sizes(&wide, &c, &z), DHS_OK); /* 2 request pages + 1 arena page: 3 x (2^62 - 2^34) */
        CHECK(z.min_device_bytes == 3 * z.page_bytes);
        c.reserve_bytes = 2 * z.page_bytes;
        CHECK_ST(dhs_config_sizes(&wide, &c, &z), DHS_ERR_TOO_LARGE); /* 5 pages pass 2^64 */
        create_fails("one source of 2^32-16 B rows, pages of 2^30 rows", &wide, &c, BIG, BIG);
        c.reserve_bytes = 0;
        create_fails("the same, no reserve (4 pool pages > 2^31-1 rows)", &wide, &c, INV, INV);
        CHECK_ST(dhs_config_sizes(NULL, &c, &z), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_config_sizes(&wide, NULL, &z), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_config_sizes(&wide, &c, NULL), DHS_ERR_INVALID_ARG);
    }
}

/* ------------------------------------------------------------ 3b: sizing helpers at extreme values */
static void test_sizing_extremes(void)
{
    /* dhs_ring_rows: 0 for bad arguments and for results past INT64_MAX */
    CHECK(dhs_ring_rows(INT64_MAX, 8, 64) == 0);
    CHECK(dhs_ring_rows(INT64_MAX - 100, 1, 64) == 0);
    CHECK(dhs_ring_rows(INT64_MIN, 8, 64) == 0 && dhs_ring_rows(-1, 8, 64) == 0);
    CHECK(dhs_ring_rows(0, INT32_MIN, 64) == 0 && dhs_ring_rows(0, 0, 64) == 0 && dhs_ring_rows(0, -1, 64) == 0);
    CHECK(dhs_ring_rows(0, 8, INT32_MIN) == 0 && dhs_ring_rows(0, 8, 0) == 0);
    int64_t r = dhs_ring_rows(INT64_MAX - 200, 1, 64);
    CHECKF(r > 0 && r % 64 == 0 && r >= INT64_MAX - 200 + 1, "ring_rows near INT64_MAX = %lld", (long long)r);
    r = dhs_ring_rows(0, INT32_MAX, INT32_MAX);
    CHECKF(r == 2 * (int64_t)INT32_MAX, "ring_rows(0, 2^31-1, 2^31-1) = %lld", (long long)r);
    r = dhs_ring_rows(INT32_MAX, INT32_MAX, 1);
    CHECK(r == 2 * (int64_t)INT32_MAX);
    /* dhs_ring_bytes: 0 for bad arguments, UINT64_MAX when the total passes 2^64-1 */
    CHECK(dhs_ring_bytes(2048, 8, 64, INT32_MAX, UINT64_MAX) == UINT64_MAX);
    CHECK(dhs_ring_bytes(2048, 8, 64, INT32_MAX, (uint64_t)1 << 32) == UINT64_MAX);
    CHECK(dhs_ring_bytes(2048, 8, 64, INT32_MAX, 1) == (uint64_t)INT32_MAX * 2176);
    CHECK(dhs_ring_bytes(2048, 8, 64, INT32_MIN, 1) == 0 && dhs_ring_bytes(2048, 8, 64, -1, 1) == 0);
    CHECK(dhs_ring_bytes(INT64_MAX, 8, 64, 1, 1) == 0 && dhs_ring_bytes(2048, 8, 64, 0, UINT64_MAX) == 0);
    /* dhs_ring_row: -1 for bad arguments and when slot * ring_rows + t mod ring_rows passes INT64_MAX */
    CHECK(dhs_ring_row(INT64_MAX, 1, 0) == -1);
    CHECK(dhs_ring_row(INT64_MAX, 0, INT64_MAX) == 0);
    CHECK(dhs_ring_row(INT64_MAX, 0, INT64_MAX - 1) == INT64_MAX - 1);
    CHECK(dhs_ring_row((int64_t)1 << 40, INT32_MAX, 0) == -1);
    CHECK(dhs_ring_row(2, INT32_MAX, INT64_MAX) == 2 * (int64_t)INT32_MAX + 1);
    CHECK(dhs_ring_row(INT64_MAX / 2, 1, INT64_MAX) == INT64_MAX / 2 + 1);
    CHECK(dhs_ring_row(INT64_MAX / 2, 2, 0) == -1); /* slot 2's rows would reach 3 x (2^62-1) - 1 */
    CHECK(dhs_ring_row(INT64_MIN, 0, 0) == -1 && dhs_ring_row(0, 0, 0) == -1);
    CHECK(dhs_ring_row(5, INT32_MIN, 0) == -1 && dhs_ring_row(5, 0, INT64_MIN) == -1 && dhs_ring_row(5, 0, -1) == -1);
    /* dhs_staging_bytes: 0 for negative factors, UINT64_MAX past 2^64-1 */
    CHECK(dhs_staging_bytes(INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, UINT64_MAX) == UINT64_MAX);
    CHECK(dhs_staging_bytes(INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, 1) == UINT64_MAX);
    CHECK(dhs_staging_bytes(2, 1, 1, 1, UINT64_MAX) == UINT64_MAX);
    CHECK(dhs_staging_bytes(1, 1, 1, 1, UINT64_MAX) == UINT64_MAX);
    CHECK(dhs_staging_bytes(INT32_MAX, INT32_MAX, 1, 1, 2) == 2 * (uint64_t)INT32_MAX * (uint64_t)INT32_MAX);
    CHECK(dhs_staging_bytes(INT32_MIN, 1, 1, 1, 1) == 0 && dhs_staging_bytes(1, INT32_MIN, 1, 1, 1) == 0);
    CHECK(dhs_staging_bytes(1, 1, INT32_MIN, 1, 1) == 0 && dhs_staging_bytes(1, 1, 1, -1, 1) == 0);
    CHECK(dhs_staging_bytes(0, INT32_MAX, INT32_MAX, INT32_MAX, UINT64_MAX) == 0);
    /* dhs_spec_width: any sessions; a schedule with a bad step count answers 1 and reads nothing */
    dhs_spec_schedule sch = dhs_spec_schedule_default();
    CHECK(dhs_spec_width(&sch, INT32_MIN) == 8 && dhs_spec_width(&sch, INT32_MAX) == 4 && dhs_spec_width(&sch, 0) == 8);
    sch.n_steps = INT32_MAX;
    CHECK(dhs_spec_width(&sch, 100) == 1);
    sch.n_steps = DHS_MAX_SCHEDULE_STEPS + 1;
    CHECK(dhs_spec_width(&sch, 100) == 1);
    sch.n_steps = INT32_MIN;
    CHECK(dhs_spec_width(&sch, 100) == 1);
    CHECK(dhs_spec_width(NULL, 5) == 1);
    /* dhs_spec_schedule_parse: numbers past long, int32 and the limits fail and leave *out alone */
    const char *bad[] = {"9223372036854775808@0", "99999999999999999999@0", "8@9223372036854775808", "8@99999999999999999999",
                         "-2147483648@0", "2147483647@0", "4294967297@0", "65@0", "0@0", "8@-1", "8@2147483647",
                         "8@1073741825", "8@4294967296", "8@0,4@-9223372036854775808", "8@0,6@33,4@128,2@0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dhs_spec_schedule o, o0;
        memset(&o, 0x5a, sizeof o);
        o0 = o;
        CHECKF(dhs_spec_schedule_parse(bad[i], &o) != 0, "parse accepted \"%s\"", bad[i]);
        CHECKF(!memcmp(&o, &o0, sizeof o), "parse of \"%s\" wrote *out", bad[i]);
    }
    dhs_spec_schedule o;
    CHECK(dhs_spec_schedule_parse("64@1073741824", &o) == 0 && o.n_steps == 1 && o.width[0] == 64 && o.min_sessions[0] == 1 << 30);
    CHECK(dhs_spec_width(&o, INT32_MAX) == 64 && dhs_spec_width(&o, INT32_MIN) == 64);
    /* the CPU backend's options and fault counters */
    dhs_backend *be = (dhs_backend *)(uintptr_t)1;
    dhs_cpu_options bo = {.async_delay = INT32_MIN};
    CHECK_ST(dhs_backend_cpu_create(&bo, &be), DHS_ERR_INVALID_ARG);
    CHECK(be == NULL);
    bo = (dhs_cpu_options){.async_delay = INT32_MAX, .random_order = INT32_MIN, .seed = UINT64_MAX};
    CHECK_ST(dhs_backend_cpu_create(&bo, &be), DHS_OK);
    dhs_backend_fault_at(be, DHS_FAULT_COPY, UINT64_MAX);
    {   /* a context on it works: copies complete only when waited for */
        dhs_arch a = dhs_arch_default();
        a.sources[0].row_bytes = 64;
        dhs_config c = api_cfg();
        dhs_ctx *ctx;
        CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_OK);
        dhs_req r;
        CHECK_ST(dhs_request_open(ctx, 40, &r), DHS_OK);
        CHECK_ST(dhs_request_import(ctx, r, 0, NULL, DHS_IMPORT_HOST), DHS_OK);
        int32_t K = 1, acc = 0;
        uint8_t row[64] __attribute__((aligned(16))) = {0};
        for (int i = 0; i < 30; i++) {
            CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
            CHECK_ST(dhs_write_rows(ctx, r, 0, i, 1, row), DHS_OK);
            CHECK_ST(dhs_round_end(ctx, &acc), DHS_OK);
        }
        CHECK_INV(ctx);
        CHECK_ST(dhs_sync(ctx), DHS_OK);
        CHECK_INV(ctx);
        dhs_ctx_destroy(ctx);
    }
    CHECK(dhs_backend_faults_injected(be) == 0);
    CHECK(be->host_bytes == 0 && be->dev_bytes == 0);
    dhs_backend_destroy(be);
}

static void test_arch_validation(void)
{
    dhs_config cfg = api_cfg();
    CHECK_ST(dhs_arch_validate(NULL), DHS_ERR_INVALID_ARG);
    dhs_arch good = api_arch();
    CHECK_ST(dhs_arch_validate(&good), DHS_OK);
    dhs_arch d = dhs_arch_default();
    CHECK_ST(dhs_arch_validate(&d), DHS_OK);
    CHECK(d.n_groups == 1 && d.n_sources == 1 && d.sources[0].row_bytes == 576 && d.sources[0].m == 1);
#define ARCH_BAD(stmt)                                                             \
    do {                                                                           \
        dhs_arch x_ = api_arch();                                                  \
        stmt;                                                                      \
        CHECKF(dhs_arch_validate(&x_) == DHS_ERR_INVALID_ARG, "accepted: %s", #stmt); \
        create_fails(#stmt, &x_, &cfg, DHS_ERR_INVALID_ARG, DHS_ERR_INVALID_ARG);  \
    } while (0)
    ARCH_BAD(x_.n_groups = 0);
    ARCH_BAD(x_.n_groups = -1);
    ARCH_BAD(x_.n_sources = 0);
    ARCH_BAD(x_.n_sources = DHS_MAX_SOURCES + 1);
    ARCH_BAD(x_.n_groups = 4);                         /* more groups than sources */
    ARCH_BAD(x_.n_groups = 3);                         /* group 2 has no source */
    ARCH_BAD(x_.sources[1].row_bytes = 0);
    ARCH_BAD(x_.sources[1].row_bytes = 40);            /* not a multiple of 16 */
    ARCH_BAD(x_.sources[2].m = 0);
    ARCH_BAD(x_.sources[0].m = 2);                     /* m differs within group 0 */
    ARCH_BAD(x_.sources[2].m = 0x80000000u);           /* negative as int32 */
    ARCH_BAD(x_.sources[2].m = UINT32_MAX);
    ARCH_BAD(x_.sources[1].group = -1);
    ARCH_BAD(x_.sources[1].group = 2);
    ARCH_BAD(x_.n_consumers = -1);
    ARCH_BAD(x_.n_consumers = DHS_MAX_CONSUMERS + 1);
    ARCH_BAD(x_.consumers[1].kind = (dhs_consumer_kind)7);
    ARCH_BAD(x_.consumers[1].kind = (dhs_consumer_kind)-1);
    ARCH_BAD(x_.consumers[1].source = 3);
    ARCH_BAD(x_.consumers[1].source = -1);
    ARCH_BAD(x_.consumers[1].group = 2);
    ARCH_BAD(x_.consumers[2].group = 0);               /* source 2 belongs to group 1 */
    /* valid corner: no consumers described */
    dhs_arch nc = api_arch();
    nc.n_consumers = 0;
    CHECK_ST(dhs_arch_validate(&nc), DHS_OK);
}

/* ------------------------------------------------------------ 4: strings and NULL safety */
static void test_strings_and_null(void)
{
    const char *seen[64];
    int ns = 0;
    for (int s = DHS_STATUS_LAST_; s <= DHS_WAIT; s++) {
        const char *str = dhs_status_str((dhs_status)s);
        CHECKF(str && *str && strcmp(str, dhs_status_str((dhs_status)999)) != 0, "status %d has no string", s);
        for (int i = 0; i < ns; i++) CHECKF(strcmp(seen[i], str) != 0, "status %d shares the string \"%s\"", s, str);
        seen[ns++] = str;
    }
    CHECK(ns == 1 - DHS_STATUS_LAST_ + 1);
    CHECK(dhs_status_str((dhs_status)(DHS_STATUS_LAST_ - 1)) != NULL && dhs_status_str((dhs_status)2) != NULL);
    CHECK(strcmp(dhs_consumer_kind_str(DHS_CONSUMER_OWN), dhs_consumer_kind_str(DHS_CONSUMER_FOLLOW)) != 0);
    CHECK(strcmp(dhs_consumer_kind_str(DHS_CONSUMER_REUSE), dhs_consumer_kind_str(DHS_CONSUMER_REINDEX)) != 0);
    CHECK(dhs_consumer_kind_str((dhs_consumer_kind)9) != NULL);
    for (int o = 0; o < DHS_RECLAIM_COUNT_; o++)
        for (int p = o + 1; p < DHS_RECLAIM_COUNT_; p++)
            CHECK(strcmp(dhs_reclaim_order_str((dhs_reclaim_order)o), dhs_reclaim_order_str((dhs_reclaim_order)p)) != 0);
    CHECK(dhs_reclaim_order_str((dhs_reclaim_order)9) != NULL);
    /* NULL-safe calls */
    dhs_ctx_destroy(NULL);
    dhs_backend_destroy(NULL);
    dhs_reset_stats(NULL);
    dhs_stats st;
    memset(&st, 0x7f, sizeof st);
    dhs_get_stats(NULL, &st);
    dhs_mem mem;
    dhs_get_mem(NULL, &mem);
    char msg[16] = "x";
    CHECK(dhs_check_invariants(NULL, msg, sizeof msg) == 0);
    CHECK(dhs_source_pool(NULL, 0) == NULL && dhs_source_pool_rows(NULL, 0) == 0);
    CHECK(dhs_backend_name(NULL) != NULL);
    dhs_backend_fault_at(NULL, DHS_FAULT_COPY, 1);
    CHECK(dhs_backend_faults_injected(NULL) == 0);
    dhs_backend *be;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    CHECK(strcmp(dhs_backend_name(be), "cpu") == 0);
    dhs_backend_fault_at(be, (dhs_fault_kind)7, 1); /* ignored */
    dhs_backend_fault_at(be, (dhs_fault_kind)-1, 1);
    CHECK(dhs_backend_faults_injected(be) == 0);
    dhs_arch a = dhs_arch_default();
    dhs_config c = dhs_config_default();
    c.device_bytes = 64ull << 20;
    dhs_ctx *ctx;
    CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_OK);
    dhs_get_stats(ctx, NULL);
    dhs_get_mem(ctx, NULL);
    CHECK(dhs_check_invariants(ctx, NULL, 0) == 0);
    CHECK_ST(dhs_sync(ctx), DHS_OK);
    dhs_ctx_destroy(ctx);
    CHECK(be->host_bytes == 0 && be->dev_bytes == 0);
    dhs_backend_destroy(be);
    /* the CUDA entry point answers UNSUPPORTED (no CUDA in this build) or works */
    dhs_backend *cb = NULL;
    dhs_status cs = dhs_backend_cuda_create(0, &cb);
    CHECK(cs == DHS_OK || cs == DHS_ERR_UNSUPPORTED);
    if (cs == DHS_OK) dhs_backend_destroy(cb);
    else CHECK(cb == NULL);
}

/* ------------------------------------------------------------ 5: fault injection */
typedef struct fault_case {
    const char *name;
    int async_delay;
    int pressure;                  /* small pool: the open must reclaim */
    void (*setup)(th_env *e, const struct fault_case *fc);
    dhs_status (*op)(th_env *e);
    void (*after)(th_env *e);      /* after the op (or its retry) succeeded */
    int absorbs;                   /* the call may absorb a fault and return OK (documented) */
} fault_case;

static int32_t f_sel[4 * K_SEL], f_loc[3 * 4 * K_SEL];
static int32_t f_K[2];

static dhs_config fault_cfg(const fault_case *fc)
{
    dhs_config c = api_cfg();
    c.max_rows = 1400; /* host chunks are 1024 rows: backups cross a chunk; room for the sweeps */
    /* staging 2 x 48 pages + 3 requests x 18 pages + A's optional pages (2 x 12 + 3) */
    if (fc->pressure) {
        c.device_bytes = (96ull + 3 * 18 + 27 + 4) * 8 * 64;
        c.reclaim_order = DHS_RECLAIM_OLDEST; /* A: device-imported pages without host copies */
    }
    else c.device_bytes = 900ull * 8 * 64;
    return c;
}

static void setup_two(th_env *e, const fault_case *fc)
{
    dhs_arch arch = api_arch();
    dhs_config cfg = fault_cfg(fc);
    dhs_cpu_options o = {.async_delay = fc->async_delay, .random_order = 0, .seed = 7};
    if (th_env_init(e, &arch, &cfg, &o) != DHS_OK) { printf("fixture: ctx_create failed\n"); exit(2); }
    if (th_open(e, A, 100) || th_import(e, A, 100, DHS_IMPORT_DEVICE) || th_open(e, B, 1020) ||
        th_import(e, B, 1020, DHS_IMPORT_HOST)) {
        printf("fixture: open/import failed\n");
        exit(2);
    }
    /* a few rounds so the hot caches hold rows and backups are in flight */
    for (int r = 0; r < 3; r++) {
        dhs_req h[2] = {e->rq[A].h, e->rq[B].h};
        int32_t K[2] = {2, 3}, acc[2] = {1, 0};
        CHECK_ST(dhs_round_begin(e->ctx, 2, h, K), DHS_OK);
        CHECK_INV(e->ctx);
        CHECK_ST(th_write_block(e, A, 2), DHS_OK);
        CHECK_ST(th_write_block(e, B, 3), DHS_OK);
        CHECK_INV(e->ctx);
        for (int i = 0; i < 2 * K_SEL; i++) f_sel[i] = (int32_t)((i * 11 + r) % 100);
        dhs_resolve_item it = {e->rq[A].h, 2, f_sel, f_loc};
        CHECK_ST(dhs_resolve(e->ctx, 0, K_SEL, 1, &it), DHS_OK);
        CHECK_INV(e->ctx);
        CHECK(th_check_item(e, A, 0, 2, K_SEL, f_sel, f_loc) == 0);
        CHECK_ST(dhs_round_end(e->ctx, acc), DHS_OK);
        CHECK_INV(e->ctx);
        e->rq[A].n += 2;
        e->rq[B].n += 1;
    }
}

/* open (and import) a third request */
static dhs_status op_open(th_env *e) { return th_open(e, C, 300); }
static void after_open(th_env *e)
{
    CHECK_ST(th_import(e, C, 300, DHS_IMPORT_DEVICE), DHS_OK);
    CHECK_INV(e->ctx);
}

static void setup_opened(th_env *e, const fault_case *fc)
{
    setup_two(e, fc);
    if (th_open(e, C, 300)) { printf("fixture: open C failed\n"); exit(2); }
}
static dhs_status op_import_device(th_env *e) { return th_import(e, C, 300, DHS_IMPORT_DEVICE); }
static dhs_status op_import_host(th_env *e) { return th_import(e, C, 300, DHS_IMPORT_HOST); }

/* resolve: a round of A and B is open, rows written; B's selection has misses */
static void setup_round(th_env *e, const fault_case *fc)
{
    setup_two(e, fc);
    dhs_req h[2] = {e->rq[A].h, e->rq[B].h};
    f_K[0] = 2;
    f_K[1] = 4;
    if (dhs_round_begin(e->ctx, 2, h, f_K) || th_write_block(e, A, 2) || th_write_block(e, B, 4)) {
        printf("fixture: round failed\n");
        exit(2);
    }
    for (int i = 0; i < 4 * K_SEL; i++) f_sel[i] = (int32_t)(200 + (i * 37) % 800);
    f_sel[3] = -1;
    f_sel[5] = f_sel[6];
    CHECK_INV(e->ctx);
}
static dhs_status op_resolve(th_env *e)
{
    dhs_resolve_item it = {e->rq[B].h, 4, f_sel, f_loc};
    return dhs_resolve(e->ctx, 0, K_SEL, 1, &it);
}
static void end_round(th_env *e)
{
    int32_t acc[2] = {1, 3};
    CHECK_ST(dhs_round_end(e->ctx, acc), DHS_OK);
    CHECK_INV(e->ctx);
    e->rq[A].n += 2;
    e->rq[B].n += 4;
}
static void after_resolve(th_env *e)
{
    CHECK(th_check_item(e, B, 0, 4, K_SEL, f_sel, f_loc) == 0);
    end_round(e);
}

/* group_done with staged rows: B's union (4 x 16 distinct misses) exceeds its 32-row hot cache */
static void setup_staged(th_env *e, const fault_case *fc)
{
    setup_round(e, fc);
    for (int i = 0; i < 4 * K_SEL; i++) f_sel[i] = (int32_t)(300 + i * 9);
    dhs_resolve_item it = {e->rq[B].h, 4, f_sel, f_loc};
    if (dhs_resolve(e->ctx, 0, K_SEL, 1, &it) != DHS_OK) { printf("fixture: staged resolve failed\n"); exit(2); }
    dhs_stats st;
    dhs_get_stats(e->ctx, &st);
    if (st.staging_rows_peak == 0) { printf("fixture: nothing staged\n"); exit(2); }
    CHECK_INV(e->ctx);
    CHECK(th_check_item(e, B, 0, 4, K_SEL, f_sel, f_loc) == 0);
}
static dhs_status op_group_done(th_env *e) { return dhs_group_done(e->ctx, 0); }
static void after_group_done(th_env *e)
{
    end_round(e);
    /* the staged rows were promoted (or, after a failed promotion, dropped): reading them again is exact */
    int32_t one[2] = {1, 1}, acc[2] = {0, 0};
    dhs_req h[2] = {e->rq[A].h, e->rq[B].h};
    CHECK_ST(dhs_round_begin(e->ctx, 2, h, one), DHS_OK);
    CHECK_INV(e->ctx);
    CHECK_ST(th_write_block(e, A, 1), DHS_OK);
    CHECK_INV(e->ctx);
    CHECK_ST(th_write_block(e, B, 1), DHS_OK);
    CHECK_INV(e->ctx);
    dhs_resolve_item it = {e->rq[B].h, 1, f_sel, f_loc};
    CHECK_ST(dhs_resolve(e->ctx, 0, K_SEL, 1, &it), DHS_OK);
    CHECK_INV(e->ctx);
    CHECK(th_check_item(e, B, 0, 1, K_SEL, f_sel, f_loc) == 0);
    CHECK_ST(dhs_round_end(e->ctx, acc), DHS_OK);
    CHECK_INV(e->ctx);
    e->rq[A].n++;
    e->rq[B].n++;
}

/* round_end: backups (B crosses its first 1024-row host chunk) */
static void setup_resolved(th_env *e, const fault_case *fc)
{
    setup_round(e, fc);
    dhs_resolve_item it = {e->rq[B].h, 4, f_sel, f_loc};
    if (dhs_resolve(e->ctx, 0, K_SEL, 1, &it) != DHS_OK) { printf("fixture: resolve failed\n"); exit(2); }
    CHECK_INV(e->ctx);
}
static dhs_status op_round_end(th_env *e)
{
    int32_t acc[2] = {1, 3};
    dhs_status s = dhs_round_end(e->ctx, acc);
    if (s == DHS_OK) {
        e->rq[A].n += 2;
        e->rq[B].n += 4;
    }
    return s;
}

/* round_begin: housekeeping (backup retries, repopulation of B's host-imported pages) */
static void setup_between(th_env *e, const fault_case *fc) { setup_two(e, fc); }
static dhs_status op_round_begin(th_env *e)
{
    dhs_req h[2] = {e->rq[A].h, e->rq[B].h};
    int32_t K[2] = {1, 1};
    return dhs_round_begin(e->ctx, 2, h, K);
}
static void after_round_begin(th_env *e)
{
    CHECK_ST(th_write_block(e, A, 1), DHS_OK);
    CHECK_INV(e->ctx);
    CHECK_ST(th_write_block(e, B, 1), DHS_OK);
    CHECK_INV(e->ctx);
    int32_t acc[2] = {0, 0};
    CHECK_ST(dhs_round_end(e->ctx, acc), DHS_OK);
    CHECK_INV(e->ctx);
    e->rq[A].n++;
    e->rq[B].n++;
}

static const dhs_status fault_status[DHS_FAULT_COUNT_] = {DHS_ERR_NOMEM, DHS_ERR_DEVICE_NOMEM, DHS_ERR_BACKEND};
static const char *fault_name[DHS_FAULT_COUNT_] = {"host-alloc", "device-alloc", "copy"};

static void run_fault_case(const fault_case *fc)
{
    long fired[DHS_FAULT_COUNT_] = {0};
    for (int kind = 0; kind < DHS_FAULT_COUNT_; kind++) {
        for (uint64_t nth = 1; nth < 400; nth++) {
            th_env e;
            fc->setup(&e, fc);
            dhs_backend_fault_at(e.be, (dhs_fault_kind)kind, nth);
            uint64_t f0 = dhs_backend_faults_injected(e.be);
            dhs_status s = fc->op(&e);
            int injected = dhs_backend_faults_injected(e.be) > f0;
            for (int k2 = 0; k2 < DHS_FAULT_COUNT_; k2++) dhs_backend_fault_at(e.be, (dhs_fault_kind)k2, 0);
            CHECK_INV(e.ctx);
            if (!injected) {
                CHECKF(s == DHS_OK, "%s: returned %s without a fault", fc->name, dhs_status_str(s));
                if (fc->after) fc->after(&e);
                CHECK_INV(e.ctx);
                th_env_free(&e);
                break;
            }
            fired[kind]++;
            if (s == DHS_OK) {
                CHECKF(fc->absorbs, "%s: %s fault %llu swallowed", fc->name, fault_name[kind], (unsigned long long)nth);
            } else {
                CHECKF(s == fault_status[kind], "%s: %s fault %llu returned %s", fc->name, fault_name[kind],
                       (unsigned long long)nth, dhs_status_str(s));
                dhs_status s2 = fc->op(&e); /* the retry */
                CHECKF(s2 == DHS_OK, "%s: retry after %s fault %llu returned %s", fc->name, fault_name[kind],
                       (unsigned long long)nth, dhs_status_str(s2));
                CHECK_INV(e.ctx);
            }
            if (fc->after) fc->after(&e);
            CHECK_INV(e.ctx);
            /* no row lost: every committed row of every open request reads back exactly */
            for (int i = 0; i < TH_MAX_REQ; i++)
                if (e.rq[i].open) {
                    long lost = th_sweep(&e, i, K_SEL);
                    CHECKF(lost == 0, "%s: %s fault %llu: %ld rows of request %d lost", fc->name, fault_name[kind],
                           (unsigned long long)nth, lost, i);
                }
            CHECK_INV(e.ctx);
            for (int i = 0; i < TH_MAX_REQ; i++)
                if (e.rq[i].open) CHECK_ST(th_close(&e, i), DHS_OK);
            dhs_mem mem;
            dhs_get_mem(e.ctx, &mem);
            CHECKF(mem.requests_open == 0 && mem.optional_bytes == 0, "%s: memory held after every close", fc->name);
            dhs_backend *be = e.be;
            dhs_ctx_destroy(e.ctx);
            e.ctx = NULL;
            CHECKF(be->host_bytes == 0 && be->dev_bytes == 0, "%s: bytes still accounted after destroy", fc->name);
            th_env_free(&e);
        }
    }
    printf("faults %-28s host-alloc %3ld  device-alloc %3ld  copy %3ld fault points\n", fc->name, fired[0], fired[1], fired[2]);
}

static void test_fault_injection(void)
{
    const fault_case cases[] = {
        {"open", 0, 0, setup_two, op_open, after_open, 0},
        {"open (reclaim)", 0, 1, setup_two, op_open, after_open, 0},
        {"open (reclaim, async)", 3, 1, setup_two, op_open, after_open, 0},
        {"import device", 0, 0, setup_opened, op_import_device, NULL, 0},
        {"import host", 2, 0, setup_opened, op_import_host, NULL, 0},
        {"resolve", 0, 0, setup_round, op_resolve, after_resolve, 0},
        {"resolve (async)", 2, 0, setup_round, op_resolve, after_resolve, 0},
        {"group_done (staging)", 0, 0, setup_staged, op_group_done, after_group_done, 0},
        {"round_end (backups absorb)", 0, 0, setup_resolved, op_round_end, NULL, 1},
        {"round_end (async)", 3, 0, setup_resolved, op_round_end, NULL, 1},
        {"round_begin (housekeeping)", 2, 0, setup_between, op_round_begin, after_round_begin, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_fault_case(&cases[i]);

    /* ctx_create: every allocation point fails cleanly, then a retry succeeds */
    dhs_arch arch = api_arch();
    dhs_config cfg = api_cfg();
    long fired[DHS_FAULT_COUNT_] = {0};
    for (int kind = 0; kind < DHS_FAULT_COUNT_; kind++) {
        dhs_backend *be;
        CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
        for (uint64_t nth = 1; nth < 200; nth++) {
            dhs_ctx *ctx = NULL;
            dhs_backend_fault_at(be, (dhs_fault_kind)kind, nth);
            uint64_t f0 = dhs_backend_faults_injected(be);
            dhs_status s = dhs_ctx_create(&arch, &cfg, be, &ctx);
            int injected = dhs_backend_faults_injected(be) > f0;
            dhs_backend_fault_at(be, (dhs_fault_kind)kind, 0);
            if (!injected) {
                CHECK_ST(s, DHS_OK);
                CHECK_INV(ctx);
                dhs_ctx_destroy(ctx);
                break;
            }
            fired[kind]++;
            CHECK_ST(s, fault_status[kind]);
            CHECK(ctx == NULL);
            CHECKF(be->host_bytes == 0 && be->dev_bytes == 0, "ctx_create fault %llu left bytes accounted", (unsigned long long)nth);
            CHECK_ST(dhs_ctx_create(&arch, &cfg, be, &ctx), DHS_OK);
            CHECK_INV(ctx);
            dhs_ctx_destroy(ctx);
        }
        CHECK(be->host_bytes == 0 && be->dev_bytes == 0);
        dhs_backend_destroy(be);
    }
    CHECK(fired[DHS_FAULT_HOST_ALLOC] > 5 && fired[DHS_FAULT_DEVICE_ALLOC] == 1);
    printf("faults %-28s host-alloc %3ld  device-alloc %3ld  copy %3ld fault points\n", "ctx_create", fired[0], fired[1], fired[2]);
}

/* A failed import changes nothing: afterwards an import of another length behaves exactly like a
   first import of that length (memory figures equal, bytes exact, nothing read past the buffers). */
static void test_import_retry_other_length(void)
{
    dhs_arch arch = api_arch();
    dhs_config cfg = api_cfg();
    dhs_mem want;
    {
        th_env e;
        CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
        CHECK_ST(th_open(&e, A, 300), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_import(&e, A, 40, DHS_IMPORT_DEVICE), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_get_mem(e.ctx, &want);
        th_env_free(&e);
    }
    long fired = 0;
    for (uint64_t nth = 1; nth < 100; nth++) {
        th_env e;
        CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
        CHECK_ST(th_open(&e, A, 300), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, nth);
        dhs_status s = th_import(&e, A, 300, DHS_IMPORT_DEVICE);
        dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, 0);
        if (s == DHS_OK) { th_env_free(&e); break; }
        fired++;
        CHECK_ST(s, DHS_ERR_NOMEM);
        CHECK_INV(e.ctx);
        /* retry with 40 positions from buffers holding exactly 40 rows */
        const void *rows[3];
        uint8_t *b0 = th_alloc(40 * 64), *b1 = th_alloc(40 * 48), *b2 = th_alloc(10 * 32);
        for (int r = 0; r < 40; r++) {
            th_fill_row(b0 + r * 64, 64, e.rq[A].uid, 0, r, 0);
            th_fill_row(b1 + r * 48, 48, e.rq[A].uid, 1, r, 0);
        }
        for (int r = 0; r < 10; r++) th_fill_row(b2 + r * 32, 32, e.rq[A].uid, 2, r, 0);
        rows[0] = b0; rows[1] = b1; rows[2] = b2;
        CHECK_ST(dhs_request_import(e.ctx, e.rq[A].h, 40, rows, DHS_IMPORT_DEVICE), DHS_OK);
        CHECK_INV(e.ctx);
        e.rq[A].n = 40;
        CHECK_INV(e.ctx);
        dhs_mem got;
        dhs_get_mem(e.ctx, &got);
        CHECKF(got.optional_bytes == want.optional_bytes && got.required_bytes == want.required_bytes && got.pages_free == want.pages_free,
               "import after a failed import (fault %llu): M_opt %llu, want %llu", (unsigned long long)nth,
               (unsigned long long)got.optional_bytes, (unsigned long long)want.optional_bytes);
        CHECK(th_sweep(&e, A, K_SEL) == 0);
        CHECK_INV(e.ctx);
        free(b0); free(b1); free(b2);
        th_env_free(&e);
    }
    CHECK(fired >= 3);
}

int main(void)
{
    double t0 = th_now();
    test_bad_input_table();
    test_config_validation();
    test_sizing_extremes();
    test_arch_validation();
    test_strings_and_null();
    test_import_retry_other_length();
    test_fault_injection();
    printf("test_api: %.2f s\n", th_now() - t0);
    return th_summary();
}
