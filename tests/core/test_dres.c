/* test_dres.c - the device resolver's C specification (core/dres_spec.h,
 * core/dres_cpu.c) and the library in device resolver mode, on the CPU
 * backend.
 *
 * A. Spec properties on random calls: a hand-built flat state (several
 *    request slots, sources, chunked host rows, tail rings, ready optional
 *    pages, arenas) is driven with random rounds of random calls (K up to 8,
 *    duplicates, -1 padding, padding rows, REINDEX-style repeated calls,
 *    occasional bad entries, staging overflow). Before every call the test
 *    predicts, from a snapshot and an independent model written here, every
 *    entry's location, the distinct-miss list (first-occurrence order), the
 *    copy list (request, miss, source order; host and pool addresses), the
 *    slots (free slots in order, then CLOCK victims from a ONE-SLOT-AT-A-TIME
 *    CLOCK, then staging), the reference bits, the hand, the protection marks
 *    and the error word, and compares all of it with what dres_cpu_resolve
 *    did; every location's bytes are checked; a row keeps one location per
 *    round across calls; selected rows are never evicted; staging happens
 *    only when every slot is protected. Promotion is predicted the same way
 *    and must be idempotent. One call in six runs in direct mode
 *    (DRES_MODE_DIRECT): an entry not served directly is predicted as
 *    DHS_ERR_STATE and -1, with nothing else changed.
 * B. dres_sweep_window against a bit-at-a-time loop on random windows (the
 *    victim sequence of A already compares the windowed sweep with the
 *    brute-force CLOCK on random states).
 * C. The whole library, device mode against host mode (different policies,
 *    so different decisions): the same random workload (arrivals, imports,
 *    departures, admission waits and reclaim between rounds, K up to 8, a
 *    compressed FOLLOW group with three sources, REINDEX calls, staging
 *    overflow) through both contexts; every location of every call must hold
 *    identical bytes in both, equal to the row's current version.
 * E. The randomised harness (`dhs verify`) in device mode: core with pressure
 *    and faults, async completions, speculation with a compressed source over
 *    the GLM (FOLLOW) and V4.1 (REUSE/REINDEX) layouts: no violation; a
 *    deliberately corrupted location is caught.
 * D. API: config refusal, sizes/accounting, dhs_resolve_device with bad
 *    entries (-1, error word, dhs_round_end reports it and commits nothing,
 *    a second dhs_round_end commits), staging owner across groups,
 *    dhs_tail_locations; dhs_round_end launches promotion only for groups
 *    left pending (a resolve not followed by dhs_group_done), across rounds;
 *    an import outside a round publishes the request's tables itself; an
 *    import pins each source's rows up to the expected positions with one
 *    host allocation, and the round's backup allocates nothing; a failed
 *    publish (an import's, a round begin's) leaves no stale device table:
 *    the next publish sends what it would have.
 */
#include <inttypes.h>
#include <stdio.h>

#include "dhs_plan.h"
#include "core/backend.h"
#include "core/dres.h"
#include "core/dres_spec.h"
#include "sim/verify.h"
#include "test_help.h"

/* =================================================================== A */
enum { HCR = 16 }; /* host chunk rows */

typedef struct {
    dres_state st;
    int32_t N, B, T, p, nsrc, m, KK, maxk;
    uint32_t stride;
    int64_t max_rows;
    uint8_t *pool;
    int64_t pool_rows;
    uint8_t **chunks; /* [N][nsrc][n_host_chunks] */
    dres_round *rd;
    int32_t *rd_slot, *rd_K;
    int64_t *rd_n, *rd_tl;
    int64_t n[64], tail_lo[64];
    int32_t err, owner;
    uint32_t epoch;
} toy;

static void fill(uint8_t *out, uint32_t nb, int32_t r, int32_t si, int64_t s)
{
    th_fill_row(out, nb, (uint64_t)r + 1, si, s, 0);
}

static uint8_t *prow(toy *t, int64_t loc) { return t->pool + (uint64_t)loc * t->stride; }

static void toy_tail_write(toy *t, int32_t r)
{
    const int64_t hi = (t->n[r] + 8 + t->m - 1) / t->m; /* rows any K <= 8 block touches */
    for (int32_t si = 0; si < t->nsrc; si++)
        for (int64_t s = t->tail_lo[r]; s < hi && s < t->max_rows; s++) {
            int64_t v = s % t->T;
            int64_t loc = (int64_t)t->st.tail_pages[((int64_t)r * t->nsrc + si) * (t->T / t->p) + v / t->p] * t->p + v % t->p;
            fill(prow(t, loc), t->stride, r, si, s);
        }
}

static void toy_init(toy *t, uint64_t *rng, int exhaust)
{
    memset(t, 0, sizeof *t);
    t->N = 2 + (int32_t)dhs_rng_below(rng, 4);
    t->p = 4;
    t->B = t->p * (1 + (int32_t)dhs_rng_below(rng, 12)); /* 4 .. 48: around and below one window */
    t->T = 32;
    t->nsrc = 1 + (int32_t)dhs_rng_below(rng, 3);
    t->m = dhs_rng_below(rng, 3) == 0 ? 4 : 1;
    t->KK = 8;
    t->maxk = 12;
    t->stride = 32;
    t->max_rows = 400;
    dres_state *st = &t->st;
    st->group = 0;
    st->N = t->N; st->B = t->B; st->T = t->T; st->p = t->p; st->nsrc = t->nsrc; st->m = t->m;
    st->spec_width = t->KK; st->sel_k = t->maxk; st->row_stride = t->stride; st->max_rows = t->max_rows;
    st->max_opt_pages = t->max_rows / t->p + 1;
    st->host_chunk_rows = HCR;
    st->n_host_chunks = t->max_rows / HCR + 1;
    st->stage_rows = 2 * t->KK * t->maxk; /* two calls per round */
    if (exhaust) st->stage_rows = 6; /* staging exhaustion */
    const int64_t N = t->N, ns = t->nsrc, per = (int64_t)t->KK * t->maxk;
    st->slot_of = calloc((size_t)(N * t->max_rows), 4);
    st->row_of = calloc((size_t)(N * t->B), 4);
    st->used = calloc((size_t)(N * t->B), 4);
    st->ref = calloc((size_t)(N * t->B), 1);
    st->meta = calloc((size_t)(N * DRES_META), 4);
    st->staged_row = calloc((size_t)(N * st->stage_rows), 4);
    st->hot_pages = calloc((size_t)(N * ns * (t->B / t->p)), 4);
    st->tail_pages = calloc((size_t)(N * ns * (t->T / t->p)), 4);
    st->opt_pages = calloc((size_t)(N * ns * st->max_opt_pages), 4);
    st->opt_ready = calloc((size_t)(N * st->max_opt_pages), 1);
    st->host_chunks = calloc((size_t)(N * ns * st->n_host_chunks), 8);
    st->arena_page = calloc((size_t)ns, 4);
    st->dmiss = calloc((size_t)(N * per), 4);
    st->ndmiss = calloc((size_t)N, 4);
    st->victim = calloc((size_t)(N * per), 4);
    st->pairs = calloc((size_t)(N * per * ns * 2), 8);
    st->npairs = calloc((size_t)N, 4);
    st->code = calloc((size_t)(N * per), 8);
    st->stats = calloc(DRES_S_COUNT, 8);
    st->err = &t->err;
    st->stage_owner = &t->owner;
    t->owner = -1;
    /* pages: per (r, si) hot, tail, optional; then one arena per source */
    int64_t pg = 0;
    const int64_t arena_pages = (N * st->stage_rows + t->p - 1) / t->p;
    for (int64_t r = 0; r < N; r++)
        for (int64_t si = 0; si < ns; si++) {
            for (int64_t i = 0; i < t->B / t->p; i++) st->hot_pages[(r * ns + si) * (t->B / t->p) + i] = (int32_t)pg++;
            for (int64_t i = 0; i < t->T / t->p; i++) st->tail_pages[(r * ns + si) * (t->T / t->p) + i] = (int32_t)pg++;
            for (int64_t i = 0; i < st->max_opt_pages; i++) st->opt_pages[(r * ns + si) * st->max_opt_pages + i] = (int32_t)pg++;
        }
    for (int64_t si = 0; si < ns; si++) {
        st->arena_page[si] = (int32_t)pg;
        pg += arena_pages;
    }
    t->pool_rows = pg * t->p;
    t->pool = calloc((size_t)t->pool_rows, t->stride);
    st->pool = t->pool;
    t->chunks = calloc((size_t)(N * ns * st->n_host_chunks), sizeof(uint8_t *));
    for (int64_t r = 0; r < N; r++)
        for (int64_t si = 0; si < ns; si++)
            for (int64_t c = 0; c < st->n_host_chunks; c++) {
                uint8_t *ch = malloc((size_t)HCR * t->stride);
                for (int64_t i = 0; i < HCR; i++) fill(ch + i * t->stride, t->stride, (int32_t)r, (int32_t)si, c * HCR + i);
                t->chunks[(r * ns + si) * st->n_host_chunks + c] = ch;
                st->host_chunks[(r * ns + si) * st->n_host_chunks + c] = (uint64_t)(uintptr_t)ch;
            }
    /* requests: history, tail window, some ready optional pages */
    for (int32_t r = 0; r < t->N; r++) {
        dres_cpu_reset(st, r);
        t->n[r] = 20 + dhs_rng_below(rng, 200);
        t->tail_lo[r] = t->n[r] / t->m - dhs_rng_below(rng, 6);
        if (t->tail_lo[r] < 0) t->tail_lo[r] = 0;
        for (int64_t hp = 0; (hp + 1) * t->p <= t->tail_lo[r]; hp++)
            if (dhs_rng_below(rng, 4) == 0) {
                st->opt_ready[(int64_t)r * st->max_opt_pages + hp] = 1;
                for (int32_t si = 0; si < t->nsrc; si++)
                    for (int32_t i = 0; i < t->p; i++)
                        fill(prow(t, (int64_t)st->opt_pages[((int64_t)r * ns + si) * st->max_opt_pages + hp] * t->p + i),
                             t->stride, r, si, hp * t->p + i);
            }
        toy_tail_write(t, r);
    }
    /* round descriptor, laid out here independently of the core */
    size_t off = 64, o_slot = off; off += 4 * (size_t)N;
    size_t o_K = off; off += 4 * (size_t)N;
    off = (off + 7) & ~(size_t)7;
    size_t o_n = off; off += 8 * (size_t)N;
    size_t o_tl = off; off += 8 * (size_t)N;
    t->rd = calloc(1, off);
    t->rd->n_groups = 1;
    t->rd->off_slot = (int64_t)o_slot; t->rd->off_K = (int64_t)o_K; t->rd->off_n = (int64_t)o_n; t->rd->off_tail_lo = (int64_t)o_tl;
    t->rd->bytes = (int64_t)off;
    t->rd_slot = (int32_t *)(void *)((char *)t->rd + o_slot);
    t->rd_K = (int32_t *)(void *)((char *)t->rd + o_K);
    t->rd_n = (int64_t *)(void *)((char *)t->rd + o_n);
    t->rd_tl = (int64_t *)(void *)((char *)t->rd + o_tl);
}

static void toy_free(toy *t)
{
    dres_state *st = &t->st;
    const int64_t nc = (int64_t)t->N * t->nsrc * st->n_host_chunks;
    for (int64_t i = 0; i < nc; i++) free(t->chunks[i]);
    free(t->chunks);
    free(st->slot_of); free(st->row_of); free(st->used); free(st->ref); free(st->meta); free(st->staged_row);
    free(st->hot_pages); free(st->tail_pages); free(st->opt_pages); free(st->opt_ready); free(st->host_chunks);
    free(st->arena_page); free(st->dmiss); free(st->ndmiss); free(st->victim); free(st->pairs); free(st->npairs);
    free(st->code); free(st->stats); free(t->pool); free(t->rd);
}

/* snapshot of one request slot's hot state */
typedef struct {
    int32_t *slot_of, *row_of, *staged;
    uint32_t *used;
    uint8_t *ref;
    int32_t meta[DRES_META];
} snap;

static void snap_take(const toy *t, int32_t r, snap *s)
{
    const dres_state *st = &t->st;
    s->slot_of = malloc(4 * (size_t)t->max_rows);
    s->row_of = malloc(4 * (size_t)t->B);
    s->used = malloc(4 * (size_t)t->B);
    s->ref = malloc((size_t)t->B);
    s->staged = malloc(4 * (size_t)st->stage_rows);
    memcpy(s->slot_of, st->slot_of + (int64_t)r * t->max_rows, 4 * (size_t)t->max_rows);
    memcpy(s->row_of, st->row_of + (int64_t)r * t->B, 4 * (size_t)t->B);
    memcpy(s->used, st->used + (int64_t)r * t->B, 4 * (size_t)t->B);
    memcpy(s->ref, st->ref + (int64_t)r * t->B, (size_t)t->B);
    memcpy(s->staged, st->staged_row + (int64_t)r * st->stage_rows, 4 * (size_t)st->stage_rows);
    memcpy(s->meta, st->meta + (int64_t)r * DRES_META, sizeof s->meta);
}

static void snap_free(snap *s)
{
    free(s->slot_of); free(s->row_of); free(s->used); free(s->ref); free(s->staged);
}

/* brute-force CLOCK, one slot at a time: up to `need` victims among slots
   whose mark differs from `mark`; a set reference bit is cleared and the slot
   passed; victims get `mark`. Returns the victims found; *hand moves. */
static int32_t clock_ref(int32_t B, uint32_t *used, uint8_t *ref, int32_t *hand, int32_t need, uint32_t mark, int32_t *out)
{
    int32_t got = 0, h = *hand, eligible = 0;
    for (int32_t q = 0; q < B; q++) eligible += used[q] != mark;
    if (need > eligible) need = eligible;
    while (got < need) {
        if (used[h] != mark) {
            if (ref[h]) ref[h] = 0;
            else {
                out[got++] = h;
                used[h] = mark;
            }
        }
        h = (h + 1) % B;
    }
    *hand = h;
    return got;
}

static int64_t phys_of(const toy *t, int32_t r, int32_t si, int kind, int64_t v)
{
    const dres_state *st = &t->st;
    const int64_t p = t->p, ns = t->nsrc;
    switch (kind) {
    case DRES_K_TAIL: return (int64_t)st->tail_pages[((int64_t)r * ns + si) * (t->T / p) + v / p] * p + v % p;
    case DRES_K_OPT: return (int64_t)st->opt_pages[((int64_t)r * ns + si) * st->max_opt_pages + v / p] * p + v % p;
    case DRES_K_HOT: return (int64_t)st->hot_pages[((int64_t)r * ns + si) * (t->B / p) + v / p] * p + v % p;
    case DRES_K_STAGE: return (int64_t)st->arena_page[si] * p + (int64_t)r * st->stage_rows + v;
    }
    return -1;
}

static uint64_t host_addr(const toy *t, int32_t r, int32_t si, int64_t s)
{
    return (uint64_t)(uintptr_t)(t->chunks[((int64_t)r * t->nsrc + si) * t->st.n_host_chunks + s / HCR] + (s % HCR) * t->stride);
}

typedef struct { long calls, entries, misses, victims, staged, stage_fail, bad, promoted, free_fills, direct_calls, not_direct; } a_counts;

/* round-level memory: the location each (b, row) got this round, per source 0 */
typedef struct { int32_t *loc0; } round_mem;

/* one resolve call predicted and checked; returns 0. direct: DRES_MODE_DIRECT (a valid entry that is not
   served directly is DHS_ERR_STATE and -1, nothing else changes) */
static void a_call(toy *t, uint64_t *rng, int32_t n_round, int32_t k, int bad_ok, a_counts *cnt, int32_t *first_loc,
                   int direct)
{
    dres_state *st = &t->st;
    const int32_t N = t->N, KK = t->KK, B = t->B, ns = t->nsrc;
    const int64_t per = (int64_t)KK * k;
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)(N * per));
    int32_t *loc = malloc(sizeof(int32_t) * (size_t)(ns * N * per));
    int32_t *exp = malloc(sizeof(int32_t) * (size_t)(ns * N * per));
    for (int64_t i = 0; i < N * per; i++) sel[i] = (int32_t)0x7eadbeef; /* must never be read for padding */
    for (int64_t i = 0; i < ns * N * per; i++) { loc[i] = 12345; exp[i] = -1; }
    int32_t exp_err = t->err;
    snap sn[64];
    int64_t nd_exp[64];
    int32_t *dexp[64], *vexp[64], nvexp[64], npexp[64];
    uint64_t *pexp[64];
    for (int32_t b = 0; b < n_round; b++) {
        const int32_t r = t->rd_slot[b], K = t->rd_K[b];
        const int64_t n = t->rd_n[b], tl = t->rd_tl[b];
        int32_t *sb = sel + (int64_t)b * per;
        /* selection: locality around a few centres, duplicates, -1 */
        int64_t vis_rows = (n + 1) / t->m;
        for (int32_t j = 0; j < K; j++)
            for (int32_t i = 0; i < k; i++) {
                int64_t vis = (n + j + 1) / t->m; /* rows visible to query j */
                int64_t s;
                int64_t u = dhs_rng_below(rng, 100);
                if (u < 8) s = -1;
                else if (u < 20 && i > 0) s = sb[(int64_t)j * k + dhs_rng_below(rng, i)];
                else if (u < 60) s = vis - 1 - dhs_rng_below(rng, vis < 24 ? vis : 24);
                else s = dhs_rng_below(rng, vis > 0 ? vis : 1);
                if (s >= vis) s = -1;
                if (bad_ok && dhs_rng_below(rng, 200) == 0) s = dhs_rng_below(rng, 2) ? -5 : vis + dhs_rng_below(rng, 3);
                sb[(int64_t)j * k + i] = (int32_t)s;
            }
        (void)vis_rows;
        /* ---- model */
        snap *S = &sn[b];
        snap_take(t, r, S);
        uint32_t *used = malloc(4 * (size_t)B);
        uint8_t *ref = malloc((size_t)B);
        memcpy(used, S->used, 4 * (size_t)B);
        memcpy(ref, S->ref, (size_t)B);
        int32_t *slot_of = malloc(4 * (size_t)t->max_rows), *row_of = malloc(4 * (size_t)B);
        memcpy(slot_of, S->slot_of, 4 * (size_t)t->max_rows);
        memcpy(row_of, S->row_of, 4 * (size_t)B);
        int64_t *kind = malloc(8 * (size_t)per), *val = malloc(8 * (size_t)per);
        const uint8_t *ready = st->opt_ready + (int64_t)r * st->max_opt_pages;
        for (int64_t e = 0; e < (int64_t)K * k; e++) {
            const int64_t s = sb[e];
            const int32_t j = (int32_t)(e / k);
            if (s == -1) { kind[e] = -1; continue; }
            if (s < 0 || s >= t->max_rows) { kind[e] = DRES_K_BAD; if (!exp_err) exp_err = 8; continue; }
            if ((s + 1) * t->m > n + j + 1) { kind[e] = DRES_K_BAD; if (!exp_err) exp_err = 9; continue; }
            if (s >= tl) { kind[e] = DRES_K_TAIL; val[e] = s % t->T; continue; }
            if (ready[s / t->p]) { kind[e] = DRES_K_OPT; val[e] = s; continue; }
            if (direct) { kind[e] = DRES_K_BAD; cnt->not_direct++; if (!exp_err) exp_err = 12; continue; }
            const int32_t q = slot_of[s];
            if (q >= B) { kind[e] = DRES_K_STAGE; val[e] = q - B; continue; }
            if (q >= 0) { kind[e] = DRES_K_HOT; val[e] = q; used[q] = t->epoch; ref[q] = 1; continue; }
            kind[e] = DRES_K_MISS; val[e] = s;
        }
        int32_t *D = malloc(4 * (size_t)per);
        int32_t nd = 0;
        for (int64_t e = 0; e < (int64_t)K * k; e++) {
            if (kind[e] != DRES_K_MISS) continue;
            int dup = 0;
            for (int32_t i = 0; i < nd && !dup; i++) dup = D[i] == sb[e];
            if (!dup) D[nd++] = sb[e];
        }
        const int32_t filled = S->meta[DRES_M_FILLED];
        const int32_t nfree = nd < B - filled ? nd : B - filled;
        for (int32_t i = 0; i < nfree; i++) used[filled + i] = t->epoch;
        int32_t *V = malloc(4 * (size_t)(per + 1)), hand = S->meta[DRES_M_HAND];
        int32_t nv = nd > nfree ? clock_ref(B, used, ref, &hand, nd - nfree, t->epoch, V) : 0;
        int32_t nstaged = S->meta[DRES_M_NSTAGED];
        uint64_t *P = malloc(16 * (size_t)(per * ns + 1));
        int32_t np = 0;
        int32_t *placed = malloc(4 * (size_t)(per + 1)); /* slot_of value of D[i] after, -1 failed */
        for (int32_t i = 0; i < nd; i++) {
            const int32_t s = D[i];
            int kd;
            int64_t v;
            if (i < nfree + nv) {
                const int32_t q = i < nfree ? filled + i : V[i - nfree];
                if (i >= nfree) {
                    CHECKF(row_of[q] >= 0, "victim slot %d empty", q);
                    if (row_of[q] >= 0) slot_of[row_of[q]] = -1;
                    cnt->victims++;
                } else {
                    cnt->free_fills++;
                }
                row_of[q] = s;
                slot_of[s] = q;
                ref[q] = 1;
                kd = DRES_K_HOT;
                v = q;
            } else {
                /* staging only when every slot is protected */
                int32_t prot = 0;
                for (int32_t q = 0; q < B; q++) prot += used[q] == t->epoch;
                CHECKF(prot == B, "staging with %d of %d slots protected", prot, B);
                if (nstaged >= st->stage_rows || (t->owner != -1 && t->owner != st->group)) {
                    slot_of[s] = -1;
                    placed[i] = -1;
                    if (!exp_err) exp_err = 16;
                    cnt->stage_fail++;
                    continue;
                }
                slot_of[s] = B + nstaged;
                kd = DRES_K_STAGE;
                v = nstaged++;
                cnt->staged++;
            }
            placed[i] = slot_of[s];
            cnt->misses++;
            for (int32_t si = 0; si < ns; si++) {
                P[2 * np] = host_addr(t, r, si, s);
                P[2 * np + 1] = (uint64_t)(uintptr_t)prow(t, phys_of(t, r, si, kd, v));
                np++;
            }
        }
        /* expected locations */
        for (int64_t e = 0; e < (int64_t)K * k; e++) {
            int kd = (int)kind[e];
            int64_t v = kd >= 0 ? val[e] : 0;
            if (kd == DRES_K_MISS) {
                const int32_t q = slot_of[sb[e]];
                if (q < 0) kd = DRES_K_BAD;
                else if (q >= B) { kd = DRES_K_STAGE; v = q - B; }
                else { kd = DRES_K_HOT; v = q; }
            }
            for (int32_t si = 0; si < ns; si++)
                exp[(((int64_t)si * N + b) * KK) * k + e] = kd < 0 || kd == DRES_K_BAD ? -1 : (int32_t)phys_of(t, r, si, kd, v);
            if (kd >= 0 && kd != DRES_K_BAD) cnt->entries++;
            if (kd == DRES_K_BAD) cnt->bad++;
        }
        /* keep the model's final state in the snapshot buffers for the comparison */
        memcpy(S->slot_of, slot_of, 4 * (size_t)t->max_rows);
        memcpy(S->row_of, row_of, 4 * (size_t)B);
        memcpy(S->used, used, 4 * (size_t)B);
        memcpy(S->ref, ref, (size_t)B);
        S->meta[DRES_M_HAND] = nv > 0 ? hand : S->meta[DRES_M_HAND];
        S->meta[DRES_M_FILLED] = filled + nfree;
        for (int32_t i = S->meta[DRES_M_NSTAGED], c = 0; i < nstaged; i++) {
            while (c < nd && !(placed[c] >= B && placed[c] - B == i)) c++;
            S->staged[i] = D[c];
        }
        S->meta[DRES_M_NSTAGED] = nstaged;
        nd_exp[b] = nd;
        dexp[b] = D;
        vexp[b] = V;
        nvexp[b] = nv;
        pexp[b] = P;
        npexp[b] = np;
        free(used); free(ref); free(slot_of); free(row_of); free(kind); free(val); free(placed);
    }
    dres_cpu_resolve(st, t->rd, k, sel, loc, 1, direct ? DRES_MODE_DIRECT : 0);
    cnt->calls++;
    cnt->direct_calls += direct;
    /* ---- compare */
    int bad_loc = 0;
    for (int64_t i = 0; i < ns * N * per && bad_loc < 3; i++)
        if (loc[i] != exp[i]) {
            CHECKF(0, "loc[%lld] = %d, spec model says %d", (long long)i, loc[i], exp[i]);
            bad_loc++;
        }
    CHECKF(t->err == exp_err, "error word %d, expected %d", t->err, exp_err);
    for (int32_t b = 0; b < n_round; b++) {
        const int32_t r = t->rd_slot[b];
        snap A;
        snap_take(t, r, &A);
        snap *S = &sn[b];
        CHECKF(!memcmp(A.row_of, S->row_of, 4 * (size_t)B), "request %d: slot table differs from the model", r);
        CHECKF(!memcmp(A.slot_of, S->slot_of, 4 * (size_t)t->max_rows), "request %d: reverse index differs from the model", r);
        CHECKF(!memcmp(A.used, S->used, 4 * (size_t)B), "request %d: protection marks differ from the model", r);
        CHECKF(!memcmp(A.ref, S->ref, (size_t)B), "request %d: reference bits differ from the one-slot CLOCK", r);
        CHECKF(A.meta[DRES_M_HAND] == S->meta[DRES_M_HAND], "request %d: hand %d, one-slot CLOCK %d", r, A.meta[DRES_M_HAND], S->meta[DRES_M_HAND]);
        CHECKF(A.meta[DRES_M_FILLED] == S->meta[DRES_M_FILLED], "request %d: filled %d want %d", r, A.meta[DRES_M_FILLED], S->meta[DRES_M_FILLED]);
        CHECKF(A.meta[DRES_M_NSTAGED] == S->meta[DRES_M_NSTAGED], "request %d: staged %d want %d", r, A.meta[DRES_M_NSTAGED], S->meta[DRES_M_NSTAGED]);
        int32_t nprot = 0;
        for (int32_t q = 0; q < B; q++) nprot += A.used[q] == t->epoch;
        CHECKF(A.meta[DRES_M_PROT_EPOCH] == (int32_t)t->epoch && A.meta[DRES_M_NPROT] == nprot,
               "request %d: protected count %d, %d slots marked", r, A.meta[DRES_M_NPROT], nprot);
        CHECKF(!memcmp(A.staged, S->staged, 4 * (size_t)S->meta[DRES_M_NSTAGED]), "request %d: staged rows differ", r);
        CHECKF(st->ndmiss[r] == nd_exp[b], "request %d: %d distinct misses, model %lld", r, st->ndmiss[r], (long long)nd_exp[b]);
        CHECKF(!memcmp(st->dmiss + (int64_t)r * KK * t->maxk, dexp[b], 4 * (size_t)nd_exp[b]), "request %d: miss list not in first-occurrence order", r);
        CHECKF(!memcmp(st->victim + (int64_t)r * KK * t->maxk, vexp[b], 4 * (size_t)nvexp[b]), "request %d: victims differ from the one-slot CLOCK", r);
        CHECKF(st->npairs[r] == npexp[b], "request %d: %d copy pairs, model %d", r, st->npairs[r], npexp[b]);
        CHECKF(!memcmp(st->pairs + (int64_t)r * KK * t->maxk * ns * 2, pexp[b], 16 * (size_t)npexp[b]), "request %d: copy list differs", r);
        /* protection never evicts a selected row; one location per row per round */
        const int32_t K = t->rd_K[b];
        for (int64_t e = 0; e < (int64_t)K * k; e++) {
            const int32_t s = sel[(int64_t)b * per + e];
            const int32_t l = loc[(((int64_t)0 * N + b) * KK) * k + e];
            if (s < 0 || l < 0) continue;
            int32_t *fl = first_loc + (int64_t)r * t->max_rows + s;
            if (*fl == -1) *fl = l;
            CHECKF(*fl == l, "request %d row %d: location %d, earlier in the round %d", r, s, l, *fl);
            for (int32_t si = 0; si < ns; si++) {
                uint8_t want[64];
                fill(want, t->stride, r, si, s);
                const int32_t ls = loc[(((int64_t)si * N + b) * KK) * k + e];
                CHECKF(!memcmp(prow(t, ls), want, t->stride), "request %d source %d row %d at %d: wrong bytes", r, si, s, ls);
            }
        }
        snap_free(&A);
        snap_free(S);
        free(dexp[b]); free(vexp[b]); free(pexp[b]);
    }
    /* padding rows and queries */
    for (int32_t si = 0; si < ns; si++)
        for (int32_t b = 0; b < N; b++) {
            const int32_t K = b < n_round ? t->rd_K[b] : 0;
            for (int64_t e = (int64_t)K * k; e < per; e++)
                if (loc[(((int64_t)si * N + b) * KK) * k + e] != -1) { CHECKF(0, "padding entry %d/%lld not -1", b, (long long)e); break; }
        }
    free(sel); free(loc); free(exp);
}

static void a_promote(toy *t, int32_t n_round, a_counts *cnt)
{
    dres_state *st = &t->st;
    const int32_t B = t->B, ns = t->nsrc;
    const uint32_t promo = t->epoch ^ DRES_PROMO_BIT;
    snap S[64];
    int32_t first_[64], npro_[64];
    for (int32_t b = 0; b < n_round; b++) {
        const int32_t r = t->rd_slot[b];
        snap_take(t, r, &S[b]);
        snap *s = &S[b];
        const int32_t nst = s->meta[DRES_M_NSTAGED];
        first_[b] = nst > B ? nst - B : 0;
        npro_[b] = nst - first_[b];
        if (nst == 0) continue;
        for (int32_t i = 0; i < nst; i++) s->slot_of[s->staged[i]] = -1;
        const int32_t filled = s->meta[DRES_M_FILLED];
        const int32_t nfree = npro_[b] < B - filled ? npro_[b] : B - filled;
        for (int32_t i = 0; i < nfree; i++) s->used[filled + i] = promo;
        int32_t V[512], hand = s->meta[DRES_M_HAND];
        int32_t nv = npro_[b] > nfree ? clock_ref(B, s->used, s->ref, &hand, npro_[b] - nfree, promo, V) : 0;
        if (nv) s->meta[DRES_M_HAND] = hand;
        for (int32_t i = 0; i < nfree + nv; i++) {
            const int32_t row = s->staged[first_[b] + i], q = i < nfree ? filled + i : V[i - nfree];
            if (i >= nfree && s->row_of[q] >= 0) s->slot_of[s->row_of[q]] = -1;
            s->row_of[q] = row;
            s->slot_of[row] = q;
            s->ref[q] = 1;
            cnt->promoted++;
        }
        s->meta[DRES_M_FILLED] = filled + nfree;
        s->meta[DRES_M_NSTAGED] = 0;
    }
    dres_cpu_promote(st, t->rd, 1);
    CHECKF(t->owner == -1, "staging owner %d after promotion", t->owner);
    for (int32_t b = 0; b < n_round; b++) {
        const int32_t r = t->rd_slot[b];
        snap A;
        snap_take(t, r, &A);
        snap *s = &S[b];
        CHECKF(!memcmp(A.row_of, s->row_of, 4 * (size_t)B), "promote request %d: slot table differs", r);
        CHECKF(!memcmp(A.slot_of, s->slot_of, 4 * (size_t)t->max_rows), "promote request %d: reverse index differs", r);
        CHECKF(!memcmp(A.used, s->used, 4 * (size_t)B), "promote request %d: marks differ", r);
        CHECKF(!memcmp(A.ref, s->ref, (size_t)B), "promote request %d: reference bits differ", r);
        CHECKF(A.meta[DRES_M_HAND] == s->meta[DRES_M_HAND] && A.meta[DRES_M_FILLED] == s->meta[DRES_M_FILLED] &&
                   A.meta[DRES_M_NSTAGED] == 0, "promote request %d: meta differs", r);
        /* promoted rows' bytes in their hot slots, every source */
        for (int32_t q = 0; q < B; q++) {
            const int32_t row = A.row_of[q];
            if (row < 0) continue;
            for (int32_t si = 0; si < ns; si++) {
                uint8_t want[64];
                fill(want, t->stride, r, si, row);
                CHECKF(!memcmp(prow(t, phys_of(t, r, si, DRES_K_HOT, q)), want, t->stride), "request %d slot %d row %d bytes", r, q, row);
            }
        }
        snap_free(&A);
        snap_free(s);
    }
    /* idempotent: a second promotion changes nothing */
    snap before[64];
    for (int32_t b = 0; b < n_round; b++) snap_take(t, t->rd_slot[b], &before[b]);
    dres_cpu_promote(st, t->rd, 1);
    for (int32_t b = 0; b < n_round; b++) {
        snap A;
        snap_take(t, t->rd_slot[b], &A);
        CHECKF(!memcmp(A.row_of, before[b].row_of, 4 * (size_t)B) && !memcmp(A.used, before[b].used, 4 * (size_t)B) &&
                   !memcmp(A.ref, before[b].ref, (size_t)B) && !memcmp(A.meta, before[b].meta, sizeof A.meta),
               "second promotion changed request %d", t->rd_slot[b]);
        snap_free(&A);
        snap_free(&before[b]);
    }
}

static void test_spec(uint64_t seed)
{
    uint64_t rng = seed;
    a_counts cnt;
    memset(&cnt, 0, sizeof cnt);
    const long target = (long)(4000 * th_scale());
    int states = 0;
    while (cnt.calls < target || states < 3) {
        toy t;
        toy_init(&t, &rng, states % 3 == 1); /* every third state has 6 staging rows per slot */
        states++;
        int32_t *first_loc = malloc(4 * (size_t)(t.N * t.max_rows));
        for (int round = 0; round < 40 && cnt.calls < target; round++) {
            t.epoch++;
            /* round: a random subset of the slots in random order */
            int32_t order[64], n_round = 1 + (int32_t)dhs_rng_below(&rng, t.N);
            for (int32_t i = 0; i < t.N; i++) order[i] = i;
            for (int32_t i = t.N - 1; i > 0; i--) {
                int32_t j = (int32_t)dhs_rng_below(&rng, i + 1), x = order[i];
                order[i] = order[j];
                order[j] = x;
            }
            t.rd->n_round = n_round;
            t.rd->epoch = t.epoch;
            for (int32_t b = 0; b < t.N; b++) {
                t.rd_slot[b] = b < n_round ? order[b] : -1;
                t.rd_K[b] = b < n_round ? 1 + (int32_t)dhs_rng_below(&rng, t.KK) : 0;
                t.rd_n[b] = b < n_round ? t.n[order[b]] : 0;
                t.rd_tl[b] = b < n_round ? t.tail_lo[order[b]] : 0;
            }
            for (int64_t i = 0; i < (int64_t)t.N * t.max_rows; i++) first_loc[i] = -1;
            const int32_t k = 1 + (int32_t)dhs_rng_below(&rng, t.maxk);
            const int bad_ok = dhs_rng_below(&rng, 8) == 0;
            const int calls = 1 + (int32_t)dhs_rng_below(&rng, 2);
            for (int c = 0; c < calls; c++)
                a_call(&t, &rng, n_round, k, bad_ok, &cnt, first_loc, dhs_rng_below(&rng, 6) == 0);
            a_promote(&t, n_round, &cnt);
            t.err = 0;
            /* commit: history grows, the tail window moves on */
            for (int32_t b = 0; b < n_round; b++) {
                const int32_t r = order[b];
                t.n[r] += 1 + dhs_rng_below(&rng, t.rd_K[b]);
                if (t.n[r] + 16 >= t.max_rows * t.m) t.n[r] = t.max_rows * t.m - 16;
                int64_t lo = t.n[r] / t.m - dhs_rng_below(&rng, 6);
                if (lo > t.tail_lo[r]) t.tail_lo[r] = lo;
                toy_tail_write(&t, r);
            }
        }
        free(first_loc);
        toy_free(&t);
    }
    printf("spec: %d states, %ld calls, %ld entries, %ld distinct misses (%ld free fills, %ld CLOCK victims, %ld staged, "
           "%ld staging failures), %ld bad entries, %ld promoted\n",
           states, cnt.calls, cnt.entries, cnt.misses, cnt.free_fills, cnt.victims, cnt.staged, cnt.stage_fail, cnt.bad,
           cnt.promoted);
    printf("spec: %ld calls in direct mode, %ld entries there not served directly (DHS_ERR_STATE)\n", cnt.direct_calls,
           cnt.not_direct);
    CHECK(cnt.victims > 0 && cnt.staged > 0 && cnt.stage_fail > 0 && cnt.bad > 0 && cnt.promoted > 0 && cnt.free_fills > 0);
    CHECK(cnt.direct_calls > 0 && cnt.not_direct > 0);
}

/* =================================================================== B */
static void test_window(uint64_t seed)
{
    uint64_t rng = seed ^ 0xB;
    for (int it = 0; it < 200000; it++) {
        const uint32_t elig = (uint32_t)dhs_rng_next(&rng);
        const int32_t width = 1 + (int32_t)dhs_rng_below(&rng, 32), need = 1 + (int32_t)dhs_rng_below(&rng, 40);
        int32_t stop, got = dres_sweep_window(elig, width, need, &stop);
        int32_t g2 = 0, stop2 = width;
        for (int32_t i = 0; i < width; i++)
            if ((elig >> i) & 1u) {
                if (++g2 == need) { stop2 = i + 1; break; }
            }
        if (got != g2 || stop != stop2) {
            CHECKF(0, "window elig %08x width %d need %d: got %d stop %d, want %d stop %d", elig, width, need, got, stop, g2, stop2);
            break;
        }
    }
    CHECK(1);
}

/* =================================================================== C */
#define C_SRC 4
#define C_ROWB 64
typedef struct {
    int open;
    dhs_req h[2];
    uint64_t uid;
    uint32_t *ver[2]; /* [group][row] */
} creq;

typedef struct {
    dhs_arch arch;
    dhs_config cfg[2];
    dhs_backend *be[2];
    dhs_ctx *ctx[2];
    creq *rq;
    int32_t N, k, KK;
    int64_t rows_g[2];
    uint64_t next_uid, rng;
    uint8_t *buf;
    long calls, entries, compared, staged_calls, reclaims, waits, mismatches, early;
} cw;

static int32_t grp_m(int g) { return g == 0 ? 1 : 4; }

static void c_row(uint8_t *out, uint64_t uid, int32_t src, int64_t row, uint32_t ver) { th_fill_row(out, C_ROWB, uid, src, row, ver); }

static void c_open(cw *w, int32_t slot)
{
    creq *r = &w->rq[slot];
    const int64_t n = 50 + dhs_rng_below(&w->rng, 400);
    dhs_status s0 = dhs_request_open(w->ctx[0], n + 2000, &r->h[0]);
    dhs_status s1 = dhs_request_open(w->ctx[1], n + 2000, &r->h[1]);
    /* residency is the same code in both modes, but reader fences complete
       at different times (the host resolver waits for staging arenas), so an
       admission may differ: then neither keeps the request */
    if (s0 == DHS_WAIT || s1 == DHS_WAIT) w->waits++;
    if (s0 != DHS_OK || s1 != DHS_OK) {
        if (s0 == DHS_OK) dhs_request_close(w->ctx[0], r->h[0]);
        if (s1 == DHS_OK) dhs_request_close(w->ctx[1], r->h[1]);
        return;
    }
    r->uid = ++w->next_uid;
    for (int g = 0; g < 2; g++) memset(r->ver[g], 0, sizeof(uint32_t) * (size_t)w->rows_g[g]);
    const void *rows[C_SRC];
    for (int32_t src = 0; src < C_SRC; src++) {
        const int32_t m = grp_m(w->arch.sources[src].group);
        const int64_t nr = (n + m - 1) / m;
        uint8_t *b = w->buf + (size_t)src * (size_t)w->rows_g[0] * C_ROWB;
        for (int64_t row = 0; row < nr; row++) c_row(b + row * C_ROWB, r->uid, src, row, 0);
        rows[src] = b;
    }
    const unsigned fl = dhs_rng_below(&w->rng, 3) ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST;
    CHECK_ST(dhs_request_import(w->ctx[0], r->h[0], n, rows, fl), DHS_OK);
    CHECK_ST(dhs_request_import(w->ctx[1], r->h[1], n, rows, fl), DHS_OK);
    r->open = 1;
}

/* hot_g[g] > 0: group g's own hot-cache size (dhs_config.group_hot_rows), 0: hot_rows */
/* pub_cap > 0: the device context's publish list takes that many pieces before it is issued and waited
   for (dres_set_publish_cap), and the run must fill it some times */
/* early: each context ends a random half of its rounds with dhs_round_end_early (the device context's
   wait then moves to the next round begin, or to the import publish before it) */
static void test_cross(uint64_t seed, const int32_t *hot_g, double frac, int32_t pub_cap, int early)
{
    cw w;
    memset(&w, 0, sizeof w);
    w.rng = seed ^ 0xC;
    w.N = 6;
    w.k = 16;
    w.KK = 8;
    /* group 0: one m = 1 source read by an OWN and a REINDEX consumer;
       group 1: a compressed (m = 4) FOLLOW group of three sources */
    dhs_arch *a = &w.arch;
    memset(a, 0, sizeof *a);
    a->n_groups = 2;
    a->n_sources = C_SRC;
    a->sources[0] = (dhs_source_desc){C_ROWB, 1, 0};
    for (int i = 1; i < C_SRC; i++) a->sources[i] = (dhs_source_desc){C_ROWB, 4, 1};
    a->n_consumers = 5;
    a->consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a->consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_REINDEX, 0, 0};
    a->consumers[2] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 1, 1};
    a->consumers[3] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 2, 1};
    a->consumers[4] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 3, 1};
    a->index_key_bytes = 16;
    dhs_config c = dhs_config_default();
    c.max_requests = w.N;
    c.sel_k = w.k;
    c.spec_width = w.KK;
    c.hot_rows = 32; /* K * k = 128 > B: staging overflow */
    c.page_rows = 8;
    c.tail_rows = 64;
    c.max_rows = 2000 + 4000;
    c.repop_pages = 4;
    c.reserve_bytes = 2 * 8 * C_ROWB;
    for (int g = 0; g < 2; g++) c.group_hot_rows[g] = hot_g[g];
    dhs_sizes z;
    c.policy = DHS_POLICY_CLOCK;
    c.resolver = DHS_RESOLVER_DEVICE;
    CHECK_ST(dhs_config_sizes(a, &c, &z), DHS_OK);
    /* room for a few requests and some history: admissions wait, reclaim */
    c.device_bytes = z.staging_bytes + z.reserve_bytes + 4 * z.request_bytes + 120 * z.page_bytes;
    w.cfg[0] = c;
    w.cfg[0].resolver = DHS_RESOLVER_HOST;
    w.cfg[0].policy = DHS_POLICY_LRU;
    w.cfg[1] = c;
    for (int i = 0; i < 2; i++) {
        dhs_cpu_options co = {.async_delay = 2, .random_order = 0, .seed = seed};
        CHECK_ST(dhs_backend_cpu_create(&co, &w.be[i]), DHS_OK);
        CHECK_ST(dhs_ctx_create(a, &w.cfg[i], w.be[i], &w.ctx[i]), DHS_OK);
    }
    if (!w.ctx[0] || !w.ctx[1]) return;
    if (pub_cap > 0) dres_set_publish_cap(w.ctx[1], pub_cap);
    w.rows_g[0] = c.max_rows + 16;
    w.rows_g[1] = c.max_rows / 4 + 16;
    w.rq = calloc((size_t)w.N, sizeof(creq));
    for (int32_t i = 0; i < w.N; i++)
        for (int g = 0; g < 2; g++) w.rq[i].ver[g] = calloc((size_t)w.rows_g[g], sizeof(uint32_t));
    w.buf = aligned_alloc(64, (size_t)C_SRC * (size_t)w.rows_g[0] * C_ROWB);
    const int64_t per_b = (int64_t)w.KK * w.k;
    int32_t *sel[2], *psel = malloc(sizeof(int32_t) * (size_t)(w.N * per_b));
    int32_t *loc[2][2], *ploc[2];
    for (int g = 0; g < 2; g++) {
        sel[g] = malloc(sizeof(int32_t) * (size_t)(w.N * per_b));
        for (int i = 0; i < 2; i++) loc[g][i] = malloc(sizeof(int32_t) * (size_t)(w.N * C_SRC * per_b));
    }
    for (int i = 0; i < 2; i++) ploc[i] = malloc(sizeof(int32_t) * (size_t)(w.N * C_SRC * per_b));
    const long target = (long)(100000 * th_scale() * frac);
    long rounds = 0;
    while (w.calls < target) {
        rounds++;
        /* departures and arrivals between rounds */
        for (int32_t i = 0; i < w.N; i++) {
            creq *r = &w.rq[i];
            if (r->open && dhs_rng_below(&w.rng, 40) == 0) {
                CHECK_ST(dhs_request_close(w.ctx[0], r->h[0]), DHS_OK);
                CHECK_ST(dhs_request_close(w.ctx[1], r->h[1]), DHS_OK);
                r->open = 0;
            } else if (!r->open && dhs_rng_below(&w.rng, 3) == 0) {
                c_open(&w, i);
            }
        }
        int32_t slots[64], K[64], nb = 0;
        dhs_req h[2][64];
        for (int32_t i = 0; i < w.N; i++) {
            if (!w.rq[i].open || dhs_rng_below(&w.rng, 5) == 0) continue;
            int64_t n;
            dhs_request_positions(w.ctx[0], w.rq[i].h[0], &n);
            if (n + 16 > c.max_rows) continue;
            slots[nb] = i;
            K[nb] = 1 + (int32_t)dhs_rng_below(&w.rng, w.KK);
            h[0][nb] = w.rq[i].h[0];
            h[1][nb] = w.rq[i].h[1];
            nb++;
        }
        CHECK_ST(dhs_round_begin(w.ctx[0], nb, h[0], K), DHS_OK);
        CHECK_ST(dhs_round_begin(w.ctx[1], nb, h[1], K), DHS_OK);
        /* the block's rows, new versions, every source */
        for (int32_t i = 0; i < nb; i++) {
            creq *r = &w.rq[slots[i]];
            int64_t n;
            dhs_request_positions(w.ctx[0], r->h[0], &n);
            for (int g = 0; g < 2; g++) {
                const int64_t m = grp_m(g), lo = n / m, hi = (n + K[i] + m - 1) / m;
                for (int64_t row = lo; row < hi; row++) r->ver[g][row]++;
                for (int32_t src = 0; src < C_SRC; src++) {
                    if (a->sources[src].group != g) continue;
                    for (int64_t row = lo; row < hi; row++) c_row(w.buf + (row - lo) * C_ROWB, r->uid, src, row, r->ver[g][row]);
                    for (int x = 0; x < 2; x++) CHECK_ST(dhs_write_rows(w.ctx[x], r->h[x], src, lo, (int32_t)(hi - lo), w.buf), DHS_OK);
                }
            }
        }
        /* consumers: g0 OWN, g0 REINDEX, group_done(0), g1 OWN (+ FOLLOW) */
        for (int cons = 0; cons < 3; cons++) {
            const int32_t g = cons < 2 ? 0 : 1;
            if (cons == 2) {
                CHECK_ST(dhs_group_done(w.ctx[0], 0), DHS_OK);
                CHECK_ST(dhs_group_done(w.ctx[1], 0), DHS_OK);
            }
            if (cons == 1) {
                memcpy(psel, sel[0], sizeof(int32_t) * (size_t)(w.N * per_b));
                for (int x = 0; x < 2; x++) memcpy(ploc[x], loc[0][x], sizeof(int32_t) * (size_t)(w.N * C_SRC * per_b));
            }
            dhs_resolve_item it[2][64];
            for (int32_t i = 0; i < nb; i++) {
                creq *r = &w.rq[slots[i]];
                int64_t n;
                dhs_request_positions(w.ctx[0], r->h[0], &n);
                const int64_t m = grp_m(g);
                int32_t *sb = sel[g] + (int64_t)i * per_b;
                for (int32_t j = 0; j < K[i]; j++) {
                    const int64_t vis = (n + j + 1) / m;
                    for (int32_t e = 0; e < w.k; e++) {
                        int64_t u = dhs_rng_below(&w.rng, 100), s;
                        if (u < 6 || vis == 0) s = -1;
                        else if (u < 16 && e > 0) s = sb[(int64_t)j * w.k + dhs_rng_below(&w.rng, e)];
                        else if (u < 50) s = vis - 1 - dhs_rng_below(&w.rng, vis < 40 ? vis : 40);
                        else if (u < 75) s = dhs_rng_below(&w.rng, vis < 64 ? vis : 64);
                        else s = dhs_rng_below(&w.rng, vis);
                        sb[(int64_t)j * w.k + e] = (int32_t)s;
                    }
                }
                for (int x = 0; x < 2; x++)
                    it[x][i] = (dhs_resolve_item){r->h[x], K[i], sb, loc[g][x] + (int64_t)i * C_SRC * per_b};
            }
            for (int x = 0; x < 2; x++) CHECK_ST(dhs_resolve(w.ctx[x], g, w.k, nb, it[x]), DHS_OK);
            if (nb > 0) w.calls++; /* a call with no items changes nothing, resolve_calls included */
            /* the layout of loc[g][x]: item i at i * C_SRC * per_b, [si][K_i][k] inside */
            for (int32_t i = 0; i < nb; i++) {
                creq *r = &w.rq[slots[i]];
                const int64_t nent = (int64_t)K[i] * w.k;
                int32_t si = 0;
                for (int32_t src = 0; src < C_SRC; src++) {
                    if (a->sources[src].group != g) continue;
                    for (int64_t e = 0; e < nent; e++) {
                        const int32_t s = sel[g][(int64_t)i * per_b + e];
                        const int32_t l0 = loc[g][0][(int64_t)i * C_SRC * per_b + si * nent + e];
                        const int32_t l1 = loc[g][1][(int64_t)i * C_SRC * per_b + si * nent + e];
                        if (s < 0) {
                            if (l0 != -1 || l1 != -1) { w.mismatches++; CHECKF(0, "-1 gave %d / %d", l0, l1); }
                            continue;
                        }
                        uint8_t b0[C_ROWB], b1[C_ROWB], want[C_ROWB];
                        c_row(want, r->uid, src, s, r->ver[g][s]);
                        w.compared++;
                        if (dhs_read_location(w.ctx[0], src, l0, b0) != DHS_OK || dhs_read_location(w.ctx[1], src, l1, b1) != DHS_OK ||
                            memcmp(b0, b1, C_ROWB) || memcmp(b1, want, C_ROWB)) {
                            if (w.mismatches++ < 5)
                                CHECKF(0, "round %ld group %d slot %d source %d row %d: host loc %d, device loc %d: bytes differ",
                                       rounds, g, slots[i], src, s, l0, l1);
                        }
                        w.entries++;
                    }
                    si++;
                }
            }
            if (cons == 1) { /* the earlier consumer's locations still hold their rows (device) */
                for (int32_t i = 0; i < nb; i++) {
                    creq *r = &w.rq[slots[i]];
                    const int64_t nent = (int64_t)K[i] * w.k;
                    for (int64_t e = 0; e < nent; e++) {
                        const int32_t s = psel[(int64_t)i * per_b + e], l1 = ploc[1][(int64_t)i * C_SRC * per_b + e];
                        if (s < 0) continue;
                        uint8_t b1[C_ROWB], want[C_ROWB];
                        c_row(want, r->uid, 0, s, r->ver[0][s]);
                        if (dhs_read_location(w.ctx[1], 0, l1, b1) != DHS_OK || memcmp(b1, want, C_ROWB)) {
                            if (w.mismatches++ < 5) CHECKF(0, "reindex moved row %d of slot %d", s, slots[i]);
                        }
                    }
                }
            }
        }
        int32_t acc[64];
        for (int32_t i = 0; i < nb; i++) acc[i] = (int32_t)dhs_rng_below(&w.rng, K[i]);
        for (int x = 0; x < 2; x++) {
            const int e = early && dhs_rng_below(&w.rng, 2);
            w.early += e;
            CHECK_ST(e ? dhs_round_end_early(w.ctx[x], acc) : dhs_round_end(w.ctx[x], acc), DHS_OK);
        }
        if (rounds % 97 == 0) {
            CHECK_INV(w.ctx[0]);
            CHECK_INV(w.ctx[1]);
        }
    }
    dhs_stats s0, s1;
    dhs_get_stats(w.ctx[0], &s0);
    dhs_get_stats(w.ctx[1], &s1);
    printf("cross (group B %d/%d): %ld rounds, %ld resolve calls per context, %ld entries compared (host LRU vs device CLOCK-epoch): "
           "%ld mismatches; device census %llu/%llu/%llu, misses %llu, staging rows %llu (host %llu); waits %llu, reclaims %llu\n",
           hot_g[0] ? hot_g[0] : c.hot_rows, hot_g[1] ? hot_g[1] : c.hot_rows, rounds, w.calls, w.compared, w.mismatches,
           (unsigned long long)s1.census_direct, (unsigned long long)s1.census_hot,
           (unsigned long long)s1.census_host, (unsigned long long)s1.distinct_misses, (unsigned long long)s1.staging_rows,
           (unsigned long long)s0.staging_rows, (unsigned long long)s1.waits, (unsigned long long)s1.reclaims);
    CHECK(w.mismatches == 0);
    if (early) {
        printf("  early round ends: %ld of %ld\n", w.early, 2 * rounds);
        CHECK(w.early > 0 && w.early < 2 * rounds);
    }
    if (pub_cap > 0) {
        const int64_t full = dres_set_publish_cap(w.ctx[1], 0);
        printf("  publish list of %d pieces: issued full %" PRId64 " times\n", (int)pub_cap, full);
        CHECKF(full > 0, "a publish list of %d pieces never filled", (int)pub_cap);
    }
    CHECK(s1.resolve_calls == (uint64_t)w.calls);
    CHECK(s1.entries == s0.entries);
    CHECK(s1.staging_rows > 0 && s1.census_hot > 0 && s1.census_host > 0 && s1.census_direct > 0 && s1.reclaims > 0);
    CHECK_INV(w.ctx[0]);
    CHECK_INV(w.ctx[1]);
    for (int x = 0; x < 2; x++) {
        dhs_ctx_destroy(w.ctx[x]);
        dhs_backend_destroy(w.be[x]);
    }
    for (int32_t i = 0; i < w.N; i++)
        for (int g = 0; g < 2; g++) free(w.rq[i].ver[g]);
    free(w.rq);
    free(w.buf);
    free(psel);
    for (int g = 0; g < 2; g++) {
        free(sel[g]);
        for (int i = 0; i < 2; i++) free(loc[g][i]);
    }
    for (int i = 0; i < 2; i++) free(ploc[i]);
}

/* =================================================================== D */
/* two groups of one 64-byte source each; device resolver (CLOCK), 4-row pages, 16-row tails, history on host */
static void two_groups(dhs_arch *a, dhs_config *c, int32_t max_requests, int32_t k_max, int32_t hot_rows)
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
    c->max_requests = max_requests;
    c->sel_k = 8;
    c->spec_width = k_max;
    c->hot_rows = hot_rows;
    c->page_rows = 4;
    c->tail_rows = 16;
    c->max_rows = 256;
    c->device_bytes = 1 << 20;
    c->repop_pages = 0; /* history stays on host: selections reach the hot cache */
    c->resident_first = 0;
    c->resolver = DHS_RESOLVER_DEVICE;
    c->policy = DHS_POLICY_CLOCK;
}

static void test_api(void)
{
    dhs_arch a;
    dhs_config c;
    two_groups(&a, &c, 2, 2, 8);
    dhs_backend *be;
    dhs_ctx *ctx = NULL;
    dhs_sizes z;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    c.policy = DHS_POLICY_LRU;
    CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_config_sizes(&a, &c, &z), DHS_ERR_INVALID_ARG);
    c.policy = DHS_POLICY_CLOCK;
    { /* the device resolver moves bytes: a payload-free backend is refused (dhs_config_sizes cannot tell) */
        dhs_backend *pfb = NULL;
        const dhs_cpu_options pf = {.payload_free = 1};
        CHECK_ST(dhs_backend_cpu_create(&pf, &pfb), DHS_OK);
        CHECK_ST(dhs_ctx_create(&a, &c, pfb, &ctx), DHS_ERR_INVALID_ARG);
        CHECK(ctx == NULL);
        dhs_backend_destroy(pfb);
    }
    c.resolver = 7;
    CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_ERR_INVALID_ARG);
    c.resolver = DHS_RESOLVER_DEVICE;
    CHECK_ST(dhs_config_sizes(&a, &c, &z), DHS_OK);
    CHECK(z.resolver_bytes > 0);
    /* every allocation of a device-mode creation can fail: the error comes
       back and nothing stays allocated or accounted */
    long fired = 0;
    for (int kind = DHS_FAULT_HOST_ALLOC; kind <= DHS_FAULT_DEVICE_ALLOC; kind++)
        for (uint64_t nth = 1; nth < 400; nth++) {
            dhs_ctx *fc = NULL;
            dhs_backend_fault_at(be, (dhs_fault_kind)kind, nth);
            uint64_t f0 = dhs_backend_faults_injected(be);
            dhs_status fs = dhs_ctx_create(&a, &c, be, &fc);
            int injected = dhs_backend_faults_injected(be) > f0;
            dhs_backend_fault_at(be, (dhs_fault_kind)kind, 0);
            if (!injected) {
                CHECK_ST(fs, DHS_OK);
                dhs_ctx_destroy(fc);
                break;
            }
            fired++;
            CHECK_ST(fs, kind == DHS_FAULT_HOST_ALLOC ? DHS_ERR_NOMEM : DHS_ERR_DEVICE_NOMEM);
            CHECK(fc == NULL);
            CHECKF(be->host_bytes == 0 && be->dev_bytes == 0, "create fault %d/%llu left bytes accounted", kind, (unsigned long long)nth);
        }
    printf("device-mode ctx_create: %ld allocation fault points, each refused cleanly\n", fired);
    CHECK(fired > 10);
    CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_OK);
    if (!ctx) return;
    dhs_mem mem;
    dhs_get_mem(ctx, &mem);
    CHECKF(mem.device_bytes_allocated == mem.pool_bytes + z.resolver_bytes, "device bytes %llu != M %llu + resolver %llu",
           (unsigned long long)mem.device_bytes_allocated, (unsigned long long)mem.pool_bytes, (unsigned long long)z.resolver_bytes);
    dhs_resolver rv;
    CHECK(dhs_resolver_parse("device", &rv) == 0 && rv == DHS_RESOLVER_DEVICE && !strcmp(dhs_resolver_str(rv), "device"));
    CHECK(dhs_resolver_parse("gpu", &rv) != 0);
    /* two requests with 40 rows of history each */
    dhs_req r[2];
    uint8_t *rows = aligned_alloc(64, 64 * 64 * 2);
    for (int i = 0; i < 2; i++) {
        CHECK_ST(dhs_request_open(ctx, 100, &r[i]), DHS_OK);
        const void *rp[2] = {rows, rows + 64 * 64};
        for (int src = 0; src < 2; src++)
            for (int row = 0; row < 40; row++) th_fill_row(rows + (size_t)(src * 64 + row) * 64, 64, (uint64_t)i + 1, src, row, 0);
        CHECK_ST(dhs_request_import(ctx, r[i], 40, rp, DHS_IMPORT_HOST), DHS_OK);
    }
    int32_t K[2] = {2, 1};
    CHECK_ST(dhs_resolve_device(ctx, 0, 4, NULL, NULL, 0), DHS_ERR_NOT_IN_ROUND);
    CHECK_ST(dhs_round_begin(ctx, 2, r, K), DHS_OK);
    /* the block's rows through dhs_tail_locations: the engine writes them */
    uint8_t *pool = (uint8_t *)dhs_source_pool(ctx, 0);
    const uint32_t stride = dhs_pool_row_stride(ctx);
    for (int i = 0; i < 2; i++)
        for (int src = 0; src < 2; src++) {
            int32_t tl[2];
            CHECK_ST(dhs_tail_locations(ctx, r[i], src, 40, K[i], tl), DHS_OK);
            for (int j = 0; j < K[i]; j++) th_fill_row(pool + (uint64_t)tl[j] * stride, 64, (uint64_t)i + 1, src, 40 + j, 1);
        }
    int32_t tl[4];
    CHECK_ST(dhs_tail_locations(ctx, r[1], 0, 39, 1, tl), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_tail_locations(ctx, r[1], 0, 40, 2, tl), DHS_ERR_ROW_RANGE);
    /* device-path call: sel [N=2][spec_width=2][k=4], loc [nsrc=1][2][2][4] */
    int32_t sel[16], loc[16];
    const int32_t k = 4;
    const int32_t s0[8] = {0, 5, 5, -1, 40, 3, 41, 10}; /* query 1 sees row 41 */
    const int32_t s1[4] = {2, 40, -1, 7};
    for (int i = 0; i < 16; i++) sel[i] = 999; /* query 1 of request 1 is padding: never read */
    memcpy(sel, s0, sizeof s0);
    memcpy(sel + 8, s1, sizeof s1);
    CHECK_ST(dhs_resolve_device(ctx, 0, 0, sel, loc, 0), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_resolve_device(ctx, 0, 9, sel, loc, 0), DHS_ERR_K_TOO_LARGE);
    CHECK_ST(dhs_resolve_device(ctx, 2, k, sel, loc, 0), DHS_ERR_UNKNOWN_SOURCE);
    CHECK_ST(dhs_resolve_device(ctx, 0, k, sel, loc, 0), DHS_OK);
    for (int b = 0; b < 2; b++)
        for (int e = 0; e < 8; e++) {
            const int32_t s = b == 0 ? s0[e] : (e < 4 ? s1[e] : -1), l = loc[b * 8 + e];
            if (s < 0) { CHECKF(l == -1, "entry %d/%d: %d", b, e, l); continue; }
            uint8_t want[64];
            th_fill_row(want, 64, (uint64_t)b + 1, 0, s, s >= 40 ? 1 : 0);
            CHECKF(l >= 0 && !memcmp(pool + (uint64_t)l * stride, want, 64), "device call entry %d/%d row %d at %d", b, e, s, l);
        }
    /* a bad entry: -1 there, the others resolved, reported at round end */
    sel[1] = 41; /* query 0 of request 0 cannot see row 41 */
    sel[2] = -7;
    CHECK_ST(dhs_resolve_device(ctx, 0, k, sel, loc, 0), DHS_OK);
    CHECK(loc[1] == -1 && loc[2] == -1 && loc[0] >= 0 && loc[4] >= 0);
    int64_t n0;
    int32_t acc[2] = {1, 0};
    CHECK_ST(dhs_round_end(ctx, acc), DHS_ERR_NOT_VISIBLE);
    CHECK_ST(dhs_request_positions(ctx, r[0], &n0), DHS_OK);
    CHECK(n0 == 40); /* nothing committed */
    CHECK_INV(ctx);
    CHECK_ST(dhs_round_end(ctx, acc), DHS_OK); /* the word was cleared: commits */
    CHECK_ST(dhs_request_positions(ctx, r[0], &n0), DHS_OK);
    CHECK(n0 == 42);
    CHECK_INV(ctx);
    /* staging owner: group 0 overflows (K * k = 16 > B = 8), then group 1
       overflows before group 0 was declared done */
    int32_t K2[2] = {2, 2};
    for (int pass = 0; pass < 2; pass++) {
        CHECK_ST(dhs_round_begin(ctx, 2, r, K2), DHS_OK);
        for (int i = 0; i < 2; i++) {
            int64_t n;
            dhs_request_positions(ctx, r[i], &n);
            for (int src = 0; src < 2; src++) {
                uint8_t blk[2 * 64];
                for (int j = 0; j < 2; j++) th_fill_row(blk + j * 64, 64, (uint64_t)i + 1, src, n + j, 2);
                CHECK_ST(dhs_write_rows(ctx, r[i], src, n, 2, blk), DHS_OK);
            }
        }
        int32_t lg[32];
        for (int g = 0; g < 2; g++) {
            int32_t sgl[32]; /* 16 distinct rows < 40 per request: the union exceeds B = 8 */
            for (int b = 0; b < 2; b++) /* [b][j][i] with k = 8, j = 0..1 */
                for (int j = 0; j < 2; j++)
                    for (int e = 0; e < 8; e++) sgl[(b * 2 + j) * 8 + e] = (int32_t)(20 * j + ((e * 3 + g * 7 + b) % 20) % 20);
            if (pass == 1 && g == 1) CHECK_ST(dhs_group_done(ctx, 0), DHS_OK);
            CHECK_ST(dhs_resolve_device(ctx, g, 8, sgl, lg, 0), DHS_OK);
        }
        int32_t acc2[2] = {0, 0};
        dhs_stats st;
        dhs_get_stats(ctx, &st);
        CHECKF(st.staging_rows > 0, "no staging in pass %d", pass);
        CHECK_ST(dhs_round_end(ctx, acc2), pass == 0 ? DHS_ERR_STAGING : DHS_OK);
        if (pass == 0) CHECK_ST(dhs_round_end(ctx, acc2), DHS_OK);
        CHECK_INV(ctx);
    }
    CHECK_ST(dhs_request_close(ctx, r[0]), DHS_OK);
    CHECK_INV(ctx);
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
    free(rows);
}

/* =================================================================== E */
static void verify_case(const char *name, verify_opts o, int expect_violation)
{
    verify_result r;
    o.resolver = DHS_RESOLVER_DEVICE;
    int rc = verify_run(&o, &r);
    printf("verify %-28s seed %llu: rc %d, %llu entries, census %llu/%llu/%llu, misses %llu, staged %llu, reclaims %llu, "
           "faults %llu, violations %llu %s\n",
           name, (unsigned long long)o.seed, rc, (unsigned long long)r.st.entries, (unsigned long long)r.st.census_direct,
           (unsigned long long)r.st.census_hot, (unsigned long long)r.st.census_host,
           (unsigned long long)r.st.distinct_misses, (unsigned long long)r.st.staging_rows,
           (unsigned long long)r.st.reclaims, (unsigned long long)r.faults_injected, (unsigned long long)r.violations,
           r.first_violation);
    if (expect_violation) {
        CHECKF(rc == 1 && r.violations > 0, "%s: the corrupted location was not caught", name);
        return;
    }
    CHECKF(rc == 0 && r.violations == 0 && r.lost_rows == 0, "%s: %s", name, r.first_violation);
    CHECKF(r.st.census_direct > 0 && r.st.census_hot > 0 && r.st.census_host > 0, "%s census share zero", name);
    CHECKF(r.st.host_rows_copied == r.st.distinct_misses && r.st.resolve_calls > 0, "%s device counters", name);
    if (o.faults > 0) CHECKF(r.faults_injected > 0, "%s no fault injected", name);
    if (o.pressure) CHECKF(r.st.reclaims > 0, "%s no reclaim", name);
    if (o.spec > 1) CHECKF(r.st.staging_rows > 0 && r.st.rejected_rows > 0, "%s no staging / no rejection", name);
}

/* dhs_round_end launches promotion only for groups whose last resolve the
   host saw was not followed by dhs_group_done, and keeps that mark across
   rounds (a CUDA graph replays resolves the host saw once): counted on a
   copy of the CPU backend's ops (counted_backend) */
static const dhs_backend_ops *g_real_ops;
static long g_promote, g_promote_all, g_publish;
static dhs_status count_publish(dhs_backend *be, void *dst, const void *src, size_t bytes)
{
    g_publish++;
    return g_real_ops->publish(be, dst, src, bytes);
}
/* a publish list counts as one publish call (one launch on CUDA); its pieces must be cut at 2 KiB */
static long g_pub_pieces, g_pub_bad;
static long g_pub_fail_in; /* > 0: the publish list call that many calls from now fails, copying nothing */
static dhs_status count_publish_list(dhs_backend *be, const dhs_pub *list, int32_t n)
{
    if (g_pub_fail_in > 0 && --g_pub_fail_in == 0) return DHS_ERR_BACKEND;
    g_publish++;
    g_pub_pieces += n;
    for (int32_t i = 0; i < n; i++) g_pub_bad += list[i].bytes == 0 || list[i].bytes > 2048;
    return g_real_ops->publish_list(be, list, n);
}
static dhs_status count_promote(dhs_backend *be, const dres_state *st, const dres_round *rd, int payload)
{
    g_promote++;
    return g_real_ops->dres_promote(be, st, rd, payload);
}
static dhs_status count_promote_all(dhs_backend *be, const dres_state *sd, const dres_state *sh, int32_t G,
                                    const dres_round *rd, int payload)
{
    g_promote_all++;
    return g_real_ops->dres_promote_all(be, sd, sh, G, rd, payload);
}
static long g_host_allocs;
static size_t g_host_alloc_bytes;
static dhs_status count_host_alloc(dhs_backend *be, size_t bytes, void **out)
{
    g_host_allocs++;
    g_host_alloc_bytes += bytes;
    return g_real_ops->host_alloc(be, bytes, out);
}

static long g_syncs;
static dhs_status count_sync(dhs_backend *be)
{
    g_syncs++;
    return g_real_ops->sync_compute(be);
}

static long g_waits;
static dhs_status count_wait(dhs_backend *be, const dres_state *st, const dres_round *rd, int32_t si)
{
    g_waits++;
    return g_real_ops->dres_wait(be, st, rd, si);
}

/* reader tickets recorded (the last one kept) and ticket waits (the first ticket waited for since
   g_first_wait was set to 0 kept) */
static long g_records, g_tk_waits;
static dhs_ticket g_last_record, g_first_wait;
static dhs_status count_record(dhs_backend *be, dhs_ticket *t)
{
    const dhs_status s = g_real_ops->record_readers(be, t);
    g_records++;
    g_last_record = *t;
    return s;
}

static dhs_status count_tk_wait(dhs_backend *be, dhs_ticket t)
{
    g_tk_waits++;
    if (!g_first_wait) g_first_wait = t;
    return g_real_ops->wait(be, t);
}

/* a CPU backend whose promotions, publishes, host allocations and split-queue waits are counted
   (counted_backend_destroy puts the real ops back before destroying it) */
static dhs_backend *counted_backend_opt(const dhs_cpu_options *opt)
{
    static dhs_backend_ops counted;
    dhs_backend *be = NULL;
    CHECK_ST(dhs_backend_cpu_create(opt, &be), DHS_OK);
    if (!be) return NULL;
    g_real_ops = be->ops;
    counted = *be->ops;
    counted.dres_promote = count_promote;
    counted.dres_promote_all = count_promote_all;
    counted.publish = count_publish;
    counted.publish_list = count_publish_list;
    counted.host_alloc = count_host_alloc;
    counted.dres_wait = count_wait;
    counted.sync_compute = count_sync;
    counted.record_readers = count_record;
    counted.wait = count_tk_wait;
    be->ops = &counted;
    return be;
}

static dhs_backend *counted_backend(void) { return counted_backend_opt(NULL); }

static void counted_backend_destroy(dhs_backend *be)
{
    be->ops = g_real_ops;
    dhs_backend_destroy(be);
}

/* a two_groups context (k_max 1, hot 4) of max_requests slots on counted_backend(); NULL (nothing held)
   when either fails */
static dhs_ctx *counted_two_groups_opt(int32_t max_requests, dhs_backend **be, const dhs_cpu_options *opt)
{
    dhs_arch a;
    dhs_config c;
    two_groups(&a, &c, max_requests, 1, 4);
    dhs_ctx *ctx = NULL;
    if (!(*be = counted_backend_opt(opt))) return NULL;
    CHECK_ST(dhs_ctx_create(&a, &c, *be, &ctx), DHS_OK);
    if (!ctx) counted_backend_destroy(*be);
    return ctx;
}

static dhs_ctx *counted_two_groups(int32_t max_requests, dhs_backend **be)
{
    return counted_two_groups_opt(max_requests, be, NULL);
}

/* request uid 1 of 100 positions opened in ctx (two one-source groups) with 40 imported host rows of
   version 0; returns the rows' buffer (the caller frees it) */
static uint8_t *import_40(dhs_ctx *ctx, dhs_req *r)
{
    uint8_t *rows = aligned_alloc(64, 64 * 64 * 2);
    const void *rp[2] = {rows, rows + 64 * 64};
    for (int src = 0; src < 2; src++)
        for (int row = 0; row < 40; row++) th_fill_row(rows + (size_t)(src * 64 + row) * 64, 64, 1, src, row, 0);
    CHECK_ST(dhs_request_open(ctx, 100, r), DHS_OK);
    CHECK_ST(dhs_request_import(ctx, *r, 40, rp, DHS_IMPORT_HOST), DHS_OK);
    return rows;
}

static void test_round_end_pending(void)
{
    dhs_backend *be;
    dhs_ctx *ctx = counted_two_groups(1, &be);
    if (!ctx) return;
    dhs_req r;
    uint8_t *rows = import_40(ctx, &r);
    /* 8 distinct host rows per call: 4 to the hot cache, 4 staged */
    int32_t sel[8], loc[8], K = 1, acc = 0;
    int64_t n = 40;
    /* resolves[g] done[g] per round; want: promote_all launched at round end */
    const struct { int res0, res1, done0, done1, want_all; } sc[] = {
        {1, 1, 1, 1, 0}, /* every group declared done: no launch */
        {1, 1, 1, 0, 1}, /* group 1 left to the round end */
        {0, 0, 0, 0, 1}, /* no host call (a graph replay of the round before): group 1 still pending */
        {0, 0, 0, 1, 0}, /* group 1 declared done: nothing pending */
        {0, 0, 0, 0, 0},
        {1, 0, 0, 0, 1}, /* a resolve of group 0 only */
    };
    for (size_t t = 0; t < sizeof sc / sizeof sc[0]; t++) {
        const long pub0 = g_publish;
        CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
        /* the import published the request's tables (no round was open): a round publishes its descriptor only */
        CHECKF(g_publish - pub0 == 1, "round %zu: %ld publishes at round begin, want 1 (the descriptor)", t, g_publish - pub0);
        CHECKF(g_pub_bad == 0 && g_pub_pieces > 0, "round %zu: %ld list pieces, %ld empty or over 2 KiB", t, g_pub_pieces,
               g_pub_bad);
        for (int src = 0; src < 2; src++) {
            int32_t tl;
            CHECK_ST(dhs_tail_locations(ctx, r, src, n, 1, &tl), DHS_OK);
            th_fill_row((uint8_t *)dhs_source_pool(ctx, src) + (uint64_t)tl * dhs_pool_row_stride(ctx), 64, 1, src, n, 0);
        }
        for (int i = 0; i < 8; i++) sel[i] = (int32_t)((t * 8 + (size_t)i) % 40);
        const int res[2] = {sc[t].res0, sc[t].res1}, done[2] = {sc[t].done0, sc[t].done1};
        for (int g = 0; g < 2; g++) {
            if (res[g]) CHECK_ST(dhs_resolve_device(ctx, g, 8, sel, loc, 0), DHS_OK);
            if (done[g]) CHECK_ST(dhs_group_done(ctx, g), DHS_OK);
        }
        const long p0 = g_promote_all;
        CHECK_ST(dhs_round_end(ctx, &acc), DHS_OK);
        CHECKF(g_promote_all - p0 == sc[t].want_all, "scenario %zu: %ld promotion launches at round end, want %d", t,
               g_promote_all - p0, sc[t].want_all);
        CHECK_INV(ctx);
        n++;
    }
    CHECK(g_promote > 0);
    dhs_stats st;
    dhs_get_stats(ctx, &st);
    CHECK(st.staging_rows > 0);
    dhs_ctx_destroy(ctx);
    counted_backend_destroy(be);
    free(rows);
}

/* dhs_round_end_early: the round end's wait moves to the next round begin. An early end makes no
   compute-stream synchronisation and commits; the next dhs_round_begin waits before anything else. A
   bad entry of an early-ended round is reported by the next dhs_round_begin (no round opened, nothing
   changed, the retry opens it) or by dhs_sync, and the round stays committed. What the begin waits for:
   with late fences (async_delay > 0), the ticket the early end recorded before its promotion, and no
   compute-stream synchronisation; without (the backend's tickets are 0, complete at once), one
   synchronisation of the compute stream. */
/* one round of request r (K = 1) on the counted two-group context: tail rows written, 8 selections per group
   (one not visible to the query when bad), then dhs_round_end_early; the round begin is the caller's */
static void early_round(dhs_ctx *ctx, dhs_req r, int64_t *n, size_t t, int bad, dhs_ticket *early_t)
{
    /* loc[si][b][j][i] spans every round position of the context (up to 64 here), sel only the round's */
    static int32_t loc[4 * 64 * 8];
    int32_t sel[8], acc = 0;
    for (int src = 0; src < 2; src++) {
        int32_t tl;
        CHECK_ST(dhs_tail_locations(ctx, r, src, *n, 1, &tl), DHS_OK);
        th_fill_row((uint8_t *)dhs_source_pool(ctx, src) + (uint64_t)tl * dhs_pool_row_stride(ctx), 64, 1, src, *n, 0);
    }
    for (int i = 0; i < 8; i++) sel[i] = (int32_t)((t * 8 + (size_t)i) % 40);
    if (bad) sel[3] = (int32_t)*n + 5; /* not visible to the query at n */
    for (int g = 0; g < 2; g++) {
        CHECK_ST(dhs_resolve_device(ctx, g, 8, sel, loc, 0), DHS_OK);
        CHECK(bad ? loc[3] == -1 : loc[3] >= 0);
        if (g == 0) CHECK_ST(dhs_group_done(ctx, 0), DHS_OK); /* its staging serves group 1 */
    }
    const long s0 = g_syncs, w0 = g_tk_waits, p0 = g_promote_all, r0 = g_records;
    CHECK_ST(dhs_round_end_early(ctx, &acc), DHS_OK);
    CHECKF(g_syncs == s0, "round %zu: the early end synchronised %ld times", t, g_syncs - s0);
    CHECKF(g_tk_waits == w0, "round %zu: the early end waited for %ld tickets", t, g_tk_waits - w0);
    CHECK(g_promote_all - p0 == 1); /* the promotion is launched as by dhs_round_end */
    CHECK(g_records - r0 == 1);       /* and its fence, before it */
    *early_t = g_last_record;
    (*n)++;
    int64_t pos;
    CHECK_ST(dhs_request_positions(ctx, r, &pos), DHS_OK);
    CHECKF(pos == *n, "round %zu: %lld positions after the early end, want %lld", t, (long long)pos, (long long)*n);
}

/* Rounds ended with dhs_round_end_early, each next round begin counted. Without late fences (tickets 0) the
   begin synchronises the stream once. With late fences (async_delay 2: a fence completes two round
   begins after its record) the begin never synchronises and never waits for the early end's fence (the
   step): it waits first for the fence the round begin before it recorded after its publish list (for the
   early end's own fence when that begin did not follow an early end), and that early fence is still
   outstanding after it. A bad entry in an early-ended round (kind 1) is reported by the next round begin
   or, at the latest, by the one after the next early end (one round late: with async_delay 2 it is), with
   nothing opened; kind 2 is reported by dhs_sync. dhs_check_invariants runs after every call: it must
   not change when a word is reported. */
static void test_round_end_early(int32_t async_delay, int sync_in_round)
{
    dhs_backend *be;
    const dhs_cpu_options opt = {.async_delay = async_delay};
    dhs_ctx *ctx = counted_two_groups_opt(sync_in_round ? 64 : 1, &be, &opt);
    if (!ctx) return;
    /* sync_in_round: every round begin's publish list fills (64 slots, a list of one piece: the descriptor
       takes several): the round begin synchronises the stream after its check, which reads the word and
       empties the queue of early-ended rounds. A set word must still be reported by the round
       begin after the next early end, not left behind the fences queued after that read. */
    if (sync_in_round) dres_set_publish_cap(ctx, 1);
    dhs_req r;
    uint8_t *rows = import_40(ctx, &r);
    int32_t K = 1, acc = 0;
    int64_t n = 40, pos;
    dhs_ticket early_t = 0, pub_t = 0; /* the last early end's fence; the fence the last round begin recorded */
    int prev_early = 0, lags = 0;
    static const int kind[] = {0, 0, 1, 0, 0, 2, 0, 1, 0};
    for (size_t t = 0; t < sizeof kind / sizeof kind[0]; t++) {
        const long s0 = g_syncs, w0 = g_tk_waits, r0 = g_records;
        g_first_wait = 0;
        CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
        if (prev_early && !sync_in_round) { /* the early end before it left its wait here */
            const long want = async_delay ? 0 : 1;
            CHECKF(g_syncs - s0 == want, "round %zu (delay %d): %ld syncs in the round begin after an early end, want %ld",
                   t, async_delay, g_syncs - s0, want);
            if (async_delay) {
                const dhs_ticket guard = pub_t ? pub_t : early_t;
                CHECKF(g_tk_waits - w0 >= 1 && g_first_wait == guard,
                       "round %zu: the begin waited %ld times, first for ticket %llu, want %llu (%s)", t, g_tk_waits - w0,
                       (unsigned long long)g_first_wait, (unsigned long long)guard,
                       pub_t ? "the last round begin's publish fence" : "the early end's fence");
                if (pub_t && async_delay >= 2) /* (with 1 the begin's own tick completes it) */
                    CHECKF(!be->ops->done(be, early_t), "round %zu: the begin completed the early end's fence %llu", t,
                           (unsigned long long)early_t);
                /* the fence after its own list, which the next begin waits for */
                CHECKF(g_records - r0 >= 1 && g_last_record != 0, "round %zu: the begin recorded no fence after its list", t);
            }
        }
        pub_t = prev_early && async_delay ? g_last_record : 0;
        CHECK_INV(ctx);
        early_round(ctx, r, &n, t, kind[t] != 0, &early_t);
        CHECK(async_delay ? early_t != 0 : early_t == 0);
        prev_early = 1;
        CHECK_INV(ctx);
        if (kind[t] == 0) continue;
        if (kind[t] == 2) {
            CHECK_ST(dhs_sync(ctx), DHS_ERR_NOT_VISIBLE);
            CHECK_ST(dhs_sync(ctx), DHS_OK); /* the word was cleared */
            CHECK_INV(ctx);
            prev_early = 0;
            pub_t = 0;
            continue;
        }
        /* kind 1: the next begin reports it, or opens a round (no more than once) whose early end is
           followed by a begin that must */
        int lag = 0;
        for (;;) {
            const dhs_status bs = dhs_round_begin(ctx, 1, &r, &K);
            CHECK_INV(ctx);
            if (bs == DHS_ERR_NOT_VISIBLE) break;
            CHECKF(bs == DHS_OK && lag == 0, "round %zu: round begin %d after the bad early-ended round: %s", t, lag + 1,
                   dhs_status_str(bs));
            if (bs != DHS_OK || lag > 0) break;
            lag++;
            early_round(ctx, r, &n, t, 0, &early_t);
            CHECK_INV(ctx);
        }
        lags += lag;
        CHECK_ST(dhs_round_end(ctx, &acc), DHS_ERR_STATE); /* no round was opened */
        CHECK_ST(dhs_request_positions(ctx, r, &pos), DHS_OK);
        CHECK(pos == n);
        CHECK_INV(ctx);
        prev_early = 0; /* the report synchronised */
        pub_t = 0;
    }
    /* late fences: a begin after a bad round did not wait for its step (the word came one round late; the
       bad round after two early ends is reported at once: an older fence completed, and the CPU backend's
       kernels set the word when called); fences 0: never late */
    CHECKF(sync_in_round ? 1 : async_delay >= 2 ? lags >= 1 : async_delay == 0 ? lags == 0 : 1,
           "delay %d: %d bad rounds reported one round late, want %s", async_delay, lags,
           async_delay >= 2 ? "at least 1" : "none");
    if (sync_in_round) {
        const int64_t full = dres_set_publish_cap(ctx, 0);
        CHECKF(full > 0, "delay %d: no publish list was issued full", async_delay);
        printf("round end early, delay %d, synchronisations inside rounds: %lld full publish lists, %d reported late\n",
               async_delay, (long long)full, lags);
    }
    /* the last round was ended early: the context is destroyed with its wait outstanding */
    dhs_ctx_destroy(ctx);
    counted_backend_destroy(be);
    free(rows);
}

/* A publish that fails leaves nothing stale on the device: the tables it would have sent go out with the
   next one. Request 0's import publishes its tables outside a round and that publish fails; round 0 runs
   it alone. Before round 1, request 1's import publish fails too, and so does round 1's first round begin
   (the round is not opened, nothing changed), which had listed request 1's tables; the retried round
   begin must send them. dhs_check_invariants inside the open round compares the device's tables with the
   host's (I3), and every resolved location is checked byte for byte. */
static void test_publish_failure(void)
{
    dhs_backend *be;
    dhs_ctx *ctx = counted_two_groups(2, &be);
    if (!ctx) return;
    uint8_t *rows = aligned_alloc(64, 64 * 64 * 2);
    const void *rp[2] = {rows, rows + 64 * 64};
    dhs_req r[2];
    int64_t n[2] = {40, 36};
    int32_t K[2] = {1, 1}, acc[2] = {0, 0}, sel[2][8], loc[2][8];
    for (int t = 0; t < 4; t++) {
        const int nr = t == 0 ? 1 : 2;
        if (t <= 1) { /* request t arrives; the import's publish of its tables fails */
            for (int src = 0; src < 2; src++)
                for (int row = 0; row < 64; row++)
                    th_fill_row(rows + (size_t)(src * 64 + row) * 64, 64, (uint64_t)t + 1, src, row, 0);
            CHECK_ST(dhs_request_open(ctx, 100, &r[t]), DHS_OK);
            g_pub_fail_in = 1;
            CHECK_ST(dhs_request_import(ctx, r[t], n[t], rp, DHS_IMPORT_HOST), DHS_OK);
            CHECKF(g_pub_fail_in == 0, "request %d: the import made no publish list call", t);
            CHECK_INV(ctx);
        }
        if (t == 1) { /* the round begin's publish fails: the round stays closed */
            g_pub_fail_in = 1;
            CHECK_ST(dhs_round_begin(ctx, nr, r, K), DHS_ERR_BACKEND);
            CHECKF(g_pub_fail_in == 0, "round %d: the round begin made no publish list call", t);
            CHECK_INV(ctx);
        }
        CHECK_ST(dhs_round_begin(ctx, nr, r, K), DHS_OK);
        CHECK_INV(ctx); /* the device's tables of the round's requests equal the host's */
        for (int q = 0; q < nr; q++)
            for (int src = 0; src < 2; src++) {
                int32_t tl;
                CHECK_ST(dhs_tail_locations(ctx, r[q], src, n[q], 1, &tl), DHS_OK);
                th_fill_row((uint8_t *)dhs_source_pool(ctx, src) + (uint64_t)tl * dhs_pool_row_stride(ctx), 64,
                            (uint64_t)q + 1, src, n[q], 0);
            }
        for (int g = 0; g < 2; g++) {
            for (int q = 0; q < nr; q++)
                for (int i = 0; i < 8; i++) sel[q][i] = (int32_t)((t * 8 + i * 5 + q) % n[q]);
            const dhs_resolve_item items[2] = {{r[0], 1, sel[0], loc[0]}, {r[1], 1, sel[1], loc[1]}};
            CHECK_ST(dhs_resolve(ctx, g, 8, nr, items), DHS_OK);
            for (int q = 0; q < nr; q++)
                for (int i = 0; i < 8; i++)
                    CHECKF(th_loc_holds(ctx, g, 64, loc[q][i], (uint64_t)q + 1, sel[q][i], 0),
                           "round %d group %d request %d: row %d at location %d does not hold its bytes", t, g, q,
                           sel[q][i], loc[q][i]);
            CHECK_ST(dhs_group_done(ctx, g), DHS_OK);
        }
        CHECK_ST(dhs_round_end(ctx, acc), DHS_OK);
        CHECK_INV(ctx);
        for (int q = 0; q < nr; q++) n[q]++;
    }
    dhs_ctx_destroy(ctx);
    counted_backend_destroy(be);
    free(rows);
}

/* dhs_resolve_device with DHS_RESOLVE_SPLIT: the locations, the state and (once joined) the pool bytes equal those of
   dhs_resolve_device on a twin context, while the rows of sources 1.. land only at dhs_source_wait or
   at one of the joins (the last source's wait, dhs_group_done, dhs_round_end, a later resolve of the
   group): on the CPU backend they are deferred, so an engine that reads a source without waiting reads
   stale bytes. Group 0 has three sources (FOLLOW), group 1 one. */
static void split_arch(dhs_arch *a, dhs_config *c)
{
    two_groups(a, c, 2, 1, 4);
    a->n_sources = 4;
    a->sources[1] = (dhs_source_desc){64, 1, 0};
    a->sources[2] = (dhs_source_desc){64, 1, 0};
    a->sources[3] = (dhs_source_desc){64, 1, 1};
    a->n_consumers = 4;
    a->consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a->consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 1, 0};
    a->consumers[2] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 2, 0};
    a->consumers[3] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 3, 1};
}

/* entries of the group's source si (loc layout of dhs_resolve_device) whose pool bytes differ from the row */
static int stale_rows(const dhs_ctx *ctx, const int32_t *loc, const int32_t *sel, int32_t N, int32_t nb, int32_t k,
                      int32_t src, int32_t si, const uint64_t *uid)
{
    int bad = 0;
    for (int32_t b = 0; b < nb; b++)
        for (int32_t i = 0; i < k; i++) {
            const int32_t l = loc[((int64_t)si * N + b) * k + i];
            if (l < 0) continue;
            uint8_t want[64];
            th_fill_row(want, 64, uid[b], src, sel[b * k + i], 0);
            if (memcmp((const uint8_t *)dhs_source_pool(ctx, src) + (uint64_t)l * dhs_pool_row_stride(ctx), want, 64))
                bad++;
        }
    return bad;
}

static void test_split_resolve(void)
{
    dhs_arch a;
    dhs_config c;
    split_arch(&a, &c);
    dhs_backend *be = counted_backend(), *be2 = NULL;
    if (!be) return;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be2), DHS_OK);
    dhs_ctx *A = NULL, *B = NULL; /* A: split; B: dhs_resolve_device */
    CHECK_ST(dhs_ctx_create(&a, &c, be, &A), DHS_OK);
    CHECK_ST(dhs_ctx_create(&a, &c, be2, &B), DHS_OK);
    if (!A || !B) return;
    enum { H = 40, K = 8 };
    uint8_t *rows = aligned_alloc(64, (size_t)4 * H * 64);
    const void *rp[4];
    dhs_req ra[2], rb[2];
    const uint64_t uid[2] = {1, 2};
    for (int q = 0; q < 2; q++) {
        for (int src = 0; src < 4; src++) {
            rp[src] = rows + (size_t)src * H * 64;
            for (int row = 0; row < H; row++) th_fill_row(rows + ((size_t)src * H + row) * 64, 64, uid[q], src, row, 0);
        }
        CHECK_ST(dhs_request_open(A, 100, &ra[q]), DHS_OK);
        CHECK_ST(dhs_request_open(B, 100, &rb[q]), DHS_OK);
        CHECK_ST(dhs_request_import(A, ra[q], H, rp, DHS_IMPORT_HOST), DHS_OK);
        CHECK_ST(dhs_request_import(B, rb[q], H, rp, DHS_IMPORT_HOST), DHS_OK);
    }
    /* outside a round; a bad group or source; a one-source group */
    CHECK_ST(dhs_source_wait(A, 0, 1), DHS_ERR_NOT_IN_ROUND);
    int32_t Ks[2] = {1, 1}, acc[2] = {0, 0};
    int32_t sel[2 * K], la[3 * 2 * K], lb[3 * 2 * K], l1[2 * K];
    int64_t n = H;
    long stale_seen = 0; /* rows of sources 1 and 2 found stale before their wait, over all rounds */
    /* how group 0's copy queue is joined in round t: 0 the last source's wait, 1 dhs_group_done, 2 the round
       end, 3 a second resolve of the group */
    for (int t = 0; t < 8; t++) {
        const int how = t % 4;
        CHECK_ST(dhs_round_begin(A, 2, ra, Ks), DHS_OK);
        CHECK_ST(dhs_round_begin(B, 2, rb, Ks), DHS_OK);
        if (t == 0) {
            CHECK_ST(dhs_source_wait(A, 2, 0), DHS_ERR_UNKNOWN_SOURCE);
            CHECK_ST(dhs_source_wait(A, 0, 3), DHS_ERR_UNKNOWN_SOURCE);
            CHECK_ST(dhs_source_wait(A, 1, 1), DHS_ERR_UNKNOWN_SOURCE);
            CHECK_ST(dhs_source_wait(A, 0, -1), DHS_ERR_UNKNOWN_SOURCE);
            CHECK_ST(dhs_source_wait(A, 0, 2), DHS_OK); /* nothing outstanding: a no-op */
            CHECK_ST(dhs_resolve_device(A, 0, K, NULL, la, DHS_RESOLVE_SPLIT), DHS_ERR_INVALID_ARG);
            CHECK_ST(dhs_resolve_device(A, 3, K, sel, la, DHS_RESOLVE_SPLIT), DHS_ERR_UNKNOWN_SOURCE);
        }
        for (int q = 0; q < 2; q++)
            for (int src = 0; src < 4; src++) {
                int32_t tl;
                CHECK_ST(dhs_tail_locations(A, ra[q], src, n, 1, &tl), DHS_OK);
                th_fill_row((uint8_t *)dhs_source_pool(A, src) + (uint64_t)tl * 64, 64, uid[q], src, n, 0);
                CHECK_ST(dhs_tail_locations(B, rb[q], src, n, 1, &tl), DHS_OK);
                th_fill_row((uint8_t *)dhs_source_pool(B, src) + (uint64_t)tl * 64, 64, uid[q], src, n, 0);
            }
        /* 8 rows per request, some repeated from the round before (hot hits), some new (misses) */
        for (int q = 0; q < 2; q++)
            for (int i = 0; i < K; i++) sel[q * K + i] = (int32_t)((t * 5 + i * 3 + q * 7) % H);
        dhs_stats s0;
        dhs_get_stats(B, &s0);
        const long w0 = g_waits;
        CHECK_ST(dhs_resolve_device(A, 0, K, sel, la, DHS_RESOLVE_SPLIT), DHS_OK);
        CHECK_ST(dhs_resolve_device(B, 0, K, sel, lb, 0), DHS_OK);
        CHECK_INV(A);
        CHECKF(!memcmp(la, lb, sizeof la), "round %d: split locations differ from dhs_resolve_device's", t);
        dhs_stats s1;
        dhs_get_stats(B, &s1);
        const int misses = (int)(s1.distinct_misses - s0.distinct_misses);
        /* source 0's rows came with the call; sources 1 and 2 wait */
        CHECKF(stale_rows(A, la, sel, 2, 2, K, 0, 0, uid) == 0, "round %d: source 0 stale after the split resolve", t);
        const int st1 = stale_rows(A, la, sel, 2, 2, K, 1, 1, uid), st2 = stale_rows(A, la, sel, 2, 2, K, 2, 2, uid);
        CHECKF(st1 == misses && st2 == misses, "round %d: %d / %d stale rows of sources 1 / 2 before the wait, want %d (the misses)",
               t, st1, st2, misses);
        stale_seen += st1 + st2;
        CHECK_ST(dhs_source_wait(A, 0, 1), DHS_OK);
        CHECKF(stale_rows(A, la, sel, 2, 2, K, 1, 1, uid) == 0, "round %d: source 1 stale after its wait", t);
        CHECKF(stale_rows(A, la, sel, 2, 2, K, 2, 2, uid) == misses, "round %d: source 2 copied by source 1's wait", t);
        CHECK_ST(dhs_source_wait(A, 0, 1), DHS_OK); /* again: nothing more */
        if (how == 0) CHECK_ST(dhs_source_wait(A, 0, 2), DHS_OK);
        if (how == 3) { /* the same selections again: locations handed out fresh */
            CHECK_ST(dhs_resolve_device(A, 0, K, sel, la, DHS_RESOLVE_SPLIT), DHS_OK);
            CHECK_ST(dhs_resolve_device(B, 0, K, sel, lb, 0), DHS_OK);
            CHECKF(!memcmp(la, lb, sizeof la), "round %d: second split locations differ", t);
            CHECK_ST(dhs_source_wait(A, 0, 2), DHS_OK);
        }
        if (how == 0 || how == 3)
            CHECKF(stale_rows(A, la, sel, 2, 2, K, 2, 2, uid) == 0, "round %d (join %d): source 2 stale after the join", t, how);
        /* join 1 and 2: the pools are compared with B's after the round */
        if (how != 2) {
            CHECK_ST(dhs_group_done(A, 0), DHS_OK);
            CHECK_ST(dhs_group_done(B, 0), DHS_OK);
            /* the one-source group (its misses stage once group 0 released the arenas): the split
               resolve is the plain one */
            for (int q = 0; q < 2; q++)
                for (int i = 0; i < K; i++) sel[q * K + i] = (int32_t)((t * 3 + i) % H);
            CHECK_ST(dhs_resolve_device(A, 1, K, sel, l1, DHS_RESOLVE_SPLIT), DHS_OK);
            CHECK_ST(dhs_resolve_device(B, 1, K, sel, lb, 0), DHS_OK);
            CHECKF(!memcmp(l1, lb, sizeof l1), "round %d: group 1 split locations differ", t);
            CHECKF(stale_rows(A, l1, sel, 2, 2, K, 3, 0, uid) == 0, "round %d: one-source group stale", t);
        }
        CHECK_ST(dhs_round_end(A, acc), DHS_OK);
        CHECK_ST(dhs_round_end(B, acc), DHS_OK);
        CHECK_INV(A);
        /* backend waits: source 1's two, the join (the last source's wait, dhs_group_done, the round end,
           the second resolve), and the second resolve's last-source wait */
        const long want_waits = how == 3 ? 4 : 3;
        CHECKF(g_waits - w0 == want_waits, "round %d (join %d): %ld backend waits, want %ld", t, how, g_waits - w0,
               want_waits);
        for (int src = 0; src < 4; src++)
            CHECKF(!memcmp(dhs_source_pool(A, src), dhs_source_pool(B, src),
                           (size_t)dhs_source_pool_rows(A, src) * dhs_pool_row_stride(A)),
                   "round %d (join %d): source %d's pool differs from the plain resolve's", t, how, src);
        n++;
    }
    CHECKF(stale_seen > 0, "no round had group 0 misses: the deferral was never observed");
    dhs_stats sa, sb;
    dhs_get_stats(A, &sa);
    dhs_get_stats(B, &sb);
    CHECKF(sa.host_rows_copied == sb.host_rows_copied && sa.distinct_misses == sb.distinct_misses &&
               sa.entries == sb.entries && sa.distinct_misses > 0,
           "stats differ: copied %llu / %llu, misses %llu / %llu", (unsigned long long)sa.host_rows_copied,
           (unsigned long long)sb.host_rows_copied, (unsigned long long)sa.distinct_misses,
           (unsigned long long)sb.distinct_misses);
    /* destroyed with a round open and a split resolve's copies outstanding: the destroy joins the queue
       (on CUDA its copies would otherwise still write into freed memory; here ASan watches the deferral) */
    const long w1 = g_waits;
    CHECK_ST(dhs_round_begin(A, 2, ra, Ks), DHS_OK);
    for (int i = 0; i < 2 * K; i++) sel[i] = (int32_t)((i * 7) % H);
    CHECK_ST(dhs_resolve_device(A, 0, K, sel, la, DHS_RESOLVE_SPLIT), DHS_OK);
    dhs_ctx_destroy(A);
    CHECKF(g_waits - w1 == 1, "destroy with a split outstanding: %ld queue joins, want 1", g_waits - w1);
    dhs_ctx_destroy(B);
    counted_backend_destroy(be);
    dhs_backend_destroy(be2);
    free(rows);
    /* the host resolver has no split resolve */
    split_arch(&a, &c);
    c.resolver = DHS_RESOLVER_HOST;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be2), DHS_OK);
    CHECK_ST(dhs_ctx_create(&a, &c, be2, &A), DHS_OK);
    if (A) {
        CHECK_ST(dhs_source_wait(A, 0, 1), DHS_ERR_STATE);
        CHECK_ST(dhs_resolve_device(A, 0, K, sel, la, DHS_RESOLVE_SPLIT), DHS_ERR_STATE);
        dhs_ctx_destroy(A);
    }
    dhs_backend_destroy(be2);
}

/* sequences 1-3 of an outside black-box test of the device-resolver mode (tests/common/test_dres_seq.h) on
   the CPU backend, whose pool is host memory; sequence 4 below: two contexts on one CPU backend keep
   their own split-resolve state (a context's deferred copies are not lost when another context
   resolves the same group in between) */
static void cpu_write_loc(dhs_ctx *ctx, int32_t src, int32_t loc, const uint8_t *row64)
{
    memcpy((uint8_t *)dhs_source_pool(ctx, src) + (uint64_t)loc * dhs_pool_row_stride(ctx), row64, 64);
}

/* the CPU backend's "device" buffers are host memory */
static dhs_status seq_device_alloc(int32_t **sel, int32_t **loc)
{
    *sel = malloc(sizeof(int32_t) * 2 * 4 * 8);
    *loc = malloc(sizeof(int32_t) * 2 * 4 * 8);
    return *sel && *loc ? DHS_OK : DHS_ERR_NOMEM;
}
static void seq_device_free(int32_t *sel, int32_t *loc)
{
    free(sel);
    free(loc);
}
static dhs_status seq_device_resolve(dhs_ctx *ctx, int32_t g, int32_t k, const int32_t *hsel, int32_t *sel, int32_t *loc,
                                     int32_t *hloc)
{
    memcpy(sel, hsel, sizeof(int32_t) * 2 * 4 * 8);
    dhs_status s = dhs_resolve_device(ctx, g, k, sel, loc, 0);
    memcpy(hloc, loc, sizeof(int32_t) * 2 * 4 * 8);
    return s;
}

#include "test_dres_seq.h"

static void tail_block(dhs_ctx *ctx, dhs_req r, int32_t src, int64_t first, int32_t n, uint64_t uid, uint32_t ver)
{
    seq_tail_block(ctx, cpu_write_loc, r, src, first, n, uid, ver);
}

static void test_device_sequences(void)
{
    dhs_arch a;
    dhs_config c;
    dhs_backend *be = NULL;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    if (!be) return;
    test_device_sequences_on(be, cpu_write_loc);
    dhs_backend_destroy(be);
    enum { H = 40 };
    int32_t sel[2 * 4 * 8];
    uint8_t *rows;
    /* 4: contexts A and B on one CPU backend, the same split architecture */
    split_arch(&a, &c);
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    dhs_ctx *A = NULL, *B = NULL;
    CHECK_ST(dhs_ctx_create(&a, &c, be, &A), DHS_OK);
    CHECK_ST(dhs_ctx_create(&a, &c, be, &B), DHS_OK);
    if (!A || !B) return;
    rows = aligned_alloc(64, (size_t)4 * H * 64);
    const void *rp4[4];
    dhs_req ra[2], rb[2];
    const uint64_t uid[2] = {1, 2};
    for (int q = 0; q < 2; q++) {
        for (int src = 0; src < 4; src++) {
            rp4[src] = rows + (size_t)src * H * 64;
            for (int row = 0; row < H; row++) th_fill_row(rows + ((size_t)src * H + row) * 64, 64, uid[q], src, row, 0);
        }
        CHECK_ST(dhs_request_open(A, 100, &ra[q]), DHS_OK);
        CHECK_ST(dhs_request_open(B, 100, &rb[q]), DHS_OK);
        CHECK_ST(dhs_request_import(A, ra[q], H, rp4, DHS_IMPORT_HOST), DHS_OK);
        CHECK_ST(dhs_request_import(B, rb[q], H, rp4, DHS_IMPORT_HOST), DHS_OK);
    }
    int32_t Ks[2] = {1, 1}, accs[2] = {0, 0}, la[3 * 2 * 8], lb[3 * 2 * 8];
    CHECK_ST(dhs_round_begin(A, 2, ra, Ks), DHS_OK);
    CHECK_ST(dhs_round_begin(B, 2, rb, Ks), DHS_OK);
    for (int q = 0; q < 2; q++)
        for (int src = 0; src < 4; src++) {
            tail_block(A, ra[q], src, H, 1, uid[q], 0);
            tail_block(B, rb[q], src, H, 1, uid[q], 0);
        }
    for (int q = 0; q < 2; q++)
        for (int i = 0; i < 8; i++) sel[q * 8 + i] = 2 * i + q; /* 8 distinct host rows each: 16 misses */
    dhs_stats s0, s1;
    dhs_get_stats(A, &s0);
    CHECK_ST(dhs_resolve_device(A, 0, 8, sel, la, DHS_RESOLVE_SPLIT), DHS_OK);
    dhs_get_stats(A, &s1);
    CHECKF(s1.distinct_misses - s0.distinct_misses == 16, "%llu misses, want 16",
           (unsigned long long)(s1.distinct_misses - s0.distinct_misses));
    CHECK_ST(dhs_resolve_device(B, 0, 8, sel, lb, 0), DHS_OK); /* B, same backend, same group */
    CHECK_ST(dhs_source_wait(A, 0, 1), DHS_OK);
    CHECKF(stale_rows(A, la, sel, 2, 2, 8, 1, 1, uid) == 0, "A's source 1: %d rows not copied after its wait",
           stale_rows(A, la, sel, 2, 2, 8, 1, 1, uid));
    CHECK_ST(dhs_source_wait(A, 0, 2), DHS_OK);
    CHECKF(stale_rows(A, la, sel, 2, 2, 8, 2, 2, uid) == 0, "A's source 2 not copied after its wait");
    for (int si = 0; si < 3; si++)
        CHECKF(stale_rows(B, lb, sel, 2, 2, 8, si, si, uid) == 0, "B's source %d stale", si);
    CHECK_ST(dhs_round_end(A, accs), DHS_OK);
    CHECK_ST(dhs_round_end(B, accs), DHS_OK);
    CHECK_INV(A);
    CHECK_INV(B);
    /* the next round serves A's hot rows from its cache: they hold what was written */
    CHECK_ST(dhs_round_begin(A, 2, ra, Ks), DHS_OK);
    for (int q = 0; q < 2; q++)
        for (int src = 0; src < 4; src++) tail_block(A, ra[q], src, H + 1, 1, uid[q], 0);
    CHECK_ST(dhs_resolve_device(A, 0, 8, sel, la, 0), DHS_OK);
    for (int si = 0; si < 3; si++)
        CHECKF(stale_rows(A, la, sel, 2, 2, 8, si, si, uid) == 0, "A's source %d serves rows it never got", si);
    CHECK_ST(dhs_round_end(A, accs), DHS_OK);
    dhs_ctx_destroy(B); /* B's cursors go with it; A's stay */
    CHECK_ST(dhs_round_begin(A, 2, ra, Ks), DHS_OK);
    for (int q = 0; q < 2; q++)
        for (int src = 0; src < 4; src++) tail_block(A, ra[q], src, H + 2, 1, uid[q], 0);
    for (int i = 0; i < 16; i++) sel[i] = (int32_t)(17 + i);
    CHECK_ST(dhs_resolve_device(A, 0, 8, sel, la, DHS_RESOLVE_SPLIT), DHS_OK);
    CHECK_ST(dhs_source_wait(A, 0, 2), DHS_OK);
    for (int si = 0; si < 3; si++) CHECKF(stale_rows(A, la, sel, 2, 2, 8, si, si, uid) == 0, "A after B's destroy: source %d", si);
    CHECK_ST(dhs_round_end(A, accs), DHS_OK);
    CHECK_INV(A);
    dhs_ctx_destroy(A);
    dhs_backend_destroy(be);
    free(rows);
}

/* which status a device call answers when it has several problems (docs/API.md §12): the mode, then
   the group or source, then the round, then k and the buffers, then alignment, then the rows */
static void test_device_precedence(void)
{
    dhs_arch a;
    dhs_config c;
    two_groups(&a, &c, 2, 2, 8);
    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL, *hctx = NULL;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_OK);
    c.resolver = DHS_RESOLVER_HOST;
    CHECK_ST(dhs_ctx_create(&a, &c, be, &hctx), DHS_OK);
    if (!ctx || !hctx) return;
    int32_t buf[64], *mis = (int32_t *)((uint8_t *)buf + 2);
    /* host resolver mode first of all, even with a bad group, outside a round */
    CHECK_ST(dhs_resolve_device(hctx, 9, 0, NULL, NULL, 0), DHS_ERR_STATE);
    CHECK_ST(dhs_resolve_device(hctx, 9, 0, NULL, NULL, DHS_RESOLVE_SPLIT), DHS_ERR_STATE);
    CHECK_ST(dhs_source_wait(hctx, 9, 9), DHS_ERR_STATE);
    /* then the group, then the round */
    CHECK_ST(dhs_resolve_device(ctx, 9, 0, NULL, NULL, 0), DHS_ERR_UNKNOWN_SOURCE);
    CHECK_ST(dhs_source_wait(ctx, 0, 5), DHS_ERR_UNKNOWN_SOURCE);
    CHECK_ST(dhs_resolve_device(ctx, 0, 0, NULL, NULL, 0), DHS_ERR_NOT_IN_ROUND);
    CHECK_ST(dhs_source_wait(ctx, 0, 0), DHS_ERR_NOT_IN_ROUND);
    dhs_req r;
    CHECK_ST(dhs_request_open(ctx, 100, &r), DHS_OK);
    CHECK_ST(dhs_request_import(ctx, r, 0, NULL, DHS_IMPORT_HOST), DHS_OK);
    CHECK_ST(dhs_tail_locations(ctx, r, 7, -5, -1, mis), DHS_ERR_UNKNOWN_SOURCE);
    CHECK_ST(dhs_tail_locations(ctx, r, 0, -5, -1, mis), DHS_ERR_NOT_IN_ROUND);
    int32_t K = 2;
    CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
    /* then k and the buffers, then alignment */
    CHECK_ST(dhs_resolve_device(ctx, 0, 0, NULL, mis, 0), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_resolve_device(ctx, 0, 9, NULL, mis, 0), DHS_ERR_K_TOO_LARGE);
    CHECK_ST(dhs_resolve_device(ctx, 0, 4, NULL, mis, 0), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_resolve_device(ctx, 0, 4, buf, mis, 0), DHS_ERR_MISALIGNED);
    /* flags: DHS_RESOLVE_SPLIT and DHS_RESOLVE_DIRECT are the only bits; any other is refused before
       anything is looked at */
    CHECK_ST(dhs_resolve_device(ctx, 0, 4, buf, mis, 4u), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_resolve_device(ctx, 0, 4, buf, mis, DHS_RESOLVE_SPLIT | 0x80000000u), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_resolve_device(NULL, 0, 4, buf, mis, 0), DHS_ERR_INVALID_ARG);
    /* tail locations: the count and buffer, alignment, then the rows, then the ring */
    CHECK_ST(dhs_tail_locations(ctx, r, 0, -5, -1, mis), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tail_locations(ctx, r, 0, -5, 1, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_tail_locations(ctx, r, 0, -5, 1, mis), DHS_ERR_MISALIGNED);
    CHECK_ST(dhs_tail_locations(ctx, r, 0, -5, 1, buf), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_tail_locations(ctx, r, 0, 1, 1, buf), DHS_ERR_ROW_RANGE); /* a gap at row 0 */
    CHECK_ST(dhs_tail_locations(ctx, r, 0, 0, 3, buf), DHS_ERR_ROW_RANGE); /* past the block */
    CHECK_ST(dhs_tail_locations(ctx, r, 0, 0, 2, buf), DHS_OK);
    CHECK_INV(ctx);
    dhs_ctx_destroy(ctx);
    dhs_ctx_destroy(hctx);
    dhs_backend_destroy(be);
}

/* dhs_round_may_miss: 0 exactly while every row a query can select is direct (the history in ready
   optional pages, the rest in the tail ring), and then a resolve of every visible row copies nothing; 1 once
   the ring has let decoded rows go that are in no ready optional page (decoded_optional 0), or while the
   history stays on host, and then rows are recovered. With decoded_optional (the default) a decoded page
   joins the optional pages while the ring holds it, so every round of this load is direct.
   DHS_RESOLVE_DIRECT: refused (DHS_ERR_STATE, locations untouched) where the group may miss; where it
   cannot, the same locations as a resolve without it, and dhs_group_done promotes nothing after it (the
   promotions counted on counted_backend) */
static void test_round_may_miss(void)
{
    for (int mode = 2; mode >= 0; mode--) { /* 2: resident, decoded_optional; 1: resident without; 0: host */
        const int resident = mode > 0;
        const char *name = mode == 2 ? "resident" : mode ? "resident, decoded_optional 0" : "host";
        dhs_arch a;
        dhs_config c;
        two_groups(&a, &c, 1, 1, 8);
        c.sel_k = 64;
        if (resident) {
            c.device_bytes = 8 << 20;
            c.resident_first = 1;
            c.repop_pages = 64;
            c.decoded_optional = mode == 2;
        }
        dhs_backend *be = counted_backend();
        if (!be) return;
        dhs_ctx *ctx = NULL;
        CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_OK);
        if (!ctx) return;
        int mm = -7, m0 = -7, m1 = -7, direct_ok = 0, direct_refused = 0;
        enum { PS = 72 }; /* page tables: pages per request (max_rows 256 / 4 + spare) */
        int32_t tab[2 * PS + 1];
        long pt_rows = 0, pt_none = 0;
        CHECK_ST(dhs_round_may_miss(NULL, -1, &mm), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_round_may_miss(ctx, -1, &mm), DHS_ERR_NOT_IN_ROUND);
        CHECK_ST(dhs_round_page_tables_device(ctx, PS, PS, tab), DHS_ERR_NOT_IN_ROUND);
        CHECK_ST(dhs_round_page_tables_device(NULL, PS, PS, tab), DHS_ERR_INVALID_ARG);
        CHECK(mm == -7); /* written only on DHS_OK */
        enum { H = 40 }; /* 10 pages of 4 rows */
        uint8_t *rows = aligned_alloc(64, (size_t)2 * H * 64);
        const void *rp[2] = {rows, rows + (size_t)H * 64};
        for (int src = 0; src < 2; src++)
            for (int row = 0; row < H; row++) th_fill_row(rows + ((size_t)src * H + row) * 64, 64, 1, src, row, 0);
        dhs_req r;
        CHECK_ST(dhs_request_open(ctx, 200, &r), DHS_OK);
        CHECK_ST(dhs_request_import(ctx, r, H, rp, DHS_IMPORT_HOST), DHS_OK);
        int32_t K = 1, acc = 0, sel[64], loc[64], loc2[64];
        int64_t n = H;
        int seen0 = 0, seen1 = 0;
        for (int t = 0; t < 24; t++) {
            CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
            CHECK_ST(dhs_round_may_miss(ctx, 2, &mm), DHS_ERR_UNKNOWN_SOURCE);
            CHECK_ST(dhs_round_may_miss(ctx, -2, &mm), DHS_ERR_UNKNOWN_SOURCE);
            CHECK_ST(dhs_round_may_miss(ctx, -1, NULL), DHS_ERR_INVALID_ARG);
            CHECK_ST(dhs_round_may_miss(ctx, -1, &mm), DHS_OK);
            CHECK_ST(dhs_round_may_miss(ctx, 0, &m0), DHS_OK);
            CHECK_ST(dhs_round_may_miss(ctx, 1, &m1), DHS_OK);
            CHECKF(mm == (m0 || m1) && (mm == 0 || mm == 1), "round %d: may_miss %d, per group %d %d", t, mm, m0, m1);
            for (int src = 0; src < 2; src++) {
                int32_t tl;
                CHECK_ST(dhs_tail_locations(ctx, r, src, n, 1, &tl), DHS_OK);
                th_fill_row((uint8_t *)dhs_source_pool(ctx, src) + (uint64_t)tl * 64, 64, 1, src, n, 0);
            }
            dhs_stats s0, s1;
            dhs_get_stats(ctx, &s0);
            /* the newest 64 visible rows (every row while n < 64) */
            const int32_t lo = n + 1 > 64 ? (int32_t)(n + 1 - 64) : 0, cnt = (int32_t)(n + 1 - lo) < 64 ? (int32_t)(n + 1 - lo) : 64;
            for (int i = 0; i < 64; i++) sel[i] = i < cnt ? lo + i : -1;
            for (int g = 0; g < 2; g++) {
                const int gm = g ? m1 : m0;
                for (int i = 0; i < 64; i++) loc2[i] = -77;
                const long p0 = g_promote;
                if (gm) { /* refused before anything is launched */
                    CHECK_ST(dhs_resolve_device(ctx, g, 64, sel, loc2, DHS_RESOLVE_DIRECT | DHS_RESOLVE_SPLIT), DHS_ERR_STATE);
                    for (int i = 0; i < 64; i++) CHECK(loc2[i] == -77);
                    direct_refused++;
                } else { /* direct alone: no promotion; then the same locations without the flag */
                    CHECK_ST(dhs_resolve_device(ctx, g, 64, sel, loc2, DHS_RESOLVE_DIRECT), DHS_OK);
                    CHECK_ST(dhs_group_done(ctx, g), DHS_OK);
                    CHECKF(g_promote == p0, "round %d group %d: %ld promotions after a direct resolve", t, g, g_promote - p0);
                    direct_ok++;
                }
                CHECK_ST(dhs_resolve_device(ctx, g, 64, sel, loc, 0), DHS_OK);
                if (!gm) /* and a direct call after it leaves the promotion it needs pending */
                    CHECK_ST(dhs_resolve_device(ctx, g, 64, sel, loc2, DHS_RESOLVE_DIRECT), DHS_OK);
                CHECK_ST(dhs_group_done(ctx, g), DHS_OK);
                CHECKF(g_promote == p0 + 1, "round %d group %d: %ld promotions", t, g, g_promote - p0);
                if (!gm)
                    for (int i = 0; i < 64; i++) CHECKF(loc2[i] == loc[i], "round %d group %d entry %d: direct %d, %d", t, g, i, loc2[i], loc[i]);
            }
            /* the page tables: refused with nothing written on bad arguments; then every entry >= 0 holds
               the bytes of its page's visible rows (rows 0..n), every entry of a group that cannot miss is
               >= 0, and the rest of each run is left alone */
            for (int i = 0; i < 2 * PS + 1; i++) tab[i] = -9;
            const int64_t npg = (n + 1 + 3) / 4;
            CHECK_ST(dhs_round_page_tables_device(ctx, (int32_t)npg - 1, 2 * PS, tab), DHS_ERR_INVALID_ARG);
            CHECK_ST(dhs_round_page_tables_device(ctx, PS, PS - 1, tab), DHS_ERR_INVALID_ARG);
            CHECK_ST(dhs_round_page_tables_device(ctx, -1, PS, tab), DHS_ERR_INVALID_ARG);
            CHECK_ST(dhs_round_page_tables_device(ctx, PS, PS, NULL), DHS_ERR_INVALID_ARG);
            CHECK_ST(dhs_round_page_tables_device(ctx, PS, PS, (int32_t *)((char *)tab + 2)), DHS_ERR_MISALIGNED);
            for (int i = 0; i < 2 * PS + 1; i++) CHECKF(tab[i] == -9, "round %d: a refused call wrote entry %d", t, i);
            CHECK_ST(dhs_round_page_tables_device(ctx, PS, PS, tab), DHS_OK);
            for (int src = 0; src < 2; src++) { /* source s is group s's */
                const int gm = src ? m1 : m0;
                for (int64_t P = 0; P < PS; P++) {
                    const int32_t e = tab[src * PS + P];
                    if (P >= npg) {
                        CHECKF(e == -9, "round %d source %d: entry %lld past the %lld pages written", t, src, (long long)P,
                               (long long)npg);
                        continue;
                    }
                    if (e < 0) {
                        CHECKF(e == -1 && gm, "round %d source %d page %lld: entry %d where the group %s", t, src,
                               (long long)P, e, gm ? "may miss" : "cannot miss");
                        pt_none++;
                        continue;
                    }
                    for (int64_t row = P * 4; row < P * 4 + 4 && row <= n; row++, pt_rows++)
                        CHECKF(th_loc_holds(ctx, src, 64, (int32_t)(e * 4 + row % 4), 1, row, 0),
                               "round %d source %d row %lld: page %d does not hold it", t, src, (long long)row, e);
                }
            }
            CHECK(tab[2 * PS] == -9);
            dhs_get_stats(ctx, &s1);
            if (mm == 0) {
                seen0++;
                CHECKF(s1.distinct_misses == s0.distinct_misses, "round %d (%s): may_miss 0 but %llu rows recovered", t,
                       name, (unsigned long long)(s1.distinct_misses - s0.distinct_misses));
            } else {
                seen1++;
            }
            CHECK_ST(dhs_round_end(ctx, &acc), DHS_OK);
            CHECK_INV(ctx);
            n++;
        }
        printf("round_may_miss %s: %d rounds 0 (nothing recovered in any), %d rounds 1; page tables: %ld rows read "
               "through them, %ld pages not direct\n", name, seen0, seen1, pt_rows, pt_none);
        CHECKF(pt_rows > 0 && (mode == 2 ? pt_none == 0 : pt_none > 0), "%s: %ld rows through page tables, %ld pages -1",
               name, pt_rows, pt_none);
        /* resident with decoded pages optional: every round direct; without: direct until the 16-row ring
           lets decoded rows go; host: every round may miss */
        CHECKF(mode == 2 ? seen1 == 0 : mode ? seen0 > 0 && seen1 > 0 : seen0 == 0, "%s: %d rounds may_miss 0, %d rounds 1",
               name, seen0, seen1);
        CHECKF(mode == 2 ? direct_refused == 0 : mode ? direct_ok > 0 && direct_refused > 0 : direct_ok == 0 && direct_refused > 0,
               "%s: %d direct resolves, %d refused", name, direct_ok, direct_refused);
        dhs_ctx_destroy(ctx);
        counted_backend_destroy(be);
        free(rows);
    }
}

/* An import pins each source's history with one host allocation (not one per 1,024-row chunk) and every
   row, on either side of a chunk boundary, reads back its bytes */
static void test_import_pinning(void)
{
    dhs_arch a;
    dhs_config c;
    two_groups(&a, &c, 1, 1, 8);
    c.max_rows = 8192;
    dhs_backend *be = counted_backend();
    dhs_ctx *ctx = NULL;
    if (!be) return;
    CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_OK);
    if (!ctx) return;
    enum { ROWS = 5120 }; /* 5 whole chunks per source: the first decoded row starts a sixth */
    uint8_t *rows = aligned_alloc(64, (size_t)ROWS * 64 * 2);
    const void *rp[2] = {rows, rows + (size_t)ROWS * 64};
    for (int src = 0; src < 2; src++)
        for (int row = 0; row < ROWS; row++) th_fill_row(rows + ((size_t)src * ROWS + row) * 64, 64, 1, src, row, 0);
    dhs_req r;
    CHECK_ST(dhs_request_open(ctx, ROWS + 2000, &r), DHS_OK); /* 7 chunks of 1,024 rows expected */
    const long h0 = g_host_allocs;
    const size_t b0 = g_host_alloc_bytes;
    CHECK_ST(dhs_request_import(ctx, r, ROWS, rp, DHS_IMPORT_HOST), DHS_OK);
    CHECKF(g_host_allocs - h0 == 2, "import of %d rows: %ld host allocations, want 2 (one per source)", ROWS,
           g_host_allocs - h0);
    CHECKF(g_host_alloc_bytes - b0 == (size_t)2 * 7 * 1024 * dhs_pool_row_stride(ctx),
           "import pinned %zu bytes, want the expected positions' 7 chunks per source", g_host_alloc_bytes - b0);
    CHECK_INV(ctx);
    int32_t K = 1, acc = 0;
    CHECK_ST(dhs_round_begin(ctx, 1, &r, &K), DHS_OK);
    for (int src = 0; src < 2; src++) CHECK_ST(dhs_write_rows(ctx, r, src, ROWS, 1, rows), DHS_OK);
    const int32_t pick[8] = {0, 1023, 1024, 2047, 2048, 3071, 4095, ROWS - 1};
    int32_t sel[8], loc[8];
    for (int g = 0; g < 2; g++) {
        memcpy(sel, pick, sizeof pick);
        dhs_resolve_item it = {r, 1, sel, loc};
        CHECK_ST(dhs_resolve(ctx, g, 8, 1, &it), DHS_OK);
        const uint8_t *pool = (const uint8_t *)dhs_source_pool(ctx, g);
        for (int i = 0; i < 8; i++) {
            uint8_t want[64];
            th_fill_row(want, 64, 1, g, pick[i], 0);
            CHECKF(loc[i] >= 0 && !memcmp(pool + (uint64_t)loc[i] * dhs_pool_row_stride(ctx), want, 64),
                   "group %d row %d read back wrong", g, pick[i]);
        }
    }
    const long h1 = g_host_allocs;
    CHECK_ST(dhs_round_end(ctx, &acc), DHS_OK);
    CHECK_INV(ctx);
    CHECKF(g_host_allocs == h1, "the round's tail backup allocated host memory (%ld calls)", g_host_allocs - h1);
    CHECK_ST(dhs_request_close(ctx, r), DHS_OK);
    dhs_ctx_destroy(ctx);
    CHECKF(be->host_bytes == 0, "host bytes left after destroy: %llu", (unsigned long long)be->host_bytes);
    counted_backend_destroy(be);
    free(rows);
}

static void test_verify(void)
{
    /* a fixed seed (the harness is a randomised workload of its own): the
       coverage checks (faults fired, reclaim, staging) hold for it at both
       lengths; DHS_TEST_VERIFY_SEED overrides */
    const char *vs = getenv("DHS_TEST_VERIFY_SEED");
    const int steps = th_scale() < 0.5 ? 20 : 60;
    verify_opts o = verify_opts_default();
    o.seed = vs && *vs ? strtoull(vs, NULL, 0) : 20261201;
    o.requests = 12;
    o.steps = steps;
    verify_opts p = o;
    p.pressure = 1;
    p.faults = steps < 60 ? 0.05 : 0.01; /* short (sanitizer) runs: enough calls to hit some */
    verify_case("pressure high, faults", p, 0);
    p = o;
    p.async_delay = 3;
    verify_case("async delay 3", p, 0);
    p = o;
    p.spec = 8;
    p.compress = 4;
    p.layout = VERIFY_LAYOUT_GLM;
    verify_case("spec 8, compress 4, glm", p, 0);
    p.layout = VERIFY_LAYOUT_V41;
    verify_case("spec 8, compress 4, v41", p, 0);
    p = o;
    p.corrupt_at_step = 5;
    verify_case("corrupted location", p, 1);
}

int main(void)
{
    uint64_t seed = th_seed("test_dres");
    test_window(seed);
    test_spec(seed);
    test_api();
    test_cross(seed, (const int32_t[2]){0, 0}, 1.0, 0, 0);
    /* per-group sizes: group 0 below K * k (staging), group 1 above the uniform 32 */
    test_cross(seed ^ 0x9, (const int32_t[2]){24, 64}, 0.3, 0, 0);
    /* a publish list of 2 pieces: every round begin with a changed table issues it full */
    test_cross(seed ^ 0x17, (const int32_t[2]){0, 0}, 1.0, 2, 0);
    /* early round ends (dhs_round_end_early) in both contexts */
    test_cross(seed ^ 0x2b, (const int32_t[2]){0, 0}, 0.5, 0, 1);
    test_round_end_pending();
    test_round_end_early(0, 0);
    test_round_end_early(1, 0);
    test_round_end_early(2, 0);
    test_round_end_early(2, 1);
    test_round_end_early(1, 1);
    test_publish_failure();
    test_import_pinning();
    test_split_resolve();
    test_device_sequences();
    test_device_precedence();
    test_round_may_miss();
    test_verify();
    return th_summary();
}
