/* test_tpshare.c - tensor-parallel shared recovery on the CPU backend
 * (dev/tpshare.h, docs/MULTIGPU.md).
 *
 * A reference context and R rank contexts (R = 1..4) are driven by the same
 * random calls (opens, imports both ways, closes, rounds with speculation,
 * two groups, one with a FOLLOW source). After every resolve the ranks
 * exchange (dhs_tp_exchange). Checked after every call and round:
 * - every rank's statuses, locations, stats and whole pool equal the
 *   reference's (single-rank recovery, byte for byte), and every location
 *   holds the row's expected bytes; invariants hold;
 * - the host rows the ranks copied add up to the reference's recovered rows
 *   (1x, not Rx); each rank copied only its share (entries i = rank mod R)
 *   and received the rest from its peers;
 * - while a recovery awaits its exchange, resolve, group_done and round_end
 *   answer DHS_ERR_STATE;
 * - a copy fault injected on one rank (host share or all-gather) fails the
 *   exchange with DHS_ERR_BACKEND, leaves every rank's state unchanged and
 *   pending, and the retry gives the same bytes;
 * - ranks that resolved different selections are refused (DHS_ERR_STATE);
 *   bad arguments of dhs_tp_share / dhs_tp_exchange are refused.
 * Env: DHS_TEST_SEED, DHS_TEST_SCALE (rounds).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev/tpshare.h"
#include "test_help.h"

#define MAXR 4
#define KSEL 12

static dhs_arch tp_arch(void) { return th_arch_two_groups(1); }

static dhs_config tp_cfg(void)
{
    dhs_config c = dhs_config_default();
    c.max_requests = 4;
    c.sel_k = 16;
    c.spec_width = 2;
    c.hot_rows = 32;
    c.tail_rows = 16;
    c.page_rows = 8;
    c.max_rows = 400;
    c.device_bytes = 160ull * 8 * 64;
    c.repop_pages = 2;
    return c;
}

/* the worlds: env[0] is the reference (no sharing), env[1..R] the ranks */
typedef struct world {
    int R;
    th_env env[MAXR + 1];
    dhs_ctx *ranks[MAXR];
} world;

static int world_init(world *w, int R)
{
    memset(w, 0, sizeof *w);
    w->R = R;
    dhs_arch a = tp_arch();
    dhs_config c = tp_cfg();
    for (int e = 0; e <= R; e++) {
        if (th_env_init(&w->env[e], &a, &c, NULL) != DHS_OK) return -1;
        if (e > 0) {
            w->ranks[e - 1] = w->env[e].ctx;
            if (dhs_tp_share(w->env[e].ctx, e - 1, R) != DHS_OK) return -1;
        }
    }
    return 0;
}

static void world_free(world *w)
{
    for (int e = 0; e <= w->R; e++) th_env_free(&w->env[e]);
}

/* every rank against the reference: stats, memory, whole pool, invariants */
static long world_compare(world *w, const char *where)
{
    long bad = 0;
    const th_env *ref = &w->env[0];
    dhs_stats s0;
    dhs_mem m0;
    dhs_get_stats(ref->ctx, &s0);
    dhs_get_mem(ref->ctx, &m0);
    const uint8_t *p0 = dhs_source_pool(ref->ctx, 0);
    size_t pool_bytes = (size_t)dhs_source_pool_rows(ref->ctx, 0) * dhs_pool_row_stride(ref->ctx);
    CHECK_INV(ref->ctx);
    for (int e = 1; e <= w->R; e++) {
        dhs_stats s;
        dhs_mem m;
        dhs_get_stats(w->env[e].ctx, &s);
        dhs_get_mem(w->env[e].ctx, &m);
        const uint8_t *p = dhs_source_pool(w->env[e].ctx, 0);
        int ok_stats = !memcmp(&s, &s0, sizeof s);
        int ok_mem = m.pages_free == m0.pages_free && m.optional_bytes == m0.optional_bytes && m.requests_open == m0.requests_open;
        int ok_pool = dhs_source_pool_rows(w->env[e].ctx, 0) * dhs_pool_row_stride(w->env[e].ctx) == (int64_t)pool_bytes &&
                      !memcmp(p, p0, pool_bytes);
        CHECKF(ok_stats && ok_mem && ok_pool, "R=%d rank %d %s: stats %d mem %d pool %d equal the reference's", w->R, e - 1, where,
               ok_stats, ok_mem, ok_pool);
        bad += !ok_stats + !ok_mem + !ok_pool;
        CHECK_INV(w->env[e].ctx);
    }
    return bad;
}

/* one status of all worlds' contexts: the same everywhere, else a failure */
#define ALL(w, st_var, call_of_env)                                                             \
    do {                                                                                        \
        for (int e_ = 0; e_ <= (w)->R; e_++) {                                                  \
            th_env *E = &(w)->env[e_];                                                          \
            dhs_status s_ = (call_of_env);                                                      \
            if (e_ == 0) st_var = s_;                                                           \
            else CHECKF(s_ == st_var, "R=%d env %d: %s answered %s, the reference %s", (w)->R, e_, #call_of_env, \
                        dhs_status_str(s_), dhs_status_str(st_var));                           \
        }                                                                                       \
    } while (0)

typedef struct totals {
    uint64_t rounds, exchanges, faults, recovered_pairs;
} totals;

/* a random selection of k rows per query for request slot `slot` (n committed, K queries; query j sees rows < n + j + 1) */
static void make_sel(uint64_t *rng, int64_t n, int32_t K, int32_t *sel)
{
    for (int32_t j = 0; j < K; j++) {
        int64_t vis = n + j + 1;
        int32_t *q = sel + (int64_t)j * KSEL;
        for (int32_t i = 0; i < KSEL; i++) {
            if (vis <= KSEL) { q[i] = i < vis ? i : -1; continue; }
            for (;;) {
                int64_t r = dhs_rng_below(rng, 4) == 0 ? vis - 1 - dhs_rng_below(rng, 8 < vis ? 8 : vis) : dhs_rng_below(rng, vis);
                int dup = 0;
                for (int32_t x = 0; x < i; x++) dup |= q[x] == r;
                if (!dup) { q[i] = (int32_t)r; break; }
            }
        }
    }
}

static void run_world(int R, uint64_t seed, int rounds, totals *tot)
{
    world w;
    if (world_init(&w, R) != 0) {
        CHECKF(0, "R=%d: cannot create the contexts", R);
        world_free(&w);
        return;
    }
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + (uint64_t)R;
    int32_t sel[MAXR][2 * KSEL], K[MAXR], acc[MAXR];
    int32_t loc[MAXR + 1][MAXR][3 * 2 * KSEL];
    dhs_req hs[MAXR + 1][MAXR];
    int slots[MAXR];
    dhs_status st = DHS_OK;
    for (int round = 0; round < rounds; round++) {
        /* arrivals and departures */
        int n_open = 0;
        for (int s = 0; s < MAXR; s++) n_open += w.env[0].rq[s].open;
        if (n_open < 3 && dhs_rng_below(&rng, 3) == 0) {
            int slot = -1;
            for (int s = 0; s < MAXR && slot < 0; s++)
                if (!w.env[0].rq[s].open) slot = s;
            int64_t exp = 60 + dhs_rng_below(&rng, 300), imp = dhs_rng_below(&rng, exp - 20);
            unsigned flags = dhs_rng_below(&rng, 2) ? DHS_IMPORT_HOST : DHS_IMPORT_DEVICE;
            ALL(&w, st, th_open(E, slot, exp));
            if (st == DHS_OK) ALL(&w, st, th_import(E, slot, imp, flags));
        }
        for (int s = 0; s < MAXR; s++)
            if (w.env[0].rq[s].open && (w.env[0].rq[s].n > 340 || dhs_rng_below(&rng, 40) == 0)) ALL(&w, st, th_close(E, s));
        int nb = 0;
        for (int s = 0; s < MAXR; s++)
            if (w.env[0].rq[s].open) slots[nb++] = s;
        if (nb == 0) continue;
        for (int i = 0; i < nb; i++) {
            K[i] = 1 + (int32_t)dhs_rng_below(&rng, 2);
            acc[i] = (int32_t)dhs_rng_below(&rng, K[i]);
            for (int e = 0; e <= R; e++) hs[e][i] = w.env[e].rq[slots[i]].h;
        }
        ALL(&w, st, dhs_round_begin(E->ctx, nb, hs[e_], K));
        if (st != DHS_OK) continue;
        for (int i = 0; i < nb; i++) ALL(&w, st, th_write_block(E, slots[i], K[i]));
        tot->rounds++;
        for (int32_t g = 0; g < 2; g++) {
            int32_t nsrc = g == 0 ? 2 : 1;
            for (int i = 0; i < nb; i++) make_sel(&rng, w.env[0].rq[slots[i]].n, K[i], sel[i]);
            dhs_stats before;
            dhs_get_stats(w.env[0].ctx, &before);
            for (int e = 0; e <= R; e++) {
                dhs_resolve_item items[MAXR];
                for (int i = 0; i < nb; i++) items[i] = (dhs_resolve_item){hs[e][i], K[i], sel[i], loc[e][i]};
                dhs_status s = dhs_resolve(w.env[e].ctx, g, KSEL, nb, items);
                if (e == 0) st = s;
                else CHECKF(s == st, "R=%d rank %d: resolve %s, reference %s", R, e - 1, dhs_status_str(s), dhs_status_str(st));
            }
            if (st != DHS_OK) continue;
            dhs_stats after;
            dhs_get_stats(w.env[0].ctx, &after);
            uint64_t pairs = (after.host_bytes_copied - before.host_bytes_copied) / w.env[0].stride;
            tot->recovered_pairs += pairs;
            CHECK(pairs == (after.distinct_misses - before.distinct_misses) * (uint64_t)nsrc);
            if (R > 1 && pairs > 0) {
                /* pending: the rows are not there yet, and the ranks refuse to go on */
                dhs_tp_stats ts;
                dhs_tp_get_stats(w.ranks[0], &ts);
                CHECKF(ts.pending == (int64_t)pairs, "pending %" PRId64 ", recovered %" PRIu64, ts.pending, pairs);
                dhs_resolve_item it0 = {hs[1][0], K[0], sel[0], loc[1][0]};
                CHECK_ST(dhs_resolve(w.ranks[0], g, KSEL, 1, &it0), DHS_ERR_STATE);
                CHECK_ST(dhs_group_done(w.ranks[R - 1], g), DHS_ERR_STATE);
                CHECK_ST(dhs_round_end(w.ranks[R - 1], acc), DHS_ERR_STATE);
                /* sometimes a copy fault on one rank: in its host share (1st copy) or its all-gather (2nd) */
                if (dhs_rng_below(&rng, 3) == 0) {
                    int fr = (int)dhs_rng_below(&rng, R);
                    uint64_t nth = 1 + (uint64_t)dhs_rng_below(&rng, 2);
                    dhs_backend *fb = w.env[fr + 1].be;
                    uint64_t inj0 = dhs_backend_faults_injected(fb);
                    dhs_backend_fault_at(fb, DHS_FAULT_COPY, nth);
                    dhs_status xs = dhs_tp_exchange(w.ranks, R);
                    dhs_backend_fault_at(fb, DHS_FAULT_COPY, 0); /* disarm when the rank had no copy to fail */
                    if (dhs_backend_faults_injected(fb) > inj0) {
                        tot->faults++;
                        CHECK_ST(xs, DHS_ERR_BACKEND);
                        for (int r = 0; r < R; r++) {
                            dhs_tp_get_stats(w.ranks[r], &ts);
                            CHECKF(ts.pending == (int64_t)pairs, "after a failed exchange rank %d has %" PRId64 " pending", r, ts.pending);
                        }
                        /* the metadata did not move: stats equal the reference's */
                        for (int r = 0; r < R; r++) {
                            dhs_stats s;
                            dhs_get_stats(w.ranks[r], &s);
                            CHECK(!memcmp(&s, &after, sizeof s));
                        }
                    } else {
                        CHECK_ST(xs, DHS_OK);
                    }
                }
            }
            dhs_tp_stats ts;
            dhs_tp_get_stats(w.ranks[0], &ts);
            if (ts.pending) CHECK_ST(dhs_tp_exchange(w.ranks, R), DHS_OK);
            tot->exchanges += pairs > 0;
            for (int r = 0; r < R; r++) {
                dhs_tp_get_stats(w.ranks[r], &ts);
                CHECK(ts.pending == 0);
            }
            /* locations equal the reference's and hold the rows' bytes */
            for (int e = 1; e <= R; e++)
                for (int i = 0; i < nb; i++)
                    CHECKF(!memcmp(loc[e][i], loc[0][i], sizeof(int32_t) * (size_t)nsrc * (size_t)K[i] * KSEL),
                           "R=%d rank %d round %d group %d: locations differ from the reference's", R, e - 1, round, g);
            for (int e = 0; e <= R; e++)
                for (int i = 0; i < nb; i++) {
                    long wrong = th_check_item(&w.env[e], slots[i], g, K[i], KSEL, sel[i], loc[e][i]);
                    CHECKF(wrong == 0, "R=%d env %d round %d group %d: %ld locations hold wrong bytes", R, e, round, g, wrong);
                }
        }
        ALL(&w, st, dhs_round_end(E->ctx, acc));
        if (st == DHS_OK)
            for (int i = 0; i < nb; i++)
                for (int e = 0; e <= R; e++) w.env[e].rq[slots[i]].n += acc[i] + 1;
        if (world_compare(&w, "after a round")) break;
    }
    /* PCIe (host) rows: one copy per host, split into shares */
    dhs_stats s0;
    dhs_get_stats(w.env[0].ctx, &s0);
    uint64_t total = s0.host_bytes_copied / w.env[0].stride, host_sum = 0;
    for (int r = 0; r < R; r++) {
        dhs_tp_stats ts;
        dhs_tp_get_stats(w.ranks[r], &ts);
        host_sum += ts.host_rows;
        if (R > 1) {
            CHECKF(ts.host_rows + ts.peer_rows == total, "R=%d rank %d: %" PRIu64 " own + %" PRIu64 " peer rows, %" PRIu64 " recovered", R,
                   r, ts.host_rows, ts.peer_rows, total);
            CHECKF(ts.host_rows * (uint64_t)R <= total + (uint64_t)R * ts.exchanges, "R=%d rank %d copied %" PRIu64 " of %" PRIu64 " host rows",
                   R, r, ts.host_rows, total);
        }
    }
    if (R > 1) CHECKF(host_sum == total, "R=%d: ranks copied %" PRIu64 " host rows, one rank recovers %" PRIu64, R, host_sum, total);
    printf("R=%d: %" PRIu64 " host rows recovered by one rank; the %d ranks copied %" PRIu64 " from host in total "
           "(without sharing: %" PRIu64 ")\n", R, total, R, R > 1 ? host_sum : total, total * (uint64_t)R);
    CHECKF(total > 100, "R=%d: too few misses (%" PRIu64 ") to test anything", R, total);
    world_free(&w);
}

/* two ranks that resolved different selections: refused, nothing copied */
static void test_divergence(void)
{
    world w;
    if (world_init(&w, 2) != 0) { CHECK(0); world_free(&w); return; }
    dhs_status st = DHS_OK;
    ALL(&w, st, th_open(E, 0, 300));
    ALL(&w, st, th_import(E, 0, 200, DHS_IMPORT_HOST));
    int32_t K = 1, acc = 0, sel[KSEL], loc[3 * KSEL];
    dhs_req h[3] = {w.env[0].rq[0].h, w.env[1].rq[0].h, w.env[2].rq[0].h};
    for (int e = 0; e <= 2; e++) {
        CHECK_ST(dhs_round_begin(w.env[e].ctx, 1, &h[e], &K), DHS_OK);
        CHECK_ST(th_write_block(&w.env[e], 0, 1), DHS_OK);
    }
    for (int e = 1; e <= 2; e++) {
        for (int i = 0; i < KSEL; i++) sel[i] = e == 1 ? i : 100 + i;
        dhs_resolve_item it = {h[e], 1, sel, loc};
        CHECK_ST(dhs_resolve(w.env[e].ctx, 0, KSEL, 1, &it), DHS_OK);
    }
    CHECK_ST(dhs_tp_exchange(w.ranks, 2), DHS_ERR_STATE);
    dhs_tp_stats ts;
    dhs_tp_get_stats(w.ranks[1], &ts);
    CHECK(ts.pending > 0 && ts.host_rows == 0 && ts.peer_rows == 0);
    /* the argument checks */
    dhs_ctx *swapped[2] = {w.ranks[1], w.ranks[0]};
    CHECK_ST(dhs_tp_exchange(swapped, 2), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_exchange(w.ranks, 3), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_exchange(NULL, 2), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_exchange(w.ranks, 0), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_share(w.ranks[0], 0, 2), DHS_ERR_STATE); /* in a round */
    (void)acc;
    world_free(&w);
    /* dhs_tp_share: ranges, a payload-free context */
    th_env e;
    dhs_arch a = tp_arch();
    dhs_config c = tp_cfg();
    CHECK_ST(th_env_init(&e, &a, &c, NULL), DHS_OK);
    CHECK_ST(dhs_tp_share(e.ctx, 2, 2), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_share(e.ctx, -1, 2), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_share(e.ctx, 0, 0), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_share(e.ctx, 0, DHS_TP_MAX_RANKS + 1), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_share(NULL, 0, 2), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tp_share(e.ctx, 1, 2), DHS_OK);
    CHECK_ST(dhs_tp_share(e.ctx, 0, 1), DHS_OK); /* off again */
    th_env_free(&e);
    const dhs_cpu_options pf = {.payload_free = 1};
    CHECK_ST(th_env_init(&e, &a, &c, &pf), DHS_OK);
    CHECK_ST(dhs_tp_share(e.ctx, 0, 2), DHS_ERR_UNSUPPORTED);
    th_env_free(&e);
}

int main(void)
{
    uint64_t seed = th_seed("test_tpshare");
    int rounds = (int)(300 * th_scale());
    if (rounds < 40) rounds = 40;
    for (int R = 1; R <= MAXR; R++) {
        totals t = {0, 0, 0, 0};
        run_world(R, seed, rounds, &t);
        printf("R=%d: %" PRIu64 " rounds, %" PRIu64 " exchanges with rows, %" PRIu64 " copy faults injected and retried\n", R, t.rounds,
               t.exchanges, t.faults);
        if (R > 1) CHECKF(t.faults > 0, "R=%d: no fault was injected", R);
    }
    test_divergence();
    return th_summary();
}
