/* mla_mh.cu - sparse MLA decode attention over all query heads with tensor
 * cores (model/mla_mh.h; the CPU specification is dhs_mla_mh_ref in
 * mla_mh.c). C-style CUDA, one extern "C" launcher.
 *
 *   k_mla_ws       the default (dhs_mla_mh_attend_kernel variants 3 and 5):
 *                  k_mla_mh's algorithm and bits with its phases overlapped
 *                  by warp roles (described at the kernel below).
 *   k_mla_mh       (variants 0..2) grid (splits, n_heads / 64, nq), 256 threads (8 warps),
 *                  one block per SM (202,000 bytes of shared memory). The
 *                  block's 64 heads of the query (bf16, 576 values) are
 *                  loaded into shared memory once; then for each tile of 64
 *                  located rows of its split (dhs_mla_mh_split_tiles):
 *                    1. the tile's 656-byte FP8 rows were gathered into a
 *                       staging buffer while the previous tile computed: by
 *                       warp 0 with one Hopper bulk copy per row (base[q] +
 *                       (int64_t)loc * 656), completing in bytes on an
 *                       mbarrier (variant 1: 41 cp.async of 16 bytes per row,
 *                       which kept the load/store queue full: ncu's most
 *                       sampled stall);
 *                    2. they are decoded once into bf16 K rows (FP8 E4M3 ->
 *                       f16 -> f32 exactly, times the tile scale in f32, one
 *                       rounding to bf16: the spec's K; RoPE copied); rows
 *                       past the query's valid count are zeros;
 *                    3. the next tile's gather is issued;
 *                    4. S = Q K^T (mma.sync m16n8k16 bf16, f32 accumulation;
 *                       warp w: heads 16 (w & 3).., rows 32 (w >> 2)..), times
 *                       c = sm_scale log2 e, masked rows -inf; the tile
 *                       maximum per head through shared memory (the warp pair
 *                       of a head group agrees on it); the running maximum m,
 *                       alpha = exp2(m - m_new), p = bf16(exp2(s - m_new)) into
 *                       shared memory, each warp's l over its 32 rows;
 *                    5. O = O alpha + P V (V = the first 512 values of the K
 *                       rows, read transposed by ldmatrix; warp w: heads
 *                       16 (w & 3).., values 256 (w >> 2)..: 128 f32
 *                       accumulators per thread).
 *                  The split's (m, l, O unnormalised) go to the partials.
 *                  With clusters (CL, cluster dims (cs, 1, 1): cs consecutive
 *                  splits of one query and head group), the blocks instead
 *                  put theirs in their own shared memory and, after a
 *                  cluster barrier, block r combines a 1/cs share of the
 *                  64 x 512 values over the cs blocks through distributed
 *                  shared memory (M, the weights and L as k_mla_mh_comb
 *                  computes them): the output when cs == splits (no
 *                  partials, no second kernel), else the cluster's partial.
 *   k_mla_mh_comb  grid (nq n_heads), 128 threads, 4 values each: M = max m,
 *                  w = exp2(m - M) (0 for an empty split), L = sum w l (a
 *                  fixed shuffle tree over the splits, one per lane),
 *                  O = sum w o in split order, out = O / L.
 *
 * Deterministic: no atomics, every sum in a fixed order that depends only on
 * the (nq, n_heads, k, splits, cluster) of the launch and the query's valid
 * count (cluster == splits: the order without clusters), so
 * the same rows in the same entry order give the same bits wherever they
 * live (resident or hierarchical). Not the CPU model's bits: the tensor
 * cores' dot products, bf16 P and exp2f differ from dhs_mla_mh_ref in the
 * last bits; tests/cuda/test_mla_mh_cuda.c bounds the difference.
 * Bytes read per query: nv x 656 (the rows, once) + the query (L2) + the
 * partials (L2; none with one cluster per query). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "model/mla_mh.h"
#include "model/mla_mh.cuh" /* cp.async, mma.sync, ldmatrix, bf16 packing */

/* the kernels' bodies (clusters, the bulk copy, mbarrier transactions) are built for sm_90 and newer only */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define MH_SM90 1
#else
#define MH_SM90 0
#pragma nv_diag_suppress 177 /* the bodies' helpers, declared and unused where the bodies are not built */
#endif

/* the parameters of every attention kernel (the launcher's mh_kernel_fn) */
#define MH_KERNEL_PARAMS                                                                                               \
    const uint16_t *__restrict__ q, const uint8_t *const *__restrict__ base, const int32_t *__restrict__ loc,          \
        const int32_t *__restrict__ nvp, int32_t k, int32_t nh, int32_t splits, int32_t cs, float c,                   \
        float *__restrict__ part, float *__restrict__ out

#define MH_T 256                  /* threads per block */
#define MH_ROW 656                /* bytes per row */
#define MH_RV (MH_ROW / 16)       /* 16-byte vectors per row: 41 */
#define MH_QS (DHS_MLA_DQK + 8)   /* Q / K row stride in bf16: 1168 bytes, 4 banks apart (conflict-free) */
#define MH_PS (DHS_MLA_TILE + 8)  /* P row stride in bf16: 144 bytes, 4 banks apart */
#define MH_OFF_K (DHS_MLA_HG * MH_QS * 2)
#define MH_OFF_ST (MH_OFF_K + DHS_MLA_TILE * MH_QS * 2)
#define MH_OFF_P (MH_OFF_ST + DHS_MLA_TILE * MH_ROW)
#define MH_OFF_R (MH_OFF_P + DHS_MLA_HG * MH_PS * 2)
#define MH_OFF_B (MH_OFF_R + 5 * DHS_MLA_HG * 4)
#define MH_SMEM (MH_OFF_B + 16) /* 202,000 bytes: rmax, rl (2 x 64 each), alpha (64); the mbarrier */
#define MH_XS (DHS_MLA_DV + 8)   /* the cluster combine's O row stride in floats: 2080 bytes, 8 banks apart */
#define MH_WS DHS_MLA_MAX_CLUSTER /* the cluster combine's weights per head */

static_assert(DHS_MLA_HG == 64 && DHS_MLA_TILE == 64, "warp layout: 4 head groups of 16 x 2 row halves of 32");
static_assert(MH_OFF_K % 16 == 0 && MH_OFF_ST % 16 == 0 && MH_OFF_P % 16 == 0 && MH_OFF_R % 16 == 0, "16-byte aligned");
static_assert(MH_SMEM <= 227 * 1024, "one block per SM");
static_assert(DHS_MLA_HG * MH_XS * 4 <= MH_OFF_ST, "the cluster combine's O over the query and K buffers");
static_assert(DHS_MLA_HG * (MH_WS + 2) * 4 <= DHS_MLA_TILE * MH_ROW, "its weights in the staging buffer");
static_assert(2 * DHS_MLA_HG * 4 <= DHS_MLA_HG * MH_PS * 2, "its m and l in the P buffer");

/* gather rows [r0, r0 + nr) of the query's valid entries into the staging buffer */
static __device__ __forceinline__ void mh_gather(uint8_t *st, const uint8_t *base, const int32_t *loc, int r0, int nr)
{
    for (int v = threadIdx.x; v < nr * MH_RV; v += MH_T) {
        const int row = v / MH_RV, col = v - row * MH_RV;
        mh_cp16(st + row * MH_ROW + col * 16, base + (int64_t)loc[r0 + row] * MH_ROW + col * 16);
    }
}

/* the same by warp 0 with one bulk copy per row, completing on bar (one arrival with the bytes) */
static __device__ __forceinline__ void mh_gather_bulk(uint8_t *st, const uint8_t *base, const int32_t *loc, int r0, int nr,
                                                      uint64_t *bar)
{
    if (threadIdx.x >= 32) return;
    if (threadIdx.x == 0) mh_mbar_expect(bar, (unsigned)(nr * MH_ROW));
    __syncwarp();
    for (int row = threadIdx.x; row < nr; row += 32)
        mh_bulk(st + row * MH_ROW, base + (int64_t)loc[r0 + row] * MH_ROW, MH_ROW, bar);
}

/* the rows of the tile from valid entry n0 (at most 64, nv in all): with BULK by bulk copies completing on
   bar, else by cp.async in their own commit group */
template <int BULK>
static __device__ __forceinline__ void mh_gather_tile(uint8_t *st, const uint8_t *base, const int32_t *loc, int n0,
                                                      int nv, uint64_t *bar)
{
    const int nr = min(DHS_MLA_TILE, nv - n0);
    if (BULK) {
        mh_gather_bulk(st, base, loc, n0, nr, bar);
    } else {
        mh_gather(st, base, loc, n0, nr);
        mh_commit();
    }
}

/* A block's split: the query's valid count nv (clamped to k), its tiles [t0, t1) (dhs_mla_mh_split_tiles)
   and the partial the block writes (pm / pl / po: its split's, or with clusters its cluster's, np per
   query). Returns 0 when the block has nothing more to do: its query has no rows (the combine leaves the
   output alone; with clusters all blocks of the cluster, one query), or, without clusters, its split is
   empty, whose partial (m = -inf, l = 0, O = 0) its NT threads write here (in a cluster an empty split's
   partial is combined at the end as any other). */
template <int CL, int NT>
static __device__ __forceinline__ int mh_split_begin(const int32_t *nvp, int32_t k, int32_t nh, int32_t splits,
                                                     int32_t cs, float *part, int &nv, int32_t &t0, int32_t &t1,
                                                     int &np, float *&pm, float *&pl, float *&po)
{
    const int s = blockIdx.x, hg = blockIdx.y, qi = blockIdx.z, nq = gridDim.z, tid = threadIdx.x;
    nv = nvp[qi];
    if (nv <= 0) return 0;
    if (nv > k) nv = k;
    dhs_mla_mh_split_tiles(nv, splits, s, &t0, &t1);
    np = CL ? splits / cs : splits;
    const int pi = CL ? s / cs : s;                                       /* no division without clusters */
    const int64_t pidx = ((int64_t)qi * np + pi) * nh + hg * DHS_MLA_HG; /* this block's first head's partial */
    pm = part + pidx, pl = part + (int64_t)nq * np * nh + pidx;
    po = part + 2 * (int64_t)nq * np * nh + pidx * DHS_MLA_DV;
    if (!CL && t0 == t1) {
        for (int i = tid; i < DHS_MLA_HG * DHS_MLA_DV; i += NT) po[i] = 0.0f;
        if (tid < DHS_MLA_HG) pm[tid] = -INFINITY, pl[tid] = 0.0f;
        return 0;
    }
    return 1;
}

/* the syncs of mh_finish: k_mla_mh's block (MH_T threads, every thread on one path) by __syncthreads; k_mla_ws
   reaches them from its two roles' code, so by the non-aligned forms: a named barrier of its NT threads, and
   the cluster barrier's arrive (release) and wait (acquire) */
template <int NT>
static __device__ __forceinline__ void mh_block_sync(void)
{
    if (NT == MH_T) __syncthreads();
    else asm volatile("barrier.sync 9, %0;\n" ::"n"(NT) : "memory");
}
static __device__ __forceinline__ void mh_cluster_sync(void)
{
    asm volatile("barrier.cluster.arrive;\n" ::: "memory");
    asm volatile("barrier.cluster.wait;\n" ::: "memory");
}

/* A block's end: its split's (m, l, O) to the partials pm / pl / po, or with clusters (CL) combined with the
   other blocks of its cluster. All NT threads of the block call it (block syncs inside); those with own hold O in o
   (below), m0 / m1 / l0 / l1 of heads hb + g
   and hb + g + 8 over their half of the rows (rl: 2 x 64 floats, l of each half). With clusters, O goes
   into this block's own shared memory at xo (64 x MH_XS floats), m and l at xml (2 x 64), the weights
   and the cluster's M and L at wt (64 x (MH_WS + 2)); then block r of the cluster combines a 1/cs share of
   the 64 x 512 values over the cs blocks in rank (= split) order through distributed shared memory and
   writes the output (ohg: this query's first head of the group; np == 1) or the cluster's partial.
   O's layout in o: PV 0 heads oh + g (+ 8) and values ov + 8 j + 2 t; PV 1 o[16 i + j] heads oh + 16 i + g
   (+ 8), values ov + 8 j + 2 t. */
template <int PV, int CL, int NT>
static __device__ __forceinline__ void mh_finish(uint8_t *xo_, uint8_t *xml, float *wt, float (&o)[32][4], int own,
                                                 int hb, int oh, int ov, int half, int g, int t, float m0, float m1,
                                                 float l0, float l1, float *rl, float *pm, float *pl, float *po,
                                                 float *ohg, int np, int cs)
{
    const int tid = threadIdx.x, lane = tid & 31;
    if (own && t == 0) rl[half * DHS_MLA_HG + hb + g] = l0, rl[half * DHS_MLA_HG + hb + g + 8] = l1;
    mh_block_sync<NT>(); /* also: every warp is done with the query, K and P buffers */
    float *xo = (float *)xo_, *xm = (float *)xml, *xl = xm + DHS_MLA_HG;
    float *dm = CL ? xm : pm, *dl = CL ? xl : pl, *dO = CL ? xo : po;
    const int64_t ds = CL ? MH_XS : DHS_MLA_DV;
    if (own && half == 0 && t == 0) {
        dm[hb + g] = m0, dm[hb + g + 8] = m1;
        dl[hb + g] = rl[hb + g] + rl[DHS_MLA_HG + hb + g];
        dl[hb + g + 8] = rl[hb + g + 8] + rl[DHS_MLA_HG + hb + g + 8];
    }
    if (own) {
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const int hr = PV == 0 ? oh : oh + (j >> 4) * 16;
            const int col = PV == 0 ? ov + 8 * j + 2 * t : ov + 8 * (j & 15) + 2 * t;
            *(float2 *)(dO + (hr + g) * ds + col) = make_float2(o[j][0], o[j][1]);
            *(float2 *)(dO + (hr + g + 8) * ds + col) = make_float2(o[j][2], o[j][3]);
        }
    }
    if (!CL) return;
#if MH_SM90
    namespace cg = cooperative_groups;
    cg::cluster_group cl = cg::this_cluster();
    float *hM = wt + DHS_MLA_HG * MH_WS, *hL = hM + DHS_MLA_HG;
    mh_cluster_sync(); /* every block's (m, l, O) visible to the cluster */
    /* per head: M, the weights and L as k_mla_mh_comb computes them (lane r: rank r's m and l, the same
       shuffle trees), so one cluster per query gives the bits of the launch without clusters */
    for (int h = tid >> 5; h < DHS_MLA_HG; h += NT / 32) {
        const float mr = lane < cs ? cl.map_shared_rank(xm, lane)[h] : -INFINITY;
        float M = mr;
#pragma unroll
        for (int x = 16; x; x >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, x));
        const float wr = mr == -INFINITY ? 0.0f : exp2f(mr - M);
        float L = lane < cs ? wr * cl.map_shared_rank(xl, lane)[h] : 0.0f;
#pragma unroll
        for (int x = 16; x; x >>= 1) L += __shfl_xor_sync(0xffffffffu, L, x);
        if (lane < cs) wt[h * MH_WS + lane] = wr;
        if (lane == 0) hM[h] = M, hL[h] = L;
    }
    mh_block_sync<NT>();
    const int rank = (int)cl.block_rank(), n4 = DHS_MLA_HG * DHS_MLA_DV / 4;
    const int f0 = rank * n4 / cs, f1 = (rank + 1) * n4 / cs;
    for (int f = f0 + tid; f < f1; f += NT) {
        const int h = f / (DHS_MLA_DV / 4), col = (f - h * (DHS_MLA_DV / 4)) * 4;
        float4 a = make_float4(0, 0, 0, 0);
        for (int r = 0; r < cs; r++) {
            const float wr = wt[h * MH_WS + r];
            const float4 v = *(const float4 *)(cl.map_shared_rank(xo, r) + h * MH_XS + col);
            a.x += wr * v.x, a.y += wr * v.y, a.z += wr * v.z, a.w += wr * v.w;
        }
        if (np == 1) {
            const float L = hL[h];
            *(float4 *)(ohg + (int64_t)h * DHS_MLA_DV + col) = make_float4(a.x / L, a.y / L, a.z / L, a.w / L);
        } else {
            *(float4 *)(po + (int64_t)h * DHS_MLA_DV + col) = a;
        }
    }
    if (np > 1 && rank == 0 && tid < DHS_MLA_HG) pm[tid] = hM[tid], pl[tid] = hL[tid];
    mh_cluster_sync(); /* no block leaves while another still reads its shared memory */
#endif
}

/* The online softmax of one 64-row tile for a warp holding S of heads hb + g and hb + g + 8 over rows rb..
   (32 rows; sacc as mma.sync left it): scaled by c, rows from nr on masked to -inf; the tile maxima of the
   warp pair that shares these heads meet in rmax ([half][64 heads]) across sync(); then the running maxima
   m0 / m1, the rescale factors al0 / al1, p = bf16(exp2(s - mu)) packed in pairs (pk[j][0]: head hb + g,
   pk[j][1]: head hb + g + 8, columns rb + 8 j + 2 t and + 1) and the sums l0 / l1. */
template <typename Sync>
static __device__ __forceinline__ void mh_softmax(float (&sacc)[4][4], int nr, int rb, int t, int half, int hb, int g,
                                                  float c, float *rmax, Sync sync, float &m0, float &m1, float &l0,
                                                  float &l1, float &al0, float &al1, uint32_t (&pk)[4][2])
{
    float x0 = -INFINITY, x1 = -INFINITY; /* the tile maxima of heads hb + g, hb + g + 8 over this warp's rows */
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int row = rb + 8 * j + 2 * t + e;
            sacc[j][e] = row < nr ? sacc[j][e] * c : -INFINITY;
            sacc[j][2 + e] = row < nr ? sacc[j][2 + e] * c : -INFINITY;
            x0 = fmaxf(x0, sacc[j][e]);
            x1 = fmaxf(x1, sacc[j][2 + e]);
        }
    x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
    x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
    x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
    x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
    if (t == 0) rmax[half * DHS_MLA_HG + hb + g] = x0, rmax[half * DHS_MLA_HG + hb + g + 8] = x1;
    sync();
    x0 = fmaxf(rmax[hb + g], rmax[DHS_MLA_HG + hb + g]);
    x1 = fmaxf(rmax[hb + g + 8], rmax[DHS_MLA_HG + hb + g + 8]);
    const float mn0 = fmaxf(m0, x0), mn1 = fmaxf(m1, x1);
    const float mu0 = mn0 == -INFINITY ? 0.0f : mn0, mu1 = mn1 == -INFINITY ? 0.0f : mn1;
    al0 = m0 == -INFINITY ? 0.0f : exp2f(m0 - mu0), al1 = m1 == -INFINITY ? 0.0f : exp2f(m1 - mu1);
    m0 = mn0, m1 = mn1;
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float p0 = mh_bf(exp2f(sacc[j][0] - mu0)), p1 = mh_bf(exp2f(sacc[j][1] - mu0));
        const float p2 = mh_bf(exp2f(sacc[j][2] - mu1)), p3 = mh_bf(exp2f(sacc[j][3] - mu1));
        s0 += p0 + p1, s1 += p2 + p3;
        pk[j][0] = mh_pack(p0, p1), pk[j][1] = mh_pack(p2, p3);
    }
    s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
    s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
    l0 = l0 * al0 + s0, l1 = l1 * al1 + s1;
}

/* PV: the warps' share of O += P V. 0: warp w has heads 16 (w & 3).., values 256 (w >> 2)..; 1: heads
   32 (w & 1).., values 128 (w >> 1).. (V read by 2 head groups instead of 4; the rescale factors through
   shared memory). Both are exact to the same specification; mla_bench times them side by side.
   AB: parts left out, for mla_bench --ablate only (the outputs are then wrong): 1 the decode, 2 the
   S product, 4 the P V product, 8 the gathers of the rows. BULK: the rows by bulk copies, else cp.async. */
template <int PV, int AB, int BULK, int CL>
__global__ void __launch_bounds__(MH_T, 1)
    k_mla_mh(MH_KERNEL_PARAMS)
{
#if MH_SM90 /* built for an older GPU: no body (the launcher cannot get its shared memory there) */
    extern __shared__ __align__(16) uint8_t sm[];
    uint16_t *qs = (uint16_t *)sm, *ks = (uint16_t *)(sm + MH_OFF_K), *ps = (uint16_t *)(sm + MH_OFF_P);
    uint8_t *stg = sm + MH_OFF_ST;
    float *rmax = (float *)(sm + MH_OFF_R), *rl = rmax + 2 * DHS_MLA_HG, *salpha = rl + 2 * DHS_MLA_HG;
    uint64_t *bar = (uint64_t *)(sm + MH_OFF_B);
    const int hg = blockIdx.y, qi = blockIdx.z;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int hb = (w & 3) * 16, half = w >> 2, rb = half * 32, dvb = half * 256;
    int nv, np;
    int32_t t0, t1;
    float *pm, *pl, *po;
    if (!mh_split_begin<CL, MH_T>(nvp, k, nh, splits, cs, part, nv, t0, t1, np, pm, pl, po)) return;
    const uint8_t *bq = base[qi];
    const int32_t *lq = loc + (int64_t)qi * k;
    if (t0 < t1) { /* the block's 64 heads of the query: 72 vectors of 16 bytes each */
        const uint16_t *qh = q + ((int64_t)qi * nh + hg * DHS_MLA_HG) * DHS_MLA_DQK;
        for (int v = tid; v < DHS_MLA_HG * (DHS_MLA_DQK / 8); v += MH_T) {
            const int h = v / (DHS_MLA_DQK / 8), col = v - h * (DHS_MLA_DQK / 8);
            mh_cp16(qs + h * MH_QS + col * 8, qh + (int64_t)h * DHS_MLA_DQK + col * 8);
        }
        mh_commit();
        if (BULK) {
            if (tid == 0) mh_mbar_init(bar, 1);
            __syncthreads();
        }
        if (!(AB & 8)) mh_gather_tile<BULK>(stg, bq, lq, t0 * DHS_MLA_TILE, nv, bar);
    }

    float o[32][4];
#pragma unroll
    for (int j = 0; j < 32; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* heads hb + g, hb + g + 8 */

    for (int ti = t0; ti < t1; ti++) {
        const int r0 = ti * DHS_MLA_TILE, nr = min(DHS_MLA_TILE, nv - r0);
        mh_wait_all(); /* the query (and the rows, without BULK) */
        if (BULK && !(AB & 8)) mh_mbar_wait(bar, (unsigned)(ti - t0) & 1u);
        __syncthreads(); /* the gather (and the query) landed; the previous tile's readers are done */
        /* 2. decode: 64 rows x 72 groups of 8 values (64 of codes, 8 of RoPE) */
        for (int u = tid; u < (AB & 1 ? 0 : DHS_MLA_TILE * 72); u += MH_T) {
            const int row = u / 72, grp = u - row * 72;
            uint4 out = make_uint4(0, 0, 0, 0);
            if (row < nr) {
                const uint8_t *rw = stg + row * MH_ROW;
                if (grp < 64) {
                    const uint2 cd = *(const uint2 *)(rw + grp * 8);
                    const float ts = ((const float *)(rw + DHS_MLA_DV))[grp >> 4];
                    out = make_uint4(mh_dec2(cd.x & 0xffffu, ts), mh_dec2(cd.x >> 16, ts), mh_dec2(cd.y & 0xffffu, ts),
                                     mh_dec2(cd.y >> 16, ts));
                } else {
                    out = *(const uint4 *)(rw + DHS_MLA_DV + 16 + (grp - 64) * 16);
                }
            }
            *(uint4 *)(ks + row * MH_QS + grp * 8) = out;
        }
        __syncthreads(); /* K decoded; the staging buffer is free */
        if (ti + 1 < t1 && !(AB & 8)) mh_gather_tile<BULK>(stg, bq, lq, (ti + 1) * DHS_MLA_TILE, nv, bar);
        /* 4. S = Q K^T over this warp's 16 heads x 32 rows */
        float sacc[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.0f;
        {
            const uint16_t *qa = qs + (hb + (lane & 15)) * MH_QS + (lane >> 4) * 8;
            const uint16_t *kb = ks + (rb + (lane & 7) + ((lane >> 4) << 3)) * MH_QS + ((lane >> 3) & 1) * 8;
#pragma unroll 4
            for (int kk = 0; kk < (AB & 2 ? 0 : DHS_MLA_DQK); kk += 16) {
                uint32_t a[4], b[4];
                mh_ldsm4(a, qa + kk);
                mh_ldsm4(b, kb + kk); /* rows rb..rb+15: (b0, b1) of n-tiles 0 and 1 */
                mh_mma(sacc[0], a, b[0], b[1]);
                mh_mma(sacc[1], a, b[2], b[3]);
                mh_ldsm4(b, kb + 16 * MH_QS + kk); /* rows rb+16..rb+31 */
                mh_mma(sacc[2], a, b[0], b[1]);
                mh_mma(sacc[3], a, b[2], b[3]);
            }
        }
        float al0, al1;
        uint32_t pk[4][2];
        mh_softmax(sacc, nr, rb, t, half, hb, g, c, rmax, [] { __syncthreads(); }, m0, m1, l0, l1, al0, al1, pk);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int col = rb + 8 * j + 2 * t;
            *(uint32_t *)(ps + (hb + g) * MH_PS + col) = pk[j][0];
            *(uint32_t *)(ps + (hb + g + 8) * MH_PS + col) = pk[j][1];
        }
        if (PV == 0) {
#pragma unroll
            for (int j = 0; j < 32; j++) o[j][0] *= al0, o[j][1] *= al0, o[j][2] *= al1, o[j][3] *= al1;
        } else if (half == 0 && t == 0) {
            salpha[hb + g] = al0, salpha[hb + g + 8] = al1;
        }
        __syncthreads(); /* P (and alpha) complete */
        /* 5. O += P V, 4 steps of 16 rows */
        if (AB & 4) {
        } else if (PV == 0) { /* this warp's 16 heads x 256 values */
            const uint16_t *pa = ps + (hb + (lane & 15)) * MH_PS + (lane >> 4) * 8;
            const uint16_t *vb = ks + (lane & 15) * MH_QS + dvb + (lane >> 4) * 8;
#pragma unroll
            for (int kk = 0; kk < DHS_MLA_TILE; kk += 16) {
                uint32_t a[4];
                mh_ldsm4(a, pa + kk);
#pragma unroll
                for (int j = 0; j < 32; j += 2) {
                    uint32_t b[4];
                    mh_ldsm4t(b, vb + kk * MH_QS + j * 8);
                    mh_mma(o[j], a, b[0], b[1]);
                    mh_mma(o[j + 1], a, b[2], b[3]);
                }
            }
        } else { /* this warp's 32 heads x 128 values: o[16 i + j], head tile i, value tile j */
            const int ph = (w & 1) * 32, dq = (w >> 1) * 128;
            const float a0 = salpha[ph + g], a1 = salpha[ph + g + 8], a2 = salpha[ph + 16 + g], a3 = salpha[ph + 24 + g];
#pragma unroll
            for (int j = 0; j < 16; j++) {
                o[j][0] *= a0, o[j][1] *= a0, o[j][2] *= a1, o[j][3] *= a1;
                o[16 + j][0] *= a2, o[16 + j][1] *= a2, o[16 + j][2] *= a3, o[16 + j][3] *= a3;
            }
            const uint16_t *pa = ps + (ph + (lane & 15)) * MH_PS + (lane >> 4) * 8;
            const uint16_t *vb = ks + (lane & 15) * MH_QS + dq + (lane >> 4) * 8;
#pragma unroll
            for (int kk = 0; kk < DHS_MLA_TILE; kk += 16) {
                uint32_t x0[4], x1[4];
                mh_ldsm4(x0, pa + kk);
                mh_ldsm4(x1, pa + 16 * MH_PS + kk);
#pragma unroll
                for (int j = 0; j < 16; j += 2) {
                    uint32_t b[4];
                    mh_ldsm4t(b, vb + kk * MH_QS + j * 8);
                    mh_mma(o[j], x0, b[0], b[1]);
                    mh_mma(o[16 + j], x1, b[0], b[1]);
                    mh_mma(o[j + 1], x0, b[2], b[3]);
                    mh_mma(o[17 + j], x1, b[2], b[3]);
                }
            }
        }
    }
    mh_finish<PV, CL, MH_T>(sm, sm + MH_OFF_P, (float *)stg, o, 1, hb, PV == 0 ? hb : (w & 1) * 32,
                            PV == 0 ? dvb : (w >> 1) * 128, half, g, t, m0, m1, l0, l1, rl, pm, pl, po,
                            out + ((int64_t)qi * nh + hg * DHS_MLA_HG) * DHS_MLA_DV, np, cs);
#endif
}

/* ------------------------------------------------------------------ k_mla_ws (variant 3)
   The algorithm of k_mla_mh variant 0 (the same products, maxima, sums and rescales in the same order:
   the same bits) with the phases overlapped. 12 warps:
     warps 8..11 (the producers, one warpgroup) gather the FP8 rows of a tile straight into registers
       (WS_BR rows a warp at once, the next batch loading while the last one is decoded: a lane loads 16
       codes and their tile scale of each row, and one 16-byte RoPE vector of every 4th row) and decode
       them into one of two K buffers while the consumers compute the other: they run ahead by at most
       the two buffers;
     warps 0..3 and 4..7 (two consumer warpgroups) each own 32 of the block's 64 heads and go through the
       tiles independently of each other (S = Q K^T, the tile maxima, P, O += P V as k_mla_mh's warps, a
       warp holding 16 heads x 32 rows of S and 16 heads x 256 values of O), so one group's softmax runs
       beside the other's tensor-core work.
   Named barriers: 0 the block; 1 + c consumer group c (128 threads); 3 + 2 s + c "buffer s is full" for
   group c (the producers arrive, group c waits: 256 threads); 7 + s "buffer s is free" (both groups
   arrive, the producers wait: 384). Registers are moved to the consumers where the kernel is built for
   sm_90a (setmaxnreg: WS_PREG a producer thread, WS_CREG a consumer's; built for plain sm_90 every
   thread has 168 and the consumers spill). Shared memory: the query (64 heads x 576 bf16), two K
   buffers (64 rows x 576 bf16), all without padding, their 16-byte chunks permuted within each 128 bytes
   by the row (chunk c of row r at c ^ (r & 7)) so that ldmatrix and the decode's stores are free of bank
   conflicts; P (64 x 64 bf16, the same permutation); the maxima and l of the row halves. */
#define WS_PW 4                                 /* producer warps (a warpgroup) */
#define WS_BR 4                                 /* rows of a producer batch */
#define WS_BPT (DHS_MLA_TILE / (WS_BR * WS_PW)) /* a producer warp's batches of a tile: 4 */
#define WS_PREG 112                             /* registers (setmaxnreg) of a producer thread */
#define WS_CREG 192                             /* and of a consumer's */
#define WS_CT 128                               /* threads of a consumer group */
#define WS_T (2 * WS_CT + 32 * WS_PW)           /* 384 */
#define WS_RB (DHS_MLA_DQK * 2)                      /* bytes of a query / K row: 1152 */
#define WS_OFF_K (DHS_MLA_HG * WS_RB)                /* 73,728 */
#define WS_KB (DHS_MLA_TILE * WS_RB)                 /* one K buffer: 73,728 */
#define WS_OFF_P (WS_OFF_K + 2 * WS_KB)              /* 221,184 */
#define WS_OFF_R (WS_OFF_P + DHS_MLA_HG * DHS_MLA_TILE * 2)
#define WS_SMEM (WS_OFF_R + 5 * DHS_MLA_HG * 4)      /* 230,656: the maxima and l (2 x 64 each), alpha (64) */

static_assert(WS_SMEM <= 227 * 1024, "one block per SM");
static_assert(WS_BPT % 2 == 0 && WS_BR % 4 == 0 && WS_BPT * WS_BR <= 32, "the producers' batches");
static_assert(128 * WS_PREG + 256 * WS_CREG <= WS_T * 168, "the registers of the launch, redistributed");
/* setmaxnreg (sm_90a): registers moved from the producers to the consumers */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WS_SETMAXNREG(op, n) asm volatile("setmaxnreg." #op ".sync.aligned.u32 %0;\n" ::"n"(n))
#else
#define WS_SETMAXNREG(op, n) ((void)0)
#endif
static_assert(DHS_MLA_HG * MH_XS * 4 + DHS_MLA_HG * (MH_WS + 2) * 4 <= WS_OFF_P, "the cluster combine's O and weights");

/* named barriers in the roles' own code: the non-aligned forms (legal where the threads of the block take
   different paths) */
static __device__ __forceinline__ void ws_sync(int id, int n) { asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
static __device__ __forceinline__ void ws_arrive(int id, int n)
{
    asm volatile("barrier.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
/* byte offset of 16-byte chunk c of row r (rows of rb bytes, a multiple of 128) */
static __device__ __forceinline__ int ws_at(int r, int c, int rb) { return r * rb + (dhs_mla_ws_chunk(r, c) << 4); }

/* WS_BR rows of a tile in one producer lane's registers: codes 16 lane.. of each row (16 bytes) with their
   tile scale, and RoPE vector lane & 7 of rows 4 j + (lane >> 3) */
typedef struct {
    uint4 c[WS_BR];
    float sc[WS_BR];
    uint4 rp[WS_BR / 4];
} ws_batch;

/* rows [rw, rw + WS_BR) of the tile whose valid rows are [0, nr); lane l of myloc holds the location of row
   rw0 + l (rw - rw0 + WS_BR <= 32); rows past nr load as zeros */
static __device__ __forceinline__ void ws_load(ws_batch &b, const uint8_t *bq, int myloc, int rw, int rw0, int nr)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < WS_BR; r++) {
        const int64_t L = __shfl_sync(0xffffffffu, myloc, rw - rw0 + r);
        b.c[r] = make_uint4(0, 0, 0, 0), b.sc[r] = 0.0f;
        if (rw + r < nr) {
            const uint8_t *src = bq + L * MH_ROW;
            b.c[r] = __ldg((const uint4 *)(src + 16 * lane));
            b.sc[r] = __ldg((const float *)(src + DHS_MLA_DV) + (lane >> 3));
        }
    }
#pragma unroll
    for (int j = 0; j < WS_BR / 4; j++) {
        const int r = rw + 4 * j + (lane >> 3);
        const int64_t L = __shfl_sync(0xffffffffu, myloc, r - rw0);
        b.rp[j] = make_uint4(0, 0, 0, 0);
        if (r < nr) b.rp[j] = __ldg((const uint4 *)(bq + L * MH_ROW + DHS_MLA_DV + 16 + 16 * (lane & 7)));
    }
}

/* the batch decoded into K buffer kb (the decode of k_mla_mh: zeros stay zeros): lane l's codes are chunks 2 l
   and 2 l + 1, stored in the order that gives the 8 lanes of each store phase 8 different banks */
static __device__ __forceinline__ void ws_store(const ws_batch &b, uint8_t *kb, int rw)
{
    const int lane = threadIdx.x & 31, sw = dhs_mla_ws_code_chunk(lane, 0) & 1; /* 1: chunk 2 lane + 1 first */
#pragma unroll
    for (int r = 0; r < WS_BR; r++) {
        const uint4 c = b.c[r];
        const float sc = b.sc[r];
        const uint32_t f0 = sw ? c.z : c.x, f1 = sw ? c.w : c.y; /* the codes of chunk 2 lane + sw */
        *(uint4 *)(kb + ws_at(rw + r, dhs_mla_ws_code_chunk(lane, 0), WS_RB)) =
            make_uint4(mh_dec2(f0 & 0xffffu, sc), mh_dec2(f0 >> 16, sc), mh_dec2(f1 & 0xffffu, sc), mh_dec2(f1 >> 16, sc));
        const uint32_t e0 = sw ? c.x : c.z, e1 = sw ? c.y : c.w;
        *(uint4 *)(kb + ws_at(rw + r, dhs_mla_ws_code_chunk(lane, 1), WS_RB)) =
            make_uint4(mh_dec2(e0 & 0xffffu, sc), mh_dec2(e0 >> 16, sc), mh_dec2(e1 & 0xffffu, sc), mh_dec2(e1 >> 16, sc));
    }
#pragma unroll
    for (int j = 0; j < WS_BR / 4; j++) *(uint4 *)(kb + ws_at(rw + 4 * j + (lane >> 3), 64 + (lane & 7), WS_RB)) = b.rp[j];
}

/* the location of row rw0 + lane of tile ti in lanes 0..15 (0 past the tile's valid rows or past t1) */
static __device__ __forceinline__ int ws_loc(const int32_t *lq, int nv, int ti, int t1, int rw0)
{
    const int lane = threadIdx.x & 31, r = ti * DHS_MLA_TILE + rw0 + lane;
    return ti < t1 && lane < WS_BPT * WS_BR && rw0 + lane < DHS_MLA_TILE && r < nv ? __ldg(lq + r) : 0;
}

/* the producer warp pw's share of every tile of the split: rows 16 pw.. in 4 batches of 4 (x, y, x, y), the
   next batch loading while the last one is decoded (the next tile's locations loaded a tile before) */
static __device__ __forceinline__ void ws_produce(uint8_t *sm, const uint8_t *bq, const int32_t *lq, int nv, int t0,
                                                  int t1, int pw)
{
    static_assert(WS_BPT == 4, "batches x, y, x, y");
    const int rw0 = WS_BPT * WS_BR * pw;
    if (t0 >= t1) return;
    ws_batch x, y;
    int myloc = ws_loc(lq, nv, t0, t1, rw0), nxt = ws_loc(lq, nv, t0 + 1, t1, rw0);
#define WS_NR(ti) min(DHS_MLA_TILE, nv - (ti) * DHS_MLA_TILE)
    ws_load(x, bq, myloc, rw0, rw0, WS_NR(t0));
    for (int ti = t0; ti < t1; ti++) {
        const int i = ti - t0, sb = i & 1, nr = WS_NR(ti);
        uint8_t *kb = sm + WS_OFF_K + sb * WS_KB;
        ws_load(y, bq, myloc, rw0 + WS_BR, rw0, nr);
        if (dhs_mla_ws_waits_free(i)) ws_sync(7 + sb, WS_T); /* both groups are done with tile i - 2 */
        ws_store(x, kb, rw0);
        ws_load(x, bq, myloc, rw0 + 2 * WS_BR, rw0, nr);
        ws_store(y, kb, rw0 + WS_BR);
        ws_load(y, bq, myloc, rw0 + 3 * WS_BR, rw0, nr);
        ws_store(x, kb, rw0 + 2 * WS_BR);
        if (ti + 1 < t1) { /* the next tile's first batch, while this one's last is decoded */
            myloc = nxt;
            nxt = ws_loc(lq, nv, ti + 2, t1, rw0);
            ws_load(x, bq, myloc, rw0, rw0, WS_NR(ti + 1));
        }
        ws_store(y, kb, rw0 + 3 * WS_BR);
        ws_arrive(3 + 2 * sb, WS_CT + 32 * WS_PW); /* tile i decoded: both groups may read buffer sb */
        ws_arrive(4 + 2 * sb, WS_CT + 32 * WS_PW);
    }
#undef WS_NR
}

template <int PV, int CL>
__global__ void __launch_bounds__(WS_T, 1)
    k_mla_ws(MH_KERNEL_PARAMS)
{
#if MH_SM90 /* built for an older GPU: no body (the launcher cannot get its shared memory there) */
    extern __shared__ __align__(16) uint8_t sm[];
    uint8_t *qs = sm, *ps = sm + WS_OFF_P;
    float *rmax = (float *)(sm + WS_OFF_R), *rl = rmax + 2 * DHS_MLA_HG, *salpha = rl + 2 * DHS_MLA_HG;
    const int hg = blockIdx.y, qi = blockIdx.z;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    int nv, np;
    int32_t t0, t1;
    float *pm, *pl, *po;
    if (!mh_split_begin<CL, WS_T>(nvp, k, nh, splits, cs, part, nv, t0, t1, np, pm, pl, po)) return;
    const uint8_t *bq = base[qi];
    const int32_t *lq = loc + (int64_t)qi * k;
    /* consumer mapping (also the epilogue's): group cg_, S over heads hb.. (16) and rows rb.. (32); O over
       heads oh.. and values ov..: PV 0 16 heads x 256 values (ov = 256 half), PV 1 the group's 32 heads x 128
       values (ov = 128 (w & 3)) */
    const int cg_ = (w >> 2) & 1, hb = 32 * cg_ + 16 * (w & 1), half = (w >> 1) & 1, rb = half * 32;
    const int oh = PV == 0 ? hb : 32 * cg_, ov = PV == 0 ? half * 256 : (w & 3) * 128;
    float o[32][4];
#pragma unroll
    for (int j = 0; j < 32; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    if (w >= 8) { /* ---------------- producers */
        WS_SETMAXNREG(dec, WS_PREG);
        ws_produce(sm, bq, lq, nv, t0, t1, w - 8);
        mh_finish<PV, CL, WS_T>(sm, sm + WS_OFF_P, (float *)(sm + DHS_MLA_HG * MH_XS * 4), o, 0, hb, oh, ov, half, g, t,
                            m0, m1, l0, l1, rl, pm, pl, po, out + ((int64_t)qi * nh + hg * DHS_MLA_HG) * DHS_MLA_DV, np,
                            cs);
        return;
    } else { /* ---------------- consumers */
        WS_SETMAXNREG(inc, WS_CREG);
        if (t0 < t1) { /* this group's 32 heads of the query: 72 chunks each */
            const uint16_t *qh = q + ((int64_t)qi * nh + hg * DHS_MLA_HG) * DHS_MLA_DQK;
            for (int v = (tid & 127); v < 32 * 72; v += 128) {
                const int h = 32 * cg_ + v / 72, col = v - (v / 72) * 72;
                mh_cp16(qs + ws_at(h, col, WS_RB), qh + (int64_t)h * DHS_MLA_DQK + col * 8);
            }
            mh_commit();
            mh_wait_all();
        }
        /* the ldmatrix offsets within a 128-byte group: chunk 2 m + x of a row r with r & 7 = lane & 7 */
        const int xa = lane >> 4, xb = (lane >> 3) & 1;
        int oa[4], ob[4];
#pragma unroll
        for (int m = 0; m < 4; m++) oa[m] = dhs_mla_ws_chunk(lane, 2 * m + xa) << 4, ob[m] = dhs_mla_ws_chunk(lane, 2 * m + xb) << 4;
        const uint8_t *qa = qs + (hb + (lane & 15)) * WS_RB;
        const uint8_t *pa = ps + (hb + (lane & 15)) * (DHS_MLA_TILE * 2);
        for (int ti = t0; ti < t1; ti++) {
            const int sb = (ti - t0) & 1, nr = min(DHS_MLA_TILE, nv - ti * DHS_MLA_TILE);
            const uint8_t *kb = sm + WS_OFF_K + sb * WS_KB;
            ws_sync(3 + 2 * sb + cg_, WS_CT + 32 * WS_PW); /* this buffer decoded (and, the first time, the group's query) */
            float sacc[4][4];
#pragma unroll
            for (int j = 0; j < 4; j++) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.0f;
            {
                const uint8_t *kr = kb + (rb + (lane & 7) + ((lane >> 4) << 3)) * WS_RB;
#pragma unroll 1
                for (int gq = 0; gq < DHS_MLA_DQK / 64; gq++) {
#pragma unroll
                    for (int m = 0; m < 4; m++) {
                        uint32_t a[4], b[4];
                        mh_ldsm4(a, qa + gq * 128 + oa[m]);
                        mh_ldsm4(b, kr + gq * 128 + ob[m]);
                        mh_mma(sacc[0], a, b[0], b[1]);
                        mh_mma(sacc[1], a, b[2], b[3]);
                        mh_ldsm4(b, kr + 16 * WS_RB + gq * 128 + ob[m]);
                        mh_mma(sacc[2], a, b[0], b[1]);
                        mh_mma(sacc[3], a, b[2], b[3]);
                    }
                }
            }
            float al0, al1;
            uint32_t pk[4][2];
            mh_softmax(sacc, nr, rb, t, half, hb, g, c, rmax, [cg_] { ws_sync(1 + cg_, 128); }, m0, m1, l0, l1, al0, al1,
                       pk);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int at = dhs_mla_ws_chunk(g, (rb >> 3) + j) << 4 | t << 2; /* rows hb + g and hb + g + 8: r & 7 = g */
                *(uint32_t *)(ps + (hb + g) * (DHS_MLA_TILE * 2) + at) = pk[j][0];
                *(uint32_t *)(ps + (hb + g + 8) * (DHS_MLA_TILE * 2) + at) = pk[j][1];
            }
            if (PV == 0) {
#pragma unroll
                for (int j = 0; j < 32; j++) o[j][0] *= al0, o[j][1] *= al0, o[j][2] *= al1, o[j][3] *= al1;
            } else if (half == 0 && t == 0) {
                salpha[hb + g] = al0, salpha[hb + g + 8] = al1;
            }
            ws_sync(1 + cg_, 128); /* the group's P (and alpha) complete */
            const uint8_t *vr = kb + (lane & 15) * WS_RB + ov * 2;
            if (PV == 0) { /* this warp's 16 heads x 256 values */
#pragma unroll
                for (int kk = 0; kk < DHS_MLA_TILE; kk += 16) {
                    uint32_t a[4];
                    mh_ldsm4(a, pa + oa[kk >> 4]);
#pragma unroll
                    for (int j = 0; j < 32; j += 2) {
                        uint32_t b[4];
                        mh_ldsm4t(b, vr + kk * WS_RB + (j >> 3) * 128 + oa[(j & 7) >> 1]);
                        mh_mma(o[j], a, b[0], b[1]);
                        mh_mma(o[j + 1], a, b[2], b[3]);
                    }
                }
            } else { /* the group's 32 heads x this warp's 128 values: o[16 i + j], head tile i, value tile j */
                const float a0 = salpha[oh + g], a1 = salpha[oh + g + 8], a2 = salpha[oh + 16 + g], a3 = salpha[oh + 24 + g];
#pragma unroll
                for (int j = 0; j < 16; j++) {
                    o[j][0] *= a0, o[j][1] *= a0, o[j][2] *= a1, o[j][3] *= a1;
                    o[16 + j][0] *= a2, o[16 + j][1] *= a2, o[16 + j][2] *= a3, o[16 + j][3] *= a3;
                }
                const uint8_t *pa0 = ps + (oh + (lane & 15)) * (DHS_MLA_TILE * 2);
#pragma unroll
                for (int kk = 0; kk < DHS_MLA_TILE; kk += 16) {
                    uint32_t x0[4], x1[4];
                    mh_ldsm4(x0, pa0 + oa[kk >> 4]);
                    mh_ldsm4(x1, pa0 + 16 * (DHS_MLA_TILE * 2) + oa[kk >> 4]);
#pragma unroll
                    for (int j = 0; j < 16; j += 2) {
                        uint32_t b[4];
                        mh_ldsm4t(b, vr + kk * WS_RB + (j >> 3) * 128 + oa[(j & 7) >> 1]);
                        mh_mma(o[j], x0, b[0], b[1]);
                        mh_mma(o[16 + j], x1, b[0], b[1]);
                        mh_mma(o[j + 1], x0, b[2], b[3]);
                        mh_mma(o[17 + j], x1, b[2], b[3]);
                    }
                }
            }
            if (dhs_mla_ws_frees(ti - t0, t1 - t0)) ws_arrive(7 + sb, WS_T); /* this group is done with the buffer */
        }
    }
    mh_finish<PV, CL, WS_T>(sm, sm + WS_OFF_P, (float *)(sm + DHS_MLA_HG * MH_XS * 4), o, 1, hb, oh, ov, half, g, t,
                            m0, m1, l0, l1, rl, pm, pl, po, out + ((int64_t)qi * nh + hg * DHS_MLA_HG) * DHS_MLA_DV, np,
                            cs);
#endif
}

__global__ void __launch_bounds__(128) k_mla_mh_comb(const int32_t *__restrict__ nvp, int32_t nh, int32_t splits,
                                                     const float *__restrict__ part, float *__restrict__ out)
{
    const int qi = blockIdx.x / nh, h = blockIdx.x - qi * nh, nq = gridDim.x / nh, lane = threadIdx.x & 31;
    if (nvp[qi] <= 0) return;
    const int64_t n = (int64_t)nq * splits * nh;
    const float *pm = part + (int64_t)qi * splits * nh + h, *pl = pm + n;
    const float *po = part + 2 * n + ((int64_t)qi * splits * nh + h) * DHS_MLA_DV + threadIdx.x * 4;
    /* lane s holds split s's m and l (splits <= 32): every warp the same, reduced by the same tree */
    const float ms = lane < splits ? pm[(int64_t)lane * nh] : -INFINITY;
    float M = ms;
#pragma unroll
    for (int o = 16; o; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    const float ws = ms == -INFINITY ? 0.0f : exp2f(ms - M);
    float L = lane < splits ? ws * pl[(int64_t)lane * nh] : 0.0f;
#pragma unroll
    for (int o = 16; o; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
    float4 a = make_float4(0, 0, 0, 0);
#pragma unroll 8
    for (int s = 0; s < splits; s++) {
        const float w = __shfl_sync(0xffffffffu, ws, s);
        const float4 v = *(const float4 *)(po + (int64_t)s * nh * DHS_MLA_DV);
        a.x += w * v.x, a.y += w * v.y, a.z += w * v.z, a.w += w * v.w;
    }
    *(float4 *)(out + ((int64_t)qi * nh + h) * DHS_MLA_DV + threadIdx.x * 4) =
        make_float4(a.x / L, a.y / L, a.z / L, a.w / L);
}

typedef void (*mh_kernel_fn)(const uint16_t *, const uint8_t *const *, const int32_t *, const int32_t *, int32_t,
                             int32_t, int32_t, int32_t, float, float *, float *);

/* variant = base | AB << 2: base 0 the default (rows gathered by bulk copies), 1 the rows gathered by
   16-byte cp.async, 2 as 0 with the other P V split; AB the ablations of base 0 (mla_bench --ablate,
   without clusters); cl: the kernel that combines a cluster's splits */
static mh_kernel_fn mh_kernel(int variant, int cl)
{
    if (cl) switch (variant) {
        case 0: return k_mla_mh<0, 0, 1, 1>;
        case 1: return k_mla_mh<0, 0, 0, 1>;
        case 2: return k_mla_mh<1, 0, 1, 1>;
        case 3: return k_mla_ws<0, 1>;
        case 5: return k_mla_ws<1, 1>;
        default: return NULL;
        }
    switch (variant) {
#define MH_V(base, pv, ab, bulk) \
    case (base) | ((ab) << 2): return k_mla_mh<pv, ab, bulk, 0>;
        MH_V(0, 0, 0, 1) MH_V(1, 0, 0, 0) MH_V(2, 1, 0, 1) MH_V(0, 0, 1, 1) MH_V(0, 0, 2, 1) MH_V(0, 0, 4, 1)
        MH_V(0, 0, 6, 1) MH_V(0, 0, 8, 1) MH_V(0, 0, 9, 1) MH_V(0, 0, 14, 1) MH_V(0, 0, 15, 1)
#undef MH_V
    case 3: return k_mla_ws<0, 0>;
    case 5: return k_mla_ws<1, 0>;
    }
    return NULL;
}

/* the variant dhs_mla_mh_attend launches (and dhs_mla_mh_cluster_fit measures) */
#define MH_DEFAULT 3

/* threads and shared memory of a variant's blocks: the overlapped kernel's (3, 5), else k_mla_mh's */
static int mh_ws(int variant) { return variant == 3 || variant == 5; }
static int mh_threads(int variant) { return mh_ws(variant) ? WS_T : MH_T; }
static int mh_smem(int variant) { return mh_ws(variant) ? WS_SMEM : MH_SMEM; }

/* the per-device attributes of a kernel (its shared memory; with clusters, sizes above 8): set for the
   first 16 devices once (a benign race: every setter sets the same values), on the others every time */

static dhs_status mh_attrs(mh_kernel_fn fn, int variant, int cl)
{
    static int set[16][2][64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return DHS_ERR_BACKEND;
    const int known = dev >= 0 && dev < 16;
    if (known && set[dev][cl][variant]) return DHS_OK;
    if (cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, mh_smem(variant)) !=
        cudaSuccess) {
        (void)cudaGetLastError(); /* not left pending for the caller's next check */
        return DHS_ERR_BACKEND;
    }
    if (cl && cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
        (void)cudaGetLastError(); /* refused: the sizes above 8 then fail to launch (cluster_fit: 0) */
    if (known) set[dev][cl][variant] = 1;
    return DHS_OK;
}

/* the launch of grid in clusters of cs blocks along x (at: the configuration's one attribute) */
static cudaLaunchConfig_t mh_cluster_cfg(dim3 grid, int cs, int variant, cudaStream_t st, cudaLaunchAttribute *at)
{
    cudaLaunchConfig_t cfg = {};
    at->id = cudaLaunchAttributeClusterDimension;
    at->val.clusterDim.x = (unsigned)cs, at->val.clusterDim.y = 1, at->val.clusterDim.z = 1;
    cfg.gridDim = grid, cfg.blockDim = dim3((unsigned)mh_threads(variant)), cfg.stream = st;
    cfg.dynamicSmemBytes = (size_t)mh_smem(variant);
    cfg.attrs = at, cfg.numAttrs = 1;
    return cfg;
}

extern "C" dhs_status dhs_mla_mh_attend_kernel(const dhs_mla_mh_desc *d, int variant, const uint16_t *q,
                                               const uint8_t *const *base, const int32_t *loc, const int32_t *nv,
                                               float *part, float *out, void *stream)
{
    dhs_status e = dhs_mla_mh_check(d);
    if (e != DHS_OK) return e;
    const int cl = d->cluster >= 2, cs = cl ? d->cluster : 1, np = d->splits / cs;
    const mh_kernel_fn fn = variant >= 0 && variant < 64 ? mh_kernel(variant, cl) : NULL;
    if (!fn) return DHS_ERR_INVALID_ARG;
    if (d->nq == 0) return DHS_OK;
    if (d->nq > 65535) return DHS_ERR_INVALID_ARG;
    const int need_part = dhs_mla_mh_part_bytes(d) > 0; /* 0: one cluster per query, no second kernel */
    if (!q || !base || !loc || !nv || (need_part && !part) || !out) return DHS_ERR_INVALID_ARG;
    if (((uintptr_t)q | (uintptr_t)part | (uintptr_t)out) & 15) return DHS_ERR_MISALIGNED;
    if ((e = mh_attrs(fn, variant, cl)) != DHS_OK) return e;
    cudaStream_t st = (cudaStream_t)stream;
    const float c = d->sm_scale * 1.4426950408889634f;
    const dim3 grid((unsigned)d->splits, (unsigned)(d->n_heads / DHS_MLA_HG), (unsigned)d->nq);
    if (cl) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg = mh_cluster_cfg(grid, cs, variant, st, &at);
        if (cudaLaunchKernelEx(&cfg, fn, q, base, loc, nv, d->k, d->n_heads, d->splits, (int32_t)cs, c, part, out) !=
            cudaSuccess) {
            (void)cudaGetLastError(); /* a retry without clusters must not find this error pending */
            return DHS_ERR_BACKEND;
        }
    } else {
        fn<<<grid, mh_threads(variant), mh_smem(variant), st>>>(q, base, loc, nv, d->k, d->n_heads, d->splits, 1, c,
                                                                part, out);
    }
    if (need_part)
        k_mla_mh_comb<<<(unsigned)(d->nq * d->n_heads), DHS_MLA_DV / 4, 0, st>>>(nv, d->n_heads, np, part, out);
    return cudaGetLastError() == cudaSuccess ? DHS_OK : DHS_ERR_BACKEND;
}

extern "C" dhs_status dhs_mla_mh_attend(const dhs_mla_mh_desc *d, const uint16_t *q, const uint8_t *const *base,
                                        const int32_t *loc, const int32_t *nv, float *part, float *out, void *stream)
{
    return dhs_mla_mh_attend_kernel(d, MH_DEFAULT, q, base, loc, nv, part, out, stream);
}

extern "C" dhs_status dhs_mla_mh_cluster_fit(int32_t fit[DHS_MLA_MAX_CLUSTER + 1])
{
    if (!fit) return DHS_ERR_INVALID_ARG;
    memset(fit, 0, sizeof(int32_t) * (DHS_MLA_MAX_CLUSTER + 1));
    const mh_kernel_fn fn = mh_kernel(MH_DEFAULT, 1);
    dhs_status e = mh_attrs(fn, MH_DEFAULT, 1);
    if (e != DHS_OK) return e;
    for (int c = 1; c <= DHS_MLA_MAX_CLUSTER; c++) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg = mh_cluster_cfg(dim3((unsigned)c), c, MH_DEFAULT, NULL, &at);
        int n = 0;
        const cudaError_t err = cudaOccupancyMaxActiveClusters(&n, (const void *)fn, &cfg);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            /* a size the device refuses holds none; any other failure (or at size 1) is the device's */
            if (c == 1 || (err != cudaErrorInvalidClusterSize && err != cudaErrorInvalidValue)) {
                memset(fit, 0, sizeof(int32_t) * (DHS_MLA_MAX_CLUSTER + 1));
                return DHS_ERR_BACKEND;
            }
            n = 0;
        }
        fit[c] = n;
    }
    return DHS_OK;
}
