/* test_fp8_f16.c - the table-free FP8 decode of the indexer scores kernel (model/fp8_f16.h), on the CPU:
 *   - every one of the 256 codes, placed as half bits in each of the 4 byte positions of a word, is the
 *     model's decode (dhs_ref_fp8_decode, the GPU's table) times 2^-8, bit for bit (signed zeros too);
 *   - the NaN mask flags exactly the NaN codes (0x7f, 0xff), per byte, in random words;
 *   - the product the kernel forms, (q * 2^8) * (code * 2^-8), is bit-identical to q * code for
 *     random queries over the whole exponent range below 2^119 (subnormals included) and every code. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model/fp8_f16.h"
#include "model/model.h"
#include "test_help.h"

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE half bits to float, exactly (what __half2float computes) */
static float half_to_float(uint16_t h)
{
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexpf((float)m, -24);
    else v = ldexpf((float)(1024 + m), e - 25);
    return s ? -v : v;
}

static void test_all_codes(void)
{
    for (int code = 0; code < 256; code++)
        for (int p = 0; p < 4; p++) {
            const uint32_t filler = 0x5a3c9601u; /* other bytes: must not leak into this one */
            const uint32_t c = (filler & ~(0xffu << (8 * p))) | ((uint32_t)code << (8 * p));
            uint32_t h02, h13;
            dhs_fp8x4_to_f16(c, &h02, &h13);
            const uint32_t hw = (p & 1) ? h13 : h02;
            const uint16_t h = (uint16_t)((p & 2) ? hw >> 16 : hw & 0xffffu);
            const uint32_t nanbit = dhs_fp8_nan_mask(c) & (0x80u << (8 * p));
            const float ref = dhs_ref_fp8_decode((uint8_t)code);
            if (isnan(ref)) {
                CHECKF(nanbit != 0, "code 0x%02x byte %d: NaN not flagged", code, p);
                continue;
            }
            CHECKF(nanbit == 0, "code 0x%02x byte %d flagged NaN", code, p);
            const float v = half_to_float(h) * 256.0f; /* exact: a power of two, no overflow */
            CHECKF(f2u(v) == f2u(ref), "code 0x%02x byte %d: %a vs %a", code, p, (double)v, (double)ref);
        }
}

static void test_nan_mask_random(uint64_t seed)
{
    uint64_t st = seed;
    for (int n = 0; n < 100000; n++) {
        uint32_t c = (uint32_t)dhs_rng_next(&st);
        if (n & 1) c |= 0x7f7f7f7fu & (uint32_t)dhs_rng_next(&st); /* more NaN codes */
        uint32_t want = 0;
        for (int p = 0; p < 4; p++)
            if (((c >> (8 * p)) & 0x7f) == 0x7f) want |= 0x80u << (8 * p);
        if (dhs_fp8_nan_mask(c) != want) {
            CHECKF(0, "word 0x%08x: mask 0x%08x, want 0x%08x", c, dhs_fp8_nan_mask(c), want);
            return;
        }
    }
    CHECK(1);
}

static void test_products(uint64_t seed)
{
    uint64_t st = seed ^ 0x77;
    long bad = 0;
    for (int n = 0; n < 20000; n++) {
        /* random sign, exponent field 0..245 (|q| < 2^119, subnormals at 0), mantissa */
        const uint32_t r = (uint32_t)dhs_rng_next(&st);
        const uint32_t q_bits = (r & 0x80000000u) | ((uint32_t)dhs_rng_below(&st, 246) << 23) | (r & 0x7fffffu);
        const float q = u2f(q_bits);
        volatile float qs = q * 256.0f;
        for (int code = 0; code < 256; code++) {
            const float k = dhs_ref_fp8_decode((uint8_t)code);
            if (isnan(k)) continue;
            uint32_t h02, h13;
            dhs_fp8x4_to_f16((uint32_t)code, &h02, &h13);
            volatile float ks = half_to_float((uint16_t)(h02 & 0xffffu));
            volatile float a = q * k, b = qs * ks;
            if (f2u(a) != f2u(b) && bad++ < 5) CHECKF(0, "q %a code 0x%02x: %a vs %a", (double)q, code, (double)a, (double)b);
        }
    }
    CHECKF(bad == 0, "%ld products differ", bad);
}

int main(void)
{
    const uint64_t seed = th_seed("test_fp8_f16");
    test_all_codes();
    test_nan_mask_random(seed);
    test_products(seed);
    return th_summary();
}
