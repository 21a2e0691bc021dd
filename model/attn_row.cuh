/* attn_row.cuh - the device numerics of the reference model's sparse
 * attention, shared by the k_att_* kernels (refmodel.cu: g_row_val; the score as 8 lanes) and the overlapped attention
 * (overlap.cu) so that a score or a value computed by either is the same bits.
 *
 * One IEEE operation per step (__fmul_rn / __fadd_rn / __fsub_rn: nvcc may
 * not contract them into FMAs; __fmaf_rn where the CPU model fuses, in the
 * attention's dot and value sums), in the CPU model's order
 * (model/numerics.c, model.c): with exp_portable these equal dhs_ref_dot_fma /
 * dhs_ref_axpy_fma / dhs_ref_expf / dhs_ref_row_decode bit for bit.
 *
 * Row format (docs/MODEL.md): 512 FP8 E4M3 codes, 4 fp32 tile scales (one per
 * 128 codes), 64 bf16 RoPE values: 656 bytes. lut: the 256 FP8 decodes. */
#ifndef DHS_CUDA_ATTN_ROW_CUH
#define DHS_CUDA_ATTN_ROW_CUH

#include <stdint.h>

#define G_LAT 576
#define G_NOPE 512
#define G_ROW 656

static __device__ __forceinline__ float fm(float a, float b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ float fa(float a, float b) { return __fadd_rn(a, b); }
static __device__ __forceinline__ float fs(float a, float b) { return __fsub_rn(a, b); }
/* a * b + c with one rounding: the attention's steps (C: fmaf, dhs_ref_dot_fma, dhs_ref_axpy_fma) */
static __device__ __forceinline__ float ff(float a, float b, float c) { return __fmaf_rn(a, b, c); }

/* dhs_ref_expf (portable) or expf */
static __device__ __forceinline__ float g_expf(float x, int portable)
{
    if (!portable) return expf(x);
    if (x < -87.0f) return 0.0f;
    if (x > 88.0f) return __int_as_float(0x7f800000);
    float kf = rintf(fm(x, 1.44269504f));
    float r = fs(x, fm(kf, 0.693145752f));
    r = fs(r, fm(kf, 1.42860677e-06f));
    float p = 1.38888889e-03f;
    p = fa(fm(p, r), 8.33333333e-03f);
    p = fa(fm(p, r), 4.16666667e-02f);
    p = fa(fm(p, r), 1.66666667e-01f);
    p = fa(fm(p, r), 0.5f);
    p = fa(fm(p, r), 1.0f);
    p = fa(fm(p, r), 1.0f);
    return fm(p, __uint_as_float((uint32_t)((int)kf + 127) << 23));
}

/* value ii (0..575) of a row, as dhs_ref_row_decode writes it */
static __device__ __forceinline__ float g_row_val(const uint8_t *row, int ii, const float *lut)
{
    if (ii < G_NOPE) return fm(lut[row[ii]], ((const float *)(row + G_NOPE))[ii / 128]);
    return __uint_as_float((uint32_t)((const uint16_t *)(row + G_NOPE + 16))[ii - G_NOPE] << 16);
}

/* the attention score of one row for one head: dhs_ref_dot_fma(q, decoded
   row, 576) * att_scale (8 lanes over i mod 8, each step one fma, combined
   ((0+1)+(2+3))+((4+5)+(6+7))) */
static __device__ __forceinline__ float g_row_score(const float *qh, const uint8_t *row, const float *lut,
                                                    float att_scale)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < G_LAT; i += 8)
#pragma unroll
        for (int l = 0; l < 8; l++) acc[l] = ff(qh[i + l], g_row_val(row, i + l, lut), acc[l]);
    float s = fa(fa(fa(acc[0], acc[1]), fa(acc[2], acc[3])), fa(fa(acc[4], acc[5]), fa(acc[6], acc[7])));
    return fm(s, att_scale);
}

/* the same score from an already decoded row (576 floats, stride 1): the same operations */
static __device__ __forceinline__ float g_dec_score(const float *qh, const float *dec, float att_scale)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < G_LAT; i += 8)
#pragma unroll
        for (int l = 0; l < 8; l++) acc[l] = ff(qh[i + l], dec[i + l], acc[l]);
    float s = fa(fa(fa(acc[0], acc[1]), fa(acc[2], acc[3])), fa(fa(acc[4], acc[5]), fa(acc[6], acc[7])));
    return fm(s, att_scale);
}

#endif
