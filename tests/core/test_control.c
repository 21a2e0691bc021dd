/* test_control.c - the round path's incremental host work: housekeeping's
 * work list and fence memo (residency.c), checked against the full sweep it
 * replaced.
 *
 * 1. Differential: the same random sequence (opens, host and device imports,
 *    rounds over random subsets with speculation, row writes, resolves of
 *    both groups, acceptance, closes) runs on two contexts, one with the full
 *    sweep (dhs_ctx.full_sweep) and one incremental, on CPU backends whose
 *    copies complete 0..3 rounds late. After every call both satisfy
 *    dhs_check_invariants (which checks that every request with a copy in
 *    flight or rows to back up is on the work list); every location of every
 *    resolve holds the row's bytes in both, and is the same in both while
 *    copies complete at most a round late (later, a wait for one batched
 *    backup completes several requests' rows at once, so tail windows may
 *    move at other rounds); rounds, commits and resolved entries agree.
 * 2. Backups by housekeeping alone: a round's tail backup still in flight
 *    when the next round ends leaves that round's rows due; housekeeping
 *    must back them up without dhs_sync. After the rounds and a few empty
 *    ones every committed row of every source has been backed up (backup
 *    rows counted, backed_hi = hist_rows); a request dropped from the work
 *    list while rows were due fails this.
 * 3. dhs_round_begin's duplicate check across its stamp's wrap.
 * 4. A round's backup that fails part-way leaves every request of the round
 *    on the work list.
 * 5. dhs_get_host_time: one call counted per call of each timed function and
 *    per sub-phase of a round, a sub-phase's time within its call's, nothing
 *    after dhs_reset_stats, refusals for NULL.
 * 6. Page backups: a round end issues the backup of a page when it completes
 *    and nothing else; the ring never waits when tail_rows leaves room; after
 *    dhs_sync every committed row is on host with its bytes.
 * 7. Sharing a prefix whose last page is incomplete gives the child every row.
 * 8. dhs_round_tail_locations against dhs_tail_locations per request and
 *    source (groups of 1, 2 sources and a compressed m = 4 source), random
 *    rounds: the same locations, nothing written past a block's rows, the
 *    rows counted as written; a too-small stride or an overlapping source
 *    stride writes and marks nothing; outside a round it is refused. With the
 *    device resolver, dhs_round_tail_locations_device writes the same values
 *    (every entry, the untouched ones too) and refuses as the host call; in
 *    host mode it is refused and writes nothing.
 * 9. dhs_background: the same rounds with and without it (both resolvers,
 *    page-aligned and not) give the same locations and host copies; with it
 *    the round end copies nothing and it copies the due pages; after the
 *    engine stops calling it the round ends copy again; a short ring still
 *    forces the copies at dhs_round_begin.
 */
#include "test_help.h"

#include "core/internal.h"

#define NREQ 4
#define KSEL 8
#define KMAX 2
#define RB 32

typedef struct {
    dhs_backend *be;
    dhs_ctx *ctx;
} side;

static dhs_arch arch2(void)
{
    dhs_arch a = dhs_arch_default();
    a.n_groups = 2;
    a.n_sources = 3;
    a.sources[0] = (dhs_source_desc){RB, 1, 0};
    a.sources[1] = (dhs_source_desc){RB, 1, 1};
    a.sources[2] = (dhs_source_desc){RB, 1, 1};
    a.n_consumers = 0;
    return a;
}

static int64_t g_max_rows = 400; /* backup_fault_lists_all needs more */
static int32_t g_tail_rows = 8;  /* page_backups: 16 leaves room for copies up to 3 rounds late */
static int32_t g_resolver = DHS_RESOLVER_HOST; /* background: both resolvers */

static dhs_config cfg2(void)
{
    dhs_config c = dhs_config_default();
    c.max_requests = NREQ;
    c.sel_k = KSEL;
    c.spec_width = KMAX;
    c.page_rows = 4;
    c.hot_rows = 16;
    c.tail_rows = g_tail_rows;
    c.max_rows = g_max_rows;
    c.policy = DHS_POLICY_CLOCK;
    c.resolver = g_resolver;
    c.repop_pages = 2;
    c.device_bytes = (uint64_t)RB * 4 * 120; /* 120 pages: admissions reclaim, pages repopulate */
    return c;
}

static int make(side *s, int delay, int full)
{
    dhs_cpu_options o = {0};
    o.async_delay = delay;
    dhs_arch a = arch2();
    dhs_config c = cfg2();
    if (dhs_backend_cpu_create(&o, &s->be) != DHS_OK) return -1;
    if (dhs_ctx_create(&a, &c, s->be, &s->ctx) != DHS_OK) return -1;
    s->ctx->full_sweep = full;
    return 0;
}

static void drop(side *s)
{
    dhs_ctx_destroy(s->ctx);
    dhs_backend_destroy(s->be);
}

static void fill(uint8_t *out, uint64_t uid, int32_t src, int64_t row) { th_fill_row(out, RB, uid, src, row, 0); }

/* the round's blocks: request ids[b]'s rows n .. n + K[b] - 1 of every source, the same bytes into both sides */
static void write_blocks(side s[2], dhs_req rr[2][NREQ], const int32_t *ids, int32_t nr, const int32_t *K,
                         const uint64_t *uid, const int64_t *n)
{
    for (int32_t b = 0; b < nr; b++) {
        const int32_t i = ids[b];
        uint8_t buf[KMAX * RB];
        for (int32_t src = 0; src < 3; src++) {
            for (int32_t j = 0; j < K[b]; j++) fill(buf + j * RB, uid[i], src, n[i] + j);
            for (int k = 0; k < 2; k++) CHECK_ST(dhs_write_rows(s[k].ctx, rr[k][b], src, n[i], K[b], buf), DHS_OK);
        }
    }
}

/* every location of a resolve holds its row's bytes */
static void check_bytes(dhs_ctx *ctx, const int32_t *sel, const int32_t *loc, int32_t nq, uint64_t uid, int32_t g)
{
    uint8_t got[RB], want[RB];
    const int32_t srcs[2][2] = {{0, -1}, {1, 2}};
    for (int32_t si = 0; si < (g ? 2 : 1); si++)
        for (int32_t e = 0; e < nq * KSEL; e++) {
            if (sel[e] < 0) continue;
            int32_t l = loc[si * nq * KSEL + e];
            CHECKF(l >= 0, "row %d unresolved", sel[e]);
            if (l < 0 || dhs_read_location(ctx, srcs[g][si], l, got) != DHS_OK) continue;
            fill(want, uid, srcs[g][si], sel[e]);
            CHECKF(!memcmp(got, want, RB), "source %d row %d at location %d holds other bytes", srcs[g][si], sel[e], l);
        }
}

static void differential(uint64_t seed, int delay, long events)
{
    side s[2];
    if (make(&s[0], delay, 1) || make(&s[1], delay, 0)) {
        CHECKF(0, "setup (delay %d)", delay);
        return;
    }
    uint64_t rng = seed;
    dhs_req rq[2][NREQ];
    int live[NREQ] = {0};
    uint64_t uid[NREQ] = {0}, next_uid = 1;
    int64_t n[NREQ] = {0};
    uint8_t *rows[3];
    for (int i = 0; i < 3; i++) rows[i] = aligned_alloc(64, (size_t)RB * 400);
    int32_t sel[NREQ][KMAX * KSEL], loc[2][NREQ][2 * KMAX * KSEL];
    long rounds = 0, loc_diff = 0;
    for (long ev = 0; ev < events; ev++) {
        uint32_t what = (uint32_t)dhs_rng_below(&rng, 10);
        int32_t slot = (int32_t)dhs_rng_below(&rng, NREQ);
        if (what == 0 && !live[slot]) { /* open + import */
            int64_t np = 20 + (int64_t)dhs_rng_below(&rng, 200);
            uint64_t u = next_uid++;
            for (int32_t src = 0; src < 3; src++)
                for (int64_t r = 0; r < np; r++) fill(rows[src] + r * RB, u, src, r);
            const void *rp[3] = {rows[0], rows[1], rows[2]};
            unsigned fl = dhs_rng_below(&rng, 2) ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST;
            dhs_status st[2];
            for (int k = 0; k < 2; k++) {
                st[k] = dhs_request_open(s[k].ctx, np + 120, &rq[k][slot]);
                if (st[k] == DHS_OK) st[k] = dhs_request_import(s[k].ctx, rq[k][slot], np, rp, fl);
                CHECK_INV(s[k].ctx);
            }
            CHECKF(st[0] == st[1], "open/import: %s vs %s", dhs_status_str(st[0]), dhs_status_str(st[1]));
            if (st[0] == DHS_OK && st[1] == DHS_OK) {
                live[slot] = 1;
                uid[slot] = u;
                n[slot] = np;
            } else {
                for (int k = 0; k < 2; k++)
                    if (st[k] != DHS_WAIT) dhs_request_close(s[k].ctx, rq[k][slot]);
            }
        } else if ((what == 1 || n[slot] + KMAX >= 390) && live[slot]) { /* close (and make room) */
            for (int k = 0; k < 2; k++) {
                CHECK_ST(dhs_request_close(s[k].ctx, rq[k][slot]), DHS_OK);
                CHECK_INV(s[k].ctx);
            }
            live[slot] = 0;
        } else { /* a round over a random subset of the live requests */
            int32_t ids[NREQ], K[NREQ], nr = 0;
            dhs_req rr[2][NREQ];
            for (int32_t i = 0; i < NREQ; i++)
                if (live[i] && n[i] + KMAX < 390 && dhs_rng_below(&rng, 4)) {
                    ids[nr] = i;
                    K[nr] = 1 + (int32_t)dhs_rng_below(&rng, KMAX);
                    rr[0][nr] = rq[0][i];
                    rr[1][nr] = rq[1][i];
                    nr++;
                }
            dhs_status bs[2];
            for (int k = 0; k < 2; k++) {
                bs[k] = dhs_round_begin(s[k].ctx, nr, rr[k], K);
                CHECK_INV(s[k].ctx);
            }
            CHECKF(bs[0] == bs[1] && bs[0] == DHS_OK, "round_begin: %s vs %s", dhs_status_str(bs[0]), dhs_status_str(bs[1]));
            if (bs[0] != DHS_OK || bs[1] != DHS_OK) break;
            write_blocks(s, rr, ids, nr, K, uid, n);
            for (int32_t g = 0; g < 2; g++) {
                /* one call per group over the round's requests, as an engine makes it */
                dhs_resolve_item it[2][NREQ];
                for (int32_t b = 0; b < nr; b++) {
                    const int32_t i = ids[b];
                    int32_t *sb = sel[b];
                    for (int32_t j = 0; j < K[b]; j++)
                        for (int32_t e = 0; e < KSEL; e++) {
                            int32_t v = dhs_rng_below(&rng, 5) ? (int32_t)dhs_rng_below(&rng, (uint64_t)(n[i] + j + 1)) : -1;
                            for (int32_t f = 0; f < e && v >= 0; f++) /* distinct rows per query */
                                if (sb[j * KSEL + f] == v) v = -1;
                            sb[j * KSEL + e] = v;
                        }
                    for (int k = 0; k < 2; k++) it[k][b] = (dhs_resolve_item){rr[k][b], K[b], sb, loc[k][b]};
                }
                for (int k = 0; k < 2; k++) {
                    CHECK_ST(dhs_resolve(s[k].ctx, g, KSEL, nr, it[k]), DHS_OK);
                    for (int32_t b = 0; b < nr; b++) check_bytes(s[k].ctx, sel[b], loc[k][b], K[b], uid[ids[b]], g);
                }
                for (int32_t b = 0; b < nr; b++)
                    loc_diff += memcmp(loc[0][b], loc[1][b], sizeof(int32_t) * (size_t)((g ? 2 : 1) * K[b] * KSEL)) != 0;
                if (dhs_rng_below(&rng, 2))
                    for (int k = 0; k < 2; k++) CHECK_ST(dhs_group_done(s[k].ctx, g), DHS_OK);
            }
            int32_t acc[NREQ];
            for (int32_t b = 0; b < nr; b++) acc[b] = (int32_t)dhs_rng_below(&rng, (uint64_t)K[b]);
            for (int k = 0; k < 2; k++) {
                CHECK_ST(dhs_round_end(s[k].ctx, acc), DHS_OK);
                CHECK_INV(s[k].ctx);
            }
            for (int32_t b = 0; b < nr; b++) n[ids[b]] += acc[b] + 1;
            rounds++;
        }
    }
    dhs_stats st[2];
    for (int k = 0; k < 2; k++) CHECK_ST(dhs_get_stats(s[k].ctx, &st[k]), DHS_OK);
    /* The same rounds, commits and resolved entries. Where a row is served may differ: one batched backup
       is one ticket, so a wait for it (tail room, reclaim) completes every request's rows in it at once,
       where the full sweep's per-request copies complete one by one; tail windows then move at other
       rounds (from a copy delay of 2 rounds on). The bytes at every location are checked above. */
    CHECKF(st[0].rounds == st[1].rounds && st[0].accepted == st[1].accepted && st[0].rejected_rows == st[1].rejected_rows &&
               st[0].entries == st[1].entries && st[0].admissions == st[1].admissions,
           "delay %d: rounds %llu vs %llu, entries %llu vs %llu, admissions %llu vs %llu", delay,
           (unsigned long long)st[0].rounds, (unsigned long long)st[1].rounds, (unsigned long long)st[0].entries,
           (unsigned long long)st[1].entries, (unsigned long long)st[0].admissions, (unsigned long long)st[1].admissions);
    if (delay <= 1) CHECKF(loc_diff == 0, "%ld resolves located rows differently with the full sweep (delay %d)", loc_diff, delay);
    CHECKF(rounds > events / 2, "only %ld rounds", rounds);
    printf("differential: delay %d, %ld events, %ld rounds, %llu rows backed up, %llu reclaims, %llu pages repopulated, "
           "%ld resolves located differently\n", delay, events, rounds, (unsigned long long)st[1].backup_rows,
           (unsigned long long)st[1].reclaims, (unsigned long long)st[1].repopulated_pages, loc_diff);
    for (int i = 0; i < 3; i++) free(rows[i]);
    drop(&s[0]);
    drop(&s[1]);
}

/* every committed row backed up by housekeeping alone (no dhs_sync) */
static void backups_without_sync(int delay, int full)
{
    side s;
    if (make(&s, delay, full)) {
        CHECKF(0, "setup");
        return;
    }
    dhs_req r[3];
    int32_t K[3] = {1, 1, 1}, acc[3] = {0, 0, 0};
    const void *rp[3] = {NULL, NULL, NULL};
    uint8_t *rows = calloc(64, RB);
    rp[0] = rp[1] = rp[2] = rows;
    for (int i = 0; i < 3; i++) {
        CHECK_ST(dhs_request_open(s.ctx, 64 + 100, &r[i]), DHS_OK);
        CHECK_ST(dhs_request_import(s.ctx, r[i], 64, rp, DHS_IMPORT_HOST), DHS_OK);
    }
    dhs_stats st0;
    CHECK_ST(dhs_get_stats(s.ctx, &st0), DHS_OK);
    const int R = 40;
    for (int t = 0; t < R; t++) {
        CHECK_ST(dhs_round_begin(s.ctx, 3, r, K), DHS_OK);
        CHECK_INV(s.ctx);
        for (int i = 0; i < 3; i++)
            for (int32_t src = 0; src < 3; src++) CHECK_ST(dhs_write_rows(s.ctx, r[i], src, 64 + t, 1, rows), DHS_OK);
        CHECK_ST(dhs_round_end(s.ctx, acc), DHS_OK);
        CHECK_INV(s.ctx);
    }
    for (int t = 0; t < delay + 3; t++) { /* empty rounds: housekeeping only */
        CHECK_ST(dhs_round_begin(s.ctx, 0, NULL, NULL), DHS_OK);
        CHECK_ST(dhs_round_end(s.ctx, NULL), DHS_OK);
        CHECK_INV(s.ctx);
    }
    dhs_stats st;
    CHECK_ST(dhs_get_stats(s.ctx, &st), DHS_OK);
    CHECKF(st.backup_rows - st0.backup_rows == (uint64_t)R * 3 * 3, "delay %d, full sweep %d: %llu rows backed up, want %d",
           delay, full, (unsigned long long)(st.backup_rows - st0.backup_rows), R * 3 * 3);
    for (int i = 0; i < 3; i++)
        for (int32_t g = 0; g < 2; g++) {
            const grp_state *gs = &s.ctx->req[r[i].id].g[g];
            CHECKF((*gs->backed_hi) == (*gs->hist), "delay %d, full sweep %d: request %d group %d backed up to %lld of %lld",
                   delay, full, i, g, (long long)(*gs->backed_hi), (long long)(*gs->hist));
        }
    CHECKF(full || s.ctx->n_work == 0, "delay %d: %d requests left on the work list with nothing to do", delay, s.ctx->n_work);
    free(rows);
    drop(&s);
}

/* dhs_round_begin's duplicate check stamps slots; across the stamp's wrap a slot never named must not
   look named, and a request named twice is still refused */
static void named_stamp_wrap(void)
{
    side s;
    if (make(&s, 0, 0)) {
        CHECKF(0, "setup");
        return;
    }
    dhs_req r[3];
    uint8_t *rows = calloc(64, RB);
    const void *rp[3] = {rows, rows, rows};
    for (int i = 0; i < 3; i++) {
        CHECK_ST(dhs_request_open(s.ctx, 64 + 10, &r[i]), DHS_OK);
        CHECK_ST(dhs_request_import(s.ctx, r[i], 64, rp, DHS_IMPORT_HOST), DHS_OK);
    }
    int32_t K[2] = {1, 1}, acc[2] = {0, 0};
    s.ctx->named_stamp = UINT32_MAX - 1;
    s.ctx->named[r[2].id] = 1; /* as if named 2^32 rounds ago, with the stamp the wrap restarts from */
    dhs_req ab[2] = {r[0], r[1]}, ca[2] = {r[2], r[0]}, cc[2] = {r[2], r[2]};
    CHECK_ST(dhs_round_begin(s.ctx, 2, ab, K), DHS_OK); /* stamp UINT32_MAX */
    for (int i = 0; i < 2; i++)
        for (int32_t src = 0; src < 3; src++) CHECK_ST(dhs_write_rows(s.ctx, ab[i], src, 64, 1, rows), DHS_OK);
    CHECK_ST(dhs_round_end(s.ctx, acc), DHS_OK);
    CHECK_ST(dhs_round_begin(s.ctx, 2, ca, K), DHS_OK); /* the stamp wraps here: r[2] is not named yet */
    CHECK_INV(s.ctx);
    for (int i = 0; i < 2; i++)
        for (int32_t src = 0; src < 3; src++) CHECK_ST(dhs_write_rows(s.ctx, ca[i], src, 64 + (i ? 1 : 0), 1, rows), DHS_OK);
    CHECK_ST(dhs_round_end(s.ctx, acc), DHS_OK);
    CHECK_ST(dhs_round_begin(s.ctx, 2, cc, K), DHS_ERR_INVALID_ARG);
    CHECK_INV(s.ctx);
    free(rows);
    drop(&s);
}

/* A round's tail backup that fails part-way (a host-row allocation for the second 1,024-row chunk of the
   first request) leaves every request of the round due and on the work list: housekeeping retries them
   all, without dhs_sync */
static void backup_fault_lists_all(void)
{
    side s;
    g_max_rows = 1100;
    int bad_make = make(&s, 0, 0);
    g_max_rows = 400;
    if (bad_make) {
        CHECKF(0, "setup");
        return;
    }
    dhs_req r[2];
    uint8_t *rows = calloc(64, RB);
    const void *rp[3] = {rows, rows, rows};
    for (int i = 0; i < 2; i++) {
        CHECK_ST(dhs_request_open(s.ctx, 64, &r[i]), DHS_OK); /* host rows for 1,024: a later row allocates */
        CHECK_ST(dhs_request_import(s.ctx, r[i], 64, rp, DHS_IMPORT_HOST), DHS_OK);
    }
    int32_t K[2] = {1, 1}, acc[2] = {0, 0};
    long bad = 0;
    for (int64_t t = 64; t < 1030; t++) {
        if (dhs_round_begin(s.ctx, 2, r, K) != DHS_OK) { bad++; break; }
        for (int i = 0; i < 2; i++)
            for (int32_t src = 0; src < 3; src++) bad += dhs_write_rows(s.ctx, r[i], src, t, 1, rows) != DHS_OK;
        if (t == 1023) dhs_backend_fault_at(s.be, DHS_FAULT_HOST_ALLOC, 1); /* the backup of row 1,023 allocates */
        bad += dhs_round_end(s.ctx, acc) != DHS_OK;
        char msg[256];
        if (dhs_check_invariants(s.ctx, msg, sizeof msg)) {
            CHECKF(0, "after the round of row %lld: %s", (long long)t, msg);
            break;
        }
    }
    CHECKF(bad == 0, "%ld calls failed", bad);
    CHECKF(dhs_backend_faults_injected(s.be) == 1, "the fault was %s", dhs_backend_faults_injected(s.be) ? "hit" : "not hit");
    /* every complete page backed up by housekeeping alone (the rows of the page not complete yet go out
       with it, or when something needs them on host) */
    for (int i = 0; i < 2; i++)
        for (int32_t g = 0; g < 2; g++) {
            const grp_state *gs = &s.ctx->req[r[i].id].g[g];
            CHECKF((*gs->backed_hi) == backup_due_hi(s.ctx, gs), "request %d group %d backed up to %lld of %lld", i, g,
                   (long long)(*gs->backed_hi), (long long)(*gs->hist));
        }
    free(rows);
    drop(&s);
}

/* the host-phase timers count what ran: per round one begin with its housekeeping, repopulation and tail
   room, one end with its backup; every resolve call; no publish without the device
   resolver; sub-phases within their call's time */
static void host_time(void)
{
    side s;
    if (make(&s, 1, 0)) {
        CHECKF(0, "setup");
        return;
    }
    uint64_t ns[DHS_HP_COUNT_], calls[DHS_HP_COUNT_];
    CHECK_ST(dhs_get_host_time(NULL, ns, calls), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_get_host_time(s.ctx, NULL, NULL), DHS_OK);
    CHECK_ST(dhs_get_host_time(s.ctx, ns, calls), DHS_OK);
    for (int p = 0; p < DHS_HP_COUNT_; p++) CHECKF(calls[p] == 0 && ns[p] == 0, "phase %d before any call", p);
    for (int p = 0; p < DHS_HP_COUNT_; p++)
        for (int q = 0; q < p; q++)
            CHECKF(strcmp(dhs_host_phase_str((dhs_host_phase)p), dhs_host_phase_str((dhs_host_phase)q)) != 0,
                   "phases %d and %d share a name", p, q);
    CHECKF(!strcmp(dhs_host_phase_str(DHS_HP_COUNT_), "unknown"), "out of range name");
    dhs_req r[2];
    uint8_t *rows = calloc(64, RB);
    const void *rp[3] = {rows, rows, rows};
    for (int i = 0; i < 2; i++) {
        CHECK_ST(dhs_request_open(s.ctx, 64, &r[i]), DHS_OK);
        CHECK_ST(dhs_request_import(s.ctx, r[i], 64, rp, DHS_IMPORT_HOST), DHS_OK);
    }
    int32_t K[2] = {1, 1}, acc[2] = {0, 0}, sel[KSEL], loc[2][KSEL], tl[1];
    const long R = 40;
    long tls = 0, res = 0;
    for (long t = 0; t < R; t++) {
        CHECK_ST(dhs_round_begin(s.ctx, 2, r, K), DHS_OK);
        for (int i = 0; i < 2; i++)
            for (int32_t src = 0; src < 3; src++) {
                CHECK_ST(dhs_write_rows(s.ctx, r[i], src, 64 + t, 1, rows), DHS_OK);
                CHECK_ST(dhs_tail_locations(s.ctx, r[i], src, 64 + t, 1, tl), DHS_OK);
                tls++;
            }
        for (int j = 0; j < KSEL; j++) sel[j] = (int32_t)((t * 7 + j * 5) % (64 + t));
        dhs_resolve_item it[2] = {{r[0], 1, sel, loc[0]}, {r[1], 1, sel, loc[1]}};
        CHECK_ST(dhs_resolve(s.ctx, 0, KSEL, 2, it), DHS_OK);
        res++;
        CHECK_ST(dhs_round_end(s.ctx, acc), DHS_OK);
        CHECK_INV(s.ctx);
    }
    CHECK_ST(dhs_round_end(s.ctx, acc), DHS_ERR_STATE); /* a refused call is still a call */
    CHECK_ST(dhs_get_host_time(s.ctx, ns, calls), DHS_OK);
    const uint64_t want[DHS_HP_FENCE] = {(uint64_t)R, (uint64_t)R, (uint64_t)R, (uint64_t)R, 0,     (uint64_t)R + 1,
                                         0,           (uint64_t)R, (uint64_t)res, (uint64_t)R, (uint64_t)R};
    CHECKF(tls == 2 * 3 * R, "tail_locations calls %ld", tls);
    for (int p = 0; p < DHS_HP_FENCE; p++) /* fence: as many as the memo did not answer */
        CHECKF(calls[p] == want[p], "%s: %llu calls, want %llu", dhs_host_phase_str((dhs_host_phase)p),
               (unsigned long long)calls[p], (unsigned long long)want[p]);
    CHECKF(ns[DHS_HP_BEGIN] > 0 && ns[DHS_HP_END] > 0 && ns[DHS_HP_RESOLVE] > 0, "no time counted");
    CHECKF(ns[DHS_HP_HOUSEKEEPING] + ns[DHS_HP_TAIL_ROOM] + ns[DHS_HP_PUBLISH] <= ns[DHS_HP_BEGIN],
           "begin's parts %llu + %llu + %llu > %llu", (unsigned long long)ns[DHS_HP_HOUSEKEEPING],
           (unsigned long long)ns[DHS_HP_TAIL_ROOM], (unsigned long long)ns[DHS_HP_PUBLISH],
           (unsigned long long)ns[DHS_HP_BEGIN]);
    CHECKF(ns[DHS_HP_REPOPULATE] + ns[DHS_HP_SWEEP] + ns[DHS_HP_ADVANCE] <= ns[DHS_HP_HOUSEKEEPING],
           "housekeeping's parts beyond it");
    CHECKF(ns[DHS_HP_FENCE] <= ns[DHS_HP_SWEEP] + ns[DHS_HP_ADVANCE], "fence queries beyond sweep and advance");
    CHECKF(ns[DHS_HP_DEVICE] + ns[DHS_HP_BACKUP] <= ns[DHS_HP_END], "end's parts beyond end");
    CHECK_ST(dhs_reset_stats(s.ctx), DHS_OK);
    CHECK_ST(dhs_get_host_time(s.ctx, ns, calls), DHS_OK);
    for (int p = 0; p < DHS_HP_COUNT_; p++) CHECKF(calls[p] == 0 && ns[p] == 0, "phase %d after the reset", p);
    free(rows);
    drop(&s);
}

/* ---------------------------------------------------------------- page backups */
static const dhs_backend_ops *pb_inner;
static dhs_backend_ops pb_ops;
static uint64_t pb_waits;
static dhs_status pb_wait(dhs_backend *be, dhs_ticket t)
{
    pb_waits++;
    return pb_inner->wait(be, t);
}

/* every committed row of request r (rows < hist_rows of every source) on host with the bytes written */
static void check_host_rows(dhs_ctx *ctx, const request *rq, uint64_t uid, const char *what)
{
    uint8_t want[RB];
    long bad = 0;
    for (int32_t g = 0; g < 2; g++) {
        const grp_state *gs = &rq->g[g];
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++)
            for (int64_t row = 0; row < (*gs->hist); row++) {
                fill(want, uid, ctx->grp_srcs[g][si], row);
                if (!bit_get(gs->host_valid, row) || memcmp(host_row(ctx, &gs->src[si], row), want, RB)) bad++;
            }
    }
    CHECKF(bad == 0, "%s: %ld committed rows without their bytes on host", what, bad);
}

/* 6. Page backups. One request (an import of 6 rows: a partial page) runs rounds of random speculation
   (K in 1..KMAX, a random number accepted) and writes distinct bytes per row and source. After every
   round end, per group: the round end issues nothing or up to the end of the complete pages (backup_due_hi:
   a round that completes no page issues nothing), and they are issued unless a backup is still in flight (then
   housekeeping issues the rest); the rows counted in backup_rows are the rows issued. With tail_rows 16
   (page 4, speculation 2: 10 rows of slack) dhs_round_begin never waits for a copy up to 3 rounds late;
   with 8 it may wait but the ring never overwrites an unbacked row (the invariants). dhs_sync then puts
   every committed row on host with its bytes. */
static void page_backups(uint64_t seed, int delay, int32_t tail_rows)
{
    side s;
    g_tail_rows = tail_rows;
    int bad_make = make(&s, delay, 0);
    g_tail_rows = 8;
    if (bad_make) {
        CHECKF(0, "setup");
        return;
    }
    CHECKF(s.ctx->page_backups == 1, "tail_rows %d: page backups off", tail_rows);
    pb_inner = s.be->ops;
    pb_ops = *pb_inner;
    pb_ops.wait = pb_wait;
    s.be->ops = &pb_ops;
    const uint64_t uid = 77;
    uint8_t *rows = calloc(6, RB), buf[KMAX * RB];
    const void *rp[3];
    for (int32_t src = 0; src < 3; src++) {
        uint8_t *b = calloc(6, RB);
        for (int64_t row = 0; row < 6; row++) fill(b + row * RB, uid, src, row);
        rp[src] = b;
    }
    dhs_req r;
    CHECK_ST(dhs_request_open(s.ctx, 380, &r), DHS_OK);
    CHECK_ST(dhs_request_import(s.ctx, r, 6, rp, DHS_IMPORT_HOST), DHS_OK);
    const request *rq = &s.ctx->req[r.id];
    uint64_t rng = seed;
    long waited = 0, pages = 0, quiet = 0;
    int64_t n = 6;
    while (n + KMAX < 380) {
        int32_t K = (int32_t)dhs_rng_range(&rng, 1, KMAX), acc = (int32_t)dhs_rng_below(&rng, K);
        dhs_stats st0, st1;
        CHECK_ST(dhs_get_stats(s.ctx, &st0), DHS_OK);
        int64_t hi0[2] = {rq->g[0].backup_hi, rq->g[1].backup_hi};
        const uint64_t w0 = pb_waits;
        if (dhs_round_begin(s.ctx, 1, &r, &K) != DHS_OK) {
            CHECKF(0, "dhs_round_begin at %lld positions", (long long)n);
            break;
        }
        waited += pb_waits != w0;
        CHECK_INV(s.ctx);
        for (int32_t src = 0; src < 3; src++) {
            for (int32_t j = 0; j < K; j++) fill(buf + j * RB, uid, src, n + j);
            CHECK_ST(dhs_write_rows(s.ctx, r, src, n, K, buf), DHS_OK);
        }
        /* what the round end issues, counted from here: housekeeping's issues came before */
        CHECK_ST(dhs_get_stats(s.ctx, &st0), DHS_OK);
        hi0[0] = rq->g[0].backup_hi, hi0[1] = rq->g[1].backup_hi;
        CHECK_ST(dhs_round_end(s.ctx, &acc), DHS_OK);
        CHECK_INV(s.ctx);
        n += acc + 1;
        CHECK_ST(dhs_get_stats(s.ctx, &st1), DHS_OK);
        uint64_t issued = 0;
        for (int32_t g = 0; g < 2; g++) {
            const grp_state *gs = &rq->g[g];
            const int64_t due = backup_due_hi(s.ctx, gs);
            CHECKF(gs->backup_hi == hi0[g] || gs->backup_hi == due, "delay %d, T %d, %lld positions, group %d: the "
                   "round end issued rows %lld to %lld, the complete pages end at %lld", delay, tail_rows, (long long)n, g,
                   (long long)hi0[g], (long long)gs->backup_hi, (long long)due);
            CHECKF(gs->backup_hi >= due || gs->backup_ticket, "delay %d, T %d, %lld positions, group %d: complete "
                   "pages to %lld, backups issued to %lld, none in flight", delay, tail_rows, (long long)n, g,
                   (long long)due, (long long)gs->backup_hi);
            issued += (uint64_t)(gs->backup_hi - hi0[g]) * (uint64_t)s.ctx->grp_nsrc[g];
        }
        CHECKF(st1.backup_rows - st0.backup_rows == issued, "%lld positions: %llu rows counted, %llu issued",
               (long long)n, (unsigned long long)(st1.backup_rows - st0.backup_rows), (unsigned long long)issued);
        if (issued) pages++;
        else quiet++;
    }
    if (tail_rows >= 16) CHECKF(waited == 0, "delay %d, T %d: dhs_round_begin waited for a backup in %ld rounds", delay,
                                tail_rows, waited);
    CHECKF(pages > 0 && quiet > pages, "delay %d, T %d: %ld rounds issued a backup, %ld did not", delay, tail_rows, pages,
           quiet);
    CHECK_ST(dhs_sync(s.ctx), DHS_OK);
    CHECK_INV(s.ctx);
    for (int32_t g = 0; g < 2; g++)
        CHECKF((*rq->g[g].backed_hi) == (*rq->g[g].hist), "after dhs_sync: group %d backed up to %lld of %lld", g,
               (long long)(*rq->g[g].backed_hi), (long long)(*rq->g[g].hist));
    check_host_rows(s.ctx, rq, uid, "after dhs_sync");
    for (int32_t src = 0; src < 3; src++) free((void *)rp[src]);
    free(rows);
    drop(&s);
}

/* 7. A shared prefix of a parent whose last page is not complete (its rows not backed up by the round
   ends): dhs_request_open_shared must still give the child every committed row, with its bytes */
static void page_backups_share(int delay)
{
    side s;
    if (make(&s, delay, 0)) {
        CHECKF(0, "setup");
        return;
    }
    const uint64_t uid = 91;
    const void *rp[3];
    for (int32_t src = 0; src < 3; src++) {
        uint8_t *b = calloc(8, RB);
        for (int64_t row = 0; row < 8; row++) fill(b + row * RB, uid, src, row);
        rp[src] = b;
    }
    dhs_req r, c;
    CHECK_ST(dhs_request_open(s.ctx, 100, &r), DHS_OK);
    CHECK_ST(dhs_request_import(s.ctx, r, 8, rp, DHS_IMPORT_HOST), DHS_OK);
    int32_t K = 1, acc = 0;
    uint8_t buf[RB];
    for (int64_t t = 8; t < 8 + 4 * 5 + 3; t++) { /* 5 pages and 3 rows */
        CHECK_ST(dhs_round_begin(s.ctx, 1, &r, &K), DHS_OK);
        for (int32_t src = 0; src < 3; src++) {
            fill(buf, uid, src, t);
            CHECK_ST(dhs_write_rows(s.ctx, r, src, t, 1, buf), DHS_OK);
        }
        CHECK_ST(dhs_round_end(s.ctx, &acc), DHS_OK);
        CHECK_INV(s.ctx);
    }
    const request *pq = &s.ctx->req[r.id];
    CHECKF(pq->g[0].backup_hi < (*pq->g[0].hist), "the parent's last rows were backed up by the round ends (%lld of %lld)",
           (long long)pq->g[0].backup_hi, (long long)(*pq->g[0].hist));
    CHECK_ST(dhs_request_open_shared(s.ctx, r, 31, 60, &c), DHS_OK);
    CHECK_INV(s.ctx);
    check_host_rows(s.ctx, pq, uid, "parent after sharing");
    check_host_rows(s.ctx, &s.ctx->req[c.id], uid, "child");
    for (int32_t src = 0; src < 3; src++) free((void *)rp[src]);
    drop(&s);
}


/* every source of the round's requests counts its block's rows as written (one round call marked them) */
static void round_marked(const dhs_ctx *ctx, const dhs_arch *a, const dhs_req *rr, const int32_t *K, int n, int round,
                         const char *what)
{
    for (int i = 0; i < n; i++) {
        int64_t pos = -1;
        CHECK_ST(dhs_request_positions(ctx, rr[i], &pos), DHS_OK);
        const request *rq = &ctx->req[ctx->round_reqs[i]];
        for (int32_t src = 0; src < a->n_sources; src++) {
            const int64_t m = a->sources[src].m, hi = (pos + K[i] + m - 1) / m;
            CHECKF(*rq->g[a->sources[src].group].src[ctx->src_grp_idx[src]].wr >= hi,
                   "round %d request %d source %d: %s left rows below %lld unmarked", round, i, src, what, (long long)hi);
        }
    }
}

/* 8. the batched tail locations: the same answer as one dhs_tail_locations per request and source */
static void round_tail_locations(uint64_t seed, int device)
{
    printf("round_tail_locations: seed %llu, %s resolver\n", (unsigned long long)seed, device ? "device" : "host");
    dhs_arch a = dhs_arch_default();
    a.n_groups = 3;
    a.n_sources = 4;
    a.sources[0] = (dhs_source_desc){RB, 1, 1}; /* group 1: sources 0 and 3 (not contiguous ids) */
    a.sources[1] = (dhs_source_desc){RB, 1, 0};
    a.sources[2] = (dhs_source_desc){RB, 4, 2};
    a.sources[3] = (dhs_source_desc){RB, 1, 1};
    a.n_consumers = 0;
    dhs_config c = cfg2();
    c.tail_rows = 16;
    c.device_bytes = (uint64_t)RB * 4 * 400; /* every request's hot and tail pages, some optional ones */
    if (device) {
        c.resolver = DHS_RESOLVER_DEVICE;
        c.device_bytes *= 2; /* the resolver's staging arenas */
    }
    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL;
    dhs_cpu_options o = {0};
    if (dhs_backend_cpu_create(&o, &be) != DHS_OK || dhs_ctx_create(&a, &c, be, &ctx) != DHS_OK) {
        CHECKF(0, "setup");
        if (be) dhs_backend_destroy(be);
        return;
    }
    uint64_t rng = seed;
    dhs_req r[NREQ];
    static uint8_t hist[4][64 * RB];
    const void *hp[4] = {hist[0], hist[1], hist[2], hist[3]};
    for (int i = 0; i < NREQ; i++) {
        CHECK_ST(dhs_request_open(ctx, 200, &r[i]), DHS_OK);
        CHECK_ST(dhs_request_import(ctx, r[i], 61 + i, hp, DHS_IMPORT_HOST), DHS_OK); /* m = 4: partial last rows */
        CHECK_INV(ctx);
    }
    enum { RS = 3, SENT = -7 };
    int32_t buf[4 * NREQ * RS], bufd[4 * NREQ * RS], one[RS];
    CHECK_ST(dhs_round_tail_locations(ctx, RS, NREQ * RS, buf), DHS_ERR_NOT_IN_ROUND);
    CHECK_ST(dhs_round_tail_locations_device(ctx, RS, NREQ * RS, bufd), DHS_ERR_NOT_IN_ROUND);
    for (int round = 0; round < 120; round++) {
        dhs_req rr[NREQ];
        int32_t K[NREQ], acc[NREQ], n = 0;
        for (int i = 0; i < NREQ; i++)
            if (dhs_rng_next(&rng) % 4 != 0) {
                rr[n] = r[i];
                K[n] = 1 + (int32_t)(dhs_rng_next(&rng) % KMAX);
                acc[n] = (int32_t)(dhs_rng_next(&rng) % (uint64_t)K[n]); /* drafts accepted: 0..K-1 */
                n++;
            }
        CHECK_ST(dhs_round_begin(ctx, n, rr, K), DHS_OK);
        CHECK_INV(ctx);
        /* refusals first: nothing written, nothing marked */
        int64_t cm0[NREQ][8];
        for (int i = 0; i < n; i++) memcpy(cm0[i], ctx->req[ctx->round_reqs[i]].cm, sizeof(int64_t) * 7);
        for (size_t j = 0; j < sizeof buf / sizeof buf[0]; j++) buf[j] = bufd[j] = SENT;
        if (n > 0) {
            CHECK_ST(dhs_round_tail_locations(ctx, 0, 0, buf), DHS_ERR_INVALID_ARG);         /* blocks have rows */
            CHECK_ST(dhs_round_tail_locations(ctx, RS, RS * n - 1, buf), DHS_ERR_INVALID_ARG); /* sources overlap */
            CHECK_ST(dhs_round_tail_locations(ctx, RS, RS * n, NULL), DHS_ERR_INVALID_ARG);
            const dhs_status refused = device ? DHS_ERR_INVALID_ARG : DHS_ERR_STATE;
            CHECK_ST(dhs_round_tail_locations_device(ctx, 0, 0, bufd), refused);
            CHECK_ST(dhs_round_tail_locations_device(ctx, RS, RS * n - 1, bufd), refused);
            CHECK_ST(dhs_round_tail_locations_device(ctx, RS, RS * n, NULL), refused);
        }
        if (!device) CHECK_ST(dhs_round_tail_locations_device(ctx, RS, (int64_t)RS * NREQ, bufd), DHS_ERR_STATE);
        int untouched = 1;
        for (size_t j = 0; j < sizeof buf / sizeof buf[0]; j++) untouched &= buf[j] == SENT && bufd[j] == SENT;
        CHECKF(untouched, "round %d: a refused call wrote locations", round);
        for (int i = 0; i < n; i++)
            CHECKF(!memcmp(cm0[i], ctx->req[ctx->round_reqs[i]].cm, sizeof(int64_t) * 7),
                   "round %d: a refused call marked rows written", round);
        CHECK_INV(ctx);
        if (device) { /* first: its marks alone must count the rows written */
            CHECK_ST(dhs_round_tail_locations_device(ctx, RS, (int64_t)RS * NREQ, bufd), DHS_OK);
            CHECK_INV(ctx);
            round_marked(ctx, &a, rr, K, n, round, "the device call");
        }
        CHECK_ST(dhs_round_tail_locations(ctx, RS, (int64_t)RS * NREQ, buf), DHS_OK);
        CHECK_INV(ctx);
        if (!device) round_marked(ctx, &a, rr, K, n, round, "the host call");
        if (device) {
            int same = 1, first = -1;
            for (size_t j = 0; j < sizeof buf / sizeof buf[0]; j++)
                if (buf[j] != bufd[j]) {
                    same = 0;
                    if (first < 0) first = (int)j;
                }
            CHECKF(same, "round %d: device locations differ from the host call's at entry %d (%d against %d)", round,
                   first, first < 0 ? 0 : bufd[first], first < 0 ? 0 : buf[first]);
        }
        for (int i = 0; i < n; i++) {
            int64_t pos = -1;
            CHECK_ST(dhs_request_positions(ctx, rr[i], &pos), DHS_OK);
            for (int32_t src = 0; src < a.n_sources; src++) {
                const int64_t m = a.sources[src].m, c0 = pos / m, hi = (pos + K[i] + m - 1) / m;
                const int32_t *got = buf + (int64_t)src * RS * NREQ + (int64_t)i * RS;
                for (int j = 0; j < RS; j++) one[j] = SENT;
                CHECK_ST(dhs_tail_locations(ctx, rr[i], src, c0, (int32_t)(hi - c0), one), DHS_OK);
                int same = 1;
                for (int j = 0; j < RS; j++) same &= got[j] == one[j];
                CHECKF(same, "round %d request %d source %d (rows %lld..%lld): %d %d %d, per call %d %d %d", round, i, src,
                       (long long)c0, (long long)hi - 1, got[0], got[1], got[2], one[0], one[1], one[2]);
            }
        }
        CHECK_ST(dhs_round_end(ctx, acc), DHS_OK);
        CHECK_INV(ctx);
    }
    /* the written marks alone let the round commit: a round whose rows only the batched call marked */
    dhs_stats st;
    CHECK_ST(dhs_get_stats(ctx, &st), DHS_OK);
    CHECKF(st.rounds == 120, "%llu rounds", (unsigned long long)st.rounds);
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
}

/* 9. dhs_background. The same random rounds (random subsets of 4 requests, speculation K in 1..KMAX and
   random acceptance, or page-aligned imports with K = 1 so every request completes a page in the same
   round; selections over every visible row) on two contexts, A as engines ran before and B calling
   dhs_background after writing the round's rows (the step), with the host or the device resolver, copies
   complete at once or a round late. Per round: the same begin/end statuses and the same locations for every
   selection in A and B (a backup issued inside a round moves nothing the round handed out); in B the round
   end copies nothing while dhs_background copies the due pages, and with a ring of 16 rows the round begin
   forces nothing either. After `stop` rounds B stops calling it: its round ends copy again and the ring keeps
   working (the invariants check that no unbacked row is overwritten). With an 8-row ring (page 4 + 2 x
   KMAX) and copies 3 rounds late the ring is short: dhs_round_begin forces the copies in B (and A); every
   location still holds its row's bytes, but a forced wait completes other copies early, so the locations
   are compared only where nothing waits.
   At the end, after dhs_sync, both hold every committed row on host with its bytes, identically, and
   counted the same backup rows. */
static void bg_rows(dhs_ctx *ctx, uint64_t *acc, uint64_t before)
{
    dhs_stats st;
    CHECK_ST(dhs_get_stats(ctx, &st), DHS_OK);
    *acc += st.backup_rows - before;
}

static uint64_t backup_rows_now(dhs_ctx *ctx)
{
    dhs_stats st;
    CHECK_ST(dhs_get_stats(ctx, &st), DHS_OK);
    return st.backup_rows;
}

static void background(uint64_t seed, int delay, int resolver, int aligned, int32_t tail_rows)
{
    printf("background: seed %llu delay %d resolver %s aligned %d tail_rows %d\n", (unsigned long long)seed, delay,
           dhs_resolver_str((dhs_resolver)resolver), aligned, tail_rows);
    side s[2];
    g_resolver = resolver;
    g_tail_rows = tail_rows;
    const int bad = make(&s[0], delay, 0) || make(&s[1], delay, 0);
    g_resolver = DHS_RESOLVER_HOST;
    g_tail_rows = 8;
    if (bad) {
        CHECKF(0, "setup");
        return;
    }
    uint64_t rng = seed;
    dhs_req rq[2][NREQ];
    uint64_t uid[NREQ];
    int64_t n[NREQ];
    uint8_t *rows[3];
    for (int i = 0; i < 3; i++) rows[i] = aligned_alloc(64, (size_t)RB * 64);
    for (int32_t i = 0; i < NREQ; i++) {
        n[i] = aligned ? 4 * (2 + i) : 5 + 3 * i + (int64_t)dhs_rng_below(&rng, 9);
        uid[i] = 500 + (uint64_t)i;
        for (int32_t src = 0; src < 3; src++)
            for (int64_t r = 0; r < n[i]; r++) fill(rows[src] + r * RB, uid[i], src, r);
        const void *rp[3] = {rows[0], rows[1], rows[2]};
        for (int k = 0; k < 2; k++) {
            CHECK_ST(dhs_request_open(s[k].ctx, 380, &rq[k][i]), DHS_OK);
            CHECK_ST(dhs_request_import(s[k].ctx, rq[k][i], n[i], rp, DHS_IMPORT_HOST), DHS_OK);
            CHECK_INV(s[k].ctx);
        }
    }
    const int R = 240, stop = 180;
    const int32_t N = NREQ, W = KMAX;
    int32_t sel[NREQ][KMAX * KSEL], loc[2][NREQ][2 * KMAX * KSEL];
    int32_t dsel[NREQ * KMAX * KSEL], dloc[2][2 * NREQ * KMAX * KSEL];
    uint64_t end_rows[2] = {0, 0}, begin_rows[2] = {0, 0}, bg_total = 0, end_after_stop = 0;
    long loc_diff = 0, rounds = 0;
    for (int round = 0; round < R; round++) {
        const int use_bg = round < stop;
        int32_t ids[NREQ], K[NREQ], acc[NREQ], nr = 0;
        dhs_req rr[2][NREQ];
        for (int32_t i = 0; i < NREQ; i++)
            if (n[i] + KMAX < 370 && (aligned || dhs_rng_below(&rng, 4))) {
                ids[nr] = i;
                K[nr] = aligned ? 1 : 1 + (int32_t)dhs_rng_below(&rng, KMAX);
                acc[nr] = aligned ? 0 : (int32_t)dhs_rng_below(&rng, (uint64_t)K[nr]);
                rr[0][nr] = rq[0][i];
                rr[1][nr] = rq[1][i];
                nr++;
            }
        dhs_status bs[2];
        for (int k = 0; k < 2; k++) {
            const uint64_t b0 = backup_rows_now(s[k].ctx);
            bs[k] = dhs_round_begin(s[k].ctx, nr, rr[k], K);
            if (use_bg) bg_rows(s[k].ctx, &begin_rows[k], b0); /* the round after the stop issues the backlog */
            CHECK_INV(s[k].ctx);
        }
        CHECKF(bs[0] == DHS_OK && bs[1] == DHS_OK, "round %d: round_begin %s vs %s", round, dhs_status_str(bs[0]),
               dhs_status_str(bs[1]));
        if (bs[0] != DHS_OK || bs[1] != DHS_OK) break;
        write_blocks(s, rr, ids, nr, K, uid, n);
        if (use_bg) { /* the step is in flight: B's background work */
            const uint64_t b0 = backup_rows_now(s[1].ctx);
            CHECK_ST(dhs_background(s[1].ctx), DHS_OK);
            bg_rows(s[1].ctx, &bg_total, b0);
            CHECK_INV(s[1].ctx);
        }
        for (int32_t g = 0; g < 2; g++) {
            const int32_t ns = g ? 2 : 1;
            for (int32_t b = 0; b < nr; b++) {
                const int32_t i = ids[b];
                for (int32_t j = 0; j < K[b]; j++)
                    for (int32_t e = 0; e < KSEL; e++) {
                        int32_t v = dhs_rng_below(&rng, 5) ? (int32_t)dhs_rng_below(&rng, (uint64_t)(n[i] + j + 1)) : -1;
                        for (int32_t f = 0; f < e && v >= 0; f++)
                            if (sel[b][j * KSEL + f] == v) v = -1;
                        sel[b][j * KSEL + e] = v;
                    }
            }
            if (resolver == DHS_RESOLVER_HOST) {
                dhs_resolve_item it[2][NREQ];
                for (int32_t b = 0; b < nr; b++)
                    for (int k = 0; k < 2; k++) it[k][b] = (dhs_resolve_item){rr[k][b], K[b], sel[b], loc[k][b]};
                for (int k = 0; k < 2; k++) {
                    CHECK_ST(dhs_resolve(s[k].ctx, g, KSEL, nr, it[k]), DHS_OK);
                    for (int32_t b = 0; b < nr; b++) check_bytes(s[k].ctx, sel[b], loc[k][b], K[b], uid[ids[b]], g);
                }
                for (int32_t b = 0; b < nr; b++)
                    loc_diff += memcmp(loc[0][b], loc[1][b], sizeof(int32_t) * (size_t)(ns * K[b] * KSEL)) != 0;
            } else { /* sel[b][j][i] at ((b * W) + j) * k + i; loc[si][b][j][i] at (((si * N) + b) * W + j) * k + i */
                for (int32_t x = 0; x < N * W * KSEL; x++) dsel[x] = -1;
                for (int32_t b = 0; b < nr; b++)
                    for (int32_t j = 0; j < K[b]; j++)
                        memcpy(&dsel[(b * W + j) * KSEL], &sel[b][j * KSEL], sizeof(int32_t) * KSEL);
                for (int k = 0; k < 2; k++) {
                    CHECK_ST(dhs_resolve_device(s[k].ctx, g, KSEL, dsel, dloc[k], 0), DHS_OK);
                    for (int32_t b = 0; b < nr; b++) { /* back to dhs_resolve's [si][j][i] for check_bytes */
                        for (int32_t si = 0; si < ns; si++)
                            for (int32_t j = 0; j < K[b]; j++)
                                memcpy(&loc[k][b][(si * K[b] + j) * KSEL], &dloc[k][((si * N + b) * W + j) * KSEL],
                                       sizeof(int32_t) * KSEL);
                        check_bytes(s[k].ctx, sel[b], loc[k][b], K[b], uid[ids[b]], g);
                    }
                }
                loc_diff += memcmp(dloc[0], dloc[1], sizeof(int32_t) * (size_t)(ns * N * W * KSEL)) != 0;
            }
            for (int k = 0; k < 2; k++) CHECK_INV(s[k].ctx);
        }
        for (int k = 0; k < 2; k++) {
            const uint64_t b0 = backup_rows_now(s[k].ctx);
            CHECK_ST(dhs_round_end(s[k].ctx, acc), DHS_OK);
            uint64_t e = 0;
            bg_rows(s[k].ctx, &e, b0);
            end_rows[k] += e;
            if (k == 1 && use_bg) CHECKF(e == 0, "round %d: the round end copied %llu rows while dhs_background runs",
                                         round, (unsigned long long)e);
            if (k == 1 && !use_bg) end_after_stop += e;
            CHECK_INV(s[k].ctx);
        }
        for (int32_t b = 0; b < nr; b++) n[ids[b]] += acc[b] + 1;
        rounds++;
    }
    CHECKF(rounds == R, "%ld of %d rounds", rounds, R);
    /* the same locations unless a round begin had to wait for a copy: a wait on the CPU backend completes the
       copies issued before it too (populations), so optional pages turn ready at other rounds (the bytes at
       every location are checked above) */
    if (tail_rows >= 16 || delay == 0)
        CHECKF(loc_diff == 0, "%ld resolves located rows differently with dhs_background", loc_diff);
    CHECKF(bg_total > 0, "dhs_background copied no row");
    CHECKF(end_rows[0] > 0, "A's round ends copied no row (the test sees no page complete)");
    CHECKF(end_after_stop > 0, "after B stopped calling dhs_background its round ends copied no row");
    /* while B calls dhs_background: a 16-row ring absorbs the deferral, B's round begins force nothing; an
       8-row ring with copies 3 rounds late and up to 2 rows a round is short, they force copies */
    if (tail_rows >= 16 && delay <= 1)
        CHECKF(begin_rows[1] == 0, "B's round begins copied %llu rows", (unsigned long long)begin_rows[1]);
    if (tail_rows < 16 && delay >= 3 && !aligned)
        CHECKF(begin_rows[1] > 0, "an 8-row ring with copies %d rounds late: B's round begins forced nothing", delay);
    for (int k = 0; k < 2; k++) {
        CHECK_ST(dhs_sync(s[k].ctx), DHS_OK);
        CHECK_INV(s[k].ctx);
    }
    dhs_stats st[2];
    for (int k = 0; k < 2; k++) CHECK_ST(dhs_get_stats(s[k].ctx, &st[k]), DHS_OK);
    CHECKF(st[0].backup_rows == st[1].backup_rows, "backup rows %llu vs %llu", (unsigned long long)st[0].backup_rows,
           (unsigned long long)st[1].backup_rows);
    long host_diff = 0;
    for (int32_t i = 0; i < NREQ; i++) {
        const request *qa = &s[0].ctx->req[rq[0][i].id], *qb = &s[1].ctx->req[rq[1][i].id];
        check_host_rows(s[0].ctx, qa, uid[i], "A after dhs_sync");
        check_host_rows(s[1].ctx, qb, uid[i], "B after dhs_sync");
        for (int32_t g = 0; g < 2; g++) {
            CHECKF(*qa->g[g].hist == *qb->g[g].hist, "request %d group %d: %lld vs %lld rows", i, g,
                   (long long)*qa->g[g].hist, (long long)*qb->g[g].hist);
            for (int32_t si = 0; si < s[0].ctx->grp_nsrc[g]; si++)
                for (int64_t row = 0; row < *qa->g[g].hist; row++)
                    host_diff += bit_get(qa->g[g].host_valid, row) != bit_get(qb->g[g].host_valid, row) ||
                                 memcmp(host_row(s[0].ctx, &qa->g[g].src[si], row),
                                        host_row(s[1].ctx, &qb->g[g].src[si], row), RB) != 0;
        }
    }
    CHECKF(host_diff == 0, "%ld host rows differ between A and B after dhs_sync", host_diff);
    printf("background: %ld rounds, rows copied by A's round ends %llu, by B's dhs_background %llu, by B's round "
           "ends after it stopped %llu, forced by round begins A %llu B %llu\n", rounds,
           (unsigned long long)end_rows[0], (unsigned long long)bg_total, (unsigned long long)end_after_stop,
           (unsigned long long)begin_rows[0], (unsigned long long)begin_rows[1]);
    CHECK_ST(dhs_background(NULL), DHS_ERR_INVALID_ARG);
    for (int i = 0; i < 3; i++) free(rows[i]);
    drop(&s[0]);
    drop(&s[1]);
}

int main(void)
{
    uint64_t seed = th_seed("test_control");
    long events = (long)(3000 * th_scale());
    if (events < 300) events = 300;
    for (int d = 0; d <= 3; d++) differential(dhs_mix64(seed + (uint64_t)d), d, events);
    for (int d = 0; d <= 3; d++)
        for (int full = 0; full < 2; full++) backups_without_sync(d, full);
    named_stamp_wrap();
    backup_fault_lists_all();
    host_time();
    for (int d = 0; d <= 3; d++) {
        page_backups(dhs_mix64(seed + 11 + (uint64_t)d), d, 16);
        page_backups(dhs_mix64(seed + 17 + (uint64_t)d), d, 8);
        page_backups_share(d);
    }
    round_tail_locations(dhs_mix64(seed + 23), 0);
    round_tail_locations(dhs_mix64(seed + 23), 1);
    for (int d = 0; d <= 1; d++)
        for (int res = 0; res < 2; res++)
            for (int al = 0; al < 2; al++) {
                background(dhs_mix64(seed + 29 + (uint64_t)(4 * d + 2 * res + al)), d, res, al, 16);
                background(dhs_mix64(seed + 37 + (uint64_t)(4 * d + 2 * res + al)), d * 3, res, al, 8);
            }
    return th_summary();
}
