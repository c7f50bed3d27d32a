/* example_util.h - what the examples share: reproducible random inputs, bf16 conversions,
 * where lib/ is, the choice of device and the TRY error check. Only static inline
 * functions and macros, so each example takes what it uses. */
#ifndef EXAMPLE_UTIL_H
#define EXAMPLE_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"

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

/* The GPU if the CUDA driver sees one, else the CPU interpreter; says which. */
static inline tile_status pick_device(tile_context *ctx, tile_device *dev, tile_device_info *info) {
  *dev = TILE_DEVICE_CUDA;
  if (tile_device_query(ctx, TILE_DEVICE_CUDA, info) != TILE_OK) {
    printf("no GPU (%s); using the CPU interpreter\n", tile_errmsg(ctx));
    *dev = TILE_DEVICE_CPU;
    tile_status st = tile_device_query(ctx, TILE_DEVICE_CPU, info);
    if (st != TILE_OK) return st;
  }
  printf("device: %s (%s)\n", info->name, info->arch);
  return TILE_OK;
}

/* On failure: print what the library said and clean up (the caller has a tile_context
 * *ctx, a tile_status st and a label done). */
#define TRY(call)                                                                              \
  do {                                                                                         \
    if ((st = (call)) != TILE_OK) {                                                            \
      fprintf(stderr, "%s: %s\n", tile_status_name(st),                                       \
              tile_errmsg(ctx)[0] ? tile_errmsg(ctx) : tile_strerror(st));                    \
      goto done;                                                                               \
    }                                                                                          \
  } while (0)

#endif
