/*
 * test_locality.c - the locality device (model.h dhs_ref_iq_synth, docs/LOCALITY.md
 * "The reference model under a locality"): the model's own indexer, fed the
 * calibrated synthetic queries, shows the target consecutive-step overlap per
 * layer, and resident and hierarchical serving still give identical logits.
 *
 * - the DeepSeek-V3.2 KV geometry cut to 6 layers, k = 256, synthetic
 *   histories of ~4K positions (the bench's regime: imported keys), 3
 *   sessions decoding 40 tokens: per layer the measured alpha is within 0.03
 *   of the target, for a custom model spanning 1.5 % .. 60 % and for the
 *   random preset (alpha = k/V);
 * - speculative rounds (K = 3): the same, and identical;
 * - the synthetic query is a pure function of (seed, layer, position): two
 *   models give the same scores; off, dhs_ref_index_scores_at is the model's
 *   own query.
 * Env: DHS_TEST_SEED (else time-based, printed).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/run.h"
#include "sim/tracegen.h"

#include "test_help.h"

#define TOL 0.03

static void custom_model(dhs_locality_model *lm)
{
    memset(lm, 0, sizeof *lm);
    snprintf(lm->preset, sizeof lm->preset, "custom:test");
    const double a[6] = {0.015, 0.10, 0.25, 0.44, 0.60, 0.44};
    lm->n_layers = 6;
    for (int i = 0; i < 6; i++) lm->alpha[i] = a[i];
    lm->alpha_exp[0] = 1; /* 1.5 % at 68,665 positions and k 2048: the same multiple of k/V here */
    lm->ref_context = 68665;
    lm->ref_k = 2048;
}

static void run_one(const dhs_locality_model *lm, int32_t spec, uint64_t seed, const char *what)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = dhs_ref_cfg_geometry(DHS_REF_GEOM_DSV32);
    c.model.n_layers = 6;
    c.model.topk = 256;
    c.model.seed = seed;
    c.geometry = "deepseek-v3.2 (6 layers)";
    c.synthetic = 1;
    c.sessions = 3;
    c.context = TH_SANITIZED ? 2048 : 4096;
    c.tokens = 40;
    c.spec = spec;
    c.seed = seed;
    c.slots = 2;
    c.history = 1;
    c.arrival = 1;
    c.locality = lm;
    dhs_ref_run_result r;
    int rc = dhs_ref_run(&c, &r);
    CHECKF(rc == 0, "%s: %s", what, r.errmsg);
    CHECKF(r.identical, "%s seed %" PRIu64 ": %" PRIu64 " logit rows differ, %" PRIu64 " token mismatches", what, seed,
           r.logit_mismatches, r.token_mismatches);
    CHECKF(r.loc_on, "%s: locality not on", what);
    printf("  %s (K=%d): layer target calibrated alpha pairs random draft lru_hit\n", what, spec);
    for (int32_t l = 0; l < c.model.n_layers; l++) {
        printf("    %d %.4f %.4f %.4f %" PRIu64 " %.4f %.4f %.4f\n", l, r.loc_target[l], r.loc_calib[l], r.loc_alpha[l],
               r.loc_pairs[l], r.loc_random[l], r.loc_draft[l], r.loc_hit[l]);
        CHECKF(r.loc_pairs[l] >= 40, "%s layer %d: %" PRIu64 " pairs", what, l, r.loc_pairs[l]);
        /* the overlap of adjacent positions: consecutive rounds of plain decoding, queries j, j+1 of a
           speculative round (consecutive rounds are then A+1 positions apart: printed, not checked) */
        double adj = spec == 1 ? r.loc_alpha[l] : r.loc_draft[l];
        if (spec > 1) CHECKF(r.loc_draft_pairs[l] >= 40, "%s layer %d: %" PRIu64 " draft pairs", what, l, r.loc_draft_pairs[l]);
        /* the calibration reaches the target, except below the floor of the anti-correlated queries,
           about the overlap of independent ones (k/V within 10 %: model/iqsynth.h) */
        int reached = fabs(r.loc_calib[l] - r.loc_target[l]) <= 0.01;
        CHECKF(reached || r.loc_target[l] <= 1.1 * r.loc_random[l], "%s layer %d: calibrated %.4f, target %.4f", what, l,
               r.loc_calib[l], r.loc_target[l]);
        if (reached)
            CHECKF(fabs(adj - r.loc_target[l]) <= TOL, "%s seed %" PRIu64 " K=%d layer %d: adjacent overlap %.4f, target %.4f",
                   what, seed, spec, l, adj, r.loc_target[l]);
        CHECKF(fabs(adj - r.loc_calib[l]) <= TOL, "%s seed %" PRIu64 " K=%d layer %d: adjacent overlap %.4f, calibrated %.4f",
               what, seed, spec, l, adj, r.loc_calib[l]);
        /* an LRU of 2k rows holds at least last round's selection: its hit rate is not below alpha
           by more than the cold first rounds */
        CHECKF(r.loc_hit[l] >= r.loc_alpha[l] - 0.05, "%s layer %d: LRU hit %.4f below alpha %.4f", what, l, r.loc_hit[l],
               r.loc_alpha[l]);
    }
    dhs_ref_run_result_free(&r);
}

static void test_pure(uint64_t seed)
{
    dhs_ref_cfg cfg = dhs_ref_cfg_geometry(DHS_REF_GEOM_DSV32);
    cfg.n_layers = 2;
    cfg.topk = 256;
    cfg.seed = seed;
    dhs_ref_model *a = NULL, *b = NULL;
    CHECK_ST(dhs_ref_model_create(&cfg, &a), DHS_OK);
    CHECK_ST(dhs_ref_model_create(&cfg, &b), DHS_OK);
    if (!a || !b) return;
    const int64_t n = 600;
    dhs_ref_keys k;
    CHECK(dhs_ref_keys_init_model(a, &k, n) == 0);
    dhs_ref_synthetic_keys(a, seed, 0, n, &k);
    float xn[DHS_REF_MAX_D];
    for (int i = 0; i < cfg.d_model; i++) xn[i] = (float)((i * 7) % 5) - 2.0f;
    float *s0 = malloc(sizeof(float) * n), *s1 = malloc(sizeof(float) * n), *s2 = malloc(sizeof(float) * n);
    /* off: the model's own query */
    dhs_ref_index_scores(a, 1, xn, &k, n, s0);
    dhs_ref_index_scores_at(a, 1, 599, xn, &k, n, s1);
    CHECK(!memcmp(s0, s1, sizeof(float) * n));
    CHECK(dhs_ref_model_iq_synth(a) == NULL);
    dhs_ref_iq_synth z;
    memset(&z, 0, sizeof z);
    z.on = 1;
    z.seed = seed;
    z.w = 0.05f;
    dhs_ref_iq_synth_set_corr(&z, 1, 0.3);
    dhs_ref_model_set_iq_synth(a, &z);
    dhs_ref_model_set_iq_synth(b, &z);
    dhs_ref_index_scores_at(a, 1, 599, xn, &k, n, s1);
    float xn2[DHS_REF_MAX_D];
    for (int i = 0; i < cfg.d_model; i++) xn2[i] = -xn[i];
    dhs_ref_index_scores_at(b, 1, 599, xn2, &k, n, s2); /* another model, another input: the same query */
    CHECK(!memcmp(s1, s2, sizeof(float) * n));
    CHECK(memcmp(s0, s1, sizeof(float) * n) != 0);
    dhs_ref_index_scores_at(a, 1, 598, xn, &k, n, s2); /* another position: another query */
    CHECK(memcmp(s1, s2, sizeof(float) * n) != 0);
    /* the coefficients: unit variance, the correlation asked for */
    for (int i = 0; i < 3; i++) {
        double cc = i == 0 ? -0.4 : i == 1 ? 0.0 : 0.8;
        dhs_ref_iq_synth_set_corr(&z, 0, cc);
        double var = (double)z.a[0] * z.a[0] + (double)z.b[0] * z.b[0] + (double)z.d[0] * z.d[0];
        double cor = (double)z.a[0] * z.a[0] + (double)z.b[0] * z.d[0];
        CHECKF(fabs(var - 1) < 1e-6 && fabs(cor - cc) < 1e-6, "c %.2f: variance %.6f, correlation %.6f", cc, var, cor);
    }
    dhs_ref_model_set_iq_synth(a, NULL);
    CHECK(dhs_ref_model_iq_synth(a) == NULL);
    free(s0);
    free(s1);
    free(s2);
    dhs_ref_keys_free(&k);
    dhs_ref_model_destroy(a);
    dhs_ref_model_destroy(b);
}

int main(void)
{
    uint64_t seed = th_seed("test_locality");
    test_pure(seed);
    printf("pure query: %s\n", th_failed ? "FAILED" : "ok");
    dhs_locality_model lm;
    custom_model(&lm);
    run_one(&lm, 1, seed, "custom");
    dhs_locality_model rnd;
    char err[200];
    CHECK(dhs_locality_model_load("random", &rnd, err, sizeof err) == 0);
    run_one(&rnd, 1, seed, "random");
    run_one(&lm, 3, seed, "custom");
    printf("locality runs: %s\n", th_failed ? "FAILED" : "ok");
    return th_summary();
}
