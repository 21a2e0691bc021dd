/* test_topk_gen.h - score generators shared by test_topk.c (CPU) and
 * test_topk_cuda.c (GPU): random and adversarial score vectors (include after
 * test_help.h). */
#ifndef DHS_TEST_TOPK_GEN_H
#define DHS_TEST_TOPK_GEN_H

#include <float.h>
#include <math.h>

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* a random non-NaN float of any class */
static inline float any_float(uint64_t *rng)
{
    for (;;) {
        float f = u2f((uint32_t)dhs_rng_next(rng));
        if (!isnan(f)) return f;
    }
}

typedef enum {
    G_UNIFORM,  /* [0,1) with 24-bit resolution: few exact ties */
    G_ALLEQ,    /* one value */
    G_LEVELS,   /* 2..5 levels: big tie groups straddling the k-th */
    G_INF,      /* +-inf, +-0, and a few finite */
    G_ZEROS,    /* -0.0 / +0.0 and tiny denormals */
    G_ANYBITS,  /* any non-NaN bit pattern */
    G_NEG,      /* all negative, ties */
    G_TIEBIN,   /* ~a scores in [8, 9), ~e in [4, 4.5), the rest below 1/4: one 1/8-octave bin of ~e keys
                   (1,024..4,095) holds the k-th best when a < k < a + e (a 512..1,535) */
    G_NGEN
} gen_kind;

static const char *const gen_name[G_NGEN] = {"uniform", "all-equal", "levels", "inf", "zeros", "any-bits", "negative", "tie-bin"};

static inline void gen_scores(gen_kind g, float *s, int64_t n, uint64_t *rng)
{
    float lv[5];
    int nl = 2 + (int)dhs_rng_below(rng, 4);
    for (int i = 0; i < 5; i++) lv[i] = (float)dhs_rng_below(rng, 7) - 3.0f;
    float one = any_float(rng);
    const int64_t ta = g == G_TIEBIN ? 512 + dhs_rng_below(rng, 1024) : 0, te = g == G_TIEBIN ? 1024 + dhs_rng_below(rng, 3072) : 0;
    for (int64_t i = 0; i < n; i++) {
        switch (g) {
        case G_UNIFORM: s[i] = (float)(dhs_rng_next(rng) >> 40) / 16777216.0f; break;
        case G_ALLEQ: s[i] = one; break;
        case G_LEVELS: s[i] = lv[dhs_rng_below(rng, nl)]; break;
        case G_INF: {
            static const float v[] = {INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f, FLT_MAX, -FLT_MAX};
            s[i] = v[dhs_rng_below(rng, 8)];
            break;
        }
        case G_ZEROS: {
            uint32_t r = (uint32_t)dhs_rng_below(rng, 6);
            s[i] = r == 0 ? 0.0f : r == 1 ? -0.0f : r == 2 ? u2f(1) : r == 3 ? u2f(0x80000001u) : r == 4 ? FLT_MIN : -0.0f;
            break;
        }
        case G_ANYBITS: s[i] = any_float(rng); break;
        case G_NEG: s[i] = -(float)dhs_rng_below(rng, 1 + (int)(n / 4)) - 0.5f; break;
        case G_TIEBIN: { /* ta / n and te / n of the scores, in expectation */
            const int64_t r = dhs_rng_below(rng, n);
            const float f = (float)(dhs_rng_next(rng) >> 41) / 8388608.0f;
            s[i] = r < ta ? 8.0f + f : r < ta + te ? 4.0f + 0.5f * f : 0.25f * f;
            break;
        }
        default: s[i] = 0.0f;
        }
    }
}

#endif
