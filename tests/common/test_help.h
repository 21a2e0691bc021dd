/* test_help.h - tiny helpers shared by the library tests.
 *
 *   CHECK(cond)             counts a pass, or prints file:line and the expression and counts a failure
 *   CHECKF(cond, fmt, ...)  the same with a printf-style explanation on failure
 *   CHECK_ST(expr, want)    a dhs_status call returns `want` (prints both names on failure)
 *   CHECK_INV(ctx)          dhs_check_invariants(ctx) reports no violation (prints the first)
 *   th_seed(name)           the seed of a randomised test: DHS_TEST_SEED or a fresh one; printed
 *   th_scale()              workload multiplier: DHS_TEST_SCALE (default 1), times 0.1 under sanitizers
 *   th_summary()            prints "N passed, N failed" on its own line; main returns its value
 *   th_tmp_path(buf, n, tag) / th_tmp_fopen(...)  a fresh /tmp/dhs_test_<tag>_XXXXXX file (name, or open to write)
 *
 * Row contents used by the tests are a pure function of (request uid, source, row, version), so a test
 * recomputes what a location must hold instead of storing payload (th_fill_row).
 */
#ifndef DHS_TEST_HELP_H
#define DHS_TEST_HELP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dhs.h"
#include "util/rng.h" /* the one RNG: dhs_rng_next, dhs_rng_below, dhs_mix64 */

static long th_passed, th_failed;

#define TH_MAX_PRINTED 60 /* failures printed in full; the rest are only counted */

#define CHECKF(cond, ...)                                                              \
    do {                                                                               \
        if (cond) {                                                                    \
            th_passed++;                                                               \
        } else {                                                                       \
            if (th_failed++ < TH_MAX_PRINTED) {                                        \
                printf("%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);        \
                printf(__VA_ARGS__);                                                   \
                printf("\n");                                                          \
                fflush(stdout);                                                        \
            }                                                                          \
        }                                                                              \
    } while (0)

#define CHECK(cond) CHECKF(cond, "%s", "")

/* CUDA tests (after cuda_runtime_api.h): a failing CUDA runtime call ends the test with its file, line, call
   and error string; exit status 1, a failure, never the skip code */
#define TH_CUDA_CK(x)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* GPU tests: exit status 77, which CTest (SKIP_RETURN_CODE) reports as skipped, never as passed.
   TH_MAIN_WITHOUT_CUDA is the whole main of a build without CUDA; TH_SKIP_WITHOUT_DEVICE (in main, after
   cuda_runtime_api.h) returns from it when no device is present. */
#define TH_SKIP 77
#define TH_MAIN_WITHOUT_CUDA                   \
    int main(void)                             \
    {                                          \
        printf("SKIP: built without CUDA\n"); \
        return TH_SKIP;                        \
    }
#define TH_SKIP_WITHOUT_DEVICE()                                      \
    do {                                                              \
        int n_dev_ = 0;                                               \
        if (cudaGetDeviceCount(&n_dev_) != cudaSuccess || n_dev_ < 1) { \
            printf("SKIP: no CUDA device\n");                        \
            return TH_SKIP;                                           \
        }                                                             \
    } while (0)

#define CHECK_ST(expr, want)                                                                        \
    do {                                                                                            \
        dhs_status got_ = (expr);                                                                   \
        dhs_status want_ = (want);                                                                  \
        CHECKF(got_ == want_, "%s returned %d (%s), want %d (%s)", #expr, (int)got_, dhs_status_str(got_), \
               (int)want_, dhs_status_str(want_));                                                  \
    } while (0)

#define CHECK_INV(ctx)                                                      \
    do {                                                                    \
        char inv_msg_[256];                                                 \
        int inv_n_ = dhs_check_invariants((ctx), inv_msg_, sizeof inv_msg_); \
        CHECKF(inv_n_ == 0, "%d invariant violation(s): %s", inv_n_, inv_msg_); \
    } while (0)

static inline int th_summary(void)
{
    printf("%ld passed, %ld failed\n", th_passed, th_failed);
    fflush(stdout);
    return th_failed ? 1 : 0;
}

/* The seed of a randomised test: DHS_TEST_SEED=N replays N; DHS_TEST_SEED=random
   draws a fresh one (for exploratory runs); unset (CI) it is fixed, derived from
   the test's name, so a CI run is reproducible. Always printed. */
static inline uint64_t th_seed(const char *name)
{
    const char *e = getenv("DHS_TEST_SEED");
    uint64_t seed;
    if (e && *e && strcmp(e, "random") != 0) {
        seed = strtoull(e, NULL, 0);
    } else if (e && *e) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = dhs_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40)) % 1000000007ull;
    } else {
        uint64_t h = 1469598103934665603ull;
        for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
        seed = dhs_mix64(h) % 1000000007ull;
    }
    printf("%s: seed %llu (rerun with DHS_TEST_SEED=%llu)\n", name, (unsigned long long)seed, (unsigned long long)seed);
    fflush(stdout);
    return seed;
}

#if defined(__SANITIZE_ADDRESS__)
#define TH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_SANITIZED 1
#endif
#endif
#ifndef TH_SANITIZED
#define TH_SANITIZED 0
#endif

/* The two-group architecture several tests share: group 0 has sources 0 (64 B, OWN) and 1 (48 B,
   FOLLOW) with m = 1; group 1 has source 2 (32 B, OWN) with m = m1. */
static inline dhs_arch th_arch_two_groups(int32_t m1)
{
    dhs_arch a;
    memset(&a, 0, sizeof a);
    a.n_groups = 2;
    a.n_sources = 3;
    a.sources[0] = (dhs_source_desc){64, 1, 0};
    a.sources[1] = (dhs_source_desc){48, 1, 0};
    a.sources[2] = (dhs_source_desc){32, m1, 1};
    a.n_consumers = 3;
    a.consumers[0] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 0, 0};
    a.consumers[1] = (dhs_consumer_desc){DHS_CONSUMER_FOLLOW, 1, 0};
    a.consumers[2] = (dhs_consumer_desc){DHS_CONSUMER_OWN, 2, 1};
    a.index_key_bytes = 132;
    return a;
}

/* Workload multiplier: DHS_TEST_SCALE (default 1) times 0.1 in a sanitizer build, so the same
   setting (scripts/test.sh passes DHS_TEST_SCALE=1 to both builds) keeps the sanitized run short. */
static inline double th_scale(void)
{
    double v = 1.0;
    const char *e = getenv("DHS_TEST_SCALE");
    if (e && *e) {
        double x = strtod(e, NULL);
        if (x > 0) v = x;
    }
    return TH_SANITIZED ? 0.1 * v : v;
}

/* Bytes of row `row` of source `src` of request `uid`, version `ver` (a rewrite bumps the version). */
static inline void th_fill_row(uint8_t *out, uint32_t nbytes, uint64_t uid, int32_t src, int64_t row, uint32_t ver)
{
    uint64_t h = dhs_mix64(uid * 0x100000001b3ull ^ dhs_mix64(((uint64_t)(uint32_t)src << 40) ^ (uint64_t)row) ^ ((uint64_t)ver << 20));
    for (uint32_t i = 0; i < nbytes; i += 8) {
        uint64_t w = dhs_mix64(h + i);
        memcpy(out + i, &w, nbytes - i < 8 ? nbytes - i : 8);
    }
}

/* 1 when location `loc` of source `src` holds exactly the given row version */
static inline int th_loc_holds(const dhs_ctx *ctx, int32_t src, uint32_t row_bytes, int32_t loc, uint64_t uid, int64_t row,
                               uint32_t ver)
{
    uint8_t want[4096] __attribute__((aligned(16))), got[4096] __attribute__((aligned(16)));
    if (row_bytes > sizeof want || loc < 0) return 0;
    if (dhs_read_location(ctx, src, loc, got) != DHS_OK) return 0;
    th_fill_row(want, row_bytes, uid, src, row, ver);
    return memcmp(want, got, row_bytes) == 0;
}

/* a uniform float in [-1, 1): 24 random bits (dhs_rng_f24), exactly */
static inline float th_unif(uint64_t *r) { return dhs_rng_f24(r) * 2.0f - 1.0f; }

/* the bit pattern of a float */
static inline uint32_t th_fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline void *th_alloc(size_t bytes)
{
    size_t b = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, b ? b : 64);
    if (!p) {
        printf("out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    memset(p, 0, b ? b : 64);
    return p;
}

static inline double th_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A fresh empty file /tmp/dhs_test_<tag>_XXXXXX for a test to fill; its name is left in buf.
   th_tmp_path returns 0, or -1 when no file could be made; th_tmp_fopen returns it open for writing, or NULL. */
static inline int th_tmp_path(char *buf, size_t n, const char *tag)
{
    snprintf(buf, n, "/tmp/dhs_test_%s_XXXXXX", tag);
    int fd = mkstemp(buf);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

static inline FILE *th_tmp_fopen(char *buf, size_t n, const char *tag)
{
    return th_tmp_path(buf, n, tag) == 0 ? fopen(buf, "w") : NULL;
}

/* ======================================================================
 * A small fixture shared by the tests: one context on the CPU backend plus a
 * model of every request (uid, committed positions, version of each row), so
 * the bytes any location must hold can be recomputed at any time.
 * ====================================================================== */
#define TH_MAX_REQ 16

typedef struct th_req {
    int open;
    dhs_req h;
    uint64_t uid;
    int64_t n;                       /* committed positions (mirror of dhs_request_positions) */
    uint32_t *ver[DHS_MAX_SOURCES];  /* [group][row]: version of the row's bytes */
    uint64_t *wuid[DHS_MAX_SOURCES]; /* [group][row]: whose bytes the row holds (a shared prefix's rows are an
                                        ancestor's); NULL: the request's own uid for every row */
} th_req;

/* the uid row `row` of group g of request r was written with */
static inline uint64_t th_row_uid(const th_req *r, int32_t g, int64_t row) { return r->wuid[g] ? r->wuid[g][row] : r->uid; }

typedef struct th_env {
    dhs_arch arch;
    dhs_config cfg;
    dhs_backend *be;
    dhs_ctx *ctx;
    uint32_t stride;                 /* pool row stride = largest row_bytes */
    int32_t m_of[DHS_MAX_SOURCES];   /* per group */
    int32_t nsrc_of[DHS_MAX_SOURCES];
    int64_t rows_cap;                /* rows per group in the version arrays */
    th_req rq[TH_MAX_REQ];
    uint8_t *buf;                    /* scratch: every source's rows of one request */
    uint64_t next_uid;
} th_env;

/* Creates backend and context; returns dhs_ctx_create's status (the backend is made either way). */
static inline dhs_status th_env_init(th_env *e, const dhs_arch *arch, const dhs_config *cfg, const dhs_cpu_options *opt)
{
    memset(e, 0, sizeof *e);
    e->arch = *arch;
    e->cfg = *cfg;
    e->next_uid = 1000;
    for (int32_t s = 0; s < arch->n_sources; s++) {
        const dhs_source_desc *d = &arch->sources[s];
        if (d->row_bytes > e->stride) e->stride = d->row_bytes;
        e->m_of[d->group] = (int32_t)d->m;
        e->nsrc_of[d->group]++;
    }
    e->rows_cap = cfg->max_rows + 8;
    e->buf = th_alloc((size_t)(e->rows_cap + 8) * (size_t)arch->n_sources * e->stride + 64 * (size_t)arch->n_sources);
    if (dhs_backend_cpu_create(opt, &e->be) != DHS_OK) {
        printf("cannot create the CPU backend\n");
        exit(2);
    }
    return dhs_ctx_create(&e->arch, &e->cfg, e->be, &e->ctx);
}

static inline void th_env_free(th_env *e)
{
    dhs_ctx_destroy(e->ctx);
    dhs_backend_destroy(e->be);
    for (int i = 0; i < TH_MAX_REQ; i++)
        for (int g = 0; g < DHS_MAX_SOURCES; g++) {
            free(e->rq[i].ver[g]);
            free(e->rq[i].wuid[g]);
        }
    free(e->buf);
    memset(e, 0, sizeof *e);
}

/* i-th source of group g */
static inline int32_t th_src(const th_env *e, int32_t g, int32_t i)
{
    for (int32_t s = 0; s < e->arch.n_sources; s++)
        if (e->arch.sources[s].group == g && i-- == 0) return s;
    return -1;
}

static inline dhs_status th_open(th_env *e, int slot, int64_t expected)
{
    th_req *r = &e->rq[slot];
    dhs_status s = dhs_request_open(e->ctx, expected, &r->h);
    if (s != DHS_OK) return s;
    r->open = 1;
    r->uid = ++e->next_uid;
    r->n = 0;
    for (int32_t g = 0; g < e->arch.n_groups; g++) {
        if (!r->ver[g]) r->ver[g] = calloc((size_t)e->rows_cap, sizeof(uint32_t));
        memset(r->ver[g], 0, sizeof(uint32_t) * (size_t)e->rows_cap);
        free(r->wuid[g]);
        r->wuid[g] = NULL;
    }
    return DHS_OK;
}

/* dhs_request_open_shared into slot `slot` on the first P positions of the request in slot `parent`:
   the child's rows below the prefix are the parent's (writer and version) */
static inline dhs_status th_open_shared(th_env *e, int slot, int parent, int64_t P, int64_t expected)
{
    th_req *r = &e->rq[slot];
    const th_req *pr = &e->rq[parent];
    dhs_req h;
    dhs_status s = dhs_request_open_shared(e->ctx, pr->h, P, expected, &h);
    if (s != DHS_OK) return s;
    r->h = h;
    r->open = 1;
    r->uid = ++e->next_uid;
    r->n = P;
    for (int32_t g = 0; g < e->arch.n_groups; g++) {
        if (!r->ver[g]) r->ver[g] = calloc((size_t)e->rows_cap, sizeof(uint32_t));
        if (!r->wuid[g]) r->wuid[g] = calloc((size_t)e->rows_cap, sizeof(uint64_t));
        memset(r->ver[g], 0, sizeof(uint32_t) * (size_t)e->rows_cap);
        const int64_t all = (P + e->m_of[g] - 1) / e->m_of[g];
        for (int64_t row = 0; row < e->rows_cap; row++) {
            r->wuid[g][row] = row < all ? th_row_uid(pr, g, row) : r->uid;
            if (row < all) r->ver[g][row] = pr->ver[g][row];
        }
    }
    return DHS_OK;
}

/* Fills e->buf with the request's rows 0..ceil(n/m)-1 of every source (version 0) and points rows[] at them. */
static inline void th_prefill_rows(th_env *e, int slot, int64_t n, const void **rows)
{
    th_req *r = &e->rq[slot];
    size_t off = 0;
    for (int32_t s = 0; s < e->arch.n_sources; s++) {
        uint32_t rb = e->arch.sources[s].row_bytes;
        int64_t m = e->arch.sources[s].m, nr = (n + m - 1) / m;
        rows[s] = e->buf + off;
        for (int64_t row = 0; row < nr; row++) th_fill_row(e->buf + off + (size_t)row * rb, rb, r->uid, s, row, 0);
        off += ((size_t)nr * rb + 63) & ~(size_t)63;
    }
}

static inline dhs_status th_import(th_env *e, int slot, int64_t n, unsigned flags)
{
    const void *rows[DHS_MAX_SOURCES];
    th_prefill_rows(e, slot, n, rows);
    dhs_status s = dhs_request_import(e->ctx, e->rq[slot].h, n, rows, flags);
    if (s == DHS_OK) e->rq[slot].n = n;
    return s;
}

static inline dhs_status th_close(th_env *e, int slot)
{
    dhs_status s = dhs_request_close(e->ctx, e->rq[slot].h);
    if (s == DHS_OK) e->rq[slot].open = 0;
    return s;
}

/* Writes the rows of the current block (positions n .. n+K-1) of every source: new versions. */
static inline dhs_status th_write_block(th_env *e, int slot, int32_t K)
{
    th_req *r = &e->rq[slot];
    for (int32_t g = 0; g < e->arch.n_groups; g++) {
        int64_t m = e->m_of[g], lo = r->n / m, hi = (r->n + K + m - 1) / m;
        for (int64_t row = lo; row < hi; row++) {
            r->ver[g][row]++;
            if (r->wuid[g]) r->wuid[g][row] = r->uid;
        }
        for (int32_t s = 0; s < e->arch.n_sources; s++) {
            if (e->arch.sources[s].group != g) continue;
            uint32_t rb = e->arch.sources[s].row_bytes;
            for (int64_t row = lo; row < hi; row++) th_fill_row(e->buf + (size_t)(row - lo) * rb, rb, r->uid, s, row, r->ver[g][row]);
            dhs_status st = dhs_write_rows(e->ctx, r->h, s, lo, (int32_t)(hi - lo), e->buf);
            if (st != DHS_OK) return st;
        }
    }
    return DHS_OK;
}

/* Wrong entries among the locations of one resolve item of group g (all sources; -1 must map to -1). */
static inline long th_check_item(const th_env *e, int slot, int32_t g, int32_t K, int32_t k, const int32_t *sel, const int32_t *loc)
{
    const th_req *r = &e->rq[slot];
    long bad = 0;
    for (int32_t i = 0; i < e->nsrc_of[g]; i++) {
        int32_t s = th_src(e, g, i);
        const int32_t *l = loc + (int64_t)i * K * k;
        for (int64_t x = 0; x < (int64_t)K * k; x++) {
            if (sel[x] < 0) { bad += l[x] != -1; continue; }
            if (!th_loc_holds(e->ctx, s, e->arch.sources[s].row_bytes, l[x], th_row_uid(r, g, sel[x]), sel[x], r->ver[g][sel[x]]))
                bad++;
        }
    }
    return bad;
}

/* One request's every committed row of every group, read back through resolve rounds (K = 1,
   accepting the anchor: each round commits one position), invariants checked after every call.
   Returns the rows that came back wrong. */
static inline long th_sweep(th_env *e, int slot, int32_t k)
{
    th_req *r = &e->rq[slot];
    long lost = 0;
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)k), *loc = malloc(sizeof(int32_t) * (size_t)k * DHS_MAX_SOURCES);
    for (int32_t g = 0; g < e->arch.n_groups; g++) {
        int64_t rows = r->n / e->m_of[g];
        for (int64_t base = 0; base < rows; base += k) {
            int32_t one = 1, acc = 0;
            if (dhs_round_begin(e->ctx, 1, &r->h, &one) != DHS_OK) { lost += rows - base; break; }
            CHECK_INV(e->ctx);
            if (th_write_block(e, slot, 1) != DHS_OK) lost++;
            CHECK_INV(e->ctx);
            for (int32_t i = 0; i < k; i++) sel[i] = base + i < rows ? (int32_t)(base + i) : -1;
            dhs_resolve_item it = {r->h, 1, sel, loc};
            if (dhs_resolve(e->ctx, g, k, 1, &it) != DHS_OK) lost += rows - base < k ? rows - base : k;
            else lost += th_check_item(e, slot, g, 1, k, sel, loc);
            CHECK_INV(e->ctx);
            if (dhs_round_end(e->ctx, &acc) != DHS_OK) lost++;
            else r->n += 1;
            CHECK_INV(e->ctx);
        }
    }
    free(sel);
    free(loc);
    return lost;
}

/* ---------------------------------------------------------------- state snapshots */
typedef struct th_snap {
    dhs_stats st;
    dhs_mem mem;
    int64_t pos[TH_MAX_REQ];
    dhs_status pos_st[TH_MAX_REQ];
    uint8_t *pool;
    size_t pool_bytes;
    int inv;
} th_snap;

/* Everything observable: stats, memory, positions of every model request (open or not), the bytes
   of the whole device pool (pool rows x stride) and the invariant checker's verdict. */
static inline void th_snap_take(const th_env *e, th_snap *s)
{
    free(s->pool);
    memset(s, 0, sizeof *s);
    dhs_get_stats(e->ctx, &s->st);
    dhs_get_mem(e->ctx, &s->mem);
    for (int i = 0; i < TH_MAX_REQ; i++) {
        s->pos_st[i] = e->rq[i].uid ? dhs_request_positions(e->ctx, e->rq[i].h, &s->pos[i]) : DHS_OK;
        if (s->pos_st[i] != DHS_OK) s->pos[i] = -1;
    }
    const void *pool = dhs_source_pool(e->ctx, 0);
    s->pool_bytes = pool ? (size_t)dhs_source_pool_rows(e->ctx, 0) * e->stride : 0;
    s->pool = th_alloc(s->pool_bytes + 1);
    if (pool) memcpy(s->pool, pool, s->pool_bytes);
    s->inv = dhs_check_invariants(e->ctx, NULL, 0);
}

/* NULL when equal, else the name of the first difference */
static inline const char *th_snap_diff(const th_snap *a, const th_snap *b)
{
    if (memcmp(&a->st, &b->st, sizeof a->st)) return "stats";
    if (memcmp(&a->mem, &b->mem, sizeof a->mem)) return "mem";
    for (int i = 0; i < TH_MAX_REQ; i++)
        if (a->pos[i] != b->pos[i] || a->pos_st[i] != b->pos_st[i]) return "positions";
    if (a->pool_bytes != b->pool_bytes || memcmp(a->pool, b->pool, a->pool_bytes)) return "pool bytes";
    if (a->inv != b->inv) return "invariants";
    return NULL;
}

static inline void th_snap_free(th_snap *s)
{
    free(s->pool);
    s->pool = NULL;
}

#endif
