/* test_lsprefill.c - the reference model's prefill through R streamed layer
 * buffers (model/lsprefill.c) against dhs_ref_prefill_run (full residency).
 *
 * At the GLM-5.3 and DeepSeek-V3.2 geometries (layers cut for time), random
 * prompts, chunks that do and do not divide the prompt, R = 2, 4 and R > L,
 * prefetch depths 0, 1 (NULL map), 3 and random per layer:
 *   1. the history of every layer, the index keys and the logits equal the
 *      full-residency prefill's byte for byte;
 *   2. the figures: R buffers of n rows against L layers of n rows; every row
 *      written back once; loads move only earlier chunks' rows (none with
 *      R > L after chunk 0, where each layer keeps its buffer);
 *   3. a schedule with a load dropped, or a compute moved before its load, is
 *      refused (DHS_ERR_STATE) and leaves *out empty; bad arguments and
 *      events are refused; a shared or compressed source is unsupported.
 * Randomised: prints its seed (DHS_TEST_SEED reproduces). */
#include <stdlib.h>
#include <string.h>

#include "model/gpu.h"
#include "model/lsprefill.h"
#include "model/run.h"
#include "test_help.h"
#include "test_prefill.h"

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* the streamed prefill equals the reference; returns 1 when it does */
static int same_prefill(const dhs_ref_model *m, const dhs_ref_prefill *ref, const dhs_ref_prefill *got, const char *what)
{
    int32_t at;
    const char *diff = th_prefill_diff(m, ref, got, &at);
    CHECKF(!diff, "%s: %s differ from the full-residency prefill (layer or group %d)", what, diff, at);
    return diff == NULL;
}

static void test_geometry(dhs_ref_geometry g, int32_t layers, int64_t n, uint64_t *rs)
{
    dhs_ref_cfg cfg = dhs_ref_cfg_geometry(g);
    cfg.n_layers = layers;
    cfg.seed = rng_next(rs);
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&cfg, &m), DHS_OK);
    if (!m) return;
    const int32_t L = dhs_ref_model_cfg(m)->n_layers, V = dhs_ref_model_cfg(m)->vocab;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t t = 0; t < n; t++) tok[t] = (int32_t)(rng_next(rs) % (uint64_t)V);
    dhs_ref_prefill ref;
    CHECK_ST(dhs_ref_prefill_run(m, tok, n, &ref), DHS_OK);
    const int64_t chunks[] = {n, 64, 37, 1 + (int64_t)(rng_next(rs) % (uint64_t)(n / 2))};
    const int32_t bufs[] = {2, 4, L + 1};
    int32_t *map3 = malloc(sizeof(int32_t) * (size_t)L), *map0 = malloc(sizeof(int32_t) * (size_t)L),
            *maprnd = malloc(sizeof(int32_t) * (size_t)L);
    for (int32_t l = 0; l < L; l++) map3[l] = 3, map0[l] = 0, maprnd[l] = (int32_t)(rng_next(rs) % 5);
    const int32_t *maps[] = {NULL, map0, map3, maprnd};
    const char *map_names[] = {"depth 1", "depth 0", "depth 3", "random depths"};
    int runs = 0, same = 0;
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++)
        for (size_t bi = 0; bi < sizeof bufs / sizeof bufs[0]; bi++)
            for (size_t mi = 0; mi < sizeof maps / sizeof maps[0]; mi++) {
                if (bi != 1 && mi > 1) continue; /* the depth shapes at R = 4 */
                char what[160];
                snprintf(what, sizeof what, "%s L=%d n=%lld chunk %lld R=%d %s", dhs_ref_geometry_str(g), L, (long long)n,
                         (long long)chunks[ci], bufs[bi], map_names[mi]);
                dhs_ref_prefill got;
                dhs_ref_ls_stats s;
                dhs_status st = dhs_ref_prefill_streamed(m, tok, n, chunks[ci], bufs[bi], maps[mi], &got, &s);
                CHECKF(st == DHS_OK, "%s: %s", what, dhs_status_str(st));
                if (st != DHS_OK) continue;
                runs++;
                same += same_prefill(m, &ref, &got, what);
                int64_t C = (n + chunks[ci] - 1) / chunks[ci];
                CHECKF(s.chunks == C && s.computes == C * L && s.writebacks == C * L, "%s: %lld computes, %lld write-backs",
                       what, (long long)s.computes, (long long)s.writebacks);
                CHECKF(s.writeback_rows == (int64_t)L * n, "%s: %lld rows written back", what, (long long)s.writeback_rows);
                CHECKF(s.buffer_bytes == (uint64_t)bufs[bi] * (uint64_t)n * DHS_REF_ROW_BYTES &&
                           s.resident_bytes == (uint64_t)L * (uint64_t)n * DHS_REF_ROW_BYTES,
                       "%s: bytes", what);
                if (bufs[bi] > L) /* each layer keeps its buffer: loaded once, empty, at chunk 0 */
                    CHECKF(s.loads == L && s.load_rows == 0, "%s: %lld loads of %lld rows with R > L", what,
                           (long long)s.loads, (long long)s.load_rows);
                else if (C > 1) /* layers rotate: reloads of earlier chunks' rows */
                    CHECKF(s.load_rows > 0 && s.loads > L, "%s: %lld loads", what, (long long)s.loads);
                dhs_ref_prefill_free(&got);
            }
    printf("%-14s L=%d n=%lld: %d streamed prefills, %d byte-identical to full residency (rows, keys, logits); "
           "R=4 holds %.1f%% of full residency's rows\n",
           dhs_ref_geometry_str(g), L, (long long)n, runs, same, 400.0 / L);

    /* a broken schedule is refused and leaves nothing */
    dhs_ls_params p = {L, 3, (int32_t)((n + 31) / 32), NULL};
    int64_t cap = dhs_ls_max_events(&p), ne = 0;
    dhs_ls_event *ev = malloc(sizeof *ev * (size_t)cap), *bad = malloc(sizeof *ev * (size_t)cap);
    CHECK_ST(dhs_ls_schedule(&p, ev, cap, &ne), DHS_OK);
    dhs_ref_prefill got;
    dhs_ref_ls_stats s;
    CHECK_ST(dhs_ref_prefill_ls_run(m, tok, n, 32, 3, ev, ne, &got, &s), DHS_OK);
    same_prefill(m, &ref, &got, "R=3 chunk 32 (explicit list)");
    dhs_ref_prefill_free(&got);
    int64_t drop = -1; /* a reload of a later chunk (layer >= 1) */
    for (int64_t i = 0; i < ne && drop < 0; i++)
        if (ev[i].op == DHS_LS_LOAD && ev[i].chunk > 0 && ev[i].layer > 0) drop = i;
    CHECK(drop >= 0);
    if (drop >= 0) {
        memcpy(bad, ev, sizeof *ev * (size_t)drop);
        memcpy(bad + drop, ev + drop + 1, sizeof *ev * (size_t)(ne - drop - 1));
        CHECK_ST(dhs_ref_prefill_ls_run(m, tok, n, 32, 3, bad, ne - 1, &got, &s), DHS_ERR_STATE);
        CHECK(got.n == 0 && got.tokens == NULL && got.rows[0] == NULL && got.logits == NULL);
    }
    int64_t comp = -1, its_load = -1; /* a compute swapped with its own (re)load */
    for (int64_t i = 0; i < ne && comp < 0; i++)
        if (ev[i].op == DHS_LS_COMPUTE && ev[i].chunk > 0 && ev[i].layer > 0)
            for (int64_t j = i - 1; j >= 0; j--)
                if (ev[j].op == DHS_LS_LOAD && ev[j].chunk == ev[i].chunk && ev[j].layer == ev[i].layer) {
                    comp = i, its_load = j;
                    break;
                }
    CHECK(comp >= 0);
    if (comp >= 0) {
        memcpy(bad, ev, sizeof *ev * (size_t)ne);
        dhs_ls_event t = bad[comp];
        bad[comp] = bad[its_load];
        bad[its_load] = t;
        CHECK_ST(dhs_ref_prefill_ls_run(m, tok, n, 32, 3, bad, ne, &got, &s), DHS_ERR_STATE);
    }
    /* a missing write-back: the host history is incomplete */
    CHECK_ST(dhs_ref_prefill_ls_run(m, tok, n, 32, 3, ev, ne - 1, &got, &s), DHS_ERR_STATE);
    /* bad events and arguments */
    memcpy(bad, ev, sizeof *ev * (size_t)ne);
    bad[ne / 2].buffer = 3;
    CHECK_ST(dhs_ref_prefill_ls_run(m, tok, n, 32, 3, bad, ne, &got, &s), DHS_ERR_INVALID_ARG);
    bad[ne / 2] = ev[ne / 2];
    bad[0].chunk = p.n_chunks;
    CHECK_ST(dhs_ref_prefill_ls_run(m, tok, n, 32, 3, bad, ne, &got, &s), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ref_prefill_ls_run(m, tok, n, 0, 3, ev, ne, &got, &s), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ref_prefill_ls_run(m, tok, n, 32, 1, ev, ne, &got, &s), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ref_prefill_ls_run(m, NULL, n, 32, 3, ev, ne, &got, &s), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ref_prefill_streamed(m, tok, n, 32, 1, NULL, &got, &s), DHS_ERR_INVALID_ARG);
    int32_t keep = tok[1];
    tok[1] = V;
    CHECK_ST(dhs_ref_prefill_streamed(m, tok, n, 32, 4, NULL, &got, &s), DHS_ERR_INVALID_ARG);
    tok[1] = keep;
    free(ev);
    free(bad);
    free(map3);
    free(map0);
    free(maprnd);
    dhs_ref_prefill_free(&ref);
    free(tok);
    dhs_ref_model_destroy(m);
}

static void test_unsupported(void)
{
    /* the tiny model shares sources or compresses rows in some layers: refused, nothing written */
    dhs_ref_cfg cfg = dhs_ref_cfg_geometry(DHS_REF_GEOM_TINY);
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&cfg, &m), DHS_OK);
    if (!m) return;
    int shared = dhs_ref_n_sources(m) != dhs_ref_model_cfg(m)->n_layers;
    for (int32_t l = 0; l < dhs_ref_model_cfg(m)->n_layers; l++)
        shared |= dhs_ref_layer(m, l)->m != 1 || dhs_ref_layer(m, l)->source != l;
    int32_t tok[40] = {0};
    dhs_ref_prefill got;
    dhs_ref_ls_stats s;
    dhs_status st = dhs_ref_prefill_streamed(m, tok, 40, 16, 4, NULL, &got, &s);
    CHECKF(shared ? st == DHS_ERR_UNSUPPORTED : st == DHS_OK, "tiny model (%s): %s",
           shared ? "shared or compressed sources" : "one source per layer", dhs_status_str(st));
    if (shared) CHECK(got.n == 0 && got.rows[0] == NULL);
    dhs_ref_prefill_free(&got);
    dhs_ref_model_destroy(m);
}

/* without a usable device the GPU executor answers DHS_ERR_UNSUPPORTED and leaves nothing */
static void test_gpu_absent(void)
{
    if (dhs_ref_gpu_available()) return; /* test_lsprefill_cuda covers the device */
    dhs_ref_cfg cfg = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    cfg.n_layers = 4;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&cfg, &m), DHS_OK);
    if (!m) return;
    int32_t tok[64] = {0};
    dhs_ref_prefill got;
    dhs_ref_ls_stats s;
    uint64_t dev = 1;
    CHECK_ST(dhs_ref_prefill_streamed_gpu(m, tok, 64, 16, 4, NULL, 0, &got, &s, &dev), DHS_ERR_UNSUPPORTED);
    CHECK(got.n == 0 && got.rows[0] == NULL && got.logits == NULL);
    CHECK_ST(dhs_ref_prefill_streamed_gpu(m, tok, 64, 0, 4, NULL, 0, &got, &s, &dev), DHS_ERR_INVALID_ARG);
    dhs_ref_model_destroy(m);
}

int main(void)
{
    uint64_t rs = th_seed("test_lsprefill");
    int64_t n = th_scale() < 0.5 ? 160 : 300;
    test_geometry(DHS_REF_GEOM_GLM53, 12, n, &rs);
    test_geometry(DHS_REF_GEOM_DSV32, 9, n, &rs);
    test_unsupported();
    test_gpu_absent();
    return th_summary();
}
