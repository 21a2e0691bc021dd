/* dres_bench.cu - the device resolver (src/cuda/dres.cu: plan + copy kernels)
 * against an O(B) scan resolver like the peers' and against the link's
 * gather ceiling, on the same inputs in one run. The engine of both
 * `dhs bench resolve --backend cuda` and the standalone `dres_bench`
 * (dhs_bench_resolve_cuda, bench/dres_bench.h).
 *
 * Configurations: the cross product of the lists of a sweep (defaults: batch
 * 1, 8, 64, 256 x hot rows B 2048, 4096, 16384, 65536 x misses per request 0,
 * 32, 300, 2048 x K 1, 4 queries); k = 2048, 656-byte rows, one source.
 * Hand-built states (no core): request r's rows [0, B) are resident at slot =
 * row, reference bits clear; each query selects the request's hit set (k - M
 * random resident rows, a fresh order per query) and its M miss rows [B, B +
 * M) (the K queries share them: the union has k rows). Before every timed
 * repetition with misses an init kernel (not timed) restores the state, so
 * every repetition does the same work.
 *
 * Timings (cudaEvent around the work on one stream, many repetitions, p50 /
 * p90): ours = plan + copy kernels as the backend launches them (eager); the
 * same two kernels replayed as one CUDA graph (launch overhead); scan = the
 * baseline kernel below; ceiling = the library's plain zero-copy gather kernel
 * (gather.cu) moving the same host rows to the same destinations (pairs
 * prepared in device memory). Miss GB/s = miss bytes / time. For M = 0: R
 * resolves captured back to back in ONE graph, per call = graph time / R (what
 * a resolve costs inside a captured decode step, without the per-launch event
 * floor). Once per run: an empty kernel timed the same way (the floor of every
 * eager figure).
 *
 * Host layouts: compact (each request's miss rows contiguous in one pinned
 * region, k x row bytes per request); scattered (every miss row at a random
 * place of a multi-GiB pinned span, via one-row host chunks). The span's pages
 * (--host-pages): default = cudaHostAlloc; thp = mmap + madvise(MADV_HUGEPAGE)
 * + cudaHostRegister; 2m / 1g = mmap(MAP_HUGETLB | MAP_HUGE_2MB / 1GB) +
 * cudaHostRegister; all = each kind the machine allows, one after the other on
 * the same offsets (the others reported as not available, with the reason).
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
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

extern "C" {
#include "core/dres_spec.h"
#include "cuda/dres.cuh"
#include "cuda/gather.cuh"
#include "util/rng.h"
}
#include "cuda/ldst.cuh"

#include "dres_bench.h"
/* a failed CUDA call ends the run with the runtime-error status of the dhs tool */
#define DHS_BENCH_CK_EXIT 3
#include "bench_cuda.h"

#ifndef MAP_HUGETLB
#define MAP_HUGETLB 0x40000
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif
#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif

#define PAGE 64
#define MAXK DHS_BENCH_MAX_QUERIES
#define SCAN_T 512
#define SEED 0x243f6a8885a308d3ull

static uint64_t g_rng = SEED; /* the one RNG: util/rng.h */
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
        if (v0 < vecs) x0 = dhs_ld_nc_v4(src + v0);
        if (v1 < vecs) x1 = dhs_ld_nc_v4(src + v1);
        if (v0 < vecs) dst[v0] = x0;
        if (v1 < vecs) dst[v1] = x1;
        for (uint32_t v = lane + 64; v < vecs; v += 32) dst[v] = dhs_ld_nc_v4(src + v);
    }
}

/* ------------------------------------------------------------ host pages of the scattered span */

static const char *const page_how[] = {"cudaHostAlloc(Mapped|Portable)",
                                       "mmap + madvise(MADV_HUGEPAGE) + cudaHostRegister(Mapped|Portable)",
                                       "mmap(MAP_HUGETLB|MAP_HUGE_2MB) + cudaHostRegister(Mapped|Portable)",
                                       "mmap(MAP_HUGETLB|MAP_HUGE_1GB) + cudaHostRegister(Mapped|Portable)"};

typedef struct span {
    int kind;
    uint8_t *host, *dev; /* the span on the host and its device-visible address */
    void *map;           /* mmap'ed kinds: the mapping */
    size_t bytes, map_bytes;
    double alloc_s;
    int64_t huge_kb;     /* /proc/self/smaps: AnonHugePages + *_Hugetlb within the span; -1 unknown */
    char why[384];       /* when not available: the reason */
} span;

typedef struct hp_info {
    int64_t total, free, size_kb;     /* /proc/meminfo HugePages_Total, HugePages_Free, Hugepagesize */
    int64_t total2m, free2m, total1g, free1g; /* /sys/kernel/mm/hugepages/hugepages-*kB; -1 absent */
    char thp[128], thp_defrag[128];   /* /sys/kernel/mm/transparent_hugepage/{enabled,defrag} */
} hp_info;

static int read_line(const char *path, char *b, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t r = fread(b, 1, n - 1, f);
    fclose(f);
    b[r] = 0;
    while (r && (b[r - 1] == '\n' || b[r - 1] == ' ')) b[--r] = 0;
    return 0;
}

static int64_t read_i64(const char *path)
{
    char b[64];
    if (read_line(path, b, sizeof b)) return -1;
    return strtoll(b, NULL, 10);
}

static void hp_probe(hp_info *h)
{
    memset(h, 0, sizeof *h);
    h->total = h->free = h->size_kb = -1;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long v;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "HugePages_Total: %lld", &v) == 1) h->total = v;
            else if (sscanf(line, "HugePages_Free: %lld", &v) == 1) h->free = v;
            else if (sscanf(line, "Hugepagesize: %lld", &v) == 1) h->size_kb = v;
        }
        fclose(f);
    }
    h->total2m = read_i64("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
    h->free2m = read_i64("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
    h->total1g = read_i64("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages");
    h->free1g = read_i64("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages");
    if (read_line("/sys/kernel/mm/transparent_hugepage/enabled", h->thp, sizeof h->thp)) h->thp[0] = 0;
    if (read_line("/sys/kernel/mm/transparent_hugepage/defrag", h->thp_defrag, sizeof h->thp_defrag)) h->thp_defrag[0] = 0;
}

/* huge-page-backed kB of [p, p + bytes) (transparent or hugetlbfs), from /proc/self/smaps */
static int64_t smaps_huge_kb(const void *p, size_t bytes)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    const uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    char line[512];
    int in = 0;
    int64_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        long long v;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
            in = a < hi && b > lo;
            continue;
        }
        if (in && (sscanf(line, "AnonHugePages: %lld", &v) == 1 || sscanf(line, "Private_Hugetlb: %lld", &v) == 1 ||
                   sscanf(line, "Shared_Hugetlb: %lld", &v) == 1))
            kb += v;
    }
    fclose(f);
    return kb;
}

/* the span of one kind; 0 ok, else -1 with sp->why (nothing held) */
static int span_alloc(span *sp, int kind, double gib, const hp_info *hp)
{
    memset(sp, 0, sizeof *sp);
    sp->kind = kind;
    sp->huge_kb = -1;
    const double t0 = now_us();
    const size_t GiB = 1ull << 30;
    if (kind == DHS_BENCH_PAGES_DEFAULT) {
        for (double g = gib; g >= 0.5 && !sp->host; g /= 2) {
            const size_t b = (size_t)(g * GiB);
            void *p = NULL;
            cudaError_t e = cudaHostAlloc(&p, b, cudaHostAllocMapped | cudaHostAllocPortable);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                snprintf(sp->why, sizeof sp->why, "cudaHostAlloc of %.1f GiB: %s", g, cudaGetErrorString(e));
                continue;
            }
            void *d = NULL;
            e = cudaHostGetDevicePointer(&d, p, 0);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                snprintf(sp->why, sizeof sp->why, "cudaHostGetDevicePointer: %s", cudaGetErrorString(e));
                cudaFreeHost(p);
                return -1;
            }
            sp->host = (uint8_t *)p;
            sp->dev = (uint8_t *)d;
            sp->bytes = b;
        }
        if (!sp->host) return -1;
        sp->why[0] = 0;
        sp->huge_kb = smaps_huge_kb(sp->host, sp->bytes);
        sp->alloc_s = (now_us() - t0) / 1e6;
        return 0;
    }
    const size_t page = kind == DHS_BENCH_PAGES_1G ? GiB : 2ull << 20;
    double g = gib;
    if (kind == DHS_BENCH_PAGES_THP) {
        if (!hp->thp[0]) {
            snprintf(sp->why, sizeof sp->why, "no /sys/kernel/mm/transparent_hugepage/enabled (a kernel without THP)");
            return -1;
        }
        if (strstr(hp->thp, "[never]")) {
            snprintf(sp->why, sizeof sp->why, "/sys/kernel/mm/transparent_hugepage/enabled is '%s'", hp->thp);
            return -1;
        }
    } else {
        const char *pool = kind == DHS_BENCH_PAGES_1G ? "hugepages-1048576kB" : "hugepages-2048kB";
        const int64_t fr = kind == DHS_BENCH_PAGES_1G ? hp->free1g : hp->free2m,
                      tot = kind == DHS_BENCH_PAGES_1G ? hp->total1g : hp->total2m;
        if (fr < 0) {
            snprintf(sp->why, sizeof sp->why, "no /sys/kernel/mm/hugepages/%s (the kernel has no such pool)", pool);
            return -1;
        }
        while (g >= 0.5 && ((size_t)(g * GiB) + page - 1) / page > (size_t)fr) g /= 2;
        if (g < 0.5) {
            snprintf(sp->why, sizeof sp->why,
                     "%s has %lld free of %lld pages, fewer than 0.5 GiB (as root: echo N > "
                     "/sys/kernel/mm/hugepages/%s/nr_hugepages)",
                     pool, (long long)fr, (long long)tot, pool);
            return -1;
        }
    }
    const size_t bytes = ((size_t)(g * GiB) + page - 1) / page * page;
    size_t mb = bytes;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (kind == DHS_BENCH_PAGES_THP) mb = bytes + page; /* room to align the span to 2 MiB */
    else flags |= MAP_HUGETLB | (kind == DHS_BENCH_PAGES_1G ? MAP_HUGE_1GB : MAP_HUGE_2MB);
    void *m = mmap(NULL, mb, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (m == MAP_FAILED) {
        snprintf(sp->why, sizeof sp->why, "mmap of %.1f GiB: %s", (double)bytes / GiB, strerror(errno));
        return -1;
    }
    uint8_t *p = (uint8_t *)m;
    if (kind == DHS_BENCH_PAGES_THP) {
        const uintptr_t a = ((uintptr_t)m + page - 1) & ~(uintptr_t)(page - 1);
        const size_t head = a - (uintptr_t)m, tail = mb - head - bytes;
        if (head) munmap(m, head);
        if (tail) munmap((void *)(a + bytes), tail);
        m = (void *)a;
        mb = bytes;
        p = (uint8_t *)a;
        if (madvise(p, bytes, MADV_HUGEPAGE)) {
            snprintf(sp->why, sizeof sp->why, "madvise(MADV_HUGEPAGE): %s", strerror(errno));
            munmap(m, mb);
            return -1;
        }
        /* fault the span in on the host: huge pages wherever the kernel gives them */
        for (size_t o = 0; o < bytes; o += 4096) p[o] = 0;
    }
    /* hugetlbfs spans are reserved by mmap and faulted in by the registration (no host touch, so an
       exhausted pool is an error from cudaHostRegister, never a SIGBUS) */
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(sp->why, sizeof sp->why, "cudaHostRegister of %.1f GiB: %s", (double)bytes / GiB, cudaGetErrorString(e));
        munmap(m, mb);
        return -1;
    }
    void *d = NULL;
    e = cudaHostGetDevicePointer(&d, p, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(sp->why, sizeof sp->why, "cudaHostGetDevicePointer: %s", cudaGetErrorString(e));
        cudaHostUnregister(p);
        munmap(m, mb);
        return -1;
    }
    sp->host = p;
    sp->dev = (uint8_t *)d;
    sp->map = m;
    sp->map_bytes = mb;
    sp->bytes = bytes;
    sp->huge_kb = smaps_huge_kb(p, bytes);
    sp->alloc_s = (now_us() - t0) / 1e6;
    return 0;
}

static void span_free(span *sp)
{
    if (!sp->host) return;
    if (sp->kind == DHS_BENCH_PAGES_DEFAULT) CK(cudaFreeHost(sp->host));
    else {
        CK(cudaHostUnregister(sp->host));
        munmap(sp->map, sp->map_bytes);
    }
    sp->host = sp->dev = NULL;
}

/* ------------------------------------------------------------ setup */

#define RD_STRIDE 65536          /* bytes per round descriptor buffer */
#define FRESH0 (1u << 20)        /* --fresh-rounds: the graph descriptors' first epoch */

typedef struct world {
    /* device */
    int32_t *slot_of, *row_of, *meta, *staged, *hot_pages, *tail_pages, *opt_pages, *arena_page, *dmiss, *ndmiss,
        *victim, *npairs, *err, *owner, *sel, *loc, *lru, *evict, *hitl, *sloc;
    uint32_t *used;
    uint8_t *ref, *opt_ready, *pool;
    uint64_t *host_chunks, *pairs, *stats;
    int64_t *code;
    dres_round *rd;
    /* --fresh-rounds: the R calls of the graph read descriptors R_i = rdr + i * RD_STRIDE, epochs FRESH0 + i
       (advanced by R before every replay) */
    uint8_t *rdr;
    dres_round *rdd; /* --direct: w->rd's round with every tail window from row 0 (every row served directly) */
    int32_t fresh, R;
    void *scratch;
    dhs_copy_pair *gpairs; /* ceiling gather pairs (device) */
    /* host */
    uint8_t *compact;      /* [maxN][k] rows, pinned */
    span sp;               /* the scattered span of the kind being measured */
    uint64_t *h_chunks;
    int32_t *h_sel;
    dhs_copy_pair *h_pairs;
    cudaStream_t s;
    int sms;
    int32_t copy_blocks; /* the copy kernel's grid (--copy-blocks, else the library's) */
    /* geometry */
    int32_t k, maxN, maxB;
    uint32_t row;
    int64_t maxrows;       /* slot_of stride: maxB + 4096 */
} world;

static void setup(world *w)
{
    const int32_t k = w->k, maxN = w->maxN, maxB = w->maxB;
    const size_t row = w->row, per = (size_t)MAXK * k, N = (size_t)maxN, MR = (size_t)w->maxrows;
    CK(cudaStreamCreateWithFlags(&w->s, cudaStreamNonBlocking));
    CK(cudaDeviceGetAttribute(&w->sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaMalloc(&w->slot_of, N * MR * 4));
    CK(cudaMalloc(&w->row_of, N * maxB * 4));
    CK(cudaMalloc(&w->used, N * maxB * 4));
    CK(cudaMalloc(&w->ref, N * maxB));
    CK(cudaMalloc(&w->lru, N * maxB * 4));
    CK(cudaMalloc(&w->evict, N * maxB * 4));
    CK(cudaMalloc(&w->hitl, N * maxB * 4));
    CK(cudaMalloc(&w->meta, N * DRES_META * 4));
    CK(cudaMalloc(&w->staged, N * per * 4));
    CK(cudaMalloc(&w->hot_pages, N * (maxB / PAGE) * 4));
    CK(cudaMalloc(&w->tail_pages, N * 4));
    CK(cudaMalloc(&w->opt_pages, 64));
    CK(cudaMalloc(&w->opt_ready, 64));
    CK(cudaMalloc(&w->arena_page, 64));
    CK(cudaMalloc(&w->host_chunks, N * MR * 8));
    CK(cudaMalloc(&w->dmiss, N * per * 4));
    CK(cudaMalloc(&w->victim, N * per * 4));
    CK(cudaMalloc(&w->code, N * per * 8));
    CK(cudaMalloc(&w->pairs, N * per * 16));
    CK(cudaMalloc(&w->ndmiss, N * 4));
    CK(cudaMalloc(&w->npairs, N * 4));
    CK(cudaMalloc(&w->stats, DRES_S_COUNT * 8));
    CK(cudaMalloc(&w->err, 4));
    CK(cudaMalloc(&w->owner, 4));
    CK(cudaMemset(w->owner, 0xff, 4)); /* -1: arenas free */
    CK(cudaMalloc(&w->sel, N * per * 4));
    CK(cudaMalloc(&w->loc, N * per * 4));
    CK(cudaMalloc(&w->sloc, N * per * 4));
    CK(cudaMalloc(&w->rd, RD_STRIDE));
    CK(cudaMalloc(&w->gpairs, N * k * sizeof(dhs_copy_pair)));
    CK(cudaMalloc(&w->scratch, dhs_dres_scratch_bytes()));
    CK(dhs_dres_scratch_init(w->scratch, w->s));
    /* pool: hot rows of every slot, the tail page of every slot, arenas */
    const size_t pool_rows = N * maxB + N * PAGE + N * per;
    CK(cudaMalloc(&w->pool, pool_rows * row));
    CK(cudaMemset(w->err, 0, 4));
    CK(cudaMemset(w->stats, 0, DRES_S_COUNT * 8));
    CK(cudaMemset(w->opt_ready, 0, 64));
    int32_t ap[1] = {(int32_t)((N * maxB + N * PAGE) / PAGE)};
    CK(cudaMemcpy(w->arena_page, ap, 4, cudaMemcpyHostToDevice));
    int32_t *tp = (int32_t *)malloc(N * 4);
    for (int32_t i = 0; i < maxN; i++) tp[i] = (int32_t)(N * maxB / PAGE + i);
    CK(cudaMemcpy(w->tail_pages, tp, N * 4, cudaMemcpyHostToDevice));
    free(tp);
    CK(cudaHostAlloc(&w->compact, N * k * row, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(w->compact, 7, N * k * row);
    w->h_chunks = (uint64_t *)malloc(N * MR * 8);
    w->h_sel = (int32_t *)malloc(N * per * 4);
    w->h_pairs = (dhs_copy_pair *)malloc(N * k * sizeof(dhs_copy_pair));
    if (!w->h_chunks || !w->h_sel || !w->h_pairs) CK(cudaErrorMemoryAllocation);
}

static void teardown(world *w)
{
    void *d[] = {w->slot_of, w->row_of, w->meta,   w->staged, w->hot_pages, w->tail_pages, w->opt_pages,
                 w->arena_page, w->dmiss, w->ndmiss, w->victim, w->npairs, w->err,   w->owner,
                 w->sel,     w->loc,    w->lru,    w->evict,  w->hitl,      w->sloc,       w->used,
                 w->ref,     w->opt_ready, w->pool, w->host_chunks, w->pairs, w->stats,    w->code,
                 w->rd,      w->scratch, w->gpairs, w->rdr, w->rdd};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) CK(cudaFree(d[i]));
    CK(cudaFreeHost(w->compact));
    span_free(&w->sp);
    CK(cudaStreamDestroy(w->s));
    free(w->h_chunks);
    free(w->h_sel);
    free(w->h_pairs);
}

static dres_state make_state(world *w, int32_t N, int32_t B, int scattered)
{
    const int32_t k = w->k;
    const uint32_t row = w->row;
    dres_state st;
    memset(&st, 0, sizeof st);
    st.group = 0;
    st.N = N;
    st.B = B;
    st.T = PAGE;
    st.p = PAGE;
    st.nsrc = 1;
    st.m = 1;
    st.spec_width = MAXK;
    st.sel_k = k;
    st.row_stride = row;
    st.max_rows = B + 4096;
    st.max_opt_pages = 0;
    st.host_chunk_rows = scattered ? 1 : k;
    st.n_host_chunks = (st.max_rows + st.host_chunk_rows - 1) / st.host_chunk_rows;
    st.stage_rows = MAXK * k;
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
    int32_t *hp = (int32_t *)calloc((size_t)N * (B / PAGE), 4);
    for (int32_t r = 0; r < N; r++)
        for (int32_t i = 0; i < B / PAGE; i++) hp[(int64_t)r * (B / PAGE) + i] = r * (B / PAGE) + i;
    CK(cudaMemcpy(w->hot_pages, hp, (size_t)N * (B / PAGE) * 4, cudaMemcpyHostToDevice));
    free(hp);
    /* host chunks: compact = every chunk of request r is region r of `compact` (k rows; the miss rows
       [B, B + M) land on distinct rows of it); scattered = every row its own chunk at a random place
       of the span */
    const int64_t nch = st.n_host_chunks;
    for (int32_t r = 0; r < N; r++)
        for (int64_t c = 0; c < nch; c++) {
            uint64_t a;
            if (!scattered) {
                a = (uint64_t)(uintptr_t)(w->compact + (size_t)r * k * row);
            } else {
                const size_t nrows = w->sp.bytes / row;
                a = (uint64_t)(uintptr_t)(w->sp.dev + (size_t)(rnd() % nrows) * row);
            }
            w->h_chunks[(int64_t)r * nch + c] = a;
        }
    CK(cudaMemcpy(w->host_chunks, w->h_chunks, (size_t)N * nch * 8, cudaMemcpyHostToDevice));
    return st;
}

/* selections of N requests, MAXK queries, M misses; also the ceiling pairs */
static int64_t make_sel(world *w, const dres_state *st, int32_t N, int32_t M)
{
    const int32_t B = st->B, k = w->k, h = k - M;
    const uint32_t row = w->row;
    int32_t *perm = (int32_t *)malloc((size_t)B * 4), *rw = (int32_t *)malloc((size_t)k * 4);
    int64_t np = 0;
    for (int32_t b = 0; b < N; b++) {
        for (int32_t i = 0; i < B; i++) perm[i] = i;
        for (int32_t i = 0; i < h; i++) { /* the first h of a random permutation: the hit set */
            int32_t j = i + (int32_t)(rnd() % (uint64_t)(B - i)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int32_t j = 0; j < MAXK; j++) {
            for (int32_t i = 0; i < h; i++) rw[i] = perm[i];
            for (int32_t i = 0; i < M; i++) rw[h + i] = B + i;
            for (int32_t i = k - 1; i > 0; i--) {
                int32_t x = (int32_t)(rnd() % (uint64_t)(i + 1)), t = rw[i];
                rw[i] = rw[x];
                rw[x] = t;
            }
            memcpy(w->h_sel + ((int64_t)b * MAXK + j) * k, rw, (size_t)k * 4);
        }
        for (int32_t i = 0; i < M; i++) {
            const int64_t s = B + i;
            const uint64_t a = w->h_chunks[(int64_t)b * st->n_host_chunks + s / st->host_chunk_rows] +
                               (uint64_t)(s % st->host_chunk_rows) * row;
            w->h_pairs[np].src = (const void *)(uintptr_t)a;
            w->h_pairs[np].dst = w->pool + ((size_t)b * B + (size_t)((i * 7919) % B)) * row;
            np++;
        }
    }
    CK(cudaMemcpy(w->sel, w->h_sel, (size_t)N * MAXK * k * 4, cudaMemcpyHostToDevice));
    if (np) CK(cudaMemcpy(w->gpairs, w->h_pairs, (size_t)np * sizeof(dhs_copy_pair), cudaMemcpyHostToDevice));
    free(perm);
    free(rw);
    return np;
}

/* --fresh-rounds: n descriptors at rd0 + i * stride move to epoch + add (untimed, between timings) */
static __global__ void bump_epochs(uint8_t *rd0, size_t stride, int32_t n, uint32_t add)
{
    for (int32_t i = 0; i < n; i++) ((dres_round *)(rd0 + (size_t)i * stride))->epoch += add;
}

static void set_round(world *w, int32_t N, int32_t K)
{
    static uint8_t buf[RD_STRIDE];
    memset(buf, 0, sizeof buf);
    dres_round *rd = (dres_round *)buf;
    rd->n_round = N;
    rd->epoch = 1;
    rd->n_groups = 1;
    /* the library's layout (the plan kernel reads round position b's fields at it with the header) */
    rd->bytes = dres_rd_layout(N, 1, &rd->off_slot, &rd->off_K, &rd->off_n, &rd->off_tail_lo);
    for (int32_t b = 0; b < N; b++) {
        ((int32_t *)(buf + rd->off_slot))[b] = b;
        ((int32_t *)(buf + rd->off_K))[b] = K;
        ((int64_t *)(buf + rd->off_n))[b] = w->maxrows;          /* everything visible */
        ((int64_t *)(buf + rd->off_tail_lo))[b] = w->maxrows + 1; /* no tail hits */
    }
    CK(cudaMemcpy(w->rd, buf, (size_t)rd->bytes, cudaMemcpyHostToDevice));
    if (w->fresh) /* the graph's descriptors: the same, each with its own epoch (disjoint from w->rd's) */
        for (int32_t i = 0; i < w->R; i++) {
            rd->epoch = FRESH0 + (uint32_t)i;
            CK(cudaMemcpy(w->rdr + (size_t)i * RD_STRIDE, buf, (size_t)rd->bytes, cudaMemcpyHostToDevice));
        }
    if (w->rdd) { /* --direct: the same round (w->rd's epoch), every row at or above the tail window's start */
        rd->epoch = 1;
        for (int32_t b = 0; b < N; b++) ((int64_t *)(buf + rd->off_tail_lo))[b] = 0;
        CK(cudaMemcpy(w->rdd, buf, (size_t)rd->bytes, cudaMemcpyHostToDevice));
    }
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

enum { W_OURS, W_GRAPH, W_GRAPHR, W_SCAN, W_CEIL, W_PLAN, W_COPY, W_EMPTY, W_DIRECT, W_DPLAN, W_DGRAPH };

static __global__ void empty_kernel(void) {}

typedef struct job {
    world *w;
    dres_state st;
    int32_t N, K, M;
    int64_t np;
    cudaGraphExec_t gexec, gexec_r, gexec_d;
    uint32_t hbits;
    size_t scan_smem;
} job;

static void run_one(job *j, int what)
{
    world *w = j->w;
    switch (what) {
    case W_OURS:
        CK(dhs_dres_resolve_launch(&j->st, w->rd, w->k, w->sel, w->loc, 1, w->scratch, w->copy_blocks, w->s));
        break;
    case W_GRAPH: CK(cudaGraphLaunch(j->gexec, w->s)); break;
    case W_GRAPHR: CK(cudaGraphLaunch(j->gexec_r, w->s)); break;
    case W_SCAN:
        scan_resolve<<<j->N, SCAN_T, j->scan_smem, w->s>>>(j->st, j->N, w->sel, MAXK * w->k, j->K * w->k, w->lru,
                                                          w->evict, w->hitl, w->sloc, j->hbits);
        CK(cudaGetLastError());
        break;
    case W_CEIL:
        if (j->np) CK(dhs_cuda_gather_launch(w->gpairs, j->np, w->row, dhs_cuda_gather_grid(j->np, 4 * w->sms), w->s));
        break;
    case W_PLAN: /* plan kernel + the one-block error store */
        CK(dhs_dres_resolve_launch(&j->st, w->rd, w->k, w->sel, w->loc, 0, w->scratch, w->copy_blocks, w->s));
        break;
    case W_COPY: CK(dhs_dres_copy_launch(&j->st, w->copy_blocks, w->s)); break;
    case W_DIRECT: /* --direct: the direct kernel on the all-tail round */
        CK(dhs_dres_resolve_launch_mark(&j->st, w->rdd, w->k, w->sel, w->loc, 1, w->scratch, w->copy_blocks, w->s, NULL,
                                        NULL, NULL, 1));
        break;
    case W_DPLAN: /* --direct: the plan and copy kernels on the same round */
        CK(dhs_dres_resolve_launch(&j->st, w->rdd, w->k, w->sel, w->loc, 1, w->scratch, w->copy_blocks, w->s));
        break;
    case W_DGRAPH: CK(cudaGraphLaunch(j->gexec_d, w->s)); break;
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
    /* --fresh-rounds without misses: every call of the plan kernel starts a new round (with misses the
       restore above already makes every call its request's first of the round) */
    const int bump = w->fresh && j->M == 0 && (what == W_OURS || what == W_GRAPH || what == W_PLAN || what == W_GRAPHR);
    float *t = (float *)malloc((size_t)reps * sizeof(float));
    if (what != W_EMPTY) init_state<<<ig, 256, 0, w->s>>>(j->st, w->lru);
    for (int i = 0; i < 3 + reps; i++) { /* 3 warm-ups, then the timed reps */
        if (bump) {
            if (what == W_GRAPHR) bump_epochs<<<1, 1, 0, w->s>>>(w->rdr, RD_STRIDE, w->R, (uint32_t)w->R);
            else bump_epochs<<<1, 1, 0, w->s>>>((uint8_t *)w->rd, RD_STRIDE, 1, 1u);
            CK(cudaGetLastError());
        }
        if (i < 3) {
            run_one(j, what);
            if (restore) init_state<<<ig, 256, 0, w->s>>>(j->st, w->lru);
            continue;
        }
        CK(cudaEventRecord(ev[2 * (i - 3)], w->s));
        run_one(j, what);
        CK(cudaEventRecord(ev[2 * (i - 3) + 1], w->s));
        if (restore) init_state<<<ig, 256, 0, w->s>>>(j->st, w->lru);
    }
    CK(cudaStreamSynchronize(w->s));
    for (int i = 0; i < reps; i++) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    tstat s = summarize(t, reps);
    free(t);
    return s;
}

/* ------------------------------------------------------------ the run */

typedef struct pres { /* one scattered configuration of one page kind, for the side-by-side table */
    int kind;
    int32_t N, B, M, K;
    double ours_gbs, ceil_gbs;
} pres;

typedef struct runner {
    world *w;
    const dhs_bench_resolve_opts *o;
    cudaEvent_t *ev;
    FILE *tab;   /* the table (NULL: none) */
    FILE *info;  /* comment lines */
    FILE *js;    /* JSON lines (NULL: none) */
    int done, total, tty;
    double t0;
    pres *pr;
    int npr, cap;
} runner;

static const char *pname(int kind) { return dhs_bench_page_names()[kind]; }
/* plan paths by index: bit i of dhs_bench_resolve_opts.plan_paths */
static const char *const path_name[3] = {"few", "block", "copy"};
static const int32_t path_flags[3] = {0, DRES_PLAN_BLOCK_ONLY, DRES_PLAN_COPY_KERNEL};

/* JSON string (escaped) */
static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned)(unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static int lg2ceil(int32_t x)
{
    int b = 0;
    while ((1 << b) < x) b++;
    return b;
}

static int skip(const runner *R, int layout, int64_t N, int64_t M)
{
    if (layout == DHS_BENCH_SCATTERED && M == 0) return 1; /* no host reads: the compact figure */
    return R->o->max_batch_misses > 0 && N * M > R->o->max_batch_misses;
}

static int count_sweep(const runner *R, const dhs_bench_sweep *s, int layout)
{
    int n = 0;
    for (int bi = 0; bi < s->n_batch; bi++)
        for (int hi = 0; hi < s->n_hot; hi++)
            for (int mi = 0; mi < s->n_misses; mi++)
                for (int qi = 0; qi < s->n_queries; qi++) n += !skip(R, layout, s->batch[bi], s->misses[mi]);
    return n;
}

static tstat time_it(job *j, int what, int reps, cudaEvent_t *ev);

/* --direct (after a compact M = 0 configuration, its selections as they are): the same round with every row
   in the tail window (w->rdd), so every entry is served directly, as in a round that cannot miss; the
   direct kernel (DRES_MODE_DIRECT) against the plan and copy kernels on it, eager p50 / p90 and per call
   in one graph of R calls of each */
static void direct_rows(runner *R, job *j)
{
    world *w = j->w;
    const int32_t Rc = R->o->graph_calls;
    j->st.plan_flags = 0;
    tstat t[4];
    for (int v = 0; v < 2; v++) { /* v 0: direct, 1: plan + copy */
        t[2 * v] = time_it(j, v ? W_DPLAN : W_DIRECT, R->o->reps, R->ev);
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(w->s, cudaStreamCaptureModeThreadLocal));
        for (int r = 0; r < Rc; r++) run_one(j, v ? W_DPLAN : W_DIRECT);
        CK(cudaStreamEndCapture(w->s, &g));
        CK(cudaGraphInstantiate(&j->gexec_d, g, 0));
        t[2 * v + 1] = time_it(j, W_DGRAPH, R->o->reps, R->ev);
        CK(cudaGraphExecDestroy(j->gexec_d));
        CK(cudaGraphDestroy(g));
    }
    const double dr = t[1].p50 / Rc, pr = t[3].p50 / Rc;
    if (R->js) {
        fprintf(R->js,
                "{\"record\":\"direct\",\"batch\":%d,\"B\":%d,\"K\":%d,\"direct_p50_us\":%.2f,\"direct_p90_us\":%.2f,"
                "\"direct_per_call_us\":%.3f,\"plan_copy_p50_us\":%.2f,\"plan_copy_p90_us\":%.2f,\"plan_copy_per_call_us\":%.3f}\n",
                j->N, j->st.B, j->K, t[0].p50, t[0].p90, dr, t[2].p50, t[2].p90, pr);
        fflush(R->js);
    }
    if (R->info) {
        fprintf(R->info, "# direct %5d %6d %2d | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %6.3f\n", j->N, j->st.B, j->K,
                t[0].p50, t[0].p90, dr, t[2].p50, t[2].p90, pr, dr / pr);
        fflush(R->info);
    }
}

static void progress(runner *R, const char *what, int32_t N, int32_t B, int32_t M, int32_t K)
{
    if (!R->o->progress) return;
    R->done++;
    fprintf(stderr, "%s%s: [%d/%d] %s batch %d B %d M %d K %d (%.0f s)%s", R->tty ? "\r\033[K" : "", R->o->prog,
            R->done, R->total, what, N, B, M, K, (now_us() - R->t0) / 1e6, R->tty ? "" : "\n");
    fflush(stderr);
}

static void sweep(runner *R, const dhs_bench_sweep *sw, int layout)
{
    world *w = R->w;
    const dhs_bench_resolve_opts *o = R->o;
    const int scat = layout == DHS_BENCH_SCATTERED;
    char what[64];
    snprintf(what, sizeof what, "%s%s%s", scat ? "scattered" : "compact", scat ? " " : "", scat ? pname(w->sp.kind) : "");
    const int paths = o->plan_paths ? o->plan_paths : DHS_BENCH_PATH_FEW;
    for (int bi = 0; bi < sw->n_batch; bi++)
        for (int hi = 0; hi < sw->n_hot; hi++) {
            const int32_t N = (int32_t)sw->batch[bi], B = (int32_t)sw->hot[hi];
            int any = 0;
            for (int mi = 0; mi < sw->n_misses; mi++) any |= !skip(R, layout, N, sw->misses[mi]);
            if (!any) continue;
            job j;
            memset(&j, 0, sizeof j);
            j.w = w;
            j.N = N;
            j.st = make_state(w, N, B, scat);
            for (int mi = 0; mi < sw->n_misses; mi++)
                for (int qi = 0; qi < sw->n_queries; qi++) {
                    const int32_t M = (int32_t)sw->misses[mi], K = (int32_t)sw->queries[qi];
                    if (skip(R, layout, N, M)) continue;
                    progress(R, what, N, B, M, K);
                    j.K = K;
                    j.M = M;
                    j.np = make_sel(w, &j.st, N, M);
                    set_round(w, N, K);
                    j.hbits = (uint32_t)(lg2ceil(w->k) + (K == 1 ? 1 : 3));
                    j.scan_smem = (size_t)2 * 4 * (1u << j.hbits);
                    tstat sc = {0, 0}, ce = {0, 0};
                    int timed = 0; /* scan and ceiling: timed once, with the first path */
                    for (int pi = 0; pi < 3; pi++) { /* the plan paths asked for, on the same selections */
                        if (!(paths & (1 << pi))) continue;
                        j.st.plan_flags = path_flags[pi];
                        const int first_path = !timed;
                        timed = 1;
                        /* graph of the two kernels */
                        cudaGraph_t g, gr = NULL;
                        CK(cudaStreamBeginCapture(w->s, cudaStreamCaptureModeThreadLocal));
                        CK(dhs_dres_resolve_launch(&j.st, w->rd, w->k, w->sel, w->loc, 1, w->scratch, w->copy_blocks, w->s));
                        CK(cudaStreamEndCapture(w->s, &g));
                        CK(cudaGraphInstantiate(&j.gexec, g, 0));
                        if (M == 0) { /* R resolves back to back in one graph */
                            CK(cudaStreamBeginCapture(w->s, cudaStreamCaptureModeThreadLocal));
                            for (int r = 0; r < o->graph_calls; r++) {
                                const dres_round *rdc = w->fresh ? (const dres_round *)(w->rdr + (size_t)r * RD_STRIDE) : w->rd;
                                CK(dhs_dres_resolve_launch(&j.st, rdc, w->k, w->sel, w->loc, 1, w->scratch, w->copy_blocks, w->s));
                            }
                            CK(cudaStreamEndCapture(w->s, &gr));
                            CK(cudaGraphInstantiate(&j.gexec_r, gr, 0));
                        }
                        const tstat ou = time_it(&j, W_OURS, o->reps, R->ev);
                        const tstat gp = time_it(&j, W_GRAPH, o->reps, R->ev);
                        if (first_path) {
                            sc = time_it(&j, W_SCAN, o->reps, R->ev);
                            ce = M ? time_it(&j, W_CEIL, o->reps, R->ev) : tstat{0, 0};
                        }
                        const tstat rg = M ? tstat{0, 0} : time_it(&j, W_GRAPHR, o->reps, R->ev);
                        CK(cudaGraphExecDestroy(j.gexec));
                        CK(cudaGraphDestroy(g));
                        if (gr) {
                            CK(cudaGraphExecDestroy(j.gexec_r));
                            CK(cudaGraphDestroy(gr));
                        }
                        const double bytes = (double)N * M * w->row;
                        const double gbs = M ? bytes / (ou.p50 * 1e3) : 0, cgbs = M ? bytes / (ce.p50 * 1e3) : 0;
                        const double rc50 = rg.p50 / o->graph_calls, rc90 = rg.p90 / o->graph_calls;
                        if (R->js) {
                            FILE *f = R->js;
                            fprintf(f, "{\"record\":\"config\",\"layout\":\"%s\",\"plan_path\":\"%s\",",
                                    scat ? "scattered" : "compact", path_name[pi]);
                            if (scat)
                                fprintf(f, "\"host_pages\":\"%s\",\"span_gib\":%.3f,", pname(w->sp.kind),
                                        (double)w->sp.bytes / (1ull << 30));
                            fprintf(f, "\"batch\":%d,\"B\":%d,\"misses\":%d,\"K\":%d,\"k\":%d,\"row_bytes\":%u,\"reps\":%d,"
                                       "\"ours_p50_us\":%.2f,\"ours_p90_us\":%.2f,\"graph_p50_us\":%.2f,\"graph_p90_us\":%.2f,"
                                       "\"scan_p50_us\":%.2f,\"scan_p90_us\":%.2f,\"ours_over_scan\":%.4f,"
                                       "\"graph_over_scan\":%.4f,\"speedup_vs_scan\":%.3f",
                                    N, B, M, K, w->k, w->row, o->reps, ou.p50, ou.p90, gp.p50, gp.p90, sc.p50, sc.p90,
                                    ou.p50 / sc.p50, gp.p50 / sc.p50, sc.p50 / ou.p50);
                            if (M)
                                fprintf(f, ",\"ceiling_p50_us\":%.2f,\"ceiling_p90_us\":%.2f,\"miss_gbs\":%.2f,"
                                           "\"ceiling_gbs\":%.2f,\"ratio_to_ceiling\":%.3f",
                                        ce.p50, ce.p90, gbs, cgbs, ce.p50 / ou.p50);
                            else
                                fprintf(f, ",\"graph_calls\":%d,\"graph_calls_p50_us\":%.2f,\"graph_per_call_p50_us\":%.3f,"
                                           "\"graph_per_call_p90_us\":%.3f,\"graph_per_call_over_scan\":%.4f",
                                        o->graph_calls, rg.p50, rc50, rc90, rc50 / sc.p50);
                            fprintf(f, "}\n");
                            fflush(f);
                        }
                        if (R->tab) {
                            char cl[64], rl[32];
                            if (M) snprintf(cl, sizeof cl, "%8.2f | %7.2f %7.2f %5.2f", ce.p50, gbs, cgbs, ce.p50 / ou.p50);
                            else snprintf(cl, sizeof cl, "%8s | %7s %7s %5s", "-", "-", "-", "-");
                            if (M) snprintf(rl, sizeof rl, "%8s", "-");
                            else snprintf(rl, sizeof rl, "%8.2f", rc50);
                            fprintf(R->tab, "%-4s %-7s %5d %6d %5d %2d | %8.2f %8.2f %8.2f | %8.2f %8.2f | %s | %6.3f | %s | %s\n",
                                    scat ? "scat" : "comp", scat ? pname(w->sp.kind) : "-", N, B, M, K, ou.p50, ou.p90,
                                    gp.p50, sc.p50, sc.p90, cl, ou.p50 / sc.p50, rl, path_name[pi]);
                            fflush(R->tab);
                        }
                        if (scat && M && first_path) {
                            if (R->npr == R->cap) {
                                R->cap = R->cap ? 2 * R->cap : 64;
                                R->pr = (pres *)realloc(R->pr, (size_t)R->cap * sizeof(pres));
                                if (!R->pr) CK(cudaErrorMemoryAllocation);
                            }
                            R->pr[R->npr++] = pres{w->sp.kind, N, B, M, K, gbs, cgbs};
                        }
                    }
                    if (o->direct && M == 0 && !scat) direct_rows(R, &j);
                }
        }
}

/* plan kernel alone and copy kernel alone (compact layout), per plan path; with a phase-timing build
   (dhs_dres_phase_read), the plan kernel's phase boundaries of block 0, mean us from its start */
static void breakdown(runner *R, const dhs_bench_sweep *sw)
{
    world *w = R->w;
    const dhs_bench_resolve_opts *o = R->o;
    const int paths = o->plan_paths ? o->plan_paths : DHS_BENCH_PATH_FEW;
    static const char *const ph_name[DHS_DRES_PHASES] = {"start", "init", "hits", "claims|dedupe", "ranks",
                                                         "victims", "pairs", "locs", "end"};
    const int timing = dhs_dres_phase_read(0, 1, NULL, NULL) == cudaSuccess;
    (void)cudaGetLastError();
    if (R->tab) {
        fprintf(R->tab, "# breakdown (compact layout), p50/p90 us: batch B M K | plan(+err store) | copy-only | path\n");
        if (timing)
            fprintf(R->tab, "# phases: mean us from the plan kernel's start to each block-wide boundary of block 0 (path "
                            "taken by block 0; '-' not passed): %s %s %s %s %s %s %s %s\n",
                    ph_name[1], ph_name[2], ph_name[3], ph_name[4], ph_name[5], ph_name[6], ph_name[7], ph_name[8]);
        else
            fprintf(R->tab, "# phases: not in this build (cmake -DDHS_DRES_PHASE_TIMING=ON)\n");
    }
    for (int bi = 0; bi < sw->n_batch; bi++)
        for (int hi = 0; hi < sw->n_hot; hi++) {
            const int32_t N = (int32_t)sw->batch[bi], B = (int32_t)sw->hot[hi];
            job j;
            memset(&j, 0, sizeof j);
            j.w = w;
            j.N = N;
            j.st = make_state(w, N, B, 0);
            for (int mi = 0; mi < sw->n_misses; mi++)
                for (int qi = 0; qi < sw->n_queries; qi++) {
                    j.M = (int32_t)sw->misses[mi];
                    j.K = (int32_t)sw->queries[qi];
                    progress(R, "breakdown", N, B, j.M, j.K);
                    j.np = make_sel(w, &j.st, N, j.M);
                    set_round(w, N, j.K);
                    for (int pi = 0; pi < 3; pi++) {
                        if (!(paths & (1 << pi))) continue;
                        j.st.plan_flags = path_flags[pi];
                        if (timing) CK(dhs_dres_phase_read(0, 1, NULL, NULL));
                        const tstat pl = time_it(&j, W_PLAN, o->reps, R->ev);
                        double us[2][DHS_DRES_PHASES];
                        unsigned long long nc[2][DHS_DRES_PHASES];
                        if (timing) {
                            CK(dhs_dres_phase_read(0, 0, us[0], nc[0]));
                            CK(dhs_dres_phase_read(1, 1, us[1], nc[1]));
                        }
                        /* the copy kernel moves the pairs of the last plan: one plan on a fresh state first */
                        init_state<<<dim3(64, (unsigned)N), 256, 0, w->s>>>(j.st, w->lru);
                        CK(dhs_dres_resolve_launch(&j.st, w->rd, w->k, w->sel, w->loc, 0, w->scratch, w->copy_blocks, w->s));
                        const tstat cp = time_it(&j, W_COPY, o->reps, R->ev);
                        if (R->tab)
                            fprintf(R->tab, "# breakdown %4d %6d %5d %2d | %8.2f %8.2f | %8.2f %8.2f | %s\n", N, B, j.M, j.K,
                                    pl.p50, pl.p90, cp.p50, cp.p90, path_name[pi]);
                        if (R->js)
                            fprintf(R->js, "{\"record\":\"breakdown\",\"layout\":\"compact\",\"plan_path\":\"%s\","
                                           "\"batch\":%d,\"B\":%d,\"misses\":%d,\"K\":%d,\"plan_p50_us\":%.2f,"
                                           "\"plan_p90_us\":%.2f,\"copy_p50_us\":%.2f,\"copy_p90_us\":%.2f}\n",
                                    path_name[pi], N, B, j.M, j.K, pl.p50, pl.p90, cp.p50, cp.p90);
                        for (int t = 0; timing && t < 2; t++) {
                            if (!nc[t][DHS_DRES_PHASES - 1]) continue; /* block 0 never took this path */
                            char line[512];
                            int n = snprintf(line, sizeof line, "# phases %4d %6d %5d %2d | %-5s block0=%-5s %6llu calls |",
                                             N, B, j.M, j.K, path_name[pi], t ? "few" : "block",
                                             nc[t][DHS_DRES_PHASES - 1]);
                            for (int i = 1; i < DHS_DRES_PHASES && n < (int)sizeof line; i++)
                                n += nc[t][i] ? snprintf(line + n, sizeof line - n, " %6.2f", us[t][i])
                                              : snprintf(line + n, sizeof line - n, " %6s", "-");
                            if (R->tab) fprintf(R->tab, "%s\n", line);
                            if (R->js) {
                                fprintf(R->js, "{\"record\":\"phases\",\"plan_path\":\"%s\",\"block0_path\":\"%s\",\"batch\":%d,"
                                               "\"B\":%d,\"misses\":%d,\"K\":%d,\"calls\":%llu,\"us\":{",
                                        path_name[pi], t ? "few" : "block", N, B, j.M, j.K, nc[t][DHS_DRES_PHASES - 1]);
                                for (int i = 1, c = 0; i < DHS_DRES_PHASES; i++)
                                    if (nc[t][i]) fprintf(R->js, "%s\"%s\":%.3f", c++ ? "," : "", ph_name[i], us[t][i]);
                                fprintf(R->js, "}}\n");
                            }
                        }
                    }
                }
        }
}

static void sweep_max(const dhs_bench_sweep *s, int32_t *maxN, int32_t *maxB)
{
    for (int i = 0; i < s->n_batch; i++)
        if (s->batch[i] > *maxN) *maxN = (int32_t)s->batch[i];
    if (s->n_batch)
        for (int i = 0; i < s->n_hot; i++)
            if (s->hot[i] > *maxB) *maxB = (int32_t)s->hot[i];
}

/* side by side: ours / ceiling GB/s of every scattered configuration under every page kind measured */
static void pages_table(runner *R, const int *kinds, int nk)
{
    FILE *f = R->tab ? R->tab : R->info;
    fprintf(f, "# host pages side by side (scattered layout; miss GB/s ours / ceiling, same offsets, same run)\n");
    fprintf(f, "# %5s %6s %5s %2s", "batch", "B", "M", "K");
    for (int i = 0; i < nk; i++) fprintf(f, " | %15s", pname(kinds[i]));
    fprintf(f, "\n");
    for (int a = 0; a < R->npr; a++) {
        const pres *p = &R->pr[a];
        if (p->kind != kinds[0]) continue;
        fprintf(f, "# %5d %6d %5d %2d", p->N, p->B, p->M, p->K);
        for (int i = 0; i < nk; i++) {
            const pres *q = NULL;
            for (int b = 0; b < R->npr && !q; b++)
                if (R->pr[b].kind == kinds[i] && R->pr[b].N == p->N && R->pr[b].B == p->B && R->pr[b].M == p->M &&
                    R->pr[b].K == p->K)
                    q = &R->pr[b];
            if (q) fprintf(f, " | %6.2f / %6.2f", q->ours_gbs, q->ceil_gbs);
            else fprintf(f, " | %15s", "-");
        }
        fprintf(f, "\n");
    }
}

extern "C" int dhs_bench_resolve_cuda(const dhs_bench_resolve_opts *o)
{
    const char *prog = o->prog ? o->prog : "dres_bench";
    char why[256];
    if (dhs_bench_resolve_validate(o, why, sizeof why)) {
        fprintf(stderr, "%s: %s\n", prog, why);
        return 2;
    }
    int ndev = 0;
    cudaError_t de = cudaGetDeviceCount(&ndev);
    if (de != cudaSuccess || ndev < 1) {
        fprintf(stderr, "%s: no usable CUDA device: %s\n", prog, de != cudaSuccess ? cudaGetErrorString(de) : "none found");
        return 3;
    }
    if (o->carveout != -1) {
        const cudaError_t ce = dhs_dres_set_carveout(o->carveout);
        if (ce != cudaSuccess) {
            fprintf(stderr, "%s: carveout %d: %s\n", prog, (int)o->carveout, cudaGetErrorString(ce));
            return 3;
        }
    }
    const double t0 = now_us();
    g_rng = SEED;
    world w;
    memset(&w, 0, sizeof w);
    w.k = o->k;
    w.row = (uint32_t)o->row_bytes;
    w.maxN = 1;
    w.maxB = o->k;
    if (o->layouts & DHS_BENCH_COMPACT) sweep_max(&o->compact, &w.maxN, &w.maxB);
    if (o->layouts & DHS_BENCH_SCATTERED) sweep_max(&o->scattered, &w.maxN, &w.maxB);
    sweep_max(&o->breakdown, &w.maxN, &w.maxB);
    w.maxrows = (int64_t)w.maxB + 4096;
    setup(&w);
    w.copy_blocks = o->copy_blocks ? o->copy_blocks : DHS_DRES_COPY_BLOCKS_PER_SM * w.sms;
    w.fresh = o->fresh_rounds;
    w.R = o->graph_calls;
    if (w.fresh) CK(cudaMalloc(&w.rdr, (size_t)w.R * RD_STRIDE));
    if (o->direct) CK(cudaMalloc(&w.rdd, RD_STRIDE));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaFuncSetAttribute(scan_resolve, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * 4 * 16384));
    runner R;
    memset(&R, 0, sizeof R);
    R.w = &w;
    R.o = o;
    R.t0 = t0;
    R.tab = o->json ? NULL : stdout;
    R.tty = isatty(2) && !(R.tab && isatty(1)); /* one rewritten line, unless the table shares the terminal */
    R.info = o->json ? stderr : stdout;
    R.js = o->json ? stdout : o->json_file;
    R.ev = (cudaEvent_t *)malloc((size_t)2 * o->reps * sizeof(cudaEvent_t));
    for (int i = 0; i < 2 * o->reps; i++) CK(cudaEventCreate(&R.ev[i]));
    /* the floor: an empty kernel timed the same way as every eager figure */
    job e;
    memset(&e, 0, sizeof e);
    e.w = &w;
    e.N = 1;
    const tstat em = time_it(&e, W_EMPTY, o->reps, R.ev);
    hp_info hp;
    hp_probe(&hp);
    const int scat = (o->layouts & DHS_BENCH_SCATTERED) != 0;
    int kinds[4], nk = 0;
    if (scat) {
        if (o->host_pages == DHS_BENCH_PAGES_ALL)
            for (int i = 0; i < 4; i++) kinds[nk++] = i;
        else kinds[nk++] = o->host_pages;
    }
    if (o->layouts & DHS_BENCH_COMPACT) R.total += count_sweep(&R, &o->compact, DHS_BENCH_COMPACT);
    if (scat) R.total += nk * count_sweep(&R, &o->scattered, DHS_BENCH_SCATTERED);
    if (o->breakdown.n_batch)
        R.total += o->breakdown.n_batch * o->breakdown.n_hot * o->breakdown.n_misses * o->breakdown.n_queries;

    fprintf(R.info, "# dhs bench resolve (cuda) on %s (%d SMs); k=%d, %u-B rows, 1 source; %d reps (p50/p90 of cudaEvent "
                    "pairs); setup %.1f s\n",
            prop.name, w.sms, w.k, w.row, o->reps, (now_us() - t0) / 1e6);
    fprintf(R.info, "# empty-kernel floor (one launch between two events, as every eager figure): p50 %.2f us, p90 %.2f us\n",
            em.p50, em.p90);
    fprintf(R.info, "# host: /proc/meminfo HugePages_Total %lld HugePages_Free %lld Hugepagesize %lld kB; 2 MiB pool %lld "
                    "free of %lld; 1 GiB pool %lld free of %lld; transparent_hugepage/enabled '%s', defrag '%s'\n",
            (long long)hp.total, (long long)hp.free, (long long)hp.size_kb, (long long)hp.free2m, (long long)hp.total2m,
            (long long)hp.free1g, (long long)hp.total1g, hp.thp[0] ? hp.thp : "(absent)",
            hp.thp_defrag[0] ? hp.thp_defrag : "(absent)");
    if (R.js) {
        FILE *f = R.js;
        fprintf(f, "{%s\"record\":\"run\",\"bench\":\"resolve\",\"backend\":\"cuda\",\"gpu\":", o->prov ? o->prov : "");
        jstr(f, prop.name);
        fprintf(f, ",\"carveout\":%d", (int)o->carveout);
        fprintf(f, ",\"copy_blocks\":%d,\"fresh_rounds\":%s", (int)w.copy_blocks, w.fresh ? "true" : "false");
        fprintf(f, ",\"sms\":%d,\"k\":%d,\"row_bytes\":%u,\"reps\":%d,\"graph_calls\":%d,\"empty_kernel_p50_us\":%.2f,"
                   "\"empty_kernel_p90_us\":%.2f,\"span_gib_requested\":%.3f,\"host_pages\":\"%s\","
                   "\"hugepages_total\":%lld,\"hugepages_free\":%lld,\"hugepagesize_kb\":%lld,"
                   "\"hugepages_2m_total\":%lld,\"hugepages_2m_free\":%lld,\"hugepages_1g_total\":%lld,"
                   "\"hugepages_1g_free\":%lld,\"thp_enabled\":",
                w.sms, w.k, w.row, o->reps, o->graph_calls, em.p50, em.p90, o->span_gib, pname(o->host_pages),
                (long long)hp.total, (long long)hp.free, (long long)hp.size_kb, (long long)hp.total2m,
                (long long)hp.free2m, (long long)hp.total1g, (long long)hp.free1g);
        jstr(f, hp.thp[0] ? hp.thp : "(absent)");
        fprintf(f, ",\"thp_defrag\":");
        jstr(f, hp.thp_defrag[0] ? hp.thp_defrag : "(absent)");
        fprintf(f, "}\n");
        fflush(f);
    }
    fprintf(R.info, "# ours = plan + copy kernels (eager, each figure carries the floor above); graph = the same two "
                    "kernels as one graph; scan = the O(B) baseline; ceil = the gather of the same host rows to the same "
                    "destinations; GB/s = miss bytes / p50; ratio = ceil/ours; o/scan = ours/scan (p50)\n"
                    "# R/call (M = 0 only) = %d resolves captured back to back in ONE graph, graph p50 / %d: what a "
                    "resolve costs inside a captured decode step, without the per-launch event floor\n",
            o->graph_calls, o->graph_calls);
    fprintf(R.info, "# the copy kernel's grid: %d blocks of %d threads%s\n", (int)w.copy_blocks, DHS_DRES_COPY_THREADS,
            o->copy_blocks ? " (--copy-blocks)" : " (the library's)");
    fprintf(R.info, "%s", w.fresh ? "# --fresh-rounds: without misses every call starts a new round (its hits protected by "
                                    "atomics, as a decode step's first call of a group)\n"
                                  : "# without misses the calls repeat one round: after the first, a call reads `used` "
                                    "and takes no atomic (--fresh-rounds: every call a new round)\n");
    if (o->carveout != -1)
        fprintf(R.info, "# the resolver kernels' preferred shared-memory carveout: %d %% (--carveout)\n", (int)o->carveout);
    if (o->direct)
        fprintf(R.info, "# --direct: each compact M = 0 configuration again with every row in the tail window (a round that "
                        "cannot miss), p50 / p90 us eager and per call in a graph of %d: batch B K | direct kernel "
                        "(DHS_RESOLVE_DIRECT) | plan + copy kernels | direct / plan+copy per call\n",
                (int)o->graph_calls);
    if (R.tab) {
        fprintf(R.tab, "%-4s %-7s %5s %6s %5s %2s | %8s %8s %8s | %8s %8s | %8s | %7s %7s %5s | %6s | %8s | %s\n", "lay", "pages",
                "batch", "B", "M", "K", "ours50", "ours90", "graph50", "scan50", "scan90", "ceil50", "GB/s", "ceilGB",
                "ratio", "o/scan", "R/call", "path");
    }
    if (o->layouts & DHS_BENCH_COMPACT) sweep(&R, &o->compact, DHS_BENCH_COMPACT);
    int measured[4], nm = 0;
    for (int i = 0; i < nk; i++) {
        const int kind = kinds[i];
        if (span_alloc(&w.sp, kind, o->span_gib, &hp)) {
            fprintf(R.info, "# host pages %s: not available: %s\n", pname(kind), w.sp.why);
            if (R.js) {
                fprintf(R.js, "{\"record\":\"host_pages\",\"kind\":\"%s\",\"available\":false,\"reason\":", pname(kind));
                jstr(R.js, w.sp.why);
                fprintf(R.js, "}\n");
            }
            if (o->progress) R.total -= count_sweep(&R, &o->scattered, DHS_BENCH_SCATTERED);
            continue;
        }
        const double gib = (double)w.sp.bytes / (1ull << 30), huge = w.sp.huge_kb >= 0 ? w.sp.huge_kb / 1048576.0 : -1;
        fprintf(R.info, "# host pages %s: %.2f GiB span by %s in %.1f s; huge-page-backed (smaps) %.2f GiB\n", pname(kind),
                gib, page_how[kind], w.sp.alloc_s, huge);
        if (R.js)
            fprintf(R.js, "{\"record\":\"host_pages\",\"kind\":\"%s\",\"available\":true,\"how\":\"%s\",\"span_gib\":%.3f,"
                          "\"huge_backed_gib\":%.3f,\"alloc_s\":%.2f}\n",
                    pname(kind), page_how[kind], gib, huge, w.sp.alloc_s);
        g_rng = SEED ^ 0x5ca7ull; /* every kind: the same offsets and selections */
        sweep(&R, &o->scattered, DHS_BENCH_SCATTERED);
        span_free(&w.sp);
        measured[nm++] = kind;
    }
    if (nm > 1) pages_table(&R, measured, nm);
    if (o->breakdown.n_batch) breakdown(&R, &o->breakdown);
    if (o->progress && R.tty) fprintf(stderr, "\n");
    for (int i = 0; i < 2 * o->reps; i++) CK(cudaEventDestroy(R.ev[i]));
    free(R.ev);
    free(R.pr);
    teardown(&w);
    fprintf(R.info, "# total %.1f s\n", (now_us() - t0) / 1e6);
    fflush(stdout);
    return 0;
}
