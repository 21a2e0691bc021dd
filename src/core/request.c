/* request.c - request lifecycle: handles, open/close/positions, per-request
 * state allocation, tail writes (dhs_write_rows, dhs_tail_locations). */
#include <string.h>

#include "core/dres.h"
#include "core/internal.h"

/* ------------------------------------------------------------- requests */
/* Handles (slot, generation) are looked up by req_get in pool.c. */

static void grp_state_free(dhs_ctx *ctx, request *rq, int32_t g, dhs_ticket t)
{
    grp_state *gs = &rq->g[g];
    const dhs_config *c = &ctx->cfg;
    int32_t B = grp_hot_rows(ctx, g), p = c->page_rows;
    int64_t mr = ctx->grp_max_rows[g];
    if (gs->src) {
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
            src_state *ss = &gs->src[si];
            if (ss->hot_pages)
                for (int32_t i = 0; i < B / p; i++)
                    if (ss->hot_pages[i] >= 0) page_release_at(ctx, ss->hot_pages[i], t);
            if (ss->tail_pages)
                for (int32_t i = 0; i < c->tail_rows / p; i++)
                    if (ss->tail_pages[i] >= 0) page_release_at(ctx, ss->tail_pages[i], t);
            if (ss->opt_pages)
                for (int64_t i = 0; i < gs->n_opt_pages; i++)
                    if (ss->opt_pages[i] >= 0) page_release_at(ctx, ss->opt_pages[i], t);
            if (ss->host_chunks && ss->chunk_span)
                for (int64_t i = 0; i < ss->n_host_chunks; i++)
                    if (ss->chunk_span[i] != 0)
                        host_span_put(ctx, ss->host_chunks[i],
                                      (size_t)(ss->chunk_span[i] > 0 ? ss->chunk_span[i] : -ss->chunk_span[i]) *
                                          HOST_CHUNK_ROWS * ctx->row_stride);
            ctx_free(ctx, ss->hot_pages, (size_t)(B / p), sizeof(int32_t));
            ss->tail_pages = NULL; /* in request.tp, freed with it */
            ctx_free(ctx, ss->opt_pages, (size_t)gs->opt_cap, sizeof(int32_t));
            ctx_free(ctx, ss->host_chunks, (size_t)(mr / HOST_CHUNK_ROWS + 1), sizeof(uint8_t *));
            ctx_free(ctx, ss->chunk_span, (size_t)(mr / HOST_CHUNK_ROWS + 1), sizeof(int32_t));
        }
        ctx_free(ctx, gs->src, (size_t)ctx->grp_nsrc[g], sizeof(src_state));
    }
    if (gs->pol) ctx_free(ctx, gs->pol, ctx->pol->state_bytes(B), 1);
    ctx_free(ctx, gs->slot_of, (size_t)mr, sizeof(int32_t));
    ctx_free(ctx, gs->row_of, (size_t)B, sizeof(int64_t));
    ctx_free(ctx, gs->prot, (size_t)B, sizeof(uint32_t));
    ctx_free(ctx, gs->fill, (size_t)B, sizeof(uint32_t));
    ctx_free(ctx, gs->free_slots, (size_t)B, sizeof(int32_t));
    ctx_free(ctx, gs->host_valid, (size_t)(mr / 64 + 1), sizeof(uint64_t));
    ctx_free(ctx, gs->staged_row, (size_t)ctx->arena_rows_per_slot, sizeof(int64_t));
    ctx_free(ctx, gs->opt_state, (size_t)gs->opt_cap, 1);
    ctx_free(ctx, gs->opt_backing, (size_t)gs->opt_cap, 1);
    ctx_free(ctx, gs->opt_ticket, (size_t)gs->opt_cap, sizeof(dhs_ticket));
    memset(gs, 0, sizeof *gs);
}

/* Frees every allocation of a request (device pages after their readers). */
void request_free_all(dhs_ctx *ctx, request *rq)
{
    if (rq->g) {
        const dhs_ticket t = page_release_ticket(ctx); /* one for every page of the request */
        for (int32_t g = 0; g < ctx->arch.n_groups; g++) grp_state_free(ctx, rq, g, t);
        ctx_free(ctx, rq->g, (size_t)ctx->arch.n_groups, sizeof(grp_state));
    }
    ctx_free(ctx, rq->cm, cm_len(ctx), sizeof(int64_t));
    rq->cm = NULL;
    ctx_free(ctx, rq->tp, (size_t)ctx->arch.n_sources * (size_t)(ctx->cfg.tail_rows / ctx->cfg.page_rows), sizeof(int32_t));
    rq->tp = NULL;
    rq->g = NULL;
    rq->in_use = 0;
}

/* Allocates the metadata and required pages of a request. On failure frees
   what it took; the request stays unused. */
static dhs_status request_alloc(dhs_ctx *ctx, request *rq, int32_t slot)
{
    const dhs_config *c = &ctx->cfg;
    int32_t p = c->page_rows;
    rq->g = ctx_calloc(ctx, (size_t)ctx->arch.n_groups, sizeof(grp_state));
    if (!rq->g) return DHS_ERR_NOMEM;
    rq->in_use = 1; /* so request_free_all frees partial state */
    rq->cm = ctx_calloc(ctx, cm_len(ctx), sizeof(int64_t));
    if (!rq->cm) return DHS_ERR_NOMEM;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        rq->g[g].hist = &rq->cm[g];
        rq->g[g].tail_lo = &cm_tail_lo(ctx, rq)[g];
        rq->g[g].backed_hi = &cm_backed_hi(ctx, rq)[g];
    }
    const size_t tpp = (size_t)(c->tail_rows / p); /* tail pages per source */
    rq->tp = ctx_calloc(ctx, (size_t)ctx->arch.n_sources * tpp, sizeof(int32_t));
    if (!rq->tp) return DHS_ERR_NOMEM;
    for (size_t i = 0; i < (size_t)ctx->arch.n_sources * tpp; i++) rq->tp[i] = -1;
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        const int32_t B = grp_hot_rows(ctx, g);
        int64_t mr = ctx->grp_max_rows[g];
        gs->staged_row = ctx_calloc(ctx, (size_t)ctx->arena_rows_per_slot, sizeof(int64_t));
        if (!gs->staged_row) return DHS_ERR_NOMEM;
        gs->slot_of = ctx_calloc(ctx, (size_t)mr, sizeof(int32_t));
        gs->row_of = ctx_calloc(ctx, (size_t)B, sizeof(int64_t));
        gs->prot = ctx_calloc(ctx, (size_t)B, sizeof(uint32_t));
        gs->fill = ctx_calloc(ctx, (size_t)B, sizeof(uint32_t));
        gs->free_slots = ctx_calloc(ctx, (size_t)B, sizeof(int32_t));
        gs->host_valid = ctx_calloc(ctx, (size_t)(mr / 64 + 1), sizeof(uint64_t));
        gs->pol = ctx_calloc(ctx, ctx->pol->state_bytes(B), 1);
        gs->src = ctx_calloc(ctx, (size_t)ctx->grp_nsrc[g], sizeof(src_state));
        for (int32_t si = 0; gs->src && si < ctx->grp_nsrc[g]; si++)
            gs->src[si].wr = &cm_wr(ctx, rq)[ctx->grp_src0[g] + si];
        if (!gs->slot_of || !gs->row_of || !gs->prot || !gs->fill || !gs->free_slots || !gs->host_valid || !gs->pol ||
            !gs->src)
            return DHS_ERR_NOMEM;
        for (int64_t i = 0; i < mr; i++) gs->slot_of[i] = -1;
        for (int32_t q = 0; q < B; q++) {
            gs->row_of[q] = -1;
            gs->free_slots[q] = B - 1 - q;
        }
        gs->n_free = B;
        ctx->pol->init(gs->pol, B);
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
            src_state *ss = &gs->src[si];
            /* -1 as soon as the arrays exist: after a failure, request_free_all
               releases only pages this request took (calloc's 0 is a real page) */
            ss->hot_pages = ctx_calloc(ctx, (size_t)(B / p), sizeof(int32_t));
            for (int32_t i = 0; ss->hot_pages && i < B / p; i++) ss->hot_pages[i] = -1;
            ss->tail_pages = rq->tp + (size_t)(ctx->grp_src0[g] + si) * tpp; /* -1 already */
            ss->host_chunks = ctx_calloc(ctx, (size_t)(mr / HOST_CHUNK_ROWS + 1), sizeof(uint8_t *));
            ss->chunk_span = ctx_calloc(ctx, (size_t)(mr / HOST_CHUNK_ROWS + 1), sizeof(int32_t));
            if (!ss->hot_pages || !ss->tail_pages || !ss->host_chunks || !ss->chunk_span) return DHS_ERR_NOMEM;
            for (int32_t i = 0; i < B / p; i++)
                if ((ss->hot_pages[i] = page_alloc(ctx, PAGE_HOT, slot)) < 0) return DHS_ERR_DEVICE_NOMEM;
            for (int32_t i = 0; i < c->tail_rows / p; i++)
                if ((ss->tail_pages[i] = page_alloc(ctx, PAGE_TAIL, slot)) < 0) return DHS_ERR_DEVICE_NOMEM;
        }
    }
    return DHS_OK;
}

dhs_status dhs_request_open(dhs_ctx *ctx, int64_t expected_positions, dhs_req *out)
{
    if (!ctx || !out) return DHS_ERR_INVALID_ARG;
    if (expected_positions < 0 || expected_positions > ctx->cfg.max_rows) return DHS_ERR_ROW_RANGE;
    int32_t slot = -1;
    for (int32_t i = 0; i < ctx->cfg.max_requests; i++)
        if (!ctx->req[i].in_use) { slot = i; break; }
    if (slot < 0) { ctx->st.waits++; return DHS_WAIT; }
    request *rq = &ctx->req[slot];
    if (ctx->req_pages_per_request + ctx->pages_res > ctx->n_pages) return DHS_ERR_TOO_LARGE;
    dhs_status s = res_admit(ctx, rq); /* makes room (reclaim) or says wait */
    if (s != DHS_OK) {
        if (s == DHS_WAIT) ctx->st.waits++;
        return s;
    }
    uint32_t gen = rq->gen;
    memset(rq, 0, sizeof *rq);
    rq->gen = gen + 1;
    if (rq->gen == 0) rq->gen = 1;
    s = request_alloc(ctx, rq, slot);
    rq->tables_dirty = TABLES_ALL; /* the slot's mirrored tables hold the previous request's */
    if (s == DHS_OK && ctx->dres) s = dres_request_reset(ctx, slot); /* device hot state of the slot */
    if (s != DHS_OK) {
        request_free_all(ctx, rq);
        res_drain(ctx); /* pages taken back at once: nothing read them */
        return s;
    }
    rq->expected = expected_positions;
    rq->admit_seq = ++ctx->admit_seq;
    ctx->n_open++;
    ctx->st.admissions++;
    out->id = (uint32_t)slot;
    out->gen = rq->gen;
    return DHS_OK;
}

dhs_status dhs_request_positions(const dhs_ctx *ctx, dhs_req r, int64_t *n)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    if (!n) return DHS_ERR_INVALID_ARG;
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    *n = rq->n;
    return DHS_OK;
}

dhs_status dhs_request_close(dhs_ctx *ctx, dhs_req r)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    if (rq->in_round && ctx->round_open) return DHS_ERR_STATE;
    /* copies in flight write into this request's host rows: finish them */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        if (gs->backup_ticket) ctx->be->ops->wait(ctx->be, gs->backup_ticket);
        for (int64_t i = 0; gs->opt_ticket && i < gs->n_opt_pages; i++) /* NULL: a set-up that failed */
            if (gs->opt_ticket[i]) ctx->be->ops->wait(ctx->be, gs->opt_ticket[i]);
    }
    uint32_t gen = rq->gen;
    request_free_all(ctx, rq);
    if (ctx->dres) dres_request_reset(ctx, (int32_t)r.id); /* nothing of it stays on the device */
    rq->gen = gen;
    ctx->n_open--;
    return DHS_OK;
}

/* ------------------------------------------------------------- shared prefix */
/* The checks, the admission and the close of a failed set-up; what is shared and copied is
   residency.c's (share_back_up, share_setup). */
dhs_status dhs_request_open_shared(dhs_ctx *ctx, dhs_req parent, int64_t prefix_positions, int64_t expected_positions,
                                   dhs_req *out)
{
    if (!ctx || !out) return DHS_ERR_INVALID_ARG;
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *pq = req_get(ctx, parent, &err);
    if (!pq) return err;
    if (pq->importing || (ctx->round_open && pq->in_round)) return DHS_ERR_STATE;
    const int64_t P = prefix_positions;
    if (P < 0 || P > pq->n || expected_positions < 0 || expected_positions > ctx->cfg.max_rows) return DHS_ERR_ROW_RANGE;
    int64_t rows_g[DHS_MAX_SOURCES];
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        if (P % ctx->grp_m[g] && P != pq->n) return DHS_ERR_ROW_RANGE; /* a compressed row the parent rewrote */
        rows_g[g] = P / ctx->grp_m[g];
    }
    /* the table entries the child adds, reserved first: sharing allocates nothing after the open */
    int64_t spans = 0;
    for (int32_t g = 0; g < ctx->arch.n_groups && !ctx->be->payload_free; g++)
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++)
            for (int64_t i = 0; i < rows_g[g] / HOST_CHUNK_ROWS && i < pq->g[g].src[si].n_host_chunks; i++)
                spans += pq->g[g].src[si].chunk_span[i] != 0;
    dhs_status s = sspan_reserve(ctx, spans);
    dhs_req c;
    /* admission first: a DHS_WAIT changes nothing, not even the parent's host copies */
    if (s == DHS_OK) s = dhs_request_open(ctx, expected_positions > P ? expected_positions : P, &c);
    if (s != DHS_OK) {
        sspan_trim(ctx);
        return s;
    }
    request *cq = &ctx->req[c.id];
    s = share_back_up(ctx, pq, rows_g);
    if (s == DHS_OK) s = share_setup(ctx, pq, cq, (int32_t)c.id, P);
    if (s != DHS_OK) {
        (void)dhs_request_close(ctx, c);
        res_drain(ctx); /* nothing read the child's pages */
        sspan_trim(ctx);
        return s;
    }
    cq->shared_n = P;
    *out = c;
    return DHS_OK;
}


/* ------------------------------------------------------------- tail writes */
dhs_status block_rows_check(const dhs_ctx *ctx, const request *rq, int32_t source, int64_t first_row, int32_t n_rows)
{
    const int32_t g = ctx->arch.sources[source].group;
    const grp_state *gs = &rq->g[g];
    const int64_t m = ctx->grp_m[g];
    const int64_t hi = (rq->n + rq->K + m - 1) / m; /* rows touched by the block */
    /* compared without forming first_row + n_rows: any int64 first_row and
       int32 n_rows are checked without overflow (hist_rows >= 0, hi small) */
    if (n_rows < 0 || first_row < (*gs->hist) || first_row > hi || n_rows > hi - first_row) return DHS_ERR_ROW_RANGE;
    /* no gap: written_hi is a high-water mark, so a range starting past the
       first unwritten row would make the rows before it count as written
       (resolvable, committed) with bytes nobody wrote */
    if (first_row > *gs->src[ctx->src_grp_idx[source]].wr) return DHS_ERR_ROW_RANGE;
    /* The tail ring holds rows [tail_lo, tail_lo + tail_rows): rows awaiting
       their host copy and rows handed out as tail locations this round are
       all >= tail_lo, which stays put for the whole round. dhs_round_begin
       made the block's end fit (it waits for the backup when needed), so
       this never fires; it guards the ring, and never moves tail_lo. Both
       sides are small here (first_row <= hi). */
    if (first_row + n_rows - (*gs->tail_lo) > ctx->cfg.tail_rows) return DHS_ERR_STATE;
    return DHS_OK;
}

dhs_status dhs_write_rows(dhs_ctx *ctx, dhs_req r, int32_t source, int64_t first_row, int32_t n_rows, const void *data)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    if (source < 0 || source >= ctx->arch.n_sources) return DHS_ERR_UNKNOWN_SOURCE;
    if (!ctx->round_open || !rq->in_round) return DHS_ERR_NOT_IN_ROUND;
    if (n_rows < 0) return DHS_ERR_INVALID_ARG;
    if (!ctx->be->payload_free) {
        if (!data && n_rows > 0) return DHS_ERR_INVALID_ARG;
        if ((uintptr_t)data % DHS_ALIGN) return DHS_ERR_MISALIGNED;
    }
    dhs_status bs = block_rows_check(ctx, rq, source, first_row, n_rows);
    if (bs != DHS_OK) return bs;
    int32_t g = ctx->arch.sources[source].group;
    grp_state *gs = &rq->g[g];
    const dhs_config *c = &ctx->cfg;
    int32_t si = ctx->src_grp_idx[source];
    uint32_t rb = ctx->arch.sources[source].row_bytes;
    /* one copy per run of rows inside one tail page (dense rows) */
    for (int32_t i = 0; i < n_rows && !ctx->be->payload_free;) {
        int64_t row = first_row + i;
        int32_t t = (int32_t)(row % c->tail_rows), off = t % c->page_rows;
        int32_t run = rb == ctx->row_stride ? c->page_rows - off : 1;
        if (run > n_rows - i) run = n_rows - i;
        int64_t loc = (int64_t)gs->src[si].tail_pages[t / c->page_rows] * c->page_rows + off;
        dhs_status s = be_copy_sync(ctx->be, pool_row(ctx, loc), (const uint8_t *)data + (uint64_t)i * rb,
                                               (size_t)run * rb);
        if (s != DHS_OK) return s;
        i += run;
    }
    if (first_row + n_rows > (*gs->src[si].wr)) (*gs->src[si].wr) = first_row + n_rows;
    return DHS_OK;
}

/* Where the current block's rows go, so the engine's own KV-write kernel writes them in place (either
   resolver mode): the rows dhs_write_rows would take, counted as written. */
dhs_status dhs_tail_locations(dhs_ctx *ctx, dhs_req r, int32_t source, int64_t first_row, int32_t n_rows, int32_t *loc)
{
    dhs_status err;
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    if (source < 0 || source >= ctx->arch.n_sources) return DHS_ERR_UNKNOWN_SOURCE;
    if (!ctx->round_open || !rq->in_round) return DHS_ERR_NOT_IN_ROUND;
    if (n_rows < 0 || (n_rows > 0 && !loc)) return DHS_ERR_INVALID_ARG;
    if ((uintptr_t)loc % sizeof(int32_t)) return DHS_ERR_MISALIGNED;
    /* the rows dhs_write_rows would take: in the block, no gap before first_row, room in the ring */
    dhs_status bs = block_rows_check(ctx, rq, source, first_row, n_rows);
    if (bs != DHS_OK) return bs;
    const int32_t g = ctx->arch.sources[source].group;
    grp_state *gs = &rq->g[g];
    const dhs_config *c = &ctx->cfg;
    const src_state *ss = &gs->src[ctx->src_grp_idx[source]];
    for (int32_t i = 0; i < n_rows; i++) loc[i] = (int32_t)tail_row_loc(ss->tail_pages, c->tail_rows, c->page_rows, first_row + i);
    src_state *sw = &gs->src[ctx->src_grp_idx[source]];
    if (first_row + n_rows > (*sw->wr)) (*sw->wr) = first_row + n_rows;
    return DHS_OK;
}

/* The checks of the round calls below, for every request and source before anything is written: the
   block of each request and group fits req_stride, and the checks of dhs_tail_locations for its rows.
   For rows [hist, hi) of the block those reduce to: no source's written mark below hist (no gap) and
   the ring holding the block (block_rows_check); the range checks hold by construction. They read each
   request's arrays in order (request.cm: committed rows, then the written marks in group order). */
static dhs_status round_blocks_check(const dhs_ctx *ctx, int32_t req_stride, int64_t src_stride, const void *loc)
{
    const int32_t nr = ctx->n_round, ns = ctx->arch.n_sources, G = ctx->arch.n_groups;
    const int64_t T = ctx->cfg.tail_rows;
    if (req_stride < 0 || src_stride < 0 || (nr > 0 && !loc)) return DHS_ERR_INVALID_ARG;
    if ((uintptr_t)loc % sizeof(int32_t)) return DHS_ERR_MISALIGNED;
    if (nr > 0 && src_stride < (int64_t)nr * req_stride && ns > 1) return DHS_ERR_INVALID_ARG;
    for (int32_t i = 0; i < nr; i++) {
        const request *rq = &ctx->req[ctx->round_reqs[i]];
        const int64_t *hist = rq->cm, *wr = cm_wr(ctx, rq), *tail_lo = cm_tail_lo(ctx, rq);
        for (int32_t g = 0, k = 0; g < G; g++) {
            const int64_t first = hist[g], hi = grp_rows_ceil(ctx, g, rq->n + rq->K);
            if (hi - first > req_stride) return DHS_ERR_INVALID_ARG;
            for (const int32_t end = k + ctx->grp_nsrc[g]; k < end; k++)
                if (first > wr[k]) return DHS_ERR_ROW_RANGE;
            if (hi - tail_lo[g] > T) return DHS_ERR_STATE; /* never: dhs_round_begin made room */
        }
    }
    return DHS_OK;
}

/* The round's blocks count as written: each source's mark in request.cm (sources in group order) */
static void round_blocks_written(dhs_ctx *ctx)
{
    const int32_t G = ctx->arch.n_groups;
    for (int32_t i = 0; i < ctx->n_round; i++) {
        request *rq = &ctx->req[ctx->round_reqs[i]];
        int64_t *wr = cm_wr(ctx, rq);
        for (int32_t g = 0, k = 0; g < G; g++) {
            const int64_t hi = grp_rows_ceil(ctx, g, rq->n + rq->K);
            for (const int32_t end = k + ctx->grp_nsrc[g]; k < end; k++)
                if (hi > wr[k]) wr[k] = hi;
        }
    }
}

/* Every request of the open round and every source in one call: the block's rows of request i
   (dhs_round_begin's order) for source s are rows [*hist, ceil((n + K) / m)) of its group, at
   loc[s * src_stride + i * req_stride + j]. Checked first for every request and source (the
   same checks as dhs_tail_locations), so an error writes nothing and marks nothing. The loop
   walks each request's arrays in order: request.cm (committed / written rows) and request.tp
   (tail pages) are one array each per request. */
dhs_status dhs_round_tail_locations(dhs_ctx *ctx, int32_t req_stride, int64_t src_stride, int32_t *loc)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (!ctx->round_open) return DHS_ERR_NOT_IN_ROUND;
    dhs_status s = round_blocks_check(ctx, req_stride, src_stride, loc);
    if (s != DHS_OK) return s;
    const int32_t nr = ctx->n_round, G = ctx->arch.n_groups;
    const int32_t p = ctx->cfg.page_rows, T = ctx->cfg.tail_rows;
    for (int32_t i = 0; i < nr; i++) {
        request *rq = &ctx->req[ctx->round_reqs[i]];
        for (int32_t g = 0; g < G; g++) {
            grp_state *gs = &rq->g[g];
            const int64_t first = *gs->hist, hi = grp_rows_ceil(ctx, g, rq->n + rq->K);
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                const int32_t src = ctx->grp_srcs[g][si];
                const src_state *ss = &gs->src[si];
                int32_t *out = loc + (int64_t)src * src_stride + (int64_t)i * req_stride;
                for (int64_t row = first; row < hi; row++) out[row - first] = (int32_t)tail_row_loc(ss->tail_pages, T, p, row);
            }
        }
    }
    round_blocks_written(ctx);
    return DHS_OK;
}

/* The pages of request i's block in group g: ceil(ceil((n + K) / m) / p), as dres_page_count */
static int64_t round_pages(const dhs_ctx *ctx, const request *rq, int32_t g)
{
    const int64_t p = ctx->cfg.page_rows;
    return (grp_rows_ceil(ctx, g, rq->n + rq->K) + p - 1) / p;
}

/* The round's page tables written by the device from the tables the round begin published (the same ones
   the direct resolve reads); the host checks the strides only: O(requests x groups), nothing marked */
dhs_status dhs_round_page_tables_device(dhs_ctx *ctx, int32_t page_stride, int64_t src_stride, int32_t *tab_dev)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (!ctx->round_open) return DHS_ERR_NOT_IN_ROUND;
    if (!ctx->dres) return DHS_ERR_STATE;
    const int32_t nr = ctx->n_round;
    if (page_stride < 0 || src_stride < 0 || (nr > 0 && !tab_dev)) return DHS_ERR_INVALID_ARG;
    if ((uintptr_t)tab_dev % sizeof(int32_t)) return DHS_ERR_MISALIGNED;
    if (nr > 0 && src_stride < (int64_t)nr * page_stride && ctx->arch.n_sources > 1) return DHS_ERR_INVALID_ARG;
    for (int32_t i = 0; i < nr; i++)
        for (int32_t g = 0; g < ctx->arch.n_groups; g++)
            if (round_pages(ctx, &ctx->req[ctx->round_reqs[i]], g) > page_stride) return DHS_ERR_INVALID_ARG;
    return nr == 0 ? DHS_OK : dres_page_tables(ctx, page_stride, src_stride, tab_dev);
}

/* The same locations written by the device (one launch on the compute stream from the tables the round
   begin published: the round descriptor's committed rows and each request's tail pages), so the host
   touches only each request's written marks. Device resolver only. */
dhs_status dhs_round_tail_locations_device(dhs_ctx *ctx, int32_t req_stride, int64_t src_stride, int32_t *loc_dev)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (!ctx->round_open) return DHS_ERR_NOT_IN_ROUND;
    if (!ctx->dres) return DHS_ERR_STATE;
    dhs_status s = round_blocks_check(ctx, req_stride, src_stride, loc_dev);
    if (s != DHS_OK || ctx->n_round == 0) return s;
    if ((s = dres_tail_locations(ctx, req_stride, src_stride, loc_dev)) != DHS_OK) return s;
    round_blocks_written(ctx);
    return DHS_OK;
}
