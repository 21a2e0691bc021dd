/* test_overlap.c - the C reference of the attention split around the miss
 * copy (dev/overlap/overlap.c, docs/FLASHOFFLOAD.md §3), on random and
 * adversarial steps (test_overlap_gen.h: random, all hits, all misses, -1
 * padding, repeated rows, large score ranges, ties):
 *   - whole (copy-then-attend) equals the single-pass softmax attention
 *     (test_overlap_gen.h; the model's order before its split-K), bit for bit;
 *   - exact overlap, whose phase A reads the pools as they are BEFORE the
 *     copy (the misses' staging rows poisoned with FP8 NaN codes), equals
 *     whole bit for bit; a whole pass over the poisoned pools does not (the
 *     poison is seen when read);
 *   - fast overlap stays within DHS_OV_FAST_TOL * vmax of exact; the measured
 *     maxima (normalised, absolute, relative) are printed;
 *   - scratch is filled with NaN before every pass (nothing stale is used);
 *   - argument errors.
 * Prints its seed (DHS_TEST_SEED replays). */
#include <math.h>
#include <stdio.h>

#include "test_help.h"
#include "test_overlap_gen.h"

static ovg_err g_err;
static int n_identity;

static void nan_fill(float *p, int64_t n) { memset(p, 0xff, sizeof(float) * (size_t)n); }

static void run_case(ovg_kind kind, int32_t nq, int32_t nh, int32_t k, int32_t chunk, uint64_t *rng)
{
    ovg_case c;
    if (ovg_make(&c, kind, nq, nh, k, chunk, rng, NULL, NULL) != 0) {
        printf("allocation failed\n");
        exit(2);
    }
    const dhs_ov_shape *s = &c.s;
    CHECKF(dhs_ov_shape_check(s) == NULL, "%s", dhs_ov_shape_check(s));
    int64_t no = (int64_t)nq * nh * DHS_OV_DV;
    float *scores = malloc(sizeof(float) * (size_t)dhs_ov_scores_len(s));
    float *pm = malloc(sizeof(float) * (size_t)dhs_ov_pml_len(s)), *pl = malloc(sizeof(float) * (size_t)dhs_ov_pml_len(s));
    float *pacc = malloc(sizeof(float) * (size_t)dhs_ov_pacc_len(s));
    float *ow = malloc(sizeof(float) * (size_t)no), *ox = malloc(sizeof(float) * (size_t)no);
    float *of = malloc(sizeof(float) * (size_t)no), *om = malloc(sizeof(float) * (size_t)no);
    float *op = malloc(sizeof(float) * (size_t)no);
    if (!scores || !pm || !pl || !pacc || !ow || !ox || !of || !om || !op) {
        printf("allocation failed\n");
        exit(2);
    }
    dhs_ov_args a = {c.q, c.base_after, c.loc, c.miss, NULL, scores, pm, pl, pacc, NULL};
    char what[160];
    snprintf(what, sizeof what, "%s nq %d nh %d k %d chunk %d", ovg_kind_name[kind], nq, nh, k, chunk);

    /* whole == the single-pass attention */
    nan_fill(scores, dhs_ov_scores_len(s));
    nan_fill(ow, no);
    a.out = ow;
    CHECK_ST(dhs_ov_attend_ref(s, &a), DHS_OK);
    ovg_model_attention(&c, om);
    CHECKF(memcmp(ow, om, sizeof(float) * (size_t)no) == 0, "%s: whole != single-pass attention", what);

    /* exact overlap (phase A on the poisoned pools) == whole */
    nan_fill(scores, dhs_ov_scores_len(s));
    nan_fill(ox, no);
    a.out = ox;
    CHECK_ST(dhs_ov_overlap_ref(s, DHS_OV_EXACT, c.base_before, &a), DHS_OK);
    CHECKF(memcmp(ow, ox, sizeof(float) * (size_t)no) == 0, "%s: exact overlap != whole", what);

    /* fast overlap within the bound */
    nan_fill(scores, dhs_ov_scores_len(s));
    nan_fill(pm, dhs_ov_pml_len(s));
    nan_fill(pl, dhs_ov_pml_len(s));
    nan_fill(pacc, dhs_ov_pacc_len(s));
    nan_fill(of, no);
    a.out = of;
    CHECK_ST(dhs_ov_overlap_ref(s, DHS_OV_FAST, c.base_before, &a), DHS_OK);
    ovg_err e = {0, 0, 0, 0, 0};
    ovg_compare_fast(&c, of, ow, &e);
    CHECKF(e.over == 0, "%s: %lld fast values beyond the bound (max %.3g of it, |d|/vmax %.3g)", what,
           (long long)e.over, e.of_bound, e.norm);
    ovg_err_max(&g_err, &e);
    /* one partial per query (chunk = k, entries all hits or all misses): the merge is the identity, fast == exact */
    int one_set = 1;
    for (int64_t i = 0; i < (int64_t)nq * k; i++)
        if (c.loc[i] >= 0) one_set &= (c.miss[i] != 0) == (kind == OVG_ALL_MISSES);
    if (chunk == k && one_set) {
        CHECKF(memcmp(ow, of, sizeof(float) * (size_t)no) == 0, "%s: one partial, yet fast != exact", what);
        n_identity++;
    }

    /* the poison is visible to a pass that reads the staging rows early */
    if (c.n_miss_rows > 0) {
        dhs_ov_args b = a;
        b.base = c.base_before;
        b.out = op;
        CHECK_ST(dhs_ov_attend_ref(s, &b), DHS_OK);
        CHECKF(memcmp(ow, op, sizeof(float) * (size_t)no) != 0, "%s: poisoned rows went unseen", what);
    }
    /* padding-only queries give 0 */
    for (int32_t q = 0; q < nq; q++) {
        int any = 0;
        for (int32_t e2 = 0; e2 < k; e2++) any |= c.loc[(int64_t)q * k + e2] >= 0;
        if (any) continue;
        int zero = 1;
        for (int64_t i = 0; i < (int64_t)nh * DHS_OV_DV; i++) {
            int64_t j = (int64_t)q * nh * DHS_OV_DV + i;
            zero &= ow[j] == 0.0f && ox[j] == 0.0f && of[j] == 0.0f;
        }
        CHECKF(zero, "%s: query %d has no entry but a nonzero output", what, q);
    }
    free(scores);
    free(pm);
    free(pl);
    free(pacc);
    free(ow);
    free(ox);
    free(of);
    free(om);
    free(op);
    ovg_free(&c);
}

static void test_errors(void)
{
    dhs_ov_shape s = {1, 4, 64, 16, 0.05f, 1}, b;
    CHECK(dhs_ov_shape_check(&s) == NULL);
    CHECK(dhs_ov_shape_check(NULL) != NULL);
    b = s, b.nq = -1;
    CHECK(dhs_ov_shape_check(&b) != NULL);
    b = s, b.nh = 0;
    CHECK(dhs_ov_shape_check(&b) != NULL);
    b = s, b.nh = DHS_OV_MAX_HEADS + 1;
    CHECK(dhs_ov_shape_check(&b) != NULL);
    b = s, b.k = 0;
    CHECK(dhs_ov_shape_check(&b) != NULL);
    b = s, b.k = DHS_OV_MAX_K + 1, b.chunk = 1;
    CHECK(dhs_ov_shape_check(&b) != NULL);
    b = s, b.chunk = 0;
    CHECK(dhs_ov_shape_check(&b) != NULL);
    b = s, b.chunk = s.k + 1;
    CHECK(dhs_ov_shape_check(&b) != NULL);
    b = s, b.exp_portable = 2;
    CHECK(dhs_ov_shape_check(&b) != NULL);
    CHECK(dhs_ov_chunks(&s) == 4);
    b = s, b.chunk = 15;
    CHECK(dhs_ov_chunks(&b) == 5);
    CHECK(dhs_ov_pacc_len(&b) == 1LL * 2 * 5 * 4 * 512);
    dhs_ov_args a;
    memset(&a, 0, sizeof a);
    const uint8_t *base[1] = {NULL};
    b = s, b.nh = 0;
    CHECK_ST(dhs_ov_attend_ref(&b, &a), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ov_attend_ref(&s, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ov_overlap_ref(&s, 7, base, &a), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ov_overlap_ref(&s, DHS_OV_EXACT, NULL, &a), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ov_partial_ref(&s, DHS_OV_ALL, &a), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ov_reduce_ref(&b, &a), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_ov_merge_ref(&b, &a), DHS_ERR_INVALID_ARG);
}

int main(void)
{
    uint64_t rng = th_seed("test_overlap");
    test_errors();
    double sc = th_scale();
    int n_rand = (int)(60 * sc) + 7;
    static const int32_t ks[] = {1, 2, 7, 33, 64, 300, 1000, 2048};
    static const int32_t nhs[] = {1, 2, 3, 5, 16};
    int cases = 0;
    /* every kind at the model's size: k 2048, 16 heads, chunk 256 */
    for (int kind = 0; kind < OVG_KINDS; kind++, cases++) run_case((ovg_kind)kind, 2, 16, 2048, 256, &rng);
    run_case(OVG_ALL_HITS, 2, 16, 2048, 2048, &rng); /* one partial: fast must equal exact */
    run_case(OVG_ALL_MISSES, 2, 5, 300, 300, &rng);
    cases += 2;
    /* random shapes: k, heads, chunk (1, 7, k/3, k, random) */
    for (int i = 0; i < n_rand; i++, cases++) {
        ovg_kind kind = (ovg_kind)(i % OVG_KINDS);
        int32_t k = ks[dhs_rng_below(&rng, (int64_t)(sizeof ks / sizeof ks[0]))];
        if (k > 300 && dhs_rng_below(&rng, 2)) k = 1 + (int32_t)dhs_rng_below(&rng, 300);
        int32_t nh = nhs[dhs_rng_below(&rng, (int64_t)(sizeof nhs / sizeof nhs[0]))];
        int32_t chunk;
        switch (dhs_rng_below(&rng, 5)) {
        case 0: chunk = 1; break;
        case 1: chunk = 7 < k ? 7 : k; break;
        case 2: chunk = k / 3 > 0 ? k / 3 : 1; break;
        case 3: chunk = k; break;
        default: chunk = 1 + (int32_t)dhs_rng_below(&rng, k);
        }
        int32_t nq = 1 + (int32_t)dhs_rng_below(&rng, k > 300 ? 2 : 5);
        run_case(kind, nq, nh, k, chunk, &rng);
    }
    printf("cases: %d (kinds: %d)\n", cases, OVG_KINDS);
    printf("fast == exact bitwise in the %d cases with one partial per query\n", n_identity);
    printf("fast vs exact, max over all values: |d|/vmax %.3g, %.3g of the bound (n+8)*2^-23*vmax, |d| %.3g, "
           "|d|/|exact| %.3g (where |exact| >= 1e-3 vmax)\n",
           g_err.norm, g_err.of_bound, g_err.abs, g_err.rel);
    CHECKF(n_identity > 0, "no case with one partial per query");
    return th_summary();
}
