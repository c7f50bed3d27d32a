/* softmax.c - compile the library's row-wise softmax once and run it on two shapes.
 *
 *     Y[i, :] = exp(X[i, :] - max_j X[i, j]) / sum_j exp(X[i, j] - max_j X[i, j])
 *
 * What it shows:
 *  - one compiled kernel launched with different sizes: the sizes are runtime values, and
 *    the kernel itself picks its path (rows that fit in one BN-wide tile are read once,
 *    longer rows take the two-pass online softmax);
 *  - a compile-time parameter that tunes rather than changes the result (BN, the tile width);
 *  - the GPU when there is one, else the CPU interpreter, with the same code;
 *  - checking against a plain C loop (in double).
 *
 * Usage: example_softmax [ROWS]     (default 257)
 * lib/softmax.tile is looked up in $TILE_LIB_DIR, then in the source tree the example was
 * built from. Exit status: 0 when every result matches, 1 otherwise.                     */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tile.h"
#include "example_util.h"

/* Reproducible uniform numbers in [-4, 4): a wide enough range that the max matters. */
static float wide(void) { return 4.0f * uniform(); }

/* Runs softmax on a rows x cols matrix and compares with the definition; 1 when it matches. */
static int run_one(tile_context *ctx, tile_device dev, tile_kernel *k, int64_t rows, int64_t cols) {
  size_t n = (size_t)(rows * cols), bytes = n * sizeof(float);
  float *x = malloc(bytes), *y = malloc(bytes);
  void *d_x = NULL, *d_y = NULL;
  int ok = 0;
  tile_status st = TILE_NOMEM;
  if (!x || !y) goto done;
  for (size_t i = 0; i < n; i++) x[i] = wide();

  if ((st = tile_mem_alloc(ctx, dev, bytes, &d_x)) || (st = tile_mem_alloc(ctx, dev, bytes, &d_y)) ||
      (st = tile_mem_upload(ctx, dev, d_x, x, bytes)))
    goto done;
  /* (X: T[M, N], Y: out T[M, N]) */
  tile_arg args[2] = {
      tile_arg_tensor(d_x, TILE_F32, 2, (int64_t[]){rows, cols}, NULL),
      tile_arg_tensor(d_y, TILE_F32, 2, (int64_t[]){rows, cols}, NULL),
  };
  if ((st = tile_launch(ctx, k, args, 2, NULL)) || (st = tile_synchronize(ctx, dev)) ||
      (st = tile_mem_download(ctx, dev, y, d_y, bytes)))
    goto done;

  double err2 = 0, ref2 = 0, max_abs = 0;
  for (int64_t i = 0; i < rows; i++) {
    const float *xi = x + i * cols;
    double m = -INFINITY, l = 0;
    for (int64_t j = 0; j < cols; j++) m = xi[j] > m ? xi[j] : m;
    for (int64_t j = 0; j < cols; j++) l += exp(xi[j] - m);
    for (int64_t j = 0; j < cols; j++) {
      double want = exp(xi[j] - m) / l, got = y[i * cols + j];
      double d = isnan(got) ? INFINITY : fabs(got - want);
      err2 += d * d;
      ref2 += want * want;
      if (d > max_abs) max_abs = d;
    }
  }
  double rel = sqrt(err2 / ref2);
  const double tol = 1e-4; /* f32 throughout, but the GPU uses fast exp2 and division */
  ok = rel <= tol;
  printf("  X[%lld x %lld]: relative L2 error %.3e, max abs error %.3e (tolerance %.0e): %s\n",
         (long long)rows, (long long)cols, rel, max_abs, tol, ok ? "PASS" : "FAIL");

done:
  if (st != TILE_OK)
    fprintf(stderr, "  X[%lld x %lld]: %s: %s\n", (long long)rows, (long long)cols,
            tile_status_name(st), tile_errmsg(ctx)[0] ? tile_errmsg(ctx) : tile_strerror(st));
  tile_mem_free(ctx, dev, d_x);
  tile_mem_free(ctx, dev, d_y);
  free(x);
  free(y);
  return ok;
}

int main(int argc, char **argv) {
  int64_t rows = argc > 1 ? atoll(argv[1]) : 257;
  if (rows <= 0 || argc > 2) {
    fprintf(stderr, "usage: %s [ROWS]\n", argv[0]);
    return 1;
  }
  tile_context *ctx;
  if (tile_context_create(NULL, &ctx) != TILE_OK) {
    fprintf(stderr, "cannot create a tile context\n");
    return 1;
  }

  /* The GPU if the CUDA driver sees one, else the interpreter. */
  tile_device_info info;
  tile_device dev;
  pick_device(ctx, &dev, &info);

  char path[1024];
  lib_path(path, sizeof path, "softmax.tile");
  tile_define defines[] = {{"T", "f32"}, {"BN", "512"}};
  tile_compile_options co = {0};
  co.defines = defines;
  co.ndefines = 2;
  co.device = dev; /* co.kernel = NULL: the file's only kernel */
  tile_kernel *k = NULL;
  if (tile_compile_file(ctx, path, &co, &k) != TILE_OK) {
    fprintf(stderr, "%s", tile_errmsg(ctx)); /* diagnostics, rendered with source lines */
    tile_context_destroy(ctx);
    return 1;
  }
  printf("compiled %s [%s]\n", tile_kernel_name(k), tile_kernel_config(k));

  int ok = 1;
  ok &= run_one(ctx, dev, k, rows, 300);  /* a row fits one 512-wide tile: one pass */
  ok &= run_one(ctx, dev, k, rows, 3001); /* longer rows: online max/sum, then the output */
  ok &= run_one(ctx, dev, k, 1, 1);       /* the smallest case: the answer is exactly 1 */

  printf("%s\n", ok ? "PASS" : "FAIL");
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  return ok ? 0 : 1;
}
