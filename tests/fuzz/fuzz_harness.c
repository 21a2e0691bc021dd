/* fuzz_harness.c - the decode + check logic behind the libFuzzer target
 * (tests/fuzz/fuzz_api.c) and the replay test (tests/core/test_fuzz_regress.c).
 *
 * Input bytes decode to (all values small so every path is reachable):
 *   - an architecture: 1-3 groups, 1-4 sources (OWN producer + FOLLOW sources,
 *     sometimes a REINDEX consumer), m in {1,2,4}, row_bytes 16..64;
 *   - a configuration: 1-4 request slots, max_k 1-8, k_max 1-4, page_rows
 *     1/2/4, tiny hot cache and tail, max_rows 8..135, every policy and
 *     reclaim order, staging on/off/automatic, a pool a few pages above the
 *     minimum so admissions wait and reclaim; sometimes one invalid field
 *     (dhs_ctx_create must refuse it) or an allocation fault at creation;
 *   - the resolver: host, or (CLOCK only) the device resolver, whose C
 *     specification of the GPU data plane runs on the CPU backend (the same
 *     oracles apply; dhs_sync inside a round is refused there, docs/API.md);
 *   - CPU backend options: async_delay 0-3, random completion order, seed;
 *   - sometimes a payload-free twin: the same calls on a second context with
 *     payload_free = 1 must give the same statuses, locations, stats and
 *     memory figures (DESIGN: every decision is the same);
 *   - then API calls: open, open_shared (a prefix of an open request, bad
 *     parents and prefixes), import (DEVICE/HOST, zero and odd lengths, bad
 *     pointers), close, round_begin, write_rows (partial, full, bad and extreme
 *     rows), resolve (duplicates, -1 padding, REINDEX, invalid selections),
 *     group_done, round_end, sync, stats/mem, fault arming, NULL contexts.
 *
 * The shadow model knows every row's bytes (a pure function of request uid,
 * source, row and write version). After EVERY call:
 *   - dhs_check_invariants() == 0 and M_req + M_opt + M_res <= M;
 *   - every request's dhs_request_positions() equals the model;
 *   - a call refused with a validation error changed nothing: stats, memory
 *     figures, positions and every byte of the pool are identical (DHS_WAIT:
 *     only stats.waits moved);
 *   - the status is the one the model predicts (exact code for single
 *     injected defects; for valid calls DHS_OK, or DHS_WAIT / DHS_ERR_STAGING
 *     where capacity decides, or a fault status only when an injected fault
 *     fired during the call, after which the call is retried without faults);
 *   - every location handed out in the open round and still valid (until
 *     dhs_group_done of its group) is read back with dhs_read_location and
 *     compared with the model's bytes; a row keeps one location per source
 *     for the whole round (until its group's dhs_group_done); duplicates in
 *     one call share a location; no two live (request, source, row) share a
 *     pool row.
 * Any discrepancy prints the op index and what differs, then abort().
 */
#include "fuzz/fuzz_harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhs.h"
#include "util/rng.h"

#define FZ_MAXREQ 4
#define FZ_MAXSRC 4
#define FZ_MAXG 3
#define FZ_ROWS 144      /* > max_rows / 1 + 2 */
#define FZ_MAXK 8
#define FZ_KMAX 4
#define FZ_LIVE 2048
#define FZ_MAXOPS 3000
#define FZ_STALE 8
/* 1: the payload-free twin also runs with late completions (async_delay > 0) */
#ifndef FZ_TWIN_ASYNC
#define FZ_TWIN_ASYNC 1
#endif

#define EXPECT_OK 0
#define EXPECT_ANY_ERR 100 /* some refusal, code not predicted */

#define ALLOW_WAIT 1
#define ALLOW_STAGING 2

typedef struct {
    const uint8_t *p;
    size_t n, i;
} fz_in;

typedef struct {
    int open;
    dhs_req h;
    uint64_t uid;
    int64_t n;
    int imported, in_round;
    int32_t K;
    int64_t whi[FZ_MAXSRC];            /* mirror of the library's written_hi per source */
    uint32_t ver[FZ_MAXSRC][FZ_ROWS];  /* version of the bytes of each row */
    uint8_t known[FZ_MAXSRC][FZ_ROWS]; /* the row holds model bytes (import or a write of this round) */
    uint64_t wuid[FZ_MAXSRC][FZ_ROWS]; /* whose bytes the row holds: the request's uid, or an ancestor's for
                                          the rows of a shared prefix */
    int64_t shared_n;                  /* opened on a shared prefix of this many positions (0: not) */
} fz_req;

typedef struct {
    int32_t slot, g, si;
    int64_t row;
    int32_t loc;
} fz_live;

typedef struct {
    dhs_stats st;
    dhs_mem mem;
    int64_t pos[FZ_MAXREQ];
    uint8_t *pool;
} fz_snap;

typedef struct {
    fz_in in;
    fz_counts *cnt;
    int trace;
    dhs_arch arch;
    dhs_config cfg;
    dhs_cpu_options opt;
    dhs_backend *be, *be2;
    dhs_ctx *ctx, *tw;
    int32_t ng, ns;
    int32_t m[FZ_MAXG], nsrc[FZ_MAXG], srcs[FZ_MAXG][FZ_MAXSRC], src_si[FZ_MAXSRC];
    uint32_t rb[FZ_MAXSRC], stride;
    int64_t pool_rows;
    size_t pool_bytes;
    fz_req rq[FZ_MAXREQ];
    dhs_req stale[FZ_STALE];
    int nstale;
    int round_open;
    int32_t nround, round_slot[FZ_MAXREQ];
    fz_live *live;
    int nlive;
    uint64_t uid_next;
    uint32_t ver_next;
    uint8_t *buf;
    size_t buf_bytes;
    uint64_t op;
    const char *what;
    uint64_t inj0;
    fz_snap snap;
    int32_t *loc2; /* twin locations */
    /* device resolver: the round's error word as the model predicts it (the first bad entry of the first
       device call that had one; 0: none), and whether a device call of the round could have run out of
       staging (then the word may hold DHS_ERR_STAGING instead) */
    int dword, dword_staging;
    /* the same of a round ended with dhs_round_end_early: reported by the next round begin, or by the
       one after the next early end (pword_due set: the library leaves at most one early-ended round's
       word unread after a round begin), by dhs_round_end (first error wins) or dhs_sync */
    int pword, pword_staging, pword_due;
} fz;

/* ------------------------------------------------------------------ failing */
static void fz_fail(const fz *F, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "dhs_fuzz: FAILED at op %llu (%s): ", (unsigned long long)F->op, F->what ? F->what : "-");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    abort();
}

/* ------------------------------------------------------------------ input */
static uint32_t u8(fz *F)
{
    if (F->in.i >= F->in.n) return 0;
    return F->in.p[F->in.i++];
}
static uint32_t u16(fz *F) { return u8(F) | (u8(F) << 8); }
static int64_t below(fz *F, int64_t n) { return n <= 0 ? 0 : (int64_t)(n <= 256 ? u8(F) : u16(F)) % n; }

static uint64_t mix(uint64_t z) { return dhs_mix64(z); }

static void fill_row(uint8_t *out, uint32_t nbytes, uint64_t uid, int32_t src, int64_t row, uint32_t ver)
{
    uint64_t h = mix(uid * 0x100000001b3ull ^ mix(((uint64_t)(uint32_t)src << 40) ^ (uint64_t)row) ^ ((uint64_t)ver << 20));
    for (uint32_t i = 0; i < nbytes; i += 8) {
        uint64_t w = mix(h + i);
        memcpy(out + i, &w, nbytes - i < 8 ? nbytes - i : 8);
    }
}

/* ------------------------------------------------------------------ checks */
static int is_fault(dhs_status s) { return s == DHS_ERR_NOMEM || s == DHS_ERR_DEVICE_NOMEM || s == DHS_ERR_BACKEND; }

static int is_validation(dhs_status s)
{
    switch (s) {
    case DHS_ERR_INVALID_ARG: case DHS_ERR_MISALIGNED: case DHS_ERR_UNKNOWN_REQUEST: case DHS_ERR_UNKNOWN_SOURCE:
    case DHS_ERR_ROW_RANGE: case DHS_ERR_NOT_VISIBLE: case DHS_ERR_K_TOO_LARGE: case DHS_ERR_TOO_MANY_QUERIES:
    case DHS_ERR_STATE: case DHS_ERR_ACCEPTED_RANGE: case DHS_ERR_NOT_IN_ROUND: case DHS_ERR_TOO_LARGE: case DHS_ERR_CLOSED:
        return 1;
    default:
        return 0;
    }
}

static void snap_take(fz *F)
{
    dhs_get_stats(F->ctx, &F->snap.st);
    dhs_get_mem(F->ctx, &F->snap.mem);
    for (int i = 0; i < FZ_MAXREQ; i++) {
        F->snap.pos[i] = -1;
        if (F->rq[i].open && dhs_request_positions(F->ctx, F->rq[i].h, &F->snap.pos[i]) != DHS_OK) F->snap.pos[i] = -2;
    }
    const void *pool = dhs_source_pool(F->ctx, 0);
    if (pool && F->snap.pool) memcpy(F->snap.pool, pool, F->pool_bytes);
    F->inj0 = dhs_backend_faults_injected(F->be);
}

static void snap_same(fz *F, int wait)
{
    dhs_stats st;
    dhs_mem mem;
    dhs_get_stats(F->ctx, &st);
    dhs_get_mem(F->ctx, &mem);
    if (wait) {
        if (st.waits != F->snap.st.waits + 1) fz_fail(F, "DHS_WAIT counted %llu waits, want %llu", (unsigned long long)st.waits, (unsigned long long)F->snap.st.waits + 1);
        st.waits = F->snap.st.waits;
    }
    if (memcmp(&st, &F->snap.st, sizeof st)) fz_fail(F, "a refused call changed the stats");
    if (memcmp(&mem, &F->snap.mem, sizeof mem)) fz_fail(F, "a refused call changed dhs_get_mem (free pages %lld -> %lld, M_opt %llu -> %llu)",
                                                        (long long)F->snap.mem.pages_free, (long long)mem.pages_free,
                                                        (unsigned long long)F->snap.mem.optional_bytes, (unsigned long long)mem.optional_bytes);
    for (int i = 0; i < FZ_MAXREQ; i++) {
        int64_t p = -1;
        if (F->rq[i].open && dhs_request_positions(F->ctx, F->rq[i].h, &p) != DHS_OK) p = -2;
        if (p != F->snap.pos[i]) fz_fail(F, "a refused call changed the positions of slot %d", i);
    }
    const void *pool = dhs_source_pool(F->ctx, 0);
    if (pool && F->snap.pool && memcmp(pool, F->snap.pool, F->pool_bytes)) fz_fail(F, "a refused call changed pool bytes");
}

static int row_known(const fz *F, const fz_req *r, int32_t src, int64_t row)
{
    (void)F;
    return row >= 0 && row < FZ_ROWS && r->known[src][row];
}

static void check_loc_bytes(fz *F, int32_t slot, int32_t src, int64_t row, int32_t loc, const char *why)
{
    const fz_req *r = &F->rq[slot];
    if (!row_known(F, r, src, row)) return; /* the harness's context has a payload (its twin has none) */
    uint8_t want[64] __attribute__((aligned(16))), got[64] __attribute__((aligned(16)));
    fill_row(want, F->rb[src], r->wuid[src][row], src, row, r->ver[src][row]);
    dhs_status s = dhs_read_location(F->ctx, src, loc, got);
    if (s != DHS_OK) fz_fail(F, "%s: dhs_read_location(src %d, loc %d) = %s", why, src, loc, dhs_status_str(s));
    if (memcmp(want, got, F->rb[src]))
        fz_fail(F, "%s: slot %d source %d row %lld (version %u) at location %d holds other bytes", why, slot, src, (long long)row,
                r->ver[src][row], loc);
    if (F->cnt) F->cnt->resolved++;
}

static void check_live(fz *F)
{
    for (int i = 0; i < F->nlive; i++) {
        const fz_live *l = &F->live[i];
        check_loc_bytes(F, l->slot, F->srcs[l->g][l->si], l->row, l->loc, "live location");
    }
}

static void check_state(fz *F, int live)
{
    char msg[256];
    int n = dhs_check_invariants(F->ctx, msg, sizeof msg);
    if (n) fz_fail(F, "%d invariant violation(s): %s", n, msg);
    dhs_mem m;
    dhs_get_mem(F->ctx, &m);
    if (m.required_bytes + m.optional_bytes + m.reserve_bytes > m.pool_bytes) fz_fail(F, "I4: M_req + M_opt + M_res > M");
    for (int i = 0; i < FZ_MAXREQ; i++) {
        const fz_req *r = &F->rq[i];
        if (!r->open) continue;
        int64_t p = -1;
        dhs_status s = dhs_request_positions(F->ctx, r->h, &p);
        if (s != DHS_OK || p != r->n) fz_fail(F, "slot %d positions %s %lld, model %lld", i, dhs_status_str(s), (long long)p, (long long)r->n);
    }
    if (F->tw) {
        n = dhs_check_invariants(F->tw, msg, sizeof msg);
        if (n) fz_fail(F, "payload-free twin: %d invariant violation(s): %s", n, msg);
        dhs_stats a, b;
        dhs_mem ma, mb;
        dhs_get_stats(F->ctx, &a);
        dhs_get_stats(F->tw, &b);
        dhs_get_mem(F->ctx, &ma);
        dhs_get_mem(F->tw, &mb);
        if (memcmp(&a, &b, sizeof a)) {
            fz_fail(F, "payload-free twin decides differently: stats differ (entries %llu/%llu hot %llu/%llu host %llu/%llu backup %llu/%llu populate %llu/%llu reclaims %llu/%llu)",
                    (unsigned long long)a.entries, (unsigned long long)b.entries, (unsigned long long)a.census_hot, (unsigned long long)b.census_hot,
                    (unsigned long long)a.census_host, (unsigned long long)b.census_host, (unsigned long long)a.backup_rows, (unsigned long long)b.backup_rows,
                    (unsigned long long)a.populate_rows, (unsigned long long)b.populate_rows, (unsigned long long)a.reclaims, (unsigned long long)b.reclaims);
        }
        if (ma.pool_bytes != mb.pool_bytes || ma.required_bytes != mb.required_bytes || ma.optional_bytes != mb.optional_bytes || ma.reserve_bytes != mb.reserve_bytes || ma.pages_total != mb.pages_total ||
            ma.pages_free != mb.pages_free || ma.requests_open != mb.requests_open)
            fz_fail(F, "payload-free twin: memory figures differ (free pages %lld/%lld, M_opt %llu/%llu)", (long long)ma.pages_free,
                    (long long)mb.pages_free, (unsigned long long)ma.optional_bytes, (unsigned long long)mb.optional_bytes);
    }
    if (live) check_live(F);
}

/* Checks status s of a call against the prediction, then the state. Returns s. */
static dhs_status judge(fz *F, dhs_status s, int want, int allow)
{
    if (F->trace) fprintf(stderr, "  op %llu %s -> %s (want %d)\n", (unsigned long long)F->op, F->what, dhs_status_str(s), want);
    if (F->cnt) {
        F->cnt->ops++;
        if (s == DHS_OK) F->cnt->ok++; else F->cnt->errors++;
    }
    int injected = dhs_backend_faults_injected(F->be) != F->inj0;
    if (injected && F->cnt) F->cnt->faults++;
    if (is_fault(s)) {
        if (!injected) fz_fail(F, "%s without an injected fault", dhs_status_str(s));
        if (want != EXPECT_OK) fz_fail(F, "%s for a call the model refuses (want %d)", dhs_status_str(s), want);
    } else if (want == EXPECT_OK) {
        if (s != DHS_OK && !(s == DHS_WAIT && (allow & ALLOW_WAIT)) && !(s == DHS_ERR_STAGING && (allow & ALLOW_STAGING)))
            fz_fail(F, "returned %s (%d) for a valid call", dhs_status_str(s), (int)s);
    } else if (want == EXPECT_ANY_ERR) {
        if (s == DHS_OK || !is_validation(s)) fz_fail(F, "returned %s (%d), want a refusal", dhs_status_str(s), (int)s);
    } else if ((int)s != want) {
        fz_fail(F, "returned %s (%d), want %s (%d)", dhs_status_str(s), (int)s, dhs_status_str((dhs_status)want), want);
    }
    if (is_validation(s)) snap_same(F, 0);
    if (s == DHS_WAIT) snap_same(F, 1);
    check_state(F, !is_fault(s));
    return s;
}

static void twin_status(fz *F, dhs_status a, dhs_status b)
{
    if (a != b) fz_fail(F, "payload-free twin returned %s, main %s", dhs_status_str(b), dhs_status_str(a));
}

static void disarm(fz *F)
{
    for (int k = 0; k < DHS_FAULT_COUNT_; k++) dhs_backend_fault_at(F->be, (dhs_fault_kind)k, 0);
}

/* ------------------------------------------------------------------ handles */
/* a handle and the status the library must answer for it (0 = live) */
static dhs_req pick_handle(fz *F, int *slot, int *err)
{
    uint32_t b = u8(F);
    *slot = -1;
    *err = 0;
    if (b % 16 == 15 && F->nstale > 0) {
        *err = DHS_ERR_CLOSED;
        return F->stale[(b / 16) % F->nstale];
    }
    if (b % 16 == 14) {
        *err = DHS_ERR_UNKNOWN_REQUEST;
        switch ((b / 16) % 4) {
        case 0: return (dhs_req){(uint32_t)F->cfg.max_requests + (b / 64), 1};
        case 1: return (dhs_req){0xffffffffu, 1};
        case 2: return (dhs_req){(b / 64) % (uint32_t)F->cfg.max_requests, 0};
        default: return (dhs_req){(b / 64) % (uint32_t)F->cfg.max_requests, 0x7fffffffu};
        }
    }
    int s = (int)(b % (uint32_t)F->cfg.max_requests);
    for (int i = 0; i < F->cfg.max_requests; i++) {
        int q = (s + i) % F->cfg.max_requests;
        if (F->rq[q].open) { *slot = q; return F->rq[q].h; }
    }
    if (F->nstale > 0) { *err = DHS_ERR_CLOSED; return F->stale[b % F->nstale]; }
    *err = DHS_ERR_UNKNOWN_REQUEST;
    return (dhs_req){(uint32_t)F->cfg.max_requests, 1};
}

static void live_drop_group(fz *F, int32_t g)
{
    int j = 0;
    for (int i = 0; i < F->nlive; i++)
        if (F->live[i].g != g) F->live[j++] = F->live[i];
    F->nlive = j;
}

/* ------------------------------------------------------------------ ops */
/* dhs_request_open_shared on an open (or bad) parent: a valid prefix (any length up to the parent's
   positions that ends on a row of every group, or all of them), or one defect the model predicts */
static void op_open_shared(fz *F)
{
    F->what = "open_shared";
    int pslot, herr;
    dhs_req ph = pick_handle(F, &pslot, &herr);
    uint32_t d = u8(F);
    const int64_t pn = pslot >= 0 ? F->rq[pslot].n : 0;
    int64_t P = below(F, pn + 1), e = below(F, F->cfg.max_rows + 1);
    if (d & 1) P = pn;
    int64_t lcm = 1;
    for (int32_t g = 0; g < F->ng; g++)
        if (F->m[g] > lcm) lcm = F->m[g]; /* m in {1, 2, 4}: the largest is a multiple of the others */
    if (!(d & 2) && P != pn) P -= P % lcm;
    switch ((d >> 2) % 8) {
    case 0: P = pn + 1 + (int64_t)(d >> 5); break;
    case 1: P = -1 - (int64_t)(d >> 5); break;
    case 2: e = F->cfg.max_rows + 1; break;
    case 3: e = INT64_MIN; break;
    default: break;
    }
    int want = EXPECT_OK;
    if (herr) want = herr;
    else if (F->round_open && F->rq[pslot].in_round) want = DHS_ERR_STATE;
    else if (P < 0 || P > pn || e < 0 || e > F->cfg.max_rows) want = DHS_ERR_ROW_RANGE;
    else
        for (int32_t g = 0; g < F->ng; g++)
            if (P % F->m[g] && P != pn) want = DHS_ERR_ROW_RANGE;
    for (int attempt = 0; attempt < 2; attempt++) {
        dhs_req h = {0, 0}, h2 = {0, 0};
        snap_take(F);
        dhs_status s = dhs_request_open_shared(F->ctx, ph, P, e, &h);
        if (F->tw) {
            twin_status(F, s, dhs_request_open_shared(F->tw, ph, P, e, &h2));
            if (s == DHS_OK && (h.id != h2.id || h.gen != h2.gen)) fz_fail(F, "payload-free twin opened another handle");
        }
        if (s == DHS_OK) {
            if (h.id >= (uint32_t)F->cfg.max_requests || F->rq[h.id].open) fz_fail(F, "open_shared returned slot %u (busy or out of range)", h.id);
            const fz_req *pr = &F->rq[pslot];
            fz_req *r = &F->rq[h.id];
            memset(r, 0, sizeof *r);
            r->open = 1;
            r->h = h;
            r->uid = ++F->uid_next;
            r->n = P;
            r->imported = 1;
            r->shared_n = P;
            for (int32_t g = 0; g < F->ng; g++) {
                const int64_t all = (P + F->m[g] - 1) / F->m[g];
                for (int32_t si = 0; si < F->nsrc[g]; si++) {
                    const int32_t src = F->srcs[g][si];
                    r->whi[src] = all;
                    for (int64_t row = 0; row < all; row++) {
                        r->ver[src][row] = pr->ver[src][row];
                        r->known[src][row] = pr->known[src][row];
                        r->wuid[src][row] = pr->wuid[src][row];
                    }
                    /* an incomplete compressed row at the boundary (P is all of the parent's positions): the
                       library copies the parent's bytes of it and counts it as written when the parent's row
                       counts as written (an import of P positions; a round end leaves it unwritten, whatever
                       its block wrote: the next block rewrites it), else the child's first block writes it */
                    if (P % F->m[g]) {
                        if (pr->whi[src] >= all) r->known[src][all - 1] = 1;
                        else r->whi[src] = all - 1;
                    }
                }
            }
            if (F->cnt) F->cnt->shared++;
        }
        judge(F, s, want, ALLOW_WAIT);
        if (!is_fault(s)) return;
        disarm(F);
    }
}

static void op_open(fz *F)
{
    F->what = "open";
    uint32_t b = u8(F);
    if (b % 16 == 4) { /* a shared open instead */
        op_open_shared(F);
        return;
    }
    int64_t e = below(F, F->cfg.max_rows + 1);
    int want = EXPECT_OK;
    switch (b % 16) {
    case 0: e = -1; want = DHS_ERR_ROW_RANGE; break;
    case 1: e = F->cfg.max_rows + 1; want = DHS_ERR_ROW_RANGE; break;
    case 2: e = INT64_MAX; want = DHS_ERR_ROW_RANGE; break;
    case 3: e = INT64_MIN; want = DHS_ERR_ROW_RANGE; break;
    default: break;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        dhs_req h = {0, 0}, h2 = {0, 0};
        snap_take(F);
        dhs_status s = dhs_request_open(F->ctx, e, &h);
        if (F->tw) {
            twin_status(F, s, dhs_request_open(F->tw, e, &h2));
            if (s == DHS_OK && (h.id != h2.id || h.gen != h2.gen)) fz_fail(F, "payload-free twin opened another handle");
        }
        if (s == DHS_OK) {
            if (h.id >= (uint32_t)F->cfg.max_requests || F->rq[h.id].open) fz_fail(F, "open returned slot %u (busy or out of range)", h.id);
            for (int i = 0; i < F->nstale; i++)
                if (F->stale[i].id == h.id && F->stale[i].gen == h.gen) fz_fail(F, "open reissued a closed handle (%u, %u)", h.id, h.gen);
            fz_req *r = &F->rq[h.id];
            memset(r, 0, sizeof *r);
            r->open = 1;
            r->h = h;
            r->uid = ++F->uid_next;
        }
        judge(F, s, want, ALLOW_WAIT);
        if (!is_fault(s)) return;
        disarm(F);
    }
}

static void op_import(fz *F)
{
    F->what = "import";
    int slot, herr;
    dhs_req h = pick_handle(F, &slot, &herr);
    uint32_t b = u8(F), d = u8(F);
    int64_t n = below(F, F->cfg.max_rows + 1);
    if (b & 1) n = below(F, 12); /* short: zero and odd lengths */
    unsigned flags = (b & 2) ? DHS_IMPORT_HOST : DHS_IMPORT_DEVICE;
    int defect = (int)(d % 24);
    if (F->tw && defect >= 5 && defect <= 7) defect = 99; /* payload-free mode never reads the pointers */
    const void *rows[DHS_MAX_SOURCES];
    const void *const *rowsp = rows;
    int want = EXPECT_OK;
    /* a request opened on a shared prefix, before its first round: the import appends the rows after it
       (the buffers hold rows from floor(prefix / m) on) */
    const fz_req *rx = slot >= 0 ? &F->rq[slot] : NULL;
    const int64_t ext = rx && rx->shared_n > 0 && rx->n == rx->shared_n && !rx->in_round ? rx->shared_n : 0;
    if (ext && (b & 4)) n = ext + below(F, F->cfg.max_rows - ext + 1); /* mostly a valid length */
    /* rows of every source, version 0 */
    size_t off = 0;
    uint64_t uid = slot >= 0 ? F->rq[slot].uid : 0;
    for (int32_t s = 0; s < F->ns; s++) {
        int64_t m = F->arch.sources[s].m, nr = n > 0 && n <= F->cfg.max_rows ? (n + m - 1) / m : 0, r0 = ext / m;
        if (!ext || nr < r0) r0 = 0;
        rows[s] = F->buf + off;
        for (int64_t row = r0; row < nr; row++) fill_row(F->buf + off + (size_t)(row - r0) * F->rb[s], F->rb[s], uid, s, row, 0);
        off += ((size_t)(nr - r0 > 0 ? nr - r0 : 0) * F->rb[s] + 63) & ~(size_t)63;
    }
    switch (defect) {
    case 0: flags = 0; break;
    case 1: flags = 3; break;
    case 2: n = -1; break;
    case 3: n = F->cfg.max_rows + 1; break;
    case 4: n = INT64_MAX; break;
    case 5: if (n > 0) rowsp = NULL; break;
    case 6: if (n > 0) rows[d % F->ns] = NULL; break;
    case 7: if (n > 0) rows[d % F->ns] = (const uint8_t *)rows[d % F->ns] + 8; break;
    default: break;
    }
    if (herr) want = herr;
    else {
        fz_req *r = &F->rq[slot];
        if (!ext && (r->imported || r->n > 0 || r->in_round)) want = DHS_ERR_STATE;
        else if (flags != DHS_IMPORT_DEVICE && flags != DHS_IMPORT_HOST) want = DHS_ERR_INVALID_ARG;
        else if (n < 0 || n > F->cfg.max_rows) want = DHS_ERR_ROW_RANGE;
        else if (defect == 5 && n > 0) want = DHS_ERR_INVALID_ARG;
        else if (defect == 6 && n > 0) want = DHS_ERR_INVALID_ARG;
        else if (defect == 7 && n > 0) want = DHS_ERR_MISALIGNED;
        else if (ext && n < ext) want = DHS_ERR_ROW_RANGE;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        snap_take(F);
        dhs_status s = dhs_request_import(F->ctx, h, n, rowsp, flags);
        if (F->tw) twin_status(F, s, dhs_request_import(F->tw, h, n, rowsp, flags));
        if (s == DHS_OK) {
            fz_req *r = &F->rq[slot];
            r->n = n;
            r->imported = 1;
            for (int32_t g = 0; g < F->ng; g++) {
                int64_t all = (n + F->m[g] - 1) / F->m[g];
                for (int32_t si = 0; si < F->nsrc[g]; si++) {
                    int32_t src = F->srcs[g][si];
                    if (ext && n == ext) continue; /* nothing appended */
                    r->whi[src] = all;
                    for (int64_t row = ext / F->m[g]; row < all; row++) { r->ver[src][row] = 0; r->known[src][row] = 1; r->wuid[src][row] = r->uid; }
                }
            }
        }
        judge(F, s, want, 0);
        if (!is_fault(s)) return;
        disarm(F);
    }
}

static void op_close(fz *F)
{
    F->what = "close";
    int slot, herr;
    dhs_req h = pick_handle(F, &slot, &herr);
    int want = herr ? herr : (F->round_open && F->rq[slot].in_round) ? DHS_ERR_STATE : EXPECT_OK;
    snap_take(F);
    dhs_status s = dhs_request_close(F->ctx, h);
    if (F->tw) twin_status(F, s, dhs_request_close(F->tw, h));
    if (s == DHS_OK && slot >= 0) {
        F->rq[slot].open = 0;
        if (F->nstale < FZ_STALE) F->stale[F->nstale++] = h;
        else F->stale[h.gen % FZ_STALE] = h;
    }
    judge(F, s, want, 0);
}

/* a request may join a round when one more position still fits */
static int roundable(const fz *F, int q) { return F->rq[q].open && F->rq[q].n + 1 <= F->cfg.max_rows; }

static int pword_report(fz *F, dhs_status s, const char *what, int may_defer);

static void op_round_begin(fz *F, int clean)
{
    F->what = "round_begin";
    dhs_req reqs[FZ_MAXREQ + 2];
    int32_t K[FZ_MAXREQ + 2], slots[FZ_MAXREQ + 2];
    int32_t n = 0;
    uint32_t sel = clean ? 0xff : u8(F), d = clean ? 0xff : u8(F);
    for (int q = 0; q < F->cfg.max_requests; q++) {
        if (!roundable(F, q) || !((sel >> q) & 1)) continue;
        int64_t room = F->cfg.max_rows - F->rq[q].n;
        int32_t kq = 1 + (int32_t)below(F, F->cfg.spec_width);
        if (kq > room) kq = (int32_t)room;
        reqs[n] = F->rq[q].h;
        K[n] = kq;
        slots[n] = q;
        n++;
    }
    int want = F->round_open ? DHS_ERR_STATE : EXPECT_OK;
    int32_t nn = n;
    const dhs_req *rp = reqs;
    const int32_t *kp = K;
    int defect = clean ? 99 : (int)(d % 20);
    switch (defect) {
    case 0: if (n > 0) { reqs[n] = reqs[0]; K[n] = 1; nn = n + 1; if (want == EXPECT_OK) want = DHS_ERR_INVALID_ARG; } break;
    case 1: if (F->nstale > 0) { reqs[n] = F->stale[d % F->nstale]; K[n] = 1; nn = n + 1; if (want == EXPECT_OK) want = DHS_ERR_CLOSED; } break;
    case 2: if (n > 0) { K[n - 1] = 0; if (want == EXPECT_OK) want = DHS_ERR_INVALID_ARG; } break;
    case 3: if (n > 0) { K[n - 1] = F->cfg.spec_width + 1; if (want == EXPECT_OK) want = DHS_ERR_TOO_MANY_QUERIES; } break;
    case 4: if (n > 0 && F->rq[slots[n - 1]].n + F->cfg.spec_width > F->cfg.max_rows) {
                K[n - 1] = F->cfg.spec_width;
                if (want == EXPECT_OK) want = DHS_ERR_ROW_RANGE;
            } break;
    case 5: nn = -1; if (want == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
    case 6: nn = F->cfg.max_requests + 1; if (want == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
    case 7: if (n > 0) { rp = NULL; if (want == EXPECT_OK) want = DHS_ERR_INVALID_ARG; } break;
    case 8: if (n > 0) { kp = NULL; if (want == EXPECT_OK) want = DHS_ERR_INVALID_ARG; } break;
    case 9: if (n > 0) { reqs[n - 1].gen = 0; if (want == EXPECT_OK) want = DHS_ERR_UNKNOWN_REQUEST; } break;
    case 10: n = 0; nn = 0; break;
    default: break;
    }
    if (nn > F->cfg.max_requests && !F->round_open) want = DHS_ERR_INVALID_ARG; /* an appended handle over N */
    if (F->trace)
        for (int32_t i = 0; i < nn && rp && kp; i++) fprintf(stderr, "  round_begin: req (%u,%u) K %d\n", rp[i].id, rp[i].gen, kp[i]);
    snap_take(F);
    dhs_status s = dhs_round_begin(F->ctx, nn, rp, kp);
    if (F->tw) twin_status(F, s, dhs_round_begin(F->tw, nn, rp, kp));
    /* after an early round end whose word may be set: a valid call waits and reports the word first */
    if (want == EXPECT_OK && pword_report(F, s, "round_begin", 1)) return;
    if (s == DHS_OK) {
        F->round_open = 1;
        F->nround = nn;
        F->nlive = 0;
        F->dword = 0;
        F->dword_staging = 0;
        for (int32_t i = 0; i < nn; i++) {
            fz_req *r = &F->rq[slots[i]];
            F->round_slot[i] = slots[i];
            r->in_round = 1;
            r->K = K[i];
        }
    }
    judge(F, s, want, 0);
}

/* The word an early round end left (pword), as the next valid dhs_round_begin or dhs_sync reports it: its
   status (or DHS_ERR_STAGING) with nothing opened, or DHS_OK when no bad entry was predicted. Returns 1
   when the call reported it (judged here); a fault leaves the prediction for the next call. */
static int pword_report(fz *F, dhs_status s, const char *what, int may_defer)
{
    if (!F->pword && !F->pword_staging) return 0;
    if (is_fault(s)) return 0;
    const int dw = F->pword;
    if (s == DHS_OK && may_defer && !F->pword_due) return 0; /* read one round late: still predicted */
    F->pword = 0;
    F->pword_staging = 0;
    F->pword_due = 0;
    if (s == DHS_OK) {
        if (dw) fz_fail(F, "%s after an early round end whose word holds %s returned OK", what, dhs_status_str((dhs_status)dw));
        return 0;
    }
    if (!(s == (dhs_status)dw || s == DHS_ERR_STAGING))
        fz_fail(F, "%s after an early round end reported %s, the word should hold %s", what, dhs_status_str(s),
                dw ? dhs_status_str((dhs_status)dw) : "nothing or DHS_ERR_STAGING");
    if (F->cnt) {
        F->cnt->ops++;
        F->cnt->errors++;
    }
    check_state(F, 0);
    return 1;
}

/* one write_rows call: rows [lo, lo + nr) of source src of round request slot */
static void do_write(fz *F, int slot, dhs_req h, int32_t src, int64_t lo, int32_t nr, int want, int misalign, int nulldata)
{
    F->what = "write_rows";
    uint32_t vers[16];
    uint8_t *data = F->buf;
    int ok_shape = want == EXPECT_OK && nr > 0 && nr <= 16;
    if (ok_shape) {
        for (int32_t i = 0; i < nr; i++) {
            vers[i] = ++F->ver_next;
            fill_row(F->buf + (size_t)i * F->rb[src], F->rb[src], F->rq[slot].uid, src, lo + i, vers[i]);
        }
    }
    const void *dp = nulldata ? NULL : misalign ? (const void *)(data + 8) : (const void *)data;
    if (F->trace)
        fprintf(stderr, "  write_rows(slot %d, source %d, first_row %lld, n_rows %d)%s\n", slot, src, (long long)lo, nr,
                slot >= 0 ? "" : " bad handle");
    for (int attempt = 0; attempt < 2; attempt++) {
        snap_take(F);
        dhs_status s = dhs_write_rows(F->ctx, h, src, lo, nr, dp);
        if (F->tw) twin_status(F, s, dhs_write_rows(F->tw, h, src, lo, nr, dp));
        if (s == DHS_OK && slot >= 0) {
            fz_req *r = &F->rq[slot];
            if (want != EXPECT_OK) fz_fail(F, "write_rows accepted a call the model refuses (want %d)", want);
            for (int32_t i = 0; i < nr && ok_shape; i++) {
                r->ver[src][lo + i] = vers[i];
                r->known[src][lo + i] = 1;
                r->wuid[src][lo + i] = r->uid;
            }
            if (lo + nr > r->whi[src]) r->whi[src] = lo + nr;
        }
        judge(F, s, want, 0);
        if (!is_fault(s)) return;
        disarm(F);
    }
}

static int32_t pick_row(fz *F, const fz_req *r, int32_t g, int32_t j, const int32_t *prev, int32_t nprev);

/* dhs_tail_locations: dhs_write_rows's rule without the data; the engine then writes the rows in place
   (the CPU backend's pool is host memory). Gaps, extreme first rows, bad counts, NULL and misaligned
   buffers, bad handles and sources, outside a round. */
static void op_tail(fz *F)
{
    F->what = "tail_locations";
    int slot, herr;
    dhs_req h = pick_handle(F, &slot, &herr);
    uint32_t b = u8(F), d = u8(F);
    int32_t src = (int32_t)(b % (uint32_t)F->ns);
    int want = herr ? herr : EXPECT_OK;
    int64_t lo = 0;
    int32_t nr = 0;
    static int32_t locbuf[40];
    int32_t *lp = locbuf;
    if (want == EXPECT_OK && (!F->round_open || !F->rq[slot].in_round)) want = DHS_ERR_NOT_IN_ROUND;
    if (slot >= 0) {
        const fz_req *r = &F->rq[slot];
        int64_t m = F->arch.sources[src].m;
        int64_t hist = r->n / m, hi = (r->n + (r->in_round ? r->K : 1) + m - 1) / m;
        lo = hist + below(F, hi - hist);
        nr = (int32_t)(1 + below(F, hi - lo));
        if ((b >> 2) % 4 == 0) { lo = hist; nr = (int32_t)(hi - hist); }
        if ((b >> 4) % 8 == 0) nr = 0;
        int sv = want; /* order: handle, source, round, n_rows and buffer, alignment, range */
        switch (d % 16) {
        case 0: src = -1 - (int32_t)(d / 16); want = herr ? herr : DHS_ERR_UNKNOWN_SOURCE; break;
        case 1: src = F->ns; want = herr ? herr : DHS_ERR_UNKNOWN_SOURCE; break;
        case 2: nr = -1 - (int32_t)(d / 16); if (sv == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
        case 3: lp = NULL; if (nr == 0) nr = 1; if (sv == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
        case 4: lp = (int32_t *)((uint8_t *)locbuf + 2); if (sv == EXPECT_OK) want = DHS_ERR_MISALIGNED; break;
        case 5: if (hist > 0) { lo = hist - 1; if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; } break;
        case 6: nr = (int32_t)(hi - lo + 1); if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 7: lo = INT64_MAX - (int64_t)(d / 16 % 4); nr = 1 + (int32_t)(d / 64); if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 8: lo = INT64_MIN + (int64_t)(d / 16 % 2); nr = (int32_t)(d / 32 % 3); if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 9: nr = INT32_MAX; if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 10: lo = hi + 1 + (int64_t)(d / 16); nr = (int32_t)(d / 128); if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 11: case 12: /* a gap */
            lo = r->whi[src] + 1 + (int64_t)(d / 64);
            nr = 1;
            if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE;
            break;
        default: break;
        }
        /* rows are handed out in order: a start past the first unwritten row is refused */
        if (want == EXPECT_OK && lo > r->whi[src]) want = DHS_ERR_ROW_RANGE;
    } else {
        lo = below(F, 8);
        nr = 1;
    }
    if (F->trace)
        fprintf(stderr, "  tail_locations(slot %d, source %d, first_row %lld, n_rows %d)\n", slot, src, (long long)lo, nr);
    snap_take(F);
    dhs_status st = dhs_tail_locations(F->ctx, h, src, lo, nr, lp);
    if (F->tw) {
        static int32_t l2[40];
        twin_status(F, st, dhs_tail_locations(F->tw, h, src, lo, nr, lp == locbuf ? l2 : lp));
        if (st == DHS_OK && nr > 0 && memcmp(l2, locbuf, sizeof(int32_t) * (size_t)nr))
            fz_fail(F, "payload-free twin: other tail locations");
    }
    if (st == DHS_OK) {
        if (want != EXPECT_OK) fz_fail(F, "tail_locations accepted a call the model refuses (want %d)", want);
        fz_req *r = &F->rq[slot];
        uint8_t *pool = (uint8_t *)dhs_source_pool(F->ctx, src);
        for (int32_t i = 0; i < nr; i++) {
            if (locbuf[i] < 0 || locbuf[i] >= F->pool_rows) fz_fail(F, "tail location %d outside the pool", locbuf[i]);
            uint32_t v = ++F->ver_next; /* the engine's own kernel writes the row in place */
            if (pool) fill_row(pool + (uint64_t)locbuf[i] * F->stride, F->rb[src], r->uid, src, lo + i, v);
            r->ver[src][lo + i] = v;
            r->known[src][lo + i] = 1;
            r->wuid[src][lo + i] = r->uid;
        }
        if (lo + nr > r->whi[src]) r->whi[src] = lo + nr;
    }
    judge(F, st, want, 0);
}

/* dhs_resolve_device over the round's requests (device resolver; host mode: DHS_ERR_STATE). Entry defects
   (< -1, invisible, far past the history) answer OK: -1 in every source, the first such entry of the
   round goes to the error word that dhs_round_end reports; call defects are refused at once. */
static void op_resolve_dev(fz *F)
{
    F->what = "resolve_device";
    uint32_t b = u8(F), d = u8(F);
    int32_t g = (int32_t)((b & 3) % (uint32_t)F->ng);
    int32_t k = 1 + (int32_t)below(F, F->cfg.sel_k);
    const int32_t N = F->cfg.max_requests, KK = F->cfg.spec_width;
    static int32_t sel[FZ_MAXREQ * FZ_KMAX * FZ_MAXK + 8], loc[FZ_MAXSRC * FZ_MAXREQ * FZ_KMAX * FZ_MAXK + 8];
    int32_t *sp = sel, *lp = loc;
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++) sel[i] = 999; /* never read: padding rows */
    int want = F->cfg.resolver != DHS_RESOLVER_DEVICE ? DHS_ERR_STATE : EXPECT_OK;
    int defect = (int)(d % 16);
    int sv = want;
    switch (defect) {
    case 0: g = (b & 4) ? -1 : F->ng; if (sv == EXPECT_OK) want = DHS_ERR_UNKNOWN_SOURCE; break;
    default: break;
    }
    if (want == EXPECT_OK && !F->round_open) want = DHS_ERR_NOT_IN_ROUND;
    if (want == EXPECT_OK) {
        switch (defect) {
        case 1: k = 0; want = DHS_ERR_INVALID_ARG; break;
        case 2: k = F->cfg.sel_k + 1; want = DHS_ERR_K_TOO_LARGE; break;
        case 3: sp = NULL; want = DHS_ERR_INVALID_ARG; break;
        case 4: lp = NULL; want = DHS_ERR_INVALID_ARG; break;
        case 5: lp = (int32_t *)((uint8_t *)loc + 2); want = DHS_ERR_MISALIGNED; break;
        default: break;
        }
    }
    /* the selections: [b][j][i] for the round positions, queries j < K */
    int32_t bad_b = -1, bad_e = -1, bad_code = 0;
    if (F->round_open && k >= 1 && k <= F->cfg.sel_k && g >= 0 && g < F->ng) {
        for (int32_t bi = 0; bi < F->nround; bi++) {
            const fz_req *r = &F->rq[F->round_slot[bi]];
            int32_t *sb = sel + (int64_t)bi * KK * k;
            for (int32_t j = 0; j < r->K; j++)
                for (int32_t e = 0; e < k; e++) sb[j * k + e] = pick_row(F, r, g, j, sb, j * k + e);
        }
        if (defect >= 8 && F->nround > 0) { /* one bad entry; the call still answers OK */
            bad_b = (int32_t)(b % (uint32_t)F->nround);
            const fz_req *r = &F->rq[F->round_slot[bad_b]];
            bad_e = (int32_t)(u8(F) % (uint32_t)(r->K * k));
            int32_t j = bad_e / k;
            int64_t vis = (r->n + j + 1) / F->m[g];
            int32_t *sb = sel + (int64_t)bad_b * KK * k;
            switch (defect) {
            case 8: case 9: sb[bad_e] = -2 - (int32_t)(d / 16 % 5); bad_code = DHS_ERR_ROW_RANGE; break;
            case 10: sb[bad_e] = INT32_MIN; bad_code = DHS_ERR_ROW_RANGE; break;
            case 11: case 12: sb[bad_e] = (int32_t)vis; bad_code = DHS_ERR_NOT_VISIBLE; break;
            case 13: sb[bad_e] = INT32_MAX - (int32_t)(d / 16); bad_code = DHS_ERR_NOT_VISIBLE; break;
            default: sb[bad_e] = (int32_t)(vis + F->cfg.max_rows + (int64_t)(d / 16)); bad_code = DHS_ERR_NOT_VISIBLE; break;
            }
            /* the first bad entry in (round position, entry) order decides: pick_row never yields a bad one */
        }
    }
    if (F->trace) fprintf(stderr, "  resolve_device(group %d, k %d, defect %d, bad %d/%d)\n", g, k, defect, bad_b, bad_e);
    snap_take(F);
    dhs_status s = dhs_resolve_device(F->ctx, g, k, sp, lp, 0);
    if (s == DHS_OK) {
        if (want != EXPECT_OK) fz_fail(F, "resolve_device accepted a call the model refuses (want %d)", want);
        if (bad_code && !F->dword) F->dword = bad_code;
        F->dword_staging = 1; /* misses past the hot cache may stage or run out */
        const int32_t nsrc = F->nsrc[g];
        for (int32_t bi = 0; bi < N; bi++) {
            const int in_round = bi < F->nround;
            const fz_req *r = in_round ? &F->rq[F->round_slot[bi]] : NULL;
            for (int32_t si = 0; si < nsrc; si++) {
                const int32_t src = F->srcs[g][si];
                for (int32_t e = 0; e < KK * k; e++) {
                    const int32_t l = loc[(((int64_t)si * N + bi) * KK) * k + e];
                    const int32_t row = sel[(int64_t)bi * KK * k + e];
                    if (!in_round || e >= r->K * k || row < 0 || (bi == bad_b && e == bad_e)) {
                        if (l != -1) fz_fail(F, "position %d entry %d (row %d): location %d, want -1", bi, e, row, l);
                        continue;
                    }
                    if (l == -1) continue; /* a staging failure: reported by the round's word */
                    if (l < 0 || l >= F->pool_rows) fz_fail(F, "location %d outside the pool", l);
                    check_loc_bytes(F, F->round_slot[bi], src, row, l, "device location");
                    int found = 0;
                    for (int x = 0; x < F->nlive; x++) {
                        const fz_live *lv = &F->live[x];
                        if (lv->slot == F->round_slot[bi] && lv->g == g && lv->si == si && lv->row == row) {
                            found = 1;
                            if (lv->loc != l) fz_fail(F, "row %d moved from location %d to %d within the round", row, lv->loc, l);
                        } else if (lv->loc == l &&
                                   !(lv->g == g && lv->si == si && lv->row == row &&
                                     F->rq[lv->slot].wuid[src][row] == r->wuid[src][row] &&
                                     F->rq[lv->slot].ver[src][row] == r->ver[src][row])) {
                            /* as for dhs_resolve: one location for two requests only where both hold the same
                               row of one shared prefix (same source, row and origin of the bytes) */
                            fz_fail(F, "location %d handed to slot %d group %d source %d row %d while slot %d group %d "
                                    "source index %d row %lld holds it", l, F->round_slot[bi], g, src, row, lv->slot, lv->g,
                                    lv->si, (long long)lv->row);
                        }
                    }
                    if (!found && F->nlive < FZ_LIVE) F->live[F->nlive++] = (fz_live){F->round_slot[bi], g, si, row, l};
                }
            }
        }
    }
    judge(F, s, want, 0);
}

static void op_write(fz *F)
{
    int slot, herr;
    dhs_req h = pick_handle(F, &slot, &herr);
    uint32_t b = u8(F), d = u8(F);
    int32_t src = (int32_t)(b % (uint32_t)F->ns);
    int want = EXPECT_OK;
    int64_t lo = 0;
    int32_t nr = 0;
    int misalign = 0, nulldata = 0;
    if (herr) want = herr;
    else if (!F->round_open || !F->rq[slot].in_round) want = DHS_ERR_NOT_IN_ROUND;
    if (slot >= 0) {
        const fz_req *r = &F->rq[slot];
        int64_t m = F->arch.sources[src].m;
        int64_t hist = r->n / m, hi = (r->n + (r->in_round ? r->K : 1) + m - 1) / m;
        lo = hist + below(F, hi - hist);
        nr = (int32_t)(1 + below(F, hi - lo));
        if ((b >> 2) % 4 == 0) { lo = hist; nr = (int32_t)(hi - hist); }
        if ((b >> 4) % 8 == 0) nr = 0;
        int defect = (int)(d % 24);
        if (F->tw && (defect == 3 || defect == 4)) defect = 99; /* payload-free mode never reads the data */
        int sv = want; /* order: handle, source, round, n_rows, data, alignment, range */
        switch (defect) {
        case 0: src = -1; want = herr ? herr : DHS_ERR_UNKNOWN_SOURCE; break;
        case 1: src = F->ns; want = herr ? herr : DHS_ERR_UNKNOWN_SOURCE; break;
        case 2: nr = -1; if (sv == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
        case 3: nulldata = 1; if (nr == 0) nr = 1; if (sv == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
        case 4: misalign = 1; if (sv == EXPECT_OK) want = DHS_ERR_MISALIGNED; break;
        case 5: if (hist > 0) { lo = hist - 1; if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; } break;
        case 6: nr = (int32_t)(hi - lo + 1); if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 7: lo = INT64_MAX - (int64_t)(d % 3); nr = 1 + (int32_t)(d % 5); if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 8: lo = INT64_MIN; nr = 1; if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 9: nr = INT32_MAX; if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        case 10: lo = hi + (int64_t)(d % 7); nr = 1; if (sv == EXPECT_OK) want = DHS_ERR_ROW_RANGE; break;
        default: break;
        }
        /* rows are written in order: a start past the first unwritten row is refused */
        if (want == EXPECT_OK && lo > r->whi[src]) want = DHS_ERR_ROW_RANGE;
    } else {
        lo = below(F, 8);
        nr = 1;
    }
    do_write(F, slot, h, src, lo, nr, want, misalign, nulldata);
}

/* every source of every round request: the whole block (positions n .. n+K-1) */
static void op_write_all(fz *F, int only_first)
{
    for (int32_t i = 0; i < F->nround && F->round_open; i++) {
        int slot = F->round_slot[i];
        fz_req *r = &F->rq[slot];
        for (int32_t g = 0; g < F->ng; g++) {
            int64_t m = F->m[g], lo = r->n / m, hi = (r->n + r->K + m - 1) / m;
            for (int32_t si = 0; si < (only_first ? 1 : F->nsrc[g]); si++)
                do_write(F, slot, r->h, F->srcs[g][si], lo, (int32_t)(hi - lo), EXPECT_OK, 0, 0);
        }
    }
}

/* a visible, written row for query j of request r in group g, or -1 */
static int32_t pick_row(fz *F, const fz_req *r, int32_t g, int32_t j, const int32_t *prev, int32_t nprev)
{
    int64_t m = F->m[g];
    int64_t vis = (r->n + j + 1) / m;
    int64_t w = r->whi[F->srcs[g][0]];
    if (w < vis) vis = w;
    uint32_t x = u8(F);
    if (vis <= 0 || x % 8 == 0) return -1;
    if (x % 8 == 1 && nprev > 0) return prev[(x / 8) % nprev];
    if (x % 8 <= 3) return (int32_t)(vis - 1 - (int64_t)((x / 8) % (vis < 4 ? vis : 4)));
    return (int32_t)((x / 8) % vis);
}

static void op_resolve(fz *F, int clean)
{
    F->what = "resolve";
    uint32_t b = clean ? 0 : u8(F), d = clean ? 0xff : u8(F);
    int32_t g = clean ? (int32_t)(b % (uint32_t)F->ng) : (int32_t)((b & 3) % (uint32_t)F->ng);
    int32_t k = 1 + (int32_t)below(F, F->cfg.sel_k);
    int32_t nsrc = F->nsrc[g];
    static int32_t sel[FZ_MAXREQ + 1][FZ_KMAX * FZ_MAXK + 4];
    static int32_t loc[FZ_MAXREQ + 1][FZ_MAXSRC * FZ_KMAX * FZ_MAXK + 4];
    dhs_resolve_item items[FZ_MAXREQ + 1];
    int32_t slots[FZ_MAXREQ + 1];
    int32_t n = 0;
    int want = !F->round_open ? DHS_ERR_NOT_IN_ROUND : EXPECT_OK;
    /* items: round requests chosen by a mask, in order */
    uint32_t mask = clean ? 0xff : u8(F);
    for (int32_t i = 0; i < F->nround; i++) {
        if (!((mask >> i) & 1)) continue;
        int slot = F->round_slot[i];
        fz_req *r = &F->rq[slot];
        for (int32_t j = 0; j < r->K; j++)
            for (int32_t e = 0; e < k; e++) sel[n][j * k + e] = pick_row(F, r, g, j, sel[n], j * k + e);
        items[n] = (dhs_resolve_item){r->h, r->K, sel[n], loc[n]};
        slots[n] = slot;
        n++;
    }
    int32_t nn = n;
    const dhs_resolve_item *ip = items;
    int defect = clean ? 99 : (int)(d % 32);
    int iw = want; /* item-level defects count only when the call gets that far */
    switch (defect) {
    case 0: g = -1; want = DHS_ERR_UNKNOWN_SOURCE; break;
    case 1: g = F->ng; want = DHS_ERR_UNKNOWN_SOURCE; break;
    case 2: k = 0; if (iw == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
    case 3: k = F->cfg.sel_k + 1; if (iw == EXPECT_OK) want = DHS_ERR_K_TOO_LARGE; break;
    case 4: nn = -1; if (iw == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
    case 5: nn = F->cfg.max_requests + 1; if (iw == EXPECT_OK) want = DHS_ERR_INVALID_ARG; break;
    case 6: if (n > 0) { ip = NULL; if (iw == EXPECT_OK) want = DHS_ERR_INVALID_ARG; } break;
    default: break;
    }
    if (defect >= 7 && defect <= 18 && n > 0 && iw == EXPECT_OK) {
        dhs_resolve_item *it = &items[n - 1];
        const fz_req *r = &F->rq[slots[n - 1]];
        int32_t e = (int32_t)(d % (uint32_t)(it->n_queries * k));
        int32_t j = e / k;
        int64_t vis = (r->n + j + 1) / F->m[g];
        switch (defect) {
        case 7: items[n] = items[0]; nn = n + 1; want = DHS_ERR_INVALID_ARG; break;
        case 8: it->n_queries = F->cfg.spec_width + 1; want = DHS_ERR_TOO_MANY_QUERIES; break;
        case 9: it->n_queries = r->K > 1 ? r->K - 1 : (r->K < F->cfg.spec_width ? r->K + 1 : 0); want = DHS_ERR_INVALID_ARG; break;
        case 10: it->sel = NULL; want = DHS_ERR_INVALID_ARG; break;
        case 11: it->loc = NULL; want = DHS_ERR_INVALID_ARG; break;
        case 12: it->sel = (const int32_t *)((const uint8_t *)it->sel + 2); want = DHS_ERR_MISALIGNED; break;
        case 13: sel[n - 1][e] = -2 - (int32_t)(d % 3); want = DHS_ERR_ROW_RANGE; break;
        case 14: sel[n - 1][e] = INT32_MIN; want = DHS_ERR_ROW_RANGE; break;
        case 15: sel[n - 1][e] = (int32_t)vis; want = DHS_ERR_NOT_VISIBLE; break;
        case 16: sel[n - 1][e] = INT32_MAX; want = DHS_ERR_NOT_VISIBLE; break;
        case 17: if (r->whi[F->srcs[g][0]] < vis) { sel[n - 1][e] = (int32_t)r->whi[F->srcs[g][0]]; want = DHS_ERR_ROW_RANGE; } break;
        case 18: it->req = F->nstale ? F->stale[0] : (dhs_req){0, 0}; want = F->nstale ? DHS_ERR_CLOSED : DHS_ERR_UNKNOWN_REQUEST; break;
        default: break;
        }
    }
    if (defect == 19 && iw == EXPECT_OK) { /* a request outside the round */
        for (int q = 0; q < F->cfg.max_requests; q++)
            if (F->rq[q].open && !F->rq[q].in_round) {
                items[n] = (dhs_resolve_item){F->rq[q].h, 1, sel[n], loc[n]};
                for (int32_t e = 0; e < k; e++) sel[n][e] = -1;
                nn = n + 1;
                want = DHS_ERR_NOT_IN_ROUND;
                break;
            }
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        snap_take(F);
        dhs_status s = dhs_resolve(F->ctx, g, k, nn, ip);
        if (F->tw) {
            dhs_resolve_item it2[FZ_MAXREQ + 1];
            int32_t *l2 = F->loc2;
            for (int32_t i = 0; i < nn && ip && i < FZ_MAXREQ + 1; i++) {
                it2[i] = items[i];
                if (items[i].loc) it2[i].loc = l2 + (size_t)i * (FZ_MAXSRC * FZ_KMAX * FZ_MAXK + 4);
            }
            twin_status(F, s, dhs_resolve(F->tw, g, k, nn, ip ? it2 : NULL));
            if (s == DHS_OK)
                for (int32_t i = 0; i < nn; i++)
                    if (memcmp(items[i].loc, it2[i].loc, sizeof(int32_t) * (size_t)nsrc * (size_t)items[i].n_queries * (size_t)k))
                        fz_fail(F, "payload-free twin returned other locations (item %d)", i);
        }
        if (F->trace) {
            fprintf(stderr, "  resolve(group %d, k %d, items %d) -> %s\n", g, k, nn, dhs_status_str(s));
            for (int32_t i = 0; s == DHS_OK && i < nn; i++) {
                fprintf(stderr, "    slot %d n %lld K %d:", slots[i], (long long)F->rq[slots[i]].n, items[i].n_queries);
                for (int64_t e = 0; e < (int64_t)items[i].n_queries * k; e++)
                    for (int32_t si = 0; si < nsrc; si++)
                        fprintf(stderr, "%s%d->%d", si ? "/" : " ", sel[i][e], items[i].loc[(int64_t)si * items[i].n_queries * k + e]);
                fprintf(stderr, "\n");
            }
        }
        if (s == DHS_OK) {
            if (want != EXPECT_OK) fz_fail(F, "resolve accepted a call the model refuses (want %d)", want);
            for (int32_t i = 0; i < nn; i++) {
                const fz_req *r = &F->rq[slots[i]];
                int64_t nent = (int64_t)r->K * k;
                for (int32_t si = 0; si < nsrc; si++) {
                    int32_t src = F->srcs[g][si];
                    const int32_t *l = items[i].loc + (int64_t)si * nent;
                    for (int64_t e = 0; e < nent; e++) {
                        int64_t row = sel[i][e];
                        if (row < 0) {
                            if (l[e] != -1) fz_fail(F, "selection -1 got location %d", l[e]);
                            continue;
                        }
                        if (l[e] < 0 || l[e] >= F->pool_rows) fz_fail(F, "location %d outside the pool (%lld rows)", l[e], (long long)F->pool_rows);
                        if (si == 0 && !row_known(F, r, src, row))
                            fz_fail(F, "slot %d group %d row %lld resolved but never written by the producer this round", slots[i], g, (long long)row);
                        for (int64_t e2 = 0; e2 < e; e2++) {
                            if (sel[i][e2] == row && l[e2] != l[e]) fz_fail(F, "row %lld got locations %d and %d in one call", (long long)row, l[e2], l[e]);
                            if (sel[i][e2] >= 0 && sel[i][e2] != row && l[e2] == l[e]) fz_fail(F, "rows %lld and %lld share location %d", (long long)sel[i][e2], (long long)row, l[e]);
                        }
                        check_loc_bytes(F, slots[i], src, row, l[e], "resolved location");
                        /* one location per row for the round (until group_done), none shared but a shared prefix's page */
                        int found = 0;
                        for (int x = 0; x < F->nlive; x++) {
                            const fz_live *lv = &F->live[x];
                            int same = lv->slot == slots[i] && lv->g == g && lv->si == si && lv->row == row;
                            if (same) {
                                found = 1;
                                if (lv->loc != l[e])
                                    fz_fail(F, "slot %d group %d source %d row %lld moved from location %d to %d within the round", slots[i], g, src,
                                            (long long)row, lv->loc, l[e]);
                            } else if (lv->loc == l[e] &&
                                       !(lv->g == g && lv->si == si && lv->row == row &&
                                         F->rq[lv->slot].wuid[src][row] == r->wuid[src][row] &&
                                         F->rq[lv->slot].ver[src][row] == r->ver[src][row])) {
                                /* one location for two requests only where both hold the same row of one
                                   shared prefix (a reference-counted device page): same source, row and
                                   origin of the bytes */
                                fz_fail(F, "location %d handed to slot %d group %d source %d row %lld while slot %d group %d source index %d row %lld holds it",
                                        l[e], slots[i], g, src, (long long)row, lv->slot, lv->g, lv->si, (long long)lv->row);
                            }
                        }
                        if (!found && F->nlive < FZ_LIVE) F->live[F->nlive++] = (fz_live){slots[i], g, si, row, l[e]};
                    }
                }
            }
        }
        judge(F, s, want, ALLOW_STAGING);
        if (!is_fault(s)) return;
        disarm(F);
    }
}

static void op_group_done(fz *F, int clean)
{
    F->what = "group_done";
    uint32_t b = clean ? 0 : u8(F);
    int32_t g = (int32_t)(b % (uint32_t)F->ng);
    int want = F->round_open ? EXPECT_OK : DHS_ERR_STATE;
    if (b % 16 == 15) { g = -1 - (int32_t)(b / 64); want = DHS_ERR_UNKNOWN_SOURCE; }
    if (b % 16 == 14) { g = F->ng; want = DHS_ERR_UNKNOWN_SOURCE; }
    snap_take(F);
    dhs_status s = dhs_group_done(F->ctx, g);
    if (F->tw) twin_status(F, s, dhs_group_done(F->tw, g));
    if (!is_validation(s)) live_drop_group(F, g);
    judge(F, s, want, 0);
}

static void op_round_end(fz *F, int clean)
{
    F->what = "round_end";
    uint32_t b = clean ? 0 : u8(F), d = clean ? 0xff : u8(F);
    int32_t acc[FZ_MAXREQ + 1];
    for (int32_t i = 0; i < F->nround; i++) acc[i] = (int32_t)below(F, F->rq[F->round_slot[i]].K);
    const int32_t *ap = acc;
    int defect = clean ? 99 : (int)(d % 12);
    if (F->nround > 0) {
        int32_t i = (int32_t)(b % (uint32_t)F->nround);
        switch (defect) {
        case 0: acc[i] = F->rq[F->round_slot[i]].K; break;
        case 1: acc[i] = -1; break;
        case 2: acc[i] = INT32_MIN; break;
        case 3: acc[i] = INT32_MAX; break;
        case 4: ap = NULL; break;
        default: break;
        }
    }
    /* the library's order: accepted range then unwritten committed rows, item by item */
    int want = EXPECT_OK;
    if (!F->round_open) want = DHS_ERR_STATE;
    else if (F->nround > 0 && !ap) want = DHS_ERR_INVALID_ARG;
    else {
        for (int32_t i = 0; i < F->nround && want == EXPECT_OK; i++) {
            const fz_req *r = &F->rq[F->round_slot[i]];
            if (acc[i] < 0 || acc[i] > r->K - 1) { want = DHS_ERR_ACCEPTED_RANGE; break; }
            int64_t n2 = r->n + acc[i] + 1;
            for (int32_t g = 0; g < F->ng && want == EXPECT_OK; g++)
                for (int32_t si = 0; si < F->nsrc[g]; si++)
                    if (r->whi[F->srcs[g][si]] < n2 / F->m[g]) { want = DHS_ERR_STATE; break; }
        }
    }
    if (F->trace)
        for (int32_t i = 0; i < F->nround && ap; i++)
            fprintf(stderr, "  round_end: slot %d n %lld K %d accepted %d\n", F->round_slot[i], (long long)F->rq[F->round_slot[i]].n,
                    F->rq[F->round_slot[i]].K, acc[i]);
    /* device resolver: after its argument checks, the round's error word (the promotion of pending groups
       has run: nothing is committed, the round stays open, locations handed out are no longer valid) */
    int word = 0;
    if (want == EXPECT_OK && F->round_open && (F->dword || F->dword_staging)) word = 1;
    /* dhs_round_end_early in about half the rounds: the same checks and commit, the word left to the next
       round begin or sync */
    const int early = clean ? (int)(F->op & 1) : (int)((d >> 4) & 1);
    /* an early-ended round's word still unread: dhs_round_end reads it (the first error set wins) */
    if (!early && want == EXPECT_OK && F->round_open && (F->pword || F->pword_staging)) {
        F->dword = F->pword ? F->pword : F->dword;
        F->dword_staging |= F->pword_staging;
        F->pword = F->pword_staging = F->pword_due = 0;
        word = 1;
    }
    snap_take(F);
    dhs_status s = early ? dhs_round_end_early(F->ctx, ap) : dhs_round_end(F->ctx, ap);
    if (F->tw) twin_status(F, s, early ? dhs_round_end_early(F->tw, ap) : dhs_round_end(F->tw, ap));
    if (F->cnt && early && s == DHS_OK) F->cnt->early_ends++;
    if (early && s == DHS_OK && (F->pword || F->pword_staging)) F->pword_due = 1; /* a second one unread */
    if (word && early && s == DHS_OK) {
        if (!F->pword) F->pword = F->dword; /* the first error stays in the word */
        F->pword_staging |= F->dword_staging;
        F->dword = 0;
        F->dword_staging = 0;
        word = 0;
    }
    if (word) {
        F->what = "round_end (error word)";
        const int dw = F->dword;
        F->dword = 0;
        F->dword_staging = 0;
        if (s != DHS_OK && !is_fault(s)) {
            if (!(s == (dhs_status)dw || (s == DHS_ERR_STAGING && !dw) || s == DHS_ERR_STAGING))
                fz_fail(F, "round_end reported %s, the word should hold %s", dhs_status_str(s),
                        dw ? dhs_status_str((dhs_status)dw) : "nothing or DHS_ERR_STAGING");
            if (F->cnt) {
                F->cnt->ops++;
                F->cnt->errors++;
            }
            F->nlive = 0;
            check_state(F, 0);
            return;
        }
        if (s == DHS_OK && dw) fz_fail(F, "round_end committed a round whose word holds %s", dhs_status_str((dhs_status)dw));
    }
    if (s == DHS_OK && F->round_open) {
        for (int32_t i = 0; i < F->nround; i++) {
            fz_req *r = &F->rq[F->round_slot[i]];
            int64_t n2 = r->n + acc[i] + 1;
            for (int32_t g = 0; g < F->ng; g++) {
                int64_t h2 = n2 / F->m[g];
                for (int32_t si = 0; si < F->nsrc[g]; si++) {
                    int32_t src = F->srcs[g][si];
                    for (int64_t row = r->n / F->m[g]; row < h2; row++)
                        if (!r->known[src][row])
                            fz_fail(F, "round_end committed row %lld of source %d (slot %d) that was never written", (long long)row, src, F->round_slot[i]);
                    for (int64_t row = h2; row < FZ_ROWS; row++) r->known[src][row] = 0;
                    r->whi[src] = h2;
                }
            }
            r->n = n2;
            r->imported = 1;
            r->in_round = 0;
        }
        F->round_open = 0;
        F->nround = 0;
        F->nlive = 0;
        if (F->cnt) F->cnt->rounds++;
    }
    judge(F, s, want, 0);
}

static void op_sync(fz *F)
{
    F->what = "sync";
    snap_take(F);
    dhs_status s = dhs_sync(F->ctx);
    if (F->tw) twin_status(F, s, dhs_sync(F->tw));
    if (!(F->cfg.resolver == DHS_RESOLVER_DEVICE && F->round_open) && pword_report(F, s, "sync", 0)) return;
    /* device resolver: the round's tail window is published, so no sync inside a round (docs/API.md) */
    judge(F, s, F->cfg.resolver == DHS_RESOLVER_DEVICE && F->round_open ? DHS_ERR_STATE : EXPECT_OK, 0);
}

static void op_query(fz *F)
{
    F->what = "stats/positions";
    int slot, herr;
    dhs_req h = pick_handle(F, &slot, &herr);
    uint32_t b = u8(F);
    dhs_stats st;
    dhs_mem mem;
    dhs_get_stats(F->ctx, &st);
    dhs_get_mem(F->ctx, &mem);
    if (b % 32 == 0) {
        dhs_reset_stats(F->ctx);
        if (F->tw) dhs_reset_stats(F->tw);
        dhs_get_stats(F->ctx, &st);
        dhs_stats z;
        memset(&z, 0, sizeof z);
        if (memcmp(&st, &z, sizeof z)) fz_fail(F, "dhs_reset_stats left counters");
    }
    int64_t p = -7;
    snap_take(F);
    dhs_status s = dhs_request_positions(F->ctx, h, (b & 1) ? NULL : &p);
    int want = (b & 1) ? DHS_ERR_INVALID_ARG : herr ? herr : EXPECT_OK;
    if (s == DHS_OK && slot >= 0 && p != F->rq[slot].n) fz_fail(F, "positions %lld, model %lld", (long long)p, (long long)F->rq[slot].n);
    judge(F, s, want, 0);
}

static void op_fault(fz *F)
{
    F->what = "arm fault";
    uint32_t b = u8(F);
    if (F->tw) return; /* the twin copies nothing: faults would count differently */
    dhs_backend_fault_at(F->be, (dhs_fault_kind)(b % DHS_FAULT_COUNT_), 1 + (b / 4) % 8);
}

static void op_bad(fz *F)
{
    F->what = "bad arguments";
    uint32_t b = u8(F);
    int32_t x = 0, loc = 0;
    uint8_t out[64] __attribute__((aligned(16)));
    dhs_req h = {0, 1}, hout;
    snap_take(F);
    switch (b % 12) {
    case 0: judge(F, dhs_request_open(NULL, 1, &hout), DHS_ERR_INVALID_ARG, 0); break;
    case 1: judge(F, dhs_request_open(F->ctx, 1, NULL), DHS_ERR_INVALID_ARG, 0); break;
    case 2: judge(F, dhs_round_begin(NULL, 0, NULL, NULL), DHS_ERR_INVALID_ARG, 0); break;
    case 3: judge(F, dhs_resolve(NULL, 0, 1, 0, NULL), DHS_ERR_INVALID_ARG, 0); break;
    case 4: judge(F, dhs_round_end(NULL, &x), DHS_ERR_INVALID_ARG, 0); break;
    case 5: judge(F, dhs_write_rows(NULL, h, 0, 0, 1, out), DHS_ERR_INVALID_ARG, 0); break;
    case 6: judge(F, dhs_read_location(F->ctx, -1, 0, out), DHS_ERR_UNKNOWN_SOURCE, 0); break;
    case 7: judge(F, dhs_read_location(F->ctx, F->ns, 0, out), DHS_ERR_UNKNOWN_SOURCE, 0); break;
    case 8: loc = (b & 16) ? -1 - (int32_t)(b / 32) : (int32_t)F->pool_rows + (int32_t)(b / 32);
            judge(F, dhs_read_location(F->ctx, 0, loc, out), DHS_ERR_ROW_RANGE, 0); break;
    case 9: judge(F, dhs_read_location(F->ctx, 0, 0, NULL), DHS_ERR_INVALID_ARG, 0); break;
    case 10: judge(F, dhs_sync(NULL), DHS_ERR_INVALID_ARG, 0); break;
    default: judge(F, dhs_group_done(NULL, 0), DHS_ERR_INVALID_ARG, 0); break;
    }
}

/* a whole well-formed round: begin (every roundable request), full writes, one
   resolve per group (sometimes a REINDEX), group_done, end */
static void op_auto_round(fz *F)
{
    if (F->round_open) return;
    op_round_begin(F, 1);
    if (!F->round_open) return;
    uint32_t b = u8(F);
    op_write_all(F, (b & 1) != 0);
    if (b & 1) op_write_all(F, 0);
    for (int32_t g = 0; g < F->ng; g++) {
        op_resolve(F, 1);
        if (b & 2) op_resolve(F, 1);
        if (b & 4) op_group_done(F, 1);
    }
    op_round_end(F, 1);
}

/* ------------------------------------------------------------------ setup */
static int decode_setup(fz *F, int *expect_invalid)
{
    memset(&F->arch, 0, sizeof F->arch);
    F->ng = 1 + (int32_t)(u8(F) % 3);
    F->ns = F->ng + (int32_t)(u8(F) % (uint32_t)(FZ_MAXSRC + 1 - F->ng));
    F->arch.n_groups = F->ng;
    F->arch.n_sources = F->ns;
    static const int32_t ms[3] = {1, 2, 4};
    for (int32_t g = 0; g < F->ng; g++) F->m[g] = ms[u8(F) % 3];
    for (int32_t s = 0; s < F->ns; s++) {
        uint32_t b = u8(F);
        int32_t g = s < F->ng ? s : (int32_t)(b % (uint32_t)F->ng);
        F->rb[s] = 16u * (1u + (b / 4) % 4);
        F->arch.sources[s] = (dhs_source_desc){F->rb[s], (uint32_t)F->m[g], g};
    }
    F->stride = 0;
    for (int32_t s = 0; s < F->ns; s++) if (F->rb[s] > F->stride) F->stride = F->rb[s];
    memset(F->nsrc, 0, sizeof F->nsrc);
    for (int32_t s = 0; s < F->ns; s++) {
        int32_t g = F->arch.sources[s].group;
        F->src_si[s] = F->nsrc[g];
        F->srcs[g][F->nsrc[g]++] = s;
    }
    uint32_t cons = u8(F);
    int32_t nc = 0;
    for (int32_t s = 0; s < F->ns; s++) {
        int32_t g = F->arch.sources[s].group;
        F->arch.consumers[nc++] = (dhs_consumer_desc){F->srcs[g][0] == s ? DHS_CONSUMER_OWN : DHS_CONSUMER_FOLLOW, s, g};
    }
    for (int32_t g = 0; g < F->ng; g++) {
        if ((cons >> g) & 1) F->arch.consumers[nc++] = (dhs_consumer_desc){DHS_CONSUMER_REINDEX, F->srcs[g][0], g};
        if ((cons >> (g + 3)) & 1) F->arch.consumers[nc++] = (dhs_consumer_desc){DHS_CONSUMER_REUSE, F->srcs[g][0], g};
    }
    F->arch.n_consumers = nc;
    dhs_config c = dhs_config_default();
    c.max_requests = 1 + (int32_t)(u8(F) % FZ_MAXREQ);
    c.sel_k = 1 + (int32_t)(u8(F) % FZ_MAXK);
    c.spec_width = 1 + (int32_t)(u8(F) % FZ_KMAX);
    c.page_rows = ms[u8(F) % 3];
    const uint32_t hb = u8(F);
    c.hot_rows = c.page_rows * (1 + (int32_t)(hb % 4));
    /* sometimes a hot-cache size per group (dhs_config.group_hot_rows) from the same byte's high bits:
       group g's two bits 0 = hot_rows, else 1, 2 or 5 pages (5: above every uniform size drawn) */
    if ((hb >> 2) % 4 == 2) /* never in the committed corpus and regress/ inputs: they replay as before */
        for (int32_t g = 0; g < F->ng; g++) {
            static const int32_t gp[4] = {0, 1, 2, 5};
            c.group_hot_rows[g] = c.page_rows * gp[(hb >> (4 + g)) % 4];
        }
    int32_t t = 2 * c.spec_width;
    t = (t + c.page_rows - 1) / c.page_rows * c.page_rows;
    c.tail_rows = t + c.page_rows * (int32_t)(u8(F) % 3);
    c.max_rows = 8 + (int64_t)(u8(F) % 128);
    uint32_t b = u8(F);
    c.policy = (dhs_policy)(b % DHS_POLICY_COUNT_);
    c.reclaim_order = (dhs_reclaim_order)((b / 4) % DHS_RECLAIM_COUNT_);
    c.repop_pages = (int32_t)((b / 16) % 4);
    c.resident_first = (b / 64) % 4 != 0;
    b = u8(F);
    static const int32_t stg[5] = {0, 0, -1, 1, 2};
    c.staging_arenas = stg[b % 5];
    uint64_t page_bytes = (uint64_t)c.page_rows * F->stride;
    c.reserve_bytes = (uint64_t)((b / 5) % 3) * page_bytes;
    /* the device resolver (the C specification of the GPU data plane on the CPU backend); it needs CLOCK
       and a payload (no twin then) */
    if ((b / 60) % 2 && c.policy == DHS_POLICY_CLOCK) c.resolver = DHS_RESOLVER_DEVICE; /* the regress/ inputs stay host */
    /* sometimes closed requests' host rows are kept for later imports (none, or one to three spans) */
    if ((b / 120) % 2) c.host_cache_bytes = (uint64_t)(1 + b % 3) * 1024u * F->stride;
    c.copy_threads = (int32_t)((b / 7) % 3); /* automatic, one, two host threads for an import's rows */
    dhs_sizes z;
    if (dhs_config_sizes(&F->arch, &c, &z) != DHS_OK) return -1;
    int64_t extra = (int64_t)(u8(F) % 40);
    c.device_bytes = z.min_device_bytes + (uint64_t)extra * page_bytes + (u8(F) % 4 == 0 ? page_bytes / 2 : 0);
    /* sometimes one invalid field: dhs_ctx_create must refuse it */
    b = u8(F);
    *expect_invalid = 0;
    if (b % 24 == 0) {
        *expect_invalid = 1;
        switch ((b / 24) % 10) {
        case 0: c.spec_width = 0; break;
        case 1: c.page_rows = 0; break;
        case 2:
            if (c.group_hot_rows[0]) c.group_hot_rows[F->ng - 1] = c.page_rows > 1 ? c.page_rows + 1 : -1;
            else c.hot_rows = c.page_rows > 1 ? c.hot_rows + 1 : 0;
            break;
        case 3: c.tail_rows = 2 * c.spec_width - 1; break;
        case 4: c.max_rows = 0; break;
        case 5: c.policy = (dhs_policy)99; break;
        case 6: c.reclaim_order = (dhs_reclaim_order)-1; break;
        case 7: c.repop_pages = -1; break;
        case 8: c.sel_k = (1 << 24) + 1; break;
        default: c.max_requests = 0; break;
        }
    }
    F->cfg = c;
    b = u8(F);
    F->opt.async_delay = (int32_t)(b % 4);
    F->opt.random_order = (b / 4) % 2;
    F->opt.seed = u8(F);
    return (int)((b / 8) % 32); /* twin / creation-fault selector */
}

static void fz_free(fz *F)
{
    dhs_ctx_destroy(F->ctx);
    dhs_ctx_destroy(F->tw);
    dhs_backend_destroy(F->be);
    dhs_backend_destroy(F->be2);
    free(F->snap.pool);
    free(F->buf);
    free(F->live);
    free(F->loc2);
}

int fz_run(const uint8_t *data, size_t size, fz_counts *counts)
{
    fz *F = calloc(1, sizeof *F);
    if (!F) abort();
    F->in = (fz_in){data, size, 0};
    F->cnt = counts;
    const char *tr = getenv("DHS_FUZZ_TRACE");
    F->trace = tr && *tr && *tr != '0';
    F->what = "setup";
    int inval = 0;
    int sel = decode_setup(F, &inval);
    if (sel < 0) { free(F); return 0; }
    if (F->trace && F->cfg.group_hot_rows[0] + F->cfg.group_hot_rows[1] + F->cfg.group_hot_rows[2])
        fprintf(stderr, "setup: group hot rows %d %d %d\n", F->cfg.group_hot_rows[0], F->cfg.group_hot_rows[1],
                F->cfg.group_hot_rows[2]);
    if (F->trace)
        fprintf(stderr, "setup: %d groups, %d sources, N %d max_k %d k_max %d p %d B %d T %d max_rows %lld policy %d reclaim %d repop %d resident %d staging %d resolver %d device %llu, delay %d random %d twin %d\n",
                F->ng, F->ns, F->cfg.max_requests, F->cfg.sel_k, F->cfg.spec_width, F->cfg.page_rows, F->cfg.hot_rows, F->cfg.tail_rows,
                (long long)F->cfg.max_rows, F->cfg.policy, F->cfg.reclaim_order, F->cfg.repop_pages, F->cfg.resident_first,
                F->cfg.staging_arenas, (int)F->cfg.resolver, (unsigned long long)F->cfg.device_bytes, F->opt.async_delay, F->opt.random_order, sel % 4 == 0);
    if (dhs_backend_cpu_create(&F->opt, &F->be) != DHS_OK) abort();
    if (inval) {
        dhs_status s = dhs_ctx_create(&F->arch, &F->cfg, F->be, &F->ctx);
        if (s != DHS_ERR_INVALID_ARG || F->ctx) fz_fail(F, "dhs_ctx_create accepted an invalid config (%s)", dhs_status_str(s));
        fz_free(F);
        free(F);
        return 0;
    }
    /* an allocation fault at creation: refused cleanly, then a retry works */
    if (sel % 8 == 1) dhs_backend_fault_at(F->be, DHS_FAULT_HOST_ALLOC, 1 + (uint64_t)u8(F) % 24);
    if (sel % 8 == 3) dhs_backend_fault_at(F->be, DHS_FAULT_DEVICE_ALLOC, 1);
    dhs_status s = dhs_ctx_create(&F->arch, &F->cfg, F->be, &F->ctx);
    if (s == DHS_ERR_NOMEM || s == DHS_ERR_DEVICE_NOMEM) {
        if (F->ctx || dhs_backend_faults_injected(F->be) == 0) fz_fail(F, "dhs_ctx_create failed (%s) without a fault", dhs_status_str(s));
        disarm(F);
        s = dhs_ctx_create(&F->arch, &F->cfg, F->be, &F->ctx);
    }
    if (s != DHS_OK) fz_fail(F, "dhs_ctx_create refused a valid config: %s", dhs_status_str(s));
    if (F->cnt) F->cnt->created++;
    if (sel % 4 == 0 && (FZ_TWIN_ASYNC || F->opt.async_delay == 0) && F->cfg.resolver != DHS_RESOLVER_DEVICE) {
        dhs_cpu_options o2 = F->opt;
        o2.payload_free = 1; /* the twin: the same calls on a backend that moves no bytes */
        disarm(F);
        if (dhs_backend_cpu_create(&o2, &F->be2) != DHS_OK) abort();
        s = dhs_ctx_create(&F->arch, &F->cfg, F->be2, &F->tw);
        if (s != DHS_OK) fz_fail(F, "payload-free twin: dhs_ctx_create %s", dhs_status_str(s));
        F->loc2 = calloc((FZ_MAXREQ + 1) * (FZ_MAXSRC * FZ_KMAX * FZ_MAXK + 4), sizeof(int32_t));
        if (!F->loc2) abort();
    }
    F->pool_rows = dhs_source_pool_rows(F->ctx, 0);
    F->pool_bytes = (size_t)F->pool_rows * dhs_pool_row_stride(F->ctx);
    if (dhs_pool_row_stride(F->ctx) != F->stride) fz_fail(F, "row stride %u, want %u", dhs_pool_row_stride(F->ctx), F->stride);
    F->snap.pool = malloc(F->pool_bytes + 1);
    F->buf_bytes = (size_t)(FZ_ROWS + 8) * 64 * FZ_MAXSRC + 64 * FZ_MAXSRC;
    F->buf = aligned_alloc(64, F->buf_bytes);
    F->live = calloc(FZ_LIVE, sizeof(fz_live));
    if (!F->snap.pool || !F->buf || !F->live) abort();
    check_state(F, 0);
    while (F->in.i < F->in.n && F->op < FZ_MAXOPS) {
        F->op++;
        uint32_t o = u8(F);
        if (o >= 224 && F->cfg.resolver == DHS_RESOLVER_DEVICE) {
            /* the device-resolver calls (only in device mode, so that the host-mode inputs of regress/
               keep their paths) */
            if (o & 1) op_resolve_dev(F);
            else op_tail(F);
            continue;
        }
        switch (o % 20) {
        case 0: case 1: op_open(F); break;
        case 2: case 3: op_import(F); break;
        case 4: op_close(F); break;
        case 5: op_round_begin(F, 0); break;
        case 6: case 7: op_write(F); break;
        case 8: op_write_all(F, (o / 32) & 1); break;
        case 9: case 10: op_resolve(F, 0); break;
        case 11: op_group_done(F, 0); break;
        case 12: op_round_end(F, 0); break;
        case 13: op_sync(F); break;
        case 14: op_query(F); break;
        case 15: op_fault(F); break;
        case 16: op_bad(F); break;
        default: op_auto_round(F); break;
        }
    }
    /* the end: close the round, sync, every request's committed rows still there */
    F->what = "final";
    disarm(F);
    if (F->round_open) {
        op_write_all(F, 0);
        op_round_end(F, 1);
    }
    op_sync(F);
    fz_free(F);
    free(F);
    return 0;
}
