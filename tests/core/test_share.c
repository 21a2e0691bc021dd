/* test_share.c - shared prefixes (dhs_request_open_shared) on the CPU backend.
 *
 * Every request of these tests has a model of its rows: per group and row the
 * (writer, version) its bytes were generated from, so a child's prefix rows
 * are the parent's. Checked, with the invariant checker after every call:
 *   - exactness: N sessions opened on one prefix decode identically to N
 *     private copies of it (each round the rows their locations hold are
 *     compared byte for byte between the two contexts and with the model),
 *     with the parent kept open or closed first, host and device import;
 *   - memory: the shared sessions hold the prefix's host rows once
 *     (host_bytes_shared, host_bytes_allocated against the private copies) and
 *     map the parent's device pages (device_bytes_shared); closing in either
 *     order gives every byte back;
 *   - reclaim under pressure with shared pages: a shared page comes back only
 *     when its last holder lets go, and an admission that cannot make room
 *     because a holder is in the open round waits with nothing changed;
 *   - the partial page and host chunk at the boundary are copied (the child's
 *     writes after the prefix never reach the parent's rows), a prefix that
 *     ends inside a compressed row (all of the parent's positions);
 *   - bad input answers its status and changes nothing; injected allocation
 *     faults leave nothing behind;
 *   - a seeded randomised sequence of opens, imports, shared opens, rounds
 *     and closes (prints its seed).
 */
#include "test_help.h"

#include "core/internal.h" /* the copy list's size: scratch the context keeps, not a request's */

#define KSEL 16
#define MAXR 16

/* host bytes less the context's copy list (scratch that grows once and stays) */
static uint64_t held_host(const dhs_ctx *ctx)
{
    dhs_mem m;
    dhs_get_mem(ctx, &m);
    return m.host_bytes_allocated - (uint64_t)ctx->cap_pairs * sizeof(dhs_copy_pair);
}

/* the backend every context of these tests runs on (tests/cuda/test_share_cuda.c: the CUDA one) */
#ifndef SHARE_BACKEND
static dhs_status share_backend(const dhs_cpu_options *o, dhs_backend **be) { return dhs_backend_cpu_create(o, be); }
#endif

typedef struct mreq {
    int open;
    dhs_req h;
    uint64_t uid;
    int64_t n;
    uint64_t *wuid[4]; /* [group][row] writer of the row's bytes */
    uint32_t *ver[4];  /* [group][row] version */
} mreq;

typedef struct menv {
    dhs_arch arch;
    dhs_config cfg;
    dhs_backend *be;
    dhs_ctx *ctx;
    uint32_t stride;
    int32_t m_of[4], nsrc_of[4];
    int64_t rows_cap;
    mreq rq[MAXR];
    uint8_t *buf;
    uint64_t next_uid;
} menv;

static dhs_config share_cfg(int64_t pages)
{
    dhs_config c = dhs_config_default();
    c.max_requests = MAXR;
    c.sel_k = KSEL;
    c.spec_width = 3;
    c.hot_rows = 64;
    c.page_rows = 8;
    c.tail_rows = 24;
    c.max_rows = 6144;
    c.device_bytes = (uint64_t)pages * 8 * 64;
    c.repop_pages = 16;
    return c;
}

static void menv_init(menv *e, const dhs_config *cfg, int async)
{
    memset(e, 0, sizeof *e);
    e->arch = th_arch_two_groups(4);
    e->cfg = *cfg;
    e->next_uid = 500;
    for (int32_t s = 0; s < e->arch.n_sources; s++) {
        const dhs_source_desc *d = &e->arch.sources[s];
        if (d->row_bytes > e->stride) e->stride = d->row_bytes;
        e->m_of[d->group] = (int32_t)d->m;
        e->nsrc_of[d->group]++;
    }
    e->rows_cap = cfg->max_rows + 8;
    e->buf = th_alloc((size_t)(e->rows_cap + 8) * e->stride * (size_t)e->arch.n_sources);
    dhs_cpu_options o = {0};
    o.async_delay = async;
    CHECK_ST(share_backend(&o, &e->be), DHS_OK);
    CHECK_ST(dhs_ctx_create(&e->arch, &e->cfg, e->be, &e->ctx), DHS_OK);
}

static void mreq_free(mreq *r)
{
    for (int g = 0; g < 4; g++) {
        free(r->wuid[g]);
        free(r->ver[g]);
        r->wuid[g] = NULL;
        r->ver[g] = NULL;
    }
}

static void menv_free(menv *e)
{
    dhs_ctx_destroy(e->ctx);
    dhs_backend_destroy(e->be);
    for (int i = 0; i < MAXR; i++) mreq_free(&e->rq[i]);
    free(e->buf);
}

static void mreq_model(menv *e, mreq *r)
{
    mreq_free(r);
    r->uid = ++e->next_uid;
    r->n = 0;
    for (int32_t g = 0; g < e->arch.n_groups; g++) {
        r->wuid[g] = calloc((size_t)e->rows_cap, sizeof(uint64_t));
        r->ver[g] = calloc((size_t)e->rows_cap, sizeof(uint32_t));
        for (int64_t i = 0; i < e->rows_cap; i++) r->wuid[g][i] = r->uid;
    }
}

static dhs_status m_open(menv *e, int slot, int64_t expected)
{
    mreq *r = &e->rq[slot];
    dhs_status s = dhs_request_open(e->ctx, expected, &r->h);
    CHECK_INV(e->ctx);
    if (s != DHS_OK) return s;
    r->open = 1;
    mreq_model(e, r);
    return DHS_OK;
}

/* a prefill of n positions: rows of writer `uid` (the same uid in two contexts gives the same bytes) */
static dhs_status m_import(menv *e, int slot, int64_t n, unsigned flags, uint64_t uid)
{
    mreq *r = &e->rq[slot];
    const void *rows[DHS_MAX_SOURCES];
    size_t off = 0;
    for (int32_t s = 0; s < e->arch.n_sources; s++) {
        const dhs_source_desc *d = &e->arch.sources[s];
        int64_t nr = (n + d->m - 1) / d->m;
        rows[s] = e->buf + off;
        for (int64_t row = 0; row < nr; row++) th_fill_row(e->buf + off + (size_t)row * d->row_bytes, d->row_bytes, uid, s, row, 0);
        off += ((size_t)nr * d->row_bytes + 63) & ~(size_t)63;
    }
    dhs_status st = dhs_request_import(e->ctx, r->h, n, rows, flags);
    CHECK_INV(e->ctx);
    if (st != DHS_OK) return st;
    r->n = n;
    for (int32_t g = 0; g < e->arch.n_groups; g++)
        for (int64_t row = 0; row < (n + e->m_of[g] - 1) / e->m_of[g]; row++) {
            r->wuid[g][row] = uid;
            r->ver[g][row] = 0;
        }
    return DHS_OK;
}

/* an import of n positions whose rows below row floor(split / m) are writer uid_lo's and the rest uid_hi's
   (a private copy of a shared prefix plus the session's own rows); with from_split the buffers hold only
   the rows from floor(split / m) on (the suffix import of a shared child) */
static dhs_status m_import_split(menv *e, int slot, int64_t n, unsigned flags, uint64_t uid_lo, int64_t split, uint64_t uid_hi,
                                 int from_split)
{
    mreq *r = &e->rq[slot];
    const void *rows[DHS_MAX_SOURCES];
    size_t off = 0;
    for (int32_t s = 0; s < e->arch.n_sources; s++) {
        const dhs_source_desc *d = &e->arch.sources[s];
        const int64_t nr = (n + d->m - 1) / d->m, r0 = from_split ? split / d->m : 0;
        rows[s] = e->buf + off;
        for (int64_t row = r0; row < nr; row++)
            th_fill_row(e->buf + off + (size_t)(row - r0) * d->row_bytes, d->row_bytes, row < split / d->m ? uid_lo : uid_hi, s, row, 0);
        off += ((size_t)(nr - r0) * d->row_bytes + 63) & ~(size_t)63;
    }
    dhs_status st = dhs_request_import(e->ctx, r->h, n, rows, flags);
    CHECK_INV(e->ctx);
    if (st != DHS_OK) return st;
    r->n = n;
    for (int32_t g = 0; g < e->arch.n_groups; g++)
        for (int64_t row = from_split ? split / e->m_of[g] : 0; row < (n + e->m_of[g] - 1) / e->m_of[g]; row++) {
            r->wuid[g][row] = row < split / e->m_of[g] ? uid_lo : uid_hi;
            r->ver[g][row] = 0;
        }
    return DHS_OK;
}

static dhs_status m_open_shared(menv *e, int slot, int parent, int64_t P, int64_t expected)
{
    mreq *r = &e->rq[slot], *pr = &e->rq[parent];
    dhs_status s = dhs_request_open_shared(e->ctx, pr->h, P, expected, &r->h);
    CHECK_INV(e->ctx);
    if (s != DHS_OK) return s;
    r->open = 1;
    mreq_model(e, r);
    r->n = P;
    for (int32_t g = 0; g < e->arch.n_groups; g++)
        for (int64_t row = 0; row < (P + e->m_of[g] - 1) / e->m_of[g]; row++) {
            r->wuid[g][row] = pr->wuid[g][row];
            r->ver[g][row] = pr->ver[g][row];
        }
    int64_t n = -1;
    CHECK_ST(dhs_request_positions(e->ctx, r->h, &n), DHS_OK);
    CHECKF(n == P, "child has %lld positions, prefix %lld", (long long)n, (long long)P);
    return DHS_OK;
}

static dhs_status m_close(menv *e, int slot)
{
    dhs_status s = dhs_request_close(e->ctx, e->rq[slot].h);
    CHECK_INV(e->ctx);
    if (s == DHS_OK) e->rq[slot].open = 0;
    return s;
}

/* Writes the block of positions n .. n+K-1: each row a new version by `writer` (a session id shared by
   the two contexts of the exactness test) */
static dhs_status m_write_block(menv *e, int slot, int32_t K, uint64_t writer)
{
    mreq *r = &e->rq[slot];
    for (int32_t g = 0; g < e->arch.n_groups; g++) {
        int64_t m = e->m_of[g], lo = r->n / m, hi = (r->n + K + m - 1) / m;
        for (int64_t row = lo; row < hi; row++) {
            r->ver[g][row]++;
            r->wuid[g][row] = writer;
        }
        for (int32_t s = 0; s < e->arch.n_sources; s++) {
            if (e->arch.sources[s].group != g) continue;
            uint32_t rb = e->arch.sources[s].row_bytes;
            for (int64_t row = lo; row < hi; row++)
                th_fill_row(e->buf + (size_t)(row - lo) * rb, rb, r->wuid[g][row], s, row, r->ver[g][row]);
            dhs_status st = dhs_write_rows(e->ctx, r->h, s, lo, (int32_t)(hi - lo), e->buf);
            if (st != DHS_OK) return st;
        }
    }
    return DHS_OK;
}

static int32_t m_src(const menv *e, int32_t g, int32_t i)
{
    for (int32_t s = 0; s < e->arch.n_sources; s++)
        if (e->arch.sources[s].group == g && i-- == 0) return s;
    return -1;
}

/* wrong entries of one item against the model */
static long m_check_item(const menv *e, int slot, int32_t g, int32_t K, const int32_t *sel, const int32_t *loc)
{
    const mreq *r = &e->rq[slot];
    long bad = 0;
    for (int32_t i = 0; i < e->nsrc_of[g]; i++) {
        int32_t s = m_src(e, g, i);
        const int32_t *l = loc + (int64_t)i * K * KSEL;
        for (int64_t x = 0; x < (int64_t)K * KSEL; x++) {
            if (sel[x] < 0) { bad += l[x] != -1; continue; }
            if (!th_loc_holds(e->ctx, s, e->arch.sources[s].row_bytes, l[x], r->wuid[g][sel[x]], sel[x], r->ver[g][sel[x]]))
                bad++;
        }
    }
    return bad;
}

/* random selections of K queries over the visible complete rows (-1 padding), distinct per query */
static void m_select(const menv *e, int slot, int32_t g, int32_t K, uint64_t *rng, int32_t *sel)
{
    const mreq *r = &e->rq[slot];
    for (int32_t j = 0; j < K; j++) {
        int64_t vis = (r->n + j + 1) / e->m_of[g];
        for (int32_t i = 0; i < KSEL; i++) {
            if (vis == 0 || dhs_rng_below(rng, 8) == 0) { sel[j * KSEL + i] = -1; continue; }
            int64_t row;
            /* half recent, half anywhere: hits on the tail, the hot cache and the shared history */
            if (dhs_rng_below(rng, 2) && vis > 40) row = vis - 1 - (int64_t)dhs_rng_below(rng, 40);
            else row = (int64_t)dhs_rng_below(rng, (uint64_t)vis);
            int dup = 0;
            for (int32_t q = 0; q < i; q++) dup |= sel[j * KSEL + q] == row;
            sel[j * KSEL + i] = dup ? -1 : (int32_t)row;
        }
    }
}

/* ---------------------------------------------------------------- exactness */
/* N sessions on one prefix (context S) and N private copies (context P) run the same rounds; each
   round every location's bytes are compared between S and P and with the model. close_parent: the
   parent closes right after the children opened. flags: the prefix's import. */
static void test_exact(int N, int64_t P, int64_t suffix, unsigned flags, int close_parent, int rounds, int dev, uint64_t seed)
{
    printf("exactness: %d sessions on %lld positions + up to %lld their own (%s import), parent %s, %d rounds, %s resolver, "
           "seed %llu\n", N, (long long)P, (long long)suffix, flags == DHS_IMPORT_DEVICE ? "device" : "host", close_parent ? "closed first" : "open", rounds,
           dev ? "device" : "host", (unsigned long long)seed);
    menv S, Q;
    dhs_config cfg = share_cfg(6000);
    if (dev) {
        cfg.resolver = DHS_RESOLVER_DEVICE;
        cfg.policy = DHS_POLICY_CLOCK;
    }
    menv_init(&S, &cfg, 2);
    menv_init(&Q, &cfg, 2);
    const uint64_t PREFIX = 77;
    dhs_mem s0;
    dhs_get_mem(S.ctx, &s0);
    const uint64_t hs0 = held_host(S.ctx), hq0 = held_host(Q.ctx);
    /* S: one parent, N children on its prefix (slots 1..N); Q: N private imports (slots 1..N) */
    CHECK_ST(m_open(&S, 0, P), DHS_OK);
    CHECK_ST(m_import(&S, 0, P, flags, PREFIX), DHS_OK);
    const uint64_t hs_parent = held_host(S.ctx);
    for (int i = 1; i <= N; i++) {
        /* session i's prompt: the prefix, then suffix * (i - 1) / N positions of its own (the first none) */
        const int64_t n = P + suffix * (i - 1) / N;
        CHECK_ST(m_open_shared(&S, i, 0, P, n + 3 * rounds), DHS_OK);
        if (n > P) CHECK_ST(m_import_split(&S, i, n, flags, PREFIX, P, 9100 + (uint64_t)i, 1), DHS_OK);
        CHECK_ST(m_open(&Q, i, n + 3 * rounds), DHS_OK);
        CHECK_ST(m_import_split(&Q, i, n, flags, PREFIX, n > P ? P : n, 9100 + (uint64_t)i, 0), DHS_OK);
    }
    dhs_mem sm;
    dhs_get_mem(S.ctx, &sm);
    /* the complete host chunks of the prefix, all sources (two of group 0, one of group 1 with m = 4) */
    const uint64_t prefix_host = (uint64_t)((P / 1024) * 1024) * S.stride * 2 + (uint64_t)((P / 4 / 1024) * 1024) * S.stride;
    const uint64_t children = held_host(S.ctx) - hs_parent, priv = held_host(Q.ctx) - hq0;
    printf("  host bytes: parent %llu, %d children %llu (held by several %llu), %d private copies %llu; device shared %llu\n",
           (unsigned long long)(hs_parent - hs0), N, (unsigned long long)children, (unsigned long long)sm.host_bytes_shared, N,
           (unsigned long long)priv, (unsigned long long)sm.device_bytes_shared);
    CHECKF(sm.host_bytes_shared >= prefix_host, "host_bytes_shared %llu below the prefix's complete chunks %llu",
           (unsigned long long)sm.host_bytes_shared, (unsigned long long)prefix_host);
    /* a child costs what a private copy does less the prefix's complete chunks, which it borrows (the
       shared-span table of the context is the only extra, < 4 KiB) */
    CHECKF(children + (uint64_t)N * prefix_host <= priv + 4096 && children + (uint64_t)N * prefix_host + 4096 >= priv,
           "children %llu + %d x prefix %llu vs private copies %llu", (unsigned long long)children, N,
           (unsigned long long)prefix_host, (unsigned long long)priv);
    if (flags == DHS_IMPORT_DEVICE) CHECKF(sm.device_bytes_shared > 0, "no device page shared after a device import");
    if (close_parent) {
        CHECK_ST(m_close(&S, 0), DHS_OK);
        dhs_mem a;
        dhs_get_mem(S.ctx, &a);
        CHECKF(a.host_bytes_shared >= prefix_host, "the children lost the shared rows: %llu", (unsigned long long)a.host_bytes_shared);
    }
    uint64_t rng = seed;
    int32_t *sel = malloc(sizeof(int32_t) * 3 * KSEL), *ls = malloc(sizeof(int32_t) * 3 * KSEL * 2),
            *lq = malloc(sizeof(int32_t) * 3 * KSEL * 2);
    long bad = 0, diff = 0, compared = 0;
    dhs_req hs[MAXR], hq[MAXR];
    int32_t K[MAXR], acc[MAXR];
    uint8_t bs[64] __attribute__((aligned(16))), bq[64] __attribute__((aligned(16)));
    for (int rd = 0; rd < rounds; rd++) {
        for (int i = 0; i < N; i++) {
            hs[i] = S.rq[i + 1].h;
            hq[i] = Q.rq[i + 1].h;
            K[i] = 1 + (int32_t)dhs_rng_below(&rng, 3);
        }
        CHECK_ST(dhs_round_begin(S.ctx, N, hs, K), DHS_OK);
        CHECK_ST(dhs_round_begin(Q.ctx, N, hq, K), DHS_OK);
        CHECK_INV(S.ctx);
        CHECK_INV(Q.ctx);
        for (int i = 0; i < N; i++) {
            CHECK_ST(m_write_block(&S, i + 1, K[i], 9000 + (uint64_t)i), DHS_OK);
            CHECK_ST(m_write_block(&Q, i + 1, K[i], 9000 + (uint64_t)i), DHS_OK);
        }
        for (int32_t g = 0; g < 2; g++)
            for (int i = 0; i < N; i++) {
                m_select(&S, i + 1, g, K[i], &rng, sel);
                dhs_resolve_item is = {hs[i], K[i], sel, ls}, iq = {hq[i], K[i], sel, lq};
                CHECK_ST(dhs_resolve(S.ctx, g, KSEL, 1, &is), DHS_OK);
                CHECK_ST(dhs_resolve(Q.ctx, g, KSEL, 1, &iq), DHS_OK);
                bad += m_check_item(&S, i + 1, g, K[i], sel, ls) + m_check_item(&Q, i + 1, g, K[i], sel, lq);
                for (int32_t si = 0; si < S.nsrc_of[g]; si++) {
                    int32_t s = m_src(&S, g, si);
                    for (int32_t x = 0; x < K[i] * KSEL; x++) {
                        int32_t a = ls[si * K[i] * KSEL + x], b = lq[si * K[i] * KSEL + x];
                        if (a < 0 || b < 0) { diff += (a < 0) != (b < 0); continue; }
                        CHECK_ST(dhs_read_location(S.ctx, s, a, bs), DHS_OK);
                        CHECK_ST(dhs_read_location(Q.ctx, s, b, bq), DHS_OK);
                        diff += memcmp(bs, bq, S.arch.sources[s].row_bytes) != 0;
                        compared++;
                    }
                }
                CHECK_INV(S.ctx);
            }
        for (int i = 0; i < N; i++) acc[i] = (int32_t)dhs_rng_below(&rng, (uint64_t)K[i]);
        CHECK_ST(dhs_round_end(S.ctx, acc), DHS_OK);
        CHECK_ST(dhs_round_end(Q.ctx, acc), DHS_OK);
        CHECK_INV(S.ctx);
        for (int i = 0; i < N; i++) {
            S.rq[i + 1].n += acc[i] + 1;
            Q.rq[i + 1].n += acc[i] + 1;
        }
    }
    CHECKF(bad == 0 && diff == 0, "%ld locations hold wrong bytes, %ld differ shared vs private (of %ld compared)", bad, diff,
           compared);
    CHECKF(compared > 1000, "only %ld locations compared", compared);
    printf("  %ld located rows compared byte for byte, %ld differ\n", compared, diff);
    /* every session's every committed row, shared history included, through the model */
    for (int i = 1; i <= N; i++) {
        int64_t n = 0;
        CHECK_ST(dhs_request_positions(S.ctx, S.rq[i].h, &n), DHS_OK);
        CHECK(n == S.rq[i].n);
    }
    /* close in the other order than the parent went: children first when the parent is open */
    for (int i = N; i >= 1; i--) {
        CHECK_ST(m_close(&S, i), DHS_OK);
        CHECK_ST(m_close(&Q, i), DHS_OK);
    }
    if (!close_parent) CHECK_ST(m_close(&S, 0), DHS_OK);
    CHECK_ST(dhs_sync(S.ctx), DHS_OK);
    dhs_mem e1;
    dhs_get_mem(S.ctx, &e1);
    CHECKF(held_host(S.ctx) == hs0 && e1.pages_free == s0.pages_free && e1.host_bytes_shared == 0 && e1.device_bytes_shared == 0,
           "after every close: host %llu (before %llu), free pages %lld (before %lld), shared %llu/%llu",
           (unsigned long long)held_host(S.ctx), (unsigned long long)hs0, (long long)e1.pages_free, (long long)s0.pages_free,
           (unsigned long long)e1.host_bytes_shared, (unsigned long long)e1.device_bytes_shared);
    free(sel);
    free(ls);
    free(lq);
    menv_free(&S);
    menv_free(&Q);
}

/* ---------------------------------------------------------------- sweeps */
/* every committed row of request `slot` through K = 1 rounds (each commits one position) */
static long m_sweep(menv *e, int slot)
{
    mreq *r = &e->rq[slot];
    long lost = 0;
    int32_t sel[KSEL], loc[KSEL * 2];
    for (int32_t g = 0; g < e->arch.n_groups; g++) {
        int64_t rows = r->n / e->m_of[g];
        for (int64_t base = 0; base < rows; base += KSEL) {
            int32_t one = 1, acc = 0;
            if (dhs_round_begin(e->ctx, 1, &r->h, &one) != DHS_OK) return lost + rows - base;
            if (m_write_block(e, slot, 1, r->uid) != DHS_OK) lost++;
            for (int32_t i = 0; i < KSEL; i++) sel[i] = base + i < rows ? (int32_t)(base + i) : -1;
            dhs_resolve_item it = {r->h, 1, sel, loc};
            if (dhs_resolve(e->ctx, g, KSEL, 1, &it) != DHS_OK) lost += KSEL;
            else lost += m_check_item(e, slot, g, 1, sel, loc);
            if (dhs_round_end(e->ctx, &acc) != DHS_OK) lost++;
            else r->n += 1;
            CHECK_INV(e->ctx);
        }
    }
    return lost;
}

/* The boundary is copied on write: a child writing after a prefix inside a host chunk and a device page
   leaves the parent's rows (and a sibling's) as they were; a prefix of all the parent's positions that
   ends inside a compressed row (m = 4) carries that row. */
static void test_boundary(void)
{
    menv e;
    dhs_config cfg = share_cfg(3000);
    menv_init(&e, &cfg, 1);
    CHECK_ST(m_open(&e, 0, 3000), DHS_OK);
    CHECK_ST(m_import(&e, 0, 2051, DHS_IMPORT_DEVICE, 4242), DHS_OK); /* 2051 % 4 = 3: incomplete row */
    CHECK_ST(m_open_shared(&e, 1, 0, 2051, 2300), DHS_OK);           /* all of it: the incomplete row too */
    CHECK_ST(m_open_shared(&e, 2, 0, 1028, 1300), DHS_OK);           /* inside chunk 1 and page 128 */
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, 1030, 0, &e.rq[3].h), DHS_ERR_ROW_RANGE); /* 1030 % 4 */
    CHECK_INV(e.ctx);
    for (int r = 0; r < 40; r++) {
        for (int i = 0; i < 3; i++) {
            int32_t K = 2, acc = 1;
            CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[i].h, &K), DHS_OK);
            CHECK_ST(m_write_block(&e, i, K, e.rq[i].uid), DHS_OK);
            CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
            e.rq[i].n += 2;
            CHECK_INV(e.ctx);
        }
    }
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    long lost = 0;
    for (int i = 0; i < 3; i++) lost += m_sweep(&e, i);
    CHECKF(lost == 0, "%ld rows wrong after children wrote past the boundary", lost);
    /* a child of a child, then the middle one closes: the grandchild keeps its rows */
    CHECK_ST(m_open_shared(&e, 3, 1, e.rq[1].n - 5, 0), DHS_OK);
    CHECK_ST(m_close(&e, 1), DHS_OK);
    CHECK_ST(m_close(&e, 0), DHS_OK);
    lost = m_sweep(&e, 3) + m_sweep(&e, 2);
    CHECKF(lost == 0, "%ld rows wrong after the ancestors closed", lost);
    menv_free(&e);
}

/* An incomplete compressed row a round end left behind counts as unwritten (its next block rewrites it),
   and so it does in a child sharing all of the parent's positions: the child's first block must write it
   before any row after it (a gap is refused), and then serves what it wrote. (The child used to take the
   parent's ring bytes of that row as written: a block that skipped it committed whatever was there.) */
static void test_boundary_after_round(void)
{
    menv e;
    dhs_config cfg = share_cfg(3000);
    menv_init(&e, &cfg, 1);
    const int32_t src = m_src(&e, 1, 0);
    CHECKF(e.m_of[1] == 4 && src >= 0, "group 1: m %d, source %d", (int)e.m_of[1], src);
    CHECK_ST(m_open(&e, 0, 3000), DHS_OK);
    CHECK_ST(m_import(&e, 0, 2046, DHS_IMPORT_DEVICE, 5151), DHS_OK);
    int32_t K = 1, acc = 0;
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
    CHECK_ST(m_write_block(&e, 0, K, e.rq[0].uid), DHS_OK); /* position 2046: row 511 of source 2, incomplete */
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    e.rq[0].n += 1;
    CHECK_ST(m_open_shared(&e, 1, 0, 2047, 2300), DHS_OK); /* all of it: 2047 % 4 = 3 */
    CHECK_INV(e.ctx);
    K = 2;
    acc = 1;
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[1].h, &K), DHS_OK);
    CHECK_ST(dhs_write_rows(e.ctx, e.rq[1].h, src, 512, 1, e.buf), DHS_ERR_ROW_RANGE); /* row 511 first */
    CHECK_ST(m_write_block(&e, 1, K, e.rq[1].uid), DHS_OK); /* positions 2047, 2048: rows 511 and 512 */
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    e.rq[1].n += 2;
    CHECK_INV(e.ctx);
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    const long lost = m_sweep(&e, 0) + m_sweep(&e, 1);
    CHECKF(lost == 0, "%ld rows wrong after the child wrote the boundary row", lost);
    menv_free(&e);
}

/* ---------------------------------------------------------------- errors */
static void test_errors(void)
{
    menv e;
    dhs_config cfg = share_cfg(3000);
    menv_init(&e, &cfg, 0);
    CHECK_ST(m_open(&e, 0, 0), DHS_OK);
    CHECK_ST(m_import(&e, 0, 600, DHS_IMPORT_DEVICE, 1), DHS_OK);
    CHECK_ST(m_open(&e, 1, 0), DHS_OK);
    void *hr[DHS_MAX_SOURCES];
    CHECK_ST(dhs_request_import_begin(e.ctx, e.rq[1].h, 100, DHS_IMPORT_HOST, hr), DHS_OK);
    CHECK_ST(m_open(&e, 2, 0), DHS_OK);
    CHECK_ST(m_close(&e, 2), DHS_OK);
    dhs_req out = {77, 77}, bad_h = {(uint32_t)MAXR + 3, 1}, never = {5, 9};
    {
        int32_t K = 1, acc = 0;
        CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[0].h, &K), DHS_OK);
        dhs_mem r0, r1;
        dhs_get_mem(e.ctx, &r0);
        CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, 100, 0, &out), DHS_ERR_STATE); /* parent in the round */
        dhs_get_mem(e.ctx, &r1);
        CHECK(memcmp(&r0, &r1, sizeof r0) == 0);
        CHECK_ST(m_write_block(&e, 0, 1, e.rq[0].uid), DHS_OK);
        CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
        e.rq[0].n++;
        CHECK_INV(e.ctx);
    }
    /* nothing observable changes: memory, stats, the pool's bytes */
    dhs_mem m0, m1;
    dhs_stats s0, s1;
    dhs_get_mem(e.ctx, &m0);
    dhs_get_stats(e.ctx, &s0);
    const size_t pool_bytes = (size_t)dhs_source_pool_rows(e.ctx, 0) * e.stride;
    uint8_t *pool0 = th_alloc(pool_bytes);
    memcpy(pool0, dhs_source_pool(e.ctx, 0), pool_bytes);
    CHECK_ST(dhs_request_open_shared(NULL, e.rq[0].h, 10, 0, &out), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, 10, 0, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_request_open_shared(e.ctx, bad_h, 10, 0, &out), DHS_ERR_UNKNOWN_REQUEST);
    CHECK_ST(dhs_request_open_shared(e.ctx, never, 10, 0, &out), DHS_ERR_UNKNOWN_REQUEST);
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[2].h, 0, 0, &out), DHS_ERR_CLOSED);
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, 602, 0, &out), DHS_ERR_ROW_RANGE); /* above its 601 */
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, -1, 0, &out), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, 10 * 4, cfg.max_rows + 1, &out), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, 10 * 4, -1, &out), DHS_ERR_ROW_RANGE);
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, 598, 0, &out), DHS_ERR_ROW_RANGE); /* 598 % 4, not all */
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[1].h, 0, 0, &out), DHS_ERR_STATE);     /* import open */
    CHECK(out.id == 77 && out.gen == 77);
    dhs_get_mem(e.ctx, &m1);
    dhs_get_stats(e.ctx, &s1);
    CHECK(memcmp(&m0, &m1, sizeof m0) == 0);
    CHECK(memcmp(&s0, &s1, sizeof s0) == 0);
    CHECK(memcmp(pool0, dhs_source_pool(e.ctx, 0), pool_bytes) == 0);
    CHECK_INV(e.ctx);
    free(pool0);
    menv_free(&e);
}

/* Injected host-allocation and copy faults in open_shared: every failure leaves memory as before
   (the parent's host copies may have completed: the parent stays whole) and the call then succeeds. */
static void test_faults(void)
{
    menv e;
    dhs_config cfg = share_cfg(3000);
    menv_init(&e, &cfg, 0);
    CHECK_ST(m_open(&e, 0, 0), DHS_OK);
    CHECK_ST(m_import(&e, 0, 2100, DHS_IMPORT_DEVICE, 3), DHS_OK);
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    /* the first copy is the parent's deferred host copy of its device-imported pages: it fails, nothing
       opens, the parent stays whole (checked by the sweep at the end) */
    dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 1);
    CHECK_ST(dhs_request_open_shared(e.ctx, e.rq[0].h, 2100, 0, &e.rq[1].h), DHS_ERR_BACKEND);
    dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 0);
    CHECK_INV(e.ctx);
    /* once shared, the parent's rows are all on host and the copy list has its size: from here a failure
       leaves every byte as it was */
    CHECK_ST(m_open_shared(&e, 1, 0, 2100, 0), DHS_OK);
    CHECK_ST(m_close(&e, 1), DHS_OK);
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    int failed = 0;
    for (int kind = 0; kind < 2; kind++) {
        const dhs_fault_kind fk = kind ? DHS_FAULT_COPY : DHS_FAULT_HOST_ALLOC;
        for (uint64_t nth = 1; nth < 64; nth++) {
            dhs_mem m0, m1;
            dhs_get_mem(e.ctx, &m0);
            const uint64_t h0 = held_host(e.ctx);
            dhs_backend_fault_at(e.be, fk, nth);
            dhs_status s = dhs_request_open_shared(e.ctx, e.rq[0].h, 1500 + 4 * (int64_t)nth, 1800, &e.rq[1].h);
            dhs_backend_fault_at(e.be, fk, 0);
            CHECK_INV(e.ctx);
            if (s == DHS_OK) {
                e.rq[1].open = 1;
                CHECK_ST(m_close(&e, 1), DHS_OK);
                CHECK_ST(dhs_sync(e.ctx), DHS_OK);
                break;
            }
            failed++;
            CHECKF(s == DHS_ERR_NOMEM || s == DHS_ERR_BACKEND, "fault %d at %llu: %s", kind, (unsigned long long)nth,
                   dhs_status_str(s));
            CHECK_ST(dhs_sync(e.ctx), DHS_OK);
            dhs_get_mem(e.ctx, &m1);
            CHECKF(held_host(e.ctx) == h0 && m1.pages_free == m0.pages_free && m1.requests_open == m0.requests_open &&
                       m1.host_bytes_shared == 0,
                   "fault %d at %llu (%s) left host %llu (was %llu), free pages %lld (was %lld)", kind, (unsigned long long)nth,
                   dhs_status_str(s), (unsigned long long)held_host(e.ctx), (unsigned long long)h0,
                   (long long)m1.pages_free, (long long)m0.pages_free);
        }
    }
    CHECKF(failed >= 3, "only %d injected failures", failed);
    /* the suffix import of a child: a failed copy or allocation leaves it its prefix (positions, rows), and
       the retry imports */
    CHECK_ST(m_open_shared(&e, 1, 0, 1702, 2400), DHS_ERR_ROW_RANGE); /* 1702 % 4 and not all of 2100 */
    CHECK_ST(m_open_shared(&e, 1, 0, 1700, 2400), DHS_OK);
    CHECK_ST(m_import_split(&e, 1, 1699, DHS_IMPORT_HOST, 0, 1700, 55, 1), DHS_ERR_ROW_RANGE); /* below the prefix */
    int sfail = 0;
    /* copies: the suffix rows into host rows (row by row for the narrow sources), then the ring */
    for (uint64_t nth = 1; nth < 100000; nth++) {
        dhs_backend_fault_at(e.be, DHS_FAULT_COPY, nth);
        dhs_status s = m_import_split(&e, 1, 2302, DHS_IMPORT_HOST, 0, 1700, 55, 1);
        dhs_backend_fault_at(e.be, DHS_FAULT_COPY, 0);
        if (s == DHS_OK) break;
        sfail++;
        CHECKF(s == DHS_ERR_BACKEND, "suffix import fault at %llu: %s", (unsigned long long)nth, dhs_status_str(s));
        int64_t n = 0;
        CHECK_ST(dhs_request_positions(e.ctx, e.rq[1].h, &n), DHS_OK);
        CHECKF(n == 1700, "a failed suffix import left %lld positions", (long long)n);
    }
    CHECKF(sfail >= 700, "only %d failed suffix imports (the ring copies come after ~750 row copies)", sfail);
    CHECKF(e.rq[1].n == 2302, "the suffix import never completed (%lld positions)", (long long)e.rq[1].n);
    CHECK_ST(m_import_split(&e, 1, 2400, DHS_IMPORT_HOST, 0, 2302, 56, 1), DHS_ERR_STATE); /* once */
    CHECKF(m_sweep(&e, 1) == 0, "the child's rows after failed suffix imports");
    e.rq[0].n = 2100;
    CHECKF(m_sweep(&e, 0) == 0, "the parent lost rows to failed shares");
    menv_free(&e);
}

/* ---------------------------------------------------------------- reclaim */
/* Device pressure with shared pages: the parent and two children map the parent's imported pages. A
   shared page comes back only when every holder gave it up; an admission that needs pages only a
   request of the open round still maps waits and changes nothing; rows stay exact throughout. */
static void test_reclaim(void)
{
    /* 3 requests of 21 required pages + ~300 optional pages of the prefix fit; a fourth cannot without
       reclaim */
    menv e;
    dhs_config cfg = share_cfg(640);
    cfg.reserve_bytes = 0;
    cfg.reclaim_order = DHS_RECLAIM_OLDEST;
    menv_init(&e, &cfg, 1);
    dhs_mem m0;
    dhs_get_mem(e.ctx, &m0);
    const uint64_t h0 = held_host(e.ctx);
    /* the parent's 1,200 positions: 150 pages of each group-0 source and 37 of group 1 on the device;
       child 1 shares all of them, child 2 (1,000 positions) the first 125 and 31 */
    CHECK_ST(m_open(&e, 0, 0), DHS_OK);
    CHECK_ST(m_import(&e, 0, 1200, DHS_IMPORT_DEVICE, 11), DHS_OK);
    CHECK_ST(m_open_shared(&e, 1, 0, 1200, 1400), DHS_OK);
    CHECK_ST(m_open_shared(&e, 2, 0, 1000, 1200), DHS_OK);
    dhs_mem m1;
    dhs_get_mem(e.ctx, &m1);
    printf("reclaim: optional %llu bytes, shared %llu, free pages %lld of %lld\n", (unsigned long long)m1.optional_bytes,
           (unsigned long long)m1.device_bytes_shared, (long long)m1.pages_free, (long long)m1.pages_total);
    CHECK(m1.device_bytes_shared == m1.optional_bytes && m1.optional_bytes == 337ull * 8 * 64);
    /* fill the pool with requests of no history, so that the next admission must reclaim */
    int32_t K = 1, acc = 0;
    int extra = 3;
    dhs_sizes z;
    CHECK_ST(dhs_config_sizes(&e.arch, &e.cfg, &z), DHS_OK);
    const int64_t req_pages = (int64_t)(z.request_bytes / z.page_bytes);
    for (dhs_mem mm; dhs_get_mem(e.ctx, &mm) == DHS_OK && mm.pages_free >= req_pages && extra < MAXR - 1; extra++)
        CHECK_ST(m_open(&e, extra, 0), DHS_OK);
    CHECK_ST(dhs_round_begin(e.ctx, 1, &e.rq[1].h, &K), DHS_OK);
    CHECK_ST(m_write_block(&e, 1, 1, e.rq[1].uid), DHS_OK);
    dhs_mem a0, a1;
    dhs_stats st0, st1;
    dhs_get_mem(e.ctx, &a0);
    dhs_get_stats(e.ctx, &st0);
    dhs_req tmp;
    dhs_status s = dhs_request_open(e.ctx, 0, &tmp);
    CHECK_INV(e.ctx);
    dhs_get_mem(e.ctx, &a1);
    dhs_get_stats(e.ctx, &st1);
    /* pages only the parent/child 2 hold alone: the part of child 2's prefix (1600) is mapped by child 1 too,
       so nothing is free to take without child 1: the admission waits and changes nothing */
    printf("  admission with the holder in the round: %s (free pages %lld -> %lld, reclaims %llu -> %llu)\n",
           dhs_status_str(s), (long long)a0.pages_free, (long long)a1.pages_free, (unsigned long long)st0.reclaims,
           (unsigned long long)st1.reclaims);
    CHECKF(s == DHS_WAIT, "admission: %s", dhs_status_str(s));
    CHECKF(st1.reclaims == st0.reclaims && a1.optional_bytes == a0.optional_bytes,
           "a waiting admission reclaimed %llu requests (optional %llu -> %llu bytes)",
           (unsigned long long)(st1.reclaims - st0.reclaims), (unsigned long long)a0.optional_bytes,
           (unsigned long long)a1.optional_bytes);
    CHECK_ST(dhs_round_end(e.ctx, &acc), DHS_OK);
    e.rq[1].n += 1;
    /* after the round every holder is a candidate: the admission reclaims and succeeds */
    CHECK_ST(m_open(&e, extra, 0), DHS_OK);
    dhs_mem a2;
    dhs_get_mem(e.ctx, &a2);
    printf("  after the round: admitted, optional %llu bytes, shared %llu\n", (unsigned long long)a2.optional_bytes,
           (unsigned long long)a2.device_bytes_shared);
    CHECK(a2.optional_bytes < a0.optional_bytes);
    long lost = m_sweep(&e, 1) + m_sweep(&e, 2) + m_sweep(&e, 0);
    CHECKF(lost == 0, "%ld rows wrong after reclaiming shared pages", lost);
    for (int i = 0; i <= extra; i++)
        if (e.rq[i].open) CHECK_ST(m_close(&e, i), DHS_OK);
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    dhs_mem m2;
    dhs_get_mem(e.ctx, &m2);
    CHECKF(held_host(e.ctx) == h0 && m2.pages_free == m0.pages_free, "after every close: host %llu (was %llu), free %lld (was %lld)",
           (unsigned long long)held_host(e.ctx), (unsigned long long)h0, (long long)m2.pages_free, (long long)m0.pages_free);
    menv_free(&e);
}

/* ---------------------------------------------------------------- random */
static void test_random(uint64_t seed, int steps)
{
    menv e;
    dhs_config cfg = share_cfg(700 + (int64_t)(seed % 800));
    cfg.reclaim_order = (dhs_reclaim_order)(seed % DHS_RECLAIM_COUNT_);
    menv_init(&e, &cfg, (int)(seed % 3));
    uint64_t rng = seed;
    dhs_mem m0;
    dhs_get_mem(e.ctx, &m0);
    const uint64_t h0 = held_host(e.ctx);
    int32_t *sel = malloc(sizeof(int32_t) * 3 * KSEL), *loc = malloc(sizeof(int32_t) * 3 * KSEL * 2);
    long bad = 0;
    int shares = 0, rounds = 0;
    for (int step = 0; step < steps; step++) {
        int op = (int)dhs_rng_below(&rng, 10);
        int slot = (int)dhs_rng_below(&rng, 8);
        mreq *r = &e.rq[slot];
        if (op <= 1 && !r->open) { /* open + import */
            int64_t n = (int64_t)dhs_rng_below(&rng, 2600);
            if (m_open(&e, slot, n + 64) != DHS_OK) continue;
            if (m_import(&e, slot, n, dhs_rng_below(&rng, 2) ? DHS_IMPORT_DEVICE : DHS_IMPORT_HOST, r->uid) != DHS_OK)
                CHECK_ST(m_close(&e, slot), DHS_OK);
        } else if (op <= 3 && !r->open) { /* shared open on a random open parent */
            int parent = (int)dhs_rng_below(&rng, 8);
            if (!e.rq[parent].open || parent == slot) continue;
            int64_t pn = e.rq[parent].n, P = dhs_rng_below(&rng, 4) == 0 ? pn : (int64_t)dhs_rng_below(&rng, (uint64_t)pn + 1) & ~(int64_t)3;
            dhs_status s = m_open_shared(&e, slot, parent, P, P + (int64_t)dhs_rng_below(&rng, 200));
            CHECKF(s == DHS_OK || s == DHS_WAIT || s == DHS_ERR_STATE, "open_shared: %s", dhs_status_str(s));
            shares += s == DHS_OK;
        } else if (op == 4 && r->open) {
            CHECK_ST(m_close(&e, slot), DHS_OK);
        } else if (op >= 5) { /* a round of up to 4 open requests */
            dhs_req h[8];
            int32_t K[8], acc[8], who[8], n = 0;
            for (int i = 0; i < 8 && n < 4; i++) {
                mreq *q = &e.rq[(slot + i) % 8];
                if (!q->open || q->n + 3 >= cfg.max_rows || dhs_rng_below(&rng, 3) == 0) continue;
                who[n] = (slot + i) % 8;
                h[n] = q->h;
                K[n] = 1 + (int32_t)dhs_rng_below(&rng, 3);
                n++;
            }
            if (n == 0) continue;
            dhs_status s = dhs_round_begin(e.ctx, n, h, K);
            CHECK_INV(e.ctx);
            if (s != DHS_OK) { CHECKF(0, "round_begin: %s", dhs_status_str(s)); continue; }
            /* a shared open of a round member meanwhile: refused, nothing changed */
            if (dhs_rng_below(&rng, 4) == 0) {
                int free_slot = -1;
                for (int i = 8; i < MAXR && free_slot < 0; i++)
                    if (!e.rq[i].open) free_slot = i;
                dhs_req tmp;
                if (free_slot >= 0) CHECK_ST(dhs_request_open_shared(e.ctx, h[0], 0, 0, &tmp), DHS_ERR_STATE);
            }
            for (int i = 0; i < n; i++) CHECK_ST(m_write_block(&e, who[i], K[i], e.rq[who[i]].uid), DHS_OK);
            for (int32_t g = 0; g < 2; g++)
                for (int i = 0; i < n; i++) {
                    m_select(&e, who[i], g, K[i], &rng, sel);
                    dhs_resolve_item it = {h[i], K[i], sel, loc};
                    dhs_status rs = dhs_resolve(e.ctx, g, KSEL, 1, &it);
                    CHECKF(rs == DHS_OK || rs == DHS_ERR_STAGING, "resolve: %s", dhs_status_str(rs));
                    if (rs == DHS_OK) bad += m_check_item(&e, who[i], g, K[i], sel, loc);
                    CHECK_INV(e.ctx);
                }
            for (int i = 0; i < n; i++) acc[i] = (int32_t)dhs_rng_below(&rng, (uint64_t)K[i]);
            CHECK_ST(dhs_round_end(e.ctx, acc), DHS_OK);
            CHECK_INV(e.ctx);
            for (int i = 0; i < n; i++) e.rq[who[i]].n += acc[i] + 1;
            rounds++;
        }
    }
    CHECKF(bad == 0, "seed %llu: %ld locations held wrong bytes", (unsigned long long)seed, bad);
    long lost = 0;
    for (int i = 0; i < MAXR; i++)
        if (e.rq[i].open) lost += m_sweep(&e, i);
    CHECKF(lost == 0, "seed %llu: %ld rows lost in the final sweep", (unsigned long long)seed, lost);
    for (int i = 0; i < MAXR; i++)
        if (e.rq[i].open) CHECK_ST(m_close(&e, i), DHS_OK);
    CHECK_ST(dhs_sync(e.ctx), DHS_OK);
    dhs_mem m1;
    dhs_get_mem(e.ctx, &m1);
    CHECKF(held_host(e.ctx) == h0 && m1.pages_free == m0.pages_free,
           "seed %llu: after every close host %llu (was %llu), free %lld (was %lld)", (unsigned long long)seed,
           (unsigned long long)held_host(e.ctx), (unsigned long long)h0, (long long)m1.pages_free,
           (long long)m0.pages_free);
    printf("random seed %llu: %d steps, %d shared opens, %d rounds\n", (unsigned long long)seed, steps, shares, rounds);
    CHECKF(shares > 0, "seed %llu: no shared open happened", (unsigned long long)seed);
    free(sel);
    free(loc);
    menv_free(&e);
}

#ifndef SHARE_NO_MAIN
int main(void)
{
    const uint64_t seed = th_seed("test_share");
    test_errors();
    test_faults();
    test_boundary();
    test_boundary_after_round();
    test_boundary_after_round();
    test_exact(4, 2600, 0, DHS_IMPORT_DEVICE, 0, TH_SANITIZED ? 20 : 60, 0, seed);
    test_exact(3, 2301, 0, DHS_IMPORT_HOST, 1, TH_SANITIZED ? 15 : 40, 0, seed + 1);
    test_exact(5, 4096, 0, DHS_IMPORT_DEVICE, 1, TH_SANITIZED ? 10 : 30, 0, seed + 2);
    test_exact(3, 2600, 0, DHS_IMPORT_DEVICE, 1, TH_SANITIZED ? 10 : 30, 1, seed + 3); /* the device resolver's mirrors */
    /* sessions with prompts of their own after the prefix (the suffix import), prefixes on and off a row
       of the m = 4 group and on and off a page */
    test_exact(4, 2048, 1500, DHS_IMPORT_DEVICE, 0, TH_SANITIZED ? 15 : 40, 0, seed + 4);
    test_exact(4, 2301, 777, DHS_IMPORT_HOST, 1, TH_SANITIZED ? 15 : 40, 0, seed + 5);
    test_exact(3, 1030, 2000, DHS_IMPORT_DEVICE, 1, TH_SANITIZED ? 10 : 30, 1, seed + 6);
    test_reclaim();
    const int steps = TH_SANITIZED ? 150 : 600;
    for (uint64_t i = 0; i < 3; i++) test_random(dhs_mix64(seed + i), steps);
    return th_summary();
}
#endif
