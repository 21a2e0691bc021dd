/* test_model.c - the reference DSA model (model/).
 *
 * - number formats: every FP8 E4M3 code round-trips, round-to-nearest-even at
 *   midpoints, saturation; BF16 rounding; the 656-byte row is a fixed point of
 *   encode(decode(.)) and its scales are powers of two;
 * - the fixed summation order of dhs_ref_dot, bit for bit;
 * - the split-K attention order against a double-precision softmax, and bit
 *   for bit the plain softmax when the entries fit one chunk;
 * - top-k: the tie rule (higher score, then lower position; -0 == +0; -1
 *   padding) against a full sort on adversarial ties;
 * - the draft ring: dhs_ring_rows/dhs_ring_row addressing, and drafter logits
 *   through a ring of R_d rows equal to those through an unbounded one;
 * - decode == prefill: the logits of every query of a speculative round equal
 *   the prefill of the prompt extended by the block's tokens (each layout);
 * - greedy speculative decoding produces exactly the tokens of plain decoding
 *   (resident, and hierarchical against resident);
 * - resident vs hierarchical, byte for byte, for every layout and every
 *   replacement policy, under reclaim, refill, waits, staging and late copies,
 *   with the invariants checked after every round; sampling verification too.
 * Env: DHS_TEST_SEED (else time-based, printed), DHS_TEST_SCALE (runs).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "dhs_plan.h"
#include "model/model.h"
#include "model/run.h"
#include "sim/trace.h"

#include "test_help.h"

static uint64_t g_rs;
static uint64_t rnd(void) { return dhs_rng_next(&g_rs); }
static int64_t rndi(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }
static float rndf(void) { return dhs_rng_f24(&g_rs) * 2.0f - 1.0f; }

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---------------------------------------------------------------- attention order */
/* dhs_ref_attention (the split-K order both models follow): within
   (nv + 64) 2^-22 vmax of a double-precision softmax over the same float scores; bit for bit
   the plain single-pass softmax when all entries fit one chunk; a wide score
   range (chunks that underflow against the maximum) included */
static void test_attention(void)
{
    static const int32_t nvs[] = {1, 2, DHS_REF_ATT_CHUNK - 1, DHS_REF_ATT_CHUNK, DHS_REF_ATT_CHUNK + 1, 100, 2048};
    const float scale = 1.0f / sqrtf((float)DHS_REF_LAT);
    float *rows = malloc(sizeof(float) * 2048 * DHS_REF_LAT), q[DHS_REF_LAT], o[DHS_REF_NOPE], oc[DHS_REF_NOPE];
    float *att = malloc(sizeof(float) * 2048), *s = malloc(sizeof(float) * 2048);
    double od[DHS_REF_NOPE];
    double worst = 0;
    for (size_t t = 0; t < 3 * sizeof nvs / sizeof nvs[0]; t++) {
        int32_t nv = nvs[t % (sizeof nvs / sizeof nvs[0])];
        float qmag = t < 7 ? 1.0f : t < 14 ? 8.0f : 64.0f;
        float vmax = 0;
        for (int64_t i = 0; i < (int64_t)nv * DHS_REF_LAT; i++) {
            rows[i] = rndf() * ldexpf(1.0f, (int)rndi(-3, 3));
            if (i % DHS_REF_LAT < DHS_REF_NOPE && fabsf(rows[i]) > vmax) vmax = fabsf(rows[i]);
        }
        for (int i = 0; i < DHS_REF_LAT; i++) q[i] = rndf() * qmag;
        dhs_ref_attention(q, rows, nv, scale, 1, o, att, oc);
        /* double softmax over the float scores */
        double mx = -INFINITY, sum = 0;
        for (int32_t e = 0; e < nv; e++) {
            s[e] = dhs_ref_dot_fma(q, rows + (int64_t)e * DHS_REF_LAT, DHS_REF_LAT) * scale;
            if (s[e] > mx) mx = s[e];
        }
        for (int i = 0; i < DHS_REF_NOPE; i++) od[i] = 0;
        for (int32_t e = 0; e < nv; e++) {
            double p = exp(s[e] - mx);
            sum += p;
            for (int i = 0; i < DHS_REF_NOPE; i++) od[i] += p * rows[(int64_t)e * DHS_REF_LAT + i];
        }
        double dmax = 0;
        for (int i = 0; i < DHS_REF_NOPE; i++) {
            double d = fabs(o[i] - od[i] / sum);
            if (!(d <= dmax)) dmax = d; /* NaN sticks */
        }
        if (dmax / vmax > worst || dmax != dmax) worst = dmax / vmax;
        /* two fp32 sums of nv non-negative terms (relative error <= (nv - 1) u each) and the exps */
        double tol = (double)(nv + 64) * ldexp(1.0, -22);
        CHECKF(dmax <= tol * vmax, "nv %d qmag %g: |split-K - double| %g > %g x vmax %g", (int)nv, (double)qmag, dmax,
               tol, (double)vmax);
        if (nv <= DHS_REF_ATT_CHUNK) { /* one chunk: the plain softmax's bits */
            float fm = -INFINITY, fsum = 0.0f, po[DHS_REF_NOPE];
            for (int32_t e = 0; e < nv; e++)
                if (s[e] > fm) fm = s[e];
            for (int i = 0; i < DHS_REF_NOPE; i++) po[i] = 0.0f;
            for (int32_t e = 0; e < nv; e++) {
                float p = dhs_ref_expf(s[e] - fm);
                fsum += p;
                for (int i = 0; i < DHS_REF_NOPE; i++) po[i] = fmaf(p, rows[(int64_t)e * DHS_REF_LAT + i], po[i]);
            }
            for (int i = 0; i < DHS_REF_NOPE; i++) po[i] = fmaf(1.0f, po[i], 0.0f); /* the merge's w = 1: exact */
            float inv = 1.0f / fsum;
            int same = 1;
            for (int i = 0; i < DHS_REF_NOPE; i++) same &= f2u(po[i] * inv) == f2u(o[i]);
            CHECKF(same, "nv %d: one chunk differs from the plain softmax", (int)nv);
        }
    }
    printf("attention split-K vs double softmax: max |d| / vmax %.3g (bound (nv + 64) 2^-22)\n", worst);
    free(rows), free(att), free(s);
}

/* The attention's documented numerics (docs/MODEL.md "Attention order"),
   written out plainly with libm's fmaf: score = dot * scale where the dot
   has 8 lanes, lane l += q[i] row[i] for i = l mod 8 ascending as one fma,
   lanes combined ((0+1)+(2+3))+((4+5)+(6+7)); chunks of DHS_REF_ATT_CHUNK:
   mc = max, p = expf_portable(s - mc), csum += p (a plain add), oc[i] =
   fma(p, v[i], oc[i]) in entry order; in chunk order sum = fma(w, csum,
   sum), o[i] = fma(w, oc[i], o[i]) with w = exp(mc - max); o *= 1 / sum.
   unfuse 1..4 computes ONE product as a separate multiply and add, in the
   final step of that kind where the two round differently (1: a score
   dot's lane, 2: a value sum at the chunk's last entry, 3: the merge's sum
   past chunk 0, 4: a merged value at the last chunk), the skip + 1-th such:
   the test shows the check sees each. Scores out in s[nv]. */
/* fmaf, except for ONE final step (the accumulator's last) of kind `kind`
   (1..4): the (*skip + 1)-th of those whose separate multiply and add round
   differently (*skip counts down; -1 once used). An earlier step's one-ulp
   change is mostly absorbed by the steps after it. */
static float plain_fma(float a, float b, float c, int kind, int last, int unfuse, int *skip)
{
    const float f = fmaf(a, b, c), u = a * b + c; /* ISO C: no contraction */
    if (kind != unfuse || !last || *skip < 0 || u == f) return f;
    if ((*skip)-- > 0) return f;
    return u;
}

static void attention_plain(const float *q, const float *rows, int32_t nv, float scale, int unfuse, int skip, float *o,
                            float *s)
{
    float oc[DHS_REF_NOPE];
    float mx = -INFINITY, sum = 0.0f;
    int left = skip;
    for (int32_t e = 0; e < nv; e++) {
        float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int i = 0; i < DHS_REF_LAT; i++)
            lane[i % 8] = plain_fma(q[i], rows[(int64_t)e * DHS_REF_LAT + i], lane[i % 8], 1, i >= DHS_REF_LAT - 8, unfuse, &left);
        s[e] = (((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]))) * scale;
        mx = s[e] > mx ? s[e] : mx;
    }
    for (int i = 0; i < DHS_REF_NOPE; i++) o[i] = 0.0f;
    for (int32_t c0 = 0; c0 < nv; c0 += DHS_REF_ATT_CHUNK) {
        int32_t c1 = c0 + DHS_REF_ATT_CHUNK < nv ? c0 + DHS_REF_ATT_CHUNK : nv;
        float mc = -INFINITY, csum = 0.0f;
        for (int32_t e = c0; e < c1; e++) mc = s[e] > mc ? s[e] : mc;
        for (int i = 0; i < DHS_REF_NOPE; i++) oc[i] = 0.0f;
        for (int32_t e = c0; e < c1; e++) {
            float p = dhs_ref_expf(s[e] - mc);
            csum += p;
            for (int i = 0; i < DHS_REF_NOPE; i++)
                oc[i] = plain_fma(p, rows[(int64_t)e * DHS_REF_LAT + i], oc[i], 2, e == c1 - 1, unfuse, &left);
        }
        float w = dhs_ref_expf(mc - mx);
        sum = plain_fma(w, csum, sum, 3, c0 > 0, unfuse, &left);
        for (int i = 0; i < DHS_REF_NOPE; i++) o[i] = plain_fma(w, oc[i], o[i], 4, c1 == nv, unfuse, &left);
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < DHS_REF_NOPE; i++) o[i] *= inv;
}

/* dhs_ref_attention (both models' order, the dispatched fma clones) equals
   attention_plain bit for bit (its scores att and outputs o); and attention_plain with any one product
   unfused differs from it on some of these inputs (the check has teeth) */
static void test_attention_fma(void)
{
    static const int32_t nvs[] = {1, 5, DHS_REF_ATT_CHUNK, DHS_REF_ATT_CHUNK + 3, 200, 2048};
    const int NT = (int)(sizeof nvs / sizeof nvs[0]);
    const float scale = 1.0f / sqrtf((float)DHS_REF_LAT);
    float *rows = malloc(sizeof(float) * 2048 * DHS_REF_LAT), *att = malloc(sizeof(float) * 2048);
    float *ps = malloc(sizeof(float) * 2048);
    float q[DHS_REF_LAT], o[DHS_REF_NOPE], oc[DHS_REF_NOPE], r[DHS_REF_NOPE];
    int seen[5] = {0, 0, 0, 0, 0}; /* inputs where unfuse u (one product) changed a bit */
    /* 2 NT inputs, then more (up to 12 NT) while some unfused case has not shown yet: whether one
       product's rounding moves an output bit depends on the draw, so a fixed count made the check
       below pass or fail with the random stream */
    int t = 0;
    for (; t < 2 * NT || (t < 12 * NT && !(seen[1] && seen[2] && seen[3] && seen[4])); t++) {
        int32_t nv = nvs[t % NT];
        for (int64_t i = 0; i < (int64_t)nv * DHS_REF_LAT; i++) {
            /* FP8 values as decoded rows hold, |v| in [2^-7, 2^-1): scores spread over a few units, so no
               exp is 0 or 1 alone (a one-hot softmax would hide the value sums) */
            uint8_t code = (uint8_t)rndi(0x20, 0x47) | (uint8_t)(rnd() & 0x80);
            rows[i] = i % DHS_REF_LAT < DHS_REF_NOPE ? dhs_ref_fp8_decode(code) * 0.0625f
                                                     : dhs_ref_bf16_decode(dhs_ref_bf16_encode(rndf()));
        }
        for (int i = 0; i < DHS_REF_LAT; i++) q[i] = rndf() * (t < NT ? 1.0f : 8.0f);
        dhs_ref_attention(q, rows, nv, scale, 1, o, att, oc);
        for (int u = 0; u < 5; u++) /* u > 0: one product unfused, the first to 8th (the sum: 64th) candidate in turn */
            for (int k = 0; k < (u == 0 ? 1 : u == 3 ? 64 : 8); k++) {
                attention_plain(q, rows, nv, scale, u, k, r, ps);
                int same = 1;
                for (int i = 0; i < DHS_REF_NOPE; i++) same &= f2u(r[i]) == f2u(o[i]);
                for (int32_t e = 0; e < nv; e++) same &= f2u(ps[e]) == f2u(att[e]);
                if (u == 0) CHECKF(same, "nv %d: dhs_ref_attention differs from the plain fma order", (int)nv);
                seen[u] += !same;
                if (!same) break;
            }
    }
    for (int u = 1; u < 5; u++)
        CHECKF(seen[u] > 0, "one unfused product (case %d) went unseen in %d inputs", u, t);
    printf("attention fma order: %d inputs bit-equal; one unfused product seen in %d / %d / %d / %d of them\n",
           t, seen[1], seen[2], seen[3], seen[4]);
    free(rows), free(att), free(ps);
}

/* ---------------------------------------------------------------- number formats */
static void test_fp8(void)
{
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f) {
            CHECKF(isnan(dhs_ref_fp8_decode((uint8_t)c)), "code %#x is NaN", c);
            continue;
        }
        float v = dhs_ref_fp8_decode((uint8_t)c);
        CHECKF(dhs_ref_fp8_encode(v) == c, "code %#x -> %g -> %#x", c, v, dhs_ref_fp8_encode(v));
        if (c > 0 && c < 0x7e) {
            float nx = dhs_ref_fp8_decode((uint8_t)(c + 1));
            CHECKF(nx > v, "positive codes ascend at %#x", c);
            float mid = (v + nx) / 2.0f; /* exact: few mantissa bits */
            int even = (c & 1) ? c + 1 : c;
            CHECKF(dhs_ref_fp8_encode(mid) == even, "midpoint of %#x,%#x -> %#x (want %#x)", c, c + 1,
                  dhs_ref_fp8_encode(mid), even);
            CHECKF(dhs_ref_fp8_encode(-mid) == (0x80 | even), "negative midpoint of %#x", c);
            float in = v + (nx - v) * 0.25f;
            CHECKF(dhs_ref_fp8_encode(in) == c, "a quarter above %#x rounds down", c);
        }
    }
    CHECKF(dhs_ref_fp8_decode(0x7e) == 448.0f, "max 448");
    CHECKF(dhs_ref_fp8_encode(1e9f) == 0x7e && dhs_ref_fp8_encode(-1e9f) == 0xfe, "saturation");
    CHECKF(dhs_ref_fp8_encode(460.0f) == 0x7e, "464 would be NaN: saturate");
    CHECKF(dhs_ref_fp8_decode(1) == 0x1p-9f, "smallest subnormal");
    CHECKF(dhs_ref_fp8_encode(0x1p-10f) == 0 && dhs_ref_fp8_encode(0x1.8p-9f) == 2, "subnormal ties to even");
    CHECKF(dhs_ref_fp8_encode(0.0f) == 0 && dhs_ref_fp8_encode(-0.0f) == 0x80, "zeros");
    /* bf16 */
    for (int i = 0; i < 1000; i++) {
        float x = rndf() * 100.0f;
        uint16_t b = dhs_ref_bf16_encode(x);
        float y = dhs_ref_bf16_decode(b);
        CHECKF(fabsf(y - x) <= fabsf(x) * 0x1p-8f, "bf16 of %g is %g", x, y);
        CHECKF(dhs_ref_bf16_encode(y) == b, "bf16 fixed point");
    }
    CHECKF(dhs_ref_bf16_encode(1.0f + 0x1p-8f) == dhs_ref_bf16_encode(1.0f), "bf16 tie to even (down)");
    CHECKF(dhs_ref_bf16_encode(1.0f + 0x1.8p-7f) == dhs_ref_bf16_encode(1.0f + 0x1p-6f), "bf16 tie to even (up)");
}

static void test_rows(void)
{
    CHECKF(DHS_REF_ROW_BYTES % 16 == 0, "rows are 16-byte multiples");
    float lat[DHS_REF_LAT], back[DHS_REF_LAT];
    uint8_t row[DHS_REF_ROW_BYTES], row2[DHS_REF_ROW_BYTES];
    for (int it = 0; it < 200; it++) {
        float mag = ldexpf(1.0f, (int)rndi(-20, 12));
        for (int i = 0; i < DHS_REF_LAT; i++) lat[i] = rndf() * mag * (rnd() % 7 == 0 ? 0.0f : 1.0f);
        dhs_ref_row_encode(lat, row);
        dhs_ref_row_decode(row, back);
        dhs_ref_row_encode(lat, row2);
        CHECKF(!memcmp(row, row2, sizeof row), "encoding is deterministic (iteration %d)", it);
        float sc[4];
        memcpy(sc, row + DHS_REF_NOPE, sizeof sc);
        for (int t = 0; t < 4; t++) {
            int e;
            CHECKF(frexpf(sc[t], &e) == 0.5f, "scale %g is a power of two", sc[t]);
            for (int i = 0; i < DHS_REF_TILE; i++) {
                float want = dhs_ref_fp8_decode(row[t * DHS_REF_TILE + i]) * sc[t];
                if (f2u(want) != f2u(back[t * DHS_REF_TILE + i])) {
                    CHECKF(0, "decode of element %d differs", t * DHS_REF_TILE + i);
                    break;
                }
                /* no element exceeds the tile's range; rounding error of 3 mantissa bits */
                float x = lat[t * DHS_REF_TILE + i];
                CHECKF(fabsf(x) <= 448.0f * sc[t], "tile scale covers the tile");
                float tol = fmaxf(fabsf(x) * 0x1p-4f, 0x1p-10f * sc[t]);
                if (!(fabsf(back[t * DHS_REF_TILE + i] - x) <= tol)) {
                    CHECKF(0, "element %d: %g decodes as %g", t * DHS_REF_TILE + i, x, back[t * DHS_REF_TILE + i]);
                    break;
                }
            }
        }
        for (int i = 0; i < DHS_REF_ROPE; i++) {
            uint16_t b;
            memcpy(&b, row + DHS_REF_NOPE + 16 + 2 * i, 2);
            CHECKF(b == dhs_ref_bf16_encode(lat[DHS_REF_NOPE + i]), "rope part is bf16");
        }
    }
}

/* ---------------------------------------------------------------- dot order */
static void test_dot(void)
{
    float a[64], b[64];
    for (int n = 0; n <= 64; n++) {
        for (int i = 0; i < n; i++) {
            a[i] = rndf() * 1000.0f;
            b[i] = rndf();
        }
        float acc[8] = {0};
        int i = 0;
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) acc[l] = acc[l] + a[i + l] * b[i + l];
        float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for (; i < n; i++) s = s + a[i] * b[i];
        float got = dhs_ref_dot(a, b, n);
        CHECKF(f2u(got) == f2u(s), "dot order n=%d: %a vs %a", n, got, s);
    }
}

/* the indexer's dot (dhs_ref_index_block_fma): per head and position one fmaf a dimension, in order;
   checked against that order written out, and an unfused sum must differ on some input (so the
   check tells the two apart) */
static void test_index_fma(void)
{
    enum { D = DHS_REF_MAX_IDX_DIM, H = DHS_REF_MAX_IDX_HEADS, B = DHS_REF_KEY_BLOCK };
    static float qt[D][H], kb[D * B], acc[H * B];
    int differs = 0, trials = 0;
    for (; trials < 64 && (trials < 8 || !differs); trials++) {
        const int32_t h_n = (int32_t)rndi(1, H), d_n = (int32_t)rndi(1, D);
        for (int i = 0; i < D; i++)
            for (int h = 0; h < H; h++) qt[i][h] = rndf() * 4.0f;
        for (int i = 0; i < D * B; i++) kb[i] = dhs_ref_fp8_decode((uint8_t)rndi(0, 0x7e) | (uint8_t)(rnd() & 0x80));
        for (int i = 0; i < H * B; i++) acc[i] = 0.0f;
        dhs_ref_index_block_fma(&qt[0][0], H, h_n, d_n, kb, acc);
        for (int h = 0; h < h_n; h++)
            for (int l = 0; l < B; l++) {
                float f = 0.0f, u = 0.0f;
                for (int i = 0; i < d_n; i++) {
                    f = fmaf(qt[i][h], kb[i * B + l], f);
                    u = u + qt[i][h] * kb[i * B + l];
                }
                CHECKF(f2u(acc[h * B + l]) == f2u(f), "index dot H %d D %d head %d lane %d: %a vs %a", h_n, d_n, h, l,
                       (double)acc[h * B + l], (double)f);
                differs |= f2u(u) != f2u(f);
            }
    }
    CHECKF(differs, "no input in %d told the fused indexer dot from the unfused one", trials);
    printf("index dot: fused order bit-equal in %d inputs; the unfused sum differed\n", trials);
}

/* ---------------------------------------------------------------- top-k */
static const float *g_sc;
static int cmp_rule(const void *pa, const void *pb)
{
    int32_t x = *(const int32_t *)pa, y = *(const int32_t *)pb;
    float a = g_sc[x], b = g_sc[y];
    if (a > b) return -1;
    if (a < b) return 1;
    return x < y ? -1 : 1; /* -0 == +0 falls here */
}

static void check_topk(const float *sc, int64_t n, int32_t k, const char *what)
{
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)k), *all = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    uint64_t *scratch = malloc(sizeof(uint64_t) * (size_t)k);
    for (int64_t i = 0; i < n; i++) all[i] = (int32_t)i;
    g_sc = sc;
    qsort(all, (size_t)n, sizeof(int32_t), cmp_rule);
    int32_t cnt = dhs_ref_topk(sc, n, k, sel, scratch);
    int32_t want = n < k ? (int32_t)n : k;
    CHECKF(cnt == want, "%s: count %d want %d", what, cnt, want);
    for (int32_t i = 0; i < k; i++) {
        int32_t w = i < want ? all[i] : -1;
        if (sel[i] != w) {
            CHECKF(0, "%s (n=%" PRId64 " k=%d): entry %d is %d, the tie rule says %d", what, n, k, i, sel[i], w);
            break;
        }
    }
    free(sel);
    free(all);
    free(scratch);
}

static void test_topk(void)
{
    float sc[600];
    /* all equal: the lowest positions, in order */
    for (int i = 0; i < 100; i++) sc[i] = 0.5f;
    check_topk(sc, 100, 10, "all equal");
    /* -0 and +0 are equal scores */
    for (int i = 0; i < 100; i++) sc[i] = (i & 1) ? 0.0f : -0.0f;
    check_topk(sc, 100, 7, "signed zeros");
    /* ascending, descending (heap worst cases), fewer candidates than k */
    for (int i = 0; i < 300; i++) sc[i] = (float)i;
    check_topk(sc, 300, 64, "ascending");
    for (int i = 0; i < 300; i++) sc[i] = (float)-i;
    check_topk(sc, 300, 64, "descending");
    check_topk(sc, 5, 64, "short history");
    check_topk(sc, 0, 8, "empty history");
    /* ties straddling the k boundary: k-th and (k+1)-th equal, in every arrangement */
    for (int it = 0; it < 200; it++) {
        int64_t n = rndi(1, 600);
        int32_t k = (int32_t)rndi(1, 80);
        int levels = (int)rndi(1, 6);
        for (int64_t i = 0; i < n; i++) {
            int l = (int)rndi(0, levels - 1);
            sc[i] = l == 0 ? ((rnd() & 1) ? -0.0f : 0.0f) : (float)(l - 2) * 0.25f;
        }
        char what[64];
        snprintf(what, sizeof what, "random ties %d", it);
        check_topk(sc, n, k, what);
    }
    /* the packed key orders like the rule */
    for (int it = 0; it < 10000; it++) {
        float a = (float)rndi(-3, 3) * 0.5f, b = (float)rndi(-3, 3) * 0.5f;
        if (rnd() & 1) a = -a;
        int64_t x = rndi(0, 1000), y = rndi(0, 1000);
        if (x == y) continue;
        int better = a > b || (a == b && x < y);
        CHECKF((dhs_ref_topk_key(a, x) > dhs_ref_topk_key(b, y)) == better, "key order (%g,%" PRId64 ") vs (%g,%" PRId64 ")",
              a, x, b, y);
    }
}

/* dhs_ref_argmax against the sequential rule it replaces: ties, signed zeros, NaNs, infinities,
   every length from 0 to 40 and longer rows */
static void test_argmax(void)
{
    float x[300];
    const float vals[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, INFINITY, -INFINITY, NAN};
    for (int it = 0; it < 20000; it++) {
        const int32_t n = it < 4000 ? (int32_t)(it % 41) : (int32_t)rndi(1, 300);
        const int nv = (int)rndi(1, 8); /* how many of vals this row draws from (NaN only at 8) */
        for (int32_t i = 0; i < n; i++) x[i] = vals[rndi(0, nv - 1)];
        if (it % 7 == 0 && n > 0) x[rndi(0, n - 1)] = (float)rndi(-5, 5) * 0.25f;
        int32_t b = 0;
        for (int32_t i = 1; i < n; i++)
            if (x[i] > x[b]) b = i;
        const int32_t a = dhs_ref_argmax(x, n);
        CHECKF(a == b, "argmax case %d (n %d): %d, the sequential rule %d", it, n, a, b);
    }
}

/* ---------------------------------------------------------------- ring */
static void test_ring(void)
{
    CHECKF(dhs_ring_rows(2048, 8, 64) == 2176, "R_d(2048, 8, 64) = 2176 (DESIGN §6)");
    for (int it = 0; it < 50; it++) {
        int64_t W = rndi(0, 200);
        int32_t K = (int32_t)rndi(1, 9), p = (int32_t)rndi(1, 70);
        int64_t R = dhs_ring_rows(W, K, p);
        CHECKF(R % p == 0 && R >= W + K, "R_d(%" PRId64 ",%d,%d) = %" PRId64, W, K, p, R);
        for (int32_t slot = 0; slot < 3; slot++) {
            int64_t t0 = rndi(0, 5000);
            /* a live window: W prior positions, the position, K-1 more of the block */
            uint8_t *seen = calloc((size_t)R, 1);
            for (int64_t t = t0 - W; t <= t0 + K - 1; t++) {
                if (t < 0) continue;
                int64_t row = dhs_ring_row(R, slot, t);
                CHECKF(row >= slot * R && row < (slot + 1) * R, "slot %d keeps to its range", slot);
                if (row >= slot * R && row < (slot + 1) * R) {
                    CHECKF(!seen[row - slot * R], "two live positions share ring row %" PRId64, row);
                    seen[row - slot * R] = 1;
                }
            }
            free(seen);
        }
    }
    /* drafter logits through the bounded ring == through an unbounded array */
    dhs_ref_cfg c = dhs_ref_cfg_tiny();
    c.draft_window = 13;
    dhs_ref_model *m;
    if (dhs_ref_model_create(&c, &m) != DHS_OK) {
        CHECKF(0, "model");
        return;
    }
    int64_t R = dhs_ring_rows(c.draft_window, 4, 8), BIG = 400;
    float *ring = calloc((size_t)(3 * R) * 2 * (size_t)c.draft_dim, sizeof(float));
    float *flat = calloc((size_t)BIG * 2 * (size_t)c.draft_dim, sizeof(float));
    float la[256], lb[256];
    dhs_ref_scratch *sc = dhs_ref_scratch_create(m);
    int mism = 0;
    for (int64_t t = 0; t < BIG; t++) {
        int32_t tok = (int32_t)rndi(0, c.vocab - 1);
        dhs_ref_draft_step(m, tok, t, ring, R, 2, la, sc);
        dhs_ref_draft_step(m, tok, t, flat, BIG, 0, lb, sc);
        mism += memcmp(la, lb, sizeof(float) * (size_t)c.vocab) != 0;
    }
    CHECKF(mism == 0, "drafter through the ring differs at %d positions", mism);
    dhs_ref_scratch_destroy(sc);
    free(ring);
    free(flat);
    dhs_ref_model_destroy(m);
}

/* ---------------------------------------------------------------- decode == prefill */
static dhs_ref_cfg small_model(dhs_ref_layout layout, uint64_t seed)
{
    dhs_ref_cfg c = dhs_ref_cfg_tiny();
    c.layout = layout;
    c.d_model = 16;
    c.mlp_hidden = 32;
    c.d_v = 8;
    c.topk = 8;
    c.draft_window = 16;
    c.seed = seed;
    return c;
}

/* Session 0 of a one-slot engine started from the prefill of tok[0, P) into *pf (freed by the caller
   either way): k_max kmax, positions below max_pos. NULL on a failure. */
static dhs_ref_engine *one_session(const dhs_ref_model *m, const int32_t *tok, int64_t P, int32_t kmax, int64_t max_pos,
                                   uint64_t seed, dhs_ref_prefill *pf)
{
    dhs_ref_engine_cfg ec;
    memset(&ec, 0, sizeof ec);
    ec.max_sessions = 1;
    ec.max_slots = 1;
    ec.k_max = kmax;
    ec.max_positions = max_pos;
    ec.page_rows = 8;
    ec.seed = seed;
    dhs_ref_engine *e = NULL;
    if (dhs_ref_prefill_run(m, tok, P, pf) != DHS_OK || dhs_ref_engine_create(m, &ec, &e) != DHS_OK ||
        dhs_ref_engine_start(e, 0, pf, (dhs_req){0, 0}) != DHS_OK) {
        dhs_ref_engine_destroy(e);
        return NULL;
    }
    return e;
}

/* what a one-session test holds, released by one_session_free */
typedef struct {
    dhs_ref_model *m;
    dhs_ref_engine *e;
    dhs_ref_prefill pf;
    int32_t *tok;
    float *L;
} one_fx;

static void one_session_free(one_fx *f)
{
    dhs_ref_engine_destroy(f->e);
    dhs_ref_prefill_free(&f->pf);
    free(f->tok);
    free(f->L);
    dhs_ref_model_destroy(f->m);
}

static void test_decode_equals_prefill(dhs_ref_layout layout, uint64_t seed)
{
    dhs_ref_cfg c = small_model(layout, seed);
    one_fx fx = {0};
    if (dhs_ref_model_create(&c, &fx.m) != DHS_OK) {
        CHECKF(0, "model");
        return;
    }
    dhs_ref_model *m = fx.m;
    int64_t P = rndi(30, 60);
    int32_t K = 4, V = c.vocab;
    int32_t *tok = fx.tok = malloc(sizeof(int32_t) * (size_t)(P + K + 16));
    dhs_ref_prompt(seed, 3, V, P, tok);
    float *L = fx.L = malloc(sizeof(float) * (size_t)K * (size_t)V);
    int32_t A, E[8], B[8], id = 0;
    dhs_ref_round_out out = {L, &A, E, B};
    dhs_ref_engine *e = fx.e = one_session(m, tok, P, K, P + 64, seed, &fx.pf);
    if (!e) {
        CHECKF(0, "setup");
        goto done;
    }
    for (int r = 0; r < 3; r++) {
        int64_t n = dhs_ref_engine_positions(e, 0), nt;
        const int32_t *t = dhs_ref_engine_tokens(e, 0, &nt); /* committed tokens + the anchor */
        memcpy(tok, t, sizeof(int32_t) * (size_t)nt);
        if (dhs_ref_engine_round(e, 1, &id, &K, &out) != DHS_OK) {
            CHECKF(0, "round");
            break;
        }
        /* query j reads token B[j] at position n + j: the prefill of the
           prompt extended by the block up to j must give the same bits,
           accepted or not */
        for (int32_t j = 0; j < K; j++) {
            tok[n + j] = B[j];
            dhs_ref_prefill q;
            if (dhs_ref_prefill_run(m, tok, n + j + 1, &q) != DHS_OK) {
                CHECKF(0, "prefill");
                break;
            }
            CHECKF(!memcmp(q.logits, L + (int64_t)j * V, sizeof(float) * (size_t)V),
                  "%s seed %" PRIu64 ": round %d query %d at position %" PRId64 " differs from the prefill",
                  dhs_ref_layout_str(layout), seed, r, j, n + j);
            dhs_ref_prefill_free(&q);
        }
        CHECKF(B[0] == t[n], "the anchor is the first query");
    }
done:
    one_session_free(&fx);
}

/* The drafter's ring catches up only in rounds that draft (width > 1): after any mix of widths, a wide
   round's ring rows of the drafter's window below its first position hold exactly the committed
   tokens' rows, and its proposals equal those of a session prefilled with the same committed tokens
   (whose ring holds just that window) */
static void test_draft_catch_up(uint64_t seed)
{
    dhs_ref_cfg c = small_model(DHS_REF_LAYOUT_OWN, seed);
    one_fx fx = {0};
    if (dhs_ref_model_create(&c, &fx.m) != DHS_OK) {
        CHECKF(0, "model");
        return;
    }
    dhs_ref_model *m = fx.m;
    const int32_t KM = 4, V = c.vocab, P = 24, R = 48, maxp = P + R * KM + 8;
    int32_t *tok = fx.tok = malloc(sizeof(int32_t) * (size_t)maxp);
    float *L = fx.L = malloc(sizeof(float) * (size_t)KM * (size_t)V);
    dhs_ref_prompt(seed, 5, V, P, tok);
    int32_t A, E[8], B[8], id = 0, wide = 0, narrow = 0;
    dhs_ref_round_out out = {L, &A, E, B};
    dhs_ref_engine *e = fx.e = one_session(m, tok, P, KM, maxp, seed, &fx.pf);
    if (!e) {
        CHECKF(0, "setup");
        goto done;
    }
    for (int r = 0; r < R; r++) {
        /* runs of plain rounds longer than the drafter's window, then a wide one */
        const int32_t K = rnd() % 4 == 0 ? (int32_t)rndi(2, KM) : 1;
        const int64_t n = dhs_ref_engine_positions(e, 0);
        int64_t nt;
        const int32_t *t = dhs_ref_engine_tokens(e, 0, &nt);
        memcpy(tok, t, sizeof(int32_t) * (size_t)nt);
        if (dhs_ref_engine_round(e, 1, &id, &K, &out) != DHS_OK) {
            CHECKF(0, "round");
            break;
        }
        if (K == 1) {
            narrow++;
            continue;
        }
        wide++;
        float want[2 * DHS_REF_MAX_DRAFT_DIM];
        for (int64_t p = n - c.draft_window > 0 ? n - c.draft_window : 0; p < n; p++) {
            dhs_ref_draft_kv(m, tok[p], p, want, 1, 0);
            CHECKF(!memcmp(dhs_ref_engine_draft_row(e, 0, p), want, sizeof(float) * 2 * (size_t)c.draft_dim),
                   "seed %" PRIu64 ": round %d (width %d at position %" PRId64 "): the drafter's row of position %" PRId64
                   " is not its committed token's", seed, r, K, n, p);
        }
        int32_t Bw[8];
        memcpy(Bw, B, sizeof(int32_t) * (size_t)K);
        /* the reference: a fresh engine on the committed tokens [0, n), one round of width K */
        dhs_ref_prefill q;
        dhs_ref_engine *f = one_session(m, tok, n, KM, maxp, seed, &q);
        if (!f || dhs_ref_engine_round(f, 1, &id, &K, &out) != DHS_OK) {
            CHECKF(0, "reference");
        } else {
            for (int32_t j = 0; j < K; j++)
                CHECKF(B[j] == Bw[j], "seed %" PRIu64 ": round %d (width %d at position %" PRId64 "): proposal %d is %d, "
                       "a fresh session's %d", seed, r, K, n, j, Bw[j], B[j]);
        }
        dhs_ref_engine_destroy(f);
        dhs_ref_prefill_free(&q);
    }
    CHECKF(wide > 0 && narrow > 0, "seed %" PRIu64 ": %d wide and %d plain rounds, want both", seed, wide, narrow);
done:
    one_session_free(&fx);
}

/* ---------------------------------------------------------------- runs */
static dhs_ref_run_cfg small_run(dhs_ref_layout layout, uint64_t seed)
{
    dhs_ref_run_cfg c = dhs_ref_run_cfg_default();
    c.model = small_model(layout, seed);
    c.sessions = 4;
    c.context = 50 + (int64_t)(seed % 30);
    c.tokens = 16;
    c.spec = 4;
    c.seed = seed;
    c.slots = 3;
    c.history = 1.0;
    c.page_rows = 8;
    c.arrival = 1;
    c.async_delay = 1;
    c.threads = 2;
    c.check = 1;
    return c;
}

typedef struct agg {
    uint64_t reclaims, waits, direct, hot, host, staging, refill, rejected;
} agg;

static uint64_t run_compare(const dhs_ref_run_cfg *c, const char *what, agg *a)
{
    dhs_ref_run_result r;
    int rc = dhs_ref_run(c, &r);
    CHECKF(rc == 0, "%s: run failed: %s", what, r.errmsg);
    CHECKF(r.identical, "%s: not identical (%" PRIu64 " logit rows differ, %" PRIu64 " token mismatches) %s", what,
          r.logit_mismatches, r.token_mismatches, r.errmsg);
    CHECKF(r.sessions_done == (uint64_t)c->sessions, "%s: %" PRIu64 " sessions done", what, r.sessions_done);
    CHECKF(r.invariant_violations == 0, "%s: invariants", what);
    CHECKF(r.shadow_mismatches == 0, "%s: %" PRIu64 " located rows held other bytes", what, r.shadow_mismatches);
    CHECKF(r.logit_rows_compared > 0, "%s: nothing compared", what);
    if (a) {
        a->reclaims += r.st.reclaims;
        a->waits += r.st.waits;
        a->direct += r.st.census_direct;
        a->hot += r.st.census_hot;
        a->host += r.st.census_host;
        a->staging += r.st.staging_rows;
        a->refill += r.st.repopulated_pages;
        a->rejected += r.proposals - r.accepted;
    }
    printf("  %-34s identical %d rows %-5" PRIu64 " census %" PRIu64 "/%" PRIu64 "/%" PRIu64 " reclaims %" PRIu64
           " waits %" PRIu64 " staged %" PRIu64 " refill %" PRIu64 " accepted %" PRIu64 "/%" PRIu64 "\n",
           what, r.identical, r.logit_rows_compared, r.st.census_direct, r.st.census_hot, r.st.census_host, r.st.reclaims,
           r.st.waits, r.st.staging_rows, r.st.repopulated_pages, r.accepted, r.proposals);
    uint64_t rounds = r.rounds;
    dhs_ref_run_result_free(&r);
    return rounds;
}

/* the selections of a run, written with --trace, read back */
static void check_trace(const char *path, const dhs_ref_run_cfg *c, uint64_t rounds)
{
    dhs_trace_reader *rd;
    char err[256];
    if (dhs_trace_reader_open(path, 0, &rd, err, sizeof err) != DHS_TRACE_OK) {
        CHECKF(0, "trace: %s", err);
        return;
    }
    const dhs_trace_header *h = dhs_trace_reader_header(rd);
    CHECKF(h->k[0] == c->model.topk && h->k_max == c->spec && h->n_requests == c->sessions, "trace header");
    dhs_trace_event ev;
    dhs_trace_status st;
    uint64_t starts = 0, ends = 0, nr = 0;
    while ((st = dhs_trace_next(rd, &ev)) == DHS_TRACE_OK) {
        starts += ev.kind == DHS_TRACE_EV_START;
        ends += ev.kind == DHS_TRACE_EV_END;
        nr += ev.kind == DHS_TRACE_EV_ROUND;
    }
    CHECKF(st == DHS_TRACE_EOF, "trace: %s", dhs_trace_reader_error(rd));
    CHECKF(starts == (uint64_t)c->sessions && ends == starts && nr == rounds,
          "trace: %" PRIu64 " starts, %" PRIu64 " ends, %" PRIu64 " rounds (run: %" PRIu64 ")", starts, ends, nr, rounds);
    dhs_trace_reader_close(rd);
}

static void test_compare_all(uint64_t seed)
{
    static const dhs_ref_layout layouts[] = {DHS_REF_LAYOUT_OWN, DHS_REF_LAYOUT_FOLLOW, DHS_REF_LAYOUT_COMPRESSED};
    uint64_t refill = 0;
    for (int li = 0; li < 3; li++) {
        agg a;
        memset(&a, 0, sizeof a);
        for (int p = 0; p < DHS_POLICY_COUNT_; p++) {
            dhs_ref_run_cfg c = small_run(layouts[li], seed + (uint64_t)p);
            c.policy = (dhs_policy)p;
            c.async_delay = p; /* 0..3: copies complete at once .. three rounds late, random order */
            char what[80];
            snprintf(what, sizeof what, "%s/%s delay %d seed %" PRIu64, dhs_ref_layout_str(layouts[li]),
                     dhs_policy_str((dhs_policy)p), p, c.seed);
            run_compare(&c, what, &a);
        }
        const char *ln = dhs_ref_layout_str(layouts[li]);
        CHECKF(a.reclaims > 0, "%s: no reclaim happened", ln);
        CHECKF(a.waits > 0, "%s: no admission waited", ln);
        CHECKF(a.host > 0 && a.hot > 0 && a.direct > 0, "%s: census %" PRIu64 "/%" PRIu64 "/%" PRIu64, ln, a.direct,
              a.hot, a.host);
        CHECKF(a.staging > 0, "%s: no staging", ln);
        CHECKF(a.rejected > 0, "%s: no proposal was rejected", ln);
        refill += a.refill;
    }
    CHECKF(refill > 0, "no page was refilled in any run");
    /* DHS_IMPORT_HOST (import_mode host): the rows go to the host tier only and every device page of the
       history comes from repopulation (copies completing two rounds late, in random order); the logits
       equal the resident engine's and the tokens those of the same run with device imports */
    for (int li = 0; li < 3; li++) {
        dhs_ref_run_cfg ch = small_run(layouts[li], seed + 50 + (uint64_t)li);
        ch.async_delay = 2;
        dhs_ref_run_result r[2];
        for (int hm = 0; hm < 2; hm++) {
            ch.import_mode = hm ? DHS_REF_IMPORT_HOST : DHS_REF_IMPORT_DEVICE;
            char what[80];
            snprintf(what, sizeof what, "%s imports %s", dhs_ref_layout_str(layouts[li]), dhs_ref_import_str(ch.import_mode));
            run_compare(&ch, what, NULL);
            CHECKF(dhs_ref_run(&ch, &r[hm]) == 0, "%s: %s", what, r[hm].errmsg);
            CHECKF(r[hm].imp.imports == (uint64_t)ch.sessions && r[hm].imp.import_bytes > 0 && r[hm].imp.import_s > 0,
                   "%s: %" PRIu64 " imports, %" PRIu64 " bytes, %g s", what, r[hm].imp.imports, r[hm].imp.import_bytes,
                   r[hm].imp.import_s);
        }
        const char *ln = dhs_ref_layout_str(layouts[li]);
        CHECKF(r[1].st.repopulated_pages > 0, "%s: host imports repopulated no page", ln);
        /* host: every optional page the run held was populated by a repopulation (populate_bytes counts
           them as issued, one page per source); device: the imports placed pages themselves */
        CHECKF(r[1].opt_bytes_peak > 0 && r[1].opt_bytes_peak <= r[1].st.populate_bytes,
               "%s: host imports: optional bytes peaked at %" PRIu64 ", only %" PRIu64 " repopulated", ln,
               r[1].opt_bytes_peak, r[1].st.populate_bytes);
        /* what each import call itself placed: device imports put leading pages on the device, host imports
           none (the peak against the repopulated total said this only while reclaims and refills did not
           bring the whole run's repopulation up to the peak: DHS_TEST_SEED=2 made them equal) */
        CHECKF(r[0].imp.placed_bytes > 0 && r[0].imp.placed_bytes <= r[0].imp.import_bytes,
               "%s: device imports placed %" PRIu64 " optional bytes (of %" PRIu64 " imported)", ln,
               r[0].imp.placed_bytes, r[0].imp.import_bytes);
        CHECKF(r[1].imp.placed_bytes == 0, "%s: host imports placed %" PRIu64 " optional bytes", ln,
               r[1].imp.placed_bytes);
        CHECKF(r[0].imp.import_bytes == r[1].imp.import_bytes, "%s: import bytes %" PRIu64 " (device) vs %" PRIu64 " (host)",
               ln, r[0].imp.import_bytes, r[1].imp.import_bytes);
        CHECKF(r[0].tokens_digest == r[1].tokens_digest, "%s: tokens digest %016" PRIx64 " (device) vs %016" PRIx64 " (host)",
               ln, r[0].tokens_digest, r[1].tokens_digest);
        for (int hm = 0; hm < 2; hm++) dhs_ref_run_result_free(&r[hm]);
    }
    /* speculative sampling through the hierarchy */
    dhs_ref_run_cfg c = small_run(DHS_REF_LAYOUT_FOLLOW, seed + 7);
    c.verify = DHS_REF_VERIFY_SAMPLE;
    char path[64];
    int made = th_tmp_path(path, sizeof path, "model") == 0;
    c.trace = made ? path : NULL;
    uint64_t rounds = run_compare(&c, "follow/lru sampling (traced)", NULL);
    if (made) {
        check_trace(path, &c, rounds);
        unlink(path);
    }
    c = small_run(DHS_REF_LAYOUT_COMPRESSED, seed + 8);
    c.verify = DHS_REF_VERIFY_SAMPLE;
    c.model.comp_m = 3;
    run_compare(&c, "compressed m=3 sampling", NULL);
    /* rows read through dhs_read_location (the path of the CUDA backend) */
    c = small_run(DHS_REF_LAYOUT_OWN, seed + 9);
    c.fetch_rows = 1;
    run_compare(&c, "own/lru via dhs_read_location", NULL);
}

/* --round-end ahead (dhs_ref_engine_next): width-1 rounds end early and the next round, when every
   session continues and nobody waits, is opened under the step (its round begin before this round's
   verification, the round then run without one). Both resolvers, every layout, late copies: the logits
   equal the resident engine's, the invariants hold after every round (a round open ahead among them),
   the tokens equal those of --round-end early, and some rounds were opened ahead. An engine asked for
   another round than the one it opened ahead refuses (DHS_ERR_STATE). */
static void test_open_ahead(uint64_t seed)
{
    static const dhs_ref_layout layouts[] = {DHS_REF_LAYOUT_OWN, DHS_REF_LAYOUT_FOLLOW, DHS_REF_LAYOUT_COMPRESSED};
    for (int li = 0; li < 3; li++)
        for (int dev = 0; dev < 2; dev++) {
            dhs_ref_run_cfg c = small_run(layouts[li], seed + 20 + (uint64_t)li);
            c.spec = 1;
            c.async_delay = 2;
            c.resolver = dev ? DHS_RESOLVER_DEVICE : DHS_RESOLVER_HOST;
            if (dev) c.policy = DHS_POLICY_CLOCK;
            dhs_ref_run_result r[2];
            for (int ah = 0; ah < 2; ah++) {
                c.end_early = 1 + ah;
                char what[80];
                snprintf(what, sizeof what, "%s %s round end %s", dhs_ref_layout_str(layouts[li]), dev ? "device" : "host",
                         ah ? "ahead" : "early");
                run_compare(&c, what, NULL);
                CHECKF(dhs_ref_run(&c, &r[ah]) == 0, "%s: %s", what, r[ah].errmsg);
            }
            CHECKF(r[0].tokens_digest == r[1].tokens_digest, "%s %s: tokens %016" PRIx64 " (early) vs %016" PRIx64 " (ahead)",
                   dhs_ref_layout_str(layouts[li]), dev ? "device" : "host", r[0].tokens_digest, r[1].tokens_digest);
            CHECKF(r[0].step_hier.ahead_rounds == 0 && r[1].step_hier.ahead_rounds > 0 &&
                       r[1].step_hier.ahead_rounds < r[1].step_hier.early_ends,
                   "%s %s: %" PRIu64 " rounds opened ahead (early: %" PRIu64 ") of %" PRIu64 " ended early",
                   dhs_ref_layout_str(layouts[li]), dev ? "device" : "host", r[1].step_hier.ahead_rounds,
                   r[0].step_hier.ahead_rounds, r[1].step_hier.early_ends);
            for (int ah = 0; ah < 2; ah++) dhs_ref_run_result_free(&r[ah]);
        }
}

static void test_spec_equals_plain(dhs_ref_layout layout, uint64_t seed)
{
    dhs_ref_run_cfg c = small_run(layout, seed);
    c.compare = 0;
    c.hier = 0;
    c.spec = 1;
    dhs_ref_run_result plain, spec, hier;
    int r1 = dhs_ref_run(&c, &plain);
    c.spec = 4;
    int r2 = dhs_ref_run(&c, &spec);
    c.hier = 1;
    c.spec = 5;
    int r3 = dhs_ref_run(&c, &hier);
    CHECKF(r1 == 0 && r2 == 0 && r3 == 0, "runs: %s %s %s", plain.errmsg, spec.errmsg, hier.errmsg);
    if (r1 == 0 && r2 == 0 && r3 == 0) {
        /* some proposals must be accepted; all may be (seed 1796128097, compressed: 44 of 44); the
           rejection path is exercised by run_compare's runs, which print accepted/proposed */
        CHECKF(spec.accepted > 0 && spec.accepted <= spec.proposals, "%s: speculation accepted %" PRIu64 " of %" PRIu64,
              dhs_ref_layout_str(layout), spec.accepted, spec.proposals);
        /* every accepted proposal saves its session one round; the batch's
           round count only drops when the session that finishes last accepted
           one, so it can only stay or drop (seed 1796125621: it stayed) */
        /* the hierarchical engine calls dhs_background once a round, while its step runs (the same tokens
           below: the deferred tail backups change no location); the resident one has no library */
        CHECKF(hier.step_hier.all_rounds > 0 && hier.step_hier.background_calls == hier.step_hier.all_rounds &&
                   plain.step_res.background_calls == 0,
               "%s: dhs_background called %" PRIu64 " times in %" PRIu64 " hierarchical rounds, %" PRIu64 " resident",
               dhs_ref_layout_str(layout), hier.step_hier.background_calls, hier.step_hier.all_rounds,
               plain.step_res.background_calls);
        CHECKF(spec.rounds <= plain.rounds, "%s: speculation took more rounds (%" PRIu64 " > %" PRIu64 ")",
               dhs_ref_layout_str(layout), spec.rounds, plain.rounds);
        CHECKF(spec.decode_tokens - spec.accepted < plain.decode_tokens,
               "%s: speculation saved no session a round", dhs_ref_layout_str(layout));
        for (int32_t i = 0; i < c.sessions; i++) {
            CHECKF(plain.tokens_of[i] == spec.tokens_of[i], "%s seed %" PRIu64 ": session %d: greedy K=4 tokens differ from plain",
                  dhs_ref_layout_str(layout), seed, i);
            CHECKF(plain.tokens_of[i] == hier.tokens_of[i],
                  "%s seed %" PRIu64 ": session %d: hierarchical K=5 tokens differ from resident plain",
                  dhs_ref_layout_str(layout), seed, i);
        }
        printf("  %-12s plain %" PRIu64 " rounds, greedy K=4 %" PRIu64 " rounds (%" PRIu64 "/%" PRIu64
               " accepted), same tokens\n",
               dhs_ref_layout_str(layout), plain.rounds, spec.rounds, spec.accepted, spec.proposals);
    }
    dhs_ref_run_result_free(&plain);
    dhs_ref_run_result_free(&spec);
    dhs_ref_run_result_free(&hier);
}

/* ---------------------------------------------------------------- top-k implementation */
/* engine topk_impl fused (dhs_topk_fused_ref) vs model (dhs_ref_topk): two
   resident CPU engines serve the same sessions; every round's logits and
   tokens byte-identical. Contexts below and above k (n < k padding, ties of
   the radix select), K_i varying. Then whole runs (hierarchical vs resident,
   the layout's sources) with model, fused and split (the run's default;
   dhs_topk_fused_ref on the CPU too): the same tokens digest each. */
static void test_topk_impl(dhs_ref_layout layout, uint64_t seed)
{
    dhs_ref_cfg c = small_model(layout, seed);
    dhs_ref_model *m;
    if (dhs_ref_model_create(&c, &m) != DHS_OK) {
        CHECKF(0, "model");
        return;
    }
    const int32_t S = 3, KM = 3, V = c.vocab, rounds = 6;
    dhs_ref_engine_cfg ec;
    memset(&ec, 0, sizeof ec);
    ec.max_sessions = S;
    ec.max_slots = S;
    ec.k_max = KM;
    ec.max_positions = 64 + (int64_t)rounds * KM + 8;
    ec.seed = seed;
    ec.page_rows = 8;
    dhs_ref_engine *e[2] = {NULL, NULL};
    for (int f = 0; f < 2; f++) {
        ec.topk_impl = f ? DHS_REF_TOPK_FUSED : DHS_REF_TOPK_MODEL;
        CHECK_ST(dhs_ref_engine_create(m, &ec, &e[f]), DHS_OK);
    }
    ec.topk_impl = 7;
    dhs_ref_engine *bad = NULL;
    CHECK_ST(dhs_ref_engine_create(m, &ec, &bad), DHS_ERR_INVALID_ARG);
    CHECK(bad == NULL);
    ec.topk_impl = DHS_REF_TOPK_MODEL;
    ec.import_mode = DHS_REF_IMPORT_HOST + 1; /* neither device nor host */
    CHECK_ST(dhs_ref_engine_create(m, &ec, &bad), DHS_ERR_INVALID_ARG);
    CHECK(bad == NULL);
    ec.import_mode = DHS_REF_IMPORT_DEVICE;
    float *L[2] = {calloc((size_t)S * KM * (size_t)V, sizeof(float)), calloc((size_t)S * KM * (size_t)V, sizeof(float))};
    int32_t A[2][3], E[2][9], ids[3] = {0, 1, 2}, K[3];
    uint64_t rows = 0, differ = 0, tok_differ = 0;
    if (!e[0] || !e[1] || !L[0] || !L[1]) goto done;
    for (int32_t i = 0; i < S; i++) {
        int64_t n = i == 0 ? 3 : i == 1 ? c.topk : 40 + 11 * i; /* n < k, n == k, n > k at the first round */
        int32_t tok[64];
        dhs_ref_prefill p;
        dhs_ref_prompt(seed, i, V, n, tok);
        CHECK_ST(dhs_ref_prefill_run(m, tok, n, &p), DHS_OK);
        for (int f = 0; f < 2; f++) CHECK_ST(dhs_ref_engine_start(e[f], i, &p, (dhs_req){0, 0}), DHS_OK);
        dhs_ref_prefill_free(&p);
    }
    for (int32_t r = 0; r < rounds; r++) {
        for (int32_t i = 0; i < S; i++) K[i] = 1 + (r + i) % KM;
        for (int f = 0; f < 2; f++) {
            dhs_ref_round_out o = {L[f], A[f], E[f], NULL};
            dhs_status st = dhs_ref_engine_round(e[f], S, ids, K, &o);
            CHECKF(st == DHS_OK, "topk %s round %d: %s", dhs_ref_topk_str(f), r, dhs_ref_engine_error(e[f]));
            if (st != DHS_OK) goto done;
        }
        for (int32_t i = 0; i < S; i++) {
            for (int32_t j = 0; j < K[i]; j++) {
                size_t off = ((size_t)i * KM + (size_t)j) * (size_t)V;
                rows++;
                differ += memcmp(L[0] + off, L[1] + off, sizeof(float) * (size_t)V) != 0;
            }
            tok_differ += A[0][i] != A[1][i] || memcmp(E[0] + i * KM, E[1] + i * KM, sizeof(int32_t) * (size_t)(A[0][i] + 1));
        }
    }
    CHECKF(rows > 0 && differ == 0 && tok_differ == 0,
           "%s: fused vs model top-k: %" PRIu64 " of %" PRIu64 " logit rows, %" PRIu64 " token blocks differ",
           dhs_ref_layout_str(layout), differ, rows, tok_differ);
done:
    free(L[0]);
    free(L[1]);
    dhs_ref_engine_destroy(e[0]);
    dhs_ref_engine_destroy(e[1]);
    dhs_ref_model_destroy(m);
    /* whole runs */
    dhs_ref_run_cfg rc = small_run(layout, seed);
    CHECKF(rc.topk_impl == DHS_REF_TOPK_SPLIT, "the run's default top-k is %s, not split", dhs_ref_topk_str(rc.topk_impl));
    dhs_ref_run_result R[3];
    int ok[3];
    for (int f = 0; f < 3; f++) { /* f: DHS_REF_TOPK_MODEL, _FUSED, _SPLIT */
        rc.topk_impl = f;
        ok[f] = dhs_ref_run(&rc, &R[f]) == 0;
        CHECKF(ok[f] && R[f].identical && R[f].topk_impl == f, "%s run topk %s: %s", dhs_ref_layout_str(layout),
               dhs_ref_topk_str(f), R[f].errmsg);
    }
    for (int f = 1; f < 3; f++)
        if (ok[0] && ok[f])
            CHECKF(R[0].tokens_digest == R[f].tokens_digest, "%s run: %s tokens digest %016" PRIx64 ", model %016" PRIx64,
                   dhs_ref_layout_str(layout), dhs_ref_topk_str(f), R[f].tokens_digest, R[0].tokens_digest);
    printf("  topk fused vs model (%-10s): %" PRIu64 " logit rows, %" PRIu64 " differ; runs: digests %016" PRIx64
           " / %016" PRIx64 " / %016" PRIx64 " (model / fused / split)\n",
           dhs_ref_layout_str(layout), rows, differ, R[0].tokens_digest, R[1].tokens_digest, R[2].tokens_digest);
    for (int f = 0; f < 3; f++) dhs_ref_run_result_free(&R[f]);
}

int main(void)
{
    uint64_t seed = th_seed("test_model");
    int scale = 1;
    const char *sc = getenv("DHS_TEST_SCALE");
    if (sc && atoi(sc) > 0) scale = atoi(sc);
    printf("test_model: scale %d\n", scale);
    g_rs = seed;
    test_fp8();
    test_rows();
    test_dot();
    test_index_fma();
    test_topk();
    test_argmax();
    test_ring();
    test_attention();
    test_attention_fma();
    printf("formats, dot order, top-k ties, ring, attention order: %s\n", (int)th_failed ? "FAILED" : "ok");
    for (int s = 0; s < scale; s++) {
        uint64_t sd = seed + 1000u * (uint64_t)s;
        for (int l = 0; l <= DHS_REF_LAYOUT_COMPRESSED; l++) test_decode_equals_prefill((dhs_ref_layout)l, sd + (uint64_t)l);
        printf("decode == prefill (every query of speculative rounds, 3 layouts): %s\n", (int)th_failed ? "FAILED" : "ok");
        for (int l = 0; l <= DHS_REF_LAYOUT_COMPRESSED; l++) test_spec_equals_plain((dhs_ref_layout)l, sd + 10 + (uint64_t)l);
        test_draft_catch_up(sd + 20);
        printf("drafter catch-up after plain rounds (proposals equal a fresh session's): %s\n", (int)th_failed ? "FAILED" : "ok");
        test_compare_all(sd + 100);
        test_open_ahead(sd + 300);
        printf("round end ahead (the next round opened under the step): %s\n", (int)th_failed ? "FAILED" : "ok");
        for (int l = 0; l <= DHS_REF_LAYOUT_COMPRESSED; l++) test_topk_impl((dhs_ref_layout)l, sd + 200 + (uint64_t)l);
        printf("top-k implementation fused == model (engines), model == fused == split (runs), 3 layouts: %s\n", (int)th_failed ? "FAILED" : "ok");
    }
    printf("test_model: %s (%d failures, seed %" PRIu64 ")\n", (int)th_failed ? "FAILED" : "PASSED", (int)th_failed, seed);
    return (int)th_failed ? 1 : 0;
}
