/* residency.c - load-adaptive residency (DESIGN §3): resident-first
 * admission, whole-request reclaim, ordered retire/populate, bounded
 * round-robin repopulation, tail backups, import placement
 * (dhs_request_import: resident-first into optional pages, else host; the
 * two phases dhs_request_import_begin / _commit / _abort of a host import).
 *
 * Ordering rules (I1 at every instant):
 *  - a reclaimed page keeps serving (READY) until the backup of its rows has
 *    completed; only then is it retired, and its memory returns to the free
 *    list after every reader issued before the retirement completed;
 *  - a populated page is PENDING (invisible to the resolver) until its copy
 *    completed, then READY;
 *  - a committed tail row stays in the tail (served directly) until its host
 *    backup completed.
 */
#include <stdlib.h>
#include <string.h>

#include "core/dres.h"
#include "core/internal.h"

void host_span_release(dhs_ctx *ctx, void *p, size_t bytes)
{
    if (!p) return;
    if (ctx->hcache_n < ctx->hcache_cap && ctx->hcache_bytes + bytes <= ctx->cfg.host_cache_bytes) {
        ctx->hcache[ctx->hcache_n++] = (struct host_span){p, bytes};
        ctx->hcache_bytes += bytes;
        return;
    }
    be_host_free(ctx->be, p, bytes);
}

static int32_t sspan_find(const dhs_ctx *ctx, const void *p)
{
    for (int32_t i = 0; i < ctx->sspan_n; i++)
        if (ctx->sspan[i].p == p) return i;
    return -1;
}

/* the table's memory goes when no span is shared */
void sspan_trim(dhs_ctx *ctx)
{
    if (ctx->sspan_n > 0 || !ctx->sspan) return;
    ctx_free(ctx, ctx->sspan, (size_t)ctx->sspan_cap, sizeof *ctx->sspan);
    ctx->sspan = NULL;
    ctx->sspan_cap = 0;
}

void host_span_put(dhs_ctx *ctx, void *p, size_t bytes)
{
    if (!p) return;
    const int32_t i = sspan_find(ctx, p);
    if (i >= 0) {
        /* another holder keeps it; with one left it is that one's alone again */
        if (--ctx->sspan[i].refs < 2) {
            ctx->sspan_bytes -= ctx->sspan[i].bytes;
            ctx->sspan[i] = ctx->sspan[--ctx->sspan_n];
            sspan_trim(ctx);
        }
        return;
    }
    host_span_release(ctx, p, bytes);
}

/* room for n more shared spans in the table (so that sharing them allocates nothing) */
dhs_status sspan_reserve(dhs_ctx *ctx, int64_t n)
{
    if (ctx->sspan_n + n <= ctx->sspan_cap) return DHS_OK;
    int64_t cap = ctx->sspan_cap ? ctx->sspan_cap : 16;
    while (cap < ctx->sspan_n + n) cap *= 2;
    if (cap > INT32_MAX) return DHS_ERR_NOMEM;
    struct shared_span *t = ctx_calloc(ctx, (size_t)cap, sizeof *t);
    if (!t) return DHS_ERR_NOMEM;
    if (ctx->sspan_n) memcpy(t, ctx->sspan, sizeof *t * (size_t)ctx->sspan_n);
    ctx_free(ctx, ctx->sspan, (size_t)ctx->sspan_cap, sizeof *t);
    ctx->sspan = t;
    ctx->sspan_cap = (int32_t)cap;
    return DHS_OK;
}

/* one more holder of span p (sspan_reserve made room) */
static void sspan_ref(dhs_ctx *ctx, void *p, size_t bytes)
{
    const int32_t i = sspan_find(ctx, p);
    if (i >= 0) { ctx->sspan[i].refs++; return; }
    ctx->sspan[ctx->sspan_n++] = (struct shared_span){p, bytes, 2};
    ctx->sspan_bytes += bytes;
}

dhs_status dhs_host_cache_fill(dhs_ctx *ctx, int64_t rows, int32_t count)
{
    if (!ctx || rows < 1 || count < 0) return DHS_ERR_INVALID_ARG;
    int64_t max_rows = 0;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++)
        if (ctx->grp_max_rows[g] > max_rows) max_rows = ctx->grp_max_rows[g];
    if (rows > max_rows) return DHS_ERR_INVALID_ARG; /* no source could ever take such a span */
    if (count == 0 || ctx->be->payload_free) return DHS_OK;
    const uint64_t chunk = (uint64_t)HOST_CHUNK_ROWS * ctx->row_stride;
    const uint64_t bytes = (uint64_t)((rows + HOST_CHUNK_ROWS - 1) / HOST_CHUNK_ROWS) * chunk;
    if (count > ctx->hcache_cap - ctx->hcache_n || bytes > SIZE_MAX ||
        (uint64_t)count > (ctx->cfg.host_cache_bytes - ctx->hcache_bytes) / bytes)
        return DHS_ERR_INVALID_ARG;
    const int32_t n0 = ctx->hcache_n;
    for (int32_t i = 0; i < count; i++) {
        void *p = NULL;
        dhs_status s = be_host_alloc(ctx->be, (size_t)bytes, &p);
        if (s != DHS_OK) { /* nothing added: this call's spans go back */
            while (ctx->hcache_n > n0) {
                const struct host_span sp = ctx->hcache[--ctx->hcache_n];
                ctx->hcache_bytes -= sp.bytes;
                be_host_free(ctx->be, sp.p, sp.bytes);
            }
            return s;
        }
        /* touched now, so that the import's copy does not fault the pages in */
        memset(p, 0, (size_t)bytes);
        ctx->hcache[ctx->hcache_n++] = (struct host_span){p, (size_t)bytes};
        ctx->hcache_bytes += bytes;
    }
    return DHS_OK;
}

void host_cache_drop(dhs_ctx *ctx)
{
    for (int32_t i = 0; i < ctx->hcache_n; i++) be_host_free(ctx->be, ctx->hcache[i].p, ctx->hcache[i].bytes);
    ctx->hcache_n = 0;
    ctx->hcache_bytes = 0;
}

dhs_status host_ensure(dhs_ctx *ctx, request *rq, int32_t g, src_state *ss, int64_t rows)
{
    if (ctx->be->payload_free) return DHS_OK;
    int64_t need = (rows + HOST_CHUNK_ROWS - 1) / HOST_CHUNK_ROWS;
    if (ss->n_host_chunks >= need) return DHS_OK;
    /* the missing chunks in one allocation: an import pins its whole history with one call per source
       instead of one per 1,024 rows (a pinning call costs host time per call, measured on the H200 host) */
    int64_t k = need - ss->n_host_chunks;
    const size_t chunk = (size_t)HOST_CHUNK_ROWS * ctx->row_stride;
    void *p = NULL;
    /* a cached span first, the smallest that holds the k chunks and fits the source's chunk table: it is
       pinned and touched already, so the import copies at memory speed */
    const int64_t room = ctx->grp_max_rows[g] / HOST_CHUNK_ROWS + 1 - ss->n_host_chunks;
    int32_t best = -1;
    for (int32_t i = 0; i < ctx->hcache_n; i++) {
        const size_t b = ctx->hcache[i].bytes;
        if (b >= (size_t)k * chunk && (int64_t)(b / chunk) <= room && (best < 0 || b < ctx->hcache[best].bytes)) best = i;
    }
    if (best >= 0) {
        p = ctx->hcache[best].p;
        k = (int64_t)(ctx->hcache[best].bytes / chunk);
        ctx->hcache_bytes -= ctx->hcache[best].bytes;
        ctx->hcache[best] = ctx->hcache[--ctx->hcache_n];
    } else {
        dhs_status s = be_host_alloc(ctx->be, (size_t)k * chunk, &p);
        if (s == DHS_ERR_NOMEM && ctx->hcache_n > 0) { /* the cache gives way to live requests */
            host_cache_drop(ctx);
            s = be_host_alloc(ctx->be, (size_t)k * chunk, &p);
        }
        if (s != DHS_OK) return s;
    }
    ss->chunk_span[ss->n_host_chunks] = (int32_t)k;
    for (int64_t i = 0; i < k; i++) ss->host_chunks[ss->n_host_chunks++] = (uint8_t *)p + (size_t)i * chunk;
    rq->tables_dirty |= TABLES_SOME;
    rq->g[g].tables_dirty = 1;
    return DHS_OK;
}

/* Sets optional page hp's state. A page's opt_pages entries change only
   together with its state, so this is the one place that marks the request's
   mirrored tables for dres_round_begin (tables_dirty, and the group's changed
   range [opt_dlo, opt_dhi); host chunks are marked by host_ensure). */
static void opt_set(request *rq, grp_state *gs, int64_t hp, enum opt_state state)
{
    gs->opt_ready += (state == OPT_READY) - (gs->opt_state[hp] == OPT_READY);
    gs->opt_busy += (state == OPT_PENDING) - (gs->opt_state[hp] == OPT_PENDING);
    rq->opt_pending += (state == OPT_PENDING) - (gs->opt_state[hp] == OPT_PENDING);
    gs->opt_state[hp] = (uint8_t)state;
    if (gs->opt_dhi <= gs->opt_dlo) {
        gs->opt_dlo = hp;
        gs->opt_dhi = hp + 1;
    } else {
        if (hp < gs->opt_dlo) gs->opt_dlo = hp;
        if (hp + 1 > gs->opt_dhi) gs->opt_dhi = hp + 1;
    }
    rq->tables_dirty |= TABLES_SOME;
    gs->tables_dirty = 1;
}

/* Sets whether page hp's reclaim backup is in flight, keeping the group's opt_busy. */
static void opt_backing_set(grp_state *gs, int64_t hp, uint8_t v)
{
    gs->opt_busy += (int64_t)(v != 0) - (int64_t)(gs->opt_backing[hp] != 0);
    gs->opt_backing[hp] = v;
}

/* ------------------------------------------------------------- housekeeping's work list */
void work_add(dhs_ctx *ctx, int32_t slot)
{
    if (ctx->work_on[slot]) return;
    ctx->work_on[slot] = 1;
    ctx->work[ctx->n_work++] = slot;
}

/* Whether ticket t completed. Within one housekeeping pass (memo_on) the last answer is kept: the
   round's tail backup is one ticket for every request and group of the round, and on the H200 host
   each fence query is a CUDA call, so asking once per request and group grew round_begin with
   C x groups (bench/control_bench.c counts the calls). A ticket seen incomplete is only looked at
   again in the next pass. */
static int ticket_done(dhs_ctx *ctx, dhs_ticket t)
{
    if (!t) return 1;
    if (ctx->memo_on && ctx->memo_t == t) return ctx->memo_done;
    const uint64_t t0 = ctx->memo_on ? hp_now() : 0; /* housekeeping's queries (DHS_HP_FENCE) */
    int d = ctx->be->ops->done(ctx->be, t);
    if (ctx->memo_on) hp_add(ctx, DHS_HP_FENCE, t0);
    if (ctx->memo_on) {
        ctx->memo_t = t;
        ctx->memo_done = d;
    }
    return d;
}

/* ------------------------------------------------------------- import placement */
/* Frees what an import that did not complete took: the host backing, the
   optional-page arrays and any host row marked valid (the import's optional
   pages were given back by import_place). The request is again as opened:
   only for a request that is neither imported nor in a round, so nothing
   else lives there. */
static void import_release(dhs_ctx *ctx, request *rq)
{
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
            src_state *ss = &gs->src[si];
            for (int64_t i = 0; i < ss->n_host_chunks; i++) {
                if (ss->chunk_span[i] != 0)
                    host_span_put(ctx, ss->host_chunks[i],
                                  (size_t)(ss->chunk_span[i] > 0 ? ss->chunk_span[i] : -ss->chunk_span[i]) *
                                      HOST_CHUNK_ROWS * ctx->row_stride);
                ss->host_chunks[i] = NULL;
                ss->chunk_span[i] = 0;
            }
            ss->n_host_chunks = 0;
            ctx_free(ctx, ss->opt_pages, (size_t)gs->opt_cap, sizeof(int32_t));
            ss->opt_pages = NULL;
        }
        ctx_free(ctx, gs->opt_state, (size_t)gs->opt_cap, 1);
        ctx_free(ctx, gs->opt_backing, (size_t)gs->opt_cap, 1);
        ctx_free(ctx, gs->opt_ticket, (size_t)gs->opt_cap, sizeof(dhs_ticket));
        gs->opt_state = NULL; gs->opt_backing = NULL; gs->opt_ticket = NULL;
        gs->n_opt_pages = gs->opt_cap = gs->opt_held = gs->opt_ready = gs->opt_busy = 0;
        memset(gs->host_valid, 0, sizeof(uint64_t) * (size_t)(ctx->grp_max_rows[g] / 64 + 1));
    }
    rq->tables_dirty = TABLES_ALL;
    rq->due_n = 0;
}

/* Allocates everything an import of n_positions needs, so that placing it
   allocates nothing: per source ONE pinned host allocation for
   max(imported, expected) rows (the request holds none before: a failed or
   aborted import gave its back), so the source's host rows are contiguous
   at row_stride spacing; per group the optional-page arrays. On failure
   frees what it took. */
static dhs_status import_alloc(dhs_ctx *ctx, request *rq, int64_t n_positions)
{
    const int32_t p = ctx->cfg.page_rows;
    import_release(ctx, rq); /* holds nothing (dhs_check_invariants says so): a no-op kept for safety */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        int64_t m = ctx->grp_m[g];
        int64_t rows_all = (n_positions + m - 1) / m;
        /* host rows up to the positions announced at open, pinned now: decoding up to them allocates nothing */
        int64_t rows_pin = (rq->expected + m - 1) / m > rows_all ? (rq->expected + m - 1) / m : rows_all;
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
            dhs_status s = host_ensure(ctx, rq, g, &gs->src[si], rows_pin);
            if (s != DHS_OK) { import_release(ctx, rq); return s; }
        }
        int64_t nop = n_positions / m / p;
        if (nop == 0) continue;
        gs->n_opt_pages = gs->opt_cap = nop; /* before the checks: import_release frees what exists with this size */
        gs->opt_state = ctx_calloc(ctx, (size_t)nop, 1);
        gs->opt_backing = ctx_calloc(ctx, (size_t)nop, 1);
        gs->opt_ticket = ctx_calloc(ctx, (size_t)nop, sizeof(dhs_ticket));
        int ok = gs->opt_state && gs->opt_backing && gs->opt_ticket;
        for (int32_t si = 0; ok && si < ctx->grp_nsrc[g]; si++) {
            gs->src[si].opt_pages = ctx_calloc(ctx, (size_t)nop, sizeof(int32_t));
            if (!gs->src[si].opt_pages) ok = 0;
            else for (int64_t i = 0; i < nop; i++) gs->src[si].opt_pages[i] = -1;
        }
        if (!ok) { import_release(ctx, rq); return DHS_ERR_NOMEM; }
    }
    return DHS_OK;
}

/* Copies an engine's rows (rows[src]: ceil(n_positions / m) dense rows of
   row_bytes) into the request's host backing: one copy per source where the
   rows are row_stride apart on both sides, else one per row. */
static dhs_status import_fill_host(dhs_ctx *ctx, request *rq, int64_t n_positions, const void *const *rows)
{
    if (ctx->be->payload_free) return DHS_OK;
    /* the dense sources in one batch on up to cfg.copy_threads host threads (rows in host memory), the
       others row by row through the backend */
    dhs_copy_run runs[DHS_MAX_SOURCES];
    int64_t n = 0;
    dhs_status s = DHS_OK;
    for (int32_t src = 0; src < ctx->arch.n_sources && s == DHS_OK; src++) {
        const dhs_source_desc *d = &ctx->arch.sources[src];
        int64_t rows_all = (n_positions + d->m - 1) / d->m;
        if (rows_all == 0) continue;
        src_state *ss = &rq->g[d->group].src[ctx->src_grp_idx[src]];
        uint8_t *dst = host_row(ctx, ss, 0); /* one allocation (import_alloc) */
        const uint8_t *from = rows[src];
        if (d->row_bytes == ctx->row_stride)
            runs[n++] = (dhs_copy_run){dst, from, (size_t)rows_all * d->row_bytes};
        else
            for (int64_t row = 0; row < rows_all && s == DHS_OK; row++)
                s = be_copy_sync(ctx->be, dst + (uint64_t)row * ctx->row_stride, from + (uint64_t)row * d->row_bytes,
                                 d->row_bytes);
    }
    if (s == DHS_OK && n > 0) s = be_copy_host_runs(ctx->be, runs, n, ctx->cfg.copy_threads);
    return s;
}

/* Marks host backing rows [r0, r1) of group g valid; with rows (an engine's
   buffers, DHS_IMPORT_DEVICE) copies them there first. */
static dhs_status import_to_host(dhs_ctx *ctx, request *rq, int32_t g, const void *const *rows, int64_t r0, int64_t r1)
{
    grp_state *gs = &rq->g[g];
    for (int32_t si = 0; rows && si < ctx->grp_nsrc[g]; si++) {
        int32_t src = ctx->grp_srcs[g][si];
        uint32_t rb = ctx->arch.sources[src].row_bytes;
        src_state *ss = &gs->src[si];
        if (ctx->be->payload_free) continue;
        /* one copy per run of rows contiguous on both sides (chunks of one allocation are adjacent) */
        int contig = rb == ctx->row_stride;
        for (int64_t row = r0; row < r1;) {
            int64_t end = row + 1;
            if (contig) {
                int64_t c = row / HOST_CHUNK_ROWS;
                while ((c + 1) * HOST_CHUNK_ROWS < r1 && ss->chunk_span[c + 1] == 0) c++;
                end = (c + 1) * HOST_CHUNK_ROWS;
            }
            if (end > r1) end = r1;
            dhs_status s = be_copy_sync(ctx->be, host_row(ctx, ss, row), (const uint8_t *)rows[src] + (uint64_t)row * rb,
                                        (size_t)(end - row) * rb);
            if (s != DHS_OK) return s;
            row = end;
        }
    }
    for (int64_t row = r0; row < r1; row++) bit_set(gs->host_valid, row);
    return DHS_OK;
}

/* Places an import whose allocations import_alloc made. dev (DHS_IMPORT_DEVICE):
   complete pages go to optional pages while I4 allows (resident-first), the
   rest to host, from the engine's buffers `rows` (host_filled 0). host_filled:
   the rows [0, ceil(n / m)) of every source are already in the host backing
   (import_fill_host, or a transport after dhs_request_import_begin; rows
   unused): they only become valid (with dev the device pages' too: their host
   copy exists, nothing is deferred), and the device pages and the ring are
   filled from there. (A payload-free backend's import passes rows NULL with
   host_filled 0: its device pages' host copies stay deferred.) On success the
   request holds n_positions committed positions. On a failed copy every
   optional page the call took is given back and the request holds nothing
   committed (its allocations stay: the caller releases them or retries). */
static dhs_status import_place(dhs_ctx *ctx, request *rq, int32_t slot, int64_t n_positions, const void *const *rows,
                               int dev, int host_filled)
{
    const dhs_config *c = &ctx->cfg;
    int32_t p = c->page_rows;
    dhs_status st = DHS_OK;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        int64_t m = ctx->grp_m[g];
        int64_t hist = n_positions / m, rows_all = (n_positions + m - 1) / m;
        int32_t nsrc = ctx->grp_nsrc[g];
        /* the leading pages go to the device while I4 leaves room for the whole
           group (nsrc pages each); the rest, and the last partial page, to the host */
        int64_t n_dev = 0;
        if (dev && c->resident_first && !rq->reclaiming) {
            int64_t spare = (int64_t)ctx->n_free_pages - (int64_t)ctx->pages_res;
            n_dev = spare >= nsrc ? spare / nsrc : 0;
            if (n_dev > gs->n_opt_pages) n_dev = gs->n_opt_pages;
        }
        /* source by source, so that a source's pages are consecutive where the free
           list allows: one copy per run of pages adjacent in the pool (rows dense) */
        for (int32_t si = 0; si < nsrc; si++) {
            int32_t *op = gs->src[si].opt_pages;
            for (int64_t hp = 0; hp < n_dev; hp++) op[hp] = page_alloc(ctx, PAGE_OPT, slot);
            if (ctx->be->payload_free) continue;
            int32_t src = ctx->grp_srcs[g][si];
            uint32_t rb = ctx->arch.sources[src].row_bytes;
            int dense = rb == ctx->row_stride;
            for (int64_t hp = 0; hp < n_dev;) {
                int64_t e = hp + 1;
                while (dense && e < n_dev && op[e] == op[e - 1] + 1) e++;
                int64_t rows_n = (e - hp) * p; /* one copy when dense, else row by row (one page) */
                for (int64_t i = 0; i < rows_n; i += dense ? rows_n : 1) {
                    /* host rows of a source are one allocation, row_stride apart */
                    const uint8_t *from = host_filled ? host_row(ctx, &gs->src[si], hp * p + i)
                                                      : (const uint8_t *)rows[src] + (uint64_t)(hp * p + i) * rb;
                    dhs_status s = be_copy_sync(ctx->be, pool_row(ctx, (int64_t)op[hp] * p + i), from,
                                                (size_t)(dense ? rows_n : 1) * rb);
                    if (s != DHS_OK) { st = s; goto fail; }
                }
                hp = e;
            }
        }
        for (int64_t hp = 0; hp < n_dev; hp++) {
            opt_set(rq, gs, hp, OPT_READY);
            gs->opt_held++;
        }
        if (n_dev > 0 && host_filled) { /* filled host rows: the device pages' host copy exists already */
            dhs_status s = import_to_host(ctx, rq, g, NULL, 0, n_dev * p);
            if (s != DHS_OK) { st = s; goto fail; }
        }
        if (n_dev < gs->n_opt_pages) {
            dhs_status s = import_to_host(ctx, rq, g, dev && !host_filled ? rows : NULL, n_dev * p, gs->n_opt_pages * p);
            if (s != DHS_OK) { st = s; goto fail; }
        }
        dhs_status s = import_to_host(ctx, rq, g, dev && !host_filled ? rows : NULL, gs->n_opt_pages * p, hist);
        if (s != DHS_OK) { st = s; goto fail; }
        /* the ring starts at the last partial page (its rows also went to the
           host above), so that a selection of them is direct; an incomplete
           compressed row lives only in the ring. At most p + 1 <= tail_rows rows. */
        const int64_t ring_lo = gs->n_opt_pages * p;
        for (int32_t si = 0; si < nsrc && !ctx->be->payload_free; si++) {
            int32_t src = ctx->grp_srcs[g][si];
            uint32_t rb = ctx->arch.sources[src].row_bytes;
            for (int64_t row = ring_lo; row < rows_all;) {
                /* one copy per run inside one tail page (rows dense), else row by row; host
                   rows are row_stride apart in one allocation, so a run is contiguous there too */
                int32_t t = (int32_t)(row % c->tail_rows);
                int64_t run = rb == ctx->row_stride ? p - t % p : 1;
                if (run > rows_all - row) run = rows_all - row;
                int64_t loc = (int64_t)gs->src[si].tail_pages[t / p] * p + t % p;
                const uint8_t *from = dev && !host_filled ? (const uint8_t *)rows[src] + (uint64_t)row * rb
                                                          : host_row(ctx, &gs->src[si], row);
                s = be_copy_sync(ctx->be, pool_row(ctx, loc), from, (size_t)run * rb);
                if (s != DHS_OK) { st = s; goto fail; }
                row += run;
            }
        }
        (*gs->hist) = hist;
        gs->import_rows = hist;
        (*gs->tail_lo) = ring_lo;
        (*gs->backed_hi) = hist;
        gs->backup_hi = hist;
        for (int32_t si = 0; si < nsrc; si++) (*gs->src[si].wr) = rows_all;
    }
    rq->n = n_positions;
    rq->imported = 1;
    req_due_update(ctx, rq);
    dres_publish_request(ctx, slot);
    return DHS_OK;
fail:
    /* a backend copy failed: give back every optional page this call took
       (nothing read them) and every host row it marked valid, so a retry
       starts from the same state */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        for (int64_t hp = 0; hp < gs->n_opt_pages; hp++) {
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                if (gs->src[si].opt_pages[hp] >= 0) page_free_now(ctx, gs->src[si].opt_pages[hp]);
                gs->src[si].opt_pages[hp] = -1;
            }
            opt_set(rq, gs, hp, OPT_ABSENT);
        }
        gs->opt_held = 0;
        (*gs->hist) = gs->import_rows = (*gs->tail_lo) = (*gs->backed_hi) = gs->backup_hi = 0;
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) (*gs->src[si].wr) = 0;
        memset(gs->host_valid, 0, sizeof(uint64_t) * (size_t)(ctx->grp_max_rows[g] / 64 + 1));
    }
    rq->due_n = 0;
    return st;
}

/* The checks every import call makes on the request: once, before its first round, not while a
   two-phase import is open. */
static dhs_status import_state_ok(const request *rq)
{
    return rq->imported || rq->importing || rq->n > 0 || rq->in_round ? DHS_ERR_STATE : DHS_OK;
}

static dhs_status import_extend(dhs_ctx *ctx, request *rq, int32_t slot, int64_t n, const void *const *rows);

dhs_status dhs_request_import(dhs_ctx *ctx, dhs_req r, int64_t n_positions, const void *const *rows, unsigned flags)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    /* a request opened on a shared prefix, before its first round: its own rows after the prefix */
    const int extend = rq->shared_n > 0 && rq->n == rq->shared_n && !rq->in_round;
    if (!extend && import_state_ok(rq) != DHS_OK) return DHS_ERR_STATE;
    if (flags != DHS_IMPORT_DEVICE && flags != DHS_IMPORT_HOST) return DHS_ERR_INVALID_ARG;
    if (n_positions < 0 || n_positions > ctx->cfg.max_rows) return DHS_ERR_ROW_RANGE;
    if (n_positions > 0 && !ctx->be->payload_free) {
        if (!rows) return DHS_ERR_INVALID_ARG;
        for (int32_t s = 0; s < ctx->arch.n_sources; s++) {
            if (!rows[s]) return DHS_ERR_INVALID_ARG;
            if ((uintptr_t)rows[s] % DHS_ALIGN) return DHS_ERR_MISALIGNED;
        }
    }
    if (extend) {
        if (n_positions < rq->shared_n) return DHS_ERR_ROW_RANGE;
        return n_positions == rq->shared_n ? DHS_OK : import_extend(ctx, rq, (int32_t)r.id, n_positions, rows);
    }
    /* allocate everything first; fail cleanly. DHS_IMPORT_HOST is the two
       phases of dhs_request_import_begin / _commit with the engine's rows
       copied in between. */
    dhs_status s = import_alloc(ctx, rq, n_positions);
    if (s != DHS_OK) return s;
    const int dev = flags == DHS_IMPORT_DEVICE;
    if (!dev) s = import_fill_host(ctx, rq, n_positions, rows);
    if (s == DHS_OK) s = import_place(ctx, rq, (int32_t)r.id, n_positions, dev ? rows : NULL, dev, !dev);
    if (s != DHS_OK) import_release(ctx, rq); /* nothing of the import remains */
    return s;
}

dhs_status dhs_request_import_begin(dhs_ctx *ctx, dhs_req r, int64_t n_positions, unsigned flags, void **host_rows)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    if (import_state_ok(rq) != DHS_OK) return DHS_ERR_STATE;
    if ((flags != DHS_IMPORT_HOST && flags != DHS_IMPORT_DEVICE) || !host_rows) return DHS_ERR_INVALID_ARG;
    if (n_positions < 0 || n_positions > ctx->cfg.max_rows) return DHS_ERR_ROW_RANGE;
    dhs_status s = import_alloc(ctx, rq, n_positions);
    if (s != DHS_OK) return s;
    rq->importing = 1;
    rq->import_n = n_positions;
    rq->import_dev = flags == DHS_IMPORT_DEVICE;
    for (int32_t src = 0; src < ctx->arch.n_sources; src++) {
        const dhs_source_desc *d = &ctx->arch.sources[src];
        const src_state *ss = &rq->g[d->group].src[ctx->src_grp_idx[src]];
        int64_t rows_all = (n_positions + d->m - 1) / d->m;
        host_rows[src] = ctx->be->payload_free || rows_all == 0 ? NULL : host_row(ctx, ss, 0);
    }
    return DHS_OK;
}

dhs_status dhs_request_import_commit(dhs_ctx *ctx, dhs_req r)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    if (!rq->importing) return DHS_ERR_STATE;
    /* a failed copy (the ring's rows) leaves the import open: retry or abort */
    dhs_status s = import_place(ctx, rq, (int32_t)r.id, rq->import_n, NULL, rq->import_dev, 1);
    if (s != DHS_OK) return s;
    rq->importing = 0;
    rq->import_n = 0;
    rq->import_dev = 0;
    return DHS_OK;
}

dhs_status dhs_request_import_abort(dhs_ctx *ctx, dhs_req r)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    if (!rq->importing) return DHS_ERR_STATE;
    import_release(ctx, rq);
    rq->importing = 0;
    rq->import_n = 0;
    rq->import_dev = 0;
    return DHS_OK;
}

static int64_t tail_loc(const dhs_ctx *ctx, const src_state *ss, int64_t row)
{
    return tail_row_loc(ss->tail_pages, ctx->cfg.tail_rows, ctx->cfg.page_rows, row);
}


/* Issues the host backups of committed tail rows [backup_hi, hi) on the
   side stream, in one copy with one ticket (done and wait are idempotent on a
   ticket), for every (request, group) of the span that has rows to back up and
   no backup in flight: requests `one`, or else ctx->req[rqi[0..nr)], groups
   [g0, g1); hi = hist_rows (all) or backup_due_hi (the complete pages). On
   failure nothing is marked: the next round, or backup_complete, retries. */
static dhs_status backup_span(dhs_ctx *ctx, request *one, const int32_t *rqi, int32_t nr, int32_t g0, int32_t g1,
                              int all)
{
#define SPAN_RQ(i) (one ? one : &ctx->req[rqi[i]])
#define SPAN_HI(gs) (all ? *(gs)->hist : backup_due_hi(ctx, (gs)))
#define SPAN_SKIP(gs) ((gs)->backup_ticket || (gs)->backup_hi >= SPAN_HI(gs))
    int64_t tot = 0, n = 0;
    /* every request with rows to back up is listed until its backup completed, before anything can
       fail: a host-row allocation failing for one request leaves the others due too */
    for (int32_t i = 0; i < nr; i++)
        for (int32_t g = g0; g < g1; g++)
            if (!SPAN_SKIP(&SPAN_RQ(i)->g[g])) {
                work_add(ctx, (int32_t)(SPAN_RQ(i) - ctx->req));
                break;
            }
    for (int32_t i = 0; i < nr; i++)
        for (int32_t g = g0; g < g1; g++) {
            grp_state *gs = &SPAN_RQ(i)->g[g];
            if (SPAN_SKIP(gs)) continue;
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                dhs_status s = host_ensure(ctx, SPAN_RQ(i), g, &gs->src[si], SPAN_HI(gs));
                if (s != DHS_OK) return s;
            }
            tot += (SPAN_HI(gs) - gs->backup_hi) * ctx->grp_nsrc[g];
        }
    if (tot == 0) return DHS_OK;
    if (!ctx->be->payload_free) {
        dhs_status s = pairs_reserve(ctx, tot);
        if (s != DHS_OK) return s;
        for (int32_t i = 0; i < nr; i++)
            for (int32_t g = g0; g < g1; g++) {
                grp_state *gs = &SPAN_RQ(i)->g[g];
                if (SPAN_SKIP(gs)) continue;
                const int64_t hi = SPAN_HI(gs);
                for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++)
                    for (int64_t row = gs->backup_hi; row < hi; row++)
                        ctx->pairs[n++] = (dhs_copy_pair){pool_row(ctx, tail_loc(ctx, &gs->src[si], row)),
                                                          host_row(ctx, &gs->src[si], row)};
            }
    }
    dhs_ticket t = 0;
    dhs_status s = be_copy_async(ctx->be, ctx->pairs, n, ctx->row_stride, &t);
    if (s != DHS_OK) return s;
    for (int32_t i = 0; i < nr; i++)
        for (int32_t g = g0; g < g1; g++) {
            grp_state *gs = &SPAN_RQ(i)->g[g];
            if (SPAN_SKIP(gs)) continue;
            const int64_t hi = SPAN_HI(gs), rows = (hi - gs->backup_hi) * ctx->grp_nsrc[g];
            gs->backup_ticket = t;
            gs->backup_hi = hi;
            ctx->st.backup_rows += (uint64_t)rows;
            ctx->st.backup_bytes += (uint64_t)rows * ctx->row_stride;
            if (!t) { /* completed at once */
                for (int64_t row = (*gs->backed_hi); row < gs->backup_hi; row++) bit_set(gs->host_valid, row);
                (*gs->backed_hi) = gs->backup_hi;
            }
        }
    return DHS_OK;
#undef SPAN_RQ
#undef SPAN_HI
#undef SPAN_SKIP
}

/* one group of one request */
dhs_status backup_issue(dhs_ctx *ctx, request *rq, int32_t g, int all)
{
    return backup_span(ctx, rq, NULL, 1, g, g + 1, all);
}

void req_due_update(const dhs_ctx *ctx, request *rq)
{
    int64_t due = INT64_MAX;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        const int64_t n = backup_next_due_rows(ctx, &rq->g[g]) * ctx->grp_m[g];
        if (n < due) due = n;
    }
    rq->due_n = due;
}

/* The round's requests whose committed positions reached due_n (a page of some group completed, or a
   backup that could not go out before): their due rows of every group in one launch. The rest cost one
   comparison each: with page backups a decode round adds a row inside a page for 63 of 64 rounds. Called
   with the round's commits in place (hist_rows) and rq->n not yet advanced (accepted: the round's). */
dhs_status backup_issue_round(dhs_ctx *ctx, const int32_t *accepted)
{
    int32_t n_due = 0;
    for (int32_t i = 0; i < ctx->n_round; i++) {
        const request *rq = &ctx->req[ctx->round_reqs[i]];
        if (rq->n + accepted[i] + 1 >= rq->due_n) ctx->work_tmp[n_due++] = ctx->round_reqs[i];
    }
    if (n_due == 0) return DHS_OK;
    dhs_status s = backup_span(ctx, NULL, ctx->work_tmp, n_due, 0, ctx->arch.n_groups, 0);
    for (int32_t i = 0; i < n_due; i++) req_due_update(ctx, &ctx->req[ctx->work_tmp[i]]);
    return s;
}

/* Deferral (ctx->bg_called): the requests backup_issue_round would copy are put on the work list
   instead, their due_n unchanged, so every later round end sees them due again until dhs_background
   (or a forced backup) issued their rows. */
void backup_defer_round(dhs_ctx *ctx, const int32_t *accepted)
{
    for (int32_t i = 0; i < ctx->n_round; i++) {
        const request *rq = &ctx->req[ctx->round_reqs[i]];
        if (rq->n + accepted[i] + 1 >= rq->due_n) work_add(ctx, ctx->round_reqs[i]);
    }
}

/* Marks a completed backup (the rows stay in the ring: tail_room moves
   tail_lo); with force, waits for it and backs up the rest. */
void backup_complete(dhs_ctx *ctx, request *rq, int32_t g, int force)
{
    grp_state *gs = &rq->g[g];
    for (int pass = 0; pass < 2; pass++) {
        if (gs->backup_ticket) {
            if (!ticket_done(ctx, gs->backup_ticket)) {
                if (!force) return;
                if (ctx->be->ops->wait(ctx->be, gs->backup_ticket) != DHS_OK) return;
            }
            for (int64_t row = (*gs->backed_hi); row < gs->backup_hi; row++) bit_set(gs->host_valid, row);
            (*gs->backed_hi) = gs->backup_hi;
            gs->backup_ticket = 0;
        }
        if (!force || (*gs->backed_hi) >= (*gs->hist)) return;
        if (backup_issue(ctx, rq, g, 1) != DHS_OK) return;
    }
}

/* tail_room (internal.h) for a ring short of room: tail_lo moves up to need = hi - tail_rows, over rows
   whose host copy is complete (waiting for the backup when it is not; a failed copy is retried once) and
   which no population still reads from the ring (waiting for it: the page stays pending until housekeeping
   sees its copy complete). DHS_ERR_BACKEND: a copy did not complete, nothing moved. */
dhs_status tail_room_move(dhs_ctx *ctx, request *rq, int32_t g, int64_t need)
{
    grp_state *gs = &rq->g[g];
    for (int attempt = 0; attempt < 2 && (*gs->backed_hi) < need; attempt++) backup_complete(ctx, rq, g, 1);
    if ((*gs->backed_hi) < need) return DHS_ERR_BACKEND;
    const int64_t p = ctx->cfg.page_rows;
    for (int64_t hp = (*gs->tail_lo) / p; rq->opt_pending && hp < gs->n_opt_pages && hp * p < need; hp++)
        if (gs->opt_state[hp] == OPT_PENDING && gs->opt_ticket[hp] && !ticket_done(ctx, gs->opt_ticket[hp]) &&
            ctx->be->ops->wait(ctx->be, gs->opt_ticket[hp]) != DHS_OK)
            return DHS_ERR_BACKEND;
    (*gs->tail_lo) = need;
    return DHS_OK;
}

/* ------------------------------------------------------------- optional pages */
static int32_t nsrc_of(const dhs_ctx *ctx, int32_t g) { return ctx->grp_nsrc[g]; }

static int64_t req_opt_pages(const dhs_ctx *ctx, const request *rq)
{
    int64_t a = 0;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) a += rq->g[g].opt_held * nsrc_of(ctx, g);
    return a;
}

static void opt_release_page(dhs_ctx *ctx, request *rq, int32_t g, int64_t hp)
{
    grp_state *gs = &rq->g[g];
    for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
        if (gs->src[si].opt_pages[hp] >= 0) page_release(ctx, gs->src[si].opt_pages[hp]);
        gs->src[si].opt_pages[hp] = -1;
    }
    opt_set(rq, gs, hp, OPT_ABSENT);
    opt_backing_set(gs, hp, 0);
    gs->opt_ticket[hp] = 0;
    gs->opt_held--;
}

/* Starts the reclaim of page hp: back up rows without a host copy. */
static dhs_status opt_start_reclaim(dhs_ctx *ctx, request *rq, int32_t g, int64_t hp)
{
    grp_state *gs = &rq->g[g];
    int32_t p = ctx->cfg.page_rows;
    if (gs->opt_state[hp] != OPT_READY || gs->opt_backing[hp]) return DHS_OK;
    int need = 0;
    for (int32_t i = 0; i < p; i++)
        if (!bit_get(gs->host_valid, hp * p + i)) need = 1;
    if (!need) {
        opt_set(rq, gs, hp, OPT_RETIRING);
        return DHS_OK;
    }
    int32_t nsrc = ctx->grp_nsrc[g];
    int64_t n = 0;
    if (!ctx->be->payload_free) {
        dhs_status s = pairs_reserve(ctx, (int64_t)p * nsrc);
        if (s != DHS_OK) return s;
        for (int32_t si = 0; si < nsrc; si++) {
            src_state *ss = &gs->src[si];
            for (int32_t i = 0; i < p; i++)
                ctx->pairs[n++] = (dhs_copy_pair){pool_row(ctx, (int64_t)ss->opt_pages[hp] * p + i),
                                                  host_row(ctx, ss, hp * p + i)};
        }
    }
    dhs_ticket t = 0;
    dhs_status s = be_copy_async(ctx->be, ctx->pairs, n, ctx->row_stride, &t);
    if (s != DHS_OK) return s;
    ctx->st.backup_rows += (uint64_t)p * nsrc;
    ctx->st.backup_bytes += (uint64_t)p * nsrc * ctx->row_stride;
    opt_backing_set(gs, hp, 1);
    gs->opt_ticket[hp] = t;
    work_add(ctx, (int32_t)(rq - ctx->req));
    return DHS_OK;
}

/* Advances page hp: backup done -> retiring (host copy complete) -> freed
   after the readers. With force, waits. */
static void opt_advance(dhs_ctx *ctx, request *rq, int32_t g, int64_t hp, int force)
{
    grp_state *gs = &rq->g[g];
    int32_t p = ctx->cfg.page_rows;
    dhs_backend *be = ctx->be;
    if (gs->opt_state[hp] == OPT_PENDING && gs->opt_ticket[hp]) {
        if (!ticket_done(ctx, gs->opt_ticket[hp])) {
            if (!force) return;
            be->ops->wait(be, gs->opt_ticket[hp]);
        }
        gs->opt_ticket[hp] = 0;
        opt_set(rq, gs, hp, rq->reclaiming ? OPT_RETIRING : OPT_READY);
        if (gs->opt_state[hp] == OPT_READY) ctx->st.repopulated_pages++;
    }
    if (gs->opt_state[hp] == OPT_READY && gs->opt_backing[hp]) {
        if (gs->opt_ticket[hp] && !ticket_done(ctx, gs->opt_ticket[hp])) {
            if (!force) return;
            be->ops->wait(be, gs->opt_ticket[hp]);
        }
        for (int32_t i = 0; i < p; i++) bit_set(gs->host_valid, hp * p + i);
        opt_backing_set(gs, hp, 0);
        gs->opt_ticket[hp] = 0;
        opt_set(rq, gs, hp, OPT_RETIRING);
    }
    if (gs->opt_state[hp] == OPT_RETIRING) {
        /* no reader can be handed this page from now on; page_release defers
           the memory until earlier readers complete */
        opt_release_page(ctx, rq, g, hp);
        ctx->st.retired_pages++;
    }
}

/* Takes every optional page of a request (whole-request reclaim). */
static dhs_status reclaim_request(dhs_ctx *ctx, request *rq)
{
    rq->reclaiming = 1;
    ctx->st.reclaims++;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        for (int64_t hp = 0; hp < gs->n_opt_pages; hp++) {
            if (gs->opt_state[hp] == OPT_ABSENT) continue;
            ctx->st.reclaimed_pages += (uint64_t)ctx->grp_nsrc[g];
            dhs_status s = opt_start_reclaim(ctx, rq, g, hp);
            if (s != DHS_OK) {
                /* pages whose backup started finish in housekeeping; the rest
                   keep serving and the request may repopulate again */
                rq->reclaiming = 0;
                return s;
            }
        }
    }
    for (int32_t g = 0; g < ctx->arch.n_groups; g++)
        for (int64_t hp = 0; hp < rq->g[g].n_opt_pages; hp++)
            if (rq->g[g].opt_state[hp] != OPT_ABSENT) opt_advance(ctx, rq, g, hp, 1);
    rq->reclaiming = 0;
    return DHS_OK;
}

/* Frees deferred pages whose readers completed; with force waits for all. */
static void deferred_sweep(dhs_ctx *ctx, int force)
{
    int64_t j = 0;
    for (int64_t i = 0; i < ctx->n_deferred; i++) {
        deferred_free d = ctx->deferred[i];
        int done = ticket_done(ctx, d.t);
        if (!done && force) done = ctx->be->ops->wait(ctx->be, d.t) == DHS_OK;
        if (done) {
            ctx->page_use[d.page] = PAGE_HOT; /* counted as required until now */
            page_free_now(ctx, d.page);
        } else {
            ctx->deferred[j++] = d;
        }
    }
    ctx->n_deferred = j;
}

dhs_status res_drain(dhs_ctx *ctx)
{
    deferred_sweep(ctx, 1);
    return DHS_OK;
}

typedef struct { int32_t slot; int64_t key; } order_ent;

static int cmp_order(const void *a, const void *b)
{
    const order_ent *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->slot - y->slot;
}

/* A request whose optional pages an admission may reclaim. A request of the
   open round may have handed out locations in its optional pages to consumers
   not issued yet (I2): not a candidate until the round ends. */
static int reclaim_candidate(const dhs_ctx *ctx, const request *rq)
{
    return rq->in_use && !(ctx->round_open && rq->in_round);
}

/* The optional pages that reclaiming every candidate would give back: a page
   shared by several requests (shared prefix) counts once, and only when every
   request mapping it is a candidate. -1: out of memory. */
static int64_t reclaimable_pages(const dhs_ctx *ctx)
{
    int64_t all = 0;
    const int32_t N = ctx->cfg.max_requests;
    if (ctx->pages_shared == 0) {
        for (int32_t i = 0; i < N; i++)
            if (reclaim_candidate(ctx, &ctx->req[i])) all += req_opt_pages(ctx, &ctx->req[i]);
        return all;
    }
    int32_t *maps = calloc((size_t)ctx->n_pages, sizeof *maps);
    if (!maps) return -1;
    for (int32_t i = 0; i < N; i++) {
        const request *rq = &ctx->req[i];
        if (!reclaim_candidate(ctx, rq)) continue;
        for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
            const grp_state *gs = &rq->g[g];
            for (int64_t hp = 0; hp < gs->n_opt_pages; hp++) {
                if (gs->opt_state[hp] == OPT_ABSENT) continue;
                for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                    const int32_t pg = gs->src[si].opt_pages[hp];
                    if (pg >= 0 && ++maps[pg] == ctx->page_ref[pg] + 1) all++;
                }
            }
        }
    }
    free(maps);
    return all;
}

dhs_status res_admit(dhs_ctx *ctx, request *new_rq)
{
    (void)new_rq;
    int64_t need = ctx->req_pages_per_request;
    int32_t N = ctx->cfg.max_requests;
    if (ctx->n_free_pages - need >= ctx->pages_res) return DHS_OK;
    /* decide before touching anything: deferred pages come back once their
       readers completed, candidates' optional pages by reclaim; when even all
       of it cannot make room the admission waits and nothing changed (no
       sweep, no wait for readers) */
    int64_t all = reclaimable_pages(ctx);
    if (all < 0) return DHS_ERR_NOMEM;
    if (ctx->n_free_pages + ctx->n_deferred + all - need < ctx->pages_res) return DHS_WAIT;
    deferred_sweep(ctx, 0);
    if (ctx->n_free_pages - need >= ctx->pages_res) return DHS_OK;
    deferred_sweep(ctx, 1);
    int64_t delta = need + ctx->pages_res - ctx->n_free_pages;
    if (delta <= 0) return DHS_OK;
    /* reclaim order over the candidates */
    all = reclaimable_pages(ctx);
    if (all < 0) return DHS_ERR_NOMEM;
    order_ent *ord = malloc(sizeof(order_ent) * (size_t)N);
    if (!ord) return DHS_ERR_NOMEM;
    int32_t n = 0;
    for (int32_t i = 0; i < N; i++) {
        request *rq = &ctx->req[i];
        if (!reclaim_candidate(ctx, rq)) continue;
        int64_t a = req_opt_pages(ctx, rq);
        if (a == 0) continue;
        int64_t key = 0;
        switch (ctx->cfg.reclaim_order) {
        case DHS_RECLAIM_MOST_PAGES: key = -a; break;
        case DHS_RECLAIM_OLDEST: key = (int64_t)rq->admit_seq; break;
        case DHS_RECLAIM_NEWEST: key = -(int64_t)rq->admit_seq; break;
        default: break;
        }
        ord[n++] = (order_ent){i, key};
    }
    if (all < delta) {
        free(ord);
        return DHS_WAIT;
    }
    qsort(ord, (size_t)n, sizeof *ord, cmp_order);
    /* a reclaimed request gives its pages back at once or after their readers
       (deferred): count what came back, so a page shared with a request not
       reclaimed yet (shared prefix) counts only once the last holder let go */
    const int64_t back0 = ctx->n_free_pages + ctx->n_deferred;
    dhs_status s = DHS_OK;
    for (int32_t i = 0; i < n && ctx->n_free_pages + ctx->n_deferred - back0 < delta; i++) {
        request *rq = &ctx->req[ord[i].slot];
        s = reclaim_request(ctx, rq);
        if (s != DHS_OK) break;
    }
    free(ord);
    deferred_sweep(ctx, 1);
    if (s != DHS_OK) return s;
    return ctx->n_free_pages - need >= ctx->pages_res ? DHS_OK : DHS_WAIT;
}

/* Bounded round-robin repopulation of absent optional pages whose rows all
   have host copies. The pages of one pass go out in ONE copy with one
   ticket (they were one copy per page: up to repop_pages copies, and as many
   fence queries later, per round; bench/control_bench.c counts them). */
/* the pass's page list is scratch: freed when the pass ends, so an idle context holds nothing for it */
static void repop_release(dhs_ctx *ctx)
{
    ctx_free(ctx, ctx->repop, (size_t)ctx->repop_cap, sizeof(struct repop_ent));
    ctx->repop = NULL;
    ctx->repop_cap = 0;
}

/* Decoded history joins the optional pages: the group's complete committed pages become optional-page
   entries, absent, which the repopulation below fills like imported ones while the pool has room (the rows
   the tail ring holds from the ring, the rest from host), so a long decode is served directly (its rounds
   cannot miss) whenever the load allows, not from the hot cache. A page joins while the tail ring still
   holds it, so it is ready before the ring lets any of its rows go. The arrays grow by an eighth beyond the
   need, so a decode reallocates them rarely; an allocation that fails changes nothing. Nothing is marked
   for publishing: an absent entry is what the device mirror holds past the entries it published (page -1,
   not ready); the population's opt_set marks the page. */
static void opt_grow(dhs_ctx *ctx, request *rq, int32_t g)
{
    grp_state *gs = &rq->g[g];
    const int32_t p = ctx->cfg.page_rows;
    const int64_t nop = (*gs->hist) / p, most = ctx->grp_max_rows[g] / p + 1;
    if (!ctx->cfg.decoded_optional || nop <= gs->n_opt_pages || nop > most) return;
    if (nop > gs->opt_cap) {
        int64_t cap = nop + nop / 8 + 8;
        if (cap > most) cap = most;
        const int32_t nsrc = ctx->grp_nsrc[g];
        uint8_t *st = ctx_calloc(ctx, (size_t)cap, 1), *bk = ctx_calloc(ctx, (size_t)cap, 1);
        dhs_ticket *tk = ctx_calloc(ctx, (size_t)cap, sizeof(dhs_ticket));
        int32_t *pg[DHS_MAX_SOURCES] = {0};
        int ok = st && bk && tk;
        for (int32_t si = 0; si < nsrc && ok; si++) ok = (pg[si] = ctx_calloc(ctx, (size_t)cap, sizeof(int32_t))) != NULL;
        if (!ok) {
            ctx_free(ctx, st, (size_t)cap, 1);
            ctx_free(ctx, bk, (size_t)cap, 1);
            ctx_free(ctx, tk, (size_t)cap, sizeof(dhs_ticket));
            for (int32_t si = 0; si < nsrc; si++) ctx_free(ctx, pg[si], (size_t)cap, sizeof(int32_t));
            return;
        }
        const int64_t n = gs->n_opt_pages;
        if (n) {
            memcpy(st, gs->opt_state, (size_t)n);
            memcpy(bk, gs->opt_backing, (size_t)n);
            memcpy(tk, gs->opt_ticket, sizeof(dhs_ticket) * (size_t)n);
        }
        for (int32_t si = 0; si < nsrc; si++) {
            src_state *ss = &gs->src[si];
            for (int64_t i = 0; i < cap; i++) pg[si][i] = i < n ? ss->opt_pages[i] : -1;
            ctx_free(ctx, ss->opt_pages, (size_t)gs->opt_cap, sizeof(int32_t));
            ss->opt_pages = pg[si];
        }
        ctx_free(ctx, gs->opt_state, (size_t)gs->opt_cap, 1);
        ctx_free(ctx, gs->opt_backing, (size_t)gs->opt_cap, 1);
        ctx_free(ctx, gs->opt_ticket, (size_t)gs->opt_cap, sizeof(dhs_ticket));
        gs->opt_state = st;
        gs->opt_backing = bk;
        gs->opt_ticket = tk;
        gs->opt_cap = cap;
    }
    gs->n_opt_pages = nop; /* the entries [old, nop) are absent, page -1 */
}

void res_repopulate(dhs_ctx *ctx)
{
    int32_t budget = ctx->cfg.repop_pages, N = ctx->cfg.max_requests, p = ctx->cfg.page_rows;
    if (budget <= 0 || !ctx->cfg.resident_first) return;
    int32_t nl = 0;
    int64_t n = 0;
    int stop = 0; /* the pool's room or the copy list ran out: the cursor stays */
    for (int32_t step = 0; step < N && budget > 0 && !stop; step++) {
        int32_t slot = (ctx->repop_cursor + step) % N;
        request *rq = &ctx->req[slot];
        if (!rq->in_use || rq->reclaiming || rq->importing) continue; /* an open import's rows are not valid yet */
        for (int32_t g = 0; g < ctx->arch.n_groups && budget > 0 && !stop; g++) {
            grp_state *gs = &rq->g[g];
            int32_t nsrc = ctx->grp_nsrc[g];
            opt_grow(ctx, rq, g);
            /* the common case (every imported page on the device) skips the page loop */
            if (gs->opt_held >= gs->n_opt_pages) continue; /* O(1): opt_held counts the pages not absent */
            for (int64_t hp = 0; hp < gs->n_opt_pages && budget > 0; hp++) {
                if (gs->opt_state[hp] != OPT_ABSENT) continue;
                if (ctx->n_free_pages - nsrc < ctx->pages_res) { stop = 1; break; }
                /* the rows the tail ring holds are copied from the ring (a decoded page that joined while the
                   ring holds it: tail_room_move keeps them there until the copy completed), the rest from
                   their host copies, which they must have (always, below tail_lo <= backed_hi, but for an
                   imported page placed on the device without one). Neither depends on when a backup
                   completed, so the page is ready in the same round with or without dhs_background */
                const int64_t lo = *gs->tail_lo;
                int ok = 1;
                for (int32_t i = 0; i < p && ok; i++) ok = hp * p + i >= lo || bit_get(gs->host_valid, hp * p + i);
                if (!ok) continue;
                const int32_t host_rows = lo >= (hp + 1) * p ? p : lo <= hp * p ? 0 : (int32_t)(lo - hp * p);
                if (!ctx->be->payload_free && pairs_reserve(ctx, n + (int64_t)p * nsrc) != DHS_OK) { stop = 1; break; }
                if (nl == ctx->repop_cap) { /* the pass's page list grows (a failure ends the pass) */
                    int32_t cap = ctx->repop_cap ? 2 * ctx->repop_cap : 64;
                    struct repop_ent *nr = ctx_calloc(ctx, (size_t)cap, sizeof *nr);
                    if (!nr) { stop = 1; break; }
                    if (nl) memcpy(nr, ctx->repop, sizeof *nr * (size_t)nl);
                    ctx_free(ctx, ctx->repop, (size_t)ctx->repop_cap, sizeof *nr);
                    ctx->repop = nr;
                    ctx->repop_cap = cap;
                }
                for (int32_t si = 0; si < nsrc; si++) {
                    src_state *ss = &gs->src[si];
                    ss->opt_pages[hp] = page_alloc(ctx, PAGE_OPT, slot);
                    if (ctx->be->payload_free) continue;
                    for (int32_t i = 0; i < p; i++) {
                        const int64_t row = hp * p + i;
                        const void *src = row >= lo ? pool_row(ctx, tail_row_loc(ss->tail_pages, ctx->cfg.tail_rows, p, row))
                                                    : host_row(ctx, ss, row);
                        ctx->pairs[n++] = (dhs_copy_pair){src, pool_row(ctx, (int64_t)ss->opt_pages[hp] * p + i)};
                    }
                }
                gs->opt_held++;
                opt_set(rq, gs, hp, OPT_PENDING); /* not read before the copy is issued below */
                work_add(ctx, slot);
                ctx->repop[nl++] = (struct repop_ent){slot, g, hp, host_rows};
                budget--;
            }
        }
    }
    if (nl > 0) {
        dhs_ticket t = 0;
        if (be_copy_async(ctx->be, ctx->pairs, n, ctx->row_stride, &t) != DHS_OK) {
            /* nothing was read from these pages: free them at once */
            for (int32_t i = 0; i < nl; i++) {
                request *rq = &ctx->req[ctx->repop[i].slot];
                grp_state *gs = &rq->g[ctx->repop[i].g];
                for (int32_t si = 0; si < ctx->grp_nsrc[ctx->repop[i].g]; si++) {
                    page_free_now(ctx, gs->src[si].opt_pages[ctx->repop[i].hp]);
                    gs->src[si].opt_pages[ctx->repop[i].hp] = -1;
                }
                opt_set(rq, gs, ctx->repop[i].hp, OPT_ABSENT);
                gs->opt_held--;
            }
            repop_release(ctx);
            return;
        }
        for (int32_t i = 0; i < nl; i++) {
            request *rq = &ctx->req[ctx->repop[i].slot];
            grp_state *gs = &rq->g[ctx->repop[i].g];
            const int64_t hp = ctx->repop[i].hp, nsrc = ctx->grp_nsrc[ctx->repop[i].g];
            /* host -> device rows only: a decoded page's rows the ring held moved device to device */
            ctx->st.populate_rows += (uint64_t)ctx->repop[i].host_rows * (uint64_t)nsrc;
            ctx->st.populate_bytes += (uint64_t)ctx->repop[i].host_rows * (uint64_t)nsrc * ctx->row_stride;
            gs->opt_ticket[hp] = t;
            if (!t) {
                opt_set(rq, gs, hp, OPT_READY);
                ctx->st.repopulated_pages++;
            }
        }
    }
    repop_release(ctx);
    if (!stop) ctx->repop_cursor = (ctx->repop_cursor + 1) % N;
}

/* Whether any optional page of the group has a copy in flight (a population
   pending, a reclaim backup): two memchr scans let the common round skip the
   per-page loop over every imported page (1,563 per group at 100K rows) of
   every request, which cost ~3 ns a page (measured on the CPU backend). The
   full sweep's test; the work list reads gs->opt_busy instead. */
static int opt_any_busy(const grp_state *gs)
{
    const size_t n = (size_t)gs->n_opt_pages;
    return n > 0 && (memchr(gs->opt_state, OPT_PENDING, n) || memchr(gs->opt_backing, 1, n));
}

/* Whether housekeeping has anything left to do for the request: a copy in flight or committed rows
   due for a backup (backup_due_hi: with page backups the rows of a page not complete yet are not; they
   go out with their page, or when something needs them on host). */
static int work_outstanding(const dhs_ctx *ctx, const request *rq)
{
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        const grp_state *gs = &rq->g[g];
        if (gs->backup_ticket || gs->backup_hi < backup_due_hi(ctx, gs) || gs->opt_busy > 0) return 1;
    }
    return 0;
}

/* Completes what has completed (with force: waits for everything): tail
   backups, populations and reclaim backups of every open request.
   A request of the open round is frozen: a completion would move rows it
   may already have served (tail -> host/hot when tail_lo advances, hot ->
   optional page when a population is published), giving one row two
   locations in one round. Its copies are only waited for (with force) and
   are published by the housekeeping of the next dhs_round_begin.
   Without force (every dhs_round_begin) only the requests on the work list
   are visited, each fence is queried once per pass (ticket_done), and the
   backups that are due go out in ONE copy for all of them. The full sweep
   (every slot and group, a fence query and a backup launch per request and
   group; ctx->full_sweep keeps it for bench/control_bench.c) made
   O(C x groups) backend calls per round: a round's tail backup still in
   flight when the round ended went out again one request and group at a
   time at the next dhs_round_begin. */
static void advance_all(dhs_ctx *ctx, int force)
{
    dhs_backend *be = ctx->be;
    if (!force && !ctx->full_sweep) {
        int32_t keep = 0, n_issue = 0;
        for (int32_t w = 0; w < ctx->n_work; w++) {
            const int32_t slot = ctx->work[w];
            request *rq = &ctx->req[slot];
            if (!rq->in_use) { /* closed: its copies were given back with it */
                ctx->work_on[slot] = 0;
                continue;
            }
            if (!(ctx->round_open && rq->in_round)) {
                int due = 0;
                for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
                    grp_state *gs = &rq->g[g];
                    backup_complete(ctx, rq, g, 0);
                    due |= !gs->backup_ticket && gs->backup_hi < backup_due_hi(ctx, gs);
                    if (gs->opt_busy <= 0) continue;
                    for (int64_t hp = 0; hp < gs->n_opt_pages; hp++)
                        if (gs->opt_state[hp] == OPT_PENDING || gs->opt_backing[hp]) opt_advance(ctx, rq, g, hp, 0);
                }
                if (due) ctx->work_tmp[n_issue++] = slot;
                if (!due && !work_outstanding(ctx, rq)) {
                    ctx->work_on[slot] = 0;
                    continue;
                }
            }
            ctx->work[keep++] = slot;
        }
        ctx->n_work = keep;
        /* committed rows whose backup could not go out before (a failed copy, or the last one still in
           flight when the round ended): one copy for all of them; on failure they stay listed and due.
           Deferral: they stay listed for dhs_background (work_outstanding kept them) */
        if (bg_deferring(ctx)) return;
        if (n_issue > 0) (void)backup_span(ctx, NULL, ctx->work_tmp, n_issue, 0, ctx->arch.n_groups, 0);
        for (int32_t i = 0; i < n_issue; i++) req_due_update(ctx, &ctx->req[ctx->work_tmp[i]]);
        return;
    }
    for (int32_t i = 0; i < ctx->cfg.max_requests; i++) {
        request *rq = &ctx->req[i];
        if (!rq->in_use) continue;
        if (ctx->round_open && rq->in_round) {
            for (int32_t g = 0; force && g < ctx->arch.n_groups; g++) {
                grp_state *gs = &rq->g[g];
                if (gs->backup_ticket) be->ops->wait(be, gs->backup_ticket);
                for (int64_t hp = 0; hp < gs->n_opt_pages; hp++)
                    if (gs->opt_ticket[hp]) be->ops->wait(be, gs->opt_ticket[hp]);
            }
            continue;
        }
        for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
            grp_state *gs = &rq->g[g];
            backup_complete(ctx, rq, g, force);
            if (!force && !bg_deferring(ctx)) backup_issue(ctx, rq, g, 0); /* retries a failed issue */
            if (!opt_any_busy(gs)) continue;
            for (int64_t hp = 0; hp < gs->n_opt_pages; hp++)
                if (gs->opt_state[hp] == OPT_PENDING || gs->opt_backing[hp]) opt_advance(ctx, rq, g, hp, force);
        }
    }
}

void res_housekeeping(dhs_ctx *ctx)
{
    if (ctx->be->ops->tick) ctx->be->ops->tick(ctx->be);
    ctx->memo_on = !ctx->full_sweep;
    ctx->memo_t = 0;
    uint64_t t = hp_now();
    deferred_sweep(ctx, 0);
    hp_add(ctx, DHS_HP_SWEEP, t);
    t = hp_now();
    advance_all(ctx, 0);
    hp_add(ctx, DHS_HP_ADVANCE, t);
    ctx->memo_on = 0;
    t = hp_now();
    res_repopulate(ctx);
    hp_add(ctx, DHS_HP_REPOPULATE, t);
}

/* Host work for the device's step (docs/API.md "Background work"): completes the tail backups whose
   copies finished and issues, in one copy, the due rows (complete pages, backup_due_hi) of every listed
   request with no backup in flight, in or out of the open round. Inside a round this changes no location
   and no decision of the round: the rows it copies are committed rows at or above backed_hi >= tail_lo,
   which the round serves from the ring whatever host_valid and backed_hi say (host copies serve only rows
   below tail_lo, which stays put until the next dhs_round_begin); the device resolver's tables do not
   hold backed_hi or host_valid, and a new host chunk marks the request for the next publish (tables_dirty)
   as at the round end. The copy is ordered after the device work issued so far (the step: on CUDA the
   side stream waits for the compute stream), which never writes a committed row. Populations and reclaim
   backups stay with housekeeping. */
dhs_status dhs_background(dhs_ctx *ctx)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    const uint64_t t = hp_now();
    ctx->bg_called = 1;
    ctx->memo_on = 1;
    ctx->memo_t = 0;
    int32_t n_issue = 0;
    for (int32_t w = 0; w < ctx->n_work; w++) {
        const int32_t slot = ctx->work[w];
        request *rq = &ctx->req[slot];
        if (!rq->in_use || rq->importing) continue; /* housekeeping drops a closed one */
        int due = 0;
        for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
            grp_state *gs = &rq->g[g];
            backup_complete(ctx, rq, g, 0);
            due |= !gs->backup_ticket && gs->backup_hi < backup_due_hi(ctx, gs);
        }
        if (due) ctx->work_tmp[n_issue++] = slot;
    }
    ctx->memo_on = 0;
    dhs_status s = DHS_OK;
    if (n_issue > 0) s = backup_span(ctx, NULL, ctx->work_tmp, n_issue, 0, ctx->arch.n_groups, 0);
    if (s == DHS_OK)
        for (int32_t i = 0; i < n_issue; i++) req_due_update(ctx, &ctx->req[ctx->work_tmp[i]]);
    hp_add(ctx, DHS_HP_BACKGROUND, t);
    return s;
}

/* Within an open round the requests of the round only have their copies
   completed, not published (see advance_all): where a row is served does not
   change until the round ends. */
dhs_status dhs_sync(dhs_ctx *ctx)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (ctx->dres && ctx->round_open) return DHS_ERR_STATE; /* the round's tail window is published */
    advance_all(ctx, 1);
    deferred_sweep(ctx, 1);
    return ctx->dres ? dres_settle(ctx, 1) : DHS_OK; /* an early round end's wait and error word */
}

/* ------------------------------------------------------------- shared prefix */
/* Makes every committed row of the parent's prefix (rows < rows_g[g]) valid on
   host, so the rows it shares are never written again: completes the tail
   backups, publishes populations, finishes reclaim backups and copies the
   ready optional pages whose rows have no host copy yet (a device import
   defers them), waiting for each. Changes where nothing is served (the rows
   stay where they are); DHS_ERR_BACKEND when a copy fails. */
dhs_status share_back_up(dhs_ctx *ctx, request *rq, const int64_t *rows_g)
{
    const int32_t p = ctx->cfg.page_rows;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        backup_complete(ctx, rq, g, 1);
        if ((*gs->backed_hi) < (*gs->hist)) return DHS_ERR_BACKEND;
        for (int64_t hp = 0; hp < gs->n_opt_pages && hp * p < rows_g[g]; hp++) {
            if (gs->opt_state[hp] == OPT_PENDING || gs->opt_backing[hp]) opt_advance(ctx, rq, g, hp, 1);
            if (gs->opt_state[hp] != OPT_READY) continue;
            int need = 0;
            for (int32_t i = 0; i < p && !need; i++) need = !bit_get(gs->host_valid, hp * p + i);
            if (!need) continue;
            const int32_t nsrc = ctx->grp_nsrc[g];
            int64_t n = 0;
            if (!ctx->be->payload_free) {
                dhs_status s = pairs_reserve(ctx, (int64_t)p * nsrc);
                if (s != DHS_OK) return s;
                for (int32_t si = 0; si < nsrc; si++) {
                    src_state *ss = &gs->src[si];
                    s = host_ensure(ctx, rq, g, ss, (hp + 1) * p);
                    if (s != DHS_OK) return s;
                    for (int32_t i = 0; i < p; i++)
                        ctx->pairs[n++] = (dhs_copy_pair){pool_row(ctx, (int64_t)ss->opt_pages[hp] * p + i),
                                                          host_row(ctx, ss, hp * p + i)};
                }
            }
            dhs_ticket t = 0;
            dhs_status s = be_copy_async(ctx->be, ctx->pairs, n, ctx->row_stride, &t);
            if (s == DHS_OK && t) s = ctx->be->ops->wait(ctx->be, t);
            if (s != DHS_OK) return DHS_ERR_BACKEND;
            ctx->st.backup_rows += (uint64_t)p * nsrc;
            ctx->st.backup_bytes += (uint64_t)p * nsrc * ctx->row_stride;
            for (int32_t i = 0; i < p; i++) bit_set(gs->host_valid, hp * p + i);
        }
        for (int64_t row = 0; row < rows_g[g]; row++)
            if (!bit_get(gs->host_valid, row)) return DHS_ERR_BACKEND; /* cannot happen: I1 */
    }
    return DHS_OK;
}

/* Sets up the child after dhs_request_open: borrows the parent's complete host
   chunks of the prefix, pins its own rows from there, copies the boundary
   chunk's prefix rows (and an incomplete compressed row from the parent's
   ring), places the prefix as a host import would, then maps the parent's
   ready optional pages of the prefix. On failure the caller closes the child. */
dhs_status share_setup(dhs_ctx *ctx, request *pq, request *cq, int32_t slot, int64_t P)
{
    const int32_t p = ctx->cfg.page_rows;
    const size_t chunk = (size_t)HOST_CHUNK_ROWS * ctx->row_stride;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *pg = &pq->g[g], *cg = &cq->g[g];
        const int64_t m = ctx->grp_m[g], hist = P / m, rows_all = (P + m - 1) / m;
        const int64_t rows_exp = (cq->expected + m - 1) / m, rows_pin = rows_exp > rows_all ? rows_exp : rows_all;
        const int64_t F = ctx->be->payload_free ? 0 : hist / HOST_CHUNK_ROWS;
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
            src_state *ps = &pg->src[si], *cs = &cg->src[si];
            if (ps->n_host_chunks < F) return DHS_ERR_STATE; /* cannot happen: share_back_up made them */
            for (int64_t i = 0; i < F; i++) {
                cs->host_chunks[i] = ps->host_chunks[i];
                const int32_t k = ps->chunk_span[i] < 0 ? -ps->chunk_span[i] : ps->chunk_span[i];
                if (k) {
                    /* room was reserved before the admission; this guards the table if the parent's
                       spans changed since (it cannot: its chunks below the prefix were all there) */
                    dhs_status rs = sspan_reserve(ctx, 1);
                    if (rs != DHS_OK) return rs;
                    cs->chunk_span[i] = -k;
                    sspan_ref(ctx, ps->host_chunks[i], (size_t)k * chunk);
                }
                cs->n_host_chunks = i + 1;
            }
            dhs_status s = host_ensure(ctx, cq, g, cs, rows_pin);
            if (s != DHS_OK) return s;
            if (ctx->be->payload_free) continue;
            /* copy on write: the prefix rows of the boundary chunk, in one copy (one chunk on both sides) */
            if (hist > F * HOST_CHUNK_ROWS) {
                s = be_copy_sync(ctx->be, host_row(ctx, cs, F * HOST_CHUNK_ROWS), host_row(ctx, ps, F * HOST_CHUNK_ROWS),
                                 (size_t)(hist - F * HOST_CHUNK_ROWS) * ctx->row_stride);
                if (s != DHS_OK) return s;
            }
            /* the incomplete compressed row of a prefix that is all of the parent's positions lives only in
               the parent's ring: into the child's host rows, from where the placement fills its ring. Only
               when the parent's row counts as written (after an import; a round end leaves an incomplete
               row unwritten until the next block writes it): otherwise the child's is unwritten too (below) */
            if (rows_all > hist && (*ps->wr) > hist) {
                const int32_t src = ctx->grp_srcs[g][si];
                s = be_copy_sync(ctx->be, host_row(ctx, cs, hist), pool_row(ctx, tail_loc(ctx, ps, hist)),
                                 ctx->arch.sources[src].row_bytes);
                if (s != DHS_OK) return s;
            }
        }
        const int64_t nop = hist / p;
        if (nop == 0) continue;
        cg->n_opt_pages = cg->opt_cap = nop; /* before the checks: close frees what exists with this size */
        cg->opt_state = ctx_calloc(ctx, (size_t)nop, 1);
        cg->opt_backing = ctx_calloc(ctx, (size_t)nop, 1);
        cg->opt_ticket = ctx_calloc(ctx, (size_t)nop, sizeof(dhs_ticket));
        if (!cg->opt_state || !cg->opt_backing || !cg->opt_ticket) return DHS_ERR_NOMEM;
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
            cg->src[si].opt_pages = ctx_calloc(ctx, (size_t)nop, sizeof(int32_t));
            if (!cg->src[si].opt_pages) return DHS_ERR_NOMEM;
            for (int64_t i = 0; i < nop; i++) cg->src[si].opt_pages[i] = -1;
        }
    }
    /* the prefix rows are on host in the child's table: place them as a host import does */
    dhs_status s = import_place(ctx, cq, slot, P, NULL, 0, 1);
    if (s != DHS_OK) return s;
    /* an incomplete boundary row the parent has not written is not written in the child either: its first
       block writes it (the placement counted every row of the prefix as written) */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++)
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++)
            if ((*pq->g[g].src[si].wr) < (*cq->g[g].src[si].wr)) (*cq->g[g].src[si].wr) = (*cq->g[g].hist);
    /* the parent's ready optional pages of the prefix: one more holder each */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *pg = &pq->g[g], *cg = &cq->g[g];
        const int64_t n = cg->n_opt_pages < pg->n_opt_pages ? cg->n_opt_pages : pg->n_opt_pages;
        for (int64_t hp = 0; hp < n; hp++) {
            if (pg->opt_state[hp] != OPT_READY || pg->opt_backing[hp]) continue;
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                const int32_t pp = pg->src[si].opt_pages[hp];
                if (ctx->page_ref[pp]++ == 0) ctx->pages_shared++;
                ctx->page_refs++;
                ctx->page_owner[pp] = PAGE_OWNER_SHARED;
                cg->src[si].opt_pages[hp] = pp;
            }
            opt_set(cq, cg, hp, OPT_READY);
            cg->opt_held++;
        }
    }
    dres_publish_request(ctx, slot);
    return DHS_OK;
}

/* The rows after a shared prefix (dhs_request_import of a request opened by dhs_request_open_shared,
   before its first round): rows[src] holds rows floor(P / m) .. ceil(n / m) - 1 of each source. They go
   to the request's own host rows (the boundary chunk and later chunks are its own; the borrowed ones
   end at or below the prefix's complete rows), the optional-page table grows (the new complete pages
   are populated later from host, as after a host import) and the ring is filled from the host rows.
   Everything that can fail comes before anything the request serves changes, except the ring copy: if
   that fails the ring is refilled from the host rows of the prefix and an incomplete compressed row at
   the boundary counts as not written (the next round's block writes it), so the request is its prefix
   again and the import may be retried. */
static dhs_status import_extend(dhs_ctx *ctx, request *rq, int32_t slot, int64_t n, const void *const *rows)
{
    const dhs_config *c = &ctx->cfg;
    const int32_t p = c->page_rows;
    const int64_t P = rq->n;
    const int32_t ng = ctx->arch.n_groups;
    /* allocations first: host rows and the grown optional-page arrays (swapped in at the end); per group
       [g], per source [src] */
    int64_t nop_new[DHS_MAX_SOURCES];
    uint8_t *st_new[DHS_MAX_SOURCES] = {0}, *bk_new[DHS_MAX_SOURCES] = {0};
    dhs_ticket *tk_new[DHS_MAX_SOURCES] = {0};
    int32_t *pg_new[DHS_MAX_SOURCES] = {0};
    dhs_status s = DHS_OK;
    for (int32_t g = 0; g < ng; g++) {
        grp_state *gs = &rq->g[g];
        const int64_t m = ctx->grp_m[g];
        nop_new[g] = n / m / p;
        for (int32_t si = 0; si < ctx->grp_nsrc[g] && s == DHS_OK; si++)
            s = host_ensure(ctx, rq, g, &gs->src[si], (n + m - 1) / m);
        if (s != DHS_OK || nop_new[g] <= gs->n_opt_pages) continue; /* never fewer (housekeeping may have grown them) */
        st_new[g] = ctx_calloc(ctx, (size_t)nop_new[g], 1);
        bk_new[g] = ctx_calloc(ctx, (size_t)nop_new[g], 1);
        tk_new[g] = ctx_calloc(ctx, (size_t)nop_new[g], sizeof(dhs_ticket));
        if (!st_new[g] || !bk_new[g] || !tk_new[g]) s = DHS_ERR_NOMEM;
        for (int32_t si = 0; si < ctx->grp_nsrc[g] && s == DHS_OK; si++) {
            const int32_t src = ctx->grp_srcs[g][si];
            pg_new[src] = ctx_calloc(ctx, (size_t)nop_new[g], sizeof(int32_t));
            if (!pg_new[src]) s = DHS_ERR_NOMEM;
        }
    }
    /* the rows into the request's own host rows (no reader: not valid yet) */
    for (int32_t src = 0; src < ctx->arch.n_sources && s == DHS_OK && !ctx->be->payload_free; src++) {
        const dhs_source_desc *d = &ctx->arch.sources[src];
        const int64_t r0 = P / d->m, r1 = (n + d->m - 1) / d->m;
        src_state *ss = &rq->g[d->group].src[ctx->src_grp_idx[src]];
        for (int64_t row = r0; row < r1 && s == DHS_OK;) {
            /* one copy per run inside one host chunk when rows are dense, else row by row */
            int64_t end = d->row_bytes == ctx->row_stride ? (row / HOST_CHUNK_ROWS + 1) * HOST_CHUNK_ROWS : row + 1;
            if (end > r1) end = r1;
            s = be_copy_sync(ctx->be, host_row(ctx, ss, row), (const uint8_t *)rows[src] + (uint64_t)(row - r0) * d->row_bytes,
                             (size_t)(end - row) * d->row_bytes);
            row = end;
        }
    }
    /* the ring: rows from the new last partial page on, from the host rows just written */
    int ring_touched = 0;
    for (int32_t g = 0; g < ng && s == DHS_OK && !ctx->be->payload_free; g++) {
        const int64_t m = ctx->grp_m[g], rows_all = (n + m - 1) / m;
        for (int32_t si = 0; si < ctx->grp_nsrc[g] && s == DHS_OK; si++) {
            const uint32_t rb = ctx->arch.sources[ctx->grp_srcs[g][si]].row_bytes;
            src_state *ss = &rq->g[g].src[si];
            for (int64_t row = nop_new[g] * p; row < rows_all && s == DHS_OK; row++) {
                ring_touched = 1;
                s = be_copy_sync(ctx->be, pool_row(ctx, tail_loc(ctx, ss, row)), host_row(ctx, ss, row), rb);
            }
        }
    }
    if (s != DHS_OK) {
        /* the prefix's ring rows again, from their host rows (a row whose copy fails again is served from
           host: the ring starts after it); an incomplete row at the boundary counts as not written */
        for (int32_t g = 0; g < ng && ring_touched; g++) {
            grp_state *gs = &rq->g[g];
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                src_state *ss = &gs->src[si];
                const uint32_t rb = ctx->arch.sources[ctx->grp_srcs[g][si]].row_bytes;
                for (int64_t row = (*gs->tail_lo); row < (*gs->hist); row++)
                    if (be_copy_sync(ctx->be, pool_row(ctx, tail_loc(ctx, ss, row)), host_row(ctx, ss, row), rb) != DHS_OK)
                        (*gs->tail_lo) = row + 1;
                if ((*ss->wr) > (*gs->hist)) (*ss->wr) = (*gs->hist);
            }
        }
        for (int32_t g = 0; g < ng; g++) {
            ctx_free(ctx, st_new[g], (size_t)nop_new[g], 1);
            ctx_free(ctx, bk_new[g], (size_t)nop_new[g], 1);
            ctx_free(ctx, tk_new[g], (size_t)nop_new[g], sizeof(dhs_ticket));
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++)
                ctx_free(ctx, pg_new[ctx->grp_srcs[g][si]], (size_t)nop_new[g], sizeof(int32_t));
        }
        rq->tables_dirty = TABLES_ALL;
        return s;
    }
    for (int32_t g = 0; g < ng; g++) {
        grp_state *gs = &rq->g[g];
        const int64_t m = ctx->grp_m[g], hist = n / m, rows_all = (n + m - 1) / m;
        if (st_new[g]) {
            const int64_t old = gs->n_opt_pages;
            if (old) {
                memcpy(st_new[g], gs->opt_state, (size_t)old);
                memcpy(bk_new[g], gs->opt_backing, (size_t)old);
                memcpy(tk_new[g], gs->opt_ticket, sizeof(dhs_ticket) * (size_t)old);
            }
            ctx_free(ctx, gs->opt_state, (size_t)gs->opt_cap, 1);
            ctx_free(ctx, gs->opt_backing, (size_t)gs->opt_cap, 1);
            ctx_free(ctx, gs->opt_ticket, (size_t)gs->opt_cap, sizeof(dhs_ticket));
            gs->opt_state = st_new[g];
            gs->opt_backing = bk_new[g];
            gs->opt_ticket = tk_new[g];
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                src_state *ss = &gs->src[si];
                int32_t *np = pg_new[ctx->grp_srcs[g][si]];
                for (int64_t i = 0; i < nop_new[g]; i++) np[i] = i < old ? ss->opt_pages[i] : -1;
                ctx_free(ctx, ss->opt_pages, (size_t)gs->opt_cap, sizeof(int32_t));
                ss->opt_pages = np;
            }
            gs->n_opt_pages = gs->opt_cap = nop_new[g];
        }
        for (int64_t row = (*gs->hist); row < hist; row++) bit_set(gs->host_valid, row);
        (*gs->hist) = gs->import_rows = hist;
        (*gs->tail_lo) = nop_new[g] * p;
        (*gs->backed_hi) = gs->backup_hi = hist;
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) (*gs->src[si].wr) = rows_all;
    }
    rq->n = n;
    rq->tables_dirty = TABLES_ALL;
    req_due_update(ctx, rq);
    dres_publish_request(ctx, slot);
    return DHS_OK;
}
