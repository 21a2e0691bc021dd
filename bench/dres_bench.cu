/* dres_bench.cu - the device resolver (src/cuda/dres.cu: plan + copy kernels)
 * against an O(B) scan resolver like the peers' and against the link's
 * gather ceiling, on the same inputs in one run.
 *
 * Configurations: batch 1, 8, 64, 256 x hot rows B 2048, 4096, 16384, 65536
 * x misses per request 0, 32, 300, 2048 x K 1, 4 queries; k = 2048, 656-byte
 * rows, one source. Hand-built states (no core): request r's rows [0, B) are
 * resident at slot = row, reference bits clear; each query selects the
 * request's hit set (k - M random resident rows, a fresh order per query)
 * and its M miss rows [B, B + M) (the K queries share them: the union has k
 * rows). Before every timed repetition with misses an init kernel (not
 * timed) restores the state, so every repetition does the same work.
 *
 * Timings (cudaEvent around the work on one stream, many repetitions, p50 /
 * p90): ours = plan + copy kernels as the backend launches them; the same two
 * kernels replayed as one CUDA graph (launch overhead); scan = the baseline
 * kernel below; ceiling = the library's plain zero-copy gather kernel
 * (gather.cu) moving the same host rows to the same destinations (pairs
 * prepared in device memory). Miss GB/s = miss bytes / time.
 *
 * Host layouts: compact (each request's miss rows contiguous in one pinned
 * region, 1.3 MB per request) for the whole sweep; scattered (every miss row
 * at a random place of a multi-GiB pinned span, via one-row host chunks) for
 * a subset.
 *
 * Scan baseline (bench only; our own code after the public descriptions of
 * SGLang's HiSparse swap-in kernel): one block per request; the K * k
 * selected rows go into a shared-memory open-addressing hash; warps scan all
 * B hot slots, probing each slot's row in the hash (hit -> the entry's slot;
 * else the slot is evictable) and compact hits and evictable slots with warp
 * ballots and block scans; first-occurrence misses are compacted and take
 * evictable slots from the end; the LRU order is rewritten (evictable,
 * misses, hits: O(B) writes); locations are written; the block's warps copy
 * the misses (16-byte zero-copy loads). O(B + K k) per request.
 *
 * Usage: dres_bench [--json] [--json-file F] [--quick] [--lat] [--one N,B,M,K] [--reps N] [--span-gib G]
 *   --json: one JSON object per configuration on stdout instead of the table;
 *   --json-file F: the table on stdout and the JSON lines in F;
 *   --lat: only configurations with batch x misses <= 8192 (latency-bound);
 *   --one N,B,M,K: that configuration alone (compact layout, no breakdown:
 *     for a profiler).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

extern "C" {
#include "core/dres_spec.h"
#include "cuda/dres.cuh"
#include "cuda/gather.cuh"
#include "util/rng.h"
}

#include "bench_cuda.h"

#define ROW 656u
#define KSEL 2048
#define PAGE 64
#define MAXN 256
#define MAXB 65536
#define MAXK 4
#define MAXROWS (MAXB + 4096)
#define SCAN_T 512

static uint64_t g_rng = 0x243f6a8885a308d3ull; /* the one RNG: util/rng.h */
static uint64_t rnd(void) { return dhs_rng_next(&g_rng); }
static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
static int cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------ kernels */

/* hot state of every slot r < N: rows [0, B) at slot = row */
static __global__ void init_state(dres_state st, int32_t *lru)
{
    const int32_t r = blockIdx.y;
    const int64_t t0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, T = (int64_t)gridDim.x * blockDim.x;
    for (int64_t s = t0; s < st.max_rows; s += T) st.slot_of[(int64_t)r * st.max_rows + s] = s < st.B ? (int32_t)s : -1;
    for (int64_t q = t0; q < st.B; q += T) {
        st.row_of[(int64_t)r * st.B + q] = (int32_t)q;
        st.used[(int64_t)r * st.B + q] = 0;
        st.ref[(int64_t)r * st.B + q] = 0;
        lru[(int64_t)r * st.B + q] = (int32_t)q;
    }
    if (t0 < DRES_META) st.meta[(int64_t)r * DRES_META + t0] = t0 == DRES_M_FILLED ? st.B : 0;
}

static __device__ __forceinline__ uint32_t hsh(int32_t s, uint32_t mask) { return ((uint32_t)s * 2654435761u) & mask; }

static __device__ __forceinline__ uint4 ldnc(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* block-wide exclusive scan of v (SCAN_T threads); sw[33] shared */
static __device__ __forceinline__ int bscan(int v, int *sw, int *total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
    for (int o = 1; o < 32; o <<= 1) {
        int t = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += t;
    }
    if (lane == 31) sw[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < SCAN_T / 32 ? sw[lane] : 0, y = w;
        for (int o = 1; o < 32; o <<= 1) {
            int t = __shfl_up_sync(0xffffffffu, y, o);
            if (lane >= o) y += t;
        }
        if (lane < SCAN_T / 32) sw[lane] = y - w;
        if (lane == 31) sw[32] = y;
    }
    __syncthreads();
    const int r = sw[warp] + x - v;
    *total = sw[32];
    __syncthreads();
    return r;
}

/* the O(B) scan resolver (see the header). sel [n][nent]; row_of [n][B] =
   row held by each slot (-1 empty); lru [n][B]; evict/hits: [n][B] scratch;
   loc [n][nent]; host rows from the chunk table as in dres_spec.h */
static __global__ void __launch_bounds__(SCAN_T) scan_resolve(const __grid_constant__ dres_state st, int32_t n_round,
                                                               const int32_t *__restrict__ sel, int32_t sel_stride,
                                                               int32_t nent,
                                                               int32_t *lru, int32_t *evict, int32_t *hitl,
                                                               int32_t *loc, uint32_t hbits)
{
    extern __shared__ int32_t sh[];
    const uint32_t H = 1u << hbits, mask = H - 1;
    int32_t *keys = sh, *slotv = sh + H;
    __shared__ int sw[33];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t b = blockIdx.x, B = st.B;
    if (b >= n_round) return;
    const int32_t r = b;
    const int32_t *selb = sel + (int64_t)b * sel_stride;
    int32_t *row_of = st.row_of + (int64_t)r * B;
    for (uint32_t i = tid; i < H; i += SCAN_T) {
        keys[i] = -1;
        slotv[i] = -1;
    }
    __syncthreads();
    /* 1: insert the selection; the inserting entry owns the row */
    uint32_t owner = 0; /* bit j: entry tid + j * SCAN_T inserted its row */
    for (int j = 0; j * SCAN_T < nent; j++) {
        const int e = tid + j * SCAN_T;
        if (e >= nent) break;
        const int32_t s = selb[e];
        if (s < 0) continue;
        for (uint32_t h = hsh(s, mask);; h = (h + 1) & mask) {
            const int32_t old = atomicCAS(&keys[h], -1, s);
            if (old == -1) {
                owner |= 1u << j;
                break;
            }
            if (old == s) break;
        }
    }
    __syncthreads();
    /* 2: every hot slot probed; hits and evictable slots compacted in slot order */
    int nev = 0, nhit = 0;
    for (int32_t base = 0; base < B; base += SCAN_T) {
        const int32_t q = base + tid;
        int hit = 0, ev = 0;
        if (q < B) {
            const int32_t s = row_of[q];
            if (s >= 0) {
                for (uint32_t h = hsh(s, mask);; h = (h + 1) & mask) {
                    const int32_t k2 = keys[h];
                    if (k2 == s) {
                        slotv[h] = q;
                        hit = 1;
                        break;
                    }
                    if (k2 == -1) break;
                }
            }
            ev = !hit;
        }
        int th, te;
        const int oh = bscan(hit, sw, &th), oe = bscan(ev, sw, &te);
        if (hit) hitl[(int64_t)r * B + nhit + oh] = q;
        if (ev) evict[(int64_t)r * B + nev + oe] = q;
        nhit += th;
        nev += te;
    }
    __syncthreads();
    /* 3: misses (owners whose row was not hit), compacted in entry order; miss m takes evict[nev-1-m] */
    int nmiss = 0;
    for (int j = 0; j * SCAN_T < nent; j++) {
        const int e = tid + j * SCAN_T;
        int miss = 0;
        uint32_t h = 0;
        if (e < nent && ((owner >> j) & 1u)) {
            const int32_t s = selb[e];
            for (h = hsh(s, mask); keys[h] != s; h = (h + 1) & mask) {
            }
            miss = slotv[h] < 0;
        }
        int tm;
        const int om = bscan(miss, sw, &tm);
        if (miss && nmiss + om < nev) {
            const int32_t q = evict[(int64_t)r * B + nev - 1 - (nmiss + om)];
            slotv[h] = q;
            row_of[q] = selb[e];
        }
        nmiss += tm;
    }
    if (nmiss > nev) nmiss = nev;
    __syncthreads();
    /* 4: LRU order: untouched evictable slots, then the misses' slots, then hits */
    const int keep = nev - nmiss;
    for (int32_t i = tid; i < B; i += SCAN_T) {
        int32_t v;
        if (i < keep) v = evict[(int64_t)r * B + i];
        else if (i < nev) v = evict[(int64_t)r * B + (nev - 1 - (i - keep))];
        else v = hitl[(int64_t)r * B + (i - nev)];
        lru[(int64_t)r * B + i] = v;
    }
    /* 5: locations */
    for (int e = tid; e < nent; e += SCAN_T) {
        const int32_t s = selb[e];
        int32_t l = -1;
        if (s >= 0) {
            uint32_t h = hsh(s, mask);
            while (keys[h] != s) h = (h + 1) & mask;
            const int32_t q = slotv[h];
            if (q >= 0) l = (int32_t)dres_phys(&st, r, 0, DRES_CODE(DRES_K_HOT, q));
        }
        loc[(int64_t)b * nent + e] = l;
    }
    /* 6: copies, one warp per miss (this block's warps only) */
    const uint32_t vecs = st.row_stride / 16;
    for (int m = warp; m < nmiss; m += SCAN_T / 32) {
        const int32_t q = evict[(int64_t)r * B + nev - 1 - m];
        const int32_t s = row_of[q];
        const uint4 *src = (const uint4 *)dres_host_row(&st, r, 0, s);
        uint4 *dst = (uint4 *)(st.pool + (uint64_t)dres_phys(&st, r, 0, DRES_CODE(DRES_K_HOT, q)) * st.row_stride);
        uint4 x0, x1;
        const uint32_t v0 = lane, v1 = lane + 32;
        if (v0 < vecs) x0 = ldnc(src + v0);
        if (v1 < vecs) x1 = ldnc(src + v1);
        if (v0 < vecs) dst[v0] = x0;
        if (v1 < vecs) dst[v1] = x1;
        for (uint32_t v = lane + 64; v < vecs; v += 32) dst[v] = ldnc(src + v);
    }
}

/* ------------------------------------------------------------ setup */

typedef struct world {
    /* device */
    int32_t *slot_of, *row_of, *meta, *staged, *hot_pages, *tail_pages, *opt_pages, *arena_page, *dmiss, *ndmiss,
        *victim, *npairs, *err, *owner, *sel, *loc, *lru, *evict, *hitl, *sloc;
    uint32_t *used;
    uint8_t *ref, *opt_ready, *pool;
    uint64_t *host_chunks, *pairs, *stats;
    int64_t *code;
    dres_round *rd;
    void *scratch;
    dhs_copy_pair *gpairs; /* ceiling gather pairs (device) */
    /* host */
    uint8_t *compact;  /* [MAXN][KSEL] rows, pinned */
    uint8_t *span;     /* scattered span, pinned */
    size_t span_bytes;
    uint64_t *h_chunks;
    int32_t *h_sel;
    dhs_copy_pair *h_pairs;
    cudaStream_t s;
    int sms;
} world;

static void setup(world *w, double span_gib)
{
    CK(cudaStreamCreateWithFlags(&w->s, cudaStreamNonBlocking));
    CK(cudaDeviceGetAttribute(&w->sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t per = (size_t)MAXK * KSEL;
    CK(cudaMalloc(&w->slot_of, (size_t)MAXN * MAXROWS * 4));
    CK(cudaMalloc(&w->row_of, (size_t)MAXN * MAXB * 4));
    CK(cudaMalloc(&w->used, (size_t)MAXN * MAXB * 4));
    CK(cudaMalloc(&w->ref, (size_t)MAXN * MAXB));
    CK(cudaMalloc(&w->lru, (size_t)MAXN * MAXB * 4));
    CK(cudaMalloc(&w->evict, (size_t)MAXN * MAXB * 4));
    CK(cudaMalloc(&w->hitl, (size_t)MAXN * MAXB * 4));
    CK(cudaMalloc(&w->meta, (size_t)MAXN * DRES_META * 4));
    CK(cudaMalloc(&w->staged, (size_t)MAXN * per * 4));
    CK(cudaMalloc(&w->hot_pages, (size_t)MAXN * (MAXB / PAGE) * 4));
    CK(cudaMalloc(&w->tail_pages, (size_t)MAXN * 4));
    CK(cudaMalloc(&w->opt_pages, 64));
    CK(cudaMalloc(&w->opt_ready, 64));
    CK(cudaMalloc(&w->arena_page, 64));
    CK(cudaMalloc(&w->host_chunks, (size_t)MAXN * MAXROWS * 8));
    CK(cudaMalloc(&w->dmiss, (size_t)MAXN * per * 4));
    CK(cudaMalloc(&w->victim, (size_t)MAXN * per * 4));
    CK(cudaMalloc(&w->code, (size_t)MAXN * per * 8));
    CK(cudaMalloc(&w->pairs, (size_t)MAXN * per * 16));
    CK(cudaMalloc(&w->ndmiss, MAXN * 4));
    CK(cudaMalloc(&w->npairs, MAXN * 4));
    CK(cudaMalloc(&w->stats, DRES_S_COUNT * 8));
    CK(cudaMalloc(&w->err, 4));
    CK(cudaMalloc(&w->owner, 4));
    CK(cudaMemset(w->owner, 0xff, 4)); /* -1: arenas free */
    CK(cudaMalloc(&w->sel, (size_t)MAXN * per * 4));
    CK(cudaMalloc(&w->loc, (size_t)MAXN * per * 4));
    CK(cudaMalloc(&w->sloc, (size_t)MAXN * per * 4));
    CK(cudaMalloc(&w->rd, 65536));
    CK(cudaMalloc(&w->gpairs, (size_t)MAXN * KSEL * sizeof(dhs_copy_pair)));
    CK(cudaMalloc(&w->scratch, dhs_dres_scratch_bytes()));
    CK(dhs_dres_scratch_init(w->scratch, w->s));
    /* pool: hot rows of every slot, the tail page of every slot, arenas */
    const size_t pool_rows = (size_t)MAXN * MAXB + (size_t)MAXN * PAGE + (size_t)MAXN * per;
    CK(cudaMalloc(&w->pool, pool_rows * ROW));
    CK(cudaMemset(w->err, 0, 4));
    CK(cudaMemset(w->stats, 0, DRES_S_COUNT * 8));
    CK(cudaMemset(w->opt_ready, 0, 64));
    int32_t ap[1] = {(int32_t)(((size_t)MAXN * MAXB + (size_t)MAXN * PAGE) / PAGE)};
    CK(cudaMemcpy(w->arena_page, ap, 4, cudaMemcpyHostToDevice));
    int32_t *tp = (int32_t *)malloc(MAXN * 4);
    for (int i = 0; i < MAXN; i++) tp[i] = (int32_t)((size_t)MAXN * MAXB / PAGE + i);
    CK(cudaMemcpy(w->tail_pages, tp, MAXN * 4, cudaMemcpyHostToDevice));
    free(tp);
    CK(cudaHostAlloc(&w->compact, (size_t)MAXN * KSEL * ROW, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(w->compact, 7, (size_t)MAXN * KSEL * ROW);
    w->span = NULL;
    for (double g = span_gib; g >= 0.5 && !w->span; g /= 2) {
        w->span_bytes = (size_t)(g * (1ull << 30));
        if (cudaHostAlloc(&w->span, w->span_bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
            (void)cudaGetLastError();
            w->span = NULL;
        }
    }
    w->h_chunks = (uint64_t *)malloc((size_t)MAXN * MAXROWS * 8);
    w->h_sel = (int32_t *)malloc((size_t)MAXN * per * 4);
    w->h_pairs = (dhs_copy_pair *)malloc((size_t)MAXN * KSEL * sizeof(dhs_copy_pair));
}

static dres_state make_state(world *w, int32_t N, int32_t B, int scattered)
{
    dres_state st;
    memset(&st, 0, sizeof st);
    st.group = 0;
    st.N = N;
    st.B = B;
    st.T = PAGE;
    st.p = PAGE;
    st.nsrc = 1;
    st.m = 1;
    st.k_max = MAXK;
    st.max_k = KSEL;
    st.row_stride = ROW;
    st.max_rows = B + 4096;
    st.max_opt_pages = 0;
    st.host_chunk_rows = scattered ? 1 : KSEL;
    st.n_host_chunks = (st.max_rows + st.host_chunk_rows - 1) / st.host_chunk_rows;
    st.stage_rows = MAXK * KSEL;
    st.slot_of = w->slot_of;
    st.row_of = w->row_of;
    st.used = w->used;
    st.ref = w->ref;
    st.meta = w->meta;
    st.staged_row = w->staged;
    st.hot_pages = w->hot_pages;
    st.tail_pages = w->tail_pages;
    st.opt_pages = w->opt_pages;
    st.opt_ready = w->opt_ready;
    st.host_chunks = w->host_chunks;
    st.arena_page = w->arena_page;
    st.dmiss = w->dmiss;
    st.ndmiss = w->ndmiss;
    st.victim = w->victim;
    st.pairs = w->pairs;
    st.npairs = w->npairs;
    st.code = w->code;
    st.stats = w->stats;
    st.err = w->err;
    st.stage_owner = w->owner;
    st.pool = w->pool;
    /* hot pages of slot r: r * B / p + i (slot q of r is pool row r * B + q) */
    int32_t *hp = (int32_t *)malloc((size_t)N * (B / PAGE) * 4);
    for (int32_t r = 0; r < N; r++)
        for (int32_t i = 0; i < B / PAGE; i++) hp[(int64_t)r * (B / PAGE) + i] = r * (B / PAGE) + i;
    CK(cudaMemcpy(w->hot_pages, hp, (size_t)N * (B / PAGE) * 4, cudaMemcpyHostToDevice));
    free(hp);
    /* host chunks: compact = the miss rows [B, B + KSEL) of request r are region r of `compact`;
       scattered = every row its own chunk at a random place of the span */
    const int64_t nch = st.n_host_chunks;
    for (int32_t r = 0; r < N; r++)
        for (int64_t c = 0; c < nch; c++) {
            uint64_t a;
            if (!scattered) {
                a = (uint64_t)(uintptr_t)(w->compact + (size_t)r * KSEL * ROW); /* chunk B / KSEL; others never read */
            } else {
                const size_t nrows = w->span_bytes / ROW;
                a = (uint64_t)(uintptr_t)(w->span + (size_t)(rnd() % nrows) * ROW);
            }
            w->h_chunks[(int64_t)r * nch + c] = a;
        }
    CK(cudaMemcpy(w->host_chunks, w->h_chunks, (size_t)N * nch * 8, cudaMemcpyHostToDevice));
    return st;
}

/* selections of N requests, K queries, M misses; also the ceiling pairs */
static int64_t make_sel(world *w, const dres_state *st, int32_t N, int32_t K, int32_t M)
{
    const int32_t B = st->B, h = KSEL - M;
    int32_t *perm = (int32_t *)malloc((size_t)B * 4), *row = (int32_t *)malloc(KSEL * 4);
    int64_t np = 0;
    for (int32_t b = 0; b < N; b++) {
        for (int32_t i = 0; i < B; i++) perm[i] = i;
        for (int32_t i = 0; i < h; i++) { /* the first h of a random permutation: the hit set */
            int32_t j = i + (int32_t)(rnd() % (uint64_t)(B - i)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int32_t j = 0; j < MAXK; j++) {
            for (int32_t i = 0; i < h; i++) row[i] = perm[i];
            for (int32_t i = 0; i < M; i++) row[h + i] = B + i;
            for (int32_t i = KSEL - 1; i > 0; i--) {
                int32_t x = (int32_t)(rnd() % (uint64_t)(i + 1)), t = row[i];
                row[i] = row[x];
                row[x] = t;
            }
            memcpy(w->h_sel + ((int64_t)b * MAXK + j) * KSEL, row, KSEL * 4);
        }
        (void)K;
        for (int32_t i = 0; i < M; i++) {
            const int64_t s = B + i;
            const uint64_t a = w->h_chunks[(int64_t)b * st->n_host_chunks + s / st->host_chunk_rows] +
                               (uint64_t)(s % st->host_chunk_rows) * ROW;
            w->h_pairs[np].src = (const void *)(uintptr_t)a;
            w->h_pairs[np].dst = w->pool + ((size_t)b * B + (size_t)((i * 7919) % B)) * ROW;
            np++;
        }
    }
    CK(cudaMemcpy(w->sel, w->h_sel, (size_t)N * MAXK * KSEL * 4, cudaMemcpyHostToDevice));
    if (np) CK(cudaMemcpy(w->gpairs, w->h_pairs, (size_t)np * sizeof(dhs_copy_pair), cudaMemcpyHostToDevice));
    free(perm);
    free(row);
    return np;
}

static void set_round(world *w, int32_t N, int32_t K)
{
    static uint8_t buf[65536];
    memset(buf, 0, sizeof buf);
    dres_round *rd = (dres_round *)buf;
    rd->n_round = N;
    rd->epoch = 1;
    rd->n_groups = 1;
    rd->off_slot = 256;
    rd->off_K = rd->off_slot + MAXN * 4;
    rd->off_n = rd->off_K + MAXN * 4;
    rd->off_tail_lo = rd->off_n + MAXN * 8;
    rd->bytes = rd->off_tail_lo + MAXN * 8;
    for (int32_t b = 0; b < N; b++) {
        ((int32_t *)(buf + rd->off_slot))[b] = b;
        ((int32_t *)(buf + rd->off_K))[b] = K;
        ((int64_t *)(buf + rd->off_n))[b] = MAXROWS;          /* everything visible */
        ((int64_t *)(buf + rd->off_tail_lo))[b] = MAXROWS + 1; /* no tail hits */
    }
    CK(cudaMemcpy(w->rd, buf, (size_t)rd->bytes, cudaMemcpyHostToDevice));
}

/* ------------------------------------------------------------ timing */

typedef struct tstat {
    float p50, p90;
} tstat;

static tstat summarize(float *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_f);
    tstat s = {t[n / 2] * 1000.0f, t[(n * 9) / 10] * 1000.0f};
    return s;
}

enum { W_OURS, W_GRAPH, W_SCAN, W_CEIL, W_PLAN, W_COPY, W_EMPTY };

static __global__ void empty_kernel(void) {}

typedef struct job {
    world *w;
    dres_state st;
    int32_t N, K, M;
    int64_t np;
    cudaGraphExec_t gexec;
    uint32_t hbits;
    size_t scan_smem;
} job;

static void run_one(job *j, int what)
{
    world *w = j->w;
    switch (what) {
    case W_OURS:
        CK(dhs_dres_resolve_launch(&j->st, w->rd, KSEL, w->sel, w->loc, 1, w->scratch, 4 * w->sms, w->s));
        break;
    case W_GRAPH: CK(cudaGraphLaunch(j->gexec, w->s)); break;
    case W_SCAN:
        scan_resolve<<<j->N, SCAN_T, j->scan_smem, w->s>>>(j->st, j->N, w->sel, MAXK * KSEL, j->K * KSEL, w->lru,
                                                          w->evict, w->hitl, w->sloc, j->hbits);
        CK(cudaGetLastError());
        break;
    case W_CEIL:
        if (j->np) CK(dhs_cuda_gather_launch(w->gpairs, j->np, ROW, dhs_cuda_gather_grid(j->np, 4 * w->sms), w->s));
        break;
    case W_PLAN: /* plan kernel + the one-block error store */
        CK(dhs_dres_resolve_launch(&j->st, w->rd, KSEL, w->sel, w->loc, 0, w->scratch, 4 * w->sms, w->s));
        break;
    case W_COPY: CK(dhs_dres_copy_launch(&j->st, 4 * w->sms, w->s)); break;
    case W_EMPTY:
        empty_kernel<<<1, 32, 0, w->s>>>();
        CK(cudaGetLastError());
        break;
    }
}

static tstat time_it(job *j, int what, int reps, cudaEvent_t *ev)
{
    world *w = j->w;
    const dim3 ig(64, (unsigned)j->N);
    const int restore = j->M > 0 && (what == W_OURS || what == W_GRAPH || what == W_SCAN || what == W_PLAN);
    float *t = (float *)malloc((size_t)reps * sizeof(float));
    init_state<<<ig, 256, 0, w->s>>>(j->st, w->lru);
    for (int i = 0; i < 3; i++) { /* warm-up */
        run_one(j, what);
        if (restore) init_state<<<ig, 256, 0, w->s>>>(j->st, w->lru);
    }
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(ev[2 * i], w->s));
        run_one(j, what);
        CK(cudaEventRecord(ev[2 * i + 1], w->s));
        if (restore) init_state<<<ig, 256, 0, w->s>>>(j->st, w->lru);
    }
    CK(cudaStreamSynchronize(w->s));
    for (int i = 0; i < reps; i++) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    tstat s = summarize(t, reps);
    free(t);
    return s;
}

int main(int argc, char **argv)
{
    int json = 0, quick = 0, lat = 0, reps = 60;
    int one[4] = {0, 0, -1, 0};
    FILE *jf = NULL;
    double span_gib = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--lat")) lat = 1;
        else if (!strcmp(argv[i], "--one") && i + 1 < argc &&
                 sscanf(argv[i + 1], "%d,%d,%d,%d", &one[0], &one[1], &one[2], &one[3]) == 4)
            i++;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--span-gib") && i + 1 < argc) span_gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--json-file") && i + 1 < argc) {
            jf = fopen(argv[++i], "w");
            if (!jf) {
                perror("--json-file");
                return 2;
            }
        }
        else {
            fprintf(stderr, "usage: dres_bench [--json] [--json-file F] [--quick] [--lat] [--one N,B,M,K] [--reps N] "
                            "[--span-gib G]\n");
            return 2;
        }
    }
    if (reps < 10) reps = 10;
    const double t0 = now_us();
    world w;
    memset(&w, 0, sizeof w);
    setup(&w, span_gib);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# dres_bench on %s (%d SMs); k=%d, %u-B rows, 1 source; %d reps; scattered span %.1f GiB; setup %.1f s\n",
           prop.name, w.sms, KSEL, ROW, reps, w.span ? (double)w.span_bytes / (1ull << 30) : 0.0, (now_us() - t0) / 1e6);
    CK(cudaFuncSetAttribute(scan_resolve, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * 4 * 16384));
    cudaEvent_t *ev = (cudaEvent_t *)malloc((size_t)2 * reps * sizeof(cudaEvent_t));
    for (int i = 0; i < 2 * reps; i++) CK(cudaEventCreate(&ev[i]));

    static const int32_t batches[] = {1, 8, 64, 256}, Bs[] = {2048, 4096, 16384, 65536}, Ms[] = {0, 32, 300, 2048},
                         Ks[] = {1, 4};
    if (!json)
        printf("%-5s %-5s %6s %5s %2s | %8s %8s %8s | %8s %8s | %8s | %7s %7s %5s | %6s\n", "layout", "batch", "B",
               "M", "K", "ours50", "ours90", "graph50", "scan50", "scan90", "ceil50", "GB/s", "ceilGB", "ratio", "vsScan");
    for (int layout = 0; layout < 2; layout++) {
        if (layout == 1 && !w.span) break;
        for (int bi = 0; bi < 4; bi++)
            for (int Bi = 0; Bi < 4; Bi++) {
                const int32_t N = batches[bi], B = Bs[Bi];
                if (layout == 1 && (B != 4096 || N == 8)) continue; /* scattered: a subset */
                if (quick && (B == 16384 || N == 8)) continue;
                if (one[2] >= 0 && (layout || N != one[0] || B != one[1])) continue;
                job j;
                memset(&j, 0, sizeof j);
                j.w = &w;
                j.N = N;
                j.st = make_state(&w, N, B, layout);
                for (int Mi = 0; Mi < 4; Mi++)
                    for (int Ki = 0; Ki < 2; Ki++) {
                        const int32_t M = Ms[Mi], K = Ks[Ki];
                        if (layout == 1 && (M < 300 || K != 1)) continue;
                        if (lat && (int64_t)N * M > 8192) continue;
                        if (one[2] >= 0 && (M != one[2] || K != one[3])) continue;
                        j.K = K;
                        j.M = M;
                        j.np = make_sel(&w, &j.st, N, K, M);
                        set_round(&w, N, K);
                        j.hbits = K == 1 ? 12 : 14;
                        j.scan_smem = (size_t)2 * 4 * (1u << j.hbits);
                        /* graph of the two kernels */
                        cudaGraph_t g;
                        CK(cudaStreamBeginCapture(w.s, cudaStreamCaptureModeThreadLocal));
                        CK(dhs_dres_resolve_launch(&j.st, w.rd, KSEL, w.sel, w.loc, 1, w.scratch, 4 * w.sms, w.s));
                        CK(cudaStreamEndCapture(w.s, &g));
                        CK(cudaGraphInstantiate(&j.gexec, g, 0));
                        const tstat o = time_it(&j, W_OURS, reps, ev);
                        const tstat gr = time_it(&j, W_GRAPH, reps, ev);
                        const tstat sc = time_it(&j, W_SCAN, reps, ev);
                        const tstat ce = M ? time_it(&j, W_CEIL, reps, ev) : tstat{0, 0};
                        CK(cudaGraphExecDestroy(j.gexec));
                        CK(cudaGraphDestroy(g));
                        const double bytes = (double)N * M * ROW;
                        const double gbs = M ? bytes / (o.p50 * 1e3) : 0, cgbs = M ? bytes / (ce.p50 * 1e3) : 0;
                        const char *lay = layout ? "scat" : "comp";
                        if (json || jf)
                            fprintf(json ? stdout : jf, "{\"layout\":\"%s\",\"batch\":%d,\"B\":%d,\"misses\":%d,\"K\":%d,\"k\":%d,\"row_bytes\":%u,"
                                   "\"ours_p50_us\":%.2f,\"ours_p90_us\":%.2f,\"graph_p50_us\":%.2f,\"graph_p90_us\":%.2f,"
                                   "\"scan_p50_us\":%.2f,\"scan_p90_us\":%.2f,\"ceiling_p50_us\":%.2f,\"miss_gbs\":%.2f,"
                                   "\"ceiling_gbs\":%.2f,\"ratio_to_ceiling\":%.3f,\"speedup_vs_scan\":%.3f}\n",
                                   lay, N, B, M, K, KSEL, ROW, o.p50, o.p90, gr.p50, gr.p90, sc.p50, sc.p90, ce.p50, gbs,
                                   cgbs, M ? ce.p50 / o.p50 : 0.0, sc.p50 / o.p50);
                        if (!json)
                            printf("%-6s %-5d %6d %5d %2d | %8.2f %8.2f %8.2f | %8.2f %8.2f | %8.2f | %7.2f %7.2f %5.2f | %6.2f\n",
                                   lay, N, B, M, K, o.p50, o.p90, gr.p50, sc.p50, sc.p90, ce.p50, gbs, cgbs,
                                   M ? ce.p50 / o.p50 : 0.0, sc.p50 / o.p50);
                        fflush(stdout);
                    }
            }
    }
    /* where the time goes: plan kernel alone, copy kernel alone (the pairs of
       the last plan), an empty kernel; compact layout, B = 4096, K = 1 */
    if (one[2] >= 0) goto done;
    printf("# breakdown (p50 us, B=4096 K=1): batch M | plan(+err store) copy-only empty-kernel\n");
    for (int bi = 0; bi < 4; bi += (bi == 0 ? 2 : 1)) {
        const int32_t N = batches[bi];
        job j;
        memset(&j, 0, sizeof j);
        j.w = &w;
        j.N = N;
        j.K = 1;
        j.st = make_state(&w, N, 4096, 0);
        for (int Mi = 0; Mi < 4; Mi += 3) {
            j.M = Ms[Mi];
            j.np = make_sel(&w, &j.st, N, 1, j.M);
            set_round(&w, N, 1);
            const tstat pl = time_it(&j, W_PLAN, reps, ev);
            init_state<<<dim3(64, (unsigned)N), 256, 0, w.s>>>(j.st, w.lru);
            CK(dhs_dres_resolve_launch(&j.st, w.rd, KSEL, w.sel, w.loc, 0, w.scratch, 4 * w.sms, w.s));
            const tstat cp = time_it(&j, W_COPY, reps, ev);
            const tstat em = time_it(&j, W_EMPTY, reps, ev);
            printf("# breakdown %4d %5d | %8.2f %8.2f %8.2f\n", N, j.M, pl.p50, cp.p50, em.p50);
            if (jf)
                fprintf(jf, "{\"breakdown\":1,\"batch\":%d,\"B\":4096,\"misses\":%d,\"K\":1,\"plan_p50_us\":%.2f,"
                            "\"copy_p50_us\":%.2f,\"empty_kernel_p50_us\":%.2f}\n",
                        N, j.M, pl.p50, cp.p50, em.p50);
        }
    }
done:
    if (jf) fclose(jf);
    printf("# total %.1f s\n", (now_us() - t0) / 1e6);
    return 0;
}
