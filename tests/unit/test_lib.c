/* test_lib.c - the kernel library (the .tile files of lib/) on the CPU interpreter, through the
 * public API, against the naive references of tests/support/ref.c.
 *
 *  - Every test draws FRESH inputs (rng_test_seed prints the seed; TILE_TEST_SEED replays a
 *    run). Inputs are uniform in [-1, 1) and never zero; they are generated as float, rounded
 *    to the kernel's dtype and stored in it, and the reference consumes the rounded values
 *    (in double), so the only differences left are the kernel's own roundings.
 *  - Outputs are poisoned with NaN before each launch (tensors the kernel also reads, like C
 *    with SCALED, get their input values instead), so an element the kernel fails to write
 *    is a NaN that ref_compare counts as bad.
 *  - Shapes are ragged (1, 7, 33, 100, 257, ... in each dimension) to hit every masking
 *    path, dtypes are f32, f16 and bf16, and several tile configurations are used: results
 *    must not depend on them.
 *
 * Tolerances (atol + rtol * |want|, see each test for the exact numbers). Let u(T) be the
 * unit roundoff of the stored dtype: u(f32) = 2^-24, u(f16) = 2^-11, u(bf16) = 2^-8.
 *  - Rounding the output to T costs at most u(T) * |value| (round to nearest), so narrow
 *    outputs get rtol = 1.25 u(T); the 25% absorbs the f32 error of the value before rounding.
 *    f16 outputs also get atol >= 2^-25, half the spacing of f16 subnormals.
 *  - Values computed in f32 (accumulators, statistics) carry f32 rounding errors that grow
 *    with the length of the sums; the f32 terms below (1e-5-ish relative) are about 10x
 *    what a GPU's FMA ordering and approximate exp2/log/rsqrt (a few ulp) produce, and 100x
 *    what the interpreter (double arithmetic, one rounding per op) produces, while any real
 *    bug (a missed element, a wrong mask, a wrong epilogue term) is off by 1e-3 or more.
 *  - Intermediate roundings to T that the kernels do on purpose (attention rounds P to T
 *    before P @ V) and TF32 inputs get the worst-case bound of that rounding; see there.
 * Set TILE_TEST_VERBOSE=1 to print the measured errors of every comparison.              */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "ref.h"
#include "test_seed.h"
#include "testfiles.h"
#include "tile.h"

/* ---- helpers ---------------------------------------------------------------------------- */


static bool verbose(void) {
  const char *e = getenv("TILE_TEST_VERBOSE");
  return e && *e && strcmp(e, "0") != 0;
}

static tile_dtype dtype_of(const char *name) {
  if (strcmp(name, "f16") == 0)
    return TILE_F16;
  if (strcmp(name, "bf16") == 0)
    return TILE_BF16;
  return TILE_F32;
}

/* Unit roundoff of a float dtype. */
static double unit_roundoff(tile_dtype dt) {
  switch (dt) {
  case TILE_F16: return ldexp(1.0, -11);
  case TILE_BF16: return ldexp(1.0, -8);
  default: return ldexp(1.0, -24);
  }
}

static float round_to(tile_dtype dt, float x) {
  switch (dt) {
  case TILE_F16: return tl_round_f16(x);
  case TILE_BF16: return tl_round_bf16(x);
  default: return x;
  }
}

/* A tensor stored in its dtype, with a float copy of its values. */
struct tbuf {
  tile_dtype dt;
  size_t n;
  void *data; /* n elements of dt */
  float *val; /* inputs: the (rounded) values the kernel sees; outputs: filled by tb_read */
};

static void tb_init(struct tbuf *b, tile_dtype dt, size_t n) {
  b->dt = dt;
  b->n = n;
  b->data = calloc(n ? n : 1, tile_dtype_size(dt));
  b->val = calloc(n ? n : 1, sizeof(float));
  cr_assert(b->data && b->val, "out of memory");
}

static void tb_free(struct tbuf *b) {
  free(b->data);
  free(b->val);
  memset(b, 0, sizeof *b);
}

static void tb_set(struct tbuf *b, size_t i, float x) {
  switch (b->dt) {
  case TILE_F16: ((uint16_t *)b->data)[i] = tl_f32_to_f16(x); break;
  case TILE_BF16: ((uint16_t *)b->data)[i] = tl_f32_to_bf16(x); break;
  default: ((float *)b->data)[i] = x; break;
  }
  b->val[i] = round_to(b->dt, x);
}

static float tb_get(const struct tbuf *b, size_t i) {
  switch (b->dt) {
  case TILE_F16: return tl_f16_to_f32(((const uint16_t *)b->data)[i]);
  case TILE_BF16: return tl_bf16_to_f32(((const uint16_t *)b->data)[i]);
  default: return ((const float *)b->data)[i];
  }
}

/* Uniform in [lo, hi), rounded to the dtype, never zero. */
static void tb_random_range(struct tbuf *b, struct rng *r, float lo, float hi) {
  for (size_t i = 0; i < b->n; i++) {
    float x;
    do
      x = round_to(b->dt, rng_uniform(r, lo, hi));
    while (x == 0.0f);
    tb_set(b, i, x);
  }
}

static void tb_random(struct tbuf *b, struct rng *r) { tb_random_range(b, r, -1.0f, 1.0f); }

static void tb_poison(struct tbuf *b) {
  for (size_t i = 0; i < b->n; i++)
    tb_set(b, i, NAN);
}

static const float *tb_read(struct tbuf *b) {
  for (size_t i = 0; i < b->n; i++)
    b->val[i] = tb_get(b, i);
  return b->val;
}

static tile_arg tb_arg(struct tbuf *b, unsigned rank, const int64_t *shape) {
  return tile_arg_tensor(b->data, b->dt, rank, shape, NULL);
}

/* Compiles lib/FILE's kernel KERNEL for the CPU with the overrides in `defs`, a string like
 * "T=f16,BM=64" (NULL or "" for none). */
static tile_kernel *compile_lib(tile_context *ctx, const char *file, const char *kernel,
                                const char *defs) {
  char path[1024], text[512];
  test_lib_path(path, sizeof path, file);
  snprintf(text, sizeof text, "%s", defs ? defs : "");
  tile_define d[24];
  unsigned nd = 0;
  for (char *save = NULL, *tok = strtok_r(text, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    cr_assert(eq && nd < 24, "bad define list '%s'", defs);
    *eq = 0;
    d[nd].name = tok;
    d[nd].value = eq + 1;
    nd++;
  }
  tile_compile_options co = {
      .kernel = kernel, .defines = d, .ndefines = nd, .device = TILE_DEVICE_CPU};
  tile_kernel *k = NULL;
  tile_status st = tile_compile_file(ctx, path, &co, &k);
  cr_assert_eq(st, TILE_OK, "compiling %s:%s with '%s': %s\n%s", file, kernel ? kernel : "",
               defs ? defs : "", tile_status_name(st), tile_errmsg(ctx));
  cr_assert_not_null(k);
  return k;
}

static tile_context *new_ctx(void) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  return ctx;
}

static void launch(tile_context *ctx, tile_kernel *k, const tile_arg *args, unsigned n,
                   const char *what) {
  tile_status st = tile_launch(ctx, k, args, n, NULL);
  cr_assert_eq(st, TILE_OK, "%s: launch failed: %s: %s", what, tile_status_name(st),
               tile_errmsg(ctx));
}

/* Compares and reports; returns whether everything was within tolerance. */
static bool check(const char *what, const float *got, const float *want, size_t n, double atol,
                  double rtol) {
  struct ref_cmp c = ref_compare(got, want, n, atol, rtol);
  char buf[512];
  ref_cmp_format(buf, sizeof buf, &c, n, got, want);
  if (verbose())
    fprintf(stderr, "  %-60s %s\n", what, buf);
  cr_expect(c.n_bad == 0, "%s: %s (atol %.3g, rtol %.3g)", what, buf, atol, rtol);
  return c.n_bad == 0;
}

/* ---- gemm ------------------------------------------------------------------------------- */

struct gemm_case {
  int M, N, K;
  const char *T;
  const char *cfg; /* extra defines (tile configuration) */
  const char *act; /* NULL = none */
  bool scaled, bias, residual, tf32;
  bool pass_unused; /* pass real tensors for disabled epilogue parts (they must be ignored) */
};

static enum ref_act ref_act_of(const char *act) {
  if (!act || strcmp(act, "none") == 0)
    return REF_ACT_NONE;
  if (strcmp(act, "relu") == 0)
    return REF_ACT_RELU;
  if (strcmp(act, "gelu") == 0)
    return REF_ACT_GELU_TANH;
  if (strcmp(act, "silu") == 0)
    return REF_ACT_SILU;
  cr_assert_fail("unknown activation %s", act);
  return REF_ACT_NONE;
}

static void run_gemm(tile_context *ctx, struct rng *r, const struct gemm_case *gc) {
  const int M = gc->M, N = gc->N, K = gc->K;
  tile_dtype dt = dtype_of(gc->T);
  char defs[256], what[320];
  snprintf(defs, sizeof defs, "T=%s,ACT=%s,SCALED=%s,HAS_BIAS=%s,HAS_RESIDUAL=%s,TF32=%s%s%s",
           gc->T, gc->act ? gc->act : "none", gc->scaled ? "true" : "false",
           gc->bias ? "true" : "false", gc->residual ? "true" : "false",
           gc->tf32 ? "true" : "false", gc->cfg ? "," : "", gc->cfg ? gc->cfg : "");
  snprintf(what, sizeof what, "gemm M=%d N=%d K=%d %s", M, N, K, defs);
  tile_kernel *k = compile_lib(ctx, "gemm.tile", "gemm", defs);

  struct tbuf A, B, C, bias, R;
  tb_init(&A, dt, (size_t)M * K);
  tb_init(&B, dt, (size_t)K * N);
  tb_init(&C, dt, (size_t)M * N);
  tb_init(&bias, dt, (size_t)N);
  tb_init(&R, dt, (size_t)M * N);
  tb_random(&A, r);
  tb_random(&B, r);
  tb_random(&bias, r);
  tb_random(&R, r);
  float alpha = rng_uniform(r, 0.5f, 2.0f), beta = rng_uniform(r, -2.0f, -0.5f);
  float *c_in = malloc(sizeof(float) * (size_t)M * N);
  if (gc->scaled) {
    tb_random(&C, r); /* C is read: it holds C_in, and is overwritten with the result */
    memcpy(c_in, C.val, sizeof(float) * (size_t)M * N);
  } else {
    tb_poison(&C);
  }

  float *want = malloc(sizeof(float) * (size_t)M * N);
  struct ref_gemm_args g = {.m = (size_t)M,
                            .n = (size_t)N,
                            .k = (size_t)K,
                            .a = A.val,
                            .b = B.val,
                            .c = want,
                            .alpha = gc->scaled ? alpha : 1.0f,
                            .beta = beta,
                            .c_in = gc->scaled ? c_in : NULL,
                            .bias = gc->bias ? bias.val : NULL,
                            .residual = gc->residual ? R.val : NULL,
                            .act = ref_act_of(gc->act)};
  cr_assert_eq(ref_gemm(&g), 0);

  int64_t sa[] = {M, K}, sb[] = {K, N}, sc[] = {M, N}, sbias[] = {N};
  tile_arg args[] = {
      tb_arg(&A, 2, sa),
      tb_arg(&B, 2, sb),
      tb_arg(&C, 2, sc),
      tile_arg_tensor(gc->bias || gc->pass_unused ? bias.data : NULL, dt, 1, sbias, NULL),
      tile_arg_tensor(gc->residual || gc->pass_unused ? R.data : NULL, dt, 2, sc, NULL),
      tile_arg_float(alpha),
      tile_arg_float(beta),
  };
  launch(ctx, k, args, 7, what);

  /* f32 accumulation over K products of magnitude < 1 (see the header); epilogue terms are
   * O(1) and add a few ulp. */
  double atol = 1e-5 * (1.0 + sqrt((double)K));
  double rtol = dt == TILE_F32 ? 1e-5 : 1.25 * unit_roundoff(dt);
  if (dt == TILE_F16)
    atol += ldexp(1.0, -25);
  if (gc->tf32) {
    /* TF32 rounds A and B to 10 mantissa bits (relative error <= 2^-11 each), so each product
     * is off by <= 2^-10 (1 + 2^-12) |a b|: the worst case for an element is
     * 2^-10 * sum_k |a_ik b_kj| (times alpha when SCALED), bounded here by its maximum. */
    float *absa = malloc(sizeof(float) * A.n), *absb = malloc(sizeof(float) * B.n);
    float *absc = malloc(sizeof(float) * (size_t)M * N);
    for (size_t i = 0; i < A.n; i++)
      absa[i] = fabsf(A.val[i]);
    for (size_t i = 0; i < B.n; i++)
      absb[i] = fabsf(B.val[i]);
    ref_matmul((size_t)M, (size_t)N, (size_t)K, absa, absb, absc);
    double mx = 0;
    for (size_t i = 0; i < (size_t)M * N; i++)
      mx = fmax(mx, absc[i]);
    atol += 1.01 * ldexp(1.0, -10) * mx * (gc->scaled ? alpha : 1.0);
    free(absa);
    free(absb);
    free(absc);
  }
  const float *got = tb_read(&C);
  check(what, got, want, (size_t)M * N, atol, rtol);
  if (gc->tf32) {
    /* the worst case above is far from typical: the errors have random signs, so the
     * relative L2 error stays near 2^-11 */
    struct ref_cmp c = ref_compare(got, want, (size_t)M * N, atol, rtol);
    cr_expect(c.rel_l2 < ldexp(1.0, -9), "%s: rel_l2 %.3e is too large for tf32", what, c.rel_l2);
  }

  free(want);
  free(c_in);
  tb_free(&A);
  tb_free(&B);
  tb_free(&C);
  tb_free(&bias);
  tb_free(&R);
  tile_kernel_release(k);
}

/* (M, N, K) ragged in every dimension: smaller than a tile, one past a tile, several tiles */
static const int gemm_shapes[][3] = {
    {1, 1, 1},       {7, 33, 100}, {100, 7, 33}, {33, 257, 7},
    {257, 100, 257}, {1, 257, 33}, {257, 1, 7},  {257, 257, 257},
};

Test(lib_gemm, plain_all_dtypes) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_gemm/plain_all_dtypes"));
  tile_context *ctx = new_ctx();
  const char *dts[] = {"f32", "f16", "bf16"};
  for (size_t t = 0; t < 3; t++)
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++) {
      struct gemm_case gc = {
          .M = gemm_shapes[s][0], .N = gemm_shapes[s][1], .K = gemm_shapes[s][2], .T = dts[t]};
      run_gemm(ctx, &r, &gc);
    }
  tile_context_destroy(ctx);
}

Test(lib_gemm, epilogue_each_flag) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_gemm/epilogue_each_flag"));
  tile_context *ctx = new_ctx();
  const char *dts[] = {"f16", "bf16", "f32"};
  /* each flag alone, on two shapes and rotating dtypes; unused tensors NULL */
  for (int s = 0; s < 2; s++) {
    int M = s ? 100 : 7, N = s ? 33 : 257, K = s ? 257 : 33;
    for (int f = 0; f < 6; f++) {
      struct gemm_case gc = {.M = M, .N = N, .K = K, .T = dts[(f + s) % 3]};
      switch (f) {
      case 0: gc.scaled = true; break;
      case 1: gc.bias = true; break;
      case 2: gc.residual = true; break;
      case 3: gc.act = "relu"; break;
      case 4: gc.act = "gelu"; break;
      case 5: gc.act = "silu"; break;
      }
      run_gemm(ctx, &r, &gc);
    }
  }
  tile_context_destroy(ctx);
}

Test(lib_gemm, epilogue_combined) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_gemm/epilogue_combined"));
  tile_context *ctx = new_ctx();
  const char *dts[] = {"f32", "f16", "bf16"};
  const char *acts[] = {"gelu", "silu", "relu"};
  for (int t = 0; t < 3; t++) {
    struct gemm_case gc = {.M = 33,
                           .N = 100,
                           .K = 70,
                           .T = dts[t],
                           .act = acts[t],
                           .scaled = true,
                           .bias = true,
                           .residual = true};
    run_gemm(ctx, &r, &gc);
  }
  /* partial combinations */
  struct gemm_case a = {
      .M = 7, .N = 257, .K = 33, .T = "f16", .act = "silu", .bias = true, .residual = true};
  struct gemm_case b = {
      .M = 100, .N = 1, .K = 100, .T = "bf16", .act = "relu", .scaled = true, .residual = true};
  struct gemm_case c = {.M = 1, .N = 100, .K = 257, .T = "f32", .scaled = true, .bias = true};
  run_gemm(ctx, &r, &a);
  run_gemm(ctx, &r, &b);
  run_gemm(ctx, &r, &c);
  /* K = 0: no loop iteration; the epilogue alone */
  struct gemm_case e = {
      .M = 33, .N = 7, .K = 0, .T = "f16", .act = "gelu", .scaled = true, .bias = true};
  run_gemm(ctx, &r, &e);
  tile_context_destroy(ctx);
}

/* Disabled epilogue parts must not be read: real tensors full of random values are passed
 * for them and must make no difference (the NULL case is covered by every other test). */
Test(lib_gemm, unused_epilogue_tensors_ignored) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_gemm/unused_epilogue_tensors_ignored"));
  tile_context *ctx = new_ctx();
  struct gemm_case a = {.M = 33, .N = 100, .K = 7, .T = "f16", .pass_unused = true};
  struct gemm_case b = {
      .M = 100, .N = 33, .K = 70, .T = "f32", .act = "gelu", .bias = true, .pass_unused = true};
  struct gemm_case c = {.M = 7, .N = 7, .K = 257, .T = "bf16", .scaled = true, .pass_unused = true};
  run_gemm(ctx, &r, &a);
  run_gemm(ctx, &r, &b);
  run_gemm(ctx, &r, &c);
  tile_context_destroy(ctx);
}

/* Results must not depend on the tile configuration. */
Test(lib_gemm, tile_configs) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_gemm/tile_configs"));
  tile_context *ctx = new_ctx();
  static const char *cfgs[] = {
      "BM=32,BN=32,BK=16,STAGES=1,NW=4,GROUP_M=1",  "BM=32,BN=64,BK=16,STAGES=2,NW=8,GROUP_M=4",
      "BM=64,BN=32,BK=64,STAGES=4,NW=4,GROUP_M=16", "BM=256,BN=32,BK=32,STAGES=3,NW=8,GROUP_M=8",
      "BM=32,BN=256,BK=64,STAGES=1,NW=4,GROUP_M=4",
  };
  const char *dts[] = {"f32", "f16", "bf16"};
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    /* several block rows and columns, so that GROUP_M's ordering matters */
    struct gemm_case gc = {.M = 257, .N = 100, .K = 33, .T = dts[i % 3], .cfg = cfgs[i]};
    run_gemm(ctx, &r, &gc);
    struct gemm_case gd = {.M = 100,
                           .N = 257,
                           .K = 70,
                           .T = dts[(i + 1) % 3],
                           .cfg = cfgs[i],
                           .act = "gelu",
                           .scaled = true,
                           .bias = true,
                           .residual = true};
    run_gemm(ctx, &r, &gd);
  }
  tile_context_destroy(ctx);
}

Test(lib_gemm, tf32) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_gemm/tf32"));
  tile_context *ctx = new_ctx();
  struct gemm_case a = {.M = 100, .N = 33, .K = 257, .T = "f32", .tf32 = true};
  struct gemm_case b = {.M = 33,
                        .N = 257,
                        .K = 100,
                        .T = "f32",
                        .cfg = "BM=64,BN=64,BK=16",
                        .act = "relu",
                        .scaled = true,
                        .bias = true,
                        .tf32 = true};
  struct gemm_case c = {.M = 1, .N = 7, .K = 1, .T = "f32", .tf32 = true};
  run_gemm(ctx, &r, &a);
  run_gemm(ctx, &r, &b);
  run_gemm(ctx, &r, &c);
  tile_context_destroy(ctx);
}

/* ---- bmm -------------------------------------------------------------------------------- */

/* A batch of 3 with non-contiguous layouts: A has a padded batch stride, B is stored
 * [K][BATCH][N] (interleaved batches; or broadcast with batch stride 0), C has padded rows
 * and a padded batch stride. The gaps in C's memory must stay untouched. */
static void run_bmm(tile_context *ctx, struct rng *r, const char *T, const char *cfg, int M, int N,
                    int K, bool broadcast_b) {
  const int BATCH = 3;
  tile_dtype dt = dtype_of(T);
  char defs[160], what[256];
  snprintf(defs, sizeof defs, "T=%s%s%s", T, cfg ? "," : "", cfg ? cfg : "");
  snprintf(what, sizeof what, "bmm BATCH=%d M=%d N=%d K=%d %s%s", BATCH, M, N, K, defs,
           broadcast_b ? " (B broadcast)" : "");
  tile_kernel *k = compile_lib(ctx, "gemm.tile", "bmm", defs);

  const int64_t sa_b = (int64_t)M * K + 5;                   /* A: padded batches */
  const int64_t sb_k = broadcast_b ? N : (int64_t)BATCH * N; /* B: [K][BATCH][N] */
  const int64_t sb_b = broadcast_b ? 0 : N;
  const int64_t ldc = N + 3, sc_b = (int64_t)M * ldc + 11; /* C: padded rows and batches */
  struct tbuf A, B, C;
  tb_init(&A, dt, (size_t)(BATCH * sa_b));
  tb_init(&B, dt, (size_t)(broadcast_b ? (int64_t)K * N : (int64_t)K * BATCH * N));
  tb_init(&C, dt, (size_t)(BATCH * sc_b));
  tb_random(&A, r);
  tb_random(&B, r);
  tb_poison(&C);
  void *c_before = malloc(C.n * tile_dtype_size(dt));
  memcpy(c_before, C.data, C.n * tile_dtype_size(dt));

  float *want = malloc(sizeof(float) * (size_t)BATCH * M * N);
  struct ref_gemm_args g = {.m = (size_t)M,
                            .n = (size_t)N,
                            .k = (size_t)K,
                            .a = A.val,
                            .lda = (size_t)K,
                            .b = B.val,
                            .ldb = (size_t)sb_k,
                            .c = want,
                            .alpha = 1.0f,
                            .batch = BATCH,
                            .stride_a = (size_t)sa_b,
                            .stride_b = (size_t)sb_b,
                            .stride_c = (size_t)M * N};
  cr_assert_eq(ref_gemm(&g), 0);

  int64_t shape_a[] = {BATCH, M, K}, str_a[] = {sa_b, K, 1};
  int64_t shape_b[] = {BATCH, K, N}, str_b[] = {sb_b, sb_k, 1};
  int64_t shape_c[] = {BATCH, M, N}, str_c[] = {sc_b, ldc, 1};
  tile_arg args[] = {
      tile_arg_tensor(A.data, dt, 3, shape_a, str_a),
      tile_arg_tensor(B.data, dt, 3, shape_b, str_b),
      tile_arg_tensor(C.data, dt, 3, shape_c, str_c),
  };
  launch(ctx, k, args, 3, what);

  float *got = malloc(sizeof(float) * (size_t)BATCH * M * N);
  bool *inside = calloc(C.n, sizeof(bool));
  for (int b = 0; b < BATCH; b++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        size_t at = (size_t)(b * sc_b + i * ldc + j);
        got[((size_t)b * M + i) * N + j] = tb_get(&C, at);
        inside[at] = true;
      }
  double atol = 1e-5 * (1.0 + sqrt((double)K)) + (dt == TILE_F16 ? ldexp(1.0, -25) : 0.0);
  double rtol = dt == TILE_F32 ? 1e-5 : 1.25 * unit_roundoff(dt);
  check(what, got, want, (size_t)BATCH * M * N, atol, rtol);
  size_t esz = tile_dtype_size(dt), touched = 0;
  for (size_t i = 0; i < C.n; i++)
    if (!inside[i] && memcmp((char *)C.data + i * esz, (char *)c_before + i * esz, esz) != 0)
      touched++;
  cr_expect_eq(touched, 0, "%s: %zu elements of C's padding were written", what, touched);

  free(inside);
  free(got);
  free(want);
  free(c_before);
  tb_free(&A);
  tb_free(&B);
  tb_free(&C);
  tile_kernel_release(k);
}

Test(lib_bmm, strided_batches) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_bmm/strided_batches"));
  tile_context *ctx = new_ctx();
  run_bmm(ctx, &r, "f32", NULL, 33, 100, 7, false);
  run_bmm(ctx, &r, "f16", "BM=32,BN=64,BK=16", 100, 33, 70, false);
  run_bmm(ctx, &r, "bf16", "BM=64,BN=32,BK=64,STAGES=1", 7, 257, 33, false);
  run_bmm(ctx, &r, "f16", NULL, 1, 1, 1, false);
  run_bmm(ctx, &r, "f32", "BM=32,BN=32,BK=32", 70, 33, 100, true);
  run_bmm(ctx, &r, "bf16", NULL, 33, 7, 257, true);
  tile_context_destroy(ctx);
}

Test(lib_bmm, tf32) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_bmm/tf32"));
  tile_context *ctx = new_ctx();
  /* same layouts, tf32 inputs: the bound of lib_gemm/tf32 (2^-10 sum |a b|, with |a|, |b| < 1
   * and K = 100: at most 0.1; 2^-10 K is used) */
  const int BATCH = 2, M = 33, N = 70, K = 100;
  tile_kernel *k = compile_lib(ctx, "gemm.tile", "bmm", "T=f32,TF32=true,BM=32,BN=32");
  struct tbuf A, B, C;
  tb_init(&A, TILE_F32, (size_t)BATCH * M * K);
  tb_init(&B, TILE_F32, (size_t)BATCH * K * N);
  tb_init(&C, TILE_F32, (size_t)BATCH * M * N);
  tb_random(&A, &r);
  tb_random(&B, &r);
  tb_poison(&C);
  float *want = malloc(sizeof(float) * C.n);
  struct ref_gemm_args g = {.m = M,
                            .n = N,
                            .k = K,
                            .a = A.val,
                            .b = B.val,
                            .c = want,
                            .alpha = 1.0f,
                            .batch = BATCH,
                            .stride_a = (size_t)M * K,
                            .stride_b = (size_t)K * N,
                            .stride_c = (size_t)M * N};
  cr_assert_eq(ref_gemm(&g), 0);
  int64_t sa[] = {BATCH, M, K}, sb[] = {BATCH, K, N}, sc[] = {BATCH, M, N};
  tile_arg args[] = {tb_arg(&A, 3, sa), tb_arg(&B, 3, sb), tb_arg(&C, 3, sc)};
  launch(ctx, k, args, 3, "bmm tf32");
  check("bmm tf32", tb_read(&C), want, C.n, 1.01 * ldexp(1.0, -10) * K, 1e-5);
  free(want);
  tb_free(&A);
  tb_free(&B);
  tb_free(&C);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* ---- softmax ---------------------------------------------------------------------------- */

/* The fraction of X's elements that run_softmax sets to -inf (masked logits), and the
 * leading columns of every other row set to -inf. */
static float softmax_masked;
static int softmax_masked_cols;

static void run_softmax(tile_context *ctx, struct rng *r, const char *T, const char *cfg, int M,
                        int N, float range) {
  tile_dtype dt = dtype_of(T);
  char defs[128], what[256];
  snprintf(defs, sizeof defs, "T=%s%s%s", T, cfg ? "," : "", cfg ? cfg : "");
  snprintf(what, sizeof what, "softmax M=%d N=%d %s range %g", M, N, defs, (double)range);
  tile_kernel *k = compile_lib(ctx, "softmax.tile", NULL, defs);
  struct tbuf X, Y;
  tb_init(&X, dt, (size_t)M * N);
  tb_init(&Y, dt, (size_t)M * N);
  tb_random_range(&X, r, -range, range);
  for (size_t i = 0; i < X.n; i++) /* never a whole row: the reference's NaN rows differ */
    if ((int)(i % (size_t)N) != N - 1 && ((i / (size_t)N % 2 == 0 && (int)(i % (size_t)N) < softmax_masked_cols) ||
                                         rng_uniform(r, 0.0f, 1.0f) < softmax_masked))
      tb_set(&X, i, -INFINITY);
  tb_poison(&Y);
  float *want = malloc(sizeof(float) * X.n);
  ref_softmax((size_t)M, (size_t)N, X.val, 0, want, 0);
  int64_t shape[] = {M, N};
  tile_arg args[] = {tb_arg(&X, 2, shape), tb_arg(&Y, 2, shape)};
  launch(ctx, k, args, 2, what);
  /* f32: the exp2 argument (x - max) * log2(e) is rounded in f32 (|arg| < 3: 2^-22 absolute,
   * i.e. ~2^-22 relative in the result) and the row sum adds N terms in f32; 2e-5 relative is
   * ~300 ulp, >10x the error of sequential f32 sums of N <= 3000 terms in practice. Narrow
   * outputs add their rounding; f16 outputs of long rows (~1/N) can be subnormal. */
  double rtol = 2e-5 + (dt == TILE_F32 ? 0.0 : 1.25 * unit_roundoff(dt));
  double atol = dt == TILE_F16 ? ldexp(1.0, -25) : 1e-12;
  check(what, tb_read(&Y), want, Y.n, atol, rtol);
  free(want);
  tb_free(&X);
  tb_free(&Y);
  tile_kernel_release(k);
}

Test(lib_softmax, single_chunk) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_softmax/single_chunk"));
  tile_context *ctx = new_ctx();
  const char *dts[] = {"f32", "f16", "bf16"};
  for (int t = 0; t < 3; t++) {
    run_softmax(ctx, &r, dts[t], NULL, 7, 1, 1.0f); /* N <= BN = 1024 */
    run_softmax(ctx, &r, dts[t], NULL, 1, 7, 1.0f);
    run_softmax(ctx, &r, dts[t], NULL, 33, 100, 1.0f);
    run_softmax(ctx, &r, dts[t], NULL, 7, 1000, 1.0f);
    run_softmax(ctx, &r, dts[t], "BN=64,NW=1", 7, 64, 1.0f); /* N == BN exactly */
    run_softmax(ctx, &r, dts[t], "BN=128,NW=16", 7, 100, 1.0f);
  }
  tile_context_destroy(ctx);
}

Test(lib_softmax, multi_chunk) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_softmax/multi_chunk"));
  tile_context *ctx = new_ctx();
  const char *dts[] = {"f32", "f16", "bf16"};
  for (int t = 0; t < 3; t++) {
    run_softmax(ctx, &r, dts[t], NULL, 3, 3000, 1.0f);     /* N > BN = 1024 */
    run_softmax(ctx, &r, dts[t], "BN=256", 7, 1000, 1.0f); /* ragged last chunk */
    run_softmax(ctx, &r, dts[t], "BN=64,NW=2", 7, 100, 1.0f);
    run_softmax(ctx, &r, dts[t], "BN=64", 1, 65, 1.0f); /* a last chunk of one */
    run_softmax(ctx, &r, dts[t], "BN=512,NW=8", 5, 3000, 1.0f);
  }
  tile_context_destroy(ctx);
}

/* Inputs in [-100, 100): exp of the unshifted inputs would overflow f32, so this fails
 * unless the maximum is subtracted (in both paths). */
Test(lib_softmax, large_inputs) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_softmax/large_inputs"));
  tile_context *ctx = new_ctx();
  run_softmax(ctx, &r, "f32", NULL, 7, 100, 100.0f);
  run_softmax(ctx, &r, "f32", "BN=64", 7, 1000, 100.0f);
  run_softmax(ctx, &r, "bf16", "BN=128", 3, 257, 100.0f);
  tile_context_destroy(ctx);
}

/* Masked logits (-inf) in the looped form's lanes: a lane that has seen only -inf meeting
 * -inf (its sum must stay 0; -inf - -inf would make it NaN) and meeting a finite value (a new
 * maximum), and rows whose first chunks are all -inf. */
Test(lib_softmax, masked_inputs) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_softmax/masked_inputs"));
  tile_context *ctx = new_ctx();
  const char *dts[] = {"f32", "f16", "bf16"};
  softmax_masked = 0.3f;
  softmax_masked_cols = 700;
  for (int t = 0; t < 3; t++) {
    run_softmax(ctx, &r, dts[t], "BN=256", 7, 1000, 4.0f);
    run_softmax(ctx, &r, dts[t], "BN=64,NW=2", 5, 4095, 4.0f);
    run_softmax(ctx, &r, dts[t], NULL, 6, 1001, 4.0f); /* one tile */
  }
  softmax_masked = 0.0f;
  softmax_masked_cols = 0;
  tile_context_destroy(ctx);
}

/* ---- layernorm and rmsnorm -------------------------------------------------------------- */

/* The inputs of run_norm: uniform in [offset - 1, offset + 1]. */
static float norm_offset;

static void run_norm(tile_context *ctx, struct rng *r, bool layer, const char *T, const char *cfg,
                     int M, int N) {
  tile_dtype dt = dtype_of(T);
  char defs[128], what[256];
  snprintf(defs, sizeof defs, "T=%s%s%s", T, cfg ? "," : "", cfg ? cfg : "");
  snprintf(what, sizeof what, "%s M=%d N=%d %s", layer ? "layernorm" : "rmsnorm", M, N, defs);
  tile_kernel *k = compile_lib(ctx, layer ? "layernorm.tile" : "rmsnorm.tile", NULL, defs);
  const float eps = 1e-5f;
  struct tbuf X, W, Bv, Y, Mean, Rstd;
  tb_init(&X, dt, (size_t)M * N);
  tb_init(&W, dt, (size_t)N);
  tb_init(&Bv, dt, (size_t)N);
  tb_init(&Y, dt, (size_t)M * N);
  tb_init(&Mean, TILE_F32, (size_t)M);
  tb_init(&Rstd, TILE_F32, (size_t)M);
  tb_random_range(&X, r, norm_offset - 1.0f, norm_offset + 1.0f);
  tb_random(&W, r);
  tb_random(&Bv, r);
  tb_poison(&Y);
  tb_poison(&Mean);
  tb_poison(&Rstd);
  float *want = malloc(sizeof(float) * X.n);
  float *want_mean = malloc(sizeof(float) * (size_t)M),
        *want_rstd = malloc(sizeof(float) * (size_t)M);
  int64_t sx[] = {M, N}, sw[] = {N}, sm[] = {M};
  if (layer) {
    ref_layernorm((size_t)M, (size_t)N, X.val, W.val, Bv.val, eps, want, want_mean, want_rstd);
    tile_arg args[] = {tb_arg(&X, 2, sx),  tb_arg(&W, 1, sw),    tb_arg(&Bv, 1, sw),
                       tb_arg(&Y, 2, sx),  tb_arg(&Mean, 1, sm), tb_arg(&Rstd, 1, sm),
                       tile_arg_float(eps)};
    launch(ctx, k, args, 7, what);
  } else {
    ref_rmsnorm((size_t)M, (size_t)N, X.val, W.val, eps, want, want_rstd);
    tile_arg args[] = {tb_arg(&X, 2, sx), tb_arg(&W, 1, sw), tb_arg(&Y, 2, sx),
                       tb_arg(&Rstd, 1, sm), tile_arg_float(eps)};
    launch(ctx, k, args, 5, what);
  }
  /* Statistics in f32: sums of N terms (relative error ~sqrt(N) 2^-24 in practice) and one
   * rsqrt; rstd reaches 1/sqrt(eps) ~ 316 for N = 1 (variance 0), hence relative tolerances.
   * The mean is ~1/sqrt(3N) with an absolute error ~2^-24: atol 1e-6. Y = (x - mean) rstd w
   * (+ b) is O(1): atol/rtol 2e-5 in f32 plus the output rounding of narrow types. */
  char buf[300];
  double rtol = 2e-5 + (dt == TILE_F32 ? 0.0 : 1.25 * unit_roundoff(dt));
  double atol = 2e-5 + (dt == TILE_F16 ? ldexp(1.0, -25) : 0.0);
  snprintf(buf, sizeof buf, "%s: Y", what);
  check(buf, tb_read(&Y), want, Y.n, atol, rtol);
  snprintf(buf, sizeof buf, "%s: Rstd", what);
  check(buf, tb_read(&Rstd), want_rstd, (size_t)M, 1e-6, 2e-5);
  if (layer) {
    snprintf(buf, sizeof buf, "%s: Mean", what);
    check(buf, tb_read(&Mean), want_mean, (size_t)M, 1e-6, 2e-5);
  }
  free(want);
  free(want_mean);
  free(want_rstd);
  tb_free(&X);
  tb_free(&W);
  tb_free(&Bv);
  tb_free(&Y);
  tb_free(&Mean);
  tb_free(&Rstd);
  tile_kernel_release(k);
}

/* (M, N, configuration): N below, equal to, one past and not a multiple of BN */
static const struct {
  int M, N;
  const char *cfg;
} norm_cases[] = {
    {7, 1, NULL},
    {1, 7, NULL},
    {33, 100, NULL},
    {7, 1000, NULL},
    {3, 3000, NULL},
    {7, 100, "BN=64"},
    {5, 257, "BN=64,NW=2"},
    {7, 64, "BN=64,NW=1"},
    {3, 1000, "BN=256,NW=8"},
    {2, 4097, "BN=4096,NW=16"},
};

static void run_norm_all(bool layer, const char *name) {
  struct rng r;
  rng_seed(&r, rng_test_seed(name));
  tile_context *ctx = new_ctx();
  const char *dts[] = {"f32", "f16", "bf16"};
  for (int t = 0; t < 3; t++)
    for (size_t i = 0; i < sizeof norm_cases / sizeof norm_cases[0]; i++)
      run_norm(ctx, &r, layer, dts[t], norm_cases[i].cfg, norm_cases[i].M, norm_cases[i].N);
  tile_context_destroy(ctx);
}

Test(lib_layernorm, shapes_and_dtypes) { run_norm_all(true, "lib_layernorm/shapes_and_dtypes"); }

/* Rows far from zero (mean 10, spread 1): the looped form's one pass for both statistics
 * sums x - k, k the first chunk's mean, whose variance keeps its digits; E[x^2] - E[x]^2 in
 * f32 would lose about three of them (100 against 1/3) and miss Rstd's 2e-5 by 9x. */
Test(lib_layernorm, rows_far_from_zero) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_layernorm/rows_far_from_zero"));
  tile_context *ctx = new_ctx();
  norm_offset = 10.0f;
  run_norm(ctx, &r, true, "f32", NULL, 3, 3000);
  run_norm(ctx, &r, true, "f32", "BN=64,NW=2", 5, 257);
  run_norm(ctx, &r, true, "f32", "BN=256,NW=8", 3, 1000);
  run_norm(ctx, &r, true, "f32", NULL, 7, 100);
  norm_offset = 0.0f;
  tile_context_destroy(ctx);
}
Test(lib_rmsnorm, shapes_and_dtypes) { run_norm_all(false, "lib_rmsnorm/shapes_and_dtypes"); }

/* ---- attention -------------------------------------------------------------------------- */

struct attn_case {
  int B, H, HKV, N, NK, D;
  bool causal, lse;
  const char *T;
  const char *cfg;
  float scale; /* 0 = 1/sqrt(D) */
};

static void run_attention(tile_context *ctx, struct rng *r, const struct attn_case *ac) {
  tile_dtype dt = dtype_of(ac->T);
  char defs[200], what[320];
  snprintf(defs, sizeof defs, "T=%s,D=%d,CAUSAL=%s,HAS_LSE=%s%s%s", ac->T, ac->D,
           ac->causal ? "true" : "false", ac->lse ? "true" : "false", ac->cfg ? "," : "",
           ac->cfg ? ac->cfg : "");
  snprintf(what, sizeof what, "attention B=%d H=%d HKV=%d N=%d NK=%d %s", ac->B, ac->H, ac->HKV,
           ac->N, ac->NK, defs);
  tile_kernel *k = compile_lib(ctx, "attention.tile", NULL, defs);
  const size_t nq = (size_t)ac->B * ac->H * ac->N * ac->D;
  const size_t nkv = (size_t)ac->B * ac->HKV * ac->NK * ac->D;
  const size_t nl = (size_t)ac->B * ac->H * ac->N;
  struct tbuf Q, K, V, O, LSE;
  tb_init(&Q, dt, nq);
  tb_init(&K, dt, nkv);
  tb_init(&V, dt, nkv);
  tb_init(&O, dt, nq);
  tb_init(&LSE, TILE_F32, nl);
  tb_random(&Q, r);
  tb_random(&K, r);
  tb_random(&V, r);
  tb_poison(&O);
  tb_poison(&LSE);
  float scale = ac->scale > 0 ? ac->scale : (float)(1.0 / sqrt((double)ac->D));
  float *want = malloc(sizeof(float) * nq), *want_lse = malloc(sizeof(float) * nl);
  cr_assert_eq(ref_attention((size_t)ac->B, (size_t)ac->H, (size_t)ac->HKV, (size_t)ac->N,
                             (size_t)ac->NK, (size_t)ac->D, Q.val, K.val, V.val, scale, ac->causal,
                             want, want_lse),
               0);
  int64_t sq[] = {ac->B, ac->H, ac->N, ac->D}, skv[] = {ac->B, ac->HKV, ac->NK, ac->D};
  int64_t sl[] = {ac->B, ac->H, ac->N};
  tile_arg args[] = {
      tb_arg(&Q, 4, sq),
      tb_arg(&K, 4, skv),
      tb_arg(&V, 4, skv),
      tb_arg(&O, 4, sq),
      tile_arg_tensor(ac->lse ? LSE.data : NULL, TILE_F32, 3, sl, NULL),
      tile_arg_float(scale),
  };
  launch(ctx, k, args, 6, what);
  /* O: the kernel rounds the probabilities P (in [0, 1]) to T before P @ V. With |v| < 1
   * that moves O = sum_j p_j v_j / sum_j p_j by at most u(T) (a convex combination of
   * errors <= u(T) p_j |v_j|), on top of the output rounding (1.25 u(T) relative) and f32
   * arithmetic (1e-5). LSE is f32: m + log(l) with |LSE| < 10, a few ulp: atol 2e-5. */
  char buf[400];
  double u = unit_roundoff(dt);
  snprintf(buf, sizeof buf, "%s: O", what);
  check(buf, tb_read(&O), want, nq, u + 1e-5, 1.25 * u);
  if (ac->lse) {
    snprintf(buf, sizeof buf, "%s: LSE", what);
    check(buf, tb_read(&LSE), want_lse, nl, 2e-5, 1e-5);
  }
  free(want);
  free(want_lse);
  tb_free(&Q);
  tb_free(&K);
  tb_free(&V);
  tb_free(&O);
  tb_free(&LSE);
  tile_kernel_release(k);
}

Test(lib_attention, d64) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_attention/d64"));
  tile_context *ctx = new_ctx();

  // clang-format off
  static const struct attn_case cases[] = {
      /*B  H  HKV N    NK   D    causal lse    T       cfg                       scale */
      {2, 4, 4, 1,   1,   64,  false, true,  "f16",  NULL,                     0},
      {1, 4, 4, 1,   1,   64,  true,  true,  "bf16", NULL,                     0},
      {1, 4, 2, 7,   7,   64,  true,  true,  "f16",  NULL,                     0},
      {1, 4, 1, 100, 100, 64,  true,  true,  "bf16", NULL,                     0},
      {1, 4, 2, 100, 100, 64,  false, false, "f16",  NULL,                     0},
      {2, 4, 2, 7,   100, 64,  false, true,  "bf16", NULL,                     0}, /* NK != N */
      {1, 4, 4, 100, 33,  64,  false, true,  "f16",  NULL,                     0},
      {1, 4, 1, 33,  1,   64,  false, true,  "bf16", NULL,                     0},
      {1, 4, 2, 100, 100, 64,  false, true,  "f16",  NULL,                     1.0f}, /* sharper softmax */
      {1, 4, 2, 257, 257, 64,  true,  true,  "f16",  NULL,                     0},
      {1, 4, 1, 257, 100, 64,  false, true,  "bf16", NULL,                     0},
  };
  // clang-format on
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_attention(ctx, &r, &cases[i]);
  tile_context_destroy(ctx);
}

Test(lib_attention, d32_and_d128) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_attention/d32_and_d128"));
  tile_context *ctx = new_ctx();

  // clang-format off
  static const struct attn_case cases[] = {
      /*B  H  HKV N    NK   D    causal lse    T       cfg                       scale */
      {1, 4, 2, 1,   1,   32,  true,  true,  "f16",  NULL,                     0},
      {2, 4, 1, 7,   7,   32,  false, true,  "bf16", NULL,                     0},
      {1, 4, 4, 100, 100, 32,  true,  true,  "bf16", NULL,                     0},
      {1, 4, 2, 33,  257, 32,  false, false, "f16",  NULL,                     0}, /* NK != N */
      {1, 4, 1, 100, 7,   32,  false, true,  "f16",  NULL,                     0},
      {1, 4, 2, 33,  100, 128, false, true,  "f16",  NULL,                     0},
      {1, 4, 2, 70,  70,  128, true,  true,  "bf16", NULL,                     0},
  };
  // clang-format on
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_attention(ctx, &r, &cases[i]);
  tile_context_destroy(ctx);
}

/* Results must not depend on the tile configuration, in particular the causal loop bound
 * min(NK, m0 + BM) with BM != BN. */
Test(lib_attention, tile_configs) {
  struct rng r;
  rng_seed(&r, rng_test_seed("lib_attention/tile_configs"));
  tile_context *ctx = new_ctx();

  // clang-format off
  static const struct attn_case cases[] = {
      /*B  H  HKV N    NK   D    causal lse    T       cfg                       scale */
      {1, 4, 2, 100, 100, 64,  true,  true,  "f16",  "BM=16,BN=32,STAGES=1",   0},
      {1, 4, 2, 100, 100, 64,  true,  true,  "bf16", "BM=128,BN=16,NW=8",      0},
      {1, 4, 1, 100, 70,  32,  false, true,  "f16",  "BM=32,BN=128,STAGES=3",  0},
      {1, 4, 4, 33,  33,  32,  true,  false, "bf16", "BM=16,BN=16",            0},
      /* programs dealt out heads first (LPT): every (row block, head) exactly once */
      {2, 3, 1, 100, 100, 32,  true,  true,  "f16",  "BM=16,BN=16,LPT=true",   0},
      {1, 5, 5, 33,  70,  32,  true,  true,  "bf16", "BM=32,BN=16,LPT=true,LONG_FIRST=false", 0},
  };
  // clang-format on
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_attention(ctx, &r, &cases[i]);
  tile_context_destroy(ctx);
}
