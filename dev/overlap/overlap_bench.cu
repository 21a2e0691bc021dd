/* overlap_bench.cu - hit attention overlapped with the miss copy
 * (dev/overlap/overlap.cu, docs/FLASHOFFLOAD.md §3) against copy-then-attend,
 * on the same inputs in one run.
 *
 * Configurations: batch 1, 8, 64 x misses per request 32, 300, 2048; k = 2048
 * entries per request, the model's 656-byte rows, 16 heads (--heads), fast
 * mode's chunk 256 (--chunk). Hits: rows of a device pool at random places;
 * misses: rows at random places of a pinned, mapped host span (default 4 GiB,
 * halved until it allocates), copied by the library's zero-copy gather
 * (gather.cu, grid capped at 4 blocks per SM like the CUDA backend) into
 * per-miss staging rows of the pool; misses sit at random entry positions.
 *
 * Variants (cudaEvents around the work, p50 of --reps repetitions, L2 flushed
 * before each repetition unless --no-flush):
 *   copy      the gather alone
 *   attn      whole attention alone (all rows on the device): scores + exact reduction
 *   attnX     exact mode without a copy (phase A + phase B back to back)
 *   attnF     fast mode without a copy
 *   pA_x      exact's phase A alone (the hits' scores): the work that can hide the copy
 *   pA_f      fast's phase A alone (the hits' scores and partials)
 *   serial    copy, then whole attention on the same stream (copy-then-attend)
 *   exact     copy on a second stream (higher priority) while phase A runs;
 *             event join; phase B (DHS_OV_EXACT)
 *   fast      the same with DHS_OV_FAST
 * Derived: hidden = (serial - overlapped) / copy (fraction of the copy time
 * hidden), gain = serial / overlapped; roof = batch * k * 656 B / D2D copy
 * bandwidth (read + write bytes / time, measured in this run): the time to
 * read the rows once; attn / roof says how far the (non-FMA, fixed-order)
 * attention kernels are from that floor.
 * Checks per configuration: exact's output == serial's, byte for byte; fast
 * within the documented bound (dhs_ov_fast_tol(k) * vmax); else exit 1.
 *
 * Usage: overlap_bench [--quick] [--json FILE] [--reps N] [--heads H] [--chunk C] [--span-gib G] [--no-flush]
 *   --json FILE: one JSON object per configuration per line. */
#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include <cuda_runtime.h>

extern "C" {
#include "core/backend.h"
#include "cuda/gather.cuh"
#include "dev/overlap/overlap.cuh"
#include "model/model.h"
#include "util/rng.h"
}

#include "bench_cuda.h"

#define K 2048
#define NTAB 4096 /* distinct row contents, copied around */

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void) { return dhs_rng_next(&g_rng); }

typedef struct world {
    cudaStream_t s_main, s_copy;
    cudaEvent_t e0, e1, ev_fork, ev_copy;
    float *lut;
    uint8_t *span; /* pinned mapped host span */
    size_t span_rows;
    uint8_t *flush;
    size_t flush_bytes;
    int flush_on, sms;
    uint8_t tab[NTAB][DHS_OV_ROW]; /* encoded random rows */
    float vmax;                    /* max |latent| over tab */
} world;

typedef struct cfg_bufs {
    dhs_ov_shape s;
    int64_t n_miss;
    uint8_t *pool;
    const uint8_t **base;
    float *q, *scores, *pm, *pl, *pacc, *out;
    int32_t *loc;
    uint8_t *miss;
    dhs_copy_pair *pairs;
    dhs_ov_args a;
} cfg_bufs;

static void setup_cfg(world *w, cfg_bufs *c, int32_t B, int32_t M, int32_t nh, int32_t chunk)
{
    memset(c, 0, sizeof *c);
    c->s = (dhs_ov_shape){B, nh, K, chunk, 1.0f / sqrtf((float)DHS_REF_LAT), 1};
    c->n_miss = (int64_t)B * M;
    const int64_t hit_rows = 2 * (int64_t)B * K, pool_rows = c->n_miss + hit_rows;
    const size_t pool_bytes = (size_t)pool_rows * DHS_OV_ROW;
    /* device pool: staging [0, n_miss), hit region after it; contents from the table */
    std::vector<uint8_t> h((size_t)pool_bytes);
    for (int64_t r = 0; r < pool_rows; r++) memcpy(&h[(size_t)r * DHS_OV_ROW], w->tab[rnd() % NTAB], DHS_OV_ROW);
    CK(cudaMalloc((void **)&c->pool, pool_bytes));
    CK(cudaMemcpy(c->pool, h.data(), pool_bytes, cudaMemcpyHostToDevice));
    /* entries: M random positions of each request are misses */
    std::vector<int32_t> loc((size_t)B * K);
    std::vector<uint8_t> miss((size_t)B * K);
    std::vector<dhs_copy_pair> pairs((size_t)c->n_miss + 1, dhs_copy_pair{NULL, NULL});
    int64_t stage = 0;
    for (int32_t q = 0; q < B; q++) {
        std::vector<int32_t> perm(K);
        for (int e = 0; e < K; e++) perm[e] = e;
        for (int e = K - 1; e > 0; e--) std::swap(perm[e], perm[rnd() % (uint64_t)(e + 1)]);
        for (int e = 0; e < K; e++) {
            const int32_t ent = perm[e];
            const size_t i = (size_t)q * K + ent;
            if (e < M) { /* a miss: a random host row -> its staging row */
                miss[i] = 1;
                loc[i] = (int32_t)stage;
                uint8_t *src = w->span + (size_t)(rnd() % w->span_rows) * DHS_OV_ROW;
                memcpy(src, w->tab[rnd() % NTAB], DHS_OV_ROW);
                pairs[stage].src = src;
                pairs[stage].dst = c->pool + (size_t)stage * DHS_OV_ROW;
                stage++;
            } else {
                miss[i] = 0;
                loc[i] = (int32_t)(c->n_miss + (int64_t)(rnd() % (uint64_t)hit_rows));
            }
        }
    }
    std::vector<const uint8_t *> base(B, c->pool);
    std::vector<float> q((size_t)B * nh * DHS_OV_LAT);
    for (auto &v : q) v = (dhs_rng_f24(&g_rng) * 2.0f - 1.0f) * 0.5f;
    CK(cudaMalloc((void **)&c->base, sizeof(void *) * B));
    CK(cudaMalloc((void **)&c->q, sizeof(float) * q.size()));
    CK(cudaMalloc((void **)&c->loc, sizeof(int32_t) * loc.size()));
    CK(cudaMalloc((void **)&c->miss, miss.size()));
    CK(cudaMalloc((void **)&c->pairs, sizeof(dhs_copy_pair) * pairs.size()));
    CK(cudaMalloc((void **)&c->scores, sizeof(float) * (size_t)dhs_ov_scores_len(&c->s)));
    CK(cudaMalloc((void **)&c->pm, sizeof(float) * (size_t)dhs_ov_pml_len(&c->s)));
    CK(cudaMalloc((void **)&c->pl, sizeof(float) * (size_t)dhs_ov_pml_len(&c->s)));
    CK(cudaMalloc((void **)&c->pacc, sizeof(float) * (size_t)dhs_ov_pacc_len(&c->s)));
    CK(cudaMalloc((void **)&c->out, sizeof(float) * (size_t)B * nh * DHS_OV_DV));
    CK(cudaMemcpy(c->base, base.data(), sizeof(void *) * B, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c->q, q.data(), sizeof(float) * q.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c->loc, loc.data(), sizeof(int32_t) * loc.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c->miss, miss.data(), miss.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c->pairs, pairs.data(), sizeof(dhs_copy_pair) * pairs.size(), cudaMemcpyHostToDevice));
    c->a = (dhs_ov_args){c->q, c->base, c->loc, c->miss, w->lut, c->scores, c->pm, c->pl, c->pacc, c->out};
}

static void free_cfg(cfg_bufs *c)
{
    CK(cudaFree(c->pool));
    CK(cudaFree((void *)c->base));
    CK(cudaFree(c->q));
    CK(cudaFree(c->loc));
    CK(cudaFree(c->miss));
    CK(cudaFree(c->pairs));
    CK(cudaFree(c->scores));
    CK(cudaFree(c->pm));
    CK(cudaFree(c->pl));
    CK(cudaFree(c->pacc));
    CK(cudaFree(c->out));
}

enum { V_COPY, V_ATTN, V_ATTNX, V_ATTNF, V_PAX, V_PAF, V_SERIAL, V_EXACT, V_FAST, V_N };
static const char *const vname[V_N] = {"copy", "attn", "attnX", "attnF", "phaseA_exact", "phaseA_fast", "serial", "exact", "fast"};

static void gather(world *w, cfg_bufs *c, cudaStream_t st)
{
    CK(dhs_cuda_gather_launch(c->pairs, c->n_miss, DHS_OV_ROW, dhs_cuda_gather_grid(c->n_miss, 4 * w->sms), st));
}

static void enqueue(world *w, cfg_bufs *c, int v)
{
    switch (v) {
    case V_COPY: gather(w, c, w->s_main); break;
    case V_ATTN: CK(dhs_cuda_ov_attend(&c->s, DHS_OV_WHOLE, &c->a, NULL, w->s_main)); break;
    case V_ATTNX: CK(dhs_cuda_ov_attend(&c->s, DHS_OV_EXACT, &c->a, NULL, w->s_main)); break;
    case V_ATTNF: CK(dhs_cuda_ov_attend(&c->s, DHS_OV_FAST, &c->a, NULL, w->s_main)); break;
    case V_PAX: CK(dhs_cuda_ov_scores(&c->s, DHS_OV_HITS, &c->a, w->s_main)); break;
    case V_PAF:
        CK(dhs_cuda_ov_scores(&c->s, DHS_OV_HITS, &c->a, w->s_main));
        CK(dhs_cuda_ov_partial(&c->s, DHS_OV_HITS, &c->a, w->s_main));
        break;
    case V_SERIAL:
        gather(w, c, w->s_main);
        CK(dhs_cuda_ov_attend(&c->s, DHS_OV_WHOLE, &c->a, NULL, w->s_main));
        break;
    default: /* exact / fast: fork the copy, join before phase B */
        CK(cudaEventRecord(w->ev_fork, w->s_main));
        CK(cudaStreamWaitEvent(w->s_copy, w->ev_fork, 0));
        gather(w, c, w->s_copy);
        CK(cudaEventRecord(w->ev_copy, w->s_copy));
        CK(dhs_cuda_ov_attend(&c->s, v == V_EXACT ? DHS_OV_EXACT : DHS_OV_FAST, &c->a, w->ev_copy, w->s_main));
    }
}

static double time_p50(world *w, cfg_bufs *c, int v, int reps)
{
    std::vector<double> t;
    for (int i = 0; i < reps + 2; i++) {
        if (w->flush_on) CK(cudaMemsetAsync(w->flush, i & 255, w->flush_bytes, w->s_main));
        CK(cudaEventRecord(w->e0, w->s_main));
        enqueue(w, c, v);
        CK(cudaEventRecord(w->e1, w->s_main));
        CK(cudaEventSynchronize(w->e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, w->e0, w->e1));
        if (i >= 2) t.push_back(ms * 1e3);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static void out_of(world *w, cfg_bufs *c, std::vector<float> &o)
{
    CK(cudaStreamSynchronize(w->s_main));
    CK(cudaStreamSynchronize(w->s_copy));
    o.resize((size_t)c->s.nq * c->s.nh * DHS_OV_DV);
    CK(cudaMemcpy(o.data(), c->out, sizeof(float) * o.size(), cudaMemcpyDeviceToHost));
}

int main(int argc, char **argv)
{
    int quick = 0, reps = 0, nh = 16, chunk = 256, flush_on = 1;
    double span_gib = 4;
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && i + 1 < argc) nh = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) chunk = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--span-gib") && i + 1 < argc) span_gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-flush")) flush_on = 0;
        else {
            fprintf(stderr, "usage: %s [--quick] [--json FILE] [--reps N] [--heads H] [--chunk C] [--span-gib G] [--no-flush]\n",
                    argv[0]);
            return 2;
        }
    }
    if (nh < 1 || nh > DHS_OV_MAX_HEADS || chunk < 1 || chunk > K) {
        fprintf(stderr, "heads 1..%d, chunk 1..%d\n", DHS_OV_MAX_HEADS, K);
        return 2;
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    static world w;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    w.sms = prop.multiProcessorCount;
    w.flush_on = flush_on;
    int lo, hi;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CK(cudaStreamCreateWithPriority(&w.s_main, cudaStreamNonBlocking, lo));
    CK(cudaStreamCreateWithPriority(&w.s_copy, cudaStreamNonBlocking, hi)); /* the copy's blocks go first */
    CK(cudaEventCreate(&w.e0));
    CK(cudaEventCreate(&w.e1));
    CK(cudaEventCreateWithFlags(&w.ev_fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&w.ev_copy, cudaEventDisableTiming));
    CK(dhs_cuda_ov_init());
    CK(cudaMalloc((void **)&w.lut, 256 * sizeof(float)));
    CK(cudaMemcpy(w.lut, dhs_ref_fp8_table(), 256 * sizeof(float), cudaMemcpyHostToDevice));
    w.flush_bytes = (size_t)prop.l2CacheSize * 4;
    CK(cudaMalloc((void **)&w.flush, w.flush_bytes));
    for (double g = span_gib; g >= 0.25 && !w.span; g /= 2) {
        size_t bytes = (size_t)(g * (1ull << 30));
        if (cudaHostAlloc((void **)&w.span, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
            (void)cudaGetLastError();
            w.span = NULL;
        } else {
            w.span_rows = bytes / DHS_OV_ROW;
            span_gib = g;
        }
    }
    if (!w.span) {
        fprintf(stderr, "cannot allocate the pinned host span\n");
        return 1;
    }
    float lat[DHS_OV_LAT], dl[DHS_OV_LAT];
    for (int r = 0; r < NTAB; r++) {
        for (int i = 0; i < DHS_OV_LAT; i++) lat[i] = dhs_rng_f24(&g_rng) * 2.0f - 1.0f;
        dhs_ref_row_encode(lat, w.tab[r]);
        dhs_ref_row_decode(w.tab[r], dl);
        for (int i = 0; i < DHS_OV_DV; i++) w.vmax = fmaxf(w.vmax, fabsf(dl[i]));
    }
    const double bw = bench_d2d_gbs(w.s_main);
    if (!reps) reps = quick ? 7 : 31;
    printf("device: %s, %d SMs; copy bandwidth (D2D, read+write) %.0f GB/s; pinned span %.2f GiB\n", prop.name, w.sms,
           bw, span_gib);
    printf("k %d, %d-B rows, %d heads, fast chunk %d, p50 of %d reps (us), L2 %s before each rep\n", K, DHS_OV_ROW, nh,
           chunk, reps, flush_on ? "flushed" : "not flushed");
    printf("%5s %5s | %8s %8s %8s %8s %8s %8s | %8s %8s %8s | %6s %6s | %5s %5s | %6s %5s | %6s %8s\n", "batch", "miss",
           "copy", "attn", "attnX", "attnF", "pA_x", "pA_f", "serial", "exact", "fast", "hid_x", "hid_f", "gn_x", "gn_f",
           "roof", "a/rf", "GB/s", "fast_err");
    FILE *jf = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !jf) {
        perror(json_path);
        return 1;
    }
    const int32_t batches[] = {1, 8, 64}, misses[] = {32, 300, 2048};
    int bad = 0;
    for (int32_t B : batches)
        for (int32_t M : misses) {
            if (quick && B == 64 && M == 2048) continue;
            cfg_bufs c;
            setup_cfg(&w, &c, B, M, nh, chunk);
            double t[V_N];
            for (int v = 0; v < V_N; v++) t[v] = time_p50(&w, &c, v, reps);
            /* exactness: serial vs exact byte for byte, fast within the bound */
            std::vector<float> os, ox, of;
            enqueue(&w, &c, V_SERIAL);
            out_of(&w, &c, os);
            CK(cudaMemset(c.out, 0xff, sizeof(float) * os.size()));
            enqueue(&w, &c, V_EXACT);
            out_of(&w, &c, ox);
            CK(cudaMemset(c.out, 0xff, sizeof(float) * os.size()));
            enqueue(&w, &c, V_FAST);
            out_of(&w, &c, of);
            int same = memcmp(os.data(), ox.data(), sizeof(float) * os.size()) == 0;
            double err = 0;
            for (size_t i = 0; i < os.size(); i++) {
                double d = fabs((double)of[i] - (double)os[i]);
                if (!(d == d)) d = INFINITY;
                err = std::max(err, d / w.vmax);
            }
            int fast_ok = err <= dhs_ov_fast_tol(K);
            if (!same) printf("MISMATCH: batch %d misses %d: exact overlapped != copy-then-attend\n", B, M);
            if (!fast_ok) printf("MISMATCH: batch %d misses %d: fast error %.3g beyond the bound %.3g\n", B, M, err,
                                 dhs_ov_fast_tol(K));
            bad |= !same || !fast_ok;
            const double roof = (double)B * K * DHS_OV_ROW / (bw * 1e3); /* us */
            const double hx = (t[V_SERIAL] - t[V_EXACT]) / t[V_COPY], hf = (t[V_SERIAL] - t[V_FAST]) / t[V_COPY];
            const double gx = t[V_SERIAL] / t[V_EXACT], gf = t[V_SERIAL] / t[V_FAST];
            const double gbs = (double)c.n_miss * DHS_OV_ROW / (t[V_COPY] * 1e3);
            printf("%5d %5d | %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f | %8.1f %8.1f %8.1f | %6.2f %6.2f | %5.2f %5.2f | %6.1f "
                   "%5.1f | %6.1f %8.2g\n",
                   B, M, t[V_COPY], t[V_ATTN], t[V_ATTNX], t[V_ATTNF], t[V_PAX], t[V_PAF], t[V_SERIAL], t[V_EXACT],
                   t[V_FAST], hx, hf, gx, gf, roof, t[V_ATTN] / roof, gbs, err);
            fflush(stdout);
            if (jf) {
                fprintf(jf,
                        "{\"bench\":\"overlap\",\"device\":\"%s\",\"batch\":%d,\"misses\":%d,\"k\":%d,\"row_bytes\":%d,"
                        "\"heads\":%d,\"chunk\":%d,\"reps\":%d,\"l2_flush\":%d,\"d2d_gbs\":%.1f",
                        prop.name, B, M, K, DHS_OV_ROW, nh, chunk, reps, flush_on, bw);
                for (int v = 0; v < V_N; v++) fprintf(jf, ",\"%s_us\":%.2f", vname[v], t[v]);
                fprintf(jf,
                        ",\"hidden_exact\":%.4f,\"hidden_fast\":%.4f,\"gain_exact\":%.4f,\"gain_fast\":%.4f,"
                        "\"roofline_us\":%.2f,\"attn_over_roofline\":%.3f,\"copy_gbs\":%.2f,\"exact_identical\":%s,"
                        "\"fast_err_over_vmax\":%.3g,\"fast_bound\":%.3g}\n",
                        hx, hf, gx, gf, roof, t[V_ATTN] / roof, gbs, same ? "true" : "false", err, dhs_ov_fast_tol(K));
                fflush(jf);
            }
            free_cfg(&c);
        }
    printf("copy/attn/attnX/attnF/pA_x/pA_f/serial/exact/fast: p50 us; hid_x/hid_f = (serial - overlapped) / copy; gn = serial / "
           "overlapped;\nroof = batch*k*656 B at the D2D bandwidth (us), a/rf = attn / roof; GB/s = the copy alone; "
           "fast_err = max |fast - exact| / vmax (bound %.3g)\n",
           dhs_ov_fast_tol(K));
    if (jf) fclose(jf);
    CK(cudaFreeHost(w.span));
    CK(cudaFree(w.flush));
    CK(cudaFree(w.lut));
    printf("%s\n", bad ? "FAILED: a check did not hold" : "checks: exact == serial byte for byte, fast within the bound: ok");
    return bad;
}
