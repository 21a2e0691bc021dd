/* topk_spec.h - the fused top-k + hot-slot lookup (FlashOffloading "LIM"):
 * the key every implementation orders by, shared by the CPU reference
 * (dev/topk.c, gcc) and the CUDA kernel (dev/topk.cu, nvcc).
 *
 * Ordering (the reference model's rule, model/numerics.c dhs_ref_topk):
 *   higher score first; equal scores: lower position first. Scores compare as
 *   IEEE floats, so -0.0 == +0.0 (both map to the key of +0.0 and the tie
 *   goes to the lower position). -inf < every finite < +inf. NaN has no place
 *   in that order: a query with any NaN candidate is rejected
 *   (DHS_ERR_INVALID_ARG from the CPU reference, a per-query NaN count from
 *   the kernel, whose output rows are then all -1).
 *
 * Score key (32 bits, unsigned order == float order): after -0 -> +0,
 *   u = bits(score); key = sign ? ~u : u | 0x80000000.
 *   -inf -> 0x007fffff, -0/+0 -> 0x80000000, +inf -> 0xff800000; no finite or
 *   infinite score maps to 0, which is kept for "NaN / padding".
 * Candidate key (64 bits): score_key << 32 | (0xffffffff - position).
 *   Larger key = better candidate, exactly the reference rule; every key of one
 *   query is distinct (positions differ), so "the k largest keys" is one set
 *   and sorting keys descending is the reference order. Identical to
 *   dhs_ref_topk_key (tests check it bit for bit).
 * Slot value: NOT packed into the key. It does not take part in the order, so
 *   it is looked up only once a candidate is selected: the kernel reads
 *   slot_of[pos] for the k selected positions at the end of the same kernel
 *   (after its in-shared-memory sort; k reads, not n, and no second launch),
 *   and the CPU reference does the same after its selection. Packing it into
 *   the key would either steal position bits (a 64-bit key holds 32 score
 *   bits + 32 position bits; 1M candidates need 20 of them and a 1M-token slot
 *   index another 20) or force 96/128-bit compares in every radix pass over
 *   all n candidates; and reading slot_of for every candidate before the
 *   selection (the seed's pre-pack) costs n reads where k suffice.
 */
#ifndef DHS_TOPK_SPEC_H
#define DHS_TOPK_SPEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dhs.h"

#ifndef DHS_HD
#if defined(__CUDACC__)
#define DHS_HD __host__ __device__
#else
#define DHS_HD
#endif
#endif

/* the kernel's selection width: k <= this (DeepSeek-V3.2 / GLM-5.x index top-k) */
#define DHS_TOPK_MAX_K 2048
/* the key no valid candidate has: NaN's score key and padding */
#define DHS_TOPK_KEY_NONE 0ull

static inline DHS_HD uint32_t dhs_topk_f2u(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

/* 1 when the bits are a NaN (exponent all ones, mantissa non-zero) */
static inline DHS_HD int dhs_topk_is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

/* Order-preserving score key; 0 for NaN (rejected by every caller before it could be compared). */
static inline DHS_HD uint32_t dhs_topk_score_key(float score)
{
    uint32_t u = dhs_topk_f2u(score);
    if (dhs_topk_is_nan_bits(u)) return 0u;
    if (u == 0x80000000u) u = 0u; /* -0.0 -> +0.0: they compare equal */
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* 64-bit candidate key: larger = selected earlier (position < 2^32) */
static inline DHS_HD uint64_t dhs_topk_key(float score, uint32_t pos)
{
    return ((uint64_t)dhs_topk_score_key(score) << 32) | (uint64_t)(0xffffffffu - pos);
}

static inline DHS_HD uint32_t dhs_topk_key_pos(uint64_t key) { return 0xffffffffu - (uint32_t)(key & 0xffffffffu); }
static inline DHS_HD uint32_t dhs_topk_key_score(uint64_t key) { return (uint32_t)(key >> 32); }

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ CPU reference
 * Top-k of scores[0..n-1] by the rule above, with the hot-slot lookup:
 *   out_rows[i] = position of the i-th best candidate (i < min(n, k)), -1 after;
 *   out_locs[i] = slot_of[out_rows[i]] (a slot >= 0 = hit, -1 = miss), -1 after.
 * slot_of has n entries (NULL: every candidate misses). out_locs may be NULL
 * (plain top-k). Returns DHS_ERR_INVALID_ARG for NULL scores/out_rows with
 * n > 0, k < 1, n < 0 or n > 2^31-1, or a NaN score (outputs untouched then),
 * DHS_ERR_NOMEM when its scratch (8 bytes per candidate) cannot be allocated.
 * Selection is an MSD radix select over the 64-bit keys (the kernel's
 * algorithm, independent of the reference model's heap). */
dhs_status dhs_topk_fused_ref(const float *scores, int64_t n, int32_t k, const int32_t *slot_of, int32_t *out_rows,
                              int32_t *out_locs);

/* ------------------------------------------------------------------ per-query candidate counts
 * The batched form (the kernel's semantics; dhs_topk_fused_ref_batch is its
 * CPU twin): query q < batch reads scores + q*score_ld and has n_q candidates:
 *   n_of == NULL:   n_q = n for every query (dhs_cuda_topk_fused);
 *   n_of[q] < 0:    query q is SKIPPED: its out_rows / out_locs entries are
 *                   left untouched, nan_count[q] = 0;
 *   otherwise:      n_q = min(n_of[q] + n_add, n).
 * n (<= 2^31-1) bounds every query's candidates: the scores (and slot tables)
 * cover n entries per query. n_add >= 0 lets a caller pass either counts
 * (n_add = 0; n_of[q] = 0 is a query with no candidate: k x -1) or last
 * positions (n_add = 1: candidates 0..last[q], last < 0 = no query - the
 * reference model's pos[] convention, so its position buffer is used as is).
 * A query with n_q < k yields its n_q candidates in order, then -1 padding,
 * exactly like dhs_ref_topk(scores, n_q, k). NaN: nan_count[q] = the query's
 * NaN candidates (within its n_q), and all its rows (and locs) are -1.
 * slot_of NULL: no lookup, out_locs untouched; else out_locs[q*k+i] =
 * slot_of[q*slot_ld + row] (-1 for padding). Returns DHS_ERR_INVALID_ARG for
 * the launcher's argument errors (below), DHS_ERR_NOMEM for scratch. */
dhs_status dhs_topk_fused_ref_batch(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of,
                                    int64_t n_add, int32_t k, const int32_t *slot_of, int64_t slot_ld, int32_t *out_rows,
                                    int32_t *out_locs, int32_t *nan_count);

/* n_q of query q (the rule above; -1 = skipped), shared by both implementations */
static inline DHS_HD int64_t dhs_topk_query_n(const int64_t *n_of, int64_t n_add, int64_t n, int32_t q)
{
    if (!n_of) return n;
    const int64_t v = n_of[q];
    if (v < 0) return -1;
    return v > n - n_add ? n : v + n_add;
}

/* ------------------------------------------------------------------ CUDA launchers
 * (dev/topk.cu; present only in a DHS_CUDA build). Device pointers; stream
 * is a cudaStream_t (NULL = the legacy stream). Return a cudaError_t value
 * (0 = launched), or -1 for bad arguments (nothing launched).
 *
 * dhs_cuda_topk_fused: one thread block per query q < batch:
 *   scores + q*score_ld: n candidates (n <= 2^31-1); slot_of + q*slot_ld: n slots
 *   (slot_ld 0 = one table for all queries; slot_of NULL = lookup skipped,
 *   out_locs untouched: the plain top-k); out_rows/out_locs + q*k; 1 <= k <=
 *   DHS_TOPK_MAX_K. nan_count[q] (may be NULL) = NaN candidates of query q;
 *   a query with NaN writes -1 rows and -1 locs.
 * dhs_cuda_topk_fused_n: the same with per-query candidate counts (n_of, a
 *   device array of batch int64, and n_add: the rule of dhs_topk_fused_ref_batch
 *   above; n_of NULL = dhs_cuda_topk_fused). n_add < 0 is an argument error.
 *   Launch only (no allocation, no synchronisation): graph-capturable.
 * dhs_cuda_topk_lookup: the separate-lookup baseline: locs[q*k+i] =
 *   rows[q*k+i] < 0 ? -1 : slot_of[q*slot_ld + rows[q*k+i]]. */
int dhs_cuda_topk_fused(const float *scores, int64_t score_ld, int32_t batch, int64_t n, int32_t k, const int32_t *slot_of,
                        int64_t slot_ld, int32_t *out_rows, int32_t *out_locs, int32_t *nan_count, void *stream);
int dhs_cuda_topk_fused_n(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of, int64_t n_add,
                          int32_t k, const int32_t *slot_of, int64_t slot_ld, int32_t *out_rows, int32_t *out_locs,
                          int32_t *nan_count, void *stream);
/* dhs_cuda_topk_split_n: dhs_cuda_topk_fused_n's semantics and output, bit for
 *   bit, with each query's candidates spread over many blocks (chunks of 4096)
 *   instead of one block per query: three launches, every score read twice
 *   (dev/topk.cu "split top-k"). It needs a workspace of
 *   dhs_cuda_topk_split_ws(batch) bytes (about 164 KiB per query), 16-byte
 *   aligned, ZEROED before its first use (cudaMemset); every call leaves it
 *   zero again, so no per-call memset and the launches can be graph-captured.
 *   Query q's part of it sits at the same offset in every call, so a
 *   workspace of dhs_cuda_topk_split_ws(B) serves calls of any batch <= B in
 *   any order (the model's batch changes from round to round).
 *   One workspace serves one call at a time (not two streams at once); a call
 *   that fails on the device leaves it undefined (zero it again). batch <=
 *   65535. Returns -1 for bad arguments (those of dhs_cuda_topk_fused_n, a NULL,
 *   misaligned or short workspace), else a cudaError_t value. */
size_t dhs_cuda_topk_split_ws(int32_t batch);
int dhs_cuda_topk_split_n(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of, int64_t n_add,
                          int32_t k, const int32_t *slot_of, int64_t slot_ld, int32_t *out_rows, int32_t *out_locs,
                          int32_t *nan_count, void *ws, size_t ws_bytes, void *stream);
int dhs_cuda_topk_lookup(const int32_t *rows, int32_t batch, int32_t k, const int32_t *slot_of, int64_t slot_ld,
                         int32_t *locs, void *stream);
/* The page-table lookup fused into the split top-k (dhs_cuda_topk_split_pages): beside query q's selected
 * row i (row = out_rows[q * k + i]), the location of that row in each of nsrc sources, from page tables in
 * the form of dhs_round_page_tables_device (include/dhs.h):
 *   locs[s * loc_stride + q * k + i] = row < 0 ? -1 : e < 0 ? -1 : e * page_rows + row % page_rows,
 *   e = tab[src[s] * src_stride + (q / q_per_req) * page_stride + row / page_rows]
 * (q_per_req queries per request: a request's queries are consecutive). A round the library says cannot
 * miss has e >= 0 for every row a selection names, so these are the locations the direct resolve would
 * give, or other copies of the same rows. */
#define DHS_TOPK_PAGES_MAX_SRC 16
typedef struct dhs_topk_pages {
    const int32_t *tab;
    int64_t src_stride;
    int32_t page_stride, page_rows, q_per_req, nsrc;
    int32_t src[DHS_TOPK_PAGES_MAX_SRC];
    int32_t *locs;
    int64_t loc_stride;
} dhs_topk_pages;
/* dhs_cuda_topk_split_n (no slot lookup) with the page-table lookup of *pg (copied at the call: graph
 *   capturable); -1 for bad arguments (those of dhs_cuda_topk_split_n, pg NULL, nsrc outside 1..16, a NULL
 *   table or locs, page_rows or q_per_req < 1, a negative stride) */
int dhs_cuda_topk_split_pages(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of,
                              int64_t n_add, int32_t k, const dhs_topk_pages *pg, int32_t *out_rows, int32_t *nan_count,
                              void *ws, size_t ws_bytes, void *stream);
#ifdef __cplusplus
}
#endif

#endif
