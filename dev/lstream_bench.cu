/* lstream_bench.cu - layer-streamed prefill on the GPU (dev/lstream.cu
 * running dev/lstream.c's schedule) over the synthetic model: history in
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
 * TTFT mode (--ttft, see ttft_main below): time to first token of a whole
 * prompt at full residency, streamed at the same chunk, and streamed at the
 * larger chunk the freed memory allows (dhs_ls_max_chunk).
 * Usage: lstream_bench [--quick] [--json FILE]
 *        lstream_bench --ttft [--quick] [--prompt ROWS] [--chunk ROWS] [--act-row-bytes B] [--multiple ROWS]
 *                      [--buffers R] [--layers L] [--depth D] [--reps N] [--works W,W,...] [--json FILE] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "dev/lstream.h"

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
static void reset_hist(const dhs_ls_synth &m, uint32_t *h_hist, uint32_t *d_x)
{
    const int64_t lw = dhs_ls_layer_words(&m), W = m.row_words;
    for (int32_t l = 0; l < m.n_layers; l++)
        memset(h_hist + l * lw + m.prefix_rows * W, 0, sizeof(uint32_t) * (size_t)(lw - m.prefix_rows * W));
    CK(cudaMemset(d_x, 0x5a, sizeof(uint32_t) * (size_t)dhs_ls_x_words(&m)));
    CK(cudaDeviceSynchronize());
}
static void reset(rig &r) { reset_hist(r.m, r.h_hist, r.d_x); }

/* the activations a run leaves for the appended rows: every appended row, or
   with x_window the last chunk's rows; *first = the first of those rows */
static std::vector<uint32_t> x_result(const dhs_ls_synth &m, const uint32_t *d_x, int64_t *first)
{
    const int64_t W = m.row_words, T = dhs_ls_total_rows(&m);
    const int64_t t0 = m.x_window ? dhs_ls_chunk_start(&m, m.n_chunks - 1) : m.prefix_rows;
    std::vector<uint32_t> out((size_t)((T - t0) * W));
    CK(cudaMemcpy(out.data(), d_x + (m.x_window ? 0 : t0 * W), sizeof(uint32_t) * out.size(), cudaMemcpyDeviceToHost));
    *first = t0;
    return out;
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

/* result of a complete run: host history + activations of the appended rows (x_result) */
static std::vector<uint32_t> snapshot(rig &r)
{
    const int64_t lw = dhs_ls_layer_words(&r.m);
    int64_t first = 0;
    std::vector<uint32_t> x = x_result(r.m, r.d_x, &first);
    std::vector<uint32_t> out((size_t)(r.m.n_layers * lw) + x.size());
    memcpy(out.data(), r.h_hist, sizeof(uint32_t) * (size_t)(r.m.n_layers * lw));
    memcpy(out.data() + r.m.n_layers * lw, x.data(), sizeof(uint32_t) * x.size());
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
    CK(cudaMalloc((void **)&r.d_x, sizeof(uint32_t) * (size_t)dhs_ls_x_words(&m)));
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

/* the small configurations against the CPU full-residency reference: equal
   chunks with every row's activations kept, and (what the TTFT mode runs) a
   ragged last chunk with the activations of the current chunk only */
static int check_vs_cpu(void)
{
    const dhs_ls_synth shapes[2] = {{12, 3, 16, 3, 1000, 512, 0, 0}, {12, 3, 16, 3, 1000, 512, 1300, 1}};
    int bad = 0;
    for (const dhs_ls_synth &m : shapes) {
        rig r;
        rig_init(r, m);
        dhs_ls_synth mc = m; /* the CPU reference keeps every row's activations */
        mc.x_window = 0;
        const int64_t lw = dhs_ls_layer_words(&m), W = m.row_words, T = dhs_ls_total_rows(&m);
        std::vector<uint32_t> hist((size_t)(m.n_layers * lw)), bufs((size_t)(m.n_layers * lw)), x((size_t)(T * W));
        dhs_ls_synth_init_host(&mc, hist.data());
        dhs_ls_run_full_cpu(&mc, hist.data(), bufs.data(), x.data());
        const int64_t t0 = m.x_window ? dhs_ls_chunk_start(&m, m.n_chunks - 1) : m.prefix_rows;
        for (int32_t R = 2; R <= 5; R++)
            for (int32_t depth = 0; depth <= 2; depth++) {
                reset(r);
                run_once(r, schedule(m.n_layers, R, m.n_chunks, depth), 0, 7u);
                std::vector<uint32_t> got = snapshot(r);
                if (got.size() != (size_t)(m.n_layers * lw + (T - t0) * W) ||
                    memcmp(got.data(), hist.data(), sizeof(uint32_t) * (size_t)(m.n_layers * lw)) ||
                    memcmp(got.data() + m.n_layers * lw, x.data() + t0 * W, sizeof(uint32_t) * (size_t)((T - t0) * W))) {
                    fprintf(stderr, "MISMATCH: GPU streamed R %d depth %d (prompt %lld, window %d) != CPU full residency\n", R, depth,
                            (long long)dhs_ls_prompt_rows(&m), m.x_window);
                    bad = 1;
                }
            }
        rig_free(r);
    }
    printf("exactness: GPU streamed (R 2..5, depth 0..2, 12 layers, 3 chunks; also a ragged last chunk with chunk-sized activations) vs "
           "CPU full residency: %s\n",
           bad ? "DIFFER" : "identical");
    return bad;
}


/* ------------------------------------------------------------ TTFT mode (--ttft)
 * A prompt of P rows (no prefix) prefilled in chunks, activations sized by the
 * chunk (x_window: the current chunk's rows only) plus an activation workspace,
 * so a prefill's device bytes are min(R, L) x layer + act_row_bytes x chunk
 * (dhs_ls_prefill_bytes). Cases, at each compute work value:
 *   full      : full residency (L buffers) at chunk C; its bytes are the budget
 *   stream C  : R buffers at the same chunk C
 *   stream C' : R buffers at C' = dhs_ls_max_chunk(budget, R): the largest chunk
 *               (a multiple of --multiple, or the whole prompt) in the same budget
 * Per case: the device memory is allocated for that case alone (peak = the
 * bench's allocation accounting, and the drop of cudaMemGetInfo's free bytes
 * across allocation and run); TTFT = the whole prefill, cudaEvents from before
 * the first op to after the last op of all three streams, p50 of reps after a
 * verification run; history = host history of every layer byte-identical to
 * the full-residency case's, and the final activations of the rows both last
 * chunks hold (the last row, which yields the first token, always among them). */
struct ttft_opts {
    int64_t prompt = 65536, chunk = 2048, act_row_bytes = 65536, multiple = 1024;
    int32_t layers = 32, buffers = DHS_LS_DEFAULT_BUFFERS, depth = 1, reps = 5;
    std::vector<int> works = {0, 256, 1024};
};

struct ttft_ref {
    std::vector<uint32_t> hist, x;
    int64_t x_first = 0;
};

/* one prefill timed with cudaEvents: start recorded on the compute stream (the
   other two wait for it), end after all three streams joined */
static double ttft_once(const dhs_ls_synth &m, const std::vector<dhs_ls_event> &ev, uint32_t *h_hist, uint32_t *const *bufs,
                        uint32_t *d_x, void *const *streams)
{
    cudaStream_t sl = (cudaStream_t)streams[0], sc = (cudaStream_t)streams[1], sw = (cudaStream_t)streams[2];
    cudaEvent_t a, b, jl, jw;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventCreateWithFlags(&jl, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&jw, cudaEventDisableTiming));
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(a, sc));
    CK(cudaStreamWaitEvent(sl, a, 0));
    CK(cudaStreamWaitEvent(sw, a, 0));
    CK(dhs_cuda_ls_run(&m, ev.data(), (int64_t)ev.size(), h_hist, bufs, d_x, streams, 7u));
    CK(cudaEventRecord(jl, sl));
    CK(cudaEventRecord(jw, sw));
    CK(cudaStreamWaitEvent(sc, jl, 0));
    CK(cudaStreamWaitEvent(sc, jw, 0));
    CK(cudaEventRecord(b, sc));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaEventDestroy(jl));
    CK(cudaEventDestroy(jw));
    return ms;
}

struct ttft_res {
    double p50_ms, min_ms;
    int64_t acct, measured, h2d;
    int32_t chunks;
    int identical;   /* equal to the full case (for the full case: to the CPU reference when cpu_checked) */
    int cpu_checked; /* full case at work 0: compared with dhs_ls_run_full_cpu over the whole prompt */
};

static ttft_res ttft_case(const ttft_opts &o, int work, int32_t buffers, int64_t chunk, uint32_t *h_hist, void *const *streams,
                          ttft_ref *ref)
{
    dhs_ls_synth m = {o.layers, (int32_t)((o.prompt + chunk - 1) / chunk), 64, work, 0, chunk, o.prompt, 1};
    if (!dhs_ls_synth_ok(&m)) {
        fprintf(stderr, "bad TTFT shape: prompt %lld chunk %lld\n", (long long)o.prompt, (long long)chunk);
        exit(2);
    }
    const int64_t W = m.row_words, lw = dhs_ls_layer_words(&m), layer_bytes = 4 * lw;
    const int32_t nb = buffers < o.layers ? buffers : o.layers;
    std::vector<dhs_ls_event> ev = schedule(o.layers, buffers, m.n_chunks, o.depth);
    ttft_res res = {};
    res.chunks = m.n_chunks;
    for (const dhs_ls_event &e : ev)
        if (e.op == DHS_LS_LOAD) res.h2d += 4 * dhs_ls_chunk_start(&m, e.chunk) * W;
    /* allocate this case's device memory: layer buffers, the chunk's activations x,
       and the rest of the per-row activation workspace (not touched by the synthetic
       compute; it stands for the real model's larger activations) */
    const int64_t x_bytes = 4 * dhs_ls_x_words(&m), ws_bytes = (o.act_row_bytes - 4 * W) * chunk;
    size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
    CK(cudaDeviceSynchronize());
    CK(cudaMemGetInfo(&free0, &total));
    std::vector<uint32_t *> bufs(nb, nullptr);
    for (int32_t i = 0; i < nb; i++) CK(cudaMalloc((void **)&bufs[i], (size_t)layer_bytes));
    uint32_t *d_x = nullptr;
    void *d_ws = nullptr;
    CK(cudaMalloc((void **)&d_x, (size_t)x_bytes));
    if (ws_bytes > 0) {
        CK(cudaMalloc(&d_ws, (size_t)ws_bytes));
        CK(cudaMemset(d_ws, 0, (size_t)ws_bytes));
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemGetInfo(&free1, &total));
    res.acct = (int64_t)nb * layer_bytes + x_bytes + (ws_bytes > 0 ? ws_bytes : 0);
    if (res.acct != dhs_ls_prefill_bytes(layer_bytes, o.layers, buffers, o.act_row_bytes, chunk)) {
        fprintf(stderr, "internal: allocated %lld bytes, dhs_ls_prefill_bytes says %lld\n", (long long)res.acct,
                (long long)dhs_ls_prefill_bytes(layer_bytes, o.layers, buffers, o.act_row_bytes, chunk));
        exit(1);
    }
    /* verification run (also the warm-up): history zeroed, activations poisoned */
    reset_hist(m, h_hist, d_x);
    ttft_once(m, ev, h_hist, bufs.data(), d_x, streams);
    int64_t first = 0;
    std::vector<uint32_t> x = x_result(m, d_x, &first);
    const size_t hist_words = (size_t)(o.layers * lw);
    if (ref->hist.empty()) { /* the full-residency case is the reference */
        ref->hist.assign(h_hist, h_hist + hist_words);
        ref->x = x;
        ref->x_first = first;
        res.identical = 1;
        res.cpu_checked = work == 0; /* at work 0 the whole prompt is cheap on the CPU: check the reference itself */
        if (res.cpu_checked) {
            dhs_ls_synth mc = m;
            mc.x_window = 0;
            const int64_t T = dhs_ls_total_rows(&m);
            std::vector<uint32_t> hist(hist_words), cbufs(hist_words), cx((size_t)(T * W));
            dhs_ls_synth_init_host(&mc, hist.data());
            dhs_ls_run_full_cpu(&mc, hist.data(), cbufs.data(), cx.data());
            res.identical = hist == ref->hist && memcmp(cx.data() + first * W, x.data(), sizeof(uint32_t) * x.size()) == 0;
        }
    } else {
        const int64_t t0 = std::max(first, ref->x_first), T = dhs_ls_total_rows(&m);
        res.identical = memcmp(ref->hist.data(), h_hist, sizeof(uint32_t) * hist_words) == 0 &&
                        memcmp(ref->x.data() + (t0 - ref->x_first) * W, x.data() + (t0 - first) * W,
                               sizeof(uint32_t) * (size_t)((T - t0) * W)) == 0;
    }
    std::vector<double> t;
    for (int i = 0; i < o.reps; i++) t.push_back(ttft_once(m, ev, h_hist, bufs.data(), d_x, streams));
    std::sort(t.begin(), t.end());
    res.p50_ms = t[t.size() / 2];
    res.min_ms = t[0];
    CK(cudaDeviceSynchronize());
    CK(cudaMemGetInfo(&free2, &total));
    res.measured = (int64_t)free0 - (int64_t)std::min(free1, free2);
    for (uint32_t *b : bufs) CK(cudaFree(b));
    CK(cudaFree(d_x));
    if (d_ws) CK(cudaFree(d_ws));
    return res;
}

static int ttft_main(const ttft_opts &o, const char *device, const char *json_path)
{
    const int64_t W = 64, layer_bytes = o.prompt * W * 4;
    if (o.prompt < 1 || o.chunk < 1 || o.chunk > o.prompt || o.act_row_bytes < 4 * W || o.buffers < 2 || o.layers < 2 || o.reps < 1 ||
        o.multiple < 0 || (o.prompt + o.chunk - 1) / o.chunk > INT32_MAX / (4 * o.layers)) {
        fprintf(stderr, "ttft: need 1 <= chunk <= prompt, act-row-bytes >= %lld (the chunk's own activations), buffers >= 2, reps >= 1\n",
                (long long)(4 * W));
        return 2;
    }
    const int64_t budget = dhs_ls_prefill_bytes(layer_bytes, o.layers, o.layers, o.act_row_bytes, o.chunk);
    int64_t c2 = 0;
    dhs_status st = dhs_ls_max_chunk(budget, layer_bytes, o.layers, o.buffers, o.act_row_bytes, o.multiple, o.prompt, &c2);
    if (st != DHS_OK) {
        fprintf(stderr, "ttft: dhs_ls_max_chunk: status %d (the layer buffers and one chunk do not fit the budget)\n", (int)st);
        return 1;
    }
    const double MiB = 1048576.0;
    printf("\nTTFT: prompt %lld rows, no prefix; %d layers x %.1f MiB (%lld-byte rows); activations %lld B per chunk row "
           "(%lld of them the synthetic model's own); R = %d, prefetch depth %d; p50 of %d reps\n",
           (long long)o.prompt, o.layers, layer_bytes / MiB, (long long)(4 * W), (long long)o.act_row_bytes, (long long)(4 * W), o.buffers,
           o.depth, o.reps);
    printf("budget = full residency at chunk %lld = %d x %.1f + %lld x %lld B = %.1f MiB; C' = largest chunk with R = %d in the budget "
           "(multiple of %lld, at most the prompt) = %lld\n",
           (long long)o.chunk, o.layers, layer_bytes / MiB, (long long)o.chunk, (long long)o.act_row_bytes, budget / MiB, o.buffers,
           (long long)o.multiple, (long long)c2);
    printf("\n%5s | %-13s | %7s | %6s | %6s | %9s | %9s | %7s | %9s | %12s | %7s | %s\n", "work", "case", "buffers", "chunk", "chunks",
           "TTFT ms", "min ms", "vs full", "peak MiB", "measured MiB", "H2D GiB", "history");
    FILE *jf = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !jf) fprintf(stderr, "ttft: cannot write %s\n", json_path);
    uint32_t *h_hist = nullptr;
    CK(cudaMallocHost((void **)&h_hist, sizeof(uint32_t) * (size_t)(o.layers * o.prompt * W)));
    void *streams[3];
    for (int i = 0; i < 3; i++) {
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        streams[i] = s;
    }
    int bad = 0;
    for (int work : o.works) {
        ttft_ref ref;
        const struct {
            const char *name, *key;
            int32_t buffers;
            int64_t chunk;
        } cases[3] = {{"full", "full", o.layers, o.chunk}, {"stream same C", "stream_same_chunk", o.buffers, o.chunk},
                      {"stream C'", "stream_larger_chunk", o.buffers, c2}};
        double full_ms = 0;
        for (int ci = 0; ci < 3; ci++) {
            ttft_res r = ttft_case(o, work, cases[ci].buffers, cases[ci].chunk, h_hist, streams, &ref);
            if (ci == 0) full_ms = r.p50_ms;
            const int fits = r.acct <= budget;
            bad |= !r.identical || !fits;
            printf("%5d | %-13s | %7d | %6lld | %6d | %9.2f | %9.2f | %7.3f | %9.1f | %12.1f | %7.2f | %s%s\n", work, cases[ci].name,
                   cases[ci].buffers, (long long)cases[ci].chunk, r.chunks, r.p50_ms, r.min_ms, r.p50_ms / full_ms, r.acct / MiB,
                   r.measured / MiB, r.h2d / (MiB * 1024.0),
                   !r.identical ? "DIFFER" : ci > 0 ? "identical" : r.cpu_checked ? "reference (= CPU)" : "reference",
                   fits ? "" : " OVER BUDGET");
            char js[1024];
            snprintf(js, sizeof js,
                     "{\"bench\":\"lstream_ttft\",\"device\":\"%s\",\"case\":\"%s\",\"work\":%d,\"prompt_rows\":%lld,\"layers\":%d,"
                     "\"buffers\":%d,\"chunk_rows\":%lld,\"chunks\":%d,\"ttft_ms\":%.3f,\"ttft_min_ms\":%.3f,\"ttft_vs_full\":%.4f,"
                     "\"peak_bytes\":%lld,\"peak_measured_bytes\":%lld,\"budget_bytes\":%lld,\"layer_bytes\":%lld,\"act_row_bytes\":%lld,"
                     "\"h2d_bytes\":%lld,\"reps\":%d,\"identical\":%s,\"cpu_checked\":%s}",
                     device, cases[ci].key, work, (long long)o.prompt, o.layers, cases[ci].buffers, (long long)cases[ci].chunk, r.chunks,
                     r.p50_ms, r.min_ms, r.p50_ms / full_ms, (long long)r.acct, (long long)r.measured, (long long)budget,
                     (long long)layer_bytes, (long long)o.act_row_bytes, (long long)r.h2d, o.reps, r.identical ? "true" : "false",
                     r.cpu_checked ? "true" : "false");
            printf("JSON %s\n", js);
            if (jf) fprintf(jf, "%s\n", js);
            fflush(stdout); /* a run cut short by a timeout still shows its finished cases */
        }
    }
    if (jf) fclose(jf);
    printf("\ncase: full = every layer resident (L buffers) at chunk C, its peak is the budget; stream same C = R buffers at C;\n"
           "stream C' = R buffers at the largest chunk the same budget allows (dhs_ls_max_chunk). TTFT = prefill of the whole\n"
           "prompt (cudaEvents, p50; min = fastest rep); vs full = TTFT / full's TTFT at the same work. peak MiB = the case's\n"
           "device allocations (buffers x layer + act-row-bytes x chunk); measured = drop of cudaMemGetInfo free bytes over\n"
           "allocation and run. H2D = history bytes loaded (full residency loads nothing with no prefix). history: host history\n"
           "of every layer and the last rows' final activations byte-identical to the full case's; at work 0 the full case\n"
           "itself equals the CPU full-residency reference over the whole prompt (= CPU).\n");
    for (int i = 0; i < 3; i++) CK(cudaStreamDestroy((cudaStream_t)streams[i]));
    CK(cudaFreeHost(h_hist));
    if (bad) fprintf(stderr, "MISMATCH: a streamed prefill differs from full residency (or exceeds the budget)\n");
    return bad;
}

static int parse_works(const char *s, std::vector<int> &out)
{
    out.clear();
    while (*s) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 1 << 20) return 0;
        out.push_back((int)v);
        s = end;
        if (*s == ',') s++;
        else if (*s) return 0;
    }
    return !out.empty();
}

int main(int argc, char **argv)
{
    int quick = 0, ttft = 0;
    const char *json_path = NULL;
    ttft_opts to;
    int64_t prompt = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) quick = 1;
        else if (!strcmp(a, "--ttft")) ttft = 1;
        else if (!strcmp(a, "--json") && v) json_path = argv[++i];
        else if (!strcmp(a, "--prompt") && v) prompt = atoll(argv[++i]);
        else if (!strcmp(a, "--chunk") && v) to.chunk = atoll(argv[++i]);
        else if (!strcmp(a, "--act-row-bytes") && v) to.act_row_bytes = atoll(argv[++i]);
        else if (!strcmp(a, "--multiple") && v) to.multiple = atoll(argv[++i]);
        else if (!strcmp(a, "--buffers") && v) to.buffers = atoi(argv[++i]);
        else if (!strcmp(a, "--layers") && v) to.layers = atoi(argv[++i]);
        else if (!strcmp(a, "--depth") && v) to.depth = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && v) to.reps = atoi(argv[++i]);
        else if (!strcmp(a, "--works") && v && parse_works(argv[i + 1], to.works)) i++;
        else {
            fprintf(stderr,
                    "usage: %s [--quick] [--json FILE]\n"
                    "       %s --ttft [--quick] [--prompt ROWS] [--chunk ROWS] [--act-row-bytes B] [--multiple ROWS] [--buffers R]\n"
                    "          [--layers L] [--depth D] [--reps N] [--works W,W,...] [--json FILE]\n",
                    argv[0], argv[0]);
            return 2;
        }
    }
    if (ttft) {
        to.prompt = prompt > 0 ? prompt : quick ? 16384 : 65536;
        if (quick) to.reps = 3;
        if (to.depth < 0) {
            fprintf(stderr, "ttft: depth >= 0\n");
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
    if (ttft) return ttft_main(to, prop.name, json_path);

    /* 32 layers, 256-byte rows, 48K-row prefix + 2 chunks of 16K rows: 20 MiB per layer */
    const int32_t L = 32, R = DHS_LS_DEFAULT_BUFFERS, C = 2, depth = 1;
    dhs_ls_synth m = {L, C, 64, 0, quick ? 24576 : 49152, quick ? 8192 : 16384, 0, 0};
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
