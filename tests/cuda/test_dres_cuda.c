/* test_dres_cuda.c - the device resolver's CUDA kernels (src/cuda/dres.cu)
 * against its C specification (core/dres_cpu.c), bit for bit, after every
 * call.
 *
 * Each configuration builds the same random dres_state twice inside one flat
 * arena with identical offsets: once in host memory for dres_cpu_* and once
 * in device memory for the CUDA backend's dres_resolve / dres_promote /
 * dres_reset ops (round descriptors go through the backend's publish op). The
 * host history is ONE mapped pinned buffer that both read, with the chunks of
 * every (request, source) scattered through it. Then it drives random rounds:
 * requests with growing histories, K queries of k entries with locality,
 * duplicates, padding and rare bad entries (range, visibility), REINDEX
 * (several resolve calls in one round), group_done promotions in the middle of
 * a round and at its end, staging overflow (small or absent arenas, small
 * hot caches), table changes between rounds like a reclaim (optional pages
 * becoming ready or not, tail windows moving), slot resets. After every call
 * the whole device arena is read back and compared with the CPU's: locations,
 * codes, distinct misses, victims, slot_of / row_of / used / ref / meta /
 * staged rows, pair counts, stats and the error word; the copy lists are
 * compared pair by pair with pool addresses translated to offsets from each
 * side's pool base (host addresses are the same buffer on both sides); with
 * payload, the two pools are compared byte for byte every few calls and at
 * the end of each configuration.
 *
 * No GPU (or built without CUDA): exits 77, which CMake maps to a skip.
 * Every fourth configuration runs the plan kernel's block-wide miss path only
 * (DRES_PLAN_BLOCK_ONLY), another fourth the few-miss path leaving its rows
 * to the copy kernel (DRES_PLAN_COPY_KERNEL), the others the library's
 * default: the few-miss path, copying its own rows, where a request has at
 * most 64 miss entries. Every seventh call runs in direct mode
 * (DRES_MODE_DIRECT). All must make the specification's decisions and move
 * the same bytes.
 * DHS_TEST_SEED fixes the seed, DHS_TEST_SCALE scales the number of calls
 * (default >= 100000 calls).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_help.h"

#ifndef DHS_HAVE_CUDA
TH_MAIN_WITHOUT_CUDA
#else

#include <cuda_runtime_api.h>

#include "core/backend.h"
#include "cuda/dres.cuh"
#include "dhs_cuda.h"

/* Harness self-check (DHS_DRES_SELFTEST=1, no GPU needed): the "device"
   side is a second host arena driven by the same CPU loops, so any
   difference found is a harness bug; it runs the whole workload under
   ASan. It never counts as the GPU test. */
static int g_self;

static cudaError_t x_copy(void *dst, const void *src, size_t n)
{
    if (g_self) {
        memcpy(dst, src, n);
        return cudaSuccess;
    }
    return cudaMemcpy(dst, src, n, cudaMemcpyDefault);
}
static cudaError_t x_copy_async(void *dst, const void *src, size_t n, cudaStream_t s)
{
    if (g_self) {
        memcpy(dst, src, n);
        return cudaSuccess;
    }
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s);
}
static cudaError_t x_malloc(void **p, size_t n)
{
    if (g_self) {
        *p = calloc(1, n);
        return *p ? cudaSuccess : cudaErrorMemoryAllocation;
    }
    return cudaMalloc(p, n);
}
static cudaError_t x_host_alloc(void **p, size_t n)
{
    if (g_self) {
        *p = calloc(1, n);
        return *p ? cudaSuccess : cudaErrorMemoryAllocation;
    }
    return cudaHostAlloc(p, n, cudaHostAllocMapped | cudaHostAllocPortable);
}
static void x_free(void *p) { g_self ? free(p) : (void)cudaFree(p); }
static void x_host_free(void *p) { g_self ? free(p) : (void)cudaFreeHost(p); }

/* ------------------------------------------------------------- rng */
static uint64_t g_rng;
static uint64_t rnd(void)
{
    g_rng += 0x9e3779b97f4a7c15ull;
    return dhs_mix64(g_rng);
}
static int64_t rndi(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}
static int chance(double p) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0) < p; }

/* ------------------------------------------------------------- arena layout */
enum {
    A_SLOT_OF, A_ROW_OF, A_USED, A_REF, A_META, A_STAGED, A_HOTP, A_TAILP, A_OPTP, A_OPTR, A_CHUNKS, A_ARENA,
    A_DMISS, A_NDMISS, A_VICTIM, A_PAIRS, A_NPAIRS, A_CODE, A_STATS, A_ERR, A_OWNER, A_LOC, A_RD, A_SEL, A_COUNT
};
static const char *a_name[A_COUNT] = {"slot_of", "row_of", "used", "ref", "meta", "staged_row", "hot_pages",
                                      "tail_pages", "opt_pages", "opt_ready", "host_chunks", "arena_page",
                                      "dmiss", "ndmiss", "victim", "pairs", "npairs", "code", "stats", "err",
                                      "stage_owner", "loc", "rd", "sel"};
static const size_t a_elem[A_COUNT] = {4, 4, 4, 1, 4, 4, 4, 4, 4, 1, 8, 4, 4, 4, 4, 8, 4, 8, 8, 4, 4, 4, 1, 4};

typedef struct cfg {
    int32_t N, B, T, p, nsrc, m, k_max, max_k, stage_rows, n_groups, group;
    int64_t max_rows, max_opt_pages, host_chunk_rows, n_host_chunks;
    uint32_t row_stride;
    int payload, no_arena;
} cfg;

typedef struct world {
    cfg c;
    size_t off[A_COUNT], cnt[A_COUNT], bytes;
    uint8_t *h, *g, *mirror;  /* CPU arena, device arena, read-back of the device arena */
    uint8_t *hpool, *gpool, *gpool_mirror;
    size_t pool_bytes;
    uint8_t *host;            /* pinned mapped history, shared */
    size_t host_bytes;
    void *rd_pinned;          /* publish source */
    dres_state cst, gst;
    int64_t *n;               /* [N] history length per slot */
    int32_t **ws;             /* [N] working set rows per slot */
    int32_t ws_n;
    dhs_backend *be;
    cudaStream_t s;
    long calls;
} world;

#define AP(w, base, a) ((void *)((base) + (w)->off[a]))

static int layout(world *w)
{
    const cfg *c = &w->c;
    const int64_t N = c->N, per = (int64_t)c->k_max * c->max_k;
    w->cnt[A_SLOT_OF] = (size_t)(N * c->max_rows);
    w->cnt[A_ROW_OF] = w->cnt[A_USED] = w->cnt[A_REF] = (size_t)(N * c->B);
    w->cnt[A_META] = (size_t)(N * DRES_META);
    w->cnt[A_STAGED] = (size_t)(N * (c->stage_rows > 0 ? c->stage_rows : 1));
    w->cnt[A_HOTP] = (size_t)(N * c->nsrc * (c->B / c->p));
    w->cnt[A_TAILP] = (size_t)(N * c->nsrc * (c->T / c->p));
    w->cnt[A_OPTP] = (size_t)(N * c->nsrc * c->max_opt_pages);
    w->cnt[A_OPTR] = (size_t)(N * c->max_opt_pages);
    w->cnt[A_CHUNKS] = (size_t)(N * c->nsrc * c->n_host_chunks);
    w->cnt[A_ARENA] = (size_t)c->nsrc;
    w->cnt[A_DMISS] = w->cnt[A_VICTIM] = (size_t)(N * per);
    w->cnt[A_NDMISS] = w->cnt[A_NPAIRS] = (size_t)N;
    w->cnt[A_PAIRS] = (size_t)(N * per * c->nsrc * 2);
    w->cnt[A_CODE] = (size_t)(N * per);
    w->cnt[A_STATS] = DRES_S_COUNT;
    w->cnt[A_ERR] = 1;
    w->cnt[A_OWNER] = 1;
    w->cnt[A_LOC] = (size_t)(c->nsrc * N * per);
    w->cnt[A_RD] = 256 + (size_t)N * 8 + 8 + (size_t)N * 8 + (size_t)c->n_groups * N * 8 + 64;
    w->cnt[A_SEL] = (size_t)(N * per);
    size_t o = 0;
    for (int a = 0; a < A_COUNT; a++) {
        o = (o + 255) & ~(size_t)255;
        w->off[a] = o;
        o += w->cnt[a] * a_elem[a];
    }
    w->bytes = (o + 255) & ~(size_t)255;
    return 0;
}

static void bind_state(world *w, dres_state *st, uint8_t *base, uint8_t *pool)
{
    const cfg *c = &w->c;
    memset(st, 0, sizeof *st);
    st->group = c->group;
    st->N = c->N;
    st->B = c->B;
    st->T = c->T;
    st->p = c->p;
    st->nsrc = c->nsrc;
    st->m = c->m;
    st->spec_width = c->k_max;
    st->sel_k = c->max_k;
    st->row_stride = c->row_stride;
    st->max_rows = c->max_rows;
    st->max_opt_pages = c->max_opt_pages;
    st->host_chunk_rows = c->host_chunk_rows;
    st->n_host_chunks = c->n_host_chunks;
    st->stage_rows = c->stage_rows;
    st->slot_of = AP(w, base, A_SLOT_OF);
    st->row_of = AP(w, base, A_ROW_OF);
    st->used = AP(w, base, A_USED);
    st->ref = AP(w, base, A_REF);
    st->meta = AP(w, base, A_META);
    st->staged_row = AP(w, base, A_STAGED);
    st->hot_pages = AP(w, base, A_HOTP);
    st->tail_pages = AP(w, base, A_TAILP);
    st->opt_pages = AP(w, base, A_OPTP);
    st->opt_ready = AP(w, base, A_OPTR);
    st->host_chunks = AP(w, base, A_CHUNKS);
    st->arena_page = AP(w, base, A_ARENA);
    st->dmiss = AP(w, base, A_DMISS);
    st->ndmiss = AP(w, base, A_NDMISS);
    st->victim = AP(w, base, A_VICTIM);
    st->pairs = AP(w, base, A_PAIRS);
    st->npairs = AP(w, base, A_NPAIRS);
    st->code = AP(w, base, A_CODE);
    st->stats = AP(w, base, A_STATS);
    st->err = AP(w, base, A_ERR);
    st->stage_owner = AP(w, base, A_OWNER);
    st->pool = pool;
}

static void random_cfg(cfg *c)
{
    static const int32_t ps[] = {1, 2, 4, 8, 16, 64};
    memset(c, 0, sizeof *c);
    c->N = (int32_t)rndi(1, 8);
    c->nsrc = (int32_t)rndi(1, 4);
    c->m = (int32_t)rndi(1, 4);
    c->k_max = (int32_t)rndi(1, 8);
    c->max_k = chance(0.05) ? 2048 : (int32_t)(chance(0.5) ? rndi(1, 64) : rndi(65, 400));
    if (c->max_k == 2048 && c->N > 3) c->N = 3;
    c->p = ps[rndi(0, 5)];
    c->B = c->p * (int32_t)(chance(0.6) ? rndi(1, 96 / c->p + 1) : rndi(1, 1024 / c->p + 1));
    c->T = c->p * (int32_t)rndi(1, 64 / c->p + 1);
    c->max_rows = chance(0.3) ? rndi(32, 300) : rndi(300, 3000);
    c->max_opt_pages = chance(0.2) ? rndi(0, (c->max_rows + c->p - 1) / c->p) : (c->max_rows + c->p - 1) / c->p;
    c->host_chunk_rows = chance(0.5) || c->max_rows <= 64 ? rndi(1, c->max_rows < 64 ? c->max_rows : 64)
                                                          : rndi(64, c->max_rows);
    c->n_host_chunks = (c->max_rows + c->host_chunk_rows - 1) / c->host_chunk_rows;
    const int32_t full = c->k_max * c->max_k;
    c->stage_rows = chance(0.4) ? full : (int32_t)rndi(0, full / 4 + 1);
    c->no_arena = chance(0.1);
    c->n_groups = (int32_t)rndi(1, 3);
    c->group = (int32_t)rndi(0, c->n_groups - 1);
    c->row_stride = chance(0.1) ? 656u : 16u * (uint32_t)rndi(1, 4);
    c->payload = chance(0.85);
}

static void print_cfg(const cfg *c)
{
    printf("  cfg N=%d B=%d T=%d p=%d nsrc=%d m=%d K=%d k=%d rows=%lld opt_pages=%lld chunk=%lld stage=%d%s "
           "groups=%d/%d row=%u payload=%d\n",
           c->N, c->B, c->T, c->p, c->nsrc, c->m, c->k_max, c->max_k, (long long)c->max_rows,
           (long long)c->max_opt_pages, (long long)c->host_chunk_rows, c->stage_rows, c->no_arena ? " (no arena)" : "",
           c->group, c->n_groups, c->row_stride, c->payload);
}

#define CU(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));             \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static void world_free(world *w)
{
    if (w->s && !g_self) cudaStreamSynchronize(w->s);
    free(w->h);
    free(w->mirror);
    free(w->hpool);
    free(w->gpool_mirror);
    if (w->g) x_free(w->g);
    if (w->gpool) x_free(w->gpool);
    if (w->host) x_host_free(w->host);
    if (w->rd_pinned) x_host_free(w->rd_pinned);
    if (w->ws)
        for (int32_t i = 0; i < w->c.N; i++) free(w->ws[i]);
    free(w->ws);
    free(w->n);
    w->h = w->mirror = w->hpool = w->gpool_mirror = w->g = w->gpool = w->host = NULL;
    w->rd_pinned = NULL;
    w->ws = NULL;
    w->n = NULL;
}

/* ------------------------------------------------------------- build */
static void shuffle64(int64_t *a, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int world_build(world *w)
{
    cfg *c = &w->c;
    layout(w);
    w->h = calloc(1, w->bytes);
    w->mirror = calloc(1, w->bytes);
    w->n = calloc((size_t)c->N, sizeof *w->n);
    w->ws_n = (int32_t)(c->B + c->B / 2 + 4);
    w->ws = calloc((size_t)c->N, sizeof *w->ws);
    if (!w->h || !w->mirror || !w->n || !w->ws) return -1;
    for (int32_t r = 0; r < c->N; r++) {
        w->ws[r] = malloc((size_t)w->ws_n * sizeof(int32_t));
        if (!w->ws[r]) return -1;
        for (int32_t i = 0; i < w->ws_n; i++) w->ws[r][i] = (int32_t)rndi(0, c->max_rows - 1);
        w->n[r] = rndi(0, c->max_rows * c->m);
    }
    /* pool pages: hot, tail, optional shuffled; arenas after them */
    const int64_t hotp = (int64_t)c->N * c->nsrc * (c->B / c->p), tailp = (int64_t)c->N * c->nsrc * (c->T / c->p),
                  optp = (int64_t)c->N * c->nsrc * c->max_opt_pages;
    const int64_t np0 = hotp + tailp + optp;
    const int64_t arena_pages = ((int64_t)c->N * c->stage_rows + c->p - 1) / c->p + 1;
    const int64_t pages = np0 + (int64_t)c->nsrc * arena_pages;
    w->pool_bytes = (size_t)(pages * c->p) * c->row_stride;
    int64_t *perm = malloc((size_t)(np0 > 0 ? np0 : 1) * sizeof *perm);
    if (!perm) return -1;
    for (int64_t i = 0; i < np0; i++) perm[i] = i;
    shuffle64(perm, np0);
    int32_t *hp = AP(w, w->h, A_HOTP), *tp = AP(w, w->h, A_TAILP), *op = AP(w, w->h, A_OPTP);
    for (int64_t i = 0; i < hotp; i++) hp[i] = (int32_t)perm[i];
    for (int64_t i = 0; i < tailp; i++) tp[i] = (int32_t)perm[hotp + i];
    for (int64_t i = 0; i < optp; i++) op[i] = (int32_t)perm[hotp + tailp + i];
    free(perm);
    int32_t *ap = AP(w, w->h, A_ARENA);
    for (int32_t si = 0; si < c->nsrc; si++) ap[si] = c->no_arena ? -1 : (int32_t)(np0 + si * arena_pages);
    /* host history: chunks of every (slot, source) scattered in one pinned buffer */
    const int64_t nch = (int64_t)c->N * c->nsrc * c->n_host_chunks;
    w->host_bytes = (size_t)(nch * c->host_chunk_rows) * c->row_stride;
    CU(x_host_alloc((void **)&w->host, w->host_bytes));
    for (size_t i = 0; i < w->host_bytes / 8; i++) ((uint64_t *)w->host)[i] = rnd();
    int64_t *cp = malloc((size_t)nch * sizeof *cp);
    if (!cp) return -1;
    for (int64_t i = 0; i < nch; i++) cp[i] = i;
    shuffle64(cp, nch);
    uint64_t *ch = AP(w, w->h, A_CHUNKS);
    for (int64_t i = 0; i < nch; i++)
        ch[i] = (uint64_t)(uintptr_t)(w->host + (size_t)(cp[i] * c->host_chunk_rows) * c->row_stride);
    free(cp);
    /* hot state empty */
    int32_t *so = AP(w, w->h, A_SLOT_OF), *ro = AP(w, w->h, A_ROW_OF);
    for (size_t i = 0; i < w->cnt[A_SLOT_OF]; i++) so[i] = -1;
    for (size_t i = 0; i < w->cnt[A_ROW_OF]; i++) ro[i] = -1;
    *(int32_t *)AP(w, w->h, A_OWNER) = -1;
    /* pools with the same random bytes */
    w->hpool = malloc(w->pool_bytes);
    w->gpool_mirror = malloc(w->pool_bytes);
    if (!w->hpool || !w->gpool_mirror) return -1;
    for (size_t i = 0; i < w->pool_bytes / 8; i++) ((uint64_t *)w->hpool)[i] = rnd();
    CU(x_malloc((void **)&w->g, w->bytes));
    CU(x_malloc((void **)&w->gpool, w->pool_bytes));
    CU(x_copy(w->g, w->h, w->bytes));
    CU(x_copy(w->gpool, w->hpool, w->pool_bytes));
    CU(x_host_alloc(&w->rd_pinned, w->cnt[A_RD]));
    bind_state(w, &w->cst, w->h, w->hpool);
    bind_state(w, &w->gst, w->g, w->gpool);
    return 0;
}

/* ------------------------------------------------------------- compare */
static uint64_t xlate(const world *w, uint64_t v, const uint8_t *pool)
{
    if (v >= (uint64_t)(uintptr_t)pool && v < (uint64_t)(uintptr_t)pool + w->pool_bytes)
        return (1ull << 62) | (v - (uint64_t)(uintptr_t)pool);
    if (v >= (uint64_t)(uintptr_t)w->host && v < (uint64_t)(uintptr_t)w->host + w->host_bytes)
        return (2ull << 62) | (v - (uint64_t)(uintptr_t)w->host);
    return v;
}

static const char *g_what;
static long g_errs[32]; /* error words seen, by code */
static long g_direct_calls;

/* 0 = identical */
static int compare(world *w, int32_t k, int check_pool)
{
    const cfg *c = &w->c;
    if (!g_self && cudaStreamSynchronize(w->s) != cudaSuccess) {
        CHECKF(0, "kernel failed: %s", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    if (x_copy(w->mirror, w->g, w->off[A_RD]) != cudaSuccess) {
        CHECKF(0, "read-back failed");
        return 1;
    }
    int bad = 0;
    for (int a = 0; a < A_RD && !bad; a++) {
        if (a == A_PAIRS) continue;
        size_t n = w->cnt[a] * a_elem[a];
        if (a == A_LOC) n = (size_t)c->nsrc * c->N * c->k_max * k * 4;
        const uint8_t *x = w->h + w->off[a], *y = w->mirror + w->off[a];
        if (memcmp(x, y, n) == 0) continue;
        size_t i = 0;
        while (i < n && x[i] == y[i]) i++;
        const size_t el = i / a_elem[a];
        long long xv = 0, yv = 0;
        memcpy(&xv, x + el * a_elem[a], a_elem[a]);
        memcpy(&yv, y + el * a_elem[a], a_elem[a]);
        if (a_elem[a] == 4) {
            xv = (int32_t)xv;
            yv = (int32_t)yv;
        }
        CHECKF(0, "call %ld (%s): %s[%zu] cpu %lld gpu %lld", w->calls, g_what, a_name[a], el, xv, yv);
        bad = 1;
    }
    /* copy lists, translated */
    const int32_t *np = AP(w, w->h, A_NPAIRS);
    const int64_t per = (int64_t)c->k_max * c->max_k * c->nsrc * 2;
    for (int32_t r = 0; r < c->N && !bad; r++) {
        const uint64_t *x = (const uint64_t *)AP(w, w->h, A_PAIRS) + r * per;
        const uint64_t *y = (const uint64_t *)AP(w, w->mirror, A_PAIRS) + r * per;
        for (int64_t i = 0; i < 2 * (int64_t)np[r]; i++) {
            const uint64_t xv = xlate(w, x[i], w->hpool), yv = xlate(w, y[i], w->gpool);
            if (xv != yv) {
                CHECKF(0, "call %ld (%s): slot %d pair %lld.%lld cpu %llx gpu %llx", w->calls, g_what, r,
                       (long long)(i / 2), (long long)(i % 2), (unsigned long long)xv, (unsigned long long)yv);
                bad = 1;
                break;
            }
        }
    }
    if (!bad && check_pool && c->payload) {
        if (x_copy(w->gpool_mirror, w->gpool, w->pool_bytes) != cudaSuccess) return 1;
        if (memcmp(w->hpool, w->gpool_mirror, w->pool_bytes) != 0) {
            size_t i = 0;
            while (w->hpool[i] == w->gpool_mirror[i]) i++;
            CHECKF(0, "call %ld (%s): pool differs at row %zu", w->calls, g_what, i / c->row_stride);
            bad = 1;
        }
    }
    if (!bad) CHECK(1);
    return bad;
}

/* ------------------------------------------------------------- drive */
static int publish_rd(world *w)
{
    /* the CPU arena's descriptor goes to the device through the backend */
    memcpy(w->rd_pinned, w->h + w->off[A_RD], w->cnt[A_RD]);
    dhs_status s = g_self ? (x_copy(w->g + w->off[A_RD], w->rd_pinned, w->cnt[A_RD]), DHS_OK)
                          : w->be->ops->publish(w->be, w->g + w->off[A_RD], w->rd_pinned, w->cnt[A_RD]);
    CHECK_ST(s, DHS_OK);
    return s == DHS_OK ? 0 : -1;
}

static void build_round(world *w, uint32_t epoch, int32_t *slots_out, int32_t *nr_out)
{
    const cfg *c = &w->c;
    dres_round *rd = (dres_round *)(w->h + w->off[A_RD]);
    const int32_t N = c->N;
    int32_t perm[8];
    for (int32_t i = 0; i < N; i++) perm[i] = i;
    for (int32_t i = N - 1; i > 0; i--) {
        int32_t j = (int32_t)rndi(0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    const int32_t nr = chance(0.1) ? 0 : (int32_t)rndi(1, N);
    memset(rd, 0, w->cnt[A_RD]);
    rd->n_round = nr;
    rd->epoch = epoch;
    rd->n_groups = c->n_groups;
    rd->off_slot = 256;
    rd->off_K = rd->off_slot + (int64_t)N * 4;
    rd->off_n = (rd->off_K + (int64_t)N * 4 + 7) & ~(int64_t)7;
    rd->off_tail_lo = rd->off_n + (int64_t)N * 8;
    rd->bytes = rd->off_tail_lo + (int64_t)c->n_groups * N * 8;
    int32_t *sl = (int32_t *)((char *)rd + rd->off_slot), *K = (int32_t *)((char *)rd + rd->off_K);
    int64_t *n = (int64_t *)((char *)rd + rd->off_n), *tl = (int64_t *)((char *)rd + rd->off_tail_lo);
    for (int32_t b = 0; b < N; b++) {
        const int32_t r = perm[b];
        sl[b] = b < nr ? r : -1;
        K[b] = (int32_t)rndi(1, c->k_max);
        /* the history grows by a few tokens a round */
        if (b < nr) {
            w->n[r] += rndi(0, 3);
            if (w->n[r] > c->max_rows * c->m) w->n[r] = c->max_rows * c->m;
        }
        n[b] = b < nr ? w->n[r] : 0;
        for (int32_t g = 0; g < c->n_groups; g++) {
            const int64_t rows = (n[b] + 1) / c->m;
            int64_t lo = rows - rndi(0, c->T);
            if (chance(0.1)) lo = rows + 5; /* no tail */
            tl[(int64_t)g * N + b] = lo < 0 ? 0 : lo;
        }
    }
    *nr_out = nr;
    memcpy(slots_out, sl, (size_t)N * sizeof(int32_t));
}

static void build_sel(world *w, int32_t k, int bad_entry)
{
    const cfg *c = &w->c;
    const dres_round *rd = (const dres_round *)(w->h + w->off[A_RD]);
    int32_t *sel = AP(w, w->h, A_SEL);
    const int32_t KK = c->k_max;
    for (int32_t b = 0; b < c->N; b++) {
        const int32_t r = b < rd->n_round ? dres_rd_slot(rd, b) : -1;
        const int64_t n = b < rd->n_round ? dres_rd_n(rd, b) : 0;
        for (int32_t j = 0; j < KK; j++)
            for (int32_t e = 0; e < k; e++) {
                int32_t *x = &sel[((int64_t)b * KK + j) * k + e];
                const int64_t lim = (n + j + 1) / c->m; /* rows [0, lim) visible to query j */
                const int64_t lim0 = (n + 1) / c->m;
                if (r < 0 || lim0 <= 0 || chance(0.04)) {
                    *x = chance(0.5) || r < 0 ? -1 : (int32_t)rndi(0, 3); /* padding, or maybe invisible */
                    if (r >= 0 && lim0 <= 0 && *x >= 0) *x = -1;
                    continue;
                }
                int64_t s;
                const double u = (double)(rnd() % 1000) / 1000.0;
                if (u < 0.6) s = w->ws[r][rnd() % (uint64_t)w->ws_n];
                else if (u < 0.95) s = rndi(0, lim0 - 1);
                else s = lim - 1;
                if (s >= lim) s %= lim0;
                if (s >= c->max_rows) s = c->max_rows - 1;
                *x = (int32_t)s;
            }
        if (bad_entry && b < rd->n_round) {
            const int32_t j = (int32_t)rndi(0, KK - 1), e = (int32_t)rndi(0, k - 1);
            int32_t *x = &sel[((int64_t)b * KK + j) * k + e];
            switch (rndi(0, 2)) {
            case 0: *x = (int32_t)-rndi(2, 9); break;
            case 1: *x = (int32_t)(c->max_rows + rndi(0, 5)); break;
            default: *x = (int32_t)((n + j + 1) / c->m + rndi(0, 2)); break; /* not visible */
            }
        }
    }
}

static int do_resolve(world *w, int32_t k)
{
    const cfg *c = &w->c;
    build_sel(w, k, chance(0.01));
    const size_t sb = (size_t)c->N * c->k_max * k * 4;
    if (x_copy_async(w->g + w->off[A_SEL], w->h + w->off[A_SEL], sb, w->s) != cudaSuccess)
        return -1;
    const dres_round *hrd = (const dres_round *)(w->h + w->off[A_RD]);
    const dres_round *grd = (const dres_round *)(w->g + w->off[A_RD]);
    /* every seventh call in direct mode (DRES_MODE_DIRECT: the direct kernel alone, its last block storing
       the error word; entries not served directly are DHS_ERR_STATE); chosen without the RNG */
    const int mode = w->calls % 7 == 3 ? DRES_MODE_DIRECT : 0;
    g_direct_calls += mode != 0;
    dres_cpu_resolve(&w->cst, hrd, k, AP(w, w->h, A_SEL), AP(w, w->h, A_LOC), c->payload, mode);
    dhs_status s = DHS_OK;
    if (g_self) dres_cpu_resolve(&w->gst, grd, k, AP(w, w->g, A_SEL), AP(w, w->g, A_LOC), c->payload, mode);
    else s = w->be->ops->dres_resolve(w->be, &w->gst, grd, k, AP(w, w->g, A_SEL), AP(w, w->g, A_LOC), c->payload, mode);
    CHECK_ST(s, DHS_OK);
    w->calls++;
    g_what = "resolve";
    return compare(w, k, w->calls % 8 == 0);
}

static int do_promote(world *w, int32_t k)
{
    const cfg *c = &w->c;
    dres_cpu_promote(&w->cst, (const dres_round *)(w->h + w->off[A_RD]), c->payload);
    dhs_status s = DHS_OK;
    if (g_self) dres_cpu_promote(&w->gst, (const dres_round *)(w->g + w->off[A_RD]), c->payload);
    else s = w->be->ops->dres_promote(w->be, &w->gst, (const dres_round *)(w->g + w->off[A_RD]), c->payload);
    CHECK_ST(s, DHS_OK);
    w->calls++;
    g_what = "promote";
    return compare(w, k, 1);
}

static int do_reset(world *w, int32_t r, int32_t k)
{
    dres_cpu_reset(&w->cst, r);
    dhs_status s = DHS_OK;
    if (g_self) dres_cpu_reset(&w->gst, r);
    else s = w->be->ops->dres_reset(w->be, &w->gst, r);
    CHECK_ST(s, DHS_OK);
    w->calls++;
    g_what = "reset";
    return compare(w, k, 0);
}

/* between rounds: optional pages become ready or are reclaimed; a slot is
   reset (a new request); the error word is reported and cleared */
static int between_rounds(world *w, int32_t k)
{
    const cfg *c = &w->c;
    uint8_t *ready = AP(w, w->h, A_OPTR);
    int changed = 0;
    if (c->max_opt_pages > 0 && chance(0.3)) {
        const int flips = (int)rndi(1, 8);
        for (int i = 0; i < flips; i++) {
            const int64_t j = (int64_t)(rnd() % w->cnt[A_OPTR]);
            ready[j] = chance(0.5);
        }
        changed = 1;
    }
    if (changed && x_copy(w->g + w->off[A_OPTR], ready, w->cnt[A_OPTR]) != cudaSuccess)
        return -1;
    /* the arenas held by another group's staged rows for a while (the owner
       word is shared by every group's state), or free again */
    int32_t *owner = AP(w, w->h, A_OWNER);
    if (chance(0.1)) {
        *owner = chance(0.5) ? -1 : (c->group + (int32_t)rndi(1, 3)) % (c->n_groups + 3);
        if (*owner == c->group) *owner = -1;
        if (x_copy(w->g + w->off[A_OWNER], owner, 4) != cudaSuccess) return -1;
    }
    if (chance(0.03)) {
        const int32_t r = (int32_t)rndi(0, c->N - 1);
        w->n[r] = rndi(0, c->max_rows * c->m / 4);
        if (do_reset(w, r, k)) return 1;
    }
    /* the working sets drift */
    for (int32_t r = 0; r < c->N; r++)
        for (int i = 0; i < 3; i++) w->ws[r][rnd() % (uint64_t)w->ws_n] = (int32_t)rndi(0, c->max_rows - 1);
    return 0;
}

static int run_cfg(world *w, long budget, uint32_t *epoch)
{
    const cfg *c = &w->c;
    int32_t slots[8], nr;
    int32_t k = c->max_k;
    while (w->calls < budget) {
        *epoch += (uint32_t)rndi(1, 3);
        build_round(w, *epoch, slots, &nr);
        if (publish_rd(w)) return 1;
        const int ncalls = chance(0.3) ? (int)rndi(2, 4) : 1; /* REINDEX: several resolves in one round */
        for (int i = 0; i < ncalls; i++) {
            k = chance(0.7) ? c->max_k : (int32_t)rndi(1, c->max_k);
            if (do_resolve(w, k)) return 1;
            if (chance(0.25) && do_promote(w, k)) return 1; /* group_done */
            int32_t *err = AP(w, w->h, A_ERR);
            if (*err) { /* the next host call reports and clears it */
                g_errs[*err & 31]++;
                *err = 0;
                static const int32_t zero = 0;
                if (x_copy_async(w->g + w->off[A_ERR], &zero, 4, w->s) != cudaSuccess) return -1;
            }
        }
        if (do_promote(w, k)) return 1; /* round_end */
        if (between_rounds(w, k)) return 1;
    }
    return compare(w, k, 1);
}

int main(void)
{
    const uint64_t seed = th_seed("test_dres_cuda");
    g_rng = seed;
    const char *self = getenv("DHS_DRES_SELFTEST");
    g_self = self && *self == '1';
    dhs_backend *be = NULL;
    if (!g_self) {
        dhs_status s = dhs_backend_cuda_create(0, &be);
        if (s == DHS_ERR_UNSUPPORTED) {
            printf("SKIP: no CUDA device\n");
            return 77;
        }
        CHECK_ST(s, DHS_OK);
        if (s != DHS_OK) return th_summary();
        CHECK(be->ops->dres_resolve && be->ops->dres_promote && be->ops->dres_reset && be->ops->publish);
    } else {
        printf("harness self-check: both sides run the CPU specification (not the GPU test)\n");
    }
    const long target = (long)(100000 * th_scale());
    long total = 0, per_cfg_max = target / 20 > 200 ? target / 20 : 200;
    int cfgs = 0, failed_cfgs = 0, block_cfgs = 0, copyk_cfgs = 0;
    uint32_t epoch = 1;
    uint64_t stats[DRES_S_COUNT] = {0};
    while (total < target) {
        world w;
        memset(&w, 0, sizeof w);
        w.be = be;
        w.s = g_self ? NULL : (cudaStream_t)dhs_cuda_stream(be);
        random_cfg(&w.c);
        if (world_build(&w)) {
            CHECKF(0, "could not build configuration %d", cfgs);
            world_free(&w);
            break;
        }
        /* every fourth configuration: the plan kernel's block-wide miss path for every request (the
           others take the few-miss path where a request fits it); chosen without the RNG, so a seed
           draws the same workload as before */
        if (cfgs % 4 == 3) {
            w.gst.plan_flags = DRES_PLAN_BLOCK_ONLY;
            block_cfgs++;
        } else if (cfgs % 4 == 1) {
            w.gst.plan_flags = DRES_PLAN_COPY_KERNEL;
            copyk_cfgs++;
        }
        /* the direct kernel's grid: the library's (a block per 256-entry tile here), one block per request
           (every tile in one block), or one block per SM; without the RNG */
        CHECK(dhs_dres_set_direct_blocks(cfgs % 3 == 0 ? -1 : cfgs % 3 == 1 ? 0 : 1) == cudaSuccess);
        const long budget = rndi(per_cfg_max / 4, per_cfg_max);
        const int bad = run_cfg(&w, budget, &epoch);
        if (bad) {
            failed_cfgs++;
            printf("  configuration %d failed after %ld calls\n", cfgs, w.calls);
            print_cfg(&w.c);
        }
        const uint64_t *st = AP(&w, w.h, A_STATS);
        for (int i = 0; i < DRES_S_COUNT; i++) stats[i] += st[i];
        total += w.calls;
        cfgs++;
        world_free(&w);
        if (failed_cfgs >= 3) break;
    }
    printf("test_dres_cuda: %d configurations, %ld calls; entries %llu direct %llu hot %llu host %llu misses %llu "
           "staged %llu promoted %llu\n",
           cfgs, total, (unsigned long long)stats[DRES_S_ENTRIES], (unsigned long long)stats[DRES_S_DIRECT],
           (unsigned long long)stats[DRES_S_HOT], (unsigned long long)stats[DRES_S_HOST],
           (unsigned long long)stats[DRES_S_MISSES], (unsigned long long)stats[DRES_S_STAGED],
           (unsigned long long)stats[DRES_S_PROMOTED]);
    CHECK(dhs_dres_set_direct_blocks(-1) == cudaSuccess && dhs_dres_set_direct_blocks(65) == cudaErrorInvalidValue);
    printf("error words: range %ld, visibility %ld, state (direct mode) %ld, staging %ld; %ld calls in direct mode\n",
           g_errs[8], g_errs[9], g_errs[12], g_errs[16], g_direct_calls);
    printf("plan paths: %d configurations few-miss where it fits (%d of them leaving the rows to the copy kernel), "
           "%d block-wide only\n", cfgs - block_cfgs, copyk_cfgs, block_cfgs);
    CHECK(total >= target);
    /* the full workload must have exercised every path it claims to (a
       reduced run, e.g. under compute-sanitizer, need not reach all) */
    if (target >= 50000) {
        CHECK(g_errs[8] > 0 && g_errs[9] > 0 && g_errs[12] > 0 && g_errs[16] > 0 && g_direct_calls > 0);
        CHECK(stats[DRES_S_MISSES] > 0 && stats[DRES_S_STAGED] > 0 && stats[DRES_S_PROMOTED] > 0);
        CHECK(stats[DRES_S_DIRECT] > 0 && stats[DRES_S_HOT] > 0);
    } else {
        printf("reduced run (%ld calls): path coverage not checked\n", target);
    }
    if (be) be->ops->destroy(be);
    const int rc = th_summary();
    return g_self && rc == 0 ? 77 : rc; /* the self-check never reports the GPU test as passed */
}
#endif
