/*
 * mla_mh.h - multi-head sparse MLA decode attention (DeepSeek-V3.2 / GLM-5.3
 * style): every query head attends over the same k selected 656-byte rows
 * (docs/MODEL.md "Row format": 512 FP8 E4M3 codes, 4 fp32 tile scales, 64 bf16
 * RoPE values), 576-wide keys, 512-wide values (the latent itself).
 *
 * Two implementations of one algorithm:
 *   dhs_mla_mh_ref     the CPU specification (model/mla_mh.c), host pointers;
 *   dhs_mla_mh_attend  the GPU kernel (model/mla_mh.cu, tensor cores), device
 *                      pointers; without CUDA a stub returning DHS_ERR_UNSUPPORTED.
 * They agree within a tolerance (what differs: dhs_mla_mh_attend below).
 *
 * The algorithm (all float arithmetic, in this order):
 *   K[j] = bf16_rne(e4m3(code_j) * scale[j/128]) for j < 512 (the product in
 *          fp32, rounded to bf16, back to float); K[512+j] = RoPE bf16 value j;
 *          V = K[0..512). Q = the bf16 inputs decoded.
 *   c    = sm_scale * 1.4426950408889634f (log2 e), in fp32.
 *   Per query qi with nv = nv[qi] > 0, head h, split s (dhs_mla_mh_split_tiles):
 *     m = -inf, l = 0, o[512] = 0; per tile of 64 rows of the split (the last
 *     tile of the query may be partial):
 *       s_i   = dot(Q_h, K_i, 576) * c          (fp32 accumulation, fixed order:
 *               the spec uses dhs_ref_dot's 8 lanes; the kernel its own)
 *       tmax  = fmaxf over the tile's s_i (from -inf; a NaN score is ignored
 *               here and propagates through p_i)
 *       m_new = fmaxf(m, tmax); mu = m_new == -inf ? 0 : m_new
 *       alpha = m == -inf ? 0 : exp2f(m - mu)
 *       p_i   = bf16_rne(exp2f(s_i - mu))        (encode, then decode)
 *       l     = l * alpha + (p_0 + p_1 + ...)    (tile sum in row order)
 *       o[j]  = o[j] * alpha + (p_0 V_0[j] + p_1 V_1[j] + ...)   (row order)
 *       m     = m_new
 *     the split's partial is (m, l, o); a split with no tiles: (-inf, 0, 0).
 *   Combine of partials (m_s, l_s, o_s) in order: M = fmaxf over the m_s;
 *     w_s = m_s == -inf ? 0 : exp2f(m_s - M); L = sum_s w_s l_s;
 *     O[j] = sum_s w_s o_s[j]: the combined partial is (M, L, O).
 *   Without clusters (cluster 0 or 1) the splits' partials are combined, and
 *   out[qi][h][j] = O[j] / L. With clusters of cs splits (cluster = cs >= 2),
 *   the partials of splits [c cs, (c+1) cs) are combined into cluster c's
 *   partial first, then the splits / cs clusters' partials are combined the
 *   same way, and out = O / L; when cluster == splits the one cluster's
 *   partial gives out = O / L directly: the same as without clusters.
 *   NaN inputs propagate as fp32 arithmetic propagates them.
 *
 * The work decomposition the kernel uses: one block per (query, group of 64
 * heads, split); a split owns a contiguous range of 64-row tiles of the query's
 * valid entries (dhs_mla_mh_split_tiles); the partials (m, l, o) of the splits
 * are combined afterwards, by a second kernel; or, with clusters (sm_90), the
 * cs blocks of a cluster combine their splits in their shared memory (each
 * reads the others' through the cluster's distributed shared memory) and only
 * the clusters' partials go through the workspace, none when one cluster holds
 * all of a query's splits. The split count and cluster size are
 * dhs_mla_mh_plan's (dhs_mla_mh_splits without clusters).
 */
#ifndef DHS_MODEL_MLA_MH_H
#define DHS_MODEL_MLA_MH_H

#include <stdint.h>

#include "dhs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DHS_MLA_DQK 576   /* 512 latent + 64 RoPE */
#define DHS_MLA_DV 512
#define DHS_MLA_TILE 64   /* rows per tile */
#define DHS_MLA_HG 64     /* heads per block (one head group) */
#define DHS_MLA_MAXK 2048 /* entries per query */
#define DHS_MLA_MAX_HEADS 128
#define DHS_MLA_MAX_SPLITS 32
#define DHS_MLA_MAX_CLUSTER 16 /* blocks per cluster (more than 8: the GPU's non-portable sizes) */
#define DHS_MLA_PART_FEW 8     /* dhs_mla_mh_plan: partials per query it need not cut further */
#define DHS_MLA_ROW_BYTES 656 /* = DHS_REF_ROW_BYTES */
#define DHS_MLA_LOG2E 1.4426950408889634f

typedef struct {
    int32_t nq;       /* queries (0: nothing to do) */
    int32_t n_heads;  /* 64 or 128 (a multiple of DHS_MLA_HG, at most 128) */
    int32_t k;        /* entries per query: the stride of loc, 1..DHS_MLA_MAXK */
    int32_t splits;   /* row splits per query, 1..32 (dhs_mla_mh_splits) */
    float sm_scale;   /* softmax scale, finite and > 0 */
    int32_t cluster;  /* 0 or 1: no clusters; 2..16 dividing splits: splits per cluster */
} dhs_mla_mh_desc;

/* Argument check shared by the CPU spec and the GPU launcher: DHS_OK, or
   DHS_ERR_INVALID_ARG for d NULL, nq < 0, n_heads not 64 or 128, splits
   outside 1..32, k outside 1..2048, sm_scale not finite or <= 0, cluster
   outside 0..16 or (>= 2 and) not dividing splits. */
dhs_status dhs_mla_mh_check(const dhs_mla_mh_desc *d);

/* The split count the kernel uses for nq queries of up to k rows on n_sm SMs
   (one block of 64 heads per SM): fit = the most splits whose blocks
   (nq * (n_heads/64) * splits) stay within one wave of n_sm, clamped to
   [1, min(32, ceil(k/64))]; then the fewest splits whose longest split has
   as few tiles as with fit (fewer partials for the same time). A second wave
   would double the time for a few blocks. Deterministic function of its
   arguments only; nq, n_heads, k or n_sm <= 0 give 1. */
int32_t dhs_mla_mh_splits(int32_t nq, int32_t n_heads, int32_t k, int32_t n_sm);

/* The split count and cluster size for nq queries of up to k rows on n_sm
   SMs, where fit[cs] (cs = 1..16) is how many clusters of cs blocks of the
   kernel the GPU holds at once (dhs_mla_mh_cluster_fit; 0: none) and fit NULL
   means no clusters. Without clusters: (dhs_mla_mh_splits, 0). With them:
   among the (splits = cs np, cs) with cs in 2..16, fit[cs] > 0, np >= 1,
   splits <= min(32, ceil(k/64)) and the nq (n_heads/64) np clusters within
   fit[cs] (one wave), the one whose longest split has the fewest tiles, then
   at most DHS_MLA_PART_FEW partials per query (splits / cs; where none has so
   few, the fewest), then the smallest cluster, then the fewest splits
   (measured on an H100 at 100K, C = 2, 64 heads, 32 splits: clusters of 2, 4,
   8, 16 (16, 8, 4, 2 partials) 24.2, 22.1, 23.1, 28.4 us against 26.3
   without clusters; at the other batches of that table only clusters of 2
   fit one wave, at 0.74-0.98x); it is taken
   when its longest split has no more tiles than
   dhs_mla_mh_splits' plan, else that plan (cluster 0). Deterministic
   function of its arguments. nq, n_heads, k or n_sm <= 0: (1, 0). */
void dhs_mla_mh_plan(int32_t nq, int32_t n_heads, int32_t k, int32_t n_sm, const int32_t *fit, int32_t *splits,
                     int32_t *cluster);

/* Tiles [t0, t1) of split s for a query with nv valid rows: nt = ceil(nv/64)
   tiles, t0 = s*nt/splits, t1 = (s+1)*nt/splits (integer division, 64-bit
   intermediate). Rows are [t0*64, min(t1*64, nv)). nv <= 0, splits <= 0 or s
   outside [0, splits): t0 = t1 = 0. Every split gets floor or ceil of
   nt/splits tiles; splits > nt leaves some splits empty. */
#ifdef __CUDACC__
#define DHS_MLA_HD __host__ __device__
#else
#define DHS_MLA_HD
#endif
static inline DHS_MLA_HD void dhs_mla_mh_split_tiles(int32_t nv, int32_t splits, int32_t s, int32_t *t0, int32_t *t1)
{
    int64_t a = 0, b = 0;
    if (nv > 0 && splits > 0 && s >= 0 && s < splits) {
        const int64_t nt = ((int64_t)nv + DHS_MLA_TILE - 1) / DHS_MLA_TILE;
        a = (int64_t)s * nt / splits;
        b = ((int64_t)s + 1) * nt / splits;
    }
    if (t0) *t0 = (int32_t)a;
    if (t1) *t1 = (int32_t)b;
}

/* The overlapped kernel's shared-memory layout (model/mla_mh.cu, k_mla_ws), here so that the CPU tests its
   properties (tests/model/test_mla_mh.c). A row of its query, K and P buffers is a run of 16-byte chunks
   (72 for 576 bf16 values, 8 for a P row of 64) without padding, each chunk stored within its 128-byte
   group at a place the row permutes: chunk c of row r at dhs_mla_ws_chunk(r, c) = c ^ (r & 7). Row
   strides are multiples of 128 bytes, so the 8 rows that one 8x8 ldmatrix reads (8 consecutive rows from a
   multiple of 8, one chunk) land on 8 different bank groups. */
static inline DHS_MLA_HD int32_t dhs_mla_ws_chunk(int32_t r, int32_t c) { return c ^ (r & 7); }

/* A producer lane decodes codes 16 lane .. 16 lane + 15 of a row (chunks 2 lane and 2 lane + 1) and
   stores chunk dhs_mla_ws_code_chunk(lane, 0) first, then (lane, 1): the 8 lanes of each 128-byte store
   phase (lanes 8 p .. 8 p + 7) then write 8 different bank groups (in chunk order, lanes 4..7 of a phase
   would land on the bank groups of lanes 0..3). */
static inline DHS_MLA_HD int32_t dhs_mla_ws_code_chunk(int32_t lane, int32_t k)
{
    const int32_t sw = (lane >> 2) & 1;
    return 2 * lane + (k ? 1 - sw : sw);
}

/* The overlapped kernel's hand-over of its two K buffers (model/mla_mh.cu), here so that the CPU tests the
   protocol (tests/model/test_mla_mh.c). Tile i of a split's n tiles is decoded into buffer i % 2; the
   producers wait for "buffer free" before decoding tile i where dhs_mla_ws_waits_free(i), and each consumer
   group announces "buffer free" after computing tile i where dhs_mla_ws_frees(i, n): every announcement is
   waited for exactly once (none left pending when the block ends), and no buffer is overwritten before both
   groups are done with the tile it held. */
static inline DHS_MLA_HD int dhs_mla_ws_waits_free(int32_t i) { return i >= 2; }
static inline DHS_MLA_HD int dhs_mla_ws_frees(int32_t i, int32_t n) { return i + 2 < n; }

/* Bytes of the partials workspace the GPU launcher needs:
   nq * np * n_heads * (DHS_MLA_DV + 2) * 4 with np = splits (no clusters) or
   splits / cluster; 0 when d fails dhs_mla_mh_check, and 0 when cluster ==
   splits >= 2 (no workspace: part may be NULL). */
uint64_t dhs_mla_mh_part_bytes(const dhs_mla_mh_desc *d);

/* The CPU specification (host pointers). q: bf16 bit patterns
   [nq][n_heads][576]; base[qi]: the rows of query qi, the row of location loc
   at base[qi] + (int64_t)loc * 656; loc [nq][k]: the first nv[qi] entries are
   the valid locations in entry order (the caller already dropped -1);
   nv[qi] <= 0: out of that query left untouched. out: float [nq][n_heads][512].
   DHS_ERR_INVALID_ARG (nothing written) for a failing dhs_mla_mh_check, a NULL
   pointer (base[qi] too, where nv[qi] > 0), nv[qi] > k, or a negative location
   among a query's first nv[qi] entries (the GPU kernel does not check these
   two: there they are undefined). DHS_ERR_NOMEM (nothing written) when the
   scratch (about k * 576 floats) cannot be allocated. Never prints. */
dhs_status dhs_mla_mh_ref(const dhs_mla_mh_desc *d, const uint16_t *q, const uint8_t *const *base,
                          const int32_t *loc, const int32_t *nv, float *out);

/* The GPU launcher (model/mla_mh.cu; without CUDA a stub in model/mla_mh.c
   returning DHS_ERR_UNSUPPORTED). All pointers are device pointers except d;
   base is a device array of nq device pointers; part has
   dhs_mla_mh_part_bytes(d) bytes; stream a cudaStream_t or NULL.
   - q, part and out 16-byte aligned (else DHS_ERR_MISALIGNED), and every
     base[qi] too (not checked: the rows are copied 16 bytes at a time);
   - nq <= 65535 (the grid's third dimension), else DHS_ERR_INVALID_ARG; nq 0:
     DHS_OK, nothing launched, pointers not checked;
   - cluster >= 2 launches clusters of that many blocks: a GPU that cannot
     hold one (dhs_mla_mh_cluster_fit gives 0) fails the launch:
     DHS_ERR_BACKEND;
   - on the GPU nv[qi] > k reads k rows, and locations are not checked;
   - the kernel (variant 3 of dhs_mla_mh_attend_kernel) needs 230,656 bytes
     of shared memory per block (sm_90: H100, H200); a GPU without them:
     DHS_ERR_BACKEND. A launch failure (or an
     earlier error of the caller's still pending on the device) gives
     DHS_ERR_BACKEND.
   Not the spec's bits: the tensor cores' dot products, the order of the l
   sums (a shuffle tree), contracted multiply-adds in the rescale and the
   combine and exp2f's last bits differ; tests/cuda/test_mla_mh_cuda.c
   bounds the difference by 8e-3 x max |V|. */
dhs_status dhs_mla_mh_attend(const dhs_mla_mh_desc *d, const uint16_t *q, const uint8_t *const *base,
                             const int32_t *loc, const int32_t *nv, float *part, float *out, void *stream);

/* The same with a choice of kernel variant (model/mla_mh.cu), for benchmarks that time them side by
   side: 3 the default, the overlapped kernel (k_mla_ws: four producer warps gather the next tile's rows
   into registers and decode them into one of two K buffers while two consumer groups of 32 heads compute
   over the other; 230,656 bytes of shared memory and 384 threads a block; built for sm_90a its warps'
   registers are redistributed, 112 a producer thread and 192 a consumer's), 5 as 3 with the split of P V
   of variant 2 (a warp: its group's 32 heads x 128 values), 0 the one-role kernel k_mla_mh (the rows
   gathered by the Hopper bulk copy, one per row; 8 warps decode, then compute), 1 as 0 with the rows
   gathered by 16-byte cp.async (the first kernel), 2 as 0 with another split of the P V product over the
   warps. 0, 3 and 5 compute the same sums in the same order: the same bits (test_mla_mh_cuda checks).
   AB << 2 with AB one of 1, 2, 4, 6, 8, 9, 14, 15 leaves parts of variant 0 out (the decode, the S
   product, the P V product, the gathers: mla_bench --ablate): the outputs are then wrong; ablations
   are without clusters (d->cluster >= 2: DHS_ERR_INVALID_ARG). Other variants: DHS_ERR_INVALID_ARG.
   Without CUDA: DHS_ERR_UNSUPPORTED. */
dhs_status dhs_mla_mh_attend_kernel(const dhs_mla_mh_desc *d, int variant, const uint16_t *q,
                                    const uint8_t *const *base, const int32_t *loc, const int32_t *nv, float *part,
                                    float *out, void *stream);

/* fit[cs] for cs = 0..16: how many clusters of cs blocks of the kernel the current device holds at once
   (cudaOccupancyMaxActiveClusters; fit[0] = 0, fit[1] = blocks at once; 0 where a size is refused).
   DHS_ERR_INVALID_ARG for fit NULL; DHS_ERR_BACKEND when the device cannot be queried; without CUDA
   DHS_ERR_UNSUPPORTED (fit all 0). */
dhs_status dhs_mla_mh_cluster_fit(int32_t fit[DHS_MLA_MAX_CLUSTER + 1]);

#ifdef __cplusplus
}
#endif

#endif
