/* test_cuda.c - the CUDA backend against byte-exact expectations and against
 * the CPU backend.
 *
 * Built without CUDA (CI) it prints "SKIP: built without CUDA"; with CUDA but
 * no device, "SKIP: no CUDA device"; either way it exits 77, which CTest
 * (SKIP_RETURN_CODE) reports as skipped, never as passed. On a device:
 *   1. gather_h2d of random rows (several row sizes and counts, a grown pair
 *      ring, a tiny grid where one warp owns hundreds of rows) compared with
 *      a host shadow of the whole device area;
 *   2. argument errors (misaligned address, row size) and fault injection;
 *   3. copy_rows_async d2h / h2d / d2d with tickets, ordering after a gather
 *      on the compute stream, thousands of tickets (slot reuse);
 *   4. record_readers / done / wait (done() seen 0 behind queued work);
 *   5. an engine-owned compute stream (dhs_cuda_set_stream);
 *   6. the resolver: one random workload driven through the public API on a
 *      CUDA context and a CPU context in lockstep; every returned location is
 *      read back (dhs_read_location) and compared with the row the selection
 *      named, and both backends must return the same locations.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhs.h"

#ifndef DHS_HAVE_CUDA
int main(void)
{
    printf("SKIP: built without CUDA\n");
    return 77;
}
#else

#include <cuda_runtime_api.h>

#include "core/backend.h"
#include "dhs_cuda.h"
#include "util/rng.h"

/* ------------------------------------------------------------- harness */

static int g_checks, g_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        g_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);              \
            g_failed++;                                                                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CHECK_ST(expr, want)                                                                       \
    do {                                                                                           \
        dhs_status s_ = (expr);                                                                    \
        g_checks++;                                                                                \
        if (s_ != (want)) {                                                                        \
            fprintf(stderr, "%s:%d: %s returned %d, want %d (cuda error %d)\n", __FILE__, __LINE__, \
                    #expr, (int)s_, (int)(want), g_be ? dhs_cuda_last_error(g_be) : 0);            \
            g_failed++;                                                                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define CHECK_OK(expr) CHECK_ST(expr, DHS_OK)

static dhs_backend *g_be; /* the CUDA backend under test */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull; /* the one RNG: util/rng.h */
static uint64_t rnd(void) { return dhs_rng_next(&g_rng); }
static int64_t rnd_below(int64_t n) { return dhs_rng_below(&g_rng, n); }

/* random permutation prefix: out[0..n) distinct values in [0, range) */
static void distinct(int64_t *out, int64_t n, int64_t range, int64_t *scratch)
{
    for (int64_t i = 0; i < range; i++) scratch[i] = i;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i + rnd_below(range - i);
        int64_t t = scratch[i];
        scratch[i] = scratch[j];
        scratch[j] = t;
        out[i] = scratch[i];
    }
}

/* ------------------------------------------------- 1. gather_h2d, bytes */

#define HOST_BYTES ((size_t)64 << 20)
#define DEV_BYTES ((size_t)16 << 20)

typedef struct area {
    uint8_t *host;   /* [HOST_BYTES] pinned, mapped (be_host_alloc) */
    uint8_t *dev;    /* [DEV_BYTES] device (be_dev_alloc) */
    uint8_t *shadow; /* [DEV_BYTES] expected device bytes */
    uint8_t *back;   /* [DEV_BYTES] read-back buffer (pageable) */
    int64_t *perm;   /* scratch */
} area;

static int compare_dev(area *a)
{
    CHECK_OK(g_be->ops->copy_sync(g_be, a->back, a->dev, DEV_BYTES));
    CHECK(memcmp(a->back, a->shadow, DEV_BYTES) == 0);
    return 0;
}

/* gathers n random host rows to n distinct device rows; updates the shadow */
static int gather_once(area *a, uint32_t row_bytes, int64_t n, dhs_copy_pair *pairs, int64_t *dst_rows)
{
    const int64_t nh = (int64_t)(HOST_BYTES / row_bytes), nd = (int64_t)(DEV_BYTES / row_bytes);
    distinct(dst_rows, n, nd, a->perm);
    for (int64_t i = 0; i < n; i++) {
        int64_t s = rnd_below(nh);
        pairs[i].src = a->host + (size_t)s * row_bytes;
        pairs[i].dst = a->dev + (size_t)dst_rows[i] * row_bytes;
        memcpy(a->shadow + (size_t)dst_rows[i] * row_bytes, pairs[i].src, row_bytes);
    }
    CHECK_OK(be_gather(g_be, pairs, n, row_bytes));
    return 0;
}

static int test_gather(area *a)
{
    static const uint32_t sizes[] = {16, 576, 656, 1152, 4112};
    static const int64_t counts[] = {1, 31, 256, 2048, 20000, 100000}; /* 100000 > ring: grows it */
    dhs_copy_pair *pairs = malloc(sizeof(dhs_copy_pair) * 100000);
    int64_t *dst_rows = malloc(sizeof(int64_t) * 100000);
    CHECK(pairs && dst_rows);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        uint32_t rb = sizes[si];
        for (size_t i = 0; i < HOST_BYTES / 8; i++) ((uint64_t *)a->host)[i] = rnd();
        memset(a->shadow, 0xa5, DEV_BYTES);
        CHECK_OK(g_be->ops->copy_sync(g_be, a->dev, a->shadow, DEV_BYTES));
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
            int64_t n = counts[ci];
            if (n > (int64_t)(DEV_BYTES / rb)) n = (int64_t)(DEV_BYTES / rb);
            if (gather_once(a, rb, n, pairs, dst_rows)) return 1;
            if (compare_dev(a)) return 1;
        }
        /* a tiny grid: 4 blocks = 32 warps, each owning hundreds of rows */
        CHECK_OK(dhs_cuda_set_gather_blocks(g_be, 4));
        int64_t n = (int64_t)(DEV_BYTES / rb) < 20000 ? (int64_t)(DEV_BYTES / rb) : 20000;
        if (gather_once(a, rb, n, pairs, dst_rows)) return 1;
        CHECK_OK(dhs_cuda_set_gather_blocks(g_be, 0));
        if (compare_dev(a)) return 1;
        /* several gathers back to back, one read-back */
        for (int k = 0; k < 8; k++)
            if (gather_once(a, rb, 300, pairs, dst_rows)) return 1;
        if (compare_dev(a)) return 1;
    }
    free(pairs);
    free(dst_rows);
    printf("ok   gather_h2d: 5 row sizes x 8 batches, byte-exact over the whole device area\n");
    return 0;
}

/* ----------------------------------------- 1b. publish_list, every alignment */

/* n pieces, each in its own 4 KiB slot of the device area (destinations never overlap), of 0..4096 bytes
   at offsets that take the kernel's 16-byte, 4-byte and byte paths; sources anywhere in the host area. The
   list lives in mapped pinned memory, as the core's does. Two passes rewrite the same sources between
   launches: the second must see the new bytes (the sources are mirrors the host rewrites). */
static int test_publish_list(area *a)
{
    /* 1: the backend's copies (a list that short); 2..: the kernel; 2000 > DHS_PUBLISH_MAX_BLOCKS: a block
       takes several */
    const int32_t counts[] = {1, 2, 7, 300, 1024, 2000};
    const int32_t nmax = 2000, slots = (int32_t)(DEV_BYTES / 4096);
    dhs_pub *list = NULL;
    CHECK_OK(be_host_alloc(g_be, sizeof(dhs_pub) * (size_t)nmax, (void **)&list));
    int64_t *slot = malloc(sizeof(int64_t) * (size_t)nmax);
    CHECK(slot);
    memset(a->shadow, 0x5a, DEV_BYTES);
    CHECK_OK(g_be->ops->copy_sync(g_be, a->dev, a->shadow, DEV_BYTES));
    CHECK_OK(g_be->ops->publish_list(g_be, list, 0));
    CHECK_ST(g_be->ops->publish_list(g_be, list, -1), DHS_ERR_INVALID_ARG);
    CHECK_ST(g_be->ops->publish_list(g_be, NULL, 3), DHS_ERR_INVALID_ARG);
    int64_t npaths[3] = {0, 0, 0};
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
        const int32_t n = counts[ci];
        distinct(slot, n, slots, a->perm);
        for (int32_t i = 0; i < n; i++) {
            const int path = (int)rnd_below(3); /* 0: 16-byte, 1: 4-byte, 2: byte aligned */
            const uint64_t unit = path == 0 ? 16 : path == 1 ? 4 : 1;
            uint64_t bytes = unit * (uint64_t)rnd_below((int64_t)(4096 / unit) + 1);
            const uint64_t doff = unit * (uint64_t)rnd_below((int64_t)((4096 - bytes) / unit) + 1);
            const uint64_t soff = unit * (uint64_t)rnd_below((int64_t)((HOST_BYTES - bytes) / unit));
            if (path == 2 && bytes > 0 && (doff | soff | bytes) % 4 == 0) bytes--; /* really unaligned */
            list[i] = (dhs_pub){(uint64_t)(uintptr_t)(a->dev + slot[i] * 4096 + doff),
                                (uint64_t)(uintptr_t)(a->host + soff), bytes};
            npaths[(doff | soff | bytes) % 16 == 0 ? 0 : (doff | soff | bytes) % 4 == 0 ? 1 : 2]++;
        }
        for (int pass = 0; pass < 2; pass++) {
            if (pass) /* new source bytes, the same list */
                for (int32_t i = 0; i < n; i++)
                    for (uint64_t b = 0; b < list[i].bytes; b++) ((uint8_t *)(uintptr_t)list[i].src)[b] ^= 0xff;
            for (int32_t i = 0; i < n; i++)
                memcpy(a->shadow + (list[i].dst - (uint64_t)(uintptr_t)a->dev), (const void *)(uintptr_t)list[i].src,
                       list[i].bytes);
            CHECK_OK(g_be->ops->publish_list(g_be, list, n));
            CHECK_OK(g_be->ops->sync_compute(g_be));
            if (compare_dev(a)) return 1;
        }
    }
    CHECK(npaths[0] > 0 && npaths[1] > 0 && npaths[2] > 0);
    be_host_free(g_be, list, sizeof(dhs_pub) * (size_t)nmax);
    free(slot);
    printf("ok   publish_list: %d lists, %lld / %lld / %lld pieces 16-byte / 4-byte / byte aligned, two passes each, "
           "byte-exact\n", (int)(sizeof counts / sizeof *counts), (long long)npaths[0], (long long)npaths[1],
           (long long)npaths[2]);
    return 0;
}

/* ---------------------------------------------------- 2. errors, faults */

static int test_errors(area *a)
{
    dhs_copy_pair p = {a->host, a->dev};
    CHECK_ST(g_be->ops->gather_h2d(g_be, &p, 1, 24), DHS_ERR_INVALID_ARG);
    CHECK_ST(g_be->ops->gather_h2d(g_be, &p, -1, 576), DHS_ERR_INVALID_ARG);
    CHECK_OK(g_be->ops->gather_h2d(g_be, &p, 0, 576));
    dhs_copy_pair bad = {a->host + 8, a->dev};
    CHECK_ST(g_be->ops->gather_h2d(g_be, &bad, 1, 576), DHS_ERR_MISALIGNED);
    dhs_ticket t = 77;
    CHECK_ST(g_be->ops->copy_rows_async(g_be, &bad, 1, 576, &t), DHS_ERR_MISALIGNED);
    dhs_backend_fault_at(g_be, DHS_FAULT_COPY, 1);
    CHECK_ST(be_gather(g_be, &p, 1, 576), DHS_ERR_BACKEND);
    CHECK(dhs_backend_faults_injected(g_be) == 1);
    CHECK_OK(be_gather(g_be, &p, 1, 576));
    dhs_backend *none = (dhs_backend *)&p;
    CHECK_ST(dhs_backend_cuda_create(-1, &none), DHS_ERR_INVALID_ARG);
    CHECK(none == NULL);
    CHECK(dhs_cuda_stream(NULL) == NULL);
    CHECK_ST(dhs_cuda_set_stream(NULL, NULL), DHS_ERR_INVALID_ARG);
    CHECK_OK(g_be->ops->copy_sync(g_be, a->back, a->dev, 576)); /* context still healthy */
    printf("ok   errors: bad row size, negative count, misaligned rows, injected fault\n");
    return 0;
}

/* ------------------------------------------------ 3. async copies, tickets */

static int test_async(area *a)
{
    const uint32_t rb = 656;
    const int64_t nh = (int64_t)(HOST_BYTES / rb), nd = (int64_t)(DEV_BYTES / rb);
    const int64_t n = 3000;
    dhs_copy_pair *pairs = malloc(sizeof(dhs_copy_pair) * (size_t)n);
    int64_t *dst_rows = malloc(sizeof(int64_t) * (size_t)n);
    int64_t *src_rows = malloc(sizeof(int64_t) * (size_t)n);
    uint8_t *expect = malloc((size_t)n * rb);
    dhs_ticket *tk = malloc(sizeof(dhs_ticket) * (size_t)n);
    CHECK(pairs && dst_rows && src_rows && expect && tk);

    /* device state = shadow */
    for (size_t i = 0; i < DEV_BYTES / 8; i++) ((uint64_t *)a->shadow)[i] = rnd();
    CHECK_OK(g_be->ops->copy_sync(g_be, a->dev, a->shadow, DEV_BYTES));

    /* d2h: device rows -> distinct host rows */
    distinct(dst_rows, n, nh, a->perm);
    for (int64_t i = 0; i < n; i++) {
        int64_t s = rnd_below(nd);
        pairs[i].src = a->dev + (size_t)s * rb;
        pairs[i].dst = a->host + (size_t)dst_rows[i] * rb;
        memcpy(expect + (size_t)i * rb, a->shadow + (size_t)s * rb, rb);
    }
    dhs_ticket t = 0;
    CHECK_OK(be_copy_async(g_be, pairs, n, rb, &t));
    CHECK(t != 0);
    CHECK_OK(g_be->ops->wait(g_be, t));
    CHECK(g_be->ops->done(g_be, t) == 1);
    for (int64_t i = 0; i < n; i++) CHECK(memcmp(a->host + (size_t)dst_rows[i] * rb, expect + (size_t)i * rb, rb) == 0);

    /* h2d then d2d, each through the shadow */
    distinct(dst_rows, n, nd, a->perm);
    for (int64_t i = 0; i < n; i++) {
        int64_t s = rnd_below(nh);
        pairs[i].src = a->host + (size_t)s * rb;
        pairs[i].dst = a->dev + (size_t)dst_rows[i] * rb;
        memcpy(a->shadow + (size_t)dst_rows[i] * rb, pairs[i].src, rb);
    }
    CHECK_OK(be_copy_async(g_be, pairs, n, rb, &t));
    CHECK_OK(g_be->ops->wait(g_be, t));
    if (compare_dev(a)) return 1;
    distinct(dst_rows, n, nd, a->perm);
    for (int64_t i = 0; i < n; i++) src_rows[i] = rnd_below(nd);
    for (int64_t i = 0; i < n; i++) { /* sources read before any destination is written: snapshot first */
        memcpy(expect + (size_t)i * rb, a->shadow + (size_t)src_rows[i] * rb, rb);
        pairs[i].src = a->dev + (size_t)src_rows[i] * rb;
        pairs[i].dst = a->dev + (size_t)dst_rows[i] * rb;
    }
    /* rows both read and written in one launch would race: keep sources out of destinations */
    {
        uint8_t *is_dst = calloc((size_t)nd, 1);
        CHECK(is_dst);
        for (int64_t i = 0; i < n; i++) is_dst[dst_rows[i]] = 1;
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (!is_dst[src_rows[i]]) {
                pairs[m] = pairs[i];
                memcpy(a->shadow + (size_t)dst_rows[i] * rb, expect + (size_t)i * rb, rb);
                m++;
            }
        free(is_dst);
        CHECK_OK(be_copy_async(g_be, pairs, m, rb, &t));
        CHECK_OK(g_be->ops->wait(g_be, t));
        if (compare_dev(a)) return 1;
    }

    /* ordering: a gather on the compute stream, then a side copy of the same
       device rows to host, issued at once: the side copy must see the gather */
    distinct(dst_rows, 2048, nd, a->perm);
    for (int64_t i = 0; i < 2048; i++) {
        int64_t s = rnd_below(nh / 2);
        pairs[i].src = a->host + (size_t)s * rb;
        pairs[i].dst = a->dev + (size_t)dst_rows[i] * rb;
        memcpy(expect + (size_t)i * rb, pairs[i].src, rb);
        memcpy(a->shadow + (size_t)dst_rows[i] * rb, pairs[i].src, rb);
    }
    CHECK_OK(be_gather(g_be, pairs, 2048, rb));
    distinct(src_rows, 2048, nh / 2, a->perm); /* host destinations in the upper half */
    for (int64_t i = 0; i < 2048; i++) {
        pairs[i].src = a->dev + (size_t)dst_rows[i] * rb;
        pairs[i].dst = a->host + (size_t)(nh / 2 + src_rows[i]) * rb;
    }
    CHECK_OK(be_copy_async(g_be, pairs, 2048, rb, &t));
    CHECK_OK(g_be->ops->wait(g_be, t));
    for (int64_t i = 0; i < 2048; i++)
        CHECK(memcmp(a->host + (size_t)(nh / 2 + src_rows[i]) * rb, expect + (size_t)i * rb, rb) == 0);

    /* contiguous runs (a page backed up / populated): the copy-engine path.
       1 run of 64 rows d2h, 3 runs of 32 rows h2d, 1 run of 64 rows d2d */
    {
        const int64_t pg = 64;
        int64_t h0 = rnd_below(nh - pg), d0 = rnd_below(nd / 2 - pg);
        for (int64_t i = 0; i < pg; i++) {
            pairs[i].src = a->dev + (size_t)(d0 + i) * rb;
            pairs[i].dst = a->host + (size_t)(h0 + i) * rb;
        }
        CHECK_OK(be_copy_async(g_be, pairs, pg, rb, &t));
        CHECK_OK(g_be->ops->wait(g_be, t));
        CHECK(memcmp(a->host + (size_t)h0 * rb, a->shadow + (size_t)d0 * rb, (size_t)pg * rb) == 0);
        for (int run = 0; run < 3; run++) {
            int64_t hs = rnd_below(nh - 32), ds = nd / 2 + run * 40 + 3;
            for (int64_t i = 0; i < 32; i++) {
                pairs[run * 32 + i].src = a->host + (size_t)(hs + i) * rb;
                pairs[run * 32 + i].dst = a->dev + (size_t)(ds + i) * rb;
                memcpy(a->shadow + (size_t)(ds + i) * rb, pairs[run * 32 + i].src, rb);
            }
        }
        CHECK_OK(be_copy_async(g_be, pairs, 96, rb, &t));
        CHECK_OK(g_be->ops->wait(g_be, t));
        if (compare_dev(a)) return 1;
        for (int64_t i = 0; i < pg; i++) { /* d2d, then a gather run on the compute stream */
            pairs[i].src = a->dev + (size_t)(d0 + i) * rb;
            pairs[i].dst = a->dev + (size_t)(nd / 2 + 200 + i) * rb;
        }
        memmove(a->shadow + (size_t)(nd / 2 + 200) * rb, a->shadow + (size_t)d0 * rb, (size_t)pg * rb);
        CHECK_OK(be_copy_async(g_be, pairs, pg, rb, &t));
        CHECK_OK(g_be->ops->wait(g_be, t));
        for (int64_t i = 0; i < pg; i++) {
            pairs[i].src = a->host + (size_t)(h0 + i) * rb;
            pairs[i].dst = a->dev + (size_t)(d0 + i) * rb;
        }
        memcpy(a->shadow + (size_t)d0 * rb, a->host + (size_t)h0 * rb, (size_t)pg * rb);
        CHECK_OK(be_gather(g_be, pairs, pg, rb));
        if (compare_dev(a)) return 1;
    }

    /* many tickets: one single-row copy each, more than the ticket slots */
    for (int64_t i = 0; i < n; i++) {
        dhs_copy_pair p = {a->dev + (size_t)rnd_below(nd) * rb, a->host + (size_t)i * rb};
        memcpy(expect + (size_t)i * rb, a->shadow + ((const uint8_t *)p.src - a->dev), rb);
        CHECK_OK(be_copy_async(g_be, &p, 1, rb, &tk[i]));
        CHECK(i == 0 || tk[i] > tk[i - 1]);
    }
    CHECK_OK(g_be->ops->wait(g_be, tk[n - 1]));
    for (int64_t i = 0; i < n; i++) {
        CHECK(g_be->ops->done(g_be, tk[i]) == 1);
        CHECK_OK(g_be->ops->wait(g_be, tk[i]));
        CHECK(memcmp(a->host + (size_t)i * rb, expect + (size_t)i * rb, rb) == 0);
    }
    CHECK(g_be->ops->done(g_be, 0) == 1);
    CHECK_OK(g_be->ops->wait(g_be, 0));
    free(pairs);
    free(dst_rows);
    free(src_rows);
    free(expect);
    free(tk);
    printf("ok   copy_rows_async: d2h, h2d, d2d, contiguous runs (copy engines), side copy ordered after a gather, %lld tickets\n", (long long)n);
    return 0;
}

/* ----------------------------------------------- 4. readers, 5. streams */

static int test_readers(area *a)
{
    const uint32_t rb = 4096;
    const int64_t n = (int64_t)(DEV_BYTES / rb);
    dhs_copy_pair *pairs = malloc(sizeof(dhs_copy_pair) * (size_t)n);
    CHECK(pairs);
    for (int64_t i = 0; i < n; i++) {
        pairs[i].src = a->host + (size_t)rnd_below((int64_t)(HOST_BYTES / rb)) * rb;
        pairs[i].dst = a->dev + (size_t)i * rb;
    }
    /* ~16 MiB from host per gather, 24 of them: several ms of queued work */
    for (int k = 0; k < 24; k++) CHECK_OK(be_gather(g_be, pairs, n, rb));
    dhs_ticket t = 0;
    CHECK_OK(g_be->ops->record_readers(g_be, &t));
    CHECK(t != 0);
    int early = g_be->ops->done(g_be, t);
    CHECK(early == 0); /* the reader fence cannot have passed 24 queued gathers yet */
    CHECK_OK(g_be->ops->wait(g_be, t));
    CHECK(g_be->ops->done(g_be, t) == 1);
    for (int64_t i = 0; i < n; i++) memcpy(a->shadow + (size_t)i * rb, pairs[i].src, rb);
    if (compare_dev(a)) return 1;
    printf("ok   record_readers: done()=0 behind 24 queued gathers, 1 after wait()\n");

    /* an engine-owned compute stream */
    cudaStream_t mine;
    CHECK(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking) == cudaSuccess);
    void *own = dhs_cuda_stream(g_be);
    CHECK(own != NULL);
    CHECK_OK(dhs_cuda_set_stream(g_be, (void *)mine));
    CHECK(dhs_cuda_stream(g_be) == (void *)mine);
    for (int64_t i = 0; i < n; i++) {
        pairs[i].src = a->host + (size_t)rnd_below((int64_t)(HOST_BYTES / rb)) * rb;
        memcpy(a->shadow + (size_t)i * rb, pairs[i].src, rb);
    }
    CHECK_OK(be_gather(g_be, pairs, n, rb));
    CHECK(cudaStreamSynchronize(mine) == cudaSuccess);
    CHECK_OK(g_be->ops->record_readers(g_be, &t));
    CHECK_OK(g_be->ops->wait(g_be, t));
    if (compare_dev(a)) return 1;
    CHECK_OK(dhs_cuda_set_stream(g_be, NULL));
    CHECK(dhs_cuda_stream(g_be) == own);
    CHECK(cudaStreamDestroy(mine) == cudaSuccess);
    free(pairs);
    printf("ok   dhs_cuda_set_stream: gathers on an engine stream, restored\n");
    return 0;
}

/* ------------------------------------------------------- 6. the resolver */
#ifndef DHS_TEST_NO_CORE /* set by a build of the backends without the core */

static uint64_t mix(uint64_t x) { return dhs_mix64(x + 0x9e3779b97f4a7c15ull); }

/* deterministic row bytes for a key (row_bytes multiple of 8) */
static void fill_row(void *dst, uint32_t row_bytes, uint64_t key)
{
    uint64_t *w = (uint64_t *)dst;
    for (uint32_t i = 0; i < row_bytes / 8; i++) w[i] = mix(key * 1315423911u + i);
}

#define RS_REQ 4
#define RS_K 48
#define RS_KMAX 3
#define RS_HIST 1500
#define RS_ROUNDS 60
#define RS_MAXROWS 4096

typedef struct rs_side {
    const char *name;
    dhs_backend *be;
    dhs_ctx *ctx;
    dhs_req req[RS_REQ];
} rs_side;

static uint64_t row_key(int r, int64_t row, uint32_t epoch)
{
    return ((uint64_t)r << 48) ^ ((uint64_t)epoch << 32) ^ (uint64_t)row;
}

/* opens request r and imports its RS_HIST history rows from src */
static int rs_open(rs_side *s, int r, const uint8_t *src, unsigned flags, uint32_t rb)
{
    CHECK_OK(dhs_request_open(s->ctx, RS_HIST + RS_ROUNDS * RS_KMAX, &s->req[r]));
    {
        void *dbuf = NULL;
        if (flags == DHS_IMPORT_DEVICE && s->be == g_be) { /* prefill output lives on the device */
            CHECK(cudaMalloc(&dbuf, (size_t)RS_HIST * rb) == cudaSuccess);
            CHECK(cudaMemcpy(dbuf, src, (size_t)RS_HIST * rb, cudaMemcpyHostToDevice) == cudaSuccess);
            src = dbuf;
        }
        const void *rows[1] = {src};
        CHECK_OK(dhs_request_import(s->ctx, s->req[r], RS_HIST, rows, flags));
        if (dbuf) CHECK(cudaFree(dbuf) == cudaSuccess);
    }
    return 0;
}

static int rs_setup(rs_side *s, const dhs_arch *arch, const dhs_config *cfg, const uint8_t *hist, uint32_t rb)
{
    CHECK_OK(dhs_ctx_create(arch, cfg, s->be, &s->ctx));
    for (int r = 0; r < RS_REQ; r++)
        if (rs_open(s, r, hist + (size_t)r * RS_HIST * rb, (r & 1) ? DHS_IMPORT_HOST : DHS_IMPORT_DEVICE, rb)) return 1;
    return 0;
}

/* lockstep = 1: complete copies at the same points on both backends and
   require the same locations; 0: let the GPU complete when it does (pages
   pending, readers in flight) and check the bytes only. */
static int test_resolver(int lockstep)
{
    dhs_backend *cpu = NULL;
    /* lockstep: the CPU backend's side copies complete one round late, never
       at issue, as the GPU's do; both sides complete everything before each
       round_begin and after its housekeeping, so both publish the same copies
       at the same housekeeping (dhs_sync inside a round publishes nothing of
       the round's requests: one location per row per round) */
    dhs_cpu_options co = {.async_delay = lockstep ? 1 : 0};
    CHECK_OK(dhs_backend_cpu_create(&co, &cpu));
    dhs_arch arch = dhs_arch_default();
    const uint32_t rb = arch.sources[0].row_bytes;
    dhs_config cfg = dhs_config_default();
    cfg.max_requests = RS_REQ;
    cfg.sel_k = RS_K;
    cfg.spec_width = RS_KMAX;
    cfg.page_rows = 16;
    cfg.hot_rows = 64;  /* < K*k: staging overflow happens */
    cfg.tail_rows = 16;
    cfg.max_rows = RS_MAXROWS;
    /* room for the required allocations and part of the imported history:
       reclaim, host recovery and repopulation all happen */
    cfg.device_bytes = (uint64_t)rb * (RS_REQ * (64 + 16 + RS_KMAX * RS_K) + RS_HIST);
    cfg.reserve_bytes = 0;
    cfg.repop_pages = 4;

    uint8_t *hist = malloc((size_t)RS_REQ * RS_HIST * rb);
    uint32_t *epoch = calloc((size_t)RS_REQ * RS_MAXROWS, sizeof(uint32_t));
    CHECK(hist && epoch);
    for (int r = 0; r < RS_REQ; r++)
        for (int64_t row = 0; row < RS_HIST; row++) fill_row(hist + ((size_t)r * RS_HIST + row) * rb, rb, row_key(r, row, 0));

    rs_side side[2] = {{"cuda", g_be, NULL, {{0, 0}}}, {"cpu", cpu, NULL, {{0, 0}}}};
    for (int b = 0; b < 2; b++)
        if (rs_setup(&side[b], &arch, &cfg, hist, rb)) return 1;

    int32_t *sel = malloc(sizeof(int32_t) * RS_REQ * RS_KMAX * RS_K);
    int32_t *loc[2] = {malloc(sizeof(int32_t) * RS_REQ * RS_KMAX * RS_K), malloc(sizeof(int32_t) * RS_REQ * RS_KMAX * RS_K)};
    int64_t *scratch = malloc(sizeof(int64_t) * RS_MAXROWS), *pick = malloc(sizeof(int64_t) * RS_K);
    uint8_t *row = malloc(rb), *want = malloc(rb), *wbuf = malloc((size_t)RS_KMAX * rb);
    CHECK(sel && loc[0] && loc[1] && scratch && pick && row && want && wbuf);
    int64_t n_r[RS_REQ];
    for (int r = 0; r < RS_REQ; r++) n_r[r] = RS_HIST;
    uint64_t entries = 0;
    char msg[256];

    for (uint32_t round = 1; round <= RS_ROUNDS; round++) {
        int32_t K[RS_REQ], acc[RS_REQ];
        for (int r = 0; r < RS_REQ; r++) {
            K[r] = 1 + (int32_t)rnd_below(RS_KMAX);
            acc[r] = (int32_t)rnd_below(K[r]);
        }
        /* completion times differ between backends (the synchronous CPU backend
           finishes a copy at issue, CUDA later), and the plan depends on what
           has completed (a populated page serves only once ready): complete
           everything at the same points on both, after round_begin's
           housekeeping issued this round's population copies */
        for (int b = 0; b < 2; b++) {
            if (lockstep) CHECK_OK(dhs_sync(side[b].ctx));
            CHECK_OK(dhs_round_begin(side[b].ctx, RS_REQ, side[b].req, K));
            if (lockstep) CHECK_OK(dhs_sync(side[b].ctx));
        }
        /* the current block: rows n_r .. n_r + K - 1 */
        for (int r = 0; r < RS_REQ; r++) {
            for (int32_t j = 0; j < K[r]; j++) {
                epoch[(size_t)r * RS_MAXROWS + n_r[r] + j] = round;
                fill_row(wbuf + (size_t)j * rb, rb, row_key(r, n_r[r] + j, round));
            }
            for (int b = 0; b < 2; b++) CHECK_OK(dhs_write_rows(side[b].ctx, side[b].req[r], 0, n_r[r], K[r], wbuf));
        }
        /* selections: query j sees rows 0 .. n_r + j; distinct rows, some -1 */
        dhs_resolve_item items[2][RS_REQ];
        int32_t *sp = sel;
        for (int r = 0; r < RS_REQ; r++) {
            for (int32_t j = 0; j < K[r]; j++) {
                int64_t vis = n_r[r] + j + 1;
                distinct(pick, RS_K, vis, scratch);
                for (int i = 0; i < RS_K; i++) {
                    /* bias half the picks to recent rows, so hot hits happen too */
                    int64_t v = (i & 1) ? pick[i] : vis - 1 - (pick[i] % 96);
                    sp[(size_t)j * RS_K + i] = (rnd_below(16) == 0) ? -1 : (int32_t)v;
                }
                /* keep rows distinct within a query */
                for (int i = 0; i < RS_K; i++)
                    for (int i2 = 0; i2 < i; i2++)
                        if (sp[(size_t)j * RS_K + i] >= 0 && sp[(size_t)j * RS_K + i2] == sp[(size_t)j * RS_K + i])
                            sp[(size_t)j * RS_K + i] = -1;
            }
            for (int b = 0; b < 2; b++) {
                items[b][r].req = side[b].req[r];
                items[b][r].n_queries = K[r];
                items[b][r].sel = sp;
                items[b][r].loc = loc[b] + (sp - sel);
            }
            sp += (size_t)K[r] * RS_K;
        }
        for (int b = 0; b < 2; b++) CHECK_OK(dhs_resolve(side[b].ctx, 0, RS_K, RS_REQ, items[b]));
        /* same plan on both backends; every location holds the selected row */
        int64_t total = sp - sel;
        for (int64_t e = 0; e < total && lockstep; e++) {
            if (loc[0][e] != loc[1][e]) {
                fprintf(stderr, "round %u entry %lld: cuda loc %d, cpu loc %d\n", round, (long long)e, loc[0][e], loc[1][e]);
                CHECK(loc[0][e] == loc[1][e]);
            }
        }
        sp = sel;
        for (int r = 0; r < RS_REQ; r++) {
            for (int64_t e = 0; e < (int64_t)K[r] * RS_K; e++) {
                int32_t s = sp[e];
                if (s < 0) {
                    CHECK(loc[0][sp - sel + e] == -1 && loc[1][sp - sel + e] == -1);
                    continue;
                }
                fill_row(want, rb, row_key(r, s, epoch[(size_t)r * RS_MAXROWS + s]));
                for (int b = 0; b < 2; b++) {
                    CHECK_OK(dhs_read_location(side[b].ctx, 0, loc[b][sp - sel + e], row));
                    if (memcmp(row, want, rb) != 0) {
                        fprintf(stderr, "round %u req %d row %d: %s location %d holds wrong bytes\n", round, r, s,
                                side[b].name, loc[b][sp - sel + e]);
                        CHECK(0);
                    }
                }
                entries++;
            }
            sp += (size_t)K[r] * RS_K;
        }
        for (int b = 0; b < 2; b++) {
            CHECK_OK(dhs_round_end(side[b].ctx, acc));
            int bad = dhs_check_invariants(side[b].ctx, msg, sizeof msg);
            if (bad) fprintf(stderr, "%s invariants: %s\n", side[b].name, msg);
            CHECK(bad == 0);
        }
        for (int r = 0; r < RS_REQ; r++) n_r[r] += acc[r] + 1;
        if (round == RS_ROUNDS / 2) { /* churn: request 3 leaves, a new one arrives with device history */
            const int r = RS_REQ - 1;
            for (int64_t row = 0; row < RS_HIST; row++) {
                epoch[(size_t)r * RS_MAXROWS + row] = round;
                fill_row(hist + ((size_t)r * RS_HIST + row) * rb, rb, row_key(r, row, round));
            }
            for (int b = 0; b < 2; b++) {
                CHECK_OK(dhs_request_close(side[b].ctx, side[b].req[r]));
                if (rs_open(&side[b], r, hist + (size_t)r * RS_HIST * rb, DHS_IMPORT_DEVICE, rb)) return 1;
            }
            n_r[r] = RS_HIST;
        }
    }

    dhs_stats st[2];
    for (int b = 0; b < 2; b++) dhs_get_stats(side[b].ctx, &st[b]);
    if (lockstep)
        CHECK(st[0].census_direct == st[1].census_direct && st[0].census_hot == st[1].census_hot &&
              st[0].census_host == st[1].census_host);
    CHECK(st[0].census_host > 0); /* host recovery (the gather kernel) was exercised */
    printf("ok   resolver (%s): %d rounds, %llu entries byte-exact on cuda and cpu%s; cuda census "
           "direct %llu, hot %llu, host %llu; staging peak %llu, reclaims %llu, repopulated %llu\n",
           lockstep ? "lockstep" : "free-running", RS_ROUNDS, (unsigned long long)entries,
           lockstep ? ", same locations" : "", (unsigned long long)st[0].census_direct,
           (unsigned long long)st[0].census_hot, (unsigned long long)st[0].census_host,
           (unsigned long long)st[0].staging_rows_peak, (unsigned long long)st[0].reclaims,
           (unsigned long long)st[0].repopulated_pages);

    for (int b = 0; b < 2; b++) {
        for (int r = 0; r < RS_REQ; r++) CHECK_OK(dhs_request_close(side[b].ctx, side[b].req[r]));
        CHECK_OK(dhs_sync(side[b].ctx));
        dhs_ctx_destroy(side[b].ctx);
    }
    CHECK(g_be->dev_bytes == 0 && g_be->host_bytes == 0);
    dhs_backend_destroy(cpu);
    free(hist);
    free(epoch);
    free(sel);
    free(loc[0]);
    free(loc[1]);
    free(scratch);
    free(pick);
    free(row);
    free(want);
    free(wbuf);
    return 0;
}
#endif

/* -------------------------------------------------------------------- main */

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    dhs_status s = dhs_backend_cuda_create(0, &g_be);
    if (s == DHS_ERR_UNSUPPORTED) {
        printf("SKIP: no CUDA device (backend unsupported)\n");
        return 77;
    }
    if (s != DHS_OK) {
        fprintf(stderr, "dhs_backend_cuda_create: %d\n", (int)s);
        return 1;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);

    area a = {0};
    int fail = 0;
    if (be_host_alloc(g_be, HOST_BYTES, (void **)&a.host) != DHS_OK || be_dev_alloc(g_be, DEV_BYTES, (void **)&a.dev) != DHS_OK) {
        fprintf(stderr, "allocation failed (cuda error %d)\n", dhs_cuda_last_error(g_be));
        return 1;
    }
    a.shadow = malloc(DEV_BYTES);
    a.back = malloc(DEV_BYTES);
    a.perm = malloc(sizeof(int64_t) * (HOST_BYTES / 16));
    if (!a.shadow || !a.back || !a.perm) return 1;

    fail |= test_gather(&a);
    if (!fail) fail |= test_publish_list(&a);
    if (!fail) fail |= test_errors(&a);
    if (!fail) fail |= test_async(&a);
    if (!fail) fail |= test_readers(&a);

    be_dev_free(g_be, a.dev, DEV_BYTES);
    be_host_free(g_be, a.host, HOST_BYTES);
    free(a.shadow);
    free(a.back);
    free(a.perm);
    if (!fail && (g_be->dev_bytes != 0 || g_be->host_bytes != 0)) fail = 1;

#ifndef DHS_TEST_NO_CORE
    if (!fail) fail |= test_resolver(1);
    if (!fail) fail |= test_resolver(0);
#else
    printf("SKIP resolver: built without the core (DHS_TEST_NO_CORE)\n");
#endif
    dhs_backend_destroy(g_be);
    printf("%s: %d checks, %d failed\n", fail ? "FAIL" : "PASS", g_checks, g_failed);
    return fail ? 1 : 0;
}
#endif
