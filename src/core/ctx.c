/* ctx.c - context lifecycle, architecture/config defaults, page allocator,
 * requests (open, import, close), tail writes, stats. */
#include <stdlib.h>
#include <string.h>

#include "core/dres.h"
#include "core/internal.h"

/* ------------------------------------------------------------- strings */
const char *dhs_version(void) { return DHS_VERSION_STRING; }

const char *dhs_status_str(dhs_status s)
{
    switch (s) {
    case DHS_OK: return "ok";
    case DHS_WAIT: return "wait: capacity short, retry later";
    case DHS_ERR_NOMEM: return "host allocation failed";
    case DHS_ERR_DEVICE_NOMEM: return "device allocation failed";
    case DHS_ERR_BACKEND: return "backend copy or fence failed";
    case DHS_ERR_INVALID_ARG: return "invalid argument";
    case DHS_ERR_MISALIGNED: return "buffer not 16-byte aligned";
    case DHS_ERR_UNKNOWN_REQUEST: return "unknown request";
    case DHS_ERR_UNKNOWN_SOURCE: return "unknown source or group";
    case DHS_ERR_ROW_RANGE: return "row outside the request's rows";
    case DHS_ERR_NOT_VISIBLE: return "selected row not visible to the query";
    case DHS_ERR_K_TOO_LARGE: return "k above the configured maximum";
    case DHS_ERR_TOO_MANY_QUERIES: return "queries per request above k_max";
    case DHS_ERR_STATE: return "call not valid in this state";
    case DHS_ERR_ACCEPTED_RANGE: return "accepted count outside 0..K-1";
    case DHS_ERR_NOT_IN_ROUND: return "request not in the open round";
    case DHS_ERR_TOO_LARGE: return "request can never fit the pools";
    case DHS_ERR_STAGING: return "staging arenas exhausted";
    case DHS_ERR_UNSUPPORTED: return "unsupported by this backend or build";
    case DHS_ERR_CLOSED: return "request closed";
    }
    return "unknown status";
}

const char *dhs_consumer_kind_str(dhs_consumer_kind k)
{
    switch (k) {
    case DHS_CONSUMER_OWN: return "own";
    case DHS_CONSUMER_FOLLOW: return "follow";
    case DHS_CONSUMER_REUSE: return "reuse";
    case DHS_CONSUMER_REINDEX: return "reindex";
    }
    return "unknown";
}

const char *dhs_reclaim_order_str(dhs_reclaim_order o)
{
    switch (o) {
    case DHS_RECLAIM_MOST_PAGES: return "most-pages";
    case DHS_RECLAIM_OLDEST: return "oldest";
    case DHS_RECLAIM_NEWEST: return "newest";
    default: return "unknown";
    }
}

dhs_arch dhs_arch_default(void)
{
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 1;
    a.n_sources = 1;
    a.sources[0] = (dhs_source_desc){.row_bytes = 576, .m = 1, .group = 0};
    a.n_consumers = 1;
    a.consumers[0] = (dhs_consumer_desc){.kind = DHS_CONSUMER_OWN, .source = 0, .group = 0};
    a.index_key_bytes = 132;
    return a;
}

dhs_status dhs_arch_validate(const dhs_arch *a)
{
    if (!a) return DHS_ERR_INVALID_ARG;
    if (a->n_groups < 1 || a->n_sources < a->n_groups || a->n_sources > DHS_MAX_SOURCES) return DHS_ERR_INVALID_ARG;
    if (a->n_consumers < 0 || a->n_consumers > DHS_MAX_CONSUMERS) return DHS_ERR_INVALID_ARG;
    int32_t m_of[DHS_MAX_SOURCES];
    for (int g = 0; g < a->n_groups; g++) m_of[g] = 0;
    for (int s = 0; s < a->n_sources; s++) {
        const dhs_source_desc *d = &a->sources[s];
        if (d->row_bytes == 0 || d->row_bytes % DHS_ALIGN || d->m < 1 || d->m > INT32_MAX || d->group < 0 || d->group >= a->n_groups)
            return DHS_ERR_INVALID_ARG;
        if (m_of[d->group] && m_of[d->group] != (int32_t)d->m) return DHS_ERR_INVALID_ARG;
        m_of[d->group] = (int32_t)d->m;
    }
    for (int g = 0; g < a->n_groups; g++)
        if (!m_of[g]) return DHS_ERR_INVALID_ARG; /* every group has a source */
    for (int c = 0; c < a->n_consumers; c++) {
        const dhs_consumer_desc *d = &a->consumers[c];
        if ((int)d->kind < 0 || d->kind > DHS_CONSUMER_REINDEX) return DHS_ERR_INVALID_ARG;
        if (d->source < 0 || d->source >= a->n_sources || d->group < 0 || d->group >= a->n_groups) return DHS_ERR_INVALID_ARG;
        if (a->sources[d->source].group != d->group) return DHS_ERR_INVALID_ARG;
    }
    return DHS_OK;
}

dhs_config dhs_config_default(void)
{
    dhs_config c;
    memset(&c, 0, sizeof c);
    c.max_requests = 16;
    c.max_k = 2048;
    c.k_max = 1;
    c.hot_rows = 2048;
    c.tail_rows = 128;
    c.page_rows = 64;
    c.max_rows = 131072;
    c.device_bytes = (uint64_t)1 << 30;
    c.reserve_bytes = 0;
    c.staging_arenas = 0;
    c.repop_pages = 64;
    c.policy = DHS_POLICY_LRU;
    c.reclaim_order = DHS_RECLAIM_MOST_PAGES;
    c.resident_first = 1;
    c.payload_free = 0;
    return c;
}

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
    if (ctx->page_use[pg] == PAGE_OPT) ctx->pages_opt--; else ctx->pages_req--;
    ctx->page_use[pg] = PAGE_FREE;
    ctx->page_owner[pg] = -1;
    ctx->free_pages[ctx->n_free_pages++] = pg;
}

/* Gives a page back once every reader issued so far has completed. The page
   keeps its accounting category until then (as a required allocation). */
void page_release(dhs_ctx *ctx, int32_t pg)
{
    dhs_ticket t = 0;
    if (ctx->be->ops->record_readers(ctx->be, &t) != DHS_OK || t == 0 || ctx->be->ops->done(ctx->be, t)) {
        if (t && !ctx->be->ops->done(ctx->be, t)) ctx->be->ops->wait(ctx->be, t);
        page_free_now(ctx, pg);
        return;
    }
    if (ctx->page_use[pg] == PAGE_OPT) { ctx->pages_opt--; ctx->pages_req++; }
    ctx->page_use[pg] = PAGE_DEFERRED;
    ctx->page_owner[pg] = -1;
    /* the deferred array is sized for every page at creation: cannot overflow */
    ctx->deferred[ctx->n_deferred++] = (deferred_free){pg, t};
}

/* ------------------------------------------------------------- context */
static void ctx_free_all(dhs_ctx *ctx)
{
    dres_destroy(ctx);
    if (ctx->req) {
        for (int32_t i = 0; i < ctx->cfg.max_requests; i++)
            if (ctx->req[i].in_use) request_free_all(ctx, &ctx->req[i]);
    }
    if (!ctx->cfg.payload_free && ctx->pool)
        be_dev_free(ctx->be, ctx->pool, (size_t)ctx->n_pages * ctx->cfg.page_rows * ctx->row_stride);
    int32_t ng = ctx->arch.n_groups;
    if (ctx->grp_srcs && ctx->grp_nsrc) /* grp_nsrc may be the allocation that failed */
        for (int g = 0; g < ng; g++) ctx_free(ctx, ctx->grp_srcs[g], (size_t)ctx->grp_nsrc[g], sizeof(int32_t));
    ctx_free(ctx, ctx->grp_srcs, (size_t)ng, sizeof(int32_t *));
    ctx_free(ctx, ctx->grp_m, (size_t)ng, sizeof(int32_t));
    ctx_free(ctx, ctx->grp_nsrc, (size_t)ng, sizeof(int32_t));
    ctx_free(ctx, ctx->grp_max_rows, (size_t)ng, sizeof(int64_t));
    ctx_free(ctx, ctx->src_grp_idx, (size_t)ctx->arch.n_sources, sizeof(int32_t));
    ctx_free(ctx, ctx->free_pages, (size_t)ctx->n_pages, sizeof(int32_t));
    ctx_free(ctx, ctx->page_use, (size_t)ctx->n_pages, 1);
    ctx_free(ctx, ctx->page_owner, (size_t)ctx->n_pages, sizeof(int32_t));
    ctx_free(ctx, ctx->deferred, (size_t)ctx->n_pages, sizeof(deferred_free));
    ctx_free(ctx, ctx->arenas, (size_t)ctx->n_arenas, sizeof(arena));
    ctx_free(ctx, ctx->grp_arena, (size_t)ng, sizeof(int32_t));
    ctx_free(ctx, ctx->req, (size_t)ctx->cfg.max_requests, sizeof(request));
    ctx_free(ctx, ctx->round_reqs, (size_t)ctx->cfg.max_requests, sizeof(int32_t));
    ctx_free(ctx, ctx->scratch_code, (size_t)ctx->cfg.k_max * ctx->cfg.max_k * ctx->cfg.max_requests, sizeof(int64_t));
    ctx_free(ctx, ctx->pairs, (size_t)ctx->cap_pairs, sizeof(dhs_copy_pair));
    free(ctx);
}

static int config_valid(const dhs_config *c)
{
    /* bounds first: no arithmetic below may overflow */
    if (c->max_k > (1 << 24) || c->max_requests > (1 << 20) || c->k_max > (1 << 16) || c->hot_rows > (1 << 30) ||
        c->tail_rows > (1 << 30) || c->max_rows > INT32_MAX)
        return 0;
    if (c->max_requests < 1 || c->max_k < 1 || c->k_max < 1 || c->page_rows < 1 || c->hot_rows < c->page_rows ||
        c->hot_rows % c->page_rows || c->tail_rows < c->page_rows || c->tail_rows % c->page_rows ||
        c->tail_rows < 2 * c->k_max || c->max_rows < 1 || (int)c->policy < 0 || c->policy >= DHS_POLICY_COUNT_ ||
        (int)c->reclaim_order < 0 || c->reclaim_order >= DHS_RECLAIM_COUNT_ || c->repop_pages < 0)
        return 0;
    /* device resolver: CLOCK-epoch policy only, placement simulation unsupported */
    if (c->resolver < 0 || c->resolver >= DHS_RESOLVER_COUNT_ ||
        (c->resolver == DHS_RESOLVER_DEVICE && (c->policy != DHS_POLICY_CLOCK || c->payload_free)))
        return 0;
    return 1;
}

/* Everything the pool must hold besides optional history, from the
   architecture and the configuration alone (DESIGN §3, §6): one function so
   dhs_ctx_create and dhs_config_sizes never disagree. */
static dhs_status derive_sizes(const dhs_arch *a, const dhs_config *c, dhs_sizes *z)
{
    memset(z, 0, sizeof *z);
    uint32_t stride = 0;
    int32_t nsrc[DHS_MAX_SOURCES] = {0}, widest = 0, calls = 1;
    for (int i = 0; i < a->n_sources; i++) {
        if (a->sources[i].row_bytes > stride) stride = a->sources[i].row_bytes;
        nsrc[a->sources[i].group]++;
    }
    for (int g = 0; g < a->n_groups; g++) {
        if (nsrc[g] > widest) widest = nsrc[g];
        /* a request's round may resolve a group once per OWN/REINDEX
           consumer and every location stays valid until the round's
           consumers finish: the overflow bound is K_max * k per call */
        int32_t n = 0;
        for (int i = 0; i < a->n_consumers; i++)
            if (a->consumers[i].group == g &&
                (a->consumers[i].kind == DHS_CONSUMER_OWN || a->consumers[i].kind == DHS_CONSUMER_REINDEX))
                n++;
        if (n > calls) calls = n;
    }
    if ((int64_t)c->k_max * c->max_k * calls > INT32_MAX) return DHS_ERR_INVALID_ARG;
    /* byte figures: every product and sum checked (row_bytes up to 2^32-16,
       page_rows up to 2^30, staging_arenas up to 2^31-1, reserve_bytes up to
       2^64-1); a figure past 2^64-1 can never fit a pool: DHS_ERR_TOO_LARGE */
    uint64_t t1, t2;
    z->row_stride = stride;
    z->page_bytes = (uint64_t)c->page_rows * stride; /* < 2^62 */
    uint64_t res_pages = c->reserve_bytes / z->page_bytes + (c->reserve_bytes % z->page_bytes != 0);
    if (__builtin_mul_overflow(res_pages, z->page_bytes, &z->reserve_bytes)) return DHS_ERR_TOO_LARGE;
    /* pages per request: n_sources * (B + T) / p < 2^8 * 2^31 */
    uint64_t req_pages = (uint64_t)a->n_sources * ((uint64_t)c->hot_rows + (uint64_t)c->tail_rows) / (uint64_t)c->page_rows;
    if (__builtin_mul_overflow(req_pages, z->page_bytes, &z->request_bytes)) return DHS_ERR_TOO_LARGE;
    z->staging_rows_per_slot = (int64_t)c->k_max * c->max_k * calls;
    /* chi: one arena per source of the widest group unless set; none when a
       round's union can never exceed the hot cache */
    if (c->staging_arenas > 0) z->staging_arenas = c->staging_arenas;
    else if (c->staging_arenas == 0 && z->staging_rows_per_slot > c->hot_rows) z->staging_arenas = widest;
    int64_t arena_pages = ((int64_t)c->max_requests * z->staging_rows_per_slot + c->page_rows - 1) / c->page_rows; /* < 2^51 */
    if (__builtin_mul_overflow((uint64_t)z->staging_arenas, (uint64_t)arena_pages, &t1) ||
        __builtin_mul_overflow(t1, z->page_bytes, &z->staging_bytes))
        return DHS_ERR_TOO_LARGE;
    if (__builtin_add_overflow(z->staging_bytes, z->reserve_bytes, &t2) ||
        __builtin_add_overflow(t2, z->request_bytes, &z->min_device_bytes))
        return DHS_ERR_TOO_LARGE;
    z->resolver_bytes = dres_state_bytes(a, c, z->staging_rows_per_slot);
    return DHS_OK;
}

dhs_status dhs_config_sizes(const dhs_arch *arch, const dhs_config *cfg, dhs_sizes *out)
{
    if (!arch || !cfg || !out) return DHS_ERR_INVALID_ARG;
    dhs_status s = dhs_arch_validate(arch);
    if (s != DHS_OK) return s;
    if (!config_valid(cfg)) return DHS_ERR_INVALID_ARG;
    dhs_sizes z; /* *out untouched on error */
    s = derive_sizes(arch, cfg, &z);
    if (s == DHS_OK) *out = z;
    return s;
}

dhs_status dhs_ctx_create(const dhs_arch *arch, const dhs_config *cfg, dhs_backend *be, dhs_ctx **out)
{
    if (!out) return DHS_ERR_INVALID_ARG;
    *out = NULL;
    if (!arch || !cfg || !be) return DHS_ERR_INVALID_ARG;
    dhs_status s = dhs_arch_validate(arch);
    if (s != DHS_OK) return s;
    const dhs_config *c = cfg;
    if (!config_valid(c)) return DHS_ERR_INVALID_ARG;
    if (be_fault(be, DHS_FAULT_HOST_ALLOC)) return DHS_ERR_NOMEM;
    dhs_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return DHS_ERR_NOMEM;
    ctx->arch = *arch;
    ctx->cfg = *cfg;
    ctx->be = be;
    ctx->pol = dhs_policy_get(cfg->policy);
    int32_t ng = arch->n_groups, ns = arch->n_sources;
    ctx->grp_m = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t));
    ctx->grp_nsrc = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t));
    ctx->grp_srcs = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t *));
    ctx->grp_max_rows = ctx_calloc(ctx, (size_t)ng, sizeof(int64_t));
    ctx->src_grp_idx = ctx_calloc(ctx, (size_t)ns, sizeof(int32_t));
    if (!ctx->grp_m || !ctx->grp_nsrc || !ctx->grp_srcs || !ctx->grp_max_rows || !ctx->src_grp_idx) goto nomem;
    for (int i = 0; i < ns; i++) {
        const dhs_source_desc *d = &arch->sources[i];
        ctx->src_grp_idx[i] = ctx->grp_nsrc[d->group]++;
        ctx->grp_m[d->group] = (int32_t)d->m;
        if (d->row_bytes > ctx->row_stride) ctx->row_stride = d->row_bytes;
    }
    for (int g = 0; g < ng; g++) {
        ctx->grp_srcs[g] = ctx_calloc(ctx, (size_t)ctx->grp_nsrc[g], sizeof(int32_t));
        if (!ctx->grp_srcs[g]) goto nomem;
        ctx->grp_max_rows[g] = (c->max_rows + ctx->grp_m[g] - 1) / ctx->grp_m[g] + 1;
    }
    for (int i = 0; i < ns; i++) {
        int g = arch->sources[i].group;
        ctx->grp_srcs[g][ctx->src_grp_idx[i]] = i;
    }
    dhs_sizes z;
    s = derive_sizes(arch, c, &z);
    if (s != DHS_OK) { ctx_free_all(ctx); return s; }
    uint64_t page_bytes = z.page_bytes;
    ctx->n_pages = (int64_t)(c->device_bytes / page_bytes);
    if (ctx->n_pages > INT32_MAX / c->page_rows) { ctx_free_all(ctx); return DHS_ERR_INVALID_ARG; }
    /* every figure of z is a whole number of pages: compare bytes, no product can overflow */
    if (ctx->n_pages < 1 || z.min_device_bytes > (uint64_t)ctx->n_pages * page_bytes) {
        ctx_free_all(ctx);
        return DHS_ERR_TOO_LARGE;
    }
    ctx->pages_res = (int64_t)(z.reserve_bytes / page_bytes);
    ctx->req_pages_per_request = (int64_t)(z.request_bytes / page_bytes);
    ctx->arena_rows_per_slot = (int32_t)z.staging_rows_per_slot;
    ctx->n_arenas = z.staging_arenas;
    int64_t arena_pages = z.staging_arenas ? (int64_t)(z.staging_bytes / page_bytes) / z.staging_arenas : 0;
    ctx->free_pages = ctx_calloc(ctx, (size_t)ctx->n_pages, sizeof(int32_t));
    ctx->page_use = ctx_calloc(ctx, (size_t)ctx->n_pages, 1);
    ctx->page_owner = ctx_calloc(ctx, (size_t)ctx->n_pages, sizeof(int32_t));
    ctx->deferred = ctx_calloc(ctx, (size_t)ctx->n_pages, sizeof(deferred_free));
    ctx->arenas = ctx_calloc(ctx, (size_t)ctx->n_arenas, sizeof(arena));
    ctx->grp_arena = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t));
    ctx->req = ctx_calloc(ctx, (size_t)c->max_requests, sizeof(request));
    ctx->round_reqs = ctx_calloc(ctx, (size_t)c->max_requests, sizeof(int32_t));
    ctx->scratch_code = ctx_calloc(ctx, (size_t)c->k_max * c->max_k * c->max_requests, sizeof(int64_t));
    if (!ctx->free_pages || !ctx->page_use || !ctx->page_owner || !ctx->deferred || !ctx->arenas || !ctx->grp_arena || !ctx->req ||
        !ctx->round_reqs || !ctx->scratch_code)
        goto nomem;
    if (!c->payload_free) {
        s = be_dev_alloc(be, (size_t)ctx->n_pages * page_bytes, (void **)&ctx->pool);
        if (s != DHS_OK) { ctx->pool = NULL; ctx_free_all(ctx); return s; }
    }
    /* free list: low page ids handed out first */
    for (int64_t i = 0; i < ctx->n_pages; i++) {
        ctx->free_pages[i] = (int32_t)(ctx->n_pages - 1 - i);
        ctx->page_owner[i] = -1;
    }
    ctx->n_free_pages = ctx->n_pages;
    for (int g = 0; g < ng; g++) ctx->grp_arena[g] = -1;
    for (int32_t a = 0; a < ctx->n_arenas; a++) {
        ctx->arenas[a].n_pages = (int32_t)arena_pages;
        ctx->arenas[a].first_page = -1;
        /* arenas are contiguous runs carved from the top of the pool */
        int32_t first = 0;
        for (int32_t i = 0; i < arena_pages; i++) {
            int32_t pg = page_alloc(ctx, PAGE_STAGING, -1);
            if (i == 0) first = pg;
        }
        ctx->arenas[a].first_page = first;
    }
    if (c->resolver == DHS_RESOLVER_DEVICE && (s = dres_create(ctx)) != DHS_OK) { ctx_free_all(ctx); return s; }
    *out = ctx;
    return DHS_OK;
nomem:
    ctx_free_all(ctx);
    return DHS_ERR_NOMEM;
}

void dhs_ctx_destroy(dhs_ctx *ctx)
{
    if (!ctx) return;
    /* every reader and copy completes before the memory they touch is freed */
    dhs_ticket t = 0;
    if (ctx->be->ops->record_readers(ctx->be, &t) == DHS_OK && t) ctx->be->ops->wait(ctx->be, t);
    ctx->round_open = 0; /* dhs_sync refuses an open round in device resolver mode */
    dhs_sync(ctx);
    ctx_free_all(ctx);
}

void dhs_ctx_set_next_use(dhs_ctx *ctx, dhs_next_use_fn fn, void *user)
{
    ctx->next_use = fn;
    ctx->next_use_user = user;
}

dhs_status dhs_ctx_set_policy_ops(dhs_ctx *ctx, const void *ops)
{
    if (!ctx || !ops) return DHS_ERR_INVALID_ARG;
    if (ctx->n_open) return DHS_ERR_STATE;
    ctx->pol = ops;
    return DHS_OK;
}

const void *dhs_source_pool(const dhs_ctx *ctx, int32_t source)
{
    if (!ctx || source < 0 || source >= ctx->arch.n_sources) return NULL;
    return ctx->pool;
}

uint32_t dhs_pool_row_stride(const dhs_ctx *ctx)
{
    return ctx ? ctx->row_stride : 0;
}

int64_t dhs_source_pool_rows(const dhs_ctx *ctx, int32_t source)
{
    if (!ctx || source < 0 || source >= ctx->arch.n_sources) return 0;
    return ctx->n_pages * ctx->cfg.page_rows;
}

/* ------------------------------------------------------------- requests */
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

static void grp_state_free(dhs_ctx *ctx, request *rq, int32_t g)
{
    grp_state *gs = &rq->g[g];
    const dhs_config *c = &ctx->cfg;
    int32_t B = c->hot_rows, p = c->page_rows;
    int64_t mr = ctx->grp_max_rows[g];
    if (gs->src) {
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
            src_state *ss = &gs->src[si];
            if (ss->hot_pages)
                for (int32_t i = 0; i < B / p; i++)
                    if (ss->hot_pages[i] >= 0) page_release(ctx, ss->hot_pages[i]);
            if (ss->tail_pages)
                for (int32_t i = 0; i < c->tail_rows / p; i++)
                    if (ss->tail_pages[i] >= 0) page_release(ctx, ss->tail_pages[i]);
            if (ss->opt_pages)
                for (int64_t i = 0; i < gs->n_opt_pages; i++)
                    if (ss->opt_pages[i] >= 0) page_release(ctx, ss->opt_pages[i]);
            if (ss->host_chunks)
                for (int64_t i = 0; i < ss->n_host_chunks; i++)
                    be_host_free(ctx->be, ss->host_chunks[i], (size_t)HOST_CHUNK_ROWS * ctx->row_stride);
            ctx_free(ctx, ss->hot_pages, (size_t)(B / p), sizeof(int32_t));
            ctx_free(ctx, ss->tail_pages, (size_t)(c->tail_rows / p), sizeof(int32_t));
            ctx_free(ctx, ss->opt_pages, (size_t)gs->n_opt_pages, sizeof(int32_t));
            ctx_free(ctx, ss->host_chunks, (size_t)(mr / HOST_CHUNK_ROWS + 1), sizeof(uint8_t *));
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
    ctx_free(ctx, gs->opt_state, (size_t)gs->n_opt_pages, 1);
    ctx_free(ctx, gs->opt_backing, (size_t)gs->n_opt_pages, 1);
    ctx_free(ctx, gs->opt_ticket, (size_t)gs->n_opt_pages, sizeof(dhs_ticket));
    memset(gs, 0, sizeof *gs);
}

/* Frees every allocation of a request (device pages after their readers). */
void request_free_all(dhs_ctx *ctx, request *rq)
{
    if (rq->g) {
        for (int32_t g = 0; g < ctx->arch.n_groups; g++) grp_state_free(ctx, rq, g);
        ctx_free(ctx, rq->g, (size_t)ctx->arch.n_groups, sizeof(grp_state));
    }
    rq->g = NULL;
    rq->in_use = 0;
}

/* Allocates the metadata and required pages of a request. On failure frees
   what it took; the request stays unused. */
static dhs_status request_alloc(dhs_ctx *ctx, request *rq, int32_t slot)
{
    const dhs_config *c = &ctx->cfg;
    int32_t B = c->hot_rows, p = c->page_rows;
    rq->g = ctx_calloc(ctx, (size_t)ctx->arch.n_groups, sizeof(grp_state));
    if (!rq->g) return DHS_ERR_NOMEM;
    rq->in_use = 1; /* so request_free_all frees partial state */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
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
            ss->tail_pages = ctx_calloc(ctx, (size_t)(c->tail_rows / p), sizeof(int32_t));
            for (int32_t i = 0; ss->tail_pages && i < c->tail_rows / p; i++) ss->tail_pages[i] = -1;
            ss->host_chunks = ctx_calloc(ctx, (size_t)(mr / HOST_CHUNK_ROWS + 1), sizeof(uint8_t *));
            if (!ss->hot_pages || !ss->tail_pages || !ss->host_chunks) return DHS_ERR_NOMEM;
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
        for (int64_t i = 0; i < gs->n_opt_pages; i++)
            if (gs->opt_ticket[i]) ctx->be->ops->wait(ctx->be, gs->opt_ticket[i]);
    }
    uint32_t gen = rq->gen;
    request_free_all(ctx, rq);
    if (ctx->dres) dres_request_reset(ctx, (int32_t)r.id); /* nothing of it stays on the device */
    rq->gen = gen;
    ctx->n_open--;
    return DHS_OK;
}

/* Copies rows of an engine buffer into host backing rows [r0, r1). */
static dhs_status import_to_host(dhs_ctx *ctx, request *rq, int32_t g, const void *const *rows, int64_t r0, int64_t r1)
{
    grp_state *gs = &rq->g[g];
    for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
        int32_t src = ctx->grp_srcs[g][si];
        uint32_t rb = ctx->arch.sources[src].row_bytes;
        src_state *ss = &gs->src[si];
        if (ctx->cfg.payload_free) continue;
        /* one copy per run of rows contiguous on both sides */
        int contig = rb == ctx->row_stride;
        for (int64_t row = r0; row < r1;) {
            int64_t end = contig ? (row / HOST_CHUNK_ROWS + 1) * HOST_CHUNK_ROWS : row + 1;
            if (end > r1) end = r1;
            dhs_status s = be_copy_sync(ctx->be, host_row(ctx, ss, row),
                                                   (const uint8_t *)rows[src] + (uint64_t)row * rb, (size_t)(end - row) * rb);
            if (s != DHS_OK) return s;
            row = end;
        }
    }
    for (int64_t row = r0; row < r1; row++) bit_set(gs->host_valid, row);
    return DHS_OK;
}

dhs_status dhs_request_import(dhs_ctx *ctx, dhs_req r, int64_t n_positions, const void *const *rows, unsigned flags)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    if (rq->imported || rq->n > 0 || rq->in_round) return DHS_ERR_STATE;
    if (flags != DHS_IMPORT_DEVICE && flags != DHS_IMPORT_HOST) return DHS_ERR_INVALID_ARG;
    if (n_positions < 0 || n_positions > ctx->cfg.max_rows) return DHS_ERR_ROW_RANGE;
    if (n_positions > 0 && !ctx->cfg.payload_free) {
        if (!rows) return DHS_ERR_INVALID_ARG;
        for (int32_t s = 0; s < ctx->arch.n_sources; s++) {
            if (!rows[s]) return DHS_ERR_INVALID_ARG;
            if ((uintptr_t)rows[s] % DHS_ALIGN) return DHS_ERR_MISALIGNED;
        }
    }
    const dhs_config *c = &ctx->cfg;
    int32_t p = c->page_rows;
    /* allocate everything first (host rows, optional arrays); fail cleanly */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        int64_t m = ctx->grp_m[g];
        int64_t rows_all = (n_positions + m - 1) / m;
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
            dhs_status s = host_ensure(ctx, ctx->grp_srcs[g][si], &rq->g[g].src[si], rows_all);
            if (s != DHS_OK) return s;
        }
        grp_state *gs = &rq->g[g];
        int64_t hist = n_positions / m;
        int64_t nop = hist / p;
        if (gs->opt_state && gs->n_opt_pages != nop) {
            /* left by a failed import of another length: no page was taken yet */
            ctx_free(ctx, gs->opt_state, (size_t)gs->n_opt_pages, 1);
            ctx_free(ctx, gs->opt_backing, (size_t)gs->n_opt_pages, 1);
            ctx_free(ctx, gs->opt_ticket, (size_t)gs->n_opt_pages, sizeof(dhs_ticket));
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                ctx_free(ctx, gs->src[si].opt_pages, (size_t)gs->n_opt_pages, sizeof(int32_t));
                gs->src[si].opt_pages = NULL;
            }
            gs->opt_state = NULL; gs->opt_backing = NULL; gs->opt_ticket = NULL;
            gs->n_opt_pages = 0;
        }
        if (nop > 0 && !gs->opt_state) {
            gs->opt_state = ctx_calloc(ctx, (size_t)nop, 1);
            gs->opt_backing = ctx_calloc(ctx, (size_t)nop, 1);
            gs->opt_ticket = ctx_calloc(ctx, (size_t)nop, sizeof(dhs_ticket));
            int ok = gs->opt_state && gs->opt_backing && gs->opt_ticket;
            for (int32_t si = 0; ok && si < ctx->grp_nsrc[g]; si++) {
                gs->src[si].opt_pages = ctx_calloc(ctx, (size_t)nop, sizeof(int32_t));
                if (!gs->src[si].opt_pages) ok = 0;
                else for (int64_t i = 0; i < nop; i++) gs->src[si].opt_pages[i] = -1;
            }
            if (!ok) {
                ctx_free(ctx, gs->opt_state, (size_t)nop, 1);
                ctx_free(ctx, gs->opt_backing, (size_t)nop, 1);
                ctx_free(ctx, gs->opt_ticket, (size_t)nop, sizeof(dhs_ticket));
                for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                    ctx_free(ctx, gs->src[si].opt_pages, (size_t)nop, sizeof(int32_t));
                    gs->src[si].opt_pages = NULL;
                }
                gs->opt_state = NULL; gs->opt_backing = NULL; gs->opt_ticket = NULL;
                return DHS_ERR_NOMEM;
            }
            gs->n_opt_pages = nop;
        }
    }
    dhs_status st = DHS_OK;
    /* copy: optional pages while I4 allows (resident-first), else host */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        int64_t m = ctx->grp_m[g];
        int64_t hist = n_positions / m, rows_all = (n_positions + m - 1) / m;
        int32_t nsrc = ctx->grp_nsrc[g];
        for (int64_t hp = 0; hp < gs->n_opt_pages; hp++) {
            int to_dev = (flags == DHS_IMPORT_DEVICE) && c->resident_first && !rq->reclaiming &&
                         ctx->n_free_pages - nsrc >= ctx->pages_res;
            if (to_dev) {
                for (int32_t si = 0; si < nsrc; si++) {
                    int32_t pg = page_alloc(ctx, PAGE_OPT, (int32_t)r.id);
                    gs->src[si].opt_pages[hp] = pg;
                    if (c->payload_free) continue;
                    int32_t src = ctx->grp_srcs[g][si];
                    uint32_t rb = ctx->arch.sources[src].row_bytes;
                    int32_t run = rb == ctx->row_stride ? p : 1; /* whole page in one copy when rows are dense */
                    for (int32_t i = 0; i < p; i += run) {
                        dhs_status s = be_copy_sync(ctx->be, pool_row(ctx, (int64_t)pg * p + i),
                                                               (const uint8_t *)rows[src] + (uint64_t)(hp * p + i) * rb,
                                                               (size_t)run * rb);
                        if (s != DHS_OK) { st = s; goto fail; }
                    }
                }
                gs->opt_state[hp] = OPT_READY;
                gs->opt_held++;
            } else {
                dhs_status s = import_to_host(ctx, rq, g, rows, hp * p, (hp + 1) * p);
                if (s != DHS_OK) { st = s; goto fail; }
            }
        }
        dhs_status s = import_to_host(ctx, rq, g, rows, gs->n_opt_pages * p, hist);
        if (s != DHS_OK) { st = s; goto fail; }
        /* incomplete compressed row: stays in the tail */
        if (rows_all > hist && !c->payload_free) {
            for (int32_t si = 0; si < nsrc; si++) {
                int32_t src = ctx->grp_srcs[g][si];
                uint32_t rb = ctx->arch.sources[src].row_bytes;
                int32_t t = (int32_t)(hist % c->tail_rows);
                int64_t loc = (int64_t)gs->src[si].tail_pages[t / p] * p + t % p;
                s = be_copy_sync(ctx->be, pool_row(ctx, loc), (const uint8_t *)rows[src] + (uint64_t)hist * rb, rb);
                if (s != DHS_OK) { st = s; goto fail; }
            }
        }
        gs->hist_rows = hist;
        gs->import_rows = hist;
        gs->tail_lo = hist;
        gs->backup_hi = hist;
        for (int32_t si = 0; si < nsrc; si++) gs->src[si].written_hi = rows_all;
    }
    rq->n = n_positions;
    rq->imported = 1;
    return DHS_OK;
fail:
    /* a backend copy failed: give back every optional page this call took
       (nothing read them) so a retry starts from the same state */
    for (int32_t g = 0; g < ctx->arch.n_groups; g++) {
        grp_state *gs = &rq->g[g];
        for (int64_t hp = 0; hp < gs->n_opt_pages; hp++) {
            for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) {
                if (gs->src[si].opt_pages[hp] >= 0) page_free_now(ctx, gs->src[si].opt_pages[hp]);
                gs->src[si].opt_pages[hp] = -1;
            }
            gs->opt_state[hp] = OPT_ABSENT;
        }
        gs->opt_held = 0;
        gs->hist_rows = gs->import_rows = gs->tail_lo = gs->backup_hi = 0;
        for (int32_t si = 0; si < ctx->grp_nsrc[g]; si++) gs->src[si].written_hi = 0;
    }
    return st;
}

/* ------------------------------------------------------------- tail writes */
dhs_status dhs_write_rows(dhs_ctx *ctx, dhs_req r, int32_t source, int64_t first_row, int32_t n_rows, const void *data)
{
    dhs_status err = DHS_ERR_INVALID_ARG; /* set by req_get; gcc -O2 -fsanitize cannot tell */
    request *rq = req_get(ctx, r, &err);
    if (!rq) return err;
    if (source < 0 || source >= ctx->arch.n_sources) return DHS_ERR_UNKNOWN_SOURCE;
    if (!ctx->round_open || !rq->in_round) return DHS_ERR_NOT_IN_ROUND;
    if (n_rows < 0) return DHS_ERR_INVALID_ARG;
    if (!ctx->cfg.payload_free) {
        if (!data && n_rows > 0) return DHS_ERR_INVALID_ARG;
        if ((uintptr_t)data % DHS_ALIGN) return DHS_ERR_MISALIGNED;
    }
    int32_t g = ctx->arch.sources[source].group;
    grp_state *gs = &rq->g[g];
    int64_t m = ctx->grp_m[g];
    int64_t hi = (rq->n + rq->K + m - 1) / m; /* rows touched by the block */
    /* compared without forming first_row + n_rows: any int64 first_row and
       int32 n_rows are checked without overflow (hist_rows >= 0, hi small) */
    if (first_row < gs->hist_rows || first_row > hi || n_rows > hi - first_row) return DHS_ERR_ROW_RANGE;
    /* no gap: written_hi is a high-water mark, so a write starting past the
       first unwritten row would make the rows before it count as written
       (resolvable, committed) with bytes nobody wrote */
    if (first_row > gs->src[ctx->src_grp_idx[source]].written_hi) return DHS_ERR_ROW_RANGE;
    const dhs_config *c = &ctx->cfg;
    /* The tail ring holds rows [tail_lo, tail_lo + tail_rows): rows awaiting
       their host copy and rows handed out as tail locations this round are
       all >= tail_lo, which stays put for the whole round. dhs_round_begin
       made the block's end fit (it waits for the backup when needed), so
       this never fires; it guards the ring, and never moves tail_lo. */
    if (first_row + n_rows - gs->tail_lo > c->tail_rows) return DHS_ERR_STATE;
    int32_t si = ctx->src_grp_idx[source];
    uint32_t rb = ctx->arch.sources[source].row_bytes;
    /* one copy per run of rows inside one tail page (dense rows) */
    for (int32_t i = 0; i < n_rows && !c->payload_free;) {
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
    if (first_row + n_rows > gs->src[si].written_hi) gs->src[si].written_hi = first_row + n_rows;
    return DHS_OK;
}

/* ------------------------------------------------------------- stats */
void dhs_get_stats(const dhs_ctx *ctx, dhs_stats *out)
{
    if (ctx && out) *out = ctx->st;
    if (ctx && out && ctx->dres) dres_add_stats(ctx, out); /* synchronises */
}

void dhs_reset_stats(dhs_ctx *ctx)
{
    if (ctx) memset(&ctx->st, 0, sizeof ctx->st);
    if (ctx && ctx->dres) dres_reset_stats(ctx);
}

void dhs_get_mem(const dhs_ctx *ctx, dhs_mem *out)
{
    if (!ctx || !out) return;
    uint64_t pb = (uint64_t)ctx->cfg.page_rows * ctx->row_stride;
    memset(out, 0, sizeof *out);
    out->M = (uint64_t)ctx->n_pages * pb;
    out->M_req = (uint64_t)ctx->pages_req * pb;
    out->M_opt = (uint64_t)ctx->pages_opt * pb;
    out->M_res = (uint64_t)ctx->pages_res * pb;
    out->device_bytes_allocated = ctx->be->dev_bytes;
    out->host_bytes_allocated = ctx->be->host_bytes + ctx->meta_bytes;
    out->pages_total = ctx->n_pages;
    out->pages_free = ctx->n_free_pages;
    out->requests_open = ctx->n_open;
}

dhs_status dhs_read_location(const dhs_ctx *ctx, int32_t source, int32_t loc, void *out)
{
    if (!ctx || !out) return DHS_ERR_INVALID_ARG;
    if (source < 0 || source >= ctx->arch.n_sources) return DHS_ERR_UNKNOWN_SOURCE;
    if (loc < 0 || loc >= ctx->n_pages * ctx->cfg.page_rows) return DHS_ERR_ROW_RANGE;
    if (ctx->cfg.payload_free) return DHS_ERR_STATE;
    return ctx->be->ops->copy_sync(ctx->be, out, pool_row(ctx, loc), ctx->arch.sources[source].row_bytes);
}
