/* mla_bench.cu - the multi-head sparse MLA decode attention (model/mla_mh.cu,
 * tensor cores) against its roofline, in one process.
 *
 * For each (context, C, heads): C queries of one session each, k = 2048
 * located FP8 rows (656 bytes) per query at random positions of the session's
 * own context, bf16 queries of all heads (64: GLM-5.3, 128: DeepSeek-V3.2).
 *   time    p50 of one call (kernel + combine) between two CUDA events; the
 *           mean of a back-to-back stream; and per layer of 78 calls (a
 *           GLM-5.3 step's layers) captured in one CUDA graph and replayed
 *   floor   max(bytes / HBM, FLOPs / tensor peak), both measured here:
 *           bytes = C x 2048 x 656 (every row once) + the queries read
 *           (C x heads x 576 x 2) + the outputs written (C x heads x 512 x 4);
 *           HBM = a 1 GiB device-to-device copy (read + write bytes per
 *           second); FLOPs = C x 2048 x heads x 2 x (576 + 512); the tensor
 *           peak = the kernel's own instruction (mma.sync m16n8k16 bf16, f32
 *           accumulation) issued back to back by every SM, independent
 *           chains; the stated dense BF16 figure of the part is printed beside
 *           it (the H200's / H100's 989 TFLOP/s is reached only by wgmma)
 *   ratio   time / floor
 * Each call reads another "layer" (its own rows and selection), so that the
 * reps do not find the rows in L2: pools of >= 192 MB in all.
 * Before timing, queries 0 and C - 1 of the first layer are compared with the
 * CPU specification (dhs_mla_mh_ref) within 8e-3 x max |V|: exit 1 otherwise.
 *
 * Usage: mla_bench [--contexts N,N] [--batch C,C] [--heads H,H] [--splits S] [--reps R] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "bench_cuda.h"
#include "model/bench_kern.cuh"
#include "model/mla_mh.cuh"
#include "model/mla_mh.h"
#include "model/model.h"

#define STEP_LAYERS 78    /* glm-5.3 */
#define STATED_PEAK 989e12 /* H100 / H200 SXM dense BF16, stated */
#define K 2048
#define NVAR 5 /* kernel variants timed side by side (dhs_mla_mh_attend_kernel): VARS */
static const int VARS[NVAR] = {0, 1, 2, 3, 5};
#define NPLAN 3 /* and with dhs_mla_mh_plan's clusters: PLANV */
static const int PLANV[NPLAN] = {0, 3, 5};

/* random bf16 values in [-1, 1) */
static __global__ void k_fill_bf16(uint16_t *x, int64_t n, uint64_t seed)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
        const float v = (float)(int64_t)(hmix(seed + (uint64_t)j) % 2001) * 1e-3f - 1.0f;
        x[j] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
}

/* every warp: 8 independent chains of mma.sync m16n8k16, iters steps each */
static __global__ void k_mma_peak(float *out, int iters)
{
    uint32_t a[4] = {threadIdx.x, threadIdx.x * 3u, threadIdx.x * 5u, threadIdx.x * 7u};
    const uint32_t b0 = 0x3f803f80u ^ threadIdx.x, b1 = 0x3f803f80u;
    float acc[8][4];
    for (int j = 0; j < 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int i = 0; i < iters; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) mh_mma(acc[j], a, b0, b1);
    float s = 0.0f;
    for (int j = 0; j < 8; j++) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
    if (s == 1.2345f) out[0] = s; /* keeps the chains */
}

static double mma_peak(int n_sm, cudaStream_t st)
{
    float *out;
    CK(cudaMalloc((void **)&out, 4));
    const int blocks = n_sm * 4, iters = 4096;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int r = 0; r < 6; r++) {
        CK(cudaEventRecord(e0, st));
        k_mma_peak<<<blocks, 256, 0, st>>>(out, iters);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0 && ms < best) best = ms;
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(out));
    return (double)blocks * 8 * iters * 8 * 4096.0 / (best * 1e-3);
}

typedef struct mh_state {
    dhs_mla_mh_desc d;
    int NS;      /* layers the calls rotate over */
    int variant; /* dhs_mla_mh_attend_kernel's */
    uint16_t *q;
    const uint8_t **base; /* device [NS][C] */
    int32_t *loc, *nv;
    float *part, *out;
    cudaStream_t st;
} mh_state;

static void mh_call(void *arg, int r)
{
    mh_state *s = (mh_state *)arg;
    const int l = r % s->NS, C = s->d.nq;
    dhs_status e = dhs_mla_mh_attend_kernel(&s->d, s->variant, s->q + (size_t)l * C * s->d.n_heads * DHS_MLA_DQK, s->base + (size_t)l * C,
                                     s->loc + (size_t)l * C * K, s->nv, s->part, s->out, s->st);
    if (e != DHS_OK) {
        fprintf(stderr, "mla_bench: dhs_mla_mh_attend: %d\n", (int)e);
        exit(1);
    }
}

/* the worst graph / floor by variant (VARS; then dhs_mla_mh_plan's with clusters: PLANV) at C < 8 and at C >= 8 */
static double worst_lo[NVAR + NPLAN], worst_hi[NVAR + NPLAN];
static double worst_err;

/* query qi of layer 0 against the CPU specification */
static void check_query(const mh_state *s, int qi, const uint8_t *const *hbase)
{
    const int H = s->d.n_heads;
    int32_t *hloc = (int32_t *)malloc(sizeof(int32_t) * K), *idx = (int32_t *)malloc(sizeof(int32_t) * K);
    uint8_t *rows = (uint8_t *)malloc((size_t)K * DHS_MLA_ROW_BYTES);
    uint16_t *hq = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)H * DHS_MLA_DQK);
    float *ref = (float *)malloc(sizeof(float) * (size_t)H * DHS_MLA_DV), *got = (float *)malloc(sizeof(float) * (size_t)H * DHS_MLA_DV);
    CK(cudaMemcpy(hloc, s->loc + (size_t)qi * K, sizeof(int32_t) * K, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hq, s->q + (size_t)qi * H * DHS_MLA_DQK, sizeof(uint16_t) * (size_t)H * DHS_MLA_DQK, cudaMemcpyDeviceToHost));
    for (int i = 0; i < K; i++) {
        CK(cudaMemcpy(rows + (size_t)i * DHS_MLA_ROW_BYTES, hbase[qi] + (int64_t)hloc[i] * DHS_MLA_ROW_BYTES,
                      DHS_MLA_ROW_BYTES, cudaMemcpyDeviceToHost));
        idx[i] = i;
    }
    CK(cudaMemcpy(got, s->out + (size_t)qi * H * DHS_MLA_DV, sizeof(float) * (size_t)H * DHS_MLA_DV, cudaMemcpyDeviceToHost));
    dhs_mla_mh_desc d1 = s->d;
    d1.nq = 1;
    const uint8_t *b1 = rows;
    const int32_t nv1 = K;
    if (dhs_mla_mh_ref(&d1, hq, &b1, idx, &nv1, ref) != DHS_OK) {
        fprintf(stderr, "mla_bench: dhs_mla_mh_ref failed\n");
        exit(1);
    }
    float vmax = 0.0f, lat[DHS_REF_LAT];
    for (int i = 0; i < K; i++) {
        dhs_ref_row_decode(rows + (size_t)i * DHS_MLA_ROW_BYTES, lat);
        for (int j = 0; j < DHS_MLA_DV; j++)
            if (fabsf(lat[j]) > vmax) vmax = fabsf(lat[j]);
    }
    for (int j = 0; j < H * DHS_MLA_DV; j++) {
        const double e = fabs((double)got[j] - ref[j]) / vmax;
        if (!(e <= 8e-3)) {
            fprintf(stderr, "mla_bench: query %d head %d value %d: GPU %a, specification %a (vmax %g)\n", qi,
                    j / DHS_MLA_DV, j % DHS_MLA_DV, (double)got[j], (double)ref[j], (double)vmax);
            exit(1);
        }
        if (e > worst_err) worst_err = e;
    }
    free(hloc), free(idx), free(rows), free(hq), free(ref), free(got);
}

static long n_same, n_diff; /* output sets bit-equal to variant 0's, and not */

/* the outputs of layer 0 (called again: the graph ends with layer 77) copied into got; with want, compared
   bit for bit: variants 3 and 5 must give variant 0's bits, and so must the plan with every variant
   (exit 1 otherwise) */
static void same_bits(const mh_state *s, float *got, const float *want, const char *name)
{
    const int C = s->d.nq, H = s->d.n_heads;
    const size_t n = (size_t)C * H * DHS_MLA_DV;
    mh_call((void *)s, 0); /* layer 0 again: the graph left another layer's outputs */
    CK(cudaStreamSynchronize(s->st));
    CK(cudaMemcpy(got, s->out, sizeof(float) * n, cudaMemcpyDeviceToHost));
    if (!want || got == want) return;
    if (memcmp(got, want, sizeof(float) * n) == 0) {
        n_same++;
        return;
    }
    n_diff++;
    if (s->variant == 3 || s->variant == 5 || strstr(name, "plan")) {
        size_t i = 0;
        while (i < n && memcmp(got + i, want + i, 4) == 0) i++;
        fprintf(stderr, "mla_bench: %s: output %zu (query %zu head %zu value %zu) %a, variant 0's %a\n", name, i,
                i / ((size_t)H * DHS_MLA_DV), i / DHS_MLA_DV % H, i % DHS_MLA_DV, (double)got[i], (double)want[i]);
        exit(1);
    }
}

static int ablate, sweep; /* --ablate, --sweep */
static int32_t cl_fit[DHS_MLA_MAX_CLUSTER + 1]; /* dhs_mla_mh_cluster_fit */

static double hbm, peak; /* GB/s and FLOP/s, measured once in main */

/* one timed configuration: checked against the spec, p50 / b2b / graph against its floor; prints its line
   (with base_graph > 0 the ratio to variant 0's graph time); slot >= 0: the worst graph / floor to update
   (worst_lo / worst_hi[slot]); returns the graph time in us */
static double time_config(mh_state *s, const char *name, int64_t ctx, const uint8_t *const *hbase, int reps,
                          double base_graph, int slot)
{
    const int C = s->d.nq, H = s->d.n_heads;
    const double bytes = (double)C * K * DHS_MLA_ROW_BYTES + (double)C * H * (DHS_MLA_DQK * 2 + DHS_MLA_DV * 4);
    const double flops = (double)C * K * H * 2.0 * (DHS_MLA_DQK + DHS_MLA_DV);
    const double fb = bytes / (hbm * 1e9) * 1e6, ff = flops / peak * 1e6, fl = fb > ff ? fb : ff;
    mh_call(s, 0);
    CK(cudaStreamSynchronize(s->st));
    check_query(s, 0, hbase);
    if (C > 1) check_query(s, C - 1, hbase);
    double p50, b2b;
    time_calls(mh_call, s, reps, s->st, &p50, &b2b);
    cudaGraph_t gr; /* 78 layers in one graph */
    CK(cudaStreamBeginCapture(s->st, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < STEP_LAYERS; l++) mh_call(s, l);
    CK(cudaStreamEndCapture(s->st, &gr));
    const double graph = graph_replay_us(s->st, gr) / STEP_LAYERS;
    printf("%-10s %7lld %3d %5d %3d/%-2d %8.2f %8.1f %8.1f %8.1f %8.2f %8.2f %7.2f %7.2f %7.2f %7.0f", name,
           (long long)ctx, C, H, s->d.splits, s->d.cluster, bytes / 1e6, p50, b2b, graph, fb, ff, p50 / fl, b2b / fl,
           graph / fl, flops / (graph * 1e-6) / 1e12);
    if (base_graph > 0) printf("  graph / variant 0's: %.3f\n", graph / base_graph);
    else printf("\n");
    double *w = C >= 8 ? worst_hi : worst_lo;
    if (slot >= 0 && graph / fl > w[slot]) w[slot] = graph / fl;
    return graph;
}

static void bench_one(int64_t ctx, int C, int H, int splits, int reps, int n_sm, cudaStream_t st)
{
    mh_state s;
    memset(&s, 0, sizeof s);
    s.st = st;
    s.d.nq = C, s.d.n_heads = H, s.d.k = K, s.d.sm_scale = 1.0f / sqrtf((float)DHS_MLA_DQK);
    s.d.splits = splits > 0 ? splits : dhs_mla_mh_splits(C, H, K, n_sm);
    const double pool_bytes = (double)C * ctx * DHS_MLA_ROW_BYTES;
    int NL = (int)((192e6 + pool_bytes - 1) / pool_bytes);
    if (NL < 1) NL = 1;
    s.NS = NL < 8 ? 8 : NL;
    uint8_t *pool;
    CK(cudaMalloc((void **)&pool, (size_t)NL * C * ctx * DHS_MLA_ROW_BYTES));
    k_fill_rows<<<2048, 256, 0, st>>>((uint4 *)pool, (int64_t)NL * C * ctx * (DHS_MLA_ROW_BYTES / 16),
                                      4242u + (uint64_t)ctx + (uint64_t)C);
    const uint8_t **hbase = (const uint8_t **)malloc(sizeof(uint8_t *) * (size_t)s.NS * C);
    for (int l = 0; l < s.NS; l++)
        for (int q = 0; q < C; q++)
            hbase[(size_t)l * C + q] = pool + ((size_t)(l % NL) * C + q) * ctx * DHS_MLA_ROW_BYTES;
    CK(cudaMalloc((void **)&s.base, sizeof(uint8_t *) * (size_t)s.NS * C));
    CK(cudaMemcpy(s.base, hbase, sizeof(uint8_t *) * (size_t)s.NS * C, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&s.loc, sizeof(int32_t) * (size_t)s.NS * C * K));
    k_fill_sel<<<256, 256, 0, st>>>(s.loc, (int64_t)s.NS * C * K, ctx, 99u + (uint64_t)C);
    CK(cudaMalloc((void **)&s.q, sizeof(uint16_t) * (size_t)s.NS * C * H * DHS_MLA_DQK));
    k_fill_bf16<<<256, 256, 0, st>>>(s.q, (int64_t)s.NS * C * H * DHS_MLA_DQK, 7u + (uint64_t)H);
    CK(cudaGetLastError());
    int32_t *hnv = (int32_t *)malloc(sizeof(int32_t) * (size_t)C);
    for (int q = 0; q < C; q++) hnv[q] = K;
    CK(cudaMalloc((void **)&s.nv, sizeof(int32_t) * (size_t)C));
    CK(cudaMemcpy(s.nv, hnv, sizeof(int32_t) * (size_t)C, cudaMemcpyHostToDevice));
    dhs_mla_mh_desc dmax = s.d;
    dmax.splits = DHS_MLA_MAX_SPLITS; /* the largest workspace of any configuration timed */
    CK(cudaMalloc((void **)&s.part, dhs_mla_mh_part_bytes(&dmax)));
    CK(cudaMalloc((void **)&s.out, sizeof(float) * (size_t)C * H * DHS_MLA_DV));
    CK(cudaStreamSynchronize(st));
    double first = 0;
    const int32_t base_splits = s.d.splits;
    const size_t nout = (size_t)C * H * DHS_MLA_DV;
    float *o0 = (float *)malloc(sizeof(float) * nout), *o1 = (float *)malloc(sizeof(float) * nout);
    for (int vi = 0; vi < NVAR; vi++) { /* without clusters */
        char name[32];
        s.variant = VARS[vi];
        snprintf(name, sizeof name, "mla-mh/%d", s.variant);
        const double graph = time_config(&s, name, ctx, hbase, reps, first, vi);
        if (s.variant == 0) first = graph;
        same_bits(&s, s.variant == 0 ? o0 : o1, o0, name);
    }
    if (cl_fit[2] > 0) { /* the plan with clusters (PLANV); --sweep: other one-wave (splits, cluster) */
        int32_t ps, pc;
        dhs_mla_mh_plan(C, H, K, n_sm, cl_fit, &ps, &pc);
        s.d.splits = ps, s.d.cluster = pc;
        for (int vi = 0; vi < NPLAN; vi++) {
            char name[32];
            s.variant = PLANV[vi];
            snprintf(name, sizeof name, "plan/%d", s.variant);
            time_config(&s, name, ctx, hbase, reps, first, NVAR + vi);
            same_bits(&s, vi ? o1 : o0, vi ? o0 : NULL, name);
        }
        s.variant = 0;
        /* --sweep: with each size cs, cs and 2 cs splits (1 or 2 partials per query), and the splits of the
           plan without clusters where cs divides them (same-S); each once, where one wave holds it */
        const int nt = K / DHS_MLA_TILE;
        static const int sizes[] = {2, 3, 4, 6, 8, 12, 16};
        for (size_t ci = 0; sweep && ci < sizeof sizes / sizeof sizes[0]; ci++) {
            const int cs = sizes[ci], cand[3] = {cs, 2 * cs, base_splits % cs || base_splits <= 2 * cs ? 0 : base_splits};
            for (int j = 0; j < 3; j++) {
                const int S = cand[j];
                if (!S || S > nt || S > DHS_MLA_MAX_SPLITS || cl_fit[cs] <= 0 ||
                    (int64_t)C * (H / DHS_MLA_HG) * (S / cs) > cl_fit[cs] || (S == ps && cs == pc))
                    continue;
                s.d.splits = S, s.d.cluster = cs;
                time_config(&s, j < 2 ? "sweep" : "same-S", ctx, hbase, reps, first, -1);
            }
        }
        s.d.splits = base_splits, s.d.cluster = 0;
    }
    if (ablate) { /* variant 0 with parts left out: what each costs (no check: the outputs are wrong) */
        static const int abl[] = {1, 2, 4, 6, 8, 9, 14, 15};
        static const char *what[] = {"no decode", "no S mma", "no PV mma", "no mma", "no gather", "no gather, decode",
                                     "decode only + softmax", "softmax + launch only"};
        for (size_t i = 0; i < sizeof abl / sizeof abl[0]; i++) {
            s.variant = abl[i] << 2;
            double p50, b2b;
            time_calls(mh_call, &s, reps, st, &p50, &b2b);
            printf("  ablate %-2d %-24s p50 %8.1f b2b %8.1f\n", abl[i], what[i], p50, b2b);
        }
    }
    free(o0), free(o1);
    void *bufs[] = {pool, (void *)s.base, s.loc, s.q, s.nv, s.part, s.out};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CK(cudaFree(bufs[i]));
    free(hbase), free(hnv);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mla_bench [--contexts N,N,...] [--batch C,C,...] [--heads 64|128,...] [--splits S] [--reps R]\n"
               "                 [--ablate] [--sweep]\n"
               "  The multi-head sparse MLA decode attention (model/mla_mh.cu: tensor cores, FP8 rows decoded in the\n"
               "  kernel, split over the located rows, a fixed-order combine) against its roofline max(bytes / HBM,\n"
               "  FLOPs / tensor peak), both measured in this process; checked against the CPU specification first.\n"
               "  --splits: row splits per query (default: dhs_mla_mh_splits for this GPU). --ablate: also variant 0\n"
               "  with parts left out (decode, S product, P V product, gathers): what each costs. Where the GPU\n"
               "  holds clusters, the line 'plan' is dhs_mla_mh_plan's (splits/cluster: the splits of a cluster\n"
               "  combined in its shared memory); --sweep: also the other one-wave (splits, cluster) with clusters\n"
               "  of 2, 3, 4, 6, 8, 12 or 16 and 1 or 2 partials per query, and (same-S) each of those sizes at the\n"
               "  splits of the plan without clusters.\n"
               "  Defaults: --contexts 100000,32768 --batch 2,8,20 --heads 64,128 --reps 100\n");
}

int main(int argc, char **argv)
{
    int64_t ctxs[8] = {100000, 32768}, batch[8] = {2, 8, 20}, heads[4] = {64, 128};
    int nctx = 2, nb = 3, nh = 2, reps = 100, splits = 0, pc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if ((pc = parse_common(argc, argv, &i, ctxs, &nctx, batch, &nb, &reps)) != 0) {
            if (pc < 0) return usage(stderr), 2;
        } else if (!strcmp(argv[i], "--heads") && i + 1 < argc) {
            if ((nh = parse_list(argv[++i], heads, 4)) < 1) return usage(stderr), 2;
        } else if (!strcmp(argv[i], "--splits") && i + 1 < argc) {
            splits = atoi(argv[++i]);
            if (splits < 1 || splits > DHS_MLA_MAX_SPLITS) return usage(stderr), 2;
        } else if (!strcmp(argv[i], "--ablate")) {
            ablate = 1;
        } else if (!strcmp(argv[i], "--sweep")) {
            sweep = 1;
        } else {
            usage(stderr);
            return 2;
        }
    }
    for (int i = 0; i < nh; i++)
        if (heads[i] != 64 && heads[i] != 128) return fprintf(stderr, "mla_bench: heads must be 64 or 128\n"), 2;
    cudaStream_t st;
    cudaDeviceProp prop;
    const int rc = bench_open("mla_bench", ctxs, nctx, K, batch, nb, &st, &prop);
    if (rc) return rc;
    hbm = bench_d2d_gbs(st), peak = mma_peak(prop.multiProcessorCount, st);
    printf("device: %s, %d SMs; HBM (1 GiB D2D copy, read + write): %.0f GB/s; tensor peak (mma.sync m16n8k16 bf16, "
           "measured): %.0f TFLOP/s (stated dense BF16: %.0f)\n",
           prop.name, prop.multiProcessorCount, hbm, peak / 1e12, STATED_PEAK / 1e12);
    printf("k = %d rows x %d B per query; times in us; graph = per layer of %d calls in one CUDA graph; /fl = time / "
           "max(floor_B, floor_F); TF = FLOP/s of the graph time\n",
           K, DHS_MLA_ROW_BYTES, STEP_LAYERS);
    if (dhs_mla_mh_cluster_fit(cl_fit) != DHS_OK) memset(cl_fit, 0, sizeof cl_fit);
    printf("clusters of 1..%d blocks held at once:", DHS_MLA_MAX_CLUSTER);
    for (int c = 1; c <= DHS_MLA_MAX_CLUSTER; c++) printf(" %d", (int)cl_fit[c]);
    printf("\n");
    printf("kernel     context   C heads spl/cl       MB      p50      b2b    graph  floor_B  floor_F  p50/fl  b2b/fl  "
           "grf/fl      TF\n");
    for (int i = 0; i < nctx; i++)
        for (int j = 0; j < nb; j++)
            for (int h = 0; h < nh; h++)
                bench_one(ctxs[i], (int)batch[j], (int)heads[h], splits, reps, prop.multiProcessorCount, st);
    for (int v = 0; v < NVAR + NPLAN; v++)
        printf("mla_bench: %s %d: worst graph/floor %.2f at C >= 8 (bar 2x), %.2f at C < 8 (bar 3x)\n",
               v < NVAR ? "variant" : "plan with clusters, variant", v < NVAR ? VARS[v] : PLANV[v - NVAR], worst_hi[v],
               worst_lo[v]);
    printf("mla_bench: %ld output sets bit-equal to variant 0's (%ld not: variants 1 and 2 may differ)\n", n_same,
           n_diff);
    printf("mla_bench: every checked output within %.2g x vmax of the specification\n", worst_err);
    CK(cudaStreamDestroy(st));
    return 0;
}
