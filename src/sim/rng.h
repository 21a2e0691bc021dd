/* rng.h - the one random stream of the simulators, the verify harness and
 * the trace generator: splitmix64 (a 64-bit state advanced by the golden
 * gamma, then the mix64 finaliser), plus xoshiro256** seeded from it where a
 * generator wants a longer period. Header-only (static inline) so every
 * caller gets the same bits; changing anything here changes every seeded
 * trace, workload and documented figure. */
#ifndef DHS_SIM_RNG_H
#define DHS_SIM_RNG_H

#include <stdint.h>

/* the splitmix64 finaliser: a bijective 64-bit hash */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* splitmix64 stream over state *s */
static inline uint64_t rnd(uint64_t *s) { return mix64(*s += 0x9e3779b97f4a7c15ull); }
/* uniform in [0, n); 0 when n <= 0 */
static inline int64_t rnd_below(uint64_t *s, int64_t n) { return n <= 0 ? 0 : (int64_t)(rnd(s) % (uint64_t)n); }
/* uniform in [0, 1) with 53 bits */
static inline double rnd_unit(uint64_t *s) { return (double)(rnd(s) >> 11) * (1.0 / 9007199254740992.0); }
/* uniform in [lo, hi]; lo when hi <= lo */
static inline int64_t rnd_range(uint64_t *s, int64_t lo, int64_t hi) { return hi <= lo ? lo : lo + rnd_below(s, hi - lo + 1); }

/* xoshiro256**, seeded with four splitmix64 draws */
typedef struct dhs_xoshiro { uint64_t s[4]; } dhs_xoshiro;

static inline void xoshiro_seed(dhs_xoshiro *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = rnd(&x);
}

static inline uint64_t xoshiro_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t xoshiro_next(dhs_xoshiro *r)
{
    uint64_t *s = r->s;
    uint64_t res = xoshiro_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = xoshiro_rotl(s[3], 45);
    return res;
}

#endif
