/* dres.c - the core side of the device resolver (DESIGN §11, dres_spec.h).
 *
 * Control plane (host, between rounds): admission, reclaim, repopulation,
 * commit and backups stay in ctx.c/residency.c. At dhs_round_begin this file
 * publishes what the device needs for the round with stream-ordered copies
 * (ops->publish) from pinned host mirrors to fixed device addresses: the
 * round descriptor (slots, K, n, tail_lo per group) and, per request of the
 * round, every page-table / optional-ready / host-chunk entry that differs
 * from what was last published (the mirror is the record of what the device
 * holds; a differing entry is the dirty flag).
 *
 * Data plane (device, per layer group): ops->dres_resolve / dres_promote /
 * dres_reset on the compute stream; the hot state (reverse index slot_of,
 * slot table row_of, protection, CLOCK bits and hand) exists only in device
 * memory. The host never reads it inside a round except where a host call
 * needs data back anyway (dhs_resolve with host items, statistics, checks).
 *
 * Synchronisation: dhs_round_end waits for the compute stream once (reading
 * the error word with ops->copy_sync, which is ordered after every kernel of
 * the round); only after it may the mirrors change again, so a publish is
 * never pending when the host rewrites its source.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhs_plan.h"
#include "core/dres.h"

#define ALIGN64(x) (((x) + (size_t)63) & ~(size_t)63)

typedef struct dres_grp {
    dres_state st;                 /* device pointers */
    uint8_t *dev;
    size_t dev_bytes;
    uint8_t *mir;                  /* pinned host mirrors of the published tables */
    size_t mir_bytes;
    int32_t *m_hot, *m_tail, *m_opt, *m_arena, *m_src;
    uint8_t *m_ready;
    uint64_t *m_chunks;
    int64_t *pub_nopt, *pub_nchunks; /* [N] entries that may be non-empty on the device */
} dres_grp;

#define DRES_PUB_CAP 1024   /* pieces of the publish list (24 KiB pinned) */
#define DRES_PUB_PIECE 2048 /* bytes of one piece at most */
/* Early-ended rounds whose error word a round begin may leave unread: the begin after an early end does
   not wait for that round's step, so an engine can open round t + 1 while the device still runs round
   t; the begin after the next early end waits for the older fence (round t's step, long done in an
   engine that read its outputs) and reads the word. */
#define DRES_EARLY_LAG 2

struct dres_ctx {
    int32_t G, nsrc_max;
    dres_grp *g;
    uint8_t *dev, *host;           /* shared device block, shared pinned block */
    size_t dev_bytes, host_bytes, rd_bytes;
    int32_t *err;                  /* pinned host: the error word the kernels write (mapped) */
    int32_t *owner, *sel, *loc;    /* device */
    dres_round *rd;                /* device */
    dres_round *rd_h;              /* pinned staging of the descriptor */
    int32_t *sel_h;                /* pinned: packed selections of dhs_resolve */
    int32_t *loc_h;                /* pinned: locations of dhs_resolve, read back in one copy */
    int32_t *word_h;               /* pinned: [2] */
    uint64_t *zero_h;              /* pinned: DRES_S_COUNT zeros */
    int32_t *pos_of;               /* [N] round position of a request slot, -1 */
    int32_t rd_filled;             /* round positions rd_h holds a request in (the last round's n_round);
                                      -1: rd_h not laid out yet */
    dhs_pub *pub;                  /* pinned: the publish list (pub_add), DRES_PUB_CAP pieces */
    int32_t n_pub, pub_cap;        /* pieces listed, not yet issued; pieces it takes (DRES_PUB_CAP, less
                                      in tests: dres_set_publish_cap) */
    int64_t pub_full;              /* lists issued because they were full (tests) */
    dres_state *st_all;            /* device: [G] every group's state, for one promotion launch */
    uint8_t *pending;              /* [G] 1: the host's last call for the group resolved (dhs_resolve_device,
                                      dhs_resolve) and was not followed by dhs_group_done; a CUDA graph
                                      replay counts as the calls made while capturing it */
    dres_state *st_all_h;          /* pinned: its source */
    uint8_t *split;                /* [G] 1: the group's last resolve was split and its copy queue has not
                                      been joined (dhs_source_wait of the last source, dhs_group_done,
                                      the round end, a later resolve of the group) */
    dhs_ticket early_q[DRES_EARLY_LAG]; /* the fences of early-ended rounds (dhs_round_end_early: recorded
                                      after the round's last resolve, before its promotion) whose error word
                                      is not read yet, oldest first; a 0 ticket: the backend has no such
                                      fence and the next round begin waits for the compute stream */
    int32_t n_early;               /* tickets in early_q (at most DRES_EARLY_LAG - 1 outside a round end) */
    dhs_ticket pub_t;              /* after the last round begin's publish list, recorded when an early-ended
                                      round before it was still unread: the next round begin waits for it
                                      (not for the step) before it rewrites the descriptor, the list and the
                                      mirrors that publish read; 0: none (the newest early fence guards) */
    int word_due;                  /* the error word of an early-ended round is not reported yet: it may be
                                      set outside a round until dres_settle takes it */
    int follows_early;             /* the round begin in progress follows an early round end: it records
                                      pub_t after its list, for the next one */
};

/* ------------------------------------------------------------- layout */
static void shape(const dhs_config *c, int32_t g, int32_t nsrc, int32_t m, int64_t max_rows_g, uint32_t stride,
                  int64_t stage_rows, dres_state *st)
{
    memset(st, 0, sizeof *st);
    st->group = g;
    st->N = c->max_requests;
    st->B = cfg_hot_rows(c, g);
    st->T = c->tail_rows;
    st->p = c->page_rows;
    st->nsrc = nsrc;
    st->m = m;
    st->spec_width = c->spec_width;
    st->sel_k = c->sel_k;
    st->row_stride = stride;
    st->max_rows = max_rows_g;
    st->max_opt_pages = max_rows_g / c->page_rows + 1;
    st->host_chunk_rows = HOST_CHUNK_ROWS;
    st->n_host_chunks = max_rows_g / HOST_CHUNK_ROWS + 1;
    st->stage_rows = (int32_t)stage_rows;
}

#define CARVE(base, off, ptr, type, count)                                                                           \
    do {                                                                                                             \
        size_t o_ = (off);                                                                                           \
        (off) = ALIGN64((off) + sizeof(type) * (size_t)(count));                                                     \
        if (base) (ptr) = (type *)(void *)((base) + o_);                                                             \
    } while (0)

/* device arrays of one group from its shape; base NULL: size only */
static size_t grp_layout(dres_state *st, uint8_t *base)
{
    const size_t N = (size_t)st->N, B = (size_t)st->B, ns = (size_t)st->nsrc;
    const size_t per = (size_t)st->spec_width * (size_t)st->sel_k;
    size_t off = 0;
    CARVE(base, off, st->slot_of, int32_t, N * (size_t)st->max_rows);
    CARVE(base, off, st->row_of, int32_t, N * B);
    CARVE(base, off, st->used, uint32_t, N * B);
    CARVE(base, off, st->ref, uint8_t, N * B);
    CARVE(base, off, st->meta, int32_t, N * DRES_META);
    CARVE(base, off, st->staged_row, int32_t, N * (size_t)st->stage_rows);
    CARVE(base, off, st->hot_pages, int32_t, N * ns * (B / (size_t)st->p));
    CARVE(base, off, st->tail_pages, int32_t, N * ns * ((size_t)st->T / (size_t)st->p));
    CARVE(base, off, st->opt_pages, int32_t, N * ns * (size_t)st->max_opt_pages);
    CARVE(base, off, st->opt_ready, uint8_t, N * (size_t)st->max_opt_pages);
    CARVE(base, off, st->host_chunks, uint64_t, N * ns * (size_t)st->n_host_chunks);
    CARVE(base, off, st->arena_page, int32_t, ns);
    CARVE(base, off, st->src_id, int32_t, ns);
    CARVE(base, off, st->dmiss, int32_t, N * per);
    CARVE(base, off, st->ndmiss, int32_t, N);
    CARVE(base, off, st->victim, int32_t, N * per);
    CARVE(base, off, st->pairs, uint64_t, N * per * ns * 2);
    CARVE(base, off, st->npairs, int32_t, N);
    CARVE(base, off, st->code, int64_t, N * per);
    CARVE(base, off, st->stats, uint64_t, DRES_S_COUNT);
    return off;
}

/* pinned mirrors of the published tables, same layout as the device ones */
static size_t mir_layout(dres_grp *dg, uint8_t *base)
{
    const dres_state *st = &dg->st;
    const size_t N = (size_t)st->N, ns = (size_t)st->nsrc;
    size_t off = 0;
    CARVE(base, off, dg->m_hot, int32_t, N * ns * (size_t)(st->B / st->p));
    CARVE(base, off, dg->m_tail, int32_t, N * ns * (size_t)(st->T / st->p));
    CARVE(base, off, dg->m_opt, int32_t, N * ns * (size_t)st->max_opt_pages);
    CARVE(base, off, dg->m_ready, uint8_t, N * (size_t)st->max_opt_pages);
    CARVE(base, off, dg->m_chunks, uint64_t, N * ns * (size_t)st->n_host_chunks);
    CARVE(base, off, dg->m_arena, int32_t, ns);
    CARVE(base, off, dg->m_src, int32_t, ns);
    return off;
}

static size_t rd_layout(dres_round *rd, int32_t N, int32_t G)
{
    int64_t slot, K, n, tl;
    const int64_t bytes = dres_rd_layout(N, G, &slot, &K, &n, &tl);
    if (rd) {
        rd->off_slot = slot;
        rd->off_K = K;
        rd->off_n = n;
        rd->off_tail_lo = tl;
        rd->off_first = bytes; /* after the resolver's layout: int64 first[G][N] */
        rd->bytes = bytes + 8 * (int64_t)N * G;
    }
    return (size_t)(bytes + 8 * (int64_t)N * G);
}

/* shared device block: staging owner, round descriptor, the selection and
   location scratch of dhs_resolve (host items); base NULL: size only */
static size_t shared_dev_layout(struct dres_ctx *d, const dhs_config *c, int32_t G, int32_t nsrc_max, uint8_t *base)
{
    const size_t sel = (size_t)c->max_requests * (size_t)c->spec_width * (size_t)c->sel_k;
    size_t off = 0, rdb = rd_layout(NULL, c->max_requests, G);
    int32_t *owner = NULL, *s = NULL, *l = NULL;
    uint8_t *rd = NULL;
    CARVE(base, off, owner, int32_t, 1);
    CARVE(base, off, rd, uint8_t, rdb);
    CARVE(base, off, s, int32_t, sel);
    CARVE(base, off, l, int32_t, sel * (size_t)nsrc_max);
    dres_state *sa = NULL;
    CARVE(base, off, sa, dres_state, G);
    if (d && base) {
        d->st_all = sa;
        d->owner = owner;
        d->rd = (dres_round *)(void *)rd;
        d->sel = s;
        d->loc = l;
        d->rd_bytes = rdb;
    }
    return off;
}

static size_t shared_host_layout(struct dres_ctx *d, const dhs_config *c, int32_t G, int32_t nsrc_max, uint8_t *base)
{
    const size_t sel = (size_t)c->max_requests * (size_t)c->spec_width * (size_t)c->sel_k;
    size_t off = 0;
    uint8_t *rd = NULL;
    int32_t *s = NULL, *w = NULL, *l = NULL, *err = NULL;
    uint64_t *z = NULL;
    /* the error word: pinned host memory the device writes (mapped), so that the round end reads it
       after one stream synchronisation instead of a 4-byte device-to-host copy */
    CARVE(base, off, err, int32_t, 1);
    CARVE(base, off, rd, uint8_t, rd_layout(NULL, c->max_requests, G));
    CARVE(base, off, s, int32_t, sel);
    CARVE(base, off, l, int32_t, sel * (size_t)nsrc_max);
    CARVE(base, off, w, int32_t, 2);
    CARVE(base, off, z, uint64_t, DRES_S_COUNT);
    dres_state *sa = NULL;
    CARVE(base, off, sa, dres_state, G);
    dhs_pub *pub = NULL;
    CARVE(base, off, pub, dhs_pub, DRES_PUB_CAP);
    if (d && base) {
        d->st_all_h = sa;
        d->rd_h = (dres_round *)(void *)rd;
        d->sel_h = s;
        d->loc_h = l;
        d->word_h = w;
        d->zero_h = z;
        d->err = err;
        d->pub = pub;
    }
    return off;
}

uint64_t dres_state_bytes(const dhs_arch *a, const dhs_config *c, int64_t stage_rows)
{
    if (c->resolver != DHS_RESOLVER_DEVICE) return 0;
    int32_t nsrc[DHS_MAX_SOURCES] = {0}, m[DHS_MAX_SOURCES] = {0}, nsrc_max = 1;
    uint32_t stride = 0;
    for (int i = 0; i < a->n_sources; i++) {
        nsrc[a->sources[i].group]++;
        m[a->sources[i].group] = (int32_t)a->sources[i].m;
        if (a->sources[i].row_bytes > stride) stride = a->sources[i].row_bytes;
    }
    uint64_t tot = 0;
    for (int g = 0; g < a->n_groups; g++) {
        dres_state st;
        shape(c, g, nsrc[g], m[g], (c->max_rows + m[g] - 1) / m[g] + 1, stride, stage_rows, &st);
        tot += grp_layout(&st, NULL);
        if (nsrc[g] > nsrc_max) nsrc_max = nsrc[g];
    }
    return tot + shared_dev_layout(NULL, c, a->n_groups, nsrc_max, NULL);
}

/* ------------------------------------------------------------- helpers */
/* Waits for the compute stream and reads the error word (pinned host memory the kernels write), ordered
   after every kernel issued so far: one stream synchronisation (a 4-byte device-to-host copy and its
   synchronisation cost the serving host 40-50 us a round end). Leaves the word in word_h[0]; nothing is
   left to wait for, so the early-ended rounds' fences and the publish fence are dropped. */
static dhs_status dsync(const dhs_ctx *ctx)
{
    struct dres_ctx *d = ctx->dres;
    const dhs_backend_ops *ops = ctx->be->ops;
    dhs_status s;
    if (!ops->sync_compute) {
        s = ops->copy_sync(ctx->be, d->word_h, d->err, sizeof(int32_t));
    } else if ((s = ops->sync_compute(ctx->be)) == DHS_OK) {
        d->word_h[0] = *(volatile const int32_t *)d->err;
    }
    if (s == DHS_OK) d->n_early = 0, d->pub_t = 0;
    return s;
}

/* the k oldest early-ended rounds' fences, completed, out of the queue */
static void early_pop(struct dres_ctx *d, int32_t k)
{
    d->n_early -= k;
    memmove(d->early_q, d->early_q + k, sizeof(dhs_ticket) * (size_t)d->n_early);
}

/* The round begin after early round ends: no wait for their steps.
   1. The pinned memory the last round begin published from (descriptor, list, mirrors) is rewritten by
      this one: its publishes must have run. They ran before that round's step, so the begin waits for
      the fence recorded right after them (pub_t), which an engine that opens round t + 1 while the
      device runs round t finds complete; without one, for the newest early fence (after that round's
      last resolve: the wait the begin made before pub_t existed).
   2. The error word: read once an early-ended round's fence completed (queried, not waited for), and
      the oldest fence waited for when DRES_EARLY_LAG are outstanding, so a round's word is read at
      the latest by the begin after the next early end (or by dhs_round_end, dhs_sync). A word found set
      may still be written by a later round's kernel: the stream completes before it is read and
      cleared (dsync): a set word is always reported (it keeps the first error, so one report may stand
      for more than one early-ended round's entries; docs/API.md).
   A backend without such fences (ticket 0) or without sync_compute: the whole stream, as dsync. */
static dhs_status early_check(const dhs_ctx *ctx)
{
    struct dres_ctx *d = ctx->dres;
    if (d->n_early == 0) return DHS_OK;
    dhs_backend *be = ctx->be;
    const dhs_backend_ops *ops = be->ops;
    if (!ops->sync_compute) return dsync(ctx);
    for (int32_t i = 0; i < d->n_early; i++)
        if (!d->early_q[i]) return dsync(ctx);
    dhs_status s = ops->wait(be, d->pub_t ? d->pub_t : d->early_q[d->n_early - 1]);
    if (s != DHS_OK) return s;
    d->pub_t = 0;
    int32_t k = 0;
    while (k < d->n_early && ops->done(be, d->early_q[k])) k++;
    if (k == 0 && d->n_early == DRES_EARLY_LAG) {
        if ((s = ops->wait(be, d->early_q[0])) != DHS_OK) return s;
        k = 1;
    }
    if (k == 0) return DHS_OK;
    if (*(volatile const int32_t *)d->err != 0) return dsync(ctx);
    early_pop(d, k);
    return DHS_OK;
}

/* The error word as the last synchronisation read it: its status (DHS_OK when clear), the word cleared on
   the host and on the device */
static dhs_status word_take(const dhs_ctx *ctx)
{
    struct dres_ctx *d = ctx->dres;
    d->word_due = 0;
    if (d->word_h[0] == 0) return DHS_OK;
    const dhs_status s = (dhs_status)(-d->word_h[0]);
    d->word_h[0] = 0;
    const dhs_status s2 = ctx->be->ops->copy_sync(ctx->be, d->err, &d->word_h[0], sizeof(int32_t));
    return s2 != DHS_OK ? s2 : s;
}

dhs_status dres_settle(dhs_ctx *ctx, int full)
{
    struct dres_ctx *d = ctx->dres;
    d->follows_early = !full && d->n_early > 0;
    /* a synchronisation since the early end (a full publish list, dhs_resolve, dhs_get_stats) already read
       a set word and emptied the queue: reported now, not left to fences queued after it. The word may
       have been read before later kernels ran, so the stream completes first (then nothing can set it) */
    const int seen = d->word_due && d->word_h[0] != 0;
    const dhs_status s = (full && d->n_early) || seen ? dsync(ctx) : early_check(ctx);
    if (s != DHS_OK) return s;
    if (d->n_early) return DHS_OK; /* the word of an early-ended round still unread: a later call reads it */
    return word_take(ctx);
}

/* A publish is a copy: DHS_FAULT_COPY makes it fail as a copy would (dhs_verify's faults reach the
   device resolver's publishes through it) */
static dhs_status publish(const dhs_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return DHS_OK;
    if (be_fault(ctx->be, DHS_FAULT_COPY)) return DHS_ERR_BACKEND;
    return ctx->be->ops->publish(ctx->be, dst, src, bytes);
}

/* The publish list: a round begin's descriptor and changed tables go to the device in one backend call
   (publish_list) instead of one copy each, where the backend has the call (the CPU backend; the CUDA
   backend's one kernel launch, publish.cu). Each copy call cost the serving host 1.6-3.9 us, and a
   round begin made up to 54 of them at C = 64 (control_bench, staggered pages): one launch of 3.5-3.9 us
   took the begin's median from 100.7 to 59.0 us there (bench/RESULTS.md). Pieces are cut at
   DRES_PUB_PIECE bytes so the device copies a large descriptor with many blocks. The list is pinned
   memory the device reads: a full list is issued and waited for before it is rewritten; pub_flush
   issues the rest, and every caller waits for the compute stream before the next round begin lists
   again (the round end's synchronisation, dres_publish_request's), or after an early round end for the
   fence after the list (pub_t; early_check at the next round begin). */
static dhs_status pub_flush(dhs_ctx *ctx)
{
    struct dres_ctx *d = ctx->dres;
    if (d->n_pub == 0) return DHS_OK;
    const int32_t n = d->n_pub;
    d->n_pub = 0;
    if (be_fault(ctx->be, DHS_FAULT_COPY)) return DHS_ERR_BACKEND;
    return ctx->be->ops->publish_list(ctx->be, d->pub, n);
}

int64_t dres_set_publish_cap(dhs_ctx *ctx, int32_t cap)
{
    if (!ctx->dres) return -1;
    if (cap > 0) ctx->dres->pub_cap = cap > DRES_PUB_CAP ? DRES_PUB_CAP : cap;
    return ctx->dres->pub_full;
}

static dhs_status pub_add(dhs_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    struct dres_ctx *d = ctx->dres;
    if (!ctx->be->ops->publish_list) return publish(ctx, dst, src, bytes);
    for (size_t o = 0; o < bytes; o += DRES_PUB_PIECE) {
        if (d->n_pub == d->pub_cap) { /* full: issued, then waited for before its memory is reused */
            d->pub_full++;
            dhs_status s = pub_flush(ctx);
            if (s == DHS_OK) s = dsync(ctx);
            if (s != DHS_OK) return s;
        }
        const size_t b = bytes - o < DRES_PUB_PIECE ? bytes - o : DRES_PUB_PIECE;
        d->pub[d->n_pub++] = (dhs_pub){(uint64_t)(uintptr_t)((uint8_t *)dst + o),
                                       (uint64_t)(uintptr_t)((const uint8_t *)src + o), (uint64_t)b};
    }
    return DHS_OK;
}

/* ------------------------------------------------------------- lifecycle */
void dres_destroy(dhs_ctx *ctx)
{
    struct dres_ctx *d = ctx->dres;
    if (!d) return;
    /* every kernel and publish that reads this memory completes first */
    if (d->err && d->word_h) dsync(ctx);
    if (d->g) {
        for (int32_t g = 0; g < d->G; g++) {
            dres_grp *dg = &d->g[g];
            be_dev_free(ctx->be, dg->dev, dg->dev_bytes);
            be_host_free(ctx->be, dg->mir, dg->mir_bytes);
            ctx_free(ctx, dg->pub_nopt, (size_t)ctx->cfg.max_requests, sizeof(int64_t));
            ctx_free(ctx, dg->pub_nchunks, (size_t)ctx->cfg.max_requests, sizeof(int64_t));
        }
        ctx_free(ctx, d->g, (size_t)d->G, sizeof(dres_grp));
    }
    be_dev_free(ctx->be, d->dev, d->dev_bytes);
    be_host_free(ctx->be, d->host, d->host_bytes);
    ctx_free(ctx, d->pos_of, (size_t)ctx->cfg.max_requests, sizeof(int32_t));
    ctx_free(ctx, d->pending, (size_t)d->G, 1);
    ctx_free(ctx, d->split, (size_t)d->G, 1);
    ctx_free(ctx, d, 1, sizeof *d);
    ctx->dres = NULL;
}

dhs_status dres_request_reset(dhs_ctx *ctx, int32_t slot)
{
    struct dres_ctx *d = ctx->dres;
    for (int32_t g = 0; g < d->G; g++) {
        dhs_status s = ctx->be->ops->dres_reset(ctx->be, &d->g[g].st, slot);
        if (s != DHS_OK) return s;
    }
    return DHS_OK;
}

dhs_status dres_create(dhs_ctx *ctx)
{
    dhs_backend *be = ctx->be;
    const dhs_backend_ops *ops = be->ops;
    if (!ops->dres_init || !ops->dres_resolve || !ops->dres_wait || !ops->dres_promote || !ops->dres_promote_all ||
        !ops->dres_reset || !ops->publish)
        return DHS_ERR_UNSUPPORTED;
    const dhs_config *c = &ctx->cfg;
    const int32_t G = ctx->arch.n_groups, N = c->max_requests;
    struct dres_ctx *d = ctx_calloc(ctx, 1, sizeof *d);
    if (!d) return DHS_ERR_NOMEM;
    ctx->dres = d; /* dres_destroy frees a partial state */
    d->G = G;
    d->nsrc_max = 1;
    d->g = ctx_calloc(ctx, (size_t)G, sizeof(dres_grp));
    d->pos_of = ctx_calloc(ctx, (size_t)N, sizeof(int32_t));
    d->pending = ctx_calloc(ctx, (size_t)G, 1);
    d->split = ctx_calloc(ctx, (size_t)G, 1);
    if (!d->g || !d->pos_of || !d->pending || !d->split) return DHS_ERR_NOMEM;
    for (int32_t i = 0; i < N; i++) d->pos_of[i] = -1;
    d->rd_filled = -1;
    d->pub_cap = DRES_PUB_CAP;
    dhs_status s;
    for (int32_t g = 0; g < G; g++) {
        dres_grp *dg = &d->g[g];
        if (ctx->grp_nsrc[g] > d->nsrc_max) d->nsrc_max = ctx->grp_nsrc[g];
        shape(c, g, ctx->grp_nsrc[g], ctx->grp_m[g], ctx->grp_max_rows[g], ctx->row_stride, ctx->arena_rows_per_slot,
              &dg->st);
        size_t db = grp_layout(&dg->st, NULL), mb = mir_layout(dg, NULL);
        if ((s = be_dev_alloc(be, db, (void **)&dg->dev)) != DHS_OK) return s;
        dg->dev_bytes = db;
        if ((s = be_host_alloc(be, mb, (void **)&dg->mir)) != DHS_OK) return s;
        dg->mir_bytes = mb;
        grp_layout(&dg->st, dg->dev);
        mir_layout(dg, dg->mir);
        dg->pub_nopt = ctx_calloc(ctx, (size_t)N, sizeof(int64_t));
        dg->pub_nchunks = ctx_calloc(ctx, (size_t)N, sizeof(int64_t));
        if (!dg->pub_nopt || !dg->pub_nchunks) return DHS_ERR_NOMEM;
    }
    if ((s = ops->dres_init(be, G, d->nsrc_max)) != DHS_OK) return s;
    size_t sdb = shared_dev_layout(d, c, G, d->nsrc_max, NULL), shb = shared_host_layout(d, c, G, d->nsrc_max, NULL);
    if ((s = be_dev_alloc(be, sdb, (void **)&d->dev)) != DHS_OK) return s;
    d->dev_bytes = sdb;
    if ((s = be_host_alloc(be, shb, (void **)&d->host)) != DHS_OK) return s;
    d->host_bytes = shb;
    shared_dev_layout(d, c, G, d->nsrc_max, d->dev);
    shared_host_layout(d, c, G, d->nsrc_max, d->host);
    memset(d->zero_h, 0, sizeof(uint64_t) * DRES_S_COUNT);
    d->word_h[0] = 0;
    d->word_h[1] = -1;
    if ((s = publish(ctx, d->err, &d->word_h[0], sizeof(int32_t))) != DHS_OK) return s;
    if ((s = publish(ctx, d->owner, &d->word_h[1], sizeof(int32_t))) != DHS_OK) return s;
    /* every table starts empty; arenas are assigned statically: a group
       stages into arenas [0, nsrc_g) (none when fewer arenas exist) */
    for (int32_t g = 0; g < G; g++) {
        dres_grp *dg = &d->g[g];
        dres_state *st = &dg->st;
        const size_t ns = (size_t)st->nsrc, nN = (size_t)N;
        const size_t nh = nN * ns * (size_t)(st->B / st->p), nt = nN * ns * (size_t)(st->T / st->p);
        const size_t no = nN * ns * (size_t)st->max_opt_pages, nr = nN * (size_t)st->max_opt_pages;
        const size_t nc = nN * ns * (size_t)st->n_host_chunks;
        for (size_t i = 0; i < nh; i++) dg->m_hot[i] = -1;
        for (size_t i = 0; i < nt; i++) dg->m_tail[i] = -1;
        for (size_t i = 0; i < no; i++) dg->m_opt[i] = -1;
        memset(dg->m_ready, 0, nr);
        memset(dg->m_chunks, 0, nc * sizeof(uint64_t));
        for (size_t si = 0; si < ns; si++)
            dg->m_arena[si] = ctx->n_arenas >= st->nsrc ? ctx->arenas[si].first_page : -1;
        for (int32_t si = 0; si < st->nsrc; si++) dg->m_src[si] = ctx->grp_srcs[g][si];
        st->err = d->err;
        st->stage_owner = d->owner;
        st->pool = ctx->pool;
        if ((s = publish(ctx, st->hot_pages, dg->m_hot, nh * 4)) != DHS_OK ||
            (s = publish(ctx, st->tail_pages, dg->m_tail, nt * 4)) != DHS_OK ||
            (s = publish(ctx, st->opt_pages, dg->m_opt, no * 4)) != DHS_OK ||
            (s = publish(ctx, st->opt_ready, dg->m_ready, nr)) != DHS_OK ||
            (s = publish(ctx, st->host_chunks, dg->m_chunks, nc * 8)) != DHS_OK ||
            (s = publish(ctx, st->arena_page, dg->m_arena, ns * 4)) != DHS_OK ||
            (s = publish(ctx, st->src_id, dg->m_src, ns * 4)) != DHS_OK ||
            (s = publish(ctx, st->stats, d->zero_h, sizeof(uint64_t) * DRES_S_COUNT)) != DHS_OK)
            return s;
        for (int32_t r = 0; r < N; r++)
            if ((s = ops->dres_reset(be, st, r)) != DHS_OK) return s;
        d->st_all_h[g] = *st;
    }
    if ((s = publish(ctx, d->st_all, d->st_all_h, sizeof(dres_state) * (size_t)G)) != DHS_OK) return s;
    return dsync(ctx);
}

/* ------------------------------------------------------------- publishing */
/* Brings the mirror range [base, base + n) to the values of `want` (a
   function of the index) and publishes the span that changed. */
#define SYNC_TABLE(ctx, T_, mir, dev, base, n, want_expr, status)                                                    \
    do {                                                                                                           \
        int64_t lo_ = -1, hi_ = -1;                                                                                \
        for (int64_t i = 0; i < (int64_t)(n); i++) {                                                               \
            const T_ v_ = (want_expr);                                                                             \
            if ((mir)[(base) + i] != v_) {                                                                         \
                (mir)[(base) + i] = v_;                                                                            \
                if (lo_ < 0) lo_ = i;                                                                              \
                hi_ = i + 1;                                                                                       \
            }                                                                                                      \
        }                                                                                                          \
        if (lo_ >= 0 && (status) == DHS_OK)                                                                        \
            (status) = pub_add((ctx), (dev) + (base) + lo_, (mir) + (base) + lo_,                                  \
                               sizeof(*(mir)) * (size_t)(hi_ - lo_));                                              \
    } while (0)

/* Whether a mirror range already holds a table: its first nvalid entries equal
   src, the rest (up to n) the fill value. Most tables of a dirty request did
   not change: a memcmp finds that several times faster than SYNC_TABLE's
   per-entry loop (which grows with the history; measured on the H200). */
static int same_i32(const int32_t *mir, const int32_t *src, int64_t nvalid, int64_t n, int32_t fill)
{
    if (nvalid > 0 && memcmp(mir, src, sizeof(int32_t) * (size_t)nvalid) != 0) return 0;
    for (int64_t i = nvalid; i < n; i++)
        if (mir[i] != fill) return 0;
    return 1;
}

static int same_chunks(const uint64_t *mir, uint8_t *const *src, int64_t nvalid, int64_t n)
{
    uint64_t diff = 0;
    for (int64_t i = 0; i < nvalid; i++) diff |= mir[i] ^ (uint64_t)(uintptr_t)src[i];
    for (int64_t i = nvalid; i < n; i++) diff |= mir[i];
    return diff == 0;
}

static int same_ready(const uint8_t *mir, const uint8_t *state, int64_t nvalid, int64_t n)
{
    unsigned diff = 0;
    for (int64_t i = 0; i < nvalid; i++) diff |= (unsigned)(mir[i] ^ (uint8_t)(state[i] == OPT_READY));
    for (int64_t i = nvalid; i < n; i++) diff |= mir[i];
    return diff == 0;
}

/* the tables of request slot r, group g, as the host sees them now */
static dhs_status sync_request(dhs_ctx *ctx, int32_t r, int32_t g)
{
    dres_grp *dg = &ctx->dres->g[g];
    const dres_state *st = &dg->st;
    const grp_state *gs = &ctx->req[r].g[g];
    const int64_t ns = st->nsrc, hp = st->B / st->p, tp = st->T / st->p;
    dhs_status s = DHS_OK;
    int64_t nopt = gs->n_opt_pages, nch = 0;
    for (int64_t si = 0; si < ns; si++)
        if (gs->src[si].n_host_chunks > nch) nch = gs->src[si].n_host_chunks;
    const int64_t wopt = nopt > dg->pub_nopt[r] ? nopt : dg->pub_nopt[r];
    const int64_t wch = nch > dg->pub_nchunks[r] ? nch : dg->pub_nchunks[r];
    /* the optional entries to compare: [olo, ohi) of [0, wopt): all of them after TABLES_ALL (a new request,
       an import, a forgotten mirror), else only those opt_set changed (opt_grow's new entries are absent,
       which the mirror past pub_nopt holds already) */
    int64_t olo = 0, ohi = wopt;
    if (!(ctx->req[r].tables_dirty & TABLES_ALL)) {
        olo = gs->opt_dhi > gs->opt_dlo ? gs->opt_dlo : 0;
        ohi = gs->opt_dhi > gs->opt_dlo ? (gs->opt_dhi < wopt ? gs->opt_dhi : wopt) : 0;
        if (olo > ohi) olo = ohi;
    }
    const int64_t ovalid = nopt < olo ? 0 : (nopt < ohi ? nopt : ohi) - olo; /* entries of [olo, ohi) below nopt */
    for (int64_t si = 0; si < ns; si++) {
        const src_state *ss = &gs->src[si];
        const int64_t bh = ((int64_t)r * ns + si) * hp, bt = ((int64_t)r * ns + si) * tp;
        const int64_t bo = ((int64_t)r * ns + si) * st->max_opt_pages, bc = ((int64_t)r * ns + si) * st->n_host_chunks;
        if (!same_i32(dg->m_hot + bh, ss->hot_pages, hp, hp, 0))
            SYNC_TABLE(ctx, int32_t, dg->m_hot, st->hot_pages, bh, hp, ss->hot_pages[i], s);
        if (!same_i32(dg->m_tail + bt, ss->tail_pages, tp, tp, 0))
            SYNC_TABLE(ctx, int32_t, dg->m_tail, st->tail_pages, bt, tp, ss->tail_pages[i], s);
        /* no pointer arithmetic on a group's absent (NULL) arrays: they have no valid entry */
        if (ohi > olo && !same_i32(dg->m_opt + bo + olo, ovalid > 0 ? ss->opt_pages + olo : NULL, ovalid, ohi - olo, -1))
            SYNC_TABLE(ctx, int32_t, dg->m_opt, st->opt_pages, bo + olo, ohi - olo,
                       i + olo < nopt ? ss->opt_pages[i + olo] : -1, s);
        if (!same_chunks(dg->m_chunks + bc, ss->host_chunks, ss->n_host_chunks, wch))
            SYNC_TABLE(ctx, uint64_t, dg->m_chunks, st->host_chunks, bc, wch,
                       i < ss->n_host_chunks ? (uint64_t)(uintptr_t)ss->host_chunks[i] : (uint64_t)0, s);
    }
    if (ohi > olo && !same_ready(dg->m_ready + (int64_t)r * st->max_opt_pages + olo, ovalid > 0 ? gs->opt_state + olo : NULL,
                                 ovalid, ohi - olo))
        SYNC_TABLE(ctx, uint8_t, dg->m_ready, st->opt_ready, (int64_t)r * st->max_opt_pages + olo, ohi - olo,
                   (uint8_t)(i + olo < nopt && gs->opt_state[i + olo] == OPT_READY), s);
    if (s == DHS_OK) {
        /* the mirror's entries at or past pub_nopt hold the fill (-1, not ready): after a partial comparison
           the extent stays the wider one */
        dg->pub_nopt[r] = olo == 0 && ohi == wopt ? nopt : wopt;
        dg->pub_nchunks[r] = nch;
        ctx->req[r].g[g].opt_dlo = ctx->req[r].g[g].opt_dhi = 0;
    }
    return s;
}

/* After a publish that failed, the mirror of request slot r no longer records what the device holds: its
   entries were brought to the host's values when they were listed, but some or all of their copies never
   ran. Every entry is set to a value no table holds (page INT32_MIN, host chunk UINT64_MAX, readiness
   0xff) over the slot's whole extent, and every group is marked dirty, so the next publish
   finds each entry different and sends the slot's tables in full. */
static void mirror_forget(dhs_ctx *ctx, int32_t r)
{
    struct dres_ctx *d = ctx->dres;
    for (int32_t g = 0; g < d->G; g++) {
        dres_grp *dg = &d->g[g];
        const dres_state *st = &dg->st;
        const int64_t ns = st->nsrc, hp = st->B / st->p, tp = st->T / st->p, mo = st->max_opt_pages;
        const int64_t nc = st->n_host_chunks;
        for (int64_t i = 0; i < ns * hp; i++) dg->m_hot[(int64_t)r * ns * hp + i] = INT32_MIN;
        for (int64_t i = 0; i < ns * tp; i++) dg->m_tail[(int64_t)r * ns * tp + i] = INT32_MIN;
        for (int64_t i = 0; i < ns * mo; i++) dg->m_opt[(int64_t)r * ns * mo + i] = INT32_MIN;
        for (int64_t i = 0; i < ns * nc; i++) dg->m_chunks[(int64_t)r * ns * nc + i] = UINT64_MAX;
        memset(dg->m_ready + (int64_t)r * mo, 0xff, (size_t)mo);
        dg->pub_nopt[r] = mo;
        dg->pub_nchunks[r] = nc;
        ctx->req[r].g[g].tables_dirty = 1;
    }
    ctx->req[r].tables_dirty = TABLES_ALL;
}

/* the tables of a dirty request slot: only its dirty groups (a repopulated page or a new host chunk
   marks one of 21 GLM-5.3 groups, whose comparison is ~1/21 of the request's 600 KB of tables at 100K),
   every group after TABLES_ALL; clean after a successful publish */
static dhs_status publish_dirty(dhs_ctx *ctx, int32_t slot)
{
    request *rq = &ctx->req[slot];
    dhs_status s = DHS_OK;
    if (!rq->tables_dirty) return DHS_OK;
    for (int32_t g = 0; g < ctx->dres->G && s == DHS_OK; g++) {
        if (!(rq->tables_dirty & TABLES_ALL) && !rq->g[g].tables_dirty) continue;
        s = sync_request(ctx, slot, g);
        if (s == DHS_OK) rq->g[g].tables_dirty = 0;
    }
    if (s == DHS_OK) rq->tables_dirty = 0;
    return s;
}

dhs_status dres_round_begin(dhs_ctx *ctx)
{
    struct dres_ctx *d = ctx->dres;
    const dhs_config *c = &ctx->cfg;
    const int32_t N = c->max_requests, G = d->G;
    /* round descriptor; the tail window it publishes is fixed for the round
       (dhs_round_begin made room for the block with tail_room before) */
    dres_round *rd = d->rd_h;
    const int32_t nr = ctx->n_round;
    /* Only the positions that change are written: this round's, and the last round's past it, which
       become absent (slot -1, the rest 0, as the first layout made every position), instead of all N
       positions and G groups each round (no difference the H200 runs could separate from their noise
       at N = 64; it keeps the work proportional to the round) */
    if (d->rd_filled < 0) {
        memset(rd, 0, d->rd_bytes);
        rd_layout(rd, N, G);
        int32_t *slot0 = (int32_t *)(void *)((char *)rd + rd->off_slot);
        for (int32_t b = 0; b < N; b++) slot0[b] = -1;
        d->rd_filled = 0;
    }
    rd->n_round = nr;
    rd->epoch = ctx->epoch;
    rd->n_groups = G;
    int32_t *slot = (int32_t *)(void *)((char *)rd + rd->off_slot), *K = (int32_t *)(void *)((char *)rd + rd->off_K);
    int64_t *n = (int64_t *)(void *)((char *)rd + rd->off_n), *tl = (int64_t *)(void *)((char *)rd + rd->off_tail_lo);
    int64_t *first = (int64_t *)(void *)((char *)rd + rd->off_first);
    for (int32_t b = 0; b < d->rd_filled; b++) d->pos_of[slot[b]] = -1;
    for (int32_t b = nr; b < d->rd_filled; b++) {
        slot[b] = -1;
        K[b] = 0;
        n[b] = 0;
        for (int32_t g = 0; g < G; g++) tl[(int64_t)g * N + b] = first[(int64_t)g * N + b] = 0;
    }
    for (int32_t b = 0; b < nr; b++) {
        const request *rq = &ctx->req[ctx->round_reqs[b]];
        slot[b] = ctx->round_reqs[b];
        K[b] = rq->K;
        n[b] = rq->n;
        /* committed rows and tail_lo from request.cm: a few cache lines per request, no group's state */
        const int64_t *hist = rq->cm, *tail_lo = cm_tail_lo(ctx, rq);
        for (int32_t g = 0; g < G; g++) {
            tl[(int64_t)g * N + b] = tail_lo[g];
            first[(int64_t)g * N + b] = hist[g];
        }
        d->pos_of[ctx->round_reqs[b]] = b;
    }
    d->rd_filled = nr;
    dhs_status s = pub_add(ctx, d->rd, rd, d->rd_bytes);
    /* only requests whose tables changed: comparing every table of every request
       cost ~150 us per 100K session and round on the H200 */
    for (int32_t b = 0; b < ctx->n_round && s == DHS_OK; b++) s = publish_dirty(ctx, ctx->round_reqs[b]);
    if (s == DHS_OK) s = pub_flush(ctx);
    else d->n_pub = 0; /* what was listed is dropped: the round is not opened */
    /* after an early round end (so the next one may come early too, and its step may still run when
       the next round begins): the next round begin waits for this fence, not for the step, before it
       rewrites what the list reads (early_check) */
    if (s == DHS_OK && d->follows_early && ctx->be->ops->record_readers)
        s = ctx->be->ops->record_readers(ctx->be, &d->pub_t);
    if (s != DHS_OK) {
        /* the round is not opened; a publish already issued completes before
           a retry may rewrite its pinned source, and the tables listed for the
           round's requests go out in full with the next publish */
        dsync(ctx);
        for (int32_t b = 0; b < ctx->n_round; b++) {
            mirror_forget(ctx, ctx->round_reqs[b]);
            ctx->req[ctx->round_reqs[b]].in_round = 0;
        }
        ctx->n_round = 0;
    }
    return s;
}

/* After an import outside a round: the request's tables are published now,
   with one wait for the compute stream, instead of on the critical path of
   its first round (on the H200 the table syncs of a two-session 100K GLM-5.3
   process took 3.2 ms in all). Inside a round, or on a failure, the request stays dirty and
   dres_round_begin publishes it. */
void dres_publish_request(dhs_ctx *ctx, int32_t slot)
{
    if (!ctx->dres || ctx->round_open || !ctx->req[slot].tables_dirty) return;
    /* after an early round end its publishes may not have run yet: they read the list and mirrors that
       publish_dirty rewrites (a failed wait leaves the request dirty for its round's publish); the word
       read stays due for the next round begin */
    if (ctx->dres->n_early && dsync(ctx) != DHS_OK) return;
    /* the wait keeps the rule that no publish is pending when a mirror is rewritten; on a failure the
       request's tables go out in full with the next publish (its round's) */
    if (publish_dirty(ctx, slot) == DHS_OK && pub_flush(ctx) == DHS_OK && dsync(ctx) == DHS_OK) return;
    ctx->dres->n_pub = 0;
    (void)dsync(ctx);
    mirror_forget(ctx, slot);
}

/* ------------------------------------------------------------- per layer */
/* the group's copy queue back into the compute stream (after its split resolve) */
static dhs_status join(dhs_ctx *ctx, int32_t g)
{
    struct dres_ctx *d = ctx->dres;
    if (!d->split[g]) return DHS_OK;
    dhs_status s = ctx->be->ops->dres_wait(ctx->be, &d->g[g].st, d->rd, ctx->grp_nsrc[g] - 1);
    if (s == DHS_OK) d->split[g] = 0;
    return s;
}

dhs_status dres_resolve_items(dhs_ctx *ctx, int32_t g, int32_t k, int32_t n_items, const dhs_resolve_item *items)
{
    struct dres_ctx *d = ctx->dres;
    const dhs_config *c = &ctx->cfg;
    const int32_t N = c->max_requests, KK = c->spec_width, nsrc = ctx->grp_nsrc[g];
    const int64_t per = (int64_t)KK * k, nb = ctx->n_round;
    dhs_backend *be = ctx->be;
    /* pack [n_round][k_max][k] in round order; requests without an item
       select nothing */
    for (int64_t e = 0; e < nb * per; e++) d->sel_h[e] = -1;
    for (int32_t it = 0; it < n_items; it++) {
        const int32_t b = d->pos_of[items[it].req.id];
        memcpy(d->sel_h + (int64_t)b * per, items[it].sel, sizeof(int32_t) * (size_t)items[it].n_queries * (size_t)k);
    }
    /* the upload may fail (injected): nothing changed yet */
    dhs_status s = join(ctx, g);
    if (s == DHS_OK) s = be_copy_sync(be, d->sel, d->sel_h, sizeof(int32_t) * (size_t)(nb * per));
    if (s != DHS_OK) return s;
    /* The round's error word may already hold a device call's error, kept for dhs_round_end. This call
       answers only for its own entries: set the word aside (the plan records only the first error of a
       clear word), read this call's error after it, and put the earlier one back for dhs_round_end */
    if ((s = dsync(ctx)) != DHS_OK) return s;
    const int32_t earlier = d->word_h[0];
    if (earlier != 0) {
        d->word_h[0] = 0;
        if ((s = be->ops->copy_sync(be, d->err, &d->word_h[0], sizeof(int32_t))) != DHS_OK) return s;
    }
    d->pending[g] = 1;
    s = be->ops->dres_resolve(be, &d->g[g].st, d->rd, k, d->sel, d->loc, !ctx->be->payload_free, 0);
    /* read-back in one copy through the backend directly (not
       fault-injected): the device state has changed; a failure here is a
       device failure. [si][b] blocks up to the last source's round rows. */
    if (s == DHS_OK && nb > 0)
        s = be->ops->copy_sync(be, d->loc_h, d->loc, sizeof(int32_t) * (size_t)((((int64_t)nsrc - 1) * N + nb) * per));
    for (int32_t it = 0; it < n_items && s == DHS_OK; it++) {
        const int64_t b = d->pos_of[items[it].req.id], nent = (int64_t)items[it].n_queries * k;
        for (int32_t si = 0; si < nsrc; si++)
            memcpy(items[it].loc + si * nent, d->loc_h + ((int64_t)si * N + b) * per, sizeof(int32_t) * (size_t)nent);
    }
    if (s == DHS_OK) s = dsync(ctx);
    if (s == DHS_OK && d->word_h[0] != 0) s = (dhs_status)(-d->word_h[0]); /* the host validated every
                                                                               entry: only staging fails here */
    if (s == DHS_OK && d->word_h[0] == 0 && earlier == 0) return DHS_OK;
    /* the word goes back to what the round's device calls recorded (also after a failed call) */
    d->word_h[0] = earlier;
    dhs_status s2 = be->ops->copy_sync(be, d->err, &d->word_h[0], sizeof(int32_t));
    return s != DHS_OK ? s : s2;
}

int dres_may_miss(const dhs_ctx *ctx, int32_t group)
{
    const int64_t p = ctx->cfg.page_rows;
    const int32_t g0 = group < 0 ? 0 : group, g1 = group < 0 ? ctx->arch.n_groups : group + 1;
    int any = 0;
    for (int32_t i = 0; i < ctx->n_round && !any; i++) {
        const request *rq = &ctx->req[ctx->round_reqs[i]];
        for (int32_t g = g0; g < g1 && !any; g++) {
            const grp_state *gs = &rq->g[g];
            /* rows below the tail window are direct only in ready optional pages */
            const int64_t lo = *gs->tail_lo, nop = gs->n_opt_pages;
            any = lo > nop * p;
            if (!any && gs->opt_ready < nop) {
                /* a page not ready counts only if it holds a row below the window: the pages from
                   ceil(lo / p) on (decoded pages that joined while the ring holds them, at most T / p + 1)
                   are served by the ring */
                int64_t above = 0;
                for (int64_t hp = (lo + p - 1) / p; hp < nop; hp++) above += gs->opt_state[hp] != OPT_READY;
                any = nop - gs->opt_ready > above;
            }
        }
    }
    return any;
}

static dhs_status resolve_device(dhs_ctx *ctx, int32_t group, int32_t k, const int32_t *sel_dev, int32_t *loc_dev,
                                 int split, int direct)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (!ctx->dres) return DHS_ERR_STATE;
    if (group < 0 || group >= ctx->arch.n_groups) return DHS_ERR_UNKNOWN_SOURCE;
    if (!ctx->round_open) return DHS_ERR_NOT_IN_ROUND;
    if (k < 1) return DHS_ERR_INVALID_ARG;
    if (k > ctx->cfg.sel_k) return DHS_ERR_K_TOO_LARGE;
    if (!sel_dev || !loc_dev) return DHS_ERR_INVALID_ARG;
    if ((uintptr_t)sel_dev % sizeof(int32_t) || (uintptr_t)loc_dev % sizeof(int32_t)) return DHS_ERR_MISALIGNED;
    struct dres_ctx *d = ctx->dres;
    if (direct) { /* only for a round that cannot miss here: nothing staged, nothing to promote */
        if (dres_may_miss(ctx, group)) return DHS_ERR_STATE;
        split = 0;
    }
    /* the plan rewrites the copy list the queue may still be reading */
    dhs_status s = join(ctx, group);
    if (s != DHS_OK) return s;
    split = split && !ctx->be->payload_free && ctx->grp_nsrc[group] > 1;
    if (!direct) d->pending[group] = 1; /* a direct call stages nothing: an earlier call's pending stays */
    s = ctx->be->ops->dres_resolve(ctx->be, &d->g[group].st, d->rd, k, sel_dev, loc_dev, !ctx->be->payload_free,
                                   (split ? DRES_MODE_SPLIT : 0) | (direct ? DRES_MODE_DIRECT : 0));
    if (s == DHS_OK) d->split[group] = (uint8_t)split;
    return s;
}

dhs_status dhs_resolve_device(dhs_ctx *ctx, int32_t group, int32_t k, const int32_t *sel_dev, int32_t *loc_dev,
                              unsigned flags)
{
    if (!ctx || (flags & ~(unsigned)(DHS_RESOLVE_SPLIT | DHS_RESOLVE_DIRECT))) return DHS_ERR_INVALID_ARG;
    const uint64_t t = hp_now();
    dhs_status s = resolve_device(ctx, group, k, sel_dev, loc_dev, (flags & DHS_RESOLVE_SPLIT) != 0,
                                  (flags & DHS_RESOLVE_DIRECT) != 0);
    hp_add(ctx, DHS_HP_RESOLVE, t);
    return s;
}

dhs_status dhs_source_wait(dhs_ctx *ctx, int32_t group, int32_t si)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (!ctx->dres) return DHS_ERR_STATE;
    if (group < 0 || group >= ctx->arch.n_groups || si < 0 || si >= ctx->grp_nsrc[group])
        return DHS_ERR_UNKNOWN_SOURCE;
    if (!ctx->round_open) return DHS_ERR_NOT_IN_ROUND;
    struct dres_ctx *d = ctx->dres;
    if (!d->split[group] || si == 0) return DHS_OK; /* source 0 came with the resolve */
    if (si == ctx->grp_nsrc[group] - 1) return join(ctx, group);
    return ctx->be->ops->dres_wait(ctx->be, &d->g[group].st, d->rd, si);
}

dhs_status dres_tail_locations(dhs_ctx *ctx, int32_t req_stride, int64_t src_stride, int32_t *loc)
{
    struct dres_ctx *d = ctx->dres;
    const dhs_backend_ops *ops = ctx->be->ops;
    if (!ops->dres_tail_locs) return DHS_ERR_UNSUPPORTED;
    return ops->dres_tail_locs(ctx->be, d->st_all, d->st_all_h, d->G, d->nsrc_max, ctx->n_round, d->rd, req_stride,
                               src_stride, loc);
}

dhs_status dres_page_tables(dhs_ctx *ctx, int32_t page_stride, int64_t src_stride, int32_t *tab)
{
    struct dres_ctx *d = ctx->dres;
    const dhs_backend_ops *ops = ctx->be->ops;
    if (!ops->dres_page_tables) return DHS_ERR_UNSUPPORTED;
    return ops->dres_page_tables(ctx->be, d->st_all, d->st_all_h, d->G, d->nsrc_max, ctx->n_round, d->rd, page_stride,
                                 src_stride, tab);
}

dhs_status dres_group_done(dhs_ctx *ctx, int32_t g)
{
    /* promotion copies staging rows the queue may still be writing */
    dhs_status s = join(ctx, g);
    if (s != DHS_OK) return s;
    /* no resolve of the group since its last promotion, or only direct ones: nothing staged */
    if (!ctx->dres->pending[g]) return DHS_OK;
    s = ctx->be->ops->dres_promote(ctx->be, &ctx->dres->g[g].st, ctx->dres->rd, !ctx->be->payload_free);
    if (s == DHS_OK) ctx->dres->pending[g] = 0;
    return s;
}

dhs_status dres_join_all(dhs_ctx *ctx)
{
    dhs_status s = DHS_OK;
    for (int32_t g = 0; g < ctx->dres->G && s == DHS_OK; g++) s = join(ctx, g);
    return s;
}

dhs_status dres_round_end(dhs_ctx *ctx, int wait)
{
    struct dres_ctx *d = ctx->dres;
    const dhs_backend_ops *ops = ctx->be->ops;
    dhs_status s = dres_join_all(ctx);
    if (s != DHS_OK) return s;
    /* Promotion of the groups whose last resolve the engine did not follow
       with dhs_group_done (pending stays set across rounds: a graph replays
       the resolves the host saw once). Every group at once, in two launches
       instead of two per group (a group with nothing staged is a no-op);
       none when every group was declared done, e.g. inside a captured step
       (two launches took 57 us of host time on the H200 machine). */
    /* an early round end: its fence, recorded before the promotion (see early_check); 0 without one */
    dhs_ticket et = 0;
    if (!wait && ops->record_readers && (s = ops->record_readers(ctx->be, &et)) != DHS_OK) return s;
    if (memchr(d->pending, 1, (size_t)d->G))
        s = ops->dres_promote_all(ctx->be, d->st_all, d->st_all_h, d->G, d->rd, !ctx->be->payload_free);
    if (s != DHS_OK) return s;
    if (!wait) { /* an early round end: its word is read by a later round begin (early_check) */
        if (d->n_early == DRES_EARLY_LAG) { /* not after a round begin (it leaves fewer); the word stays set */
            if ((s = ops->wait(ctx->be, d->early_q[0])) != DHS_OK) return s;
            early_pop(d, 1);
        }
        d->early_q[d->n_early++] = et;
        d->word_due = 1;
        return DHS_OK;
    }
    if ((s = dsync(ctx)) != DHS_OK) return s; /* the round's one host synchronisation */
    return word_take(ctx);
}

/* ------------------------------------------------------------- statistics */
dhs_status dres_add_stats(const dhs_ctx *ctx, dhs_stats *out)
{
    struct dres_ctx *d = ctx->dres;
    dhs_status s = dsync(ctx);
    if (s != DHS_OK) return s;
    for (int32_t g = 0; g < d->G; g++) {
        uint64_t v[DRES_S_COUNT];
        if ((s = ctx->be->ops->copy_sync(ctx->be, v, d->g[g].st.stats, sizeof v)) != DHS_OK) return s;
        out->entries += v[DRES_S_ENTRIES];
        out->census_direct += v[DRES_S_DIRECT];
        out->census_hot += v[DRES_S_HOT];
        out->census_host += v[DRES_S_HOST];
        out->distinct_misses += v[DRES_S_MISSES];
        out->host_rows_copied += v[DRES_S_MISSES];
        out->host_bytes_copied += v[DRES_S_MISSES] * (uint64_t)ctx->grp_nsrc[g] * ctx->row_stride;
        out->staging_rows += v[DRES_S_STAGED];
        out->resolve_calls += v[DRES_S_CALLS];
    }
    return DHS_OK;
}

dhs_status dres_reset_stats(dhs_ctx *ctx)
{
    struct dres_ctx *d = ctx->dres;
    for (int32_t g = 0; g < d->G; g++) {
        dhs_status s = ctx->be->ops->copy_sync(ctx->be, d->g[g].st.stats, d->zero_h, sizeof(uint64_t) * DRES_S_COUNT);
        if (s != DHS_OK) return s;
    }
    return DHS_OK;
}

/* ------------------------------------------------------------- checks */
typedef struct {
    int n;
    char *msg;
    size_t len;
} dviol;

static void dfail(dviol *v, const char *fmt, ...)
{
    if (v->n++ == 0 && v->msg && v->len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->msg, v->len, fmt, ap);
        va_end(ap);
    }
}

static void page_ok(dviol *v, const dhs_ctx *ctx, int32_t pg, int32_t slot, enum page_use use, const char *what)
{
    if (pg < 0 || pg >= ctx->n_pages) { dfail(v, "I3: device %s page %d of request %d out of range", what, pg, slot); return; }
    if ((ctx->page_owner[pg] != slot && !(use == PAGE_OPT && ctx->page_owner[pg] == PAGE_OWNER_SHARED)) ||
        ctx->page_use[pg] != use)
        dfail(v, "I3: device %s page %d of request %d is owned by %d (use %d)", what, pg, slot, ctx->page_owner[pg],
              ctx->page_use[pg]);
}

/* The tables published for request r, group g (read back: pages = hot, tail and
   optional pages as dres_check lays them out, ready) equal the host's exactly,
   and so do its host chunks: a change that did not set the request's
   tables_dirty would be served stale, since dres_round_begin republishes only
   dirty requests. */
static void published_equal(dviol *v, const dhs_ctx *ctx, int32_t r, int32_t g, const int32_t *pages, const uint8_t *ready)
{
    const dres_state *st = &ctx->dres->g[g].st;
    const grp_state *gs = &ctx->req[r].g[g];
    const int64_t ns = st->nsrc, hp = st->B / st->p, tp = st->T / st->p, mo = st->max_opt_pages, nopt = gs->n_opt_pages;
    const int32_t *hot = pages, *tail = pages + ns * hp, *opt = pages + ns * (hp + tp);
    uint64_t *ch = malloc(sizeof(uint64_t) * (size_t)(st->n_host_chunks > 0 ? st->n_host_chunks : 1));
    if (!ch) dfail(v, "device check: out of memory");
    for (int64_t si = 0; si < ns; si++) {
        const src_state *ss = &gs->src[si];
        int bad = 0;
        for (int64_t i = 0; i < hp; i++) bad |= hot[si * hp + i] != ss->hot_pages[i];
        for (int64_t i = 0; i < tp; i++) bad |= tail[si * tp + i] != ss->tail_pages[i];
        for (int64_t i = 0; i < mo; i++) bad |= opt[si * mo + i] != (i < nopt ? ss->opt_pages[i] : -1);
        if (bad) dfail(v, "device tables: request %d group %d source %lld: published pages differ from the host's", r, g, (long long)si);
        if (!ch) continue;
        if (ctx->be->ops->copy_sync(ctx->be, ch, st->host_chunks + ((int64_t)r * ns + si) * st->n_host_chunks,
                                    sizeof(uint64_t) * (size_t)st->n_host_chunks) != DHS_OK) {
            dfail(v, "device check: read-back failed");
            continue;
        }
        for (int64_t i = 0; i < st->n_host_chunks; i++)
            if (ch[i] != (i < ss->n_host_chunks ? (uint64_t)(uintptr_t)ss->host_chunks[i] : (uint64_t)0)) {
                dfail(v, "device tables: request %d group %d source %lld: host chunk %lld differs from the host's", r, g,
                      (long long)si, (long long)i);
                break;
            }
    }
    free(ch);
    for (int64_t i = 0; i < mo; i++)
        if (ready[i] != (uint8_t)(i < nopt && gs->opt_state[i] == OPT_READY)) {
            dfail(v, "device tables: request %d group %d: optional page %lld readiness differs from the host's", r, g, (long long)i);
            break;
        }
}

/* Reads back every open request's device hot state: reverse index and slot
   table agree, filled <= B, protected count, staged rows; for requests of the
   open round (whose published tables the device serves from) every page the
   device can address belongs to the request (I3), and those tables equal the
   host's. */
int dres_check(const dhs_ctx *ctx, char *msg, size_t msg_len)
{
    struct dres_ctx *d = ctx->dres;
    dviol v = {0, msg, msg_len};
    dhs_backend *be = ctx->be;
    /* every kernel complete, without settling anything (an early-ended round's fences and unread word stay
       as they were: a check after every call must not change when a word is reported) */
    int32_t word = 0;
    const dhs_status qs = be->ops->sync_compute ? be->ops->sync_compute(be) : be->ops->copy_sync(be, &word, d->err, sizeof word);
    if (qs != DHS_OK) { dfail(&v, "device: compute stream failed"); return v.n; }
    if (be->ops->sync_compute) word = *(volatile const int32_t *)d->err;
    if (word != 0 && !ctx->round_open && !d->word_due) dfail(&v, "device: error word %d outside a round", word);
    if (d->n_early < 0 || d->n_early >= DRES_EARLY_LAG + (ctx->round_open ? 0 : 1))
        dfail(&v, "device: %d early-ended rounds unread (at most %d)", d->n_early, DRES_EARLY_LAG - (ctx->round_open ? 1 : 0));
    if (d->n_early && !d->word_due) dfail(&v, "device: early-ended rounds unread but no word due");
    int32_t owner;
    be->ops->copy_sync(be, &owner, d->owner, sizeof owner);
    if (!ctx->round_open && owner != -1) dfail(&v, "device: staging owner %d outside a round", owner);
    for (int32_t g = 0; g < d->G; g++) /* dhs_round_end joins every split resolve's copy queue */
        if (d->split[g] && (!ctx->round_open || ctx->grp_nsrc[g] < 2))
            dfail(&v, "device: group %d has split copies outstanding %s", g,
                  ctx->round_open ? "with one source" : "outside a round");
    if (ctx->round_open) { /* the tail window published for the round is still the host's: nothing inside a
                              round (dhs_background's backups, completions) moves tail_lo */
        dres_round *rd = malloc(d->rd_bytes);
        if (!rd || be->ops->copy_sync(be, rd, d->rd, d->rd_bytes) != DHS_OK) dfail(&v, "device: descriptor unreadable");
        else {
            const int64_t *tl = (const int64_t *)(const void *)((const char *)rd + rd->off_tail_lo);
            for (int32_t b = 0; b < ctx->n_round; b++)
                for (int32_t g = 0; g < d->G; g++)
                    if (tl[(int64_t)g * ctx->cfg.max_requests + b] != *ctx->req[ctx->round_reqs[b]].g[g].tail_lo)
                        dfail(&v, "device: request %d group %d tail_lo %lld inside the round, published %lld",
                              ctx->round_reqs[b], g, (long long)*ctx->req[ctx->round_reqs[b]].g[g].tail_lo,
                              (long long)tl[(int64_t)g * ctx->cfg.max_requests + b]);
        }
        free(rd);
    }
    for (int32_t g = 0; g < d->G; g++) {
        const dres_state *st = &d->g[g].st;
        const int32_t B = st->B; /* the group's own hot-cache size */
        if (B != grp_hot_rows(ctx, g)) {
            dfail(&v, "device: group %d state has B = %d, the configuration %d", g, B, grp_hot_rows(ctx, g));
            continue;
        }
        const int64_t mr = st->max_rows, ns = st->nsrc;
        int32_t *slot_of = malloc(sizeof(int32_t) * (size_t)mr), *row_of = malloc(sizeof(int32_t) * (size_t)B);
        uint32_t *used = malloc(sizeof(uint32_t) * (size_t)B);
        int32_t *staged = malloc(sizeof(int32_t) * (size_t)(st->stage_rows > 0 ? st->stage_rows : 1));
        const int64_t nh = ns * (B / st->p), nt = ns * (st->T / st->p), no = ns * st->max_opt_pages;
        int32_t *pages = malloc(sizeof(int32_t) * (size_t)(nh + nt + no));
        uint8_t *ready = malloc((size_t)st->max_opt_pages);
        if (!slot_of || !row_of || !used || !staged || !pages || !ready) {
            free(slot_of); free(row_of); free(used); free(staged); free(pages); free(ready);
            dfail(&v, "device check: out of memory");
            return v.n;
        }
        for (int32_t r = 0; r < ctx->cfg.max_requests; r++) {
            const request *rq = &ctx->req[r];
            if (!rq->in_use) continue;
            const grp_state *gs = &rq->g[g];
            int32_t meta[DRES_META];
            if (be->ops->copy_sync(be, slot_of, st->slot_of + r * mr, sizeof(int32_t) * (size_t)mr) != DHS_OK ||
                be->ops->copy_sync(be, row_of, st->row_of + (int64_t)r * B, sizeof(int32_t) * (size_t)B) != DHS_OK ||
                be->ops->copy_sync(be, used, st->used + (int64_t)r * B, sizeof(uint32_t) * (size_t)B) != DHS_OK ||
                be->ops->copy_sync(be, meta, st->meta + (int64_t)r * DRES_META, sizeof meta) != DHS_OK ||
                be->ops->copy_sync(be, staged, st->staged_row + (int64_t)r * st->stage_rows,
                                   sizeof(int32_t) * (size_t)st->stage_rows) != DHS_OK) {
                dfail(&v, "device check: read-back failed");
                continue;
            }
            const int32_t filled = meta[DRES_M_FILLED], nst = meta[DRES_M_NSTAGED];
            if (filled < 0 || filled > B) dfail(&v, "device: request %d group %d filled %d outside [0, B]", r, g, filled);
            if (meta[DRES_M_HAND] < 0 || meta[DRES_M_HAND] >= B) dfail(&v, "device: request %d group %d hand %d", r, g, meta[DRES_M_HAND]);
            if (nst < 0 || nst > st->stage_rows) dfail(&v, "device: request %d group %d %d staged rows", r, g, nst);
            if (!ctx->round_open && nst != 0) dfail(&v, "device: request %d group %d keeps %d staged rows after the round", r, g, nst);
            int32_t occupied = 0, prot = 0;
            for (int32_t q = 0; q < B; q++) {
                const int32_t row = row_of[q];
                if ((uint32_t)meta[DRES_M_PROT_EPOCH] == used[q]) prot++;
                if (row < 0) {
                    if (q < filled) dfail(&v, "device: request %d group %d slot %d below filled %d is empty", r, g, q, filled);
                    continue;
                }
                occupied++;
                if (q >= filled) dfail(&v, "device: request %d group %d slot %d at/above filled %d holds row %d", r, g, q, filled, row);
                if (row >= mr || slot_of[row] != q) {
                    dfail(&v, "device index: request %d group %d slot %d holds row %d but slot_of disagrees", r, g, q, row);
                    continue;
                }
                if (row >= (*gs->hist)) dfail(&v, "device: hot slot %d of request %d holds uncommitted row %d", q, r, row);
                else if (!bit_get(gs->host_valid, row)) dfail(&v, "device: hot row %d of request %d has no host copy (I1)", row, r);
            }
            if (prot != meta[DRES_M_NPROT] && meta[DRES_M_PROT_EPOCH] != 0)
                dfail(&v, "device protection: request %d group %d counts %d protected slots, %d marked", r, g, meta[DRES_M_NPROT], prot);
            int64_t mapped = 0;
            for (int64_t row = 0; row < mr; row++) {
                const int32_t q = slot_of[row];
                if (q == -1) continue;
                if (q < -1) { dfail(&v, "device index: slot_of[%lld] = %d (a claim mark left)", (long long)row, q); continue; }
                if (q < B) {
                    mapped++;
                    if (row_of[q] != row) dfail(&v, "device index: slot_of[%lld] = %d but row_of = %d", (long long)row, q, row_of[q]);
                } else if (q - B >= nst || staged[q - B] != row) {
                    dfail(&v, "device index: row %lld of request %d maps to stale staging %d", (long long)row, r, q - B);
                }
            }
            if (mapped != occupied) dfail(&v, "device index: %lld rows map to slots, %d slots occupied", (long long)mapped, occupied);
            /* I3 on the tables the device serves this round from */
            if (!ctx->round_open || !rq->in_round) continue;
            if (be->ops->copy_sync(be, pages, st->hot_pages + r * nh, sizeof(int32_t) * (size_t)nh) != DHS_OK ||
                be->ops->copy_sync(be, pages + nh, st->tail_pages + r * nt, sizeof(int32_t) * (size_t)nt) != DHS_OK ||
                be->ops->copy_sync(be, pages + nh + nt, st->opt_pages + r * no, sizeof(int32_t) * (size_t)no) != DHS_OK ||
                be->ops->copy_sync(be, ready, st->opt_ready + r * st->max_opt_pages, (size_t)st->max_opt_pages) != DHS_OK) {
                dfail(&v, "device check: read-back failed");
                continue;
            }
            for (int64_t i = 0; i < nh; i++) page_ok(&v, ctx, pages[i], r, PAGE_HOT, "hot");
            for (int64_t i = 0; i < nt; i++) page_ok(&v, ctx, pages[nh + i], r, PAGE_TAIL, "tail");
            published_equal(&v, ctx, r, g, pages, ready);
            for (int64_t hp = 0; hp < st->max_opt_pages; hp++) {
                if (!ready[hp]) continue;
                if (hp >= gs->n_opt_pages || gs->opt_state[hp] != OPT_READY)
                    dfail(&v, "I3: device serves optional page %lld of request %d that is not ready", (long long)hp, r);
                for (int64_t si = 0; si < ns; si++) page_ok(&v, ctx, pages[nh + nt + si * st->max_opt_pages + hp], r, PAGE_OPT, "optional");
            }
        }
        free(slot_of); free(row_of); free(used); free(staged); free(pages); free(ready);
    }
    return v.n;
}

/* ------------------------------------------------------------- strings */
const char *dhs_resolver_str(dhs_resolver r)
{
    switch (r) {
    case DHS_RESOLVER_HOST: return "host";
    case DHS_RESOLVER_DEVICE: return "device";
    default: return "unknown";
    }
}

dhs_status dhs_resolver_parse(const char *s, dhs_resolver *out)
{
    if (!s || !out) return DHS_ERR_INVALID_ARG;
    if (!strcmp(s, "host")) *out = DHS_RESOLVER_HOST;
    else if (!strcmp(s, "device")) *out = DHS_RESOLVER_DEVICE;
    else return DHS_ERR_INVALID_ARG;
    return DHS_OK;
}
