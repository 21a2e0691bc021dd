/* test_spec.c - speculative verification (DESIGN §5) and bounded draft KV /
 * reusable staging (§6).
 *
 *  - adversarial unions: K queries with disjoint selections (union K*k > B:
 *    staging used, every byte right, staged rows promoted to the hot cache
 *    afterwards) and K identical selections (one copy per row);
 *  - commit: n' = n + A + 1; rejected rows are never visible (a selection
 *    naming a row past n' is refused with NOT_VISIBLE; the anchor's own row
 *    must be rewritten before it is served);
 *  - a randomised run with a compressed source (m = 4): blocks crossing row
 *    boundaries, random acceptance, REINDEX calls in the same round (earlier
 *    locations stay valid), every committed row equal to its last written
 *    version, refused selections leaving no trace;
 *  - staging arenas: with one arena (chi = 1) a second group's overflow is
 *    refused until the first group's dhs_group_done, then reuses the arena;
 *    a refused call does not disturb another request's staged rows;
 *  - sizing: dhs_ring_rows, dhs_ring_row (no collision of live positions),
 *    dhs_staging_bytes against the seed's figures.
 */
#include <math.h>

#include "dhs_plan.h"
#include "test_help.h"

static uint64_t g_seed;

/* ------------------------------------------------------------ adversarial unions */
static void test_adversarial_unions(void)
{
    const int32_t B = 64, k = 32, KM = 8;
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = 64;
    dhs_config c = dhs_config_default();
    c.max_requests = 3;
    c.sel_k = k;
    c.spec_width = KM;
    c.hot_rows = B;
    c.tail_rows = 24;
    c.page_rows = 8;
    c.max_rows = 3000;
    c.device_bytes = 1200ull * 8 * 64;
    c.resident_first = 0;
    th_env e;
    CHECK_ST(th_env_init(&e, &a, &c, NULL), DHS_OK);
    for (int q = 0; q < 2; q++) {
        CHECK_ST(th_open(&e, q, 2000), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_import(&e, q, 1500, DHS_IMPORT_HOST), DHS_OK);
        CHECK_INV(e.ctx);
    }
    int32_t sel[2][8 * 32], loc[2][8 * 32];
    dhs_req h[2] = {e.rq[0].h, e.rq[1].h};
    int32_t K[2] = {KM, KM};
    /* disjoint: 8 queries x 32 distinct rows = 256 > B = 64 */
    CHECK_ST(dhs_round_begin(e.ctx, 2, h, K), DHS_OK);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) {
        CHECK_ST(th_write_block(&e, q, KM), DHS_OK);
        CHECK_INV(e.ctx);
        for (int i = 0; i < KM * k; i++) sel[q][i] = 100 + i * 5 + q; /* all distinct, all on host */
    }
    dhs_resolve_item it[2] = {{h[0], KM, sel[0], loc[0]}, {h[1], KM, sel[1], loc[1]}};
    dhs_stats s0, s1;
    dhs_get_stats(e.ctx, &s0);
    CHECK_ST(dhs_resolve(e.ctx, 0, k, 2, it), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_get_stats(e.ctx, &s1);
    CHECK_INV(e.ctx);
    CHECK(th_check_item(&e, 0, 0, KM, k, sel[0], loc[0]) == 0 && th_check_item(&e, 1, 0, KM, k, sel[1], loc[1]) == 0);
    CHECKF(s1.staging_rows_peak >= 2 * (uint64_t)(KM * k - B), "staging peak %llu", (unsigned long long)s1.staging_rows_peak);
    CHECK(s1.staging_rows - s0.staging_rows == 2 * (uint64_t)(KM * k - B));
    CHECK(s1.distinct_misses - s0.distinct_misses == 2 * (uint64_t)(KM * k));
    CHECK(s1.host_rows_copied - s0.host_rows_copied == 2 * (uint64_t)(KM * k));
    /* every location distinct within a request; none shared across requests */
    int dup = 0;
    for (int x = 0; x < KM * k; x++)
        for (int y = x + 1; y < KM * k; y++) dup += loc[0][x] == loc[0][y];
    for (int x = 0; x < KM * k; x++)
        for (int y = 0; y < KM * k; y++) dup += loc[0][x] == loc[1][y];
    CHECK(dup == 0);
    int32_t acc[2] = {KM - 1, 3};
    CHECK_ST(dhs_round_end(e.ctx, acc), DHS_OK);
    CHECK_INV(e.ctx);
    e.rq[0].n += KM;
    e.rq[1].n += 4;
    CHECK_INV(e.ctx);
    int64_t n;
    CHECK(dhs_request_positions(e.ctx, h[0], &n) == DHS_OK && n == 1508);
    CHECK(dhs_request_positions(e.ctx, h[1], &n) == DHS_OK && n == 1504);
    /* the last B rows staged were promoted into the hot cache: reading them again hits */
    int32_t one[2] = {1, 1};
    CHECK_ST(dhs_round_begin(e.ctx, 2, h, one), DHS_OK);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) CHECK_ST(th_write_block(&e, q, 1), DHS_OK);
    int32_t s2[32], l2[32];
    for (int i = 0; i < k; i++) s2[i] = sel[0][KM * k - 1 - i];
    dhs_resolve_item i2 = {h[0], 1, s2, l2};
    dhs_get_stats(e.ctx, &s0);
    CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &i2), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_get_stats(e.ctx, &s1);
    CHECKF(s1.census_hot - s0.census_hot == (uint64_t)k, "promoted rows: %llu of %d hit", (unsigned long long)(s1.census_hot - s0.census_hot), k);
    CHECK(th_check_item(&e, 0, 0, 1, k, s2, l2) == 0);
    int32_t acc0[2] = {0, 0};
    CHECK_ST(dhs_round_end(e.ctx, acc0), DHS_OK);
    CHECK_INV(e.ctx);
    e.rq[0].n++;
    e.rq[1].n++;
    /* identical: 8 queries select the same 32 new rows: 32 copies, one location per row */
    CHECK_ST(dhs_round_begin(e.ctx, 2, h, K), DHS_OK);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) CHECK_ST(th_write_block(&e, q, KM), DHS_OK);
    for (int j = 0; j < KM; j++)
        for (int i = 0; i < k; i++) sel[0][j * k + i] = 1400 + i * 3; /* never selected before */
    dhs_get_stats(e.ctx, &s0);
    CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, it), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_get_stats(e.ctx, &s1);
    CHECK(s1.distinct_misses - s0.distinct_misses == (uint64_t)k && s1.host_rows_copied - s0.host_rows_copied == (uint64_t)k);
    CHECK(s1.staging_rows == s0.staging_rows);
    CHECK(s1.census_host - s0.census_host == (uint64_t)(KM * k));
    for (int j = 1; j < KM; j++) CHECK(memcmp(loc[0], loc[0] + j * k, sizeof(int32_t) * k) == 0);
    CHECK(th_check_item(&e, 0, 0, KM, k, sel[0], loc[0]) == 0);
    int32_t accz[2] = {0, KM - 1};
    CHECK_ST(dhs_round_end(e.ctx, accz), DHS_OK);
    CHECK_INV(e.ctx);
    e.rq[0].n += 1;
    e.rq[1].n += KM;
    CHECK_INV(e.ctx);
    CHECK(th_sweep(&e, 0, k) == 0 && th_sweep(&e, 1, k) == 0);
    th_env_free(&e);
}

/* ------------------------------------------------------------ randomised speculation */
typedef struct {
    int32_t K;
    int32_t *sel[2], *loc[2]; /* per group: [K][k] and [nsrc][K][k] */
} spec_item;

/* a visible selection for query j of a request at n, group with m positions per row */
static void gen_sel(uint64_t *rng, int64_t n, int64_t m, int32_t j, int32_t k, int32_t *out)
{
    int64_t vis_rows = (n + j + 1) / m; /* complete rows visible to the query */
    for (int32_t i = 0; i < k; i++) {
        int64_t x = dhs_rng_below(rng, 10);
        if (vis_rows == 0 || x == 0) { out[i] = -1; continue; }
        if (x < 4) out[i] = (int32_t)(vis_rows - 1 - dhs_rng_below(rng, vis_rows < 12 ? vis_rows : 12)); /* recent: tail, block */
        else if (x < 6 && i > 0) out[i] = out[dhs_rng_below(rng, i)];
        else out[i] = (int32_t)dhs_rng_below(rng, vis_rows);
    }
}

static void test_random_speculation(double scale)
{
    const int32_t B = 48, k = 24, KM = 6, NREQ = 4;
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 2;
    a.n_sources = 3;
    a.sources[0] = (dhs_source_desc){64, 1, 0};
    a.sources[1] = (dhs_source_desc){32, 1, 0};
    a.sources[2] = (dhs_source_desc){48, 4, 1};
    a.n_consumers = 5;
    a.consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a.consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 1, 0};
    a.consumers[2] = (dhs_consumer_desc){DHS_CONSUMER_REINDEX, 0, 0};
    a.consumers[3] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 2, 1};
    a.consumers[4] = (dhs_consumer_desc){DHS_CONSUMER_REINDEX, 2, 1};
    dhs_config c = dhs_config_default();
    c.max_requests = NREQ;
    c.sel_k = k;
    c.spec_width = KM;
    c.hot_rows = B;
    c.tail_rows = 32;
    c.page_rows = 8;
    c.max_rows = 6000;
    c.device_bytes = 1300ull * 8 * 64; /* arenas 288 + 4 x 30 required + optional history */
    c.repop_pages = 6;
    uint64_t rng = g_seed ^ 0x5eed;
    dhs_cpu_options o = {.async_delay = (int32_t)dhs_rng_below(&rng, 4), .random_order = 1, .seed = g_seed};
    th_env e;
    CHECK_ST(th_env_init(&e, &a, &c, &o), DHS_OK);
    int rounds = (int)(1500 * scale);
    if (rounds < 200) rounds = 200;
    long bad = 0, reindex_bad = 0, refused_ok = 0, refused_bad = 0, commit_bad = 0, staged_rounds = 0;
    spec_item si[4];
    for (int q = 0; q < NREQ; q++)
        for (int g = 0; g < 2; g++) {
            si[q].sel[g] = malloc(sizeof(int32_t) * KM * k);
            si[q].loc[g] = malloc(sizeof(int32_t) * KM * k * 2);
        }
    int32_t *psel = malloc(sizeof(int32_t) * KM * k), *ploc = malloc(sizeof(int32_t) * KM * k * 2);
    for (int round = 0; round < rounds; round++) {
        /* arrivals and departures */
        for (int q = 0; q < NREQ; q++) {
            if (!e.rq[q].open) {
                int64_t pre = dhs_rng_below(&rng, 400);
                CHECK_ST(th_open(&e, q, pre + 2000), DHS_OK);
                CHECK_INV(e.ctx);
                CHECK_ST(th_import(&e, q, pre, dhs_rng_below(&rng, 2) ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST), DHS_OK);
                CHECK_INV(e.ctx);
            } else if (e.rq[q].n > 1500 || dhs_rng_below(&rng, 300) == 0) {
                CHECK(th_sweep(&e, q, k) == 0);
                CHECK_ST(th_close(&e, q), DHS_OK);
                CHECK_INV(e.ctx);
                q--; /* reopen at once */
                continue;
            }
        }
        dhs_req h[4];
        int32_t K[4];
        for (int q = 0; q < NREQ; q++) {
            h[q] = e.rq[q].h;
            K[q] = 1 + (int32_t)dhs_rng_below(&rng, KM);
            si[q].K = K[q];
        }
        CHECK_ST(dhs_round_begin(e.ctx, NREQ, h, K), DHS_OK);
        CHECK_INV(e.ctx);
        for (int q = 0; q < NREQ; q++) CHECK_ST(th_write_block(&e, q, K[q]), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_stats st0;
        dhs_get_stats(e.ctx, &st0);
        for (int g = 0; g < 2; g++) {
            int64_t m = g == 0 ? 1 : 4;
            dhs_resolve_item items[4];
            for (int q = 0; q < NREQ; q++) {
                for (int32_t j = 0; j < K[q]; j++) gen_sel(&rng, e.rq[q].n, m, j, k, si[q].sel[g] + j * k);
                items[q] = (dhs_resolve_item){h[q], K[q], si[q].sel[g], si[q].loc[g]};
            }
            CHECK_ST(dhs_resolve(e.ctx, g, k, NREQ, items), DHS_OK);
            CHECK_INV(e.ctx);
            for (int q = 0; q < NREQ; q++) bad += th_check_item(&e, q, g, K[q], k, si[q].sel[g], si[q].loc[g]);
            /* a refused call (one entry past the last query's visible rows) leaves no trace */
            int q0 = (int)dhs_rng_below(&rng, NREQ);
            int64_t idx = (int64_t)(K[q0] - 1) * k + dhs_rng_below(&rng, k);
            int32_t saved = si[q0].sel[g][idx];
            int64_t past = (e.rq[q0].n + K[q0]) / m; /* first row no query sees */
            si[q0].sel[g][idx] = (int32_t)past;
            if (round % 4 == 0) { /* the full snapshot (pool bytes included) every 4th round */
                th_snap x0 = {0}, x1 = {0};
                th_snap_take(&e, &x0);
                dhs_status rs = dhs_resolve(e.ctx, g, k, NREQ, items);
                th_snap_take(&e, &x1);
                if (rs == DHS_ERR_NOT_VISIBLE && th_snap_diff(&x0, &x1) == NULL) refused_ok++;
                else refused_bad++;
                th_snap_free(&x0);
                th_snap_free(&x1);
            } else {
                dhs_stats a0, a1;
                dhs_get_stats(e.ctx, &a0);
                dhs_status rs = dhs_resolve(e.ctx, g, k, NREQ, items);
                dhs_get_stats(e.ctx, &a1);
                if (rs == DHS_ERR_NOT_VISIBLE && memcmp(&a0, &a1, sizeof a0) == 0) refused_ok++;
                else refused_bad++;
            }
            CHECK_INV(e.ctx);
            si[q0].sel[g][idx] = saved;
            /* REINDEX: a fresh selection over the same source state; the first call's locations
               (of request 0) stay valid */
            memcpy(psel, si[0].sel[g], sizeof(int32_t) * K[0] * k);
            bad += th_check_item(&e, 0, g, K[0], k, psel, si[0].loc[g]) > 0;
            memcpy(ploc, si[0].loc[g], sizeof(int32_t) * K[0] * k * (g == 0 ? 2 : 1));
            for (int q = 0; q < NREQ; q++) {
                for (int32_t j = 0; j < K[q]; j++) gen_sel(&rng, e.rq[q].n, m, j, k, si[q].sel[g] + j * k);
                items[q] = (dhs_resolve_item){h[q], K[q], si[q].sel[g], si[q].loc[g]};
            }
            CHECK_ST(dhs_resolve(e.ctx, g, k, NREQ, items), DHS_OK);
            CHECK_INV(e.ctx);
            for (int q = 0; q < NREQ; q++) bad += th_check_item(&e, q, g, K[q], k, si[q].sel[g], si[q].loc[g]);
            reindex_bad += th_check_item(&e, 0, g, K[0], k, psel, ploc);
            /* the default chi holds one group's arenas: the next group's overflow needs this group done
               (the last group may leave it to the round end) */
            if (g == 0 || dhs_rng_below(&rng, 2)) {
                CHECK_ST(dhs_group_done(e.ctx, g), DHS_OK);
                CHECK_INV(e.ctx);
            }
        }
        dhs_stats st1;
        dhs_get_stats(e.ctx, &st1);
        staged_rounds += st1.staging_rows > st0.staging_rows;
        int32_t acc[4];
        int64_t before[4];
        for (int q = 0; q < NREQ; q++) {
            acc[q] = (int32_t)dhs_rng_below(&rng, K[q]);
            before[q] = e.rq[q].n;
        }
        CHECK_ST(dhs_round_end(e.ctx, acc), DHS_OK);
        CHECK_INV(e.ctx);
        for (int q = 0; q < NREQ; q++) {
            int64_t n;
            e.rq[q].n += acc[q] + 1;
            if (dhs_request_positions(e.ctx, h[q], &n) != DHS_OK || n != before[q] + acc[q] + 1) commit_bad++;
        }
        /* rejected rows are never visible: the next round's anchor (K = 1) is refused any row past
           its own, and its own row until rewritten */
        if (round % 7 == 0) {
            int q = (int)dhs_rng_below(&rng, NREQ);
            int32_t one = 1, zero = 0;
            th_req *r = &e.rq[q];
            CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
            CHECK_INV(e.ctx);
            int32_t s1[24], l1[48];
            for (int i = 0; i < k; i++) s1[i] = -1;
            dhs_resolve_item i1 = {r->h, 1, s1, l1};
            s1[5] = (int32_t)(r->n + 1);
            CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &i1), DHS_ERR_NOT_VISIBLE);
            CHECK_INV(e.ctx);
            s1[5] = (int32_t)((r->n + 1) / 4);
            CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &i1), DHS_ERR_NOT_VISIBLE);
            CHECK_INV(e.ctx);
            s1[5] = (int32_t)r->n;
            CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &i1), DHS_ERR_ROW_RANGE); /* not rewritten yet */
            CHECK_INV(e.ctx);
            CHECK_ST(th_write_block(&e, q, 1), DHS_OK);
            CHECK_INV(e.ctx);
            CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &i1), DHS_OK);
            CHECK_INV(e.ctx);
            CHECK(th_check_item(&e, q, 0, 1, k, s1, l1) == 0);
            CHECK_ST(dhs_round_end(e.ctx, &zero), DHS_OK);
            CHECK_INV(e.ctx);
            r->n++;
            CHECK_INV(e.ctx);
        }
    }
    dhs_stats st;
    dhs_get_stats(e.ctx, &st);
    CHECKF(bad == 0, "%ld entries with wrong bytes", bad);
    CHECKF(reindex_bad == 0, "%ld earlier-consumer entries invalid after a REINDEX call", reindex_bad);
    CHECKF(refused_bad == 0, "%ld refused calls answered wrongly or changed state (%ld fine)", refused_bad, refused_ok);
    CHECKF(commit_bad == 0, "%ld commits not at n + A + 1", commit_bad);
    CHECKF(staged_rounds > 0 && st.staging_rows_peak > 0, "staging never used (%ld rounds)", staged_rounds);
    CHECK(st.rejected_rows > 0 && st.accepted > 0 && st.host_rows_copied == st.distinct_misses);
    for (int q = 0; q < NREQ; q++) CHECK(th_sweep(&e, q, k) == 0);
    CHECK_INV(e.ctx);
    printf("speculation: %d rounds, %llu entries, %llu accepted, %llu rejected rows, staging in %ld rounds (peak %llu), "
           "async_delay %d\n",
           rounds, (unsigned long long)st.entries, (unsigned long long)st.accepted, (unsigned long long)st.rejected_rows,
           staged_rounds, (unsigned long long)st.staging_rows_peak, o.async_delay);
    for (int q = 0; q < NREQ; q++)
        for (int g = 0; g < 2; g++) { free(si[q].sel[g]); free(si[q].loc[g]); }
    free(psel);
    free(ploc);
    th_env_free(&e);
}

/* ------------------------------------------------------------ staging arenas shared by groups */
/* two groups of one source each; chi = 1 arena; OWN + REINDEX on group 1 */
static void arena_env(th_env *e, int32_t arenas)
{
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 2;
    a.n_sources = 2;
    a.sources[0] = (dhs_source_desc){64, 1, 0};
    a.sources[1] = (dhs_source_desc){64, 1, 1};
    a.n_consumers = 3;
    a.consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a.consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 1, 1};
    a.consumers[2] = (dhs_consumer_desc){DHS_CONSUMER_REINDEX, 1, 1};
    dhs_config c = dhs_config_default();
    c.max_requests = 2;
    c.sel_k = 16;
    c.spec_width = 4;
    c.hot_rows = 32;
    c.tail_rows = 16;
    c.page_rows = 8;
    c.max_rows = 2000;
    c.device_bytes = 600ull * 8 * 64;
    c.staging_arenas = arenas;
    c.resident_first = 0;
    if (th_env_init(e, &a, &c, NULL) != DHS_OK) { printf("arena_env: ctx_create failed\n"); exit(2); }
    for (int q = 0; q < 2; q++)
        if (th_open(e, q, 1500) || th_import(e, q, 1200, DHS_IMPORT_HOST)) { printf("arena_env: open failed\n"); exit(2); }
}

static void fill_distinct(int32_t *sel, int n, int32_t base, int32_t step)
{
    for (int i = 0; i < n; i++) sel[i] = base + i * step;
}

static void test_arena_reuse(void)
{
    const int32_t k = 16, K = 4;
    th_env e;
    arena_env(&e, 1);
    dhs_req h[2] = {e.rq[0].h, e.rq[1].h};
    int32_t Ks[2] = {K, K};
    int32_t sel[2][2][64], loc[2][2][64];
    CHECK_ST(dhs_round_begin(e.ctx, 2, h, Ks), DHS_OK);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) CHECK_ST(th_write_block(&e, q, K), DHS_OK);
    for (int q = 0; q < 2; q++) {
        fill_distinct(sel[q][0], K * k, 10 + q, 7);  /* 64 distinct misses > B = 32: staging */
        fill_distinct(sel[q][1], K * k, 600 + q, 5);
    }
    dhs_resolve_item g0[2] = {{h[0], K, sel[0][0], loc[0][0]}, {h[1], K, sel[1][0], loc[1][0]}};
    dhs_resolve_item g1[2] = {{h[0], K, sel[0][1], loc[0][1]}, {h[1], K, sel[1][1], loc[1][1]}};
    CHECK_ST(dhs_resolve(e.ctx, 0, k, 2, g0), DHS_OK);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) CHECK(th_check_item(&e, q, 0, K, k, sel[q][0], loc[q][0]) == 0);
    /* group 1 needs the only arena, held by group 0: refused, nothing changed */
    th_snap x0 = {0}, x1 = {0};
    th_snap_take(&e, &x0);
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 2, g1), DHS_ERR_STAGING);
    CHECK_INV(e.ctx);
    th_snap_take(&e, &x1);
    const char *d = th_snap_diff(&x0, &x1);
    /* resolve_calls counts the attempt; everything else must be as before */
    x1.st.resolve_calls = x0.st.resolve_calls;
    d = th_snap_diff(&x0, &x1);
    CHECKF(d == NULL, "a refused staging call changed %s", d);
    th_snap_free(&x0);
    th_snap_free(&x1);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) CHECK(th_check_item(&e, q, 0, K, k, sel[q][0], loc[q][0]) == 0);
    /* group 0 done: its arena serves group 1 */
    CHECK_ST(dhs_group_done(e.ctx, 0), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_stats s0, s1;
    dhs_get_stats(e.ctx, &s0);
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 2, g1), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_get_stats(e.ctx, &s1);
    CHECK(s1.staging_rows > s0.staging_rows);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) CHECK(th_check_item(&e, q, 1, K, k, sel[q][1], loc[q][1]) == 0);
    int32_t acc[2] = {1, 2};
    CHECK_ST(dhs_round_end(e.ctx, acc), DHS_OK);
    CHECK_INV(e.ctx);
    e.rq[0].n += 2;
    e.rq[1].n += 3;
    CHECK_INV(e.ctx);
    /* group 0's staged rows were promoted at group_done: they hit now */
    int32_t one[2] = {1, 1}, zero[2] = {0, 0};
    CHECK_ST(dhs_round_begin(e.ctx, 2, h, one), DHS_OK);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) CHECK_ST(th_write_block(&e, q, 1), DHS_OK);
    int32_t s[16], l[16];
    for (int i = 0; i < k; i++) s[i] = sel[0][0][K * k - 1 - i];
    dhs_resolve_item it = {h[0], 1, s, l};
    dhs_get_stats(e.ctx, &s0);
    CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_get_stats(e.ctx, &s1);
    CHECK(s1.census_hot - s0.census_hot == (uint64_t)k);
    CHECK(th_check_item(&e, 0, 0, 1, k, s, l) == 0);
    CHECK_ST(dhs_round_end(e.ctx, zero), DHS_OK);
    CHECK_INV(e.ctx);
    e.rq[0].n++;
    e.rq[1].n++;
    CHECK(th_sweep(&e, 0, k) == 0 && th_sweep(&e, 1, k) == 0);
    CHECK_INV(e.ctx);
    th_env_free(&e);
}

/* A call refused for one request (staging exhausted) must not disturb another request's staged
   rows from earlier rounds or calls: request 0 stages in group 1 with a REINDEX call in round 1;
   in round 2 group 0 holds the arena and group 1's call is refused at request 1, before request 0
   is planned. After group_done(0) and the retry, and in later rounds, every byte must be right and
   the hot-cache index intact. */
static void test_refused_call_keeps_other_requests(void)
{
    const int32_t k = 16, K = 4;
    th_env e;
    arena_env(&e, 1);
    dhs_req h[2] = {e.rq[0].h, e.rq[1].h}, hr[2] = {e.rq[1].h, e.rq[0].h};
    int32_t Ks[2] = {K, K}, acc[2] = {0, 0};
    int32_t sel[2][64], loc[2][64], s1[2][64], l1[2][64];
    long bad = 0;
    /* round 1: request 0, group 1: 64 distinct misses (32 staged), then a REINDEX call */
    CHECK_ST(dhs_round_begin(e.ctx, 1, h, Ks), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_write_block(&e, 0, K), DHS_OK);
    CHECK_INV(e.ctx);
    fill_distinct(sel[0], K * k, 100, 3);
    dhs_resolve_item it = {h[0], K, sel[0], loc[0]};
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it), DHS_OK); /* REINDEX: the same rows */
    CHECK_INV(e.ctx);
    bad += th_check_item(&e, 0, 1, K, k, sel[0], loc[0]);
    CHECK_ST(dhs_round_end(e.ctx, acc), DHS_OK);
    CHECK_INV(e.ctx);
    e.rq[0].n++;
    CHECK_INV(e.ctx);
    /* round 2: group 0 stages for both (takes the arena); group 1 for [1, 0] is refused at request 1 */
    CHECK_ST(dhs_round_begin(e.ctx, 2, h, Ks), DHS_OK);
    CHECK_INV(e.ctx);
    for (int q = 0; q < 2; q++) CHECK_ST(th_write_block(&e, q, K), DHS_OK);
    for (int q = 0; q < 2; q++) fill_distinct(s1[q], K * k, 400 + q, 5);
    dhs_resolve_item g0[2] = {{h[0], K, s1[0], l1[0]}, {h[1], K, s1[1], l1[1]}};
    CHECK_ST(dhs_resolve(e.ctx, 0, k, 2, g0), DHS_OK);
    CHECK_INV(e.ctx);
    fill_distinct(sel[1], K * k, 900, 3);
    fill_distinct(sel[0], 40, 700, 3); /* 40 distinct: 32 hot fills, 8 staged; the rest duplicates */
    for (int i = 40; i < K * k; i++) sel[0][i] = sel[0][i - 40];
    dhs_resolve_item g1[2] = {{hr[0], K, sel[1], loc[1]}, {hr[1], K, sel[0], loc[0]}};
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 2, g1), DHS_ERR_STAGING);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_group_done(e.ctx, 0), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 2, g1), DHS_OK);
    CHECK_INV(e.ctx);
    bad += th_check_item(&e, 1, 1, K, k, sel[1], loc[1]);
    bad += th_check_item(&e, 0, 1, K, k, sel[0], loc[0]);
    dhs_stats st;
    dhs_get_stats(e.ctx, &st);
    CHECKF(st.staging_rows_peak <= 64, "staging peak %llu counts rows never staged this round",
           (unsigned long long)st.staging_rows_peak);
    CHECK_ST(dhs_round_end(e.ctx, acc), DHS_OK);
    CHECK_INV(e.ctx);
    e.rq[0].n++;
    e.rq[1].n++;
    CHECK_INV(e.ctx);
    /* later rounds: read round 1's and round 2's rows of request 0, group 1 */
    int32_t one = 1, z = 0;
    int32_t rs[16], rl[16];
    for (int pass = 0; pass < 8; pass++) {
        CHECK_ST(dhs_round_begin(e.ctx, 1, h, &one), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
        CHECK_INV(e.ctx);
        for (int i = 0; i < k; i++) {
            int x = pass < 4 ? (3 - pass) * 16 + i : (pass - 4) * 16 + i; /* the newest promoted first */
            rs[i] = pass < 4 ? 100 + 3 * x : x < 40 ? 700 + 3 * x : -1;
        }
        dhs_resolve_item ri = {h[0], 1, rs, rl};
        CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &ri), DHS_OK);
        CHECK_INV(e.ctx);
        bad += th_check_item(&e, 0, 1, 1, k, rs, rl);
        CHECK_ST(dhs_round_end(e.ctx, &z), DHS_OK);
        CHECK_INV(e.ctx);
        e.rq[0].n++;
        CHECK_INV(e.ctx);
    }
    CHECKF(bad == 0, "%ld wrong entries after a refused call", bad);
    CHECK(th_sweep(&e, 0, k) == 0 && th_sweep(&e, 1, k) == 0);
    CHECK_INV(e.ctx);
    th_env_free(&e);
}

/* Promotion at round end when the copy list must grow and the host allocation fails: the round
   still ends, no stale staging mapping survives, and later rounds read exact bytes. Two resolve
   calls (OWN + REINDEX) stage more rows than either call copied, so the promotion list is the
   largest of the round. */
static void test_promotion_alloc_fault(void)
{
    const int32_t k = 256, K = 4;
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = 32;
    a.n_consumers = 2;
    a.consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_REINDEX, 0, 0};
    dhs_config c = dhs_config_default();
    c.max_requests = 1;
    c.sel_k = k;
    c.spec_width = K;
    c.hot_rows = 64;
    c.tail_rows = 16;
    c.page_rows = 8;
    c.max_rows = 8000;
    c.device_bytes = 2000ull * 8 * 32;
    c.resident_first = 0;
    long fired = 0;
    for (uint64_t nth = 1; nth < 20; nth++) {
        th_env e;
        CHECK_ST(th_env_init(&e, &a, &c, NULL), DHS_OK);
        CHECK_ST(th_open(&e, 0, 7000), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_import(&e, 0, 6000, DHS_IMPORT_HOST), DHS_OK);
        CHECK_INV(e.ctx);
        th_req *r = &e.rq[0];
        int32_t *sel = malloc(sizeof(int32_t) * K * k), *loc = malloc(sizeof(int32_t) * K * k);
        int32_t Kr = K, acc = 0;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &Kr), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_write_block(&e, 0, K), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_resolve_item it = {r->h, K, sel, loc};
        fill_distinct(sel, K * k, 10, 2);
        CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK(th_check_item(&e, 0, 0, K, k, sel, loc) == 0);
        fill_distinct(sel, K * k, 3000, 2);
        CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK(th_check_item(&e, 0, 0, K, k, sel, loc) == 0);
        dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, nth);
        uint64_t f0 = dhs_backend_faults_injected(e.be);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        CHECK_INV(e.ctx);
        int injected = dhs_backend_faults_injected(e.be) > f0;
        dhs_backend_fault_at(e.be, DHS_FAULT_HOST_ALLOC, 0);
        r->n++;
        CHECK_INV(e.ctx);
        fired += injected;
        /* later rounds read the staged rows of both calls */
        int32_t one = 1;
        for (int pass = 0; pass < 2; pass++) {
            CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
            CHECK_INV(e.ctx);
            CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
            CHECK_INV(e.ctx);
            fill_distinct(sel, k, pass ? 3000 + 2 * (K * k - k) : 10 + 2 * (K * k - k), 2);
            dhs_resolve_item i1 = {r->h, 1, sel, loc};
            CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &i1), DHS_OK);
            CHECK_INV(e.ctx);
            CHECK(th_check_item(&e, 0, 0, 1, k, sel, loc) == 0);
            CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
            CHECK_INV(e.ctx);
            r->n++;
            CHECK_INV(e.ctx);
        }
        free(sel);
        free(loc);
        th_env_free(&e);
        if (!injected) break;
    }
    printf("promotion under host-allocation faults: %ld fault points\n", fired);
}

/* ------------------------------------------------------------ sizing */
static void test_sizing(void)
{
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    CHECK(dhs_ring_rows(2048, 8, 64) == 2176);
    for (int64_t W = 0; W < 5000; W += 37)
        for (int32_t km = 1; km <= 16; km += 3)
            for (int32_t p = 1; p <= 128; p *= 2) {
                int64_t R = dhs_ring_rows(W, km, p);
                /* a page multiple that holds the window, the block and a partial page */
                CHECKF(R % p == 0 && R >= W + km + p - 1 && R < W + km + 2 * p - 1, "R_d(%lld, %d, %d) = %lld", (long long)W, km, p,
                       (long long)R);
            }
    CHECK(dhs_ring_rows(-1, 8, 64) == 0 && dhs_ring_rows(10, 0, 64) == 0 && dhs_ring_rows(10, 8, 0) == 0);
    /* live positions of one slot (any R_d consecutive ones) never share a row; slots never overlap */
    int64_t R = dhs_ring_rows(2048, 8, 64);
    uint8_t *seen = calloc((size_t)R * 3, 1);
    long collide = 0, outside = 0;
    for (int64_t t0 = 0; t0 < 3 * R; t0 += 331) {
        for (int32_t slot = 0; slot < 3; slot++) {
            memset(seen, 0, (size_t)R * 3);
            for (int64_t t = t0; t < t0 + R; t++) {
                int64_t row = dhs_ring_row(R, slot, t);
                if (row < (int64_t)slot * R || row >= (int64_t)(slot + 1) * R) { outside++; continue; }
                if (seen[row]++) collide++;
            }
        }
    }
    free(seen);
    CHECK(collide == 0 && outside == 0);
    CHECK(dhs_ring_row(R, 2, 5) == 2 * R + 5 && dhs_ring_row(R, 0, R + 3) == 3);
    CHECK(dhs_ring_row(0, 0, 5) == -1 && dhs_ring_row(R, -1, 5) == -1 && dhs_ring_row(R, 0, -5) == -1);
    double ring = (double)dhs_ring_bytes(2048, 8, 64, 35, 12288) / GiB;
    CHECKF(fabs(ring - 0.87) < 0.01, "ring %.4f GiB", ring);
    double s78 = (double)dhs_staging_bytes(78, 35, 8, 2048, 576) / GiB, s4 = (double)dhs_staging_bytes(4, 35, 8, 2048, 576) / GiB;
    CHECKF(fabs(s78 - 24.0) < 0.05, "staging 78 live: %.4f GiB", s78);
    CHECKF(fabs(s4 - 1.23) < 0.01, "staging 4 live: %.4f GiB", s4);
    CHECK(dhs_staging_bytes(78, 35, 8, 2048, 576) == 78ull * 35 * 8 * 2048 * 576);
    CHECK(dhs_staging_bytes(-1, 35, 8, 2048, 576) == 0);
    printf("sizing: R_d = %lld rows, ring %.3f GiB, staging %.2f GiB (78 live) / %.3f GiB (4 live)\n", (long long)R, ring, s78, s4);
}

int main(void)
{
    g_seed = th_seed("test_spec");
    double t0 = th_now();
    test_sizing();
    test_adversarial_unions();
    test_arena_reuse();
    test_refused_call_keeps_other_requests();
    test_promotion_alloc_fault();
    test_random_speculation(th_scale());
    printf("test_spec: %.2f s\n", th_now() - t0);
    return th_summary();
}
