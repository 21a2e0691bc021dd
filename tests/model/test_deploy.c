/* test_deploy.c - the deployment-bytes derivation (model/deploy.h):
 *   - the shape table reproduces each model's published parameter totals (all and active) within
 *     1.5 %: a dropped or mis-sized projection, expert or head moves them by more;
 *   - the expected experts touched per GPU equals a seeded Monte Carlo of uniform top-k routing;
 *   - the step bytes grow with the tokens, are bounded by every expert of the GPU, and at one token
 *     read exactly top_k * E/ep / E experts a MoE layer;
 *   - unknown names are refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/deploy.h"
#include "test_help.h"

static void test_published_totals(void)
{
    for (const char *const *n = dhs_deploy_names(); *n; n++) {
        const dhs_deploy *d = dhs_deploy_find(*n);
        CHECKF(d != NULL, "%s not found", *n);
        if (!d) continue;
        double all = dhs_deploy_params(d, 0), act = dhs_deploy_params(d, 1);
        printf("%s: %.2fB parameters (published %.0fB), %.2fB active (published %.0fB)\n", *n, all / 1e9,
               d->published_total / 1e9, act / 1e9, d->published_active / 1e9);
        CHECKF(fabs(all / d->published_total - 1) < 0.015, "%s total %.3g vs %.3g", *n, all, d->published_total);
        CHECKF(fabs(act / d->published_active - 1) < 0.015, "%s active %.3g vs %.3g", *n, act, d->published_active);
        /* FP8 weights: the bytes of a step that touches every expert are close to the parameters of
           one GPU's share (scales and the bf16 head/router add a little) */
        dhs_deploy_bytes b;
        dhs_deploy_step_bytes(d, 1e6, &b);
        CHECKF(b.total > all / d->ep * 0.9 && b.total < all / d->ep * 1.6, "%s: saturated step %.3g bytes vs %.3g / ep",
               *n, b.total, all);
    }
}

static void test_experts_touched(void)
{
    uint64_t seed = th_seed("test_deploy");
    const dhs_deploy *d = dhs_deploy_find("glm-5.3-8xh200");
    CHECK(d != NULL);
    if (!d) return;
    const int trials = 4000, Ts[] = {1, 2, 8, 20, 64};
    int E = (int)d->experts, k = (int)d->top_k, mine = E / d->ep;
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        double sum = 0;
        for (int t = 0; t < trials; t++) {
            unsigned char hit[512] = {0};
            for (int tok = 0; tok < Ts[ti]; tok++) {
                int chosen[64], nc = 0;
                while (nc < k) { /* k distinct experts, uniform */
                    int e = (int)dhs_rng_below(&seed, E), dup = 0;
                    for (int j = 0; j < nc; j++) dup |= chosen[j] == e;
                    if (!dup) chosen[nc++] = e;
                }
                for (int j = 0; j < nc; j++) hit[chosen[j]] = 1;
            }
            for (int e = 0; e < mine; e++) sum += hit[e];
        }
        double mc = sum / trials, f = dhs_deploy_experts_touched(d, Ts[ti]);
        printf("tokens %3d: experts touched per GPU %.3f (formula) %.3f (Monte Carlo, %d trials)\n", Ts[ti], f, mc, trials);
        CHECKF(fabs(f - mc) < 0.03 * mine / 4 + 0.05, "tokens %d: formula %.3f, Monte Carlo %.3f", Ts[ti], f, mc);
    }
}

static void test_step_bytes(void)
{
    for (const char *const *n = dhs_deploy_names(); *n; n++) {
        const dhs_deploy *d = dhs_deploy_find(*n);
        dhs_deploy_bytes one, prev, b;
        dhs_deploy_step_bytes(d, 1, &one);
        CHECKF(fabs(one.experts_touched - (double)d->top_k / d->ep) < 1e-9, "%s: one token touches %.4f experts", *n,
               one.experts_touched);
        double sum = one.attention + one.indexer + one.dense_mlp + one.shared + one.routed + one.router + one.head;
        CHECKF(fabs(sum - one.total) < 1, "%s: parts add to %.0f, total %.0f", *n, sum, one.total);
        prev = one;
        for (int T = 2; T <= 4096; T *= 2) {
            dhs_deploy_step_bytes(d, T, &b);
            CHECKF(b.total >= prev.total, "%s: %d tokens read fewer bytes than %d", *n, T, T / 2);
            CHECKF(b.experts_touched <= (double)d->experts / d->ep + 1e-9, "%s: %.3f experts touched", *n, b.experts_touched);
            prev = b;
        }
        CHECK(dhs_deploy_step_bytes(d, 0, NULL) == 0);
    }
    CHECK(dhs_deploy_find("none") == NULL);
    CHECK(dhs_deploy_find(NULL) == NULL);
    CHECK(dhs_deploy_find("glm-5.3") == NULL);
}

int main(void)
{
    test_published_totals();
    test_experts_touched();
    test_step_bytes();
    return th_summary();
}
