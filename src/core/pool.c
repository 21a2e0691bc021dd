/* pool.c - the accounted host allocator (ctx_calloc/ctx_free), the device
 * page pool (page_alloc/page_release/page_free_now, deferred frees) and the
 * copy list growth (pairs_reserve) and the request handle lookup (req_get). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* ------------------------------------------------------------- memory */
void *ctx_calloc(dhs_ctx *ctx, size_t n, size_t size)
{
    if (n == 0) n = 1;
    if (be_fault(ctx->be, DHS_FAULT_HOST_ALLOC)) return NULL;
    void *p = calloc(n, size);
    if (p) ctx->meta_bytes += n * size;
    return p;
}

void ctx_free(dhs_ctx *ctx, void *p, size_t n, size_t size)
{
    if (!p) return;
    if (n == 0) n = 1;
    ctx->meta_bytes -= n * size;
    free(p);
}

int32_t page_alloc(dhs_ctx *ctx, enum page_use use, int32_t owner)
{
    if (ctx->n_free_pages == 0) return -1;
    int32_t pg = ctx->free_pages[--ctx->n_free_pages];
    ctx->page_use[pg] = (uint8_t)use;
    ctx->page_owner[pg] = owner;
    if (use == PAGE_OPT) ctx->pages_opt++; else ctx->pages_req++;
    return pg;
}

void page_free_now(dhs_ctx *ctx, int32_t pg)
{
    /* debug builds (no NDEBUG: Debug, sanitizer) catch a double free early */
    assert(pg >= 0 && pg < ctx->n_pages && ctx->page_use[pg] != PAGE_FREE && ctx->page_ref[pg] == 0);
    if (ctx->page_use[pg] == PAGE_OPT) ctx->pages_opt--; else ctx->pages_req--;
    ctx->page_use[pg] = PAGE_FREE;
    ctx->page_owner[pg] = -1;
    ctx->free_pages[ctx->n_free_pages++] = pg;
}

/* The ticket after which pages released now may be reused: every reader issued
   so far. 0 when they have all completed (or the record failed and they were
   waited for): the pages are free at once. One ticket serves every page
   released before the next reader is issued (a request's close gives back
   ~122K pages at 100K GLM-5.3 rows: one event instead of one each). */
dhs_ticket page_release_ticket(dhs_ctx *ctx)
{
    dhs_ticket t = 0;
    if (ctx->be->ops->record_readers(ctx->be, &t) != DHS_OK || t == 0 || ctx->be->ops->done(ctx->be, t)) {
        if (t && !ctx->be->ops->done(ctx->be, t)) ctx->be->ops->wait(ctx->be, t);
        return 0;
    }
    return t;
}

void page_release(dhs_ctx *ctx, int32_t pg) { page_release_at(ctx, pg, page_release_ticket(ctx)); }

/* Gives a page back once ticket t (page_release_ticket) has completed; t = 0:
   now. The page keeps its accounting category until then (as a required
   allocation). */
void page_release_at(dhs_ctx *ctx, int32_t pg, dhs_ticket t)
{
    assert(pg >= 0 && pg < ctx->n_pages && ctx->page_use[pg] != PAGE_FREE && ctx->page_use[pg] != PAGE_DEFERRED);
    if (ctx->page_ref[pg] > 0) { /* a shared optional page: another request still maps it */
        if (--ctx->page_ref[pg] == 0) ctx->pages_shared--;
        ctx->page_refs--;
        return;
    }
    if (t == 0) {
        page_free_now(ctx, pg);
        return;
    }
    if (ctx->page_use[pg] == PAGE_OPT) { ctx->pages_opt--; ctx->pages_req++; }
    ctx->page_use[pg] = PAGE_DEFERRED;
    ctx->page_owner[pg] = -1;
    /* the deferred array is sized for every page at creation: cannot overflow */
    ctx->deferred[ctx->n_deferred++] = (deferred_free){pg, t};
}

/* ------------------------------------------------------------- copy list */
dhs_status pairs_reserve(dhs_ctx *ctx, int64_t n)
{
    if (n <= ctx->cap_pairs) return DHS_OK;
    int64_t cap = ctx->cap_pairs ? ctx->cap_pairs : 1024;
    while (cap < n) cap *= 2;
    dhs_copy_pair *np = ctx_calloc(ctx, (size_t)cap, sizeof *np);
    if (!np) return DHS_ERR_NOMEM;
    if (ctx->cap_pairs) memcpy(np, ctx->pairs, sizeof *np * (size_t)ctx->cap_pairs);
    ctx_free(ctx, ctx->pairs, (size_t)ctx->cap_pairs, sizeof(dhs_copy_pair));
    ctx->pairs = np;
    ctx->cap_pairs = cap;
    return DHS_OK;
}

/* ------------------------------------------------------------- handles */
/* A handle is (slot, generation). Generations of a slot count up from 1 at
   each open (0 is never issued); the slot keeps its last generation when the
   request closes. So a handle names a request that existed exactly when its
   generation is 1 .. the slot's current one:
     - slot out of range, generation 0, or above the slot's: never existed
       -> DHS_ERR_UNKNOWN_REQUEST (a slot never opened has generation 0);
     - the slot's current generation, slot free: closed -> DHS_ERR_CLOSED;
     - an older generation, slot free or reused: closed -> DHS_ERR_CLOSED.
   (After 2^32 - 1 opens of one slot generations wrap and restart at 1.) */
request *req_get(const dhs_ctx *ctx, dhs_req r, dhs_status *err)
{
    dhs_status e = DHS_OK;
    request *rq = NULL;
    if (!ctx) e = DHS_ERR_INVALID_ARG;
    else if (r.id >= (uint32_t)ctx->cfg.max_requests) e = DHS_ERR_UNKNOWN_REQUEST;
    else {
        rq = &ctx->req[r.id];
        if (r.gen == 0 || r.gen > rq->gen) e = DHS_ERR_UNKNOWN_REQUEST;
        else if (r.gen < rq->gen || !rq->in_use) e = DHS_ERR_CLOSED;
    }
    if (err) *err = e;
    return e == DHS_OK ? rq : NULL;
}
