/* test_topk_cuda.c - the CUDA fused top-k + slot lookup (src/cuda/topk.cu)
 * against the CPU reference dhs_topk_fused_ref (itself checked against the
 * reference model's top-k by test_topk.c) on the same inputs: random and
 * adversarial score vectors (test_topk_gen.h), n from 0 to 1M, k from 1 to
 * 2048 (powers of two and not), batches of queries with one slot table each
 * or one shared table (slot_ld 0); the plain top-k (slot_of NULL) followed by
 * the separate lookup kernel must give the same; a query with NaN reports its
 * NaN count and writes -1 rows/locations while its batch neighbours stay
 * exact; launcher argument errors. Rows, order and locations must be equal
 * entry for entry.
 *
 * Exits 77 (CTest SKIP_RETURN_CODE, set in CMakeLists.txt) when built without
 * CUDA or when no device is present: it never passes without running. */
#include <stdio.h>

#include "core/topk_spec.h"
#include "test_help.h"

#ifndef DHS_HAVE_CUDA
int main(void)
{
    printf("SKIP: built without CUDA\n");
    return 77;
}
#else
#include <cuda_runtime_api.h>

#include "test_topk_gen.h"

#define CK(x) TH_CUDA_CK(x)

typedef struct bufs {
    int64_t cap_scores, cap_out;
    float *h_sc, *d_sc;
    int32_t *h_slot, *d_slot;
    int32_t *h_rows, *h_locs, *h_rows2, *h_locs2, *h_nan;
    int32_t *d_rows, *d_locs, *d_rows2, *d_locs2, *d_nan;
    int32_t *w_rows, *w_locs;
} bufs;

/* batch queries of n candidates each; shared: one slot table (slot_ld 0);
   nan_q >= 0: query nan_q gets NaNs. Returns candidates compared. */
static int64_t run_case(bufs *b, gen_kind g, int64_t n, int32_t k, int32_t batch, int shared, int nan_q, uint64_t *rng)
{
    int64_t tot = n * batch;
    if (tot > b->cap_scores || (int64_t)k * batch > b->cap_out) {
        printf("case too large\n");
        exit(2);
    }
    for (int32_t q = 0; q < batch; q++) gen_scores(g, b->h_sc + q * n, n, rng);
    int nnan = 0;
    if (nan_q >= 0 && n > 0) {
        nnan = 1 + (int)dhs_rng_below(rng, 3);
        for (int j = 0; j < nnan; j++) b->h_sc[nan_q * n + dhs_rng_below(rng, n)] = j & 1 ? -NAN : NAN;
        nnan = 0;
        for (int64_t i = 0; i < n; i++) nnan += isnan(b->h_sc[nan_q * n + i]) != 0;
    }
    int64_t slots = shared ? n : tot;
    int hit_pct = (int)dhs_rng_below(rng, 101);
    for (int64_t i = 0; i < slots; i++) b->h_slot[i] = dhs_rng_below(rng, 100) < hit_pct ? (int32_t)dhs_rng_below(rng, 1 << 22) : -1;
    if (tot) CK(cudaMemcpy(b->d_sc, b->h_sc, sizeof(float) * (size_t)tot, cudaMemcpyHostToDevice));
    if (slots) CK(cudaMemcpy(b->d_slot, b->h_slot, sizeof(int32_t) * (size_t)slots, cudaMemcpyHostToDevice));
    CK(cudaMemset(b->d_rows, 0x5a, sizeof(int32_t) * (size_t)k * batch));
    CK(cudaMemset(b->d_locs, 0x5a, sizeof(int32_t) * (size_t)k * batch));
    CK(cudaMemset(b->d_nan, 0x5a, sizeof(int32_t) * (size_t)batch));
    int64_t sld = shared ? 0 : n;
    int rc = dhs_cuda_topk_fused(b->d_sc, n, batch, n, k, b->d_slot, sld, b->d_rows, b->d_locs, b->d_nan, NULL);
    CHECKF(rc == 0, "launch: %d", rc);
    /* baseline: plain top-k, then the separate lookup */
    rc = dhs_cuda_topk_fused(b->d_sc, n, batch, n, k, NULL, 0, b->d_rows2, NULL, NULL, NULL);
    CHECKF(rc == 0, "plain launch: %d", rc);
    rc = dhs_cuda_topk_lookup(b->d_rows2, batch, k, b->d_slot, sld, b->d_locs2, NULL);
    CHECKF(rc == 0, "lookup launch: %d", rc);
    CK(cudaDeviceSynchronize());
    size_t ob = sizeof(int32_t) * (size_t)k * batch;
    CK(cudaMemcpy(b->h_rows, b->d_rows, ob, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b->h_locs, b->d_locs, ob, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b->h_rows2, b->d_rows2, ob, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b->h_locs2, b->d_locs2, ob, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b->h_nan, b->d_nan, sizeof(int32_t) * (size_t)batch, cudaMemcpyDeviceToHost));
    for (int32_t q = 0; q < batch; q++) {
        const int32_t *r = b->h_rows + (int64_t)q * k, *l = b->h_locs + (int64_t)q * k;
        const int32_t *r2 = b->h_rows2 + (int64_t)q * k, *l2 = b->h_locs2 + (int64_t)q * k;
        const int32_t *so = b->h_slot + (shared ? 0 : (int64_t)q * n);
        if (q == nan_q && n > 0) {
            CHECKF(b->h_nan[q] == nnan, "%s n %lld k %d q %d: nan_count %d, want %d", gen_name[g], (long long)n, k, q,
                   b->h_nan[q], nnan);
            int32_t badn = 0;
            for (int32_t i = 0; i < k; i++) badn += r[i] != -1 || l[i] != -1 || r2[i] != -1;
            CHECKF(badn == 0, "NaN query: %d entries not -1", badn);
            continue;
        }
        dhs_status st = dhs_topk_fused_ref(b->h_sc + q * n, n, k, so, b->w_rows, b->w_locs);
        CHECK(st == DHS_OK);
        CHECKF(b->h_nan[q] == 0, "q %d: nan_count %d", q, b->h_nan[q]);
        int32_t bad = -1, bad2 = -1;
        for (int32_t i = 0; i < k; i++) {
            if (bad < 0 && (r[i] != b->w_rows[i] || l[i] != b->w_locs[i])) bad = i;
            if (bad2 < 0 && (r2[i] != b->w_rows[i] || l2[i] != b->w_locs[i])) bad2 = i;
        }
        CHECKF(bad < 0, "fused %s n %lld k %d batch %d q %d shared %d: entry %d: row %d loc %d, reference row %d loc %d",
               gen_name[g], (long long)n, k, batch, q, shared, bad, bad < 0 ? 0 : r[bad], bad < 0 ? 0 : l[bad],
               bad < 0 ? 0 : b->w_rows[bad], bad < 0 ? 0 : b->w_locs[bad]);
        CHECKF(bad2 < 0, "plain+lookup %s n %lld k %d batch %d q %d: entry %d: row %d loc %d, reference row %d loc %d",
               gen_name[g], (long long)n, k, batch, q, bad2, bad2 < 0 ? 0 : r2[bad2], bad2 < 0 ? 0 : l2[bad2],
               bad2 < 0 ? 0 : b->w_rows[bad2], bad2 < 0 ? 0 : b->w_locs[bad2]);
    }
    return tot;
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    uint64_t rng = th_seed("test_topk_cuda");
    bufs b = {0};
    b.cap_scores = 1 << 23; /* 8M candidates: 8 queries of 1M */
    b.cap_out = 64 * DHS_TOPK_MAX_K;
    b.h_sc = th_alloc(sizeof(float) * (size_t)b.cap_scores);
    b.h_slot = th_alloc(sizeof(int32_t) * (size_t)b.cap_scores);
    int32_t **hs[] = {&b.h_rows, &b.h_locs, &b.h_rows2, &b.h_locs2};
    int32_t **ds[] = {&b.d_rows, &b.d_locs, &b.d_rows2, &b.d_locs2};
    for (int i = 0; i < 4; i++) {
        *hs[i] = th_alloc(sizeof(int32_t) * (size_t)b.cap_out);
        CK(cudaMalloc((void **)ds[i], sizeof(int32_t) * (size_t)b.cap_out));
    }
    b.h_nan = th_alloc(sizeof(int32_t) * 64);
    b.w_rows = th_alloc(sizeof(int32_t) * DHS_TOPK_MAX_K);
    b.w_locs = th_alloc(sizeof(int32_t) * DHS_TOPK_MAX_K);
    CK(cudaMalloc((void **)&b.d_sc, sizeof(float) * (size_t)b.cap_scores));
    CK(cudaMalloc((void **)&b.d_slot, sizeof(int32_t) * (size_t)b.cap_scores));
    CK(cudaMalloc((void **)&b.d_nan, sizeof(int32_t) * 64));

    int64_t total = 0;
    int cases = 0;
    /* the size compute-sanitizer can run (bench/gpu_volume.sh): every path, smaller inputs */
    const int small = th_scale() < 0.05;
    const int64_t big_n = small ? 70000 : 1 << 20;
    const int n_random = small ? 6 : 60;
    if (small) printf("reduced run (DHS_TEST_SCALE %.3g): large cases at %lld candidates, %d random\n", th_scale(),
                      (long long)big_n, n_random);
    /* boundary sizes for every generator */
    static const int32_t ks[] = {1, 7, 1000, 2048};
    for (int g = 0; g < G_NGEN; g++)
        for (int ki = 0; ki < 4; ki++) {
            int32_t k = ks[ki];
            int64_t ns[] = {0, 1, k - 1, k, k + 1, 2 * k + 3, 4096, 4097, 70000};
            for (int ni = 0; ni < 9; ni++) {
                if (ns[ni] < 0) continue;
                total += run_case(&b, (gen_kind)g, ns[ni], k, 3, ni & 1, -1, &rng);
                cases++;
            }
        }
    /* large n, k = 2048, every generator */
    for (int g = 0; g < G_NGEN; g++) {
        total += run_case(&b, (gen_kind)g, big_n, DHS_TOPK_MAX_K, 2, g & 1, -1, &rng);
        cases++;
    }
    /* a batch of 64 */
    total += run_case(&b, G_UNIFORM, 32768, DHS_TOPK_MAX_K, 64, 0, -1, &rng);
    total += run_case(&b, G_LEVELS, 32768, DHS_TOPK_MAX_K, 64, 1, -1, &rng);
    cases += 2;
    /* NaN queries inside a batch */
    for (int c = 0; c < 8; c++) {
        int64_t n = c < 4 ? 1 + dhs_rng_below(&rng, 3000) : 1 + dhs_rng_below(&rng, small ? big_n : 300000);
        total += run_case(&b, (gen_kind)dhs_rng_below(&rng, G_NGEN), n, DHS_TOPK_MAX_K, 4, c & 1, (int)dhs_rng_below(&rng, 4), &rng);
        cases++;
    }
    /* random */
    for (int c = 0; c < n_random; c++) {
        int64_t n = dhs_rng_below(&rng, 3) == 0 ? dhs_rng_below(&rng, 5000) : dhs_rng_below(&rng, big_n);
        int32_t k = dhs_rng_below(&rng, 2) ? DHS_TOPK_MAX_K : (int32_t)(1 + dhs_rng_below(&rng, DHS_TOPK_MAX_K));
        int32_t batch = 1 + (int32_t)dhs_rng_below(&rng, 4);
        total += run_case(&b, (gen_kind)dhs_rng_below(&rng, G_NGEN), n, k, batch, (int)dhs_rng_below(&rng, 2), -1, &rng);
        cases++;
    }
    /* argument errors: nothing launched */
    CHECK(dhs_cuda_topk_fused(b.d_sc, 10, 1, 10, 0, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1);
    CHECK(dhs_cuda_topk_fused(b.d_sc, 10, 1, 10, DHS_TOPK_MAX_K + 1, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1);
    CHECK(dhs_cuda_topk_fused(b.d_sc, 10, 2, 20, 8, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1); /* ld < n */
    CHECK(dhs_cuda_topk_fused(b.d_sc, 10, 1, 10, 8, b.d_slot, 0, b.d_rows, NULL, NULL, NULL) == -1);
    CHECK(dhs_cuda_topk_fused(NULL, 10, 1, 10, 8, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1);
    CHECK(dhs_cuda_topk_lookup(b.d_rows, 1, 8, NULL, 0, b.d_locs, NULL) == -1);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);

    printf("test_topk_cuda: %d cases, %lld candidates compared\n", cases, (long long)total);
    CHECK(total >= 100000);
    for (int i = 0; i < 4; i++) {
        free(*hs[i]);
        cudaFree(*ds[i]);
    }
    cudaFree(b.d_sc);
    cudaFree(b.d_slot);
    cudaFree(b.d_nan);
    free(b.h_sc);
    free(b.h_slot);
    free(b.h_nan);
    free(b.w_rows);
    free(b.w_locs);
    return th_summary();
}
#endif
