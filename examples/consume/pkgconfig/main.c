/* main.c - a consumer of an installed tile, built with a plain cc and pkg-config (build.sh).
 *
 * Compiles the installed lib kernel gemm.tile for f32 with small tiles through the public
 * API, runs C = A @ B on the CPU interpreter for a 40 x 24 x 56 product of reproducible
 * inputs, and compares with a triple loop in double. Prints "consume_gemm: ok ..." and
 * exits 0 when the largest difference is below 1e-4; exits 1 otherwise. The kernel
 * directory is compiled in (pkg-config --variable=kerneldir tile); an argument overrides it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "tile.h"

#ifndef TILE_KERNEL_DIR
#define TILE_KERNEL_DIR "."
#endif

enum { M = 40, N = 24, K = 56 };

int main(int argc, char **argv) {
  static float a[M * K], b[K * N], c[M * N];
  uint32_t state = 777;
  for (int i = 0; i < M * K + K * N; i++) { /* a small LCG: values in [-1, 1) */
    state = state * 1664525u + 1013904223u;
    float v = (float)(state >> 8) / (float)(1u << 23) - 1.0f;
    if (i < M * K) a[i] = v;
    else b[i - M * K] = v;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/gemm.tile", argc > 1 ? argv[1] : TILE_KERNEL_DIR);

  tile_context *ctx;
  tile_kernel *k;
  if (tile_context_create(&(tile_context_options){.cache_dir = ""}, &ctx) != TILE_OK) return 1;
  tile_define defs[] = {{"T", "f32"}, {"BM", "32"}, {"BN", "32"}, {"BK", "16"}};
  tile_compile_options co = {.kernel = "gemm", .device = TILE_DEVICE_CPU, .defines = defs, .ndefines = 4};
  /* (A: T[M, K], B: T[K, N], C: out T[M, N], bias: T[N], R: T[M, N], alpha: f32, beta: f32);
   * bias and R are unused without HAS_BIAS and HAS_RESIDUAL, so NULL */
  tile_arg args[7] = {tile_arg_tensor(a, TILE_F32, 2, (int64_t[]){M, K}, NULL),
                      tile_arg_tensor(b, TILE_F32, 2, (int64_t[]){K, N}, NULL),
                      tile_arg_tensor(c, TILE_F32, 2, (int64_t[]){M, N}, NULL),
                      tile_arg_tensor(NULL, TILE_F32, 1, (int64_t[]){N}, NULL),
                      tile_arg_tensor(NULL, TILE_F32, 2, (int64_t[]){M, N}, NULL),
                      tile_arg_float(1.0),
                      tile_arg_float(0.0)};
  if (tile_compile_file(ctx, path, &co, &k) != TILE_OK || tile_launch(ctx, k, args, 7, NULL) != TILE_OK) {
    fprintf(stderr, "consume_gemm: %s\n", tile_errmsg(ctx));
    tile_context_destroy(ctx);
    return 1;
  }
  double worst = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double want = 0;
      for (int p = 0; p < K; p++) want += (double)a[i * K + p] * b[p * N + j];
      double d = fabs(want - c[i * N + j]);
      worst = d > worst || isnan(d) ? d : worst;
    }
  printf("consume_gemm: %s (%s, %s [%s], max |error| %.2g)\n", worst < 1e-4 ? "ok" : "WRONG", tile_version(),
         tile_kernel_name(k), tile_kernel_config(k), worst);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  return worst < 1e-4 ? 0 : 1;
}
