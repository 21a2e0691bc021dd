/* test_group_hot.h - the per-group hot-cache workload (dhs_config.group_hot_rows) shared by
 * tests/core/test_group_hot.c (CPU backend) and tests/cuda/test_dres_api_cuda.c (CUDA backend).
 *
 * gh_equivalence: four contexts run the same sequence (opens, imports, rounds of 1..4 queries, closes):
 * context 0 with B = {16, 48, 32} per group, contexts 1..3 uniform at 16, 48 and 32. Groups are
 * independent, so context 0 must resolve group g exactly as the uniform context at group g's B does: the
 * same census, distinct misses and staged rows, call for call. Every location of every context must hold
 * the selected row's bytes, and the invariants must hold after every resolve and round end.
 */
#ifndef DHS_TEST_GROUP_HOT_H
#define DHS_TEST_GROUP_HOT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhs.h"
#include "test_help.h"

#define ROWB 64
#define NG 3
#define NSRC 4

/* group 0: one m = 1 source; group 1: two m = 1 sources (OWN + FOLLOW); group 2: one m = 2 source */
static inline dhs_arch arch3(void)
{
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = NG;
    a.n_sources = NSRC;
    a.sources[0] = (dhs_source_desc){ROWB, 1, 0};
    a.sources[1] = (dhs_source_desc){ROWB, 1, 1};
    a.sources[2] = (dhs_source_desc){ROWB, 1, 1};
    a.sources[3] = (dhs_source_desc){ROWB, 2, 2};
    a.n_consumers = 4;
    a.consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a.consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 1, 1};
    a.consumers[2] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 2, 1};
    a.consumers[3] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 3, 2};
    a.index_key_bytes = 16;
    return a;
}

static inline dhs_config cfg3(int resolver)
{
    dhs_config c = dhs_config_default();
    c.max_requests = 4;
    c.sel_k = 8;
    c.spec_width = 4; /* K * k = 32 per call: staging when a group's B is below it */
    c.hot_rows = 32;
    c.page_rows = 8;
    c.tail_rows = 16;
    c.max_rows = 1200;
    c.device_bytes = 1 << 22;
    c.repop_pages = 0; /* history stays on host: selections reach the hot cache */
    c.resident_first = 0;
    if (resolver == DHS_RESOLVER_DEVICE) {
        c.resolver = DHS_RESOLVER_DEVICE;
        c.policy = DHS_POLICY_CLOCK;
    }
    return c;
}

/* ------------------------------------------------------------ behaviour */
#define NCTX 4 /* 0: per-group {16, 48, 0}; 1 + g: uniform at group g's B */
static const int32_t PG_B[NG] = {16, 48, 32};

typedef struct {
    int open;
    uint64_t uid;
    int64_t n;
    dhs_req h[NCTX];
} greq;

static inline void g_open(dhs_ctx **ctx, const dhs_arch *a, greq *r, uint64_t *rng, uint64_t uid, uint8_t *buf, int64_t max_rows)
{
    const int64_t n = 20 + (int64_t)dhs_rng_below(rng, 300);
    dhs_status s[NCTX];
    for (int x = 0; x < NCTX; x++) s[x] = dhs_request_open(ctx[x], n + 400, &r->h[x]);
    for (int x = 0; x < NCTX; x++) CHECK_ST(s[x], DHS_OK);
    const void *rows[NSRC];
    for (int32_t src = 0; src < NSRC; src++) {
        const int64_t m = a->sources[src].m, nr = (n + m - 1) / m;
        uint8_t *b = buf + (size_t)src * (size_t)max_rows * ROWB;
        for (int64_t row = 0; row < nr; row++) th_fill_row(b + row * ROWB, ROWB, uid, src, row, 0);
        rows[src] = b;
    }
    for (int x = 0; x < NCTX; x++) CHECK_ST(dhs_request_import(ctx[x], r->h[x], n, rows, DHS_IMPORT_HOST), DHS_OK);
    r->open = 1;
    r->uid = uid;
    r->n = n;
}

/* per-group totals of context x (0: per-group, 1 + g: uniform at group g's B) */
typedef struct gh_totals {
    uint64_t hot[NCTX][NG], host[NCTX][NG], direct[NCTX][NG], staged[NCTX][NG];
    long calls, compared;
} gh_totals;

typedef dhs_status (*gh_backend_fn)(uint64_t seed, dhs_backend **out);

/* base_rounds (times th_scale, plus 20) rounds; returns 0 when every check held (failures are counted
   by CHECK as well) */
static int gh_equivalence(int resolver, uint64_t seed, gh_backend_fn mk, const char *be_name, long base_rounds,
                          gh_totals *tot)
{
    const dhs_arch a = arch3();
    dhs_backend *be[NCTX];
    dhs_ctx *ctx[NCTX];
    for (int x = 0; x < NCTX; x++) {
        dhs_config c = cfg3(resolver);
        if (x == 0) {
            c.group_hot_rows[0] = PG_B[0];
            c.group_hot_rows[1] = PG_B[1]; /* group 2 keeps hot_rows (32) */
        } else {
            c.hot_rows = PG_B[x - 1];
        }
        be[x] = NULL;
        ctx[x] = NULL;
        CHECK_ST(mk(seed, &be[x]), DHS_OK);
        if (!be[x]) return 1;
        CHECK_ST(dhs_ctx_create(&a, &c, be[x], &ctx[x]), DHS_OK);
        if (!ctx[x]) return 1;
    }
    const dhs_config c = cfg3(resolver);
    const int32_t N = c.max_requests, KK = c.spec_width, k = c.sel_k;
    uint64_t rng = seed;
    greq rq[8];
    memset(rq, 0, sizeof rq);
    uint8_t *buf = aligned_alloc(64, (size_t)NSRC * (size_t)c.max_rows * ROWB);
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)(N * KK * k));
    int32_t *loc[NCTX];
    for (int x = 0; x < NCTX; x++) loc[x] = malloc(sizeof(int32_t) * (size_t)(N * 2 * KK * k));
    uint64_t next_uid = 0;
    long calls = 0, compared = 0, bad_bytes = 0, diff_census = 0, inv_fail = 0;
    memset(tot, 0, sizeof *tot);
    const long failed0 = th_failed;
    const long rounds = (long)((double)base_rounds * th_scale()) + 20;
    for (long round = 0; round < rounds; round++) {
        for (int32_t i = 0; i < N; i++) {
            if (rq[i].open && (dhs_rng_below(&rng, 30) == 0 || rq[i].n + KK + 1 >= 700)) {
                for (int x = 0; x < NCTX; x++) CHECK_ST(dhs_request_close(ctx[x], rq[i].h[x]), DHS_OK);
                rq[i].open = 0;
            } else if (!rq[i].open && dhs_rng_below(&rng, 3) == 0) {
                g_open(ctx, &a, &rq[i], &rng, ++next_uid, buf, c.max_rows);
            }
        }
        int32_t slots[8], K[8], nb = 0;
        dhs_req h[NCTX][8];
        for (int32_t i = 0; i < N; i++) {
            if (!rq[i].open || dhs_rng_below(&rng, 6) == 0) continue;
            slots[nb] = i;
            K[nb] = 1 + (int32_t)dhs_rng_below(&rng, KK);
            for (int x = 0; x < NCTX; x++) h[x][nb] = rq[i].h[x];
            nb++;
        }
        for (int x = 0; x < NCTX; x++) CHECK_ST(dhs_round_begin(ctx[x], nb, h[x], K), DHS_OK);
        /* the block's rows (every query accepted: a row is written once, version 0) */
        for (int32_t i = 0; i < nb; i++) {
            greq *r = &rq[slots[i]];
            for (int32_t src = 0; src < NSRC; src++) {
                const int64_t m = a.sources[src].m, lo = r->n / m, hi = (r->n + K[i] + m - 1) / m;
                for (int64_t row = lo; row < hi; row++) th_fill_row(buf + (row - lo) * ROWB, ROWB, r->uid, src, row, 0);
                for (int x = 0; x < NCTX; x++)
                    CHECK_ST(dhs_write_rows(ctx[x], r->h[x], src, lo, (int32_t)(hi - lo), buf), DHS_OK);
            }
        }
        for (int32_t g = 0; g < NG; g++) {
            const int64_t m = g == 2 ? 2 : 1;
            const int32_t nsg = g == 1 ? 2 : 1;
            dhs_resolve_item it[NCTX][8];
            for (int32_t i = 0; i < nb; i++) {
                const greq *r = &rq[slots[i]];
                int32_t *sb = sel + (int64_t)i * KK * k;
                for (int32_t j = 0; j < K[i]; j++) {
                    const int64_t vis = (r->n + j + 1) / m;
                    for (int32_t e = 0; e < k; e++) {
                        const uint64_t u = dhs_rng_below(&rng, 100);
                        int64_t s;
                        if (vis == 0 || u < 5) s = -1;
                        else if (u < 55) s = dhs_rng_below(&rng, vis < 40 ? vis : 40); /* a working set: hits */
                        else if (u < 75) s = vis - 1 - (int64_t)dhs_rng_below(&rng, vis < 24 ? vis : 24);
                        else s = dhs_rng_below(&rng, vis);
                        sb[(int64_t)j * k + e] = (int32_t)s;
                    }
                }
                for (int x = 0; x < NCTX; x++)
                    it[x][i] = (dhs_resolve_item){r->h[x], K[i], sb, loc[x] + (int64_t)i * 2 * KK * k};
            }
            dhs_stats st0[NCTX], st1[NCTX];
            for (int x = 0; x < NCTX; x++) {
                CHECK_ST(dhs_get_stats(ctx[x], &st0[x]), DHS_OK);
                CHECK_ST(dhs_resolve(ctx[x], g, k, nb, it[x]), DHS_OK);
                CHECK_ST(dhs_get_stats(ctx[x], &st1[x]), DHS_OK);
            }
            calls += nb > 0;
            /* per-group context vs the uniform one at this group's B: the same decisions */
            const int y = 1 + g;
#define D(x, f) (st1[x].f - st0[x].f)
            if (D(0, census_direct) != D(y, census_direct) || D(0, census_hot) != D(y, census_hot) ||
                D(0, census_host) != D(y, census_host) || D(0, distinct_misses) != D(y, distinct_misses) ||
                D(0, staging_rows) != D(y, staging_rows)) {
                if (diff_census++ < 5)
                    CHECKF(0, "round %ld group %d (B %d): per-group census %llu/%llu/%llu misses %llu staged %llu, uniform "
                              "%llu/%llu/%llu misses %llu staged %llu", round, g, PG_B[g],
                           (unsigned long long)D(0, census_direct), (unsigned long long)D(0, census_hot),
                           (unsigned long long)D(0, census_host), (unsigned long long)D(0, distinct_misses),
                           (unsigned long long)D(0, staging_rows), (unsigned long long)D(y, census_direct),
                           (unsigned long long)D(y, census_hot), (unsigned long long)D(y, census_host),
                           (unsigned long long)D(y, distinct_misses), (unsigned long long)D(y, staging_rows));
            }
            for (int x = 0; x < NCTX; x++) {
                tot->hot[x][g] += D(x, census_hot);
                tot->host[x][g] += D(x, census_host);
                tot->direct[x][g] += D(x, census_direct);
                tot->staged[x][g] += D(x, staging_rows);
            }
#undef D
            /* every location of every context holds the selected row */
            for (int x = 0; x < NCTX; x++)
                for (int32_t i = 0; i < nb; i++) {
                    const greq *r = &rq[slots[i]];
                    const int64_t nent = (int64_t)K[i] * k;
                    for (int32_t si = 0; si < nsg; si++) {
                        const int32_t src = g == 0 ? 0 : g == 1 ? 1 + si : 3;
                        for (int64_t e = 0; e < nent; e++) {
                            const int32_t s = sel[(int64_t)i * KK * k + e];
                            const int32_t l = loc[x][(int64_t)i * 2 * KK * k + si * nent + e];
                            if (s < 0) {
                                if (l != -1 && bad_bytes++ < 5) CHECKF(0, "context %d: padding gave %d", x, l);
                                continue;
                            }
                            uint8_t got[ROWB], want[ROWB];
                            th_fill_row(want, ROWB, r->uid, src, s, 0);
                            compared++;
                            if ((dhs_read_location(ctx[x], src, l, got) != DHS_OK || memcmp(got, want, ROWB)) &&
                                bad_bytes++ < 5)
                                CHECKF(0, "context %d round %ld group %d slot %d source %d row %d: location %d holds other bytes",
                                       x, round, g, slots[i], src, s, l);
                        }
                    }
                }
            for (int x = 0; x < NCTX; x++) {
                CHECK_ST(dhs_group_done(ctx[x], g), DHS_OK);
                char msg[256];
                if (dhs_check_invariants(ctx[x], msg, sizeof msg) && inv_fail++ < 5) CHECKF(0, "context %d: %s", x, msg);
            }
        }
        int32_t acc[8];
        for (int32_t i = 0; i < nb; i++) {
            acc[i] = K[i] - 1;
            rq[slots[i]].n += K[i];
        }
        for (int x = 0; x < NCTX; x++) {
            CHECK_ST(dhs_round_end(ctx[x], acc), DHS_OK);
            char msg[256];
            if (dhs_check_invariants(ctx[x], msg, sizeof msg) && inv_fail++ < 5) CHECKF(0, "context %d: %s", x, msg);
        }
    }
    tot->calls = calls;
    tot->compared = compared;
    const uint64_t *hot = tot->hot[0], *host = tot->host[0], *staged = tot->staged[0];
    printf("%s, %s resolver: %ld calls, %ld locations compared; per-group B {16, 48, 32}: hot %llu/%llu/%llu, host "
           "%llu/%llu/%llu, staged %llu/%llu/%llu; census differences %ld, wrong bytes %ld, invariant failures %ld\n",
           be_name, resolver == DHS_RESOLVER_DEVICE ? "device" : "host", calls, compared, (unsigned long long)hot[0],
           (unsigned long long)hot[1], (unsigned long long)hot[2], (unsigned long long)host[0], (unsigned long long)host[1],
           (unsigned long long)host[2], (unsigned long long)staged[0], (unsigned long long)staged[1],
           (unsigned long long)staged[2], diff_census, bad_bytes, inv_fail);
    CHECK(diff_census == 0 && bad_bytes == 0 && inv_fail == 0);
    /* the workload reaches every path: hits in every group, staging only where B < K * k */
    CHECK(hot[0] > 0 && hot[1] > 0 && hot[2] > 0 && host[0] > 0 && host[1] > 0 && host[2] > 0);
    CHECK(staged[0] > 0 && staged[1] == 0 && staged[2] == 0);
    /* over the same selections a larger cache hits more: group 0 at 48 rows (uniform context 2) vs 16 */
    CHECKF(tot->hot[2][0] > tot->hot[0][0] && tot->hot[0][0] == tot->hot[1][0], "group 0 hits: %llu at 48 rows, %llu at 16",
           (unsigned long long)tot->hot[2][0], (unsigned long long)tot->hot[0][0]);
    for (int x = 0; x < NCTX; x++) {
        CHECK_ST(dhs_sync(ctx[x]), DHS_OK);
        CHECK_INV(ctx[x]);
        dhs_ctx_destroy(ctx[x]);
        dhs_backend_destroy(be[x]);
    }
    free(buf);
    free(sel);
    for (int x = 0; x < NCTX; x++) free(loc[x]);
    return th_failed != failed0;
}

#endif

