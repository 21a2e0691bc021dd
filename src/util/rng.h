/* rng.h - the project's one random stream, for every layer: the CPU backend
 * (src/cpu), the reference model (model/), the simulators, verify harness
 * and trace generator (sim/), the tests, the fuzz harness and the CUDA
 * benchmarks.
 *
 *   dhs_mix64        the splitmix64 finaliser: a bijective 64-bit hash
 *   dhs_rng_next     splitmix64: state += golden gamma, then dhs_mix64
 *   dhs_rng_below / _unit / _range / _f24   draws derived from dhs_rng_next
 *   dhs_xoshiro_*    xoshiro256**, seeded with four splitmix64 draws, where a
 *                    generator wants a longer period (the trace generator)
 *
 * Header-only (static inline), dependency-free (stdint.h alone), so the core
 * can include it without depending on sim/, and plain C that nvcc accepts:
 * under nvcc every function is also a __device__ function. Changing anything
 * here changes every seeded trace, workload, model weight and documented
 * figure (tests/cli/docs.sh checks the figures). */
#ifndef DHS_UTIL_RNG_H
#define DHS_UTIL_RNG_H

#include <stdint.h>

#if defined(__CUDACC__)
#define DHS_RNG_FN static inline __host__ __device__
#else
#define DHS_RNG_FN static inline
#endif

/* the splitmix64 finaliser: a bijective 64-bit hash */
DHS_RNG_FN uint64_t dhs_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* splitmix64 stream over state *s */
DHS_RNG_FN uint64_t dhs_rng_next(uint64_t *s) { return dhs_mix64(*s += 0x9e3779b97f4a7c15ull); }
/* uniform in [0, n); 0 when n <= 0 */
DHS_RNG_FN int64_t dhs_rng_below(uint64_t *s, int64_t n) { return n <= 0 ? 0 : (int64_t)(dhs_rng_next(s) % (uint64_t)n); }
/* uniform in [0, 1) with 53 bits */
DHS_RNG_FN double dhs_rng_unit(uint64_t *s) { return (double)(dhs_rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }
/* uniform in [0, 1) with 24 bits, as a float (the reference model's draws) */
DHS_RNG_FN float dhs_rng_f24(uint64_t *s) { return (float)(dhs_rng_next(s) >> 40) * (1.0f / 16777216.0f); }
/* uniform in [lo, hi]; lo when hi <= lo */
DHS_RNG_FN int64_t dhs_rng_range(uint64_t *s, int64_t lo, int64_t hi) { return hi <= lo ? lo : lo + dhs_rng_below(s, hi - lo + 1); }

/* xoshiro256**, seeded with four splitmix64 draws */
typedef struct dhs_xoshiro { uint64_t s[4]; } dhs_xoshiro;

DHS_RNG_FN void dhs_xoshiro_seed(dhs_xoshiro *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = dhs_rng_next(&x);
}

DHS_RNG_FN uint64_t dhs_xoshiro_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

DHS_RNG_FN uint64_t dhs_xoshiro_next(dhs_xoshiro *r)
{
    uint64_t *s = r->s;
    uint64_t res = dhs_xoshiro_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = dhs_xoshiro_rotl(s[3], 45);
    return res;
}

#undef DHS_RNG_FN
#endif
