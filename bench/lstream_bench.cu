/* lstream_bench.cu - layer-streamed prefill on the GPU (src/cuda/lstream.cu
 * running src/core/lstream.c's schedule) over the synthetic model: history in
 * pinned host memory, R device layer buffers, compute = the synthetic layer's
 * kernels over the chunk's rows (work = mixing rounds per word, the knob that
 * moves a layer from transfer-bound to compute-bound).
 *
 * Per configuration, in the same process:
 *   streamed  : the R-buffer schedule on 3 streams (load / compute / write-back)
 *   serial    : the same schedule on one stream (load + compute + write-back summed)
 *   full      : full residency (L buffers: the schedule with R = L, nothing
 *               reloaded after chunk 0), 3 streams
 *   load/comp/wb only: the schedule with one op kind, to get each queue's busy
 *               time; ideal streamed time = the largest of the three
 * Exactness (exit 1 on any difference): host history and activations of
 * streamed == serial == full, byte for byte; and a small configuration run
 * on the GPU equals the CPU full-residency reference (dhs_ls_run_full_cpu).
 * Reports peak device bytes R x layer vs L x layer, time per layer and
 * overlap = (serial - streamed) / (serial - ideal).
 * Usage: lstream_bench [--quick] [--json FILE] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "core/lstream.h"

#include "bench_cuda.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct rig {
    dhs_ls_synth m;
    uint32_t *h_hist;             /* pinned [L][layer_words] */
    std::vector<uint32_t *> bufs; /* device layer buffers (L of them: full residency uses all) */
    uint32_t *d_x;
    void *streams[3];
};

static std::vector<dhs_ls_event> schedule(int32_t L, int32_t R, int32_t C, int32_t depth)
{
    std::vector<int32_t> map(L, depth);
    dhs_ls_params p = {L, R, C, map.data()};
    std::vector<dhs_ls_event> ev(dhs_ls_max_events(&p));
    int64_t n = 0;
    if (dhs_ls_schedule(&p, ev.data(), (int64_t)ev.size(), &n) != DHS_OK) {
        fprintf(stderr, "dhs_ls_schedule failed\n");
        exit(1);
    }
    ev.resize(n);
    return ev;
}

/* host history reset (prefix kept, appended rows zeroed), activations poisoned */
static void reset(rig &r)
{
    const int64_t lw = dhs_ls_layer_words(&r.m), W = r.m.row_words;
    for (int32_t l = 0; l < r.m.n_layers; l++)
        memset(r.h_hist + l * lw + r.m.prefix_rows * W, 0, sizeof(uint32_t) * (size_t)(lw - r.m.prefix_rows * W));
    CK(cudaMemset(r.d_x, 0x5a, sizeof(uint32_t) * (size_t)(dhs_ls_total_rows(&r.m) * W)));
    CK(cudaDeviceSynchronize());
}

/* wall seconds of one run (issue + completion) */
static double run_once(rig &r, const std::vector<dhs_ls_event> &ev, int one_stream, unsigned mask)
{
    void *s3[3] = {r.streams[0], r.streams[1], r.streams[2]};
    if (one_stream) s3[0] = s3[2] = s3[1];
    CK(cudaDeviceSynchronize());
    double t0 = now_s();
    CK(dhs_cuda_ls_run(&r.m, ev.data(), (int64_t)ev.size(), r.h_hist, r.bufs.data(), r.d_x, s3, mask));
    CK(cudaDeviceSynchronize());
    return now_s() - t0;
}

static double p50(rig &r, const std::vector<dhs_ls_event> &ev, int one_stream, unsigned mask, int reps)
{
    std::vector<double> t;
    run_once(r, ev, one_stream, mask); /* warm-up */
    for (int i = 0; i < reps; i++) t.push_back(run_once(r, ev, one_stream, mask));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* result of a complete run: host history + activations of the appended rows */
static std::vector<uint32_t> snapshot(rig &r)
{
    const int64_t lw = dhs_ls_layer_words(&r.m), W = r.m.row_words, T = dhs_ls_total_rows(&r.m);
    std::vector<uint32_t> out((size_t)(r.m.n_layers * lw + (T - r.m.prefix_rows) * W));
    memcpy(out.data(), r.h_hist, sizeof(uint32_t) * (size_t)(r.m.n_layers * lw));
    CK(cudaMemcpy(out.data() + r.m.n_layers * lw, r.d_x + r.m.prefix_rows * W, sizeof(uint32_t) * (size_t)((T - r.m.prefix_rows) * W),
                  cudaMemcpyDeviceToHost));
    return out;
}

static void rig_init(rig &r, const dhs_ls_synth &m)
{
    r.m = m;
    const int64_t lw = dhs_ls_layer_words(&m);
    CK(cudaMallocHost((void **)&r.h_hist, sizeof(uint32_t) * (size_t)(m.n_layers * lw)));
    dhs_ls_synth_init_host(&m, r.h_hist);
    r.bufs.assign(m.n_layers, nullptr);
    for (int32_t l = 0; l < m.n_layers; l++) CK(cudaMalloc((void **)&r.bufs[l], sizeof(uint32_t) * (size_t)lw));
    CK(cudaMalloc((void **)&r.d_x, sizeof(uint32_t) * (size_t)(dhs_ls_total_rows(&m) * m.row_words)));
    for (int i = 0; i < 3; i++) {
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        r.streams[i] = s;
    }
}

static void rig_free(rig &r)
{
    for (uint32_t *b : r.bufs) CK(cudaFree(b));
    CK(cudaFree(r.d_x));
    CK(cudaFreeHost(r.h_hist));
    for (int i = 0; i < 3; i++) CK(cudaStreamDestroy((cudaStream_t)r.streams[i]));
}

/* the small configuration against the CPU full-residency reference */
static int check_vs_cpu(void)
{
    dhs_ls_synth m = {12, 3, 16, 3, 1000, 512};
    rig r;
    rig_init(r, m);
    const int64_t lw = dhs_ls_layer_words(&m), W = m.row_words, T = dhs_ls_total_rows(&m);
    std::vector<uint32_t> hist((size_t)(m.n_layers * lw)), bufs((size_t)(m.n_layers * lw)), x((size_t)(T * W));
    dhs_ls_synth_init_host(&m, hist.data());
    dhs_ls_run_full_cpu(&m, hist.data(), bufs.data(), x.data());
    int bad = 0;
    for (int32_t R = 2; R <= 5; R++)
        for (int32_t depth = 0; depth <= 2; depth++) {
            reset(r);
            run_once(r, schedule(m.n_layers, R, m.n_chunks, depth), 0, 7u);
            std::vector<uint32_t> got = snapshot(r);
            if (memcmp(got.data(), hist.data(), sizeof(uint32_t) * (size_t)(m.n_layers * lw)) ||
                memcmp(got.data() + m.n_layers * lw, x.data() + m.prefix_rows * W, sizeof(uint32_t) * (size_t)((T - m.prefix_rows) * W))) {
                fprintf(stderr, "MISMATCH: GPU streamed R %d depth %d != CPU full residency\n", R, depth);
                bad = 1;
            }
        }
    rig_free(r);
    printf("exactness: GPU streamed (R 2..5, depth 0..2, 12 layers, 3 chunks) vs CPU full residency: %s\n", bad ? "DIFFER" : "identical");
    return bad;
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
    printf("device: %s\n", prop.name);
    if (check_vs_cpu()) return 1;

    /* 32 layers, 256-byte rows, 48K-row prefix + 2 chunks of 16K rows: 20 MiB per layer */
    const int32_t L = 32, R = DHS_LS_DEFAULT_BUFFERS, C = 2, depth = 1;
    dhs_ls_synth m = {L, C, 64, 0, quick ? 24576 : 49152, quick ? 8192 : 16384};
    rig r;
    rig_init(r, m);
    const int64_t layer_bytes = dhs_ls_layer_words(&m) * 4, x_bytes = dhs_ls_total_rows(&m) * m.row_words * 4;
    printf("model: %d layers, %d chunks of %lld rows after a %lld-row prefix, %d-byte rows: %.1f MiB per layer\n", L, C,
           (long long)m.chunk_rows, (long long)m.prefix_rows, m.row_words * 4, layer_bytes / 1048576.0);
    printf("peak device bytes: streamed R=%d %.1f MiB (+%.1f MiB activations) vs full residency %.1f MiB (%.1f%%)\n", R,
           R * layer_bytes / 1048576.0, x_bytes / 1048576.0, (double)L * layer_bytes / 1048576.0, 100.0 * R / L);
    std::vector<dhs_ls_event> ev_s = schedule(L, R, C, depth), ev_f = schedule(L, L, C, depth);
    const int works[] = {0, 64, 256, 1024};
    const int reps = quick ? 3 : 5;
    char json[4096];
    size_t jl = snprintf(json, sizeof json,
                         "{\"bench\":\"lstream\",\"device\":\"%s\",\"layers\":%d,\"buffers\":%d,\"chunks\":%d,\"layer_bytes\":%lld,"
                         "\"peak_streamed_bytes\":%lld,\"peak_full_bytes\":%lld,\"rows\":[",
                         prop.name, L, R, C, (long long)layer_bytes, (long long)(R * layer_bytes), (long long)(L * layer_bytes));
    printf("\n%6s | %9s %9s %9s | %8s %8s %8s %8s | %8s %8s | %7s %s\n", "work", "serial ms", "stream ms", "full ms", "load ms",
           "comp ms", "wb ms", "ideal ms", "ms/layer", "full/lyr", "overlap", "exact");
    int bad = 0;
    for (int wi = 0; wi < 4; wi++) {
        r.m.work = works[wi];
        reset(r);
        double t_serial = p50(r, ev_s, 1, 7u, reps);
        reset(r);
        run_once(r, ev_s, 1, 7u);
        std::vector<uint32_t> a = snapshot(r);
        reset(r);
        double t_stream = p50(r, ev_s, 0, 7u, reps);
        reset(r);
        run_once(r, ev_s, 0, 7u);
        std::vector<uint32_t> b = snapshot(r);
        reset(r);
        double t_full = p50(r, ev_f, 0, 7u, reps);
        reset(r);
        run_once(r, ev_f, 0, 7u);
        std::vector<uint32_t> c = snapshot(r);
        int exact = a == b && b == c;
        bad |= !exact;
        double t_load = p50(r, ev_s, 0, 1u, reps), t_comp = p50(r, ev_s, 0, 2u, reps), t_wb = p50(r, ev_s, 0, 4u, reps);
        double ideal = std::max(t_load, std::max(t_comp, t_wb));
        double overlap = t_serial > ideal ? (t_serial - t_stream) / (t_serial - ideal) : 0.0;
        printf("%6d | %9.2f %9.2f %9.2f | %8.2f %8.2f %8.2f %8.2f | %8.3f %8.3f | %6.1f%% %s\n", works[wi], 1e3 * t_serial,
               1e3 * t_stream, 1e3 * t_full, 1e3 * t_load, 1e3 * t_comp, 1e3 * t_wb, 1e3 * ideal, 1e3 * t_stream / (L * C),
               1e3 * t_full / (L * C), 100.0 * overlap, exact ? "identical" : "DIFFER");
        jl += snprintf(json + jl, sizeof json - jl,
                       "%s{\"work\":%d,\"serial_ms\":%.3f,\"streamed_ms\":%.3f,\"full_ms\":%.3f,\"load_ms\":%.3f,\"compute_ms\":%.3f,"
                       "\"writeback_ms\":%.3f,\"overlap\":%.3f,\"exact\":%s}",
                       wi ? "," : "", works[wi], 1e3 * t_serial, 1e3 * t_stream, 1e3 * t_full, 1e3 * t_load, 1e3 * t_comp,
                       1e3 * t_wb, overlap, exact ? "true" : "false");
    }
    jl += snprintf(json + jl, sizeof json - jl, "]}");
    printf("\nserial = the R-buffer schedule on one stream; stream = on 3 streams; full = full residency (L buffers) on 3\n"
           "streams; load/comp/wb = one op kind alone; ideal = the largest of those; overlap = (serial - stream) /\n"
           "(serial - ideal). exact: host history + activations of serial, stream and full identical byte for byte.\n");
    printf("JSON %s\n", json);
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (f) {
            fprintf(f, "%s\n", json);
            fclose(f);
        }
    }
    rig_free(r);
    if (bad) fprintf(stderr, "MISMATCH: streamed and full-residency results differ\n");
    return bad;
}
