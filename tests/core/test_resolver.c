/* test_resolver.c - properties of dhs_resolve through the public API.
 *
 *  - output in selection order, -1 passes through as -1, every entry reads
 *    its row's bytes;
 *  - duplicates within a query and across the K queries of a request share
 *    one location; distinct rows get distinct locations;
 *  - distinct misses are copied once: host_rows_copied == distinct_misses, a
 *    row missed by all K queries of a round is counted (and copied) once, and
 *    the census adds up (direct + hot + host == entries);
 *  - policy work per call is bounded by the work (white-box counter on the
 *    policy vtable), the same for B = 64 and B = 4096;
 *  - the census has direct, hot and host shares on a mixed workload, and
 *    imported history in ready optional pages is always direct;
 *  - FOLLOW: one group with three sources of different row sizes: one plan,
 *    each source its own bytes at its own locations, counted once;
 *  - compressed source (m = 4): only complete rows are selectable; the
 *    incomplete row lives in the tail and its latest rewrite is what is read;
 *  - the tail ring keeps backed-up rows until the next block needs the room:
 *    the imported partial page and the newest committed rows are direct,
 *    rows the ring has left are host rows with their bytes.
 */
#include "core/policy.h"
#include "test_help.h"

static uint64_t g_seed;

static dhs_arch one_source(uint32_t rb)
{
    dhs_arch a = dhs_arch_default();
    a.sources[0].row_bytes = rb;
    return a;
}

static dhs_config small_cfg(int32_t B, int32_t k, int32_t kmax)
{
    dhs_config c = dhs_config_default();
    c.max_requests = 4;
    c.sel_k = k;
    c.spec_width = kmax;
    c.hot_rows = B;
    c.page_rows = 8;
    c.tail_rows = 8 * ((2 * kmax + 7) / 8 + 1);
    c.max_rows = 4096;
    c.device_bytes = 4000ull * 8 * 64;
    c.repop_pages = 8;
    return c;
}

/* sort-based distinct count of non-negative entries */
static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int64_t distinct_rows(const int32_t *sel, int64_t n, int32_t below)
{
    int32_t *t = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (sel[i] >= 0 && sel[i] < below) t[m++] = sel[i];
    qsort(t, (size_t)m, sizeof *t, cmp_i32);
    int64_t d = 0;
    for (int64_t i = 0; i < m; i++)
        if (i == 0 || t[i] != t[i - 1]) d++;
    free(t);
    return d;
}

/* ------------------------------------------------------------ order, padding, duplicates, copies */
static void test_order_duplicates_copies(void)
{
    const int32_t B = 128, k = 32, KMAX = 4;
    th_env e;
    dhs_arch arch = one_source(64);
    dhs_config cfg = small_cfg(B, k, KMAX);
    cfg.resident_first = 0; /* history on host only: every old row goes through hot/recover */
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 600), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 0, 600, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    uint64_t rng = g_seed ^ 0x1111;
    int32_t sel[4 * 32], loc[4 * 32];
    long bad_order = 0, bad_dup = 0, bad_distinct = 0, bad_count = 0, rounds_with_shared_miss = 0;
    for (int round = 0; round < 400; round++) {
        th_req *r = &e.rq[0];
        int32_t K = 1 + (int32_t)dhs_rng_below(&rng, KMAX);
        CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &K), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_write_block(&e, 0, K), DHS_OK);
        CHECK_INV(e.ctx);
        int32_t shared = -1;
        if (round % 5 == 0) shared = (int32_t)dhs_rng_below(&rng, r->n); /* one row every query selects */
        for (int32_t j = 0; j < K; j++) {
            int64_t vis = r->n + j + 1;
            for (int32_t i = 0; i < k; i++) {
                int64_t x = dhs_rng_below(&rng, 20);
                int32_t v;
                if (x == 0) v = -1;
                else if (x < 3 && i > 0) v = sel[j * k + dhs_rng_below(&rng, i)];     /* duplicate in the query */
                else if (x < 5 && j > 0) v = sel[dhs_rng_below(&rng, j * k)];         /* duplicate of another query */
                else if (x < 8) v = (int32_t)(vis - 1 - dhs_rng_below(&rng, 20));     /* local window, tail */
                else v = (int32_t)dhs_rng_below(&rng, r->n);
                if (shared >= 0 && i == k - 1) v = shared;
                sel[j * k + i] = v < (int32_t)vis ? v : -1;
            }
        }
        dhs_stats a, b;
        dhs_get_stats(e.ctx, &a);
        dhs_resolve_item it = {r->h, K, sel, loc};
        CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_get_stats(e.ctx, &b);
        /* order + padding + bytes */
        bad_order += th_check_item(&e, 0, 0, K, k, sel, loc);
        /* same row <-> same location, across every query of the request */
        for (int64_t x = 0; x < (int64_t)K * k; x++)
            for (int64_t y = x + 1; y < (int64_t)K * k; y++) {
                if (sel[x] < 0 || sel[y] < 0) continue;
                if (sel[x] == sel[y] && loc[x] != loc[y]) bad_dup++;
                if (sel[x] != sel[y] && loc[x] == loc[y]) bad_distinct++;
            }
        /* counts: entries, census, copies */
        int64_t entries = 0;
        for (int64_t x = 0; x < (int64_t)K * k; x++) entries += sel[x] >= 0;
        int64_t dm = (int64_t)(b.distinct_misses - a.distinct_misses);
        int64_t distinct_old = distinct_rows(sel, (int64_t)K * k, (int32_t)r->n); /* rows not in the tail */
        if ((int64_t)(b.entries - a.entries) != entries) bad_count++;
        if (b.census_direct + b.census_hot + b.census_host - a.census_direct - a.census_hot - a.census_host != (uint64_t)entries) bad_count++;
        if (b.host_rows_copied - a.host_rows_copied != (uint64_t)dm) bad_count++;
        if (b.host_bytes_copied - a.host_bytes_copied != (uint64_t)dm * e.stride) bad_count++;
        if (dm > distinct_old) bad_count++;
        if (b.resolve_calls != a.resolve_calls + 1) bad_count++;
        if (shared >= 0 && K > 1) rounds_with_shared_miss++;
        /* the same selections again in the same round: every row is now present, nothing copied */
        int32_t loc2[4 * 32];
        dhs_resolve_item it2 = {r->h, K, sel, loc2};
        dhs_get_stats(e.ctx, &a);
        CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it2), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_get_stats(e.ctx, &b);
        if (b.distinct_misses != a.distinct_misses || b.census_host != a.census_host) bad_count++;
        if (memcmp(loc, loc2, sizeof(int32_t) * (size_t)K * k)) bad_count++;
        int32_t acc = (int32_t)dhs_rng_below(&rng, K);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        CHECK_INV(e.ctx);
        r->n += acc + 1;
        CHECK_INV(e.ctx);
    }
    CHECKF(bad_order == 0, "%ld entries out of order / wrong bytes / padding not -1", bad_order);
    CHECKF(bad_dup == 0, "%ld duplicate pairs with different locations", bad_dup);
    CHECKF(bad_distinct == 0, "%ld distinct rows sharing a location", bad_distinct);
    CHECKF(bad_count == 0, "%ld rounds with inconsistent counters", bad_count);
    CHECK(rounds_with_shared_miss > 10);

    /* rows new to a request's cache, selected by all K queries of a round: one distinct miss each, one copy */
    int32_t K = KMAX, acc;
    CHECK_ST(th_open(&e, 1, 300), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 1, 300, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    th_req *f = &e.rq[1];
    CHECK_ST(dhs_round_begin(e.ctx, 1, &f->h, &K), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_write_block(&e, 1, K), DHS_OK);
    CHECK_INV(e.ctx);
    for (int32_t j = 0; j < K; j++)
        for (int32_t i = 0; i < k; i++) sel[j * k + i] = i < 4 ? 17 + i : -1; /* rows 17..20 in every query */
    dhs_stats a, b;
    dhs_get_stats(e.ctx, &a);
    dhs_resolve_item it = {f->h, K, sel, loc};
    CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it), DHS_OK);
    CHECK_INV(e.ctx);
    dhs_get_stats(e.ctx, &b);
    CHECKF(b.distinct_misses - a.distinct_misses == 4 && b.host_rows_copied - a.host_rows_copied == 4,
           "K=%d queries selecting the same 4 new rows: %llu misses, %llu copies", K,
           (unsigned long long)(b.distinct_misses - a.distinct_misses), (unsigned long long)(b.host_rows_copied - a.host_rows_copied));
    CHECK(b.census_host - a.census_host == (uint64_t)(4 * K) && b.entries - a.entries == (uint64_t)(4 * K));
    CHECK(th_check_item(&e, 1, 0, K, k, sel, loc) == 0);
    for (int32_t j = 1; j < K; j++) CHECK(memcmp(loc, loc + j * k, 4 * sizeof(int32_t)) == 0);
    acc = K - 1;
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    CHECK_INV(e.ctx);
    f->n += K;
    CHECK_INV(e.ctx);
    CHECK(th_sweep(&e, 0, k) == 0 && th_sweep(&e, 1, k) == 0);
    th_env_free(&e);
}

/* ------------------------------------------------------------ policy work bounded by the work */
static const dhs_policy_ops *g_inner;
static uint64_t g_calls[4]; /* insert, touch, remove, victim */
static size_t w_bytes(int32_t B) { return g_inner->state_bytes(B); }
static void w_init(void *s, int32_t B) { g_inner->init(s, B); }
static void w_insert(void *s, int32_t q, uint64_t key) { g_calls[0]++; g_inner->insert(s, q, key); }
static void w_touch(void *s, int32_t q, uint64_t key) { g_calls[1]++; g_inner->touch(s, q, key); }
static void w_remove(void *s, int32_t q) { g_calls[2]++; g_inner->remove(s, q); }
static int32_t w_victim(void *s, const uint32_t *prot, uint32_t epoch) { g_calls[3]++; return g_inner->victim(s, prot, epoch); }
static const dhs_policy_ops counting_ops = {"counting-clock", w_bytes, w_init, w_insert, w_touch, w_remove, w_victim, NULL};

static void run_counted(int32_t B, int32_t ws, uint64_t seed, uint64_t out[5])
{
    const int32_t k = 64;
    th_env e;
    dhs_arch arch = one_source(32);
    dhs_config cfg = small_cfg(B, k, 1);
    cfg.resident_first = 0;
    cfg.device_bytes = (uint64_t)(B / 8 + 8 + 8) * 8 * 32 * 4 + (1u << 20);
    g_inner = dhs_policy_get(DHS_POLICY_CLOCK);
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(dhs_ctx_set_policy_ops(e.ctx, &counting_ops, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 3000), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 0, 3000, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    memset(g_calls, 0, sizeof g_calls);
    uint64_t rng = seed;
    int32_t sel[64], loc[64];
    for (int round = 0; round < 200; round++) {
        int32_t one = 1, acc = 0;
        th_req *r = &e.rq[0];
        CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
        CHECK_INV(e.ctx);
        for (int i = 0; i < k; i++) sel[i] = (int32_t)(1000 + dhs_rng_below(&rng, ws));
        dhs_resolve_item it = {r->h, 1, sel, loc};
        CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK(th_check_item(&e, 0, 0, 1, k, sel, loc) == 0);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        CHECK_INV(e.ctx);
        r->n++;
    }
    dhs_stats st;
    dhs_get_stats(e.ctx, &st);
    CHECK_INV(e.ctx);
    memcpy(out, g_calls, sizeof g_calls);
    out[4] = st.distinct_misses;
    CHECKF(g_calls[1] <= st.census_hot && g_calls[0] == st.distinct_misses && g_calls[3] <= st.distinct_misses,
           "B=%d: policy calls insert %llu touch %llu victim %llu for %llu hits, %llu misses", B,
           (unsigned long long)g_calls[0], (unsigned long long)g_calls[1], (unsigned long long)g_calls[3],
           (unsigned long long)st.census_hot, (unsigned long long)st.distinct_misses);
    th_env_free(&e);
}

static void test_policy_work_bounded(void)
{
    uint64_t small[5], large[5], over[5];
    run_counted(64, 48, g_seed, small);   /* a working set of 48 rows: fits both caches */
    run_counted(4096, 48, g_seed, large);
    run_counted(64, 400, g_seed, over);   /* a working set larger than the cache: victims */
    CHECK(over[3] > 0 && over[3] <= over[4] && over[0] == over[4]);
    CHECKF(memcmp(small, large, sizeof small) == 0,
           "policy calls differ between B=64 and B=4096 on a workload both hold (insert %llu/%llu touch %llu/%llu victim %llu/%llu)",
           (unsigned long long)small[0], (unsigned long long)large[0], (unsigned long long)small[1], (unsigned long long)large[1],
           (unsigned long long)small[3], (unsigned long long)large[3]);
    printf("policy calls for 200 rounds x 64 entries: insert %llu touch %llu remove %llu victim %llu (B = 64 and 4096)\n",
           (unsigned long long)small[0], (unsigned long long)small[1], (unsigned long long)small[2], (unsigned long long)small[3]);
}

/* ------------------------------------------------------------ census shares */
static void test_census_shares(void)
{
    const int32_t B = 64, k = 32;
    th_env e;
    dhs_arch arch = one_source(64);
    dhs_config cfg = small_cfg(B, k, 1);
    cfg.decoded_optional = 0; /* decoded rows through the hot cache and host (test_ring_keeps_backed_rows has both) */
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 800), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 0, 400, DHS_IMPORT_DEVICE), DHS_OK); /* 50 complete pages: optional, direct */
    CHECK_INV(e.ctx);
    uint64_t rng = g_seed ^ 0x2222;
    int32_t sel[32], loc[32];
    long bad = 0, imported_not_direct = 0;
    for (int round = 0; round < 300; round++) {
        th_req *r = &e.rq[0];
        int32_t one = 1, acc = 0;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_stats a, b;
        if (round % 10 == 9) {
            /* imported rows only: every entry is direct */
            for (int i = 0; i < k; i++) sel[i] = (int32_t)dhs_rng_below(&rng, 400);
            dhs_get_stats(e.ctx, &a);
            dhs_resolve_item it = {r->h, 1, sel, loc};
            CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it), DHS_OK);
            CHECK_INV(e.ctx);
            dhs_get_stats(e.ctx, &b);
            if (b.census_direct - a.census_direct != (uint64_t)k) imported_not_direct++;
        } else {
            for (int i = 0; i < k; i++) {
                int64_t x = dhs_rng_below(&rng, 10);
                if (x < 3) sel[i] = (int32_t)dhs_rng_below(&rng, 400);                          /* imported */
                else if (x < 5) sel[i] = (int32_t)(r->n - dhs_rng_below(&rng, 4));              /* tail */
                else if (x < 8 && r->n > 420) sel[i] = (int32_t)(400 + dhs_rng_below(&rng, 20)); /* old decode rows, reused */
                else sel[i] = (int32_t)(400 + dhs_rng_below(&rng, r->n - 400 + 1));             /* any decode row */
            }
            dhs_resolve_item it = {r->h, 1, sel, loc};
            CHECK_ST(dhs_resolve(e.ctx, 0, k, 1, &it), DHS_OK);
            CHECK_INV(e.ctx);
        }
        bad += th_check_item(&e, 0, 0, 1, k, sel, loc);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        CHECK_INV(e.ctx);
        r->n++;
        CHECK_INV(e.ctx);
    }
    dhs_stats st;
    dhs_get_stats(e.ctx, &st);
    CHECK(bad == 0);
    CHECKF(imported_not_direct == 0, "%ld selections of imported rows were not wholly direct", imported_not_direct);
    CHECKF(st.census_direct > 0 && st.census_hot > 0 && st.census_host > 0, "census direct %llu hot %llu host %llu",
           (unsigned long long)st.census_direct, (unsigned long long)st.census_hot, (unsigned long long)st.census_host);
    CHECK(st.census_direct + st.census_hot + st.census_host == st.entries);
    CHECK(st.host_rows_copied == st.distinct_misses);
    printf("census: direct %.1f%%  hot %.1f%%  host %.1f%% of %llu entries\n", 100.0 * st.census_direct / st.entries,
           100.0 * st.census_hot / st.entries, 100.0 * st.census_host / st.entries, (unsigned long long)st.entries);
    th_env_free(&e);
}

/* ------------------------------------------------------------ FOLLOW: one plan, three payloads */
static void test_follow_group(void)
{
    const int32_t B = 32, k = 24, KMAX = 2;
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 1;
    a.n_sources = 3;
    a.sources[0] = (dhs_source_desc){64, 1, 0};
    a.sources[1] = (dhs_source_desc){32, 1, 0};
    a.sources[2] = (dhs_source_desc){48, 1, 0};
    a.n_consumers = 3;
    a.consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a.consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 1, 0};
    a.consumers[2] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 2, 0};
    th_env e;
    dhs_config cfg = small_cfg(B, k, KMAX);
    dhs_cpu_options o = {.async_delay = 2, .random_order = 1, .seed = g_seed};
    CHECK_ST(th_env_init(&e, &a, &cfg, &o), DHS_OK);
    CHECK(e.stride == 64);
    CHECK_ST(th_open(&e, 0, 500), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 0, 300, DHS_IMPORT_DEVICE), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_open(&e, 1, 500), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 1, 200, DHS_IMPORT_HOST), DHS_OK);
    CHECK_INV(e.ctx);
    uint64_t rng = g_seed ^ 0x3333;
    int32_t sel[2][2 * 24], loc[2][3 * 2 * 24];
    long bad = 0, same_loc = 0, count_bad = 0;
    for (int round = 0; round < 150; round++) {
        dhs_req h[2] = {e.rq[0].h, e.rq[1].h};
        int32_t K[2] = {1 + (int32_t)dhs_rng_below(&rng, KMAX), 1 + (int32_t)dhs_rng_below(&rng, KMAX)};
        CHECK_ST(dhs_round_begin(e.ctx, 2, h, K), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_resolve_item items[2];
        int64_t entries = 0;
        for (int q = 0; q < 2; q++) {
            CHECK_ST(th_write_block(&e, q, K[q]), DHS_OK);
            CHECK_INV(e.ctx);
            for (int32_t j = 0; j < K[q]; j++)
                for (int32_t i = 0; i < k; i++) {
                    int64_t vis = e.rq[q].n + j + 1;
                    sel[q][j * k + i] = dhs_rng_below(&rng, 12) == 0 ? -1 : (int32_t)dhs_rng_below(&rng, vis);
                    entries += sel[q][j * k + i] >= 0;
                }
            items[q] = (dhs_resolve_item){h[q], K[q], sel[q], loc[q]};
        }
        dhs_stats sa, sb;
        dhs_get_stats(e.ctx, &sa);
        CHECK_ST(dhs_resolve(e.ctx, 0, k, 2, items), DHS_OK);
        CHECK_INV(e.ctx);
        dhs_get_stats(e.ctx, &sb);
        /* counted once per group entry, copies once per row (each source's bytes moved) */
        if (sb.entries - sa.entries != (uint64_t)entries) count_bad++;
        if (sb.host_rows_copied - sa.host_rows_copied != sb.distinct_misses - sa.distinct_misses) count_bad++;
        if (sb.host_bytes_copied - sa.host_bytes_copied != 3ull * e.stride * (sb.host_rows_copied - sa.host_rows_copied)) count_bad++;
        for (int q = 0; q < 2; q++) {
            bad += th_check_item(&e, q, 0, K[q], k, sel[q], loc[q]);
            int64_t ne = (int64_t)K[q] * k;
            for (int64_t x = 0; x < ne; x++) {
                if (sel[q][x] < 0) continue;
                same_loc += loc[q][x] == loc[q][ne + x] || loc[q][x] == loc[q][2 * ne + x] || loc[q][ne + x] == loc[q][2 * ne + x];
            }
        }
        int32_t acc[2] = {(int32_t)dhs_rng_below(&rng, K[0]), (int32_t)dhs_rng_below(&rng, K[1])};
        CHECK_ST(dhs_round_end(e.ctx, acc), DHS_OK);
        CHECK_INV(e.ctx);
        e.rq[0].n += acc[0] + 1;
        e.rq[1].n += acc[1] + 1;
        CHECK_INV(e.ctx);
    }
    CHECKF(bad == 0, "FOLLOW: %ld entries read another source's or another row's bytes", bad);
    CHECKF(same_loc == 0, "FOLLOW: %ld entries share a location between sources", same_loc);
    CHECKF(count_bad == 0, "FOLLOW: %ld calls counted per source instead of per row", count_bad);
    CHECK(th_sweep(&e, 0, k) == 0 && th_sweep(&e, 1, k) == 0);
    CHECK_INV(e.ctx);
    th_env_free(&e);
}

/* ------------------------------------------------------------ compressed source */
static void test_compressed(void)
{
    const int32_t B = 32, k = 16;
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 2;
    a.n_sources = 2;
    a.sources[0] = (dhs_source_desc){64, 1, 0};
    a.sources[1] = (dhs_source_desc){32, 4, 1};
    th_env e;
    dhs_config cfg = small_cfg(B, k, 4);
    CHECK_ST(th_env_init(&e, &a, &cfg, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 1000), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_import(&e, 0, 102, DHS_IMPORT_DEVICE), DHS_OK); /* m = 4: rows 0..24 complete, 25 holds 100..101 */
    CHECK_INV(e.ctx);
    th_req *r = &e.rq[0];
    int32_t sel[4 * 16], loc[4 * 16];
    int32_t one = 1, acc = 0;
    for (int i = 0; i < 4 * k; i++) sel[i] = -1;
    /* n = 102: query at 102 sees positions 0..102: row 25 (100..103) is incomplete */
    CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
    CHECK_INV(e.ctx);
    sel[0] = 24;
    dhs_resolve_item it = {r->h, 1, sel, loc};
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it), DHS_OK); /* the import's rows are there before any write */
    CHECK_INV(e.ctx);
    CHECK(th_check_item(&e, 0, 1, 1, k, sel, loc) == 0);
    sel[1] = 25;
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it), DHS_ERR_NOT_VISIBLE);
    CHECK_INV(e.ctx);
    sel[1] = -1;
    CHECK_ST(th_write_block(&e, 0, 1), DHS_OK); /* rewrites row 25 (version 1) */
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    CHECK_INV(e.ctx);
    r->n = 103;
    CHECK_INV(e.ctx);
    /* n = 103: the query at 103 completes row 25: visible once rewritten, with the rewrite's bytes */
    CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_write_block(&e, 0, 1), DHS_OK); /* version 2 */
    CHECK_INV(e.ctx);
    CHECK(r->ver[1][25] == 2);
    sel[0] = 25;
    sel[1] = 3;
    sel[2] = 25;
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK(th_check_item(&e, 0, 1, 1, k, sel, loc) == 0);
    CHECK(loc[0] == loc[2]);
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    CHECK_INV(e.ctx);
    r->n = 104;
    CHECK_INV(e.ctx);
    /* a block crossing a row boundary with a rejection: n = 104, K = 4 writes rows 26 (104..107);
       accepting 1 commits 104..105: row 26 stays incomplete; the next block rewrites it */
    int32_t K4 = 4;
    CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &K4), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK_ST(th_write_block(&e, 0, 4), DHS_OK);
    CHECK_INV(e.ctx);
    for (int i = 0; i < 4 * k; i++) sel[i] = -1;
    sel[3 * k] = 26; /* the last query (position 107) sees row 26 complete */
    sel[0] = 25;
    dhs_resolve_item it4 = {r->h, 4, sel, loc};
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it4), DHS_OK);
    CHECK_INV(e.ctx);
    CHECK(th_check_item(&e, 0, 1, 4, k, sel, loc) == 0);
    sel[2 * k] = 26; /* query 2 (position 106) does not */
    CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it4), DHS_ERR_NOT_VISIBLE);
    CHECK_INV(e.ctx);
    sel[2 * k] = -1;
    acc = 1;
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    CHECK_INV(e.ctx);
    r->n = 106;
    CHECK_INV(e.ctx);
    acc = 0;
    /* 4 more single steps: 106, 107 complete row 26 at the second; then rows move to history */
    for (int s = 0; s < 6; s++) {
        CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
        CHECK_INV(e.ctx);
        for (int i = 0; i < k; i++) sel[i] = -1;
        int64_t complete = (r->n + 1) / 4; /* rows visible to the query at n */
        for (int i = 0; i < k && i < complete; i++) sel[i] = (int32_t)(complete - 1 - i);
        dhs_resolve_item it1 = {r->h, 1, sel, loc};
        CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it1), DHS_OK);
        CHECK_INV(e.ctx);
        CHECK(th_check_item(&e, 0, 1, 1, k, sel, loc) == 0);
        sel[0] = (int32_t)complete; /* the next row is never visible early */
        CHECK_ST(dhs_resolve(e.ctx, 1, k, 1, &it1), DHS_ERR_NOT_VISIBLE);
        CHECK_INV(e.ctx);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        CHECK_INV(e.ctx);
        r->n++;
        CHECK_INV(e.ctx);
    }
    CHECK(r->ver[1][26] >= 3);
    CHECK(th_sweep(&e, 0, k) == 0);
    CHECK_INV(e.ctx);
    th_env_free(&e);
}

/* ------------------------------------------------------------ the ring keeps backed-up rows */
/* The tail ring serves rows [tail_lo, end of block) and moves tail_lo only
   when the next block needs the room: the last partial page of an import and
   the newest committed rows stay direct after their host copy completed (the
   CPU backend completes backups at once); a row the ring has left keeps its
   bytes: with decoded_optional (the default) its page joined the optional
   pages at the round begin after it was complete, copied from the ring (the CPU
   backend's copy is complete at once), so it stays direct; without it a host or
   hot row. */
static void census_of(th_env *e, th_req *r, int32_t k, const int32_t *sel, int32_t *loc, dhs_stats *d, long *bad)
{
    dhs_stats a, b;
    dhs_get_stats(e->ctx, &a);
    dhs_resolve_item it = {r->h, 1, sel, loc};
    CHECK_ST(dhs_resolve(e->ctx, 0, k, 1, &it), DHS_OK);
    CHECK_INV(e->ctx);
    dhs_get_stats(e->ctx, &b);
    d->census_direct = b.census_direct - a.census_direct;
    d->census_hot = b.census_hot - a.census_hot;
    d->census_host = b.census_host - a.census_host;
    *bad += th_check_item(e, 0, 0, 1, k, sel, loc);
}

static void test_ring_keeps_backed_rows(int decoded_optional)
{
    const int32_t B = 64, k = 4;
    th_env e;
    dhs_arch arch = one_source(64);
    dhs_config cfg = small_cfg(B, k, 1); /* page 8, tail 16 */
    cfg.decoded_optional = decoded_optional;
    const int32_t T = cfg.tail_rows, p = cfg.page_rows;
    printf("ring_keeps_backed_rows: decoded_optional %d\n", decoded_optional);
    CHECK(T == 16 && p == 8);
    CHECK_ST(th_env_init(&e, &arch, &cfg, NULL), DHS_OK);
    CHECK_ST(th_open(&e, 0, 800), DHS_OK);
    CHECK_ST(th_import(&e, 0, 404, DHS_IMPORT_DEVICE), DHS_OK); /* 50 pages + 4 rows of a partial page */
    CHECK_INV(e.ctx);
    th_req *r = &e.rq[0];
    int32_t sel[4], loc[4];
    long bad = 0, partial_not_direct = 0, recent_not_direct = 0, edge_not_direct = 0, left_direct = 0, left_seen = 0;
    for (int round = 0; round < 60; round++) {
        int32_t one = 1, acc = 0;
        dhs_stats d;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &r->h, &one), DHS_OK);
        CHECK_ST(th_write_block(&e, 0, 1), DHS_OK);
        CHECK_INV(e.ctx);
        const int32_t n = (int32_t)r->n, lo = n + 1 - T; /* the ring holds [n + 1 - T, n + 1) this round */
        if (round == 0) {
            for (int i = 0; i < 4; i++) sel[i] = 400 + i; /* the partial page */
            census_of(&e, r, k, sel, loc, &d, &bad);
            partial_not_direct += 4 - (long)d.census_direct;
        } else {
            /* the four newest committed rows (their backups completed) */
            for (int i = 0; i < 4; i++) sel[i] = n - 1 - i;
            census_of(&e, r, k, sel, loc, &d, &bad);
            recent_not_direct += 4 - (long)d.census_direct;
            if (lo > 404) {
                /* the oldest rows the ring still holds, then rows it has left */
                for (int i = 0; i < 4; i++) sel[i] = lo + i;
                census_of(&e, r, k, sel, loc, &d, &bad);
                edge_not_direct += 4 - (long)d.census_direct;
                /* with decoded_optional their page joined once complete, long before the ring let its
                   first row go (T = 2 p): every one is direct */
                for (int i = 0; i < 4; i++) sel[i] = lo - 1 - i;
                census_of(&e, r, k, sel, loc, &d, &bad);
                left_direct += (long)d.census_direct;
                left_seen += 4;
            }
        }
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        CHECK_INV(e.ctx);
        r->n++;
    }
    CHECKF(bad == 0, "%ld entries read wrong bytes", bad);
    CHECKF(partial_not_direct == 0, "%ld rows of the imported partial page were not direct", partial_not_direct);
    CHECKF(recent_not_direct == 0, "%ld selections of the newest committed rows were not direct", recent_not_direct);
    CHECKF(edge_not_direct == 0, "%ld selections of the ring's oldest rows were not direct", edge_not_direct);
    if (decoded_optional)
        CHECKF(left_seen > 0 && left_direct == left_seen, "%ld of %ld rows the ring had left were served direct",
               left_direct, left_seen);
    else
        CHECKF(left_seen > 0 && left_direct == 0, "%ld of %ld rows the ring had left were served direct", left_direct,
               left_seen);
    th_env_free(&e);
}

int main(void)
{
    g_seed = th_seed("test_resolver");
    double t0 = th_now();
    test_order_duplicates_copies();
    test_policy_work_bounded();
    test_census_shares();
    test_follow_group();
    test_compressed();
    test_ring_keeps_backed_rows(0);
    test_ring_keeps_backed_rows(1);
    printf("test_resolver: %.2f s\n", th_now() - t0);
    return th_summary();
}
