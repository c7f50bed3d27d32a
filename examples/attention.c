/* attention.c - causal grouped-query attention with the library's FlashAttention kernel.
 *
 *     O = softmax(scale * Q K^T + causal mask) V,    LSE = logsumexp of each score row
 *
 *     Q: bf16[B, H, N, D]    K, V: bf16[B, HKV, N, D]    O: bf16[B, H, N, D]    LSE: f32[B, H, N]
 *
 * What it shows:
 *  - compile-time switches: T=bf16, D=64, CAUSAL=true (query i sees keys j <= i, as PyTorch's
 *    is_causal) and HAS_LSE=true (also write the log-sum-exp, which a backward pass needs);
 *  - grouped-query attention: H query heads share HKV key/value heads (head h reads kv head
 *    h / (H / HKV)); nothing to configure, it follows from the shapes;
 *  - a float scalar argument (scale = 1 / sqrt(D));
 *  - the GPU when there is one, else the CPU interpreter, and a check of both outputs
 *    against a plain C loop.
 *
 * Usage: example_attention [N]       (default 300 queries = keys; B=2, H=8, HKV=2, D=64)
 * lib/attention.tile is looked up in $TILE_LIB_DIR, then in the source tree the example was
 * built from. Exit status: 0 when the results match, 1 otherwise.                         */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"
#include "example_util.h"

enum { B = 2, H = 8, HKV = 2, D = 64 };

/* Accumulates the squared error of got against want into e[0], e[1] (and the max into e[2]). */
static void account(double *e, double got, double want) {
  double d = isnan(got) ? INFINITY : fabs(got - want);
  e[0] += d * d;
  e[1] += want * want;
  if (d > e[2]) e[2] = d;
}

int main(int argc, char **argv) {
  int64_t N = argc > 1 ? atoll(argv[1]) : 300;
  if (N <= 0 || argc > 2) {
    fprintf(stderr, "usage: %s [N]\n", argv[0]);
    return 1;
  }
  const size_t nq = (size_t)(B * H * N * D), nkv = (size_t)(B * HKV * N * D), nl = (size_t)(B * H * N);
  const double scale = 1.0 / sqrt((double)D);

  int ok = 0;
  tile_context *ctx = NULL;
  tile_kernel *k = NULL;
  tile_device dev = TILE_DEVICE_CUDA;
  uint16_t *q = malloc(nq * 2), *kk = malloc(nkv * 2), *v = malloc(nkv * 2), *o = malloc(nq * 2);
  float *lse = malloc(nl * sizeof(float));
  double *s = malloc((size_t)N * sizeof(double)); /* one row of scores, for the reference */
  void *d_q = NULL, *d_k = NULL, *d_v = NULL, *d_o = NULL, *d_lse = NULL;
  tile_status st;
  if (!q || !kk || !v || !o || !lse || !s || tile_context_create(NULL, &ctx) != TILE_OK) {
    fprintf(stderr, "out of memory\n");
    goto done;
  }
  /* The GPU if the CUDA driver sees one, else the interpreter. */
  tile_device_info info;
  TRY(pick_device(ctx, &dev, &info));

  char path[1024];
  lib_path(path, sizeof path, "attention.tile");
  tile_define defines[] = {{"T", "bf16"}, {"D", "64"}, {"CAUSAL", "true"}, {"HAS_LSE", "true"}};
  tile_compile_options co = {0};
  co.defines = defines;
  co.ndefines = sizeof defines / sizeof defines[0];
  co.device = dev;
  TRY(tile_compile_file(ctx, path, &co, &k));
  printf("compiled %s [%s]\n", tile_kernel_name(k), tile_kernel_config(k));

  for (size_t i = 0; i < nq; i++) q[i] = bf16_from_float(uniform());
  for (size_t i = 0; i < nkv; i++) kk[i] = bf16_from_float(uniform());
  for (size_t i = 0; i < nkv; i++) v[i] = bf16_from_float(uniform());

  TRY(tile_mem_alloc(ctx, dev, nq * 2, &d_q));
  TRY(tile_mem_alloc(ctx, dev, nkv * 2, &d_k));
  TRY(tile_mem_alloc(ctx, dev, nkv * 2, &d_v));
  TRY(tile_mem_alloc(ctx, dev, nq * 2, &d_o));
  TRY(tile_mem_alloc(ctx, dev, nl * sizeof(float), &d_lse));
  TRY(tile_mem_upload(ctx, dev, d_q, q, nq * 2));
  TRY(tile_mem_upload(ctx, dev, d_k, kk, nkv * 2));
  TRY(tile_mem_upload(ctx, dev, d_v, v, nkv * 2));

  /* (Q: T[B, H, N, D], K: T[B, HKV, NK, D], V: T[B, HKV, NK, D], O: out T[B, H, N, D],
   *  LSE: out f32[B, H, N], scale: f32) */
  int64_t qshape[4] = {B, H, N, D}, kvshape[4] = {B, HKV, N, D}, lshape[3] = {B, H, N};
  tile_arg args[] = {
      tile_arg_tensor(d_q, TILE_BF16, 4, qshape, NULL), tile_arg_tensor(d_k, TILE_BF16, 4, kvshape, NULL),
      tile_arg_tensor(d_v, TILE_BF16, 4, kvshape, NULL), tile_arg_tensor(d_o, TILE_BF16, 4, qshape, NULL),
      tile_arg_tensor(d_lse, TILE_F32, 3, lshape, NULL), tile_arg_float(scale),
  };
  TRY(tile_launch(ctx, k, args, sizeof args / sizeof args[0], NULL));
  TRY(tile_synchronize(ctx, dev));
  TRY(tile_mem_download(ctx, dev, o, d_o, nq * 2));
  TRY(tile_mem_download(ctx, dev, lse, d_lse, nl * sizeof(float)));
  printf("ran causal attention: B=%d, H=%d query heads over HKV=%d kv heads, N=%lld, D=%d\n", B, H,
         HKV, (long long)N, D);

  /* The reference: the definition in double, one query row at a time. */
  double eo[3] = {0}, el[3] = {0};
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      int hk = h / (H / HKV);
      const uint16_t *qh = q + ((size_t)(b * H + h) * (size_t)N) * D;
      const uint16_t *kh = kk + ((size_t)(b * HKV + hk) * (size_t)N) * D;
      const uint16_t *vh = v + ((size_t)(b * HKV + hk) * (size_t)N) * D;
      for (int64_t i = 0; i < N; i++) {
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j <= i; j++) { /* causal: keys 0..i */
          double dot = 0;
          for (int d = 0; d < D; d++) dot += (double)bf16_to_float(qh[i * D + d]) * bf16_to_float(kh[j * D + d]);
          s[j] = scale * dot;
          if (s[j] > m) m = s[j];
        }
        for (int64_t j = 0; j <= i; j++) l += (s[j] = exp(s[j] - m));
        const uint16_t *orow = o + ((size_t)(b * H + h) * (size_t)N + (size_t)i) * D;
        for (int d = 0; d < D; d++) {
          double acc = 0;
          for (int64_t j = 0; j <= i; j++) acc += s[j] * bf16_to_float(vh[j * D + d]);
          account(eo, bf16_to_float(orow[d]), acc / l);
        }
        account(el, lse[(size_t)(b * H + h) * (size_t)N + (size_t)i], m + log(l));
      }
    }
  double rel_o = sqrt(eo[0] / eo[1]), rel_l = sqrt(el[0] / el[1]);
  /* O: bf16 output, and P is rounded to bf16 before P @ V (as in FlashAttention) */
  const double tol_o = 2e-2, tol_l = 1e-4;
  ok = rel_o <= tol_o && rel_l <= tol_l;
  printf("O:   relative L2 error %.3e, max abs error %.3e (tolerance %.0e)\n", rel_o, eo[2], tol_o);
  printf("LSE: relative L2 error %.3e, max abs error %.3e (tolerance %.0e)\n", rel_l, el[2], tol_l);
  printf("%s\n", ok ? "PASS" : "FAIL");

done:
  tile_mem_free(ctx, dev, d_q);
  tile_mem_free(ctx, dev, d_k);
  tile_mem_free(ctx, dev, d_v);
  tile_mem_free(ctx, dev, d_o);
  tile_mem_free(ctx, dev, d_lse);
  free(q);
  free(kk);
  free(v);
  free(o);
  free(lse);
  free(s);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
  return ok ? 0 : 1;
}
