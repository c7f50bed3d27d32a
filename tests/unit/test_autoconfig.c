/* test_autoconfig.c - TILE_AUTOCONFIG's choice of a configuration per shape (runtime/tune.c,
 * rt_autoconfig_choose) without a GPU: the kernels are compiled for the CPU (the choice uses
 * the front end and the grid only) and the device's multiprocessor count is given. The
 * expected configurations are what the rules in tune.c give; for the skinny GEMMs they are
 * the tile shapes `tilec tune` found best on an H200 (PERF.md 9). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "rt.h"
#include "testfiles.h"

/* The chosen defines as "NAME=V,..." of the tuned parameters named in `which` ("" when the
 * kernel's own configuration is the choice). */
static void choose(tile_context *ctx, tile_kernel *k, tile_arg *args, unsigned nargs, int sms, const char *which,
                   char *out, size_t cap) {
  TEST_ARENA(a);
  struct rt_bound b;
  cr_assert_eq(rt_bind_args(ctx, k, args, nargs, &a, &b), TILE_OK, "%s", tile_errmsg(ctx));
  tile_define *defs;
  unsigned n;
  rt_autoconfig_choose(ctx, k, &b, args, sms, &a, &defs, &n);
  out[0] = 0;
  char names[256], name[64];
  snprintf(names, sizeof names, ",%s,", which);
  for (unsigned i = 0; i < n; i++)
    if (snprintf(name, sizeof name, ",%s,", defs[i].name), strstr(names, name)) {
      size_t l = strlen(out);
      snprintf(out + l, cap - l, "%s%s=%s", l ? "," : "", defs[i].name, defs[i].value);
    }
  arena_free(&a);
}

/* A lib kernel compiled for the CPU (arch NULL) or for CUDA target arch (no GPU needed). */
static tile_kernel *compile_lib(tile_context *ctx, const char *file, const char *kernel, const tile_define *d,
                                unsigned nd, const char *arch) {
  char path[1024];
  test_lib_path(path, sizeof path, file);
  tile_compile_options co = {.kernel = kernel, .defines = d, .ndefines = nd,
                             .device = arch ? TILE_DEVICE_CUDA : TILE_DEVICE_CPU, .arch = arch};
  tile_kernel *k = NULL;
  cr_assert_eq(tile_compile_file(ctx, path, &co, &k), TILE_OK, "%s (%s): %s", file, arch ? arch : "cpu",
               tile_errmsg(ctx));
  return k;
}

static char mem[64]; /* the grid does not read the tensors */

static tile_context *new_context(void) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  return ctx;
}

/* attention's arguments: Q, K, V and O of shape q (MHA), LSE of shape l, the scale */
static void attention_args(tile_arg *a, int64_t *q, int64_t *l, double scale) {
  for (int i = 0; i < 4; i++) a[i] = tile_arg_tensor(mem, TILE_F16, 4, q, NULL);
  a[4] = tile_arg_tensor(NULL, TILE_F32, 3, l, NULL);
  a[5] = tile_arg_float(scale);
}

static void gemm_args(tile_arg *a, int64_t M, int64_t N, int64_t K) {
  a[0] = tile_arg_tensor(mem, TILE_F16, 2, (int64_t[]){M, K}, NULL);
  a[1] = tile_arg_tensor(mem, TILE_F16, 2, (int64_t[]){K, N}, NULL);
  a[2] = tile_arg_tensor(mem, TILE_F16, 2, (int64_t[]){M, N}, NULL);
  a[3] = tile_arg_tensor(NULL, TILE_F16, 1, (int64_t[]){N}, NULL);
  a[4] = tile_arg_tensor(NULL, TILE_F16, 2, (int64_t[]){M, N}, NULL);
  a[5] = tile_arg_float(1.0);
  a[6] = tile_arg_float(0.0);
}

struct gemm_case {
  int64_t M, N, K;
  const char *want;
};

/* Checks the parameters named in `which` that k's choice gives each GEMM case. */
static void expect_gemm_choices(tile_context *ctx, tile_kernel *k, const struct gemm_case *cases, size_t n,
                                const char *which) {
  char got[128];
  tile_arg a[7];
  for (size_t i = 0; i < n; i++) {
    gemm_args(a, cases[i].M, cases[i].N, cases[i].K);
    choose(ctx, k, a, 7, 132, which, got, sizeof got);
    cr_expect_str_eq(got, cases[i].want, "%lldx%lldx%lld: %s", (long long)cases[i].M, (long long)cases[i].N,
                     (long long)cases[i].K, got);
  }
}

Test(autoconfig, skinny_gemm_gets_tiles_that_fill_the_device) {
  tile_context *ctx = new_context();
  tile_kernel *k = compile_lib(ctx, "gemm.tile", "gemm", NULL, 0, NULL);
  struct gemm_case cases[] = { /* want: BM, BN (the defaults are 128 x 256) */
      {16, 8192, 8192, "BM=16,BN=64"},    /* 16 rows: no padding; 128 programs for 132 SMs */
      {1, 8192, 8192, "BM=16,BN=64"},     /* the smallest row tile */
      {64, 8192, 8192, "BM=64,BN=64"},
      {128, 4096, 4096, "BM=64,BN=64"},   /* square tiles: 2 x 64 programs */
      {4096, 4096, 4096, ""},             /* 512 programs: the defaults */
      {1000, 1000, 1000, "BM=64,BN=128"}, /* 32 programs -> 128 */
  };
  expect_gemm_choices(ctx, k, cases, sizeof cases / sizeof cases[0], "BM,BN");
  char got[128];
  tile_arg a[7];
  /* a device with few multiprocessors: 32 programs are enough; the row tile still shrinks */
  gemm_args(a, 16, 8192, 8192);
  choose(ctx, k, a, 7, 16, "BM,BN", got, sizeof got);
  cr_expect_str_eq(got, "BM=16,BN=256", "16 SMs: %s", got);
  tile_kernel_release(k);
  /* a pinned parameter stays: BN=256 given, only BM may change */
  tile_define pin = {"BN", "256"};
  k = compile_lib(ctx, "gemm.tile", "gemm", &pin, 1, NULL);
  gemm_args(a, 64, 8192, 8192);
  choose(ctx, k, a, 7, 132, "BM,BN", got, sizeof got);
  cr_expect_str_eq(got, "BN=256,BM=16", "pinned BN");
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* For sm_90a the skinny GEMMs' grids are one wave: their pipelines deepen into the shared
 * memory and their warps shrink with their tiles (the tuned winners of PERF.md 9 and 45:
 * 16x64x128 and 64x64x128, 6 stages, 4 warps); a grid of many waves keeps
 * its configuration. */
Test(autoconfig, one_wave_grids_deepen_their_pipelines) {
  tile_context *ctx = new_context();
  tile_kernel *k = compile_lib(ctx, "gemm.tile", "gemm", NULL, 0, "sm_90a");
  struct gemm_case cases[] = {
      {16, 8192, 8192, "BM=16,BN=64,BK=128,STAGES=6,NW=4"},
      {1, 8192, 8192, "BM=16,BN=64,BK=128,STAGES=6,NW=4"},
      {64, 8192, 8192, "BM=64,BN=64,BK=128,STAGES=6,NW=4"},
      {128, 4096, 4096, "BM=64,BN=64,BK=128,STAGES=6,NW=4"},
      {4096, 4096, 4096, ""},
  };
  expect_gemm_choices(ctx, k, cases, sizeof cases / sizeof cases[0], "BM,BN,BK,STAGES,NW");
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* Row kernels with a one-pass branch (`if N <= BN`): the row width takes the value that
 * reads each row once where a candidate holds it within 64 elements per thread (8192 on 4
 * warps); rows the default already holds keep the defaults. Rows longer than that, walked
 * in at least 16 chunks, take wider chunks on more warps with the same 8 elements per thread
 * and at least 8 chunks (wider_chunks: 4096 on 16 warps for a 50257-word vocabulary, 2048
 * on 8 at 16385); a row of 5 chunks (4097) keeps the defaults. */
Test(autoconfig, one_pass_rows_where_a_width_holds_them) {
  tile_context *ctx = new_context();
  struct {
    const char *file, *kernel;
    int64_t M, N;
    const char *want;
  } cases[] = {
      {"softmax.tile", "softmax", 8192, 8192, "BN=8192,NW=4"},
      {"softmax.tile", "softmax", 4096, 2000, "BN=2048,NW=4"},
      {"softmax.tile", "softmax", 4096, 1000, ""},
      {"softmax.tile", "softmax", 4096, 50257, "BN=4096,NW=16"},
      {"rmsnorm.tile", "rmsnorm", 4096, 50257, "BN=4096,NW=16"},
      {"layernorm.tile", "layernorm", 8192, 16385, "BN=2048,NW=8"},
      {"softmax.tile", "softmax", 16384, 4097, ""},
      {"rmsnorm.tile", "rmsnorm", 8192, 8192, "BN=8192,NW=4"},
      {"layernorm.tile", "layernorm", 8192, 4096, "BN=4096,NW=4"},
      {"softmax.tile", "softmax", 4096, 16384, "BN=2048,NW=8"}, /* one pass: 128 elements per thread on 4 warps */
  };
  tile_define d = {"T", "f16"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tile_kernel *k = compile_lib(ctx, cases[i].file, cases[i].kernel, &d, 1, "sm_90a");
    int64_t x[2] = {cases[i].M, cases[i].N};
    tile_arg a[8];
    unsigned n = tile_kernel_param_count(k);
    for (unsigned j = 0; j < n; j++) {
      tile_param_info pi;
      tile_kernel_param(k, j, &pi);
      if (!pi.is_tensor) a[j] = tile_arg_float(1e-5);
      else if (pi.rank == 2) a[j] = tile_arg_tensor(mem, pi.dtype, 2, x, NULL);
      else a[j] = tile_arg_tensor(mem, pi.dtype, 1, pi.dtype == TILE_F32 ? &x[0] : &x[1], NULL);
    }
    char got[128];
    choose(ctx, k, a, n, 132, "BN,NW", got, sizeof got);
    cr_expect_str_eq(got, cases[i].want, "%s %lldx%lld: %s", cases[i].file, (long long)cases[i].M,
                     (long long)cases[i].N, got);
    tile_kernel_release(k);
  }
  tile_context_destroy(ctx);
}

Test(autoconfig, attention_and_row_kernels) {
  tile_context *ctx = new_context();
  /* attention: grid cdiv(N, BM) x H x B; 4 x 8 x 1 = 32 programs at N=500 */
  tile_kernel *k = compile_lib(ctx, "attention.tile", "attention", NULL, 0, NULL);
  tile_arg a[6];
  int64_t q[4] = {1, 8, 500, 64}, l[3] = {1, 8, 500};
  attention_args(a, q, l, 0.125);
  char got[128];
  choose(ctx, k, a, 6, 132, "BM", got, sizeof got);
  cr_expect_str_eq(got, "BM=32", "attention N=500");
  q[2] = l[2] = 8192; /* 64 x 8 = 512 programs */
  attention_args(a, q, l, 0.125);
  choose(ctx, k, a, 6, 132, "BM,BN", got, sizeof got);
  cr_expect_str_eq(got, "", "attention N=8192");
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* `defaults sm_90a(...)` in lib/attention.tile: a compile for sm_90a gets those defaults for
 * what the caller leaves open, other targets and the CPU the plain ones. Of its two clauses
 * the first that meets the `where` constraints and fits in shared memory is taken (hd64 the
 * first, hd128 the second: 3 stages break the constraint on the stages); when neither does
 * (hd256), the plain defaults. */
static const char *attention_config(tile_context *ctx, const char *arch, const tile_define *d, unsigned nd,
                                    tile_kernel **k) {
  *k = compile_lib(ctx, "attention.tile", "attention", d, nd, arch);
  return tile_kernel_config(*k);
}

Test(autoconfig, target_defaults_clause) {
  tile_context *ctx = new_context();
  struct {
    const char *arch, *d, *nw, *want_bn, *want_nw; /* arch NULL: the CPU */
  } cases[] = {
      {"sm_90a", "128", NULL, "BN=128,BNM=128", "NW=8,STAGES=2"}, /* the second */
      {"sm_90a", "64", NULL, "BN=128,BNM=128", "NW=8,STAGES=3"}, /* the first */
      {"sm_90a", "256", NULL, "BN=64,BNM=64", "NW=4,STAGES=2"},  /* neither: the plain defaults */
      {"sm_90a", "128", "4", "BN=128", "NW=4"},                   /* a define wins */
      {"sm_80", "128", NULL, "BN=64", "NW=4"},
      {NULL, "128", NULL, "BN=64", "NW=4"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tile_define d[2] = {{"D", cases[i].d}, {"NW", cases[i].nw}};
    tile_kernel *k = NULL;
    const char *cfg = attention_config(ctx, cases[i].arch, d, cases[i].nw ? 2 : 1, &k);
    char bn[32], nw[32];
    snprintf(bn, sizeof bn, ",%s,", cases[i].want_bn);
    snprintf(nw, sizeof nw, ",%s,", cases[i].want_nw);
    char full[512];
    snprintf(full, sizeof full, ",%s,", cfg);
    cr_expect(strstr(full, bn) && strstr(full, nw), "%s D=%s: %s", cases[i].arch ? cases[i].arch : "cpu", cases[i].d,
              cfg);
    tile_kernel_release(k);
  }
  tile_context_destroy(ctx);
}

/* A clause whose values meet the constraints but whose kernel would not fit the target's
 * shared memory is passed over: at hd128 with BN=128, BNM=32 set by the caller, the first
 * clause's STAGES=3 needs 273 KiB (two rings: the key blocks differ; the second clause's
 * STAGES=2 fits). */
Test(autoconfig, target_defaults_fit_shared_memory) {
  tile_context *ctx = new_context();
  tile_define d[4] = {{"D", "128"}, {"BN", "128"}, {"BNM", "32"}, {"NW", "8"}};
  tile_kernel *k = NULL;
  const char *cfg = attention_config(ctx, "sm_90a", d, 4, &k);
  char full[512];
  snprintf(full, sizeof full, ",%s,", cfg);
  cr_expect(strstr(full, ",STAGES=2,") && strstr(full, ",BNM=32,"), "%s", cfg);
  tile_kernel_release(k);
  d[0].value = "64"; /* at hd64 the first clause fits */
  cfg = attention_config(ctx, "sm_90a", d, 4, &k);
  snprintf(full, sizeof full, ",%s,", cfg);
  cr_expect(strstr(full, ",STAGES=3,") && strstr(full, ",BNM=32,"), "%s", cfg);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* TILE_AUTOCONFIG starts from the configuration the kernel was compiled with: on sm_90a the
 * target's defaults (BN=128, NW=8), at hd256 the plain ones they gave way to (BN=64, NW=4).
 * A quarter of the rows (BM 128 -> 32) takes half the warps (NW 8 -> 4, the fewest). */
Test(autoconfig, starts_from_the_compiled_configuration) {
  tile_context *ctx = new_context();
  const char *ds[2] = {"128", "256"}, *want[2] = {"BM=32,BN=128,NW=4", "BM=32,BN=64,NW=4"};
  for (int i = 0; i < 2; i++) {
    tile_define d = {"D", ds[i]};
    tile_kernel *k = NULL;
    attention_config(ctx, "sm_90a", &d, 1, &k);
    int64_t q[4] = {1, 8, 500, atoi(ds[i])}, l[3] = {1, 8, 500};
    tile_arg a[6];
    attention_args(a, q, l, 0.1);
    char got[128];
    choose(ctx, k, a, 6, 132, "BM,BN,NW", got, sizeof got);
    cr_expect_str_eq(got, want[i], "D=%s: %s", ds[i], got);
    tile_kernel_release(k);
  }
  tile_context_destroy(ctx);
}

/* A lib kernel's configuration per (target, head dim): `want` is a run of ",NAME=VALUE,"
 * the configuration must contain. */
struct config_case {
  const char *arch, *d, *want;
};

static void expect_configs(const char *file, const char *kernel, const struct config_case *cases, size_t n) {
  tile_context *ctx = new_context();
  for (size_t i = 0; i < n; i++) {
    tile_define d = {"D", cases[i].d};
    tile_kernel *k = compile_lib(ctx, file, kernel, &d, 1, cases[i].arch);
    char full[512];
    snprintf(full, sizeof full, ",%s,", tile_kernel_config(k));
    cr_expect(strstr(full, cases[i].want), "%s %s D=%s: %s", kernel, cases[i].arch, cases[i].d, full);
    tile_kernel_release(k);
  }
  tile_context_destroy(ctx);
}

/* lib/attention_bwd.tile's dkdv: one sm_90a clause (128 keys over two warpgroups, within
 * `BN * (D + BM) <= 3072 * NW` at hd64 and hd128); other targets the plain defaults. */
Test(autoconfig, backward_target_defaults) {
  static const struct config_case cases[] = {
      {"sm_90a", "64", ",BM=64,BN=128,NW=8,"},
      {"sm_90a", "128", ",BM=64,BN=128,NW=8,"},
      {"sm_80", "128", ",BM=32,BN=64,NW=8,"},
  };
  expect_configs("attention_bwd.tile", "attention_bwd_dkdv", cases, sizeof cases / sizeof cases[0]);
}

/* lib/decode_attention.tile: one warp per program on sm_90a where the accumulator fits
 * (`where BG * D <= 2048 * NW`: hd256 too at BG = 8); other targets the plain defaults. */
Test(autoconfig, decode_target_defaults) {
  static const struct config_case cases[] = {
      {"sm_90a", "128", ",BN=16,NW=1,STAGES=3,"},
      {"sm_90a", "64", ",BN=16,NW=1,STAGES=3,"},
      {"sm_90a", "256", ",BN=16,NW=1,STAGES=3,"},
      {"sm_80", "128", ",BN=32,NW=4,STAGES=3,"},
  };
  expect_configs("decode_attention.tile", "decode_split", cases, sizeof cases / sizeof cases[0]);
}
