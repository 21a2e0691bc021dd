/* test_dres_graph.c - a whole decode step of a GLM-like architecture (21
 * producers, 78 sources in FOLLOW groups, k = 2048) on the device resolver,
 * captured once as a CUDA graph and replayed every round, against the same
 * calls issued eagerly on a second context.
 *
 * Two contexts with the same configuration, each on its own CUDA backend
 * (resolver = DEVICE, policy = CLOCK). Every round, on both:
 *   dhs_sync (no round open: every backup completed, so both publish the same
 *   tail windows), dhs_round_begin, dhs_tail_locations for the block's rows
 *   (the engine would write them in place), the round's selections written
 *   into the fixed device selection buffers of every group; then
 *     context A: cudaGraphLaunch of the step captured in round 1
 *                (for every group: dhs_resolve_device with DHS_RESOLVE_SPLIT, dhs_source_wait
 *                of each later source, then dhs_group_done except for the
 *                last group, left to dhs_round_end: the split copies fork
 *                from the captured stream and join it inside the graph),
 *     context B: dhs_resolve_device and dhs_group_done issued eagerly;
 *   dhs_round_end, and every group's location buffer of A must equal B's
 *   byte for byte. Every 50 rounds, before the round end, the last group's
 *   located history rows are read back on both sides and must hold their
 *   rows' bytes (every source has its own history). Selections change every round (a drifting working set per
 *   request and group, uniform picks, duplicates, -1 padding), so hits,
 *   misses, evictions and host copies all happen.
 * Prints the seed and the host µs per round of both paths.
 *
 * No GPU (or built without CUDA): exits 77, which CMake maps to a skip.
 * DHS_TEST_SCALE scales the rounds (default 1000).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_help.h"

#ifndef DHS_HAVE_CUDA
TH_MAIN_WITHOUT_CUDA
#else

#include <cuda_runtime_api.h>

#include "dhs_cuda.h"

#define G_GROUPS 21
#define G_SOURCES 78
#define G_REQ 4
#define G_K 2048
#define G_HIST 4096
#define G_ROW 64
#define G_WS 2600 /* working-set rows per (request, group) */

static uint64_t g_rng;
static uint64_t rnd(void)
{
    g_rng += 0x9e3779b97f4a7c15ull;
    return dhs_mix64(g_rng);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

typedef struct side {
    dhs_backend *be;
    dhs_ctx *ctx;
    dhs_req req[G_REQ];
    int32_t *sel[G_GROUPS], *loc[G_GROUPS]; /* device buffers, fixed for the whole run */
    cudaStream_t s;
} side;

static int nsrc_of(int32_t g) { return g < 15 ? 4 : 3; } /* 15 x 4 + 6 x 3 = 78 sources */

static int side_open(side *sd, const dhs_arch *arch, const dhs_config *cfg, const void *const *rows)
{
    dhs_status s = dhs_backend_cuda_create(0, &sd->be);
    if (s != DHS_OK) return s == DHS_ERR_UNSUPPORTED ? 77 : 1;
    CHECK_ST(dhs_ctx_create(arch, cfg, sd->be, &sd->ctx), DHS_OK);
    if (!sd->ctx) return 1;
    sd->s = (cudaStream_t)dhs_cuda_stream(sd->be);
    for (int r = 0; r < G_REQ; r++) {
        CHECK_ST(dhs_request_open(sd->ctx, G_HIST + 4096, &sd->req[r]), DHS_OK);
        CHECK_ST(dhs_request_import(sd->ctx, sd->req[r], G_HIST, rows, DHS_IMPORT_HOST), DHS_OK);
    }
    for (int32_t g = 0; g < G_GROUPS; g++) {
        const size_t sb = sizeof(int32_t) * G_REQ * cfg->spec_width * G_K;
        if (cudaMalloc((void **)&sd->sel[g], sb) != cudaSuccess ||
            cudaMalloc((void **)&sd->loc[g], sb * (size_t)nsrc_of(g)) != cudaSuccess)
            return 1;
    }
    return th_failed ? 1 : 0;
}

static void side_close(side *sd)
{
    for (int32_t g = 0; g < G_GROUPS; g++) {
        if (sd->sel[g]) cudaFree(sd->sel[g]);
        if (sd->loc[g]) cudaFree(sd->loc[g]);
    }
    dhs_ctx_destroy(sd->ctx);
    dhs_backend_destroy(sd->be);
}

/* the decode step: every group resolved, in layer order, and declared done
   except the last, whose staged rows dhs_round_end promotes: on the graph
   side it must do so on every replay although the host saw the resolve only
   while capturing (a skipped promotion leaves the staging arenas owned, and
   the next round's first overflow fails with DHS_ERR_STAGING) */
static dhs_status step(side *sd, int split)
{
    for (int32_t g = 0; g < G_GROUPS; g++) {
        dhs_status s = dhs_resolve_device(sd->ctx, g, G_K, sd->sel[g], sd->loc[g], split ? DHS_RESOLVE_SPLIT : 0);
        for (int32_t si = 1; split && si < nsrc_of(g) && s == DHS_OK; si++) s = dhs_source_wait(sd->ctx, g, si);
        if (s == DHS_OK && g + 1 < G_GROUPS) s = dhs_group_done(sd->ctx, g);
        if (s != DHS_OK) return s;
    }
    return DHS_OK;
}

/* the last group's located history rows (its locations are valid until the round end) hold their
   rows' bytes (called before the side's round end; A's came through the split copies). Returns the rows
   checked. */
static long check_rows(side *sd, const char *name, const int32_t *const *sel_h)
{
    const int32_t g = G_GROUPS - 1, src0 = G_SOURCES - nsrc_of(g);
    const size_t lbytes = sizeof(int32_t) * G_REQ * G_K * (size_t)nsrc_of(g);
    int32_t *loc = malloc(lbytes);
    long checked = 0;
    if (loc) {
        CHECK(cudaStreamSynchronize(sd->s) == cudaSuccess);
        CHECK(cudaMemcpy(loc, sd->loc[g], lbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        for (int32_t si = 0; si < nsrc_of(g); si++) {
            const int32_t src = src0 + si;
            const size_t pb = (size_t)dhs_source_pool_rows(sd->ctx, src) * dhs_pool_row_stride(sd->ctx);
            uint8_t *pool = malloc(pb);
            if (!pool || cudaMemcpy(pool, dhs_source_pool(sd->ctx, src), pb, cudaMemcpyDeviceToHost) != cudaSuccess) {
                CHECK(0);
                free(pool);
                continue;
            }
            long bad = 0;
            for (int r = 0; r < G_REQ; r++)
                for (int i = 0; i < G_K; i++) {
                    const int32_t s = sel_h[g][r * G_K + i], l = loc[((size_t)si * G_REQ + (size_t)r) * G_K + (size_t)i];
                    if (s < 0 || s >= G_HIST) continue; /* padding; rows the test never wrote */
                    uint8_t want[G_ROW];
                    th_fill_row(want, G_ROW, 1, src, s, 0);
                    if (l < 0 || memcmp(pool + (size_t)l * dhs_pool_row_stride(sd->ctx), want, G_ROW)) bad++;
                    checked++;
                }
            CHECKF(bad == 0, "%s side: source %d: %ld located rows hold wrong bytes", name, src, bad);
            free(pool);
        }
    }
    free(loc);
    return checked;
}

/* host part of a round before the step: tail windows settled, round opened,
   the block's rows located (as the engine's KV-write kernel would), the
   selections uploaded into the fixed buffers */
static dhs_status round_open(side *sd, const int64_t *n, const int32_t *const *sel_h)
{
    const int32_t K[G_REQ] = {1, 1, 1, 1};
    dhs_status s = dhs_sync(sd->ctx);
    if (s == DHS_OK) s = dhs_round_begin(sd->ctx, G_REQ, sd->req, K);
    int32_t loc1;
    for (int r = 0; r < G_REQ && s == DHS_OK; r++)
        for (int32_t src = 0; src < G_SOURCES && s == DHS_OK; src++)
            s = dhs_tail_locations(sd->ctx, sd->req[r], src, n[r], 1, &loc1);
    for (int32_t g = 0; g < G_GROUPS && s == DHS_OK; g++)
        if (cudaMemcpyAsync(sd->sel[g], sel_h[g], sizeof(int32_t) * G_REQ * G_K, cudaMemcpyHostToDevice, sd->s) !=
            cudaSuccess)
            s = DHS_ERR_BACKEND;
    return s;
}

int main(void)
{
    const uint64_t seed = th_seed("test_dres_graph");
    g_rng = seed;
    int rounds = (int)(1000 * th_scale());
    if (rounds < 10) rounds = 10;

    dhs_arch arch;
    memset(&arch, 0, sizeof arch);
    arch.n_groups = G_GROUPS;
    arch.n_sources = G_SOURCES;
    for (int32_t g = 0, src = 0; g < G_GROUPS; g++)
        for (int i = 0; i < nsrc_of(g); i++, src++) {
            arch.sources[src].row_bytes = G_ROW;
            arch.sources[src].m = 1;
            arch.sources[src].group = g;
            arch.consumers[arch.n_consumers].kind = i == 0 ? DHS_CONSUMER_OWN : DHS_CONSUMER_FOLLOW;
            arch.consumers[arch.n_consumers].source = src;
            arch.consumers[arch.n_consumers].group = g;
            arch.n_consumers++;
        }
    CHECK_ST(dhs_arch_validate(&arch), DHS_OK);
    dhs_config cfg = dhs_config_default();
    cfg.max_requests = G_REQ;
    cfg.sel_k = G_K;
    cfg.spec_width = 1;
    cfg.page_rows = 64;
    cfg.hot_rows = 1024; /* below a call's distinct rows (~1,400 of k = 2048): overflow into staging, so promotions move rows */
    cfg.tail_rows = 64;
    cfg.max_rows = G_HIST + 4096;
    cfg.device_bytes = (uint64_t)512 << 20;
    cfg.reserve_bytes = 0;
    cfg.repop_pages = 0; /* no population: what serves from device depends only on the calls */
    cfg.policy = DHS_POLICY_CLOCK;
    cfg.resolver = DHS_RESOLVER_DEVICE;

    uint8_t *hist = malloc((size_t)G_SOURCES * G_HIST * G_ROW);
    const void *rows[G_SOURCES];
    for (int i = 0; i < G_SOURCES; i++) {
        rows[i] = hist + (size_t)i * G_HIST * G_ROW;
        for (int64_t row = 0; row < G_HIST; row++)
            th_fill_row(hist + ((size_t)i * G_HIST + (size_t)row) * G_ROW, G_ROW, 1, i, row, 0);
    }
    side A, B;
    memset(&A, 0, sizeof A);
    memset(&B, 0, sizeof B);
    int rc = side_open(&A, &arch, &cfg, (const void *const *)rows);
    if (rc == 77) {
        printf("SKIP: no CUDA device\n");
        free(hist);
        return 77;
    }
    if (rc == 0) rc = side_open(&B, &arch, &cfg, (const void *const *)rows);
    CHECK(rc == 0);
    /* A's split copies with a small grid: each block strides over hundreds of rows */
    if (rc == 0) {
        CHECK_ST(dhs_cuda_set_copy_queue_blocks(A.be, -1), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_cuda_set_copy_queue_blocks(A.be, 3), DHS_OK);
    }
    if (rc) return th_summary();

    int32_t *sel_h[G_GROUPS], *ws[G_GROUPS];
    for (int32_t g = 0; g < G_GROUPS; g++) {
        sel_h[g] = malloc(sizeof(int32_t) * G_REQ * G_K);
        ws[g] = malloc(sizeof(int32_t) * G_REQ * G_WS);
        for (int i = 0; i < G_REQ * G_WS; i++) ws[g][i] = (int32_t)(rnd() % G_HIST);
    }
    const size_t loc_max = sizeof(int32_t) * G_REQ * G_K * 4;
    int32_t *la = malloc(loc_max), *lb = malloc(loc_max);
    int64_t n[G_REQ];
    for (int r = 0; r < G_REQ; r++) n[r] = G_HIST;

    cudaGraphExec_t exec = NULL;
    double host_a = 0, host_b = 0, launch_a = 0, launch_b = 0;
    double open_a = 0, wait_a = 0, end_a = 0, gpu_a = 0; /* the captured round, split */
    cudaEvent_t ev0, ev1;
    CHECK(cudaEventCreate(&ev0) == cudaSuccess && cudaEventCreate(&ev1) == cudaSuccess);
    long mismatches = 0, compared = 0, rows_checked = 0;
    const int32_t acc[G_REQ] = {0, 0, 0, 0};
    for (int round = 0; round < rounds && th_failed == 0; round++) {
        /* this round's selections: query 0 of request r sees rows 0 .. n_r */
        for (int32_t g = 0; g < G_GROUPS; g++)
            for (int r = 0; r < G_REQ; r++) {
                int32_t *w = ws[g] + r * G_WS;
                for (int i = 0; i < 20; i++) w[rnd() % G_WS] = (int32_t)(rnd() % (uint64_t)(n[r] + 1)); /* drift */
                for (int i = 0; i < G_K; i++) {
                    const uint64_t u = rnd() % 100;
                    int32_t s = u < 3 ? -1 : u < 83 ? w[rnd() % G_WS] : (int32_t)(rnd() % (uint64_t)(n[r] + 1));
                    sel_h[g][r * G_K + i] = s;
                }
            }
        /* A: the captured step */
        double t0 = now_us();
        CHECK_ST(round_open(&A, n, (const int32_t *const *)sel_h), DHS_OK);
        if (!exec) {
            cudaGraph_t graph;
            CHECK(cudaStreamBeginCapture(A.s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
            const dhs_status cs = step(&A, 1);
            CHECK(cudaStreamEndCapture(A.s, &graph) == cudaSuccess);
            CHECK_ST(cs, DHS_OK);
            CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
            cudaGraphDestroy(graph);
            if (th_failed) break;
        }
        double t1 = now_us();
        CHECK(cudaEventRecord(ev0, A.s) == cudaSuccess);
        CHECK(cudaGraphLaunch(exec, A.s) == cudaSuccess);
        CHECK(cudaEventRecord(ev1, A.s) == cudaSuccess);
        double t2 = now_us();
        CHECK(cudaStreamSynchronize(A.s) == cudaSuccess); /* the GPU's share, timed apart from the host's */
        double tw = now_us();
        if (round % 50 == 1) { /* outside the timed share */
            rows_checked += check_rows(&A, "graph (split)", (const int32_t *const *)sel_h);
            tw = now_us();
        }
        CHECK_ST(dhs_round_end(A.ctx, acc), DHS_OK);
        double t3 = now_us();
        if (round > 0) { /* round 0 includes the capture */
            float ms = 0;
            CHECK(cudaEventElapsedTime(&ms, ev0, ev1) == cudaSuccess);
            host_a += t3 - t0;
            launch_a += t2 - t1;
            open_a += t1 - t0;
            wait_a += tw - t2;
            end_a += t3 - tw;
            gpu_a += 1000.0 * ms;
        }
        /* B: the same calls, eagerly */
        t0 = now_us();
        CHECK_ST(round_open(&B, n, (const int32_t *const *)sel_h), DHS_OK);
        t1 = now_us();
        CHECK_ST(step(&B, 0), DHS_OK);
        t2 = now_us();
        if (round % 50 == 1) rows_checked += check_rows(&B, "eager", (const int32_t *const *)sel_h);
        CHECK_ST(dhs_round_end(B.ctx, acc), DHS_OK);
        t3 = now_us();
        if (round > 0) {
            host_b += t3 - t0;
            launch_b += t2 - t1;
        }
        /* identical locations, every group, every source */
        for (int32_t g = 0; g < G_GROUPS; g++) {
            const size_t bytes = sizeof(int32_t) * G_REQ * G_K * (size_t)nsrc_of(g);
            CHECK(cudaMemcpy(la, A.loc[g], bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK(cudaMemcpy(lb, B.loc[g], bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
            compared += (long)(bytes / sizeof(int32_t));
            if (memcmp(la, lb, bytes) != 0) {
                size_t i = 0;
                while (la[i] == lb[i]) i++;
                if (mismatches++ < 5)
                    CHECKF(0, "round %d group %d: location %zu graph %d eager %d", round, g, i, la[i], lb[i]);
            }
        }
        if (round % 100 == 0) {
            char msg[256];
            const int bad = dhs_check_invariants(A.ctx, msg, sizeof msg) + dhs_check_invariants(B.ctx, msg, sizeof msg);
            CHECKF(bad == 0, "invariants: %s", msg);
        }
        for (int r = 0; r < G_REQ; r++) n[r] += 1;
    }
    dhs_stats sa, sb;
    dhs_get_stats(A.ctx, &sa);
    dhs_get_stats(B.ctx, &sb);
    CHECK(sa.census_host == sb.census_host && sa.census_hot == sb.census_hot && sa.census_direct == sb.census_direct);
    CHECK(sa.census_host > 0 && sa.census_hot > 0); /* misses and hits both happened */
    CHECKF(sa.staging_rows > 0 && sa.staging_rows == sb.staging_rows, "staging rows graph %llu eager %llu", /* overflow: promotions moved rows */
           (unsigned long long)sa.staging_rows, (unsigned long long)sb.staging_rows);
    CHECK(rows_checked > 0);
    printf("test_dres_graph: %d rounds x %d groups (%d sources), %ld locations compared, %ld mismatching groups; "
           "%ld located history rows read back on each side, all equal to their rows\n",
           rounds, G_GROUPS, G_SOURCES, compared, mismatches, rows_checked);
    printf("host us per round: graph %.1f (launch %.1f), eager %.1f (41 calls %.1f); census hot %llu host %llu\n",
           host_a / (rounds - 1), launch_a / (rounds - 1), host_b / (rounds - 1), launch_b / (rounds - 1),
           (unsigned long long)sa.census_hot, (unsigned long long)sa.census_host);
    printf("captured round, us per round: host control plane %.1f (round_begin + tail locations + selection "
           "uploads %.1f, round_end %.1f), graph launch %.1f, waiting for the GPU %.1f; GPU time of the step %.1f\n",
           (open_a + end_a) / (rounds - 1), open_a / (rounds - 1), end_a / (rounds - 1), launch_a / (rounds - 1),
           wait_a / (rounds - 1), gpu_a / (rounds - 1));
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    if (exec) cudaGraphExecDestroy(exec);
    for (int32_t g = 0; g < G_GROUPS; g++) {
        free(sel_h[g]);
        free(ws[g]);
    }
    free(la);
    free(lb);
    free(hist);
    side_close(&A);
    side_close(&B);
    return th_summary();
}
#endif
