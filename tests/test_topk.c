/* test_topk.c - the fused top-k + slot lookup reference (src/core/topk.c)
 * against the reference model's top-k (src/ref/numerics.c dhs_ref_topk, a
 * heap) followed by a separate slot_of lookup: same rows, same order, same
 * locations, on random and adversarial score vectors:
 *   random floats, all scores equal, a few levels (huge tie groups at the k-th
 *   value), n < k, n == k, n == k + 1, +-inf, -0.0/+0.0 mixes, denormals,
 *   k = 1 and k = 2048; the key transform itself (order-preserving, -0 == +0,
 *   identical to dhs_ref_topk_key); NaN rejection (error, outputs untouched);
 *   argument errors. Seeded (printed); DHS_TEST_SCALE scales the workload. */
#include <float.h>
#include <math.h>

#include "core/topk_spec.h"
#include "ref/model.h"
#include "test_help.h"
#include "test_topk_gen.h"

/* one case: fused reference vs model top-k + separate lookup; returns candidates compared */
static int64_t run_case(gen_kind g, int64_t n, int32_t k, uint64_t *rng, float *sc, int32_t *slot, int32_t *rows,
                        int32_t *locs, int32_t *want, uint64_t *heap)
{
    gen_scores(g, sc, n, rng);
    int hit_pct = (int)dhs_rng_below(rng, 101);
    for (int64_t i = 0; i < n; i++) slot[i] = dhs_rng_below(rng, 100) < hit_pct ? (int32_t)dhs_rng_below(rng, 1 << 20) : -1;
    for (int32_t i = 0; i < k; i++) rows[i] = locs[i] = 0x5a5a5a5a;
    dhs_status st = dhs_topk_fused_ref(sc, n, k, slot, rows, locs);
    CHECKF(st == DHS_OK, "%s n %lld k %d: status %d", gen_name[g], (long long)n, k, (int)st);
    int32_t cnt = dhs_ref_topk(sc, n, k, want, heap);
    CHECK(cnt == (n < k ? n : k));
    int32_t bad = -1;
    for (int32_t i = 0; i < k && bad < 0; i++) {
        int32_t wl = want[i] < 0 ? -1 : slot[want[i]];
        if (rows[i] != want[i] || locs[i] != wl) bad = i;
    }
    CHECKF(bad < 0, "%s n %lld k %d: entry %d: row %d loc %d, reference row %d loc %d", gen_name[g], (long long)n, k, bad,
           bad < 0 ? 0 : rows[bad], bad < 0 ? 0 : locs[bad], bad < 0 ? 0 : want[bad],
           bad < 0 || want[bad] < 0 ? -1 : slot[want[bad]]);
    /* the rule itself, independent of both implementations: non-increasing
       scores, positions increasing inside equal scores, nothing left out better
       than the last selected */
    for (int32_t i = 1; i < cnt; i++) {
        float a = sc[rows[i - 1]], b = sc[rows[i]];
        if (!(a > b || (a == b && rows[i - 1] < rows[i]))) {
            CHECKF(0, "%s: order broken at %d", gen_name[g], i);
            break;
        }
    }
    if (cnt > 0 && cnt < n) {
        uint8_t *in = calloc((size_t)n, 1);
        for (int32_t i = 0; i < cnt; i++) in[rows[i]] = 1;
        float last = sc[rows[cnt - 1]];
        int64_t viol = 0;
        for (int64_t p = 0; p < n; p++)
            if (!in[p] && (sc[p] > last || (sc[p] == last && p < rows[cnt - 1]))) viol++;
        CHECKF(viol == 0, "%s n %lld k %d: %lld left-out candidates beat the last selected", gen_name[g], (long long)n, k,
               (long long)viol);
        free(in);
    }
    return n;
}

static void test_keys(uint64_t *rng)
{
    /* fixed anchors */
    CHECK(dhs_topk_score_key(-INFINITY) == 0x007fffffu);
    CHECK(dhs_topk_score_key(0.0f) == 0x80000000u);
    CHECK(dhs_topk_score_key(-0.0f) == 0x80000000u);
    CHECK(dhs_topk_score_key(INFINITY) == 0xff800000u);
    CHECK(dhs_topk_score_key(NAN) == 0u && dhs_topk_score_key(-NAN) == 0u);
    CHECK(dhs_topk_is_nan_bits(0x7fc00000u) && dhs_topk_is_nan_bits(0xffc00001u) && dhs_topk_is_nan_bits(0x7f800001u));
    CHECK(!dhs_topk_is_nan_bits(0x7f800000u) && !dhs_topk_is_nan_bits(0xff800000u));
    CHECK(dhs_topk_key_pos(dhs_topk_key(1.5f, 12345)) == 12345u);
    long mism = 0, keymism = 0;
    for (int i = 0; i < 2000000; i++) {
        float a = any_float(rng), b = dhs_rng_below(rng, 4) == 0 ? a : any_float(rng);
        if (dhs_rng_below(rng, 50) == 0) a = dhs_rng_below(rng, 2) ? 0.0f : -0.0f;
        if (dhs_rng_below(rng, 50) == 0) b = dhs_rng_below(rng, 2) ? 0.0f : -0.0f;
        uint32_t ka = dhs_topk_score_key(a), kb = dhs_topk_score_key(b);
        if ((a > b) != (ka > kb) || (a == b) != (ka == kb) || ka == 0) mism++;
        int64_t p = dhs_rng_below(rng, INT32_MAX);
        if (dhs_topk_key(a, (uint32_t)p) != dhs_ref_topk_key(a, p)) keymism++;
    }
    CHECKF(mism == 0, "%ld pairs ordered differently by the score key than by float comparison", mism);
    CHECKF(keymism == 0, "%ld keys differ from the reference model's dhs_ref_topk_key", keymism);
}

static void test_small_rules(void)
{
    int32_t r[4], l[4];
    int32_t slot[4] = {7, -1, 9, 3};
    float z1[2] = {-0.0f, 0.0f}, z2[2] = {0.0f, -0.0f};
    CHECK_ST(dhs_topk_fused_ref(z1, 2, 1, slot, r, l), DHS_OK);
    CHECK(r[0] == 0 && l[0] == 7); /* -0 == +0: lower position wins */
    CHECK_ST(dhs_topk_fused_ref(z2, 2, 1, slot, r, l), DHS_OK);
    CHECK(r[0] == 0 && l[0] == 7);
    float inf[4] = {-INFINITY, 1.0f, INFINITY, INFINITY};
    CHECK_ST(dhs_topk_fused_ref(inf, 4, 4, slot, r, l), DHS_OK);
    CHECK(r[0] == 2 && r[1] == 3 && r[2] == 1 && r[3] == 0);
    CHECK(l[0] == 9 && l[1] == 3 && l[2] == -1 && l[3] == 7);
    /* n < k: padding; NULL slot_of: all misses; NULL out_locs: plain top-k */
    CHECK_ST(dhs_topk_fused_ref(inf, 2, 4, NULL, r, l), DHS_OK);
    CHECK(r[0] == 1 && r[1] == 0 && r[2] == -1 && r[3] == -1 && l[0] == -1 && l[1] == -1 && l[3] == -1);
    CHECK_ST(dhs_topk_fused_ref(inf, 4, 2, slot, r, NULL), DHS_OK);
    CHECK(r[0] == 2 && r[1] == 3);
    CHECK_ST(dhs_topk_fused_ref(inf, 0, 2, slot, r, l), DHS_OK);
    CHECK(r[0] == -1 && r[1] == -1 && l[0] == -1);
    /* NaN anywhere: rejected, outputs untouched */
    float nanv[4] = {1.0f, 2.0f, NAN, 3.0f};
    for (int i = 0; i < 4; i++) r[i] = l[i] = 42;
    CHECK_ST(dhs_topk_fused_ref(nanv, 4, 2, slot, r, l), DHS_ERR_INVALID_ARG);
    CHECK(r[0] == 42 && r[3] == 42 && l[0] == 42 && l[3] == 42);
    nanv[2] = -NAN;
    CHECK_ST(dhs_topk_fused_ref(nanv, 4, 4, slot, r, l), DHS_ERR_INVALID_ARG);
    CHECK(r[0] == 42);
    /* argument errors */
    CHECK_ST(dhs_topk_fused_ref(inf, 4, 0, slot, r, l), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_topk_fused_ref(inf, -1, 2, slot, r, l), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_topk_fused_ref(NULL, 4, 2, slot, r, l), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_topk_fused_ref(inf, 4, 2, slot, NULL, l), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_topk_fused_ref(inf, (int64_t)INT32_MAX + 1, 2, slot, r, l), DHS_ERR_INVALID_ARG);
}

int main(void)
{
    uint64_t rng = th_seed("test_topk");
    double scale = th_scale();
    test_keys(&rng);
    test_small_rules();

    const int64_t NMAX = 300000;
    const int32_t KMAX = DHS_TOPK_MAX_K;
    float *sc = th_alloc(sizeof(float) * NMAX);
    int32_t *slot = th_alloc(sizeof(int32_t) * NMAX);
    int32_t *rows = th_alloc(sizeof(int32_t) * KMAX), *locs = th_alloc(sizeof(int32_t) * KMAX);
    int32_t *want = th_alloc(sizeof(int32_t) * KMAX);
    uint64_t *heap = th_alloc(sizeof(uint64_t) * KMAX);
    int64_t total = 0;
    int cases = 0;
    /* the boundary sizes for every generator at k = 2048 and a small k */
    static const int32_t ks[] = {1, 7, 64, 2048};
    for (int g = 0; g < G_NGEN; g++)
        for (int ki = 0; ki < 4; ki++) {
            int32_t k = ks[ki];
            int64_t ns[] = {0, 1, k - 1, k, k + 1, 2 * k + 3, 50000};
            for (int ni = 0; ni < 7; ni++) {
                if (ns[ni] < 0) continue;
                total += run_case((gen_kind)g, ns[ni], k, &rng, sc, slot, rows, locs, want, heap);
                cases++;
            }
        }
    /* random sizes */
    int nrand = (int)(120 * scale) + 10;
    for (int c = 0; c < nrand; c++) {
        gen_kind g = (gen_kind)dhs_rng_below(&rng, G_NGEN);
        int64_t n = dhs_rng_below(&rng, 4) == 0 ? dhs_rng_below(&rng, 4096) : dhs_rng_below(&rng, NMAX + 1);
        int32_t k = dhs_rng_below(&rng, 3) == 0 ? (int32_t)(1 + dhs_rng_below(&rng, KMAX)) : KMAX;
        total += run_case(g, n, k, &rng, sc, slot, rows, locs, want, heap);
        cases++;
    }
    printf("test_topk: %d cases, %lld candidates compared\n", cases, (long long)total);
    CHECK(total >= 100000);
    free(sc);
    free(slot);
    free(rows);
    free(locs);
    free(want);
    free(heap);
    return th_summary();
}
