/* overlap_emu_test.c - the CUDA kernels of the overlapped attention
 * (dev/overlap/overlap.cu), run on the CPU through cuda_shim.h, against the C
 * reference (dev/overlap/overlap.c), bit for bit: whole, exact (phase A on the
 * poisoned pools), fast (and its partials' maxima and sums), on the kinds of
 * test_overlap_gen.h. A development check of the kernels' indexing and
 * synchronisation where no GPU is at hand; it says nothing about timing,
 * streams, the copy or graphs (test_overlap_cuda does, on a GPU).
 * Usage: run_overlap_emu.sh [random cases (default 6)]; prints its seed. */
#include <stdio.h>

#include "test_help.h"
#include "test_overlap_gen.h"

void emu_scores(const dhs_ov_shape *s, int which, const dhs_ov_args *a);
void emu_reduce(const dhs_ov_shape *s, const dhs_ov_args *a);
void emu_partial(const dhs_ov_shape *s, int which, const dhs_ov_args *a);
void emu_merge(const dhs_ov_shape *s, const dhs_ov_args *a);

static void nan_fill(float *p, int64_t n) { memset(p, 0xff, sizeof(float) * (size_t)n); }

static void run(ovg_kind kind, int nq, int nh, int k, int chunk, int portable, uint64_t *rng)
{
    ovg_case c;
    if (ovg_make(&c, kind, nq, nh, k, chunk, rng, NULL, NULL)) exit(2);
    c.s.exp_portable = portable;
    const dhs_ov_shape *s = &c.s;
    int64_t no = (int64_t)nq * nh * DHS_OV_DV, ns = dhs_ov_scores_len(s), nm = dhs_ov_pml_len(s);
    size_t ob = sizeof(float) * (size_t)no, mb = sizeof(float) * (size_t)nm;
    float *sc = malloc(sizeof(float) * (size_t)ns), *pm = malloc(mb), *pl = malloc(mb);
    float *pacc = malloc(sizeof(float) * (size_t)dhs_ov_pacc_len(s)), *cpm = malloc(mb), *cpl = malloc(mb);
    float *cw = malloc(ob), *cf = malloc(ob), *ew = malloc(ob), *ex = malloc(ob), *ef = malloc(ob);
    if (!sc || !pm || !pl || !pacc || !cpm || !cpl || !cw || !cf || !ew || !ex || !ef) exit(2);
    char what[128];
    snprintf(what, sizeof what, "%s nq %d nh %d k %d chunk %d exp_portable %d", ovg_kind_name[kind], nq, nh, k, chunk,
             portable);
    dhs_ov_args a = {c.q, c.base_after, c.loc, c.miss, dhs_ref_fp8_table(), sc, pm, pl, pacc, cw};
    CHECK(dhs_ov_attend_ref(s, &a) == DHS_OK);
    a.out = cf;
    CHECK(dhs_ov_overlap_ref(s, DHS_OV_FAST, c.base_before, &a) == DHS_OK);
    memcpy(cpm, pm, mb);
    memcpy(cpl, pl, mb);
    dhs_ov_args b = a; /* phase A: the pools before the copy */
    b.base = c.base_before;
    nan_fill(sc, ns);
    nan_fill(ew, no);
    a.out = ew;
    emu_scores(s, DHS_OV_ALL, &a);
    emu_reduce(s, &a);
    nan_fill(sc, ns);
    nan_fill(ex, no);
    a.out = b.out = ex;
    emu_scores(s, DHS_OV_HITS, &b);
    emu_scores(s, DHS_OV_MISSES, &a);
    emu_reduce(s, &a);
    nan_fill(sc, ns);
    nan_fill(pm, nm);
    nan_fill(pl, nm);
    nan_fill(pacc, dhs_ov_pacc_len(s));
    nan_fill(ef, no);
    a.out = b.out = ef;
    emu_scores(s, DHS_OV_HITS, &b);
    emu_partial(s, DHS_OV_HITS, &b);
    emu_scores(s, DHS_OV_MISSES, &a);
    emu_partial(s, DHS_OV_MISSES, &a);
    emu_merge(s, &a);
    CHECKF(memcmp(ew, cw, ob) == 0, "%s: whole", what);
    CHECKF(memcmp(ex, cw, ob) == 0, "%s: exact", what);
    CHECKF(memcmp(pm, cpm, mb) == 0, "%s: partial maxima", what);
    CHECKF(memcmp(pl, cpl, mb) == 0, "%s: partial sums", what);
    CHECKF(memcmp(ef, cf, ob) == 0, "%s: fast", what);
    free(sc);
    free(pm);
    free(pl);
    free(pacc);
    free(cpm);
    free(cpl);
    free(cw);
    free(cf);
    free(ew);
    free(ex);
    free(ef);
    ovg_free(&c);
}

int main(int argc, char **argv)
{
    uint64_t rng = th_seed("overlap_emu");
    int n_rand = argc > 1 ? atoi(argv[1]) : 6;
    static const int ks[] = {1, 7, 33, 64, 200, 300};
    static const int nhs[] = {1, 3, 4, 5, 16};
    for (int kind = 0; kind < OVG_KINDS; kind++) run((ovg_kind)kind, 1, 16, 300, 64, 1, &rng);
    run(OVG_RANDOM, 1, 16, 2048, 256, 1, &rng); /* the model's k: 16 tiles, 64 score blocks */
    run(OVG_REPEAT, 2, 5, 200, 200, 0, &rng);  /* expf: the CPU's on both sides here */
    for (int i = 0; i < n_rand; i++) {
        int k = ks[dhs_rng_below(&rng, 6)], nh = nhs[dhs_rng_below(&rng, 5)];
        int chunk = dhs_rng_below(&rng, 3) == 0 ? k : 1 + (int)dhs_rng_below(&rng, k);
        run((ovg_kind)(i % OVG_KINDS), 1 + (int)dhs_rng_below(&rng, 2), nh, k, chunk, 1, &rng);
    }
    return th_summary();
}
