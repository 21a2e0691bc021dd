/* topk_bench.cu - fused top-k + slot lookup (dev/topk.cu) against the
 * same top-k followed by a separate lookup kernel, k = 2048, over n = 8K ..
 * 1M candidates per query, batch 1 and 64. cudaEvent timing, p50 of repeats.
 *
 * Baselines measured in the same process:
 *   plain   : top-k alone (slot_of NULL), no lookup
 *   split   : plain top-k, then dhs_cuda_topk_lookup (two launches)
 *   fused   : top-k with the lookup in its compaction step (one launch)
 *   copy bw : device-to-device cudaMemcpy of 1 GiB (read + write bytes / time),
 *             the HBM figure the roofline uses
 * Roofline: floor = bytes one pass over the scores must read (batch * n * 4 +
 * the k slot reads) / copy bandwidth; the kernel reads the scores up to 4
 * times (3 radix passes + compaction), one block per query.
 * Every timed configuration's output is checked once: fused == split
 * (rows and locations), else the program exits 1.
 * Usage: topk_bench [--quick] [--json FILE]   (table on stdout, JSON last) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "dev/topk_spec.h"
#include "util/rng.h"

#include "bench_cuda.h"

/* scores in [0,1) with 24-bit resolution; about half the candidates hit a slot */
__global__ void fill_kernel(float *sc, int32_t *slot, int64_t total, uint64_t seed)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t h = dhs_mix64(seed + (uint64_t)i * 0x9e3779b97f4a7c15ull);
        sc[i] = (float)(h >> 40) / 16777216.0f;
        slot[i] = (h & 1) ? (int32_t)((h >> 8) & 0xfffff) : -1;
    }
}

typedef int (*launch_fn)(void *);

struct ctx {
    float *sc;
    int32_t *slot, *rows, *locs, *rows2, *locs2;
    int64_t n;
    int32_t batch, k;
    cudaStream_t st;
};

static int run_plain(void *p)
{
    ctx *c = (ctx *)p;
    return dhs_cuda_topk_fused(c->sc, c->n, c->batch, c->n, c->k, NULL, 0, c->rows2, NULL, NULL, c->st);
}
static int run_split(void *p)
{
    ctx *c = (ctx *)p;
    int rc = dhs_cuda_topk_fused(c->sc, c->n, c->batch, c->n, c->k, NULL, 0, c->rows2, NULL, NULL, c->st);
    if (rc) return rc;
    return dhs_cuda_topk_lookup(c->rows2, c->batch, c->k, c->slot, c->n, c->locs2, c->st);
}
static int run_fused(void *p)
{
    ctx *c = (ctx *)p;
    return dhs_cuda_topk_fused(c->sc, c->n, c->batch, c->n, c->k, c->slot, c->n, c->rows, c->locs, NULL, c->st);
}

/* p50 in microseconds of `reps` timed launches after 2 warm-ups */
static double time_p50(launch_fn f, void *arg, cudaStream_t st, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 2; i++)
        if (f(arg)) exit(1);
    CK(cudaStreamSynchronize(st));
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a, st));
        if (f(arg)) {
            fprintf(stderr, "launch failed\n");
            exit(1);
        }
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const double bw = bench_d2d_gbs(st);
    printf("device: %s, %d SMs; copy bandwidth (D2D, read+write) %.0f GB/s\n", prop.name, prop.multiProcessorCount, bw);

    const int64_t ns[] = {8192, 32768, 131072, 524288, 1048576};
    const int32_t batches[] = {1, 64};
    const int32_t k = DHS_TOPK_MAX_K;
    const int64_t maxtot = 64 * ns[4];
    ctx c;
    memset(&c, 0, sizeof c);
    c.st = st;
    c.k = k;
    CK(cudaMalloc((void **)&c.sc, sizeof(float) * maxtot));
    CK(cudaMalloc((void **)&c.slot, sizeof(int32_t) * maxtot));
    int32_t **outs[] = {&c.rows, &c.locs, &c.rows2, &c.locs2};
    for (int i = 0; i < 4; i++) CK(cudaMalloc((void **)outs[i], sizeof(int32_t) * 64 * k));
    std::vector<int32_t> h1(64 * k), h2(64 * k), h3(64 * k), h4(64 * k);

    char json[8192];
    size_t jl = 0;
    jl += snprintf(json + jl, sizeof json - jl, "{\"bench\":\"topk\",\"device\":\"%s\",\"k\":%d,\"copy_bw_gbs\":%.1f,\"rows\":[",
                   prop.name, k, bw);
    printf("\n%8s %6s | %10s %10s %10s | %8s %8s | %10s %8s %10s\n", "n", "batch", "plain us", "split us", "fused us",
           "split/f", "lookup%", "floor us", "f/floor", "fused GB/s");
    int first = 1;
    for (int bi = 0; bi < 2; bi++)
        for (int ni = 0; ni < 5; ni++) {
            c.n = ns[ni];
            c.batch = batches[bi];
            int64_t tot = c.n * c.batch;
            fill_kernel<<<1024, 256, 0, st>>>(c.sc, c.slot, tot, 0x1234ull + (uint64_t)ni * 77 + (uint64_t)bi);
            CK(cudaGetLastError());
            int reps = quick ? 7 : (tot > (1 << 24) ? 21 : 51);
            double tp = time_p50(run_plain, &c, st, reps);
            double ts = time_p50(run_split, &c, st, reps);
            double tf = time_p50(run_fused, &c, st, reps);
            /* consistency: fused == split */
            CK(cudaStreamSynchronize(st));
            size_t ob = sizeof(int32_t) * (size_t)c.batch * k;
            CK(cudaMemcpy(h1.data(), c.rows, ob, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h2.data(), c.locs, ob, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h3.data(), c.rows2, ob, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h4.data(), c.locs2, ob, cudaMemcpyDeviceToHost));
            if (memcmp(h1.data(), h3.data(), ob) || memcmp(h2.data(), h4.data(), ob)) {
                fprintf(stderr, "MISMATCH: fused and split outputs differ at n %lld batch %d\n", (long long)c.n, c.batch);
                return 1;
            }
            double floor_bytes = (double)tot * 4.0 + (double)c.batch * k * 4.0;
            double floor_us = floor_bytes / (bw * 1e9) * 1e6;
            double fused_gbs = floor_bytes / (tf * 1e-6) / 1e9;
            printf("%8lld %6d | %10.1f %10.1f %10.1f | %8.3f %7.1f%% | %10.2f %8.1f %10.1f\n", (long long)c.n, c.batch, tp, ts,
                   tf, ts / tf, 100.0 * (ts - tp) / ts, floor_us, tf / floor_us, fused_gbs);
            jl += snprintf(json + jl, sizeof json - jl,
                           "%s{\"n\":%lld,\"batch\":%d,\"plain_us\":%.2f,\"split_us\":%.2f,\"fused_us\":%.2f,"
                           "\"floor_us\":%.3f,\"reps\":%d}",
                           first ? "" : ",", (long long)c.n, c.batch, tp, ts, tf, floor_us, reps);
            first = 0;
        }
    jl += snprintf(json + jl, sizeof json - jl, "]}");
    printf("\nsplit/f = split time / fused time (> 1: the fused lookup is faster); lookup%% = share of the split time\n"
           "spent on the separate lookup; floor = one read of the scores (+ k slots) at the copy bandwidth;\n"
           "fused GB/s = those floor bytes / fused time (the kernel itself reads the scores up to 4 times).\n");
    printf("JSON %s\n", json);
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (f) {
            fprintf(f, "%s\n", json);
            fclose(f);
        }
    }
    for (int i = 0; i < 4; i++) CK(cudaFree(*outs[i]));
    CK(cudaFree(c.sc));
    CK(cudaFree(c.slot));
    CK(cudaStreamDestroy(st));
    return 0;
}
