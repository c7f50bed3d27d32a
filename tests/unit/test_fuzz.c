/* test_fuzz.c - regression tests of the defects the fuzzers found (tests/fuzz), one test
 * each, named after what was wrong. Inputs are handed over in buffers of exactly their
 * length, with no terminating NUL, as libFuzzer hands them, so that a read past the end
 * shows under AddressSanitizer (CI's sanitizer leg). The reproducers are in the fuzz
 * corpora too. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "passes.h"
#include "testfiles.h"
#include "tile.h"

#include "fixture.h"

/* Parses text from an unterminated copy; returns the module's only kernel, or NULL on a parse
 * error (the message in fx->err). */
static struct ir_func *parse_exact(struct fixture *fx, const char *text) {
  size_t n = strlen(text);
  char *copy = malloc(n ? n : 1);
  cr_assert(copy);
  memcpy(copy, text, n);
  struct ir_module m;
  bool ok = ir_parse("fuzz.ir", copy, n, &fx->a, &fx->s, &m, &fx->err);
  free(copy);
  if (!ok) return NULL;
  cr_assert_eq(m.funcs.n, 1);
  return m.funcs.v[0];
}

static const char *print(struct fixture *fx, const struct ir_func *f) {
  struct strbuf sb;
  sb_init(&sb, &fx->a);
  ir_print_func(&sb, f, 0);
  return sb_str(&sb);
}

#define HEAD "kernel @k() warps=4 {\ngrid:\n  %0 = const 1 : i32\n  grid %0, %0, %0\nbody:\n"
#define KERNEL(body) HEAD body "}\n"

/* ir_parse converted every float literal of a `const` to int64 first, also -inf of an f32
 * constant (undefined behaviour, reported by UBSan on tilec's own output for attention).
 * Float constants keep their value; an integer constant written as a float must be a whole
 * number in range. */
Test(fuzz, ir_const_float_literal_to_int) {
  struct fixture fx;
  fx_init(&fx);
  const char *ok_text = KERNEL("  %1 = const -inf : f32\n  %2 = const nan : tile<4xf16>\n  %3 = const 1e+300 : f64\n");
  struct ir_func *f = parse_exact(&fx, ok_text);
  cr_assert(f, "%s", sb_str(&fx.err));
  cr_assert(ir_verify(f, NULL, &fx.err), "%s", sb_str(&fx.err));
  cr_assert_str_eq(print(&fx, f), ok_text);

  f = parse_exact(&fx, KERNEL("  %1 = const 2.0 : i32\n"));
  cr_assert(f, "%s", sb_str(&fx.err));
  cr_assert(strstr(print(&fx, f), "const 2 : i32"), "%s", print(&fx, f));

  const char *bad[] = {"inf : i32", "-inf : i32", "nan : i64", "1e300 : i32", "9.3e18 : i64", "1.5 : i32",
                       "-0.25 : tile<2xi32>"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "%s  %%1 = const %s\n}\n", HEAD, bad[i]);
    sb_init(&fx.err, &fx.a);
    cr_assert_null(parse_exact(&fx, text), "accepted: const %s", bad[i]);
    cr_assert(strstr(sb_str(&fx.err), "is not an integer of type"), "%s", sb_str(&fx.err));
  }
  arena_free(&fx.a);
}

/* parse_tile_type read a tile dimension with strtol, which reads on past the end of text that
 * is not NUL-terminated (ASan: heap-buffer-overflow on input ending in "tile<6"). */
Test(fuzz, ir_tile_dimension_at_end_of_input) {
  struct fixture fx;
  fx_init(&fx);
  cr_assert_null(parse_exact(&fx, HEAD "  %1 = const 1.0 : tile<6"));
  cr_assert(strstr(sb_str(&fx.err), "expected 'x' in tile type"), "%s", sb_str(&fx.err));
  sb_init(&fx.err, &fx.a);
  cr_assert_null(parse_exact(&fx, HEAD "  %1 = const 1.0 : tile<99999999999999999999999x4xf32>\n}\n"));
  cr_assert(strstr(sb_str(&fx.err), "bad tile dimension 99999999999999999999999"), "%s", sb_str(&fx.err));
  sb_init(&fx.err, &fx.a);
  cr_assert_null(parse_exact(&fx, HEAD "  %1 = const 1.0 : tile<0x4xf32>\n}\n"));
  cr_assert(strstr(sb_str(&fx.err), "bad tile dimension 0"), "%s", sb_str(&fx.err));
  struct ir_func *f = parse_exact(&fx, KERNEL("  %1 = const 1.0 : tile<16777216xf32>\n"));
  cr_assert(f, "%s", sb_str(&fx.err));
  arena_free(&fx.a);
}

/* The verifier judged slot and phase operands only when written as `const`; fold and
 * canonicalize make more operands constant, so an out-of-range slot `mul %one, %c32`
 * passed the verifier and failed it after folding ("internal compiler error" on accepted
 * input; fuzz_ir). The verifier now judges the value an operand folds to: such input is
 * refused up front (tests/golden/ir-invalid/folded_*.ir), and in-range folded operands pass
 * the generic pipeline with the verifier after every pass. */
Test(fuzz, ir_verifier_judges_folded_constants) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/golden/ir-invalid/valid_base.ir", test_source_dir());
  char *base = test_read_file(path, NULL);
  cr_assert(base, "cannot read %s", path);
  /* tma_load's slot and the consumer's phase through mul, select, if and cast */
  const char *edits[][2] = {
      {"  %4 = local_alloc", "  %11 = mul %2, %2 : i32\n  %12 = const true : bool\n  %13 = select %12, %1, %3 : i32\n"
                             "  %14 = if %12 -> (i32) {\n    yield %2\n  } else {\n    yield %3\n  }\n"
                             "  %15 = const 1.0 : f32\n  %16 = cast %15 : i32\n  %4 = local_alloc"},
      {"tma_load %4, %1,", "tma_load %4, %11,"},
      {"mbar_wait %5, %1, %1", "mbar_wait %5, %14, %13"},
      {"mbar_wait %6, %1, %2", "mbar_wait %6, %1, %16"},
  };
  char text[8192];
  snprintf(text, sizeof text, "%s", base);
  free(base);
  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
    char *at = strstr(text, edits[i][0]);
    cr_assert(at, "valid_base.ir lacks '%s'", edits[i][0]);
    char rest[8192];
    snprintf(rest, sizeof rest, "%s", at + strlen(edits[i][0]));
    snprintf(at, sizeof text - (size_t)(at - text), "%s%s", edits[i][1], rest);
  }
  struct fixture fx;
  fx_init(&fx);
  struct ir_func *f = parse_exact(&fx, text);
  cr_assert(f, "%s", sb_str(&fx.err));
  cr_assert(ir_verify(f, NULL, &fx.err), "%s", sb_str(&fx.err));
  struct pass_options po = {.verify_each = true};
  cr_assert(pass_pipeline_generic(f, &po, &fx.err), "%s", sb_str(&fx.err));
  arena_free(&fx.a);
}

/* ir_parse recursed once per nested region without a limit: IR with 200000 nested `if`s
 * overflowed the stack (a segfault in tilec opt, or in a program compiling IR text through
 * the API). Regions may now nest 512 deep; deeper is a parse error. */
static char *nested_ifs(int n) {
  static const char head[] = "kernel @k() warps=4 {\ngrid:\n  %0 = const 1 : i32\n  grid %0, %0, %0\nbody:\n"
                             "  %c = const true : bool\n";
  size_t cap = sizeof head + (size_t)n * 24 + 8;
  char *s = malloc(cap), *p = s;
  p += sprintf(p, "%s", head);
  for (int i = 0; i < n; i++) p += sprintf(p, "if %%c{");
  for (int i = 0; i < n; i++) p += sprintf(p, "yield}else{yield}");
  sprintf(p, "}\n");
  return s;
}

Test(fuzz, ir_nesting_depth_is_bounded) {
  struct fixture fx;
  fx_init(&fx);
  char *deep = nested_ifs(200000);
  cr_assert_null(parse_exact(&fx, deep));
  cr_assert(strstr(sb_str(&fx.err), "nested too deeply"), "%s", sb_str(&fx.err));
  free(deep);
  char *ok = nested_ifs(511); /* with the body: 512 levels */
  struct ir_func *f = parse_exact(&fx, ok);
  cr_assert(f, "%s", sb_str(&fx.err));
  cr_assert(ir_verify(f, NULL, &fx.err), "%s", sb_str(&fx.err));
  struct pass_options po = {.verify_each = true};
  cr_assert(pass_pipeline_generic(f, &po, &fx.err), "%s", sb_str(&fx.err));
  free(ok);
  arena_free(&fx.a);
}

/* Compiles src to PTX for both GPU tiers (sm_80 and sm_90a) in a fresh context, with
 * compile flags `flags`, and expects each to succeed and contain `needle`. */
static void expect_ptx_on_both_tiers(const char *name, const char *src, unsigned flags, const char *needle) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int a = 0; a < 2; a++) {
    char *out = NULL;
    tile_status st = test_emit_ptx(ctx, name, src, archs[a], flags, &out);
    cr_expect_eq(st, TILE_OK, "%s on %s: %s: %s", src, archs[a], tile_status_name(st), tile_errmsg(ctx));
    cr_expect(out && strstr(out, needle), "%s on %s: no '%s' in the PTX", src, archs[a], needle);
    tile_free(out);
  }
  tile_context_destroy(ctx);
}

/* fp8 tensors compiled for CUDA: codegen lowered the conversions to and from f8e4m3 and
 * f8e5m2 (stored as i8) with fptrunc/fpext, an invalid LLVM module: "internal compiler
 * error" (fuzz_pipeline: layernorm with an f8e5m2 output). Both tiers now convert in
 * software (tests/host/fp8_codegen.c checks the conversions against the interpreter's). */
Test(fuzz, cuda_fp8_conversions_compile) {
  expect_ptx_on_both_tiers("k.tile", "kernel k(X: f32[N], Y: out f8e5m2[N]) grid(1) { Y[0 : +32] = X[0 : +32]; }\n", 0,
                           ".entry");
  expect_ptx_on_both_tiers("k.tile", "kernel k(X: f8e4m3[N], Y: out f32[N]) grid(1) { Y[0] = f32(X[0]); }\n", 0,
                           ".entry");
  expect_ptx_on_both_tiers(
      "k.tile", "kernel k(X: f8e4m3[N], Y: out f8e5m2[N]) grid(1) { Y[0 : +64] = f16(X[0 : +64]) * 2.0; }\n", 0,
      ".entry");
}

/* Two async wgmma accumulators of 256x256 f32 on 4 warps are 1024 registers per thread in
 * one wgmma_wait; codegen refused more than 512 in its asm statement, an "internal compiler
 * error" (fuzz_pipeline: swiglu with BM=BN=256, NW=4 on sm_90a). The wait now goes through
 * several asm statements of at most 512 registers. */
Test(fuzz, wgmma_wait_over_1024_registers) {
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  const char *src =
      "kernel k(X: f16[M, K], W1: f16[N, K], W3: f16[N, K], Y: out f16[M, N]) grid(cdiv(M, 256), cdiv(N, 256)) warps(4) {\n"
      "  let m0 = program_id(0) * 256;\n"
      "  let n0 = program_id(1) * 256;\n"
      "  var gate = zeros([256, 256], f32);\n"
      "  var up = zeros([256, 256], f32);\n"
      "  for k in range(0, K, 32, stages=2) {\n"
      "    let x = X[m0 : +256, k : +32];\n"
      "    gate += x @ W1[n0 : +256, k : +32].T;\n"
      "    up += x @ W3[n0 : +256, k : +32].T;\n"
      "  }\n"
      "  Y[m0 : +256, n0 : +256] = silu(gate) * up;\n"
      "}\n";
  tile_compile_options co = {.device = TILE_DEVICE_CUDA, .arch = "sm_90a", .schedule = "persistent=0"};
  tile_emit_options eo = {.what = TILE_EMIT_PTX};
  char *out = NULL;
  tile_status st = tile_emit(ctx, "k.tile", src, strlen(src), &co, &eo, &out, NULL);
  cr_assert_eq(st, TILE_OK, "%s: %s", tile_status_name(st), tile_errmsg(ctx));
  cr_expect(strstr(out, "wgmma.wait_group"), "no wgmma wait in the PTX");
  tile_free(out);
  tile_context_destroy(ctx);
}

/* GPU IR of a cluster kernel (cluster=8, sm_90a) emitted for sm_80 reached codegen, whose
 * cluster registers LLVM cannot select for sm_80: LLVM aborted the process (fuzz_ir_ptx,
 * twenty-seventh session). GPU lowering now refuses cluster=C on a target without clusters
 * (an error naming it, not an internal one; the verifier too), and the same IR still
 * compiles for sm_90a. */
Test(fuzz, cluster_ir_for_a_target_without_clusters) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/golden/ir/cluster-rows/rmsnorm_65536.out", test_source_dir());
  char *src = test_read_file(path, NULL);
  cr_assert(src, "cannot read %s", path);
  tile_context *ctx = NULL;
  tile_context_options o = {.cache_dir = ""};
  cr_assert_eq(tile_context_create(&o, &ctx), TILE_OK);
  tile_emit_options eo = {.what = TILE_EMIT_PTX, .input_is_ir = 1};
  char *out = NULL;
  tile_compile_options co = {.device = TILE_DEVICE_CUDA, .arch = "sm_80"};
  tile_status st = tile_emit(ctx, "rmsnorm.ir", src, strlen(src), &co, &eo, &out, NULL);
  cr_expect(st != TILE_OK && st != TILE_INTERNAL, "cluster IR for sm_80: %s (%s)", tile_status_name(st), tile_errmsg(ctx));
  cr_expect(strstr(tile_errmsg(ctx), "cluster") != NULL, "%s", tile_errmsg(ctx));
  tile_free(out);
  out = NULL;
  co.arch = "sm_90a";
  st = tile_emit(ctx, "rmsnorm.ir", src, strlen(src), &co, &eo, &out, NULL);
  cr_expect_eq(st, TILE_OK, "%s", tile_errmsg(ctx));
  cr_expect(out && strstr(out, ".reqnctapercluster 8"), "no cluster in the sm_90a PTX");
  tile_free(out);
  tile_context_destroy(ctx);
  free(src);
}

/* A vector load of 64-bit elements (two i64 per thread: 128 bits) was split into 32-bit
 * words holding half an element each, and no register of the tile was set: codegen then
 * built a conversion of a null value and crashed inside LLVM (CI's fuzz_pipeline run, an
 * i64 tensor loaded in a loop). Now one ld.global.v2.b64. */
Test(fuzz, i64_vector_load_in_loop) {
  const char *src = "kernel k(B: i64[M, N], Y: out f32[M, N]) grid(M) warps(1) {\n"
                    "  let row = program_id(0);\n"
                    "  for c in range(0, N, 64) {\n"
                    "    Y[row, c : +64] = f32(load(B[row, c : +64], fill=0)) + f16(B[row, c : +64]);\n"
                    "  }\n"
                    "}\n";
  expect_ptx_on_both_tiers("k.tile", src, 0, "ld.global.v2.b64"); /* one 128-bit load of two i64 */
}

/* An accumulator carried through two nested loops (the shape of every group-quantized GEMM)
 * was an internal error on both GPU tiers: the layout pass let the outer loop wait for the
 * inner loop's result and the inner loop wait for the outer loop's block argument, so the
 * carried values kept no layout ("carried value changes type", issue 16). The inner body's
 * dot now decides for both. */
Test(fuzz, accumulator_through_two_nested_loops) {
  const char *src = "kernel g2(A: f16[M, K], B: i8[K, N], S: f16[KG, N], C: out f16[M, N])\n"
                    "  grid(cdiv(M, 64), cdiv(N, 64)) {\n"
                    "  let m0 = program_id(0) * 64;\n"
                    "  let n0 = program_id(1) * 64;\n"
                    "  var acc = zeros([64, 64], f32);\n"
                    "  for g in range(0, K, 128) {\n"
                    "    let s = S[g / 128, n0 : +64];\n"
                    "    for k in range(g, g + 128, 32) {\n"
                    "      acc += A[m0 : +64, k : +32] @ (f16(B[k : +32, n0 : +64]) * s);\n"
                    "    }\n"
                    "  }\n"
                    "  C[m0 : +64, n0 : +64] = f16(acc);\n"
                    "}\n";
  expect_ptx_on_both_tiers("g2.tile", src, TILE_VERIFY_EACH, "mma"); /* the dot on the Tensor Cores */
}
