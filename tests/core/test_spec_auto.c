/* test_spec_auto.c - the online speculation width (include/dhs_spec_auto.h):
 *   - choose is optimal: for random small rounds its expected tokens per microsecond equals the best
 *     of every width vector in [1, cap]^n, computed by enumeration here;
 *   - widths respect caps and spec_max; zero acceptance gives K = 1, certain acceptance with cheap
 *     queries gives the cap;
 *   - the estimate of in-order acceptance with probability p converges to p;
 *   - the miss cost: the fit of host rows per round recovers the rows of a first and of a further query and
 *     the measured copy time per row; with the same acceptance and step costs the widths narrow when
 *     copies are dear and widen back (to what dhs_spec_auto_choose picks) when they are free, and the
 *     staging room bounds the round's further queries;
 *   - every bad argument is refused with nothing written or changed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dhs_spec_auto.h"
#include "test_help.h"

/* expected tokens per microsecond of widths K (the header's formula) */
static double ratio_of(const double *a, const int32_t *K, int32_t n, const double *q, double fixed, double draft)
{
    double T = 0, S = fixed;
    int32_t W = 1;
    for (int32_t i = 0; i < n; i++) {
        double e = 0, g = 1;
        for (int32_t k = 0; k < K[i]; k++, g *= a[i]) e += g;
        T += e;
        S += q[i] * (K[i] - 1);
        if (K[i] > W) W = K[i];
    }
    return T / (S + draft * (W - 1));
}

static void test_optimal(uint64_t *seed)
{
    int rounds = (int)(300 * th_scale()) + 20;
    for (int t = 0; t < rounds; t++) {
        int32_t n = (int32_t)dhs_rng_range(seed, 1, 4), M = (int32_t)dhs_rng_range(seed, 1, 5);
        dhs_spec_auto_cfg cfg = dhs_spec_auto_cfg_default(8);
        cfg.spec_max = M;
        cfg.prior_weight = 1e6; /* the estimate is the prior: set per slot below through observations */
        dhs_spec_auto *sa = NULL;
        CHECK_ST(dhs_spec_auto_create(&cfg, &sa), DHS_OK);
        if (!sa) return;
        int32_t slots[4], cap[4], K[4], best_K[4] = {0};
        double q[4], a[4];
        for (int32_t i = 0; i < n; i++) {
            slots[i] = (int32_t)(7 - i);
            cap[i] = (int32_t)dhs_rng_range(seed, 1, 6);
            q[i] = 1 + 200 * dhs_rng_unit(seed);
            CHECK_ST(dhs_spec_auto_reset(sa, slots[i]), DHS_OK);
        }
        /* acceptance per slot: feed observations with weight so the estimate moves off the prior */
        dhs_spec_auto_destroy(sa);
        cfg.prior_weight = 0;
        cfg.decay = 1;
        CHECK_ST(dhs_spec_auto_create(&cfg, &sa), DHS_OK);
        if (!sa) return;
        for (int32_t i = 0; i < n; i++) {
            /* a = acc / tries exactly: `hits` all-accepted rounds of K = 2 and `miss` rejected ones */
            int32_t hits = (int32_t)dhs_rng_range(seed, 0, 9), miss = (int32_t)dhs_rng_range(seed, 0, 9);
            if (hits + miss == 0) miss = 1;
            for (int32_t h = 0; h < hits && M >= 2; h++) CHECK_ST(dhs_spec_auto_observe(sa, slots[i], 2, 1), DHS_OK);
            for (int32_t h = 0; h < miss && M >= 2; h++) CHECK_ST(dhs_spec_auto_observe(sa, slots[i], 2, 0), DHS_OK);
            CHECK_ST(dhs_spec_auto_estimate(sa, slots[i], &a[i]), DHS_OK);
            if (M >= 2) CHECKF(fabs(a[i] - (double)hits / (hits + miss)) < 1e-12, "estimate %.6f", a[i]);
        }
        double fixed = 1 + 2000 * dhs_rng_unit(seed), draft = 100 * dhs_rng_unit(seed), got = 0;
        CHECK_ST(dhs_spec_auto_choose(sa, n, slots, cap, q, fixed, draft, K, &got), DHS_OK);
        /* enumeration */
        double best = -1;
        int32_t e[4] = {1, 1, 1, 1};
        for (;;) {
            double r = ratio_of(a, e, n, q, fixed, draft);
            if (r > best) {
                best = r;
                memcpy(best_K, e, sizeof e);
            }
            int32_t i = 0;
            while (i < n) {
                int32_t c = cap[i] < M ? cap[i] : M;
                if (++e[i] <= c) break;
                e[i++] = 1;
            }
            if (i == n) break;
        }
        double mine = ratio_of(a, K, n, q, fixed, draft);
        CHECKF(fabs(mine - best) <= 1e-12 * best, "round %d: choose %.12g, best %.12g (K %d %d %d %d vs %d %d %d %d)", t,
               mine, best, K[0], n > 1 ? K[1] : 0, n > 2 ? K[2] : 0, n > 3 ? K[3] : 0, best_K[0], best_K[1], best_K[2],
               best_K[3]);
        CHECKF(fabs(got - mine) <= 1e-12 * mine, "reported %.12g, actual %.12g", got, mine);
        for (int32_t i = 0; i < n; i++) CHECK(K[i] >= 1 && K[i] <= cap[i] && K[i] <= M);
        dhs_spec_auto_destroy(sa);
    }
}

static void test_extremes(void)
{
    dhs_spec_auto_cfg cfg = dhs_spec_auto_cfg_default(4);
    cfg.prior_weight = 0;
    dhs_spec_auto *sa = NULL;
    CHECK_ST(dhs_spec_auto_create(&cfg, &sa), DHS_OK);
    if (!sa) return;
    int32_t slots[2] = {0, 1}, K[2];
    double q[2] = {10, 10};
    for (int i = 0; i < 20; i++) {
        CHECK_ST(dhs_spec_auto_observe(sa, 0, 8, 0), DHS_OK); /* never accepts */
        CHECK_ST(dhs_spec_auto_observe(sa, 1, 8, 7), DHS_OK); /* always accepts */
    }
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, NULL, q, 1000, 1, K, NULL), DHS_OK);
    CHECKF(K[0] == 1 && K[1] == 8, "K %d %d", K[0], K[1]);
    int32_t cap[2] = {3, 5};
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, cap, q, 1000, 1, K, NULL), DHS_OK);
    CHECKF(K[0] == 1 && K[1] == 5, "capped K %d %d", K[0], K[1]);
    /* a query as dear as the whole step: no speculation pays off below acceptance 1 */
    CHECK_ST(dhs_spec_auto_reset(sa, 1), DHS_OK);
    for (int i = 0; i < 20; i++) CHECK_ST(dhs_spec_auto_observe(sa, 1, 8, 3), DHS_OK);
    double q2[2] = {1e6, 1e6};
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, NULL, q2, 1, 0, K, NULL), DHS_OK);
    CHECKF(K[0] == 1 && K[1] == 1, "dear queries: K %d %d", K[0], K[1]);
    dhs_spec_auto_destroy(sa);
}

static void test_estimate(uint64_t *seed)
{
    const double ps[] = {0.2, 0.5, 0.8};
    for (int pi = 0; pi < 3; pi++) {
        dhs_spec_auto_cfg cfg = dhs_spec_auto_cfg_default(1);
        cfg.decay = 1;
        dhs_spec_auto *sa = NULL;
        CHECK_ST(dhs_spec_auto_create(&cfg, &sa), DHS_OK);
        if (!sa) return;
        for (int r = 0; r < 4000; r++) {
            int32_t Kr = (int32_t)dhs_rng_range(seed, 1, 8), acc = 0;
            while (acc < Kr - 1 && dhs_rng_unit(seed) < ps[pi]) acc++;
            CHECK_ST(dhs_spec_auto_observe(sa, 0, Kr, acc), DHS_OK);
        }
        double a = -1;
        CHECK_ST(dhs_spec_auto_estimate(sa, 0, &a), DHS_OK);
        printf("acceptance %.2f: estimate %.4f\n", ps[pi], a);
        CHECKF(fabs(a - ps[pi]) < 0.03, "p %.2f estimated %.4f", ps[pi], a);
        dhs_spec_auto_destroy(sa);
    }
}

static void test_bad_args(void)
{
    dhs_spec_auto_cfg cfg = dhs_spec_auto_cfg_default(4);
    dhs_spec_auto *sa = NULL;
    dhs_spec_auto_cfg b = cfg;
    b.spec_max = 0;
    CHECK_ST(dhs_spec_auto_create(&b, &sa), DHS_ERR_INVALID_ARG);
    b = cfg;
    b.decay = 0;
    CHECK_ST(dhs_spec_auto_create(&b, &sa), DHS_ERR_INVALID_ARG);
    b = cfg;
    b.prior_accept = 1.5;
    CHECK_ST(dhs_spec_auto_create(&b, &sa), DHS_ERR_INVALID_ARG);
    CHECK(sa == NULL);
    CHECK_ST(dhs_spec_auto_create(NULL, &sa), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_create(&cfg, &sa), DHS_OK);
    if (!sa) return;
    double a0, a1;
    CHECK_ST(dhs_spec_auto_estimate(sa, 2, &a0), DHS_OK);
    CHECK_ST(dhs_spec_auto_observe(sa, 4, 2, 1), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_observe(sa, 2, 9, 1), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_observe(sa, 2, 2, 2), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_observe(sa, 2, 2, -1), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_estimate(sa, 2, &a1), DHS_OK);
    CHECK(a0 == a1);
    int32_t slots[2] = {1, 1}, K[2] = {-7, -7}, cap0[2] = {0, 2};
    double q[2] = {1, 1}, qbad[2] = {1, 0};
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, NULL, q, 1, 0, K, NULL), DHS_ERR_INVALID_ARG); /* duplicate */
    slots[1] = 3;
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, cap0, q, 1, 0, K, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, NULL, qbad, 1, 0, K, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, NULL, q, 0, 0, K, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, NULL, q, -1, 0, K, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, NULL, q, 1, NAN, K, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_choose(sa, 0, slots, NULL, q, 1, 0, K, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_spec_auto_choose(sa, 5, slots, NULL, q, 1, 0, K, NULL), DHS_ERR_INVALID_ARG);
    CHECK(K[0] == -7 && K[1] == -7);
    /* after the refusals the marks are clear: the same slots are accepted */
    CHECK_ST(dhs_spec_auto_choose(sa, 2, slots, NULL, q, 1, 0, K, NULL), DHS_OK);
    CHECK_ST(dhs_spec_auto_reset(sa, -1), DHS_ERR_INVALID_ARG);
    dhs_spec_auto_destroy(sa);
    dhs_spec_auto_destroy(NULL);
}

/* rounds of n requests at varied widths: host rows = first * n + extra * (further queries), copies
   costing row_us each (row_us < 0: not measured) */
static void feed_rounds(dhs_spec_auto *sa, uint64_t *seed, double first, double extra, double row_us, int rounds)
{
    for (int r = 0; r < rounds; r++) {
        int32_t n = (int32_t)dhs_rng_range(seed, 1, 8), q = n + (int32_t)dhs_rng_range(seed, 0, 3 * n);
        double rows = first * n + extra * (q - n);
        CHECK_ST(dhs_spec_auto_observe_round(sa, n, q, rows, row_us < 0 ? -1 : rows * row_us), DHS_OK);
    }
}

static double mean_K(const int32_t *K, int32_t n)
{
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += K[i];
    return s / n;
}

static void test_miss_cost(uint64_t *seed)
{
    enum { N = 4 };
    dhs_spec_auto_cfg cfg = dhs_spec_auto_cfg_default(N);
    cfg.prior_weight = 0;
    int32_t slots[N] = {0, 1, 2, 3}, K[N], K0[N], Kc[N], Kf[N];
    double q[N] = {20, 20, 20, 20}, fixed = 2000, draft = 5;
    /* acceptance 0.8 everywhere; without copies the widths are wide */
    dhs_spec_auto *dear = NULL, *cheap = NULL;
    CHECK_ST(dhs_spec_auto_create(&cfg, &dear), DHS_OK);
    CHECK_ST(dhs_spec_auto_create(&cfg, &cheap), DHS_OK);
    if (!dear || !cheap) return;
    for (int r = 0; r < 50; r++)
        for (int32_t i = 0; i < N; i++) {
            int32_t a = r % 5 == 4 ? 3 : 7; /* 7 of 8 rounds x 7 drafts: about 0.8 */
            CHECK_ST(dhs_spec_auto_observe(dear, i, 8, a), DHS_OK);
            CHECK_ST(dhs_spec_auto_observe(cheap, i, 8, a), DHS_OK);
        }
    CHECK_ST(dhs_spec_auto_choose(dear, N, slots, NULL, q, fixed, draft, K0, NULL), DHS_OK);
    /* before any round: no miss model, the plain choice */
    CHECK_ST(dhs_spec_auto_choose_round(dear, N, slots, NULL, q, fixed, draft, -1, K, NULL), DHS_OK);
    CHECKF(!memcmp(K, K0, sizeof K), "no rounds observed: K %d %d %d %d vs %d %d %d %d", K[0], K[1], K[2], K[3], K0[0],
           K0[1], K0[2], K0[3]);
    /* dear copies: 1500 rows per further query at 0.5 us a row = 750 us a query (the fit within 5 %:
       its ridge pulls a little) */
    feed_rounds(dear, seed, 300, 1500, 0.5, 200);
    double f, e, ru;
    CHECK_ST(dhs_spec_auto_miss_model(dear, &f, &e, &ru), DHS_OK);
    printf("miss model: first %.1f rows, extra %.1f rows, %.4f us/row\n", f, e, ru);
    CHECKF(fabs(f - 300) < 15 && fabs(e - 1500) < 30 && fabs(ru - 0.5) < 1e-9, "fit %.2f %.2f %.4f", f, e, ru);
    CHECK_ST(dhs_spec_auto_choose_round(dear, N, slots, NULL, q, fixed, draft, -1, Kc, NULL), DHS_OK);
    /* free: the further queries copy nothing (all rows of a round come with its first queries) */
    feed_rounds(cheap, seed, 300, 0, 0.5, 200);
    CHECK_ST(dhs_spec_auto_choose_round(cheap, N, slots, NULL, q, fixed, draft, -1, Kf, NULL), DHS_OK);
    printf("acceptance 0.8: plain K %.2f, dear misses %.2f, free misses %.2f\n", mean_K(K0, N), mean_K(Kc, N),
           mean_K(Kf, N));
    CHECKF(mean_K(Kc, N) + 1 <= mean_K(K0, N), "dear misses do not narrow: %.2f vs %.2f", mean_K(Kc, N), mean_K(K0, N));
    CHECKF(mean_K(Kf, N) >= mean_K(Kc, N) + 1, "free misses do not widen: %.2f vs %.2f", mean_K(Kf, N), mean_K(Kc, N));
    CHECKF(!memcmp(Kf, K0, sizeof Kf), "free misses: K %d %d %d %d, plain %d %d %d %d", Kf[0], Kf[1], Kf[2], Kf[3], K0[0],
           K0[1], K0[2], K0[3]);
    /* the dear context learns that copies became cheap (measured 0.001 us a row): it widens again */
    feed_rounds(dear, seed, 300, 1500, 0.001, 400);
    CHECK_ST(dhs_spec_auto_choose_round(dear, N, slots, NULL, q, fixed, draft, -1, K, NULL), DHS_OK);
    CHECKF(mean_K(K, N) >= mean_K(Kc, N) + 1, "cheaper copies do not widen: %.2f vs %.2f", mean_K(K, N), mean_K(Kc, N));
    /* staging room: 0 rows beyond the first queries allows no further query; 2.5 further queries' rows
       allow 2 */
    feed_rounds(cheap, seed, 300, 100, 0.0, 400); /* extra rows > 0, still free */
    CHECK_ST(dhs_spec_auto_choose_round(cheap, N, slots, NULL, q, fixed, draft, 0, K, NULL), DHS_OK);
    CHECKF(mean_K(K, N) == 1, "no staging room: K %d %d %d %d", K[0], K[1], K[2], K[3]);
    CHECK_ST(dhs_spec_auto_miss_model(cheap, NULL, &e, NULL), DHS_OK);
    CHECK_ST(dhs_spec_auto_choose_round(cheap, N, slots, NULL, q, fixed, draft, 2.5 * e, K, NULL), DHS_OK);
    CHECKF(mean_K(K, N) * N - N == 2, "room for 2.5 further queries: K %d %d %d %d", K[0], K[1], K[2], K[3]);
    /* unmeasured copies keep the prior price */
    dhs_spec_auto *pr = NULL;
    CHECK_ST(dhs_spec_auto_create(&cfg, &pr), DHS_OK);
    if (pr) {
        CHECK_ST(dhs_spec_auto_set_row_us(pr, 0.25), DHS_OK);
        feed_rounds(pr, seed, 300, 1500, -1, 50);
        CHECK_ST(dhs_spec_auto_miss_model(pr, NULL, NULL, &ru), DHS_OK);
        CHECKF(ru == 0.25, "prior row_us %.4f", ru);
        /* bad arguments: nothing changed */
        CHECK_ST(dhs_spec_auto_observe_round(pr, 0, 1, 1, 1), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_observe_round(pr, 2, 1, 1, 1), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_observe_round(pr, 1, 1, -1, 1), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_observe_round(pr, 1, 1, NAN, 1), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_observe_round(pr, 1, 1, 1, INFINITY), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_observe_round(NULL, 1, 1, 1, 1), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_set_row_us(pr, -1), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_set_row_us(pr, NAN), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_miss_model(pr, NULL, NULL, &ru), DHS_OK);
        CHECK(ru == 0.25);
        CHECK_ST(dhs_spec_auto_miss_model(NULL, NULL, NULL, &ru), DHS_ERR_INVALID_ARG);
        K[0] = -7;
        CHECK_ST(dhs_spec_auto_choose_round(pr, N, slots, NULL, q, fixed, draft, NAN, K, NULL), DHS_ERR_INVALID_ARG);
        CHECK_ST(dhs_spec_auto_choose_round(pr, N, slots, NULL, q, 0, draft, -1, K, NULL), DHS_ERR_INVALID_ARG);
        CHECK(K[0] == -7);
        dhs_spec_auto_destroy(pr);
    }
    dhs_spec_auto_destroy(dear);
    dhs_spec_auto_destroy(cheap);
}

int main(void)
{
    uint64_t seed = th_seed("test_spec_auto");
    test_optimal(&seed);
    test_extremes();
    test_estimate(&seed);
    test_bad_args();
    test_miss_cost(&seed);
    return th_summary();
}
