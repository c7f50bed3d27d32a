/* test_seed.h - seeds for test runs: tests draw fresh inputs on every run. rng_test_seed()
 * picks a seed from the clock and the process id and prints it, and the environment
 * variable TILE_TEST_SEED (decimal, or hexadecimal with 0x) overrides it, so a failing run
 * can be replayed exactly. The generator itself is compiler/util/rng.h.                  */
#ifndef TL_TEST_SEED_H
#define TL_TEST_SEED_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "rng.h"

/* A seed for a test run: TILE_TEST_SEED when it is set and parses as an unsigned integer,
 * otherwise a mix of the wall clock (nanoseconds), the process id and the processor clock. */
static inline uint64_t rng_fresh_seed(void) {
  const char *env = getenv("TILE_TEST_SEED");
  if (env && *env) {
    char *end = NULL;
    unsigned long long v = strtoull(env, &end, 0);
    if (end != env && *end == '\0') return (uint64_t)v;
    fprintf(stderr, "rng: ignoring TILE_TEST_SEED=\"%s\": not an unsigned integer\n", env);
  }
  struct timespec ts = {0, 0};
  timespec_get(&ts, TIME_UTC);
  uint64_t x = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
  x ^= (uint64_t)getpid() << 32;
  x ^= (uint64_t)clock();
  return rng_splitmix64(&x);
}

/* rng_fresh_seed(), printed to stderr with the name of the test that uses it, so a failure
 * can be reproduced by rerunning with the printed TILE_TEST_SEED. */
static inline uint64_t rng_test_seed(const char *test_name) {
  uint64_t seed = rng_fresh_seed();
  fprintf(stderr, "%s: seed 0x%016llx (rerun with TILE_TEST_SEED=0x%016llx)\n",
          test_name ? test_name : "test", (unsigned long long)seed, (unsigned long long)seed);
  return seed;
}

#endif /* TL_TEST_SEED_H */
