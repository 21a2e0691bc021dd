/*
 * iqsynth.h - the synthetic indexer query of the locality benchmark device
 * (docs/LOCALITY.md "The reference model under a locality"). Off by default.
 * With dhs_ref_iq_synth.on, producer layer l's indexer query at position t is
 * not W_iq·xn but
 *
 *   q[o] = (a[l] · u(l, o) + b[l] · z(l, t, o)) + d[l] · z(l, t-1, o),   o < H_I·d_I
 *   w[h] = w                         (every head the same weight)
 *
 * u: a fixed direction of the layer (the rows every step keeps finding),
 * z: fresh per position. The correlation of two queries of a layer is
 * c = a^2 at any distance when d = 0 (a = sqrt(c), b = sqrt(1-c)), so the
 * top-k overlap of consecutive steps rises with c from about the random k/N.
 * Below the random baseline (DeepSeek-V3.2's layers 0-1 move away from their
 * last selection) a = 0 and d = -theta·b: consecutive queries have correlation
 * c = -theta/(1+theta^2) in [-0.5, 0), queries two or more steps apart none
 * (no alternation that an LRU would catch). The CPU model and the GPU model
 * compute the same bits: u and z are exact multiples of 2^-23 in [-1, 1) from
 * a 64-bit hash, and q is three rounded products and two rounded sums in that
 * order (no contraction).
 */
#ifndef DHS_MODEL_IQSYNTH_H
#define DHS_MODEL_IQSYNTH_H

#include <stdint.h>

#include "util/rng.h"

#if defined(__CUDACC__)
#define DHS_IQ_FN static inline __host__ __device__
#else
#define DHS_IQ_FN static inline
#endif

/* u (t < 0) or z (t >= 0): (h - 2^23) · 2^-23 with h the top 24 bits of a hash
   of (seed, l, t, o) */
DHS_IQ_FN float dhs_iq_unit(uint64_t seed, int32_t l, int64_t t, int32_t o)
{
    uint64_t x = seed ^ (uint64_t)(l + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(o + 1) * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)(t + 2) * 0x165667B19E3779F9ull;
    int32_t v = (int32_t)(dhs_mix64(dhs_mix64(x)) >> 40) - 8388608;
    return (float)v * (1.0f / 8388608.0f);
}

#endif
