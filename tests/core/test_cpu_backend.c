/* test_cpu_backend.c - the reference backend's own contract: in-order and
 * late (async_delay, random order) side-stream completion, late copies read
 * their source when they execute, and a gather with two pairs sharing one
 * destination (a race on a GPU) is refused. */
#include <stdio.h>
#include <string.h>

#include "core/backend.h"
#include "test_help.h"

/* be_memcpy_runs: every byte of every run lands, whatever the thread count and however the equal
   shares cut the runs (runs of odd sizes, empty runs, fewer bytes than threads) */
static void test_memcpy_runs(void)
{
    enum { NR = 7 };
    static const size_t sz[NR] = {1, 0, 4093, 65536 + 17, 3, 0, 100001};
    size_t total = 0;
    for (int i = 0; i < NR; i++) total += sz[i];
    uint8_t *src = malloc(total), *dst = malloc(total);
    CHECK(src && dst);
    if (!src || !dst) return;
    for (size_t i = 0; i < total; i++) src[i] = (uint8_t)(i * 131u + 7u);
    for (int threads = 0; threads <= 9; threads++) {
        memset(dst, 0, total);
        dhs_copy_run runs[NR];
        size_t off = 0;
        for (int i = 0; i < NR; i++) {
            /* runs in reverse order in the destination: a share boundary inside a run must offset both sides */
            runs[i] = (dhs_copy_run){dst + (total - off - sz[i]), src + off, sz[i]};
            off += sz[i];
        }
        be_memcpy_runs(runs, NR, threads);
        long wrong = 0;
        off = 0;
        for (int i = 0; i < NR; i++) {
            wrong += memcmp(dst + (total - off - sz[i]), src + off, sz[i]) != 0;
            off += sz[i];
        }
        CHECKF(wrong == 0, "be_memcpy_runs with %d threads: %ld runs wrong", threads, wrong);
    }
    /* fewer bytes than threads */
    uint8_t a[3] = {1, 2, 3}, b[3] = {0, 0, 0};
    dhs_copy_run r = {b, a, 3};
    be_memcpy_runs(&r, 1, 8);
    CHECK(!memcmp(a, b, 3));
    be_memcpy_runs(NULL, 0, 4); /* nothing to copy */
    free(src);
    free(dst);
}

int main(void)
{
    test_memcpy_runs();
    dhs_backend *be;
    CHECK(dhs_backend_cpu_create(NULL, &be) == DHS_OK);
    uint8_t a[64], b[64], c[64];
    memset(a, 1, sizeof a);
    memset(b, 2, sizeof b);
    memset(c, 0, sizeof c);
    dhs_copy_pair ok[2] = {{a, c}, {b, c + 32}};
    CHECK(be->ops->gather_h2d(be, ok, 2, 32) == DHS_OK);
    CHECK(c[0] == 1 && c[40] == 2);
    dhs_copy_pair dup[3] = {{a, c}, {b, c + 32}, {b, c}};
    memset(c, 0, sizeof c);
    CHECK(be->ops->gather_h2d(be, dup, 3, 32) == DHS_ERR_BACKEND);
    CHECK(c[0] == 0 && c[40] == 0); /* refused before any byte moved */
    dhs_backend_destroy(be);

    /* late completion: the copy reads its source when it executes */
    dhs_cpu_options o = {.async_delay = 2};
    CHECK(dhs_backend_cpu_create(&o, &be) == DHS_OK);
    memset(c, 0, sizeof c);
    dhs_ticket t = 0, r = 0;
    dhs_copy_pair p = {a, c};
    CHECK(be->ops->copy_rows_async(be, &p, 1, 16, &t) == DHS_OK && t != 0);
    CHECK(!be->ops->done(be, t) && c[0] == 0);
    memset(a, 7, sizeof a);
    be->ops->tick(be);
    CHECK(!be->ops->done(be, t));
    CHECK(be->ops->record_readers(be, &r) == DHS_OK && r != 0 && !be->ops->done(be, r));
    be->ops->tick(be);
    CHECK(be->ops->done(be, t) && c[0] == 7);
    CHECK(be->ops->wait(be, r) == DHS_OK && be->ops->done(be, r));
    dhs_backend_destroy(be);

    /* random order: wait() completes exactly the ticket asked for */
    dhs_cpu_options ro = {.async_delay = 5, .random_order = 1, .seed = 3};
    CHECK(dhs_backend_cpu_create(&ro, &be) == DHS_OK);
    dhs_ticket ts[8];
    uint8_t dst[8][16];
    memset(dst, 0, sizeof dst);
    for (int i = 0; i < 8; i++) {
        dhs_copy_pair q = {a, dst[i]};
        CHECK(be->ops->copy_rows_async(be, &q, 1, 16, &ts[i]) == DHS_OK);
    }
    CHECK(be->ops->wait(be, ts[5]) == DHS_OK && be->ops->done(be, ts[5]) && dst[5][0] == 7);
    for (int i = 0; i < 6; i++) be->ops->tick(be);
    int all = 1;
    for (int i = 0; i < 8; i++) all &= be->ops->done(be, ts[i]) && dst[i][0] == 7;
    CHECK(all);
    dhs_backend_destroy(be);
    CHECK(dhs_backend_cpu_create(&(dhs_cpu_options){.async_delay = -1}, &be) == DHS_ERR_INVALID_ARG);
    return th_summary();
}
