/* bench_util.h - what the benchmark tools share: where they find lib/, the clock
 * (tl_now_ms, from compiler/util/clock.h) and a comparison for sorting timings (included
 * by bench_compile.c and bench_gemm.c; static functions, no object of its own). */
#ifndef TOOLS_BENCH_UTIL_H
#define TOOLS_BENCH_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h" /* tl_now_ms */

static bool file_exists(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb");
  if (f) fclose(f);
  return f != NULL;
}

/* --lib, $TILE_LIB_DIR, ./lib, then ../lib next to this executable (build/ or .carry/). */
static bool find_lib(const char *opt, char *out, size_t cap) {
  const char *env = getenv("TILE_LIB_DIR");
  if (opt || (env && env[0])) { /* told where: no guessing */
    snprintf(out, cap, "%s", opt ? opt : env);
    return file_exists(out, "gemm.tile");
  }
  snprintf(out, cap, "lib");
  if (file_exists(out, "gemm.tile")) return true;
  char exe[2048];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      snprintf(out, cap, "%s/../lib", exe);
      if (file_exists(out, "gemm.tile")) return true;
    }
  }
  return false;
}

/* qsort order of doubles. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
