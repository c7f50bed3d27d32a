/* gemm_bias_gelu.c - compile the library GEMM with a fused bias + GELU epilogue and run it.
 *
 *     C = gelu(A @ B + bias)     A: bf16[M, K]   B: bf16[K, N]   bias: bf16[N]   C: bf16[M, N]
 *
 * What it shows:
 *  - choosing a kernel of a file (lib/gemm.tile has `gemm` and `bmm`) and setting its
 *    compile-time parameters: T=bf16, ACT=gelu, HAS_BIAS=true;
 *  - running on the GPU when there is one and on the CPU interpreter otherwise, with the
 *    same code (the tile_mem_* helpers are plain host memory on the CPU);
 *  - passing NULL for a tensor this configuration does not read (the residual R) and values
 *    for scalars it ignores (alpha, beta: only read with SCALED=true);
 *  - checking the result against a plain C loop.
 *
 * Usage: example_gemm_bias_gelu [M N K]      (default 300 200 130: ragged on purpose; the
 *        kernel masks the partial tiles at the edges)
 * lib/gemm.tile is looked up in $TILE_LIB_DIR, then in the source tree the example was
 * built from. Exit status: 0 when the result matches, 1 otherwise.                       */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"
#include "example_util.h"

/* GELU in its tanh form (the library computes the same function as x * sigmoid(2u)). */
static double gelu(double x) {
  return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

int main(int argc, char **argv) {
  int64_t M = 300, N = 200, K = 130;
  if (argc == 4) {
    M = atoll(argv[1]);
    N = atoll(argv[2]);
    K = atoll(argv[3]);
  }
  if (M <= 0 || N <= 0 || K <= 0 || (argc != 1 && argc != 4)) {
    fprintf(stderr, "usage: %s [M N K]\n", argv[0]);
    return 1;
  }

  int ok = 0;
  tile_context *ctx = NULL;
  tile_kernel *k = NULL;
  uint16_t *a = NULL, *b = NULL, *bias = NULL, *c = NULL;
  void *d_a = NULL, *d_b = NULL, *d_bias = NULL, *d_c = NULL;
  tile_device dev = TILE_DEVICE_CUDA;
  tile_status st;

  if (tile_context_create(NULL, &ctx) != TILE_OK) {
    fprintf(stderr, "cannot create a tile context\n");
    return 1;
  }
  /* 1. Pick the device: the GPU if the CUDA driver sees one, else the interpreter. */
  tile_device_info info;
  TRY(pick_device(ctx, &dev, &info));

  /* 2. Compile `gemm` with the epilogue switched on. For CUDA the target code is generated
   *    on first launch, for the argument facts (alignment, divisibility) of that launch. */
  char path[1024];
  lib_path(path, sizeof path, "gemm.tile");
  tile_define defines[] = {{"T", "bf16"}, {"ACT", "gelu"}, {"HAS_BIAS", "true"}};
  tile_compile_options co = {0};
  co.kernel = "gemm";
  co.defines = defines;
  co.ndefines = sizeof defines / sizeof defines[0];
  co.device = dev;
  TRY(tile_compile_file(ctx, path, &co, &k));
  printf("compiled %s from %s\n  [%s]\n", tile_kernel_name(k), path, tile_kernel_config(k));

  /* 3. Random inputs on the host, rounded to bf16. */
  a = malloc((size_t)(M * K) * 2);
  b = malloc((size_t)(K * N) * 2);
  bias = malloc((size_t)N * 2);
  c = malloc((size_t)(M * N) * 2);
  if (!a || !b || !bias || !c) {
    fprintf(stderr, "out of host memory\n");
    goto done;
  }
  for (int64_t i = 0; i < M * K; i++) a[i] = bf16_from_float(uniform());
  for (int64_t i = 0; i < K * N; i++) b[i] = bf16_from_float(uniform());
  for (int64_t i = 0; i < N; i++) bias[i] = bf16_from_float(uniform());

  /* 4. Device buffers (host memory on the CPU device) and the copies in. */
  TRY(tile_mem_alloc(ctx, dev, (size_t)(M * K) * 2, &d_a));
  TRY(tile_mem_alloc(ctx, dev, (size_t)(K * N) * 2, &d_b));
  TRY(tile_mem_alloc(ctx, dev, (size_t)N * 2, &d_bias));
  TRY(tile_mem_alloc(ctx, dev, (size_t)(M * N) * 2, &d_c));
  TRY(tile_mem_upload(ctx, dev, d_a, a, (size_t)(M * K) * 2));
  TRY(tile_mem_upload(ctx, dev, d_b, b, (size_t)(K * N) * 2));
  TRY(tile_mem_upload(ctx, dev, d_bias, bias, (size_t)N * 2));

  /* 5. Arguments in the order of the kernel's parameters:
   *    (A: T[M, K], B: T[K, N], C: out T[M, N], bias: T[N], R: T[M, N], alpha: f32, beta: f32)
   *    The sizes M, N, K come from the shapes; the library checks that they agree. */
  tile_arg args[] = {
      tile_arg_tensor(d_a, TILE_BF16, 2, (int64_t[]){M, K}, NULL),
      tile_arg_tensor(d_b, TILE_BF16, 2, (int64_t[]){K, N}, NULL),
      tile_arg_tensor(d_c, TILE_BF16, 2, (int64_t[]){M, N}, NULL),
      tile_arg_tensor(d_bias, TILE_BF16, 1, (int64_t[]){N}, NULL),
      tile_arg_tensor(NULL, TILE_BF16, 2, (int64_t[]){M, N}, NULL), /* R: not used here */
      tile_arg_float(1.0),                                           /* alpha: not used */
      tile_arg_float(0.0),                                           /* beta: not used */
  };
  TRY(tile_launch(ctx, k, args, sizeof args / sizeof args[0], NULL));
  TRY(tile_synchronize(ctx, dev));
  TRY(tile_mem_download(ctx, dev, c, d_c, (size_t)(M * N) * 2));

  tile_kernel_stats ks;
  TRY(tile_kernel_get_stats(k, &ks));
  printf("ran C[%lld x %lld] = gelu(A[%lld x %lld] @ B + bias) on a %ux%ux%u grid",
         (long long)M, (long long)N, (long long)M, (long long)K, ks.grid[0], ks.grid[1], ks.grid[2]);
  if (dev == TILE_DEVICE_CUDA)
    printf(" of %u threads (%d registers, compiled in %.1f ms)", ks.threads, ks.registers,
           ks.compile_ms);
  printf("\n");

  /* 6. The reference: the definition, in double, on the same (bf16-rounded) inputs. */
  double err2 = 0, ref2 = 0, max_abs = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t p = 0; p < K; p++) acc += (double)bf16_to_float(a[i * K + p]) * bf16_to_float(b[p * N + j]);
      double want = gelu(acc + bf16_to_float(bias[j]));
      double got = bf16_to_float(c[i * N + j]);
      double d = isnan(got) ? INFINITY : fabs(got - want);
      err2 += d * d;
      ref2 += want * want;
      if (d > max_abs) max_abs = d;
    }
  double rel = sqrt(err2 / (ref2 > 0 ? ref2 : 1));
  const double tol = 1e-2; /* bf16 keeps 8 significant bits: the output rounding is ~0.3% */
  ok = rel <= tol;
  printf("relative L2 error %.3e, max abs error %.3e (tolerance %.0e): %s\n", rel, max_abs, tol,
         ok ? "PASS" : "FAIL");

done:
  tile_mem_free(ctx, dev, d_a);
  tile_mem_free(ctx, dev, d_b);
  tile_mem_free(ctx, dev, d_bias);
  tile_mem_free(ctx, dev, d_c);
  free(a);
  free(b);
  free(bias);
  free(c);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  return ok ? 0 : 1;
}
