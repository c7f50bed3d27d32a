/* rng.h - the one pseudo-random generator: the autotuner's order of configurations, the
 * tools' random inputs (tilec run, bench_gemm, cuda_smoke) and the tests' inputs.
 *
 * Design choices:
 *  - The generator is xoshiro256** (Blackman and Vigna), seeded by running splitmix64 over a
 *    single 64-bit seed, so any seed, including 0, gives a well-mixed, non-zero state.
 *    rng_splitmix64 alone is a generator too, for a stream that needs one word of state.
 *  - All state lives in a struct rng that the caller owns; there are no globals, so
 *    independent streams never disturb each other and results depend only on the seed.
 *  - Header-only and static inline, like readfile.h and clock.h: tilec and the other tools
 *    link only the public API. Seeds for test runs (fresh each run, printed, replayable)
 *    are in tests/support/test_seed.h.
 */
#ifndef TL_RNG_H
#define TL_RNG_H

#include <math.h>
#include <stdint.h>

struct rng {
  uint64_t s[4];  /* xoshiro256** state; never all zero */
  int has_spare;  /* rng_normal's Box-Muller transform makes two values per call */
  double spare;
};

/* One step of splitmix64: advances *x and returns a well-mixed 64-bit value. */
static inline uint64_t rng_splitmix64(uint64_t *x) {
  uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static inline void rng_seed(struct rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&x);
  r->has_spare = 0;
  r->spare = 0.0;
}

static inline uint64_t rng__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* The next 64 uniformly distributed bits. */
static inline uint64_t rng_u64(struct rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rng__rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rng__rotl(s[3], 45);
  return result;
}

static inline uint32_t rng_u32(struct rng *r) { return (uint32_t)(rng_u64(r) >> 32); }

/* A uniform integer in [0, n); n must be non-zero. Rejection sampling keeps it unbiased. */
static inline uint64_t rng_below(struct rng *r, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* largest multiple of n, or 0 if 2^64 */
  for (;;) {
    uint64_t x = rng_u64(r);
    if (limit == 0 || x < limit) return x % n;
  }
}

/* A uniform double in [0, 1) with 53 random bits. */
static inline double rng_double(struct rng *r) {
  return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* A uniform float in [lo, hi); returns lo when hi <= lo. */
static inline float rng_uniform(struct rng *r, float lo, float hi) {
  if (!(hi > lo)) return lo;
  float x = (float)((double)lo + ((double)hi - (double)lo) * rng_double(r));
  if (x >= hi) x = nextafterf(hi, lo); /* rounding to float can reach hi; keep it half-open */
  if (x < lo) x = lo;
  return x;
}

/* A standard normal sample (mean 0, standard deviation 1), by the Box-Muller transform. */
static inline float rng_normal(struct rng *r) {
  if (r->has_spare) {
    r->has_spare = 0;
    return (float)r->spare;
  }
  double u1 = 1.0 - rng_double(r); /* in (0, 1], so the logarithm is finite */
  double u2 = rng_double(r);
  double radius = sqrt(-2.0 * log(u1));
  double angle = 6.283185307179586476925286766559 * u2;
  r->spare = radius * sin(angle);
  r->has_spare = 1;
  return (float)(radius * cos(angle));
}

#endif /* TL_RNG_H */
