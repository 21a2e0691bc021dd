/* ctx.c - context lifecycle (create/destroy), architecture/config defaults
 * and validation, sizing, strings, stats/memory, read_location. */
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
    case DHS_ERR_K_TOO_LARGE: return "k above the configured sel_k";
    case DHS_ERR_TOO_MANY_QUERIES: return "queries per request above spec_width";
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
    c.sel_k = 2048;
    c.spec_width = 1;
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
    c.decoded_optional = 1;
    return c;
}

/* ------------------------------------------------------------- context */
static void ctx_free_all(dhs_ctx *ctx)
{
    dres_destroy(ctx);
    ctx_free(ctx, ctx->tp_pairs, (size_t)ctx->tp_cap, sizeof(dhs_copy_pair));
    if (ctx->req) {
        for (int32_t i = 0; i < ctx->cfg.max_requests; i++)
            if (ctx->req[i].in_use) request_free_all(ctx, &ctx->req[i]);
    }
    host_cache_drop(ctx);
    ctx_free(ctx, ctx->hcache, (size_t)ctx->hcache_cap, sizeof(struct host_span));
    if (!ctx->be->payload_free && ctx->pool)
        be_dev_free(ctx->be, ctx->pool, (size_t)ctx->n_pages * ctx->cfg.page_rows * ctx->row_stride);
    int32_t ng = ctx->arch.n_groups;
    if (ctx->grp_srcs && ctx->grp_nsrc) /* grp_nsrc may be the allocation that failed */
        for (int g = 0; g < ng; g++) ctx_free(ctx, ctx->grp_srcs[g], (size_t)ctx->grp_nsrc[g], sizeof(int32_t));
    ctx_free(ctx, ctx->grp_srcs, (size_t)ng, sizeof(int32_t *));
    ctx_free(ctx, ctx->grp_m, (size_t)ng, sizeof(int32_t));
    ctx_free(ctx, ctx->grp_nsrc, (size_t)ng, sizeof(int32_t));
    ctx_free(ctx, ctx->grp_max_rows, (size_t)ng, sizeof(int64_t));
    ctx_free(ctx, ctx->src_grp_idx, (size_t)ctx->arch.n_sources, sizeof(int32_t));
    ctx_free(ctx, ctx->grp_src0, (size_t)ng, sizeof(int32_t));
    ctx_free(ctx, ctx->free_pages, (size_t)ctx->n_pages, sizeof(int32_t));
    ctx_free(ctx, ctx->page_use, (size_t)ctx->n_pages, 1);
    ctx_free(ctx, ctx->page_owner, (size_t)ctx->n_pages, sizeof(int32_t));
    ctx_free(ctx, ctx->page_ref, (size_t)ctx->n_pages, sizeof(int32_t));
    ctx_free(ctx, ctx->sspan, (size_t)ctx->sspan_cap, sizeof(struct shared_span));
    ctx_free(ctx, ctx->deferred, (size_t)ctx->n_pages, sizeof(deferred_free));
    ctx_free(ctx, ctx->arenas, (size_t)ctx->n_arenas, sizeof(arena));
    ctx_free(ctx, ctx->grp_arena, (size_t)ng, sizeof(int32_t));
    ctx_free(ctx, ctx->req, (size_t)ctx->cfg.max_requests, sizeof(request));
    ctx_free(ctx, ctx->round_reqs, (size_t)ctx->cfg.max_requests, sizeof(int32_t));
    ctx_free(ctx, ctx->work, (size_t)ctx->cfg.max_requests, sizeof(int32_t));
    ctx_free(ctx, ctx->work_tmp, (size_t)ctx->cfg.max_requests, sizeof(int32_t));
    ctx_free(ctx, ctx->work_on, (size_t)ctx->cfg.max_requests, 1);
    ctx_free(ctx, ctx->named, (size_t)ctx->cfg.max_requests, sizeof(uint32_t));
    ctx_free(ctx, ctx->repop, (size_t)ctx->repop_cap, sizeof(struct repop_ent));
    ctx_free(ctx, ctx->scratch_code, (size_t)ctx->cfg.spec_width * ctx->cfg.sel_k * ctx->cfg.max_requests, sizeof(int64_t));
    ctx_free(ctx, ctx->pairs, (size_t)ctx->cap_pairs, sizeof(dhs_copy_pair));
    free(ctx);
}

static int config_valid(const dhs_arch *a, const dhs_config *c)
{
    /* per-group hot-cache sizes: 0 (hot_rows) or a multiple of page_rows in
       [page_rows, 2^30] for a group of the architecture, 0 past n_groups */
    for (int g = 0; g < DHS_MAX_SOURCES; g++) {
        int32_t b = c->group_hot_rows[g];
        if (b == 0) continue;
        if (g >= a->n_groups || b < 0 || b > (1 << 30) || c->page_rows < 1 || b < c->page_rows || b % c->page_rows)
            return 0;
    }
    /* bounds first: no arithmetic below may overflow */
    if (c->sel_k > (1 << 24) || c->max_requests > (1 << 20) || c->spec_width > (1 << 16) || c->hot_rows > (1 << 30) ||
        c->tail_rows > (1 << 30) || c->max_rows > INT32_MAX)
        return 0;
    if (c->max_requests < 1 || c->sel_k < 1 || c->spec_width < 1 || c->page_rows < 1 || c->hot_rows < c->page_rows ||
        c->hot_rows % c->page_rows || c->tail_rows < c->page_rows || c->tail_rows % c->page_rows ||
        c->tail_rows < 2 * c->spec_width || c->max_rows < 1 || (int)c->policy < 0 || c->policy >= DHS_POLICY_COUNT_ ||
        (int)c->reclaim_order < 0 || c->reclaim_order >= DHS_RECLAIM_COUNT_ || c->repop_pages < 0 ||
        c->copy_threads < 0)
        return 0;
    /* device resolver: CLOCK-epoch policy only (a payload-free backend is refused by dhs_ctx_create) */
    if (c->resolver < 0 || c->resolver >= DHS_RESOLVER_COUNT_ ||
        (c->resolver == DHS_RESOLVER_DEVICE && c->policy != DHS_POLICY_CLOCK))
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
    if ((int64_t)c->spec_width * c->sel_k * calls > INT32_MAX) return DHS_ERR_INVALID_ARG;
    /* byte figures: every product and sum checked (row_bytes up to 2^32-16,
       page_rows up to 2^30, staging_arenas up to 2^31-1, reserve_bytes up to
       2^64-1); a figure past 2^64-1 can never fit a pool: DHS_ERR_TOO_LARGE */
    uint64_t t1, t2;
    z->row_stride = stride;
    z->page_bytes = (uint64_t)c->page_rows * stride; /* < 2^62 */
    uint64_t res_pages = c->reserve_bytes / z->page_bytes + (c->reserve_bytes % z->page_bytes != 0);
    if (__builtin_mul_overflow(res_pages, z->page_bytes, &z->reserve_bytes)) return DHS_ERR_TOO_LARGE;
    /* pages per request: sum over sources of (B_g + T) / p < 2^8 * 2^31 */
    uint64_t req_pages = 0;
    int32_t hot_min = INT32_MAX;
    for (int i = 0; i < a->n_sources; i++)
        req_pages += ((uint64_t)cfg_hot_rows(c, a->sources[i].group) + (uint64_t)c->tail_rows) / (uint64_t)c->page_rows;
    for (int g = 0; g < a->n_groups; g++)
        if (cfg_hot_rows(c, g) < hot_min) hot_min = cfg_hot_rows(c, g);
    if (__builtin_mul_overflow(req_pages, z->page_bytes, &z->request_bytes)) return DHS_ERR_TOO_LARGE;
    z->staging_rows_per_slot = (int64_t)c->spec_width * c->sel_k * calls;
    /* chi: one arena per source of the widest group unless set; none when a
       round's union can never exceed any group's hot cache */
    if (c->staging_arenas > 0) z->staging_arenas = c->staging_arenas;
    else if (c->staging_arenas == 0 && z->staging_rows_per_slot > hot_min) z->staging_arenas = widest;
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
    if (!config_valid(arch, cfg)) return DHS_ERR_INVALID_ARG;
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
    if (!config_valid(arch, c)) return DHS_ERR_INVALID_ARG;
    /* the device resolver's data plane moves bytes: no placement simulation */
    if (c->resolver == DHS_RESOLVER_DEVICE && be->payload_free) return DHS_ERR_INVALID_ARG;
    if (be_fault(be, DHS_FAULT_HOST_ALLOC)) return DHS_ERR_NOMEM;
    dhs_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return DHS_ERR_NOMEM;
    ctx->arch = *arch;
    ctx->cfg = *cfg;
    ctx->page_backups = page_backups_fit(cfg);
    ctx->be = be;
    ctx->pol = dhs_policy_get(cfg->policy);
    int32_t ng = arch->n_groups, ns = arch->n_sources;
    ctx->grp_m = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t));
    ctx->grp_nsrc = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t));
    ctx->grp_srcs = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t *));
    ctx->grp_max_rows = ctx_calloc(ctx, (size_t)ng, sizeof(int64_t));
    ctx->src_grp_idx = ctx_calloc(ctx, (size_t)ns, sizeof(int32_t));
    ctx->grp_src0 = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t));
    if (!ctx->grp_m || !ctx->grp_nsrc || !ctx->grp_srcs || !ctx->grp_max_rows || !ctx->src_grp_idx || !ctx->grp_src0)
        goto nomem;
    for (int i = 0; i < ns; i++) {
        const dhs_source_desc *d = &arch->sources[i];
        ctx->src_grp_idx[i] = ctx->grp_nsrc[d->group]++;
        ctx->grp_m[d->group] = (int32_t)d->m;
        if (d->row_bytes > ctx->row_stride) ctx->row_stride = d->row_bytes;
    }
    for (int g = 1; g < ng; g++) ctx->grp_src0[g] = ctx->grp_src0[g - 1] + ctx->grp_nsrc[g - 1];
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
    ctx->page_ref = ctx_calloc(ctx, (size_t)ctx->n_pages, sizeof(int32_t));
    ctx->deferred = ctx_calloc(ctx, (size_t)ctx->n_pages, sizeof(deferred_free));
    ctx->arenas = ctx_calloc(ctx, (size_t)ctx->n_arenas, sizeof(arena));
    ctx->grp_arena = ctx_calloc(ctx, (size_t)ng, sizeof(int32_t));
    ctx->req = ctx_calloc(ctx, (size_t)c->max_requests, sizeof(request));
    ctx->round_reqs = ctx_calloc(ctx, (size_t)c->max_requests, sizeof(int32_t));
    ctx->work = ctx_calloc(ctx, (size_t)c->max_requests, sizeof(int32_t));
    ctx->work_tmp = ctx_calloc(ctx, (size_t)c->max_requests, sizeof(int32_t));
    ctx->work_on = ctx_calloc(ctx, (size_t)c->max_requests, 1);
    ctx->named = ctx_calloc(ctx, (size_t)c->max_requests, sizeof(uint32_t));

    ctx->scratch_code = ctx_calloc(ctx, (size_t)c->spec_width * c->sel_k * c->max_requests, sizeof(int64_t));
    if (!ctx->free_pages || !ctx->page_use || !ctx->page_owner || !ctx->page_ref || !ctx->deferred || !ctx->arenas || !ctx->grp_arena || !ctx->req ||
        !ctx->round_reqs || !ctx->scratch_code || !ctx->work || !ctx->work_tmp || !ctx->work_on ||
        !ctx->named)
        goto nomem;
    if (c->host_cache_bytes > 0 && !ctx->be->payload_free) {
        /* room for the spans of every source of every slot, twice over (a request pins a source's rows in
           one span at import and may add spans as it grows) */
        const int64_t cap = 2 * (int64_t)c->max_requests * ctx->arch.n_sources + 16;
        ctx->hcache_cap = (int32_t)(cap < (1 << 20) ? cap : (1 << 20));
        ctx->hcache = ctx_calloc(ctx, (size_t)ctx->hcache_cap, sizeof(struct host_span));
        if (!ctx->hcache) goto nomem;
    }
    if (!ctx->be->payload_free) {
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
    /* every reader and copy completes before the memory they touch is freed (a split resolve's
       queue copies too: joined into the compute stream first) */
    if (ctx->dres) (void)dres_join_all(ctx);
    dhs_ticket t = 0;
    if (ctx->be->ops->record_readers(ctx->be, &t) == DHS_OK && t) ctx->be->ops->wait(ctx->be, t);
    ctx->round_open = 0; /* dhs_sync refuses an open round in device resolver mode */
    dhs_sync(ctx);
    ctx_free_all(ctx);
}

dhs_status dhs_ctx_set_policy_ops(dhs_ctx *ctx, const dhs_policy_ops *ops, void *user)
{
    if (!ctx || !ops) return DHS_ERR_INVALID_ARG;
    if (ctx->n_open) return DHS_ERR_STATE;
    ctx->pol = ops;
    ctx->pol_user = user;
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

/* ------------------------------------------------------------- stats */
dhs_status dhs_get_stats(const dhs_ctx *ctx, dhs_stats *out)
{
    if (!ctx || !out) return DHS_ERR_INVALID_ARG;
    dhs_stats st = ctx->st;
    if (ctx->dres) { /* synchronises */
        dhs_status s = dres_add_stats(ctx, &st);
        if (s != DHS_OK) return s;
    }
    *out = st;
    return DHS_OK;
}

dhs_status dhs_reset_stats(dhs_ctx *ctx)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (ctx->dres) {
        dhs_status s = dres_reset_stats(ctx);
        if (s != DHS_OK) return s;
    }
    memset(&ctx->st, 0, sizeof ctx->st);
    memset(ctx->hp_ns, 0, sizeof ctx->hp_ns);
    memset(ctx->hp_calls, 0, sizeof ctx->hp_calls);
    return DHS_OK;
}

const char *dhs_host_phase_str(dhs_host_phase p)
{
    static const char *const n[DHS_HP_COUNT_] = {"begin", "housekeeping", "repopulate", "tail_room", "publish",
                                                 "end",   "device",       "backup",     "resolve",   "sweep",
                                                 "advance", "fence", "background"};
    return (unsigned)p < DHS_HP_COUNT_ ? n[p] : "unknown";
}

dhs_status dhs_get_host_time(const dhs_ctx *ctx, uint64_t *ns, uint64_t *calls)
{
    if (!ctx) return DHS_ERR_INVALID_ARG;
    if (ns) memcpy(ns, ctx->hp_ns, sizeof ctx->hp_ns);
    if (calls) memcpy(calls, ctx->hp_calls, sizeof ctx->hp_calls);
    return DHS_OK;
}

dhs_status dhs_get_mem(const dhs_ctx *ctx, dhs_mem *out)
{
    if (!ctx || !out) return DHS_ERR_INVALID_ARG;
    uint64_t pb = (uint64_t)ctx->cfg.page_rows * ctx->row_stride;
    memset(out, 0, sizeof *out);
    out->pool_bytes = (uint64_t)ctx->n_pages * pb;
    out->required_bytes = (uint64_t)ctx->pages_req * pb;
    out->optional_bytes = (uint64_t)ctx->pages_opt * pb;
    out->reserve_bytes = (uint64_t)ctx->pages_res * pb;
    out->device_bytes_allocated = ctx->be->dev_bytes;
    out->host_bytes_allocated = ctx->be->host_bytes + ctx->meta_bytes;
    out->pages_total = ctx->n_pages;
    out->pages_free = ctx->n_free_pages;
    out->requests_open = ctx->n_open;
    out->host_bytes_cached = ctx->hcache_bytes;
    out->host_bytes_shared = ctx->sspan_bytes;
    out->device_bytes_shared = (uint64_t)ctx->pages_shared * pb;
    return DHS_OK;
}

dhs_status dhs_read_location(const dhs_ctx *ctx, int32_t source, int32_t loc, void *out)
{
    if (!ctx || !out) return DHS_ERR_INVALID_ARG;
    if (source < 0 || source >= ctx->arch.n_sources) return DHS_ERR_UNKNOWN_SOURCE;
    if (loc < 0 || loc >= ctx->n_pages * ctx->cfg.page_rows) return DHS_ERR_ROW_RANGE;
    if (ctx->be->payload_free) return DHS_ERR_STATE;
    return ctx->be->ops->copy_sync(ctx->be, out, pool_row(ctx, loc), ctx->arch.sources[source].row_bytes);
}
