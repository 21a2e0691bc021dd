/* test_group_hot.c - per-group hot-cache sizes (dhs_config.group_hot_rows).
 *
 * 1. validation: a bad entry answers DHS_ERR_INVALID_ARG from dhs_ctx_create
 *    and dhs_config_sizes with nothing written;
 * 2. sizes: setting every group to hot_rows is the uniform configuration
 *    figure for figure; per-group request bytes are the sum of each source's
 *    (B_g + T) / p pages; automatic staging follows the smallest B; the
 *    device resolver's state follows each group's B; admission takes the
 *    request bytes the sizes announce;
 * 3. behaviour: groups are independent, so a context with B = {16, 48, 32}
 *    resolves group g exactly as a uniform context with hot_rows = B_g does
 *    (the same census, misses and staged rows call for call), every location
 *    holds the selected row's bytes, and the invariants hold after every
 *    call; with the host resolver (LRU) and the device resolver's reference
 *    (CLOCK-epoch, CPU backend).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhs.h"
#include "test_group_hot.h"
#include "test_help.h"

static void test_validation(void)
{
    const dhs_arch a = arch3();
    dhs_backend *be = NULL;
    CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
    struct { int32_t g, v; const char *why; } bad[] = {
        {0, -8, "negative"}, {1, 12, "not a multiple of page_rows"}, {2, 4, "below page_rows"},
        {0, (1 << 30) + 8, "above 2^30"}, {NG, 16, "a group the architecture does not have"},
        {DHS_MAX_SOURCES - 1, 8, "the last entry, past n_groups"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int res = 0; res < 2; res++) {
            dhs_config c = cfg3(res);
            c.group_hot_rows[bad[i].g] = bad[i].v;
            dhs_sizes z, z0;
            memset(&z, 0xA5, sizeof z);
            z0 = z;
            dhs_ctx *ctx = (dhs_ctx *)&bad[i]; /* must come back NULL */
            CHECK_ST(dhs_config_sizes(&a, &c, &z), DHS_ERR_INVALID_ARG);
            CHECKF(!memcmp(&z, &z0, sizeof z), "dhs_config_sizes wrote *out for %s", bad[i].why);
            CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_ERR_INVALID_ARG);
            CHECKF(ctx == NULL, "dhs_ctx_create left a context for %s", bad[i].why);
        }
    }
    /* the edges that are valid: page_rows itself, and a group set to hot_rows */
    dhs_config c = cfg3(DHS_RESOLVER_HOST);
    c.group_hot_rows[0] = c.page_rows;
    c.group_hot_rows[2] = c.hot_rows;
    dhs_ctx *ctx = NULL;
    CHECK_ST(dhs_ctx_create(&a, &c, be, &ctx), DHS_OK);
    CHECK_INV(ctx);
    dhs_ctx_destroy(ctx);
    dhs_backend_destroy(be);
}

static void test_sizes(void)
{
    const dhs_arch a = arch3();
    for (int res = 0; res < 2; res++) {
        dhs_config u = cfg3(res), e = u, p = u;
        for (int g = 0; g < NG; g++) e.group_hot_rows[g] = u.hot_rows; /* explicit, all equal */
        dhs_sizes zu, ze, zp;
        CHECK_ST(dhs_config_sizes(&a, &u, &zu), DHS_OK);
        CHECK_ST(dhs_config_sizes(&a, &e, &ze), DHS_OK);
        CHECKF(!memcmp(&zu, &ze, sizeof zu), "resolver %d: every group at hot_rows differs from uniform", res);
        /* per-group: B = {16, 48, 32 (hot_rows)} */
        p.group_hot_rows[0] = 16;
        p.group_hot_rows[1] = 48;
        CHECK_ST(dhs_config_sizes(&a, &p, &zp), DHS_OK);
        const uint64_t want_pages = (16 + 16) / 8 + 2 * ((48 + 16) / 8) + (32 + 16) / 8;
        CHECKF(zp.request_bytes == want_pages * zp.page_bytes, "request bytes %llu, want %llu pages of %llu",
               (unsigned long long)zp.request_bytes, (unsigned long long)want_pages, (unsigned long long)zp.page_bytes);
        CHECK(zu.request_bytes == (uint64_t)NSRC * (32 + 16) / 8 * zu.page_bytes);
        /* K * k = 32: no staging while every B >= 32; group 0 at 16 needs it (the widest group: 2 sources) */
        CHECK(zu.staging_arenas == 0 && zu.staging_bytes == 0);
        CHECK(zp.staging_arenas == 2 && zp.staging_bytes > 0);
        dhs_config big = u;
        big.group_hot_rows[0] = big.group_hot_rows[1] = big.group_hot_rows[2] = 64;
        dhs_sizes zb;
        CHECK_ST(dhs_config_sizes(&a, &big, &zb), DHS_OK);
        CHECK(zb.staging_arenas == 0);
        if (res == DHS_RESOLVER_DEVICE) {
            /* the device state of a group holds [N][B] slot arrays and [N][nsrc][B / p] pages: it grows with B */
            CHECK(zu.resolver_bytes > 0 && zb.resolver_bytes > zu.resolver_bytes);
            dhs_config one = u;
            one.group_hot_rows[2] = 64;
            dhs_sizes zo;
            CHECK_ST(dhs_config_sizes(&a, &one, &zo), DHS_OK);
            CHECK(zo.resolver_bytes > zu.resolver_bytes && zo.resolver_bytes < zb.resolver_bytes);
        } else {
            CHECK(zu.resolver_bytes == 0 && zp.resolver_bytes == 0);
        }
        /* admission reserves exactly the announced request bytes; the context's memory follows */
        dhs_backend *be = NULL;
        CHECK_ST(dhs_backend_cpu_create(NULL, &be), DHS_OK);
        dhs_ctx *ctx = NULL;
        CHECK_ST(dhs_ctx_create(&a, &p, be, &ctx), DHS_OK);
        if (!ctx) { dhs_backend_destroy(be); continue; }
        dhs_mem m0, m1;
        CHECK_ST(dhs_get_mem(ctx, &m0), DHS_OK);
        CHECK(m0.required_bytes == zp.staging_bytes);
        dhs_req r[2];
        CHECK_ST(dhs_request_open(ctx, 100, &r[0]), DHS_OK);
        CHECK_ST(dhs_request_open(ctx, 100, &r[1]), DHS_OK);
        CHECK_ST(dhs_get_mem(ctx, &m1), DHS_OK);
        CHECKF(m1.required_bytes == zp.staging_bytes + 2 * zp.request_bytes, "required %llu, staging %llu + 2 x %llu",
               (unsigned long long)m1.required_bytes, (unsigned long long)zp.staging_bytes,
               (unsigned long long)zp.request_bytes);
        CHECK_INV(ctx);
        CHECK_ST(dhs_request_close(ctx, r[0]), DHS_OK);
        CHECK_INV(ctx);
        CHECK_ST(dhs_request_close(ctx, r[1]), DHS_OK);
        CHECK_ST(dhs_sync(ctx), DHS_OK);
        CHECK_INV(ctx);
        dhs_ctx_destroy(ctx);
        /* admission takes the per-group bytes: a pool of staging + one request admits one, the second waits */
        dhs_config tight = p;
        tight.device_bytes = zp.staging_bytes + zp.request_bytes;
        CHECK_ST(dhs_ctx_create(&a, &tight, be, &ctx), DHS_OK);
        if (ctx) {
            CHECK_ST(dhs_request_open(ctx, 100, &r[0]), DHS_OK);
            CHECK_ST(dhs_request_open(ctx, 100, &r[1]), DHS_WAIT);
            CHECK_INV(ctx);
            dhs_ctx_destroy(ctx);
        }
        dhs_backend_destroy(be);
    }
}

static dhs_status cpu_backend(uint64_t seed, dhs_backend **out)
{
    const dhs_cpu_options co = {.async_delay = 1, .random_order = 0, .seed = seed};
    return dhs_backend_cpu_create(&co, out);
}

int main(void)
{
    const uint64_t seed = th_seed("test_group_hot");
    test_validation();
    test_sizes();
    gh_totals t;
    gh_equivalence(DHS_RESOLVER_HOST, seed, cpu_backend, "cpu", 600, &t);
    gh_equivalence(DHS_RESOLVER_DEVICE, seed, cpu_backend, "cpu", 600, &t);
    return th_summary();
}
