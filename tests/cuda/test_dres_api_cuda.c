/* test_dres_api_cuda.c - the device-resolver call sequences of tests/common/test_dres_seq.h (an outside
 * black-box test's findings: a gapped or overflowing dhs_tail_locations, a host-item dhs_resolve that
 * took a device call's error word) through the public API on the CUDA backend. The same sequences run
 * on the CPU backend in test_dres.
 * Per-group hot-cache sizes (tests/common/test_group_hot.h): the per-group context resolves every group
 * as the uniform context at that group's size, on the CUDA backend (host and device resolver), and the
 * CUDA kernels decide as the CPU reference of the device resolver does (the same per-group census over
 * the whole run).
 * dhs_round_tail_locations_device: the kernel writes what the host call writes, every entry.
 * dhs_round_page_tables_device: every entry the kernel writes holds its page's rows (read back through the
 * pool), every page of a group that cannot miss has one, and nothing past the pages is written.
 * No GPU (or built without CUDA): exits 77, which CMake maps to a skip. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_help.h"

#ifndef DHS_HAVE_CUDA
TH_MAIN_WITHOUT_CUDA
#else

#include <cuda_runtime_api.h>

#include "dhs_cuda.h"

/* the engine writes a row at a tail location: a copy into the device pool after everything issued so far
   (dhs_sync is refused inside a round in device mode: the device is synchronised directly) */
static void cuda_write_loc(dhs_ctx *ctx, int32_t src, int32_t loc, const uint8_t *row64)
{
    uint8_t *dst = (uint8_t *)dhs_source_pool(ctx, src) + (uint64_t)loc * dhs_pool_row_stride(ctx);
    CHECK(cudaDeviceSynchronize() == cudaSuccess && cudaMemcpy(dst, row64, 64, cudaMemcpyHostToDevice) == cudaSuccess);
}

static dhs_status seq_device_alloc(int32_t **sel, int32_t **loc)
{
    if (cudaMalloc((void **)sel, sizeof(int32_t) * 2 * 4 * 8) != cudaSuccess) return DHS_ERR_DEVICE_NOMEM;
    if (cudaMalloc((void **)loc, sizeof(int32_t) * 2 * 4 * 8) != cudaSuccess) return DHS_ERR_DEVICE_NOMEM;
    return DHS_OK;
}

static void seq_device_free(int32_t *sel, int32_t *loc)
{
    cudaFree(sel);
    cudaFree(loc);
}

/* selections up, dhs_resolve_device on the backend's stream, locations back after the device finished */
static dhs_status seq_device_resolve(dhs_ctx *ctx, int32_t g, int32_t k, const int32_t *hsel, int32_t *sel, int32_t *loc,
                                     int32_t *hloc)
{
    const size_t b = sizeof(int32_t) * 2 * 4 * 8;
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(sel, hsel, b, cudaMemcpyHostToDevice) != cudaSuccess)
        return DHS_ERR_BACKEND;
    dhs_status s = dhs_resolve_device(ctx, g, k, sel, loc, 0);
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(hloc, loc, b, cudaMemcpyDeviceToHost) != cudaSuccess)
        return DHS_ERR_BACKEND;
    return s;
}

#include "test_dres_seq.h"
#include "test_group_hot.h"

static dhs_status cuda_backend(uint64_t seed, dhs_backend **out)
{
    (void)seed;
    return dhs_backend_cuda_create(0, out);
}

static dhs_status cpu_backend(uint64_t seed, dhs_backend **out)
{
    const dhs_cpu_options co = {.async_delay = 1, .random_order = 0, .seed = seed};
    return dhs_backend_cpu_create(&co, out);
}

static void test_group_hot(void)
{
    const uint64_t seed = th_seed("test_dres_api_cuda group_hot");
    gh_totals tc, tg;
    /* every location is read back with dhs_read_location (one synchronous copy each): 200 rounds */
    gh_equivalence(DHS_RESOLVER_HOST, seed, cuda_backend, "cuda", 200, &tg);
    gh_equivalence(DHS_RESOLVER_DEVICE, seed, cpu_backend, "cpu", 200, &tc);
    gh_equivalence(DHS_RESOLVER_DEVICE, seed, cuda_backend, "cuda", 200, &tg);
    /* the kernels and the CPU reference make the same decisions: the same census per group and context */
    CHECK(tc.calls == tg.calls && tc.compared == tg.compared);
    CHECKF(!memcmp(tc.hot, tg.hot, sizeof tc.hot) && !memcmp(tc.host, tg.host, sizeof tc.host) &&
               !memcmp(tc.direct, tg.direct, sizeof tc.direct) && !memcmp(tc.staged, tg.staged, sizeof tc.staged),
           "per-group census on cuda differs from the cpu reference (group 0 hot %llu vs %llu)",
           (unsigned long long)tg.hot[0][0], (unsigned long long)tc.hot[0][0]);
}

/* dhs_round_tail_locations_device on the CUDA backend (the kernel) against the host call, every entry of
   the device array (the untouched ones too), over random rounds of three groups (one of m = 4, one of two
   sources with non-contiguous ids) */
static void test_round_tail_locations_device(void)
{
    const uint64_t seed = th_seed("test_dres_api_cuda tail locations");
    enum { NR = 6, RS = 3, NS = 4, KM = 3, RBY = 64 };
    dhs_arch a = dhs_arch_default();
    a.n_groups = 3;
    a.n_sources = NS;
    a.sources[0] = (dhs_source_desc){RBY, 1, 1};
    a.sources[1] = (dhs_source_desc){RBY, 1, 0};
    a.sources[2] = (dhs_source_desc){RBY, 4, 2};
    a.sources[3] = (dhs_source_desc){RBY, 1, 1};
    a.n_consumers = 0;
    dhs_config c = dhs_config_default();
    c.max_requests = NR;
    c.sel_k = 8;
    c.spec_width = KM;
    c.page_rows = 4;
    c.hot_rows = 16;
    c.tail_rows = 16;
    c.max_rows = 400;
    c.resolver = DHS_RESOLVER_DEVICE;
    c.policy = DHS_POLICY_CLOCK; /* the device resolver's */
    c.device_bytes = (uint64_t)RBY * 4 * 1200;
    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL;
    int32_t *dloc = NULL;
    static int32_t host[NS * NR * RS], back[NS * NR * RS];
    static uint8_t hist[NS][80 * RBY];
    const void *hp[NS] = {hist[0], hist[1], hist[2], hist[3]};
    dhs_status sb = dhs_backend_cuda_create(0, &be), sc = sb == DHS_OK ? dhs_ctx_create(&a, &c, be, &ctx) : sb;
    if (sc != DHS_OK || cudaMalloc((void **)&dloc, sizeof host) != cudaSuccess) {
        CHECKF(0, "tail locations: set-up (backend %s, context %s)", dhs_status_str(sb), dhs_status_str(sc));
        goto out;
    }
    uint64_t rng = seed;
    dhs_req r[NR];
    for (int i = 0; i < NR; i++) {
        CHECK_ST(dhs_request_open(ctx, 300, &r[i]), DHS_OK);
        CHECK_ST(dhs_request_import(ctx, r[i], 61 + i, hp, DHS_IMPORT_HOST), DHS_OK);
    }
    long compared = 0;
    for (int round = 0; round < 80; round++) {
        dhs_req rr[NR];
        int32_t K[NR], acc[NR], n = 0;
        for (int i = 0; i < NR; i++)
            if (dhs_rng_next(&rng) % 4 != 0) {
                rr[n] = r[i];
                K[n] = 1 + (int32_t)(dhs_rng_next(&rng) % KM);
                acc[n] = (int32_t)(dhs_rng_next(&rng) % (uint64_t)K[n]);
                n++;
            }
        CHECK_ST(dhs_round_begin(ctx, n, rr, K), DHS_OK);
        for (size_t j = 0; j < sizeof host / sizeof host[0]; j++) host[j] = -7;
        CHECK(cudaMemcpy(dloc, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK_ST(dhs_round_tail_locations_device(ctx, RS, (int64_t)RS * NR, dloc), DHS_OK);
        CHECK_ST(dhs_round_tail_locations(ctx, RS, (int64_t)RS * NR, host), DHS_OK);
        CHECK(cudaMemcpyAsync(back, dloc, sizeof back, cudaMemcpyDeviceToHost,
                              (cudaStream_t)dhs_cuda_stream(be)) == cudaSuccess &&
              cudaStreamSynchronize((cudaStream_t)dhs_cuda_stream(be)) == cudaSuccess);
        int bad = -1;
        for (size_t j = 0; j < sizeof host / sizeof host[0]; j++, compared++)
            if (host[j] != back[j] && bad < 0) bad = (int)j;
        CHECKF(bad < 0, "round %d: device tail location %d is %d, the host call's %d", round, bad, bad < 0 ? 0 : back[bad],
               bad < 0 ? 0 : host[bad]);
        CHECK_ST(dhs_round_end(ctx, acc), DHS_OK);
        CHECK_INV(ctx);
    }
    printf("test_dres_api_cuda: dhs_round_tail_locations_device == the host call, %ld entries over 80 rounds\n",
           compared);
out:
    if (dloc) cudaFree(dloc);
    dhs_ctx_destroy(ctx);
    if (be) dhs_backend_destroy(be);
}

/* dhs_round_page_tables_device on the CUDA backend: three requests decoding from imports of different
   lengths, decoded pages joining the optional history, a device budget that holds some of them; every
   entry >= 0 is read back through the pool and compared with the row's bytes */
static void test_round_page_tables_device(void)
{
    enum { NR = 3, NS = 3, RBY = 64, PS = 40, ROUNDS = 60 };
    dhs_arch a = dhs_arch_default();
    a.n_groups = 2;
    a.n_sources = NS;
    a.sources[0] = (dhs_source_desc){RBY, 1, 0};
    a.sources[1] = (dhs_source_desc){RBY, 1, 1};
    a.sources[2] = (dhs_source_desc){RBY, 1, 1};
    a.n_consumers = 0;
    dhs_config c = dhs_config_default();
    c.max_requests = NR;
    c.sel_k = 8;
    c.spec_width = 1;
    c.page_rows = 4;
    c.hot_rows = 8;
    c.tail_rows = 16;
    c.max_rows = 150;
    c.resolver = DHS_RESOLVER_DEVICE;
    c.policy = DHS_POLICY_CLOCK;
    c.resident_first = 1;
    c.repop_pages = 4;
    c.decoded_optional = 1;
    dhs_backend *be = NULL;
    dhs_ctx *ctx = NULL;
    int32_t *dtab = NULL;
    static int32_t tab[NS * NR * PS + 1];
    static uint8_t hist[NS][120 * RBY];
    const void *hp[NS] = {hist[0], hist[1], hist[2]};
    long rows = 0, none = 0, direct_rounds = 0;
    dhs_status sb = dhs_backend_cuda_create(0, &be), sc = DHS_ERR_BACKEND;
    dhs_sizes sz;
    if (sb == DHS_OK) { /* the fixed needs and 60 optional pages a source: 40 never let group 1's two sources hold
                           all three histories (no round without a miss); 60 does for 30 of the 60 rounds (the
                           same configuration on the CPU backend) */
        (void)dhs_config_sizes(&a, &c, &sz);
        c.device_bytes = sz.min_device_bytes + (uint64_t)(NR - 1) * sz.request_bytes + (uint64_t)60 * NS * sz.page_bytes;
        sc = dhs_ctx_create(&a, &c, be, &ctx);
    }
    if (sc != DHS_OK || cudaMalloc((void **)&dtab, sizeof tab) != cudaSuccess) {
        CHECKF(0, "page tables: set-up (backend %s, context %s)", dhs_status_str(sb), dhs_status_str(sc));
        goto out;
    }
    dhs_req r[NR];
    int64_t n[NR];
    for (int i = 0; i < NR; i++) {
        n[i] = 30 + 13 * i;
        for (int s = 0; s < NS; s++)
            for (int64_t row = 0; row < n[i]; row++) th_fill_row(hist[s] + row * RBY, RBY, (uint64_t)i + 1, s, row, 0);
        CHECK_ST(dhs_request_open(ctx, 140, &r[i]), DHS_OK);
        CHECK_ST(dhs_request_import(ctx, r[i], n[i], hp, DHS_IMPORT_HOST), DHS_OK);
    }
    for (int round = 0; round < ROUNDS; round++) {
        int32_t K[NR] = {1, 1, 1}, acc[NR] = {0, 0, 0};
        CHECK_ST(dhs_round_begin(ctx, NR, r, K), DHS_OK);
        for (int i = 0; i < NR; i++)
            for (int s = 0; s < NS; s++) {
                int32_t tl = -1;
                uint8_t row[RBY];
                CHECK_ST(dhs_tail_locations(ctx, r[i], s, n[i], 1, &tl), DHS_OK);
                th_fill_row(row, RBY, (uint64_t)i + 1, s, n[i], 0);
                if (tl >= 0) cuda_write_loc(ctx, s, tl, row);
            }
        int mg[2] = {1, 1};
        CHECK_ST(dhs_round_may_miss(ctx, 0, &mg[0]), DHS_OK);
        CHECK_ST(dhs_round_may_miss(ctx, 1, &mg[1]), DHS_OK);
        direct_rounds += !mg[0] && !mg[1];
        for (size_t j = 0; j < sizeof tab / sizeof tab[0]; j++) tab[j] = -9;
        CHECK(cudaMemcpy(dtab, tab, sizeof tab, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK_ST(dhs_round_page_tables_device(ctx, PS, (int64_t)NR * PS, dtab), DHS_OK);
        CHECK(cudaMemcpyAsync(tab, dtab, sizeof tab, cudaMemcpyDeviceToHost, (cudaStream_t)dhs_cuda_stream(be)) == cudaSuccess &&
              cudaStreamSynchronize((cudaStream_t)dhs_cuda_stream(be)) == cudaSuccess);
        for (int s = 0; s < NS; s++)
            for (int i = 0; i < NR; i++) {
                const int gm = mg[s == 0 ? 0 : 1];
                const int64_t npg = (n[i] + 1 + 3) / 4;
                for (int64_t P = 0; P < PS; P++) {
                    const int32_t e = tab[(int64_t)s * NR * PS + (int64_t)i * PS + P];
                    if (P >= npg) {
                        CHECKF(e == -9, "round %d source %d request %d: entry %lld past its %lld pages", round, s, i,
                               (long long)P, (long long)npg);
                        continue;
                    }
                    if (e < 0) {
                        CHECKF(e == -1 && gm, "round %d source %d request %d page %lld: entry %d (group may miss: %d)",
                               round, s, i, (long long)P, e, gm);
                        none++;
                        continue;
                    }
                    for (int64_t row = P * 4; row < P * 4 + 4 && row <= n[i]; row++, rows++)
                        CHECKF(th_loc_holds(ctx, s, RBY, (int32_t)(e * 4 + row % 4), (uint64_t)i + 1, row, 0),
                               "round %d source %d request %d row %lld: page %d does not hold it", round, s, i,
                               (long long)row, e);
                }
            }
        CHECK(tab[NS * NR * PS] == -9);
        CHECK_ST(dhs_round_end(ctx, acc), DHS_OK);
        CHECK_INV(ctx);
        for (int i = 0; i < NR; i++) n[i]++;
    }
    printf("test_dres_api_cuda: page tables over %d rounds: %ld rows read through their entries, %ld pages not "
           "direct, %ld rounds with no group that may miss\n", ROUNDS, rows, none, direct_rounds);
    CHECKF(rows > 0 && direct_rounds > 0 && none > 0, "page tables: %ld rows checked, %ld pages not direct, %ld direct rounds",
           rows, none, direct_rounds);
out:
    if (dtab) cudaFree(dtab);
    dhs_ctx_destroy(ctx);
    if (be) dhs_backend_destroy(be);
}

int main(void)
{
    dhs_backend *be = NULL;
    if (dhs_backend_cuda_create(0, &be) != DHS_OK) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    test_device_sequences_on(be, cuda_write_loc);
    dhs_backend_destroy(be);
    printf("test_dres_api_cuda: sequences 1-3 on %s\n", "the CUDA backend");
    test_group_hot();
    test_round_tail_locations_device();
    test_round_page_tables_device();
    return th_summary();
}
#endif
