/* test_overlap_cuda.c - the CUDA attention split around the miss copy
 * (dev/overlap/overlap.cu) against its C reference (dev/overlap/overlap.c, itself
 * checked against the model's attention by test_overlap.c), on the steps of
 * test_overlap_gen.h (random, all hits, all misses, padding, repeated rows,
 * large score ranges, ties; k up to 2048, 1..16 heads, batches up to 64).
 *
 * The miss rows really are copied while phase A runs: the host history
 * (`after`) is mapped pinned memory, the device pools start as `before` (the
 * staging rows poisoned with FP8 NaN codes) and the zero-copy gather
 * (gather.cu) moves the misses into the staging rows on a second stream;
 * phase A runs on the first and joins the copy through an event.
 *   - GPU whole (gather, then attend on one stream) == CPU whole, bitwise;
 *   - GPU exact overlapped == CPU whole, bitwise; the same step captured as
 *     a CUDA graph (fork/join) and replayed == CPU whole, bitwise;
 *   - GPU fast overlapped == CPU fast, bitwise, and within the documented
 *     bound of whole;
 *   - the intermediates (every valid entry's score after exact; the fast
 *     partials' maxima and sums) equal the CPU's, so a failure names its stage;
 *   - the copied staging rows equal the host rows;
 *   - exp_portable 0 (the device's expf): exact == whole on the GPU, bitwise;
 *   - launcher argument errors.
 * Exits 77 (CTest SKIP_RETURN_CODE) when built without CUDA or when no device
 * is present: it never passes without running. Prints its seed. */
#include <stdio.h>

#include "test_help.h"

#ifndef DHS_HAVE_CUDA
TH_MAIN_WITHOUT_CUDA
#else
#include <cuda_runtime_api.h>

#include "core/backend.h"
#include "cuda/gather.cuh"
#include "dev/overlap/overlap.cuh"
#include "test_overlap_gen.h"

#define CK(x) TH_CUDA_CK(x)

static float *d_lut;
static cudaStream_t s_main, s_copy;
static cudaEvent_t ev_fork, ev_copy;
static ovg_err g_err;
static int n_graph;

static void *pinned_alloc(size_t bytes)
{
    void *p = NULL;
    return cudaHostAlloc(&p, bytes ? bytes : 16, cudaHostAllocMapped) == cudaSuccess ? p : NULL;
}
static void pinned_free(void *p) { cudaFreeHost(p); }

typedef struct dev_step {
    uint8_t *pool;
    const uint8_t **base;
    float *q, *scores, *pm, *pl, *pacc, *out;
    int32_t *loc;
    uint8_t *miss;
    dhs_copy_pair *pairs;
    int64_t n_pairs;
    size_t pool_bytes;
    dhs_ov_args a;
} dev_step;

static void dev_make(dev_step *d, const ovg_case *c)
{
    const dhs_ov_shape *s = &c->s;
    memset(d, 0, sizeof *d);
    d->pool_bytes = (size_t)s->nq * (size_t)c->pool_rows * DHS_OV_ROW;
    CK(cudaMalloc((void **)&d->pool, d->pool_bytes));
    CK(cudaMalloc((void **)&d->base, sizeof(void *) * (size_t)s->nq));
    CK(cudaMalloc((void **)&d->q, sizeof(float) * (size_t)s->nq * (size_t)s->nh * DHS_OV_LAT));
    CK(cudaMalloc((void **)&d->scores, sizeof(float) * (size_t)dhs_ov_scores_len(s)));
    CK(cudaMalloc((void **)&d->pm, sizeof(float) * (size_t)dhs_ov_pml_len(s)));
    CK(cudaMalloc((void **)&d->pl, sizeof(float) * (size_t)dhs_ov_pml_len(s)));
    CK(cudaMalloc((void **)&d->pacc, sizeof(float) * (size_t)dhs_ov_pacc_len(s)));
    CK(cudaMalloc((void **)&d->out, sizeof(float) * (size_t)s->nq * (size_t)s->nh * DHS_OV_DV));
    CK(cudaMalloc((void **)&d->loc, sizeof(int32_t) * (size_t)s->nq * (size_t)s->k));
    CK(cudaMalloc((void **)&d->miss, (size_t)s->nq * (size_t)s->k));
    CK(cudaMalloc((void **)&d->pairs, sizeof(dhs_copy_pair) * (size_t)(c->n_miss_rows + 1)));
    const uint8_t **hb = malloc(sizeof(void *) * (size_t)s->nq);
    dhs_copy_pair *hp = calloc((size_t)(c->n_miss_rows + 1), sizeof(dhs_copy_pair));
    if (!hb || !hp) exit(2);
    for (int32_t q = 0; q < s->nq; q++) hb[q] = d->pool + (size_t)q * (size_t)c->pool_rows * DHS_OV_ROW;
    for (int64_t i = 0; i < c->n_miss_rows; i++) { /* host row (mapped pinned: a device pointer under UVA) -> staging */
        hp[i].src = c->after + (int64_t)c->miss_rows[i] * DHS_OV_ROW;
        hp[i].dst = d->pool + (int64_t)c->miss_rows[i] * DHS_OV_ROW;
    }
    d->n_pairs = c->n_miss_rows;
    CK(cudaMemcpy(d->base, hb, sizeof(void *) * (size_t)s->nq, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d->pairs, hp, sizeof(dhs_copy_pair) * (size_t)(c->n_miss_rows + 1), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d->q, c->q, sizeof(float) * (size_t)s->nq * (size_t)s->nh * DHS_OV_LAT, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d->loc, c->loc, sizeof(int32_t) * (size_t)s->nq * (size_t)s->k, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d->miss, c->miss, (size_t)s->nq * (size_t)s->k, cudaMemcpyHostToDevice));
    free(hb);
    free(hp);
    d->a = (dhs_ov_args){d->q, d->base, d->loc, d->miss, d_lut, d->scores, d->pm, d->pl, d->pacc, d->out};
}

static void dev_free(dev_step *d)
{
    cudaFree(d->pool);
    cudaFree((void *)d->base);
    cudaFree(d->q);
    cudaFree(d->scores);
    cudaFree(d->pm);
    cudaFree(d->pl);
    cudaFree(d->pacc);
    cudaFree(d->out);
    cudaFree(d->loc);
    cudaFree(d->miss);
    cudaFree(d->pairs);
}

/* pools back to `before` (staging rows poisoned), scratch and output NaN */
static void dev_reset(dev_step *d, const ovg_case *c)
{
    const dhs_ov_shape *s = &c->s;
    CK(cudaMemcpy(d->pool, c->before, d->pool_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemset(d->scores, 0xff, sizeof(float) * (size_t)dhs_ov_scores_len(s)));
    CK(cudaMemset(d->pm, 0xff, sizeof(float) * (size_t)dhs_ov_pml_len(s)));
    CK(cudaMemset(d->pl, 0xff, sizeof(float) * (size_t)dhs_ov_pml_len(s)));
    CK(cudaMemset(d->pacc, 0xff, sizeof(float) * (size_t)dhs_ov_pacc_len(s)));
    CK(cudaMemset(d->out, 0xff, sizeof(float) * (size_t)s->nq * (size_t)s->nh * DHS_OV_DV));
    CK(cudaDeviceSynchronize());
}

static cudaError_t gather(dev_step *d, cudaStream_t st)
{
    return dhs_cuda_gather_launch(d->pairs, d->n_pairs, DHS_OV_ROW, dhs_cuda_gather_grid(d->n_pairs, 256), st);
}

/* one step enqueued: WHOLE = copy then attend on s_main; EXACT / FAST = copy
   on s_copy while phase A runs on s_main (fork/join through events) */
static void enqueue(dev_step *d, const dhs_ov_shape *s, int mode)
{
    if (mode == DHS_OV_WHOLE) {
        CK(gather(d, s_main));
        CK(dhs_cuda_ov_attend(s, DHS_OV_WHOLE, &d->a, NULL, s_main));
        return;
    }
    CK(cudaEventRecord(ev_fork, s_main));
    CK(cudaStreamWaitEvent(s_copy, ev_fork, 0));
    CK(gather(d, s_copy));
    CK(cudaEventRecord(ev_copy, s_copy));
    CK(dhs_cuda_ov_attend(s, mode, &d->a, ev_copy, s_main));
}

static void run_mode(dev_step *d, const ovg_case *c, int mode, int graph, float *out_h)
{
    const dhs_ov_shape *s = &c->s;
    dev_reset(d, c);
    if (graph) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s_main, cudaStreamCaptureModeGlobal));
        enqueue(d, s, mode);
        CK(cudaStreamEndCapture(s_main, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, s_main));
        CK(cudaStreamSynchronize(s_main));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
        n_graph++;
    } else {
        enqueue(d, s, mode);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out_h, d->out, sizeof(float) * (size_t)s->nq * (size_t)s->nh * DHS_OV_DV, cudaMemcpyDeviceToHost));
}

static void run_case(ovg_kind kind, int32_t nq, int32_t nh, int32_t k, int32_t chunk, int portable, uint64_t *rng)
{
    ovg_case c;
    if (ovg_make(&c, kind, nq, nh, k, chunk, rng, pinned_alloc, pinned_free) != 0) {
        printf("allocation failed\n");
        exit(2);
    }
    c.s.exp_portable = portable;
    const dhs_ov_shape *s = &c.s;
    int64_t no = (int64_t)nq * nh * DHS_OV_DV;
    size_t ob = sizeof(float) * (size_t)no;
    float *cw = malloc(ob), *cf = malloc(ob), *gw = malloc(ob), *gx = malloc(ob), *gg = malloc(ob), *gf = malloc(ob);
    float *scores = malloc(sizeof(float) * (size_t)dhs_ov_scores_len(s));
    float *pm = malloc(sizeof(float) * (size_t)dhs_ov_pml_len(s)), *pl = malloc(sizeof(float) * (size_t)dhs_ov_pml_len(s));
    float *pacc = malloc(sizeof(float) * (size_t)dhs_ov_pacc_len(s));
    if (!cw || !cf || !gw || !gx || !gg || !gf || !scores || !pm || !pl || !pacc) exit(2);
    char what[160];
    snprintf(what, sizeof what, "%s nq %d nh %d k %d chunk %d exp_portable %d", ovg_kind_name[kind], nq, nh, k, chunk,
             portable);
    dev_step d;
    dev_make(&d, &c);

    run_mode(&d, &c, DHS_OV_WHOLE, 0, gw);
    /* the copied rows are the host rows */
    uint8_t *pool = malloc(d.pool_bytes);
    if (!pool) exit(2);
    CK(cudaMemcpy(pool, d.pool, d.pool_bytes, cudaMemcpyDeviceToHost));
    int rows_ok = 1;
    for (int64_t i = 0; i < c.n_miss_rows; i++)
        rows_ok &= memcmp(pool + (int64_t)c.miss_rows[i] * DHS_OV_ROW, c.after + (int64_t)c.miss_rows[i] * DHS_OV_ROW,
                          DHS_OV_ROW) == 0;
    CHECKF(rows_ok, "%s: a copied row differs from the host row", what);
    free(pool);
    /* the intermediates too (diagnostics: which stage differs): scores after exact, partials after fast */
    size_t sb = sizeof(float) * (size_t)dhs_ov_scores_len(s), mb = sizeof(float) * (size_t)dhs_ov_pml_len(s);
    float *gsc = malloc(sb), *gpm = malloc(mb), *gpl = malloc(mb);
    if (!gsc || !gpm || !gpl) exit(2);
    run_mode(&d, &c, DHS_OV_EXACT, 0, gx);
    CK(cudaMemcpy(gsc, d.scores, sb, cudaMemcpyDeviceToHost));
    run_mode(&d, &c, DHS_OV_FAST, 0, gf);
    CK(cudaMemcpy(gpm, d.pm, mb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gpl, d.pl, mb, cudaMemcpyDeviceToHost));
    int graph = kind == OVG_RANDOM || kind == OVG_PAD || dhs_rng_below(rng, 4) == 0;
    if (graph) run_mode(&d, &c, DHS_OV_EXACT, 1, gg);

    dhs_ov_args a = {c.q, c.base_after, c.loc, c.miss, NULL, scores, pm, pl, pacc, cf};
    CHECK(dhs_ov_overlap_ref(s, DHS_OV_FAST, c.base_before, &a) == DHS_OK); /* every valid entry's score, partials */
    int64_t bad_sc = 0;
    for (int32_t q = 0; q < nq; q++)
        for (int32_t h = 0; h < nh; h++)
            for (int32_t e2 = 0; e2 < k; e2++) {
                int64_t i = ((int64_t)q * nh + h) * k + e2;
                if (c.loc[(int64_t)q * k + e2] >= 0) bad_sc += memcmp(&gsc[i], &scores[i], sizeof(float)) != 0;
            }
    CHECKF(bad_sc == 0, "%s: %lld GPU scores != CPU scores", what, (long long)bad_sc);
    CHECKF(memcmp(gpm, pm, mb) == 0, "%s: GPU partial maxima != CPU", what);
    free(gsc);
    free(gpm);
    if (portable) {
        CHECKF(memcmp(gpl, pl, mb) == 0, "%s: GPU partial sums != CPU", what);
        CHECKF(memcmp(gf, cf, ob) == 0, "%s: GPU fast != CPU fast", what);
        a.out = cw;
        CHECK(dhs_ov_attend_ref(s, &a) == DHS_OK);
        CHECKF(memcmp(gw, cw, ob) == 0, "%s: GPU whole != CPU whole", what);
    }
    free(gpl);
    if (!portable) {
        memcpy(cw, gw, ob); /* the device's expf: only self-consistency */
    }
    CHECKF(memcmp(gx, cw, ob) == 0, "%s: GPU exact overlapped != whole", what);
    if (graph) CHECKF(memcmp(gg, cw, ob) == 0, "%s: GPU exact overlapped (graph) != whole", what);
    ovg_err e = {0, 0, 0, 0, 0};
    ovg_compare_fast(&c, gf, cw, &e);
    CHECKF(e.over == 0, "%s: %lld GPU fast values beyond the bound (max %.3g of it)", what, (long long)e.over,
           e.of_bound);
    ovg_err_max(&g_err, &e);

    dev_free(&d);
    free(cw);
    free(cf);
    free(gw);
    free(gx);
    free(gg);
    free(gf);
    free(scores);
    free(pm);
    free(pl);
    free(pacc);
    ovg_free(&c);
}

static void test_errors(void)
{
    dhs_ov_shape s = {1, 4, 64, 16, 0.05f, 1}, b;
    dhs_ov_args a;
    memset(&a, 0, sizeof a);
    b = s, b.nh = DHS_OV_MAX_HEADS + 1;
    CHECK(dhs_cuda_ov_scores(&b, DHS_OV_ALL, &a, s_main) == cudaErrorInvalidValue);
    b = s, b.k = DHS_OV_MAX_K + 1;
    CHECK(dhs_cuda_ov_reduce(&b, &a, s_main) == cudaErrorInvalidValue);
    b = s, b.chunk = 65;
    CHECK(dhs_cuda_ov_merge(&b, &a, s_main) == cudaErrorInvalidValue);
    CHECK(dhs_cuda_ov_scores(&s, 3, &a, s_main) == cudaErrorInvalidValue);
    CHECK(dhs_cuda_ov_partial(&s, DHS_OV_ALL, &a, s_main) == cudaErrorInvalidValue);
    CHECK(dhs_cuda_ov_attend(&s, 3, &a, NULL, s_main) == cudaErrorInvalidValue);
    CHECK(dhs_cuda_ov_attend(NULL, DHS_OV_EXACT, &a, NULL, s_main) == cudaErrorInvalidValue);
    b = s, b.nq = 0; /* nothing to do: no launch, success */
    CHECK(dhs_cuda_ov_attend(&b, DHS_OV_FAST, &a, NULL, s_main) == cudaSuccess);
    CHECK(cudaGetLastError() == cudaSuccess);
}

int main(void)
{
    TH_SKIP_WITHOUT_DEVICE();
    uint64_t rng = th_seed("test_overlap_cuda");
    CK(dhs_cuda_ov_init());
    CK(cudaMalloc((void **)&d_lut, 256 * sizeof(float)));
    CK(cudaMemcpy(d_lut, dhs_ref_fp8_table(), 256 * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaStreamCreateWithFlags(&s_main, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s_copy, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev_fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&ev_copy, cudaEventDisableTiming));
    test_errors();
    /* a reduced run (DHS_TEST_SCALE < 0.5: compute-sanitizer, whose racecheck is slow on shared memory):
       batch 1, k 256 for the kinds, one case at k 2048, random k <= 300 */
    int cases = 0, small = th_scale() < 0.5;
    /* every kind at the model's size, batch 4 */
    for (int kind = 0; kind < OVG_KINDS; kind++, cases++)
        run_case((ovg_kind)kind, small ? 1 : 4, small ? 4 : 16, small ? 256 : 2048, small ? 64 : 256, 1, &rng);
    /* the bench's largest batch, once */
    if (!small) run_case(OVG_RANDOM, 64, 16, 2048, 256, 1, &rng), cases++;
    run_case(OVG_ALL_HITS, small ? 1 : 3, 16, 2048, 2048, 1, &rng);
    run_case(OVG_RANDOM, small ? 1 : 5, 7, 1000, small ? 100 : 1, 1, &rng);
    cases += 2;
    static const int32_t ks[] = {1, 2, 7, 31, 32, 33, 300, 1000, 2048};
    static const int32_t nhs[] = {1, 2, 3, 4, 5, 13, 16};
    int n_rand = (int)(40 * th_scale()) + 7;
    for (int i = 0; i < n_rand; i++, cases++) {
        ovg_kind kind = (ovg_kind)(i % OVG_KINDS);
        int32_t k = ks[dhs_rng_below(&rng, (int64_t)(sizeof ks / sizeof ks[0]))];
        if (small && k > 300) k = 300;
        int32_t nh = nhs[dhs_rng_below(&rng, (int64_t)(sizeof nhs / sizeof nhs[0]))];
        int32_t chunk = dhs_rng_below(&rng, 3) == 0 ? k : 1 + (int32_t)dhs_rng_below(&rng, k);
        int32_t nq = 1 + (int32_t)dhs_rng_below(&rng, small ? 2 : 9);
        run_case(kind, nq, nh, k, chunk, 1, &rng);
    }
    /* the device's expf: exact == whole still */
    for (int i = 0; i < (small ? 1 : 3); i++, cases++)
        run_case((ovg_kind)(i * 2), small ? 1 : 3, 16, small ? 256 : 2048, small ? 64 : 512, 0, &rng);
    printf("cases: %d (graph replays: %d)\n", cases, n_graph);
    printf("GPU fast vs whole, max over all values: |d|/vmax %.3g, %.3g of the bound (n+8)*2^-23*vmax, |d| %.3g, "
           "|d|/|exact| %.3g (where |exact| >= 1e-3 vmax)\n",
           g_err.norm, g_err.of_bound, g_err.abs, g_err.rel);
    cudaFree(d_lut);
    return th_summary();
}
#endif
