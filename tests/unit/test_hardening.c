/* test_hardening.c - regression tests of inputs that once crashed, hung or were accepted
 * silently (issue 19): each names the defect it pins. CPU device only. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "testfiles.h"
#include "tile.h"

static tile_context *new_ctx(void) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  return ctx;
}

static double now_s(void) { return tl_now_ms() / 1e3; }

/* tile_mem_alloc(SIZE_MAX) rounded its size up to 0 and returned a 0-byte buffer. */
Test(hardening, mem_alloc_size_overflow) {
  tile_context *ctx = new_ctx();
  void *p = (void *)1;
  cr_expect_eq(tile_mem_alloc(ctx, TILE_DEVICE_CPU, SIZE_MAX, &p), TILE_NOMEM);
  cr_expect_null(p);
  cr_expect_eq(tile_mem_alloc(ctx, TILE_DEVICE_CPU, SIZE_MAX - 100, &p), TILE_NOMEM);
  cr_expect(strstr(tile_errmsg(ctx), "cannot allocate"), "%s", tile_errmsg(ctx));
  tile_context_destroy(ctx);
}

/* A source that never ends (/dev/zero) was read until memory ran out; a directory was
 * reported as "defines no kernel". */
Test(hardening, unbounded_and_directory_sources) {
  tile_context *ctx = new_ctx();
  tile_kernel *k = NULL;
  double t0 = now_s();
  cr_expect_eq(tile_compile_file(ctx, "/dev/zero", NULL, &k), TILE_IO);
  cr_expect(strstr(tile_errmsg(ctx), "larger than"), "%s", tile_errmsg(ctx));
  cr_expect(now_s() - t0 < 10, "reading /dev/zero took %.1f s", now_s() - t0);
  cr_expect_eq(tile_compile_file(ctx, "/tmp", NULL, &k), TILE_IO);
  cr_expect(strstr(tile_errmsg(ctx), "directory"), "%s", tile_errmsg(ctx));
  cr_expect_null(k);
  tile_context_destroy(ctx);
}

static const char *const copy_src = "kernel copy(X: f32[A, B, C, D], Y: out f32[A, B, C, D]) grid(1) {\n"
                                    "  Y[0, 0, 0, 0 : +4] = X[0, 0, 0, 0 : +4];\n"
                                    "}\n";

/* Rank-4 shapes near 2^31 per dimension overflowed the element count, and a huge stride
 * wrapped into an out-of-bounds offset; both are refused, naming the argument. */
Test(hardening, launch_shape_and_stride_overflow) {
  tile_context *ctx = new_ctx();
  tile_kernel *k = NULL;
  tile_compile_options co = {.device = TILE_DEVICE_CPU};
  cr_assert_eq(tile_compile_string(ctx, "copy.tile", copy_src, strlen(copy_src), &co, &k), TILE_OK, "%s",
               tile_errmsg(ctx));
  float x[16] = {0}, y[16] = {0};
  int64_t big[4] = {INT32_MAX, INT32_MAX, INT32_MAX, 4};
  tile_arg a[2] = {tile_arg_tensor(x, TILE_F32, 4, big, NULL), tile_arg_tensor(y, TILE_F32, 4, big, NULL)};
  cr_expect_eq(tile_launch(ctx, k, a, 2, NULL), TILE_BAD_LAUNCH);
  cr_expect(strstr(tile_errmsg(ctx), "argument 0 ('X')"), "%s", tile_errmsg(ctx));
  int64_t shape[4] = {2, 1, 1, 4};
  int64_t strides[4] = {INT64_MAX / 2, 4, 4, 1};
  a[0] = tile_arg_tensor(x, TILE_F32, 4, shape, strides);
  a[1] = tile_arg_tensor(y, TILE_F32, 4, shape, NULL);
  cr_expect_eq(tile_launch(ctx, k, a, 2, NULL), TILE_BAD_LAUNCH);
  cr_expect(strstr(tile_errmsg(ctx), "strides are too large"), "%s", tile_errmsg(ctx));
  /* the same with sane strides works */
  int64_t ok[4] = {1, 1, 1, 4};
  a[0] = tile_arg_tensor(x, TILE_F32, 4, ok, NULL);
  a[1] = tile_arg_tensor(y, TILE_F32, 4, ok, NULL);
  cr_expect_eq(tile_launch(ctx, k, a, 2, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* A tile too large for the warps that hold it made LLVM run for minutes (softmax with
 * BN=1048576); it is refused at once. */
Test(hardening, huge_tile_refused_quickly) {
  tile_context *ctx = new_ctx();
  char path[1024];
  test_lib_path(path, sizeof path, "softmax.tile");
  size_t len;
  char *src = test_read_file(path, &len);
  cr_assert_not_null(src);
  tile_define d = {"BN", "1048576"};
  tile_compile_options co = {.defines = &d, .ndefines = 1, .arch = "sm_90a"};
  tile_emit_options eo = {.what = TILE_EMIT_PTX};
  char *out = NULL;
  double t0 = now_s();
  cr_expect_eq(tile_emit(ctx, "softmax.tile", src, len, &co, &eo, &out, NULL), TILE_UNSUPPORTED);
  cr_expect(now_s() - t0 < 10, "took %.1f s", now_s() - t0);
  cr_expect(strstr(tile_errmsg(ctx), "registers per thread"), "%s", tile_errmsg(ctx));
  tile_free(out);
  free(src);
  tile_context_destroy(ctx);
}

/* tile_emit with a kind that does not exist returned "internal compiler error". */
Test(hardening, emit_invalid_kind) {
  tile_context *ctx = new_ctx();
  const char *src = "kernel k(X: f32[N]) grid(1) { }\n";
  tile_emit_options eo = {.what = (tile_emit_kind)42};
  char *out = NULL;
  cr_expect_eq(tile_emit(ctx, "k.tile", src, strlen(src), NULL, &eo, &out, NULL), TILE_INVALID_ARGUMENT);
  cr_expect(strstr(tile_errmsg(ctx), "what"), "%s", tile_errmsg(ctx));
  cr_expect_null(out);
  tile_context_destroy(ctx);
}

/* Releasing a kernel after destroying its context was a use-after-free (ASan finds it):
 * the context now stays alive until its last kernel is released. */
Test(hardening, release_after_context_destroy) {
  tile_context *ctx = new_ctx();
  tile_kernel *k = NULL, *k2 = NULL;
  const char *src = "kernel k(X: f32[N], Y: out f32[N]) grid(1) { Y[0 : +4] = X[0 : +4]; }\n";
  tile_compile_options co = {.device = TILE_DEVICE_CPU};
  cr_assert_eq(tile_compile_string(ctx, "k.tile", src, strlen(src), &co, &k), TILE_OK);
  co.flags = TILE_NO_CACHE;
  cr_assert_eq(tile_compile_string(ctx, "k.tile", src, strlen(src), &co, &k2), TILE_OK);
  tile_context_destroy(ctx);
  cr_expect_str_eq(tile_kernel_name(k), "k");
  tile_kernel_release(k2);
  tile_kernel_release(k);
}

/* The tuner told a pruned configuration from a failed one by matching the message text;
 * failures now carry a stable code (tile_errcode, tile_diagnostic.code). */
Test(hardening, error_codes) {
  tile_context *ctx = new_ctx();
  tile_kernel *k = NULL;
  const char *src = "kernel k<BM: 64 | 128 = 64>(X: out f32[N]) grid(1) where BM <= 64 { }\n";
  tile_define d = {"BM", "128"};
  tile_compile_options co = {.defines = &d, .ndefines = 1};
  cr_expect_eq(tile_compile_string(ctx, "c.tile", src, strlen(src), &co, &k), TILE_COMPILE);
  cr_expect_str_eq(tile_errcode(ctx), "CONSTRAINT");
  tile_diagnostic dg;
  cr_assert_eq(tile_diag_get(ctx, 0, &dg), TILE_OK);
  cr_expect_str_eq(dg.code, "CONSTRAINT");
  /* an undeclared name */
  const char *src2 = "kernel k(X: out f32[N]) grid(1) { X[0 : +4] = y; }\n";
  cr_expect_eq(tile_compile_string(ctx, "u.tile", src2, strlen(src2), NULL, &k), TILE_COMPILE);
  cr_expect_str_eq(tile_errcode(ctx), "UNDECLARED");
  /* a success clears it */
  co.ndefines = 0;
  cr_expect_eq(tile_compile_string(ctx, "c.tile", src, strlen(src), &co, &k), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_str_eq(tile_errcode(ctx), "");
  tile_kernel_release(k);
  /* a tile too large for registers */
  char path[1024];
  test_lib_path(path, sizeof path, "softmax.tile");
  size_t len;
  char *sm = test_read_file(path, &len);
  cr_assert_not_null(sm);
  tile_define big = {"BN", "1048576"};
  tile_compile_options go = {.defines = &big, .ndefines = 1, .arch = "sm_80"};
  tile_emit_options eo = {.what = TILE_EMIT_PTX};
  char *out = NULL;
  cr_expect_eq(tile_emit(ctx, "softmax.tile", sm, len, &go, &eo, &out, NULL), TILE_UNSUPPORTED);
  cr_expect_str_eq(tile_errcode(ctx), "REGISTER_LIMIT");
  free(sm);
  tile_context_destroy(ctx);
}

/* Sema folded constants with its own arithmetic (gelu in double with tanh, conversions by
 * hand), so gelu(0.7) written as a constant differed from gelu(x) computed at x = 0.7.
 * Folding now evaluates the IR's ops (ir_eval_elem): the two agree bit for bit. */
Test(hardening, folded_constants_equal_computed) {
  static const char *const fns[] = {"gelu", "silu", "sigmoid", "exp", "tanh", "erf", "rsqrt", "log2"};
  tile_context *ctx = new_ctx();
  for (unsigned f = 0; f < sizeof fns / sizeof *fns; f++) {
    char src[512];
    snprintf(src, sizeof src,
             "kernel k(X: f32[N], Y: out f32[N]) grid(1) {\n"
             "  Y[0 : +4] = %s(X[0 : +4]);\n"
             "  Y[4 : +4] = zeros([4], f32) + %s(0.7);\n"
             "}\n",
             fns[f], fns[f]);
    tile_kernel *k = NULL;
    tile_compile_options co = {.device = TILE_DEVICE_CPU, .flags = TILE_NO_CACHE};
    cr_assert_eq(tile_compile_string(ctx, "f.tile", src, strlen(src), &co, &k), TILE_OK, "%s", tile_errmsg(ctx));
    float x[8] = {0.7f, 0.7f, 0.7f, 0.7f}, y[8] = {0};
    int64_t n = 8;
    tile_arg a[2] = {tile_arg_tensor(x, TILE_F32, 1, &n, NULL), tile_arg_tensor(y, TILE_F32, 1, &n, NULL)};
    cr_assert_eq(tile_launch(ctx, k, a, 2, NULL), TILE_OK, "%s", tile_errmsg(ctx));
    cr_expect(memcmp(&y[0], &y[4], sizeof(float)) == 0, "%s: computed %.9g, folded %.9g", fns[f], y[0], y[4]);
    tile_kernel_release(k);
  }
  tile_context_destroy(ctx);
}

/* TILE_REPACK=off turned repacking on (any value but "0" meant always). */
int rt_repack_mode_from_env(void);
Test(hardening, repack_env_words) {
  const char *never[] = {"0", "off", "OFF", "false", "no"}, *always[] = {"1", "on", "true", "yes", "always"},
             *autos[] = {"", "auto", "sometimes"};
  for (size_t i = 0; i < 5; i++) {
    setenv("TILE_REPACK", never[i], 1);
    cr_expect_eq(rt_repack_mode_from_env(), 1, "TILE_REPACK=%s should turn repacking off", never[i]);
    setenv("TILE_REPACK", always[i], 1);
    cr_expect_eq(rt_repack_mode_from_env(), 2, "TILE_REPACK=%s should turn repacking on", always[i]);
  }
  for (size_t i = 0; i < 3; i++) {
    setenv("TILE_REPACK", autos[i], 1);
    cr_expect_eq(rt_repack_mode_from_env(), 0, "TILE_REPACK=%s should leave it automatic", autos[i]);
  }
  unsetenv("TILE_REPACK");
  cr_expect_eq(rt_repack_mode_from_env(), 0);
}
