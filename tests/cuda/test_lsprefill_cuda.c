/* test_lsprefill_cuda.c - the GPU model's prefill through R streamed layer
 * buffers (dhs_ref_prefill_streamed_gpu, model/lsprefill.c) against the
 * CPU model's full-residency prefill (dhs_ref_prefill_run): the history of
 * every layer, the index keys and the logits byte for byte, at the GLM-5.3 and
 * DeepSeek-V3.2 geometries (layers cut), R = 2, 4 and R > L, chunks that do
 * and do not divide the prompt, the model's top-k and the fused one. Prints
 * time to the logits and the device bytes against full residency (R > L).
 * Exits 77 (skipped) without a usable CUDA device.
 *
 * Bench mode (DHS_LSP_BENCH="geometry,positions,chunk", e.g. glm-5.3,32768,2048;
 * no CPU reference, the full layer count): time to the logits and device bytes
 * of full residency (R = L + 1) and of R = 4 at the same chunk, then R = 4 at
 * the larger chunks the freed memory allows (x2, x4), all in one process;
 * byte-compares each streamed history with full residency's. */
#include <stdlib.h>
#include <string.h>

#include "model/gpu.h"
#include "model/lsprefill.h"
#include "test_help.h"
#include "test_prefill.h"

static void run(dhs_ref_geometry geo, int32_t layers, int64_t n, uint64_t seed)
{
    dhs_ref_cfg cfg = dhs_ref_cfg_geometry(geo);
    cfg.n_layers = layers;
    cfg.seed = seed;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&cfg, &m), DHS_OK);
    if (!m) return;
    const int32_t L = dhs_ref_model_cfg(m)->n_layers, V = dhs_ref_model_cfg(m)->vocab;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    th_tokens(seed, V, n, tok);
    dhs_ref_prefill ref;
    CHECK_ST(dhs_ref_prefill_run(m, tok, n, &ref), DHS_OK);
    const int64_t chunks[] = {128, 100};
    const int32_t bufs[] = {2, 4, L + 1};
    for (int fused = 0; fused < 2; fused++)
        for (size_t ci = 0; ci < 2; ci++)
            for (size_t bi = 0; bi < 3; bi++) {
                dhs_ref_prefill got;
                dhs_ref_ls_stats st;
                uint64_t dev = 0;
                dhs_status r = dhs_ref_prefill_streamed_gpu(m, tok, n, chunks[ci], bufs[bi], NULL, fused, &got, &st, &dev);
                CHECKF(r == DHS_OK, "%s chunk %lld R=%d: %s", dhs_ref_geometry_str(geo), (long long)chunks[ci], bufs[bi],
                       dhs_status_str(r));
                if (r != DHS_OK) continue;
                int32_t at;
                const char *diff = th_prefill_diff(m, &ref, &got, &at);
                CHECKF(!diff, "%s chunk %lld R=%d %s top-k: %s differ (layer or group %d)", dhs_ref_geometry_str(geo),
                       (long long)chunks[ci], bufs[bi], fused ? "fused" : "model", diff, at);
                CHECK(st.writeback_rows == (int64_t)L * n && st.computes == st.chunks * (int64_t)L);
                printf("%-14s L=%d n=%lld chunk %4lld R=%2d %s top-k: identical %s; %lld loads; %.2f ms to the logits; "
                       "device %.1f MiB (buffers %.1f MiB, full residency %.1f MiB)\n",
                       dhs_ref_geometry_str(geo), L, (long long)n, (long long)chunks[ci], bufs[bi], fused ? "fused" : "model",
                       diff ? "NO" : "yes", (long long)st.loads, 1e3 * st.seconds, dev / 1048576.0,
                       st.buffer_bytes / 1048576.0, st.resident_bytes / 1048576.0);
                dhs_ref_prefill_free(&got);
            }
    dhs_ref_prefill_free(&ref);
    free(tok);
    dhs_ref_model_destroy(m);
}

static void bench(const char *spec)
{
    char gname[32] = {0};
    long long n = 0, chunk = 0;
    if (sscanf(spec, "%31[^,],%lld,%lld", gname, &n, &chunk) != 3 || n < 1 || chunk < 1) {
        CHECKF(0, "DHS_LSP_BENCH=%s: want geometry,positions,chunk", spec);
        return;
    }
    dhs_ref_geometry geo;
    CHECK_ST(dhs_ref_geometry_parse(gname, &geo), DHS_OK);
    dhs_ref_cfg cfg = dhs_ref_cfg_geometry(geo);
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&cfg, &m), DHS_OK);
    if (!m) return;
    const int32_t L = dhs_ref_model_cfg(m)->n_layers, V = dhs_ref_model_cfg(m)->vocab;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    for (long long t = 0; t < n; t++) tok[t] = (int32_t)((t * 2654435761u) % (uint64_t)V);
    struct { int32_t R; long long chunk; } cases[] = {{L + 1, chunk}, {4, chunk}, {4, 2 * chunk}, {4, 4 * chunk}};
    dhs_ref_prefill full;
    memset(&full, 0, sizeof full);
    double t_full = 0;
    for (int i = 0; i < 4; i++) {
        dhs_ref_prefill got;
        dhs_ref_ls_stats st;
        uint64_t dev = 0;
        dhs_status r = dhs_ref_prefill_streamed_gpu(m, tok, n, cases[i].chunk, cases[i].R, NULL, 0, &got, &st, &dev);
        CHECKF(r == DHS_OK, "bench R=%d chunk %lld: %s", cases[i].R, cases[i].chunk, dhs_status_str(r));
        if (r != DHS_OK) continue;
        int same = 1;
        if (i == 0) {
            full = got;
            t_full = st.seconds;
        } else if (full.n == n) { /* (full residency ran) */
            int32_t at;
            same = th_prefill_diff(m, &full, &got, &at) == NULL;
            CHECKF(same, "bench R=%d chunk %lld: history or logits differ from full residency", cases[i].R, cases[i].chunk);
        }
        /* the model's scores buffer grows with the chunk: chunk x (n + 8) floats */
        double scores = (double)cases[i].chunk * (double)(n + 8) * 4.0 / 1048576.0;
        printf("bench %s L=%d n=%lld: R=%3d chunk %6lld: %9.1f ms to the logits (%.2fx full residency's), device %8.1f MiB"
               " (rows %.3fx full residency's) + scores %.1f MiB, %lld loads, history %s\n",
               gname, L, n, cases[i].R, cases[i].chunk, 1e3 * st.seconds, t_full > 0 ? st.seconds / t_full : 1.0,
               dev / 1048576.0, (double)st.buffer_bytes / (double)st.resident_bytes, scores, (long long)st.loads,
               i == 0 ? "(reference)" : same ? "identical" : "DIFFERS");
        if (i > 0) dhs_ref_prefill_free(&got);
    }
    dhs_ref_prefill_free(&full);
    free(tok);
    dhs_ref_model_destroy(m);
}

int main(void)
{
    if (!dhs_ref_gpu_available()) {
        printf("test_lsprefill_cuda: no usable CUDA device: skipped\n");
        return 77;
    }
    const char *b = getenv("DHS_LSP_BENCH");
    if (b && *b) {
        bench(b);
        return th_summary();
    }
    uint64_t seed = th_seed("test_lsprefill_cuda");
    int64_t n = th_scale() < 0.5 ? 400 : 1000;
    run(DHS_REF_GEOM_GLM53, 12, n, seed);
    run(DHS_REF_GEOM_DSV32, 9, n, seed ^ 0x5A5A);
    return th_summary();
}
