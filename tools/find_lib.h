/* find_lib.h - where the benchmark tools find lib/ (included by bench_compile.c and
 * bench_gemm.c; static functions, no object of its own). */
#ifndef TOOLS_FIND_LIB_H
#define TOOLS_FIND_LIB_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

#endif
