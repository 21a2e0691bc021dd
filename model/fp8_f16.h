/* fp8_f16.h - FP8 E4M3 codes to half-precision bits without a table (the
 * indexer scores kernel, model/refmodel.cu; checked on the CPU by
 * tests/model/test_fp8_f16.c against the model's table for all 256 codes).
 *
 * An E4M3 code s eeee mmm placed as the half s 0eeee mmm0000000 is the code's
 * value times 2^-8 exactly: a normal code (e >= 1) is 2^(e-7) (1 + m/8), the
 * half 2^(e-15) (1 + m/8); a subnormal code m 2^-9, the half (subnormal too)
 * m 2^7 2^-24 = m 2^-17. Every value is a half, so the half-to-float
 * conversion is exact, and q * 2^8 (exact while |q| < 2^120) times it is the
 * same real number as q times the code's value: the same rounded product.
 * The NaN codes (0x7f, 0xff) come out finite (1.875): dhs_fp8_nan_mask flags
 * them, one bit 7 per byte. */
#ifndef DHS_MODEL_FP8_F16_H
#define DHS_MODEL_FP8_F16_H
#include <stdint.h>

#ifdef __CUDACC__
#define DHS_FP8_HD __host__ __device__ __forceinline__
#else
#define DHS_FP8_HD
#endif

/* four codes (bytes 0..3 of c) as two half pairs: *h02 holds bytes 0 (low
   half) and 2 (high), *h13 bytes 1 and 3 */
static DHS_FP8_HD void dhs_fp8x4_to_f16(uint32_t c, uint32_t *h02, uint32_t *h13)
{
    *h02 = ((c << 7) & 0x3f803f80u) | ((c << 8) & 0x80008000u);
    *h13 = ((c >> 1) & 0x3f803f80u) | (c & 0x80008000u);
}

/* bit 8p + 7 set where byte p of c is a NaN code (low 7 bits all ones) */
static DHS_FP8_HD uint32_t dhs_fp8_nan_mask(uint32_t c) { return ((c & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u; }

#endif
