/* main.c - a consumer of an installed tile, built with CMake (find_package(tile)).
 *
 * Compiles the installed lib kernel softmax.tile (f32) through the public API, runs it on
 * the CPU interpreter over a 5 x 300 matrix of reproducible inputs and compares every row
 * with the definition computed here in double. Prints "consume_softmax: ok ..." and exits 0
 * when the largest difference is below 1e-5; exits 1 otherwise. The kernel directory comes
 * from the package (tile_KERNEL_DIR); an argument overrides it.                          */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "tile.h"

#ifndef TILE_KERNEL_DIR
#define TILE_KERNEL_DIR "."
#endif

enum { ROWS = 5, COLS = 300 };

int main(int argc, char **argv) {
  static float x[ROWS * COLS], y[ROWS * COLS];
  uint32_t state = 12345;
  for (int i = 0; i < ROWS * COLS; i++) { /* a small LCG: values in [-4, 4) */
    state = state * 1664525u + 1013904223u;
    x[i] = (float)(state >> 8) / (float)(1u << 24) * 8.0f - 4.0f;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/softmax.tile", argc > 1 ? argv[1] : TILE_KERNEL_DIR);

  tile_context *ctx;
  tile_kernel *k;
  if (tile_context_create(&(tile_context_options){.cache_dir = ""}, &ctx) != TILE_OK) return 1;
  tile_define defs[] = {{"T", "f32"}, {"BN", "128"}};
  tile_compile_options co = {.device = TILE_DEVICE_CPU, .defines = defs, .ndefines = 2};
  tile_arg args[2] = {tile_arg_tensor(x, TILE_F32, 2, (int64_t[]){ROWS, COLS}, NULL),
                      tile_arg_tensor(y, TILE_F32, 2, (int64_t[]){ROWS, COLS}, NULL)};
  if (tile_compile_file(ctx, path, &co, &k) != TILE_OK || tile_launch(ctx, k, args, 2, NULL) != TILE_OK) {
    fprintf(stderr, "consume_softmax: %s\n", tile_errmsg(ctx));
    tile_context_destroy(ctx);
    return 1;
  }
  double worst = 0;
  for (int r = 0; r < ROWS; r++) {
    const float *xr = x + r * COLS;
    double m = -INFINITY, sum = 0;
    for (int c = 0; c < COLS; c++) m = xr[c] > m ? xr[c] : m;
    for (int c = 0; c < COLS; c++) sum += exp(xr[c] - m);
    for (int c = 0; c < COLS; c++) {
      double d = fabs(exp(xr[c] - m) / sum - y[r * COLS + c]);
      worst = d > worst || isnan(d) ? d : worst;
    }
  }
  printf("consume_softmax: %s (%s, %s, max |error| %.2g)\n", worst < 1e-5 ? "ok" : "WRONG", tile_version(),
         tile_kernel_name(k), worst);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  return worst < 1e-5 ? 0 : 1;
}
