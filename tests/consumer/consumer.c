/* consumer.c - the smallest complete use of dhisparse from an engine's point
 * of view (CPU backend): create a context, admit a request, import its
 * prefill history, run decode rounds (write the new row, resolve a top-k
 * selection, read the rows the locations address), close. It checks every
 * byte it reads and exits non-zero on any difference, so it doubles as the
 * installed-package test (tests/consumer/run.sh) and as the C example of
 * docs/INTEGRATION.md, which includes this file verbatim. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dhs.h>

enum { ROW_BYTES = 576, PREFILL = 1000, STEPS = 4, K = 64 };

/* The bytes of row `row` of the one source: a pattern the example can recompute. */
static void fill_row(unsigned char *out, int64_t row)
{
    for (int i = 0; i < ROW_BYTES; i++) out[i] = (unsigned char)(row * 131 + i * 7 + 1);
}

#define CHECK(call)                                                                \
    do {                                                                           \
        dhs_status s_ = (call);                                                    \
        if (s_ != DHS_OK) {                                                        \
            fprintf(stderr, "%s: %d (%s)\n", #call, (int)s_, dhs_status_str(s_));  \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main(void)
{
    if (strcmp(dhs_version(), DHS_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", DHS_VERSION_STRING, dhs_version());
        return 1;
    }
    dhs_arch arch = dhs_arch_default(); /* one group, one 576-byte source, m = 1 */
    dhs_config cfg = dhs_config_default();
    cfg.max_requests = 4;
    cfg.sel_k = K;
    cfg.hot_rows = 128;
    cfg.tail_rows = 64;
    cfg.page_rows = 16;
    cfg.max_rows = 4096;
    dhs_sizes z;
    CHECK(dhs_config_sizes(&arch, &cfg, &z));
    /* room for the fixed reservations, 4 requests and 2 MiB of resident history */
    cfg.device_bytes = z.staging_bytes + z.reserve_bytes + 4 * z.request_bytes + (2u << 20);

    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL;
    CHECK(dhs_backend_cpu_create(NULL, &be));
    CHECK(dhs_ctx_create(&arch, &cfg, be, &ctx));

    /* admit one request and import its prefill KV (here: host buffers) */
    dhs_req r;
    CHECK(dhs_request_open(ctx, PREFILL + STEPS, &r)); /* DHS_WAIT would mean: admit later */
    unsigned char *prefill = aligned_alloc(DHS_ALIGN, (size_t)PREFILL * ROW_BYTES);
    unsigned char *row = aligned_alloc(DHS_ALIGN, ROW_BYTES);
    unsigned char *want = malloc(ROW_BYTES), *got = malloc(ROW_BYTES);
    if (!prefill || !row || !want || !got) return 1;
    for (int64_t i = 0; i < PREFILL; i++) fill_row(prefill + (size_t)i * ROW_BYTES, i);
    const void *rows[1] = {prefill};
    CHECK(dhs_request_import(ctx, r, PREFILL, rows, DHS_IMPORT_HOST));
    free(prefill); /* the library copied it */

    const unsigned char *pool = dhs_source_pool(ctx, 0);
    uint32_t stride = dhs_pool_row_stride(ctx);
    int32_t sel[K], loc[K];
    int checked = 0;
    for (int step = 0; step < STEPS; step++) {
        int64_t n;
        CHECK(dhs_request_positions(ctx, r, &n));
        int32_t nq = 1; /* one query per request: plain decoding */
        CHECK(dhs_round_begin(ctx, 1, &r, &nq));
        fill_row(row, n); /* the KV row of the new position n */
        CHECK(dhs_write_rows(ctx, r, 0, n, 1, row));
        /* the indexer's top-k: here a sink, a local window, a spread, a duplicate and padding */
        for (int i = 0; i < K; i++) sel[i] = (int32_t)((i * 97 + step * 13) % (n + 1));
        sel[0] = 0;
        sel[1] = (int32_t)n;
        sel[2] = sel[3];
        sel[K - 1] = -1;
        dhs_resolve_item it = {.req = r, .n_queries = 1, .sel = sel, .loc = loc};
        CHECK(dhs_resolve(ctx, 0, K, 1, &it));
        /* attention would read pool + loc[i] * stride; check those bytes */
        for (int i = 0; i < K; i++) {
            if (sel[i] < 0) {
                if (loc[i] != -1) { fprintf(stderr, "padding got location %d\n", loc[i]); return 1; }
                continue;
            }
            fill_row(want, sel[i]);
            CHECK(dhs_read_location(ctx, 0, loc[i], got));
            if (memcmp(want, got, ROW_BYTES) || memcmp(want, pool + (size_t)loc[i] * stride, ROW_BYTES)) {
                fprintf(stderr, "step %d: row %d at location %d holds wrong bytes\n", step, sel[i], loc[i]);
                return 1;
            }
            checked++;
        }
        CHECK(dhs_group_done(ctx, 0));
        int32_t accepted = 0;
        CHECK(dhs_round_end(ctx, &accepted));
        char msg[200];
        if (dhs_check_invariants(ctx, msg, sizeof msg)) { fprintf(stderr, "invariants: %s\n", msg); return 1; }
    }
    dhs_stats st;
    dhs_get_stats(ctx, &st);
    CHECK(dhs_request_close(ctx, r));
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
    free(row); free(want); free(got);
    printf("consumer: dhisparse %s, %d rows checked, %llu copied from host, ok\n", dhs_version(), checked,
           (unsigned long long)st.host_rows_copied);
    return 0;
}
