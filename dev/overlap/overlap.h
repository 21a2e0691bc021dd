/*
 * overlap.h - the reference model's sparse attention split around the miss
 * copy (issue 14, docs/FLASHOFFLOAD.md §3): the C reference of the CUDA
 * kernels in dev/overlap/overlap.cu, which the tests compare with.
 *
 * One step: nq queries, each with nh heads (queries [nq][nh][576], RoPE
 * applied) and k located entries loc[q][e] (a row index into the query's
 * base, -1 = padding). miss[q][e] != 0 marks an entry whose row is copied
 * from host memory in this step (a miss): before the copy ends its bytes are
 * not valid. Rows are the model's 656-byte rows (docs/MODEL.md).
 *
 *   whole (copy-then-attend)   every score, then per head: max, exp, sum and
 *                              weighted V sum in entry order, times 1/sum
 *                              (the single-pass softmax; the model's
 *                              dhs_ref_attention is split-K in chunks of
 *                              DHS_REF_ATT_CHUNK, equal only when nv <= 32)
 *   exact overlap              phase A (during the copy): the scores of the
 *                              hits; phase B (after): the scores of the misses,
 *                              then the same reduction as whole. Every score is
 *                              the same function of (query, row) and the
 *                              reduction is the same code: byte-identical.
 *   fast overlap               phase A: scores of the hits and flash partials
 *                              (max m, sum l, unnormalised accumulator) over
 *                              the hits of each chunk of `chunk` entries;
 *                              phase B: the same over the misses, then the
 *                              online-softmax merge of the 2*C partials in the
 *                              order (hits, chunk 0..C-1), (misses, 0..C-1).
 *                              Not byte-identical: see DHS_OV_FAST_TOL.
 * An output of a query/head with no valid entry is 0.
 *
 * Numerics: dhs_ref_dot_fma / dhs_ref_row_decode / dhs_ref_expf and the fused
 * value and merge sums of dhs_ref_attention (fmaf; numerics.c, model.c);
 * the CUDA kernels do the same IEEE operations in the same order (fast mode
 * included), so GPU == CPU bit for bit when exp_portable = 1.
 */
#ifndef DHS_REF_OVERLAP_H
#define DHS_REF_OVERLAP_H

#include <stdint.h>

#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DHS_OV_MAX_HEADS 16 /* heads per query (one thread holds 4 heads' accumulators) */
#define DHS_OV_MAX_K 2048   /* entries per query */
#define DHS_OV_DV 512       /* values per head: the latent (NoPE) part of a row */
#define DHS_OV_LAT 576      /* query / row length */
#define DHS_OV_ROW 656      /* row bytes */

/* Documented bound of fast mode (docs/FLASHOFFLOAD.md §3): for every output
   value of a query with n valid entries,
       |fast - exact| <= (n + 8) * DHS_OV_FAST_TOL_UNIT * vmax
   where vmax is the largest |value| of the query's valid rows' latents (each
   output is a convex combination of them). UNIT = 2^-23 = 2u: both modes sum
   up to n non-negative terms in fp32 (first-order error <= (n-1)u of the sum
   each); k = 2048 gives 2.4e-4 * vmax. The tests print the measured maxima. */
#define DHS_OV_FAST_TOL_UNIT 1.1920928955078125e-07
static inline double dhs_ov_fast_tol(int32_t n_valid) { return (double)(n_valid + 8) * DHS_OV_FAST_TOL_UNIT; }

enum { DHS_OV_ALL = 0, DHS_OV_HITS = 1, DHS_OV_MISSES = 2 }; /* entry sets */
enum { DHS_OV_WHOLE = 0, DHS_OV_EXACT = 1, DHS_OV_FAST = 2 }; /* modes */

typedef struct dhs_ov_shape {
    int32_t nq;           /* queries (>= 0) */
    int32_t nh;           /* heads, 1..DHS_OV_MAX_HEADS */
    int32_t k;            /* entries per query, 1..DHS_OV_MAX_K */
    int32_t chunk;        /* fast mode: entries per partial, 1..k */
    float att_scale;      /* score = dot(q, row) * att_scale (the model: 1/sqrt(576)) */
    int32_t exp_portable; /* 1: dhs_ref_expf (GPU == CPU bitwise); 0: expf */
} dhs_ov_shape;

/* The buffers of one step. Host memory for the C functions, device memory
   (base: a device array of device pointers) for the CUDA launchers. */
typedef struct dhs_ov_args {
    const float *q;              /* [nq][nh][576] */
    const uint8_t *const *base;  /* [nq] row 0 of each query's pool */
    const int32_t *loc;          /* [nq][k] row index or -1; row r at base[q] + r * 656 (64-bit) */
    const uint8_t *miss;         /* [nq][k] nonzero: the row arrives with the copy; NULL: no misses */
    const float *lut;            /* CUDA only: [256] FP8 E4M3 decodes (dhs_ref_fp8_table) */
    float *scores;               /* scratch [nq][nh][k] */
    float *pm, *pl;              /* fast scratch [nq][2][C][nh]: partial max, sum */
    float *pacc;                 /* fast scratch [nq][2][C][nh][512]: partial accumulators */
    float *out;                  /* [nq][nh][512] */
} dhs_ov_args;

/* NULL when valid, else what is wrong */
const char *dhs_ov_shape_check(const dhs_ov_shape *s);
/* C = ceil(k / chunk) partials per set */
int32_t dhs_ov_chunks(const dhs_ov_shape *s);
/* element counts of the scratch buffers */
int64_t dhs_ov_scores_len(const dhs_ov_shape *s);
int64_t dhs_ov_pml_len(const dhs_ov_shape *s);  /* each of pm, pl */
int64_t dhs_ov_pacc_len(const dhs_ov_shape *s);

/* does entry (q, e) belong to set `which`? (loc >= 0 and the hit/miss filter) */
static inline int dhs_ov_in_set(const dhs_ov_args *a, int32_t k, int32_t q, int32_t e, int which)
{
    int64_t i = (int64_t)q * k + e;
    if (a->loc[i] < 0) return 0;
    if (which == DHS_OV_ALL) return 1;
    int m = a->miss ? a->miss[i] != 0 : 0;
    return which == DHS_OV_MISSES ? m : !m;
}

/* ---- the C reference, piece by piece (rows read through a->base) */
/* scores of set `which`: scores[q][h][e] = dhs_ref_dot(q_h, row, 576) * att_scale; others untouched */
void dhs_ov_scores_ref(const dhs_ov_shape *s, int which, const dhs_ov_args *a);
/* the exact reduction over every valid entry, from a->scores, into a->out */
dhs_status dhs_ov_reduce_ref(const dhs_ov_shape *s, const dhs_ov_args *a);
/* fast mode: partials of set `which` (HITS -> set 0, MISSES -> set 1) from a->scores */
dhs_status dhs_ov_partial_ref(const dhs_ov_shape *s, int which, const dhs_ov_args *a);
/* fast mode: merge of the 2*C partials into a->out */
dhs_status dhs_ov_merge_ref(const dhs_ov_shape *s, const dhs_ov_args *a);

/* ---- whole steps. a->base: the pools once the copy ended; base_before: the
   same pools as phase A sees them (the misses' rows not yet valid). */
dhs_status dhs_ov_attend_ref(const dhs_ov_shape *s, const dhs_ov_args *a); /* whole (copy-then-attend) */
/* mode DHS_OV_EXACT or DHS_OV_FAST; DHS_OV_WHOLE = dhs_ov_attend_ref */
dhs_status dhs_ov_overlap_ref(const dhs_ov_shape *s, int mode, const uint8_t *const *base_before,
                              const dhs_ov_args *a);

#ifdef __cplusplus
}
#endif
#endif
