/* test_api.c - the contracts of the public API (tile.h) on the CPU device: status strings,
 * contexts, compile errors and their structured diagnostics, kernel selection, overrides,
 * I/O errors, introspection, the kernel cache, launch argument checking (every rejection
 * names the argument and launches nothing), tile_emit (AST, IR, the IR round trip, pass
 * timing), compiling from IR text, the memory helpers and tile_bench.                     */
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

static char *read_text(const char *path, size_t *len) {
  char *buf = test_read_file(path, len);
  cr_assert_not_null(buf, "cannot read %s", path);
  return buf;
}

static char *read_lib(const char *file, size_t *len) {
  char path[1024];
  test_lib_path(path, sizeof path, file);
  return read_text(path, len);
}

static tile_context *new_ctx(void) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  cr_assert_not_null(ctx);
  return ctx;
}

static tile_kernel *compile_lib(tile_context *ctx, const char *file, const char *kernel,
                                const tile_define *d, unsigned nd) {
  char path[1024];
  test_lib_path(path, sizeof path, file);
  tile_compile_options co = {
      .kernel = kernel, .defines = d, .ndefines = nd, .device = TILE_DEVICE_CPU};
  tile_kernel *k = NULL;
  tile_status st = tile_compile_file(ctx, path, &co, &k);
  cr_assert_eq(st, TILE_OK, "compiling %s: %s\n%s", file, tile_status_name(st), tile_errmsg(ctx));
  cr_assert_not_null(k);
  return k;
}

static tile_kernel *compile_src(tile_context *ctx, const char *name, const char *src,
                                unsigned flags) {
  tile_compile_options co = {.device = TILE_DEVICE_CPU, .flags = flags};
  tile_kernel *k = NULL;
  tile_status st = tile_compile_string(ctx, name, src, strlen(src), &co, &k);
  cr_assert_eq(st, TILE_OK, "compiling %s: %s\n%s", name, tile_status_name(st), tile_errmsg(ctx));
  cr_assert_not_null(k);
  return k;
}

static bool contains(const char *hay, const char *needle) {
  return hay && strstr(hay, needle) != NULL;
}

/* ---- status codes, versions, dtypes ----------------------------------------------------- */

Test(api, status_strings) {
  static const char *const names[] = {
      "TILE_OK",      "TILE_INVALID_ARGUMENT", "TILE_NOMEM",      "TILE_IO",
      "TILE_COMPILE", "TILE_NOT_FOUND",        "TILE_BAD_LAUNCH", "TILE_NO_DRIVER",
      "TILE_CUDA",    "TILE_UNSUPPORTED",      "TILE_CACHE",      "TILE_INTERNAL",
  };
  cr_assert_eq(sizeof names / sizeof names[0], (size_t)TILE_STATUS__COUNT,
               "a status code was added: extend this test");
  cr_assert_eq(TILE_OK, 0);
  for (int s = 0; s < TILE_STATUS__COUNT; s++) {
    const char *e = tile_strerror((tile_status)s), *n = tile_status_name((tile_status)s);
    cr_assert_not_null(e);
    cr_assert_not_null(n);
    cr_expect_str_eq(n, names[s]);
    cr_expect(strlen(e) > 3, "strerror(%s) = '%s'", n, e);
    for (int t = 0; t < s; t++)
      cr_expect_str_neq(e, tile_strerror((tile_status)t), "%s and %s share a description", n,
                        names[t]);
  }
  cr_expect_str_eq(tile_strerror(TILE_OK), "success");
  cr_expect(contains(tile_strerror(TILE_BAD_LAUNCH), "launch"));
  /* out-of-range codes never give NULL */
  int bad[] = {-1, TILE_STATUS__COUNT, 1000};
  for (size_t i = 0; i < 3; i++) {
    cr_assert_not_null(tile_strerror((tile_status)bad[i]));
    cr_assert_not_null(tile_status_name((tile_status)bad[i]));
    for (int s = 0; s < TILE_STATUS__COUNT; s++)
      cr_expect_str_neq(tile_status_name((tile_status)bad[i]), names[s]);
  }
}

Test(api, version_and_dtypes) {
  cr_assert(contains(tile_version(), "tile "), "version '%s'", tile_version());
  cr_assert(contains(tile_version(), "LLVM"), "version '%s'", tile_version());
  static const struct {
    tile_dtype t;
    const char *name;
    size_t size;
  } dts[] = {{TILE_BOOL, "bool", 1},     {TILE_I8, "i8", 1},        {TILE_I16, "i16", 2},
             {TILE_I32, "i32", 4},       {TILE_I64, "i64", 8},      {TILE_F16, "f16", 2},
             {TILE_BF16, "bf16", 2},     {TILE_F32, "f32", 4},      {TILE_F64, "f64", 8},
             {TILE_F8E4M3, "f8e4m3", 1}, {TILE_F8E5M2, "f8e5m2", 1}, {TILE_U32, "u32", 4}};
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    cr_expect_str_eq(tile_dtype_name(dts[i].t), dts[i].name);
    cr_expect_eq(tile_dtype_size(dts[i].t), dts[i].size, "size of %s", dts[i].name);
  }
  cr_expect_str_eq(tile_dtype_name(TILE_DTYPE_NONE), "?");
  cr_expect_str_eq(tile_dtype_name(TILE_DTYPE__COUNT), "?");
  cr_expect_eq(tile_dtype_size(TILE_DTYPE_NONE), 0);
  cr_expect_eq(tile_dtype_size((tile_dtype)99), 0);
}

/* ---- contexts --------------------------------------------------------------------------- */

Test(api, context_create_destroy) {
  tile_context *ctx = NULL;
  cr_assert_eq(tile_context_create(NULL, &ctx), TILE_OK);
  cr_assert_not_null(ctx);
  cr_expect_str_eq(tile_errmsg(ctx), "");
  cr_expect_eq(tile_diag_count(ctx), 0);
  tile_context_destroy(ctx);

  tile_context_options o = {.cpu_threads = 1, .cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  tile_context_destroy(ctx);

  cr_expect_eq(tile_context_create(NULL, NULL), TILE_INVALID_ARGUMENT);
  tile_context_destroy(NULL); /* a no-op */
  cr_expect_not_null(tile_errmsg(NULL));
  cr_expect_eq(tile_diag_count(NULL), 0);
  tile_kernel_release(NULL); /* a no-op */
  cr_expect_eq(tile_kernel_param_count(NULL), 0);
  cr_expect_null(tile_kernel_name(NULL));
  cr_expect_eq(tile_kernel_param_index(NULL, "A"), -1);
}

/* ---- compile errors and diagnostics ----------------------------------------------------- */

Test(api, compile_error_diagnostics) {
  tile_context *ctx = new_ctx();
  /* a missing `;` at the end of line 2: reported at 2:29 (where the `;` should be) */
  const char *src = "kernel k(X: out f32[N]) grid(cdiv(N, 16)) {\n"
                    "  let i = program_id(0) * 16\n"
                    "  X[i : +16] = zeros([16], f32);\n"
                    "}\n";
  tile_kernel *k = (tile_kernel *)&k; /* must be reset to NULL */
  tile_status st = tile_compile_string(ctx, "bad.tile", src, strlen(src), NULL, &k);
  cr_assert_eq(st, TILE_COMPILE, "%s", tile_status_name(st));
  cr_expect_null(k);
  cr_assert_geq(tile_diag_count(ctx), 1);
  tile_diagnostic d;
  cr_assert_eq(tile_diag_get(ctx, 0, &d), TILE_OK);
  cr_expect_eq(d.severity, TILE_SEV_ERROR);
  cr_expect_str_eq(d.file, "bad.tile");
  cr_expect_eq(d.line, 2);
  cr_expect_eq(d.col, 29);
  cr_expect(contains(d.message, "expected `;`"), "message '%s'", d.message);
  cr_expect(contains(tile_errmsg(ctx), "bad.tile:2:29: error:"), "errmsg '%s'", tile_errmsg(ctx));
  cr_expect_eq(tile_diag_get(ctx, tile_diag_count(ctx), &d), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_diag_get(ctx, 0, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_diag_get(NULL, 0, &d), TILE_INVALID_ARGUMENT);

  /* a semantic error, with its location and underline length */
  const char *src2 = "kernel k(X: out f32[N]) grid(cdiv(N, 16)) {\n"
                     "  let i = program_id(0) * 16;\n"
                     "  X[i : +16] = zeros([16], f32) + undefined_thing;\n"
                     "}\n";
  st = tile_compile_string(ctx, "sema.tile", src2, strlen(src2), NULL, &k);
  cr_assert_eq(st, TILE_COMPILE);
  cr_assert_geq(tile_diag_count(ctx), 1, "the previous compile's diagnostics are replaced");
  cr_assert_eq(tile_diag_get(ctx, 0, &d), TILE_OK);
  cr_expect_str_eq(d.file, "sema.tile");
  cr_expect_eq(d.line, 3);
  cr_expect_eq(d.col, 35);
  cr_expect_eq(d.len, (unsigned)strlen("undefined_thing"));
  cr_expect(contains(d.message, "undefined_thing"), "message '%s'", d.message);
  cr_expect(contains(tile_errmsg(ctx), "sema.tile:3:35: error:"), "errmsg '%s'", tile_errmsg(ctx));

  /* several errors are all reported, in order */
  const char *src3 = "kernel k(X: out f32[N]) grid(cdiv(N, 16)) {\n"
                     "  let a = nope1;\n"
                     "  let b = nope2;\n"
                     "  X[0 : +16] = zeros([16], f32);\n"
                     "}\n";
  st = tile_compile_string(ctx, "multi.tile", src3, strlen(src3), NULL, &k);
  cr_assert_eq(st, TILE_COMPILE);
  unsigned errors = 0, last_line = 0;
  for (unsigned i = 0; i < tile_diag_count(ctx); i++) {
    cr_assert_eq(tile_diag_get(ctx, i, &d), TILE_OK);
    if (d.severity != TILE_SEV_ERROR)
      continue;
    errors++;
    cr_expect_geq(d.line, last_line);
    last_line = d.line;
  }
  cr_expect_eq(errors, 2, "%s", tile_errmsg(ctx));
  cr_expect(contains(tile_errmsg(ctx), "multi.tile:2:11: error:"), "%s", tile_errmsg(ctx));
  cr_expect(contains(tile_errmsg(ctx), "multi.tile:3:11: error:"), "%s", tile_errmsg(ctx));

  /* a successful compile clears the message and the diagnostics */
  tile_kernel *ok = compile_lib(ctx, "softmax.tile", NULL, NULL, 0);
  cr_expect_eq(tile_diag_count(ctx), 0);
  cr_expect_str_eq(tile_errmsg(ctx), "");
  tile_kernel_release(ok);

  /* bad arguments */
  cr_expect_eq(tile_compile_string(NULL, "x", src, strlen(src), NULL, &k), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_compile_string(ctx, "x", NULL, 0, NULL, &k), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_compile_string(ctx, "x", src, strlen(src), NULL, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_compile_file(ctx, NULL, NULL, &k), TILE_INVALID_ARGUMENT);
  tile_compile_options nodefs = {.ndefines = 2, .defines = NULL};
  cr_expect_eq(tile_compile_string(ctx, "x", src, strlen(src), &nodefs, &k), TILE_INVALID_ARGUMENT);
  tile_compile_options baddev = {.device = (tile_device)7};
  cr_expect_eq(tile_compile_string(ctx, "x", src, strlen(src), &baddev, &k), TILE_INVALID_ARGUMENT);
  cr_expect(contains(tile_errmsg(ctx), "device"), "%s", tile_errmsg(ctx));
  tile_context_destroy(ctx);
}

Test(api, unknown_kernel) {
  tile_context *ctx = new_ctx();
  char path[1024];
  test_lib_path(path, sizeof path, "gemm.tile");
  tile_compile_options co = {.kernel = "no_such_kernel"};
  tile_kernel *k = NULL;
  tile_status st = tile_compile_file(ctx, path, &co, &k);
  cr_expect_eq(st, TILE_NOT_FOUND, "%s: %s", tile_status_name(st), tile_errmsg(ctx));
  cr_expect_null(k);
  cr_expect(contains(tile_errmsg(ctx), "no_such_kernel"), "%s", tile_errmsg(ctx));
  cr_expect(contains(tile_errmsg(ctx), "gemm") && contains(tile_errmsg(ctx), "bmm"),
            "the message lists the kernels: %s", tile_errmsg(ctx));
  /* a file with two kernels and no name: an error that names both */
  st = tile_compile_file(ctx, path, NULL, &k);
  cr_expect_neq(st, TILE_OK);
  cr_expect(contains(tile_errmsg(ctx), "gemm") && contains(tile_errmsg(ctx), "bmm"), "%s",
            tile_errmsg(ctx));
  /* selecting each kernel by name works */
  co.kernel = "bmm";
  cr_assert_eq(tile_compile_file(ctx, path, &co, &k), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_str_eq(tile_kernel_name(k), "bmm");
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

Test(api, bad_defines) {
  tile_context *ctx = new_ctx();
  char path[1024];
  test_lib_path(path, sizeof path, "gemm.tile");
  static const struct {
    const char *name, *value, *expect;
  } cases[] = {
      {"BX", "64", "BX"},              /* unknown name */
      {"BM", "big", "BM"},             /* int parameter given a word */
      {"BM", "9999999999", "BM"},      /* out of i32 range */
      {"HAS_BIAS", "yes", "HAS_BIAS"}, /* bool parameter given a word */
      {"TF32", "2", "TF32"},
      {"T", "f64", "T"}, /* not a dtype a parameter can take */
      {"T", "float", "T"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tile_define d[] = {{"ACT", "relu"}, {cases[i].name, cases[i].value}};
    tile_compile_options co = {.kernel = "gemm", .defines = d, .ndefines = 2};
    tile_kernel *k = NULL;
    tile_status st = tile_compile_file(ctx, path, &co, &k);
    cr_expect_eq(st, TILE_COMPILE, "-D %s=%s: %s", cases[i].name, cases[i].value,
                 tile_status_name(st));
    cr_expect_null(k);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "`%s`", cases[i].expect);
    cr_expect(contains(tile_errmsg(ctx), quoted), "-D %s=%s: message does not name it: %s",
              cases[i].name, cases[i].value, tile_errmsg(ctx));
    cr_expect(contains(tile_errmsg(ctx), cases[i].value), "-D %s=%s: %s", cases[i].name,
              cases[i].value, tile_errmsg(ctx));
    cr_expect_geq(tile_diag_count(ctx), 1);
  }
  /* the unknown-name message lists the parameters that exist */
  tile_define d1[] = {{"BX", "64"}};
  tile_compile_options co = {.kernel = "gemm", .defines = d1, .ndefines = 1};
  tile_kernel *k = NULL;
  cr_expect_eq(tile_compile_file(ctx, path, &co, &k), TILE_COMPILE);
  cr_expect(contains(tile_errmsg(ctx), "GROUP_M"), "%s", tile_errmsg(ctx));
  /* a tile size the kernel cannot use: an error in the kernel body */
  tile_define d2[] = {{"BM", "100"}};
  co.defines = d2;
  cr_expect_eq(tile_compile_file(ctx, path, &co, &k), TILE_COMPILE);
  cr_expect(contains(tile_errmsg(ctx), "power of two"), "%s", tile_errmsg(ctx));
  /* a NULL name or value is an invalid argument, not a crash */
  tile_define d3[] = {{"BM", NULL}};
  co.defines = d3;
  cr_expect_eq(tile_compile_file(ctx, path, &co, &k), TILE_INVALID_ARGUMENT);
  tile_define d4[] = {{NULL, "64"}};
  co.defines = d4;
  cr_expect_eq(tile_compile_file(ctx, path, &co, &k), TILE_INVALID_ARGUMENT);
  /* valid spellings: 1/0 for bools, quoted or bare strings */
  tile_define d5[] = {{"HAS_BIAS", "1"}, {"ACT", "\"gelu\""}, {"BM", "0x40"}};
  co.defines = d5;
  co.ndefines = 3;
  cr_assert_eq(tile_compile_file(ctx, path, &co, &k), TILE_OK, "%s", tile_errmsg(ctx));
  tile_param_info pi;
  cr_assert_eq(tile_kernel_param(k, (unsigned)tile_kernel_param_index(k, "bias"), &pi), TILE_OK);
  cr_expect(pi.is_used, "HAS_BIAS=1 uses bias");
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

Test(api, unreadable_file) {
  tile_context *ctx = new_ctx();
  char path[1024];
  snprintf(path, sizeof path, "%s/lib/does_not_exist.tile", test_source_dir());
  tile_kernel *k = NULL;
  tile_status st = tile_compile_file(ctx, path, NULL, &k);
  cr_expect_eq(st, TILE_IO, "%s", tile_status_name(st));
  cr_expect_null(k);
  cr_expect(contains(tile_errmsg(ctx), "does_not_exist.tile"), "%s", tile_errmsg(ctx));
  /* the diagnostics are those of this call: none, even after a compile that had some */
  const char *bad = "kernel k() grid(1) { x }";
  cr_assert_eq(tile_compile_string(ctx, "b.tile", bad, strlen(bad), NULL, &k), TILE_COMPILE);
  cr_assert_geq(tile_diag_count(ctx), 1);
  snprintf(path, sizeof path, "%s/lib/does_not_exist.tile", test_source_dir());
  cr_expect_eq(tile_compile_file(ctx, path, NULL, &k), TILE_IO);
  cr_expect_eq(tile_diag_count(ctx), 0, "stale diagnostics after TILE_IO");
  /* a directory cannot be read either */
  snprintf(path, sizeof path, "%s/lib", test_source_dir());
  st = tile_compile_file(ctx, path, NULL, &k);
  cr_expect_eq(st, TILE_IO, "%s", tile_status_name(st));
  cr_expect(contains(tile_errmsg(ctx), path), "%s", tile_errmsg(ctx));
  tile_context_destroy(ctx);
}

/* ---- introspection ---------------------------------------------------------------------- */

static void expect_param(const tile_kernel *k, unsigned i, const char *name, int is_tensor,
                         int is_output, tile_dtype dt, unsigned rank, const char *const *dims) {
  tile_param_info p;
  cr_assert_eq(tile_kernel_param(k, i, &p), TILE_OK);
  cr_expect_str_eq(p.name, name);
  cr_expect_eq(p.is_tensor, is_tensor, "%s", name);
  cr_expect_eq(p.is_output, is_output, "%s", name);
  cr_expect_eq(p.dtype, dt, "%s: dtype %s", name, tile_dtype_name(p.dtype));
  cr_expect_eq(p.rank, rank, "%s", name);
  for (unsigned d = 0; d < rank && dims; d++) {
    if (dims[d][0] >= '0' && dims[d][0] <= '9') {
      cr_expect_null(p.dim_symbol[d], "%s dim %u", name, d);
      cr_expect_eq(p.dim_size[d], atoll(dims[d]), "%s dim %u", name, d);
    } else {
      cr_assert_not_null(p.dim_symbol[d], "%s dim %u", name, d);
      cr_expect_str_eq(p.dim_symbol[d], dims[d], "%s dim %u", name, d);
      cr_expect_eq(p.dim_size[d], -1, "%s dim %u", name, d);
    }
  }
  cr_expect_eq(tile_kernel_param_index(k, name), (int)i);
}

static tile_param_info param(const tile_kernel *k, const char *name) {
  tile_param_info p;
  int i = tile_kernel_param_index(k, name);
  cr_assert_geq(i, 0, "no parameter %s", name);
  cr_assert_eq(tile_kernel_param(k, (unsigned)i, &p), TILE_OK);
  return p;
}

Test(api, introspection_gemm) {
  tile_context *ctx = new_ctx();
  tile_define d[] = {{"T", "bf16"}};
  tile_kernel *k = compile_lib(ctx, "gemm.tile", "gemm", d, 1);
  cr_expect_str_eq(tile_kernel_name(k), "gemm");
  cr_assert_eq(tile_kernel_param_count(k), 7);
  expect_param(k, 0, "A", 1, 0, TILE_BF16, 2, (const char *[]){"M", "K"});
  expect_param(k, 1, "B", 1, 0, TILE_BF16, 2, (const char *[]){"K", "N"});
  expect_param(k, 2, "C", 1, 1, TILE_BF16, 2, (const char *[]){"M", "N"});
  expect_param(k, 3, "bias", 1, 0, TILE_BF16, 1, (const char *[]){"N"});
  expect_param(k, 4, "R", 1, 0, TILE_BF16, 2, (const char *[]){"M", "N"});
  expect_param(k, 5, "alpha", 0, 0, TILE_F32, 0, NULL);
  expect_param(k, 6, "beta", 0, 0, TILE_F32, 0, NULL);
  cr_expect_eq(tile_kernel_param_index(k, "nope"), -1);
  cr_expect_eq(tile_kernel_param_index(k, NULL), -1);
  tile_param_info p;
  cr_expect_eq(tile_kernel_param(k, 7, &p), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_kernel_param(k, 0, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_kernel_param(NULL, 0, &p), TILE_INVALID_ARGUMENT);
  /* with no epilogue: bias and R unused, C written but not read */
  cr_expect(param(k, "A").is_used && param(k, "A").is_read);
  cr_expect(param(k, "C").is_used);
  cr_expect(!param(k, "C").is_read, "C is only written without SCALED");
  cr_expect(!param(k, "bias").is_used, "bias is unused with HAS_BIAS=false");
  cr_expect(!param(k, "R").is_used, "R is unused with HAS_RESIDUAL=false");
  const char *cfg = tile_kernel_config(k);
  cr_assert_not_null(cfg);
  cr_expect(contains(cfg, "BM=128"), "config %s", cfg);
  cr_expect(contains(cfg, "T=bf16"), "config %s", cfg);
  cr_expect(contains(cfg, "HAS_BIAS=false"), "config %s", cfg);
  cr_expect(contains(cfg, "ACT=none"), "config %s", cfg);
  tile_kernel_release(k);

  tile_define d2[] = {{"HAS_BIAS", "true"}, {"SCALED", "true"}, {"BM", "64"}, {"ACT", "gelu"}};
  k = compile_lib(ctx, "gemm.tile", "gemm", d2, 4);
  cr_expect_eq(param(k, "A").dtype, TILE_F16, "the default T is f16");
  cr_expect(param(k, "bias").is_used && param(k, "bias").is_read,
            "bias is used with HAS_BIAS=true");
  cr_expect(param(k, "C").is_read, "C is read with SCALED");
  cr_expect(param(k, "C").is_output);
  cr_expect(!param(k, "R").is_used);
  cfg = tile_kernel_config(k);
  cr_expect(contains(cfg, "BM=64") && !contains(cfg, "BM=128"), "config %s", cfg);
  cr_expect(contains(cfg, "ACT=gelu"), "config %s", cfg);
  cr_expect(contains(cfg, "HAS_BIAS=true"), "config %s", cfg);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

Test(api, introspection_attention_and_norms) {
  tile_context *ctx = new_ctx();
  tile_kernel *k = compile_lib(ctx, "attention.tile", NULL, NULL, 0);
  cr_expect_str_eq(tile_kernel_name(k), "attention");
  cr_assert_eq(tile_kernel_param_count(k), 6);
  /* D is a compile-time parameter: a fixed size, not a symbol */
  expect_param(k, 0, "Q", 1, 0, TILE_F16, 4, (const char *[]){"B", "H", "N", "64"});
  expect_param(k, 1, "K", 1, 0, TILE_F16, 4, (const char *[]){"B", "HKV", "NK", "64"});
  expect_param(k, 2, "V", 1, 0, TILE_F16, 4, (const char *[]){"B", "HKV", "NK", "64"});
  expect_param(k, 3, "O", 1, 1, TILE_F16, 4, (const char *[]){"B", "H", "N", "64"});
  expect_param(k, 4, "LSE", 1, 1, TILE_F32, 3, (const char *[]){"B", "H", "N"});
  expect_param(k, 5, "scale", 0, 0, TILE_F32, 0, NULL);
  cr_expect(!param(k, "LSE").is_used, "LSE is unused without HAS_LSE");
  cr_expect(param(k, "scale").is_used);
  tile_kernel_release(k);
  tile_define d[] = {{"D", "128"}, {"HAS_LSE", "true"}, {"T", "bf16"}};
  k = compile_lib(ctx, "attention.tile", NULL, d, 3);
  expect_param(k, 0, "Q", 1, 0, TILE_BF16, 4, (const char *[]){"B", "H", "N", "128"});
  cr_expect(param(k, "LSE").is_used);
  cr_expect(contains(tile_kernel_config(k), "D=128"), "%s", tile_kernel_config(k));
  tile_kernel_release(k);

  k = compile_lib(ctx, "layernorm.tile", NULL, NULL, 0);
  cr_assert_eq(tile_kernel_param_count(k), 7);
  expect_param(k, 0, "X", 1, 0, TILE_F32, 2, (const char *[]){"M", "N"});
  expect_param(k, 3, "Y", 1, 1, TILE_F32, 2, (const char *[]){"M", "N"});
  expect_param(k, 4, "Mean", 1, 1, TILE_F32, 1, (const char *[]){"M"});
  expect_param(k, 5, "Rstd", 1, 1, TILE_F32, 1, (const char *[]){"M"});
  expect_param(k, 6, "eps", 0, 0, TILE_F32, 0, NULL);
  cr_expect(contains(tile_kernel_config(k), "BN=1024"), "%s", tile_kernel_config(k));
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* ---- caching ---------------------------------------------------------------------------- */

Test(api, kernel_cache) {
  tile_context *ctx = new_ctx();
  tile_define d[] = {{"T", "f16"}, {"BN", "256"}};
  tile_kernel *a = compile_lib(ctx, "softmax.tile", NULL, d, 2);
  tile_kernel *b = compile_lib(ctx, "softmax.tile", NULL, d, 2);
  cr_expect_eq(a, b, "the same compile is served from the cache");
  tile_define d32[] = {{"T", "f32"}};
  tile_kernel *c = compile_lib(ctx, "softmax.tile", NULL, d32, 1);
  cr_expect_neq(a, c, "different overrides give a different kernel");
  cr_expect(contains(tile_kernel_config(c), "BN=1024"), "%s", tile_kernel_config(c));
  cr_expect(contains(tile_kernel_config(a), "BN=256"), "%s", tile_kernel_config(a));

  char path[1024];
  test_lib_path(path, sizeof path, "softmax.tile");
  tile_compile_options co = {.defines = d, .ndefines = 2, .flags = TILE_NO_CACHE};
  tile_kernel *fresh = NULL, *fresh2 = NULL;
  cr_assert_eq(tile_compile_file(ctx, path, &co, &fresh), TILE_OK, "%s", tile_errmsg(ctx));
  cr_assert_eq(tile_compile_file(ctx, path, &co, &fresh2), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_neq(fresh, a, "TILE_NO_CACHE bypasses the cache");
  cr_expect_neq(fresh, fresh2);
  cr_expect_str_eq(tile_kernel_config(fresh), tile_kernel_config(a));

  /* the same source as a string (same name) is also cached; another name is another key */
  size_t len;
  char *src = read_lib("softmax.tile", &len);
  tile_compile_options cs = {.defines = d, .ndefines = 2};
  tile_kernel *s1 = NULL, *s2 = NULL, *s3 = NULL;
  cr_assert_eq(tile_compile_string(ctx, "sm.tile", src, len, &cs, &s1), TILE_OK);
  cr_assert_eq(tile_compile_string(ctx, "sm.tile", src, len, &cs, &s2), TILE_OK);
  cr_assert_eq(tile_compile_string(ctx, "other.tile", src, len, &cs, &s3), TILE_OK);
  cr_expect_eq(s1, s2);
  cr_expect_neq(s1, s3);

  /* every reference is released once; kernels still referenced keep working */
  tile_kernel_release(a);
  tile_kernel_release(fresh);
  float x[3] = {1, 2, 3}, y[3] = {0};
  tile_arg args[] = {tile_arg_tensor(x, TILE_F32, 2, (int64_t[]){1, 3}, NULL),
                     tile_arg_tensor(y, TILE_F32, 2, (int64_t[]){1, 3}, NULL)};
  cr_expect_eq(tile_launch(ctx, c, args, 2, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_float_eq(y[0] + y[1] + y[2], 1.0f, 1e-6);
  cr_expect(y[0] < y[1] && y[1] < y[2]);
  tile_kernel_release(b);
  tile_kernel_release(c);
  tile_kernel_release(fresh2);
  tile_kernel_release(s1);
  tile_kernel_release(s2);
  tile_kernel_release(s3);
  free(src);
  tile_context_destroy(ctx);
}

/* ---- launch argument checks ------------------------------------------------------------- */

enum { LM = 33, LN = 20, LK = 17 };

struct gemm_launch {
  float A[LM * LK], B[(LK + 1) * LN], C[LM * LN], bias[LN];
  tile_arg args[8];
};

static void gemm_args(struct gemm_launch *g) {
  for (int i = 0; i < LM * LK; i++)
    g->A[i] = (float)(i % 7) - 3;
  for (int i = 0; i < (LK + 1) * LN; i++)
    g->B[i] = (float)(i % 5) - 2;
  for (int i = 0; i < LN; i++)
    g->bias[i] = 1;
  g->args[0] = tile_arg_tensor(g->A, TILE_F32, 2, (int64_t[]){LM, LK}, NULL);
  g->args[1] = tile_arg_tensor(g->B, TILE_F32, 2, (int64_t[]){LK, LN}, NULL);
  g->args[2] = tile_arg_tensor(g->C, TILE_F32, 2, (int64_t[]){LM, LN}, NULL);
  g->args[3] = tile_arg_tensor(NULL, TILE_F32, 1, (int64_t[]){LN}, NULL);
  g->args[4] = tile_arg_tensor(NULL, TILE_F32, 2, (int64_t[]){LM, LN}, NULL);
  g->args[5] = tile_arg_float(1.0);
  g->args[6] = tile_arg_float(0.0);
}

/* Launches and expects TILE_BAD_LAUNCH with a message containing every string of `want`,
 * and C untouched. */
static void expect_rejected(tile_context *ctx, tile_kernel *k, struct gemm_launch *g,
                            unsigned nargs, const char *what, const char *const *want) {
  memset(g->C, 0xAB, sizeof g->C);
  tile_status st = tile_launch(ctx, k, g->args, nargs, NULL);
  cr_expect_eq(st, TILE_BAD_LAUNCH, "%s: got %s (%s)", what, tile_status_name(st),
               tile_errmsg(ctx));
  for (const char *const *w = want; *w; w++)
    cr_expect(contains(tile_errmsg(ctx), *w), "%s: the message '%s' lacks '%s'", what,
              tile_errmsg(ctx), *w);
  size_t changed = 0;
  for (size_t i = 0; i < sizeof g->C; i++)
    changed += ((unsigned char *)g->C)[i] != 0xAB;
  cr_expect_eq(changed, 0, "%s: %zu bytes of the output were written", what, changed);
}

#define WANT(...) ((const char *const[]){__VA_ARGS__, NULL})

Test(api, launch_argument_checks) {
  tile_context *ctx = new_ctx();
  tile_define d[] = {{"T", "f32"}, {"BM", "32"}, {"BN", "32"}, {"BK", "16"}};
  tile_kernel *k = compile_lib(ctx, "gemm.tile", "gemm", d, 4);
  struct gemm_launch g;
  gemm_args(&g);

  /* the valid launch works, and computes the product */
  memset(g.C, 0xAB, sizeof g.C);
  cr_assert_eq(tile_launch(ctx, k, g.args, 7, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_str_eq(tile_errmsg(ctx), "");
  float want[LM * LN];
  ref_matmul(LM, LN, LK, g.A, g.B, want);
  cr_expect_eq(memcmp(want, g.C, sizeof want), 0, "small-integer products are exact");

  expect_rejected(ctx, k, &g, 6, "too few arguments", WANT("7", "got 6", "alpha", "beta"));
  g.args[7] = tile_arg_float(0.0);
  expect_rejected(ctx, k, &g, 8, "too many arguments", WANT("7", "got 8"));
  gemm_args(&g);

  g.args[5] = tile_arg_tensor(g.bias, TILE_F32, 1, (int64_t[]){LN}, NULL);
  expect_rejected(ctx, k, &g, 7, "tensor for a scalar", WANT("'alpha'", "scalar", "tensor"));
  gemm_args(&g);
  g.args[1] = tile_arg_float(2.0);
  expect_rejected(ctx, k, &g, 7, "scalar for a tensor", WANT("'B'", "tensor", "float"));
  gemm_args(&g);
  g.args[0] = tile_arg_int(2);
  expect_rejected(ctx, k, &g, 7, "int for a tensor", WANT("'A'", "tensor", "integer"));
  gemm_args(&g);
  g.args[6].kind = (tile_arg_kind)0;
  expect_rejected(ctx, k, &g, 7, "invalid kind", WANT("'beta'"));
  gemm_args(&g);

  g.args[0].u.tensor.dtype = TILE_F16;
  expect_rejected(ctx, k, &g, 7, "wrong dtype", WANT("'A'", "f32", "f16"));
  gemm_args(&g);
  g.args[2].u.tensor.dtype = TILE_BF16;
  expect_rejected(ctx, k, &g, 7, "wrong output dtype", WANT("'C'", "bf16"));
  gemm_args(&g);

  g.args[1] = tile_arg_tensor(g.B, TILE_F32, 3, (int64_t[]){1, LK, LN}, NULL);
  expect_rejected(ctx, k, &g, 7, "wrong rank", WANT("'B'", "rank", "2", "3"));
  gemm_args(&g);
  g.args[3] = tile_arg_tensor(NULL, TILE_F32, 2, (int64_t[]){1, LN}, NULL);
  expect_rejected(ctx, k, &g, 7, "wrong rank of an unused tensor", WANT("'bias'", "rank"));
  gemm_args(&g);

  /* A is M x K but B is (K+1) x N: the message names K and both arguments */
  g.args[1] = tile_arg_tensor(g.B, TILE_F32, 2, (int64_t[]){LK + 1, LN}, NULL);
  expect_rejected(ctx, k, &g, 7, "shape relation", WANT("'A'", "'B'", "K", "17", "18"));
  gemm_args(&g);
  g.args[2] = tile_arg_tensor(g.C, TILE_F32, 2, (int64_t[]){LM, LN - 1}, NULL);
  expect_rejected(ctx, k, &g, 7, "output shape relation", WANT("'C'", "'B'", "N"));
  gemm_args(&g);

  g.args[0].u.tensor.data = NULL;
  expect_rejected(ctx, k, &g, 7, "NULL data", WANT("'A'", "NULL"));
  gemm_args(&g);
  g.args[2].u.tensor.data = NULL;
  expect_rejected(ctx, k, &g, 7, "NULL output", WANT("'C'", "NULL"));
  gemm_args(&g);

  g.args[0] = tile_arg_tensor(g.A, TILE_F32, 2, (int64_t[]){-1, LK}, NULL);
  expect_rejected(ctx, k, &g, 7, "negative size", WANT("'A'", "-1"));
  gemm_args(&g);
  g.args[1] = tile_arg_tensor(g.B, TILE_F32, 2, (int64_t[]){LK, LN}, (int64_t[]){-LN, 1});
  expect_rejected(ctx, k, &g, 7, "negative stride", WANT("'B'", "stride", "negative"));
  gemm_args(&g);
  g.args[0] = tile_arg_tensor(g.A, TILE_F32, 2, (int64_t[]){(int64_t)1 << 40, LK}, NULL);
  expect_rejected(ctx, k, &g, 7, "size beyond i32", WANT("'A'"));
  gemm_args(&g);

  /* a launch after all the rejections still works */
  memset(g.C, 0xAB, sizeof g.C);
  cr_expect_eq(tile_launch(ctx, k, g.args, 7, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_eq(memcmp(want, g.C, sizeof want), 0);
  tile_kernel_release(k);

  /* with HAS_BIAS, bias is used: NULL is rejected */
  tile_define db[] = {{"T", "f32"}, {"HAS_BIAS", "true"}};
  k = compile_lib(ctx, "gemm.tile", "gemm", db, 2);
  expect_rejected(ctx, k, &g, 7, "NULL for a used bias", WANT("'bias'", "NULL"));
  g.args[3] = tile_arg_tensor(g.bias, TILE_F32, 1, (int64_t[]){LN + 1}, NULL);
  expect_rejected(ctx, k, &g, 7, "bias of the wrong length", WANT("'bias'", "N"));
  tile_kernel_release(k);

  /* context and kernel arguments */
  gemm_args(&g);
  k = compile_lib(ctx, "gemm.tile", "gemm", d, 4);
  cr_expect_eq(tile_launch(NULL, k, g.args, 7, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_launch(ctx, NULL, g.args, 7, NULL), TILE_INVALID_ARGUMENT);
  tile_context *other = new_ctx();
  memset(g.C, 0xAB, sizeof g.C);
  cr_expect_eq(tile_launch(other, k, g.args, 7, NULL), TILE_INVALID_ARGUMENT,
               "a kernel of another context");
  cr_expect(contains(tile_errmsg(other), "context"), "%s", tile_errmsg(other));
  tile_context_destroy(other);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

Test(api, launch_fixed_size_and_scalars) {
  tile_context *ctx = new_ctx();
  /* attention's head dimension D is fixed at compile time (64 by default) */
  tile_kernel *k = compile_lib(ctx, "attention.tile", NULL, NULL, 0);
  enum { B = 1, H = 2, N = 5, D = 64 };
  uint16_t *q = calloc(B * H * N * D, 2), *o = malloc(B * H * N * D * 2);
  for (int i = 0; i < B * H * N * D; i++)
    q[i] = 0x3c00; /* 1.0 */
  int64_t s64[] = {B, H, N, D}, s32[] = {B, H, N, 32};
  tile_arg args[] = {
      tile_arg_tensor(q, TILE_F16, 4, s32, NULL),
      tile_arg_tensor(q, TILE_F16, 4, s64, NULL),
      tile_arg_tensor(q, TILE_F16, 4, s64, NULL),
      tile_arg_tensor(o, TILE_F16, 4, s64, NULL),
      tile_arg_tensor(NULL, TILE_F32, 3, (int64_t[]){B, H, N}, NULL),
      tile_arg_float(0.125),
  };
  memset(o, 0xAB, B * H * N * D * 2);
  tile_status st = tile_launch(ctx, k, args, 6, NULL);
  cr_expect_eq(st, TILE_BAD_LAUNCH, "%s", tile_status_name(st));
  cr_expect(contains(tile_errmsg(ctx), "'Q'") && contains(tile_errmsg(ctx), "64") &&
                contains(tile_errmsg(ctx), "32"),
            "%s", tile_errmsg(ctx));
  size_t changed = 0;
  for (size_t i = 0; i < B * H * N * D * 2; i++)
    changed += ((unsigned char *)o)[i] != 0xAB;
  cr_expect_eq(changed, 0);
  /* GQA: HKV must divide... the shapes must agree: K with another batch size */
  args[0] = tile_arg_tensor(q, TILE_F16, 4, s64, NULL);
  args[2] = tile_arg_tensor(q, TILE_F16, 4, (int64_t[]){B + 1, H, N, D}, NULL);
  cr_expect_eq(tile_launch(ctx, k, args, 6, NULL), TILE_BAD_LAUNCH);
  cr_expect(contains(tile_errmsg(ctx), "'V'") && contains(tile_errmsg(ctx), "B"), "%s",
            tile_errmsg(ctx));
  /* the valid launch: all-ones inputs give all-ones outputs */
  args[2] = tile_arg_tensor(q, TILE_F16, 4, s64, NULL);
  cr_assert_eq(tile_launch(ctx, k, args, 6, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  for (int i = 0; i < B * H * N * D; i++)
    cr_assert_eq(o[i], 0x3c00, "O[%d] = 0x%04x", i, o[i]);
  free(q);
  free(o);
  tile_kernel_release(k);

  /* i32 and f32 scalars */
  const char *src = "kernel fill(X: out i32[N], v: i32, f: f32, neg: bool) grid(cdiv(N, 16)) {\n"
                    "  let i = program_id(0) * 16;\n"
                    "  X[i : +16] = full([16], where(neg, -v, v), i32);\n"
                    "}\n";
  k = compile_src(ctx, "fill.tile", src, 0);
  int32_t x[20];
  tile_arg a[] = {tile_arg_tensor(x, TILE_I32, 1, (int64_t[]){20}, NULL), tile_arg_int(-7),
                  tile_arg_float(1.5), tile_arg_int(0)};
  cr_assert_eq(tile_launch(ctx, k, a, 4, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  for (int i = 0; i < 20; i++)
    cr_expect_eq(x[i], -7);
  a[1] = tile_arg_int(INT32_MAX);
  cr_assert_eq(tile_launch(ctx, k, a, 4, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_eq(x[19], INT32_MAX);
  a[1] = tile_arg_int(INT32_MIN + 1);
  a[3] = tile_arg_int(1);
  cr_assert_eq(tile_launch(ctx, k, a, 4, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_eq(x[0], INT32_MAX);
  a[2] = tile_arg_int(3); /* an integer for a float scalar is converted */
  cr_expect_eq(tile_launch(ctx, k, a, 4, NULL), TILE_OK, "%s", tile_errmsg(ctx));

  static const struct {
    tile_arg arg;
    unsigned index;
    const char *want;
  } bad[] = {
      {{.kind = TILE_ARG_INT, .u.i = (int64_t)INT32_MAX + 1}, 1, "2147483648"},
      {{.kind = TILE_ARG_INT, .u.i = (int64_t)INT32_MIN - 1}, 1, "-2147483649"},
      {{.kind = TILE_ARG_FLOAT, .u.f = 2.0}, 1, "float"},
      {{.kind = TILE_ARG_TENSOR}, 2, "tensor"},
      {{.kind = TILE_ARG_INT, .u.i = 2}, 3, "2"},
      {{.kind = TILE_ARG_FLOAT, .u.f = 1.0}, 3, "float"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tile_arg b[] = {tile_arg_tensor(x, TILE_I32, 1, (int64_t[]){20}, NULL), tile_arg_int(5),
                    tile_arg_float(1.0), tile_arg_int(1)};
    b[bad[i].index] = bad[i].arg;
    for (int j = 0; j < 20; j++)
      x[j] = 12345;
    st = tile_launch(ctx, k, b, 4, NULL);
    cr_expect_eq(st, TILE_BAD_LAUNCH, "case %zu: %s", i, tile_status_name(st));
    const char *name = bad[i].index == 1 ? "'v'" : bad[i].index == 2 ? "'f'" : "'neg'";
    cr_expect(contains(tile_errmsg(ctx), name), "case %zu: %s", i, tile_errmsg(ctx));
    cr_expect(contains(tile_errmsg(ctx), bad[i].want), "case %zu: %s", i, tile_errmsg(ctx));
    for (int j = 0; j < 20; j++)
      cr_expect_eq(x[j], 12345, "case %zu: X written", i);
  }
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* ---- tile_emit -------------------------------------------------------------------------- */

static char *emit(tile_context *ctx, const char *name, const char *src, size_t len,
                  const tile_compile_options *co, const tile_emit_options *eo) {
  char *out = NULL;
  size_t out_len = 0;
  tile_status st = tile_emit(ctx, name, src, len, co, eo, &out, &out_len);
  cr_assert_eq(st, TILE_OK, "emit %s: %s\n%s", name, tile_status_name(st), tile_errmsg(ctx));
  cr_assert_not_null(out);
  cr_assert_eq(strlen(out), out_len);
  return out;
}

Test(api, emit_ast_and_ir) {
  tile_context *ctx = new_ctx();
  size_t len;
  char *src = read_lib("gemm.tile", &len);
  tile_emit_options eo = {.what = TILE_EMIT_AST};
  char *ast = emit(ctx, "gemm.tile", src, len, NULL, &eo);
  cr_expect_gt(strlen(ast), 100);
  cr_expect(contains(ast, "gemm") && contains(ast, "bmm"), "%.300s", ast);
  tile_free(ast);

  tile_compile_options co = {.kernel = "gemm"};
  eo.what = TILE_EMIT_IR;
  char *ir = emit(ctx, "gemm.tile", src, len, &co, &eo);
  cr_expect(contains(ir, "kernel @gemm("), "%.300s", ir);
  cr_expect(contains(ir, "dot"), "%.300s", ir);
  tile_free(ir);

  /* errors come back as from compiling */
  char *out = (char *)1;
  const char *bad = "kernel k(X: out f32[N]) grid(1) { let a = ; }\n";
  cr_expect_eq(tile_emit(ctx, "bad.tile", bad, strlen(bad), NULL, &eo, &out, NULL), TILE_COMPILE);
  cr_expect_null(out);
  cr_expect(contains(tile_errmsg(ctx), "bad.tile:1:"), "%s", tile_errmsg(ctx));
  cr_expect_geq(tile_diag_count(ctx), 1);
  cr_expect_eq(tile_emit(ctx, "x", src, len, NULL, NULL, &out, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_emit(ctx, "x", src, len, NULL, &eo, NULL, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_emit(NULL, "x", src, len, NULL, &eo, &out, NULL), TILE_INVALID_ARGUMENT);
  free(src);
  tile_context_destroy(ctx);
}

/* The IR printed by TILE_EMIT_IR parses back (input_is_ir) to the identical text, for every
 * lib kernel under several configurations. */
Test(api, ir_round_trip) {
  tile_context *ctx = new_ctx();
  static const struct {
    const char *file, *kernel;
    tile_define d[4];
    unsigned nd;
  } cases[] = {
      {"gemm.tile", "gemm", {{0}}, 0},
      {"gemm.tile",
       "gemm",
       {{"T", "bf16"}, {"ACT", "gelu"}, {"SCALED", "true"}, {"HAS_BIAS", "true"}},
       4},
      {"gemm.tile",
       "gemm",
       {{"T", "f32"}, {"TF32", "true"}, {"HAS_RESIDUAL", "true"}, {"ACT", "silu"}},
       4},
      {"gemm.tile", "gemm", {{"BM", "64"}, {"BN", "32"}, {"BK", "64"}, {"ACT", "relu"}}, 4},
      {"gemm.tile", "bmm", {{0}}, 0},
      {"gemm.tile", "bmm", {{"T", "f32"}, {"TF32", "true"}, {"STAGES", "1"}}, 3},
      {"softmax.tile", NULL, {{0}}, 0},
      {"softmax.tile", NULL, {{"T", "bf16"}, {"BN", "64"}}, 2},
      {"layernorm.tile", NULL, {{0}}, 0},
      {"layernorm.tile", NULL, {{"T", "f16"}, {"BN", "256"}}, 2},
      {"rmsnorm.tile", NULL, {{0}}, 0},
      {"rmsnorm.tile", NULL, {{"T", "bf16"}, {"BN", "4096"}}, 2},
      {"attention.tile", NULL, {{0}}, 0},
      {"attention.tile", NULL, {{"CAUSAL", "true"}, {"HAS_LSE", "true"}}, 2},
      {"attention.tile", NULL, {{"D", "128"}, {"T", "bf16"}, {"BM", "128"}, {"BN", "32"}}, 4},
      {"attention.tile", NULL, {{"D", "32"}, {"CAUSAL", "true"}, {"BM", "16"}}, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t len;
    char *src = read_lib(cases[i].file, &len);
    tile_compile_options co = {
        .kernel = cases[i].kernel, .defines = cases[i].d, .ndefines = cases[i].nd};
    tile_emit_options eo = {.what = TILE_EMIT_IR};
    char *ir1 = emit(ctx, cases[i].file, src, len, &co, &eo);
    cr_expect_gt(strlen(ir1), 200, "case %zu", i);
    tile_emit_options ei = {.what = TILE_EMIT_IR, .input_is_ir = 1};
    char *ir2 = emit(ctx, "roundtrip.ir", ir1, strlen(ir1), NULL, &ei);
    if (strcmp(ir1, ir2) != 0) {
      size_t at = 0;
      while (ir1[at] && ir1[at] == ir2[at])
        at++;
      cr_expect_fail("case %zu (%s %s): the IR does not round-trip; first difference at %zu:\n"
                     "printed: ...%.80s\nreparsed: ...%.80s",
                     i, cases[i].file, cases[i].kernel ? cases[i].kernel : "", at,
                     ir1 + (at > 20 ? at - 20 : 0), ir2 + (at > 20 ? at - 20 : 0));
    }
    tile_free(ir1);
    tile_free(ir2);
    free(src);
  }
  tile_context_destroy(ctx);
}

struct reports {
  int n;
  char titles[16][96];
  char *texts[16];
};

static void collect(void *ud, const char *title, const char *text) {
  struct reports *r = ud;
  if (r->n >= 16)
    return;
  snprintf(r->titles[r->n], sizeof r->titles[r->n], "%s", title ? title : "");
  r->texts[r->n] = strdup(text ? text : "");
  r->n++;
}

Test(api, emit_time_passes_and_dumps) {
  tile_context *ctx = new_ctx();
  size_t len;
  char *src = read_lib("softmax.tile", &len);
  struct reports r = {0};
  tile_emit_options eo = {
      .what = TILE_EMIT_IR, .time_passes = 1, .report = collect, .report_ud = &r};
  char *ir = emit(ctx, "softmax.tile", src, len, NULL, &eo);
  int tables = 0;
  for (int i = 0; i < r.n; i++) {
    if (!contains(r.titles[i], "time"))
      continue;
    tables++;
    cr_expect(contains(r.texts[i], "canonicalize"), "%s", r.texts[i]);
    cr_expect(contains(r.texts[i], "total"), "%s", r.texts[i]);
    cr_expect(contains(r.texts[i], "ms"), "%s", r.texts[i]);
  }
  cr_expect_eq(tables, 1, "one timing table (got %d reports)", r.n);
  for (int i = 0; i < r.n; i++)
    free(r.texts[i]);
  tile_free(ir);

  /* without time_passes: no table */
  memset(&r, 0, sizeof r);
  eo.time_passes = 0;
  ir = emit(ctx, "softmax.tile", src, len, NULL, &eo);
  cr_expect_eq(r.n, 0);
  tile_free(ir);

  /* dump_after: the IR after that pass, which parses like any IR */
  memset(&r, 0, sizeof r);
  eo.dump_after = "canonicalize";
  ir = emit(ctx, "softmax.tile", src, len, NULL, &eo);
  cr_expect_geq(r.n, 1);
  for (int i = 0; i < r.n; i++) {
    cr_expect(contains(r.titles[i], "canonicalize"), "%s", r.titles[i]);
    cr_expect(contains(r.texts[i], "kernel @softmax"), "%.200s", r.texts[i]);
    free(r.texts[i]);
  }
  tile_free(ir);
  free(src);
  tile_context_destroy(ctx);
}

/* ---- compiling from IR ------------------------------------------------------------------ */


Test(api, compile_from_ir) {
  struct rng r;
  rng_seed(&r, rng_test_seed("api/compile_from_ir"));
  tile_context *ctx = new_ctx();
  tile_kernel *k = compile_src(ctx, "vadd.ir", TEST_VADD_IR, TILE_SOURCE_IR);
  cr_expect_str_eq(tile_kernel_name(k), "vadd");
  cr_assert_eq(tile_kernel_param_count(k), 4);
  expect_param(k, 0, "X", 1, 0, TILE_F32, 1, (const char *[]){"N"});
  expect_param(k, 2, "Z", 1, 1, TILE_F32, 1, (const char *[]){"N"});
  expect_param(k, 3, "s", 0, 0, TILE_F32, 0, NULL);
  enum { N = 200 };
  float x[N], y[N], z[N];
  for (int i = 0; i < N; i++) {
    x[i] = rng_uniform(&r, -1, 1);
    y[i] = rng_uniform(&r, -1, 1);
    z[i] = NAN;
  }
  float s = rng_uniform(&r, 0.5f, 2.0f);
  tile_arg args[] = {tile_arg_tensor(x, TILE_F32, 1, (int64_t[]){N}, NULL),
                     tile_arg_tensor(y, TILE_F32, 1, (int64_t[]){N}, NULL),
                     tile_arg_tensor(z, TILE_F32, 1, (int64_t[]){N}, NULL), tile_arg_float(s)};
  cr_assert_eq(tile_launch(ctx, k, args, 4, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  for (int i = 0; i < N; i++) {
    float want = (float)((double)(float)((double)x[i] * s) + y[i]); /* f32 mul, then f32 add */
    cr_expect_eq(z[i], want, "Z[%d] = %.9g, want %.9g", i, (double)z[i], (double)want);
  }
  /* argument checks apply to IR kernels too */
  args[1] = tile_arg_tensor(y, TILE_F32, 1, (int64_t[]){N - 1}, NULL);
  cr_expect_eq(tile_launch(ctx, k, args, 4, NULL), TILE_BAD_LAUNCH);
  cr_expect(contains(tile_errmsg(ctx), "'Y'") && contains(tile_errmsg(ctx), "'X'"), "%s",
            tile_errmsg(ctx));
  tile_kernel_release(k);

  /* a lib kernel through its IR: softmax, run against the reference */
  size_t len;
  char *src = read_lib("softmax.tile", &len);
  tile_define d[] = {{"BN", "64"}};
  tile_compile_options co = {.defines = d, .ndefines = 1};
  tile_emit_options eo = {.what = TILE_EMIT_IR};
  char *ir = emit(ctx, "softmax.tile", src, len, &co, &eo);
  k = compile_src(ctx, "softmax.ir", ir, TILE_SOURCE_IR);
  cr_expect_str_eq(tile_kernel_name(k), "softmax");
  enum { M = 3, C = 100 };
  float xs[M * C], ys[M * C], want[M * C];
  for (int i = 0; i < M * C; i++) {
    xs[i] = rng_uniform(&r, -1, 1);
    ys[i] = NAN;
  }
  ref_softmax(M, C, xs, 0, want, 0);
  tile_arg sa[] = {tile_arg_tensor(xs, TILE_F32, 2, (int64_t[]){M, C}, NULL),
                   tile_arg_tensor(ys, TILE_F32, 2, (int64_t[]){M, C}, NULL)};
  cr_assert_eq(tile_launch(ctx, k, sa, 2, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  struct ref_cmp c = ref_compare(ys, want, M * C, 1e-12, 2e-5); /* as in lib_softmax */
  cr_expect_eq(c.n_bad, 0, "bad %zu, max_rel %g", c.n_bad, c.max_rel);
  tile_kernel_release(k);
  tile_free(ir);
  free(src);

  /* IR errors and kernel selection */
  tile_kernel *bad = NULL;
  const char *broken = "kernel @k() warps=4 {\ngrid:\n  %0 = bogus : i32\n";
  tile_compile_options ci = {.flags = TILE_SOURCE_IR};
  cr_expect_eq(tile_compile_string(ctx, "broken.ir", broken, strlen(broken), &ci, &bad),
               TILE_COMPILE);
  cr_expect(contains(tile_errmsg(ctx), "bogus"), "%s", tile_errmsg(ctx));
  ci.kernel = "nope";
  cr_expect_eq(tile_compile_string(ctx, "vadd.ir", TEST_VADD_IR, strlen(TEST_VADD_IR), &ci, &bad),
               TILE_NOT_FOUND);
  cr_expect(contains(tile_errmsg(ctx), "nope"), "%s", tile_errmsg(ctx));
  ci.kernel = "vadd";
  cr_expect_eq(tile_compile_string(ctx, "vadd.ir", TEST_VADD_IR, strlen(TEST_VADD_IR), &ci, &bad), TILE_OK);
  tile_kernel_release(bad);
  tile_context_destroy(ctx);
}

/* ---- memory helpers, stats, bench ------------------------------------------------------- */

Test(api, mem_helpers_cpu) {
  tile_context *ctx = new_ctx();
  void *p = NULL;
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CPU, 1000, &p), TILE_OK, "%s", tile_errmsg(ctx));
  cr_assert_not_null(p);
  cr_expect_eq((uintptr_t)p % 16, 0, "allocations are at least 16-byte aligned");
  cr_assert_eq(tile_mem_fill(ctx, TILE_DEVICE_CPU, p, 0x5A, 1000), TILE_OK);
  unsigned char host[1000];
  memset(host, 0, sizeof host);
  cr_assert_eq(tile_mem_download(ctx, TILE_DEVICE_CPU, host, p, 1000), TILE_OK);
  for (int i = 0; i < 1000; i++)
    cr_assert_eq(host[i], 0x5A, "byte %d", i);
  for (int i = 0; i < 1000; i++)
    host[i] = (unsigned char)(i * 7);
  cr_assert_eq(tile_mem_upload(ctx, TILE_DEVICE_CPU, p, host, 1000), TILE_OK);
  unsigned char back[1000];
  cr_assert_eq(tile_mem_download(ctx, TILE_DEVICE_CPU, back, p, 1000), TILE_OK);
  cr_expect_eq(memcmp(host, back, 1000), 0);
  /* a partial fill touches only its bytes */
  cr_assert_eq(tile_mem_fill(ctx, TILE_DEVICE_CPU, (char *)p + 10, 0, 5), TILE_OK);
  cr_assert_eq(tile_mem_download(ctx, TILE_DEVICE_CPU, back, p, 1000), TILE_OK);
  for (int i = 0; i < 1000; i++)
    cr_expect_eq(back[i], i >= 10 && i < 15 ? 0 : host[i], "byte %d", i);
  /* zero bytes and NULL pointers */
  cr_expect_eq(tile_mem_upload(ctx, TILE_DEVICE_CPU, NULL, NULL, 0), TILE_OK);
  cr_expect_eq(tile_mem_upload(ctx, TILE_DEVICE_CPU, p, NULL, 4), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_mem_download(ctx, TILE_DEVICE_CPU, NULL, p, 4), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_mem_fill(ctx, TILE_DEVICE_CPU, NULL, 0, 4), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_mem_alloc(ctx, TILE_DEVICE_CPU, 8, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_mem_alloc(NULL, TILE_DEVICE_CPU, 8, &p), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_mem_alloc(ctx, (tile_device)7, 8, &p), TILE_INVALID_ARGUMENT);
  cr_expect(contains(tile_errmsg(ctx), "device"), "%s", tile_errmsg(ctx));
  cr_expect_eq(tile_synchronize(ctx, TILE_DEVICE_CPU), TILE_OK);
  tile_device_info info;
  cr_expect_eq(tile_device_query(ctx, TILE_DEVICE_CPU, &info), TILE_OK);
  cr_expect_gt(strlen(info.name), 0);
  cr_expect_eq(tile_device_query(ctx, TILE_DEVICE_CPU, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_mem_free(ctx, TILE_DEVICE_CPU, NULL), TILE_OK);

  /* device memory from the helpers works as kernel arguments */
  void *xb = NULL, *yb = NULL;
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CPU, 4 * 10, &xb), TILE_OK);
  cr_assert_eq(tile_mem_alloc(ctx, TILE_DEVICE_CPU, 4 * 10, &yb), TILE_OK);
  float xs[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  cr_assert_eq(tile_mem_upload(ctx, TILE_DEVICE_CPU, xb, xs, sizeof xs), TILE_OK);
  tile_kernel *k = compile_lib(ctx, "softmax.tile", NULL, NULL, 0);
  tile_arg args[] = {tile_arg_tensor(xb, TILE_F32, 2, (int64_t[]){2, 5}, NULL),
                     tile_arg_tensor(yb, TILE_F32, 2, (int64_t[]){2, 5}, NULL)};
  cr_assert_eq(tile_launch(ctx, k, args, 2, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  float ys[10], want[10];
  cr_assert_eq(tile_mem_download(ctx, TILE_DEVICE_CPU, ys, yb, sizeof ys), TILE_OK);
  ref_softmax(2, 5, xs, 0, want, 0);
  struct ref_cmp c = ref_compare(ys, want, 10, 1e-12, 2e-5);
  cr_expect_eq(c.n_bad, 0, "max_rel %g", c.max_rel);
  tile_kernel_release(k);
  cr_expect_eq(tile_mem_free(ctx, TILE_DEVICE_CPU, xb), TILE_OK);
  cr_expect_eq(tile_mem_free(ctx, TILE_DEVICE_CPU, yb), TILE_OK);
  cr_expect_eq(tile_mem_free(ctx, TILE_DEVICE_CPU, p), TILE_OK);
  tile_context_destroy(ctx);
}

Test(api, kernel_stats_cpu) {
  tile_context *ctx = new_ctx();
  tile_define d[] = {{"T", "f32"}, {"BM", "32"}, {"BN", "64"}};
  tile_kernel *k = compile_lib(ctx, "gemm.tile", "bmm", d, 3);
  enum { BATCH = 3, M = 70, N = 100, K = 5 };
  float *a = calloc(BATCH * M * K, 4), *b = calloc(BATCH * K * N, 4), *c = calloc(BATCH * M * N, 4);
  tile_arg args[] = {tile_arg_tensor(a, TILE_F32, 3, (int64_t[]){BATCH, M, K}, NULL),
                     tile_arg_tensor(b, TILE_F32, 3, (int64_t[]){BATCH, K, N}, NULL),
                     tile_arg_tensor(c, TILE_F32, 3, (int64_t[]){BATCH, M, N}, NULL)};
  cr_assert_eq(tile_launch(ctx, k, args, 3, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  tile_kernel_stats s;
  cr_assert_eq(tile_kernel_get_stats(k, &s), TILE_OK);
  cr_expect_eq(s.grid[0], 3, "cdiv(70, 32)");
  cr_expect_eq(s.grid[1], 2, "cdiv(100, 64)");
  cr_expect_eq(s.grid[2], BATCH);
  cr_expect_eq(s.registers, -1);
  cr_expect_eq(s.blocks_per_sm, -1, "no occupancy on the CPU");
  cr_expect_eq(s.multiprocessors, -1);
  cr_expect_eq(tile_kernel_get_stats(k, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_kernel_get_stats(NULL, &s), TILE_INVALID_ARGUMENT);
  /* tile_kernel_prepare is a no-op on the CPU but still checks the arguments */
  cr_expect_eq(tile_kernel_prepare(ctx, k, args, 3), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_eq(tile_kernel_prepare(ctx, k, args, 2), TILE_BAD_LAUNCH);
  free(a);
  free(b);
  free(c);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

Test(api, bench_cpu) {
  tile_context *ctx = new_ctx();
  tile_kernel *k = compile_lib(ctx, "rmsnorm.tile", NULL, (tile_define[]){{"BN", "64"}}, 1);
  enum { M = 16, N = 100 };
  float *x = malloc(4 * M * N), *w = malloc(4 * N), *y = malloc(4 * M * N), *rs = malloc(4 * M);
  for (int i = 0; i < M * N; i++)
    x[i] = (float)(i % 13) * 0.1f - 0.6f;
  for (int i = 0; i < N; i++)
    w[i] = 1.0f;
  tile_arg args[] = {tile_arg_tensor(x, TILE_F32, 2, (int64_t[]){M, N}, NULL),
                     tile_arg_tensor(w, TILE_F32, 1, (int64_t[]){N}, NULL),
                     tile_arg_tensor(y, TILE_F32, 2, (int64_t[]){M, N}, NULL),
                     tile_arg_tensor(rs, TILE_F32, 1, (int64_t[]){M}, NULL), tile_arg_float(1e-5)};
  tile_bench_options bo = {.warmup = 1, .reps = 5};
  tile_bench_result br;
  cr_assert_eq(tile_bench(ctx, k, args, 5, &bo, &br), TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect_gt(br.median_ms, 0.0);
  cr_expect_gt(br.min_ms, 0.0);
  cr_expect_leq(br.min_ms, br.median_ms);
  cr_expect_leq(br.min_ms, br.mean_ms);
  cr_expect_eq(br.reps, 5);
  /* the benchmarked kernel ran: Y is the normalized X */
  float want[M * N], want_r[M];
  ref_rmsnorm(M, N, x, w, 1e-5f, want, want_r);
  struct ref_cmp c = ref_compare(y, want, M * N, 2e-5, 2e-5);
  cr_expect_eq(c.n_bad, 0, "max_abs %g", c.max_abs);
  /* bad arguments are reported, not timed */
  memset(&br, 0xff, sizeof br);
  cr_expect_eq(tile_bench(ctx, k, args, 4, &bo, &br), TILE_BAD_LAUNCH);
  cr_expect(contains(tile_errmsg(ctx), "eps"), "%s", tile_errmsg(ctx));
  cr_expect_eq(br.reps, 0);
  cr_expect_eq(tile_bench(ctx, k, args, 5, &bo, NULL), TILE_INVALID_ARGUMENT);
  cr_expect_eq(tile_bench(ctx, NULL, args, 5, &bo, &br), TILE_INVALID_ARGUMENT);
  free(x);
  free(w);
  free(y);
  free(rs);
  tile_kernel_release(k);
  tile_context_destroy(ctx);
}

/* row-align (PERF.md 100) changes where a row's loops start, and with it which lanes hold
 * which elements and which lanes read fill; row-reverse (PERF.md 102) walks the output
 * loops from their last chunk: the golden IR before and after row-align, and after both,
 * run by the interpreter on the same ragged f16 rows (the tensors' host addresses, so
 * align_shift differs from row to row; X at an odd element past the allocation, Y too),
 * must agree with each other and with a float reference of the statistics. file is
 * relative to tests/golden/ir. */
static void run_rows_ir(tile_context *ctx, const char *file, int M, int N, uint16_t *x, uint16_t *w, uint16_t *b,
                        uint16_t *y, float *s1, float *s2) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/golden/ir/%s", test_source_dir(), file);
  char *src = read_text(path, NULL);
  cr_assert_not_null(src, "%s", path);
  tile_kernel *k = compile_src(ctx, file, src, TILE_SOURCE_IR);
  int64_t xs[2] = {M, N}, ws[1] = {N}, ms[1] = {M};
  tile_arg a[7];
  unsigned n = 0;
  a[n++] = tile_arg_tensor(x, TILE_F16, 2, xs, NULL);
  if (w) a[n++] = tile_arg_tensor(w, TILE_F16, 1, ws, NULL);
  if (b) a[n++] = tile_arg_tensor(b, TILE_F16, 1, ws, NULL);
  a[n++] = tile_arg_tensor(y, TILE_F16, 2, xs, NULL);
  if (s1) a[n++] = tile_arg_tensor(s1, TILE_F32, 1, ms, NULL);
  if (s2) a[n++] = tile_arg_tensor(s2, TILE_F32, 1, ms, NULL);
  if (w) a[n++] = tile_arg_float(1e-5f);
  cr_assert_eq(tile_launch(ctx, k, a, n, NULL), TILE_OK, "%s: %s", file, tile_errmsg(ctx));
  tile_kernel_release(k);
  free(src);
}

/* cluster-rows (PERF.md 103): the IR split across a cluster of 8 CTAs, run by the
 * interpreter (one host thread per rank, meeting at each cluster_reduce), against the IR
 * before the pass, on ragged f16 rows off 16 bytes that fit the 65536-wide tile (softmax's
 * rows shifted to their boundary and, at 65533, as written) and that take the loop. */
Test(api, cluster_split_rows_compute_what_the_kernel_does) {
  struct rng r;
  rng_seed(&r, rng_test_seed("api/cluster_split_rows_compute_what_the_kernel_does"));
  tile_context *ctx = new_ctx();
  static const char *const kinds[] = {"softmax", "rmsnorm"};
  static const int shapes[][2] = {{2, 50257}, {1, 65533}, {3, 7}, {1, 70001}};
  for (size_t kk = 0; kk < 2; kk++)
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
      int M = shapes[sh][0], N = shapes[sh][1];
      size_t e = (size_t)M * N;
      uint16_t *xa = calloc(e + 8, 2), *wv = calloc((size_t)N, 2), *y0 = calloc(e + 8, 2), *y1 = calloc(e + 8, 2);
      float s0[8], s1[8];
      cr_assert(xa && wv && y0 && y1 && M <= 8);
      uint16_t *x = xa + 1 + sh % 3;
      for (size_t i = 0; i < e; i++) x[i] = tl_f32_to_f16(rng_uniform(&r, -4, 4) + 2.0f);
      for (int i = 0; i < N; i++) wv[i] = tl_f32_to_f16(rng_uniform(&r, 0.5f, 1.5f));
      bool norm = kk == 1;
      char before[64], after[64];
      snprintf(before, sizeof before, "cluster-rows/%s_65536.ir", kinds[kk]);
      snprintf(after, sizeof after, "cluster-rows/%s_65536.out", kinds[kk]);
      run_rows_ir(ctx, before, M, N, x, norm ? wv : NULL, NULL, y0 + 3, norm ? s0 : NULL, NULL);
      run_rows_ir(ctx, after, M, N, x, norm ? wv : NULL, NULL, y1 + 3, norm ? s1 : NULL, NULL);
      double worst = 0, stat = 0;
      for (size_t i = 0; i < e; i++) {
        double a = tl_f16_to_f32(y0[3 + i]), b = tl_f16_to_f32(y1[3 + i]);
        /* (softmax's outputs near 1/N are f16 subnormals, whose steps are 6e-8: a floor) */
        worst = fmax(worst, fabs(a - b) / (fabs(a) + (norm ? 1e-3 : 3e-5)));
      }
      for (int i = 0; i < M && norm; i++) stat = fmax(stat, fabs(s0[i] - s1[i]) / s0[i]);
      cr_expect(worst <= 4e-3, "%s %dx%d: the cluster-split IR differs by %.3g (relative)", kinds[kk], M, N, worst);
      cr_expect(stat <= 1e-5, "%s %dx%d: Rstd differs by %.3g", kinds[kk], M, N, stat);
      free(xa), free(wv), free(y0), free(y1);
    }
  tile_context_destroy(ctx);
}

/* The row passes on kernels that are not lib's (tests/kernels/user_rows.tile: cross-entropy
 * and its gradient, add + RMSNorm with an i32 count, min-max scaling, a three-loop
 * log-softmax), as a user's launch specializes them for sm_90a: the IR in front of the row
 * passes (the passes off in the schedule, the IR after the first of them dumped), and that
 * IR after row-align, row-reverse and cluster-rows, must compute the same in the
 * interpreter on ragged f16 rows off 16 bytes, for the looped form (BN=256), the one-tile
 * form (BN=4096, 8 warps) and the cluster form (BN=65536, 16 warps: 8 CTAs), with rows
 * that fit the tile and rows that take the loop. Each form must have been changed by the
 * passes (else the comparison proves nothing). */
struct dump_keep {
  char *ir;
};

static void keep_first_dump(void *ud, const char *title, const char *text) {
  struct dump_keep *d = ud;
  (void)title;
  if (!d->ir) d->ir = strdup(text);
}

/* the IR in front of the row passes, without its schedule, for `kernel` at BN, NW */
static char *ir_before_row_passes(tile_context *ctx, const char *src, const char *kernel, const char *bn,
                                  const char *nw) {
  tile_define d[] = {{"T", "f16"}, {"BN", bn}, {"NW", nw}};
  tile_compile_options co = {.device = TILE_DEVICE_CUDA, .arch = "sm_90a", .kernel = kernel, .defines = d,
                             .ndefines = 3, .flags = TILE_NO_CACHE, .schedule = "rowalign=0,rowrev=0,cluster=1"};
  struct dump_keep keep = {0};
  tile_emit_options eo = {.what = TILE_EMIT_PTX, .dump_after = "row-align", .report = keep_first_dump,
                          .report_ud = &keep, .assume_unaligned = 1};
  char *ptx = NULL;
  tile_status st = tile_emit(ctx, "user_rows.tile", src, strlen(src), &co, &eo, &ptx, NULL);
  cr_assert_eq(st, TILE_OK, "%s BN=%s: %s", kernel, bn, tile_errmsg(ctx));
  tile_free(ptx);
  cr_assert_not_null(keep.ir);
  char *ir = strstr(keep.ir, "kernel @"), *sched = ir ? strstr(ir, " sched(") : NULL, *close = sched ? strchr(sched, ')') : NULL;
  cr_assert(ir && sched && close && !memchr(ir, '\n', (size_t)(sched - ir)), "%s", keep.ir);
  memmove(sched, close + 1, strlen(close + 1) + 1);
  char *out = strdup(ir);
  free(keep.ir);
  return out;
}

static char *run_row_passes(tile_context *ctx, const char *ir) {
  tile_compile_options co = {.device = TILE_DEVICE_CUDA, .arch = "sm_90a", .flags = TILE_NO_CACHE | TILE_VERIFY_EACH};
  tile_emit_options eo = {.what = TILE_EMIT_IR, .input_is_ir = 1, .passes = "row-align,row-reverse,cluster-rows"};
  char *out = NULL;
  tile_status st = tile_emit(ctx, "rows.ir", ir, strlen(ir), &co, &eo, &out, NULL);
  cr_assert_eq(st, TILE_OK, "%s\n%s", tile_errmsg(ctx), ir);
  char *copy = strdup(out);
  tile_free(out);
  return copy;
}

struct row_out {
  uint16_t *ya, *y;
  float s[4];
  int32_t c[4];
};

static void run_user_rows(tile_context *ctx, const char *ir, int M, int N, const uint16_t *x, const uint16_t *res,
                          const uint16_t *w, const int32_t *tgt, struct row_out *o) {
  tile_kernel *k = compile_src(ctx, "rows.ir", ir, TILE_SOURCE_IR);
  size_t e = (size_t)M * N;
  for (size_t i = 0; i < e; i++) o->y[i] = 0x7e00; /* a NaN where nothing is written */
  for (int i = 0; i < M; i++) o->s[i] = -1.0f, o->c[i] = -1;
  int64_t xs[2] = {M, N}, ws[1] = {N}, ms[1] = {M};
  tile_arg a[] = {tile_arg_tensor((void *)x, TILE_F16, 2, xs, NULL), tile_arg_tensor((void *)res, TILE_F16, 2, xs, NULL),
                  tile_arg_tensor((void *)w, TILE_F16, 1, ws, NULL), tile_arg_tensor((void *)tgt, TILE_I32, 1, ms, NULL),
                  tile_arg_tensor(o->y, TILE_F16, 2, xs, NULL),  tile_arg_tensor(o->s, TILE_F32, 1, ms, NULL),
                  tile_arg_tensor(o->c, TILE_I32, 1, ms, NULL),  tile_arg_float(1e-5f)};
  cr_assert_eq(tile_launch(ctx, k, a, 8, NULL), TILE_OK, "%s", tile_errmsg(ctx));
  tile_kernel_release(k);
}

Test(api, user_row_kernels_through_the_row_passes) {
  struct rng r;
  rng_seed(&r, rng_test_seed("api/user_row_kernels_through_the_row_passes"));
  tile_context *ctx = new_ctx();
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/kernels/user_rows.tile", test_source_dir());
  char *src = read_text(path, NULL);
  cr_assert_not_null(src, "%s", path);
  static const char *const kernels[] = {"xent", "addnorm", "minmax", "logsoftmax"};
  static const struct {
    const char *bn, *nw, *mark; /* mark: in the passes' output */
    int n[4];                   /* row lengths: some fit the tile, some take the loop */
  } forms[] = {{"256", "4", "align_shift", {1, 33, 300, 4095}},
               {"4096", "8", "align_shift", {7, 2049, 4095, 5001}},
               {"65536", "16", "cluster=8", {7, 50257, 65533, 70001}}};
  for (size_t kk = 0; kk < sizeof kernels / sizeof kernels[0]; kk++)
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
      char *before = ir_before_row_passes(ctx, src, kernels[kk], forms[f].bn, forms[f].nw);
      char *after = run_row_passes(ctx, before);
      cr_expect(strstr(after, forms[f].mark) && !strstr(before, forms[f].mark), "%s BN=%s: no %s after the passes",
                kernels[kk], forms[f].bn, forms[f].mark);
      for (int sh = 0; sh < 4; sh++) {
        int M = f == 2 ? 2 : 3, N = forms[f].n[sh];
        size_t e = (size_t)M * N;
        uint16_t *xa = calloc(e + 8, 2), *ra = calloc(e + 8, 2), *w = calloc((size_t)N, 2);
        int32_t tgt[4];
        struct row_out o[2];
        cr_assert(xa && ra && w);
        for (int v = 0; v < 2; v++) {
          cr_assert((o[v].ya = calloc(e + 8, 2)) != NULL);
          o[v].y = o[v].ya + 3; /* off 16 bytes, as X and R */
        }
        uint16_t *x = xa + 1 + sh % 3, *res = ra + 2 - sh % 2;
        for (size_t i = 0; i < e; i++)
          x[i] = tl_f32_to_f16(rng_uniform(&r, -4, 4) + 1.0f), res[i] = tl_f32_to_f16(rng_uniform(&r, -1, 1));
        for (int i = 0; i < N; i++) w[i] = tl_f32_to_f16(rng_uniform(&r, 0.5f, 1.5f));
        for (int i = 0; i < M; i++) tgt[i] = (int32_t)rng_below(&r, (uint64_t)N);
        run_user_rows(ctx, before, M, N, x, res, w, tgt, &o[0]);
        run_user_rows(ctx, after, M, N, x, res, w, tgt, &o[1]);
        double worst = 0, stat = 0;
        size_t unwritten = 0;
        for (size_t i = 0; i < e; i++) {
          double a = tl_f16_to_f32(o[0].y[i]), b = tl_f16_to_f32(o[1].y[i]);
          unwritten += a != a;
          if (a != a || b != b) worst = (a != a) == (b != b) ? worst : INFINITY;
          else worst = fmax(worst, fabs(a - b) / fmax(fabs(a), 1e-2));
        }
        for (int i = 0; i < M; i++) {
          stat = fmax(stat, fabs((double)o[0].s[i] - o[1].s[i]) / fmax(fabs((double)o[0].s[i]), 1e-3));
          cr_expect_eq(o[0].c[i], o[1].c[i], "%s BN=%s %dx%d row %d: count %d, after the passes %d", kernels[kk],
                       forms[f].bn, M, N, i, o[0].c[i], o[1].c[i]);
        }
        /* the kernels write every element of Y (addnorm, minmax, logsoftmax, xent) */
        cr_expect_eq(unwritten, 0, "%s BN=%s %dx%d: %zu elements of Y unwritten", kernels[kk], forms[f].bn, M, N,
                     unwritten);
        /* f16 outputs: an ulp or two where the summation order changed (2^-10 each) */
        cr_expect(worst <= 4e-3, "%s BN=%s %dx%d: Y after the passes differs by %.3g (relative)", kernels[kk],
                  forms[f].bn, M, N, worst);
        cr_expect(stat <= 1e-4, "%s BN=%s %dx%d: S after the passes differs by %.3g", kernels[kk], forms[f].bn, M, N,
                  stat);
        free(xa), free(ra), free(w), free(o[0].ya), free(o[1].ya);
      }
      free(before), free(after);
    }
  free(src);
  tile_context_destroy(ctx);
}

Test(api, row_aligned_ir_computes_what_the_kernel_does) {
  struct rng r;
  rng_seed(&r, rng_test_seed("api/row_aligned_ir_computes_what_the_kernel_does"));
  tile_context *ctx = new_ctx();
  static const char *const kinds[] = {"softmax", "rmsnorm", "layernorm"};
  static const int shapes[][2] = {{3, 1025}, {5, 3001}, {2, 4095}, {1, 2049}};
  for (size_t kk = 0; kk < 3; kk++)
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
      int M = shapes[sh][0], N = shapes[sh][1];
      size_t e = (size_t)M * N;
      uint16_t *xa = calloc(e + 8, 2), *wv = calloc((size_t)N, 2), *bv = calloc((size_t)N, 2);
      enum { NF = 6 };
      uint16_t *ya[NF], *y[NF];
      float s[2 * NF][64];
      cr_assert(xa && wv && bv && M <= 64);
      for (int v = 0; v < NF; v++) {
        cr_assert((ya[v] = calloc(e + 8, 2)) != NULL);
        y[v] = ya[v] + 3; /* off the allocations' 16 bytes */
      }
      uint16_t *x = xa + 1 + sh % 3;
      for (size_t i = 0; i < e; i++) x[i] = tl_f32_to_f16(rng_uniform(&r, -4, 4) + 2.0f);
      for (int i = 0; i < N; i++) wv[i] = tl_f32_to_f16(rng_uniform(&r, 0.5f, 1.5f)), bv[i] = tl_f32_to_f16(rng_uniform(&r, -1, 1));
      bool norm = kk > 0, ln = kk == 2;
      /* BN=1024 (N > BN: the loops) before and after row-align and row-reverse; BN=4096 (the
       * one-tile branch, shifted where N + p <= 4096: at 4095 only for p <= 1); the loops with
       * the weights as shifted vectors (layernorm: by default beside a long row cache, PERF.md
       * 119; rmsnorm: shift=1; softmax has none, its aligned loops again) */
      static const char *const dirs[] = {"row-align", "row-align", "row-reverse", "row-align", "row-align", "row-align"},
                               *const forms_of[] = {"unaligned.ir", "unaligned.out", "unaligned.out", "onetile.ir",
                                                    "onetile.out", NULL},
                               *const shifted_of[] = {"unaligned.out", "shift_on.out", "long_cache.out"};
      char forms[NF][64];
      for (int v = 0; v < NF; v++) {
        snprintf(forms[v], sizeof forms[v], "%s/%s_%s", dirs[v], kinds[kk], forms_of[v] ? forms_of[v] : shifted_of[kk]);
        run_rows_ir(ctx, forms[v], M, N, x, norm ? wv : NULL, ln ? bv : NULL, y[v], norm ? s[2 * v] : NULL,
                    ln ? s[2 * v + 1] : NULL);
      }
      for (int v = 1; v < NF; v++) {
        double worst = 0, stat = 0;
        for (size_t i = 0; i < e; i++) {
          double d = fabs((double)tl_f16_to_f32(y[0][i]) - tl_f16_to_f32(y[v][i]));
          double m = fmax(fabs((double)tl_f16_to_f32(y[0][i])), 1e-3);
          if (d / m > worst) worst = d / m;
        }
        for (int i = 0; i < M && norm; i++) { /* the statistics against a float reference of the row */
          double sum = 0, sq = 0;
          for (int j = 0; j < N; j++) {
            double xv = tl_f16_to_f32(x[(size_t)i * N + j]);
            sum += xv, sq += xv * xv;
          }
          double mean = sum / N, var = sq / N - mean * mean;
          double rstd = ln ? 1 / sqrt(var + 1e-5) : 1 / sqrt(sq / N + 1e-5);
          double got = ln ? s[2 * v + 1][i] : s[2 * v][i];
          stat = fmax(stat, fabs(got - rstd) / rstd);
          if (ln) stat = fmax(stat, fabs(s[2 * v][i] - mean) / fmax(fabs(mean), 1.0));
        }
        /* f16 outputs: an ulp or two where the summation order changed (2^-10 each) */
        cr_expect(worst <= 4e-3, "%s %dx%d: %s differs by %.3g (relative)", kinds[kk], M, N, forms[v], worst);
        cr_expect(stat <= 1e-4, "%s %dx%d: %s: statistics off by %.3g", kinds[kk], M, N, forms[v], stat);
      }
      free(xa), free(wv), free(bv);
      for (int v = 0; v < NF; v++) free(ya[v]);
    }
  /* a user kernel whose one-tile row masks with arange(BN) < N (row-align moves the column
   * indices with the lanes: without the clamp of the lanes in front, they would count in
   * its variance) */
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
    int M = shapes[sh][0], N = shapes[sh][1];
    size_t e = (size_t)M * N;
    uint16_t *xa = calloc(e + 8, 2), *y0 = calloc(e + 8, 2), *y1 = calloc(e + 8, 2);
    cr_assert(xa && y0 && y1);
    uint16_t *x = xa + 1 + sh % 3; /* rows far from zero: a lane in front counted would show */
    for (size_t i = 0; i < e; i++) x[i] = tl_f32_to_f16(rng_uniform(&r, -1, 1) + 20.0f);
    run_rows_ir(ctx, "row-align/center_onetile.ir", M, N, x, NULL, NULL, y0 + 3, NULL, NULL);
    run_rows_ir(ctx, "row-align/center_onetile.out", M, N, x, NULL, NULL, y1 + 3, NULL, NULL);
    double worst = 0;
    for (size_t i = 0; i < e; i++) {
      double a = tl_f16_to_f32(y0[3 + i]), b = tl_f16_to_f32(y1[3 + i]);
      worst = fmax(worst, fabs(a - b) / fmax(fabs(a), 1e-2));
    }
    cr_expect(worst <= 4e-3, "center %dx%d: the shifted one-tile row differs by %.3g (relative)", M, N, worst);
    free(xa), free(y0), free(y1);
  }
  tile_context_destroy(ctx);
}
