/* cpu_backend.c - the reference backend: the device tier is emulated in host
 * memory. Compute-stream work (gathers) is synchronous. Side-stream copies and
 * reader fences can complete late: `async_delay` ticks after their issue (a
 * tick is one round), or at a random tick within that delay when
 * `random_order` is set, so ordering bugs in the core show without a GPU.
 * A late copy reads its source bytes when it executes, as a GPU copy would.
 */
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "util/rng.h"

typedef struct cpu_op {
    dhs_ticket t;
    uint64_t due;
    dhs_copy_pair *pairs; /* NULL for a reader fence */
    int64_t n;
    uint32_t row_bytes;
} cpu_op;

typedef struct cpu_impl {
    dhs_cpu_options opt;
    uint64_t now, next_ticket, rng;
    cpu_op *ops;
    int64_t n_ops, cap_ops;
    void **dst;      /* scratch: destinations of one gather */
    int64_t cap_dst;
    /* deferred copies of split resolves, one cursor per (context, group): keyed by the group's device
       state (its stats counters, an address inside that context's device allocation), so contexts
       sharing this backend keep their own; an entry is made by a split resolve and dropped when the
       memory of its key is freed */
    struct split_cur {
        const void *key;
        int32_t next; /* first source whose copies are still deferred (nsrc: none) */
    } *split;
    int32_t n_split, cap_split;
} cpu_impl;

static struct split_cur *split_find(cpu_impl *c, const void *key)
{
    for (int32_t i = 0; i < c->n_split; i++)
        if (c->split[i].key == key) return &c->split[i];
    return NULL;
}

static dhs_status cpu_dev_alloc(dhs_backend *be, size_t bytes, void **out)
{
    (void)be;
    size_t b = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, b ? b : 64);
    if (!p) return DHS_ERR_DEVICE_NOMEM;
    memset(p, 0xA5, b); /* poison: unwritten device rows never look valid */
    *out = p;
    return DHS_OK;
}

static void cpu_free(dhs_backend *be, void *p, size_t bytes)
{
    cpu_impl *c = be->impl;
    /* the split cursors of a context's groups go with its device state */
    for (int32_t i = 0; p && i < c->n_split;)
        if ((const uint8_t *)c->split[i].key >= (const uint8_t *)p && (const uint8_t *)c->split[i].key < (const uint8_t *)p + bytes)
            c->split[i] = c->split[--c->n_split];
        else
            i++;
    free(p);
}

static dhs_status cpu_host_alloc(dhs_backend *be, size_t bytes, void **out)
{
    (void)be;
    size_t b = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, b ? b : 64);
    if (!p) return DHS_ERR_NOMEM;
    memset(p, 0x5A, b);
    *out = p;
    return DHS_OK;
}

static void run_pairs(const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes)
{
    for (int64_t i = 0; i < n; i++) memcpy(pairs[i].dst, pairs[i].src, row_bytes);
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return (x > y) - (x < y);
}

/* A GPU gather runs its rows in parallel: two pairs with one destination race
   there. The reference backend refuses such a gather (a core bug) instead of
   hiding it behind in-order copies. */
static dhs_status cpu_gather(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes)
{
    cpu_impl *c = be->impl;
    if (n > c->cap_dst) {
        void **nd = realloc(c->dst, sizeof(void *) * (size_t)n);
        if (!nd) return DHS_ERR_NOMEM;
        c->dst = nd;
        c->cap_dst = n;
    }
    for (int64_t i = 0; i < n; i++) c->dst[i] = pairs[i].dst;
    qsort(c->dst, (size_t)n, sizeof(void *), cmp_ptr);
    for (int64_t i = 1; i < n; i++)
        if (c->dst[i] == c->dst[i - 1]) return DHS_ERR_BACKEND;
    run_pairs(pairs, n, row_bytes);
    return DHS_OK;
}

static dhs_status enqueue(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes, dhs_ticket *t)
{
    cpu_impl *c = be->impl;
    if (c->n_ops == c->cap_ops) {
        int64_t cap = c->cap_ops ? 2 * c->cap_ops : 64;
        cpu_op *no = realloc(c->ops, sizeof(cpu_op) * (size_t)cap);
        if (!no) return DHS_ERR_NOMEM;
        c->ops = no;
        c->cap_ops = cap;
    }
    cpu_op op = {.t = ++c->next_ticket, .n = n, .row_bytes = row_bytes};
    if (pairs) {
        op.pairs = malloc(sizeof(dhs_copy_pair) * (size_t)(n ? n : 1));
        if (!op.pairs) return DHS_ERR_NOMEM;
        memcpy(op.pairs, pairs, sizeof(dhs_copy_pair) * (size_t)n);
    }
    uint64_t d = (uint64_t)c->opt.async_delay;
    if (c->opt.random_order) d = dhs_rng_next(&c->rng) % (d + 1);
    op.due = c->now + d;
    c->ops[c->n_ops++] = op;
    *t = op.t;
    return DHS_OK;
}

static dhs_status cpu_copy_async(dhs_backend *be, const dhs_copy_pair *pairs, int64_t n, uint32_t row_bytes, dhs_ticket *t)
{
    cpu_impl *c = be->impl;
    if (c->opt.async_delay <= 0) {
        run_pairs(pairs, n, row_bytes);
        *t = 0;
        return DHS_OK;
    }
    return enqueue(be, pairs, n, row_bytes, t);
}

static dhs_status cpu_copy_sync(dhs_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    memmove(dst, src, bytes);
    return DHS_OK;
}

static dhs_status cpu_sync_compute(dhs_backend *be)
{
    (void)be; /* the compute stream's work (gathers, the device resolver's calls) runs inside each call */
    return DHS_OK;
}

static dhs_status cpu_copy_host_runs(dhs_backend *be, const dhs_copy_run *runs, int64_t n, int32_t threads)
{
    (void)be; /* every reader of host rows has run: the CPU backend's gathers copy at once */
    be_memcpy_runs(runs, n, threads);
    return DHS_OK;
}

static dhs_status cpu_record_readers(dhs_backend *be, dhs_ticket *t)
{
    cpu_impl *c = be->impl;
    if (c->opt.async_delay <= 0) {
        *t = 0;
        return DHS_OK;
    }
    return enqueue(be, NULL, 0, 0, t);
}

static void run_op(cpu_op *op)
{
    if (op->pairs) {
        run_pairs(op->pairs, op->n, op->row_bytes);
        free(op->pairs);
    }
}

/* The pending list stays in ticket order (tickets are issued increasing and
   removals keep the order), so find_op is a binary search: a context with
   thousands of copies in flight (C requests x 21 groups of tail backups)
   queries them without a scan per query. */
static void exec_at(cpu_impl *c, int64_t i)
{
    run_op(&c->ops[i]);
    memmove(c->ops + i, c->ops + i + 1, sizeof(cpu_op) * (size_t)(c->n_ops - i - 1));
    c->n_ops--;
}

/* executes every pending op with t <= upto (upto = 0: every op whose due time passed), keeping the order */
static void exec_where(cpu_impl *c, dhs_ticket upto)
{
    int64_t j = 0;
    for (int64_t i = 0; i < c->n_ops; i++) {
        if (upto ? c->ops[i].t <= upto : c->ops[i].due <= c->now) run_op(&c->ops[i]);
        else c->ops[j++] = c->ops[i];
    }
    c->n_ops = j;
}

static int64_t find_op(const cpu_impl *c, dhs_ticket t)
{
    int64_t lo = 0, hi = c->n_ops;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (c->ops[mid].t < t) lo = mid + 1; else hi = mid;
    }
    return lo < c->n_ops && c->ops[lo].t == t ? lo : -1;
}

static int cpu_done(dhs_backend *be, dhs_ticket t)
{
    return t == 0 || find_op(be->impl, t) < 0;
}

/* Waiting executes the op; without random order, every earlier op first (a
   stream completes in order). */
static dhs_status cpu_wait(dhs_backend *be, dhs_ticket t)
{
    cpu_impl *c = be->impl;
    if (t == 0) return DHS_OK;
    if (!c->opt.random_order) {
        int64_t k = 0; /* in ticket order: the ops up to t are a prefix */
        while (k < c->n_ops && c->ops[k].t <= t) run_op(&c->ops[k++]);
        memmove(c->ops, c->ops + k, sizeof(cpu_op) * (size_t)(c->n_ops - k));
        c->n_ops -= k;
        return DHS_OK;
    }
    int64_t i = find_op(c, t);
    if (i >= 0) exec_at(c, i);
    return DHS_OK;
}

/* Device resolver: the C specification (core/dres_cpu.c) on the emulated
   device tier. Compute-stream work is synchronous here; async_delay and
   random_order apply to side-stream copies and reader fences only. */
static dhs_status cpu_dres_resolve(dhs_backend *be, const dres_state *st, const dres_round *rd, int32_t k,
                                   const int32_t *sel, int32_t *loc, int payload, int mode)
{
    cpu_impl *c = be->impl;
    const int split = (mode & DRES_MODE_SPLIT) != 0;
    struct split_cur *cur = split_find(c, st->stats);
    if (split && !cur) { /* room first: a failure changes nothing */
        if (c->n_split == c->cap_split) {
            int32_t cap = c->cap_split ? 2 * c->cap_split : 16;
            struct split_cur *p = realloc(c->split, sizeof *p * (size_t)cap);
            if (!p) return DHS_ERR_NOMEM;
            c->split = p;
            c->cap_split = cap;
        }
        cur = &c->split[c->n_split++];
        cur->key = st->stats;
    }
    /* split: sources 1.. wait for dres_wait, so an engine that reads a
       source without waiting for it reads stale rows here too */
    dres_cpu_resolve(st, rd, k, sel, loc, payload, mode);
    if (cur) cur->next = split ? 1 : st->nsrc;
    return DHS_OK;
}

static dhs_status cpu_dres_init(dhs_backend *be, int32_t G, int32_t nsrc)
{
    (void)be;
    return G <= 0 || nsrc <= 0 ? DHS_ERR_INVALID_ARG : DHS_OK;
}

static dhs_status cpu_dres_wait(dhs_backend *be, const dres_state *st, const dres_round *rd, int32_t si)
{
    cpu_impl *c = be->impl;
    if (si < 0 || si >= st->nsrc) return DHS_ERR_INVALID_ARG;
    struct split_cur *cur = split_find(c, st->stats);
    if (!cur) return DHS_OK; /* this context's group never split: nothing deferred */
    for (; cur->next <= si; cur->next++) dres_cpu_copy_source(st, rd, cur->next);
    return DHS_OK;
}

static dhs_status cpu_dres_promote(dhs_backend *be, const dres_state *st, const dres_round *rd, int payload)
{
    (void)be;
    dres_cpu_promote(st, rd, payload);
    return DHS_OK;
}

static dhs_status cpu_dres_promote_all(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                       const dres_round *rd, int payload)
{
    (void)be;
    (void)st_host; /* the emulated device tier is host memory: the device array itself is read */
    for (int32_t g = 0; g < G; g++) dres_cpu_promote(&st_dev[g], rd, payload);
    return DHS_OK;
}

static dhs_status cpu_dres_tail_locs(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                     int32_t nsrc_max, int32_t n_round, const dres_round *rd, int32_t req_stride,
                                     int64_t src_stride, int32_t *loc)
{
    (void)be;
    (void)st_host;
    (void)nsrc_max;
    for (int32_t g = 0; g < G; g++)
        for (int32_t si = 0; si < st_dev[g].nsrc; si++)
            for (int32_t b = 0; b < n_round; b++) dres_tail_loc_one(&st_dev[g], rd, si, b, req_stride, src_stride, loc);
    return DHS_OK;
}

static dhs_status cpu_dres_page_tables(dhs_backend *be, const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                       int32_t nsrc_max, int32_t n_round, const dres_round *rd, int32_t page_stride,
                                       int64_t src_stride, int32_t *tab)
{
    (void)be;
    (void)st_host;
    (void)nsrc_max;
    for (int32_t g = 0; g < G; g++)
        for (int32_t si = 0; si < st_dev[g].nsrc; si++)
            for (int32_t b = 0; b < n_round; b++) dres_page_table_one(&st_dev[g], rd, si, b, page_stride, src_stride, tab, 0, 1);
    return DHS_OK;
}

static dhs_status cpu_dres_reset(dhs_backend *be, const dres_state *st, int32_t slot)
{
    (void)be;
    dres_cpu_reset(st, slot);
    return DHS_OK;
}

static dhs_status cpu_publish(dhs_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    memcpy(dst, src, bytes);
    return DHS_OK;
}

static dhs_status cpu_publish_list(dhs_backend *be, const dhs_pub *list, int32_t n)
{
    (void)be;
    if (n < 0 || (n > 0 && !list)) return DHS_ERR_INVALID_ARG;
    for (int32_t i = 0; i < n; i++)
        memcpy((void *)(uintptr_t)list[i].dst, (const void *)(uintptr_t)list[i].src, (size_t)list[i].bytes);
    return DHS_OK;
}

static void cpu_tick(dhs_backend *be)
{
    cpu_impl *c = be->impl;
    c->now++;
    exec_where(c, 0);
}

static void cpu_destroy(dhs_backend *be)
{
    cpu_impl *c = be->impl;
    exec_where(c, UINT64_MAX);
    free(c->split);
    free(c->ops);
    free(c->dst);
    free(c);
    free(be);
}

static const dhs_backend_ops cpu_ops = {
    .name = "cpu",
    .dev_alloc = cpu_dev_alloc,
    .dev_free = cpu_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_free,
    .gather_h2d = cpu_gather,
    .copy_rows_async = cpu_copy_async,
    .copy_sync = cpu_copy_sync,
    .sync_compute = cpu_sync_compute,
    .copy_host_runs = cpu_copy_host_runs,
    .record_readers = cpu_record_readers,
    .done = cpu_done,
    .wait = cpu_wait,
    .dres_init = cpu_dres_init,
    .dres_resolve = cpu_dres_resolve,
    .dres_wait = cpu_dres_wait,
    .dres_promote = cpu_dres_promote,
    .dres_promote_all = cpu_dres_promote_all,
    .dres_tail_locs = cpu_dres_tail_locs,
    .dres_page_tables = cpu_dres_page_tables,
    .dres_reset = cpu_dres_reset,
    .publish = cpu_publish,
    .publish_list = cpu_publish_list,
    .tick = cpu_tick,
    .destroy = cpu_destroy,
};

dhs_status dhs_backend_cpu_create(const dhs_cpu_options *opt, dhs_backend **out)
{
    if (!out) return DHS_ERR_INVALID_ARG;
    *out = NULL;
    if (opt && opt->async_delay < 0) return DHS_ERR_INVALID_ARG;
    dhs_backend *be = malloc(sizeof *be);
    cpu_impl *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return DHS_ERR_NOMEM;
    }
    if (opt) c->opt = *opt;
    c->rng = c->opt.seed ^ 0x5eedULL;
    be_init_common(be, &cpu_ops, c);
    be->payload_free = c->opt.payload_free != 0;
    *out = be;
    return DHS_OK;
}
