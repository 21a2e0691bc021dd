/* test_sizing.c - closed-form sizes (DESIGN §6) and the block-width schedule (§5). */
#include <math.h>
#include <stdio.h>

#include "dhs_plan.h"
#include "dhs.h"
#include "test_help.h"

int main(void)
{
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    CHECK(dhs_ring_rows(2048, 8, 64) == 2176);
    CHECK(dhs_ring_rows(2048, 6, 64) == 2176); /* covers the six- and four-query blocks too */
    CHECK(dhs_ring_rows(0, 1, 64) == 64);
    CHECK(dhs_ring_rows(64, 1, 64) == 128);
    double ring = (double)dhs_ring_bytes(2048, 8, 64, 35, 12288) / GiB;
    printf("ring: 35 slots x 2176 rows x 12288 B = %.4f GiB\n", ring);
    CHECK(fabs(ring - 0.87) < 0.01);
    double s78 = (double)dhs_staging_bytes(78, 35, 8, 2048, 576) / GiB, s4 = (double)dhs_staging_bytes(4, 35, 8, 2048, 576) / GiB;
    printf("staging: 78 live sources %.3f GiB, 4 live sources %.3f GiB (ratio %.1f)\n", s78, s4, s78 / s4);
    CHECK(fabs(s78 - 24.0) < 0.05 && fabs(s4 - 1.23) < 0.01);
    /* ring addressing: live positions of one slot never share a row; slots disjoint */
    int64_t R = dhs_ring_rows(2048, 8, 64);
    int collide = 0;
    for (int64_t t = 0; t < 3 * R; t++)
        for (int64_t d = 1; d < R; d += 97)
            if (dhs_ring_row(R, 3, t) == dhs_ring_row(R, 3, t + d)) collide++;
    CHECK(collide == 0);
    CHECK(dhs_ring_row(R, 1, 0) == R && dhs_ring_row(R, 0, R - 1) == R - 1 && dhs_ring_row(R, 0, R) == 0);
    CHECK(dhs_ring_row(R, -1, 0) == -1);
    /* schedule: 8 up to 32 sessions, 6 at 64, 4 from 128 */
    dhs_spec_schedule s = dhs_spec_schedule_default();
    CHECK(dhs_spec_width(&s, 1) == 8 && dhs_spec_width(&s, 32) == 8 && dhs_spec_width(&s, 64) == 6);
    CHECK(dhs_spec_width(&s, 127) == 6 && dhs_spec_width(&s, 128) == 4 && dhs_spec_width(&s, 1000) == 4);
    dhs_spec_schedule p;
    CHECK(dhs_spec_schedule_parse("8@0,6@33,4@128", &p) == 0);
    CHECK(p.n_steps == 3 && dhs_spec_width(&p, 64) == 6 && dhs_spec_width(&p, 200) == 4);
    CHECK(dhs_spec_schedule_parse("4@0,2@16", &p) == 0 && dhs_spec_width(&p, 20) == 2);
    CHECK(dhs_spec_schedule_parse("", &p) != 0);
    CHECK(dhs_spec_schedule_parse("8@10,6@5", &p) != 0); /* not ascending */
    CHECK(dhs_spec_schedule_parse("8@0,x", &p) != 0);
    CHECK(dhs_spec_schedule_parse("0@0", &p) != 0);
    /* dhs_config_sizes says exactly what dhs_ctx_create reserves */
    for (int spec = 1; spec <= 8; spec *= 8) {
        dhs_arch a = dhs_arch_default();
        a.n_sources = 3;
        a.sources[1] = (dhs_source_desc){576, 1, 0};
        a.sources[2] = (dhs_source_desc){576, 1, 0};
        dhs_config c = dhs_config_default();
        c.max_requests = 4;
        c.sel_k = 256;
        c.spec_width = spec;
        c.hot_rows = 512;
        c.max_rows = 4096;
        c.reserve_bytes = 1000;
        dhs_sizes z;
        CHECK(dhs_config_sizes(&a, &c, &z) == DHS_OK);
        printf("sizes (K_max %d): page %llu B, request %llu B, staging %llu B in %d arenas, reserve %llu B, minimum %llu B\n",
               spec, (unsigned long long)z.page_bytes, (unsigned long long)z.request_bytes, (unsigned long long)z.staging_bytes,
               z.staging_arenas, (unsigned long long)z.reserve_bytes, (unsigned long long)z.min_device_bytes);
        CHECK(z.request_bytes == 3ull * (512 + 128) * 576 && z.reserve_bytes == z.page_bytes);
        CHECK(spec == 1 ? z.staging_arenas == 0 : (z.staging_arenas == 3 && z.staging_bytes == 3ull * 4 * 8 * 256 * 576));
        dhs_backend *be;
        dhs_ctx *ctx;
        CHECK(dhs_backend_cpu_create(NULL, &be) == DHS_OK);
        c.device_bytes = z.min_device_bytes - z.page_bytes;
        CHECK(dhs_ctx_create(&a, &c, be, &ctx) == DHS_ERR_TOO_LARGE);
        c.device_bytes = z.min_device_bytes;
        CHECK(dhs_ctx_create(&a, &c, be, &ctx) == DHS_OK);
        dhs_req r, r2;
        CHECK(dhs_request_open(ctx, 100, &r) == DHS_OK);
        CHECK(dhs_request_open(ctx, 100, &r2) == DHS_WAIT); /* exactly one request fits */
        dhs_mem m;
        dhs_get_mem(ctx, &m);
        CHECK(m.required_bytes == z.staging_bytes + z.request_bytes && m.reserve_bytes == z.reserve_bytes && m.pool_bytes == z.min_device_bytes);
        dhs_ctx_destroy(ctx);
        dhs_backend_destroy(be);
    }
    dhs_sizes z;
    dhs_config bad = dhs_config_default();
    bad.spec_width = 0;
    dhs_arch a0 = dhs_arch_default();
    CHECK(dhs_config_sizes(&a0, &bad, &z) == DHS_ERR_INVALID_ARG);
    CHECK(dhs_config_sizes(NULL, &bad, &z) == DHS_ERR_INVALID_ARG);
    return th_summary();
}
