/* check.c - invariant checkers (DESIGN §2): I1 (no loss), I3 (isolation:
 * every page a request maps is owned by it, once), I4 (accounting), and the
 * reverse-index / slot-table agreement. I2 (bytes) is checked by callers that
 * hold the original rows (tests, `dhs verify`) through dhs_read_location.
 * Cost is O(pages + requests * (B + rows)): for tests, not the hot path.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dres.h"
#include "core/internal.h"

typedef struct {
    int n;
    char *msg;
    size_t len;
} viol;

static void fail(viol *v, const char *fmt, ...)
{
    if (v->n++ == 0 && v->msg && v->len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->msg, v->len, fmt, ap);
        va_end(ap);
    }
}

/* A page maps once, to its owner; an optional page of a shared prefix maps
   once per holder (1 + page_ref, counted after the requests) */
static void own(viol *v, const dhs_ctx *ctx, int32_t *seen, int32_t pg, int32_t slot, enum page_use use, const char *what)
{
    if (pg < 0 || pg >= ctx->n_pages) { fail(v, "I3: request %d %s page %d out of range", slot, what, pg); return; }
    const int shared = use == PAGE_OPT && ctx->page_owner[pg] == PAGE_OWNER_SHARED;
    if (seen[pg]++ && !shared) fail(v, "I3: page %d mapped twice (request %d %s)", pg, slot, what);
    if (ctx->page_owner[pg] != slot && !shared)
        fail(v, "I3: page %d of request %d %s owned by %d", pg, slot, what, ctx->page_owner[pg]);
    if (ctx->page_use[pg] != use) fail(v, "I4: page %d of request %d %s has use %d", pg, slot, what, ctx->page_use[pg]);
}

int dhs_check_invariants(const dhs_ctx *ctx, char *msg, size_t msg_len)
{
    viol v = {0, msg, msg_len};
    if (msg && msg_len) msg[0] = 0;
    if (!ctx) return 0;
    const dhs_config *c = &ctx->cfg;
    int32_t p = c->page_rows;
    /* I4: page census equals the counters and fits */
    int64_t cnt[PAGE_DEFERRED + 1] = {0};
    for (int64_t i = 0; i < ctx->n_pages; i++) cnt[ctx->page_use[i] <= PAGE_DEFERRED ? ctx->page_use[i] : 0]++;
    if (cnt[PAGE_FREE] != ctx->n_free_pages) fail(&v, "I4: %lld free pages, free list holds %lld", (long long)cnt[PAGE_FREE], (long long)ctx->n_free_pages);
    if (cnt[PAGE_OPT] != ctx->pages_opt) fail(&v, "I4: %lld optional pages, counter %lld", (long long)cnt[PAGE_OPT], (long long)ctx->pages_opt);
    if (cnt[PAGE_HOT] + cnt[PAGE_TAIL] + cnt[PAGE_STAGING] + cnt[PAGE_DEFERRED] != ctx->pages_req)
        fail(&v, "I4: required page census differs from counter %lld", (long long)ctx->pages_req);
    if (ctx->pages_req + ctx->pages_opt + ctx->pages_res > ctx->n_pages)
        fail(&v, "I4: M_req %lld + M_opt %lld + M_res %lld > M %lld pages", (long long)ctx->pages_req,
             (long long)ctx->pages_opt, (long long)ctx->pages_res, (long long)ctx->n_pages);
    if (cnt[PAGE_DEFERRED] != ctx->n_deferred) fail(&v, "I4: deferred pages %lld, list %lld", (long long)cnt[PAGE_DEFERRED], (long long)ctx->n_deferred);
    if (ctx->be->payload_free == 0 && ctx->be->dev_bytes < (uint64_t)ctx->n_pages * p * ctx->row_stride)
        fail(&v, "I4: device bytes accounted below the pool size");
    /* I4: the host-row cache holds what it counts, within its limit and its table, all accounted */
    {
        uint64_t hb = 0;
        for (int32_t i = 0; i < ctx->hcache_n; i++) hb += ctx->hcache[i].bytes;
        if (hb != ctx->hcache_bytes || ctx->hcache_n > ctx->hcache_cap || ctx->hcache_bytes > c->host_cache_bytes)
            fail(&v, "I4: host cache of %d spans holds %llu bytes, counter %llu, limit %llu", ctx->hcache_n,
                 (unsigned long long)hb, (unsigned long long)ctx->hcache_bytes, (unsigned long long)c->host_cache_bytes);
        if (ctx->be->host_bytes < ctx->hcache_bytes) fail(&v, "I4: host bytes accounted below the host cache");
    }
    /* shared prefix: reference counts agree with their totals, only on optional pages */
    {
        int64_t refs = 0, shared = 0;
        for (int64_t i = 0; i < ctx->n_pages; i++) {
            if (ctx->page_ref[i] < 0 || (ctx->page_ref[i] > 0 && ctx->page_use[i] != PAGE_OPT))
                fail(&v, "share: page %lld has %d extra holders, use %d", (long long)i, ctx->page_ref[i], ctx->page_use[i]);
            refs += ctx->page_ref[i];
            shared += ctx->page_ref[i] > 0;
        }
        if (refs != ctx->page_refs || shared != ctx->pages_shared)
            fail(&v, "share: %lld page references on %lld pages, counters %lld and %lld", (long long)refs, (long long)shared,
                 (long long)ctx->page_refs, (long long)ctx->pages_shared);
        uint64_t sb = 0;
        for (int32_t i = 0; i < ctx->sspan_n; i++) {
            sb += ctx->sspan[i].bytes;
            if (ctx->sspan[i].refs < 2) fail(&v, "share: host span %d in the table with %d holders", i, ctx->sspan[i].refs);
        }
        if (sb != ctx->sspan_bytes || ctx->sspan_n > ctx->sspan_cap)
            fail(&v, "share: %d shared host spans of %llu bytes, counter %llu", ctx->sspan_n, (unsigned long long)sb,
                 (unsigned long long)ctx->sspan_bytes);
        if (ctx->be->host_bytes < ctx->sspan_bytes + ctx->hcache_bytes)
            fail(&v, "I4: host bytes accounted below the shared spans and the cache");
    }
    int32_t *sspan_holders = calloc((size_t)ctx->sspan_n + 1, sizeof(int32_t));
    int32_t *seen = calloc((size_t)ctx->n_pages + 1, sizeof(int32_t));
    if (!seen || !sspan_holders) { free(seen); free(sspan_holders); return v.n + 1; }
    int32_t open = 0;
    for (int32_t slot = 0; slot < c->max_requests; slot++) {
        const request *rq = &ctx->req[slot];
        if (!rq->in_use) continue;
        open++;
        if (rq->importing && (rq->imported || rq->in_round || rq->n != 0))
            fail(&v, "import: request %d has an import open but imported %d, in round %d, %lld positions", slot,
                 rq->imported, rq->in_round, (long long)rq->n);
        /* an import not completed is invisible: nothing committed, no optional page,
           no host row valid; an open one holds one pinned allocation per source that
           covers its rows; a request before its first round and import holds nothing
           on host (a failed or aborted import gave it all back) */
        for (int32_t g = 0; !rq->imported && !rq->in_round && g < ctx->arch.n_groups; g++) {
            const grp_state *gs = &rq->g[g];
            if ((*gs->hist) || (*gs->tail_lo) || (*gs->backed_hi) || gs->backup_hi || gs->opt_held || gs->opt_ready)
                fail(&v, "import: request %d group %d not imported holds rows (hist %lld, optional %lld)", slot, g,
                     (long long)(*gs->hist), (long long)gs->opt_held);
            for (int64_t w = 0; w <= ctx->grp_max_rows[g] / 64; w++)
                if (gs->host_valid[w]) {
                    fail(&v, "import: request %d group %d not imported has host row %lld valid", slot, g, (long long)(w * 64));
                    break;
                }
            const int64_t m = ctx->grp_m[g], rows = (rq->import_n + m - 1) / m;
            if (gs->n_opt_pages != (rq->importing ? rq->import_n / m / p : 0))
                fail(&v, "import: request %d group %d has %lld optional-page entries, import of %lld positions open %d",
                     slot, g, (long long)gs->n_opt_pages, (long long)rq->import_n, rq->importing);
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                const src_state *ss = &gs->src[si];
                if ((*ss->wr)) fail(&v, "import: request %d group %d not imported has rows written", slot, g);
                if (!rq->importing && ss->n_host_chunks)
                    fail(&v, "import: request %d group %d holds %lld host chunks without an import", slot, g,
                         (long long)ss->n_host_chunks);
                if (rq->importing && !ctx->be->payload_free &&
                    (ss->n_host_chunks * HOST_CHUNK_ROWS < rows || (ss->n_host_chunks && ss->chunk_span[0] != ss->n_host_chunks)))
                    fail(&v, "import: request %d group %d source %d: %lld host chunks (first span %d) for %lld rows", slot, g,
                         si, (long long)ss->n_host_chunks, ss->n_host_chunks ? ss->chunk_span[0] : 0, (long long)rows);
            }
        }
        int64_t pending = 0; /* optional pages in OPT_PENDING over the groups: request.opt_pending */
        for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
            const grp_state *gs = &rq->g[g];
            int32_t nsrc = ctx->grp_nsrc[g], B = grp_hot_rows(ctx, g);
            /* reverse index and slot table agree */
            int32_t occupied = 0;
            for (int32_t q = 0; q < B; q++) {
                int64_t row = gs->row_of[q];
                if (row < 0) continue;
                occupied++;
                if (row >= ctx->grp_max_rows[g] || gs->slot_of[row] != q)
                    fail(&v, "index: request %d group %d slot %d holds row %lld but slot_of disagrees", slot, g, q, (long long)row);
                if (row >= (*gs->hist)) fail(&v, "hot slot %d of request %d holds uncommitted row %lld", q, slot, (long long)row);
                else if (!bit_get(gs->host_valid, row)) fail(&v, "hot row %lld of request %d has no host copy", (long long)row, slot);
            }
            if (gs->prot_epoch) {
                int32_t np = 0;
                for (int32_t q = 0; q < B; q++) np += gs->prot[q] == gs->prot_epoch;
                if (np != gs->n_prot) fail(&v, "protection: request %d group %d counts %d protected slots, %d marked", slot, g, gs->n_prot, np);
            }
            if (occupied + gs->n_free != B) fail(&v, "index: request %d group %d: %d occupied + %d free != B", slot, g, occupied, gs->n_free);
            int64_t mapped = 0;
            for (int64_t row = 0; row < ctx->grp_max_rows[g]; row++) {
                int32_t q = gs->slot_of[row];
                if (q < 0) continue;
                if (q < B) {
                    mapped++;
                    if (gs->row_of[q] != row) fail(&v, "index: slot_of[%lld] = %d but row_of = %lld", (long long)row, q, (long long)gs->row_of[q]);
                } else if (q - B >= gs->n_staged || gs->staged_row[q - B] != row) {
                    fail(&v, "index: row %lld of request %d maps to stale staging %d", (long long)row, slot, q - B);
                }
            }
            if (mapped != occupied) fail(&v, "index: %lld rows map to slots, %d slots occupied", (long long)mapped, occupied);
            /* staged rows live inside a round only: the round end (or dhs_group_done) releases them, so
               dhs_round_begin need not reset any group's count */
            if (gs->n_staged && !rq->in_round)
                fail(&v, "staging: request %d group %d holds %d staged rows outside a round", slot, g, gs->n_staged);
            /* tail window */
            if (!((*gs->tail_lo) <= (*gs->backed_hi) && (*gs->backed_hi) <= gs->backup_hi && gs->backup_hi <= (*gs->hist)))
                fail(&v, "tail: request %d group %d tail_lo %lld backed_hi %lld backup_hi %lld hist %lld", slot, g,
                     (long long)(*gs->tail_lo), (long long)(*gs->backed_hi), (long long)gs->backup_hi, (long long)(*gs->hist));
            /* rows the ring keeps after their backup completed have their host copy */
            for (int64_t row = (*gs->tail_lo); row < (*gs->backed_hi); row++)
                if (!bit_get(gs->host_valid, row)) {
                    fail(&v, "tail: request %d group %d row %lld counts as backed up without a host copy", slot, g, (long long)row);
                    break;
                }
            for (int32_t si = 0; si < nsrc; si++)
                if ((*gs->src[si].wr) - (*gs->tail_lo) > c->tail_rows)
                    fail(&v, "tail: request %d group %d holds %lld rows in a %d-row ring", slot, g,
                         (long long)((*gs->src[si].wr) - (*gs->tail_lo)), c->tail_rows);
            /* housekeeping's work list holds every request with something to complete or issue */
            if ((gs->backup_ticket || gs->backup_hi < backup_due_hi(ctx, gs) || gs->opt_busy > 0) && !ctx->work_on[slot])
                fail(&v, "work: request %d group %d has a copy in flight or rows to back up (ticket %llu, backup_hi "
                     "%lld, hist %lld, %lld optional pages busy) but is not on the work list", slot, g,
                     (unsigned long long)gs->backup_ticket, (long long)gs->backup_hi, (long long)(*gs->hist),
                     (long long)gs->opt_busy);
            /* the commit's array: the group's and its sources' fields are request.cm's entries */
            if (gs->hist != &rq->cm[g]) fail(&v, "layout: request %d group %d committed rows outside its array", slot, g);
            if (gs->tail_lo != &cm_tail_lo(ctx, rq)[g])
                fail(&v, "layout: request %d group %d tail_lo outside its array", slot, g);
            if (gs->backed_hi != &cm_backed_hi(ctx, rq)[g])
                fail(&v, "layout: request %d group %d backed_hi outside its array", slot, g);
            for (int32_t si = 0; si < nsrc; si++)
                if (gs->src[si].wr != &cm_wr(ctx, rq)[ctx->grp_src0[g] + si])
                    fail(&v, "layout: request %d group %d source %d written mark outside its array", slot, g, si);
            for (int32_t si = 0; si < nsrc; si++)
                if (gs->src[si].tail_pages !=
                    rq->tp + (size_t)(ctx->grp_src0[g] + si) * (size_t)(ctx->cfg.tail_rows / ctx->cfg.page_rows))
                    fail(&v, "layout: request %d group %d source %d tail pages outside its array", slot, g, si);
            /* the round end looks at the request no later than the position at which the group has rows
               due: a due_n above it would leave a completed page without its backup */
            if (!rq->importing && backup_next_due_rows(ctx, gs) * ctx->grp_m[g] < rq->due_n)
                fail(&v, "backup: request %d group %d has rows due at %lld positions, after due_n %lld", slot, g,
                     (long long)(backup_next_due_rows(ctx, gs) * ctx->grp_m[g]), (long long)rq->due_n);
            /* optional pages; the arrays' spare entries past n_opt_pages are absent (page -1) */
            int64_t held = 0, ready = 0, busy = 0;
            if (gs->n_opt_pages > gs->opt_cap)
                fail(&v, "opt: request %d group %d has %lld optional pages in arrays of %lld", slot, g,
                     (long long)gs->n_opt_pages, (long long)gs->opt_cap);
            for (int64_t hp = gs->n_opt_pages; hp < gs->opt_cap; hp++)
                if (gs->opt_state[hp] != OPT_ABSENT || gs->opt_backing[hp] || (nsrc > 0 && gs->src[0].opt_pages[hp] >= 0)) {
                    fail(&v, "opt: request %d group %d spare optional entry %lld in use", slot, g, (long long)hp);
                    break;
                }
            for (int64_t hp = 0; hp < gs->n_opt_pages; hp++) {
                int st = gs->opt_state[hp];
                if (st != OPT_ABSENT) held++;
                ready += st == OPT_READY;
                busy += (st == OPT_PENDING) + (gs->opt_backing[hp] != 0);
                pending += st == OPT_PENDING;
                for (int32_t si = 0; si < nsrc; si++) {
                    int32_t pg = gs->src[si].opt_pages[hp];
                    if ((st == OPT_ABSENT) != (pg < 0)) fail(&v, "opt: request %d page %lld state %d phys %d", slot, (long long)hp, st, pg);
                    if (pg >= 0) own(&v, ctx, seen, pg, slot, PAGE_OPT, "optional");
                }
                /* a shared page is never written again: every holder has all its rows on host */
                if (st != OPT_ABSENT && nsrc > 0 && gs->src[0].opt_pages[hp] >= 0 && ctx->page_ref[gs->src[0].opt_pages[hp]] > 0)
                    for (int32_t i = 0; i < p; i++)
                        if (!bit_get(gs->host_valid, hp * p + i)) {
                            fail(&v, "share: shared page %lld of request %d group %d has row %lld without a host copy",
                                 (long long)hp, slot, g, (long long)(hp * p + i));
                            break;
                        }
                /* a population reads a row from its host copy, or from the tail ring while the ring holds it
                   (committed, at or above tail_lo: tail_room_move waits for the copy before it lets the row go) */
                if (st == OPT_PENDING)
                    for (int32_t i = 0; i < p; i++) {
                        const int64_t row = hp * p + i;
                        if (!bit_get(gs->host_valid, row) && !(row >= *gs->tail_lo && row < *gs->hist))
                            fail(&v, "I1: pending page %lld of request %d lacks host rows", (long long)hp, slot);
                    }
            }
            if (held != gs->opt_held) fail(&v, "opt: request %d group %d held %lld counter %lld", slot, g, (long long)held, (long long)gs->opt_held);
            if (ready != gs->opt_ready)
                fail(&v, "opt: request %d group %d ready %lld counter %lld", slot, g, (long long)ready, (long long)gs->opt_ready);
            if (busy != gs->opt_busy)
                fail(&v, "opt: request %d group %d has %lld pages with a copy in flight, counter %lld", slot, g,
                     (long long)busy, (long long)gs->opt_busy);
            /* I1: every committed row is ready on the device or has a host copy */
            for (int64_t row = 0; row < (*gs->hist); row++) {
                if (row >= (*gs->tail_lo)) break; /* tail rows are ready */
                if (bit_get(gs->host_valid, row)) continue;
                int64_t hp = row / p;
                if (hp < gs->n_opt_pages && gs->opt_state[hp] == OPT_READY) continue;
                fail(&v, "I1: request %d group %d row %lld is neither ready nor backed up", slot, g, (long long)row);
                break;
            }
            /* host spans: holders counted against the table; a borrowed chunk (shared prefix) holds only
               committed rows with a host copy, so nobody writes it */
            for (int32_t si = 0; si < nsrc; si++) {
                const src_state *ss = &gs->src[si];
                int borrowed = 0;
                for (int64_t i = 0; i < ss->n_host_chunks; i++) {
                    if (ss->chunk_span[i] != 0) {
                        borrowed = ss->chunk_span[i] < 0;
                        for (int32_t k = 0; k < ctx->sspan_n; k++)
                            if (ctx->sspan[k].p == ss->host_chunks[i]) sspan_holders[k]++;
                    }
                    if (!borrowed) continue;
                    const int64_t r1 = (i + 1) * HOST_CHUNK_ROWS;
                    if (r1 > (*gs->hist)) {
                        fail(&v, "share: request %d group %d borrows host chunk %lld past its %lld committed rows", slot, g,
                             (long long)i, (long long)(*gs->hist));
                        break;
                    }
                    for (int64_t row = i * HOST_CHUNK_ROWS; row < r1; row++)
                        if (!bit_get(gs->host_valid, row)) {
                            fail(&v, "share: request %d group %d borrowed host row %lld not valid", slot, g, (long long)row);
                            break;
                        }
                }
            }
            for (int32_t si = 0; si < nsrc; si++) {
                const src_state *ss = &gs->src[si];
                for (int32_t i = 0; i < B / p; i++) own(&v, ctx, seen, ss->hot_pages[i], slot, PAGE_HOT, "hot");
                for (int32_t i = 0; i < c->tail_rows / p; i++) own(&v, ctx, seen, ss->tail_pages[i], slot, PAGE_TAIL, "tail");
            }
        }
        if (pending != rq->opt_pending)
            fail(&v, "opt: request %d has %lld pending optional pages, counter %lld (tail_room's fast path reads it)", slot,
                 (long long)pending, (long long)rq->opt_pending);
    }
    if (open != ctx->n_open) fail(&v, "requests: %d open, counter %d", open, ctx->n_open);
    for (int32_t k = 0; k < ctx->sspan_n; k++)
        if (sspan_holders[k] != ctx->sspan[k].refs)
            fail(&v, "share: host span %d held by %d requests, counted %d", k, sspan_holders[k], ctx->sspan[k].refs);
    free(sspan_holders);
    /* the work list: each listed slot once, flagged, in range */
    {
        int32_t flagged = 0;
        for (int32_t i = 0; i < c->max_requests; i++) flagged += ctx->work_on[i] != 0;
        if (flagged != ctx->n_work || ctx->n_work > c->max_requests)
            fail(&v, "work: %d slots flagged, list of %d", flagged, ctx->n_work);
        for (int32_t w = 0; w < ctx->n_work && w < c->max_requests; w++)
            if (ctx->work[w] < 0 || ctx->work[w] >= c->max_requests || !ctx->work_on[ctx->work[w]])
                fail(&v, "work: entry %d names slot %d, not flagged", w, ctx->work[w]);
    }
    for (int64_t i = 0; i < ctx->n_pages; i++) {
        if (ctx->page_use[i] == PAGE_OPT && seen[i] && seen[i] != 1 + ctx->page_ref[i])
            fail(&v, "share: optional page %lld mapped %d times, %d holders counted", (long long)i, seen[i], 1 + ctx->page_ref[i]);
        int u = ctx->page_use[i];
        if ((u == PAGE_HOT || u == PAGE_TAIL || u == PAGE_OPT) && !seen[i])
            fail(&v, "I4: page %lld in use %d by %d but mapped by no request", (long long)i, u, ctx->page_owner[i]);
    }
    free(seen);
    if (ctx->dres) v.n += dres_check(ctx, v.n ? NULL : msg, msg_len); /* the device hot state */
    return v.n;
}
