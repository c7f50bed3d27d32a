/* testfiles.c - see testfiles.h. */
#include "testfiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TILE_SOURCE_DIR
#define TILE_SOURCE_DIR "."
#endif

const char *test_source_dir(void) {
  const char *e = getenv("TILE_SOURCE_DIR");
  return e && *e ? e : TILE_SOURCE_DIR;
}

void test_lib_path(char *buf, size_t cap, const char *file) {
  snprintf(buf, cap, "%s/lib/%s", test_source_dir(), file);
}

char *test_read_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  char *buf = NULL;
  if (fseek(fp, 0, SEEK_END) == 0) {
    long n = ftell(fp);
    if (n >= 0 && fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
      size_t got = fread(buf, 1, (size_t)n, fp);
      buf[got] = 0;
      if (len) *len = got;
    }
  }
  fclose(fp);
  return buf;
}

const char TEST_VADD_IR[] =
    "kernel @vadd(%X: tensor<f32[%N]>, %Y: tensor<f32[%N]>, %Z: out tensor<f32[%N]>, %s: f32) warps=4 {\n"
    "grid:\n"
    "  %0 = const 63 : i32\n"
    "  %1 = add %N, %0 : i32\n"
    "  %2 = const 64 : i32\n"
    "  %3 = div %1, %2 : i32\n"
    "  %4 = const 1 : i32\n"
    "  grid %3, %4, %4\n"
    "body:\n"
    "  %5 = program_id {axis=0} : i32\n"
    "  %6 = const 64 : i32\n"
    "  %7 = mul %5, %6 : i32\n"
    "  %8 = load %X[%7] {mask=1} : tile<64xf32>\n"
    "  %9 = load %Y[%7] {mask=1, fill=-inf} : tile<64xf32>\n"
    "  %10 = splat %s : tile<64xf32>\n"
    "  %11 = mul %8, %10 : tile<64xf32>\n"
    "  %12 = add %11, %9 : tile<64xf32>\n"
    "  store %Z[%7], %12 {mask=1}\n"
    "}\n";

tile_status test_emit_ptx(tile_context *ctx, const char *name, const char *src, const char *arch, unsigned flags,
                          char **out) {
  tile_compile_options co = {.device = TILE_DEVICE_CUDA, .arch = arch, .flags = flags};
  tile_emit_options eo = {.what = TILE_EMIT_PTX};
  *out = NULL;
  return tile_emit(ctx, name, src, strlen(src), &co, &eo, out, NULL);
}
