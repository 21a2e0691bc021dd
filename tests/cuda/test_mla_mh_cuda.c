/* test_mla_mh_cuda.c - the multi-head sparse MLA decode kernel (dhs_mla_mh_attend, model/mla_mh.cu,
 * tensor cores) against its CPU specification (dhs_mla_mh_ref, model/mla_mh.c) on the GPU; the
 * specification's own checks (against a double softmax, its literal transcription, its argument
 * checks) are tests/model/test_mla_mh.c's.
 *   - seeded random cases (~30): 1..6 queries, 64 and 128 heads, k in {1, 63, 64, 65, 200, 1000, 2048}
 *     or random, per query nv in 0..k (some 0, some -1, mostly k or random), splits from
 *     dhs_mla_mh_splits(nq, heads, k, the device's SMs) or random 1..32 (empty splits included),
 *     sm_scale 1/sqrt(576) or random in [0.01, 0.2]; real 656-byte rows (dhs_ref_row_encode of random
 *     latents, magnitudes 2^-3..2^3, some with tile scales that are not powers of two), each query its
 *     own pool of 1..4096 rows, random locations with repeats; bf16 queries of magnitude 2, and wide
 *     score ranges (queries x 8..32) where rows underflow against the maximum. Every output of a
 *     query with nv > 0 is within 8e-3 x vmax + 1e-6 of the spec (vmax: max |V| over the query's
 *     valid rows, V as the spec decodes it); the worst |gpu - spec| / vmax is printed;
 *   - outputs of queries with nv <= 0 keep a sentinel bit pattern;
 *   - variants 0 (k_mla_mh), 3 and 5 (k_mla_ws, the overlapped kernel, with either split of P V) give the
 *     default launch's bits in every case, with and without clusters;
 *   - determinism: a second launch gives the same bits; the same rows at other locations of a bigger
 *     pool (other bases, same entry order; the unused rows there are NaN) give the same bits; query 0's
 *     bits do not move when the other queries' rows, locations, counts and queries change;
 *   - the partials workspace is exactly dhs_mla_mh_part_bytes: a guard region after it (and after the
 *     outputs) keeps its pattern; the workspace is poisoned differently before each launch (NaN or
 *     zeros), so a read of a partial the launch did not write changes the bits;
 *   - argument errors (NULL pointers, failing descriptors, misaligned q / part / out) return an error
 *     and launch nothing (outputs and workspace unchanged); nq = 0 returns DHS_OK and writes nothing;
 *   - afterwards cudaDeviceSynchronize and cudaGetLastError are clean.
 * Exits 77 (CTest SKIP_RETURN_CODE) when built without CUDA or when no device is present: it never
 * passes without running. Prints its seed (DHS_TEST_SEED replays it). */
#include <math.h>
#include <stdio.h>

#include "test_help.h"

#ifndef DHS_HAVE_CUDA
TH_MAIN_WITHOUT_CUDA
#else
#include <cuda_runtime_api.h>

#include "model/mla_mh.h"
#include "model/model.h"

#define CK(x) TH_CUDA_CK(x)
#define MAXQ 6
#define MAXP 4096                /* pool rows per query */
#define RB DHS_MLA_ROW_BYTES
#define TOL 8e-3                 /* x vmax */
#define TOL_ABS 1e-6
#define SENT 0x7fbadbadu         /* a NaN pattern: an output left alone keeps it */
#define GUARD 65536              /* bytes of guard after the workspace and after the outputs */
#define GPAT 0x5a                /* the workspace guard's byte */
#define NOUT_MAX ((size_t)MAXQ * DHS_MLA_MAX_HEADS * DHS_MLA_DV)

static int n_sm;
static uint32_t *h_sent;         /* NOUT_MAX + GUARD / 4 sentinels */
static double worst_rel;         /* max |gpu - spec| / vmax */
static int worst_case = -1;
static long outputs_checked, sent_checked;

/* ------------------------------------------------------------------ one case */
typedef struct mcase {
    int32_t nq, nh, k;
    int nvmode;     /* NV_RAND, NV_ALL (every nv = k), NV_NONE (every nv 0 or -1) */
    int32_t splits; /* > 0 as given; SPL_PLAN: dhs_mla_mh_splits on the device's SMs; SPL_RAND: 1..32 */
    float sm_scale; /* > 0 as given; 0: 1/sqrt(576); -1: random in [0.01, 0.2] */
    float qscale;   /* query magnitude factor (values in [-2, 2] x qscale); 0: random in [8, 32] */
    int odd;        /* 1: every row's tile scales times 1..1.5 (not powers of two: V needs its bf16 rounding) */
    int32_t cluster; /* >= 0 as given; CL_PLAN: splits and cluster from dhs_mla_mh_plan with the device's
                        cluster fit; CL_RAND: a random divisor of splits in 2..16 the device holds */
} mcase;

enum { NV_RAND, NV_ALL, NV_NONE };
#define SPL_PLAN 0
#define SPL_RAND (-1)
#define CL_PLAN (-1)
#define CL_RAND (-2)
static int32_t cl_fit[DHS_MLA_MAX_CLUSTER + 1]; /* dhs_mla_mh_cluster_fit of the device */
static long cluster_cases, cluster_one, cluster_same; /* cases with clusters; with one per query; compared without */
static long variant_same;  /* cases where variants 0, 3 and 5 (the overlapped kernels) were compared bit for bit */
static int launch_variant = -1; /* launch(): dhs_mla_mh_attend (-1) or dhs_mla_mh_attend_kernel with this variant */

/* one random row; its max |V| (the spec's decoded, bf16-rounded first 512 values) in *vmax */
static void random_row(uint64_t *rng, int odd, uint8_t *row, float *vmax)
{
    float lat[DHS_REF_LAT];
    const float mag = ldexpf(1.0f, (int)dhs_rng_below(rng, 7) - 3);
    for (int i = 0; i < DHS_REF_LAT; i++) lat[i] = th_unif(rng) * mag;
    dhs_ref_row_encode(lat, row);
    if (odd) {
        float sc[4];
        memcpy(sc, row + DHS_MLA_DV, sizeof sc);
        for (int t = 0; t < 4; t++) sc[t] *= 1.0f + 0.5f * dhs_rng_f24(rng);
        memcpy(row + DHS_MLA_DV, sc, sizeof sc);
    }
    dhs_ref_row_decode(row, lat);
    float m = 0.0f;
    for (int j = 0; j < DHS_MLA_DV; j++) {
        const float v = fabsf(dhs_ref_bf16_decode(dhs_ref_bf16_encode(lat[j])));
        if (v > m) m = v;
    }
    *vmax = m;
}

static int32_t draw_nv(uint64_t *rng, int mode, int32_t k, int first)
{
    if (mode == NV_ALL) return k;
    if (mode == NV_NONE) return dhs_rng_below(rng, 2) ? 0 : -1;
    const int r = (int)dhs_rng_below(rng, 10);
    if (!first && r == 0) return 0;
    if (!first && r == 1) return -1;
    if (r < 5) return 1 + (int32_t)dhs_rng_below(rng, k);
    return k;
}

/* the locations of query qi: nv[qi] random ones in [0, P), then -1 */
static void draw_loc(uint64_t *rng, int32_t k, int32_t nv, int32_t P, int32_t *loc)
{
    for (int32_t e = 0; e < k; e++) loc[e] = e < nv ? (int32_t)dhs_rng_below(rng, P) : -1;
}

static void draw_q(uint64_t *rng, float qs, int32_t nh, uint16_t *q)
{
    for (int64_t i = 0; i < (int64_t)nh * DHS_MLA_DQK; i++) q[i] = dhs_ref_bf16_encode(2.0f * th_unif(rng) * qs);
}

/* fills out (and its guard) with the sentinel and the workspace with byte `poison` (its guard with GPAT),
   launches, waits, copies the outputs back and checks both guards; returns the launcher's status */
static dhs_status launch(const dhs_mla_mh_desc *d, const uint16_t *q, const uint8_t *const *base, const int32_t *loc,
                         const int32_t *nv, uint8_t *part, uint64_t pb, int poison, float *out, float *h_out,
                         cudaStream_t st, const char *what, int cno)
{
    const size_t nout = (size_t)d->nq * d->n_heads * DHS_MLA_DV;
    CK(cudaMemcpy(out, h_sent, nout * 4 + GUARD, cudaMemcpyHostToDevice));
    CK(cudaMemset(part, poison, pb));
    CK(cudaMemset(part + pb, GPAT, GUARD));
    CK(cudaDeviceSynchronize());
    const dhs_status s = launch_variant < 0
                             ? dhs_mla_mh_attend(d, q, base, loc, nv, (float *)part, out, (void *)st)
                             : dhs_mla_mh_attend_kernel(d, launch_variant, q, base, loc, nv, (float *)part, out, (void *)st);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    CK(cudaMemcpy(h_out, out, nout * 4, cudaMemcpyDeviceToHost));
    uint8_t *g = th_alloc(GUARD);
    CK(cudaMemcpy(g, part + pb, GUARD, cudaMemcpyDeviceToHost));
    int bad = -1;
    for (int i = 0; i < GUARD && bad < 0; i++)
        if (g[i] != GPAT) bad = i;
    CHECKF(bad < 0, "case %d (%s): the workspace guard changed at byte %d past the %llu bytes of the partials", cno,
           what, bad, (unsigned long long)pb);
    CK(cudaMemcpy(g, (uint8_t *)out + nout * 4, GUARD, cudaMemcpyDeviceToHost));
    bad = memcmp(g, h_sent, GUARD) != 0;
    CHECKF(!bad, "case %d (%s): the output guard changed (past %zu outputs)", cno, what, nout);
    free(g);
    return s;
}

/* the first output index where a and b differ in bits over n floats; -1 when identical */
static int64_t first_diff(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (th_fbits(a[i]) != th_fbits(b[i])) return i;
    return -1;
}

static void free_dev(void *const *p, int n)
{
    for (int i = 0; i < n; i++) CK(cudaFree(p[i]));
}

/* the same bits in o1 and o2 (n outputs of nh heads), else a failure naming the first difference */
static void check_same_bits(const float *o1, const float *o2, int64_t n, int32_t nh, int cno, const char *what)
{
    const int64_t i = first_diff(o1, o2, n);
    CHECKF(i < 0, "case %d: %s: other bits at q %d h %d value %d: %.9g vs %.9g", cno, what,
           i < 0 ? 0 : (int)(i / ((int64_t)nh * DHS_MLA_DV)), i < 0 ? 0 : (int)(i / DHS_MLA_DV % nh),
           i < 0 ? 0 : (int)(i % DHS_MLA_DV), i < 0 ? 0.0 : (double)o1[i], i < 0 ? 0.0 : (double)o2[i]);
}

/* GPU vs spec for query qi: the outputs out of tolerance (the first reported in *first); updates the worst */
static long compare_query(const float *g, const float *r, int32_t nh, float vmax, int64_t *first, double *worst)
{
    long nbad = 0;
    *first = -1;
    const double tol = TOL * (double)vmax + TOL_ABS;
    for (int64_t i = 0; i < (int64_t)nh * DHS_MLA_DV; i++) {
        const double diff = fabs((double)g[i] - (double)r[i]);
        if (!(diff <= tol)) { /* NaN too */
            if (nbad++ == 0) *first = i;
        }
        double rel = vmax > 0 ? diff / vmax : diff;
        if (rel != rel) rel = INFINITY; /* a NaN output */
        if (rel > *worst) *worst = rel;
    }
    return nbad;
}

static void run_case(const mcase *mc, int cno, uint64_t *rng)
{
    const int32_t nq = mc->nq, nh = mc->nh, k = mc->k;
    int32_t splits = mc->splits;
    if (splits == SPL_PLAN) splits = dhs_mla_mh_splits(nq, nh, k, n_sm);
    if (splits == SPL_RAND) splits = 1 + (int32_t)dhs_rng_below(rng, DHS_MLA_MAX_SPLITS);
    int32_t cluster = mc->cluster;
    if (cluster >= 2 && cl_fit[cluster] <= 0) cluster = CL_RAND; /* a size this device does not hold */
    if (cluster == CL_PLAN) dhs_mla_mh_plan(nq, nh, k, n_sm, cl_fit, &splits, &cluster);
    if (cluster == CL_RAND) { /* a random divisor of splits the device holds, else none */
        int32_t div[DHS_MLA_MAX_CLUSTER], nd = 0;
        for (int32_t c = 2; c <= DHS_MLA_MAX_CLUSTER; c++)
            if (splits % c == 0 && cl_fit[c] > 0) div[nd++] = c;
        cluster = nd ? div[dhs_rng_below(rng, nd)] : 0;
    }
    cluster_cases += cluster >= 2, cluster_one += cluster >= 2 && cluster == splits;
    float sm = mc->sm_scale;
    if (sm == 0.0f) sm = 1.0f / sqrtf((float)DHS_MLA_DQK);
    if (sm < 0.0f) sm = 0.01f + 0.19f * dhs_rng_f24(rng);
    float qs = mc->qscale > 0 ? mc->qscale : 8.0f + 24.0f * dhs_rng_f24(rng);
    const dhs_mla_mh_desc d = {nq, nh, k, splits, sm, cluster};
    CHECKF(dhs_mla_mh_check(&d) == DHS_OK, "case %d: desc fails its check", cno);
    const size_t nout = (size_t)nq * nh * DHS_MLA_DV, nqv = (size_t)nq * nh * DHS_MLA_DQK;
    const uint64_t pb = dhs_mla_mh_part_bytes(&d);

    /* host data: each query its own pool of P rows */
    int32_t P[MAXQ], nv[MAXQ];
    int64_t off[MAXQ], total = 0;
    for (int32_t qi = 0; qi < nq; qi++) {
        P[qi] = 1 + (int32_t)dhs_rng_below(rng, MAXP);
        off[qi] = total;
        total += P[qi];
        nv[qi] = draw_nv(rng, mc->nvmode, k, qi == 0);
    }
    uint8_t *pool = th_alloc((size_t)total * RB);
    float *rvmax = th_alloc(sizeof(float) * (size_t)total);
    for (int64_t r = 0; r < total; r++) random_row(rng, mc->odd, pool + r * RB, &rvmax[r]);
    int32_t *loc = th_alloc(sizeof(int32_t) * (size_t)nq * k);
    uint16_t *q = th_alloc(2 * nqv);
    for (int32_t qi = 0; qi < nq; qi++) {
        draw_loc(rng, k, nv[qi], P[qi], loc + (int64_t)qi * k);
        draw_q(rng, qs, nh, q + (int64_t)qi * nh * DHS_MLA_DQK);
    }
    int n_valid = 0, sum_nv = 0;
    for (int32_t qi = 0; qi < nq; qi++) n_valid += nv[qi] > 0, sum_nv += nv[qi] > 0 ? nv[qi] : 0;

    /* device */
    uint8_t *d_pool, *d_part;
    const uint8_t **d_base;
    uint16_t *d_q;
    int32_t *d_loc, *d_nv;
    float *d_out;
    CK(cudaMalloc((void **)&d_pool, (size_t)total * RB));
    CK(cudaMalloc((void **)&d_base, sizeof(void *) * MAXQ));
    CK(cudaMalloc((void **)&d_q, 2 * nqv));
    CK(cudaMalloc((void **)&d_loc, sizeof(int32_t) * (size_t)nq * k));
    CK(cudaMalloc((void **)&d_nv, sizeof(int32_t) * MAXQ));
    CK(cudaMalloc((void **)&d_part, pb + GUARD));
    CK(cudaMalloc((void **)&d_out, nout * 4 + GUARD));
    const uint8_t *hb[MAXQ];
    for (int32_t qi = 0; qi < nq; qi++) hb[qi] = d_pool + off[qi] * RB;
    CK(cudaMemcpy(d_pool, pool, (size_t)total * RB, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_base, hb, sizeof(void *) * (size_t)nq, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_q, q, 2 * nqv, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_loc, loc, sizeof(int32_t) * (size_t)nq * k, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_nv, nv, sizeof(int32_t) * (size_t)nq, cudaMemcpyHostToDevice));

    float *o1 = th_alloc(nout * 4), *o2 = th_alloc(nout * 4), *ref = th_alloc(nout * 4);
    dhs_status st = launch(&d, d_q, d_base, d_loc, d_nv, d_part, pb, 0xff, d_out, o1, NULL, "first launch", cno);
    CHECKF(st == DHS_OK, "case %d: dhs_mla_mh_attend returned %d (%s)", cno, (int)st, dhs_status_str(st));
    if (st != DHS_OK) goto done;

    /* 2. queries with nv <= 0: untouched */
    for (int32_t qi = 0; qi < nq; qi++) {
        if (nv[qi] > 0) continue;
        const float *g = o1 + (size_t)qi * nh * DHS_MLA_DV;
        int64_t bad = -1;
        for (int64_t i = 0; i < (int64_t)nh * DHS_MLA_DV && bad < 0; i++)
            if (th_fbits(g[i]) != SENT) bad = i;
        sent_checked++;
        CHECKF(bad < 0, "case %d q %d (nv %d): output written at head %d value %d (0x%08x)", cno, (int)qi, (int)nv[qi],
               bad < 0 ? 0 : (int)(bad / DHS_MLA_DV), bad < 0 ? 0 : (int)(bad % DHS_MLA_DV),
               bad < 0 ? 0u : th_fbits(g[bad]));
    }

    /* 3a. the same launch again (the workspace poisoned with zeros instead of NaN): the same bits */
    st = launch(&d, d_q, d_base, d_loc, d_nv, d_part, pb, 0x00, d_out, o2, NULL, "second launch", cno);
    CHECKF(st == DHS_OK, "case %d: second launch returned %d", cno, (int)st);
    check_same_bits(o1, o2, (int64_t)nout, nh, cno, "a second launch");

    /* 3d. variants 0, 3 and 5 (k_mla_mh and the overlapped k_mla_ws with either split of P V: the same
       algorithm in the same order) give the bits of the default launch, with or without clusters */
    static const int cmp_variants[] = {0, 3, 5};
    for (int i = 0; i < 3; i++) {
        char what[48];
        snprintf(what, sizeof what, "variant %d against the default", cmp_variants[i]);
        launch_variant = cmp_variants[i];
        st = launch(&d, d_q, d_base, d_loc, d_nv, d_part, pb, i ? 0x7f : 0xff, d_out, o2, NULL, what, cno);
        launch_variant = -1;
        CHECKF(st == DHS_OK, "case %d: %s: returned %d", cno, what, (int)st);
        check_same_bits(o1, o2, (int64_t)nout, nh, cno, what);
    }
    variant_same++;

    /* 3c. one cluster per query: the bits of the same splits without clusters (own workspace) */
    if (cluster >= 2 && cluster == splits) {
        dhs_mla_mh_desc d0 = d;
        d0.cluster = 0;
        const uint64_t pb0 = dhs_mla_mh_part_bytes(&d0);
        uint8_t *d_part0;
        CK(cudaMalloc((void **)&d_part0, pb0 + GUARD));
        st = launch(&d0, d_q, d_base, d_loc, d_nv, d_part0, pb0, 0xff, d_out, o2, NULL, "without clusters", cno);
        CHECKF(st == DHS_OK, "case %d: the launch without clusters returned %d", cno, (int)st);
        check_same_bits(o1, o2, (int64_t)nout, nh, cno, "the same splits without clusters");
        CK(cudaFree(d_part0));
        cluster_same++;
    }

    /* 3b. the rows at other locations of a bigger pool (the unused rows NaN), other bases, on a stream */
    {
        int64_t off2[MAXQ], total2 = 0;
        int32_t P2[MAXQ];
        for (int32_t qi = 0; qi < nq; qi++) {
            P2[qi] = P[qi] + 1 + (int32_t)dhs_rng_below(rng, (int64_t)P[qi] + 64);
            off2[qi] = total2;
            total2 += P2[qi];
        }
        uint8_t *pool2 = th_alloc((size_t)total2 * RB);
        memset(pool2, 0xff, (size_t)total2 * RB);
        int32_t *loc2 = th_alloc(sizeof(int32_t) * (size_t)nq * k), *perm = th_alloc(sizeof(int32_t) * 2 * (MAXP + 64));
        for (int32_t qi = 0; qi < nq; qi++) {
            for (int32_t i = 0; i < P2[qi]; i++) perm[i] = i;
            for (int32_t i = P2[qi] - 1; i > 0; i--) {
                const int32_t j = (int32_t)dhs_rng_below(rng, (int64_t)i + 1), t = perm[i];
                perm[i] = perm[j], perm[j] = t;
            }
            for (int32_t r = 0; r < P[qi]; r++) /* old row r -> new row perm[r] */
                memcpy(pool2 + (off2[qi] + perm[r]) * RB, pool + (off[qi] + r) * RB, RB);
            for (int32_t e = 0; e < k; e++) {
                const int32_t l = loc[(int64_t)qi * k + e];
                loc2[(int64_t)qi * k + e] = e < nv[qi] ? perm[l] : -1;
            }
        }
        uint8_t *d_pool2;
        const uint8_t **d_base2;
        int32_t *d_loc2;
        CK(cudaMalloc((void **)&d_pool2, (size_t)total2 * RB));
        CK(cudaMalloc((void **)&d_base2, sizeof(void *) * MAXQ));
        CK(cudaMalloc((void **)&d_loc2, sizeof(int32_t) * (size_t)nq * k));
        const uint8_t *hb2[MAXQ];
        for (int32_t qi = 0; qi < nq; qi++) hb2[qi] = d_pool2 + off2[qi] * RB;
        CK(cudaMemcpy(d_pool2, pool2, (size_t)total2 * RB, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_base2, hb2, sizeof(void *) * (size_t)nq, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_loc2, loc2, sizeof(int32_t) * (size_t)nq * k, cudaMemcpyHostToDevice));
        cudaStream_t str;
        CK(cudaStreamCreate(&str));
        st = launch(&d, d_q, d_base2, d_loc2, d_nv, d_part, pb, 0x7f, d_out, o2, str, "moved rows", cno);
        CHECKF(st == DHS_OK, "case %d: the launch on moved rows returned %d", cno, (int)st);
        check_same_bits(o1, o2, (int64_t)nout, nh, cno, "the rows at other locations");
        CK(cudaStreamDestroy(str));
        CK(cudaFree(d_pool2));
        CK(cudaFree(d_base2));
        CK(cudaFree(d_loc2));
        free(pool2), free(loc2), free(perm);
    }

    /* 1. the spec (host pointers) */
    {
        const uint8_t *hbase[MAXQ];
        for (int32_t qi = 0; qi < nq; qi++) hbase[qi] = pool + off[qi] * RB;
        for (size_t i = 0; i < nout; i++) memcpy(ref + i, &h_sent[i], 4);
        st = dhs_mla_mh_ref(&d, q, hbase, loc, nv, ref);
        CHECKF(st == DHS_OK, "case %d: dhs_mla_mh_ref returned %d (%s)", cno, (int)st, dhs_status_str(st));
        long nbad = 0;
        int bq = -1;
        int64_t bi = -1;
        double cworst = 0;
        float bvmax = 0;
        for (int32_t qi = 0; qi < nq && st == DHS_OK; qi++) {
            if (nv[qi] <= 0) continue;
            float vmax = 0.0f;
            for (int32_t e = 0; e < nv[qi]; e++) {
                const float v = rvmax[off[qi] + loc[(int64_t)qi * k + e]];
                if (v > vmax) vmax = v;
            }
            int64_t first;
            const size_t o = (size_t)qi * nh * DHS_MLA_DV;
            const long nb = compare_query(o1 + o, ref + o, nh, vmax, &first, &cworst);
            outputs_checked += (long)nh * DHS_MLA_DV;
            if (nb && nbad == 0) bq = qi, bi = first, bvmax = vmax;
            nbad += nb;
        }
        if (cworst > worst_rel || worst_case < 0) worst_rel = cworst, worst_case = cno;
        const size_t bo = bq < 0 ? 0 : (size_t)bq * nh * DHS_MLA_DV + (size_t)bi;
        CHECKF(nbad == 0,
               "case %d (nq %d heads %d k %d splits %d sm_scale %g qscale %g): %ld outputs beyond %g x vmax; the "
               "first: q %d (nv %d) head %d value %d: gpu %.9g spec %.9g (|diff| / vmax %.3g, vmax %g)",
               cno, (int)nq, (int)nh, (int)k, (int)splits, (double)sm, (double)qs, nbad, TOL, bq,
               bq < 0 ? 0 : (int)nv[bq], bq < 0 ? 0 : (int)(bi / DHS_MLA_DV), bq < 0 ? 0 : (int)(bi % DHS_MLA_DV),
               bq < 0 ? 0.0 : (double)o1[bo], bq < 0 ? 0.0 : (double)ref[bo],
               bq < 0 ? 0.0 : fabs((double)o1[bo] - (double)ref[bo]) / (double)bvmax, (double)bvmax);
        printf("case %2d: nq %d heads %3d k %4d splits %2d cluster %2d sm_scale %.4f qscale %5.2f%s valid queries %d "
               "rows %6d: max |gpu - spec| / vmax %.3g\n",
               cno, (int)nq, (int)nh, (int)k, (int)splits, (int)cluster, (double)sm, (double)qs,
               mc->odd ? " odd scales" : "", n_valid, sum_nv, cworst);
        fflush(stdout);
    }

    /* 3c. the other queries' rows, locations, counts and queries changed: query 0's bits stay */
    if (nq > 1) {
        for (int32_t qi = 1; qi < nq; qi++) {
            nv[qi] = draw_nv(rng, NV_RAND, k, 0);
            for (int64_t r = off[qi]; r < off[qi] + P[qi]; r++) random_row(rng, mc->odd, pool + r * RB, &rvmax[r]);
            draw_loc(rng, k, nv[qi], P[qi], loc + (int64_t)qi * k);
            draw_q(rng, qs, nh, q + (int64_t)qi * nh * DHS_MLA_DQK);
        }
        CK(cudaMemcpy(d_pool + off[1] * RB, pool + off[1] * RB, (size_t)(total - off[1]) * RB, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_q, q, 2 * nqv, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_loc, loc, sizeof(int32_t) * (size_t)nq * k, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_nv, nv, sizeof(int32_t) * (size_t)nq, cudaMemcpyHostToDevice));
        st = launch(&d, d_q, d_base, d_loc, d_nv, d_part, pb, 0xff, d_out, o2, NULL, "other queries changed", cno);
        CHECKF(st == DHS_OK, "case %d: the launch with other queries changed returned %d", cno, (int)st);
        check_same_bits(o1, o2, (int64_t)nh * DHS_MLA_DV, nh, cno, "query 0 with the other queries changed");
    }

done:
    free_dev((void *[]){d_pool, (void *)d_base, d_q, d_loc, d_nv, d_part, d_out}, 7);
    free(pool), free(rvmax), free(loc), free(q), free(o1), free(o2), free(ref);
}

/* ------------------------------------------------------------------ argument errors */
static void test_args(uint64_t *rng)
{
    const int32_t nq = 2, nh = 64, k = 64, P = 100;
    const dhs_mla_mh_desc good = {nq, nh, k, 2, 1.0f / 24.0f, 0};
    const uint64_t pb = dhs_mla_mh_part_bytes(&good);
    const size_t nout = (size_t)nq * nh * DHS_MLA_DV, nqv = (size_t)nq * nh * DHS_MLA_DQK;
    uint8_t *pool = th_alloc((size_t)nq * P * RB);
    float vm;
    for (int32_t r = 0; r < nq * P; r++) random_row(rng, 0, pool + (size_t)r * RB, &vm);
    int32_t loc[2 * 64], nv[2] = {k, 40};
    uint16_t *q = th_alloc(2 * nqv);
    for (int32_t qi = 0; qi < nq; qi++) draw_loc(rng, k, nv[qi], P, loc + qi * k);
    draw_q(rng, 1.0f, nh * nq, q);
    uint8_t *d_pool, *d_part;
    const uint8_t **d_base;
    uint16_t *d_q;
    int32_t *d_loc, *d_nv;
    float *d_out;
    CK(cudaMalloc((void **)&d_pool, (size_t)nq * P * RB));
    CK(cudaMalloc((void **)&d_base, sizeof(void *) * (size_t)nq));
    CK(cudaMalloc((void **)&d_q, 2 * nqv + 64));
    CK(cudaMalloc((void **)&d_loc, sizeof loc));
    CK(cudaMalloc((void **)&d_nv, sizeof nv));
    CK(cudaMalloc((void **)&d_part, pb + GUARD));
    CK(cudaMalloc((void **)&d_out, nout * 4 + GUARD));
    const uint8_t *hb[2] = {d_pool, d_pool + (size_t)P * RB};
    CK(cudaMemcpy(d_pool, pool, (size_t)nq * P * RB, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_base, hb, sizeof hb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_q, q, 2 * nqv, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_loc, loc, sizeof loc, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_nv, nv, sizeof nv, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_out, h_sent, nout * 4 + GUARD, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_part, 0x33, pb + GUARD));
    CK(cudaDeviceSynchronize());

#define ATT(dp, qp, bp, lp, np, pp, op) dhs_mla_mh_attend((dp), (qp), (bp), (lp), (np), (float *)(pp), (op), NULL)
    int n_err = 0;
#define BAD_CALL(call)                                                                                       \
    do {                                                                                                     \
        const dhs_status s_ = (call);                                                                        \
        n_err++;                                                                                             \
        CHECKF(s_ == DHS_ERR_INVALID_ARG || s_ == DHS_ERR_MISALIGNED, "%s returned %d (%s), want an error", \
               #call, (int)s_, dhs_status_str(s_));                                                          \
    } while (0)
    BAD_CALL(ATT(NULL, d_q, d_base, d_loc, d_nv, d_part, d_out));
    BAD_CALL(ATT(&good, NULL, d_base, d_loc, d_nv, d_part, d_out));
    BAD_CALL(ATT(&good, d_q, NULL, d_loc, d_nv, d_part, d_out));
    BAD_CALL(ATT(&good, d_q, d_base, NULL, d_nv, d_part, d_out));
    BAD_CALL(ATT(&good, d_q, d_base, d_loc, NULL, d_part, d_out));
    BAD_CALL(ATT(&good, d_q, d_base, d_loc, d_nv, NULL, d_out));
    BAD_CALL(ATT(&good, d_q, d_base, d_loc, d_nv, d_part, NULL));
    static const dhs_mla_mh_desc bad_desc[] = {
        {2, 32, 64, 2, 0.05f, 0},  {2, 64, 64, 0, 0.05f, 0},  {2, 96, 64, 2, 0.05f, 0},  {2, 192, 64, 2, 0.05f, 0},
        {2, 0, 64, 2, 0.05f, 0},   {2, 64, 64, 33, 0.05f, 0}, {2, 64, 0, 2, 0.05f, 0},   {2, 64, 2049, 2, 0.05f, 0},
        {2, 64, 64, 2, 0.0f, 0},   {2, 64, 64, 2, -0.05f, 0}, {-1, 64, 64, 2, 0.05f, 0}, {2, 64, 64, 2, 0.05f, 3},
        {2, 64, 64, 4, 0.05f, 17}, {2, 64, 64, 6, 0.05f, 4},  {2, 64, 64, 2, 0.05f, -1},
    };
    for (size_t i = 0; i < sizeof bad_desc / sizeof bad_desc[0]; i++) {
        const dhs_status s = ATT(&bad_desc[i], d_q, d_base, d_loc, d_nv, d_part, d_out);
        n_err++;
        CHECKF(s == DHS_ERR_INVALID_ARG, "desc {nq %d, heads %d, k %d, splits %d, sm_scale %g}: %d (%s), want %s",
               (int)bad_desc[i].nq, (int)bad_desc[i].n_heads, (int)bad_desc[i].k, (int)bad_desc[i].splits,
               (double)bad_desc[i].sm_scale, (int)s, dhs_status_str(s), dhs_status_str(DHS_ERR_INVALID_ARG));
    }
    dhs_mla_mh_desc dn = good;
    dn.sm_scale = NAN;
    BAD_CALL(ATT(&dn, d_q, d_base, d_loc, d_nv, d_part, d_out));
    dn.sm_scale = INFINITY;
    BAD_CALL(ATT(&dn, d_q, d_base, d_loc, d_nv, d_part, d_out));
    /* misaligned by 4 bytes */
    BAD_CALL(ATT(&good, d_q + 2, d_base, d_loc, d_nv, d_part, d_out));
    BAD_CALL(ATT(&good, d_q, d_base, d_loc, d_nv, d_part + 4, d_out));
    BAD_CALL(ATT(&good, d_q, d_base, d_loc, d_nv, d_part, d_out + 1));
    /* nq = 0: nothing to do */
    dn = good;
    dn.nq = 0;
    CHECK_ST(ATT(&dn, d_q, d_base, d_loc, d_nv, d_part, d_out), DHS_OK);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    /* nothing launched: the outputs (and their guard) and the workspace (and its guard) as filled */
    float *o = th_alloc(nout * 4 + GUARD);
    uint8_t *pw = th_alloc(pb + GUARD);
    CK(cudaMemcpy(o, d_out, nout * 4 + GUARD, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(pw, d_part, pb + GUARD, cudaMemcpyDeviceToHost));
    int same = memcmp(o, h_sent, nout * 4 + GUARD) == 0;
    for (uint64_t i = 0; i < pb + GUARD && same; i++) same = pw[i] == 0x33;
    CHECKF(same, "a rejected call (%d of them) or nq = 0 wrote the outputs or the workspace", n_err);
    /* the valid call does write them (so the check above can fail) */
    CHECK_ST(ATT(&good, d_q, d_base, d_loc, d_nv, d_part, d_out), DHS_OK);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(o, d_out, nout * 4, cudaMemcpyDeviceToHost));
    long written = 0;
    for (size_t i = 0; i < nout; i++) written += th_fbits(o[i]) != SENT;
    CHECKF(written == (long)nout, "the valid call wrote %ld of %zu outputs", written, nout);
    if (cl_fit[2] > 0) { /* one cluster per query needs no workspace: part NULL is valid, and gives the same bits */
        float *o2 = th_alloc(nout * 4);
        dhs_mla_mh_desc dc = good;
        dc.cluster = dc.splits;
        CHECK(dhs_mla_mh_part_bytes(&dc) == 0);
        CK(cudaMemcpy(d_out, h_sent, nout * 4, cudaMemcpyHostToDevice)); /* what it does not write keeps the sentinel */
        CHECK_ST(ATT(&dc, d_q, d_base, d_loc, d_nv, NULL, d_out), DHS_OK);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(o2, d_out, nout * 4, cudaMemcpyDeviceToHost));
        long diff = 0;
        for (size_t i = 0; i < nout; i++) diff += th_fbits(o[i]) != th_fbits(o2[i]);
        CHECKF(diff == 0, "one cluster of %d splits: %ld outputs differ from the launch without clusters",
               (int)dc.splits, diff);
        free(o2);
    }
#undef BAD_CALL
#undef ATT
    free(o), free(pw), free(pool), free(q);
    free_dev((void *[]){d_pool, (void *)d_base, d_q, d_loc, d_nv, d_part, d_out}, 7);
}

/* the comparison can fail: one output moved by just over the tolerance is the one flagged */
static void test_compare(void)
{
    const int32_t nh = 64;
    float *r = th_alloc(sizeof(float) * nh * DHS_MLA_DV), *g = th_alloc(sizeof(float) * nh * DHS_MLA_DV);
    for (int i = 0; i < nh * DHS_MLA_DV; i++) r[i] = g[i] = 0.25f * (float)((i % 17) - 8);
    const float vmax = 2.0f;
    int64_t first;
    double w = 0;
    CHECK(compare_query(g, r, nh, vmax, &first, &w) == 0 && first < 0 && w == 0);
    g[777] += (float)(1.001 * (TOL * vmax + TOL_ABS));
    g[901] += (float)(0.99 * (TOL * vmax));
    CHECK(compare_query(g, r, nh, vmax, &first, &w) == 1 && first == 777 && w > TOL);
    memcpy(&g[5], &h_sent[0], 4); /* a NaN */
    CHECK(compare_query(g, r, nh, vmax, &first, &w) == 2 && first == 5);
    free(r), free(g);
}

int main(void)
{
    TH_SKIP_WITHOUT_DEVICE();
    uint64_t rng = th_seed("test_mla_mh_cuda");
    struct cudaDeviceProp prop;
    int smem_optin = 0;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    printf("device: %s, sm_%d%d, %d SMs, %d bytes of shared memory per block (opt-in)\n", prop.name, prop.major,
           prop.minor, n_sm, smem_optin);
    CHECK_ST(dhs_mla_mh_cluster_fit(cl_fit), DHS_OK);
    printf("clusters of 1..%d blocks held at once:", DHS_MLA_MAX_CLUSTER);
    for (int c = 1; c <= DHS_MLA_MAX_CLUSTER; c++) printf(" %d", (int)cl_fit[c]);
    printf("\n");
    CHECKF(cl_fit[1] >= 1 && cl_fit[1] <= n_sm, "clusters of 1: %d held, %d SMs", (int)cl_fit[1], n_sm);
    h_sent = th_alloc(NOUT_MAX * 4 + GUARD);
    for (size_t i = 0; i < NOUT_MAX + GUARD / 4; i++) h_sent[i] = SENT;
    const double t0 = th_now();

    test_compare();
    test_args(&rng);

    const int small = th_scale() < 0.5; /* compute-sanitizer: fewer and smaller cases */
    static const mcase fixed[] = {
        /* nq, heads, k, nv mode, splits, sm_scale, qscale, odd, cluster */
        {6, 128, 2048, NV_ALL, SPL_PLAN, 0.0f, 1.0f, 0, 0},  /* the model's size, the device's plan */
        {1, 64, 1, NV_ALL, SPL_RAND, 0.0f, 1.0f, 0, 0},      /* one row; most splits empty */
        {2, 128, 63, NV_ALL, 32, 0.0f, 1.0f, 0, 0},          /* one partial tile, 31 empty splits */
        {3, 64, 64, NV_RAND, 1, -1.0f, 1.0f, 0, 0},          /* one whole tile */
        {2, 64, 65, NV_ALL, 2, 0.0f, 1.0f, 0, 0},            /* the second split: one row */
        {4, 128, 2048, NV_ALL, SPL_PLAN, 0.0f, 32.0f, 0, 0}, /* wide scores: rows underflow */
        {3, 64, 1000, NV_RAND, SPL_RAND, -1.0f, 0.0f, 0, 0}, /* wide, random scale and splits */
        {6, 64, 2048, NV_RAND, 32, 0.2f, 0.0f, 0, 0},        /* wide, the largest scale, 32 splits */
        {1, 128, 200, NV_NONE, SPL_PLAN, 0.0f, 1.0f, 0, 0},  /* no valid query */
        {3, 128, 200, NV_NONE, 3, 0.0f, 1.0f, 0, 0},
        {5, 128, 2048, NV_RAND, SPL_PLAN, 0.0f, 1.0f, 1, 0}, /* tile scales not powers of two */
        {2, 64, 1000, NV_RAND, SPL_RAND, -1.0f, 0.0f, 1, 0},
        {6, 128, 2048, NV_ALL, SPL_PLAN, 0.0f, 1.0f, 0, CL_PLAN},  /* the plan with clusters */
        {2, 64, 2048, NV_RAND, SPL_PLAN, 0.0f, 1.0f, 0, CL_PLAN},
        {4, 64, 2048, NV_ALL, 16, 0.0f, 32.0f, 0, 16},             /* one cluster of 16 per query, wide */
        {3, 128, 2048, NV_RAND, 32, -1.0f, 0.0f, 1, 8},            /* 4 clusters' partials per query */
        {3, 64, 2048, NV_RAND, 8, 0.0f, 1.0f, 0, 8},               /* one portable cluster per query */
        {2, 128, 1000, NV_RAND, 4, -1.0f, 0.0f, 1, 4},
        {2, 64, 65, NV_ALL, 6, 0.0f, 1.0f, 0, 3},                  /* clusters of empty splits */
        {3, 64, 1000, NV_RAND, 12, -1.0f, 0.0f, 0, CL_RAND},
        {2, 128, 200, NV_NONE, 4, 0.0f, 1.0f, 0, 2},               /* no valid query, clusters */
    };
    static const int32_t ks[] = {1, 63, 64, 65, 200, 1000, 2048, 0 /* random */};
    int cases = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        mcase mc = fixed[i];
        if (small && mc.nq > 2) mc.nq = 2;
        run_case(&mc, cases++, &rng);
    }
    const int n_rand = small ? 4 : (int)(18 * th_scale()) + 2;
    for (int i = 0; i < n_rand; i++) {
        mcase mc;
        mc.nq = 1 + (int32_t)dhs_rng_below(&rng, small ? 2 : MAXQ);
        mc.nh = dhs_rng_below(&rng, 2) ? 128 : 64;
        mc.k = ks[dhs_rng_below(&rng, (int64_t)(sizeof ks / sizeof ks[0]))];
        if (mc.k == 0) mc.k = 1 + (int32_t)dhs_rng_below(&rng, DHS_MLA_MAXK);
        mc.nvmode = dhs_rng_below(&rng, 4) == 0 ? NV_ALL : NV_RAND;
        mc.splits = dhs_rng_below(&rng, 2) ? SPL_PLAN : SPL_RAND;
        mc.sm_scale = dhs_rng_below(&rng, 2) ? 0.0f : -1.0f;
        mc.qscale = dhs_rng_below(&rng, 3) == 0 ? 0.0f : 1.0f;
        mc.odd = dhs_rng_below(&rng, 4) == 0;
        mc.cluster = dhs_rng_below(&rng, 3) == 0 ? 0 : mc.splits == SPL_PLAN ? CL_PLAN : CL_RAND;
        run_case(&mc, cases++, &rng);
    }

    /* 6. the device is clean after every launch */
    const cudaError_t es = cudaDeviceSynchronize(), el = cudaGetLastError();
    CHECKF(es == cudaSuccess && el == cudaSuccess, "cudaDeviceSynchronize: %s, cudaGetLastError: %s",
           cudaGetErrorString(es), cudaGetErrorString(el));
    CHECKF(outputs_checked > 0 && sent_checked > 0, "vacuous: %ld outputs compared, %ld sentinel queries",
           outputs_checked, sent_checked);
    CHECKF(cl_fit[2] == 0 || (cluster_cases >= 4 && cluster_one >= 2 && cluster_same == cluster_one),
           "clusters held, but only %ld cases with them (%ld with one cluster per query, %ld compared without)",
           cluster_cases, cluster_one, cluster_same);
    printf("cases with clusters: %ld (one cluster per query: %ld)\n", cluster_cases, cluster_one);
    CHECKF(variant_same >= 20, "only %ld cases compared variants 0, 3 and 5", variant_same);
    printf("cases where variants 0, 3 and 5 gave the default's bits: %ld\n", variant_same);
    printf("cases: %d; outputs compared %ld; max |gpu - spec| / vmax %.3g (case %d; bound %g); %.1f s\n", cases,
           outputs_checked, worst_rel, worst_case, TOL, th_now() - t0);
    free(h_sent);
    return th_summary();
}
#endif
