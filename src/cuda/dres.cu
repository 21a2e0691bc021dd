/* dres.cu - the device resolver (core/dres_spec.h) as CUDA kernels. They make
 * exactly the decisions of the CPU loops in core/dres_cpu.c (same locations,
 * same copy list per request, same state after every call);
 * tests/cuda/test_dres_cuda.c checks that bit for bit after every call.
 *
 * Plan kernel (resolve), one block of DHS_DRES_THREADS (T) per round
 * position b, grid N (fixed; blocks b >= n_round write -1 locations):
 *   1. every thread takes entries e = tid + j T, DU of them at once, each
 *      kind of load issued for all DU before any is used (selection; then
 *      slot_of; then used and source 0's page table; then the stores), so a
 *      pass costs ~3 dependent round trips, not 3 per entry: validate, direct,
 *      hot lookup through slot_of; hits read used[q] and, only where it is
 *      not yet this round's epoch, protect it with atomicExch (the old value
 *      tells whether this call protected it first, so n_prot counts each slot
 *      once) and get their reference bit; the code goes to st->code[e] like
 *      the CPU's, and every entry that is not a miss gets its locations right
 *      away. Entries past the request's K queries only get -1 (a store-only
 *      loop). Misses are remembered as bit j of a register; a block without
 *      misses is done. The spec's int64 divisions (e / k, s % T, s / p, v / p,
 *      s / host_chunk_rows: all dividends < 2^31) are multiply-high + shifts
 *      with magic numbers made by the launcher (dres_divs);
 *   2. distinct misses: every miss entry claims its row with
 *      atomicMin(slot_of[s], INT32_MIN + e) (a missed row holds -1, larger
 *      than any claim), so the surviving claim names the first occurrence.
 *      Ranks in e order come from warp ballots per tile of T entries and one
 *      block-wide exclusive scan over the (tile, warp) counts; dmiss[rank] = s;
 *   3. free slots `filled + i`, then the CLOCK sweep by the whole block
 *      (sweep_block: within one pass the windowed rule of dres_sweep_window
 *      equals "the first `need` eligible slots from the hand", decided for up
 *      to 32 tiles of slots at once by ballots and a block scan); then all
 *      threads assign miss i -> free slot, victim or staging row and write
 *      the copy list (miss i, source si) at pair i * nsrc + si. Staging
 *      failures are the trailing misses (the CPU stops staging at the first),
 *      so pair indices stay dense;
 *   4. the misses' locations; stats by block reduction + one atomicAdd per
 *      counter.
 *   Steps 3 and 4 take DM misses of a thread at once the same way.
 * Few-miss path (FEW = true, the library's variant): a request with at most
 * FEW_MAX (64) miss entries replaces steps 2-4 by four barriers and two
 * dependent global round trips (see the comment at its code): a shared list
 * of the miss entries built after the pass, distinct misses ranked by warp 0
 * while every warp loads one chunk of the CLOCK sweep, the chunk decided by
 * every warp from shared window masks, then assignment and locations
 * together; then the block copies its own rows (a warp per pair, one more
 * barrier) unless plan_flags has DRES_PLAN_COPY_KERNEL, so the copy kernel
 * has nothing of that block to move.
 * The same variant also shortens step 1's chain: the descriptor header, round position b's
 * fields (prefetched at the library's layout), the selection and the request's counters are in flight
 * before the first barrier (cp.async / prefetch, no registers across it), slot_of is loaded with the
 * direct lookup, and a request's first call of the round takes the protecting atomic without reading
 * `used` first: four dependent round trips to the end of the hits instead of six to eight.
 * dres_state.plan_flags = DRES_PLAN_BLOCK_ONLY launches FEW = false (the previous step 1 too).
 *
 * Direct kernel (DRES_MODE_DIRECT, a round that cannot miss): instead of the plan and copy kernels. No
 * request can reach the hot cache, so a call maps selections to locations with no per-request decision
 * but the protection epoch: blocks (x, b) take U x DIRECT_T entries of round position b each, spread over
 * the SMs (the plan kernel's one block per request is bound by one SM's scattered loads), U the smallest
 * that keeps the grid within DIRECT_BLOCKS_PER_SM blocks per SM; a valid entry
 * not served directly is DHS_ERR_STATE; the last block (a ticket) stores the call's first error.
 * Limit: k_max * max_k <= DHS_DRES_MAX_ENTRIES (16384; <= 32 tiles of T).
 * T = 1024 by default (measured on the H200: 512 is faster at batch 256
 * with small B, one wave of two blocks per SM; 1024 is faster where slot_of
 * and used miss the L2).
 * Errors: each bad entry offers a key (b, phase, index, code) to an atomicMin
 * in `scratch`; the copy kernel launched after the plan kernel (always: one
 * block without payload) takes the smallest key and stores its code into
 * st->err when that is 0: the CPU's "first error in (request, entry) order
 * wins", independent of block scheduling.
 *
 * Copy kernel: a persistent grid; every block scans npairs[0, N) into
 * shared offsets, then warp w moves global rows w, w + W, ... (binary
 * search of the owning slot), up to DRES_CP_ROWS rows of a warp loaded
 * before the first store, 16-byte ld.global.nc loads (zero-copy from mapped
 * pinned host memory, or device memory for promotion) and st.global.cg
 * stores, like gather.cu. Parallelism scales with the total misses of the
 * call, not with the number of requests.
 */
#include <stdint.h>

#include "cuda/dres.cuh"
#include "cuda/ldst.cuh"
#include "dhs_cuda.h"

#define FULL 0xffffffffu
#define DT DHS_DRES_THREADS
#define NWARP (DT / 32)
#define CT DHS_DRES_COPY_THREADS
#define CWARP (CT / 32)
#define DRES_CP_ROWS 4 /* rows of one warp in flight together */
#define DRES_CP_VECS 2 /* 16-byte vectors per lane per pass (1 KiB per row per pass) */
#define NO_ERR 0xffffffffffffffffull
#define DIRECT_T 256 /* direct kernel: threads of a block */
#define DIRECT_BLOCKS_PER_SM 4 /* direct kernel: its grid at most this many blocks per SM (U entries a thread) */
static int g_direct_per_sm = DIRECT_BLOCKS_PER_SM; /* dhs_dres_set_direct_blocks (tests) */

/* The current device's SM count, asked of the runtime once per device: the direct launch needs it in every
   resolve call of a step (one atomic word per device, 0 until known) */
static cudaError_t sm_count(int *n)
{
    static int cache[64];
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    const int cached = dev >= 0 && dev < 64 ? __atomic_load_n(&cache[dev], __ATOMIC_RELAXED) : 0;
    if (cached > 0) {
        *n = cached;
        return cudaSuccess;
    }
    e = cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess && dev >= 0 && dev < 64) __atomic_store_n(&cache[dev], *n, __ATOMIC_RELAXED);
    return e;
}
static_assert(DHS_DRES_MAX_ENTRIES <= 32 * DT, "miss bits: one per tile of DT entries, 32 at most");

typedef struct dres_scratch {
    unsigned long long errkey; /* smallest error key of the last plan kernel, NO_ERR = none */
    unsigned long long ticket; /* plan blocks done (high 32 bits) and those that left pairs to the copy
                                  kernel (low 32 bits); the last plan block resets it to 0 */
    unsigned int skip;         /* set by the last plan block: no block left pairs, the copy kernel has
                                  nothing to move */
    unsigned int pad;
} dres_scratch;

/* ------------------------------------------------------------ helpers */

static __device__ __forceinline__ int warp_incl_scan(int v)
{
    const int lane = (int)(threadIdx.x & 31u);
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(FULL, v, o);
        if (lane >= o) v += t;
    }
    return v;
}

/* Exclusive scan of one value per thread over a block of nwarp warps;
   *total gets the sum. sw: shared [33]. Contains __syncthreads. */
static __device__ __forceinline__ int block_excl_scan(int v, int *sw, int nwarp, int *total)
{
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
    const int inc = warp_incl_scan(v);
    if (lane == 31) sw[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        const int w = lane < nwarp ? sw[lane] : 0;
        const int wi = warp_incl_scan(w);
        if (lane < nwarp) sw[lane] = wi - w;
        if (lane == 31) sw[32] = wi;
    }
    __syncthreads();
    const int r = sw[warp] + inc - v;
    *total = sw[32];
    __syncthreads();
    return r;
}

/* 4-byte asynchronous copy global -> shared (no register holds the value; cp.async.wait_all) */
static __device__ __forceinline__ void cp_async4(void *smem, const void *gmem)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sa), "l"(gmem));
}

static __device__ __forceinline__ void cp_async8(void *smem, const void *gmem)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(sa), "l"(gmem));
}

static __device__ __forceinline__ void prefetch_l1(const void *gmem) { asm volatile("prefetch.global.L1 [%0];" ::"l"(gmem)); }

static __device__ __forceinline__ void cp_async_wait_all(void) { asm volatile("cp.async.wait_all;" ::: "memory"); }

/* position of the k-th (1-based) set bit of m (m has at least k) */
static __device__ __forceinline__ int nth_bit(uint32_t m, int k)
{
    for (int i = 1; i < k; i++) m &= m - 1u;
    return __ffs((int)m) - 1;
}

/* adds v of every thread into *sh (shared), one atomic per warp */
static __device__ __forceinline__ void block_add(int *sh, int v)
{
    v = __reduce_add_sync(FULL, (unsigned)v);
    if ((threadIdx.x & 31u) == 0 && v) atomicAdd(sh, v);
}

static __device__ __forceinline__ uint64_t err_key(int32_t b, int phase, int64_t idx, int32_t code)
{
    return ((uint64_t)b << 40) | ((uint64_t)phase << 39) | ((uint64_t)idx << 8) | (uint64_t)(code & 0xff);
}

/* Is request slot blockIdx.x in the round (this thread's share of the
   positions)? A slot in the round gets npairs from its own block; every other
   slot's count is 0 (the CPU zeroes all N first). */
/* The call's first error, once every plan (or direct) block has offered its key: the smallest key's code
   goes into *err when that is 0 (the first error of the round wins), and the key back to NO_ERR. */
static __device__ __forceinline__ void err_store(dres_scratch *sc, int32_t *err)
{
    const unsigned long long key = atomicExch(&sc->errkey, NO_ERR);
    if (key != NO_ERR && *(volatile int32_t *)err == 0) *err = (int32_t)(key & 0xff);
}

static __device__ __forceinline__ int slot_in_round(const dres_round *rd, int32_t n_round)
{
    const int32_t me = (int32_t)blockIdx.x;
    int in = 0;
    for (int32_t i = (int32_t)threadIdx.x; i < n_round; i += (int32_t)blockDim.x) in |= dres_rd_slot(rd, i) == me;
    return in;
}

static __device__ void zero_npairs_if_absent(const dres_state *st, const dres_round *rd, int32_t n_round)
{
    if (!__syncthreads_or(slot_in_round(rd, n_round)) && threadIdx.x == 0) st->npairs[blockIdx.x] = 0;
}

/* CLOCK sweep by the whole block (all threads call it): up to `need`
   victims with used != mark, exactly the CPU's sweep(). Within one pass (no
   wrap) the windowed rule equals "the first `need` eligible slots from the
   hand; reference bits of the referenced slots before the last victim (or of
   all scanned ones) cleared", so a chunk of up to 32 tiles of DT slots is
   decided at once with ballots and one block scan; chunks never cross B and
   start on the 32-slot window grid, so the pass limit (2B + 32 slots, checked
   per window) cuts them where the CPU stops. Chunks start at ceil(need / DT)
   tiles and double. Victims are marked mark_taken at once. *s_taken (zeroed
   by the caller) gets the victims that were protected in round `epoch`.
   Returns the victims found (all threads). scanned0: slots of the same sweep
   already consumed (the few-miss path's chunk; 0 otherwise), for the pass limit. */
static __device__ int32_t sweep_block(const dres_state *st, int32_t r, int32_t hand, int32_t need, uint32_t mark,
                                      uint32_t mark_taken, uint32_t epoch, int32_t *victims, int *s_cnt, int *s_w,
                                      int *s_stop, int *s_taken, int64_t scanned0)
{
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t B = st->B;
    uint32_t *used = st->used + (int64_t)r * B;
    uint8_t *ref = st->ref + (int64_t)r * B;
    int32_t *meta = st->meta + (int64_t)r * DRES_META;
    int32_t h = hand, got = 0; /* meta[DRES_M_HAND], read by the caller */
    int taken = 0;
    int64_t scanned = scanned0; /* slots this sweep's pass has consumed before (the few-miss chunk) */
    const int64_t limit = 2 * (int64_t)B + 32;
    int ntile = (int)((need + DT - 1) / DT);
    if (ntile < 1) ntile = 1;
    if (ntile > 32) ntile = 32;
    while (got < need && scanned < limit) {
        const int64_t allow = ((limit - scanned + 31) / 32) * 32; /* slots of the windows still allowed */
        int64_t L = B - h;
        if (L > (int64_t)ntile * DT) L = (int64_t)ntile * DT;
        if (L > allow) L = allow;
        const int nt = (int)((L + DT - 1) / DT);
        uint32_t em = 0, rm = 0, pm = 0; /* eligible / referenced / protected-this-round, bit j = tile j */
        for (int j = 0; j < nt; j++) {
            const int64_t i = (int64_t)j * DT + tid;
            int el = 0;
            if (i < L) {
                const uint32_t u = __ldcg(used + h + i);
                const uint8_t f = __ldcg(ref + h + i);
                if (dres_eligible(u, mark)) {
                    if (f) rm |= 1u << j;
                    else el = 1;
                }
                if (u == epoch) pm |= 1u << j;
            }
            em |= (uint32_t)el << j;
            const uint32_t bal = __ballot_sync(FULL, el);
            if (lane == 0) s_cnt[j * NWARP + warp] = __popc(bal);
        }
        for (int j = nt; j < 32; j++)
            if (lane == 0) s_cnt[j * NWARP + warp] = 0;
        __syncthreads();
        int total;
        const int off = block_excl_scan(s_cnt[tid], s_w, NWARP, &total);
        s_cnt[tid] = off;
        __syncthreads();
        const int32_t left = need - got, n = total < left ? total : left;
        for (int j = 0; j < nt; j++) {
            const uint32_t bal = __ballot_sync(FULL, (em >> j) & 1u);
            if ((em >> j) & 1u) {
                const int rank = s_cnt[j * NWARP + warp] + __popc(bal & ((1u << lane) - 1u));
                if (rank < n) {
                    const int32_t q = h + j * DT + tid;
                    victims[got + rank] = q;
                    if ((pm >> j) & 1u) taken++;
                    used[q] = mark_taken;
                    if (rank == n - 1) *s_stop = j * DT + tid + 1;
                }
            }
        }
        __syncthreads();
        const int64_t stop = total >= left ? (int64_t)*s_stop : L;
        for (int j = 0; j < nt; j++)
            if (((rm >> j) & 1u) && (int64_t)j * DT + tid < stop) ref[h + j * DT + tid] = 0;
        got += n;
        scanned += stop;
        h = (int32_t)((h + stop) % B);
        if (ntile < 32) ntile = ntile * 2 > 32 ? 32 : ntile * 2;
        __syncthreads(); /* s_cnt, s_stop reused */
    }
    block_add(s_taken, taken);
    if (tid == 0) meta[DRES_M_HAND] = h;
    return got;
}

/* Division by the call's fixed divisors (k, T, p, host_chunk_rows) with a
   multiply-high and shifts (Granlund-Montgomery, exact for every 32-bit
   dividend; magic numbers made by the launcher on the host): the spec divides
   int64 values (a subroutine call each), a 32-bit division is ~20
   instructions, this is 4. Every value divided here is >= 0 and < 2^31 (an
   entry index, a row s < max_rows of an int32 selection, a tail index < T, a
   hot slot < B), so the results are the spec's. */
typedef struct dres_udiv {
    uint32_t m, s1, s2;
} dres_udiv;

static dres_udiv udiv_make(uint32_t d)
{
    dres_udiv f;
    if (d == 0) d = 1; /* never used (a zero divisor would be an error of the caller's state) */
    uint32_t l = 0;
    while (l < 32 && ((uint64_t)1 << l) < d) l++;
    f.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - d)) / d + 1);
    f.s1 = l > 0 ? 1u : 0u;
    f.s2 = l > 0 ? l - 1 : 0u;
    return f;
}

static __device__ __forceinline__ uint32_t udiv_q(const dres_udiv &f, uint32_t n)
{
    const uint32_t t = __umulhi(f.m, n);
    return (t + ((n - t) >> f.s1)) >> f.s2;
}

/* per-call constants of the plan kernel (a kernel parameter) */
typedef struct dres_divs {
    dres_udiv k, T, p, hcr;
    uint32_t uk, uT, up, uhcr; /* the divisors */
    int32_t tpp, hpp;          /* T / p, B / p */
    int32_t hcr_big;           /* host_chunk_rows >= 2^31: every row is in chunk 0 */
} dres_divs;

static __device__ __forceinline__ int64_t direct_fast(int32_t s, int64_t tail_lo, const dres_divs &dv,
                                                      const uint8_t *opt_ready_b, int64_t max_opt_pages)
{
    if (s >= tail_lo) return DRES_CODE(DRES_K_TAIL, (uint32_t)s - udiv_q(dv.T, (uint32_t)s) * dv.uT);
    const uint32_t pg = udiv_q(dv.p, (uint32_t)s);
    if ((int64_t)pg < max_opt_pages && opt_ready_b[pg]) return DRES_CODE(DRES_K_OPT, s);
    return 0;
}

static __device__ __forceinline__ int64_t phys_fast(const dres_state *st, const dres_divs &dv, int32_t r, int32_t si,
                                                    int64_t code)
{
    const int64_t v = DRES_VAL(code);
    const uint32_t pg = udiv_q(dv.p, (uint32_t)v), off = (uint32_t)v - pg * dv.up;
    const int64_t rs = (int64_t)r * st->nsrc + si;
    const int32_t p = (int32_t)dv.up;
    switch (DRES_KIND(code)) {
    case DRES_K_TAIL: return (int64_t)st->tail_pages[rs * dv.tpp + pg] * p + off;
    case DRES_K_OPT: return (int64_t)st->opt_pages[rs * st->max_opt_pages + pg] * p + off;
    case DRES_K_HOT: return (int64_t)st->hot_pages[rs * dv.hpp + pg] * p + off;
    case DRES_K_STAGE: return (int64_t)st->arena_page[si] * p + (int64_t)r * st->stage_rows + v;
    default: return -1;
    }
}

static __device__ __forceinline__ uint64_t host_row_fast(const dres_state *st, const dres_divs &dv, int32_t r,
                                                         int32_t si, int32_t s)
{
    uint32_t ch = 0, in = (uint32_t)s;
    if (!dv.hcr_big) {
        ch = udiv_q(dv.hcr, (uint32_t)s);
        in = (uint32_t)s - ch * dv.uhcr;
    }
    const uint64_t chunk = st->host_chunks[((int64_t)r * st->nsrc + si) * st->n_host_chunks + ch];
    return chunk + (uint64_t)in * st->row_stride;
}

static dres_divs divs_make(const dres_state *st, int32_t k)
{
    dres_divs d;
    d.uk = (uint32_t)k;
    d.uT = (uint32_t)st->T;
    d.up = (uint32_t)st->p;
    d.hcr_big = st->host_chunk_rows >= ((int64_t)1 << 31);
    d.uhcr = d.hcr_big ? 1u : (uint32_t)st->host_chunk_rows;
    d.k = udiv_make(d.uk);
    d.T = udiv_make(d.uT);
    d.p = udiv_make(d.up);
    d.hcr = udiv_make(d.uhcr);
    d.tpp = st->p > 0 ? st->T / st->p : 0;
    d.hpp = st->p > 0 ? st->B / st->p : 0;
    return d;
}

/* ------------------------------------------------------------ plan kernel */

/* Phase timestamps (compile-time, off by default): built with -DDRES_PHASE_TIMING (CMake
   -DDHS_DRES_PHASE_TIMING=ON), thread 0 of block 0 of every plan kernel reads clock64 at each
   block-wide phase boundary (right after a barrier, so the time is the block's) and adds the cycles
   since its start to a device sum per (path, boundary); globaltimer at the start and end calibrates
   cycles to ns. dhs_dres_phase_read gives the means. Without the macro PH() is empty. */
#ifdef DRES_PHASE_TIMING
__device__ unsigned long long g_ph_cyc[2][DHS_DRES_PHASES]; /* [path][boundary] cycles from the start */
__device__ unsigned long long g_ph_n[2][DHS_DRES_PHASES];   /* calls that passed the boundary */
__device__ unsigned long long g_ph_ns[2], g_ph_cy[2];       /* globaltimer ns and cycles start..end */
static __device__ __forceinline__ unsigned long long ph_gtimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define PH_DECL                                                                                              \
    __shared__ long long ph_[DHS_DRES_PHASES]; /* shared, not registers: the timing build must not spill */ \
    __shared__ unsigned long long ph_g0;                                                                     \
    if (threadIdx.x == 0 && blockIdx.x == 0) {                                                               \
        for (int i_ = 1; i_ < DHS_DRES_PHASES; i_++) ph_[i_] = -1;                                           \
        ph_g0 = ph_gtimer();                                                                                 \
        ph_[0] = clock64();                                                                                  \
    }
#define PH(i)                                                                                                \
    do {                                                                                                     \
        if (threadIdx.x == 0 && blockIdx.x == 0) ph_[i] = clock64();                                       \
    } while (0)
#define PH_END(path)                                                                                         \
    do {                                                                                                     \
        if (threadIdx.x == 0 && blockIdx.x == 0) {                                                           \
            const long long e_ = clock64();                                                                  \
            const unsigned long long g_ = ph_gtimer();                                                       \
            ph_[DHS_DRES_PHASES - 1] = e_;                                                                   \
            for (int i_ = 1; i_ < DHS_DRES_PHASES; i_++)                                                     \
                if (ph_[i_] >= 0) {                                                                          \
                    atomicAdd(&g_ph_cyc[path][i_], (unsigned long long)(ph_[i_] - ph_[0]));                  \
                    atomicAdd(&g_ph_n[path][i_], 1ull);                                                      \
                }                                                                                            \
            atomicAdd(&g_ph_ns[path], g_ - ph_g0);                                                           \
            atomicAdd(&g_ph_cy[path], (unsigned long long)(e_ - ph_[0]));                                    \
        }                                                                                                    \
    } while (0)
#else
#define PH_DECL
#define PH(i) do { } while (0)
#define PH_END(path) do { } while (0)
#endif

#define DU 4 /* entries of one thread whose loads are in flight together */
template <int V> struct dres_ic {
    static constexpr int value = V;
};
#define DM 2 /* misses of one thread in flight together (4 spills at 64 registers) */
#define FEW_MAX 64             /* the few-miss path: at most this many miss entries in a request */
#define FEW_WIN 64             /* CLOCK windows of 32 slots loaded at once by the few-miss path */
#define FEW_WPW (FEW_WIN / NWARP) /* windows per warp */
static_assert(FEW_WIN % NWARP == 0 && FEW_WIN == 64, "few-miss chunk: two windows per lane of one warp");
static_assert(FEW_MAX <= 64, "few-miss dedupe: two entries per lane of warp 0");


/* Programmatic dependent launch (sm_90 and newer): wait for the grid before this one on the stream, and let
   the next one get resident. Built for an older GPU they are nothing: there the launches carry no
   programmatic edge (launch_cfg leaves the attribute off), so every kernel starts after the one before. */
static __device__ __forceinline__ void dres_pdl_wait(void)
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void dres_pdl_launch(void)
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

/* FEW = false (the block-only variant): the previous hit pass and the block-wide miss path only (steps
   2-4 of the header); FEW = true (the library's): the hit pass with its loads moved before the first
   barrier (see f_rs below), and a request whose miss entries fit FEW_MAX takes the few-miss path
   instead, others the block-wide one. The launcher picks FEW = false for states with
   DRES_PLAN_BLOCK_ONLY. */
template <bool FEW>
static __global__ void __launch_bounds__(DT, DT >= 1024 ? 1 : 2) dres_plan_kernel(const __grid_constant__ dres_state st,
                                                              const dres_round *__restrict__ rd, int32_t k,
                                                              const int32_t *__restrict__ sel,
                                                              int32_t *__restrict__ loc, dres_scratch *sc,
                                                              const __grid_constant__ dres_divs dv, int fuse)
{
    __shared__ int s_cnt[32 * NWARP]; /* (tile, warp) counts -> offsets */
    __shared__ int s_w[33];
    __shared__ int s_direct, s_hot, s_prot, s_host, s_entries, s_taken, s_stop;
    __shared__ int s_nprot0, s_filled, s_hand, s_nstaged, s_arena0;
    __shared__ int s_meta[DRES_META]; /* FEW: PROT_EPOCH and NPROT of slot r (cp.async) */
    /* FEW: the descriptor's offsets (cp.async) */
    __shared__ long long s_rdh[4];
    __shared__ int32_t s_sel[FEW ? 2 * DT : 1]; /* FEW: the request's selection when it has <= 2 T entries */
    __shared__ unsigned long long s_err;
    /* few-miss path: the request's miss entries (e, s) in no order, their distinct-miss index, the
       distinct misses in first-occurrence order, first-occurrence keys, the chunk's window masks,
       victims */
    __shared__ int s_nm, s_nd;
    __shared__ int2 s_fl[FEW ? FEW_MAX : 1];
    __shared__ int s_fd[FEW ? FEW_MAX : 1], s_dm[FEW ? FEW_MAX : 1], s_fkey[FEW ? FEW_MAX : 1];
    __shared__ uint32_t s_em[FEW ? FEW_WIN : 1], s_rm[FEW ? FEW_WIN : 1];
    __shared__ int s_vic[FEW ? FEW_MAX : 1];
    int few_path = 0;
    (void)few_path;
    const dres_state *sp = &st;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t b = (int32_t)blockIdx.x, N = st.N, B = st.B, nsrc = st.nsrc, KK = st.spec_width;
    const int64_t all = (int64_t)KK * k;

    /* launched as a programmatic dependent of the kernel before it on the stream (the previous call's
       copy kernel inside a captured step): wait for that grid before reading anything (a no-op when
       the launch had no programmatic edge) */
    dres_pdl_wait();
    PH_DECL /* boundary 0: after the wait */
    int left = 0; /* thread 0: this block leaves pairs to the copy kernel */
    const int32_t n_round = rd->n_round;
    const uint32_t epoch = rd->epoch;
    /* FEW (the library's variant): what the pass needs first is in flight before the barrier, and no
       register holds it across (cp.async into shared, a prefetch into L1): the header's offsets;
       round position b's fields at the library's layout (dres_rd_layout; read after the barrier at the
       header's offsets, so another layout costs only the prefetch); the slot of round position tid
       (for in_round, used only when the header has the library's layout); and, when the request has
       at most two entries a thread, the selection (the whole [KK][k] row of a round position: entries
       past K are dropped later). The block-only variant loads them one after another as before. */
    int32_t f_rs = -1;
    if (FEW) {
        if (tid == 0) { /* the header's offsets into shared without registers (thread 0 waits for them
                           before the barrier); round position b's fields at the library's layout into L1 */
            int64_t p_slot, p_K, p_n, p_tl;
            (void)dres_rd_layout(N, (int64_t)st.group + 1, &p_slot, &p_K, &p_n, &p_tl);
            const char *rc = (const char *)rd;
            cp_async8(&s_rdh[0], &rd->off_slot);
            cp_async8(&s_rdh[1], &rd->off_K);
            cp_async8(&s_rdh[2], &rd->off_n);
            cp_async8(&s_rdh[3], &rd->off_tail_lo);
            prefetch_l1(rc + p_slot + 4 * (int64_t)b);
            prefetch_l1(rc + p_K + 4 * (int64_t)b);
            prefetch_l1(rc + p_n + 8 * (int64_t)b);
            prefetch_l1(rc + p_tl + 8 * ((int64_t)st.group * N + b));
        }
        if (N <= DT && tid < N) f_rs = *(const int32_t *)((const char *)rd + dres_rd_off_slot0() + 4 * (int64_t)tid);
        if (all <= 2 * (int64_t)DT && b < __ldg(&rd->n_round)) { /* this thread's two selection entries into shared
                                             (cp.async: no register lives across the barrier); it waits
                                             before it. Only rows of the round: the buffer may end there */
            const int32_t *selb0 = sel + (int64_t)b * KK * k;
            if (tid < all) cp_async4(&s_sel[tid], selb0 + tid);
            if (tid + DT < all) cp_async4(&s_sel[tid + DT], selb0 + tid + DT);
            cp_async_wait_all();
        }
    }
    /* the copy kernel (programmatic dependent launch) may get resident now; it waits for this grid */
    dres_pdl_launch();
    if (tid == 0) {
        s_direct = s_hot = s_prot = s_host = s_entries = s_taken = 0;
        if (FEW) s_nm = 0;
        s_err = NO_ERR;
        if (b == 0) atomicAdd((unsigned long long *)&st.stats[DRES_S_CALLS], 1ull);
        if (FEW) { /* the header's offsets: the library's layout, or read the fields from them */
            cp_async_wait_all();
        }
    }
    __syncthreads(); /* shared init */
    PH(1);
    /* whether slot b is in the round: loads issued now, used at the end (FEW with the library's
       layout and N <= DT: loaded above) */
    int in_round = 0;
    if (FEW && s_rdh[0] == dres_rd_off_slot0() && N <= DT) in_round = tid < n_round && f_rs == b;
    else in_round = slot_in_round(rd, n_round);

    if (b >= n_round) {
        for (int32_t si = 0; si < nsrc; si++) {
            int32_t *l = loc + (((int64_t)si * N + b) * KK) * k;
            for (int64_t e = tid; e < all; e += DT) l[e] = -1;
        }
    } else {
        /* FEW: the fields at the header's offsets (in shared); with the library's layout they are in L1
           already (prefetched before the barrier) */
        const char *rc = (const char *)rd;
        const int32_t r = FEW ? __ldg((const int32_t *)(rc + s_rdh[0]) + b) : dres_rd_slot(rd, b);
        const int32_t K = FEW ? __ldg((const int32_t *)(rc + s_rdh[1]) + b) : dres_rd_K(rd, b);
        const int64_t n = FEW ? __ldg((const long long *)(rc + s_rdh[2]) + b) : dres_rd_n(rd, b);
        const int64_t tail_lo = FEW ? __ldg((const long long *)(rc + s_rdh[3]) + (int64_t)st.group * N + b)
                                    : dres_rd_tail_lo(rd, N, st.group, b);
        const int32_t *selb = sel + (int64_t)b * KK * k;
        const int64_t per_slot = (int64_t)KK * st.sel_k;
        int32_t *slot_of = st.slot_of + (int64_t)r * st.max_rows;
        int32_t *row_of = st.row_of + (int64_t)r * B;
        uint32_t *used = st.used + (int64_t)r * B;
        uint8_t *ref = st.ref + (int64_t)r * B;
        int32_t *meta = st.meta + (int64_t)r * DRES_META;
        const uint8_t *opt_ready = st.opt_ready + (int64_t)r * st.max_opt_pages;
        int64_t *code = st.code + (int64_t)r * per_slot;
        int32_t *dmiss = st.dmiss + (int64_t)r * per_slot;
        const int64_t nent = (int64_t)K * k;
        const int64_t lstride = (int64_t)N * KK * k; /* loc: one source to the next */
        int32_t *locb = loc + (int64_t)b * KK * k;

        /* this block's counters of slot r (only thread 0 of this block writes them): loads issued now */
        int32_t m_pe = 0, m_np = 0, m_filled = 0, m_hand = 0, m_nst = 0, m_ar0 = 0;
        if (tid == 0) {
            if (FEW) { /* into shared without registers (cp.async), in flight during the pass; the
                          thread waits for them after it */
                cp_async4(&s_meta[DRES_M_PROT_EPOCH], meta + DRES_M_PROT_EPOCH);
                cp_async4(&s_meta[DRES_M_NPROT], meta + DRES_M_NPROT);
                cp_async4(&s_filled, meta + DRES_M_FILLED);
                cp_async4(&s_hand, meta + DRES_M_HAND);
                cp_async4(&s_nstaged, meta + DRES_M_NSTAGED);
                cp_async4(&s_arena0, st.arena_page);
            } else {
                m_pe = __ldcg(meta + DRES_M_PROT_EPOCH);
                m_np = __ldcg(meta + DRES_M_NPROT);
                m_filled = __ldcg(meta + DRES_M_FILLED);
                m_hand = __ldcg(meta + DRES_M_HAND);
                m_nst = __ldcg(meta + DRES_M_NSTAGED);
                m_ar0 = __ldg(st.arena_page);
                /* to shared now (this warp waits for these loads once, the others do not) */
                s_filled = m_filled;
                s_hand = m_hand;
                s_nstaged = m_nst;
                s_arena0 = m_ar0;
            }
        }
        /* FEW: this round's protection count of slot r is not started yet (the request's first call of
           the round): every hit then takes the atomic, so it goes first, without the read of `used`
           that would only say so (one dependent round trip less). Either order gives the same old
           values, so this read only picks the faster one; it is issued with the slot_of loads. */
        const int32_t f_pe = FEW ? __ldcg(meta + DRES_M_PROT_EPOCH) : 0;
        /* entries past the request's K queries: -1 in every source, nothing read */
        for (int32_t si = 0; si < nsrc; si++)
            for (int32_t e = (int32_t)nent + tid; e < (int32_t)all; e += DT) locb[si * lstride + e] = -1;

        /* 1-3 and 5 for everything but misses: validate, direct, hot (protect
           every hit of the union), code, locations; DU entries of a thread in
           flight together, each kind of load issued for all of them before
           any is used (selection, then slot_of, then used + page tables) */
        uint32_t mm = 0; /* bit j: entry j * DT + tid is a miss */
        int c_direct = 0, c_hot = 0, c_prot = 0, c_ent = 0;
        unsigned long long my_err = NO_ERR;
        /* one pass: U entries of each thread (U = DU; 2 when the request has at most 2 T entries, so no
           thread runs empty slots); a generic lambda instantiated for both */
        auto pass = [&](auto u_c, int64_t base, bool pre) { /* pre: entries u < 2 are in s_sel (U == 2) */
            constexpr int U = decltype(u_c)::value;
            int32_t s[U], q[U], qs[U];
            int64_t c[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t e = base + (int64_t)u * DT + tid;
                s[u] = e < nent ? (pre && u < 2 ? s_sel[u * DT + tid] : __ldg(selb + e)) : -1;
            }
            /* FEW: slot_of of every entry in range now, in flight with the direct lookup's opt_ready
               loads (the spec reads it only for entries that are not direct; the others drop it) */
#pragma unroll
            for (int u = 0; u < U; u++) qs[u] = FEW && U == 2 && s[u] >= 0 && s[u] < st.max_rows ? slot_of[s[u]] : -1;
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t e = base + (int64_t)u * DT + tid;
                const int32_t v = dres_validate(s[u], st.m, n, (int32_t)udiv_q(dv.k, (uint32_t)e), st.max_rows);
                if (v == 1) {
                    c[u] = DRES_PAD;
                } else if (v != 0) {
                    c[u] = DRES_CODE(DRES_K_BAD, 0);
                    const unsigned long long key = err_key(b, 0, e, v);
                    if (key < my_err) my_err = key;
                } else {
                    c[u] = direct_fast(s[u], tail_lo, dv, opt_ready, st.max_opt_pages);
                    if (c[u]) c_direct++;
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) q[u] = c[u] == 0 ? (FEW && U == 2 ? qs[u] : slot_of[s[u]]) : -1;
#pragma unroll
            for (int u = 0; u < U; u++)
                if (c[u] == 0) c[u] = dres_hot(s[u], q[u], B);
            /* hits: read `used` first; the atomic only where this round has not protected the slot yet
               (a slot's used only moves to epoch in this phase, so a read of epoch is final) */
            uint32_t old[U];
            int32_t l0[U]; /* source 0's locations: their table loads in flight with `used` */
            const bool fresh = FEW && f_pe != (int32_t)epoch; /* see f_pe */
#pragma unroll
            for (int u = 0; u < U; u++) {
                const bool hot = c[u] > 0 && DRES_KIND(c[u]) == DRES_K_HOT;
                old[u] = !hot ? epoch : fresh ? atomicExch(used + q[u], epoch) : __ldcg(used + q[u]);
                l0[u] = c[u] < 0 ? -1 : (int32_t)phys_fast(sp, dv, r, 0, c[u]);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (c[u] > 0 && DRES_KIND(c[u]) == DRES_K_HOT) {
                    /* result used at the end */
                    if (!fresh && old[u] != epoch) old[u] = atomicExch(used + q[u], epoch);
                    ref[q[u]] = 1;
                }
                if (c[u] > 0 && (DRES_KIND(c[u]) == DRES_K_HOT || DRES_KIND(c[u]) == DRES_K_STAGE)) c_hot++;
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t e = base + (int64_t)u * DT + tid;
                if (e >= nent) continue;
                code[e] = c[u];
                if (c[u] > 0 && DRES_KIND(c[u]) == DRES_K_MISS) {
                    mm |= 1u << (uint32_t)(e / DT);
                    continue;
                }
                locb[e] = l0[u];
                if (c[u] >= 0 && DRES_KIND(c[u]) != DRES_K_BAD) c_ent++;
            }
            for (int32_t si = 1; si < nsrc; si++) {
                int32_t l[U];
#pragma unroll
                for (int u = 0; u < U; u++) l[u] = c[u] < 0 ? -1 : (int32_t)phys_fast(sp, dv, r, si, c[u]);
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int64_t e = base + (int64_t)u * DT + tid;
                    if (e < nent && !(c[u] > 0 && DRES_KIND(c[u]) == DRES_K_MISS)) locb[si * lstride + e] = l[u];
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) c_prot += old[u] != epoch;
        };
        if (nent <= 2 * (int64_t)DT) {
            if (nent > 0) pass(dres_ic<2>{}, 0, FEW && all <= 2 * (int64_t)DT);
        } else {
            for (int64_t base = 0; base < nent; base += (int64_t)DU * DT) pass(dres_ic<DU>{}, base, false);
        }
        if (FEW) { /* the few-miss path's list of miss entries (e, s): one shared atomic per warp; entries
                      past FEW_MAX are counted, not stored (the request then takes the block-wide path).
                      Built here from the miss bits, not inside the pass, where it cost spills */
            const int cnt = __popc(mm), inc = warp_incl_scan(cnt);
            int w0 = 0;
            if (lane == 31 && inc) w0 = atomicAdd(&s_nm, inc);
            int i0 = __shfl_sync(FULL, w0, 31) + inc - cnt;
            for (uint32_t x = mm; x && i0 < FEW_MAX; x &= x - 1, i0++) {
                const int64_t e = (int64_t)(__ffs((int)x) - 1) * DT + tid;
                s_fl[i0] = make_int2((int)e, __ldg(selb + e));
            }
        }
        if (tid == 0) { /* meta is only touched by this thread before the next barrier */
            if (FEW) {
                cp_async_wait_all();
                m_pe = s_meta[DRES_M_PROT_EPOCH];
                m_np = s_meta[DRES_M_NPROT];
            }
            int32_t np = m_np;
            if (m_pe != (int32_t)epoch) {
                meta[DRES_M_PROT_EPOCH] = (int32_t)epoch;
                np = 0;
            }
            s_nprot0 = np;
        }
        block_add(&s_direct, c_direct);
        block_add(&s_hot, c_hot);
        block_add(&s_prot, c_prot);
        if (my_err != NO_ERR) atomicMin(&s_err, my_err);
        const int any_miss = __syncthreads_or(mm != 0);
        PH(2);
        int c_host = 0;
        if (!any_miss) {
            if (tid == 0) {
                meta[DRES_M_NPROT] = s_nprot0 + s_prot;
                st.ndmiss[r] = 0;
                st.npairs[r] = 0;
            }
        } else if (FEW && s_nm <= FEW_MAX) {
            few_path = 1;
            /* The few-miss path (at most FEW_MAX miss entries): the same decisions as
               steps 2-5 with four barriers instead of ~20 and two dependent global round
               trips instead of ~10:
               a. every warp loads `used` and `ref` of its windows of ONE chunk of the CLOCK
                  sweep from the hand (FEW_WIN windows of 32 slots: [hand, B) cut at B, then
                  the windows of [0, hand) that end at or before the hand, so no slot is read
                  twice); meanwhile warp 0 finds the distinct misses and their first-occurrence
                  ranks from the shared list (two O(n^2) passes over <= 64 entries, no global
                  claim); window masks to shared; barrier B;
               b. every warp decides the whole chunk redundantly from the masks (per-lane
                  counts, one warp scan; the windowed rule of dres_sweep_window within a pass
                  is "the first `want` eligible slots from the hand", and the chunk is whole
                  windows of the CPU's window sequence), then marks its own windows' victims
                  and clears their reference bits; a chunk with too few victims hands the rest
                  to sweep_block from the chunk's end (after a barrier, with the slots already
                  consumed counted for the pass limit); barrier C;
               c. assignment (threads < nd) and the misses' locations (threads 64..) from the
                  distinct index of each miss entry, without reading slot_of back. */
            const int nm = s_nm;
            const int32_t filled = s_filled, h0 = s_hand;
            /* a sweep can happen only when the misses outnumber the free slots; then every free
               slot is taken (marked this round), so slots >= filled are never eligible */
            const int sweep_maybe = nm > B - filled;
            const int nw1 = (B - h0 + 31) / 32, nw2 = h0 / 32;
            const int nwin = nw1 + nw2 < FEW_WIN ? nw1 + nw2 : FEW_WIN;
            int32_t qw[FEW_WPW];
            uint32_t uw[FEW_WPW];
            uint8_t fw[FEW_WPW];
#pragma unroll
            for (int j = 0; j < FEW_WPW; j++) {
                const int w = warp + NWARP * j;
                qw[j] = -1;
                uw[j] = epoch;
                fw[j] = 0;
                if (sweep_maybe && w < nwin) {
                    const int32_t start = w < nw1 ? h0 + 32 * w : 32 * (w - nw1);
                    const int32_t width = w < nw1 ? (B - start < 32 ? B - start : 32) : 32;
                    if (lane < width) {
                        qw[j] = start + lane;
                        uw[j] = __ldcg(used + qw[j]);
                        fw[j] = __ldcg(ref + qw[j]);
                    }
                }
            }
            if (warp == 0) { /* distinct misses: entry l and l + 32 of each lane */
                const int2 xa = lane < nm ? s_fl[lane] : make_int2(INT32_MAX, -1);
                const int2 xb = lane + 32 < nm ? s_fl[lane + 32] : make_int2(INT32_MAX, -1);
                int fa = xa.x, fb = xb.x; /* the smallest e of the same row: its first occurrence */
#pragma unroll 4
                for (int j = 0; j < nm; j++) {
                    const int2 x = s_fl[j];
                    if (x.y == xa.y && x.x < fa) fa = x.x;
                    if (x.y == xb.y && x.x < fb) fb = x.x;
                }
                const bool first_a = lane < nm && fa == xa.x, first_b = lane + 32 < nm && fb == xb.x;
                if (lane < nm) s_fkey[lane] = first_a ? xa.x : INT32_MAX;
                if (lane + 32 < nm) s_fkey[lane + 32] = first_b ? xb.x : INT32_MAX;
                __syncwarp();
                int da = 0, db = 0; /* rank of the first occurrence among all first occurrences */
#pragma unroll 4
                for (int j = 0; j < nm; j++) {
                    const int key = s_fkey[j];
                    da += key < fa;
                    db += key < fb;
                }
                if (first_a) {
                    s_dm[da] = xa.y;
                    dmiss[da] = xa.y;
                }
                if (first_b) {
                    s_dm[db] = xb.y;
                    dmiss[db] = xb.y;
                }
                if (lane < nm) s_fd[lane] = da;
                if (lane + 32 < nm) s_fd[lane + 32] = db;
                const int ndw = __popc(__ballot_sync(FULL, first_a)) + __popc(__ballot_sync(FULL, first_b));
                if (lane == 0) s_nd = ndw;
            }
#pragma unroll
            for (int j = 0; j < FEW_WPW; j++) {
                const int w = warp + NWARP * j;
                const bool live = qw[j] >= 0 && qw[j] < filled && dres_eligible(uw[j], epoch);
                const uint32_t em = __ballot_sync(FULL, live && !fw[j]), rm = __ballot_sync(FULL, live && fw[j]);
                if (lane == 0 && w < nwin) {
                    s_em[w] = em;
                    s_rm[w] = rm;
                }
            }
            __syncthreads(); /* B: distinct misses, window masks */
            PH(3);
            const int32_t nd = s_nd;
            const int32_t nfree = nd < B - filled ? nd : B - filled;
            for (int32_t i = tid; i < nfree; i += DT) used[filled + i] = epoch;
            const int32_t nprot = s_nprot0 + s_prot + nfree;
            int32_t want = nd - nfree, avail = B - nprot;
            if (want > avail) want = avail;
            if (want < 0) want = 0;
            int32_t *victims = st.victim + (int64_t)r * per_slot;
            int32_t nv = 0, hand = h0;
            int fallback = 0;
            if (want > 0) {
                /* lane l: windows 2l, 2l + 1 of the chunk */
                const uint32_t ea = 2 * lane < nwin ? s_em[2 * lane] : 0u, eb = 2 * lane + 1 < nwin ? s_em[2 * lane + 1] : 0u;
                const int ca = __popc(ea), inc = warp_incl_scan(ca + __popc(eb)), pre = inc - ca - __popc(eb);
                const int total = __shfl_sync(FULL, inc, 31);
                const int n = total < want ? total : want;
                int wstar, stop_off; /* the window of the last victim and the slots consumed in it */
                if (total >= want) {
                    const uint32_t at = __ballot_sync(FULL, pre < n && n <= inc);
                    const int src = __ffs(at) - 1;
                    int ws = 0, so = 0;
                    if (lane == src) {
                        if (n - pre <= ca) {
                            ws = 2 * lane;
                            so = nth_bit(ea, n - pre) + 1;
                        } else {
                            ws = 2 * lane + 1;
                            so = nth_bit(eb, n - pre - ca) + 1;
                        }
                    }
                    wstar = __shfl_sync(FULL, ws, src);
                    stop_off = __shfl_sync(FULL, so, src);
                } else {
                    fallback = 1;
                    wstar = nwin - 1;
                    stop_off = 32;
                }
#pragma unroll
                for (int j = 0; j < FEW_WPW; j++) {
                    const int w = warp + NWARP * j;
                    /* victims before window w: from the lane holding it */
                    const int pw = __shfl_sync(FULL, pre + ((w & 1) ? ca : 0), w >> 1);
                    if (w < nwin && w <= wstar && qw[j] >= 0) {
                        const uint32_t em = s_em[w], rm = s_rm[w];
                        const int q = qw[j];
                        if ((em >> lane) & 1u) {
                            const int rank = pw + __popc(em & ((1u << lane) - 1u));
                            if (rank < n) {
                                victims[rank] = q;
                                s_vic[rank] = q;
                                used[q] = epoch;
                            }
                        }
                        if (((rm >> lane) & 1u) && (w < wstar || lane < stop_off)) ref[q] = 0;
                    }
                }
                const int32_t wst = wstar < nw1 ? h0 + 32 * wstar : 32 * (wstar - nw1);
                hand = (int32_t)((wst + stop_off) % B);
                if (fallback) {
                    stop_off = wstar < nw1 ? (B - wst < 32 ? B - wst : 32) : 32;
                    hand = (int32_t)((wst + stop_off) % B);
                    const int64_t scanned = nwin < nw1 ? (int64_t)32 * nwin : (int64_t)(B - h0) + 32 * (nwin - nw1);
                    __syncthreads(); /* the chunk's used / ref stores before sweep_block reads them */
                    nv = n + sweep_block(sp, r, hand, want - n, epoch, epoch, epoch, victims + n, s_cnt, s_w, &s_stop,
                                         &s_taken, scanned);
                } else {
                    nv = n;
                }
            }
            __syncthreads(); /* C: victims (shared; global after a fallback sweep) */
            PH(5);
            const int32_t nhot = nfree + nv;
            const int32_t nstaged = s_nstaged;
            const int32_t owner = *(volatile int32_t *)st.stage_owner;
            const int ours = owner == -1 || owner == st.group;
            int32_t room = s_arena0 < 0 || !ours ? 0 : st.stage_rows - nstaged;
            if (room < 0) room = 0;
            const int32_t nst = nd - nhot < room ? nd - nhot : room;
            uint64_t *pairs = st.pairs + (int64_t)r * per_slot * nsrc * 2;
            if (tid < FEW_MAX) { /* distinct miss i = tid: slot, eviction, copy list */
                const int32_t i = tid;
                if (i < nd) {
                    /* every load first (the evicted row, source 0's chunk and page table), then the stores:
                       one dependent round trip, not two */
                    const int32_t s = s_dm[i];
                    int64_t cv = -1;
                    int32_t q = -1, old = -1;
                    if (i < nhot) {
                        q = i < nfree ? filled + i : fallback ? victims[i - nfree] : s_vic[i - nfree];
                        if (i >= nfree) old = row_of[q];
                        cv = DRES_CODE(DRES_K_HOT, q);
                    } else if (i < nhot + nst) {
                        cv = DRES_CODE(DRES_K_STAGE, nstaged + (i - nhot));
                    }
                    uint64_t hs0 = 0;
                    int64_t ph0 = 0;
                    if (cv >= 0) {
                        hs0 = host_row_fast(sp, dv, r, 0, s);
                        ph0 = phys_fast(sp, dv, r, 0, cv);
                    }
                    if (i < nhot) {
                        if (old >= 0) slot_of[old] = -1;
                        row_of[q] = s;
                        slot_of[s] = q;
                        ref[q] = 1;
                    } else if (i < nhot + nst) {
                        const int32_t sidx = nstaged + (i - nhot);
                        st.staged_row[(int64_t)r * st.stage_rows + sidx] = s;
                        slot_of[s] = B + sidx;
                    } else {
                        slot_of[s] = -1;
                        if (i == nhot + nst) atomicMin(&s_err, (unsigned long long)err_key(b, 1, i, 16));
                    }
                    if (cv >= 0) {
                        pairs[2 * (int64_t)i * nsrc] = hs0;
                        pairs[2 * (int64_t)i * nsrc + 1] = (uint64_t)(uintptr_t)(st.pool + (uint64_t)ph0 * st.row_stride);
                        for (int32_t si = 1; si < nsrc; si++) {
                            const int64_t pi = (int64_t)i * nsrc + si;
                            pairs[2 * pi] = host_row_fast(sp, dv, r, si, s);
                            pairs[2 * pi + 1] = (uint64_t)(uintptr_t)(st.pool + (uint64_t)phys_fast(sp, dv, r, si, cv) * st.row_stride);
                        }
                    }
                }
            } else if (tid < 2 * FEW_MAX) { /* miss entry t: its locations from its distinct miss */
                const int t = tid - FEW_MAX;
                if (t < nm) {
                    const int e = s_fl[t].x, d = s_fd[t];
                    int64_t c = DRES_CODE(DRES_K_BAD, 0);
                    if (d < nhot) c = DRES_CODE(DRES_K_HOT, d < nfree ? filled + d : fallback ? victims[d - nfree] : s_vic[d - nfree]);
                    else if (d < nhot + nst) c = DRES_CODE(DRES_K_STAGE, nstaged + (d - nhot));
                    for (int32_t si = 0; si < nsrc; si++) locb[si * lstride + e] = (int32_t)phys_fast(sp, dv, r, si, c);
                    if (d < nhot + nst) {
                        c_host++;
                        c_ent++;
                    }
                }
            }
            if (tid == 0) {
                meta[DRES_M_FILLED] = filled + nfree;
                meta[DRES_M_NPROT] = nprot + nv;
                meta[DRES_M_NSTAGED] = nstaged + nst;
                if (want > 0 && !fallback) meta[DRES_M_HAND] = hand;
                st.ndmiss[r] = nd;
                st.npairs[r] = (nhot + nst) * nsrc;
                left = !fuse && nhot + nst > 0;
                if (nhot + nst)
                    atomicAdd((unsigned long long *)&st.stats[DRES_S_MISSES], (unsigned long long)(nhot + nst));
                if (nst) {
                    atomicAdd((unsigned long long *)&st.stats[DRES_S_STAGED], (unsigned long long)nst);
                    *st.stage_owner = st.group;
                }
            }
            const int32_t np = (nhot + nst) * nsrc;
            if (fuse && np > 0) { /* fused copy: a warp per pair, 16-byte vectors, no copy kernel work */
                __syncthreads(); /* D: the copy list */
                PH(6);
                const uint32_t vecs = st.row_stride / 16u;
                for (int32_t p = warp; p < np; p += NWARP) {
                    const uint4 *src = (const uint4 *)__ldcg((const unsigned long long *)(pairs + 2 * (int64_t)p));
                    uint4 *dst = (uint4 *)__ldcg((const unsigned long long *)(pairs + 2 * (int64_t)p + 1));
                    for (uint32_t v0 = 0; v0 < vecs; v0 += 64) {
                        const uint32_t va = v0 + (uint32_t)lane, vb = va + 32u;
                        uint4 xa, xb;
                        if (va < vecs) xa = dhs_ld_nc_v4(src + va);
                        if (vb < vecs) xb = dhs_ld_nc_v4(src + vb);
                        if (va < vecs) dhs_st_cg_v4(dst + va, xa);
                        if (vb < vecs) dhs_st_cg_v4(dst + vb, xb);
                    }
                }
            }
        } else {
            /* 4a: claims; the smallest e of a row survives */
            for (uint32_t x = mm; x; x &= x - 1) {
                const int64_t e = (int64_t)(__ffs(x) - 1) * DT + tid;
                atomicMin(slot_of + __ldg(selb + e), INT32_MIN + (int32_t)e);
            }
            __syncthreads(); /* claims */
            PH(3);
            /* ranks of the first occurrences in e order: ballots per tile, one block scan */
            const int ntile = (int)((nent + DT - 1) / DT);
            uint32_t first = 0;
            for (int j0 = 0; j0 < ntile; j0 += DU) { /* DU tiles' slot_of reads in flight together */
                int32_t cl[DU];
#pragma unroll
                for (int u = 0; u < DU; u++) {
                    const int j = j0 + u;
                    cl[u] = j < ntile && ((mm >> j) & 1u) ? __ldcg(slot_of + __ldg(selb + (int64_t)j * DT + tid)) : 0;
                }
#pragma unroll
                for (int u = 0; u < DU; u++) {
                    const int j = j0 + u;
                    if (j >= ntile) break; /* uniform */
                    const int64_t e = (int64_t)j * DT + tid;
                    const int f = ((mm >> j) & 1u) && cl[u] == INT32_MIN + (int32_t)e;
                    const uint32_t bal = __ballot_sync(FULL, f);
                    if (lane == 0) s_cnt[j * NWARP + warp] = __popc(bal);
                    first |= (uint32_t)f << j;
                }
            }
            for (int j = ntile; j < 32; j++)
                if (lane == 0) s_cnt[j * NWARP + warp] = 0;
            __syncthreads();
            int nd;
            const int off = block_excl_scan(s_cnt[tid], s_w, NWARP, &nd); /* DT == 32 * NWARP values */
            s_cnt[tid] = off;
            __syncthreads();
            for (int j = 0; j < ntile; j++) {
                const uint32_t bal = __ballot_sync(FULL, (first >> j) & 1u);
                if ((first >> j) & 1u) {
                    const int64_t e = (int64_t)j * DT + tid;
                    dmiss[s_cnt[j * NWARP + warp] + __popc(bal & ((1u << lane) - 1u))] = __ldg(selb + e);
                }
            }
            /* 4b: free slots, then CLOCK victims, then staging */
            const int32_t filled = s_filled;
            const int32_t nfree = nd < B - filled ? nd : B - filled;
            for (int32_t i = tid; i < nfree; i += DT) used[filled + i] = epoch;
            int32_t *victims = st.victim + (int64_t)r * per_slot;
            __syncthreads(); /* dmiss, used of the free slots, s_cnt free again */
            PH(4);
            const int32_t nprot = s_nprot0 + s_prot + nfree;
            int32_t want = nd - nfree, avail = B - nprot;
            if (want > avail) want = avail;
            if (want < 0) want = 0;
            const int32_t nv = want > 0 ? sweep_block(sp, r, s_hand, want, epoch, epoch, epoch, victims, s_cnt, s_w, &s_stop,
                                                      &s_taken, 0)
                                        : 0;
            __syncthreads(); /* victims */
            PH(5);
            const int32_t nhot = nfree + nv;
            const int32_t nstaged = s_nstaged;
            /* staging only while the arenas are free or this group's (the word changes
               from -1 to this group within a call at most, so one read decides) */
            const int32_t owner = *(volatile int32_t *)st.stage_owner;
            const int ours = owner == -1 || owner == st.group;
            int32_t room = s_arena0 < 0 || !ours ? 0 : st.stage_rows - nstaged;
            if (room < 0) room = 0;
            const int32_t nst = nd - nhot < room ? nd - nhot : room;
            uint64_t *pairs = st.pairs + (int64_t)r * per_slot * nsrc * 2;
            /* DM misses of a thread at once: dmiss + victims, then the evicted rows, then the stores
               and the copy list (misses' rows, victims and evicted rows are all distinct, so the
               order of these stores across misses is free, as between threads) */
            for (int32_t i0 = tid; i0 < nd; i0 += DM * DT) {
                int32_t sv[DM], qv[DM], ov[DM];
#pragma unroll
                for (int u = 0; u < DM; u++) {
                    const int32_t i = i0 + u * DT;
                    sv[u] = i < nd ? dmiss[i] : 0;
                    qv[u] = i < nhot ? (i < nfree ? filled + i : victims[i - nfree]) : -1;
                }
#pragma unroll
                for (int u = 0; u < DM; u++) {
                    const int32_t i = i0 + u * DT;
                    ov[u] = i < nhot && i >= nfree ? row_of[qv[u]] : -1;
                }
                int64_t cv[DM];
#pragma unroll
                for (int u = 0; u < DM; u++) {
                    const int32_t i = i0 + u * DT, s = sv[u];
                    cv[u] = -1;
                    if (i >= nd) continue;
                    if (i < nhot) {
                        const int32_t q = qv[u];
                        if (ov[u] >= 0) slot_of[ov[u]] = -1;
                        row_of[q] = s;
                        slot_of[s] = q;
                        ref[q] = 1;
                        cv[u] = DRES_CODE(DRES_K_HOT, q);
                    } else if (i < nhot + nst) {
                        const int32_t sidx = nstaged + (i - nhot);
                        st.staged_row[(int64_t)r * st.stage_rows + sidx] = s;
                        slot_of[s] = B + sidx;
                        cv[u] = DRES_CODE(DRES_K_STAGE, sidx);
                    } else {
                        slot_of[s] = -1;
                        if (i == nhot + nst) atomicMin(&s_err, (unsigned long long)err_key(b, 1, i, 16));
                    }
                }
                for (int32_t si = 0; si < nsrc; si++) {
                    uint64_t hs[DM];
                    int64_t ph[DM];
#pragma unroll
                    for (int u = 0; u < DM; u++) {
                        hs[u] = cv[u] >= 0 ? host_row_fast(sp, dv, r, si, sv[u]) : 0;
                        ph[u] = cv[u] >= 0 ? phys_fast(sp, dv, r, si, cv[u]) : 0;
                    }
#pragma unroll
                    for (int u = 0; u < DM; u++) {
                        if (cv[u] < 0) continue;
                        const int64_t pi = (int64_t)(i0 + u * DT) * nsrc + si;
                        pairs[2 * pi] = hs[u];
                        pairs[2 * pi + 1] = (uint64_t)(uintptr_t)(st.pool + (uint64_t)ph[u] * st.row_stride);
                    }
                }
            }
            __syncthreads(); /* every thread read meta[NSTAGED]; slot_of final */
            PH(6);
            if (tid == 0) {
                meta[DRES_M_FILLED] = filled + nfree;
                meta[DRES_M_NPROT] = nprot + nv;
                meta[DRES_M_NSTAGED] = nstaged + nst;
                st.ndmiss[r] = nd;
                st.npairs[r] = (nhot + nst) * nsrc;
                left = nhot + nst > 0;
                if (nhot + nst)
                    atomicAdd((unsigned long long *)&st.stats[DRES_S_MISSES], (unsigned long long)(nhot + nst));
                if (nst) {
                    atomicAdd((unsigned long long *)&st.stats[DRES_S_STAGED], (unsigned long long)nst);
                    *st.stage_owner = st.group;
                }
            }
            /* 5 for the misses: their slot from slot_of */
            for (uint32_t x = mm; x;) { /* DM misses of a thread at once */
                int64_t ev[DM];
                int32_t qv[DM];
#pragma unroll
                for (int u = 0; u < DM; u++) {
                    ev[u] = -1;
                    if (x) {
                        ev[u] = (int64_t)(__ffs(x) - 1) * DT + tid;
                        x &= x - 1;
                    }
                }
#pragma unroll
                for (int u = 0; u < DM; u++) qv[u] = ev[u] >= 0 ? __ldcg(slot_of + __ldg(selb + ev[u])) : -1;
                for (int32_t si = 0; si < nsrc; si++) {
                    int32_t l[DM];
#pragma unroll
                    for (int u = 0; u < DM; u++) {
                        const int64_t c = qv[u] < 0 ? DRES_CODE(DRES_K_BAD, 0) : dres_hot(0, qv[u], B);
                        l[u] = (int32_t)phys_fast(sp, dv, r, si, c);
                    }
#pragma unroll
                    for (int u = 0; u < DM; u++)
                        if (ev[u] >= 0) locb[si * lstride + ev[u]] = l[u];
                }
#pragma unroll
                for (int u = 0; u < DM; u++)
                    if (ev[u] >= 0 && qv[u] >= 0) {
                        c_host++;
                        c_ent++;
                    }
            }
        }
        block_add(&s_host, c_host);
        block_add(&s_entries, c_ent);
        __syncthreads();
        PH(7);
        if (tid == 0) {
            unsigned long long *S = (unsigned long long *)st.stats;
            if (s_direct) atomicAdd(S + DRES_S_DIRECT, (unsigned long long)s_direct);
            if (s_hot) atomicAdd(S + DRES_S_HOT, (unsigned long long)s_hot);
            if (s_host) atomicAdd(S + DRES_S_HOST, (unsigned long long)s_host);
            if (s_entries) atomicAdd(S + DRES_S_ENTRIES, (unsigned long long)s_entries);
        }
    }
    /* npairs of an absent slot; this block's first error goes to the call's
       smallest key, which the copy kernel that follows stores into st.err */
    if (!__syncthreads_or(in_round) && tid == 0) st.npairs[b] = 0;
    if (tid == 0 && s_err != NO_ERR) atomicMin(&sc->errkey, s_err);
    /* the copy kernel's skip flag: the last plan block to finish publishes whether any block left
       pairs (one atomic per plan block; none per copy block) */
    if (tid == 0) {
        const unsigned long long old = atomicAdd(&sc->ticket, (1ull << 32) | (unsigned long long)left);
        if ((old >> 32) == gridDim.x - 1u) {
            sc->skip = (unsigned)((old & 0xffffffffull) + (unsigned long long)left) == 0u;
            sc->ticket = 0;
        }
    }
    PH_END(few_path);
}

/* ------------------------------------------------------------ direct kernel */

/* DRES_MODE_DIRECT: the codes, locations, state, statistics and error word of dres_cpu_resolve with that
   mode. Block (x, b): entries (x * U + u) * DIRECT_T + tid, u < U, of round position b (padding positions
   b >= n_round: -1); U > 1 only where the grid would exceed a few blocks per SM (each block ends with a few
   atomics on the same words, which a grid of thousands of blocks queues up);
   block (0, b) also sets the counters of b's slot (the protection epoch, no distinct misses) and zeroes
   npairs of slot index b (every slot's count is 0 after a call that copies nothing). */
static __global__ void __launch_bounds__(DIRECT_T) dres_direct_kernel(const __grid_constant__ dres_state st,
                                                                      const dres_round *__restrict__ rd, int32_t k,
                                                                      const int32_t *__restrict__ sel,
                                                                      int32_t *__restrict__ loc, dres_scratch *sc,
                                                                      const __grid_constant__ dres_divs dv, int32_t U)
{
    __shared__ int s_direct, s_ent;
    __shared__ unsigned long long s_err;
    dres_pdl_wait(); /* as the plan kernel: after the kernel before it */
    dres_pdl_launch();
    const int tid = (int)threadIdx.x;
    const int32_t b = (int32_t)blockIdx.y, N = st.N, nsrc = st.nsrc, KK = st.spec_width;
    const int64_t all = (int64_t)KK * k, e0 = (int64_t)blockIdx.x * U * DIRECT_T + tid;
    const int64_t lstride = (int64_t)N * KK * k; /* loc: one source to the next */
    int32_t *locb = loc + (int64_t)b * KK * k;
    if (tid == 0) {
        s_direct = s_ent = 0;
        s_err = NO_ERR;
    }
    __syncthreads();
    const int32_t n_round = rd->n_round;
    int c_direct = 0, c_ent = 0;
    unsigned long long my_err = NO_ERR;
    if (b >= n_round) {
        for (int32_t u = 0; u < U; u++) {
            const int64_t e = e0 + (int64_t)u * DIRECT_T;
            if (e < all)
                for (int32_t si = 0; si < nsrc; si++) locb[si * lstride + e] = -1;
        }
    } else {
        const int32_t r = dres_rd_slot(rd, b), K = dres_rd_K(rd, b);
        const int64_t n = dres_rd_n(rd, b), tail_lo = dres_rd_tail_lo(rd, N, st.group, b);
        const int64_t nent = (int64_t)K * k;
        for (int32_t u = 0; u < U; u++) {
            const int64_t e = e0 + (int64_t)u * DIRECT_T;
            int64_t c = DRES_PAD;
            if (e < nent) {
                const int32_t s = __ldg(sel + (int64_t)b * KK * k + e);
                const int32_t v = dres_validate(s, st.m, n, (int32_t)udiv_q(dv.k, (uint32_t)e), st.max_rows);
                if (v == 0) {
                    c = direct_fast(s, tail_lo, dv, st.opt_ready + (int64_t)r * st.max_opt_pages, st.max_opt_pages);
                    if (c) c_direct++;
                }
                if (v > 1 || (v == 0 && !c)) { /* bad, or not served directly (DHS_ERR_STATE) */
                    c = DRES_CODE(DRES_K_BAD, 0);
                    const unsigned long long key = err_key(b, 0, e, v > 1 ? v : 12);
                    if (key < my_err) my_err = key;
                }
                st.code[(int64_t)r * KK * st.sel_k + e] = c;
            }
            if (e < all) {
                const int ok = c >= 0 && DRES_KIND(c) != DRES_K_BAD;
                for (int32_t si = 0; si < nsrc; si++)
                    locb[si * lstride + e] = ok ? (int32_t)phys_fast(&st, dv, r, si, c) : -1;
                c_ent += ok;
            }
        }
        if (blockIdx.x == 0 && tid == 0) { /* the request's counters: a call without misses */
            int32_t *meta = st.meta + (int64_t)r * DRES_META;
            if (meta[DRES_M_PROT_EPOCH] != (int32_t)rd->epoch) {
                meta[DRES_M_PROT_EPOCH] = (int32_t)rd->epoch;
                meta[DRES_M_NPROT] = 0;
            }
            st.ndmiss[r] = 0;
        }
    }
    if (blockIdx.x == 0 && tid == 0) st.npairs[b] = 0;
    block_add(&s_direct, c_direct);
    block_add(&s_ent, c_ent);
    if (my_err != NO_ERR) atomicMin(&s_err, my_err);
    __syncthreads();
    if (tid == 0) {
        unsigned long long *S = (unsigned long long *)st.stats;
        if (blockIdx.x == 0 && b == 0) atomicAdd(S + DRES_S_CALLS, 1ull);
        if (s_direct) atomicAdd(S + DRES_S_DIRECT, (unsigned long long)s_direct);
        if (s_ent) atomicAdd(S + DRES_S_ENTRIES, (unsigned long long)s_ent);
        /* the call's first error: a block with one orders its key before its count (a fence only there, so
           a call without errors pays none); the last block to count stores the smallest key's code into
           st.err when that is 0, as the copy kernel does after the plan kernel */
        const int had = s_err != NO_ERR;
        if (had) {
            atomicMin(&sc->errkey, s_err);
            __threadfence();
        }
        const unsigned long long old = atomicAdd(&sc->ticket, (1ull << 32) | (unsigned long long)had);
        if ((old >> 32) == gridDim.x * gridDim.y - 1u) {
            if ((old & 0xffffffffull) + (unsigned long long)had) {
                __threadfence();
                err_store(sc, st.err);
            }
            sc->skip = 1u;
            sc->ticket = 0;
        }
    }
}

/* ------------------------------------------------------------ promote kernel */

/* promotion of round position b of one group (one block) */
static __device__ __forceinline__ void promote_block(const dres_state *sp, const dres_round *__restrict__ rd, int32_t b)
{
    __shared__ int s_cnt[32 * NWARP];
    __shared__ int s_w[33];
    __shared__ int s_stop, s_taken;
    const dres_state &st = *sp;
    const int tid = (int)threadIdx.x;
    const int32_t B = st.B, nsrc = st.nsrc;
    const int32_t n_round = rd->n_round;
    const uint32_t epoch = rd->epoch, promo = epoch ^ DRES_PROMO_BIT;
    dres_pdl_launch();
    if (tid == 0) s_taken = 0;
    /* the arenas are free after this pass */
    if (b == 0 && tid == 0 && *st.stage_owner == st.group) *st.stage_owner = -1;
    zero_npairs_if_absent(sp, rd, n_round);
    if (b >= n_round) return;
    const int32_t r = dres_rd_slot(rd, b);
    int32_t *meta = st.meta + (int64_t)r * DRES_META;
    const int32_t ns = meta[DRES_M_NSTAGED];
    if (ns == 0) {
        if (tid == 0) st.npairs[r] = 0;
        return;
    }
    const int64_t per_slot = (int64_t)st.spec_width * st.sel_k;
    int32_t *slot_of = st.slot_of + (int64_t)r * st.max_rows;
    int32_t *row_of = st.row_of + (int64_t)r * B;
    uint32_t *used = st.used + (int64_t)r * B;
    uint8_t *ref = st.ref + (int64_t)r * B;
    const int32_t *staged = st.staged_row + (int64_t)r * st.stage_rows;
    for (int32_t i = tid; i < ns; i += DT) slot_of[staged[i]] = -1;
    const int32_t first = ns > B ? ns - B : 0, npro = ns - first;
    const int32_t filled = meta[DRES_M_FILLED];
    const int32_t nfree = npro < B - filled ? npro : B - filled;
    for (int32_t i = tid; i < nfree; i += DT) used[filled + i] = promo;
    int32_t *victims = st.victim + (int64_t)r * per_slot;
    __syncthreads();
    const int32_t nv = npro > nfree ? sweep_block(sp, r, meta[DRES_M_HAND], npro - nfree, promo, promo, epoch, victims, s_cnt, s_w,
                                                  &s_stop, &s_taken, 0)
                                    : 0;
    __syncthreads(); /* victims, s_taken; every thread read meta */
    if (tid == 0) {
        meta[DRES_M_FILLED] = filled + nfree;
        /* promoted slots are no longer protected in this round */
        if (meta[DRES_M_PROT_EPOCH] == (int32_t)epoch) meta[DRES_M_NPROT] -= s_taken;
    }
    const int32_t np = nfree + nv;
    uint64_t *pairs = st.pairs + (int64_t)r * per_slot * nsrc * 2;
    for (int32_t i = tid; i < np; i += DT) {
        const int32_t sidx = first + i, s = staged[sidx];
        const int32_t q = i < nfree ? filled + i : victims[i - nfree];
        if (i >= nfree) {
            const int32_t old = row_of[q];
            if (old >= 0) slot_of[old] = -1;
        }
        row_of[q] = s;
        slot_of[s] = q;
        ref[q] = 1;
        for (int32_t si = 0; si < nsrc; si++) {
            const int64_t pi = (int64_t)i * nsrc + si;
            pairs[2 * pi] = (uint64_t)(uintptr_t)(st.pool + (uint64_t)dres_phys(sp, r, si, DRES_CODE(DRES_K_STAGE, sidx)) * st.row_stride);
            pairs[2 * pi + 1] = (uint64_t)(uintptr_t)(st.pool + (uint64_t)dres_phys(sp, r, si, DRES_CODE(DRES_K_HOT, q)) * st.row_stride);
        }
    }
    if (tid == 0) {
        st.npairs[r] = np * nsrc;
        meta[DRES_M_NSTAGED] = 0;
        if (np) atomicAdd((unsigned long long *)&st.stats[DRES_S_PROMOTED], (unsigned long long)np);
    }
}

static __global__ void __launch_bounds__(DT) dres_promote_kernel(const __grid_constant__ dres_state st,
                                                                 const dres_round *__restrict__ rd)
{
    promote_block(&st, rd, (int32_t)blockIdx.x);
}

/* every group at once (dhs_round_end): block (b, g) promotes round position b of group g. Groups share
   only the staging-owner word, which only the owning group's block 0 writes */
static __global__ void __launch_bounds__(DT) dres_promote_all_kernel(const dres_state *__restrict__ sts,
                                                                     const dres_round *__restrict__ rd)
{
    promote_block(&sts[blockIdx.y], rd, (int32_t)blockIdx.x);
}

/* ------------------------------------------------------------ copy kernel */

/* moves the pairs of the last call: npairs[r] pairs of slot r at
   pairs + r * per_slot_pairs * 2; all of them (only < 0) or only those of
   source `only`, pairs miss * nsrc + only (the split resolve) */
static __device__ __forceinline__ void copy_pairs(const uint64_t *__restrict__ pairs, const int32_t *__restrict__ npairs,
                                                  int32_t N, int64_t per_slot_pairs, uint32_t vecs, int32_t only,
                                                  int32_t nsrc)
{
    extern __shared__ int s_off[]; /* [N + 1] exclusive offsets */
    __shared__ int s_w[33];
    const int tid = (int)threadIdx.x, lane = tid & 31;
    int carry = 0;
    for (int32_t base = 0; base < N; base += CT) {
        int v = base + tid < N ? npairs[base + tid] : 0;
        if (only >= 0) v /= nsrc;
        int tot;
        const int o = block_excl_scan(v, s_w, CWARP, &tot);
        if (base + tid < N) s_off[base + tid] = carry + o;
        carry += tot;
    }
    if (tid == 0) s_off[N] = carry;
    __syncthreads();
    const int total = carry;
    const int64_t W = (int64_t)gridDim.x * CWARP;
    const int64_t w0 = (int64_t)blockIdx.x * CWARP + (tid >> 5);
    for (int64_t g0 = w0; g0 < total; g0 += W * DRES_CP_ROWS) {
        const uint4 *src[DRES_CP_ROWS];
        uint4 *dst[DRES_CP_ROWS];
        bool ok[DRES_CP_ROWS];
#pragma unroll
        for (int u = 0; u < DRES_CP_ROWS; u++) {
            const int64_t g = g0 + u * W;
            ok[u] = g < total;
            src[u] = 0;
            dst[u] = 0;
            if (ok[u]) {
                int lo = 0, hi = N; /* largest r with s_off[r] <= g and npairs[r] > 0 */
                while (hi - lo > 1) {
                    const int mid = (lo + hi) >> 1;
                    if (s_off[mid] <= g) lo = mid;
                    else hi = mid;
                }
                const int64_t j = only >= 0 ? (g - s_off[lo]) * nsrc + only : g - s_off[lo];
                const uint64_t *p = pairs + ((int64_t)lo * per_slot_pairs + j) * 2;
                src[u] = (const uint4 *)__ldg((const unsigned long long *)p);
                dst[u] = (uint4 *)__ldg((const unsigned long long *)p + 1);
            }
        }
        for (uint32_t v0 = 0; v0 < vecs; v0 += 32 * DRES_CP_VECS) {
            uint4 x[DRES_CP_ROWS][DRES_CP_VECS];
#pragma unroll
            for (int u = 0; u < DRES_CP_ROWS; u++)
#pragma unroll
                for (int c = 0; c < DRES_CP_VECS; c++) {
                    const uint32_t v = v0 + (uint32_t)c * 32u + (uint32_t)lane;
                    if (ok[u] && v < vecs) x[u][c] = dhs_ld_nc_v4(src[u] + v);
                }
#pragma unroll
            for (int u = 0; u < DRES_CP_ROWS; u++)
#pragma unroll
                for (int c = 0; c < DRES_CP_VECS; c++) {
                    const uint32_t v = v0 + (uint32_t)c * 32u + (uint32_t)lane;
                    if (ok[u] && v < vecs) dhs_st_cg_v4(dst[u] + v, x[u][c]);
                }
        }
    }
}

static __global__ void __launch_bounds__(CT) dres_copy_kernel(const uint64_t *__restrict__ pairs,
                                                              const int32_t *__restrict__ npairs, int32_t N,
                                                              int64_t per_slot_pairs, uint32_t vecs, int do_copy,
                                                              int32_t src, int32_t nsrc, dres_scratch *sc,
                                                              int32_t *err)
{
    /* launched as a programmatic dependent of the plan / promote kernel: wait for it (no-op otherwise) */
    dres_pdl_wait();
    /* the plan kernel's first error (the smallest key of all its blocks), if any */
    if (sc && blockIdx.x == 0 && threadIdx.x == 0) err_store(sc, err);
    /* nothing left by the plan kernel (no misses, or every block copied its own): done. One load of the
       flag per block, not per warp: every copy block reads the same word, and a load per warp of a few
       hundred blocks queues at that word's L2 slice (the flag cost more than the npairs scan it skips) */
    if (!do_copy || (sc && __syncthreads_or(threadIdx.x == 0 && *(volatile unsigned *)&sc->skip))) return;
    copy_pairs(pairs, npairs, N, per_slot_pairs, vecs, src, nsrc);
}

/* the promotions' pairs of every group (dhs_round_end): blocks (x, g) copy group g's pairs */
static __global__ void __launch_bounds__(CT) dres_copy_all_kernel(const dres_state *__restrict__ sts, uint32_t vecs)
{
    dres_pdl_wait();
    const dres_state *st = &sts[blockIdx.y];
    copy_pairs(st->pairs, st->npairs, st->N, (int64_t)st->spec_width * st->sel_k * st->nsrc, vecs, -1, 1);
}

/* ------------------------------------------------------------ reset kernel */

static __global__ void dres_reset_kernel(const __grid_constant__ dres_state st, int32_t r)
{
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = i0; i < st.max_rows; i += stride) st.slot_of[(int64_t)r * st.max_rows + i] = -1;
    for (int64_t q = i0; q < st.B; q += stride) {
        st.row_of[(int64_t)r * st.B + q] = -1;
        st.used[(int64_t)r * st.B + q] = 0;
        st.ref[(int64_t)r * st.B + q] = 0;
    }
    if (i0 < DRES_META) st.meta[(int64_t)r * DRES_META + i0] = 0;
}

/* ------------------------------------------------------------ launchers */

extern "C" size_t dhs_dres_scratch_bytes(void) { return sizeof(dres_scratch); }

extern "C" cudaError_t dhs_dres_phase_read(int path, int reset, double *mean_us, unsigned long long *calls)
{
#ifdef DRES_PHASE_TIMING
    if (path < 0 || path > 1) return cudaErrorInvalidValue;
    unsigned long long cyc[2][DHS_DRES_PHASES], n[2][DHS_DRES_PHASES], ns[2], cy[2];
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpyFromSymbol(cyc, g_ph_cyc, sizeof cyc);
    if (e == cudaSuccess) e = cudaMemcpyFromSymbol(n, g_ph_n, sizeof n);
    if (e == cudaSuccess) e = cudaMemcpyFromSymbol(ns, g_ph_ns, sizeof ns);
    if (e == cudaSuccess) e = cudaMemcpyFromSymbol(cy, g_ph_cy, sizeof cy);
    if (e != cudaSuccess) return e;
    /* ns per cycle from both paths' calls together (the clock is the same) */
    const double nspc = cy[0] + cy[1] ? (double)(ns[0] + ns[1]) / (double)(cy[0] + cy[1]) : 0;
    for (int i = 0; i < DHS_DRES_PHASES; i++) {
        if (calls) calls[i] = n[path][i];
        if (mean_us) mean_us[i] = n[path][i] ? (double)cyc[path][i] / (double)n[path][i] * nspc * 1e-3 : 0;
    }
    if (reset) {
        static const unsigned long long z[2][DHS_DRES_PHASES] = {{0}}, z2[2] = {0, 0};
        if ((e = cudaMemcpyToSymbol(g_ph_cyc, z, sizeof z)) != cudaSuccess) return e;
        if ((e = cudaMemcpyToSymbol(g_ph_n, z, sizeof z)) != cudaSuccess) return e;
        if ((e = cudaMemcpyToSymbol(g_ph_ns, z2, sizeof z2)) != cudaSuccess) return e;
        if ((e = cudaMemcpyToSymbol(g_ph_cy, z2, sizeof z2)) != cudaSuccess) return e;
    }
    return cudaSuccess;
#else
    (void)path;
    (void)reset;
    (void)mean_us;
    (void)calls;
    return cudaErrorNotSupported;
#endif
}

extern "C" cudaError_t dhs_dres_scratch_init(void *scratch, cudaStream_t s)
{
    cudaError_t e = cudaMemsetAsync(scratch, 0xff, sizeof(unsigned long long), s);
    if (e == cudaSuccess)
        e = cudaMemsetAsync((char *)scratch + sizeof(unsigned long long), 0, sizeof(dres_scratch) - sizeof(unsigned long long), s);
    return e;
}

/* whether the current device takes programmatic dependent launches (compute capability 9.0 or newer),
   asked once a device (the first 16; others every time; a device that cannot be asked: no) */
static int dres_pdl_device(void)
{
    static int known[16]; /* 0 unknown, 1 no, 2 yes; a benign race: every writer writes the same value */
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return (void)cudaGetLastError(), 0;
    if (dev >= 0 && dev < 16 && known[dev]) return known[dev] == 2;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        return (void)cudaGetLastError(), 0;
    if (dev >= 0 && dev < 16) known[dev] = major >= 9 ? 2 : 1;
    return major >= 9;
}

/* a launch configuration on s; pdl: launched as a programmatic dependent of the kernel before it on s
   (its blocks get resident while that kernel runs and wait in griddepcontrol.wait); at: storage for the
   one attribute */
static cudaLaunchConfig_t launch_cfg(dim3 grid, unsigned block, size_t smem, cudaStream_t s, int pdl,
                                     cudaLaunchAttribute *at)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    at->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at->val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl && dres_pdl_device() ? 1 : 0;
    return cfg;
}

/* pdl: launched as a programmatic dependent of the kernel before it on s
   (its blocks get resident while that kernel runs and wait in
   griddepcontrol.wait; this hides the launch gap, also inside graphs) */
static cudaError_t copy_launch(const dres_state *st, int32_t copy_blocks, cudaStream_t s, int pdl, int do_copy,
                               void *scratch, int32_t src)
{
    if (copy_blocks <= 0 || st->row_stride == 0 || (st->row_stride & 15u)) return cudaErrorInvalidValue;
    cudaLaunchAttribute at;
    cudaLaunchConfig_t cfg = launch_cfg(dim3(do_copy ? (unsigned)copy_blocks : 1u), CT, ((size_t)st->N + 1) * sizeof(int), s,
                                        pdl, &at);
    const int64_t per_slot_pairs = (int64_t)st->spec_width * st->sel_k * st->nsrc;
    const uint32_t vecs = st->row_stride / 16u;
    return cudaLaunchKernelEx(&cfg, dres_copy_kernel, (const uint64_t *)st->pairs, (const int32_t *)st->npairs, st->N,
                              per_slot_pairs, vecs, do_copy, src, st->nsrc, (dres_scratch *)scratch, st->err);
}

extern "C" cudaError_t dhs_dres_copy_launch(const dres_state *st, int32_t copy_blocks, cudaStream_t s)
{
    return copy_launch(st, copy_blocks, s, 0, 1, NULL, -1);
}

extern "C" cudaError_t dhs_dres_resolve_launch(const dres_state *st, const dres_round *rd, int32_t k,
                                               const int32_t *sel, int32_t *loc, int payload, void *scratch,
                                               int32_t copy_blocks, cudaStream_t s)
{
    return dhs_dres_resolve_launch_mark(st, rd, k, sel, loc, payload, scratch, copy_blocks, s, NULL, NULL, NULL, 0);
}

extern "C" cudaError_t dhs_dres_resolve_launch_mark(const dres_state *st, const dres_round *rd, int32_t k,
                                                    const int32_t *sel, int32_t *loc, int payload, void *scratch,
                                                    int32_t copy_blocks, cudaStream_t s, void (*mark)(void *, int),
                                                    void *user, const dhs_dres_split *split, int direct)
{
    if (st->N <= 0 || k <= 0 || k > st->sel_k || !scratch || (int64_t)st->spec_width * st->sel_k > DHS_DRES_MAX_ENTRIES)
        return cudaErrorInvalidValue;
    /* a programmatic dependent of whatever kernel precedes it on s (it waits for that grid first), so
       its launch overlaps the previous call's copy kernel inside a captured step */
    cudaLaunchAttribute at;
    if (direct) { /* DRES_MODE_DIRECT: the direct kernel alone, blocks of U x DIRECT_T entries of one request,
                     U the smallest that keeps the grid within DIRECT_BLOCKS_PER_SM blocks per SM */
        int n_sm = 0;
        const cudaError_t e = sm_count(&n_sm);
        if (e != cudaSuccess) return e;
        const int64_t tiles = ((int64_t)st->spec_width * k + DIRECT_T - 1) / DIRECT_T;
        const int64_t cap = g_direct_per_sm > 0 ? (int64_t)g_direct_per_sm * n_sm : st->N; /* 0: a block a request */
        int64_t U = (tiles * st->N + cap - 1) / cap;
        if (U < 1) U = 1;
        if (U > tiles) U = tiles;
        cudaLaunchConfig_t dc = launch_cfg(dim3((unsigned)((tiles + U - 1) / U), (unsigned)st->N), DIRECT_T, 0, s, 1, &at);
        return cudaLaunchKernelEx(&dc, dres_direct_kernel, *st, rd, k, sel, loc, (dres_scratch *)scratch, divs_make(st, k),
                                  (int32_t)U);
    }
    cudaLaunchConfig_t cfg = launch_cfg(dim3((unsigned)st->N), DT, 0, s, 1, &at);
    /* the few-miss path copies its own rows (measured 0.84-0.99x the time of leaving them to the copy
       kernel with 32 misses, batch 1-256, B 2048-65536, both layouts; neutral without misses) unless
       asked not to (DRES_PLAN_COPY_KERNEL), with payload, and when the copy kernel on s moves every
       source (not a split resolve) */
    const int sp = split && payload && st->nsrc > 1;
    const int fuse = !(st->plan_flags & DRES_PLAN_COPY_KERNEL) && payload && !sp;
    cudaError_t e = (st->plan_flags & DRES_PLAN_BLOCK_ONLY)
                        ? cudaLaunchKernelEx(&cfg, dres_plan_kernel<false>, *st, rd, k, sel, loc,
                                             (dres_scratch *)scratch, divs_make(st, k), 0)
                        : cudaLaunchKernelEx(&cfg, dres_plan_kernel<true>, *st, rd, k, sel, loc,
                                             (dres_scratch *)scratch, divs_make(st, k), fuse);
    if (e != cudaSuccess) return e;
    if (mark) mark(user, DHS_CUDA_MARK_COPY); /* profiling: an event here ends the PDL overlap */
    /* the copy kernel also stores the call's first error: launched (one block) without payload too */
    e = copy_launch(st, copy_blocks, s, 1, payload != 0, scratch, sp ? 0 : -1);
    if (e != cudaSuccess || !sp) return e;
    /* split: the queue forks after source 0's copy, so the link carries one
       source at a time and source 0's readers start as early as they can */
    if ((e = cudaEventRecord(split->ev[0], s)) != cudaSuccess) return e;
    if ((e = cudaStreamWaitEvent(split->queue, split->ev[0], 0)) != cudaSuccess) return e;
    for (int32_t si = 1; si < st->nsrc; si++) {
        if ((e = copy_launch(st, split->blocks, split->queue, 0, 1, NULL, si)) != cudaSuccess) return e;
        if ((e = cudaEventRecord(split->ev[si], split->queue)) != cudaSuccess) return e;
    }
    return cudaSuccess;
}

extern "C" cudaError_t dhs_dres_promote_launch(const dres_state *st, const dres_round *rd, int payload,
                                               int32_t copy_blocks, cudaStream_t s)
{
    if (st->N <= 0) return cudaErrorInvalidValue;
    dres_promote_kernel<<<(unsigned)st->N, DT, 0, s>>>(*st, rd);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || !payload) return e;
    return copy_launch(st, copy_blocks, s, 1, 1, NULL, -1);
}

extern "C" cudaError_t dhs_dres_promote_all_launch(const dres_state *st_dev, const dres_state *st_host, int32_t G,
                                                   const dres_round *rd, int payload, int32_t copy_blocks, cudaStream_t s)
{
    const int32_t N = st_host[0].N;
    const uint32_t stride = st_host[0].row_stride;
    if (G <= 0 || N <= 0 || G > 65535) return cudaErrorInvalidValue;
    for (int32_t g = 1; g < G; g++)
        if (st_host[g].N != N || st_host[g].row_stride != stride) return cudaErrorInvalidValue;
    dres_promote_all_kernel<<<dim3((unsigned)N, (unsigned)G), DT, 0, s>>>(st_dev, rd);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || !payload) return e;
    if (copy_blocks <= 0 || stride == 0 || (stride & 15u)) return cudaErrorInvalidValue;
    /* a programmatic dependent of the promotion; few blocks per group: only the staging owner can have
       pairs, device to device */
    const int32_t per_group = (copy_blocks + G - 1) / G > 4 ? (copy_blocks + G - 1) / G : 4;
    cudaLaunchAttribute at;
    cudaLaunchConfig_t cfg =
        launch_cfg(dim3((unsigned)per_group, (unsigned)G), CT, ((size_t)N + 1) * sizeof(int), s, 1, &at);
    return cudaLaunchKernelEx(&cfg, dres_copy_all_kernel, st_dev, stride / 16u);
}

static __global__ void dres_tail_locs_kernel(const dres_state *__restrict__ sts, int32_t n_round,
                                             const dres_round *__restrict__ rd, int32_t req_stride, int64_t src_stride,
                                             int32_t *loc)
{
    const dres_state *st = &sts[blockIdx.y];
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int32_t si = (int32_t)(i / n_round), b = (int32_t)(i % n_round);
    if (si >= st->nsrc) return;
    dres_tail_loc_one(st, rd, si, b, req_stride, src_stride, loc);
}

extern "C" cudaError_t dhs_dres_tail_locs_launch(const dres_state *st_dev, int32_t G, int32_t nsrc_max, int32_t n_round,
                                                 const dres_round *rd, int32_t req_stride, int64_t src_stride,
                                                 int32_t *loc, cudaStream_t s)
{
    if (G <= 0 || G > 65535 || nsrc_max <= 0 || n_round <= 0) return cudaErrorInvalidValue;
    const int64_t n = (int64_t)nsrc_max * n_round;
    dres_tail_locs_kernel<<<dim3((unsigned)((n + 127) / 128), (unsigned)G), 128, 0, s>>>(st_dev, n_round, rd, req_stride,
                                                                                       src_stride, loc);
    return cudaGetLastError();
}

static __global__ void __launch_bounds__(128) dres_page_tables_kernel(const dres_state *__restrict__ sts, int32_t n_round,
                                                                      const dres_round *__restrict__ rd,
                                                                      int32_t page_stride, int64_t src_stride, int32_t *tab)
{
    const dres_state *st = &sts[blockIdx.y];
    const int32_t si = (int32_t)(blockIdx.x / (unsigned)n_round), b = (int32_t)(blockIdx.x % (unsigned)n_round);
    if (si >= st->nsrc) return;
    dres_page_table_one(st, rd, si, b, page_stride, src_stride, tab, threadIdx.x, blockDim.x);
}

extern "C" cudaError_t dhs_dres_page_tables_launch(const dres_state *st_dev, int32_t G, int32_t nsrc_max, int32_t n_round,
                                                   const dres_round *rd, int32_t page_stride, int64_t src_stride,
                                                   int32_t *tab, cudaStream_t s)
{
    if (G <= 0 || G > 65535 || nsrc_max <= 0 || n_round <= 0 || (int64_t)nsrc_max * n_round > 0x7fffffff)
        return cudaErrorInvalidValue;
    dres_page_tables_kernel<<<dim3((unsigned)(nsrc_max * n_round), (unsigned)G), 128, 0, s>>>(st_dev, n_round, rd, page_stride,
                                                                                           src_stride, tab);
    return cudaGetLastError();
}

extern "C" cudaError_t dhs_dres_reset_launch(const dres_state *st, int32_t slot, cudaStream_t s)
{
    if (slot < 0 || slot >= st->N) return cudaErrorInvalidValue;
    dres_reset_kernel<<<64, 256, 0, s>>>(*st, slot);
    return cudaGetLastError();
}

extern "C" cudaError_t dhs_dres_set_direct_blocks(int per_sm)
{
    if (per_sm < -1 || per_sm > 64) return cudaErrorInvalidValue;
    g_direct_per_sm = per_sm < 0 ? DIRECT_BLOCKS_PER_SM : per_sm;
    return cudaSuccess;
}

extern "C" cudaError_t dhs_dres_set_carveout(int percent)
{
    if (percent < -1 || percent > 100) return cudaErrorInvalidValue;
    const void *const fn[] = {(const void *)dres_plan_kernel<true>,  (const void *)dres_plan_kernel<false>,
                              (const void *)dres_direct_kernel,
                              (const void *)dres_copy_kernel,       (const void *)dres_copy_all_kernel,
                              (const void *)dres_promote_kernel,    (const void *)dres_promote_all_kernel,
                              (const void *)dres_tail_locs_kernel,  (const void *)dres_page_tables_kernel};
    for (size_t i = 0; i < sizeof fn / sizeof fn[0]; i++) {
        const cudaError_t e = cudaFuncSetAttribute(fn[i], cudaFuncAttributePreferredSharedMemoryCarveout, percent);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
