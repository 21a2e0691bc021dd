/* gpu_bench.cu - the copy path against the link's ceilings, in one run.
 *
 * Sections (all measured in the same process, same card):
 *   1. ceilings: bulk pinned H2D / D2H (1 GiB cudaMemcpyAsync), HBM D2D,
 *      back-to-back empty kernel launches, a reference zero-copy gather probe
 *      (row indices in device memory, one warp per row, 16-byte loads, 256
 *      threads; the kernel of docs/FACTS.md §4) at its best grid, and one
 *      cudaMemcpyAsync per row;
 *   2. our gather kernel (src/cuda/gather.cu, pairs in mapped pinned memory as
 *      the backend stages them) at 256 / 2048 / 16384 rows of 576 / 656 /
 *      1152 bytes over grids of 4..528 blocks and the backend's automatic grid,
 *      plus the whole backend op (be->ops->gather_h2d: host staging + launch);
 *   2b. locality: rows confined to 64 MiB / 1 GiB / 8 GiB of the buffer, and
 *      a kernel lab (library kernel vs one-row batches, pairs in mapped host
 *      vs device memory) in the fast 64 MiB regime; 2c (--thp): THP-backed
 *      host memory vs cudaHostAlloc at the full span;
 *   3. dhs_resolve end to end on the CUDA backend: k = 2048, a fixed number of
 *      misses per call, hot cache B = 2048 / 8192 / 65536 (cost must not grow
 *      with B).
 * Method: rows are random over an 8 GiB pinned buffer; every repetition uses a
 * fresh random row set and starts after a 256 MiB device memset that evicts
 * L2; GPU time by events around the launch; the median of the repetitions.
 * This is a program, not the library: it exits on a CUDA error.
 *
 * Usage: gpu_bench [--quick] [--thp] [--host-gib N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/mman.h>

#include <cuda_runtime.h>

extern "C" {
#include "core/backend.h"
#include "cuda/gather.cuh"
#include "dhs.h"
#include "dhs_cuda.h"
#include "util/rng.h"
}

#include "bench_cuda.h"

#define DK(x)                                                                                      \
    do {                                                                                           \
        dhs_status s_ = (x);                                                                       \
        if (s_ != DHS_OK) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, dhs_status_str(s_));       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------ utils */

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
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
static float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_f);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

static double gbps(double bytes, double us) { return bytes / (us * 1e3); }

static long meminfo_kb(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long v = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = atol(line + strlen(key));
    fclose(f);
    return v;
}

/* ---------------------------------------------------------------- kernels */

/* kernel lab: the library's gather kernel rebuilt with one row per warp
   batch (DHS_GATHER_ROWS 1: fewer registers, more resident blocks) */
#define dhs_cuda_gather_launch lab_gather_launch_r1
#define dhs_cuda_gather_grid lab_gather_grid_r1
#define DHS_GATHER_ROWS 1
#include "cuda/gather.cu"
#undef dhs_cuda_gather_launch
#undef dhs_cuda_gather_grid
#undef DHS_GATHER_ROWS
typedef cudaError_t (*launch_fn)(const dhs_copy_pair *, int64_t, uint32_t, int32_t, cudaStream_t);

__global__ void empty_kernel(void) {}

/* Reference probe: out row i <- host row idx[i]; one warp per row, 16-byte
   loads, grid-stride over rows. idx: [n] row indices into host (device mem). */
__global__ void __launch_bounds__(256) probe_gather(const uint4 *__restrict__ host, const int64_t *__restrict__ idx,
                                                    uint4 *__restrict__ out, int64_t n, uint32_t vecs)
{
    const uint32_t lane = threadIdx.x & 31u;
    const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < n; w += nw) {
        const uint4 *s = host + idx[w] * (int64_t)vecs;
        uint4 *d = out + w * (int64_t)vecs;
        for (uint32_t v = lane; v < vecs; v += 32) d[v] = __ldg(s + v);
    }
}

/* --------------------------------------------------------------- fixture */

typedef struct bench {
    cudaStream_t s;
    cudaEvent_t a, b;
    uint8_t *host;     /* [host_bytes] pinned, mapped */
    size_t host_bytes;
    uint8_t *src;      /* gather sources: rows random in [src, src + span) */
    size_t span;
    uint8_t *dev;      /* [dev_bytes] destination pool */
    size_t dev_bytes;
    uint8_t *flush;    /* [flush_bytes] L2 eviction */
    size_t flush_bytes;
    int reps;
    int sms;
} bench;

static void l2_flush(bench *B) { CK(cudaMemsetAsync(B->flush, (int)(rnd() & 0xff), B->flush_bytes, B->s)); }

static float time_events(bench *B) /* after a launch between a and b */
{
    float ms = 0;
    CK(cudaEventSynchronize(B->b));
    CK(cudaEventElapsedTime(&ms, B->a, B->b));
    return ms * 1000.0f;
}

/* random host rows (distinct enough: 8 GiB / row) and distinct device rows */
static void make_rows(bench *B, uint32_t rb, int64_t n, int64_t *src_rows, int64_t *dst_rows)
{
    int64_t nh = (int64_t)(B->span / rb), nd = (int64_t)(B->dev_bytes / rb);
    int64_t base = (int64_t)(rnd() % (uint64_t)(nd - n));
    for (int64_t i = 0; i < n; i++) {
        src_rows[i] = (int64_t)(rnd() % (uint64_t)nh);
        dst_rows[i] = base + i; /* a contiguous run of hot slots, like a victim batch */
    }
    /* shuffle destinations */
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1));
        int64_t t = dst_rows[i];
        dst_rows[i] = dst_rows[j];
        dst_rows[j] = t;
    }
}

/* ---------------------------------------------------------- 1. ceilings */

typedef struct ceil_t {
    double h2d, d2h, d2d;  /* GB/s */
    double launch_us;      /* back-to-back empty launch */
    double launch_sync_us; /* launch + stream sync, host wall */
    double memcpy_row_us;  /* 2048 rows, one cudaMemcpyAsync each, total */
} ceil_t;

static void bulk_copies(bench *B, ceil_t *C)
{
    const size_t n = (size_t)1 << 30;
    uint8_t *d2 = NULL;
    CK(cudaMalloc(&d2, n));
    float t[5];
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(B->a, B->s));
        CK(cudaMemcpyAsync(B->dev, B->host, n, cudaMemcpyHostToDevice, B->s));
        CK(cudaEventRecord(B->b, B->s));
        t[r] = time_events(B);
    }
    C->h2d = gbps((double)n, median(t, 5));
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(B->a, B->s));
        CK(cudaMemcpyAsync(B->host, B->dev, n, cudaMemcpyDeviceToHost, B->s));
        CK(cudaEventRecord(B->b, B->s));
        t[r] = time_events(B);
    }
    C->d2h = gbps((double)n, median(t, 5));
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(B->a, B->s));
        CK(cudaMemcpyAsync(d2, B->dev, n, cudaMemcpyDeviceToDevice, B->s));
        CK(cudaEventRecord(B->b, B->s));
        t[r] = time_events(B);
    }
    C->d2d = gbps(2.0 * (double)n, median(t, 5)); /* read + write */
    CK(cudaFree(d2));
}

static void launches(bench *B, ceil_t *C)
{
    for (int i = 0; i < 100; i++) empty_kernel<<<1, 32, 0, B->s>>>();
    CK(cudaStreamSynchronize(B->s));
    const int n = 2000;
    CK(cudaEventRecord(B->a, B->s));
    for (int i = 0; i < n; i++) empty_kernel<<<1, 32, 0, B->s>>>();
    CK(cudaEventRecord(B->b, B->s));
    C->launch_us = time_events(B) / n;
    float t[200];
    for (int i = 0; i < 200; i++) {
        double t0 = now_us();
        empty_kernel<<<1, 32, 0, B->s>>>();
        CK(cudaStreamSynchronize(B->s));
        t[i] = (float)(now_us() - t0);
    }
    C->launch_sync_us = median(t, 200);
}

static void memcpy_per_row(bench *B, ceil_t *C)
{
    const uint32_t rb = 656;
    const int64_t n = 2048;
    int64_t *src = (int64_t *)malloc(sizeof(int64_t) * n), *dst = (int64_t *)malloc(sizeof(int64_t) * n);
    float t[3];
    for (int r = 0; r < 3; r++) {
        make_rows(B, rb, n, src, dst);
        l2_flush(B);
        CK(cudaEventRecord(B->a, B->s));
        for (int64_t i = 0; i < n; i++)
            CK(cudaMemcpyAsync(B->dev + (size_t)dst[i] * rb, B->host + (size_t)src[i] * rb, rb, cudaMemcpyHostToDevice, B->s));
        CK(cudaEventRecord(B->b, B->s));
        t[r] = time_events(B);
    }
    C->memcpy_row_us = median(t, 3);
    free(src);
    free(dst);
}

/* probe gather: GPU µs (median over reps) for n rows of rb bytes with `grid` blocks */
static float probe_time(bench *B, uint32_t rb, int64_t n, int grid, int64_t *idx_d, int64_t *src, int64_t *dst)
{
    float *t = (float *)malloc(sizeof(float) * B->reps);
    for (int r = 0; r < B->reps; r++) {
        make_rows(B, rb, n, src, dst);
        CK(cudaMemcpyAsync(idx_d, src, sizeof(int64_t) * n, cudaMemcpyHostToDevice, B->s));
        l2_flush(B);
        CK(cudaEventRecord(B->a, B->s));
        probe_gather<<<grid, 256, 0, B->s>>>((const uint4 *)B->src, idx_d, (uint4 *)B->dev, n, rb / 16);
        CK(cudaGetLastError());
        CK(cudaEventRecord(B->b, B->s));
        t[r] = time_events(B);
    }
    float m = median(t, B->reps);
    free(t);
    return m;
}

/* our kernel: pairs staged in mapped pinned memory (as the backend does) */
/* a kernel variant: fn with pairs in mapped pinned memory, or copied to device
   memory first (pairs_d != NULL, copy outside the timed region) */
static float lab_time(bench *B, launch_fn fn, uint32_t rb, int64_t n, int grid, dhs_copy_pair *pairs_h,
                      dhs_copy_pair *pairs_d, int64_t *src, int64_t *dst)
{
    float *t = (float *)malloc(sizeof(float) * B->reps);
    for (int r = 0; r < B->reps; r++) {
        make_rows(B, rb, n, src, dst);
        CK(cudaStreamSynchronize(B->s)); /* pairs_h is reused: the previous launch is done */
        for (int64_t i = 0; i < n; i++) {
            pairs_h[i].src = B->src + (size_t)src[i] * rb;
            pairs_h[i].dst = B->dev + (size_t)dst[i] * rb;
        }
        if (pairs_d) CK(cudaMemcpyAsync(pairs_d, pairs_h, sizeof(dhs_copy_pair) * n, cudaMemcpyHostToDevice, B->s));
        l2_flush(B);
        CK(cudaEventRecord(B->a, B->s));
        int g = grid > 0 ? grid : dhs_cuda_gather_grid(n, 4 * B->sms);
        CK(fn(pairs_d ? pairs_d : pairs_h, n, rb, g, B->s));
        CK(cudaEventRecord(B->b, B->s));
        t[r] = time_events(B);
    }
    float m = median(t, B->reps);
    free(t);
    return m;
}

static float ours_time(bench *B, uint32_t rb, int64_t n, int grid, dhs_copy_pair *pairs_h, int64_t *src, int64_t *dst)
{
    float *t = (float *)malloc(sizeof(float) * B->reps);
    for (int r = 0; r < B->reps; r++) {
        make_rows(B, rb, n, src, dst);
        CK(cudaStreamSynchronize(B->s)); /* pairs_h is reused: the previous launch is done */
        for (int64_t i = 0; i < n; i++) {
            pairs_h[i].src = B->src + (size_t)src[i] * rb;
            pairs_h[i].dst = B->dev + (size_t)dst[i] * rb;
        }
        l2_flush(B);
        CK(cudaEventRecord(B->a, B->s));
        int g = grid > 0 ? grid : dhs_cuda_gather_grid(n, 4 * B->sms);
        CK(dhs_cuda_gather_launch(pairs_h, n, rb, g, B->s));
        CK(cudaEventRecord(B->b, B->s));
        t[r] = time_events(B);
    }
    float m = median(t, B->reps);
    free(t);
    return m;
}

/* the backend op on the backend's compute stream; also host µs per call */
static float op_time(bench *B, dhs_backend *be, uint32_t rb, int64_t n, dhs_copy_pair *pairs, int64_t *src, int64_t *dst,
                     float *host_us)
{
    cudaStream_t s = (cudaStream_t)dhs_cuda_stream(be);
    float *t = (float *)malloc(sizeof(float) * B->reps), *h = (float *)malloc(sizeof(float) * B->reps);
    for (int r = 0; r < B->reps; r++) {
        make_rows(B, rb, n, src, dst);
        for (int64_t i = 0; i < n; i++) {
            pairs[i].src = B->src + (size_t)src[i] * rb;
            pairs[i].dst = B->dev + (size_t)dst[i] * rb;
        }
        CK(cudaMemsetAsync(B->flush, (int)(rnd() & 0xff), B->flush_bytes, s));
        CK(cudaEventRecord(B->a, s));
        double t0 = now_us();
        DK(be->ops->gather_h2d(be, pairs, n, rb));
        h[r] = (float)(now_us() - t0);
        CK(cudaEventRecord(B->b, s));
        t[r] = time_events(B);
    }
    float m = median(t, B->reps);
    *host_us = median(h, B->reps);
    free(t);
    free(h);
    return m;
}

/* ------------------------------------------------- 3. resolver end to end */

typedef struct e2e_row {
    int32_t B;
    int32_t misses;
    double host_us, total_us; /* dhs_resolve call; call + compute-stream sync */
    double misses_seen;       /* distinct misses per call (stats) */
} e2e_row;

static int e2e_run(dhs_backend *be, int32_t Bhot, const int32_t *miss_counts, int n_miss, int rounds, e2e_row *out)
{
    const int32_t k = 2048;
    const uint32_t rb = 656;
    const int64_t L = 131072; /* history rows of the request */
    dhs_arch arch = dhs_arch_default();
    arch.sources[0].row_bytes = rb;
    dhs_config cfg = dhs_config_default();
    cfg.max_requests = 1;
    cfg.sel_k = k;
    cfg.spec_width = 1;
    cfg.hot_rows = Bhot;
    cfg.tail_rows = 128;
    cfg.page_rows = 64;
    cfg.max_rows = L + 4096;
    cfg.device_bytes = (uint64_t)(Bhot + cfg.tail_rows + 2 * k + 256) * rb;
    cfg.repop_pages = 0;     /* history stays on host: every non-hot row is a host miss */
    cfg.resident_first = 0;
    dhs_ctx *ctx = NULL;
    DK(dhs_ctx_create(&arch, &cfg, be, &ctx));
    dhs_req rq;
    DK(dhs_request_open(ctx, L + 1024, &rq));
    uint8_t *hist = NULL;
    CK(cudaMallocHost((void **)&hist, (size_t)L * rb));
    for (size_t i = 0; i < (size_t)L * rb / 8; i++) ((uint64_t *)hist)[i] = rnd();
    const void *rows[1] = {hist};
    double t0 = now_us();
    DK(dhs_request_import(ctx, rq, L, rows, DHS_IMPORT_HOST));
    double import_ms = (now_us() - t0) / 1e3;
    CK(cudaFreeHost(hist));

    /* a random order of history rows: fresh rows are taken from it */
    int64_t *perm = (int64_t *)malloc(sizeof(int64_t) * L);
    for (int64_t i = 0; i < L; i++) perm[i] = i;
    for (int64_t i = L - 1; i > 0; i--) {
        int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int64_t fresh = 0;
    int32_t *sel = (int32_t *)malloc(sizeof(int32_t) * k), *prev = (int32_t *)malloc(sizeof(int32_t) * k);
    int32_t *loc = (int32_t *)malloc(sizeof(int32_t) * k);
    uint8_t *newrow = NULL;
    CK(cudaMallocHost((void **)&newrow, rb));
    memset(newrow, 0x3c, rb);
    cudaStream_t s = (cudaStream_t)dhs_cuda_stream(be);
    int64_t n_r = L;
    int have_prev = 0;
    for (int mi = 0; mi < n_miss; mi++) {
        const int32_t M = miss_counts[mi];
        float *th = (float *)malloc(sizeof(float) * rounds), *tt = (float *)malloc(sizeof(float) * rounds);
        uint64_t miss0 = 0;
        int measured = 0;
        for (int r = -3; r < rounds; r++) { /* 3 warm-up rounds */
            int32_t K = 1, acc = 0;
            DK(dhs_round_begin(ctx, 1, &rq, &K));
            DK(dhs_write_rows(ctx, rq, 0, n_r, 1, newrow));
            /* k - M rows of the previous selection (hot), M fresh host rows */
            int32_t keep = have_prev ? k - M : 0;
            for (int32_t i = 0; i < keep; i++) sel[i] = prev[(i + M) % k];
            for (int32_t i = keep; i < k; i++) sel[i] = (int32_t)perm[fresh++ % L];
            dhs_resolve_item it = {rq, 1, sel, loc};
            dhs_stats st;
            dhs_get_stats(ctx, &st);
            if (r == 0) miss0 = st.distinct_misses;
            CK(cudaStreamSynchronize(s));
            double a = now_us();
            DK(dhs_resolve(ctx, 0, k, 1, &it));
            double b = now_us();
            CK(cudaStreamSynchronize(s));
            double c = now_us();
            if (r >= 0) {
                th[measured] = (float)(b - a);
                tt[measured] = (float)(c - a);
                measured++;
            }
            memcpy(prev, sel, sizeof(int32_t) * k);
            have_prev = 1;
            DK(dhs_round_end(ctx, &acc));
            n_r++;
        }
        dhs_stats st;
        dhs_get_stats(ctx, &st);
        e2e_row *o = &out[mi];
        o->B = Bhot;
        o->misses = M;
        o->host_us = median(th, measured);
        o->total_us = median(tt, measured);
        o->misses_seen = (double)(st.distinct_misses - miss0) / measured;
        free(th);
        free(tt);
    }
    fprintf(stderr, "  e2e B=%d: import of %lld rows took %.0f ms\n", Bhot, (long long)L, import_ms);
    CK(cudaFreeHost(newrow));
    free(perm);
    free(sel);
    free(prev);
    free(loc);
    DK(dhs_request_close(ctx, rq));
    dhs_ctx_destroy(ctx);
    return 0;
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    int quick = 0, thp = 0;
    double host_gib = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--thp")) thp = 1;
        else if (!strcmp(argv[i], "--host-gib") && i + 1 < argc) host_gib = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--thp] [--host-gib N]\n", argv[0]);
            return 2;
        }
    }
    bench B;
    memset(&B, 0, sizeof B);
    B.reps = quick ? 7 : 21;
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    B.sms = prop.multiProcessorCount;
    int drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    printf("device: %s, %d SMs, L2 %d MiB, driver %d, runtime %d\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20, drv, rt);
    CK(cudaStreamCreateWithFlags(&B.s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&B.a));
    CK(cudaEventCreate(&B.b));
    B.host_bytes = (size_t)(host_gib * (double)(1ull << 30));
    double t0 = now_us();
    CK(cudaHostAlloc((void **)&B.host, B.host_bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(B.host, 0x5a, B.host_bytes);
    for (size_t i = 0; i < B.host_bytes; i += 4096) B.host[i] = (uint8_t)rnd();
    printf("pinned host buffer: %.1f GiB (alloc + fill %.1f s)\n", host_gib, (now_us() - t0) / 1e6);
    B.src = B.host;
    B.span = B.host_bytes;
    B.dev_bytes = (size_t)1 << 30;
    CK(cudaMalloc((void **)&B.dev, B.dev_bytes));
    B.flush_bytes = (size_t)256 << 20;
    CK(cudaMalloc((void **)&B.flush, B.flush_bytes));

    const int64_t max_n = 16384;
    int64_t *src = (int64_t *)malloc(sizeof(int64_t) * max_n), *dst = (int64_t *)malloc(sizeof(int64_t) * max_n);
    int64_t *idx_d = NULL;
    CK(cudaMalloc((void **)&idx_d, sizeof(int64_t) * max_n));
    dhs_copy_pair *pairs_h = NULL;
    CK(cudaHostAlloc((void **)&pairs_h, sizeof(dhs_copy_pair) * max_n, cudaHostAllocMapped));

    /* ---- 1. ceilings */
    ceil_t C;
    bulk_copies(&B, &C);
    launches(&B, &C);
    memcpy_per_row(&B, &C);
    static const uint32_t rbs[3] = {576, 656, 1152};
    static const int64_t ns[3] = {256, 2048, 16384};
    static const int grids[8] = {4, 8, 16, 33, 66, 132, 264, 528};
    float probe[3][3];   /* best over grids */
    int probe_grid[3][3];
    for (int ri = 0; ri < 3; ri++)
        for (int ni = 0; ni < 3; ni++) {
            probe[ri][ni] = 1e30f;
            for (int gi = 2; gi < 8; gi++) { /* 16..528 blocks */
                float t = probe_time(&B, rbs[ri], ns[ni], grids[gi], idx_d, src, dst);
                if (t < probe[ri][ni]) {
                    probe[ri][ni] = t;
                    probe_grid[ri][ni] = grids[gi];
                }
            }
        }
    float probe656_4 = probe_time(&B, 656, 2048, 4, idx_d, src, dst);

    printf("\n== ceilings (this run)\n");
    printf("bulk pinned H2D 1 GiB cudaMemcpyAsync   %7.1f GB/s\n", C.h2d);
    printf("bulk pinned D2H 1 GiB cudaMemcpyAsync   %7.1f GB/s\n", C.d2h);
    printf("HBM D2D 1 GiB (read+write)              %7.0f GB/s\n", C.d2d);
    printf("empty kernel, back to back              %7.2f us each\n", C.launch_us);
    printf("empty kernel + stream sync (host wall)  %7.2f us\n", C.launch_sync_us);
    printf("cudaMemcpyAsync per 656-B row, 2048     %7.0f us (%.2f GB/s)\n", C.memcpy_row_us,
           gbps(2048.0 * 656, C.memcpy_row_us));
    printf("probe gather 656 B x 2048, 4 blocks     %7.1f us (%.1f GB/s)\n", probe656_4, gbps(2048.0 * 656, probe656_4));
    printf("probe zero-copy gather (best grid of 16..528):\n");
    printf("  %-6s %-6s %9s %8s %6s\n", "row_B", "rows", "us", "GB/s", "grid");
    for (int ri = 0; ri < 3; ri++)
        for (int ni = 0; ni < 3; ni++)
            printf("  %-6u %-6lld %9.1f %8.1f %6d\n", rbs[ri], (long long)ns[ni], probe[ri][ni],
                   gbps((double)ns[ni] * rbs[ri], probe[ri][ni]), probe_grid[ri][ni]);
    fflush(stdout);

    /* ---- 2. our kernel over grids, and the backend op */
    printf("\n== dhs gather kernel (pairs in mapped pinned memory), GPU us, median of %d\n", B.reps);
    printf("  %-6s %-6s", "row_B", "rows");
    for (int gi = 0; gi < 8; gi++) printf(" %7d", grids[gi]);
    printf(" %7s %6s %7s %6s\n", "auto", "GB/s", "probe", "ratio");
    float auto_t[3][3];
    for (int ri = 0; ri < 3; ri++)
        for (int ni = 0; ni < 3; ni++) {
            printf("  %-6u %-6lld", rbs[ri], (long long)ns[ni]);
            for (int gi = 0; gi < 8; gi++) printf(" %7.1f", ours_time(&B, rbs[ri], ns[ni], grids[gi], pairs_h, src, dst));
            float ta = ours_time(&B, rbs[ri], ns[ni], 0, pairs_h, src, dst);
            auto_t[ri][ni] = ta;
            printf(" %7.1f %6.1f %7.1f %6.2f\n", ta, gbps((double)ns[ni] * rbs[ri], ta), probe[ri][ni], ta / probe[ri][ni]);
            fflush(stdout);
        }

    /* ---- 2b. locality: the same gathers with rows confined to a smaller span
       (64 MiB ~ one 100K-token request's history; 8 GiB ~ many requests) */
    printf("\n== locality: 656-B rows random within a span of the pinned buffer (4 KiB pages)\n");
    printf("  %-8s %-6s %9s %8s %9s %8s\n", "span", "rows", "probe_us", "GB/s", "dhs_us", "GB/s");
    static const size_t spans[3] = {(size_t)64 << 20, (size_t)1 << 30, (size_t)8 << 30};
    for (int si = 0; si < 3; si++) {
        B.span = spans[si] < B.host_bytes ? spans[si] : B.host_bytes;
        for (int ni = 1; ni < 3; ni++) {
            float p = probe_time(&B, 656, ns[ni], 264, idx_d, src, dst);
            float o = ours_time(&B, 656, ns[ni], 0, pairs_h, src, dst);
            printf("  %5zu MiB %-6lld %9.1f %8.1f %9.1f %8.1f\n", B.span >> 20, (long long)ns[ni], p,
                   gbps(ns[ni] * 656.0, p), o, gbps(ns[ni] * 656.0, o));
        }
    }
    B.span = B.host_bytes;
    fflush(stdout);

    float lab[3][8]; /* [rows 256/2048/16384][variant], 64 MiB span */
    /* ---- 2b'. kernel lab in the fast regime (64 MiB span), 656-B rows:
       R4 = library kernel (4 rows per warp batch, 124 registers),
       R1 = one row per batch; map = pairs read from mapped pinned memory (as
       the backend does), dev = pairs already in device memory */
    {
        dhs_copy_pair *pairs_d = NULL;
        CK(cudaMalloc((void **)&pairs_d, sizeof(dhs_copy_pair) * max_n));
        B.span = (size_t)64 << 20;
        printf("\n== kernel lab, 64 MiB span, 656-B rows, GPU us (probe: device-side row indices, 264 blocks)\n");
        printf("  %-6s %8s %9s %9s %9s %9s %9s %9s %9s\n", "rows", "probe", "R4map", "R4map264", "R4map132", "R4dev",
               "R1map", "R1map264", "R1dev");
        for (int ni = 0; ni < 3; ni++) {
            int64_t n = ns[ni];
            float *v = lab[ni];
            v[0] = probe_time(&B, 656, n, 264, idx_d, src, dst);
            v[1] = lab_time(&B, dhs_cuda_gather_launch, 656, n, 0, pairs_h, NULL, src, dst);
            v[2] = lab_time(&B, dhs_cuda_gather_launch, 656, n, 264, pairs_h, NULL, src, dst);
            v[3] = lab_time(&B, dhs_cuda_gather_launch, 656, n, 132, pairs_h, NULL, src, dst);
            v[4] = lab_time(&B, dhs_cuda_gather_launch, 656, n, 0, pairs_h, pairs_d, src, dst);
            v[5] = lab_time(&B, lab_gather_launch_r1, 656, n, 0, pairs_h, NULL, src, dst);
            v[6] = lab_time(&B, lab_gather_launch_r1, 656, n, 264, pairs_h, NULL, src, dst);
            v[7] = lab_time(&B, lab_gather_launch_r1, 656, n, 0, pairs_h, pairs_d, src, dst);
            printf("  %-6lld", (long long)n);
            for (int i = 0; i < 8; i++) printf(" %9.1f", v[i]);
            printf("\n");
        }
        B.span = B.host_bytes;
        CK(cudaFree(pairs_d));
        fflush(stdout);
    }

    /* ---- 2c. (--thp) transparent huge pages: THP-backed memory registered
       with cudaHostRegister vs the cudaHostAlloc buffer, same (full) span: does
       the scattered-row falloff come from 4 KiB host pages? (run 4: no) */
    if (thp) {
        const size_t thp_bytes = B.host_bytes; /* the same span as the scattered case */
        long ahp0 = meminfo_kb("AnonHugePages:");
        void *m = mmap(NULL, thp_bytes + ((size_t)2 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            uint8_t *h = (uint8_t *)(((uintptr_t)m + ((2u << 20) - 1)) & ~(uintptr_t)((2u << 20) - 1));
            int adv = madvise(h, thp_bytes, MADV_HUGEPAGE);
            memset(h, 0x5b, thp_bytes);
            long ahp1 = meminfo_kb("AnonHugePages:");
            cudaError_t e = cudaHostRegister(h, thp_bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
            char thp_mode[128] = "?";
            FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
            if (f) {
                if (!fgets(thp_mode, sizeof thp_mode, f)) thp_mode[0] = 0;
                fclose(f);
                thp_mode[strcspn(thp_mode, "\n")] = 0;
            }
            printf("\n== huge pages: THP mode [%s], madvise %d, AnonHugePages +%ld MiB, cudaHostRegister: %s\n", thp_mode,
                   adv, (ahp1 - ahp0) >> 10, cudaGetErrorString(e));
            if (e == cudaSuccess) {
                void *dp = NULL;
                CK(cudaHostGetDevicePointer(&dp, h, 0));
                printf("  %-22s %-6s %9s %8s %9s %8s\n", "buffer (full span)", "rows", "probe_us", "GB/s", "dhs_us", "GB/s");
                for (int which = 0; which < 2; which++) {
                    B.src = which ? (uint8_t *)dp : B.host;
                    B.span = thp_bytes;
                    for (int ni = 1; ni < 3; ni++) {
                        float p = probe_time(&B, 656, ns[ni], 264, idx_d, src, dst);
                        float o = ours_time(&B, 656, ns[ni], 0, pairs_h, src, dst);
                        printf("  %-22s %-6lld %9.1f %8.1f %9.1f %8.1f\n", which ? "THP + cudaHostRegister" : "cudaHostAlloc",
                               (long long)ns[ni], p, gbps(ns[ni] * 656.0, p), o, gbps(ns[ni] * 656.0, o));
                    }
                }
                float t[5];
                for (int r = 0; r < 5; r++) {
                    CK(cudaEventRecord(B.a, B.s));
                    CK(cudaMemcpyAsync(B.dev, h, (size_t)1 << 30, cudaMemcpyHostToDevice, B.s));
                    CK(cudaEventRecord(B.b, B.s));
                    t[r] = time_events(&B);
                }
                printf("  bulk H2D 1 GiB from the THP buffer: %.1f GB/s\n", gbps((double)(1u << 30), median(t, 5)));
                CK(cudaHostUnregister(h));
            } else {
                (void)cudaGetLastError();
            }
            munmap(m, thp_bytes + ((size_t)2 << 20));
        }
        B.src = B.host;
        B.span = B.host_bytes;
        fflush(stdout);
    }

    dhs_backend *be = NULL;
    DK(dhs_backend_cuda_create(0, &be));
    dhs_copy_pair *pairs = (dhs_copy_pair *)malloc(sizeof(dhs_copy_pair) * max_n);
    printf("\n== backend op gather_h2d (host staging + launch on the compute stream), 656-B rows\n");
    printf("  %-6s %9s %9s %8s %9s\n", "rows", "GPU_us", "host_us", "GB/s", "vs_probe");
    for (int ni = 0; ni < 3; ni++) {
        float hus = 0, t = op_time(&B, be, 656, ns[ni], pairs, src, dst, &hus);
        printf("  %-6lld %9.1f %9.1f %8.1f %9.2f\n", (long long)ns[ni], t, hus, gbps((double)ns[ni] * 656, t), t / probe[1][ni]);
    }
    fflush(stdout);

    /* ---- 3. resolver end to end */
    printf("\n== dhs_resolve end to end, CUDA backend: 1 request, k=2048, 656-B rows, history 131072 rows (86 MB) on host\n");
    printf("   (reference: the same number of rows gathered in the 64 MiB-span regime, probe and dhs kernel)\n");
    printf("  %-6s %-7s %9s %9s %9s %10s %10s\n", "B", "misses", "seen", "host_us", "total_us", "probe64_us", "dhs64_us");
    static const int32_t Bs[3] = {2048, 8192, 65536};
    static const int32_t Ms[2] = {256, 2048};
    for (int bi = 0; bi < 3; bi++) {
        e2e_row rows[2];
        e2e_run(be, Bs[bi], Ms, 2, quick ? 10 : 30, rows);
        for (int mi = 0; mi < 2; mi++) {
            /* the probe for the same number of rows (2048 measured; 256 measured) */
            int ni = rows[mi].misses == 2048 ? 1 : 0;
            printf("  %-6d %-7d %9.0f %9.1f %9.1f %10.1f %10.1f\n", rows[mi].B, rows[mi].misses, rows[mi].misses_seen,
                   rows[mi].host_us, rows[mi].total_us, lab[ni][0], lab[ni][1]);
        }
        fflush(stdout);
    }

    /* ---- summary */
    printf("\n== summary (656-B rows)\n");
    printf("  %-34s %10s %10s %8s\n", "what", "us", "GB/s", "ratio");
    for (int ni = 0; ni < 3; ni++) {
        printf("  probe ceiling, %-5lld rows          %10.1f %10.1f %8s\n", (long long)ns[ni], probe[1][ni],
               gbps(ns[ni] * 656.0, probe[1][ni]), "1.00");
        printf("  dhs gather,    %-5lld rows          %10.1f %10.1f %8.2f\n", (long long)ns[ni], auto_t[1][ni],
               gbps(ns[ni] * 656.0, auto_t[1][ni]), auto_t[1][ni] / probe[1][ni]);
    }
    printf("  cudaMemcpyAsync per row, 2048 rows %10.0f %10.2f %8.1f\n", C.memcpy_row_us, gbps(2048.0 * 656, C.memcpy_row_us),
           C.memcpy_row_us / auto_t[1][1]);
    printf("  bulk H2D ceiling                   %10s %10.1f\n", "-", C.h2d);

    dhs_backend_destroy(be);
    free(pairs);
    free(src);
    free(dst);
    CK(cudaFree(idx_d));
    CK(cudaFreeHost(pairs_h));
    CK(cudaFree(B.flush));
    CK(cudaFree(B.dev));
    CK(cudaFreeHost(B.host));
    return 0;
}
