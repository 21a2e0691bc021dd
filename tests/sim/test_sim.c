/* test_sim.c - trace replay (`dhs sim`) and the offline OPT policy.
 *
 * - OPT policy ops against a brute-force Belady on random access sequences,
 *   one access per round and rounds of several accesses (protection): same
 *   miss count;
 * - OPT through the real core (dhs_sim_replay with its next-use oracle)
 *   against a brute-force round Belady on a hand-written trace: same host rows;
 * - bound properties on generated traces across seeds, with and without
 *   speculation (staging), with arrivals and departures mid-trace and part of
 *   the history resident (refills make references direct): OPT never has more
 *   host rows than LRU, CLOCK, FIFO, LFU at the same B, and (default budget)
 *   OPT's host rows do not grow with B; the oracle is never asked about a row
 *   outside the round and every promotion key is matched;
 * - replay determinism (identical counters twice);
 * - payload-free replay makes the same decisions as a replay that moves real
 *   bytes (every census and accounting counter equal), invariants checked
 *   after every event of the payload run;
 * - a long trace of short requests (4 live): the core's host bytes, requests
 *   open and OPT's per-request arrays at most at once do not grow with the
 *   number of requests (40 vs 4,000).
 * - per-group hot-cache sizes (dhs_sim_config.group_hot_rows): every group at
 *   hot_rows replays exactly as the uniform configuration; varied sizes replay
 *   with the same decisions payload-free and with payload, invariants checked
 *   after every event; bad sizes are refused; the greedy split of
 *   dhs_trace_hot_split_compute on hand-made curves (with and without a floor).
 * Env: DHS_TEST_SEED, DHS_TEST_SCALE (see test_help.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/policy.h"
#include "sim/policy_opt.h"
#include "sim/sim.h"
#include "sim/trace.h"
#include "sim/tracegen.h"
#include "sim/tracestats.h"
#include "test_help.h"

/* ------------------------------------------------------------- brute force */
#define NEVER INT64_MAX

/* next round > r in which `row` is referenced, NEVER if none */
static int64_t next_round(const int32_t *const *rounds, const int32_t *len, int64_t n_rounds, int64_t r, int32_t row)
{
    for (int64_t t = r + 1; t < n_rounds; t++)
        for (int32_t i = 0; i < len[t]; i++)
            if (rounds[t][i] == row) return t * 4096 + i;
    return NEVER;
}

/* Round Belady: each round's distinct rows must be cached at once; hits are
   protected first, then each miss evicts the unprotected row used furthest in
   the future (linear scans). Returns misses. `B` >= largest round. */
static uint64_t brute_belady(const int32_t *const *rounds, const int32_t *len, int64_t n_rounds, int32_t B)
{
    int32_t *cache = calloc((size_t)B, sizeof(int32_t));
    int *prot = calloc((size_t)B, sizeof(int));
    int32_t n = 0;
    uint64_t misses = 0;
    for (int64_t r = 0; r < n_rounds; r++) {
        memset(prot, 0, sizeof(int) * (size_t)B);
        for (int32_t i = 0; i < len[r]; i++)
            for (int32_t q = 0; q < n; q++)
                if (cache[q] == rounds[r][i]) prot[q] = 1;
        for (int32_t i = 0; i < len[r]; i++) {
            int32_t row = rounds[r][i], hit = 0;
            for (int32_t q = 0; q < n && !hit; q++) hit = cache[q] == row;
            if (hit) continue;
            misses++;
            int32_t q;
            if (n < B) {
                q = n++;
            } else {
                int64_t best = -1;
                q = -1;
                for (int32_t c = 0; c < n; c++) {
                    if (prot[c]) continue;
                    int64_t nu = next_round(rounds, len, n_rounds, r, cache[c]);
                    if (nu > best) { best = nu; q = c; }
                }
            }
            cache[q] = row;
            prot[q] = 1;
        }
    }
    free(cache);
    free(prot);
    return misses;
}

/* The same sequence through the OPT ops, driven as the core drives a policy:
   hits touched first (protected), then misses insert into free slots or
   victims; key = next reference (round-major). */
static uint64_t ops_belady(const int32_t *const *rounds, const int32_t *len, int64_t n_rounds, int32_t B, int32_t universe)
{
    const dhs_policy_ops *ops = dhs_policy_opt();
    void *st = calloc(1, ops->state_bytes(B));
    ops->init(st, B);
    int32_t *slot_of = malloc(sizeof(int32_t) * (size_t)universe), *row_of = malloc(sizeof(int32_t) * (size_t)B);
    uint32_t *prot = calloc((size_t)B, sizeof(uint32_t));
    for (int32_t i = 0; i < universe; i++) slot_of[i] = -1;
    int32_t n_used = 0;
    uint64_t misses = 0;
    for (int64_t r = 0; r < n_rounds; r++) {
        uint32_t epoch = (uint32_t)r + 1;
        for (int32_t i = 0; i < len[r]; i++) {
            int32_t row = rounds[r][i], q = slot_of[row];
            if (q < 0) continue;
            prot[q] = epoch;
            int64_t nu = next_round(rounds, len, n_rounds, r, row);
            ops->touch(st, q, nu == NEVER ? DHS_OPT_KEY_NEVER : DHS_OPT_KEY_BASE + (uint64_t)nu);
        }
        for (int32_t i = 0; i < len[r]; i++) {
            int32_t row = rounds[r][i];
            if (slot_of[row] >= 0) continue;
            misses++;
            int32_t q;
            if (n_used < B) {
                q = n_used++;
            } else {
                q = ops->victim(st, prot, epoch);
                if (q < 0) { misses = UINT64_MAX; goto out; }
                slot_of[row_of[q]] = -1;
                ops->remove(st, q);
            }
            row_of[q] = row;
            slot_of[row] = q;
            prot[q] = epoch;
            int64_t nu = next_round(rounds, len, n_rounds, r, row);
            ops->insert(st, q, nu == NEVER ? DHS_OPT_KEY_NEVER : DHS_OPT_KEY_BASE + (uint64_t)nu);
        }
        /* now and then a promotion-like call with nothing protected */
        if (r % 7 == 3 && n_used == B) {
            int32_t q = ops->victim(st, prot, epoch + 1000000);
            if (q < 0) { misses = UINT64_MAX; goto out; }
            /* put it back unchanged: a re-insert of the same row with its key */
            int64_t nu = next_round(rounds, len, n_rounds, r, row_of[q]);
            ops->remove(st, q);
            ops->insert(st, q, nu == NEVER ? DHS_OPT_KEY_NEVER : DHS_OPT_KEY_BASE + (uint64_t)nu);
        }
    }
out:
    free(st);
    free(slot_of);
    free(row_of);
    free(prot);
    return misses;
}

static void test_opt_ops(uint64_t *rng)
{
    int iters = (int)(60 * th_scale()) + 5;
    for (int it = 0; it < iters; it++) {
        int32_t universe = 8 + (int32_t)dhs_rng_below(rng, 120);
        int32_t per_round = it % 2 ? 1 : 1 + (int32_t)dhs_rng_below(rng, 6);
        int32_t B = per_round + (int32_t)dhs_rng_below(rng, 24);
        int64_t n_rounds = 50 + dhs_rng_below(rng, 250);
        int32_t **rounds = malloc(sizeof(int32_t *) * (size_t)n_rounds);
        int32_t *len = malloc(sizeof(int32_t) * (size_t)n_rounds);
        int32_t hot = 1 + (int32_t)dhs_rng_below(rng, universe); /* a skewed working set */
        for (int64_t r = 0; r < n_rounds; r++) {
            rounds[r] = malloc(sizeof(int32_t) * (size_t)per_round);
            len[r] = 0;
            for (int32_t i = 0; i < per_round; i++) {
                int32_t row = dhs_rng_below(rng, 3) ? (int32_t)dhs_rng_below(rng, hot) : (int32_t)dhs_rng_below(rng, universe);
                int dup = 0;
                for (int32_t j = 0; j < len[r]; j++) dup |= rounds[r][j] == row;
                if (!dup) rounds[r][len[r]++] = row;
            }
        }
        uint64_t want = brute_belady((const int32_t *const *)rounds, len, n_rounds, B);
        uint64_t got = ops_belady((const int32_t *const *)rounds, len, n_rounds, B, universe);
        CHECKF(got == want, "OPT ops %" PRIu64 " misses, brute-force Belady %" PRIu64 " (universe %d, B %d, %d per round, %" PRId64
               " rounds)", got, want, universe, B, per_round, n_rounds);
        for (int64_t r = 0; r < n_rounds; r++) free(rounds[r]);
        free(rounds);
        free(len);
    }
}

/* ------------------------------------------------------------- OPT through the core */
static void test_opt_core(uint64_t *rng)
{
    int iters = (int)(12 * th_scale()) + 3;
    for (int it = 0; it < iters; it++) {
        const int32_t P = 200, k = 1 + (int32_t)dhs_rng_below(rng, 6);
        int64_t n_rounds = 60 + dhs_rng_below(rng, 140);
        char path[128];
        th_tmp_path(path, sizeof path, "sim_core");
        dhs_trace_header h;
        memset(&h, 0, sizeof h);
        h.n_groups = 1;
        h.k[0] = k;
        h.n_sources = 1;
        h.sources[0] = (dhs_trace_source){64, 1, 0};
        h.n_requests = 1;
        h.k_max = 1;
        dhs_trace_writer *w;
        char err[256];
        if (dhs_trace_writer_open(path, &h, &w, err, sizeof err) != DHS_TRACE_OK) { CHECKF(0, "%s", err); return; }
        dhs_trace_write_start(w, 0, P);
        int32_t **rounds = malloc(sizeof(int32_t *) * (size_t)n_rounds);
        int32_t *len = malloc(sizeof(int32_t) * (size_t)n_rounds);
        int32_t hot = 8 + (int32_t)dhs_rng_below(rng, 40);
        for (int64_t r = 0; r < n_rounds; r++) {
            int32_t *sel = malloc(sizeof(int32_t) * (size_t)k);
            rounds[r] = malloc(sizeof(int32_t) * (size_t)k);
            len[r] = 0;
            for (int32_t i = 0; i < k; i++) {
                int32_t row = dhs_rng_below(rng, 4) ? (int32_t)dhs_rng_below(rng, hot) : (int32_t)dhs_rng_below(rng, P);
                int dup = 0;
                for (int32_t j = 0; j < len[r]; j++) dup |= rounds[r][j] == row;
                sel[i] = dup ? -1 : row; /* a top-k emits distinct rows; pad the rest */
                if (!dup) rounds[r][len[r]++] = row;
            }
            const int32_t *sp[1] = {sel};
            dhs_trace_item ti = {0, 1, P + r, 0, sp};
            CHECK(dhs_trace_write_round(w, 1, &ti) == DHS_TRACE_OK);
            free(sel);
        }
        dhs_trace_write_end(w, 0);
        CHECK(dhs_trace_writer_close(w) == DHS_TRACE_OK);
        dhs_sim_trace_info info;
        CHECKF(dhs_sim_scan(path, &info, err, sizeof err) == 0, "%s", err);
        dhs_sim_oracle *o = NULL;
        CHECKF(dhs_sim_oracle_build(path, &info, &o, err, sizeof err) == 0, "%s", err);
        for (int32_t B = 8; B <= 24 && o; B += 8) {
            dhs_sim_config c = dhs_sim_config_default();
            c.page_rows = 4;
            c.hot_rows = B;
            c.check_invariants = 1;
            dhs_sim_result r;
            int rc = dhs_sim_replay(path, &info, &c, DHS_SIM_OPT, o, &r, err, sizeof err);
            CHECKF(rc == 0, "%s", err);
            uint64_t want = brute_belady((const int32_t *const *)rounds, len, n_rounds, B);
            CHECKF(rc == 0 && r.host_rows == want, "core OPT %" PRIu64 " host rows, brute-force %" PRIu64 " (k %d, B %d)",
                   r.host_rows, want, k, B);
            CHECKF(r.st.census_direct == 0, "every access through the hot cache (direct %" PRIu64 ")", r.st.census_direct);
            CHECK(r.oracle_stale == 0 && r.invariant_violations == 0);
            /* LRU on the same trace never beats it */
            dhs_sim_result l;
            CHECK(dhs_sim_replay(path, &info, &c, DHS_POLICY_LRU, NULL, &l, err, sizeof err) == 0);
            CHECKF(l.host_rows >= r.host_rows, "LRU %" PRIu64 " < OPT %" PRIu64, l.host_rows, r.host_rows);
        }
        dhs_sim_oracle_free(o);
        dhs_sim_trace_info_free(&info);
        for (int64_t r = 0; r < n_rounds; r++) free(rounds[r]);
        free(rounds);
        free(len);
        unlink(path);
    }
}

/* ------------------------------------------------------------- bound on generated traces */
static int gen_trace(const char *path, uint64_t seed, int32_t spec, int32_t producers, int32_t requests, int32_t rounds,
                     int32_t k, int64_t context, int32_t batch)
{
    dhs_tracegen_params p = dhs_tracegen_default();
    p.seed = seed;
    p.n_requests = requests;
    p.n_rounds = rounds;
    p.k = k;
    p.context = context;
    p.spec = spec;
    p.n_producers = producers;
    p.batch = batch;
    p.out_len = batch ? rounds / 3 : 0;
    p.loc.window = 128;
    p.loc.window_full = 16;
    p.loc.clusters = 16;
    p.loc.cluster_radius = 16;
    char err[256];
    if (dhs_tracegen_write(&p, path, NULL, err, sizeof err) != DHS_TRACE_OK) {
        CHECKF(0, "tracegen: %s", err);
        return -1;
    }
    return 0;
}

static void test_bounds(uint64_t seed)
{
    const int32_t hots[] = {256, 512, 1024, 2048};
    int n_seeds = th_scale() < 1 ? 2 : 4;
    for (int si = 0; si < n_seeds; si++) {
        for (int spec = 1; spec <= 3; spec += 2) {
            char path[128], err[256];
            th_tmp_path(path, sizeof path, "sim_bound");
            int32_t batch = si % 2 ? 3 : 0; /* arrivals and departures mid-trace */
            if (gen_trace(path, seed + (uint64_t)si, spec, 1 + si % 2, 5, 70, 256, 4096, batch)) continue;
            dhs_sim_trace_info info;
            if (dhs_sim_scan(path, &info, err, sizeof err)) { CHECKF(0, "%s", err); continue; }
            dhs_sim_oracle *o = NULL;
            CHECKF(dhs_sim_oracle_build(path, &info, &o, err, sizeof err) == 0, "%s", err);
            uint64_t prev_opt = UINT64_MAX;
            for (size_t hi = 0; hi < sizeof hots / sizeof hots[0]; hi++) {
                dhs_sim_config c = dhs_sim_config_default();
                c.hot_rows = hots[hi];
                /* part of the history resident: refills make some references direct mid-trace */
                c.opt_fit = si % 2 ? 0.5 : 0;
                dhs_sim_result opt;
                if (dhs_sim_replay(path, &info, &c, DHS_SIM_OPT, o, &opt, err, sizeof err)) { CHECKF(0, "OPT: %s", err); continue; }
                CHECKF(opt.st.entries == info.selected_entries, "entries %" PRIu64 " vs %" PRIu64, opt.st.entries, info.selected_entries);
                CHECKF(opt.oracle_stale == 0 && opt.opt_fallback_unknown == 0,
                       "oracle stale %" PRIu64 ", unmatched promotion keys %" PRIu64, opt.oracle_stale, opt.opt_fallback_unknown);
                /* with part of the history resident, B also sizes the pages a departing request frees, hence
                   how much is refilled and reclaimed again: host rows of every policy can grow with B there
                   (docs/SIM.md 1.2), so the monotonicity is a property of the default budget */
                if (c.opt_fit == 0)
                    CHECKF(opt.host_rows <= prev_opt, "seed %" PRIu64 " spec %d: OPT host rows grow with B: %" PRIu64 " at %d > %" PRIu64,
                           seed + (uint64_t)si, spec, opt.host_rows, hots[hi], prev_opt);
                prev_opt = opt.host_rows;
                for (int p = 0; p < DHS_SIM_OPT; p++) {
                    dhs_sim_result r;
                    if (dhs_sim_replay(path, &info, &c, p, NULL, &r, err, sizeof err)) { CHECKF(0, "%s", err); continue; }
                    CHECKF(opt.host_rows <= r.host_rows, "seed %" PRIu64 " spec %d B %d: OPT %" PRIu64 " > %s %" PRIu64,
                           seed + (uint64_t)si, spec, hots[hi], opt.host_rows, dhs_sim_policy_str(p), r.host_rows);
                    CHECK(r.st.entries == opt.st.entries && r.st.census_direct == opt.st.census_direct);
                    CHECK(r.st.staging_rows == opt.st.staging_rows); /* staging is set by |U_r| - B, not the policy */
                }
            }
            dhs_sim_oracle_free(o);
            dhs_sim_trace_info_free(&info);
            unlink(path);
        }
    }
}

/* ------------------------------------------------------------- determinism, payload */
static void test_determinism_and_payload(uint64_t seed)
{
    char path[128], err[256];
    th_tmp_path(path, sizeof path, "sim_pay");
    if (gen_trace(path, seed, 3, 2, 6, 40, 64, 1024, 3)) return;
    dhs_sim_trace_info info;
    if (dhs_sim_scan(path, &info, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    dhs_sim_oracle *o = NULL;
    CHECKF(dhs_sim_oracle_build(path, &info, &o, err, sizeof err) == 0, "%s", err);
    const double fits[] = {0.0, 0.5, 2.0};
    for (int fi = 0; fi < 3; fi++) {
        for (int p = 0; p < DHS_SIM_POLICIES; p++) {
            dhs_sim_config c = dhs_sim_config_default();
            c.hot_rows = 128;
            c.page_rows = 16;
            c.opt_fit = fits[fi];
            c.import_flags = fi == 1 ? DHS_IMPORT_HOST : DHS_IMPORT_DEVICE;
            dhs_sim_result a, b, pay;
            int ok = dhs_sim_replay(path, &info, &c, p, o, &a, err, sizeof err) == 0;
            CHECKF(ok, "%s", err);
            ok &= dhs_sim_replay(path, &info, &c, p, o, &b, err, sizeof err) == 0;
            CHECKF(ok && !memcmp(&a.st, &b.st, sizeof a.st), "%s: two replays differ", dhs_sim_policy_str(p));
            c.payload = 1;
            c.check_invariants = 1;
            ok &= dhs_sim_replay(path, &info, &c, p, o, &pay, err, sizeof err) == 0;
            CHECKF(ok, "payload replay: %s", err);
            if (!ok) continue;
            CHECK(pay.invariant_violations == 0);
            /* every decision and census figure the same; bytes moved only with payload */
            dhs_stats x = a.st, y = pay.st;
            CHECKF(x.census_direct == y.census_direct && x.census_hot == y.census_hot && x.census_host == y.census_host,
                   "%s fit %g: census %" PRIu64 "/%" PRIu64 "/%" PRIu64 " payload-free vs %" PRIu64 "/%" PRIu64 "/%" PRIu64,
                   dhs_sim_policy_str(p), fits[fi], x.census_direct, x.census_hot, x.census_host, y.census_direct, y.census_hot,
                   y.census_host);
            /* host_bytes_copied is left out: the core counts it from the copy pairs, which payload-free mode
               never builds (reported to the lead); every other counter must agree */
            x.host_bytes_copied = y.host_bytes_copied = 0;
            CHECKF(!memcmp(&x, &y, sizeof x),
                   "%s fit %g: counters differ: misses %" PRIu64 "/%" PRIu64 " staging %" PRIu64 "/%" PRIu64 " reclaims %" PRIu64
                   "/%" PRIu64 " repop %" PRIu64 "/%" PRIu64 " backup %" PRIu64 "/%" PRIu64,
                   dhs_sim_policy_str(p), fits[fi], x.distinct_misses, y.distinct_misses, x.staging_rows, y.staging_rows,
                   x.reclaims, y.reclaims, x.repopulated_pages, y.repopulated_pages, x.backup_bytes, y.backup_bytes);
            if (fi == 2) CHECKF(a.direct_share > 0.2, "opt_fit 2: imported history resident (direct %.3f)", a.direct_share);
        }
    }
    dhs_sim_oracle_free(o);
    dhs_sim_trace_info_free(&info);
    unlink(path);
}

/* ------------------------------------------------------------- a long trace, bounded state */
/* A trace of many short requests (at most `batch` live) replays with state
   that follows the live requests: the core's host bytes and requests open at
   most at once, and the OPT replay's per-request arrays, are the same
   (within the longest request's length) for 40 requests and for 100 times
   as many. Per-request state sized by the whole trace would grow 100-fold. */
static int long_trace(const char *path, uint64_t seed, int32_t requests)
{
    dhs_tracegen_params p = dhs_tracegen_default();
    p.seed = seed;
    p.n_requests = requests;
    p.n_rounds = 1 << 30;
    p.batch = 4;
    p.out_len = 8;
    p.context = 600;
    p.context_min = 500;
    p.k = 128;
    p.spec = 2;
    p.loc.window = 64;
    p.loc.window_full = 8;
    p.loc.clusters = 8;
    p.loc.cluster_radius = 8;
    char err[256];
    if (dhs_tracegen_write(&p, path, NULL, err, sizeof err) != DHS_TRACE_OK) {
        CHECKF(0, "tracegen: %s", err);
        return -1;
    }
    return 0;
}

static void test_long_trace_bounded(uint64_t seed)
{
    const int32_t n_small = 40, n_long = (int32_t)(4000 * th_scale()) > 400 ? (int32_t)(4000 * th_scale()) : 400;
    dhs_sim_result res[2][2]; /* [small, long][lru, opt] */
    int64_t maxpos[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        char path[128], err[256];
        th_tmp_path(path, sizeof path, "sim_long");
        if (long_trace(path, seed, t ? n_long : n_small)) return;
        dhs_sim_trace_info info;
        CHECKF(dhs_sim_scan(path, &info, err, sizeof err) == 0, "%s", err);
        CHECKF(info.peak_live == 4 && info.n_requests == (t ? n_long : n_small), "peak live %d of %d requests", info.peak_live,
               info.n_requests);
        maxpos[t] = info.max_positions;
        dhs_sim_oracle *o = NULL;
        CHECKF(dhs_sim_oracle_build(path, &info, &o, err, sizeof err) == 0, "%s", err);
        dhs_sim_config c = dhs_sim_config_default();
        c.hot_rows = 256;
        for (int pi = 0; pi < 2; pi++) {
            int pol = pi ? DHS_SIM_OPT : (int)DHS_POLICY_LRU;
            CHECKF(dhs_sim_replay(path, &info, &c, pol, o, &res[t][pi], err, sizeof err) == 0, "%s", err);
            CHECK(res[t][pi].st.admissions == (uint64_t)info.n_requests);
            CHECKF(res[t][pi].peak_open_requests == 4, "%d requests open at most", res[t][pi].peak_open_requests);
        }
        CHECKF(res[t][0].peak_request_bytes == 0 && res[t][1].peak_request_bytes > 0, "OPT arrays %" PRIu64 " bytes",
               res[t][1].peak_request_bytes);
        dhs_sim_oracle_free(o);
        dhs_sim_trace_info_free(&info);
        unlink(path);
    }
    printf("long trace: %d vs %d requests (4 live): core host bytes at most %" PRIu64 " vs %" PRIu64 ", OPT request arrays %" PRIu64
           " vs %" PRIu64 " bytes\n",
           n_small, n_long, res[0][0].peak_host_bytes, res[1][0].peak_host_bytes, res[0][1].peak_request_bytes,
           res[1][1].peak_request_bytes);
    /* row tables scale with the longest request (max_positions), nothing with the request count */
    double len_ratio = (double)maxpos[1] / (double)maxpos[0];
    for (int pi = 0; pi < 2; pi++) {
        CHECKF(res[1][pi].peak_host_bytes <= (uint64_t)((double)res[0][pi].peak_host_bytes * len_ratio * 1.05),
               "core host bytes %" PRIu64 " for %d requests, %" PRIu64 " for %d", res[1][pi].peak_host_bytes, n_long,
               res[0][pi].peak_host_bytes, n_small);
    }
    CHECKF(res[1][1].peak_request_bytes <= (uint64_t)((double)res[0][1].peak_request_bytes * len_ratio * 1.05),
           "OPT request arrays %" PRIu64 " for %d requests, %" PRIu64 " for %d", res[1][1].peak_request_bytes, n_long,
           res[0][1].peak_request_bytes, n_small);
}

static void test_errors(void)
{
    char err[256];
    dhs_sim_trace_info info;
    CHECK(dhs_sim_scan("/nonexistent/trace.dtr", &info, err, sizeof err) == -1 && err[0]);
    int p;
    CHECK(dhs_sim_policy_parse("opt", &p) == 0 && p == DHS_SIM_OPT);
    CHECK(dhs_sim_policy_parse("clock", &p) == 0 && p == DHS_POLICY_CLOCK);
    CHECK(dhs_sim_policy_parse("belady", &p) == -1);
    CHECK(!strcmp(dhs_sim_policy_str(DHS_SIM_OPT), "opt"));
    char path[128];
    th_tmp_path(path, sizeof path, "sim_err");
    if (gen_trace(path, 5, 1, 1, 2, 10, 64, 512, 0)) return;
    CHECK(dhs_sim_scan(path, &info, err, sizeof err) == 0);
    dhs_sim_config c = dhs_sim_config_default();
    dhs_sim_result r;
    c.hot_rows = 100; /* not a multiple of 64 */
    CHECK(dhs_sim_replay(path, &info, &c, DHS_POLICY_LRU, NULL, &r, err, sizeof err) == -1);
    c.hot_rows = 128;
    CHECK(dhs_sim_replay(path, &info, &c, DHS_SIM_OPT, NULL, &r, err, sizeof err) == -1); /* OPT without oracle */
    c.device_bytes = 4096; /* far too small */
    CHECK(dhs_sim_replay(path, &info, &c, DHS_POLICY_LRU, NULL, &r, err, sizeof err) == -1 && err[0]);
    dhs_sim_trace_info_free(&info);
    unlink(path);
    /* plot writer */
    double x[3] = {1024, 2048, 4096}, y[3] = {0.3, 0.2, 0.1};
    dhs_plot_series s = {"lru <&>", 3, x, y};
    th_tmp_path(path, sizeof path, "sim_svg");
    CHECK(dhs_plot_svg(path, "t", "x", "y", &s, 1, 1) == 0);
    FILE *f = fopen(path, "r");
    char buf[8192] = {0};
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    CHECK(n > 100 && strstr(buf, "<svg") && strstr(buf, "polyline") && strstr(buf, "lru &lt;&amp;&gt;"));
    unlink(path);
    CHECK(dhs_plot_svg("/nonexistent/dir/x.svg", "t", "x", "y", &s, 1, 0) == -1);
}

/* ------------------------------------------------------------- per-group sizes */
static void test_per_group(uint64_t seed)
{
    char path[128], err[256];
    th_tmp_path(path, sizeof path, "sim_pg");
    if (gen_trace(path, seed, 2, 3, 6, 40, 64, 1024, 3)) return;
    dhs_sim_trace_info info;
    if (dhs_sim_scan(path, &info, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    CHECK(info.hdr.n_groups == 3);
    const int pols[2] = {DHS_POLICY_LRU, DHS_POLICY_CLOCK};
    for (int pi = 0; pi < 2; pi++) {
        dhs_sim_config c = dhs_sim_config_default();
        c.hot_rows = 128;
        c.page_rows = 16;
        dhs_sim_result u, e, v, vp;
        int ok = dhs_sim_replay(path, &info, &c, pols[pi], NULL, &u, err, sizeof err) == 0;
        for (int g = 0; g < 3; g++) c.group_hot_rows[g] = 128;
        ok &= dhs_sim_replay(path, &info, &c, pols[pi], NULL, &e, err, sizeof err) == 0;
        CHECKF(ok, "%s", err);
        CHECKF(ok && !memcmp(&u.st, &e.st, sizeof u.st) && u.device_bytes == e.device_bytes && !u.per_group && e.per_group,
               "%s: every group at hot_rows differs from uniform", dhs_sim_policy_str(pols[pi]));
        c.group_hot_rows[0] = 32;
        c.group_hot_rows[2] = 256;
        ok = dhs_sim_replay(path, &info, &c, pols[pi], NULL, &v, err, sizeof err) == 0;
        c.payload = 1;
        c.check_invariants = 1;
        ok &= dhs_sim_replay(path, &info, &c, pols[pi], NULL, &vp, err, sizeof err) == 0;
        CHECKF(ok, "%s", err);
        if (!ok) continue;
        CHECK(vp.invariant_violations == 0);
        CHECKF(v.st.census_hot == vp.st.census_hot && v.st.census_host == vp.st.census_host &&
                   v.st.distinct_misses == vp.st.distinct_misses && v.st.staging_rows == vp.st.staging_rows,
               "%s per group: payload-free and payload replays decide differently", dhs_sim_policy_str(pols[pi]));
        CHECK(v.st.census_host != u.st.census_host); /* the sizes reach the core */
        CHECK(v.hit_rate > 0 && v.hit_rate < 1 && fabs(v.hit_rate + v.miss_ratio - 1) < 1e-12);
    }
    dhs_sim_config c = dhs_sim_config_default();
    c.hot_rows = 128;
    c.page_rows = 16;
    dhs_sim_result r;
    c.group_hot_rows[3] = 64; /* the trace has 3 groups */
    CHECK(dhs_sim_replay(path, &info, &c, DHS_POLICY_LRU, NULL, &r, err, sizeof err) == -1 && strstr(err, "3 groups"));
    c.group_hot_rows[3] = 0;
    c.group_hot_rows[1] = 40; /* not a multiple of 16 */
    CHECK(dhs_sim_replay(path, &info, &c, DHS_POLICY_LRU, NULL, &r, err, sizeof err) == -1);
    dhs_sim_trace_info_free(&info);
    unlink(path);

    /* the greedy on hand-made curves */
    static dhs_trace_loc_stats S;
    memset(&S, 0, sizeof S);
    S.n_groups = 3;
    S.n_b = 3;
    S.B[0] = 16, S.B[1] = 32, S.B[2] = 64;
    const double h[3][3] = {{0, 0, 0}, {0.5, 0.6, 0.7}, {0.2, 0.5, 0.9}};
    for (int g = 0; g < 3; g++)
        for (int b = 0; b < 3; b++) S.hit[g][b] = h[g][b];
    dhs_trace_hot_split z;
    /* floor 16 (measured): group 2 16 -> 32 (0.3 per 16 rows), then 32 -> 64 (0.4 per 32) fills 96 */
    CHECK(dhs_trace_hot_split_compute(&S, 96, 16, &z, err, sizeof err) == 0);
    CHECKF(z.rows[0] == 16 && z.rows[1] == 16 && z.rows[2] == 64 && z.used == 96 && z.even_rows == 32,
           "rows %lld %lld %lld used %lld even %lld", (long long)z.rows[0], (long long)z.rows[1], (long long)z.rows[2],
           (long long)z.used, (long long)z.even_rows);
    CHECK(fabs(z.even_hit - 1.1 / 3) < 1e-12 && fabs(z.sized_hit - 1.4 / 3) < 1e-12);
    /* no floor (dhs trace stats --budget): group 1 first (0.5 at 16 rows), group 2 to 32 and 64, group 1 to 32 */
    CHECK(dhs_trace_hot_split_compute(&S, 96, 0, &z, err, sizeof err) == 0);
    CHECKF(z.rows[0] == 0 && z.rows[1] == 32 && z.rows[2] == 64 && z.used == 96, "rows %lld %lld %lld",
           (long long)z.rows[0], (long long)z.rows[1], (long long)z.rows[2]);
    CHECK(fabs(z.sized_hit - 1.5 / 3) < 1e-12);
    CHECK(dhs_trace_hot_split_compute(&S, 40, 16, &z, err, sizeof err) == -1 && err[0]); /* 3 x 16 > 40 */
    CHECK(dhs_trace_hot_split_compute(&S, 96, -1, &z, err, sizeof err) == -1);
}

int main(void)
{
    uint64_t seed = th_seed("test_sim");
    uint64_t rng = seed;
    test_opt_ops(&rng);
    test_opt_core(&rng);
    test_bounds(seed);
    test_determinism_and_payload(seed);
    test_long_trace_bounded(seed);
    test_errors();
    test_per_group(seed);
    return th_summary();
}
