/* topk.c - CPU reference of the fused top-k + hot-slot lookup (topk_spec.h).
 *
 * MSD radix select over the 64-bit candidate keys, the same algorithm as the
 * CUDA kernel but written independently of the reference model's heap
 * (model/numerics.c), so tests/dev/test_topk.c compares two implementations:
 *   1. keys of all n candidates (NaN anywhere -> DHS_ERR_INVALID_ARG);
 *   2. 8 passes of 8-bit digits, most significant first: a 256-bin histogram
 *      of the keys still undecided; keys whose digit is above the k-th key's
 *      digit are selected, those below dropped, those equal stay undecided;
 *      keys are distinct, so after the last pass exactly k are selected;
 *   3. the selected keys sorted descending (= the reference order), then the
 *      slot lookup for the k selected positions only. */
#include <stdlib.h>

#include "dev/topk_spec.h"

static int key_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

dhs_status dhs_topk_fused_ref(const float *scores, int64_t n, int32_t k, const int32_t *slot_of, int32_t *out_rows,
                              int32_t *out_locs)
{
    if (k < 1 || n < 0 || n > INT32_MAX || !out_rows || (n > 0 && !scores)) return DHS_ERR_INVALID_ARG;
    for (int64_t i = 0; i < n; i++)
        if (dhs_topk_is_nan_bits(dhs_topk_f2u(scores[i]))) return DHS_ERR_INVALID_ARG;
    int32_t cnt = n < k ? (int32_t)n : k;
    uint64_t *und = malloc(sizeof(uint64_t) * (size_t)(n + cnt + 1));
    if (!und) return DHS_ERR_NOMEM;
    uint64_t *sel = und + n;
    int64_t m = n;  /* undecided keys: und[0..m-1] */
    int32_t ns = 0; /* selected so far: sel[0..ns-1] */
    for (int64_t i = 0; i < n; i++) und[i] = dhs_topk_key(scores[i], (uint32_t)i);
    if (n <= k) {
        for (int64_t i = 0; i < n; i++) sel[ns++] = und[i];
        m = 0;
    }
    for (int shift = 56; m > 0 && ns < cnt; shift -= 8) {
        int64_t hist[256] = {0};
        for (int64_t i = 0; i < m; i++) hist[(und[i] >> shift) & 255]++;
        int64_t rem = cnt - ns, above = 0;
        int d = 255;
        while (above + hist[d] < rem) above += hist[d--]; /* d >= 0: m >= rem */
        int64_t w = 0;
        for (int64_t i = 0; i < m; i++) {
            int dig = (int)((und[i] >> shift) & 255);
            if (dig > d) sel[ns++] = und[i];
            else if (dig == d) und[w++] = und[i];
        }
        m = w;
        if (above + m == rem || shift == 0) { /* every undecided key is needed */
            for (int64_t i = 0; i < m; i++) sel[ns++] = und[i];
            m = 0;
        }
    }
    qsort(sel, (size_t)ns, sizeof *sel, key_desc);
    for (int32_t i = 0; i < ns; i++) {
        uint32_t pos = dhs_topk_key_pos(sel[i]);
        out_rows[i] = (int32_t)pos;
        if (out_locs) out_locs[i] = slot_of ? slot_of[pos] : -1;
    }
    for (int32_t i = ns; i < k; i++) {
        out_rows[i] = -1;
        if (out_locs) out_locs[i] = -1;
    }
    free(und);
    return DHS_OK;
}

dhs_status dhs_topk_fused_ref_batch(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of,
                                    int64_t n_add, int32_t k, const int32_t *slot_of, int64_t slot_ld, int32_t *out_rows,
                                    int32_t *out_locs, int32_t *nan_count)
{
    if (batch < 0 || n < 0 || n > INT32_MAX || k < 1 || k > DHS_TOPK_MAX_K || !out_rows || (n > 0 && !scores) ||
        (slot_of && !out_locs) || score_ld < (batch > 1 ? n : 0) || slot_ld < 0 || n_add < 0)
        return DHS_ERR_INVALID_ARG;
    for (int32_t q = 0; q < batch; q++) {
        const int64_t nq = dhs_topk_query_n(n_of, n_add, n, q);
        int32_t *orow = out_rows + (int64_t)q * k;
        int32_t *oloc = slot_of ? out_locs + (int64_t)q * k : NULL;
        if (nq < 0) { /* skipped: outputs untouched */
            if (nan_count) nan_count[q] = 0;
            continue;
        }
        const float *s = nq > 0 ? scores + (int64_t)q * score_ld : NULL;
        int32_t nan = 0;
        for (int64_t i = 0; i < nq; i++) nan += dhs_topk_is_nan_bits(dhs_topk_f2u(s[i]));
        if (nan_count) nan_count[q] = nan;
        if (nan) {
            for (int32_t i = 0; i < k; i++) {
                orow[i] = -1;
                if (oloc) oloc[i] = -1;
            }
            continue;
        }
        dhs_status st = dhs_topk_fused_ref(s, nq, k, slot_of ? slot_of + (int64_t)q * slot_ld : NULL, orow, oloc);
        if (st != DHS_OK) return st;
    }
    return DHS_OK;
}
