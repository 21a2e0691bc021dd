/* import_bench.c - how fast a prefilled history enters the hierarchy
 * (dhs_request_open + dhs_request_import), against the two baselines that
 * bound it, measured in the same process over the same bytes:
 *   memcpy   one thread copying the history into freshly touched host memory
 *            (what any import must at least move);
 *   pin      (CUDA) cudaHostAlloc of the history's bytes, mapped and
 *            portable, as the library pins host rows (what registering the
 *            memory costs before a byte is copied).
 * Sessions are imported one after another into one context (each closed
 * before the next opens, so every session pins afresh unless memory is
 * reused), first with DHS_IMPORT_HOST (rows in host memory), then, on CUDA,
 * DHS_IMPORT_DEVICE (rows in device memory, as a prefill leaves them), then
 * DHS_IMPORT_DEVICE with the rows in (pageable) host memory: what `dhs bench
 * serve --import device` does with its synthetic histories.
 *
 * Usage: import_bench [--backend cpu|cuda] [--rows N] [--sources S]
 *                     [--row-bytes B] [--sessions N]
 * Defaults: cpu, 8192 rows, 78 sources of 656 bytes (GLM-5.3's FP8 MLA
 * rows, one source per layer), 3 sessions. The GLM-5.3 100K history of the
 * serving benchmark is --rows 100000 (5.1 GB).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dhs.h"
#ifdef DHS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int arg_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    long rows = 8192, S = 78, rb = 656, sessions = 3;
    int cuda = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            puts("usage: import_bench [--backend cpu|cuda] [--rows N] [--sources S] [--row-bytes B] [--sessions N]\n"
                 "  dhs_request_open + dhs_request_import per session against memcpy and (cuda) cudaHostAlloc of\n"
                 "  the same bytes, measured in the same process (bench/import_bench.c)");
            return 0;
        }
        int bad = !v;
        if (!bad && !strcmp(a, "--backend")) {
            if (!strcmp(v, "cuda")) cuda = 1;
            else if (strcmp(v, "cpu")) bad = 1;
        } else if (!bad && !strcmp(a, "--rows")) bad = arg_long(v, 1, 1L << 22, &rows);
        else if (!bad && !strcmp(a, "--sources")) bad = arg_long(v, 1, DHS_MAX_SOURCES, &S);
        else if (!bad && !strcmp(a, "--row-bytes")) bad = arg_long(v, 16, 1L << 16, &rb) || rb % 16;
        else if (!bad && !strcmp(a, "--sessions")) bad = arg_long(v, 1, 1000, &sessions);
        else bad = 1;
        if (bad) {
            fprintf(stderr, "import_bench: bad argument '%s'%s%s (--help)\n", a, v ? " " : "", v ? v : "");
            return 2;
        }
        i++;
    }
    const uint64_t src_bytes = (uint64_t)rows * (uint64_t)rb, total = src_bytes * (uint64_t)S;

    dhs_arch arch = dhs_arch_default();
    arch.n_groups = (int32_t)S;
    arch.n_sources = (int32_t)S;
    arch.n_consumers = (int32_t)S;
    for (int32_t s = 0; s < (int32_t)S; s++) {
        arch.sources[s] = (dhs_source_desc){(uint32_t)rb, 1, s};
        arch.consumers[s] = (dhs_consumer_desc){DHS_CONSUMER_OWN, s, s};
    }
    dhs_config cfg = dhs_config_default();
    cfg.max_requests = 1;
    cfg.sel_k = 64;
    cfg.spec_width = 1;
    cfg.page_rows = 64;
    cfg.hot_rows = 64;
    cfg.tail_rows = 64;
    cfg.max_rows = rows + 256;
    cfg.staging_arenas = -1;
    dhs_sizes sz;
    dhs_status st = dhs_config_sizes(&arch, &cfg, &sz);
    if (st != DHS_OK) {
        fprintf(stderr, "import_bench: dhs_config_sizes: %s\n", dhs_status_str(st));
        return 3;
    }
    /* a pool that takes the required allocations and every complete page of the history */
    cfg.device_bytes = sz.min_device_bytes + (uint64_t)(rows / cfg.page_rows + 1) * sz.page_bytes * (uint64_t)S;

    dhs_backend *be = NULL;
    st = cuda ? dhs_backend_cuda_create(0, &be) : dhs_backend_cpu_create(NULL, &be);
    if (st != DHS_OK) {
        fprintf(stderr, "import_bench: --backend %s is not available here: %s\n", cuda ? "cuda" : "cpu", dhs_status_str(st));
        return 2;
    }
    /* the history: S sources of `rows` rows in host memory (every byte written) */
    uint8_t *hist = malloc(total);
    const void **rp = malloc(sizeof(void *) * (size_t)S);
    if (!hist || !rp) {
        fprintf(stderr, "import_bench: cannot allocate %.2f GB of history\n", (double)total / 1e9);
        return 3;
    }
    for (uint64_t i = 0; i < total; i += 4096) hist[i] = (uint8_t)(i >> 12);
    for (long s = 0; s < S; s++) rp[s] = hist + (uint64_t)s * src_bytes;

    printf("import_bench: %s backend, %ld sources x %ld rows x %ld B = %.3f GB per session, %ld sessions\n",
           dhs_backend_name(be), S, rows, rb, (double)total / 1e9, sessions);

    /* baseline 1: memcpy of the same bytes into fresh memory */
    uint8_t *dst = malloc(total);
    if (!dst) return 3;
    double t0 = now_s();
    memcpy(dst, hist, total);
    double t_memcpy_cold = now_s() - t0;
    t0 = now_s();
    memcpy(dst, hist, total);
    double t_memcpy = now_s() - t0;
    uint64_t sum = 0; /* the copies are used: the compiler keeps them */
    for (uint64_t i = 0; i < total; i += 4096) sum += dst[i];
    free(dst);
    if (sum == UINT64_MAX) puts("");
    printf("%-34s %9.3f s  %7.2f GB/s\n", "memcpy, fresh destination", t_memcpy_cold, (double)total / t_memcpy_cold / 1e9);
    printf("%-34s %9.3f s  %7.2f GB/s\n", "memcpy, warm destination", t_memcpy, (double)total / t_memcpy / 1e9);
    double t_pin = 0;
#ifdef DHS_HAVE_CUDA
    if (cuda) {
        /* baseline 2: pinning the same bytes as the library does, one allocation per source */
        void **pp = calloc((size_t)S, sizeof(void *));
        t0 = now_s();
        for (long s = 0; s < S && pp; s++)
            if (cudaHostAlloc(&pp[s], src_bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) pp[s] = NULL;
        t_pin = now_s() - t0;
        double t1 = now_s();
        for (long s = 0; s < S && pp; s++) cudaFreeHost(pp[s]);
        double t_unpin = now_s() - t1;
        free(pp);
        printf("%-34s %9.3f s  %7.2f GB/s  (free %.3f s)\n", "cudaHostAlloc (mapped, portable)", t_pin,
               (double)total / t_pin / 1e9, t_unpin);
    }
#endif

    int rc = 0;
    /* the variants: the flag, and whether the rows are copied to device memory first */
    const unsigned flags[3] = {DHS_IMPORT_HOST, DHS_IMPORT_DEVICE, DHS_IMPORT_DEVICE};
    const int on_dev[3] = {0, 1, 0};
    const char *const names[3] = {"HOST", "DEVICE", "DEVICE/host rows"};
    /* the same sessions twice: host rows freed at close (the baseline), then kept for the next import
       (dhs_config.host_cache_bytes = one session's host rows and then some) */
    for (int cache = 0; cache < 2 && !rc; cache++) {
        cfg.host_cache_bytes = cache ? total + total / 4 : 0;
        printf("-- dhs_config.host_cache_bytes = %.2f GB%s\n", (double)cfg.host_cache_bytes / 1e9,
               cache ? " (host rows of closed sessions reused)" : " (host rows freed at close)");
        dhs_ctx *ctx = NULL;
        st = dhs_ctx_create(&arch, &cfg, be, &ctx);
        if (st != DHS_OK) {
            fprintf(stderr, "import_bench: dhs_ctx_create (%.2f GiB pool): %s\n", (double)cfg.device_bytes / 1073741824.0,
                    dhs_status_str(st));
            rc = 3;
            break;
        }
        for (int f = 0; f < 3 && !rc; f++) {
            if (on_dev[f] && !cuda) continue; /* the CPU backend has no device memory of its own */
            const void **src = rp;
            const void **dp = NULL;
    #ifdef DHS_HAVE_CUDA
            void *dev = NULL;
            if (on_dev[f]) {
                if (cudaMalloc(&dev, total) != cudaSuccess || cudaMemcpy(dev, hist, total, cudaMemcpyHostToDevice) != cudaSuccess) {
                    printf("DHS_IMPORT_DEVICE: no device memory for the history (%.2f GB)\n", (double)total / 1e9);
                    break;
                }
                dp = malloc(sizeof(void *) * (size_t)S);
                for (long s = 0; s < S; s++) dp[s] = (uint8_t *)dev + (uint64_t)s * src_bytes;
                src = dp;
            }
    #endif
            for (long n = 0; n < sessions && !rc; n++) {
                dhs_req r;
                double a = now_s();
                st = dhs_request_open(ctx, rows, &r);
                double b = now_s();
                if (st == DHS_OK) st = dhs_request_import(ctx, r, rows, src, flags[f]);
                double c = now_s();
                if (st == DHS_OK) st = dhs_sync(ctx);
                double d = now_s();
                dhs_mem mem;
                if (st == DHS_OK) st = dhs_get_mem(ctx, &mem);
                if (st != DHS_OK) {
                    fprintf(stderr, "import_bench: session %ld: %s\n", n, dhs_status_str(st));
                    rc = 3;
                    break;
                }
                char label[64];
                snprintf(label, sizeof label, "%s import, session %ld", names[f], n);
                printf("%-34s %9.3f s  %7.2f GB/s  (open %.3f, import %.3f, sync %.3f s; %.2f of memcpy's rate)\n",
                       label, d - a, (double)total / (d - a) / 1e9, b - a, c - b, d - c, t_memcpy / (d - a));
                if (t_pin > 0) printf("%-34s %9s    pinning alone would take %.0f %% of it\n", "", "", 100.0 * t_pin / (d - a));
                double e = now_s();
                st = dhs_request_close(ctx, r);
                if (st == DHS_OK) st = dhs_sync(ctx);
                printf("%-34s %9.3f s\n", "  close + sync", now_s() - e);
                char msg[256];
                if (st != DHS_OK || dhs_check_invariants(ctx, msg, sizeof msg)) {
                    fprintf(stderr, "import_bench: close: %s %s\n", dhs_status_str(st), st == DHS_OK ? msg : "");
                    rc = 3;
                }
            }
    #ifdef DHS_HAVE_CUDA
            if (dev) cudaFree(dev);
    #endif
            free(dp);
        }
        dhs_ctx_destroy(ctx);
    }
    dhs_backend_destroy(be);
    free(rp);
    free(hist);
    return rc;
}
