/* test_geometry.c - the reference model's real KV geometries (model/,
 * docs/MODEL.md "Real KV geometry").
 *
 * - layer maps: GLM-5.3 has 78 payload sources and 21 producers at layers
 *   0, 1, 2, 6, 10, ..., 74 (FFFSSS(FSSS)x18), every other layer FOLLOWs the
 *   nearest preceding producer; DeepSeek-V3.2 has 61 OWN layers; both declare
 *   656-byte rows and 132-byte index keys to the library; tiny is unchanged;
 * - FP8 index keys: 128 E4M3 codes + a power-of-two scale, never a NaN code,
 *   round trip within FP8 precision, clear and copy; the indexer's FP8 score
 *   equals the float path over the decoded codes times the scale, bit for bit;
 * - the synthetic history: deterministic, valid formats, a prefix of a longer
 *   one, different per stream, and the last prompt position computed by the
 *   model (its layer-0 row is the encoded latent of its embedding);
 * - resident vs hierarchical runs of both geometries (k reduced to keep it
 *   quick) under reclaim, speculation and sampling, invariants and every
 *   located row checked after every round; 100K-position prompts.
 * Env: DHS_TEST_SEED (else time-based, printed).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/run.h"

#include "test_help.h"

static uint64_t g_rs;
static float rndf(void) { return dhs_rng_f24(&g_rs) * 2.0f - 1.0f; }

static int is_pow2(float x)
{
    int e;
    return x > 0.0f && frexpf(x, &e) == 0.5f;
}

/* ---------------------------------------------------------------- layer maps */
static void test_layer_maps(void)
{
    dhs_ref_model *m = NULL;
    dhs_arch a;
    /* GLM-5.3 */
    dhs_ref_cfg c = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    CHECK_ST(dhs_ref_model_create(&c, &m), DHS_OK);
    if (!m) return;
    int32_t prod = 0, last_prod = -1, widest = 0;
    for (int32_t l = 0; l < 78; l++) {
        const dhs_ref_layer_info *li = dhs_ref_layer(m, l);
        int want = l < 3 || (l - 2) % 4 == 0;
        CHECKF(li->producer == want, "glm layer %d producer %d, want %d", l, li->producer, want);
        if (li->producer) {
            last_prod = l;
            prod++;
        }
        CHECKF(li->group == prod - 1, "glm layer %d in group %d, want %d (producer layer %d)", l, li->group, prod - 1,
               last_prod);
        CHECKF(li->source == l && li->m == 1, "glm layer %d: source %d m %d", l, li->source, li->m);
    }
    CHECKF(prod == 21, "glm producers %d", prod);
    for (int32_t g = 0; g < dhs_ref_n_groups(m); g++) {
        int32_t n;
        dhs_ref_group_sources(m, g, &n);
        if (n > widest) widest = n;
    }
    CHECKF(widest == 4, "glm widest group %d sources", widest);
    dhs_ref_arch(m, &a);
    CHECKF(a.n_sources == 78 && a.n_groups == 21 && a.n_consumers == 78, "glm arch %d sources %d groups %d consumers",
           a.n_sources, a.n_groups, a.n_consumers);
    CHECKF(a.index_key_bytes == 132 && dhs_ref_key_bytes(m) == 132, "glm key bytes %u", a.index_key_bytes);
    int follow = 0;
    for (int32_t i = 0; i < a.n_consumers; i++) {
        follow += a.consumers[i].kind == DHS_CONSUMER_FOLLOW;
        CHECKF(a.sources[i].row_bytes == 656, "source %d row bytes %u", i, a.sources[i].row_bytes);
    }
    CHECKF(follow == 57, "glm FOLLOW consumers %d, want 78 - 21", follow);
    CHECKF(c.topk == 2048 && c.key_fp8 == 1 && c.idx_dim == 128, "glm k %d fp8 %d dim %d", c.topk, c.key_fp8, c.idx_dim);
    dhs_ref_model_destroy(m);
    /* DeepSeek-V3.2 */
    c = dhs_ref_cfg_geometry(DHS_REF_GEOM_DSV32);
    CHECK_ST(dhs_ref_model_create(&c, &m), DHS_OK);
    if (!m) return;
    dhs_ref_arch(m, &a);
    CHECKF(a.n_sources == 61 && a.n_groups == 61 && a.n_consumers == 61 && a.index_key_bytes == 132,
           "v3.2 arch %d sources %d groups %u key bytes", a.n_sources, a.n_groups, a.index_key_bytes);
    for (int32_t i = 0; i < 61; i++) CHECKF(a.consumers[i].kind == DHS_CONSUMER_OWN, "v3.2 consumer %d not OWN", i);
    dhs_ref_model_destroy(m);
    /* tiny: what it was (follow_lead 0 is the old i % every rule) */
    c = dhs_ref_cfg_geometry(DHS_REF_GEOM_TINY);
    c.layout = DHS_REF_LAYOUT_FOLLOW;
    CHECK_ST(dhs_ref_model_create(&c, &m), DHS_OK);
    if (!m) return;
    for (int32_t l = 0; l < 4; l++) CHECKF(dhs_ref_layer(m, l)->producer == (l % 2 == 0), "tiny follow layer %d", l);
    CHECKF(dhs_ref_key_bytes(m) == 64 && c.topk == 64 && c.n_layers == 4, "tiny changed");
    dhs_ref_model_destroy(m);
    /* names */
    dhs_ref_geometry g;
    CHECK(dhs_ref_geometry_parse("glm-5.3", &g) == 0 && g == DHS_REF_GEOM_GLM53);
    CHECK(dhs_ref_geometry_parse("deepseek-v3.2", &g) == 0 && g == DHS_REF_GEOM_DSV32);
    CHECK(dhs_ref_geometry_parse("glm", &g) != 0);
}

/* ---------------------------------------------------------------- FP8 keys */
static void test_fp8_keys(void)
{
    const int32_t D = 128, N = 77;
    dhs_ref_keys k, k2, kf;
    CHECK(dhs_ref_keys_init_fp8(&k, D, N) == 0);
    CHECK(dhs_ref_keys_init_fp8(&k2, D, N) == 0);
    CHECK(dhs_ref_keys_init(&kf, D, N) == 0);
    float key[128], got[128], dec[128];
    const float *lut = dhs_ref_fp8_table();
    for (int64_t s = 0; s < N; s++) {
        float amp = ldexpf(1.0f, (int)(s % 9) - 4);
        for (int32_t i = 0; i < D; i++) key[i] = rndf() * amp;
        dhs_ref_keys_set(&k, s, key);
        dhs_ref_keys_get(&k, s, got);
        float sc = k.scales[s];
        CHECKF(is_pow2(sc), "key %" PRId64 " scale %g not a power of two", s, sc);
        CHECKF(sc == dhs_ref_fp8_scale(key, D), "key %" PRId64 " scale", s);
        for (int32_t i = 0; i < D; i++) {
            uint8_t code = k.codes[(s / 8) * D * 8 + (int64_t)i * 8 + s % 8];
            CHECKF((code & 0x7f) != 0x7f, "NaN code");
            CHECKF(got[i] == lut[code] * sc, "get = decode * scale");
            CHECKF(fabsf(got[i] - key[i]) <= fabsf(key[i]) * 0x1p-4f + sc * 0x1p-9f, "key %" PRId64 "[%d]: %g vs %g", s, i,
                   got[i], key[i]);
            dec[i] = lut[code];
        }
        dhs_ref_keys_set(&kf, s, dec); /* float keys holding the unscaled codes */
    }
    dhs_ref_keys_copy(&k2, &k, N);
    CHECK(!memcmp(k2.codes, k.codes, (size_t)N * (size_t)D) && !memcmp(k2.scales, k.scales, sizeof(float) * (size_t)N));
    /* the FP8 score = the float score over the decoded codes, times the scale */
    dhs_ref_cfg c = dhs_ref_cfg_geometry(DHS_REF_GEOM_DSV32);
    c.n_layers = 2;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&c, &m), DHS_OK);
    if (m) {
        float xn[64], s8[80], sf[80];
        for (int i = 0; i < 64; i++) xn[i] = rndf();
        dhs_ref_index_scores(m, 1, xn, &k, N, s8);
        dhs_ref_index_scores(m, 1, xn, &kf, N, sf);
        int nz = 0;
        for (int64_t s = 0; s < N; s++) {
            CHECKF(s8[s] == sf[s] * k.scales[s], "score %" PRId64 ": %a vs %a * %a", s, s8[s], sf[s], k.scales[s]);
            nz += s8[s] != 0.0f;
        }
        CHECKF(nz > N / 2, "only %d nonzero scores", nz);
        dhs_ref_model_destroy(m);
    }
    dhs_ref_keys_clear(&k, 10, 20);
    dhs_ref_keys_get(&k, 15, got);
    CHECK(k.scales[15] == 0.0f && got[3] == 0.0f && k.scales[9] != 0.0f && k.scales[20] != 0.0f);
    dhs_ref_keys_free(&k);
    dhs_ref_keys_free(&k2);
    dhs_ref_keys_free(&kf);
}

/* ---------------------------------------------------------------- portable exp */
static void test_expf(void)
{
    double worst = 0.0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * (float)i / 200000.0f;
        double want = exp((double)x), got = (double)dhs_ref_expf(x);
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    CHECKF(worst < 1e-6, "dhs_ref_expf relative error %g", worst);
    CHECK(dhs_ref_expf(0.0f) == 1.0f && dhs_ref_expf(-0.0f) == 1.0f);
    CHECK(dhs_ref_expf(-100.0f) == 0.0f && isinf(dhs_ref_expf(100.0f)));
    float prev = 0.0f;
    int mono = 1;
    for (float x = -20.0f; x <= 0.0f; x += 0.001f) {
        float y = dhs_ref_expf(x);
        mono &= y >= prev;
        prev = y;
    }
    CHECKF(mono, "dhs_ref_expf not monotonic on [-20, 0]");
    printf("  dhs_ref_expf: worst relative error %.2e on [-87, 88]\n", worst);
}

/* ---------------------------------------------------------------- synthetic history */
static void test_synthetic(uint64_t seed)
{
    dhs_ref_cfg c = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    c.seed = seed;
    c.topk = 128;
    dhs_ref_model *m = NULL;
    CHECK_ST(dhs_ref_model_create(&c, &m), DHS_OK);
    if (!m) return;
    const int64_t n = 300, n2 = 333;
    int32_t tok[333];
    dhs_ref_prompt(seed, 0, c.vocab, n2, tok);
    dhs_ref_prefill a, b, d, e;
    CHECK_ST(dhs_ref_prefill_synthetic(m, tok, n, 11, &a), DHS_OK);
    CHECK_ST(dhs_ref_prefill_synthetic(m, tok, n, 11, &b), DHS_OK);
    CHECK_ST(dhs_ref_prefill_synthetic(m, tok, n, 12, &d), DHS_OK);
    CHECK_ST(dhs_ref_prefill_synthetic(m, tok, n2, 11, &e), DHS_OK);
    if (a.rows[0] && b.rows[0] && d.rows[0] && e.rows[0]) {
        CHECKF(a.synthetic == n - 1, "synthetic %" PRId64, a.synthetic);
        int diff_stream = 0;
        for (int32_t s = 0; s < 78; s++) {
            CHECKF(!memcmp(a.rows[s], b.rows[s], (size_t)n * 656), "source %d: not deterministic", s);
            CHECKF(!memcmp(a.rows[s], e.rows[s], (size_t)(n - 1) * 656), "source %d: not a prefix of a longer history", s);
            diff_stream += memcmp(a.rows[s], d.rows[s], (size_t)(n - 1) * 656) != 0;
            for (int64_t t = 0; t < n; t++) {
                const uint8_t *r = a.rows[s] + t * 656;
                float sc[4], lat[576];
                memcpy(sc, r + 512, sizeof sc);
                for (int i = 0; i < 4; i++) CHECKF(is_pow2(sc[i]), "source %d row %" PRId64 " scale %g", s, t, sc[i]);
                dhs_ref_row_decode(r, lat);
                int bad = 0;
                for (int i = 0; i < 576; i++) bad += !isfinite(lat[i]) || fabsf(lat[i]) > 8.0f;
                CHECKF(!bad, "source %d row %" PRId64 ": %d values not finite or huge", s, t, bad);
            }
        }
        CHECKF(diff_stream == 78, "another stream gave the same rows in %d sources", 78 - diff_stream);
        for (int32_t g = 0; g < 21; g++) {
            CHECK(a.keys[g].fp8 && !memcmp(a.keys[g].codes, b.keys[g].codes, (size_t)a.keys[g].cap * 128));
            for (int64_t t = 0; t < n; t++) CHECKF(is_pow2(a.keys[g].scales[t]), "group %d key %" PRId64, g, t);
        }
        CHECK(!memcmp(a.logits, b.logits, sizeof(float) * (size_t)c.vocab));
        /* the last position is the model's: its layer-0 row is the encoded latent of its embedding */
        float x[64], xn[64], lat[576];
        uint8_t row[656];
        dhs_ref_embed(m, tok[n - 1], x);
        dhs_ref_rmsnorm(m, x, xn);
        dhs_ref_latent(m, 0, n - 1, xn, lat);
        dhs_ref_row_encode(lat, row);
        CHECKF(!memcmp(row, a.rows[0] + (n - 1) * 656, 656), "the last position's layer-0 row is not the model's");
        float key[128];
        dhs_ref_index_key(m, 0, xn, key);
        CHECKF(a.keys[0].scales[n - 1] == dhs_ref_fp8_scale(key, 128), "the last position's key is not the model's");
        /* ... and position n-1 of the longer prompt is synthetic, so it differs */
        CHECK(memcmp(e.rows[0] + (n - 1) * 656, a.rows[0] + (n - 1) * 656, 656) != 0);
        /* written into rows of the caller's (a request's open import): the same bytes at its stride (here
           wider than a row, and over garbage), the same keys and logits, and out->rows left NULL */
        const size_t stride = 672;
        uint8_t *buf = malloc(78 * (size_t)n * stride + 16);
        void *into[DHS_MAX_SOURCES];
        dhs_ref_prefill f;
        if (buf) {
            memset(buf, 0xA5, 78 * (size_t)n * stride + 16);
            for (int32_t s = 0; s < 78; s++) into[s] = buf + (size_t)s * (size_t)n * stride;
            CHECK_ST(dhs_ref_prefill_synthetic_into(m, tok, n, 11, 0, 0, into, stride, &f), DHS_OK);
            CHECK(f.in_import == 1 && f.rows[0] == NULL && f.synthetic == n - 1 && a.in_import == 0);
            int bad = 0;
            for (int32_t s = 0; s < 78; s++)
                for (int64_t t = 0; t < n; t++) bad += memcmp((uint8_t *)into[s] + (size_t)t * stride, a.rows[s] + t * 656, 656) != 0;
            CHECKF(bad == 0, "%d rows written into the caller's rows differ", bad);
            for (int32_t g = 0; g < 21 && f.keys[g].codes; g++)
                CHECK(!memcmp(a.keys[g].codes, f.keys[g].codes, (size_t)a.keys[g].cap * 128) &&
                      !memcmp(a.keys[g].scales, f.keys[g].scales, sizeof(float) * (size_t)n));
            CHECK(f.logits && !memcmp(a.logits, f.logits, sizeof(float) * (size_t)c.vocab));
            dhs_ref_prefill_free(&f);
            /* a stride narrower than a row, unaligned rows, no rows: refused */
            CHECK_ST(dhs_ref_prefill_synthetic_into(m, tok, n, 11, 0, 0, into, 640, &f), DHS_ERR_INVALID_ARG);
            CHECK_ST(dhs_ref_prefill_synthetic_into(m, tok, n, 11, 0, 0, into, 664, &f), DHS_ERR_INVALID_ARG);
            into[3] = buf + 8;
            CHECK_ST(dhs_ref_prefill_synthetic_into(m, tok, n, 11, 0, 0, into, stride, &f), DHS_ERR_INVALID_ARG);
            CHECK_ST(dhs_ref_prefill_synthetic_into(m, tok, n, 11, 0, 0, NULL, stride, &f), DHS_ERR_INVALID_ARG);
            free(buf);
        }
    }
    dhs_ref_prefill_free(&a);
    dhs_ref_prefill_free(&b);
    dhs_ref_prefill_free(&d);
    dhs_ref_prefill_free(&e);
    /* compressed sources cannot take a synthetic history */
    dhs_ref_cfg cc = dhs_ref_cfg_tiny();
    cc.layout = DHS_REF_LAYOUT_COMPRESSED;
    dhs_ref_model *mc = NULL;
    CHECK_ST(dhs_ref_model_create(&cc, &mc), DHS_OK);
    if (mc) {
        dhs_ref_prefill f;
        CHECK_ST(dhs_ref_prefill_synthetic(mc, tok, 100, 1, &f), DHS_ERR_INVALID_ARG);
        dhs_ref_model_destroy(mc);
    }
    dhs_ref_model_destroy(m);
}

/* ---------------------------------------------------------------- runs */
static void test_run(dhs_ref_geometry g, dhs_ref_verify verify, int32_t spec, uint64_t seed)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(g);
    c.model.seed = seed;
    c.model.topk = 256; /* quick; the CLI test runs k = 2048 */
    c.geometry = dhs_ref_geometry_str(g);
    c.synthetic = 1;
    c.sessions = 4;
    c.context = 700;
    c.tokens = 7;
    c.spec = spec;
    c.verify = verify;
    c.seed = seed;
    c.slots = 2;
    c.history = 0.5; /* admissions reclaim the history of earlier sessions */
    c.arrival = 1;
    c.async_delay = 2;
    c.check = 1;
    dhs_ref_run_result r;
    int rc = dhs_ref_run(&c, &r);
    CHECKF(rc == 0, "%s: %s", c.geometry, r.errmsg);
    CHECKF(r.identical, "%s seed %" PRIu64 ": %" PRIu64 " logit rows differ, %" PRIu64 " token mismatches", c.geometry, seed,
           r.logit_mismatches, r.token_mismatches);
    CHECKF(r.sessions_done == 4 && r.logit_rows_compared > 0, "%s: %" PRIu64 " sessions", c.geometry, r.sessions_done);
    CHECKF(r.st.reclaims > 0, "%s: no reclaim", c.geometry);
    CHECKF(r.st.census_host > 0 && r.st.census_direct > 0, "%s: census direct %" PRIu64 " host %" PRIu64, c.geometry,
           r.st.census_direct, r.st.census_host);
    CHECKF(r.synthetic_positions > 4 * 600, "%s: synthetic positions %" PRIu64, c.geometry, r.synthetic_positions);
    CHECKF(r.shadow_mismatches == 0 && r.invariant_violations == 0, "%s: checks", c.geometry);
    printf("  %-14s %s K=%d: identical, %" PRIu64 " rounds, %" PRIu64 "/%" PRIu64 " accepted, %" PRIu64
           " reclaims, census %" PRIu64 "/%" PRIu64 "/%" PRIu64 "\n",
           c.geometry, verify == DHS_REF_VERIFY_GREEDY ? "greedy" : "sample", spec, r.rounds, r.accepted, r.proposals,
           r.st.reclaims, r.st.census_direct, r.st.census_hot, r.st.census_host);
    dhs_ref_run_result_free(&r);
}

/* 100K-position prompts: a GLM-5.3-shaped stack cut to 3 layers (the per-layer
   arithmetic does not depend on the layer count), k = 2048, resident vs
   hierarchical; rows beyond 2^16 and byte offsets beyond 2^32 per source */
static void test_long_context(uint64_t seed)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(DHS_REF_GEOM_GLM53);
    c.model.n_layers = 3;
    c.model.seed = seed;
    c.geometry = "glm-5.3 (3 layers)";
    c.synthetic = 1;
    c.sessions = 2;
    c.context = TH_SANITIZED ? 30000 : 100000; /* ASan: memory and time */
    c.tokens = 3;
    c.spec = 2;
    c.seed = seed;
    c.slots = 1;
    c.history = 1.5;
    c.check = 1;
    dhs_ref_run_result r;
    int rc = dhs_ref_run(&c, &r);
    CHECKF(rc == 0, "100K: %s", r.errmsg);
    CHECKF(r.identical && r.sessions_done == 2, "100K: not identical (%" PRIu64 " logit rows differ)", r.logit_mismatches);
    CHECKF(r.positions == c.context + 3, "100K: positions %" PRId64, r.positions);
    printf("  %" PRId64 " context identical, %" PRIu64 " rounds, census %" PRIu64 "/%" PRIu64 "/%" PRIu64 ", %.1f s\n", c.context, r.rounds,
           r.st.census_direct, r.st.census_hot, r.st.census_host, r.t_total);
    dhs_ref_run_result_free(&r);
}

int main(void)
{
    uint64_t seed = th_seed("test_geometry");
    g_rs = seed;
    test_layer_maps();
    test_fp8_keys();
    test_expf();
    printf("layer maps, FP8 index keys: %s\n", th_failed ? "FAILED" : "ok");
    test_synthetic(seed);
    printf("synthetic history: %s\n", th_failed ? "FAILED" : "ok");
    test_run(DHS_REF_GEOM_GLM53, DHS_REF_VERIFY_GREEDY, 3, seed);
    test_run(DHS_REF_GEOM_DSV32, DHS_REF_VERIFY_SAMPLE, 4, seed + 1);
    test_long_context(seed + 2);
    return th_summary();
}
