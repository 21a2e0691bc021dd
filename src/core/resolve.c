/* resolve.c - rounds and the fused resolver (DESIGN §4, §5).
 *
 * One call resolves a group's selections for a batch of requests:
 *   1. validate every entry of every item (nothing changes on error);
 *   2. plan: per entry a logical location — tail ring index, optional page
 *      row, hot slot or staging index — via O(1) lookups (reverse index
 *      slot_of[row]); distinct misses of the request's union get a victim
 *      slot from the policy (amortised O(1)) or a staging row when every slot
 *      is protected this round;
 *   3. one gather of all misses of all items and all sources of the group;
 *   4. replay the plan per source: logical -> that source's physical rows.
 */
#include <assert.h>
#include <string.h>

#include "core/dres.h"
#include "core/internal.h"


enum { C_TAIL = 1, C_OPT = 2, C_HOT = 3, C_STAGE = 4, C_MISS = 5 };
#define CODE(kind, v) (((int64_t)(kind) << 48) | (int64_t)(v))
#define CODE_KIND(c) ((int)((c) >> 48))
#define CODE_VAL(c) ((c) & (((int64_t)1 << 48) - 1))
#define PROMOTING UINT32_MAX /* fill mark of slots being promoted from staging */

/* Marks slot q selected in round `epoch`, counting protected slots so a miss
   can tell in O(1) that no victim exists. */
static inline void protect(grp_state *gs, int32_t q, uint32_t epoch)
{
    if (gs->prot_epoch != epoch) {
        gs->prot_epoch = epoch;
        gs->n_prot = 0;
    }
    if (gs->prot[q] != epoch) {
        gs->prot[q] = epoch;
        gs->n_prot++;
    }
}

/* Clears the protection of slot q (a slot emptied or repurposed in the round). */
static inline void unprotect(grp_state *gs, int32_t q, uint32_t epoch)
{
    if (gs->prot[q] == epoch && gs->prot_epoch == epoch) gs->n_prot--;
    gs->prot[q] = 0;
}

/* ------------------------------------------------------------- rounds */
static dhs_status round_begin(dhs_ctx *ctx, int32_t n, const dhs_req *reqs, const int32_t *K)
{
    if (ctx->round_open) return DHS_ERR_STATE;
    if (n < 0 || n > ctx->cfg.max_requests || (n > 0 && (!reqs || !K))) return DHS_ERR_INVALID_ARG;
    /* a request named twice: a stamp per slot instead of comparing every pair (O(n^2): 32,640 pairs at
       n = 256) */
    if (++ctx->named_stamp == 0) { /* wrapped: no slot may keep an old stamp */
        memset(ctx->named, 0, sizeof(uint32_t) * (size_t)ctx->cfg.max_requests);
        ctx->named_stamp = 1;
    }
    for (int32_t i = 0; i < n; i++) {
        dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
        request *rq = req_get(ctx, reqs[i], &err);
        if (!rq) return err;
        if (rq->importing) return DHS_ERR_STATE; /* its rows are half received: nothing of it is visible */
        if (K[i] > ctx->cfg.spec_width) return DHS_ERR_TOO_MANY_QUERIES;
        if (K[i] < 1) return DHS_ERR_INVALID_ARG;
        if (rq->n + K[i] > ctx->cfg.max_rows) return DHS_ERR_ROW_RANGE;
        if (ctx->named[reqs[i].id] == ctx->named_stamp) return DHS_ERR_INVALID_ARG;
        ctx->named[reqs[i].id] = ctx->named_stamp;
    }
    uint64_t t = hp_now();
    if (ctx->dres) { /* after an early round end: its wait and its error word, before anything changes */
        dhs_status ds = dres_settle(ctx, 0);
        hp_add(ctx, DHS_HP_DEVICE, t);
        if (ds != DHS_OK) return ds;
        t = hp_now();
    }
    res_housekeeping(ctx);
    hp_add(ctx, DHS_HP_HOUSEKEEPING, t);
    t = hp_now();
    /* The tail ring of a request in the round must hold, for the whole
       round, every row from tail_lo to the end of the block: rows the round
       may hand out as tail locations, rows still being backed up and the
       backed-up rows the ring still serves. tail_lo does not move until the
       round ends (no write, sync or backup completion inside the round moves
       it), so this is the only place that makes room: tail_room moves
       tail_lo over backed-up rows, waiting for the tail backup when the ring
       is short (backup latency above what tail_rows absorbs; see docs/API.md,
       sizing). A failed backup copy is retried once; only a second failure
       leaves the ring short: nothing of the round happened, the call can be
       retried. Requests before i may have had tail_lo moved: that changes no
       row's content, only where the next round serves it from. */
    for (int32_t i = 0; i < n; i++) {
        request *rq = &ctx->req[reqs[i].id];
        for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
            dhs_status s = tail_room(ctx, rq, g, grp_rows_ceil(ctx, g, rq->n + K[i]));
            if (s != DHS_OK) return s;
        }
    }
    hp_add(ctx, DHS_HP_TAIL_ROOM, t);
    ctx->epoch++;
    ctx->n_round = n;
    for (int32_t i = 0; i < n; i++) {
        request *rq = &ctx->req[reqs[i].id];
        rq->in_round = 1;
        rq->K = K[i];
        ctx->round_reqs[i] = (int32_t)reqs[i].id;
        /* every group's n_staged is 0 here (released at the last round end; dhs_check_invariants): not
           rewritten, so the round begin touches no group state of a request whose ring has room */
    }
    if (ctx->dres) { /* publishes the round; on failure the round stays closed */
        t = hp_now();
        dhs_status ds = dres_round_begin(ctx);
        hp_add(ctx, DHS_HP_PUBLISH, t);
        if (ds != DHS_OK) return ds;
    }
    ctx->round_open = 1;
    return DHS_OK;
}

dhs_status dhs_round_begin(dhs_ctx *ctx, int32_t n, const dhs_req *reqs, const int32_t *K)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    const uint64_t t = hp_now();
    dhs_status s = round_begin(ctx, n, reqs, K);
    hp_add(ctx, DHS_HP_BEGIN, t);
    return s;
}

/* Takes grp_nsrc[g] free arenas for group g; -1 when none are free. An
   arena released by an earlier layer group is reused once that group's
   readers completed: the first pass takes arenas already quiet, the second
   waits for the readers (on one compute stream they precede this call). */
static int32_t arena_acquire(dhs_ctx *ctx, int32_t g)
{
    int32_t need = ctx->grp_nsrc[g];
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t a = 0; a + need <= ctx->n_arenas; a++) {
            int ok = 1;
            for (int32_t i = a; i < a + need && ok; i++) {
                arena *ar = &ctx->arenas[i];
                if (ar->busy) ok = 0;
                else if (pass == 0 && ar->readers && !ctx->be->ops->done(ctx->be, ar->readers)) ok = 0;
            }
            if (!ok) continue;
            for (int32_t i = a; i < a + need; i++) {
                arena *ar = &ctx->arenas[i];
                if (ar->readers && ctx->be->ops->wait(ctx->be, ar->readers) != DHS_OK) return -1;
                ar->busy = 1;
                ar->readers = 0;
            }
            return a;
        }
    }
    return -1;
}

/* Gives the group's arenas back; the next group may use them once every
   reader issued so far completed. */
static void arenas_release(dhs_ctx *ctx, int32_t g)
{
    dhs_ticket t = 0;
    ctx->be->ops->record_readers(ctx->be, &t);
    for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
        ctx->arenas[ctx->grp_arena[g] + si].busy = 0;
        ctx->arenas[ctx->grp_arena[g] + si].readers = t;
    }
    ctx->grp_arena[g] = -1;
}

/* Staged rows of the group are promoted into hot slots (copied back to stable
   hot addresses) and the group's arenas are released after their readers. */
static dhs_status group_release_staging(dhs_ctx *ctx, int32_t g)
{
    int32_t a0 = ctx->grp_arena[g];
    if (a0 < 0) return DHS_OK;
    const dhs_config *c = &ctx->cfg;
    int32_t p = c->page_rows, B = grp_hot_rows(ctx, g), nsrc = ctx->grp_nsrc[g];
    /* promotion: staged rows become hot rows now that the round's protection
       is over; victims are chosen by the policy as for a miss */
    /* a protection mark no round uses for 2^31 rounds */
    const uint32_t promo = ctx->epoch ^ 0x80000000u;
    int64_t npairs = 0, tot = 0;
    for (int32_t i = 0; i < ctx->n_round; i++) tot += (int64_t)ctx->req[ctx->round_reqs[i]].g[g].n_staged * nsrc;
    if (!ctx->be->payload_free && pairs_reserve(ctx, tot) != DHS_OK) {
        /* no room to list the copies: drop the staged rows instead of promoting
           them (they keep their host copies) and release the arenas, so no
           staged mapping outlives the round */
        for (int32_t i = 0; i < ctx->n_round; i++) {
            grp_state *gs = &ctx->req[ctx->round_reqs[i]].g[g];
            for (int32_t sidx = 0; sidx < gs->n_staged; sidx++) gs->slot_of[gs->staged_row[sidx]] = -1;
            gs->n_staged = 0;
        }
        arenas_release(ctx, g);
        return DHS_ERR_NOMEM;
    }
    for (int32_t i = 0; i < ctx->n_round; i++) {
        request *rq = &ctx->req[ctx->round_reqs[i]];
        grp_state *gs = &rq->g[g];
        /* the most recent B staged rows are promoted, each into its own slot */
        for (int32_t sidx = 0; sidx < gs->n_staged; sidx++) {
            int64_t row = gs->staged_row[sidx];
            gs->slot_of[row] = -1;
            if (sidx < gs->n_staged - B) continue;
            int32_t q;
            if (gs->n_free > 0) {
                q = gs->free_slots[--gs->n_free];
            } else {
                /* only slots promoted in this pass are protected: two promotions
                   must never share a destination in one gather */
                q = ctx->pol->victim(gs->pol, gs->prot, promo);
                if (q < 0) continue;
                /* debug builds: the victim's row must map back to it */
                assert(gs->row_of[q] >= 0 && gs->slot_of[gs->row_of[q]] == q);
                gs->slot_of[gs->row_of[q]] = -1;
                ctx->pol->remove(gs->pol, q);
            }
            unprotect(gs, q, ctx->epoch);
            gs->row_of[q] = row;
            gs->slot_of[row] = q;
            gs->prot[q] = promo;
            gs->fill[q] = PROMOTING;
            ctx->pol->insert(gs->pol, q,
                             ctx->pol->key ? ctx->pol->key(ctx->pol_user, (uint32_t)ctx->round_reqs[i], g, row) : ctx->clock++);
            if (ctx->be->payload_free) continue;
            for (int32_t si = 0; si < nsrc; si++) {
                arena *ar = &ctx->arenas[a0 + si];
                int64_t sloc = (int64_t)ar->first_page * p + (int64_t)ctx->round_reqs[i] * ctx->arena_rows_per_slot + sidx;
                int64_t hloc = (int64_t)gs->src[si].hot_pages[q / p] * p + q % p;
                ctx->pairs[npairs++] = (dhs_copy_pair){pool_row(ctx, sloc), pool_row(ctx, hloc)};
            }
        }
        gs->n_staged = 0;
    }
    dhs_status s = be_gather(ctx->be, ctx->pairs, npairs, ctx->row_stride);
    /* on failure the promoted slots hold stale bytes: empty them (the rows
       keep their host copies); the arenas are released either way */
    for (int32_t i = 0; i < ctx->n_round; i++) {
        grp_state *gs = &ctx->req[ctx->round_reqs[i]].g[g];
        for (int32_t q = 0; q < B; q++) {
            if (gs->fill[q] != PROMOTING) continue;
            gs->fill[q] = 0;
            if (s == DHS_OK) continue;
            gs->slot_of[gs->row_of[q]] = -1;
            gs->row_of[q] = -1;
            ctx->pol->remove(gs->pol, q);
            gs->free_slots[gs->n_free++] = q;
        }
    }
    arenas_release(ctx, g);
    return s;
}

dhs_status dhs_group_done(dhs_ctx *ctx, int32_t group)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (group < 0 || group >= ctx->arch.n_groups) return DHS_ERR_UNKNOWN_SOURCE;
    if (!ctx->round_open || ctx->tp_n) return DHS_ERR_STATE;
    if (ctx->dres) return dres_group_done(ctx, group);
    return group_release_staging(ctx, group);
}

dhs_status dhs_round_may_miss(const dhs_ctx *ctx, int32_t group, int *may_miss)
{
    if (!ctx || !may_miss) return DHS_ERR_INVALID_ARG;
    if (group < -1 || group >= ctx->arch.n_groups) return DHS_ERR_UNKNOWN_SOURCE;
    if (!ctx->round_open) return DHS_ERR_NOT_IN_ROUND;
    *may_miss = dres_may_miss(ctx, group);
    return DHS_OK;
}

static dhs_status round_end(dhs_ctx *ctx, const int32_t *accepted, int wait)
{
    if (!ctx->round_open || ctx->tp_n) return DHS_ERR_STATE;
    if (ctx->n_round > 0 && !accepted) return DHS_ERR_INVALID_ARG;
    const int32_t G = ctx->arch.n_groups;
    for (int32_t i = 0; i < ctx->n_round; i++) {
        request *rq = &ctx->req[ctx->round_reqs[i]];
        if (accepted[i] < 0 || accepted[i] > rq->K - 1) return DHS_ERR_ACCEPTED_RANGE;
        const int64_t n2 = rq->n + accepted[i] + 1;
        /* the request's written marks are one array (request.cm, sources in group order): a few cache
           lines per request, not one per group and source */
        const int64_t *wr = cm_wr(ctx, rq);
        for (int32_t g = 0, k = 0; g < G; g++) {
            const int64_t h2 = grp_rows_floor(ctx, g, n2);
            for (const int32_t end = k + ctx->grp_nsrc[g]; k < end; k++)
                if (wr[k] < h2) return DHS_ERR_STATE; /* committed rows never written */
        }
    }
    if (ctx->dres) { /* promotion, the round's one sync, the device error word */
        const uint64_t t = hp_now();
        dhs_status ds = dres_round_end(ctx, wait);
        hp_add(ctx, DHS_HP_DEVICE, t);
        if (ds != DHS_OK) return ds;
    }
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) group_release_staging(ctx, g);
    /* the commit: each group's committed rows and each source's written mark (rows past the accepted
       ones no longer count as written), in request.cm only */
    for (int32_t i = 0; i < ctx->n_round; i++) {
        request *rq = &ctx->req[ctx->round_reqs[i]];
        const int64_t n2 = rq->n + accepted[i] + 1;
        int64_t *hist = rq->cm, *wr = cm_wr(ctx, rq);
        for (int32_t g = 0, k = 0; g < G; g++) {
            const int64_t h2 = grp_rows_floor(ctx, g, n2);
            hist[g] = h2;
            for (const int32_t end = k + ctx->grp_nsrc[g]; k < end; k++) wr[k] = h2;
        }
        ctx->st.accepted += (uint64_t)accepted[i];
        ctx->st.rejected_rows += (uint64_t)(rq->K - 1 - accepted[i]);
    }
    /* the tail rows that fell due (complete pages, see backup_due_hi) of the requests that reached
       their due_n, to the host in one copy (a failure is retried at the next round's housekeeping) */
    const uint64_t tb = hp_now();
    if (ctx->bg_called) backup_defer_round(ctx, accepted); /* dhs_background issues them */
    else (void)backup_issue_round(ctx, accepted);
    hp_add(ctx, DHS_HP_BACKUP, tb);
    ctx->bg_defer = ctx->bg_called;
    ctx->bg_called = 0;
    for (int32_t i = 0; i < ctx->n_round; i++) {
        request *rq = &ctx->req[ctx->round_reqs[i]];
        rq->n = rq->n + accepted[i] + 1;
        rq->in_round = 0;
        rq->imported = 1;
    }
    ctx->st.rounds++;
    ctx->n_round = 0;
    ctx->round_open = 0;
    return DHS_OK;
}

dhs_status dhs_round_end(dhs_ctx *ctx, const int32_t *accepted)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    const uint64_t t = hp_now();
    dhs_status s = round_end(ctx, accepted, 1);
    hp_add(ctx, DHS_HP_END, t);
    return s;
}

dhs_status dhs_round_end_early(dhs_ctx *ctx, const int32_t *accepted)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    const uint64_t t = hp_now();
    dhs_status s = round_end(ctx, accepted, 0);
    hp_add(ctx, DHS_HP_END, t);
    return s;
}

/* ------------------------------------------------------------- resolver */
static dhs_status validate_item(const dhs_ctx *ctx, int32_t g, int32_t k, const dhs_resolve_item *it)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, it->req, &err);
    if (!rq) return err;
    if (!rq->in_round) return DHS_ERR_NOT_IN_ROUND;
    if (it->n_queries > ctx->cfg.spec_width) return DHS_ERR_TOO_MANY_QUERIES;
    if (it->n_queries != rq->K) return DHS_ERR_INVALID_ARG;
    if (!it->sel || !it->loc) return DHS_ERR_INVALID_ARG;
    if ((uintptr_t)it->sel % sizeof(int32_t) || (uintptr_t)it->loc % sizeof(int32_t)) return DHS_ERR_MISALIGNED;
    const grp_state *gs = &rq->g[g];
    int64_t m = ctx->grp_m[g];
    /* rows of the block must have been written by the group's first source
       (the producer's own layer); FOLLOW sources compute theirs at their own
       layer, after this call, and must write them before their attention
       reads the (tail) location; dhs_round_end refuses unwritten rows */
    int64_t written = (*gs->src[0].wr);
    for (int32_t j = 0; j < it->n_queries; j++) {
        const int32_t *sel = it->sel + (int64_t)j * k;
        int64_t vis = rq->n + j + 1; /* positions visible to query j */
        for (int32_t i = 0; i < k; i++) {
            int64_t s = sel[i];
            if (s == -1) continue;
            if (s < 0) return DHS_ERR_ROW_RANGE;
            if ((s + 1) * m > vis) return DHS_ERR_NOT_VISIBLE;
            if (s >= written) return DHS_ERR_ROW_RANGE; /* row of the block not written yet */
        }
    }
    return DHS_OK;
}

static int64_t phys(const dhs_ctx *ctx, const grp_state *gs, int32_t g, int32_t si, int32_t rslot, int64_t code)
{
    int32_t p = ctx->cfg.page_rows;
    int64_t v = CODE_VAL(code);
    const src_state *ss = &gs->src[si];
    switch (CODE_KIND(code)) {
    case C_TAIL: return (int64_t)ss->tail_pages[v / p] * p + v % p;
    case C_OPT: return (int64_t)ss->opt_pages[v / p] * p + v % p;
    case C_HOT: return (int64_t)ss->hot_pages[v / p] * p + v % p;
    case C_STAGE: {
        const arena *ar = &ctx->arenas[ctx->grp_arena[g] + si];
        return (int64_t)ar->first_page * p + (int64_t)rslot * ctx->arena_rows_per_slot + v;
    }
    }
    return -1;
}

/* Undo the fills of the current call after a failed gather: the slots become
   free (their old rows were already evicted; they still have host copies). */
static void rollback_call(dhs_ctx *ctx, int32_t g, int32_t n_items, const dhs_resolve_item *items)
{
    for (int32_t it = 0; it < n_items; it++) {
        request *rq = &ctx->req[items[it].req.id];
        grp_state *gs = &rq->g[g];
        for (int32_t q = 0; q < grp_hot_rows(ctx, g); q++) {
            if (gs->fill[q] != ctx->call_id || gs->row_of[q] < 0) continue;
            gs->slot_of[gs->row_of[q]] = -1;
            gs->row_of[q] = -1;
            gs->fill[q] = 0;
            unprotect(gs, q, ctx->epoch);
            ctx->pol->remove(gs->pol, q);
            gs->free_slots[gs->n_free++] = q;
        }
        for (int32_t sidx = gs->n_staged_call; sidx < gs->n_staged; sidx++) gs->slot_of[gs->staged_row[sidx]] = -1;
        gs->n_staged = gs->n_staged_call;
    }
}

static dhs_status resolve_call(dhs_ctx *ctx, int32_t group, int32_t k, int32_t n_items, const dhs_resolve_item *items)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (group < 0 || group >= ctx->arch.n_groups) return DHS_ERR_UNKNOWN_SOURCE;
    if (!ctx->round_open) return DHS_ERR_NOT_IN_ROUND;
    if (k < 1 || k > ctx->cfg.sel_k) return k < 1 ? DHS_ERR_INVALID_ARG : DHS_ERR_K_TOO_LARGE;
    if (n_items < 0 || n_items > ctx->cfg.max_requests || (n_items > 0 && !items)) return DHS_ERR_INVALID_ARG;
    if (ctx->tp_n) return DHS_ERR_STATE; /* a shared recovery awaits dhs_tp_exchange */
    if (n_items == 0) return DHS_OK; /* nothing to resolve: changes nothing, not even resolve_calls */
    for (int32_t it = 0; it < n_items; it++) {
        dhs_status s = validate_item(ctx, group, k, &items[it]);
        if (s != DHS_OK) return s;
        for (int32_t j = 0; j < it; j++)
            if (items[j].req.id == items[it].req.id) return DHS_ERR_INVALID_ARG;
    }
    if (ctx->dres) return dres_resolve_items(ctx, group, k, n_items, items);
    const dhs_config *c = &ctx->cfg;
    const int32_t g = group, p = c->page_rows, B = grp_hot_rows(ctx, group), T = c->tail_rows, nsrc = ctx->grp_nsrc[g];
    const int64_t m = ctx->grp_m[g];
    const uint32_t epoch = ctx->epoch, call = ++ctx->call_id;
    const int payload = !ctx->be->payload_free;
    const dhs_policy_ops *pol = ctx->pol;
    ctx->st.resolve_calls++;
    int64_t npairs = 0, ent = 0;
    uint64_t c_direct = 0, c_hot = 0, c_host = 0, misses = 0, staged = 0;
    dhs_status s = DHS_OK;
    int64_t *code = ctx->scratch_code;
    /* every item's rollback point, before any is planned: a failure while
       planning item i must not roll back items after i to a stale mark */
    for (int32_t it = 0; it < n_items; it++) ctx->req[items[it].req.id].g[g].n_staged_call = ctx->req[items[it].req.id].g[g].n_staged;
    for (int32_t it = 0; it < n_items && s == DHS_OK; it++) {
        request *rq = &ctx->req[items[it].req.id];
        grp_state *gs = &rq->g[g];
        const int32_t K = items[it].n_queries;
        const int64_t nent = (int64_t)K * k;
        if (payload && (s = pairs_reserve(ctx, npairs + nent * nsrc)) != DHS_OK) break;
        int64_t *cd = code + ent;
        /* pass 1: direct and hot entries; every hit of the request's union is
           protected before any victim is chosen */
        int64_t nmiss = 0;
        for (int64_t e = 0; e < nent; e++) {
            int64_t row = items[it].sel[e];
            if (row < 0) { cd[e] = -1; continue; }
            /* 1. direct: tail rows and ready optional pages */
            if (row >= (*gs->tail_lo)) {
                cd[e] = CODE(C_TAIL, row % T);
                c_direct++;
                continue;
            }
            int64_t hp = row / p;
            if (hp < gs->n_opt_pages && gs->opt_state[hp] == OPT_READY) {
                cd[e] = CODE(C_OPT, row);
                c_direct++;
                continue;
            }
            /* 2. hot: reverse index */
            int32_t q = gs->slot_of[row];
            if (q < 0) { cd[e] = CODE(C_MISS, row); nmiss++; continue; }
            if (q >= B) { /* staged earlier this round */
                cd[e] = CODE(C_STAGE, q - B);
                c_hot++;
                continue;
            }
            cd[e] = CODE(C_HOT, q);
            if (gs->prot[q] != epoch || gs->fill[q] != call) {
                protect(gs, q, epoch);
                pol->touch(gs->pol, q, pol->key ? pol->key(ctx->pol_user, items[it].req.id, g, row) : ctx->clock++);
            }
            c_hot++;
        }
        /* pass 2, 3. recover: each distinct miss of the union once, into an
           unprotected victim slot or, when every slot is protected, staging */
        for (int64_t e = 0; nmiss > 0 && e < nent; e++) {
            if (cd[e] < 0 || CODE_KIND(cd[e]) != C_MISS) continue;
            nmiss--;
            int64_t row = CODE_VAL(cd[e]);
            int32_t q = gs->slot_of[row];
            if (q >= 0) { /* a duplicate of a miss recovered above */
                cd[e] = q >= B ? CODE(C_STAGE, q - B) : CODE(C_HOT, q);
                c_host++;
                continue;
            }
            if (!bit_get(gs->host_valid, row)) { s = DHS_ERR_STATE; break; } /* I1 broken: never expected */
            if (gs->n_free > 0) {
                q = gs->free_slots[--gs->n_free];
            } else if (gs->prot_epoch == epoch && gs->n_prot >= B) {
                q = -1; /* every slot protected: no victim() scan */
            } else {
                q = pol->victim(gs->pol, gs->prot, epoch);
                if (q >= 0) {
                    assert(gs->row_of[q] >= 0 && gs->slot_of[gs->row_of[q]] == q); /* debug builds */
                    gs->slot_of[gs->row_of[q]] = -1;
                    pol->remove(gs->pol, q);
                }
            }
            if (q >= 0) {
                gs->row_of[q] = row;
                gs->slot_of[row] = q;
                protect(gs, q, epoch);
                gs->fill[q] = call;
                pol->insert(gs->pol, q, pol->key ? pol->key(ctx->pol_user, items[it].req.id, g, row) : ctx->clock++);
                cd[e] = CODE(C_HOT, q);
            } else {
                if (ctx->grp_arena[g] < 0 && (ctx->grp_arena[g] = arena_acquire(ctx, g)) < 0) { s = DHS_ERR_STAGING; break; }
                if (gs->n_staged >= ctx->arena_rows_per_slot) { s = DHS_ERR_STAGING; break; }
                int32_t sidx = gs->n_staged++;
                gs->staged_row[sidx] = row;
                gs->slot_of[row] = B + sidx;
                cd[e] = CODE(C_STAGE, sidx);
                staged++;
            }
            misses++;
            c_host++;
            if (payload) {
                for (int32_t si = 0; si < nsrc; si++)
                    ctx->pairs[npairs++] = (dhs_copy_pair){host_row(ctx, &gs->src[si], row),
                                                           pool_row(ctx, phys(ctx, gs, g, si, (int32_t)items[it].req.id, cd[e]))};
            }
        }
        ent += nent;
    }
    if (s == DHS_OK) {
        if (ctx->tp_ranks > 1 && npairs > 0) {
            /* tensor-parallel shared recovery: the copy list waits for dhs_tp_exchange
               (tpshare.c), which copies this rank's share from host and the rest from
               its peers; swapping the lists allocates nothing and cannot fail */
            dhs_copy_pair *tp = ctx->tp_pairs;
            int64_t cap = ctx->tp_cap;
            ctx->tp_pairs = ctx->pairs;
            ctx->tp_cap = ctx->cap_pairs;
            ctx->tp_n = npairs;
            ctx->pairs = tp;
            ctx->cap_pairs = cap;
        } else {
            s = be_gather(ctx->be, ctx->pairs, npairs, ctx->row_stride);
        }
    }
    if (s != DHS_OK) {
        rollback_call(ctx, g, n_items, items);
        return s;
    }
    /* 4. replay the plan for every source of the group */
    ent = 0;
    for (int32_t it = 0; it < n_items; it++) {
        request *rq = &ctx->req[items[it].req.id];
        const grp_state *gs = &rq->g[g];
        const int64_t nent = (int64_t)items[it].n_queries * k;
        const int64_t *cd = code + ent;
        int32_t rslot = (int32_t)items[it].req.id;
        for (int32_t si = 0; si < nsrc; si++) {
            int32_t *loc = items[it].loc + (int64_t)si * nent;
            const src_state *ss = &gs->src[si];
            for (int64_t e = 0; e < nent; e++) {
                int64_t cde = cd[e];
                if (cde < 0) { loc[e] = -1; continue; }
                int64_t v = CODE_VAL(cde);
                switch (CODE_KIND(cde)) {
                case C_HOT: loc[e] = (int32_t)((int64_t)ss->hot_pages[v / p] * p + v % p); break;
                case C_TAIL: loc[e] = (int32_t)((int64_t)ss->tail_pages[v / p] * p + v % p); break;
                default: loc[e] = (int32_t)phys(ctx, gs, g, si, rslot, cde); break;
                }
            }
        }
        ent += nent;
    }
    (void)m;
    ctx->st.entries += c_direct + c_hot + c_host;
    ctx->st.census_direct += c_direct;
    ctx->st.census_hot += c_hot;
    ctx->st.census_host += c_host;
    ctx->st.distinct_misses += misses;
    ctx->st.host_rows_copied += payload ? (uint64_t)npairs / (uint64_t)nsrc : misses;
    ctx->st.host_bytes_copied += misses * (uint64_t)nsrc * ctx->row_stride; /* the same in payload-free mode */
    ctx->st.staging_rows += staged;
    uint64_t cur_staged = 0;
    for (int32_t it = 0; it < n_items; it++) cur_staged += (uint64_t)ctx->req[items[it].req.id].g[g].n_staged;
    if (cur_staged > ctx->st.staging_rows_peak) ctx->st.staging_rows_peak = cur_staged;
    return DHS_OK;
}

dhs_status dhs_resolve(dhs_ctx *ctx, int32_t group, int32_t k, int32_t n_items, const dhs_resolve_item *items)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    const uint64_t t = hp_now();
    dhs_status s = resolve_call(ctx, group, k, n_items, items);
    hp_add(ctx, DHS_HP_RESOLVE, t);
    return s;
}
