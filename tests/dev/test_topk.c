/* test_topk.c - the fused top-k + slot lookup reference (dev/topk.c)
 * against the reference model's top-k (model/numerics.c dhs_ref_topk, a
 * heap) followed by a separate slot_of lookup: same rows, same order, same
 * locations, on random and adversarial score vectors:
 *   random floats, all scores equal, a few levels (huge tie groups at the k-th
 *   value), n < k, n == k, n == k + 1, +-inf, -0.0/+0.0 mixes, denormals,
 *   k = 1 and k = 2048; the key transform itself (order-preserving, -0 == +0,
 *   identical to dhs_ref_topk_key); NaN rejection (error, outputs untouched);
 *   argument errors; the per-query-count form (dhs_topk_fused_ref_batch:
 *   counts 0..above the bound, skipped queries, last-position counts, NaN
 *   inside / just past a count). Seeded (printed); DHS_TEST_SCALE scales the workload. */
#include <float.h>
#include <math.h>

#include "dev/topk_spec.h"
#include "model/model.h"
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

/* the per-query-count form (dhs_topk_fused_ref_batch, the kernel's CPU twin)
   against dhs_ref_topk over each query's own n_q: counts 0, 1, k-1, k, k+1,
   random, the bound n, above the bound (clamped), and skipped queries (< 0:
   untouched, nan_count 0); n_add 0 (counts) and 1 (last positions, the
   model's pos[]); a per-query or a shared slot table; a NaN past a query's
   count does not count, one inside it gives -1 rows and its count. */
static int64_t test_batch(uint64_t *rng, int rounds)
{
    enum { B = 12, NB = 6000 };
    float *sc = th_alloc(sizeof(float) * B * NB);
    int32_t *slot = th_alloc(sizeof(int32_t) * B * NB);
    int32_t *rows = th_alloc(sizeof(int32_t) * B * DHS_TOPK_MAX_K), *locs = th_alloc(sizeof(int32_t) * B * DHS_TOPK_MAX_K);
    int32_t *want = th_alloc(sizeof(int32_t) * DHS_TOPK_MAX_K);
    uint64_t *heap = th_alloc(sizeof(uint64_t) * DHS_TOPK_MAX_K);
    int64_t n_of[B], total = 0;
    int32_t nanc[B];
    static const int32_t ks[] = {1, 7, 64, 2048};
    for (int r = 0; r < rounds; r++) {
        const int32_t k = r < 4 ? ks[r] : dhs_rng_below(rng, 2) ? ks[dhs_rng_below(rng, 4)] : (int32_t)(1 + dhs_rng_below(rng, DHS_TOPK_MAX_K));
        const int64_t n = dhs_rng_below(rng, 3) == 0 ? (int64_t)dhs_rng_below(rng, 2 * (uint64_t)k + 2) : NB;
        const int64_t n_add = dhs_rng_below(rng, 2);
        const int shared_slots = dhs_rng_below(rng, 3) == 0, with_slots = dhs_rng_below(rng, 5) != 0;
        const int64_t ld = NB;
        for (int q = 0; q < B; q++) {
            gen_kind g = (gen_kind)((r + q) % G_NGEN);
            gen_scores(g, sc + (int64_t)q * ld, ld, rng);
            for (int64_t i = 0; i < ld; i++)
                slot[(int64_t)q * ld + i] = dhs_rng_below(rng, 2) ? (int32_t)dhs_rng_below(rng, 1 << 20) : -1;
            int64_t cand[] = {0, 1, k - 1, k, k + 1, (int64_t)dhs_rng_below(rng, (uint64_t)n + 1), n, n + 5, -1, -7};
            int64_t c = cand[(q + r) % 10];
            if (c > n + 5) c = n;
            /* a count c: n_of = c - n_add (c = 0 with n_add 1 is not expressible: skip instead) */
            n_of[q] = c < 0 ? c : c - n_add;
            if (c == 0 && n_add == 1) n_of[q] = -1;
        }
        /* a NaN just past query 0's count (ignored), one inside query 1's (rejected) */
        int64_t n0 = dhs_topk_query_n(n_of, n_add, n, 0), n1 = dhs_topk_query_n(n_of, n_add, n, 1);
        if (n0 >= 0 && n0 < ld) sc[n0] = NAN;
        int nan_in = n1 > 0 && dhs_rng_below(rng, 2);
        if (nan_in) sc[ld + (int64_t)dhs_rng_below(rng, (uint64_t)n1)] = NAN;
        for (int64_t i = 0; i < (int64_t)B * k; i++) rows[i] = locs[i] = 0x5a5a5a5a;
        for (int q = 0; q < B; q++) nanc[q] = 77;
        const int32_t *so = with_slots ? slot : NULL;
        const int64_t sld = shared_slots ? 0 : ld;
        dhs_status st = dhs_topk_fused_ref_batch(sc, ld, B, n, n_of, n_add, k, so, sld, rows, locs, nanc);
        CHECKF(st == DHS_OK, "batch round %d: status %d", r, (int)st);
        int bad = 0;
        for (int q = 0; q < B && !bad; q++) {
            const int64_t nq = dhs_topk_query_n(n_of, n_add, n, q);
            const int32_t *rq = rows + (int64_t)q * k, *lq = locs + (int64_t)q * k;
            if (nq < 0) { /* skipped */
                for (int32_t i = 0; i < k; i++) bad |= rq[i] != 0x5a5a5a5a || lq[i] != 0x5a5a5a5a;
                bad |= nanc[q] != 0;
                CHECKF(!bad, "batch round %d query %d (skipped): outputs touched or nan_count %d", r, q, nanc[q]);
                continue;
            }
            CHECKF(nq <= n && nq == (n_of[q] + n_add > n ? n : n_of[q] + n_add), "query %d: n_q %lld", q, (long long)nq);
            if (q == 1 && nan_in) {
                for (int32_t i = 0; i < k; i++) bad |= rq[i] != -1 || (so && lq[i] != -1);
                CHECKF(!bad && nanc[q] == 1, "batch round %d: NaN query: nan_count %d, rows not all -1", r, nanc[q]);
                bad = 0;
                continue;
            }
            CHECKF(nanc[q] == 0, "batch round %d query %d: nan_count %d", r, q, nanc[q]);
            const float *s = sc + (int64_t)q * ld;
            int32_t cnt = dhs_ref_topk(s, nq, k, want, heap);
            CHECK(cnt == (nq < k ? nq : k));
            for (int32_t i = 0; i < k && !bad; i++) {
                int32_t wl = want[i] < 0 ? -1 : slot[(q * sld) + want[i]];
                if (rq[i] != want[i] || (so && lq[i] != wl) || (!so && lq[i] != 0x5a5a5a5a)) {
                    CHECKF(0, "batch round %d (%s) query %d n_q %lld k %d: entry %d: row %d loc %d, reference row %d loc %d",
                           r, gen_name[(r + q) % G_NGEN], q, (long long)nq, k, i, rq[i], lq[i], want[i], wl);
                    bad = 1;
                }
            }
            total += nq;
        }
    }
    /* argument errors (the launcher's), nothing written */
    int32_t r1[4] = {9, 9, 9, 9};
    int64_t c1[1] = {1};
    CHECK_ST(dhs_topk_fused_ref_batch(sc, NB, 1, NB, c1, -1, 2, NULL, 0, r1, NULL, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_topk_fused_ref_batch(sc, NB, 1, NB, c1, 0, DHS_TOPK_MAX_K + 1, NULL, 0, r1, NULL, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_topk_fused_ref_batch(sc, NB - 1, 2, NB, c1, 0, 2, NULL, 0, r1, NULL, NULL), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_topk_fused_ref_batch(sc, NB, 1, NB, c1, 0, 2, slot, 0, r1, NULL, NULL), DHS_ERR_INVALID_ARG);
    CHECK(r1[0] == 9 && r1[1] == 9 && r1[2] == 9 && r1[3] == 9);
    /* n_of NULL: every query has n candidates (dhs_cuda_topk_fused's form) */
    for (int64_t i = 0; i < 10; i++) sc[i] = (float)(i % 3);
    CHECK_ST(dhs_topk_fused_ref_batch(sc, 5, 2, 5, NULL, 0, 2, NULL, 0, r1, NULL, NULL), DHS_OK);
    CHECK(r1[0] == 2 && r1[1] == 1 && r1[2] == 0 && r1[3] == 3); /* {0,1,2,0,1}, {2,0,1,2,0}: ties to the lower position */
    free(sc);
    free(slot);
    free(rows);
    free(locs);
    free(want);
    free(heap);
    return total;
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
    int64_t btotal = test_batch(&rng, (int)(40 * scale) + 8);
    printf("test_topk: %d cases, %lld candidates compared; per-query counts: %lld candidates\n", cases, (long long)total,
           (long long)btotal);
    CHECK(btotal >= 10000);
    CHECK(total >= 100000);
    free(sc);
    free(slot);
    free(rows);
    free(locs);
    free(want);
    free(heap);
    return th_summary();
}
