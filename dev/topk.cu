/* topk.cu - fused top-k + hot-slot lookup (FlashOffloading "LIM") on the GPU.
 *
 * One block of 1024 threads per query. The order is topk_spec.h's 64-bit key
 * (score key << 32 | ~position): higher score first, then lower position,
 * -0 == +0, NaN rejected - bit for bit the reference model's rule.
 *
 *   1. radix select on the 32-bit score key: three histogram passes over the
 *      candidates (11, 11, 10 bits; 2048 bins in shared memory) fix the score
 *      key Ts of the k-th best candidate and `need`, how many candidates with
 *      score key == Ts are selected (the other c_gt = k - need have score key
 *      > Ts). Pass 1 also counts NaNs: a query with any NaN writes -1s.
 *   2. compaction: a candidate with key > Ts takes a slot in [0, c_gt) from a
 *      shared counter; one with key == Ts is appended after them while the
 *      buffer (TK_BUF = 2k entries) has room. If every tie fit, all of them are
 *      kept and the sort below puts the lowest positions first (their keys
 *      differ only in ~position). If not (thousands of equal scores at the
 *      k-th value), an ordered pass over the candidates ranks the ties by
 *      position (warp ballots + block prefix, tile by tile) and keeps ranks <
 *      need - the reference tie rule either way.
 *   3. bitonic sort of the kept 64-bit keys, descending (keys are distinct, so
 *      this is the reference order): the strides of 64 and more in shared
 *      memory, the smaller ones in registers, a warp holding 64 keys (21
 *      barriers for 2048 keys instead of 66); the first min(n, k) are
 *      the answer. The hot-slot lookup is fused here: slot_of[pos] is read for
 *      those k positions only - never for the other n - k candidates.
 * n <= k skips 1-2. Per-query counts (dhs_cuda_topk_fused_n): block q runs the
 * same algorithm over its own n_q candidates; a skipped query returns at once.
 * Loads are float4 when the query's scores are 16-byte
 * aligned, four of them in flight per thread.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "dev/topk_spec.h"

#define TK_THREADS 1024
#define TK_WARPS (TK_THREADS / 32)
#define TK_BINS 2048
#define TK_BUF (2 * DHS_TOPK_MAX_K)

struct tk_shared {
    uint64_t key[TK_BUF];
    uint32_t hist[TK_BINS];
    uint32_t warp[TK_WARPS];
    uint32_t nan;
    uint32_t digit, rem; /* result of one radix pass */
    uint32_t gt, eq;     /* compaction counters */
    uint32_t cnt;        /* the chosen bin's count (the split top-k's tie select) */
};

/* f(i, score) for every candidate i < n, each by exactly one thread */
template <class F>
__device__ static void for_each_score(const float *__restrict__ s, uint32_t n, F f)
{
    const int tid = threadIdx.x;
    uint32_t done = 0;
    if ((reinterpret_cast<uintptr_t>(s) & 15u) == 0) {
        const float4 *s4 = reinterpret_cast<const float4 *>(s);
        const uint32_t n4 = n / 4;
        uint32_t i = tid;
        for (; i + 3 * TK_THREADS < n4; i += 4 * TK_THREADS) {
            float4 v[4];
#pragma unroll
            for (int j = 0; j < 4; j++) v[j] = __ldg(s4 + i + j * TK_THREADS);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t b = 4 * (i + j * TK_THREADS);
                f(b, v[j].x);
                f(b + 1, v[j].y);
                f(b + 2, v[j].z);
                f(b + 3, v[j].w);
            }
        }
        for (; i < n4; i += TK_THREADS) {
            float4 v = __ldg(s4 + i);
            f(4 * i, v.x);
            f(4 * i + 1, v.y);
            f(4 * i + 2, v.z);
            f(4 * i + 3, v.w);
        }
        done = 4 * n4;
    }
    uint32_t i = done + tid;
    for (; i + 3 * TK_THREADS < n; i += 4 * TK_THREADS) {
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = __ldg(s + i + j * TK_THREADS);
#pragma unroll
        for (int j = 0; j < 4; j++) f(i + j * TK_THREADS, v[j]);
    }
    for (; i < n; i += TK_THREADS) f(i, __ldg(s + i));
}

/* exclusive block scan of one value per thread (all TK_THREADS threads call it) */
__device__ static uint32_t block_excl_scan(uint32_t v, uint32_t *warp_sums)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    uint32_t inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t t = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += t;
    }
    if (lane == 31) warp_sums[w] = inc;
    __syncthreads();
    if (w == 0) {
        uint32_t s = warp_sums[lane], si = s;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            uint32_t t = __shfl_up_sync(0xffffffffu, si, o);
            if (lane >= o) si += t;
        }
        warp_sums[lane] = si - s; /* exclusive warp offsets */
    }
    __syncthreads();
    uint32_t r = warp_sums[w] + inc - v;
    __syncthreads(); /* warp_sums reusable after return */
    return r;
}

__device__ static uint64_t make_key(uint32_t skey, uint32_t pos) { return ((uint64_t)skey << 32) | (uint64_t)(0xffffffffu - pos); }

/* the page-table lookup's constants of the block's query, in shared memory: set once from the kernel
   parameter (tk_pgs_set), so the lookup of each entry reads no parameter through a pointer */
struct tk_pgs {
    const int32_t *tab[DHS_TOPK_PAGES_MAX_SRC]; /* source s's table row of the query's request */
    int32_t *loc[DHS_TOPK_PAGES_MAX_SRC];       /* source s's k locations of the query */
    int32_t nsrc, page_rows;
};

/* by threads 0..nsrc-1 before the block's first barrier */
__device__ static void tk_pgs_set(tk_pgs *d, const dhs_topk_pages &pg, int q, int32_t k)
{
    const int tid = threadIdx.x;
    if (tid < pg.nsrc) {
        d->tab[tid] = pg.tab + (int64_t)pg.src[tid] * pg.src_stride + (int64_t)(q / pg.q_per_req) * pg.page_stride;
        d->loc[tid] = pg.locs + (int64_t)tid * pg.loc_stride + (int64_t)q * k;
    }
    if (tid == 0) d->nsrc = pg.nsrc, d->page_rows = pg.page_rows;
}

/* the page-table lookup of the query's entry i (row < 0: none) into every source's locations */
__device__ static __forceinline__ void tk_pages_write(const tk_pgs *pg, uint32_t i, int32_t row)
{
    const int32_t nsrc = pg->nsrc, p = pg->page_rows, P = row < 0 ? 0 : row / p, o = row < 0 ? 0 : row % p;
    /* unrolled over the bound so e stays in registers; every table load issued before any is used */
    int32_t e[DHS_TOPK_PAGES_MAX_SRC];
#pragma unroll
    for (int s = 0; s < DHS_TOPK_PAGES_MAX_SRC; s++) e[s] = s >= nsrc || row < 0 ? -1 : __ldg(pg->tab[s] + P);
#pragma unroll
    for (int s = 0; s < DHS_TOPK_PAGES_MAX_SRC; s++)
        if (s < nsrc) pg->loc[s][i] = e[s] < 0 ? -1 : e[s] * p + o;
}

/* a query's answer when it has none (a NaN score): -1 in all k rows and locations */
__device__ static void tk_write_none(int32_t k, int32_t *__restrict__ orow, int32_t *__restrict__ oloc,
                                     const tk_pgs *pg)
{
    for (int32_t i = threadIdx.x; i < k; i += TK_THREADS) {
        orow[i] = -1;
        if (oloc) oloc[i] = -1;
        if (pg) tk_pages_write(pg, (uint32_t)i, -1);
    }
}

/* one compare-exchange of the bitonic network on a key held in a register: x is
   key i, y its partner i ^ stride; the lower index of the pair keeps the larger
   key where the pair's run (bit `size` of the lower index) sorts descending */
__device__ static __forceinline__ uint64_t tk_cmpx(uint64_t x, uint64_t y, uint32_t i, uint32_t stride, uint32_t size)
{
    const bool lower = (i & stride) == 0, desc = ((i & ~stride) & size) == 0;
    return lower == desc ? (x > y ? x : y) : (x < y ? x : y);
}

/* the stages of one size with stride <= 32 in registers: warp w's chunks of 64
   keys (lane holds keys cb + lane and cb + lane + 32), from sh.key and back;
   sizes lo..hi (powers of two <= 64 each; or one size > 64 with its small
   strides) - the same network as the shared-memory stages, so the same order */
__device__ static void tk_sort_regs(tk_shared &sh, uint32_t P, uint32_t lo, uint32_t hi)
{
    const uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (uint32_t cb = 64 * w; cb < P; cb += 64 * TK_WARPS) {
        const uint32_t i0 = cb + lane, i1 = i0 + 32;
        uint64_t x0 = sh.key[i0], x1 = sh.key[i1];
        for (uint32_t size = lo; size <= hi; size <<= 1) {
            if (size >= 64) { /* stride 32: the thread's own pair */
                const uint64_t a = x0, b = x1;
                x0 = tk_cmpx(a, b, i0, 32, size);
                x1 = tk_cmpx(b, a, i1, 32, size);
            }
            for (uint32_t stride = (size >= 64 ? 16u : size >> 1); stride > 0; stride >>= 1) {
                const uint64_t y0 = __shfl_xor_sync(0xffffffffu, x0, (int)stride);
                const uint64_t y1 = __shfl_xor_sync(0xffffffffu, x1, (int)stride);
                x0 = tk_cmpx(x0, y0, i0, stride, size);
                x1 = tk_cmpx(x1, y1, i1, stride, size);
            }
        }
        sh.key[i0] = x0, sh.key[i1] = x1;
    }
}

/* bitonic sort of sh.key[0..m) descending (padded with KEY_NONE, the smallest
   key, to a power of two of at least 64), then the answer: the first cnt keys'
   positions with the fused lookup, -1 after. The strides below 64 run in
   registers (a warp holds 64 keys: shuffles and the thread's own pair), the
   others in shared memory: 21 barriers for 2048 keys instead of 66. The keys are
   distinct but for the padding, so the order is the one sorted order. */
__device__ static void tk_sort_write(tk_shared &sh, uint32_t m, uint32_t cnt, int32_t k, const int32_t *__restrict__ so,
                                     int32_t *__restrict__ orow, int32_t *__restrict__ oloc, const tk_pgs *pg)
{
    const int tid = threadIdx.x;
    uint32_t P = 64;
    while (P < m) P <<= 1;
    for (uint32_t i = m + tid; i < P; i += TK_THREADS) sh.key[i] = DHS_TOPK_KEY_NONE;
    __syncthreads();
    tk_sort_regs(sh, P, 2, 64); /* sizes 2..64 whole */
    __syncthreads();
    for (uint32_t size = 128; size <= P; size <<= 1) {
        for (uint32_t stride = size >> 1; stride >= 64; stride >>= 1) {
            for (uint32_t t = tid; t < P / 2; t += TK_THREADS) {
                uint32_t a = 2 * t - (t & (stride - 1)), b = a + stride;
                bool desc = (a & size) == 0;
                uint64_t ka = sh.key[a], kb = sh.key[b];
                if (desc ? ka < kb : ka > kb) sh.key[a] = kb, sh.key[b] = ka;
            }
            __syncthreads();
        }
        tk_sort_regs(sh, P, size, size); /* strides 32..1 of this size */
        __syncthreads();
    }
    /* the answer, with the fused lookup for the selected positions only */
    for (uint32_t i = tid; i < (uint32_t)k; i += TK_THREADS) {
        if (i < cnt) {
            const uint32_t pos = dhs_topk_key_pos(sh.key[i]);
            orow[i] = (int32_t)pos;
            if (oloc) oloc[i] = __ldg(so + pos);
            if (pg) tk_pages_write(pg, i, (int32_t)pos);
        } else {
            orow[i] = -1;
            if (oloc) oloc[i] = -1;
            if (pg) tk_pages_write(pg, i, -1);
        }
    }
}

/* the whole top-k of one query by one block (the algorithm above): s its n
   scores, so its slot table (NULL: no lookup), orow/oloc its k outputs */
__device__ static void tk_query(tk_shared &sh, const float *__restrict__ s, uint32_t n, int32_t k,
                                const int32_t *__restrict__ so, int32_t *__restrict__ orow, int32_t *__restrict__ oloc,
                                int32_t *nanp, const tk_pgs *pg)
{
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const uint32_t cnt = n < (uint32_t)k ? n : (uint32_t)k;
    uint32_t m = cnt; /* keys kept in sh.key for the sort */
    if (tid == 0) sh.nan = 0, sh.gt = 0, sh.eq = 0;
    __syncthreads();

    if (n <= (uint32_t)k) {
        for (uint32_t i = tid; i < n; i += TK_THREADS) {
            float f = s[i];
            if (dhs_topk_is_nan_bits(__float_as_uint(f))) atomicAdd(&sh.nan, 1u);
            sh.key[i] = dhs_topk_key(f, i);
        }
    } else {
        /* 1. radix select on the score key */
        uint32_t prefix = 0, pmask = 0, rem = (uint32_t)k;
        for (int pass = 0; pass < 3; pass++) {
            const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
            const uint32_t nb = pass == 2 ? 1024u : 2048u;
            for (uint32_t b = tid; b < TK_BINS; b += TK_THREADS) sh.hist[b] = 0;
            __syncthreads();
            for_each_score(s, n, [&](uint32_t, float f) {
                if (pass == 0 && dhs_topk_is_nan_bits(__float_as_uint(f))) atomicAdd(&sh.nan, 1u);
                uint32_t key = dhs_topk_score_key(f);
                if ((key & pmask) == prefix) atomicAdd(&sh.hist[(key >> shift) & (nb - 1)], 1u);
            });
            __syncthreads();
            if (sh.nan) break; /* uniform: every thread sees the same count after the barrier */
            /* suffix scan over the bins, highest digit first: thread t owns bins
               nb-1-t*per .. nb-per-t*per */
            const uint32_t per = nb / TK_THREADS;
            uint32_t local = 0;
            for (uint32_t j = 0; j < per; j++) local += sh.hist[nb - 1 - tid * per - j];
            uint32_t above = block_excl_scan(local, sh.warp);
            if (above < rem && rem <= above + local) {
                for (uint32_t j = 0; j < per; j++) {
                    uint32_t b = nb - 1 - tid * per - j, h = sh.hist[b];
                    if (rem <= above + h) {
                        sh.digit = b;
                        sh.rem = rem - above;
                        break;
                    }
                    above += h;
                }
            }
            __syncthreads();
            prefix |= sh.digit << shift;
            pmask |= (nb - 1) << shift;
            rem = sh.rem;
            __syncthreads();
        }
        if (!sh.nan) {
            /* 2. compaction: > Ts to [0, c_gt), == Ts appended after while room */
            const uint32_t ts = prefix, need = rem, c_gt = (uint32_t)k - rem;
            for_each_score(s, n, [&](uint32_t i, float f) {
                uint32_t key = dhs_topk_score_key(f);
                if (key > ts) {
                    sh.key[atomicAdd(&sh.gt, 1u)] = make_key(key, i);
                } else if (key == ts) {
                    uint32_t e = atomicAdd(&sh.eq, 1u);
                    if (c_gt + e < TK_BUF) sh.key[c_gt + e] = make_key(key, i);
                }
            });
            __syncthreads();
            const uint32_t eq = sh.eq;
            if (c_gt + eq <= TK_BUF) {
                m = c_gt + eq; /* every tie kept: the sort orders them by position */
            } else {
                /* too many ties: rank them by position, tile by tile, keep rank < need */
                m = (uint32_t)k;
                uint32_t tie_base = 0;
                for (uint32_t base = 0; base < n; base += TK_THREADS) {
                    const uint32_t i = base + tid;
                    const bool isq = i < n && dhs_topk_score_key(__ldg(s + i)) == ts;
                    const uint32_t bal = __ballot_sync(0xffffffffu, isq);
                    if (lane == 0) sh.warp[w] = __popc(bal);
                    __syncthreads();
                    uint32_t woff = 0, tile = 0;
                    for (int x = 0; x < TK_WARPS; x++) {
                        uint32_t c = sh.warp[x];
                        woff += x < w ? c : 0;
                        tile += c;
                    }
                    if (isq) {
                        uint32_t r = tie_base + woff + __popc(bal & ((1u << lane) - 1u));
                        if (r < need) sh.key[c_gt + r] = make_key(ts, i);
                    }
                    tie_base += tile;
                    if (tie_base >= need) break; /* uniform: tie_base is the same in every thread */
                    __syncthreads();             /* sh.warp is rewritten by the next tile */
                }
            }
        }
    }
    __syncthreads();
    if (tid == 0 && nanp) *nanp = (int32_t)sh.nan;
    if (sh.nan) {
        tk_write_none(k, orow, oloc, pg);
        return;
    }
    tk_sort_write(sh, m, cnt, k, so, orow, oloc, pg);
}

__global__ void __launch_bounds__(TK_THREADS) topk_fused_kernel(const float *__restrict__ scores, int64_t score_ld,
                                                                uint32_t n_max, const int64_t *__restrict__ n_of,
                                                                int64_t n_add, int32_t k,
                                                                const int32_t *__restrict__ slot_of, int64_t slot_ld,
                                                                int32_t *__restrict__ out_rows, int32_t *__restrict__ out_locs,
                                                                int32_t *__restrict__ nan_count)
{
    __shared__ tk_shared sh;
    const int q = blockIdx.x;
    /* this query's candidate count (topk_spec.h "per-query candidate counts"); the
       same value in every thread, so the early return is block-uniform */
    const int64_t nq = dhs_topk_query_n(n_of, n_add, (int64_t)n_max, q);
    if (nq < 0) { /* skipped query: outputs untouched */
        if (threadIdx.x == 0 && nan_count) nan_count[q] = 0;
        return;
    }
    const int32_t *so = slot_of ? slot_of + (int64_t)q * slot_ld : nullptr;
    tk_query(sh, scores + (int64_t)q * score_ld, (uint32_t)nq, k, so, out_rows + (int64_t)q * k,
             so ? out_locs + (int64_t)q * k : nullptr, nan_count ? nan_count + q : nullptr, nullptr);
}

/* ------------------------------------------------------------------ split top-k
 * The same selection spread over many blocks per query (topk_spec.h
 * dhs_cuda_topk_split_n): one block per query reads its 100K scores with one
 * SM's bandwidth (four passes), so at the model's batches (2-20 queries) most
 * of the GPU idles. Three launches, every score read twice in all:
 *   ts_hist (grid: chunks x queries, 256 threads): the 12-bit histogram of the
 *     top of each score key (sign, exponent, 3 mantissa bits), per chunk in
 *     shared memory, added into the query's global histogram; NaNs counted.
 *     The query's last chunk to arrive (atomic counter after a fence) picks
 *     the bin D holding the k-th best key and how many of its keys are needed
 *     (rem), then zeroes the histogram and the counter.
 *   ts_collect (same grid): keys with bin > D (k - rem of them) appended to the
 *     query's "sure" list, keys with bin == D to its tie list (warp-aggregated
 *     atomics; the tie list holds TS_TIECAP, the count goes on).
 *   ts_final (one block of 1024 per query): the sure keys plus the rem best of
 *     the tie list (an MSD radix select over the remaining 52 key bits, 11/11/
 *     10/10/10, stopping at the first bin that is taken whole) into shared
 *     memory, the bitonic sort and the answer of tk_sort_write. A tie list past
 *     its capacity (more than TS_TIECAP keys in one 1/8-octave bin) falls back
 *     to tk_query, the one-block algorithm, for that query.
 * The keys and their order are the fused kernel's, so the output is the same
 * bit for bit. The workspace (dhs_cuda_topk_split_ws) is zero before a call and
 * zero after it: graph-capturable, no memset per call. It is an array of one
 * ts_qws per query, so query q's state and histogram are at the same place
 * whatever the call's batch. */
#define TS_THREADS 256
#define TS_PER 16
#define TS_CHUNK (TS_THREADS * TS_PER)
#define TS_BINS 4096
#define TS_SHIFT 20
#define TS_TIECAP 16384

struct ts_state {
    uint32_t arrive, digit, rem, nan, gt, eq, pad[2];
};

/* one query's part of the workspace. Query q's part sits at q * sizeof(ts_qws)
   whatever the call's batch, so a call with more queries than the last finds
   every state and histogram it uses zero (a layout carved by batch would put
   them over the last call's sure and tie lists). */
struct ts_qws {
    ts_state st;
    uint32_t hist[TS_BINS];
    uint64_t sure[DHS_TOPK_MAX_K];
    uint64_t tie[TS_TIECAP];
};

static_assert(sizeof(ts_qws) % 16 == 0, "every query's part 16-byte aligned");

static size_t ts_ws_bytes(int64_t batch) { return (size_t)batch * sizeof(ts_qws); }

/* this block's TS_PER scores (chunk blockIdx.x of query blockIdx.y), loaded before use */
__device__ static void ts_load(const float *__restrict__ s, uint32_t n, uint32_t c0, float (&v)[TS_PER])
{
#pragma unroll
    for (int j = 0; j < TS_PER; j++) {
        const uint32_t i = c0 + j * TS_THREADS + threadIdx.x;
        v[j] = i < n ? __ldg(s + i) : 0.0f;
    }
}

__global__ void __launch_bounds__(TS_THREADS) ts_hist_kernel(const float *__restrict__ scores, int64_t score_ld,
                                                             uint32_t n_max, const int64_t *__restrict__ n_of,
                                                             int64_t n_add, int32_t k, ts_qws *w)
{
    __shared__ uint32_t hist[TS_BINS];
    __shared__ uint32_t wsum[TS_THREADS / 32];
    __shared__ uint32_t s_nan, s_last;
    const int q = blockIdx.y, tid = threadIdx.x, lane = tid & 31, wp = tid >> 5;
    const int64_t nq = dhs_topk_query_n(n_of, n_add, (int64_t)n_max, q);
    if (nq <= (int64_t)k) return; /* skipped, or every candidate selected: ts_final alone */
    const uint32_t n = (uint32_t)nq, c0 = blockIdx.x * TS_CHUNK;
    if (c0 >= n) return; /* past this query's candidates: not counted as a chunk */
    const uint32_t nchunks = (n + TS_CHUNK - 1) / TS_CHUNK;
    for (int b = tid; b < TS_BINS; b += TS_THREADS) hist[b] = 0;
    if (tid == 0) s_nan = 0;
    float v[TS_PER];
    ts_load(scores + (int64_t)q * score_ld, n, c0, v);
    __syncthreads();
    uint32_t my_nan = 0;
#pragma unroll
    for (int j = 0; j < TS_PER; j++) {
        const uint32_t i = c0 + j * TS_THREADS + tid;
        if (i >= n) continue;
        if (dhs_topk_is_nan_bits(__float_as_uint(v[j]))) my_nan++;
        else atomicAdd(&hist[dhs_topk_score_key(v[j]) >> TS_SHIFT], 1u);
    }
    if (my_nan) atomicAdd(&s_nan, my_nan);
    __syncthreads();
    uint32_t *gh = w[q].hist;
    for (int b = tid; b < TS_BINS; b += TS_THREADS)
        if (hist[b]) atomicAdd(gh + b, hist[b]);
    if (tid == 0 && s_nan) atomicAdd(&w[q].st.nan, s_nan);
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        s_last = atomicAdd(&w[q].st.arrive, 1u) == nchunks - 1;
    }
    __syncthreads();
    if (!s_last) return;
    /* the query's last chunk: every other chunk's counts are in gh */
    __threadfence();
    const bool bad = __ldcg(&w[q].st.nan) != 0;
    /* suffix scan, highest bin first: thread t owns bins TS_BINS-1-t*per-j */
    const int per = TS_BINS / TS_THREADS;
    uint32_t h[TS_BINS / TS_THREADS], local = 0;
#pragma unroll
    for (int j = 0; j < per; j++) {
        h[j] = __ldcg(gh + TS_BINS - 1 - tid * per - j);
        local += h[j];
    }
    uint32_t inc = local;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t t = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += t;
    }
    if (lane == 31) wsum[wp] = inc;
    __syncthreads(); /* every thread has read its bins: zero them for the next call */
    for (int b = tid; b < TS_BINS; b += TS_THREADS) gh[b] = 0;
    uint32_t above = inc - local;
    for (int x = 0; x < wp; x++) above += wsum[x];
    const uint32_t rem = (uint32_t)k;
    if (!bad && above < rem && rem <= above + local) {
        bool found = false;
#pragma unroll
        for (int j = 0; j < per; j++) { /* unrolled: h stays in registers */
            if (!found && rem <= above + h[j]) {
                w[q].st.digit = (uint32_t)(TS_BINS - 1 - tid * per - j);
                w[q].st.rem = rem - above;
                found = true;
            }
            above += h[j];
        }
    }
    if (tid == 0) w[q].st.arrive = 0;
}

/* append the keys where take is set to list[base..), base from one atomic per warp */
__device__ static void ts_append(bool take, uint64_t key, uint32_t *counter, uint64_t *list, uint32_t cap)
{
    const int lane = threadIdx.x & 31;
    const uint32_t bal = __ballot_sync(0xffffffffu, take);
    if (!bal) return;
    const int leader = __ffs(bal) - 1;
    uint32_t base = 0;
    if (lane == leader) base = atomicAdd(counter, (uint32_t)__popc(bal));
    base = __shfl_sync(0xffffffffu, base, leader);
    if (take) {
        const uint32_t e = base + (uint32_t)__popc(bal & ((1u << lane) - 1u));
        if (e < cap) list[e] = key;
    }
}

__global__ void __launch_bounds__(TS_THREADS) ts_collect_kernel(const float *__restrict__ scores, int64_t score_ld,
                                                                uint32_t n_max, const int64_t *__restrict__ n_of,
                                                                int64_t n_add, int32_t k, ts_qws *w)
{
    const int q = blockIdx.y, tid = threadIdx.x;
    const int64_t nq = dhs_topk_query_n(n_of, n_add, (int64_t)n_max, q);
    if (nq <= (int64_t)k) return;
    const uint32_t n = (uint32_t)nq, c0 = blockIdx.x * TS_CHUNK;
    if (c0 >= n || w[q].st.nan) return; /* uniform over the block */
    const uint32_t d = w[q].st.digit;
    float v[TS_PER];
    ts_load(scores + (int64_t)q * score_ld, n, c0, v);
    uint64_t *sure = w[q].sure, *tie = w[q].tie;
#pragma unroll
    for (int j = 0; j < TS_PER; j++) {
        const uint32_t i = c0 + j * TS_THREADS + tid; /* every lane runs every j: the ballots are warp-wide */
        const uint32_t key = dhs_topk_score_key(v[j]), dig = key >> TS_SHIFT;
        const uint64_t k64 = ((uint64_t)key << 32) | (uint64_t)(0xffffffffu - i);
        ts_append(i < n && dig > d, k64, &w[q].st.gt, sure, DHS_TOPK_MAX_K);
        ts_append(i < n && dig == d, k64, &w[q].st.eq, tie, TS_TIECAP);
    }
}

/* one radix pass's pick over sh.hist[0..nb): the bin holding the rem-th best,
   into sh.digit, the count still needed inside it into sh.rem, its count into sh.cnt */
__device__ static void ts_pick(tk_shared &sh, uint32_t nb, uint32_t rem)
{
    const int tid = threadIdx.x;
    const uint32_t per = nb / TK_THREADS;
    uint32_t local = 0;
    for (uint32_t j = 0; j < per; j++) local += sh.hist[nb - 1 - tid * per - j];
    uint32_t above = block_excl_scan(local, sh.warp);
    if (above < rem && rem <= above + local) {
        for (uint32_t j = 0; j < per; j++) {
            uint32_t b = nb - 1 - tid * per - j, h = sh.hist[b];
            if (rem <= above + h) {
                sh.digit = b;
                sh.rem = rem - above;
                sh.cnt = h;
                break;
            }
            above += h;
        }
    }
    __syncthreads();
}

__global__ void __launch_bounds__(TK_THREADS) ts_final_kernel(const float *__restrict__ scores, int64_t score_ld,
                                                              uint32_t n_max, const int64_t *__restrict__ n_of,
                                                              int64_t n_add, int32_t k,
                                                              const int32_t *__restrict__ slot_of, int64_t slot_ld,
                                                              int32_t *__restrict__ out_rows, int32_t *__restrict__ out_locs,
                                                              int32_t *__restrict__ nan_count, ts_qws *w,
                                                              const __grid_constant__ dhs_topk_pages pgv, int use_pg)
{
    __shared__ tk_shared sh;
    __shared__ tk_pgs pgs;
    const int q = blockIdx.x, tid = threadIdx.x;
    if (use_pg) tk_pgs_set(&pgs, pgv, q, k); /* read after the first barrier of every path below */
    const tk_pgs *pg = use_pg ? &pgs : nullptr;
    const int64_t nq = dhs_topk_query_n(n_of, n_add, (int64_t)n_max, q);
    if (nq < 0) {
        if (tid == 0 && nan_count) nan_count[q] = 0;
        return;
    }
    const float *s = scores + (int64_t)q * score_ld;
    const int32_t *so = slot_of ? slot_of + (int64_t)q * slot_ld : nullptr;
    int32_t *orow = out_rows + (int64_t)q * k, *oloc = so ? out_locs + (int64_t)q * k : nullptr;
    int32_t *nanp = nan_count ? nan_count + q : nullptr;
    if (nq <= (int64_t)k) { /* no selection: the one-block path reads its n <= k scores */
        tk_query(sh, s, (uint32_t)nq, k, so, orow, oloc, nanp, pg);
        return;
    }
    ts_state *st = &w[q].st;
    const uint32_t nan = st->nan, gt = st->gt, eq = st->eq, need = st->rem;
    __syncthreads(); /* every thread has read the state before thread 0 clears it */
    if (tid == 0) st->nan = 0, st->gt = 0, st->eq = 0, st->digit = 0, st->rem = 0;
    if (nan) {
        if (tid == 0 && nanp) *nanp = (int32_t)nan;
        tk_write_none(k, orow, oloc, pg);
        return;
    }
    if (eq > TS_TIECAP) { /* the tie list overflowed: the one-block algorithm for this query */
        tk_query(sh, s, (uint32_t)nq, k, so, orow, oloc, nanp, pg);
        return;
    }
    if (tid == 0 && nanp) *nanp = 0;
    const uint64_t *sure = w[q].sure, *tie = w[q].tie;
    for (uint32_t i = tid; i < gt; i += TK_THREADS) sh.key[i] = __ldcg(sure + i);
    if (tid == 0) sh.eq = 0;
    __syncthreads();
    /* the need best of the eq tie keys (they share their top 12 bits): MSD radix select
       over bits 51..0, stopping at the first bin taken whole */
    uint64_t prefix = 0, pmask = 0;
    uint32_t rem = need;
    if (need < eq) {
        static const int shifts[5] = {41, 30, 20, 10, 0};
        for (int pass = 0; pass < 5; pass++) {
            const int shift = shifts[pass];
            const uint32_t nb = pass < 2 ? 2048u : 1024u;
            for (uint32_t b = tid; b < TK_BINS; b += TK_THREADS) sh.hist[b] = 0;
            __syncthreads();
            for (uint32_t i = tid; i < eq; i += TK_THREADS) {
                const uint64_t key = __ldcg(tie + i);
                if ((key & pmask) == prefix) atomicAdd(&sh.hist[(uint32_t)(key >> shift) & (nb - 1)], 1u);
            }
            __syncthreads();
            ts_pick(sh, nb, rem);
            prefix |= (uint64_t)sh.digit << shift;
            pmask |= (uint64_t)(nb - 1) << shift;
            const uint32_t whole = sh.cnt == sh.rem;
            rem = sh.rem;
            __syncthreads();
            if (whole) break; /* uniform */
        }
    }
    /* keys >= prefix (its lower bits zero): exactly need of them */
    const uint64_t T = prefix & pmask;
    for (uint32_t i = tid; i < eq; i += TK_THREADS) {
        const uint64_t key = __ldcg(tie + i);
        if ((key & pmask) >= T) sh.key[gt + atomicAdd(&sh.eq, 1u)] = key;
    }
    __syncthreads();
    tk_sort_write(sh, gt + need, (uint32_t)k, k, so, orow, oloc, pg);
}

__global__ void topk_lookup_kernel(const int32_t *__restrict__ rows, int32_t batch, int32_t k, const int32_t *__restrict__ slot_of,
                                   int64_t slot_ld, int32_t *__restrict__ locs)
{
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (int64_t)batch * k) return;
    int64_t q = e / k;
    int32_t r = rows[e];
    locs[e] = r < 0 ? -1 : slot_of[q * slot_ld + r];
}

extern "C" int dhs_cuda_topk_fused(const float *scores, int64_t score_ld, int32_t batch, int64_t n, int32_t k,
                                   const int32_t *slot_of, int64_t slot_ld, int32_t *out_rows, int32_t *out_locs,
                                   int32_t *nan_count, void *stream)
{
    if (batch < 0 || n < 0 || n > INT32_MAX || k < 1 || k > DHS_TOPK_MAX_K || !out_rows || (n > 0 && !scores) ||
        (slot_of && !out_locs) || score_ld < (batch > 1 ? n : 0) || slot_ld < 0)
        return -1;
    if (batch == 0) return 0;
    topk_fused_kernel<<<batch, TK_THREADS, 0, (cudaStream_t)stream>>>(scores, score_ld, (uint32_t)n, nullptr, 0, k, slot_of,
                                                                      slot_ld, out_rows, out_locs, nan_count);
    return (int)cudaGetLastError();
}

extern "C" int dhs_cuda_topk_fused_n(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of,
                                     int64_t n_add, int32_t k, const int32_t *slot_of, int64_t slot_ld, int32_t *out_rows,
                                     int32_t *out_locs, int32_t *nan_count, void *stream)
{
    if (batch < 0 || n < 0 || n > INT32_MAX || k < 1 || k > DHS_TOPK_MAX_K || !out_rows || (n > 0 && !scores) ||
        (slot_of && !out_locs) || score_ld < (batch > 1 ? n : 0) || slot_ld < 0 || n_add < 0)
        return -1;
    if (batch == 0) return 0;
    topk_fused_kernel<<<batch, TK_THREADS, 0, (cudaStream_t)stream>>>(scores, score_ld, (uint32_t)n, n_of, n_add, k, slot_of,
                                                                      slot_ld, out_rows, out_locs, nan_count);
    return (int)cudaGetLastError();
}

extern "C" int dhs_cuda_topk_lookup(const int32_t *rows, int32_t batch, int32_t k, const int32_t *slot_of, int64_t slot_ld,
                                    int32_t *locs, void *stream)
{
    if (batch < 0 || k < 1 || !rows || !slot_of || !locs || slot_ld < 0) return -1;
    int64_t total = (int64_t)batch * k;
    if (total == 0) return 0;
    topk_lookup_kernel<<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)stream>>>(rows, batch, k, slot_of, slot_ld, locs);
    return (int)cudaGetLastError();
}

/* the split top-k's first two launches (skipped where no query has more than k candidates) */
static void ts_select(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of, int64_t n_add,
                      int32_t k, ts_qws *w, cudaStream_t st)
{
    if (n <= k) return;
    const dim3 grid((unsigned)((n + TS_CHUNK - 1) / TS_CHUNK), (unsigned)batch);
    ts_hist_kernel<<<grid, TS_THREADS, 0, st>>>(scores, score_ld, (uint32_t)n, n_of, n_add, k, w);
    ts_collect_kernel<<<grid, TS_THREADS, 0, st>>>(scores, score_ld, (uint32_t)n, n_of, n_add, k, w);
}

extern "C" size_t dhs_cuda_topk_split_ws(int32_t batch) { return batch < 0 ? 0 : ts_ws_bytes(batch); }

extern "C" int dhs_cuda_topk_split_n(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of,
                                     int64_t n_add, int32_t k, const int32_t *slot_of, int64_t slot_ld, int32_t *out_rows,
                                     int32_t *out_locs, int32_t *nan_count, void *ws, size_t ws_bytes, void *stream)
{
    if (batch < 0 || batch > 65535 || n < 0 || n > INT32_MAX || k < 1 || k > DHS_TOPK_MAX_K || !out_rows ||
        (n > 0 && !scores) || (slot_of && !out_locs) || score_ld < (batch > 1 ? n : 0) || slot_ld < 0 || n_add < 0 ||
        !ws || ((uintptr_t)ws & 15) || ws_bytes < ts_ws_bytes(batch))
        return -1;
    if (batch == 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    ts_qws *const w = (ts_qws *)ws;
    ts_select(scores, score_ld, batch, n, n_of, n_add, k, w, st);
    dhs_topk_pages none;
    memset(&none, 0, sizeof none);
    ts_final_kernel<<<batch, TK_THREADS, 0, st>>>(scores, score_ld, (uint32_t)n, n_of, n_add, k, slot_of, slot_ld, out_rows,
                                                  out_locs, nan_count, w, none, 0);
    return (int)cudaGetLastError();
}

extern "C" int dhs_cuda_topk_split_pages(const float *scores, int64_t score_ld, int32_t batch, int64_t n, const int64_t *n_of,
                                         int64_t n_add, int32_t k, const dhs_topk_pages *pg, int32_t *out_rows,
                                         int32_t *nan_count, void *ws, size_t ws_bytes, void *stream)
{
    if (batch < 0 || batch > 65535 || n < 0 || n > INT32_MAX || k < 1 || k > DHS_TOPK_MAX_K || !out_rows ||
        (n > 0 && !scores) || score_ld < (batch > 1 ? n : 0) || n_add < 0 || !ws || ((uintptr_t)ws & 15) ||
        ws_bytes < ts_ws_bytes(batch) || !pg || pg->nsrc < 1 || pg->nsrc > DHS_TOPK_PAGES_MAX_SRC || !pg->tab ||
        !pg->locs || pg->page_rows < 1 || pg->q_per_req < 1 || pg->page_stride < 0 || pg->src_stride < 0 ||
        pg->loc_stride < 0)
        return -1;
    if (batch == 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    ts_qws *const w = (ts_qws *)ws;
    ts_select(scores, score_ld, batch, n, n_of, n_add, k, w, st);
    ts_final_kernel<<<batch, TK_THREADS, 0, st>>>(scores, score_ld, (uint32_t)n, n_of, n_add, k, nullptr, 0, out_rows,
                                                  nullptr, nan_count, w, *pg, 1);
    return (int)cudaGetLastError();
}
