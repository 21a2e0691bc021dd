/* test_mla_mh.c - the CPU specification of the multi-head sparse MLA decode attention and its split
 * plan (model/mla_mh.h), on the CPU:
 *   - the split count: in [1, min(32, ceil(k/64))]; its blocks nq * (n_heads/64) * splits in one wave of
 *     n_sm (unless one split already needs more); no count in one wave gives a shorter longest split;
 *     no smaller count gives the same longest split; the same on a second call; degenerate arguments give 1;
 *   - the split tiles: for every nv in 1..2048 and splits 1..32 the splits' tiles partition
 *     [0, ceil(nv/64)) in order, without gaps or overlaps, floor or ceil of nt/splits tiles each;
 *     the partials' bytes are the documented product;
 *   - dhs_mla_mh_ref against a double-precision softmax attention over the same K/V and Q (decoded here
 *     independently: dhs_ref_fp8_decode times the tile scale, rounded to bf16; exact max, exp2 in double,
 *     no bf16 rounding of p): seeded random cases with 64 and 128 heads, 1..4 queries, nv in 1..2048
 *     (1, 63, 64, 65, 2048 among them), splits 1..32 (more splits than tiles included), real rows
 *     (dhs_ref_row_encode of random latents, magnitudes 2^-3..2^3; one in four with its tile scales
 *     multiplied by 1..1.5, so that code x scale needs the bf16 rounding) at random locations of a pool,
 *     repeated locations, -1 padding after the valid entries: every output within 8e-3 x max|V| (over
 *     the query's valid rows); the worst relative error is printed and must be > 0 (the bound is not
 *     vacuous);
 *   - the spec's outputs are the bits of the header's algorithm transcribed literally here (its own row
 *     decode and split arithmetic), on small cases with 1, 32 and random splits;
 *   - a mutation: negating part of a selected row that dominates the softmax moves an output by more than
 *     the tolerance (the comparison can fail);
 *   - determinism: the same rows moved to other locations of a bigger pool (other base pointers, same
 *     entry order) give bit-identical outputs, and a query computed alone the same bits as in its batch;
 *     outputs of queries with nv <= 0 keep a NaN sentinel bit pattern;
 *   - a NaN code in a selected row makes every output of its query NaN, and no other query's;
 *   - argument errors (NULL pointers, n_heads 0/32/96/192, splits 0/33, k 0/2049, sm_scale <= 0, NaN or
 *     infinite, nq < 0, nv > k, a negative valid location, a NULL base of a valid query): the invalid
 *     status and out unchanged;
 *   - the overlapped kernel's shared-memory layout (dhs_mla_ws_chunk, dhs_mla_ws_code_chunk): chunks
 *     permuted within their 128-byte groups, 8-row ldmatrix reads and the producer's stores on 8 different
 *     bank groups, every code and RoPE chunk stored once (test_ws_layout);
 *   - its buffer hand-over (dhs_mla_ws_waits_free, dhs_mla_ws_frees) under random schedules of the producers
 *     and the two consumer groups, the named barriers counted as the hardware counts them: no deadlock, no
 *     arrival left pending or counted into the wrong use, no tile overwritten while a group needs it
 *     (test_ws_protocol);
 *   - without CUDA, dhs_mla_mh_attend answers DHS_ERR_UNSUPPORTED.
 * Prints its seed (DHS_TEST_SEED replays it). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/mla_mh.h"
#include "model/model.h"
#include "test_help.h"

#define TOL 8e-3
#define SENT 0x7fbadbadu /* a NaN pattern: an output left alone keeps it */
#define RB DHS_MLA_ROW_BYTES

static double worst_rel;  /* max |spec - double| / vmax over every checked output */
static long outputs_checked;

static void fill_sent(float *o, int64_t n)
{
    const uint32_t s = SENT;
    for (int64_t i = 0; i < n; i++) memcpy(o + i, &s, 4);
}

/* ------------------------------------------------------------------ split plan */
/* dhs_mla_mh_plan against its definition: every one-wave (splits, cluster) candidate enumerated */
static void plan_check(int32_t nq, int32_t nh, int32_t k, int32_t sm, const int32_t *fit, long *bad)
{
    int32_t S = -1, cl = -1;
    dhs_mla_mh_plan(nq, nh, k, sm, fit, &S, &cl);
    const int32_t base = dhs_mla_mh_splits(nq, nh, k, sm);
    const int64_t nt = (k + 63) / 64, groups = nh / 64, smax = nt < 32 ? nt : 32;
    int ok;
    if (!fit) {
        ok = S == base && cl == 0;
    } else {
        /* the best candidate by (tiles of the longest split, partials per query past DHS_MLA_PART_FEW
           (0 when within it), cluster size, splits), every pair compared with every other, in
           reverse order, so the result cannot come from the order */
        int64_t bper = 0, bS = 0, bcs = 0, bover = 0;
        for (int64_t cs = 16; cs >= 2; cs--)
            for (int64_t np = smax; np >= 1; np--) {
                if (fit[cs] <= 0 || cs * np > smax || nq * groups * np > fit[cs]) continue;
                const int64_t per = (nt + cs * np - 1) / (cs * np), over = np > DHS_MLA_PART_FEW ? np : 0;
                const int better = !bcs || per < bper ||
                                   (per == bper && (over < bover || (over == bover && (cs < bcs || (cs == bcs && cs * np < bS)))));
                if (better) bper = per, bS = cs * np, bcs = cs, bover = over;
            }
        if (bcs && bper <= (nt + base - 1) / base)
            ok = S == bS && cl == bcs && S % cl == 0 && nq * groups * (S / cl) <= fit[cl];
        else
            ok = S == base && cl == 0;
    }
    dhs_mla_mh_desc d = {nq, nh, k, S, 0.1f, cl};
    ok = ok && (nq <= 0 || nh <= 0 || k <= 0 || k > 2048 || (nh != 64 && nh != 128) || dhs_mla_mh_check(&d) == DHS_OK);
    if (!ok && (*bad)++ < 5)
        CHECKF(0, "plan(nq %d, heads %d, k %d, sm %d, fit %s) = (%d, %d), base %d", nq, nh, k, sm, fit ? "table" : "NULL",
               S, cl, base);
}

static void test_plan(uint64_t *rng)
{
    /* an H100's (dhs_mla_mh_cluster_fit on an H100 80GB HBM3, bench/RESULTS.md), only its portable
       sizes, none above 1, random */
    static const int32_t h100[17] = {0, 132, 66, 39, 30, 22, 17, 15, 15, 9, 7, 7, 7, 7, 7, 7, 7};
    static const int32_t portable[17] = {0, 132, 66, 39, 30, 22, 17, 15, 15};
    static const int32_t none[17] = {0, 132};
    int32_t rnd[17];
    const int32_t *tables[] = {NULL, h100, portable, none, rnd};
    static const int32_t ks[] = {1, 63, 64, 65, 640, 1000, 2048};
    long bad = 0;
    for (size_t ti = 0; ti < sizeof tables / sizeof tables[0]; ti++)
        for (int32_t nq = 1; nq <= 200; nq += nq < 24 ? 1 : 29)
            for (int32_t nh = 64; nh <= 128; nh += 64)
                for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                    if (tables[ti] == rnd) {
                        rnd[0] = 0, rnd[1] = 132;
                        for (int c = 2; c <= 16; c++) rnd[c] = (int32_t)dhs_rng_below(rng, 3) ? (int32_t)dhs_rng_below(rng, 70) : 0;
                    }
                    plan_check(nq, nh, ks[ki], 132, tables[ti], &bad);
                    plan_check(nq, nh, ks[ki], 1 + (int32_t)dhs_rng_below(rng, 300), tables[ti], &bad);
                }
    CHECKF(bad == 0, "%ld wrong plans", bad);
    static const int32_t fixed[][6] = { /* nq, heads, k, table (0 h100, 1 portable, 2 none): splits, cluster */
        {2, 64, 2048, 0, 32, 4},   /* one tile per block; clusters of 4 (16 of them), 8 partials per query:
                                      clusters of 2 leave 16 */
        {2, 128, 2048, 0, 32, 2},  /* 32 clusters of 4 do not fit (30): clusters of 2, 16 partials */
        {8, 64, 2048, 0, 16, 2},   /* two tiles per block: 64 clusters of 2 fit (66) */
        {8, 64, 2048, 1, 16, 2},
        {20, 64, 2048, 0, 6, 2},   /* 60 of 2 fit; 7 splits (5 tiles) would need 80 */
        {21, 64, 2048, 0, 6, 2},   /* 63 of 2 */
        {34, 64, 2048, 0, 3, 3},   /* 2 of 2 leave 16 tiles; 34 of 3 fit (39): one per query, no workspace */
        {20, 128, 2048, 0, 3, 0},  /* 40 of 3 do not fit (39), 40 of 2 give 16 tiles: the base plan (3 splits) */
        {8, 128, 2048, 0, 8, 2},   /* 64 of 2 */
        {2, 64, 128, 0, 2, 2},     /* k 128: two tiles, one cluster of 2 per query, no workspace */
        {132, 64, 2048, 0, 1, 0},  /* a split per query already fills the GPU */
        {8, 64, 2048, 2, 16, 0},   /* no clusters held: the base plan */
    };
    const int32_t *ft[] = {h100, portable, none};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        const int32_t *f = fixed[i];
        int32_t S, cl;
        dhs_mla_mh_plan(f[0], f[1], f[2], 132, ft[f[3]], &S, &cl);
        CHECKF(S == f[4] && cl == f[5], "plan(%d, %d, %d, 132, table %d) = (%d, %d), not (%d, %d)", f[0], f[1], f[2], f[3],
               S, cl, f[4], f[5]);
    }
    int32_t S = -1, cl = -1;
    dhs_mla_mh_plan(0, 64, 2048, 132, h100, &S, &cl);
    CHECK(S == 1 && cl == 0);
    dhs_mla_mh_plan(4, 64, 2048, 132, h100, NULL, NULL); /* NULL outputs: nothing written, no crash */
}

static void test_splits(uint64_t *rng)
{
    static const int32_t ks[] = {1, 2, 63, 64, 65, 127, 128, 129, 500, 1000, 1984, 2047, 2048};
    static const int32_t sms[] = {1, 2, 7, 8, 78, 114, 132, 133, 264, 1000, 100000};
    long bad = 0;
    for (int32_t nq = 1; nq <= 300; nq += (nq < 40 ? 1 : 37))
        for (int32_t nh = 64; nh <= 128; nh += 64)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0] + 4; ki++)
                for (size_t si = 0; si < sizeof sms / sizeof sms[0] + 2; si++) {
                    const int32_t k = ki < sizeof ks / sizeof ks[0] ? ks[ki] : 1 + (int32_t)dhs_rng_below(rng, 2048);
                    const int32_t sm = si < sizeof sms / sizeof sms[0] ? sms[si] : 1 + (int32_t)dhs_rng_below(rng, 400);
                    const int32_t s = dhs_mla_mh_splits(nq, nh, k, sm);
                    int64_t cap = (k + 63) / 64;
                    if (cap > 32) cap = 32;
                    const int64_t blocks = (int64_t)nq * (nh / 64);
                    const int64_t nt = (k + 63) / 64;
                    int ok = s >= 1 && s <= cap && s == dhs_mla_mh_splits(nq, nh, k, sm);
                    ok = ok && (blocks * s <= sm || s == 1); /* one wave */
                    for (int64_t x = 1; ok && x <= cap && blocks * x <= sm; x++) /* no one-wave count is faster */
                        ok = (nt + x - 1) / x >= (nt + s - 1) / s;
                    if (ok && s > 1) /* and no smaller count as fast */
                        ok = (nt + s - 2) / (s - 1) > (nt + s - 1) / s;
                    if (!ok && bad++ < 5) CHECKF(0, "splits(nq %d, heads %d, k %d, sm %d) = %d", nq, nh, k, sm, s);
                }
    CHECKF(bad == 0, "%ld wrong split counts", bad);
    static const int32_t fixed[][5] = { /* nq, heads, k, SMs: splits */
        {1, 64, 2048, 132, 32},
        {1, 128, 2048, 132, 32},
        {132, 64, 2048, 132, 1},
        {16, 128, 2048, 132, 4},
        {8, 64, 2048, 132, 16},
        {20, 64, 2048, 132, 6},
        {20, 128, 2048, 132, 3},
        {200, 128, 2048, 132, 1},
        {1, 64, 100, 132, 2},
        {0, 64, 2048, 132, 1},
        {4, 0, 2048, 132, 1},
        {4, 64, 0, 132, 1},
        {4, 64, 2048, 0, 1},
        {-3, 64, 2048, -1, 1},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        const int32_t *f = fixed[i], got = dhs_mla_mh_splits(f[0], f[1], f[2], f[3]);
        CHECKF(got == f[4], "splits(%d, %d, %d, %d) = %d, not %d", f[0], f[1], f[2], f[3], got, f[4]);
    }

    test_plan(rng);

    bad = 0;
    for (int32_t nv = 1; nv <= DHS_MLA_MAXK; nv++)
        for (int32_t S = 1; S <= 32; S++) {
            const int32_t nt = (nv + 63) / 64;
            int32_t next = 0;
            for (int32_t s = 0; s < S; s++) {
                int32_t t0 = -7, t1 = -7;
                dhs_mla_mh_split_tiles(nv, S, s, &t0, &t1);
                const int32_t n = t1 - t0;
                int ok = t0 == next && (n == nt / S || n == (nt + S - 1) / S) && t1 <= nt;
                if (!ok && bad++ < 5) CHECKF(0, "nv %d splits %d split %d: tiles [%d, %d) after %d", nv, S, s, t0, t1, next);
                next = t1;
            }
            if (next != nt && bad++ < 5) CHECKF(0, "nv %d splits %d: tiles end at %d, not %d", nv, S, next, nt);
        }
    CHECKF(bad == 0, "%ld wrong split tiles", bad);
    int32_t t0 = -1, t1 = -1;
    dhs_mla_mh_split_tiles(0, 4, 0, &t0, &t1);
    CHECK(t0 == 0 && t1 == 0);
    dhs_mla_mh_split_tiles(100, 4, 4, &t0, &t1);
    CHECK(t0 == t1);
    dhs_mla_mh_split_tiles(2048, 32, 31, &t0, &t1);
    CHECK(t0 == 31 && t1 == 32);

    dhs_mla_mh_desc d = {3, 128, 2048, 7, 0.05f, 0};
    CHECK(dhs_mla_mh_part_bytes(&d) == 3ull * 7 * 128 * 514 * 4);
    d.cluster = 1; /* 1: no clusters either */
    CHECK(dhs_mla_mh_part_bytes(&d) == 3ull * 7 * 128 * 514 * 4);
    d.cluster = 7; /* one cluster per query: no workspace */
    CHECK(dhs_mla_mh_part_bytes(&d) == 0 && dhs_mla_mh_check(&d) == DHS_OK);
    d.splits = 28; /* 4 clusters' partials per query */
    CHECK(dhs_mla_mh_part_bytes(&d) == 3ull * 4 * 128 * 514 * 4);
    d.cluster = 0, d.splits = 0;
    CHECK(dhs_mla_mh_part_bytes(&d) == 0);
    CHECK(dhs_mla_mh_part_bytes(NULL) == 0);
}

/* ------------------------------------------------------------------ cases */
typedef struct tcase {
    dhs_mla_mh_desc d;
    int64_t pool_rows;
    uint8_t *pool;
    int64_t *off;         /* [nq] first pool row of query qi's base */
    int64_t *prow;        /* [nq] pool rows query qi may select */
    const uint8_t **base; /* [nq] */
    uint16_t *q;
    int32_t *loc, *nv;
    float *out;
} tcase;

static void random_row(uint64_t *rng, uint8_t *row)
{
    float lat[DHS_REF_LAT];
    const float mag = ldexpf(1.0f, (int)dhs_rng_below(rng, 7) - 3);
    for (int i = 0; i < DHS_REF_LAT; i++) lat[i] = th_unif(rng) * mag;
    dhs_ref_row_encode(lat, row);
    /* one row in four gets tile scales that are not powers of two (the format allows any fp32 scale):
       then code x scale is not always a bf16 value and the bf16 rounding of K and V shows */
    if (dhs_rng_below(rng, 4) == 0) {
        float sc[4];
        memcpy(sc, row + DHS_MLA_DV, sizeof sc);
        for (int t = 0; t < 4; t++) sc[t] *= 1.0f + 0.5f * dhs_rng_f24(rng);
        memcpy(row + DHS_MLA_DV, sc, sizeof sc);
    }
}

/* nq queries of nh heads, k entries, nvs[qi] valid ones (<= 0: none); each query selects from its own pool
   range of 1..2 nv + 8 rows (repeats likely); padding -1 after the valid entries */
static void case_build(tcase *c, int32_t nq, int32_t nh, int32_t k, int32_t splits, const int32_t *nvs, float qmag,
                       uint64_t *rng)
{
    memset(c, 0, sizeof *c);
    c->d = (dhs_mla_mh_desc){nq, nh, k, splits, (float)((0.5 + 1.5 * dhs_rng_unit(rng)) / sqrt((double)DHS_MLA_DQK)), 0};
    c->off = th_alloc(sizeof(int64_t) * (size_t)nq);
    c->prow = th_alloc(sizeof(int64_t) * (size_t)nq);
    c->base = th_alloc(sizeof(void *) * (size_t)nq);
    c->nv = th_alloc(sizeof(int32_t) * (size_t)nq);
    c->loc = th_alloc(sizeof(int32_t) * (size_t)nq * k);
    c->q = th_alloc(sizeof(uint16_t) * (size_t)nq * nh * DHS_MLA_DQK);
    c->out = th_alloc(sizeof(float) * (size_t)nq * nh * DHS_MLA_DV);
    for (int32_t qi = 0; qi < nq; qi++) {
        const int32_t n = nvs[qi] > 0 ? nvs[qi] : 1;
        c->nv[qi] = nvs[qi];
        c->prow[qi] = 1 + dhs_rng_below(rng, 2 * (int64_t)n + 8);
        c->off[qi] = c->pool_rows;
        c->pool_rows += c->prow[qi];
    }
    c->pool = th_alloc((size_t)c->pool_rows * RB);
    for (int64_t r = 0; r < c->pool_rows; r++) random_row(rng, c->pool + r * RB);
    for (int32_t qi = 0; qi < nq; qi++) {
        c->base[qi] = c->pool + c->off[qi] * RB;
        for (int32_t e = 0; e < k; e++)
            c->loc[(int64_t)qi * k + e] = e < c->nv[qi] ? (int32_t)dhs_rng_below(rng, c->prow[qi]) : -1;
        for (int32_t h = 0; h < nh; h++) {
            const float hm = qmag * ldexpf(1.0f, (int)dhs_rng_below(rng, 3) - 1);
            for (int j = 0; j < DHS_MLA_DQK; j++)
                c->q[((int64_t)qi * nh + h) * DHS_MLA_DQK + j] = dhs_ref_bf16_encode(th_unif(rng) * hm);
        }
    }
    fill_sent(c->out, (int64_t)nq * nh * DHS_MLA_DV);
}

static void case_free(tcase *c)
{
    free(c->off);
    free(c->prow);
    free(c->base);
    free(c->nv);
    free(c->loc);
    free(c->q);
    free(c->out);
    free(c->pool);
    memset(c, 0, sizeof *c);
}

/* the key/value row as the specification defines it, decoded here independently of model/mla_mh.c */
static void kv_expect(const uint8_t *row, float *kv)
{
    float sc[4];
    memcpy(sc, row + DHS_MLA_DV, sizeof sc);
    for (int j = 0; j < DHS_MLA_DV; j++)
        kv[j] = dhs_ref_bf16_decode(dhs_ref_bf16_encode(dhs_ref_fp8_decode(row[j]) * sc[j / 128]));
    for (int j = 0; j < 64; j++) {
        uint16_t h;
        memcpy(&h, row + DHS_MLA_DV + 16 + 2 * j, 2);
        kv[DHS_MLA_DV + j] = dhs_ref_bf16_decode(h);
    }
}

/* the double-precision reference for query qi, head h over rows (decoded) */
static void ref_double(const tcase *c, const float *rows, int32_t n, int32_t qi, int32_t h, double *s, double *o)
{
    double qf[DHS_MLA_DQK], mx = -INFINITY, sum = 0;
    const double cd = (double)c->d.sm_scale * 1.4426950408889634;
    for (int j = 0; j < DHS_MLA_DQK; j++) qf[j] = dhs_ref_bf16_decode(c->q[((int64_t)qi * c->d.n_heads + h) * DHS_MLA_DQK + j]);
    for (int32_t e = 0; e < n; e++) {
        const float *r = rows + (int64_t)e * DHS_MLA_DQK;
        double a = 0;
        for (int j = 0; j < DHS_MLA_DQK; j++) a += qf[j] * r[j];
        s[e] = a * cd;
        if (s[e] > mx) mx = s[e];
    }
    for (int j = 0; j < DHS_MLA_DV; j++) o[j] = 0;
    for (int32_t e = 0; e < n; e++) {
        const double p = exp2(s[e] - mx);
        const float *r = rows + (int64_t)e * DHS_MLA_DQK;
        sum += p;
        for (int j = 0; j < DHS_MLA_DV; j++) o[j] += p * r[j];
    }
    for (int j = 0; j < DHS_MLA_DV; j++) o[j] /= sum;
}

/* compares c->out with the double reference over the rows `pool` holds (NULL: the case's own pool);
   returns the worst relative error of the case (a NaN or out-of-tolerance output returns at least TOL * 2
   and, unless quiet, fails) */
static double case_check(const tcase *c, const uint8_t *pool, const char *tag, int quiet)
{
    const int32_t nq = c->d.nq, nh = c->d.n_heads, k = c->d.k;
    if (!pool) pool = c->pool;
    float *rows = th_alloc(sizeof(float) * (size_t)k * DHS_MLA_DQK);
    double *s = th_alloc(sizeof(double) * (size_t)k), o[DHS_MLA_DV], worst = 0;
    long bad = 0;
    for (int32_t qi = 0; qi < nq; qi++) {
        const int32_t n = c->nv[qi];
        const float *out = c->out + (int64_t)qi * nh * DHS_MLA_DV;
        if (n <= 0) {
            long moved = 0;
            for (int64_t i = 0; i < (int64_t)nh * DHS_MLA_DV; i++) moved += th_fbits(out[i]) != SENT;
            if (!quiet) CHECKF(moved == 0, "%s: query %d (nv %d): %ld outputs written", tag, qi, n, moved);
            continue;
        }
        double vmax = 0;
        for (int32_t e = 0; e < n; e++) {
            float *r = rows + (int64_t)e * DHS_MLA_DQK;
            kv_expect(pool + (c->off[qi] + c->loc[(int64_t)qi * k + e]) * RB, r);
            for (int j = 0; j < DHS_MLA_DV; j++)
                if (fabs(r[j]) > vmax) vmax = fabs(r[j]);
        }
        for (int32_t h = 0; h < nh; h++) {
            ref_double(c, rows, n, qi, h, s, o);
            for (int j = 0; j < DHS_MLA_DV; j++) {
                const float got = out[(int64_t)h * DHS_MLA_DV + j];
                double rel = fabs((double)got - o[j]) / vmax;
                if (!(rel <= TOL)) {
                    if (!quiet && bad++ < 3)
                        CHECKF(0, "%s: query %d (nv %d, splits %d) head %d [%d]: %.9g, double %.9g (vmax %.4g)", tag, qi, n,
                               c->d.splits, h, j, got, o[j], vmax);
                    if (!(rel == rel)) rel = 2 * TOL; /* NaN */
                }
                if (rel > worst) worst = rel;
                if (!quiet) outputs_checked++;
            }
        }
    }
    if (!quiet) {
        CHECKF(bad == 0, "%s: %ld outputs outside %.0e x vmax", tag, bad, TOL);
        if (worst > worst_rel) worst_rel = worst;
    }
    free(rows);
    free(s);
    return worst;
}

static dhs_status case_run(tcase *c) { return dhs_mla_mh_ref(&c->d, c->q, c->base, c->loc, c->nv, c->out); }

static void test_against_double(uint64_t *rng)
{
    /* the fixed cases: the edges of the tiles and of k, more splits than tiles, one split */
    /* splits 0: a random count; big: only at full scale (not under sanitizers: they stay under ~20 s) */
    static const struct {
        int32_t nh, nq, k, splits, nv[4], big;
    } fixed[] = {
        {64, 1, 2048, 0, {2048}, 0},           {128, 1, 2048, 0, {2048}, 0},       {64, 1, 2048, 1, {2048}, 1},
        {128, 1, 2048, 32, {2047}, 1},         {64, 4, 65, 0, {1, 63, 64, 65}, 0}, {128, 4, 130, 32, {65, 1, 64, 63}, 0},
        {64, 4, 65, 1, {65, 64, 63, 1}, 0},    {128, 2, 64, 2, {64, 1}, 0},        {64, 3, 1, 32, {1, 1, 1}, 0},
        {64, 4, 200, 3, {0, 129, -1, 200}, 0}, {128, 3, 1000, 0, {1000, 193, 0}, 1}, {64, 2, 1000, 32, {700, 0}, 0},
    };
    const int full = th_scale() >= 0.5;
    static const float qmags[] = {0.25f, 1.0f, 4.0f};
    const int nfixed = (int)(sizeof fixed / sizeof fixed[0]);
    int nrand = (int)(24 * th_scale());
    if (nrand < 6) nrand = 6;
    double t = th_now();
    int ran = 0;
    for (int ci = 0; ci < nfixed + nrand; ci++) {
        int32_t nh, nq, k, splits, nv[4];
        if (ci < nfixed) {
            if (fixed[ci].big && !full) continue;
            nh = fixed[ci].nh, nq = fixed[ci].nq, k = fixed[ci].k, splits = fixed[ci].splits;
            if (splits == 0) splits = 1 + (int32_t)dhs_rng_below(rng, 32);
            memcpy(nv, fixed[ci].nv, sizeof nv);
        } else {
            static const int32_t special[] = {1, 63, 64, 65, 127, 128, 129};
            nh = dhs_rng_below(rng, 2) ? 128 : 64;
            nq = 1 + (int32_t)dhs_rng_below(rng, 4);
            /* keep the work modest: long queries come one or two at a time */
            const int32_t kmax = (nq <= 2 ? 2048 / nq / (nh / 64) : 320) / (full ? 1 : 2);
            k = 1 + (int32_t)dhs_rng_below(rng, kmax);
            splits = 1 + (int32_t)dhs_rng_below(rng, 32);
            for (int32_t qi = 0; qi < nq; qi++) {
                const int32_t sp = special[dhs_rng_below(rng, sizeof special / sizeof special[0])];
                const int64_t r = dhs_rng_below(rng, 4);
                nv[qi] = r == 0 ? k : r == 1 && sp <= k ? sp : 1 + (int32_t)dhs_rng_below(rng, k);
            }
        }
        tcase c;
        case_build(&c, nq, nh, k, splits, nv, qmags[dhs_rng_below(rng, 3)], rng);
        char tag[96];
        snprintf(tag, sizeof tag, "case %d (heads %d, nq %d, k %d, splits %d)", ci, nh, nq, k, splits);
        CHECK_ST(case_run(&c), DHS_OK);
        const double w = case_check(&c, NULL, tag, 0);
        ran++;
        if (ci < nfixed)
            printf("%s nv %d%s: worst %.3e x vmax\n", tag, nv[0], nq > 1 ? ".." : "", w);
        case_free(&c);
    }
    printf("spec vs double: %d cases, %ld outputs, worst |error| %.3e x max|V| (tolerance %.0e), %.2f s\n",
           ran, outputs_checked, worst_rel, TOL, th_now() - t);
    CHECKF(worst_rel > 0, "the worst error is %g: the comparison is vacuous", worst_rel);
    CHECKF(worst_rel <= TOL, "worst %g", worst_rel);
}

/* one selected row dominates the softmax (its latent is the heads' shared query direction, times 8);
   negating its first 128 latent values must move the outputs by far more than the tolerance */
static void test_mutation(uint64_t *rng)
{
    const int32_t nv[1] = {256};
    tcase c;
    case_build(&c, 1, 64, 256, 4, nv, 1.0f, rng);
    float dir[DHS_MLA_DQK], lat[DHS_REF_LAT];
    for (int j = 0; j < DHS_MLA_DQK; j++) dir[j] = dhs_rng_below(rng, 2) ? 1.0f : -1.0f;
    for (int32_t h = 0; h < 64; h++)
        for (int j = 0; j < DHS_MLA_DQK; j++) c.q[(int64_t)h * DHS_MLA_DQK + j] = dhs_ref_bf16_encode(dir[j]);
    /* entry 150 (split 2 of 4) selects a row no other entry selects */
    const int32_t star = (int32_t)c.prow[0];
    uint8_t *pool2 = th_alloc((size_t)(c.pool_rows + 1) * RB);
    memcpy(pool2, c.pool, (size_t)c.pool_rows * RB);
    free(c.pool);
    c.pool = pool2;
    c.pool_rows++;
    c.prow[0]++;
    c.base[0] = c.pool;
    c.loc[150] = star;
    for (int j = 0; j < DHS_REF_LAT; j++) lat[j] = 8.0f * dir[j];
    dhs_ref_row_encode(lat, c.pool + (int64_t)star * RB);
    CHECK_ST(case_run(&c), DHS_OK);
    const double clean = case_check(&c, NULL, "mutation (clean)", 0);
    /* the mutated row: the reference keeps reading the original bytes */
    uint8_t *orig = th_alloc((size_t)c.pool_rows * RB);
    memcpy(orig, c.pool, (size_t)c.pool_rows * RB);
    for (int j = 0; j < 128; j++) lat[j] = -lat[j];
    dhs_ref_row_encode(lat, c.pool + (int64_t)star * RB);
    fill_sent(c.out, 64 * DHS_MLA_DV);
    CHECK_ST(case_run(&c), DHS_OK);
    const double mut = case_check(&c, orig, "mutation", 1);
    printf("mutation: clean worst %.3e, with the dominant row negated in part %.3e x vmax\n", clean, mut);
    CHECKF(mut > 10 * TOL, "a mutated dominant row moves the outputs by only %g x vmax", mut);
    free(orig);
    case_free(&c);
}

/* the same entries at other locations of a bigger pool, all queries on one base: the same bits; each
   query alone: the same bits; nv <= 0: the sentinel stays */
static void test_determinism(uint64_t *rng)
{
    const int32_t nv[4] = {100, 0, 200, -1};
    tcase c;
    case_build(&c, 4, 128, 200, 5, nv, 1.0f, rng);
    CHECK_ST(case_run(&c), DHS_OK);
    case_check(&c, NULL, "determinism", 0);
    const int64_t n_out = 4 * 128 * DHS_MLA_DV;

    /* the bigger pool: row r of the case's pool at perm[r] */
    const int64_t P = c.pool_rows, P2 = 3 * P + 7;
    int64_t *perm = th_alloc(sizeof(int64_t) * (size_t)P2);
    for (int64_t i = 0; i < P2; i++) perm[i] = i;
    for (int64_t i = P2 - 1; i > 0; i--) {
        const int64_t j = dhs_rng_below(rng, i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    uint8_t *pool2 = th_alloc((size_t)P2 * RB);
    for (int64_t r = 0; r < P2; r++) random_row(rng, pool2 + r * RB);
    for (int64_t r = 0; r < P; r++) memcpy(pool2 + perm[r] * RB, c.pool + r * RB, RB);
    int32_t *loc2 = th_alloc(sizeof(int32_t) * 4 * 200);
    const uint8_t *base2[4];
    for (int32_t qi = 0; qi < 4; qi++) {
        base2[qi] = pool2;
        for (int32_t e = 0; e < 200; e++) {
            const int32_t l = c.loc[qi * 200 + e];
            loc2[qi * 200 + e] = e < c.nv[qi] ? (int32_t)perm[c.off[qi] + l] : -1;
        }
    }
    float *out2 = th_alloc(sizeof(float) * (size_t)n_out);
    fill_sent(out2, n_out);
    CHECK_ST(dhs_mla_mh_ref(&c.d, c.q, base2, loc2, c.nv, out2), DHS_OK);
    CHECKF(memcmp(out2, c.out, sizeof(float) * (size_t)n_out) == 0, "moved rows give other bits");

    /* each valid query alone */
    for (int32_t qi = 0; qi < 4; qi++) {
        if (c.nv[qi] <= 0) continue;
        dhs_mla_mh_desc d1 = c.d;
        d1.nq = 1;
        fill_sent(out2, 128 * DHS_MLA_DV);
        CHECK_ST(dhs_mla_mh_ref(&d1, c.q + (int64_t)qi * 128 * DHS_MLA_DQK, &c.base[qi], c.loc + qi * 200, &c.nv[qi], out2),
                 DHS_OK);
        CHECKF(memcmp(out2, c.out + (int64_t)qi * 128 * DHS_MLA_DV, sizeof(float) * 128 * DHS_MLA_DV) == 0,
               "query %d alone gives other bits", qi);
    }
    /* a second run: the same bits */
    fill_sent(out2, n_out);
    CHECK_ST(dhs_mla_mh_ref(&c.d, c.q, c.base, c.loc, c.nv, out2), DHS_OK);
    CHECK(memcmp(out2, c.out, sizeof(float) * (size_t)n_out) == 0);
    free(out2);
    free(loc2);
    free(pool2);
    free(perm);
    case_free(&c);
}

/* a NaN code among the selected row's latent: NaN score, NaN p: every output of that query NaN */
static void test_nan(uint64_t *rng)
{
    const int32_t nv[2] = {70, 70};
    tcase c;
    case_build(&c, 2, 64, 70, 3, nv, 1.0f, rng);
    /* query 0's entry 5 reads a row no entry of query 1 reads (query 1 has its own pool range) */
    c.pool[(c.off[0] + c.loc[5]) * RB + 17] = 0x7f;
    CHECK_ST(case_run(&c), DHS_OK);
    long nan0 = 0, nan1 = 0;
    for (int64_t i = 0; i < 64 * DHS_MLA_DV; i++) {
        nan0 += isnan(c.out[i]) != 0;
        nan1 += isnan(c.out[64 * DHS_MLA_DV + i]) != 0;
    }
    CHECKF(nan0 == 64 * DHS_MLA_DV && nan1 == 0, "NaN outputs: query 0 %ld of %d, query 1 %ld", nan0, 64 * DHS_MLA_DV, nan1);
    case_free(&c);
}

/* the algorithm of model/mla_mh.h transcribed literally (its own row decode and split arithmetic; the
   score's dot is dhs_ref_dot, the spec's fixed order): the spec's outputs must be these bits */
static void literal(const tcase *c, int32_t qi, int32_t h, float *out)
{
    const int32_t n = c->nv[qi], S = c->d.splits, k = c->d.k;
    const float cc = c->d.sm_scale * 1.4426950408889634f;
    float qh[DHS_MLA_DQK], m[32], l[32], (*o)[DHS_MLA_DV] = th_alloc(sizeof(float) * 32 * DHS_MLA_DV);
    float *rows = th_alloc(sizeof(float) * (size_t)n * DHS_MLA_DQK);
    for (int32_t e = 0; e < n; e++) kv_expect(c->base[qi] + (int64_t)c->loc[(int64_t)qi * k + e] * RB, rows + (int64_t)e * DHS_MLA_DQK);
    for (int j = 0; j < DHS_MLA_DQK; j++) qh[j] = dhs_ref_bf16_decode(c->q[((int64_t)qi * c->d.n_heads + h) * DHS_MLA_DQK + j]);
    const int64_t nt = (n + 63) / 64;
    for (int32_t s = 0; s < S; s++) {
        m[s] = -INFINITY, l[s] = 0;
        for (int j = 0; j < DHS_MLA_DV; j++) o[s][j] = 0;
        for (int64_t t = s * nt / S; t < (s + 1) * nt / S; t++) {
            const int64_t r0 = t * 64, r1 = r0 + 64 < n ? r0 + 64 : n;
            float sc[64], tmax = -INFINITY, psum = 0, acc[DHS_MLA_DV] = {0};
            for (int64_t i = r0; i < r1; i++) {
                sc[i - r0] = dhs_ref_dot(qh, rows + i * DHS_MLA_DQK, DHS_MLA_DQK) * cc;
                tmax = fmaxf(tmax, sc[i - r0]);
            }
            const float mn = fmaxf(m[s], tmax), mu = mn == -INFINITY ? 0 : mn;
            const float alpha = m[s] == -INFINITY ? 0 : exp2f(m[s] - mu);
            for (int64_t i = r0; i < r1; i++) {
                const float p = dhs_ref_bf16_decode(dhs_ref_bf16_encode(exp2f(sc[i - r0] - mu)));
                psum += p;
                for (int j = 0; j < DHS_MLA_DV; j++) acc[j] += p * rows[i * DHS_MLA_DQK + j];
            }
            l[s] = l[s] * alpha + psum;
            for (int j = 0; j < DHS_MLA_DV; j++) o[s][j] = o[s][j] * alpha + acc[j];
            m[s] = mn;
        }
    }
    /* with clusters of cs < S splits: each cluster's splits combined into (m, l, o)[c], then those */
    const int32_t cs = c->d.cluster >= 2 && c->d.cluster < S ? c->d.cluster : 1, np = S / cs;
    for (int32_t ci = 0; ci < np && cs > 1; ci++) {
        float Mc = -INFINITY, Lc = 0, oc[DHS_MLA_DV] = {0};
        for (int32_t s = ci * cs; s < (ci + 1) * cs; s++) Mc = fmaxf(Mc, m[s]);
        for (int32_t s = ci * cs; s < (ci + 1) * cs; s++) {
            const float w = m[s] == -INFINITY ? 0 : exp2f(m[s] - Mc);
            Lc += w * l[s];
            for (int j = 0; j < DHS_MLA_DV; j++) oc[j] += w * o[s][j];
        }
        m[ci] = Mc, l[ci] = Lc;
        memcpy(o[ci], oc, sizeof oc);
    }
    float M = -INFINITY, L = 0;
    for (int32_t s = 0; s < np; s++) M = fmaxf(M, m[s]);
    for (int j = 0; j < DHS_MLA_DV; j++) out[j] = 0;
    for (int32_t s = 0; s < np; s++) {
        const float w = m[s] == -INFINITY ? 0 : exp2f(m[s] - M);
        L += w * l[s];
        for (int j = 0; j < DHS_MLA_DV; j++) out[j] += w * o[s][j];
    }
    for (int j = 0; j < DHS_MLA_DV; j++) out[j] /= L;
    free(rows);
    free(o);
}

/* whether a valid query's rows are split over two clusters or more, one of them over two splits or more
   (then and only then the clusters' combine can give other bits than the combine of all splits at once) */
static int clusters_reorder(const tcase *c)
{
    for (int32_t qi = 0; qi < c->d.nq; qi++) {
        int with_rows = 0, multi = 0;
        for (int32_t s0 = 0; c->nv[qi] > 0 && s0 < c->d.splits; s0 += c->d.cluster) {
            int n = 0;
            for (int32_t s = s0; s < s0 + c->d.cluster; s++) {
                int32_t a, b;
                dhs_mla_mh_split_tiles(c->nv[qi], c->d.splits, s, &a, &b);
                n += b > a;
            }
            with_rows += n > 0, multi |= n > 1;
        }
        if (with_rows > 1 && multi) return 1;
    }
    return 0;
}

static void test_literal(uint64_t *rng)
{
    static const int32_t nvs[][3] = {{1, 64, 65}, {200, 63, 129}, {130, 0, 7}};
    float want[DHS_MLA_DV], flat[DHS_MLA_DV];
    int reordered = 0;
    static const int32_t cl_cases[][2] = {{4, 2}, {6, 3}, {8, 8}, {12, 4}, {16, 2}, {32, 16}, {30, 5}};
    for (int ci = 0; ci < 6 + 2 * (int)(sizeof cl_cases / sizeof cl_cases[0]); ci++) {
        /* 0..5 without clusters; then each (splits, cluster) twice, the second on wide scores */
        const int32_t nh = ci & 1 ? 128 : 64, *cc = ci >= 6 ? cl_cases[(ci - 6) / 2] : NULL;
        const int32_t splits = cc ? cc[0] : ci < 2 ? 1 + ci * 31 : 1 + (int32_t)dhs_rng_below(rng, 32);
        tcase c;
        case_build(&c, 3, nh, 200, splits, nvs[ci % 3], ci < 3 || (cc && ci % 2 == 0) ? 1.0f : 4.0f, rng);
        c.d.cluster = cc ? cc[1] : 0;
        CHECK_ST(case_run(&c), DHS_OK);
        long diff = 0, same_as_flat = 0, checked = 0;
        for (int32_t qi = 0; qi < 3; qi++) {
            if (c.nv[qi] <= 0) continue;
            for (int32_t h = 0; h < nh; h += 1 + (int32_t)dhs_rng_below(rng, 16)) {
                literal(&c, qi, h, want);
                diff += memcmp(want, c.out + ((int64_t)qi * nh + h) * DHS_MLA_DV, sizeof want) != 0;
                if (cc) { /* the same without clusters: equal bits exactly when one cluster holds every split */
                    dhs_mla_mh_desc d0 = c.d;
                    d0.cluster = 0;
                    tcase c0 = c;
                    c0.d = d0;
                    literal(&c0, qi, h, flat);
                    same_as_flat += memcmp(want, flat, sizeof want) == 0;
                    checked++;
                }
            }
        }
        CHECKF(diff == 0, "literal case %d (heads %d, splits %d, cluster %d): %ld heads differ from the literal algorithm",
               ci, nh, splits, c.d.cluster, diff);
        if (cc && cc[0] == cc[1])
            CHECKF(same_as_flat == checked, "case %d: one cluster of %d splits: %ld of %ld heads as without clusters", ci,
                   splits, same_as_flat, checked);
        else if (cc && clusters_reorder(&c) && ++reordered) /* the clusters' combine reorders the sums: other bits */
            CHECKF(same_as_flat < checked, "case %d: clusters of %d of %d splits: every head as without clusters", ci,
                   cc[1], splits);
        case_free(&c);
    }
    CHECKF(reordered >= 4, "only %d cases where the clusters reorder the combine", reordered);
}

/* ------------------------------------------------------------------ argument errors */
static void test_args(uint64_t *rng)
{
    const int32_t nv[2] = {5, 8};
    tcase c;
    case_build(&c, 2, 64, 8, 2, nv, 1.0f, rng);
    const int64_t n_out = 2 * 64 * DHS_MLA_DV;
    const dhs_mla_mh_desc ok = c.d;
    CHECK_ST(dhs_mla_mh_check(&ok), DHS_OK);
    CHECK_ST(dhs_mla_mh_check(NULL), DHS_ERR_INVALID_ARG);

#define UNCHANGED(what)                                                                                \
    do {                                                                                               \
        long moved_ = 0;                                                                               \
        for (int64_t i_ = 0; i_ < n_out; i_++) moved_ += th_fbits(c.out[i_]) != SENT;                     \
        CHECKF(moved_ == 0, "%s: %ld outputs written", what, moved_);                                  \
    } while (0)

    const struct {
        const char *what;
        dhs_mla_mh_desc d;
    } bad[] = {
        {"n_heads 0", {2, 0, 8, 2, ok.sm_scale, 0}},          {"n_heads 32", {2, 32, 8, 2, ok.sm_scale, 0}},
        {"n_heads 96", {2, 96, 8, 2, ok.sm_scale, 0}},        {"n_heads 192", {2, 192, 8, 2, ok.sm_scale, 0}},
        {"n_heads -64", {2, -64, 8, 2, ok.sm_scale, 0}},      {"splits 0", {2, 64, 8, 0, ok.sm_scale, 0}},
        {"splits 33", {2, 64, 8, 33, ok.sm_scale, 0}},        {"splits -1", {2, 64, 8, -1, ok.sm_scale, 0}},
        {"k 0", {2, 64, 0, 2, ok.sm_scale, 0}},               {"k 2049", {2, 64, 2049, 2, ok.sm_scale, 0}},
        {"k -8", {2, 64, -8, 2, ok.sm_scale, 0}},             {"sm_scale 0", {2, 64, 8, 2, 0.0f, 0}},
        {"sm_scale -0", {2, 64, 8, 2, -0.0f, 0}},             {"sm_scale -1", {2, 64, 8, 2, -1.0f, 0}},
        {"sm_scale NaN", {2, 64, 8, 2, NAN, 0}},              {"sm_scale inf", {2, 64, 8, 2, INFINITY, 0}},
        {"nq -1", {-1, 64, 8, 2, ok.sm_scale, 0}},            {"cluster -1", {2, 64, 8, 2, ok.sm_scale, -1}},
        {"cluster 17", {2, 64, 8, 17, ok.sm_scale, 17}},      {"cluster 3 of 2", {2, 64, 8, 2, ok.sm_scale, 3}},
        {"cluster 4 of 6", {2, 64, 8, 6, ok.sm_scale, 4}},    {"cluster 32 of 32", {2, 64, 8, 32, ok.sm_scale, 32}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(dhs_mla_mh_check(&bad[i].d) == DHS_ERR_INVALID_ARG, "check accepts %s", bad[i].what);
        CHECKF(dhs_mla_mh_ref(&bad[i].d, c.q, c.base, c.loc, c.nv, c.out) == DHS_ERR_INVALID_ARG, "ref accepts %s",
               bad[i].what);
        UNCHANGED(bad[i].what);
        CHECKF(dhs_mla_mh_part_bytes(&bad[i].d) == 0, "%s: part bytes", bad[i].what);
    }
    CHECK_ST(dhs_mla_mh_ref(NULL, c.q, c.base, c.loc, c.nv, c.out), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_mla_mh_ref(&ok, NULL, c.base, c.loc, c.nv, c.out), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_mla_mh_ref(&ok, c.q, NULL, c.loc, c.nv, c.out), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_mla_mh_ref(&ok, c.q, c.base, NULL, c.nv, c.out), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_mla_mh_ref(&ok, c.q, c.base, c.loc, NULL, c.out), DHS_ERR_INVALID_ARG);
    CHECK_ST(dhs_mla_mh_ref(&ok, c.q, c.base, c.loc, c.nv, NULL), DHS_ERR_INVALID_ARG);
    UNCHANGED("NULL pointers");
    /* nv > k on the second query: nothing written, the first query's output included */
    c.nv[1] = 9;
    CHECK_ST(dhs_mla_mh_ref(&ok, c.q, c.base, c.loc, c.nv, c.out), DHS_ERR_INVALID_ARG);
    UNCHANGED("nv > k");
    c.nv[1] = 8;
    /* a negative location among the valid entries; padding after them is not looked at */
    c.loc[8 + 7] = -1;
    CHECK_ST(dhs_mla_mh_ref(&ok, c.q, c.base, c.loc, c.nv, c.out), DHS_ERR_INVALID_ARG);
    UNCHANGED("negative location");
    c.loc[8 + 7] = 0;
    /* a NULL base of a valid query; NULL is fine for a query with nv <= 0 */
    const uint8_t *b1 = c.base[1];
    c.base[1] = NULL;
    CHECK_ST(dhs_mla_mh_ref(&ok, c.q, c.base, c.loc, c.nv, c.out), DHS_ERR_INVALID_ARG);
    UNCHANGED("NULL base");
    c.nv[1] = 0;
    CHECK_ST(dhs_mla_mh_ref(&ok, c.q, c.base, c.loc, c.nv, c.out), DHS_OK);
    case_check(&c, NULL, "args (query 1 without rows)", 0);
    c.base[1] = b1;
    /* nq 0: nothing to do */
    dhs_mla_mh_desc z = ok;
    z.nq = 0;
    fill_sent(c.out, n_out);
    CHECK_ST(dhs_mla_mh_check(&z), DHS_OK);
    CHECK_ST(dhs_mla_mh_ref(&z, c.q, c.base, c.loc, c.nv, c.out), DHS_OK);
    UNCHANGED("nq 0");
    CHECK(dhs_mla_mh_part_bytes(&z) == 0);
#undef UNCHANGED

#ifndef DHS_HAVE_CUDA
    float part[4];
    CHECK_ST(dhs_mla_mh_attend(&ok, c.q, c.base, c.loc, c.nv, part, c.out, NULL), DHS_ERR_UNSUPPORTED);
    CHECK_ST(dhs_mla_mh_attend(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), DHS_ERR_UNSUPPORTED);
#endif
    case_free(&c);
}

/* The overlapped kernel's shared-memory layout (dhs_mla_ws_chunk, dhs_mla_ws_code_chunk), the properties
   k_mla_ws relies on: every row's chunks permuted within their 128-byte groups; the 8 rows an 8x8
   ldmatrix reads (8 consecutive rows from a multiple of 8, one chunk) on 8 different bank groups; the
   producer's stores cover a row's 64 code chunks once (2 per lane), its RoPE stores a batch's 4 rows x 8
   chunks once, and each 8-lane phase of a store instruction writes 8 different bank groups. A layout
   without the permutation, or the code chunks stored in plain order, fails these checks. */
static void test_ws_layout(uint64_t *rng)
{
    (void)rng;
    long bad = 0;
    for (int32_t nch = 8; nch <= 72; nch += 64) /* P rows (8 chunks), query and K rows (72) */
        for (int32_t r = 0; r < 64; r++) {
            int seen[72] = {0};
            for (int32_t c = 0; c < nch; c++) {
                const int32_t p = dhs_mla_ws_chunk(r, c);
                if (p < 0 || p >= nch || p / 8 != c / 8 || seen[p]++) bad++;
            }
        }
    CHECKF(bad == 0, "%ld chunks outside their group or twice", bad);
    bad = 0;
    for (int32_t r0 = 0; r0 < 64; r0 += 8) /* ldmatrix: 8 rows, one chunk */
        for (int32_t c = 0; c < 72; c++) {
            int bank[8] = {0};
            for (int32_t r = r0; r < r0 + 8; r++) bank[dhs_mla_ws_chunk(r, c) & 7]++;
            for (int b = 0; b < 8; b++) bad += bank[b] != 1;
        }
    CHECKF(bad == 0, "%ld bank groups of 8-row reads not hit exactly once", bad);
    bad = 0;
    for (int32_t r = 0; r < 64; r++) { /* the producer's code stores of row r */
        int seen[64] = {0};
        for (int32_t k = 0; k < 2; k++)
            for (int32_t ph = 0; ph < 4; ph++) {
                int bank[8] = {0};
                for (int32_t lane = 8 * ph; lane < 8 * ph + 8; lane++) {
                    const int32_t c = dhs_mla_ws_code_chunk(lane, k);
                    if (c < 0 || c >= 64 || c / 2 != lane || seen[c]++) bad++;
                    if (c >= 0 && c < 64) bank[dhs_mla_ws_chunk(r, c) & 7]++;
                }
                for (int b = 0; b < 8; b++) bad += bank[b] != 1;
            }
    }
    CHECKF(bad == 0, "%ld faults in the producer's code stores (coverage, lane's own codes, bank groups)", bad);
    bad = 0;
    for (int32_t rw = 0; rw < 64; rw += 4) { /* RoPE: lane stores chunk 64 + (lane & 7) of row rw + (lane >> 3) */
        int seen[4][8] = {{0}};
        for (int32_t ph = 0; ph < 4; ph++) {
            int bank[8] = {0};
            for (int32_t lane = 8 * ph; lane < 8 * ph + 8; lane++) {
                const int32_t r = rw + (lane >> 3), p = dhs_mla_ws_chunk(r, 64 + (lane & 7));
                seen[lane >> 3][p - 64]++;
                bank[p & 7]++;
            }
            for (int b = 0; b < 8; b++) bad += bank[b] != 1;
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++) bad += seen[i][j] != 1;
    }
    CHECKF(bad == 0, "%ld faults in the RoPE stores", bad);
    /* the checks can fail: stored in plain order (chunk 2 lane, then 2 lane + 1), lanes 4..7 of a phase hit
       the bank groups of lanes 0..3 */
    int clash = 0, bank[8] = {0};
    for (int32_t lane = 0; lane < 8; lane++) bank[dhs_mla_ws_chunk(0, 2 * lane) & 7]++;
    for (int b = 0; b < 8; b++) clash += bank[b] > 1;
    CHECKF(clash > 0, "plain order shows no bank clash: the store check is vacuous");
    printf("the overlapped kernel's layout: 64 rows x (72, 8) chunks, ldmatrix rows, producer stores checked\n");
}

/* The overlapped kernel's buffer hand-over (dhs_mla_ws_waits_free, dhs_mla_ws_frees) run as the kernel runs
   it, under random schedules of its three parties: the producers (decode tile i into buffer i % 2, having
   waited on "free" where waits_free(i); then arrive at "full" of that buffer for each group) and two consumer
   groups (wait on "full", compute, arrive at "free" where frees(i, n)). The named barriers as the hardware
   counts them: "full" of (buffer, group) completes with 2 parties, "free" of a buffer with 3, and an arrival
   at a barrier that already has all its parties would be counted into the wrong use. For n = 0..40 tiles:
   every schedule ends (no deadlock), no barrier holds an arrival at the end, no arrival overflows, a
   consumer reads the tile it waited for, and the producers never overwrite a tile a group still needs. */
#define WS_SIM_BARS 6 /* full (b, c) at 2 b + c, free b at 4 + b */
typedef struct {
    int pc[3];     /* next step of each party: producer 0, groups 1 and 2 */
    int waiting[3];/* the barrier a party waits on, -1 none */
    int count[WS_SIM_BARS];
    int held[2];   /* the tile each buffer holds, -1 none */
    int done[2];   /* tiles each group finished */
    long faults;
} ws_sim;

static int ws_sim_need(int b) { return b < 4 ? 2 : 3; }

/* one party's arrival at barrier b (wait: it then waits for the barrier's completion) */
static void ws_sim_arrive(ws_sim *m, int party, int b, int wait)
{
    if (++m->count[b] > ws_sim_need(b)) m->faults++; /* counted into the wrong use of the barrier */
    if (wait) m->waiting[party] = b;
    if (m->count[b] == ws_sim_need(b)) { /* complete: release its waiters */
        m->count[b] = 0;
        for (int p = 0; p < 3; p++)
            if (m->waiting[p] == b) m->waiting[p] = -1;
    }
}

/* party p's next step; 0 when it has none left */
static int ws_sim_step(ws_sim *m, int p, int n)
{
    if (p == 0) { /* steps: per tile, [wait free], decode, arrive full (both groups) */
        const int i = m->pc[0] / 3, ph = m->pc[0] % 3, b = i % 2;
        if (i >= n) return 0;
        if (ph == 0) {
            if (dhs_mla_ws_waits_free(i)) ws_sim_arrive(m, 0, 4 + b, 1);
        } else if (ph == 1) {
            if (m->held[b] >= 0 && (m->done[0] <= m->held[b] || m->done[1] <= m->held[b])) m->faults++;
            m->held[b] = i;
        } else {
            ws_sim_arrive(m, 0, 2 * b, 0);
            ws_sim_arrive(m, 0, 2 * b + 1, 0);
        }
    } else { /* steps: per tile, wait full, compute, [arrive free] */
        const int c = p - 1, i = m->pc[p] / 3, ph = m->pc[p] % 3, b = i % 2;
        if (i >= n) return 0;
        if (ph == 0) {
            ws_sim_arrive(m, p, 2 * b + c, 1);
        } else if (ph == 1) {
            if (m->held[b] != i) m->faults++;
            m->done[c] = i + 1;
        } else if (dhs_mla_ws_frees(i, n)) {
            ws_sim_arrive(m, p, 4 + b, 0);
        }
    }
    m->pc[p]++;
    return 1;
}

static void test_ws_protocol(uint64_t *rng)
{
    long deadlocks = 0, faults = 0, pending = 0, runs = 0;
    for (int n = 0; n <= 40; n++)
        for (int rep = 0; rep < 200; rep++, runs++) {
            ws_sim m;
            memset(&m, 0, sizeof m);
            m.waiting[0] = m.waiting[1] = m.waiting[2] = -1;
            m.held[0] = m.held[1] = -1;
            for (;;) {
                int ready[3], nr = 0;
                for (int p = 0; p < 3; p++)
                    if (m.waiting[p] < 0 && m.pc[p] < 3 * n) ready[nr++] = p;
                if (nr == 0) break;
                ws_sim_step(&m, ready[dhs_rng_below(rng, nr)], n);
            }
            for (int p = 0; p < 3; p++) deadlocks += m.waiting[p] >= 0 || m.pc[p] < 3 * n;
            for (int b = 0; b < WS_SIM_BARS; b++) pending += m.count[b] != 0;
            faults += m.faults;
        }
    CHECKF(deadlocks == 0, "%ld parties stuck over %ld runs", deadlocks, runs);
    CHECKF(pending == 0, "%ld barriers left with arrivals", pending);
    CHECKF(faults == 0, "%ld faults (an overflowing arrival, a wrong tile read, a tile overwritten in use)", faults);
    printf("the overlapped kernel's buffer hand-over: %ld random schedules of 0..40 tiles\n", runs);
}

int main(void)
{
    uint64_t seed = th_seed("test_mla_mh");
    static void (*const parts[])(uint64_t *) = {test_splits,   test_args,     test_nan,
                                                test_determinism, test_literal, test_mutation,
                                                test_against_double, test_ws_layout, test_ws_protocol};
    static const char *const names[] = {"split plan", "arguments", "NaN",
                                        "determinism", "literal", "mutation",
                                        "vs double", "overlapped kernel's layout", "overlapped kernel's hand-over"};
    const double t0 = th_now();
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const double t = th_now();
        parts[i](&seed);
        printf("%s: %.2f s\n", names[i], th_now() - t);
    }
    printf("test_mla_mh: %.2f s\n", th_now() - t0);
    return th_summary();
}
