/* test_topk_cuda.c - the CUDA fused top-k + slot lookup (dev/topk.cu)
 * against the CPU reference dhs_topk_fused_ref (itself checked against the
 * reference model's top-k by test_topk.c) on the same inputs: random and
 * adversarial score vectors (test_topk_gen.h), n from 0 to 1M, k from 1 to
 * 2048 (powers of two and not), batches of queries with one slot table each
 * or one shared table (slot_ld 0); the plain top-k (slot_of NULL) followed by
 * the separate lookup kernel must give the same; a query with NaN reports its
 * NaN count and writes -1 rows/locations while its batch neighbours stay
 * exact; launcher argument errors. Per-query candidate counts
 * (dhs_cuda_topk_fused_n) against the CPU twin dhs_topk_fused_ref_batch:
 * counts from 0 to above the bound, skipped queries (untouched), n_add 0/1,
 * NaN inside / just past a count. Rows, order and locations must be equal
 * entry for entry. The split top-k (dhs_cuda_topk_split_n: many blocks per
 * query) runs every case of both forms twice on one workspace (the second call
 * sees what the first left in it) and must equal the fused kernel's output,
 * checked above against the reference, entry for entry, untouched and NaN
 * queries included; tie lists past its capacity (all-equal, 1M uniform) take
 * its one-block fallback.
 *
 * Exits 77 (CTest SKIP_RETURN_CODE, set in CMakeLists.txt) when built without
 * CUDA or when no device is present: it never passes without running. */
#include <stdio.h>

#include "dev/topk_spec.h"
#include "test_help.h"

#ifndef DHS_HAVE_CUDA
TH_MAIN_WITHOUT_CUDA
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
    int32_t *h_nan2, *d_nan2;
    void *ws; /* the split top-k's workspace, zeroed once */
    size_t ws_bytes;
} bufs;

/* the split top-k on the case just run (scores and slots on the device) must
   give b->h_rows / h_locs / h_nan (the fused kernel's, checked against the
   reference) entry for entry; run twice on the same workspace */
static void check_split(bufs *b, const char *what, int64_t n, int32_t k, int32_t batch, const int64_t *d_nof, int64_t n_add,
                        int64_t sld)
{
    size_t ob = sizeof(int32_t) * (size_t)k * batch;
    for (int rep = 0; rep < 2; rep++) {
        CK(cudaMemset(b->d_rows2, 0x5a, ob));
        CK(cudaMemset(b->d_locs2, 0x5a, ob));
        CK(cudaMemset(b->d_nan2, 0x5a, sizeof(int32_t) * (size_t)batch));
        int rc = dhs_cuda_topk_split_n(b->d_sc, n, batch, n, d_nof, n_add, k, b->d_slot, sld, b->d_rows2, b->d_locs2,
                                       b->d_nan2, b->ws, b->ws_bytes, NULL);
        CHECKF(rc == 0, "split launch: %d", rc);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(b->h_rows2, b->d_rows2, ob, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b->h_locs2, b->d_locs2, ob, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b->h_nan2, b->d_nan2, sizeof(int32_t) * (size_t)batch, cudaMemcpyDeviceToHost));
        int64_t bad = -1, badn = -1;
        for (int64_t i = 0; i < (int64_t)k * batch; i++)
            if (bad < 0 && (b->h_rows2[i] != b->h_rows[i] || b->h_locs2[i] != b->h_locs[i])) bad = i;
        for (int32_t q = 0; q < batch; q++)
            if (badn < 0 && b->h_nan2[q] != b->h_nan[q]) badn = q;
        CHECKF(bad < 0, "split (%s, call %d) n %lld k %d batch %d: entry %lld (query %lld): row %d loc %d, fused row %d loc %d",
               what, rep, (long long)n, k, batch, (long long)bad, (long long)(bad < 0 ? 0 : bad / k),
               bad < 0 ? 0 : b->h_rows2[bad], bad < 0 ? 0 : b->h_locs2[bad], bad < 0 ? 0 : b->h_rows[bad],
               bad < 0 ? 0 : b->h_locs[bad]);
        CHECKF(badn < 0, "split (%s, call %d) n %lld k %d: query %lld nan_count %d, fused %d", what, rep, (long long)n, k,
               (long long)badn, badn < 0 ? 0 : b->h_nan2[badn], badn < 0 ? 0 : b->h_nan[badn]);
    }
}

/* dhs_cuda_topk_split_pages on the same case: the rows of split_n, and beside each row its location in
   three sources (table order 2, 0, 1) of random page tables (-1 entries included), q_per_req 1 or 2,
   page_rows 4: every entry as the host computes it; a skipped query's locations untouched */
static void check_pages(bufs *b, const char *what, int64_t n, int32_t k, int32_t batch, const int64_t *d_nof, int64_t n_add,
                        uint64_t *rng)
{
    enum { NS = 3, PR = 4 };
    const int32_t qpr = 1 + (int32_t)(dhs_rng_next(rng) % 2), nreq = (batch + qpr - 1) / qpr;
    const int32_t pstride = (int32_t)(n / PR + 2);
    const int64_t nt = (int64_t)NS * nreq * pstride, no = (int64_t)NS * k * batch;
    int32_t *h_tab = malloc(sizeof(int32_t) * (size_t)nt), *h_loc = malloc(sizeof(int32_t) * (size_t)no), *d_tab = NULL,
            *d_loc = NULL;
    if (!h_tab || !h_loc || cudaMalloc((void **)&d_tab, sizeof(int32_t) * (size_t)nt) != cudaSuccess ||
        cudaMalloc((void **)&d_loc, sizeof(int32_t) * (size_t)no) != cudaSuccess) {
        CHECKF(0, "pages (%s): allocation", what);
        goto out;
    }
    for (int64_t i = 0; i < nt; i++) h_tab[i] = (int32_t)(dhs_rng_next(rng) % 1001) - 1;
    CK(cudaMemcpy(d_tab, h_tab, sizeof(int32_t) * (size_t)nt, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_loc, 0x5a, sizeof(int32_t) * (size_t)no));
    CK(cudaMemset(b->d_rows2, 0x5a, sizeof(int32_t) * (size_t)k * batch));
    dhs_topk_pages pg;
    memset(&pg, 0, sizeof pg);
    pg.tab = d_tab;
    pg.src_stride = (int64_t)nreq * pstride;
    pg.page_stride = pstride;
    pg.page_rows = PR;
    pg.q_per_req = qpr;
    pg.nsrc = NS;
    pg.src[0] = 2, pg.src[1] = 0, pg.src[2] = 1;
    pg.locs = d_loc;
    pg.loc_stride = (int64_t)k * batch;
    int rc = dhs_cuda_topk_split_pages(b->d_sc, n, batch, n, d_nof, n_add, k, &pg, b->d_rows2, b->d_nan2, b->ws, b->ws_bytes,
                                       NULL);
    CHECKF(rc == 0, "pages launch: %d", rc);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(b->h_rows2, b->d_rows2, sizeof(int32_t) * (size_t)k * batch, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_loc, d_loc, sizeof(int32_t) * (size_t)no, cudaMemcpyDeviceToHost));
    int64_t bad = -1, badl = -1, want_bad = 0;
    for (int32_t q = 0; q < batch; q++) {
        const int skipped = b->h_rows2[(int64_t)q * k] == 0x5a5a5a5a;
        for (int32_t i = 0; i < k; i++) {
            const int64_t at = (int64_t)q * k + i;
            const int32_t row = b->h_rows2[at];
            if (bad < 0 && row != b->h_rows[at]) bad = at;
            for (int s = 0; s < NS; s++) {
                int32_t want = 0x5a5a5a5a;
                if (!skipped) {
                    const int32_t e = row < 0 ? -1 : h_tab[pg.src[s] * pg.src_stride + (int64_t)(q / qpr) * pstride + row / PR];
                    want = e < 0 ? -1 : e * PR + row % PR;
                }
                if (badl < 0 && h_loc[s * pg.loc_stride + at] != want) badl = s * pg.loc_stride + at, want_bad = want;
            }
        }
    }
    CHECKF(bad < 0, "pages (%s) n %lld k %d batch %d: row %lld is %d, split_n's %d", what, (long long)n, k, batch,
           (long long)bad, bad < 0 ? 0 : b->h_rows2[bad], bad < 0 ? 0 : b->h_rows[bad]);
    CHECKF(badl < 0, "pages (%s) n %lld k %d batch %d q/req %d: location %lld is %d, want %lld", what, (long long)n, k, batch,
           qpr, (long long)badl, badl < 0 ? 0 : h_loc[badl], (long long)want_bad);
out:
    free(h_tab);
    free(h_loc);
    if (d_tab) cudaFree(d_tab);
    if (d_loc) cudaFree(d_loc);
}

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
    check_split(b, gen_name[g], n, k, batch, NULL, 0, sld);
    check_pages(b, gen_name[g], n, k, batch, NULL, 0, rng);
    return tot;
}

/* per-query candidate counts (dhs_cuda_topk_fused_n) against the CPU twin
   dhs_topk_fused_ref_batch (checked against dhs_ref_topk by test_topk.c):
   `batch` queries over a bound of n, counts 0, 1, k-1, k, k+1, random, n,
   above n (clamped), skipped (< 0: untouched, nan_count 0); n_add 0 or 1
   (the model's last positions); NaN inside some query's count, or just past
   it (ignored). Every output entry is compared, untouched ones included.
   Returns candidates compared. */
static int64_t run_case_n(bufs *b, int64_t n, int32_t k, int32_t batch, int shared, int64_t n_add, int with_nan, uint64_t *rng,
                          int64_t *d_nof)
{
    int64_t tot = n * batch, nof[64];
    if (tot > b->cap_scores || (int64_t)k * batch > b->cap_out || batch > 64) {
        printf("case too large\n");
        exit(2);
    }
    for (int32_t q = 0; q < batch; q++) {
        gen_scores((gen_kind)dhs_rng_below(rng, G_NGEN), b->h_sc + q * n, n, rng);
        int64_t cand[] = {0, 1, k - 1, k, k + 1, (int64_t)dhs_rng_below(rng, (uint64_t)n + 1), n, n + 3, -1, -5};
        int64_t c = cand[dhs_rng_below(rng, 10)];
        nof[q] = c < 0 ? c : c - n_add;
        if (c == 0 && n_add) nof[q] = -1;
    }
    if (with_nan && batch > 1) {
        int64_t n0 = dhs_topk_query_n(nof, n_add, n, 0), n1 = dhs_topk_query_n(nof, n_add, n, 1);
        if (n0 >= 0 && n0 < n) b->h_sc[n0] = NAN;                                  /* past query 0's count */
        if (n1 > 0) b->h_sc[n + (int64_t)dhs_rng_below(rng, (uint64_t)n1)] = -NAN; /* inside query 1's */
    }
    int64_t slots = shared ? n : tot;
    for (int64_t i = 0; i < slots; i++) b->h_slot[i] = dhs_rng_below(rng, 2) ? (int32_t)dhs_rng_below(rng, 1 << 22) : -1;
    if (tot) CK(cudaMemcpy(b->d_sc, b->h_sc, sizeof(float) * (size_t)tot, cudaMemcpyHostToDevice));
    if (slots) CK(cudaMemcpy(b->d_slot, b->h_slot, sizeof(int32_t) * (size_t)slots, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_nof, nof, sizeof(int64_t) * (size_t)batch, cudaMemcpyHostToDevice));
    size_t ob = sizeof(int32_t) * (size_t)k * batch;
    CK(cudaMemset(b->d_rows, 0x5a, ob));
    CK(cudaMemset(b->d_locs, 0x5a, ob));
    CK(cudaMemset(b->d_rows2, 0x5a, ob));
    CK(cudaMemset(b->d_nan, 0x5a, sizeof(int32_t) * (size_t)batch));
    const int64_t sld = shared ? 0 : n;
    int rc = dhs_cuda_topk_fused_n(b->d_sc, n, batch, n, d_nof, n_add, k, b->d_slot, sld, b->d_rows, b->d_locs, b->d_nan, NULL);
    CHECKF(rc == 0, "per-query launch: %d", rc);
    rc = dhs_cuda_topk_fused_n(b->d_sc, n, batch, n, d_nof, n_add, k, NULL, 0, b->d_rows2, NULL, NULL, NULL);
    CHECKF(rc == 0, "per-query plain launch: %d", rc);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(b->h_rows, b->d_rows, ob, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b->h_locs, b->d_locs, ob, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b->h_rows2, b->d_rows2, ob, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b->h_nan, b->d_nan, sizeof(int32_t) * (size_t)batch, cudaMemcpyDeviceToHost));
    /* the CPU twin on the same inputs, outputs pre-filled like the device's */
    int32_t *wr = malloc(ob), *wl = malloc(ob), wn[64];
    if (!wr || !wl) {
        printf("out of memory\n");
        exit(2);
    }
    memset(wr, 0x5a, ob);
    memset(wl, 0x5a, ob);
    memset(wn, 0x5a, sizeof wn);
    CHECK_ST(dhs_topk_fused_ref_batch(b->h_sc, n, batch, n, nof, n_add, k, b->h_slot, sld, wr, wl, wn), DHS_OK);
    int64_t bad = -1, bad2 = -1, badn = -1;
    for (int64_t i = 0; i < (int64_t)k * batch; i++) {
        if (bad < 0 && (b->h_rows[i] != wr[i] || b->h_locs[i] != wl[i])) bad = i;
        if (bad2 < 0 && b->h_rows2[i] != wr[i]) bad2 = i;
    }
    for (int32_t q = 0; q < batch; q++)
        if (badn < 0 && b->h_nan[q] != wn[q]) badn = q;
    CHECKF(bad < 0, "per-query n %lld k %d batch %d n_add %lld shared %d: entry %lld (query %lld, n_q %lld): row %d loc %d, "
           "reference row %d loc %d", (long long)n, k, batch, (long long)n_add, shared, (long long)bad,
           (long long)(bad < 0 ? 0 : bad / k), (long long)(bad < 0 ? 0 : dhs_topk_query_n(nof, n_add, n, (int32_t)(bad / k))),
           bad < 0 ? 0 : b->h_rows[bad], bad < 0 ? 0 : b->h_locs[bad], bad < 0 ? 0 : wr[bad], bad < 0 ? 0 : wl[bad]);
    CHECKF(bad2 < 0, "per-query plain n %lld k %d: entry %lld: row %d, reference %d", (long long)n, k, (long long)bad2,
           bad2 < 0 ? 0 : b->h_rows2[bad2], bad2 < 0 ? 0 : wr[bad2]);
    CHECKF(badn < 0, "per-query n %lld k %d: query %lld nan_count %d, reference %d", (long long)n, k, (long long)badn,
           badn < 0 ? 0 : b->h_nan[badn], badn < 0 ? 0 : wn[badn]);
    free(wr);
    free(wl);
    check_split(b, "per-query", n, k, batch, d_nof, n_add, sld);
    check_pages(b, "per-query", n, k, batch, d_nof, n_add, rng);
    return tot;
}

int main(void)
{
    TH_SKIP_WITHOUT_DEVICE();
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
    b.h_nan2 = th_alloc(sizeof(int32_t) * 64);
    CK(cudaMalloc((void **)&b.d_nan2, sizeof(int32_t) * 64));
    b.ws_bytes = dhs_cuda_topk_split_ws(64);
    CK(cudaMalloc(&b.ws, b.ws_bytes));
    CK(cudaMemset(b.ws, 0, b.ws_bytes));

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
    /* per-query candidate counts */
    int64_t *d_nof = NULL;
    CK(cudaMalloc((void **)&d_nof, sizeof(int64_t) * 64));
    for (int ki = 0; ki < 4; ki++)
        for (int64_t n_add = 0; n_add < 2; n_add++) {
            const int32_t k = ks[ki];
            const int64_t nb[] = {0, 1, k - 1, k, k + 1, 2 * k + 3, 4097, 70000};
            for (int ni = 0; ni < 8; ni++) {
                if (nb[ni] < 0) continue;
                total += run_case_n(&b, nb[ni], k, 8, ni & 1, n_add, ni % 3 == 0, &rng, d_nof);
                cases++;
            }
        }
    total += run_case_n(&b, big_n, DHS_TOPK_MAX_K, 4, 0, 1, 1, &rng, d_nof); /* the model's form: last positions */
    total += run_case_n(&b, 32768, DHS_TOPK_MAX_K, 64, 1, 0, 1, &rng, d_nof);
    cases += 2;
    for (int c = 0; c < n_random / 2; c++) {
        int64_t n = dhs_rng_below(&rng, 3) == 0 ? dhs_rng_below(&rng, 5000) : dhs_rng_below(&rng, small ? big_n : 300000);
        int32_t k = dhs_rng_below(&rng, 2) ? DHS_TOPK_MAX_K : (int32_t)(1 + dhs_rng_below(&rng, DHS_TOPK_MAX_K));
        int32_t batch = 1 + (int32_t)dhs_rng_below(&rng, 8);
        total += run_case_n(&b, n, k, batch, (int)dhs_rng_below(&rng, 2), (int64_t)dhs_rng_below(&rng, 2),
                            (int)dhs_rng_below(&rng, 2), &rng, d_nof);
        cases++;
    }
    CHECK(dhs_cuda_topk_fused_n(b.d_sc, 10, 1, 10, d_nof, -1, 8, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1); /* n_add < 0 */
    CHECK(dhs_cuda_topk_fused_n(b.d_sc, 10, 1, 10, d_nof, 0, DHS_TOPK_MAX_K + 1, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1);
    cudaFree(d_nof);
    /* argument errors: nothing launched */
    CHECK(dhs_cuda_topk_fused(b.d_sc, 10, 1, 10, 0, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1);
    CHECK(dhs_cuda_topk_fused(b.d_sc, 10, 1, 10, DHS_TOPK_MAX_K + 1, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1);
    CHECK(dhs_cuda_topk_fused(b.d_sc, 10, 2, 20, 8, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1); /* ld < n */
    CHECK(dhs_cuda_topk_fused(b.d_sc, 10, 1, 10, 8, b.d_slot, 0, b.d_rows, NULL, NULL, NULL) == -1);
    CHECK(dhs_cuda_topk_fused(NULL, 10, 1, 10, 8, NULL, 0, b.d_rows, NULL, NULL, NULL) == -1);
    CHECK(dhs_cuda_topk_lookup(b.d_rows, 1, 8, NULL, 0, b.d_locs, NULL) == -1);
    CHECK(dhs_cuda_topk_split_n(b.d_sc, 10, 1, 10, NULL, 0, 8, NULL, 0, b.d_rows, NULL, NULL, NULL, b.ws_bytes, NULL) == -1);
    CHECK(dhs_cuda_topk_split_n(b.d_sc, 10, 2, 10, NULL, 0, 8, NULL, 0, b.d_rows, NULL, NULL, b.ws,
                                dhs_cuda_topk_split_ws(2) - 1, NULL) == -1);
    CHECK(dhs_cuda_topk_split_n(b.d_sc, 10, 1, 10, NULL, 0, 8, NULL, 0, b.d_rows, NULL, NULL, (char *)b.ws + 8, b.ws_bytes,
                                NULL) == -1);
    CHECK(dhs_cuda_topk_split_n(b.d_sc, 10, 1, 10, NULL, -1, 8, NULL, 0, b.d_rows, NULL, NULL, b.ws, b.ws_bytes, NULL) == -1);
    CHECK(dhs_cuda_topk_split_n(b.d_sc, 10, 1, 10, NULL, 0, 0, NULL, 0, b.d_rows, NULL, NULL, b.ws, b.ws_bytes, NULL) == -1);
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
    cudaFree(b.d_nan2);
    cudaFree(b.ws);
    free(b.h_nan2);
    free(b.h_sc);
    free(b.h_slot);
    free(b.h_nan);
    free(b.w_rows);
    free(b.w_locs);
    return th_summary();
}
#endif
