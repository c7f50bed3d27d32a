/* example_util.h - what the examples share: reproducible random inputs, bf16 conversions
 * and where lib/ is. Only static inline functions, so each example takes what it uses. */
#ifndef EXAMPLE_UTIL_H
#define EXAMPLE_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TILE_SOURCE_DIR
#define TILE_SOURCE_DIR "."
#endif

/* Reproducible uniform numbers in [-1, 1) (xorshift64, fixed seed). */
static uint64_t example_rng = 0x9e3779b97f4a7c15ull;
static inline float uniform(void) {
  example_rng ^= example_rng << 13;
  example_rng ^= example_rng >> 7;
  example_rng ^= example_rng << 17;
  return (float)((double)(example_rng >> 11) / 4503599627370496.0 - 1.0);
}

/* bf16 is the upper half of an IEEE float: converting is a shift (with rounding). */
static inline uint16_t bf16_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (inputs here are finite) */
  return (uint16_t)(u >> 16);
}
static inline float bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The path of lib/FILE: in $TILE_LIB_DIR, else in the source tree the example was built from. */
static inline void lib_path(char *buf, size_t cap, const char *file) {
  const char *dir = getenv("TILE_LIB_DIR");
  if (dir && dir[0])
    snprintf(buf, cap, "%s/%s", dir, file);
  else
    snprintf(buf, cap, "%s/lib/%s", TILE_SOURCE_DIR, file);
}

#endif
