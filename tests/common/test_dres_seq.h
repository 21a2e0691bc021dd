/* test_dres_seq.h - call sequences of the device-resolver mode that an outside black-box test found
 * answered wrong, run through the public API on any backend (tests/core/test_dres.c on the CPU backend,
 * tests/cuda/test_dres_api_cuda.c on a GPU):
 *   1. dhs_tail_locations applies dhs_write_rows's rule: a range past the first unwritten row (a gap)
 *      is refused, so rows nobody wrote never count as written, resolve or commit;
 *   2. it answers DHS_ERR_ROW_RANGE for any int64 first_row, without overflow (UBSan in CI);
 *   3. a host-item dhs_resolve answers for its own entries only: an error a device call left in the
 *      round's word stays there for dhs_round_end, which then commits nothing;
 *   and a row far past the history is NOT_VISIBLE on every path (device word, host item), as in the
 *   host resolver.
 * The includer gives the backend, how the engine writes a row at a pool location (the CPU backend's
 * pool is host memory; on CUDA a copy to the device) and defines, before including this header,
 *   seq_device_alloc(&sel, &loc) / seq_device_free(sel, loc): buffers of 2 x 4 x 8 int32 the device
 *     calls read and write (host memory on the CPU backend, device memory on CUDA);
 *   seq_device_resolve(ctx, g, k, hsel, sel, loc, hloc): hsel copied into sel, dhs_resolve_device,
 *     loc copied back into hloc.
 * Rows are read back with dhs_read_location. Needs test_help.h (CHECK, th_fill_row) first. */
#ifndef DHS_TEST_DRES_SEQ_H
#define DHS_TEST_DRES_SEQ_H

#include <string.h>

typedef void (*seq_write_fn)(dhs_ctx *ctx, int32_t src, int32_t loc, const uint8_t *row64);

static void seq_arch(dhs_arch *a, dhs_config *c)
{
    memset(a, 0, sizeof *a);
    a->n_groups = 2;
    a->n_sources = 2;
    a->sources[0] = (dhs_source_desc){64, 1, 0};
    a->sources[1] = (dhs_source_desc){64, 1, 1};
    a->n_consumers = 2;
    a->consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a->consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 1, 1};
    *c = dhs_config_default();
    c->max_requests = 2;
    c->sel_k = 8;
    c->spec_width = 4;
    c->hot_rows = 8;
    c->page_rows = 4;
    c->tail_rows = 16;
    c->max_rows = 256;
    c->device_bytes = 1 << 20;
    c->repop_pages = 0;
    c->resident_first = 0;
    c->resolver = DHS_RESOLVER_DEVICE;
    c->policy = DHS_POLICY_CLOCK;
}

/* the block rows [first, first + n) of source src through dhs_tail_locations, written by the "engine" */
static void seq_tail_block(dhs_ctx *ctx, seq_write_fn wr, dhs_req r, int32_t src, int64_t first, int32_t n,
                           uint64_t uid, uint32_t ver)
{
    int32_t tl[8];
    CHECK_ST(dhs_tail_locations(ctx, r, src, first, n, tl), DHS_OK);
    for (int32_t j = 0; j < n; j++) {
        uint8_t row[64];
        th_fill_row(row, 64, uid, src, first + j, ver);
        wr(ctx, src, tl[j], row);
    }
}

/* the row at location loc of source src equals row `row` of (uid, ver) */
static int seq_row_is(const dhs_ctx *ctx, int32_t src, int32_t loc, uint64_t uid, int64_t row, uint32_t ver)
{
    uint8_t want[64], got[64];
    th_fill_row(want, 64, uid, src, row, ver);
    return loc >= 0 && dhs_read_location(ctx, src, loc, got) == DHS_OK && !memcmp(want, got, 64);
}

static void test_device_sequences_on(dhs_backend *be, seq_write_fn wr)
{
    dhs_arch a;
    dhs_config c;
    seq_arch(&a, &c);
    dhs_ctx *ctx = NULL;
    CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_OK);
    if (!ctx) return;
    enum { H = 40 };
    uint8_t *rows = aligned_alloc(64, (size_t)2 * H * 64);
    const void *rp[2] = {rows, rows + (size_t)H * 64};
    for (int src = 0; src < 2; src++)
        for (int row = 0; row < H; row++) th_fill_row(rows + ((size_t)src * H + row) * 64, 64, 1, src, row, 0);
    dhs_req r;
    CHECK_ST(dhs_request_open(ctx, 100, &r), DHS_OK);
    CHECK_ST(dhs_request_import(ctx, r, H, rp, DHS_IMPORT_HOST), DHS_OK);
    int32_t K = 4, tl[8], acc = 3;
    int32_t *loc = NULL, *sel = NULL;
    CHECK_ST(seq_device_alloc(&sel, &loc), DHS_OK);
    int32_t hsel_buf[2 * 4 * 8], hloc[2 * 4 * 8];
    int64_t n;
    uint8_t blk[2 * 64];
    memset(blk, 0, sizeof blk);

    /* 1: none of the block's rows written yet; rows 42-43 would leave a gap at 40-41 */
    CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
    CHECK_ST(dhs_write_rows(ctx, r, 0, H + 2, 2, blk), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_tail_locations(ctx, r, 0, H + 2, 2, tl), DHS_ERR_ROW_RANGE);
    CHECK_INV(ctx);
    /* row 40 (the anchor's own row) is still unwritten: a host-item resolve naming it is refused */
    int32_t hsel[4 * 8];
    for (int i = 0; i < 4 * 8; i++) hsel[i] = i == 0 ? H : i == 1 ? 3 : -1;
    dhs_resolve_item it = {r, 4, hsel, hloc};
    CHECK_ST(dhs_resolve(ctx, 0, 8, 1, &it), DHS_ERR_ROW_RANGE);
    /* 2: first rows at both ends of int64, each answered like dhs_write_rows, nothing touched */
    const int64_t firsts[] = {INT64_MAX, INT64_MAX - 2, INT64_MAX - 16, INT64_MIN, INT64_MIN + 1, -1, H - 1, H + 4, H + 3};
    for (size_t i = 0; i < sizeof firsts / sizeof firsts[0]; i++) {
        for (int32_t nr = 0; nr <= 4; nr += 4) {
            dhs_status w = dhs_write_rows(ctx, r, 1, firsts[i], nr, blk), t = dhs_tail_locations(ctx, r, 1, firsts[i], nr, tl);
            CHECKF(t == w, "first_row %lld, %d rows: tail_locations %s, write_rows %s", (long long)firsts[i], nr,
                   dhs_status_str(t), dhs_status_str(w));
            CHECKF(t == DHS_ERR_ROW_RANGE || (nr == 0 && (firsts[i] == H - 1 || firsts[i] == H)),
                   "first_row %lld, %d rows: %s", (long long)firsts[i], nr, dhs_status_str(t));
        }
    }
    CHECK_INV(ctx);
    /* written in order, the block resolves and commits */
    for (int src = 0; src < 2; src++) seq_tail_block(ctx, wr, r, src, H, K, 1, 1);
    for (int i = 0; i < 2 * 4 * 8; i++) hsel_buf[i] = -1;
    for (int j = 0; j < K; j++) hsel_buf[j * 8] = H + j, hsel_buf[j * 8 + 1] = j; /* query j: its own row and row j */
    int32_t locs[2 * 4 * 8];
    CHECK_ST(seq_device_resolve(ctx, 0, 8, hsel_buf, sel, loc, locs), DHS_OK);
    for (int j = 0; j < K; j++)
        CHECKF(seq_row_is(ctx, 0, locs[j * 8], 1, H + j, 1), "query %d: its own row %d not as written", j, H + j);
    CHECK_ST(dhs_round_end(ctx, &acc), DHS_OK);
    CHECK_ST(dhs_request_positions(ctx, r, &n), DHS_OK);
    CHECK(n == H + K);
    CHECK_INV(ctx);

    /* 3: the status a round with one bad device entry ends with ... */
    K = 1;
    acc = 0;
    dhs_status want = DHS_OK;
    for (int pass = 0; pass < 2; pass++) {
        CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
        for (int src = 0; src < 2; src++) seq_tail_block(ctx, wr, r, src, n, 1, 1, 1);
        for (int i = 0; i < 2 * 4 * 8; i++) hsel_buf[i] = i < 8 ? (i == 2 ? -2 : i) : -1; /* entry 2: -2 */
        CHECK_ST(seq_device_resolve(ctx, 0, 8, hsel_buf, sel, loc, locs), DHS_OK);
        CHECK(locs[2] == -1 && locs[0] >= 0);
        if (pass == 1) { /* ... is the same after a valid host-item resolve in between, which answers OK */
            int32_t hs[8] = {0, 1, 5, 6, -1, -1, -1, -1};
            dhs_resolve_item hi = {r, 1, hs, hloc};
            CHECK_ST(dhs_resolve(ctx, 1, 8, 1, &hi), DHS_OK);
            CHECK(seq_row_is(ctx, 1, hloc[2], 1, 5, 0));
        }
        dhs_status e = dhs_round_end(ctx, &acc);
        if (pass == 0) {
            want = e;
            CHECKF(e != DHS_OK, "a -2 entry ended the round with %s", dhs_status_str(e));
        } else {
            CHECKF(e == want, "after a host-item resolve the round ended with %s, want %s", dhs_status_str(e),
                   dhs_status_str(want));
        }
        int64_t n2;
        CHECK_ST(dhs_request_positions(ctx, r, &n2), DHS_OK);
        CHECKF(n2 == n, "pass %d: %lld positions after a refused round end, want %lld", pass, (long long)n2, (long long)n);
        CHECK_INV(ctx);
        CHECK_ST(dhs_round_end(ctx, &acc), DHS_OK); /* the word was cleared: the engine may go on */
        CHECK_ST(dhs_request_positions(ctx, r, &n), DHS_OK);
        CHECK_INV(ctx);
    }
    /* a row far past the history (here the largest int32) is invisible to every query: the device call's
       word and a host-item resolve both answer NOT_VISIBLE, as the host resolver does; nothing commits */
    CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
    for (int src = 0; src < 2; src++) seq_tail_block(ctx, wr, r, src, n, 1, 1, 1);
    for (int i = 0; i < 2 * 4 * 8; i++) hsel_buf[i] = i == 3 ? INT32_MAX : i < 8 ? i : -1;
    CHECK_ST(seq_device_resolve(ctx, 0, 8, hsel_buf, sel, loc, locs), DHS_OK);
    int32_t big[8] = {0, INT32_MAX, -1, -1, -1, -1, -1, -1};
    dhs_resolve_item bi = {r, 1, big, hloc};
    CHECK_ST(dhs_resolve(ctx, 1, 8, 1, &bi), DHS_ERR_NOT_VISIBLE);
    CHECK_ST(dhs_round_end(ctx, &acc), DHS_ERR_NOT_VISIBLE);
    CHECK_ST(dhs_round_end(ctx, &acc), DHS_OK);
    CHECK_INV(ctx);
    seq_device_free(sel, loc);
    dhs_ctx_destroy(ctx);
    free(rows);
}

#endif
