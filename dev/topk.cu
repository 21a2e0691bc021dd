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
 *   3. bitonic sort of the kept 64-bit keys in shared memory, descending (keys
 *      are distinct, so this is the reference order); the first min(n, k) are
 *      the answer. The hot-slot lookup is fused here: slot_of[pos] is read for
 *      those k positions only - never for the other n - k candidates.
 * n <= k skips 1-2. Per-query counts (dhs_cuda_topk_fused_n): block q runs the
 * same algorithm over its own n_q candidates; a skipped query returns at once.
 * Loads are float4 when the query's scores are 16-byte
 * aligned, four of them in flight per thread.
 */
#include <cuda_runtime.h>
#include <stdint.h>

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

__global__ void __launch_bounds__(TK_THREADS) topk_fused_kernel(const float *__restrict__ scores, int64_t score_ld,
                                                                uint32_t n_max, const int64_t *__restrict__ n_of,
                                                                int64_t n_add, int32_t k,
                                                                const int32_t *__restrict__ slot_of, int64_t slot_ld,
                                                                int32_t *__restrict__ out_rows, int32_t *__restrict__ out_locs,
                                                                int32_t *__restrict__ nan_count)
{
    __shared__ tk_shared sh;
    const int q = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    /* this query's candidate count (topk_spec.h "per-query candidate counts"); the
       same value in every thread, so the early return is block-uniform */
    const int64_t nq = dhs_topk_query_n(n_of, n_add, (int64_t)n_max, q);
    if (nq < 0) { /* skipped query: outputs untouched */
        if (tid == 0 && nan_count) nan_count[q] = 0;
        return;
    }
    const uint32_t n = (uint32_t)nq;
    const float *s = scores + (int64_t)q * score_ld;
    const int32_t *so = slot_of ? slot_of + (int64_t)q * slot_ld : nullptr;
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
    if (tid == 0 && nan_count) nan_count[q] = (int32_t)sh.nan;
    int32_t *orow = out_rows + (int64_t)q * k;
    int32_t *oloc = so ? out_locs + (int64_t)q * k : nullptr;
    if (sh.nan) {
        for (int32_t i = tid; i < k; i += TK_THREADS) {
            orow[i] = -1;
            if (oloc) oloc[i] = -1;
        }
        return;
    }
    /* 3. bitonic sort, descending, of P = next power of two >= m keys */
    uint32_t P = 1;
    while (P < m) P <<= 1;
    for (uint32_t i = m + tid; i < P; i += TK_THREADS) sh.key[i] = DHS_TOPK_KEY_NONE;
    __syncthreads();
    for (uint32_t size = 2; size <= P; size <<= 1) {
        for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
            for (uint32_t t = tid; t < P / 2; t += TK_THREADS) {
                uint32_t a = 2 * t - (t & (stride - 1)), b = a + stride;
                bool desc = (a & size) == 0;
                uint64_t ka = sh.key[a], kb = sh.key[b];
                if (desc ? ka < kb : ka > kb) sh.key[a] = kb, sh.key[b] = ka;
            }
            __syncthreads();
        }
    }
    /* the answer, with the fused lookup for the selected positions only */
    for (uint32_t i = tid; i < (uint32_t)k; i += TK_THREADS) {
        if (i < cnt) {
            const uint32_t pos = dhs_topk_key_pos(sh.key[i]);
            orow[i] = (int32_t)pos;
            if (oloc) oloc[i] = __ldg(so + pos);
        } else {
            orow[i] = -1;
            if (oloc) oloc[i] = -1;
        }
    }
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
