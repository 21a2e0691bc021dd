/* topk.cu - fused top-k + hot-slot lookup (FlashOffloading "LIM") on the GPU.
 *
 * One block of 1024 threads per query. The order is topk_spec.h's 64-bit key
 * (score key << 32 | ~position): higher score first, then lower position,
 * -0 == +0, NaN rejected - bit for bit the reference model's rule.
 *
 *   1. radix select on the 32-bit score key: three histogram passes over the
 *      candidates (11, 11, 10 bits; 2048 bins in shared memory) fix the score
 *      key Ts of the k-th best candidate and `need`, how many candidates with
 *      score key == Ts are selected (the rest of the k have score key > Ts).
 *      Pass 1 also counts NaNs: a query with any NaN writes -1 everywhere.
 *   2. compaction in position order, tile by tile: a candidate with key > Ts
 *      takes a slot from a shared counter; a candidate with key == Ts takes the
 *      next tie rank (warp ballots + a block scan, so ranks follow positions) and
 *      is kept when its rank < need - the lowest positions win, the reference
 *      tie rule. Here, and only for the k kept candidates, slot_of[pos] is read
 *      and stored beside the 64-bit key (the fused lookup: k reads, not n).
 *   3. bitonic sort of the (key, slot) pairs in shared memory, descending;
 *      keys are distinct, so the order is the reference order; write rows and
 *      locations.
 * n <= k skips 1-2: every candidate is selected.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/topk_spec.h"

#define TK_THREADS 1024
#define TK_WARPS (TK_THREADS / 32)
#define TK_BINS 2048

struct tk_shared {
    uint64_t key[DHS_TOPK_MAX_K];
    int32_t val[DHS_TOPK_MAX_K];
    uint32_t hist[TK_BINS];
    uint32_t warp[TK_WARPS];
    uint32_t nan;
    uint32_t digit, rem; /* result of one radix pass */
    uint32_t gt;         /* compaction: candidates with key > Ts placed */
};

/* exclusive block scan of one value per thread (all TK_THREADS threads call it) */
__device__ static uint32_t block_excl_scan(uint32_t v, uint32_t *warp_sums, uint32_t *total)
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
        if (lane == 31) *total = si;
    }
    __syncthreads();
    uint32_t r = warp_sums[w] + inc - v;
    __syncthreads(); /* warp_sums reusable after return */
    return r;
}

__global__ void __launch_bounds__(TK_THREADS) topk_fused_kernel(const float *__restrict__ scores, int64_t score_ld, uint32_t n,
                                                                int32_t k, const int32_t *__restrict__ slot_of, int64_t slot_ld,
                                                                int32_t *__restrict__ out_rows, int32_t *__restrict__ out_locs,
                                                                int32_t *__restrict__ nan_count)
{
    __shared__ tk_shared sh;
    __shared__ uint32_t scan_total;
    const int q = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const float *s = scores + (int64_t)q * score_ld;
    const int32_t *so = slot_of ? slot_of + (int64_t)q * slot_ld : nullptr;
    const uint32_t cnt = n < (uint32_t)k ? n : (uint32_t)k;
    if (tid == 0) sh.nan = 0, sh.gt = 0;
    __syncthreads();

    if (n <= (uint32_t)k) {
        for (uint32_t i = tid; i < n; i += TK_THREADS) {
            float f = s[i];
            if (dhs_topk_is_nan_bits(__float_as_uint(f))) atomicAdd(&sh.nan, 1u);
            sh.key[i] = dhs_topk_key(f, i);
            sh.val[i] = so ? so[i] : -1;
        }
    } else {
        /* 1. radix select on the score key */
        uint32_t prefix = 0, pmask = 0, rem = (uint32_t)k;
        for (int pass = 0; pass < 3; pass++) {
            const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
            const uint32_t nb = pass == 2 ? 1024u : 2048u;
            for (uint32_t b = tid; b < TK_BINS; b += TK_THREADS) sh.hist[b] = 0;
            __syncthreads();
            uint32_t i = tid;
            for (; i + 3 * TK_THREADS < n; i += 4 * TK_THREADS) {
                float f[4];
#pragma unroll
                for (int j = 0; j < 4; j++) f[j] = __ldg(s + i + j * TK_THREADS);
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    uint32_t u = __float_as_uint(f[j]);
                    if (pass == 0 && dhs_topk_is_nan_bits(u)) atomicAdd(&sh.nan, 1u);
                    uint32_t key = dhs_topk_score_key(f[j]);
                    if ((key & pmask) == prefix) atomicAdd(&sh.hist[(key >> shift) & (nb - 1)], 1u);
                }
            }
            for (; i < n; i += TK_THREADS) {
                float f = __ldg(s + i);
                if (pass == 0 && dhs_topk_is_nan_bits(__float_as_uint(f))) atomicAdd(&sh.nan, 1u);
                uint32_t key = dhs_topk_score_key(f);
                if ((key & pmask) == prefix) atomicAdd(&sh.hist[(key >> shift) & (nb - 1)], 1u);
            }
            __syncthreads();
            if (sh.nan) break; /* uniform: every thread sees the same count after the barrier */
            /* suffix scan over the bins, highest digit first: thread t owns bins
               nb-1-t*per .. nb-per-t*per */
            const uint32_t per = nb / TK_THREADS;
            uint32_t local = 0;
            for (uint32_t j = 0; j < per; j++) local += sh.hist[nb - 1 - tid * per - j];
            uint32_t above = block_excl_scan(local, sh.warp, &scan_total);
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
            /* 2. ordered compaction with the fused lookup */
            const uint32_t ts = prefix, need = rem, c_gt = (uint32_t)k - rem;
            uint32_t tie_base = 0;
            for (uint32_t base = 0; base < n; base += TK_THREADS) {
                const uint32_t i = base + tid;
                float f = i < n ? __ldg(s + i) : 0.0f;
                uint32_t key = i < n ? dhs_topk_score_key(f) : 0u;
                if (key > ts) {
                    uint32_t o = atomicAdd(&sh.gt, 1u);
                    sh.key[o] = ((uint64_t)key << 32) | (uint64_t)(0xffffffffu - i);
                    sh.val[o] = so ? so[i] : -1;
                }
                const bool eq = key == ts && i < n;
                const uint32_t bal = __ballot_sync(0xffffffffu, eq);
                if (lane == 0) sh.warp[w] = __popc(bal);
                __syncthreads();
                uint32_t woff = 0, tile = 0;
                for (int x = 0; x < TK_WARPS; x++) {
                    uint32_t c = sh.warp[x];
                    woff += x < w ? c : 0;
                    tile += c;
                }
                if (eq) {
                    uint32_t r = tie_base + woff + __popc(bal & ((1u << lane) - 1u));
                    if (r < need) {
                        sh.key[c_gt + r] = ((uint64_t)key << 32) | (uint64_t)(0xffffffffu - i);
                        sh.val[c_gt + r] = so ? so[i] : -1;
                    }
                }
                tie_base += tile;
                __syncthreads(); /* every atomic of this tile done: sh.gt is final for the test */
                const int done = tie_base >= need && sh.gt >= c_gt;
                if (__syncthreads_and(done)) break; /* a barrier: nobody adds to sh.gt before all have read it */
            }
        }
    }
    __syncthreads();
    const bool bad = sh.nan != 0;
    if (tid == 0 && nan_count) nan_count[q] = (int32_t)sh.nan;
    int32_t *orow = out_rows + (int64_t)q * k;
    int32_t *oloc = out_locs ? out_locs + (int64_t)q * k : nullptr;
    if (bad) {
        for (int32_t i = tid; i < k; i += TK_THREADS) {
            orow[i] = -1;
            if (oloc && slot_of) oloc[i] = -1;
        }
        return;
    }
    /* 3. bitonic sort, descending, of P = next power of two >= cnt entries */
    uint32_t P = 1;
    while (P < cnt) P <<= 1;
    for (uint32_t i = cnt + tid; i < P; i += TK_THREADS) sh.key[i] = DHS_TOPK_KEY_NONE, sh.val[i] = -1;
    __syncthreads();
    for (uint32_t size = 2; size <= P; size <<= 1) {
        for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
            for (uint32_t t = tid; t < P / 2; t += TK_THREADS) {
                uint32_t a = 2 * t - (t & (stride - 1)), b = a + stride;
                bool desc = (a & size) == 0;
                uint64_t ka = sh.key[a], kb = sh.key[b];
                if (desc ? ka < kb : ka > kb) {
                    sh.key[a] = kb, sh.key[b] = ka;
                    int32_t v = sh.val[a];
                    sh.val[a] = sh.val[b], sh.val[b] = v;
                }
            }
            __syncthreads();
        }
    }
    for (uint32_t i = tid; i < (uint32_t)k; i += TK_THREADS) {
        bool ok = i < cnt;
        orow[i] = ok ? (int32_t)dhs_topk_key_pos(sh.key[i]) : -1;
        if (oloc && slot_of) oloc[i] = ok ? sh.val[i] : -1;
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
    topk_fused_kernel<<<batch, TK_THREADS, 0, (cudaStream_t)stream>>>(scores, score_ld, (uint32_t)n, k, slot_of, slot_ld,
                                                                      out_rows, out_locs, nan_count);
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
